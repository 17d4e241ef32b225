"""Seeded agent task generators with real verifiers, for training and evaluating policies.

A :class:`TaskFamily` draws one task from a seed: an instruction that states everything an
agent needs (exact names, exact values), the starting state (``files``, ``setup``,
``options``, applied by the domain's real environment) and a :class:`~lwm.envs.base.Check`
run on the real final state; and a reference solution, the action texts in the domain's
format that achieve it. Families live in each domain's folder (``lwm/domains/<name>/tasks.py``:
``FAMILIES`` and ``HELD_OUT``, the names of its held-out families), reached through the
domain's spec (:attr:`lwm.domains.Domain.tasks`).

Each family module also lists ``WRONG``, its families' plausible wrong attempts
(:func:`wrong_attempt`), which the tests play and ``lwm data verdicts`` labels.

The split is by family, fixed and listed in each module: a held-out family is never
trained on, so an evaluation on it measures transfer to unseen kinds of task, not to
unseen parameters of a familiar one. About a quarter of each domain's families are held
out, easy and harder ones alike (``docs/tasks.md`` has the table).

Example:
    >>> from lwm.domains.tasks import families, task_set
    >>> task, solution = families("terminal")[0].generate(7)
    >>> pairs = task_set("terminal", "train", n=20, seed=0)  # 20 distinct (task, solution)

Task files (:func:`write_task_file`, :func:`read_task_file`; ``lwm agent tasks`` writes one,
``lwm agent eval --tasks-file`` plays one) hold a task set as JSONL, to read, edit or extend
with tasks of one's own.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lwm.envs.base import Task
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.jsonl import iter_jsonl, write_atomic

SPLITS = ("train", "heldout", "all")
#: Consecutive duplicate draws after which :func:`task_set` takes a family as exhausted.
_MAX_DUPLICATE_DRAWS = 64

# Vocabularies the generators draw from: short, common, lower-case ASCII words that need no
# quoting in a shell, SQL string or JSON, and that are not substrings of one another's use.
WORDS = ("apple", "banana", "cherry", "mango", "lemon", "grape", "peach", "melon", "olive", "plum",
         "river", "cloud", "stone", "forest", "ocean", "desert", "island", "valley", "meadow", "harbor",
         "tiger", "eagle", "otter", "falcon", "badger", "salmon", "turtle", "rabbit", "zebra", "parrot",
         "copper", "silver", "amber", "violet", "indigo", "scarlet", "ivory", "crimson", "orange", "teal")
NAMES = ("Ada", "Alan", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Edsger", "Frances",
         "Donald", "Radia", "Tim", "Katherine", "John", "Hedy", "Niklaus", "Sophie", "Guido", "Anita")


@dataclass(frozen=True)
class TaskFamily:
    """A parameterised kind of task with a real verifier.

    Attributes:
        name: unique within the domain, e.g. ``create-file``; it is each task's ``family``.
        domain: the domain whose real environment plays the tasks (``terminal``, ``db`` …).
        steps: actions a competent agent needs (1: a one-action task).
        description: one line, for tables.
        make: draws ``(task, solution)`` from a seeded ``random.Random``: the task (any
            ``name``, overwritten by :meth:`generate`; ``family`` equal to ``name``; a
            ``check``) and the reference solution, action texts in the domain's format.
    """

    name: str
    domain: str
    steps: int
    description: str
    make: Callable[[random.Random], tuple[Task, tuple[str, ...]]]

    def generate(self, seed: int) -> tuple[Task, tuple[str, ...]]:
        """The task of ``seed`` (named ``<family>-<seed>``) and its reference solution.

        The same seed always gives the same task: the generator's random source is
        ``random.Random(f"{domain}/{name}/{seed}")`` (string seeding is stable across runs
        and Python versions, unlike ``hash``).

        Raises:
            TypeError: ``seed`` is not an int (bools refused too).
            ValueError: the generator broke its contract (wrong family, no check, no solution).
        """
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int, not {type(seed).__name__} {seed!r}")
        task, solution = self.make(random.Random(f"{self.domain}/{self.name}/{seed}"))
        if task.family != self.name or task.check is None or not solution:
            raise ValueError(f"family {self.domain}/{self.name} made an invalid task for seed {seed}: "
                             "its family must be the family's name, with a check and a solution")
        return Task(name=f"{self.name}-{seed}", family=task.family, instruction=task.instruction,
                    files=task.files, setup=task.setup, check=task.check, options=task.options), tuple(solution)


def task_domains() -> tuple[str, ...]:
    """The domains that have task families."""
    from lwm import domains

    return tuple(n for n in domains.names() if domains.get(n).tasks is not None)


def _module(domain: str):
    from lwm import domains

    spec = domains.get(domain)
    if spec.tasks is None:
        raise KeyError(f"no task families for domain {domain!r}; available: {', '.join(task_domains())}")
    return spec.tasks()


def families(domain: str, split: Literal["train", "heldout", "all"] = "all") -> list[TaskFamily]:
    """The task families of ``domain``, in their module's order, optionally of one split.

    Raises:
        KeyError: an unknown domain, or one without task families (the message lists those with).
        ValueError: unknown split.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    module = _module(domain)
    held = set(module.HELD_OUT)
    return [f for f in module.FAMILIES if split == "all" or (f.name in held) == (split == "heldout")]


