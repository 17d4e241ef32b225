"""``lwm agent compare``: policies side by side on the same tasks.

Each run is a finished ``lwm agent eval`` run directory, and every run must have played the
same tasks (the same episode ids with the same tasks) on the same backend, so that the
runs can be compared task by task, not only by their rates: per run, the success over all
and per domain with its 95 % Wilson interval; against the first run (the baseline), the
tasks only this run solved and those only the baseline solved, with the exact sign test on
them (:func:`lwm.metrics.sign_test`); per task family, each run's successes and whether the
family is held out (never trained on).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lwm.domains.tasks import heldout_families
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.eval.agent import format_rate, succeeded, success_rate
from lwm.jsonl import read_json
from lwm.metrics import sign_test
from lwm.schema import Trajectory, read_trajectories

#: The headings of a run's cells against the baseline, and of a family's row.
PAIRED_HEAD = ("only this / only the baseline", "sign test p")
FAMILY_HEAD = ("family", "agent split", "tasks")


@dataclass(frozen=True)
class AgentComparison:
    """Policies compared on the same tasks (:func:`compare_agent_runs`).

    Attributes:
        runs: the run directories, as given; the first is the baseline.
        policies: each run's policy (its adapter after ``+``).
        backend: where they played (``real``, or ``sim`` and its reward).
        tasks: the tasks every run played.
        overall: per run, the success: ``{"n", "successes", "rate", "ci95"}`` (rates in [0, 1]).
        domains: domain → per run, the success there.
        paired: per run, against the baseline: ``{"only_this", "only_baseline", "p",
            "only_this_tasks", "only_baseline_tasks"}`` (counts, the sign test's p, the task
            ids); ``None`` for the baseline itself.
        families: ``domain/family`` → ``{"heldout": bool, "n": int, "successes": [per run]}``.
        differing: settings besides the policy in which the runs differ (``max_turns``,
            ``temperature`` …) → each run's value: the rates then measure different things.
    """

    runs: list[str]
    policies: list[str]
    backend: str
    tasks: int
    overall: list[dict[str, Any]]
    domains: dict[str, list[dict[str, Any]]]
    paired: list[dict[str, Any] | None]
    families: dict[str, dict[str, Any]]
    differing: dict[str, list[Any]]

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready data."""
        return asdict(self)

    def paired_cells(self, i: int) -> list[str]:
        """Run ``i`` against the baseline, as the cells under :data:`PAIRED_HEAD` (empty for the
        baseline itself)."""
        pair = self.paired[i]
        return [f"{pair['only_this']} / {pair['only_baseline']}", f"{pair['p']:.3g}"] if pair else ["", ""]

    def family_rows(self) -> list[list[Any]]:
        """One row per task family under :data:`FAMILY_HEAD`, then each run's successes."""
        return [[name, "held out" if f["heldout"] else "train", f["n"], *f["successes"]]
                for name, f in self.families.items()]

    def to_markdown(self) -> str:
        """The comparison as Markdown: one row per run, then one per task family."""
        doms = list(self.domains)
        head = ["run", "policy", "success ± 95% CI", *doms, *PAIRED_HEAD]
        tasks = f"{self.tasks} task{'s' if self.tasks != 1 else ''}"
        lines = [f"# lwm agent compare: {tasks}, the same for every run ({self.backend})", ""]
        lines += [f"Note: the runs differ in {k} ({', '.join(map(str, v))}): their rates measure different things."
                  for k, v in self.differing.items()] + ([""] if self.differing else [])
        lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for i, run in enumerate(self.runs):
            cells = [run, self.policies[i], format_rate(self.overall[i]),
                     *(f"{self.domains[d][i]['successes']}/{self.domains[d][i]['n']}" for d in doms),
                     *(self.paired_cells(i) if self.paired[i] else ["(baseline)", ""])]
            lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
        lines += ["", "Per domain: tasks solved / tasks played there. Only this / only the baseline: the tasks "
                  "this run solved and the first run did not, and the other way round; the sign test is on them. "
                  "Below, per task family: the tasks each run solved, of `tasks`; `agent split` is the policies' "
                  "(held out: families no agent trained on; a world model's held-out families are its own).", ""]
        lines += ["| " + " | ".join(_md(c) for c in [*FAMILY_HEAD, *self.runs]) + " |",
                  "|---" * (len(FAMILY_HEAD) + len(self.runs)) + "|"]
        lines += ["| " + " | ".join(map(str, row)) + " |" for row in self.family_rows()]
        return "\n".join(lines) + "\n"


def _md(cell: Any) -> str:
    return str(cell).replace("|", "\\|")   # a table cell: a run's name may hold a pipe


#: Settings of ``lwm agent eval`` that make two runs' rates measure different things.
_COMPARED_SETTINGS = ("max_turns", "temperature")


def _load(run: Path) -> tuple[dict[str, Any], dict[str, Trajectory]]:
    # (the run's settings, its episodes by id), checked
    if not run.is_dir():
        raise DataNotFoundError(f"no run directory {run}")
    for name in ("summary.json", "episodes.jsonl"):
        if not (run / name).is_file():
            raise DataNotFoundError(f"no {name} in {run}: not a finished lwm agent eval run (run it again to finish "
                                    "it)")
    summary = read_json(run / "summary.json")
    settings = summary.get("settings") if isinstance(summary, dict) else None
    if not isinstance(settings, dict) or not isinstance(summary.get("backend"), str):
        raise RowFormatError(run / "summary.json", 1, "not the summary of an lwm agent eval run (it needs "
                                                       "\"backend\" and \"settings\")")
    episodes: dict[str, Trajectory] = {}
    for e in read_trajectories(run / "episodes.jsonl"):
        if e.id in episodes:
            raise ValueError(f"{run / 'episodes.jsonl'} holds the episode {e.id} twice")
        episodes[e.id] = e
    if not episodes:
        raise ValueError(f"{run / 'episodes.jsonl'} holds no episode")
    return {**settings, "backend": summary["backend"]}, episodes


