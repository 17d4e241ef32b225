"""Collect ground truth: play scripted episodes in real environments, twice.

The episodes are the domain's bundled suite, or with ``explore`` its seeded exploration
episodes (many short random ones, for training data).

Every scripted episode of the domain's suite is played ``runs`` times, each in a fresh
sandbox: a rollout of the scripted policy on the real backend
(:func:`lwm.envs.episode.play_episode` on :class:`lwm.envs.recorded.RealBackendEnv`), run
by the job engine (:mod:`lwm.jobs`). Output spans that differ between runs are marked
volatile on the first run's turns. Output directory::

    trajectories.jsonl     every run of every episode (provenance ``real``)
    {domain}_test.jsonl    AgentWorldBench rows from the first run, with volatile spans
    manifest.json          counts, failures, timings, real steps per second

Collection is resumable: finished runs are appended to ``trajectories.partial.jsonl``
as they complete and are not played again.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from lwm import domains
from lwm.data.volatility import merge_spans, volatile_spans
from lwm.envs.episode import Script, ScriptedPolicy, play_episode
from lwm.envs.recorded import RealBackendEnv
from lwm.jobs import run_jobs
from lwm.jsonl import check_run_settings, dumps, write_atomic
from lwm.schema import Trajectory, rows_from_trajectory, write_rows, write_trajectories


@dataclass
class CollectConfig:
    """Settings of ``lwm collect``.

    Attributes:
        out: output directory.
        domain: which domain's bundled suite to play.
        episodes: play only the first N episodes (default: all).
        extended: also play the episodes beyond the core suite.
        names: play only the episodes of these names (after ``episodes``).
        explore: play this many seeded exploration episodes (random files, everyday
            actions; family ``explore``) instead of the suite: training data at scale.
        seed: which exploration episodes ``explore`` plays (the same seed, the same
            episodes; default 0).
        runs: real runs per episode (2 or more finds volatile spans).
        workers: episodes played at once (each in its own sandbox; mostly waiting, so
            more than the number of cores is fine).
    """

    out: Path
    domain: str = "terminal"
    episodes: int | None = None
    extended: bool = False
    names: tuple[str, ...] | None = None
    runs: int = 2
    workers: int = 8
    explore: int | None = None
    seed: int | None = None


@dataclass
class CollectResult:
    """What a collection produced.

    Attributes:
        rows_path: the AgentWorldBench rows file.
        trajectories: number of trajectories (episodes × runs) written.
        played: runs played by this invocation (the others were already done).
        turns: real steps taken (all runs).
        failed: ``{trajectory id: error}`` for runs that could not be played.
        seconds: wall-clock time of this invocation.
    """

    rows_path: Path
    trajectories: int
    played: int
    turns: int
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def play_script(script: Script, domain: str, run: int = 0) -> Trajectory:
    """Play one scripted episode in a fresh real environment of ``domain``.

    Raises:
        UnknownDomainError, NoRealEnvironmentError: no such domain, or none runnable here.
        SandboxError: the environment failed.
        ActionFormatError: an action of the script is malformed.
    """
    env = RealBackendEnv(domain, domains.get(domain).make_env(), run=run)
    traj = play_episode(env, ScriptedPolicy([script]), script.task, max_turns=len(script.actions),
                        episode_id=f"{domain}/{script.task.name}/run{run}")
    traj.metadata.update({"tags": list(script.tags), "run": run})
    return traj


def mark_volatile(runs: list[Trajectory]) -> Trajectory:
    """The first run, with every turn's ``volatile`` spans set from its differences with
    the other runs. Turns beyond the shortest run are kept unmarked."""
    base = runs[0].model_copy(deep=True)
    for i, turn in enumerate(base.turns):
        others = [r.turns[i].observation for r in runs[1:] if i < len(r.turns)]
        turn.volatile = merge_spans(*(volatile_spans(turn.observation, o) for o in others))
    return base


def collect(config: CollectConfig, *, show_progress: bool = True) -> CollectResult:
    """Play the domain's suite and write trajectories, rows and a manifest.

    Raises:
        UnknownDomainError, NoRealEnvironmentError: no such domain, or no real environment
            (or suite) for it here.
        ValueError: ``seed`` without ``explore``, or ``explore`` with ``extended``; a domain
            with no exploration episodes.
        RunMismatchError: ``out`` holds a collection of another domain or other episodes
            (the suite, or another seed's exploration), which this one would replace.
        RowFormatError: the journal of an earlier run is corrupt.
    """
    out = Path(config.out)
    if config.explore is None and config.seed is not None:
        raise ValueError("--seed chooses exploration episodes: give --explore N too")
    if config.explore is not None and config.extended:
        raise ValueError("--extended adds the suite's other episodes; --explore plays generated ones instead: "
                         "give one of them")
    spec = domains.get(config.domain)
    seed = config.seed or 0
    # an unknown domain or one with no suite fails before --out is made
    if config.explore is not None:  # episode i is the same whatever n is: generate no more than played
        scripts = spec.explore_scripts(seed, min(config.explore, config.episodes or config.explore))
    else:
        scripts = spec.scripts(config.extended)[: config.episodes]
    out.mkdir(parents=True, exist_ok=True)
    # one collection per directory: its files are rewritten from the episodes asked for now
    check_run_settings(out / "collect.json", {"domain": config.domain, "explore_seed": seed
                                              if config.explore is not None else None})
    if config.names is not None:
        scripts = [s for s in scripts if s.task.name in config.names]
    items = [(f"{config.domain}/{s.task.name}/run{run}", (s, run)) for s in scripts for run in range(config.runs)]
    report = run_jobs(items, lambda job: play_script(job[0], config.domain, job[1]).model_dump(mode="json"),
                      journal=out / "trajectories.partial.jsonl", concurrency=config.workers,
                      description=f"collect {config.domain}", progress=show_progress)

    by_episode: dict[str, list[Trajectory]] = defaultdict(list)
    for record in report.ordered([i for i, _ in items]):
        traj = Trajectory.model_validate(record)
        by_episode[traj.metadata["episode"]].append(traj)
    ordered = [s.task.name for s in scripts if s.task.name in by_episode]
    firsts, all_runs = [], []
    for name in ordered:
        runs = sorted(by_episode[name], key=lambda t: t.metadata["run"])
        all_runs += runs
        firsts.append(mark_volatile(runs) if len(runs) > 1 else runs[0])
    rows = [row for traj in firsts for row in rows_from_trajectory(traj, action_lang=spec.action_lang)]
    rows_path = out / f"{config.domain}_test.jsonl"
    write_rows(rows_path, rows)
    marked = {t.id: t for t in firsts}  # first runs are written with their volatile spans
    write_trajectories(out / "trajectories.jsonl", [marked.get(t.id, t) for t in all_runs])
    turns = sum(len(t.turns) for t in all_runs)
    play_seconds = sum(t.metadata["seconds"] for t in all_runs)  # summed: sandboxes play concurrently
    manifest = {
        "domain": config.domain,
        "episodes": len(ordered),
        "runs_per_episode": config.runs,
        "trajectories": len(all_runs),
        "rows": len(rows),
        "real_steps": turns,
        "turns_with_volatile_spans": sum(1 for t in firsts for turn in t.turns if turn.volatile),
        "verified_episodes": sum(1 for t in firsts if t.reward is not None),
        "achieved_episodes": sum(1 for t in firsts if t.reward == 1.0),
        "failed": report.failures,
        "failures_by_reason": report.failures_by_reason(),
        "wall_seconds": round(report.seconds, 2),
        "play_seconds": round(play_seconds, 2),
        "real_steps_per_second_per_env": round(turns / play_seconds, 3) if play_seconds else None,
    }
    write_atomic(out / "manifest.json", dumps(manifest) + "\n")
    return CollectResult(rows_path, len(all_runs), report.ran - len(report.failures), turns, report.failures,
                         report.seconds)
