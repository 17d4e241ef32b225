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

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lwm.domains.tasks import heldout_families
from lwm.errors import DataNotFoundError
from lwm.eval.agent import format_rate, succeeded, success_rate
from lwm.jsonl import read_json
from lwm.metrics import sign_test
from lwm.schema import read_trajectories


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
        paired: per run, against the baseline: ``{"only_this", "only_baseline", "p"}``
            (``None`` for the baseline itself).
        families: ``domain/family`` → ``{"heldout": bool, "n": int, "successes": [per run]}``.
    """

    runs: list[str]
    policies: list[str]
    backend: str
    tasks: int
    overall: list[dict[str, Any]]
    domains: dict[str, list[dict[str, Any]]]
    paired: list[dict[str, Any] | None]
    families: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready data."""
        return asdict(self)

    def to_markdown(self) -> str:
        """The comparison as Markdown: one row per run, then one per task family."""
        doms = list(self.domains)
        head = ["run", "policy", "success ± 95% CI", *doms, "only this / only the baseline", "sign test p"]
        lines = [f"# lwm agent compare: {self.tasks} tasks, the same for every run ({self.backend})", "",
                 "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for i, run in enumerate(self.runs):
            pair = self.paired[i]
            cells = [run, self.policies[i], format_rate(self.overall[i]),
                     *(f"{self.domains[d][i]['successes']}/{self.domains[d][i]['n']}" for d in doms),
                     f"{pair['only_this']} / {pair['only_baseline']}" if pair else "(baseline)",
                     f"{pair['p']:.3g}" if pair else ""]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "| family | split | tasks | " + " | ".join(self.runs) + " |",
                  "|---" * (3 + len(self.runs)) + "|"]
        for name, f in self.families.items():
            lines.append(f"| {name} | {'held out' if f['heldout'] else 'train'} | {f['n']} | "
                         + " | ".join(str(k) for k in f["successes"]) + " |")
        return "\n".join(lines) + "\n"


def _load(run: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    # (the run's summary, its episodes by id)
    for name in ("summary.json", "episodes.jsonl"):
        if not (run / name).is_file():
            raise DataNotFoundError(f"no {name} in {run}: not a finished lwm agent eval run (run it again to finish "
                                    "it)")
    return read_json(run / "summary.json"), {e.id: e for e in read_trajectories(run / "episodes.jsonl")}


def _policy(settings: dict[str, Any]) -> str:
    adapter = settings.get("policy_adapter")
    return str(settings.get("policy")) + (f"+{Path(adapter).parent.name or adapter}" if adapter else "")


def compare_agent_runs(runs: Sequence[str | Path]) -> AgentComparison:
    """Compare ``lwm agent eval`` runs of the same tasks, the first as the baseline.

    Raises:
        ValueError: fewer than two runs; runs on different backends or rewards; runs of
            different tasks (the tasks one lacks, or a task under the same id that differs,
            named).
        DataNotFoundError: a run is unfinished (no ``summary.json`` or ``episodes.jsonl``).
        RowFormatError: an episode line is not a trajectory (file and line).
    """
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs: the baseline first, then the others")
    loaded = [_load(Path(r)) for r in runs]
    backends = {(s["backend"], s.get("settings", {}).get("reward")) if s["backend"] != "real" else ("real", None)
                for s, _ in loaded}
    if len(backends) > 1:
        raise ValueError(f"the runs played on different backends or rewards ({sorted(map(str, backends))}): a "
                         "success in the simulator and one in the real environment are different measures")
    first_run, (_, first) = runs[0], loaded[0]
    for run, (_, episodes) in zip(runs[1:], loaded[1:]):
        for a, b, x, y in ((first, episodes, first_run, run), (episodes, first, run, first_run)):
            if missing := sorted(set(a) - set(b)):
                raise ValueError(f"{y} lacks {len(missing)} of the tasks of {x} (e.g. {missing[0]}): compare runs "
                                 "of the same tasks (the same --domain, --split, --tasks and --seed, or --tasks-file; "
                                 "a run's failed episodes are played when it is run again)")
        if changed := [i for i in first if first[i].metadata.get("task_spec") != episodes[i].metadata.get("task_spec")]:
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
        only_this = sum(s[i] and not solved[0][i] for i in ids)
        only_baseline = sum(solved[0][i] and not s[i] for i in ids)
        paired.append({"only_this": only_this, "only_baseline": only_baseline,
                       "p": round(sign_test(only_this, only_baseline), 6)})
    heldout = {d: {f.name for f in heldout_families(d)} for d in by_domain}
    return AgentComparison(
        runs=[str(r) for r in runs], policies=[_policy(s.get("settings", {})) for s, _ in loaded],
        backend=next(iter(backends))[0], tasks=len(ids), overall=rates(ids),
        domains={d: rates(sub) for d, sub in sorted(by_domain.items())}, paired=paired,
        families={f"{d}/{f}": {"heldout": f in heldout[d], "n": len(sub), "successes": [sum(s[i] for i in sub)
                                                                                      for s in solved]}
                  for (d, f), sub in sorted(by_family.items(), key=lambda kv: (kv[0][1] in heldout[kv[0][0]], kv[0]))})
