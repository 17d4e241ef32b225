"""Sim-to-real checks: replay simulated trajectories' actions in the real environment.

For each simulated trajectory (e.g. from ``lwm rollout --backend sim``) the same task is
started in the real environment and the same actions are played. Reported:

* per-step divergence: fidelity of each simulated observation against the real one
  (exact, edit similarity, line F1; :func:`lwm.metrics.fidelity` with the domain's
  comparator, as ``lwm eval`` scores), overall and as a function of depth (turn number);
* reward agreement: the simulated reward (the reward model's) against the real verifier's
  verdict, on tasks that have one (both read as achieved when ≥ 0.5);
* false success: how often the simulation said the task was achieved while the real
  verifier says it was not — the failure that would teach an agent the wrong thing.

Output directory: ``wm2real.jsonl`` (one record per trajectory, appended as they finish:
a re-run resumes; scores per step in [0, 1]), ``summary.json`` and ``report.md`` (means
and rates ×100, as ``lwm eval`` reports them), ``labelled.jsonl`` (the replayed
trajectories as given, each with ``metadata.real_reward``, the real verifier's verdict on its
replay, and ``metadata.real_steps``, as ``lwm agent eval --backend sim --replay`` writes them:
what ``lwm data verdicts --from`` and ``lwm agent rewards`` read), ``wm2real_run.json`` (the
sha256 of the trajectories file: a resume must replay the same one).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lwm import domains
from lwm.envs.base import Task
from lwm.envs.episode import broke_sandbox
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.jobs import run_jobs
from lwm.jsonl import check_run_settings, dumps, iter_jsonl, write_atomic
from lwm.metrics import FIDELITY_METRICS, METRIC_LABELS, fidelity
from lwm.schema import Trajectory, parse_trajectory
from lwm.sim.rollout import play_for_real


@dataclass
class Wm2RealResult:
    """Where the report went, and its summary."""

    out: Path
    summary: dict[str, Any]


def _task(traj: Trajectory) -> Task:
    spec = traj.metadata.get("task_spec")
    if spec:
        return Task.from_dict(spec)
    name = traj.metadata.get("episode")
    for script in domains.get(traj.domain).scripts(extended=True):
        if script.task.name == name:
            return script.task
    raise KeyError(f"{traj.id}: no task_spec in its metadata and no suite episode named {name!r}")


def replay_in_real(traj: Trajectory) -> dict[str, Any]:
    """Play ``traj``'s actions in a fresh real environment
    (:func:`lwm.sim.rollout.play_for_real`); the per-step comparison. Steps after an action
    that broke the real sandbox are not compared (``broken`` says why).

    Raises:
        KeyError: the trajectory's task cannot be found (``UnknownDomainError``: its domain).
        NoRealEnvironmentError: the domain has no real environment here.
        SandboxError: the real environment failed at its reset.
    """
    task = _task(traj)
    spec = domains.get(traj.domain)
    real = play_for_real(traj.domain, task, [t.action for t in traj.turns])
    observed = [t for t in real.turns if not broke_sandbox(t)]
    steps = [{"turn": sim.index, **fidelity(sim.observation, done.observation, canonical=spec.canonical).to_dict(),
              "kind": sim.provenance.kind, "real_observation": done.observation}
             for sim, done in zip(traj.turns, observed)]
    sim_reward, real_reward = traj.reward, real.reward
    record = {"id": traj.id, "domain": traj.domain, "task": task.name, "steps": steps,
              "sim_reward": sim_reward, "real_reward": real_reward, "broken": real.metadata.get("broken")}
    if sim_reward is not None and real_reward is not None:
        record["agree"] = (sim_reward >= 0.5) == (real_reward >= 0.5)
        record["false_success"] = sim_reward >= 0.5 and real_reward < 0.5
    return record


def labelled(trajs: list[Trajectory], records: dict[str, dict[str, Any]]) -> list[Trajectory]:
    """The trajectories whose replay has a real verdict, each with ``metadata.real_reward``
    (that verdict, in [0, 1]) and ``metadata.real_steps`` (the actions played for real);
    those without one (no replay yet, or a task with no verifier) are left out."""
    out = []
    for traj in trajs:
        record = records.get(traj.id)
        if record is None or record.get("real_reward") is None:
            continue
        meta = {**traj.metadata, "real_reward": record["real_reward"], "real_steps": len(traj.turns)}
        out.append(traj.model_copy(update={"metadata": meta}))
    return out


_STEP_FIELDS = {"turn", *FIDELITY_METRICS}


def _record_problem(record: dict) -> str | None:
    # A journal line that is not a replay record (hand-edited, another tool's): named, not guessed at.
    steps = record.get("steps")
    if isinstance(steps, list) and all(isinstance(s, dict) and _STEP_FIELDS <= s.keys() for s in steps):
        return None
    return f"not a wm2real record (steps with {', '.join(sorted(_STEP_FIELDS))}); delete the line to replay it again"


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall and per-depth divergence, reward agreement and false-success rate (means
    and rates ×100, rounded to 2 places; ``None`` where nothing was counted)."""
    steps = [s for r in records for s in r["steps"]]
    by_depth: dict[int, list[dict]] = defaultdict(list)
    for s in steps:
        by_depth[s["turn"]].append(s)

    def mean(xs: list[float]) -> float | None:
        return round(100 * sum(xs) / len(xs), 2) if xs else None

    judged = [r for r in records if "agree" in r]
    return {
        "trajectories": len(records),
        "steps": len(steps),
        **{m: mean([s[m] for s in steps]) for m in FIDELITY_METRICS},
        "by_depth": {d: {"steps": len(v), **{m: mean([s[m] for s in v]) for m in FIDELITY_METRICS}}
                     for d, v in sorted(by_depth.items())},
        "with_both_rewards": len(judged),
        "reward_agreement": mean([1.0 if r["agree"] else 0.0 for r in judged]),
        "false_success_rate": mean([1.0 if r["false_success"] else 0.0 for r in judged]),
    }


