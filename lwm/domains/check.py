"""``lwm check-env``: small named checks of a domain's real environment, after
Gymnasium's ``check_env`` — what everything else in ``lwm`` assumes of an environment,
tried once on its own suite, so that a new domain (docs/adding-a-domain.md) fails here
with a named reason rather than deep inside a collection or a training run.

Each check is ``pass``, ``fail`` or ``warn`` (allowed, but worth knowing: a real
environment whose observations differ between two identical episodes, which the data
pipeline then has to mask as volatile) or ``skip`` (nothing to try it on).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from lwm.domains.base import Domain
from lwm.envs.base import StepResult
from lwm.envs.episode import Script
from lwm.errors import EnvironmentClosedError

Status = Literal["pass", "fail", "warn", "skip"]

#: Texts tried, in order, as a malformed action: the first one the domain's parser refuses.
MALFORMED = ("", "\x00", "}{ not an action", "DROP", "not an action;", "[[[")


@dataclass(frozen=True)
class EnvCheck:
    """One check's outcome: its name, ``status`` and what was found."""

    name: str
    status: Status
    detail: str = ""


def check_env(domain: Domain, script: Script | None = None) -> list[EnvCheck]:
    """Run every check on ``domain``'s real environment, each on a fresh environment.

    Args:
        domain: the domain (``lwm.domains.get(name)``).
        script: the episode to play (default: the first of the domain's suite).

    Returns:
        the checks, in order; a check that raised is a ``fail`` with the exception.

    Raises:
        NoRealEnvironmentError: the domain has no real environment (import only).
        ValueError: its suite cannot be read or holds no core script.
    """
    if domain.import_only is not None:
        domain.make_env()  # raises NoRealEnvironmentError, saying why
    if script is None:
        try:
            scripts = domain.scripts()
        except Exception as e:  # noqa: BLE001 - a suite still being written: said in one line
            raise ValueError(f"domain {domain.name!r}: its suite cannot be read: {type(e).__name__}: {e}") from e
        if not scripts:
            raise ValueError(f"domain {domain.name!r}: its suite has no core script to play")
        script = scripts[0]
    out: list[EnvCheck] = []
    for name, check in _CHECKS:
        try:
            status, detail = check(domain, script)
        except Exception as e:  # noqa: BLE001 - a check that raised is what the user must see
            status, detail = "fail", f"{type(e).__name__}: {e} ({_where(e)})"
        out.append(EnvCheck(name, status, detail))
    return out


def _where(e: Exception) -> str:
    frame = traceback.extract_tb(e.__traceback__)[-1]
    return f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"


def _play(domain: Domain, script: Script) -> tuple[str, list[StepResult], float | None]:
    env = domain.make_env()
    try:
        first = env.reset(script.task)
        results = [env.step(a) for a in script.actions]
        return first, results, env.verify()
    finally:
        env.close()


def _construct(domain: Domain, script: Script) -> tuple[Status, str]:
    domain.make_env().close()
    return "pass", "make_env() and close() without an episode"


def _reset(domain: Domain, script: Script) -> tuple[Status, str]:
    env = domain.make_env()
    try:
        first = env.reset(script.task)
        prompt = env.system_prompt()
    finally:
        env.close()
    if not isinstance(first, str):
        return "fail", f"reset() returned {type(first).__name__}, not the first observation as text"
    if not isinstance(prompt, str) or not prompt.strip():
        return "fail", f"system_prompt() returned {prompt!r:.60}: the world model's system prompt is needed"
    return "pass", f"first observation: {len(first)} characters"


def _steps(domain: Domain, script: Script) -> tuple[Status, str]:
    _, results, verdict = _play(domain, script)
    for i, r in enumerate(results, 1):
        if not isinstance(r, StepResult):
            return "fail", f"step {i} returned {type(r).__name__}, not a StepResult"
        if not isinstance(r.observation, str) or not isinstance(r.done, bool) or not isinstance(r.info, dict):
            return "fail", (f"step {i}: observation {type(r.observation).__name__}, done {type(r.done).__name__}, "
                            f"info {type(r.info).__name__} (want str, bool, dict)")
    if verdict is not None and (isinstance(verdict, bool) or not isinstance(verdict, (int, float))
                                or not 0.0 <= verdict <= 1.0):
        return "fail", f"verify() returned {verdict!r}: a verdict is None or a number in [0, 1]"
    return "pass", f"{len(results)} steps of {script.task.name}; verify() = {verdict}"


