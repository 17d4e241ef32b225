"""The protocol every real environment follows.

``reset(task) -> observation``, ``step(action) -> StepResult``, ``verify() -> reward``,
``snapshot()`` / ``restore(snapshot)`` where the environment can, ``close()``. Actions and
observations are text in the domain's format (see ``lwm.domains``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, Protocol, runtime_checkable

from lwm.errors import ActionFormatError


def invalid_action(reason: str, previous: str) -> str:
    """The answer of a real environment that refuses a malformed action and has no form of
    its own (terminal, fs, mcp, code; a domain's ``invalid_answer``): the action reaches
    nothing, the agent reads why."""
    return f"[invalid action] {reason}"


#: Where seed files may go: the sandbox's private directories (``lwm.envs.sandbox``).
SEED_DIRS = ("/root/", "/app/", "/tmp/")


def seed_file_problem(path: Any, paths: Iterable[str] = ()) -> str | None:
    """Why ``path`` cannot be a seed file (``Task.files``) beside ``paths``, or ``None``:
    it must be text, absolute and normalised (no ``..``, ``.`` or ``//``) under
    :data:`SEED_DIRS`, and not also the directory of another seed file."""
    if not isinstance(path, str) or any(ord(c) < 32 or ord(c) == 127 for c in path):
        return f"seed file path {path!r} is not text (or holds a control character)"
    if not path.startswith(SEED_DIRS) or posixpath.normpath(path) != path:
        return f"seed file {path!r} must be a plain absolute path under /root, /app or /tmp"
    if any(other.startswith(path + "/") for other in paths):
        return f"seed file {path!r} is also the directory of another seed file"
    return None


@dataclass(frozen=True)
class Check:
    """A verifier: a probe run against the real final state, and what it must show.

    The probe is an action in the domain's own format (a shell command for the terminal,
    a query for a database, a tool call …) run after the episode's last turn; it is not
    recorded as a turn. The task is achieved when the probe's observation matches.

    Attributes:
        probe: the action run to inspect the final state.
        expect: what its observation must contain (``contains``), equal after stripping
            surrounding whitespace (``equals``), or match as a Python regex (``regex``,
            searched, multiline).
        match: how ``expect`` is compared.
    """

    probe: str
    expect: str
    match: Literal["contains", "equals", "regex"] = "contains"

    def __post_init__(self) -> None:
        """Raises ValueError: a probe or expectation that is not text, an unknown ``match``,
        a regex that does not compile (refused here, not when the first episode ends)."""
        if not isinstance(self.probe, str) or not isinstance(self.expect, str):
            raise ValueError(f"a check's probe and expect are text, not {type(self.probe).__name__} "
                             f"and {type(self.expect).__name__}")
        if self.match not in ("contains", "equals", "regex"):
            raise ValueError(f"a check's match is contains, equals or regex, not {self.match!r}")
        if self.match == "regex":
            try:
                re.compile(self.expect, re.MULTILINE)
            except re.error as e:
                raise ValueError(f"a check's regex {self.expect!r} does not compile: {e}") from None

    def passes(self, observation: str) -> bool:
        """Whether ``observation`` (the probe's result) satisfies the check."""
        if self.match == "equals":
            return observation.strip() == self.expect.strip()
        if self.match == "regex":
            return re.search(self.expect, observation, re.MULTILINE) is not None
        return self.expect in observation


@dataclass(frozen=True)
class Task:
    """What an episode starts from.

    Attributes:
        name: unique name of the episode (e.g. ``pipes-wordcount``).
        family: the task family, for leak-free splits (e.g. ``pipes``).
        instruction: the instruction given to the agent (may be empty for probes).
        files: files created before the episode, ``{absolute path inside: content}``.
        setup: domain-specific setup steps run before the first observation and not
            recorded (shell commands for the terminal, SQL for a database, …).
        check: the task's verifier, if it has one.
        options: domain-specific settings of the episode (e.g. which database engine,
            which MCP server, which start page).
    """

    name: str
    family: str = ""
    instruction: str = ""
    files: dict[str, str] = field(default_factory=dict)
    setup: tuple[str, ...] = ()
    check: Check | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def turn_budget(self, ceiling: int) -> int:
        """Actions an episode of this task may take: its own ``options["max_turns"]`` (task
        sets from elsewhere carry one per task), never more than a run's ``ceiling``.

        >>> Task("t", options={"max_turns": 3}).turn_budget(10), Task("t").turn_budget(10)
        (3, 10)
        """
        own = self.options.get("max_turns")
        return min(ceiling, own) if isinstance(own, int) and not isinstance(own, bool) and own >= 1 else ceiling

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (recorded with rollouts so that a task can be played again)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        """The inverse of :meth:`to_dict` (``check`` may be a :class:`Check` or a dict).

        Raises:
            ValueError: not a mapping, unknown fields, no ``name``, a field of the wrong
                type (``setup`` a list of texts, ``files`` an object of texts, ``options`` an
                object), a seed file path the sandbox refuses (:func:`seed_file_problem`),
                or a malformed ``check``.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a task is an object (Task.to_dict()), not {type(data).__name__}")
        unknown = set(data) - _TASK_FIELDS
        if unknown:
            raise ValueError(f"unknown task fields {sorted(unknown)} (known: {sorted(_TASK_FIELDS)})")
        name, setup, files = data.get("name"), data.get("setup", ()), data.get("files", {})
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a task needs a name (text), not {name!r}")
        for key in ("family", "instruction"):
            if not isinstance(data.get(key, ""), str):
                raise ValueError(f"a task's {key} is text, not {type(data[key]).__name__}")
        if not isinstance(setup, (list, tuple)) or not all(isinstance(s, str) for s in setup):
            raise ValueError(f"a task's setup is a list of texts, not {setup!r:.80}")
        if not isinstance(files, Mapping) or not all(isinstance(v, str) for v in files.values()):
            raise ValueError(f"a task's files are an object of {{path: text}}, not {files!r:.80}")
        for path in files:
            if problem := seed_file_problem(path, files):
                raise ValueError(problem)
        if not isinstance(data.get("options", {}), Mapping):
            raise ValueError(f"a task's options are an object, not {type(data['options']).__name__}")
        data = dict(data)
        check = data.pop("check", None)
        if isinstance(check, Mapping):
            try:
                check = Check(**check)
            except TypeError as e:
                raise ValueError(f"malformed check {dict(check)!r}: {e}") from None
        elif check is not None and not isinstance(check, Check):
            raise ValueError(f"a task's check is an object {{probe, expect, match}}, not {check!r:.80}")
        return cls(**{**data, "setup": tuple(setup), "files": dict(files),
                      "options": dict(data.get("options", {})), "check": check or None})


_TASK_FIELDS = frozenset(f.name for f in fields(Task))


@dataclass
class StepResult:
    """What ``step`` returns (the fields of Gymnasium's ``step``, with text observations).

    Attributes:
        observation: the next observation, in the domain's format.
        reward: the task reward where the environment gives one at this step, else ``None``.
        terminated: the episode ended by itself (the agent's "done" action, the shell or
            client exited, the browser's answer to the user).
        truncated: the episode was cut from outside (a turn limit).
        info: diagnostics (e.g. ``duration_capped``, ``provenance``, timings in seconds).
    """

    observation: str
    reward: float | None = None
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """The episode is over (terminated or truncated)."""
        return self.terminated or self.truncated


@runtime_checkable
class RealEnvironment(Protocol):
    """A real, sandboxed environment of one domain."""

    domain: str

    def reset(self, task: Task) -> str:
        """Start a fresh episode; return the initial observation."""
        ...

    def step(self, action: str) -> StepResult:
        """Apply one action (text in the domain's format)."""
        ...

    def system_prompt(self) -> str:
        """The world-model system prompt of the current episode (tool definitions, the
        database engine … may depend on the task)."""
        ...

    def verify(self) -> float | None:
        """Run the task's check against the real current state: 1.0 achieved, 0.0 not,
        ``None`` when the task has no check."""
        ...

    def snapshot(self) -> Any:
        """An opaque copy of the environment's state, for :meth:`restore`.

        Raises:
            NotImplementedError: the environment cannot copy its state.
        """
        ...

    def restore(self, snapshot: Any) -> None:
        """Put the environment back in a state :meth:`snapshot` returned (same episode)."""
        ...

    def close(self) -> None:
        """Release everything (processes, files). Safe to call twice."""
        ...


class EnvironmentBase:
    """Shared behaviour of the real environments: context manager, :meth:`verify` through
    the task's probe, and a :meth:`snapshot` that says it is not supported."""

    domain: str = ""
    task: Task | None = None

    def step(self, action: str) -> StepResult:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def probe(self, action: str) -> str:
        """The observation of ``action`` for a verifier; by default, a plain step.

        Raises:
            ActionFormatError: ``action`` is no action of the domain (the step answered
                with an ``action_error``).
        """
        result = self.step(action)
        if "action_error" in result.info:
            raise ActionFormatError(self.domain, action, result.info["action_error"])
        return result.observation

    def verify(self) -> float | None:
        """1.0 or 0.0 as the task's check passes on the probe's observation; ``None`` without
        a check, or when the probe is no action of the domain (its error text is no verdict:
        it could even contain what the check expects)."""
        if self.task is None or self.task.check is None:
            return None
        try:
            observation = self.probe(self.task.check.probe)
        except ActionFormatError:
            return None
        return 1.0 if self.task.check.passes(observation) else 0.0

    def snapshot(self) -> Any:
        raise NotImplementedError(f"the {self.domain} environment cannot snapshot its state")

    def restore(self, snapshot: Any) -> None:
        raise NotImplementedError(f"the {self.domain} environment cannot restore a snapshot")

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