def to_markdown(summary: dict[str, Any]) -> str:
    """The report as Markdown."""
    lines = [
        "# Simulated vs real", "",
        f"{summary['trajectories']} trajectories, {summary['steps']} steps replayed in the real environment.", "",
        "| metric (×100) | value |", "|---|---:|",
        *(f"| {METRIC_LABELS[m]} | {summary[m]} |" for m in FIDELITY_METRICS),
        f"| reward agreement ({summary['with_both_rewards']} episodes with both rewards) | "
        f"{summary['reward_agreement']} |",
        f"| false success rate | {summary['false_success_rate']} |", "",
        "## Divergence by depth (×100)", "",
        "| turn | steps | " + " | ".join(METRIC_LABELS[m] for m in FIDELITY_METRICS) + " |",
        "|---:|---:|" + "---:|" * len(FIDELITY_METRICS),
    ]
    for d, v in summary["by_depth"].items():
        lines.append(f"| {d} | {v['steps']} | " + " | ".join(str(v[m]) for m in FIDELITY_METRICS) + " |")
    return "\n".join(lines) + "\n"


def wm2real(trajectories: Path, out: Path, *, concurrency: int = 1, show_progress: bool = True) -> Wm2RealResult:
    """Replay every trajectory of ``trajectories`` (a ``trajectories.jsonl``) in the real
    environment and write the report to ``out`` (resumable: ``wm2real.jsonl`` is the
    journal of :func:`lwm.jobs.run_jobs`).

    Args:
        concurrency: trajectories replayed at once (each in its own sandbox).

    Raises:
        RowFormatError: a malformed trajectory line, or one whose id an earlier line has
            (names file and line); the file cannot be read.
        DataNotFoundError: the file holds no trajectory.
        RunMismatchError: ``out`` holds the report of another trajectories file (its
            content differs: a rollout gives the same ids to the same tasks every time).
    """
    out = Path(out)
    trajs, first_line = [], {}
    for line, obj in iter_jsonl(trajectories):
        traj = parse_trajectory(obj, trajectories, line)
        if (seen := first_line.setdefault(traj.id, line)) != line:
            raise RowFormatError(trajectories, line, f"trajectory {traj.id} is already on line {seen}; ids must differ")
        trajs.append(traj)
    if not trajs:
        raise DataNotFoundError(f"{trajectories} holds no trajectory")
    out.mkdir(parents=True, exist_ok=True)
    check_run_settings(out / "wm2real_run.json",
                       {"trajectories": hashlib.sha256(Path(trajectories).read_bytes()).hexdigest()})
    report = run_jobs([(t.id, t) for t in trajs], replay_in_real, journal=out / "wm2real.jsonl",
                      concurrency=concurrency, description="wm2real", progress=show_progress, check=_record_problem)
    summary = summarize(report.ordered([t.id for t in trajs]))
    summary["failed"] = report.failures
    with_verdict = labelled(trajs, report.records)
    summary["labelled"] = len(with_verdict)
    write_atomic(out / "labelled.jsonl", "".join(dumps(t.model_dump(mode="json")) + "\n" for t in with_verdict))
    write_atomic(out / "summary.json", dumps(summary) + "\n")
    write_atomic(out / "report.md", to_markdown(summary))
    return Wm2RealResult(out, summary)