def heldout_families(domain: str) -> list[TaskFamily]:
    """The held-out families of ``domain`` (never trained on). Raises KeyError as :func:`families`."""
    return families(domain, "heldout")


def refuse_heldout(items: Iterable[tuple[str, Task, Any]], source: str | Path) -> None:
    """Refuse training on ``items`` (``(domain, task, …)`` of a task file) when one is a
    task of a held-out family: those measure generalisation and are never trained on.

    Raises:
        ValueError: names the first such task and its family.
    """
    known = set(task_domains())
    for domain, task, *_ in items:
        if domain in known and task.family in {f.name for f in heldout_families(domain)}:
            raise ValueError(f"{source}: task {task.name!r} is of the held-out family {domain}/{task.family}, "
                             "which is never trained on (it measures generalisation to unseen families)")


def wrong_attempt(domain: str, family: str, task: Task, solution: tuple[str, ...]) -> tuple[str, ...]:
    """A plausible wrong attempt at ``task`` (a task of ``family``, with its reference
    ``solution``): actions that look right and that the real verifier fails, from the family
    module's ``WRONG`` (printing instead of writing, a copy instead of a move, a step left out).

    Raises:
        KeyError: no task families for ``domain``, or no wrong attempt for ``family``.
    """
    attempts = _module(domain).WRONG
    if family not in attempts:
        raise KeyError(f"no wrong attempt for the family {domain}/{family}")
    return tuple(attempts[family](task, solution))


def task_key(task: Task) -> str:
    """What makes two tasks the same task: everything but the name (JSON text)."""
    data = task.to_dict()
    del data["name"]
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