def _policy(settings: dict[str, Any]) -> str:
    adapter = settings.get("policy_adapter")
    return str(settings.get("policy")) + (f"+{Path(str(adapter)).parent.name or adapter}" if adapter else "")


def _measure(settings: dict[str, Any]) -> str:
    # where a success was decided: the real verifier, or the simulator's reward model
    return "real" if settings["backend"] == "real" else f"{settings['backend']} (reward {settings.get('reward')})"


def compare_agent_runs(runs: Sequence[str | Path]) -> AgentComparison:
    """Compare ``lwm agent eval`` runs of the same tasks, the first as the baseline.

    Raises:
        ValueError: fewer than two runs, or one given twice; runs on different backends or
            rewards; runs of different tasks (the tasks one lacks, or a task under the same
            id that differs, named); a run with no episode, or one episode twice.
        DataNotFoundError: no such run directory, or an unfinished run (no ``summary.json``
            or ``episodes.jsonl``).
        RowFormatError: ``summary.json`` is not an agent evaluation's summary, or an episode
            line is not a trajectory (file and line).
    """
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs: the baseline first, then the others")
    paths = [Path(r) for r in runs]
    if len({p.resolve() for p in paths}) < len(paths):
        raise ValueError("a run is given twice: compare different runs of the same tasks")
    loaded = [_load(p) for p in paths]
    measures = [_measure(s) for s, _ in loaded]
    if len(set(measures)) > 1:
        raise ValueError("the runs' successes were decided differently (" + ", ".join(
            f"{r}: {m}" for r, m in zip(runs, measures)) + "): compare runs of one backend and reward")
    first_run, (_, first) = runs[0], loaded[0]
    for run, (_, episodes) in zip(runs[1:], loaded[1:]):
        for a, b, x, y in ((first, episodes, first_run, run), (episodes, first, run, first_run)):
            if missing := sorted(set(a) - set(b)):
                raise ValueError(f"{y} lacks {len(missing)} of the tasks of {x} (e.g. {missing[0]}): compare runs "
                                 "of the same tasks (the same --domain, --split, --tasks and --seed, or --tasks-file; "
                                 "a run's failed episodes are played when it is run again)")
        if changed := [i for i in first if (first[i].domain, first[i].metadata.get("task_spec"))
                       != (episodes[i].domain, episodes[i].metadata.get("task_spec"))]:
            raise ValueError(f"{run} and {first_run} played different tasks under the same id (e.g. {changed[0]})")
    ids = list(first)
    solved = [{i: succeeded(eps[i]) for i in ids} for _, eps in loaded]

    def rates(subset: list[str]) -> list[dict[str, Any]]:
        return [success_rate(sum(s[i] for i in subset), len(subset)) for s in solved]

    by_domain, by_family = defaultdict(list), defaultdict(list)
    for i in ids:
        by_domain[first[i].domain].append(i)
        by_family[(first[i].domain, first[i].metadata.get("family", "?"))].append(i)
    paired: list[dict[str, Any] | None] = [None]
    for s in solved[1:]:
        only_this = [i for i in ids if s[i] and not solved[0][i]]
        only_baseline = [i for i in ids if solved[0][i] and not s[i]]
        paired.append({"only_this": len(only_this), "only_baseline": len(only_baseline),
                       "p": sign_test(len(only_this), len(only_baseline)),
                       "only_this_tasks": only_this, "only_baseline_tasks": only_baseline})
    heldout = {d: {f.name for f in heldout_families(d)} for d in by_domain}
    training_first = sorted(by_family, key=lambda df: (df[1] in heldout[df[0]], df))
    families = {f"{d}/{f}": {"heldout": f in heldout[d], "n": len(by_family[d, f]),
                             "successes": [sum(s[i] for i in by_family[d, f]) for s in solved]}
                for d, f in training_first}
    values = {k: [s.get(k) for s, _ in loaded] for k in _COMPARED_SETTINGS}
    return AgentComparison(
        runs=[str(r) for r in runs], policies=[_policy(s) for s, _ in loaded], backend=measures[0], tasks=len(ids),
        overall=rates(ids), domains={d: rates(sub) for d, sub in sorted(by_domain.items())}, paired=paired,
        families=families, differing={k: v for k, v in values.items() if len(set(map(str, v))) > 1})


def outside_runs(path: str | Path, flag: str, runs: Sequence[str | Path]) -> None:
    """Refuse to write a comparison's output inside a compared run (it would change the run).

    Raises:
        FileExistsError: ``path`` is inside one of ``runs`` (``flag`` named).
    """
    target = Path(path).resolve()
    for run in runs:
        if target.is_relative_to(Path(run).resolve()):
            raise FileExistsError(f"{flag} {path} is inside the compared run {run}: it would change the run")


def safe_json_output(path: str | Path, flag: str, runs: Sequence[str | Path]) -> None:
    """Refuse to write the comparison's JSON where it would overwrite what it should not: inside
    a compared run (:func:`outside_runs`), over a directory, or over an existing file that is
    not an earlier comparison.

    Raises:
        FileExistsError: it would (``flag`` named).
    """
    outside_runs(path, flag, runs)
    path = Path(path)
    if path.is_dir():
        raise FileExistsError(f"{flag} {path} is a directory")
    if not path.exists():
        return
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        earlier = None
    if not (isinstance(earlier, dict) and {"runs", "paired"} <= earlier.keys()):
        raise FileExistsError(f"{flag} {path} exists and is not an lwm agent compare JSON: it would be overwritten")