def _malformed(domain: Domain, script: Script) -> tuple[Status, str]:
    from lwm.envs.recorded import RealBackendEnv

    action = next((a for a in MALFORMED if not domain.accepts(a)), None)
    if action is None:
        return "skip", "the action parser takes every text tried"
    env = RealBackendEnv(domain.name, domain.make_env())  # the real backend, as every lwm job plays it
    try:
        previous = env.reset(script.task)
        result = env.step(action)
    finally:
        env.close()
    expected = domain.refusal(action, previous)
    if expected is None:  # invalid_answer says the environment takes it anyway
        return "skip", "the domain takes malformed actions as they are (Domain.invalid_answer gives no refusal)"
    if not result.info.get("action_error"):
        return "fail", f"step({action!r}) answered without info['action_error'] (the parser refuses it)"
    if result.observation != expected.observation:
        return "fail", (f"step({action!r}) answered {result.observation!r:.80}, but the simulator answers "
                        f"{expected.observation!r:.80} (Domain.invalid_answer): the two backends must agree")
    return "pass", f"step({action!r}) is answered, not raised: {result.observation!r:.60}"


def _certain(domain: Domain, script: Script) -> tuple[Status, str]:
    env = domain.make_env()
    try:
        start = env.reset(script.task)
        start = start if isinstance(start, str) else ""   # the reset check names a reset that returns no text
        system, seen, answered = env.system_prompt(), [], []
        for action in MALFORMED:  # each answer the domain gives without the world model, against the real one
            expected = domain.certain(action, seen, system, start)
            got = env.step(action).observation if domain.accepts(action) else None
            if expected is not None and got != expected:
                return "fail", (f"step({action!r}) answered {got!r:.80}, but the simulator answers {expected!r:.80} "
                                "without asking the world model (Domain.certain_answer): the two must agree")
            if expected is not None:
                answered.append(action)
            if got is not None and domain.rules_out is not None and domain.rules_out(got, action, system):
                return "fail", (f"step({action!r}) answered {got!r:.80}, which the simulator rules out "
                                "(Domain.rules_out): a real answer must never be")
            if got is not None:
                seen.append((action, got))
    finally:
        env.close()
    if not answered:
        return "skip", "no action's answer is certain (Domain.certain_answer): the world model predicts them all"
    return "pass", f"{len(answered)} actions answered as the simulator answers them ({', '.join(map(repr, answered))})"


def _deterministic(domain: Domain, script: Script) -> tuple[Status, str]:
    first = _play(domain, script)
    second = _play(domain, script)
    canonical = domain.canonical or (lambda text: text)
    a = [canonical(first[0])] + [canonical(r.observation) for r in first[1]]
    b = [canonical(second[0])] + [canonical(r.observation) for r in second[1]]
    if repr(first[2]) != repr(second[2]):   # repr: a NaN verdict is the same NaN (and fails the step check)
        return "fail", f"the same episode was judged {first[2]} and then {second[2]}"
    differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if differ:
        return "warn", (f"{len(differ)} of {len(a)} observations differ between two identical episodes (first: "
                        f"{'the reset' if differ[0] == 0 else f'step {differ[0]}'}); lwm data build masks them "
                        "as volatile")
    return "pass", f"{len(a)} observations identical in two episodes"


def _closed(domain: Domain, script: Script) -> tuple[Status, str]:
    action = script.actions[0] if script.actions else ""
    env = domain.make_env()
    if problem := _not_closed(env, action):
        env.close()
        return "fail", f"step() before reset() must raise EnvironmentClosedError; {problem}"
    env.reset(script.task)
    env.close()
    env.close()  # twice: safe
    if problem := _not_closed(env, action):
        return "fail", f"step() after close() must raise EnvironmentClosedError; {problem}"
    return "pass", "step before reset and after close raise EnvironmentClosedError; close() twice is safe"


def _not_closed(env: Any, action: str) -> str | None:
    """What ``env.step(action)`` did instead of raising EnvironmentClosedError, or ``None``."""
    try:
        env.step(action)
    except EnvironmentClosedError:
        return None
    except Exception as e:  # noqa: BLE001 - the wrong error is the finding
        return f"it raised {type(e).__name__}: {e} ({_where(e)})"
    return "it returned an observation"


_CHECKS: tuple[tuple[str, Callable[[Domain, Script], tuple[Status, str]]], ...] = (
    ("construct", _construct),
    ("reset", _reset),
    ("step", _steps),
    ("malformed action", _malformed),
    ("certain answer", _certain),
    ("deterministic", _deterministic),
    ("closed", _closed),
)