def task_set(domain: str, split: Literal["train", "heldout", "all"], n: int,
             seed: int = 0) -> list[tuple[Task, tuple[str, ...]]]:
    """``n`` distinct tasks of a split of ``domain`` with their reference solutions.

    Families take turns (round robin in module order), so every family of the split is
    used about equally; each family draws seeds ``base, base + 1, …`` where ``base`` comes
    from ``random.Random(f"{domain}/{split}/{seed}")``, and a task equal to one already
    taken (same :func:`task_key`) is skipped. Deterministic: the same arguments give the
    same list.

    Raises:
        KeyError: no task families for this domain.
        ValueError: unknown split, ``n`` < 0, or the split's families hold fewer than ``n``
            distinct tasks.
        TypeError: ``n`` or ``seed`` is not an int.
    """
    for label, value in (("n", n), ("seed", seed)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{label} must be an int, not {type(value).__name__} {value!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n}")
    pool = families(domain, split)
    base = random.Random(f"{domain}/{split}/{seed}").randrange(1 << 30)
    next_seed = {f.name: base for f in pool}
    seen: set[str] = set()
    out: list[tuple[Task, tuple[str, ...]]] = []
    live = list(pool)
    while len(out) < n and live:
        for family in list(live):
            if len(out) == n:
                break
            for _ in range(_MAX_DUPLICATE_DRAWS):
                task, solution = family.generate(next_seed[family.name])
                next_seed[family.name] += 1
                key = task_key(task)
                if key not in seen:
                    seen.add(key)
                    out.append((task, solution))
                    break
            else:
                live.remove(family)
    if len(out) < n:
        raise ValueError(f"the {split} families of {domain} gave only {len(out)} distinct tasks; asked for {n}")
    return out


# ---------------------------------------------------------------------------- task files

#: The fields of a task file's line.
TASK_LINE_FIELDS = ("domain", "task", "solution")


def write_task_file(path: str | Path, items: Iterable[tuple[str, Task, Sequence[str]]], *,
                    overwrite: bool = True) -> int:
    """Write tasks as a JSONL task file, atomically: one line per task,
    ``{"domain": …, "task": Task.to_dict(), "solution": [action, …]}`` (``solution``: the
    reference actions, which the ``oracle`` policy plays; may be empty).

    Args:
        overwrite: write over an existing file whose content differs (without it, only a
            file of exactly these tasks is written again: a user's edits are kept).

    Returns:
        the number of lines written.

    Raises:
        FileExistsError: ``path`` holds other content and ``overwrite`` is false.
    """
    lines = [json.dumps({"domain": d, "task": t.to_dict(), "solution": list(s)}, ensure_ascii=False)
             for d, t, s in items]
    text = "".join(line + "\n" for line in lines)
    path = Path(path)
    if not overwrite and path.is_file() and path.read_text(encoding="utf-8", errors="replace") != text:
        raise FileExistsError(f"{path} exists and holds other tasks (edited?): --force writes over it")
    write_atomic(path, text)
    return len(lines)


def task_file_digest(path: str | Path) -> str:
    """The SHA-256 (hex) of a task file's bytes: what a run records of its task set, so that
    resuming with the file edited is refused while a moved or renamed copy is the same set."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_task_file(path: str | Path) -> list[tuple[str, Task, tuple[str, ...]]]:
    """The ``(domain, task, solution)`` of every line of a task file (see
    :func:`write_task_file`; ``solution`` may be absent). Tasks need not come from a family:
    any task the domain's real environment can start, with a ``check`` for a real verdict
    (without one, its episodes end with an unknown verdict, counted as failures).

    Raises:
        RowFormatError: a line that is not JSON, has unknown or missing fields, names an
            unknown domain, holds a malformed task (a seed file outside the sandbox's
            directories, an option its domain does not know or of the wrong kind:
            :meth:`~lwm.domains.base.Domain.check_task`) or solution, or repeats the name
            of an earlier task of its domain (the file and the 1-based line are named).
        DataNotFoundError: no such file, or no task in it.
    """
    from lwm import domains

    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"no task file {path}")
    out: list[tuple[str, Task, tuple[str, ...]]] = []
    first_line: dict[tuple[str, str], int] = {}
    for line, obj in iter_jsonl(path):
        unknown = sorted(set(obj) - set(TASK_LINE_FIELDS))
        if unknown or "domain" not in obj or "task" not in obj:
            raise RowFormatError(path, line, f"a task line has the fields {', '.join(TASK_LINE_FIELDS)} "
                                             f"(solution optional); got {sorted(obj)}")
        domain, solution = obj["domain"], obj.get("solution") or []
        if not isinstance(domain, str) or domains.find(domain) is None:
            raise RowFormatError(path, line, f"unknown domain {domain!r}; known: {', '.join(domains.names())}")
        if not isinstance(obj["task"], dict):
            raise RowFormatError(path, line, "'task' must be an object (Task.to_dict())")
        try:
            task = Task.from_dict(obj["task"])
            domains.get(domain).check_task(task)
        except (ValueError, TypeError) as e:
            raise RowFormatError(path, line, f"malformed task: {e}") from None
        if not isinstance(solution, list) or not all(isinstance(a, str) for a in solution):
            raise RowFormatError(path, line, "'solution' must be a list of action texts")
        if (seen := first_line.setdefault((domain, task.name), line)) != line:
            raise RowFormatError(path, line, f"task {domain}/{task.name} is already on line {seen}; names must differ")
        out.append((domain, task, tuple(solution)))
    if not out:
        raise DataNotFoundError(f"{path} holds no task")
    return out
