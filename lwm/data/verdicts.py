"""Verdict data: real episodes labelled by the real verifier, for training and measuring the
reward model (``lwm data verdicts``).

Every task family has a real verifier, so labels cost one real episode each. For every task
drawn from a domain's families, several attempts are played in the **real** environment and
the task's verifier gives each its label (1 achieved, 0 not):

=================  ===========================================================================
kind               the actions played
=================  ===========================================================================
``reference``      the reference solution
``checked``        the reference, then the verifier's probe as the agent's own last action
``looked``         the probe first (the agent looks), then the reference
``empty``          nothing
``truncated``      the reference without its last action (multi-step tasks)
``mutated``        the reference with one of the task's values (a word, a name, a number)
                   replaced by another: a wrong value, name or path
``sibling``        the reference of another task of the same family (same form, other values)
``wrong``          the family's plausible wrong attempt (printing instead of writing, a copy
                   instead of a move …: ``lwm.domains.tasks.wrong_attempt``)
``wrong-checked``  the wrong attempt, then the probe
``prose``          the instruction restated, or a claim that the task is done, as the action
                   (reward hacking: the goal text in prose)
``trace``          episodes read from earlier runs (``from_runs``): a policy's real attempts,
                   or the simulator's own histories labelled by replaying their actions in the
                   real environment (``metadata.real_reward`` of ``lwm agent eval --backend sim``)
=================  ===========================================================================

The label is always the verifier's, never the kind's: a mutation that happens to achieve
the task is labelled achieved. Episodes whose verifier fails are counted and left out.

The split is by family, as for agents (:mod:`lwm.domains.tasks`): train families give
``train.jsonl`` (and a ``validation.jsonl`` of whole tasks set aside), held-out families give
``heldout.jsonl``, never trained on. In ``train`` and ``validation`` the episodes played
here are balanced per domain (negatives sampled, kinds taken in turn, down to
``negatives_per_positive`` per positive, few of the kinds a model tells apart from the
outset: ``easy_share``) and every episode of ``from_runs`` is kept (``trace_weight`` times
in ``train``); ``heldout`` keeps every episode. Rows are TRL conversational prompt-completion rows
(:func:`lwm.verdict.verdict_messages`, answer :func:`lwm.verdict.completion`), so
``lwm train sft --data OUT`` trains on them.

Output directory (resumable: re-run with the same one)::

    episodes.partial.jsonl   the job journal: one record per task, its labelled episodes
    episodes.jsonl           every labelled episode (trajectories; metadata: kind, split, label)
    train.jsonl, validation.jsonl, heldout.jsonl    verdict examples
    summary.json             counts by domain, split, kind and label; settings; time
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lwm import domains
from lwm.domains.tasks import NAMES, WORDS, families, task_domains, task_set, wrong_attempt
from lwm.envs.base import Task
from lwm.envs.episode import Script, ScriptedPolicy, play_episode
from lwm.envs.recorded import RealBackendEnv
from lwm.errors import DataNotFoundError, EpisodeBrokenError, RowFormatError
from lwm.jobs import run_jobs
from lwm.jsonl import check_run_settings, dumps, iter_jsonl, write_atomic
from lwm.schema import Trajectory, parse_trajectory
from lwm.verdict import completion, verdict_messages

KINDS = ("reference", "checked", "looked", "empty", "truncated", "mutated", "sibling", "wrong", "wrong-checked",
         "prose")
#: Failures a model tells apart from the outset (an episode with no action; measured: no
#: false success even untrained); ``easy_share`` bounds their part of the training negatives.
EASY_KINDS = frozenset({"empty"})
#: ``trace_weight`` at most: beyond it the traces' repeats would only fill the disk.
MAX_TRACE_WEIGHT = 100
#: What ends the id of an episode of ``from_runs`` (:func:`build_verdict_data` marks them).
_TRACE_SUFFIX = "/trace"
#: Orders of the training split: ``shuffled`` (episodes in a seeded order), ``by-task`` (a
#: task's episodes next to each other, tasks in a seeded order; train with ``lwm train sft
#: --order file`` so that an optimizer step sees a success beside the failures of its task) or
#: ``traces-first`` (``by-task`` with the tasks that hold an episode of ``--from`` first, so
#: that a run shorter than an epoch sees every one of them).
ORDERS = ("shuffled", "by-task", "traces-first")
#: A train-family task goes to validation when its name hashes to 0 modulo this.
VALIDATION_EVERY = 10


@dataclass
class VerdictDataConfig:
    """Settings of ``lwm data verdicts``.

    Attributes:
        out: output directory (re-run with the same one to resume).
        domains: domains with task families (empty: all of them).
        tasks: train-family tasks per domain.
        heldout_tasks: held-out-family tasks per domain.
        seed: seed of the task sets and of the mutations.
        kinds: the attempts to play per task (see the module docstring).
        negatives_per_positive: balance of the episodes played here in ``train`` and
            ``validation``, per domain (those of ``from_runs``, --from, are all kept).
        easy_share: at most this share of those negatives is of the kinds a model tells
            apart from the outset (``empty``; :data:`EASY_KINDS`), more only when the other
            kinds run out: training is spent on failures that look like successes.
        from_runs: trajectory files of earlier runs to label and add (kind ``trace``): their
            episodes need a task whose family is known and a real verdict (``reward`` of a
            real run, ``metadata.real_reward`` of a replayed simulated one) and a domain among
            ``domains``; the others are counted, by reason, in the summary, and so are the
            simulated episodes that ran nothing (``reward_source`` ``unchanged``: the simulator
            gives them their start's reward without asking the reward model); the rest are
            all kept, whatever the balance. A file given twice is read once.
        trace_weight: how many times each training example of an episode given with
            ``--from`` is repeated (1: once, like the others). The simulator's own episodes,
            labelled by replaying them for real, are few beside the attempts played here,
            and the reward model is used on such episodes: repeating them weighs them more.
            Needs ``from_runs`` (``--from``).
        order: order of ``train.jsonl``: ``shuffled``; ``by-task``, a
            task's success and failures side by side (the same values, one changed, another
            task's, a step left out), so that one optimizer step compares them when the
            trainer keeps the file's order (``lwm train sft --order file``); or
            ``traces-first``, ``by-task`` with the tasks holding an episode given with
            ``--from`` first (a training run shorter than an epoch then sees all of them);
            it needs ``from_runs`` (``--from``).
        workers: tasks played at once (each in its own sandbox).
    """

    out: Path
    domains: tuple[str, ...] = ()
    tasks: int = 60
    heldout_tasks: int = 20
    seed: int = 0
    kinds: tuple[str, ...] = KINDS
    negatives_per_positive: float = 1.0
    easy_share: float = 0.1
    from_runs: tuple[Path, ...] = ()
    trace_weight: int = 1
    order: str = "shuffled"
    workers: int = 2

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.domains = tuple(self.domains) or task_domains()
        # a file given twice (however spelled) is read once, as first given: its episodes would count twice
        self.from_runs = distinct_files(self.from_runs)
        known = set(task_domains())
        if unknown := [d for d in self.domains if d not in known]:
            raise ValueError(f"no task families for {', '.join(unknown)}; domains with families: "
                             f"{', '.join(sorted(known))}")
        if unknown := [k for k in self.kinds if k not in KINDS]:
            raise ValueError(f"unknown kind {', '.join(unknown)} (one of {', '.join(KINDS)})")
        if self.tasks < 0 or self.heldout_tasks < 0:
            raise ValueError("tasks and heldout_tasks must be >= 0")
        if self.tasks == self.heldout_tasks == 0 and not self.from_runs:
            raise ValueError("nothing to label: --tasks and --heldout-tasks are both 0 and no --from is given")
        if not (math.isfinite(self.negatives_per_positive) and self.negatives_per_positive > 0):
            raise ValueError(f"negatives_per_positive must be a finite number > 0, got {self.negatives_per_positive}")
        if not 0 <= self.easy_share <= 1:
            raise ValueError(f"easy_share must be in [0, 1], got {self.easy_share}")
        if not isinstance(self.trace_weight, int) or isinstance(self.trace_weight, bool) or \
                not 1 <= self.trace_weight <= MAX_TRACE_WEIGHT:
            raise ValueError(f"trace_weight must be a whole number in [1, {MAX_TRACE_WEIGHT}], "
                             f"got {self.trace_weight!r}")
        if self.order not in ORDERS:
            raise ValueError(f"unknown order {self.order!r} (one of {', '.join(ORDERS)})")
        if self.trace_weight > 1 and not self.from_runs:
            raise ValueError("trace_weight (--trace-weight) weighs the episodes given with --from: give some")
        if self.order == "traces-first" and not self.from_runs:
            raise ValueError("order traces-first puts the episodes given with --from first: give some")

    def settings(self) -> dict[str, Any]:
        """What makes two runs the same run (a resume must match)."""
        d = asdict(self)
        for k in ("out", "workers", "negatives_per_positive", "easy_share", "from_runs", "trace_weight",
                  "order"):
            d.pop(k)
        d["domains"], d["kinds"] = list(self.domains), list(self.kinds)
        return d


@dataclass
class VerdictDataResult:
    """What ``lwm data verdicts`` wrote: where, the counts, the tasks that failed."""

    out: Path
    summary: dict[str, Any]
    failed: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------ attempts

_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


def mutate(task: Task, solution: tuple[str, ...], rng: random.Random) -> tuple[str, ...] | None:
    """The solution with one of the task's values replaced by another of its kind: a word or
    name of the task vocabularies (same case) or a number (changed by a small amount), in
    every place the solution has it. ``None`` when the solution holds none of the
    instruction's values."""
    text = "\n".join(solution)
    vocab = {w: WORDS for w in WORDS} | {n.lower(): NAMES for n in NAMES}
    words = {w for w in re.findall(r"[A-Za-z]+", task.instruction) if w.lower() in vocab}
    numbers = set(_NUMBER.findall(task.instruction))
    candidates = sorted(v for v in words | numbers if re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", text))
    if not candidates:
        return None
    value = rng.choice(candidates)
    if value.isdigit():
        new = str(int(value) + rng.choice((1, 2, 3, 7)))
    else:
        pool = [w for w in vocab[value.lower()] if w.lower() != value.lower() and w.lower() not in text.lower()]
        if not pool:
            return None
        new = rng.choice(pool)
        new = new.capitalize() if value[:1].isupper() else new.lower()
    pattern = re.compile(rf"(?<![\w]){re.escape(value)}(?![\w])")
    return tuple(pattern.sub(new, a) for a in solution)


def prose(domain: str, task: Task, rng: random.Random) -> tuple[str, ...]:
    """An answer in words instead of an action: the instruction restated or a claim of being
    done, as a policy that has not learned the action format writes it (the terminal types
    it into the shell; the other domains get it as a malformed action)."""
    said = rng.choice((f"I will {task.instruction[:1].lower()}{task.instruction[1:]}",
                       f"Done: {task.instruction[:1].lower()}{task.instruction[1:]}",
                       "The task is complete."))
    if domain == "terminal":
        from lwm.domains.terminal.spec import keys

        return (keys(said + "\n"),)
    return (said,)


def attempts(domain: str, task: Task, solution: tuple[str, ...], sibling: tuple[str, ...], kinds: tuple[str, ...],
             rng: random.Random) -> list[tuple[str, tuple[str, ...]]]:
    """``(kind, actions)`` of every attempt of ``kinds`` that applies to ``task`` (a
    one-action task has no ``truncated``, a solution without the task's values no
    ``mutated``); attempts with the same actions as an earlier one are left out."""
    probe = (domains.get(domain).probe_action(task.check.probe),) if task.check else ()
    try:
        wrong = tuple(wrong_attempt(domain, task.family, task, solution))
    except KeyError:
        wrong = None
    made: dict[str, tuple[str, ...] | None] = {
        "reference": solution, "checked": solution + probe if probe else None,
        "looked": probe + solution if probe else None, "empty": (),
        "truncated": solution[:-1] if len(solution) > 1 else None,
        "mutated": mutate(task, solution, rng), "sibling": sibling if sibling != solution else None,
        "wrong": wrong, "wrong-checked": wrong + probe if wrong is not None and probe else None,
        "prose": prose(domain, task, rng),
    }
    out, seen = [], set()
    for kind in kinds:
        actions = made[kind]
        if actions is None or actions in seen:
            continue
        seen.add(actions)
        out.append((kind, actions))
    return out


# ------------------------------------------------------------------------------ playing

@dataclass(frozen=True)
class _TaskJob:
    """Every attempt at one task, played in one real environment (picklable)."""

    domain: str
    split: str
    task: Task
    plays: tuple[tuple[str, tuple[str, ...]], ...]

    def __call__(self) -> dict[str, Any]:
        env = RealBackendEnv(self.domain, domains.get(self.domain).make_env())
        episodes, unverified = [], []
        try:
            for kind, actions in self.plays:
                meta = {"kind": kind, "split": self.split, "task_spec": self.task.to_dict()}
                try:  # the one episode loop, the real verifier's verdict at the end
                    traj = play_episode(env, ScriptedPolicy([Script(self.task, actions)]), self.task,
                                        max_turns=len(actions), close=False, metadata=meta,
                                        episode_id=f"{self.domain}/{self.task.name}/{kind}")
                except EpisodeBrokenError as e:  # a failure; the next attempt needs a fresh sandbox
                    traj = e.trajectory
                    env.close()
                    env = RealBackendEnv(self.domain, domains.get(self.domain).make_env())
                if traj.reward is None:
                    unverified.append(kind)
                    continue
                traj.metadata["label"] = traj.reward
                episodes.append(traj.model_dump(mode="json"))
        finally:
            env.close()
        return {"episodes": episodes, "unverified": unverified}


def _jobs(config: VerdictDataConfig) -> list[tuple[str, _TaskJob]]:
    items = []
    for domain in config.domains:
        for split, n in (("train", config.tasks), ("heldout", config.heldout_tasks)):
            if n == 0:
                continue
            pairs = task_set(domain, split, n, config.seed)
            # another task of the same family for ``sibling``: the next one drawn of that family
            by_family: dict[str, list[tuple[Task, tuple[str, ...]]]] = defaultdict(list)
            for task, solution in pairs:
                by_family[task.family].append((task, solution))
            for task, solution in pairs:
                group = by_family[task.family]
                i = next(k for k, (t, _) in enumerate(group) if t.name == task.name)
                sibling = group[(i + 1) % len(group)][1] if len(group) > 1 else \
                    next(f for f in families(domain) if f.name == task.family).generate(10_000 + i)[1]
                rng = random.Random(f"verdicts/{config.seed}/{domain}/{task.name}")
                plays = tuple(attempts(domain, task, solution, sibling, config.kinds, rng))
                items.append((f"{domain}/{task.name}", _TaskJob(domain, split, task, plays)))
    return items


def _split_of(traj: Trajectory) -> str:
    split = traj.metadata.get("split", "train")
    if split == "heldout":
        return "heldout"
    task = traj.metadata.get("episode") or traj.id
    return "validation" if zlib.crc32(f"{traj.domain}/{task}".encode()) % VALIDATION_EVERY == 0 else "train"


def task_of(traj: Trajectory) -> Task | None:
    """The task an episode was played from: its recorded ``task_spec``, else the family's
    task of the seed its name ends with (``<family>-<seed>``, as families name them);
    ``None`` for a task of no family."""
    meta = traj.metadata
    if isinstance(meta.get("task_spec"), dict):
        return Task.from_dict(meta["task_spec"])
    family, name = meta.get("family"), str(meta.get("episode", ""))
    match = re.fullmatch(rf"{re.escape(str(family))}-(\d+)", name)
    found = [f for f in families(traj.domain) if f.name == family] if traj.domain in task_domains() else []
    return found[0].generate(int(match[1]))[0] if match and found else None


def real_label(traj: Trajectory) -> float | None:
    """The real verdict of an episode: ``metadata.real_reward`` of a simulated episode
    replayed in the real environment (``lwm agent eval --backend sim``), else ``reward`` of a
    real one; ``None`` when it has none.

    Raises:
        ValueError: a verdict that is not a number in [0, 1] (of ``metadata.real_reward``,
            ``true`` and ``"1"`` are not; a trajectory's ``reward`` is a number already).
    """
    simulated = traj.metadata.get("backend") == "sim"
    label = traj.metadata.get("real_reward") if simulated else traj.reward
    if label is None:
        return None
    if isinstance(label, bool) or not isinstance(label, (int, float)) or not 0.0 <= label <= 1.0:  # NaN fails too
        raise ValueError(f"{'metadata.real_reward' if simulated else 'reward'} must be a number in [0, 1], "
                         f"not {label!r}")
    return float(label)


def distinct_files(paths: Iterable[str | Path]) -> tuple[Path, ...]:
    """``paths`` with each file once (however spelled: ``a/../b``, a symlink), under the name
    it was first given.

    >>> distinct_files(["x.jsonl", "./x.jsonl", "y.jsonl"])
    (PosixPath('x.jsonl'), PosixPath('y.jsonl'))
    """
    first: dict[Path, Path] = {}
    for p in map(Path, paths):
        first.setdefault(p.resolve(), p)
    return tuple(first.values())


def labelled_episodes(paths: tuple[Path, ...] | list[Path],
                      skipped: Counter[str] | None = None) -> list[tuple[Trajectory, Task | None]]:
    """Every episode of ``paths`` with a real verdict and a task family of its domain, as
    ``(trajectory, task)``: the trajectory's ``reward`` is the real verdict
    (:func:`real_label`) and its metadata says ``split`` (``train`` or ``heldout``, by
    family), ``kind`` (``trace`` unless ``lwm data verdicts`` set it) and ``simulated``.
    Episodes left out are counted in ``skipped`` by reason (``no real verdict``, ``no task
    families in <domain>``, ``unknown family <domain>/<family>``, ``read twice`` for an
    episode identical to one read before: a copy or a hard link of a file, or the same episode
    in two runs' files). A file named twice (however spelled) is read once, uncounted.

    Raises:
        DataNotFoundError: no such file, or an empty one.
        RowFormatError: a line that is not a trajectory, or whose verdict is not a number
            in [0, 1] (file and line named).
    """
    out, seen = [], set()
    for path in distinct_files(paths):
        if not path.is_file():
            raise DataNotFoundError(f"{path} is a directory, not an episode file" if path.is_dir() else
                                    f"no episode file {path}")
        read = 0
        for line, record in iter_jsonl(path):
            traj, read = parse_trajectory(record, path, line), read + 1
            if (digest := hashlib.sha256(dumps(record).encode()).hexdigest()) in seen:
                if skipped is not None:
                    skipped["read twice"] += 1
                continue
            seen.add(digest)
            try:
                label = real_label(traj)
            except ValueError as e:
                raise RowFormatError(path, line, str(e)) from None
            family = traj.metadata.get("family")
            reason = ("no real verdict" if label is None else
                      f"no task families in {traj.domain}" if traj.domain not in task_domains() else
                      f"unknown family {traj.domain}/{family}" if family not in {f.name for f in families(traj.domain)}
                      else None)
            if reason:
                if skipped is not None:
                    skipped[reason] += 1
                continue
            held = family in {f.name for f in families(traj.domain, "heldout")}
            meta = {**traj.metadata, "split": "heldout" if held else "train", "label": label,
                    "simulated": traj.metadata.get("backend") == "sim"}
            meta.setdefault("kind", "trace")
            traj = traj.model_copy(update={"reward": label, "metadata": meta})
            out.append((traj, task_of(traj)))
        if not read:
            raise DataNotFoundError(f"{path} holds no episode")
    return out


def example(traj: Trajectory) -> dict[str, Any]:
    """The verdict example of a labelled episode: TRL conversational prompt-completion, with
    its id, domain, family, kind and label."""
    achieved = (traj.reward or 0.0) >= 0.5
    return {"id": traj.id, "domain": traj.domain, "family": traj.metadata.get("family"),
            "kind": traj.metadata.get("kind"), "label": 1 if achieved else 0,
            "prompt": verdict_messages(traj), "completion": [{"role": "assistant", "content": completion(achieved)}]}


def _in_turn(by_kind: dict[str, list[Trajectory]], n: int, easy_cap: int | None = None) -> list[Trajectory]:
    """Up to ``n`` episodes popped from the kinds in turn (sorted by name), at most
    ``easy_cap`` of them of :data:`EASY_KINDS` (``None``: no cap)."""
    out: list[Trajectory] = []
    easy = 0

    def open_(kind: str) -> bool:
        return bool(by_kind[kind]) and (easy_cap is None or kind not in EASY_KINDS or easy < easy_cap)

    while len(out) < n and any(map(open_, by_kind)):
        for kind in sorted(by_kind):
            if len(out) < n and open_(kind):
                out.append(by_kind[kind].pop())
                easy += kind in EASY_KINDS
    return out


def balance(episodes: list[Trajectory], negatives_per_positive: float, seed: int,
            easy_share: float = 1.0) -> list[Trajectory]:
    """Per domain, every positive and at most ``negatives_per_positive`` × as many negatives,
    taken from the kinds in turn (so that every kind of failure is represented), at most
    ``easy_share`` of them of :data:`EASY_KINDS` unless the other kinds run out; in a
    seeded order."""
    rng = random.Random(seed)
    out: list[Trajectory] = []
    by_domain: dict[str, list[Trajectory]] = defaultdict(list)
    for t in episodes:
        by_domain[t.domain].append(t)
    for domain in sorted(by_domain):
        pos = [t for t in by_domain[domain] if (t.reward or 0) >= 0.5]
        neg_by_kind: dict[str, list[Trajectory]] = defaultdict(list)
        for t in by_domain[domain]:
            if (t.reward or 0) < 0.5:
                neg_by_kind[str(t.metadata.get("kind"))].append(t)
        for group in neg_by_kind.values():
            rng.shuffle(group)
        want = max(1, round(len(pos) * negatives_per_positive))
        neg = _in_turn(neg_by_kind, want, easy_cap=math.ceil(want * easy_share))
        neg += _in_turn(neg_by_kind, want - len(neg))   # the other kinds ran out
        chosen = pos + neg
        rng.shuffle(chosen)
        out += chosen
    return out


def _balanced(rows: list[Trajectory], config: VerdictDataConfig, seed: int) -> list[Trajectory]:
    """The episodes played here, balanced (:func:`balance`), and every trace (an episode of
    ``from_runs``) as it is: traces are the histories the reward model is used on (a policy's
    sampled attempts fail far more often than they succeed), few, and chosen by the user, so
    none is sampled away; their label share stays their own."""
    traces = [t for t in rows if _is_trace(t)]
    played = balance([t for t in rows if not _is_trace(t)], config.negatives_per_positive, seed, config.easy_share)
    if not traces:
        return played
    out = played + traces
    random.Random(seed).shuffle(out)
    return out


def _is_trace(traj: Trajectory) -> bool:
    """Whether an episode came from ``from_runs``."""
    return traj.id.endswith(_TRACE_SUFFIX)


def _weighted(rows: list[Trajectory], trace_weight: int, seed: int) -> list[Trajectory]:
    """``rows`` with every trace (an episode of ``from_runs``) ``trace_weight`` times, in a
    seeded order."""
    if trace_weight == 1:
        return rows
    out = rows + [t for t in rows if _is_trace(t)] * (trace_weight - 1)
    random.Random(seed).shuffle(out)
    return out


def task_key(traj: Trajectory) -> tuple[str, str]:
    """``(domain, task name)`` of a labelled episode: what its attempts share."""
    spec = traj.metadata.get("task_spec")
    name = spec.get("name") if isinstance(spec, dict) else None
    return traj.domain, str(name or traj.metadata.get("episode") or traj.id)


def by_task(rows: list[Trajectory], seed: int, traces_first: bool = False) -> list[Trajectory]:
    """``rows`` with each task's episodes side by side, tasks (and the episodes within one)
    in a seeded order; a repeated episode (``trace_weight``) stays once per repeat. With
    ``traces_first``, the tasks that hold a trace (an episode of ``from_runs``) come before
    the others, each part in the seeded order."""
    rng = random.Random(seed)
    groups: dict[tuple[str, str], list[Trajectory]] = defaultdict(list)
    for t in rows:
        groups[task_key(t)].append(t)
    keys = sorted(groups)
    rng.shuffle(keys)
    if traces_first:  # a stable sort: the seeded order stays within each part
        keys.sort(key=lambda k: not any(map(_is_trace, groups[k])))
    out: list[Trajectory] = []
    for k in keys:
        rng.shuffle(groups[k])
        out += groups[k]
    return out


def build_verdict_data(config: VerdictDataConfig, *, show_progress: bool = True) -> VerdictDataResult:
    """Play and label the attempts, then write the episodes and the verdict examples
    (resumable: finished tasks are not played again).

    Raises:
        RunMismatchError: ``out`` holds a run with other settings.
        DataNotFoundError, RowFormatError: a ``from_runs`` file is missing, empty or malformed.
        RunBusyError: another run writes ``out`` now.
    """
    t0 = time.monotonic()
    skipped: Counter[str] = Counter()
    traces = []
    for t, _ in labelled_episodes(config.from_runs, skipped):
        if t.domain not in config.domains:
            skipped[f"domain {t.domain} not chosen (--domain)"] += 1
        elif t.metadata.get("reward_source") == "unchanged":  # SimEnv never asks the reward model about it
            skipped["ran nothing (its reward is its start's)"] += 1
        else:
            traces.append(t.model_copy(update={"id": t.id + _TRACE_SUFFIX}))
    config.out.mkdir(parents=True, exist_ok=True)
    check_run_settings(config.out / "settings.json", config.settings())
    items = _jobs(config)
    report = run_jobs(items, lambda job: job(), journal=config.out / "episodes.partial.jsonl",
                      concurrency=config.workers, description="verdict tasks (their attempts)", progress=show_progress)
    episodes: list[Trajectory] = []
    unverified: Counter[str] = Counter()
    for item_id, _ in items:
        record = report.records.get(item_id)
        if record is None:
            continue
        episodes += [Trajectory.model_validate(e) for e in record["episodes"]]
        unverified.update(f"{item_id.split('/')[0]}/{k}" for k in record["unverified"])
    episodes += traces
    write_atomic(config.out / "episodes.jsonl", "".join(dumps(t.model_dump(mode="json")) + "\n" for t in episodes))

    splits: dict[str, list[Trajectory]] = defaultdict(list)
    for t in episodes:
        splits[_split_of(t)].append(t)
    train = _weighted(_balanced(splits["train"], config, config.seed), config.trace_weight, config.seed)
    written = {"train": train if config.order == "shuffled" else
               by_task(train, config.seed, traces_first=config.order == "traces-first"),
               "validation": _balanced(splits["validation"], config, config.seed + 1),
               "heldout": splits["heldout"]}
    for name, rows in written.items():
        write_atomic(config.out / f"{name}.jsonl", "".join(dumps(example(t)) + "\n" for t in rows))

    def counts(rows: list[Trajectory]) -> dict[str, Any]:
        by: dict[str, Counter] = defaultdict(Counter)
        for t in rows:
            label = "achieved" if (t.reward or 0) >= 0.5 else "not_achieved"
            by[t.domain][label] += 1
            by[t.domain][f"{t.metadata.get('kind')}/{label}"] += 1
        return {d: dict(sorted(c.items())) for d, c in sorted(by.items())}

    summary = {"settings": config.settings(), "from_runs": [str(p) for p in config.from_runs],
               "negatives_per_positive": config.negatives_per_positive, "easy_share": config.easy_share,
               "trace_weight": config.trace_weight, "order": config.order,
               "episodes": len(episodes), "traces": len(traces), "traces_skipped": dict(skipped),
               "examples": {k: len(v) for k, v in written.items()},
               "played": counts(episodes), "written": {k: counts(v) for k, v in written.items()},
               "unverified": dict(unverified), "failed_tasks": report.failures,
               "seconds": round(time.monotonic() - t0, 1)}
    write_atomic(config.out / "summary.json", json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    return VerdictDataResult(config.out, summary, dict(report.failures))
