"""Collect ground truth: play scripted episodes in real environments, twice.

Every episode is played ``runs`` times, each in a fresh sandbox. Output spans that differ
between runs are marked volatile on the first run's turns. Output directory::

    trajectories.jsonl     every run of every episode (provenance ``real``)
    {domain}_test.jsonl    AgentWorldBench rows from the first run, with volatile spans
    manifest.json          counts, failures, timings, real steps per second

Collection is resumable: finished runs are appended to ``trajectories.partial.jsonl``
as they complete and are not played again.
"""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from lwm.data.volatility import merge_spans, volatile_spans
from lwm.envs import make_real_env
from lwm.jsonl import JsonlAppender, dumps, write_atomic
from lwm.progress import progress_bar
from lwm.schema import (
    Provenance,
    Trajectory,
    Turn,
    read_trajectories,
    rows_from_trajectory,
    write_rows,
    write_trajectories,
)
from lwm.suites import Episode, load_suite


@dataclass
class CollectConfig:
    """Settings of ``lwm collect``.

    Attributes:
        out: output directory.
        domain: which domain's bundled suite to play.
        episodes: play only the first N episodes (default: all).
        extended: also play the episodes beyond the core suite.
        runs: real runs per episode (2 or more finds volatile spans).
        workers: episodes played at once (each in its own sandbox; mostly waiting, so
            more than the number of cores is fine).
    """

    out: Path
    domain: str = "terminal"
    episodes: int | None = None
    extended: bool = False
    runs: int = 2
    workers: int = 8


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


def play_episode(episode: Episode, domain: str, run: int = 0) -> Trajectory:
    """Play one scripted episode in a fresh real environment.

    Raises:
        SandboxError: the environment failed.
        ActionFormatError: an action of the script is malformed.
    """
    env = make_real_env(domain)
    t0 = time.monotonic()
    try:
        first = env.reset(episode.task)
        prov = Provenance(kind="real", source=f"{domain}/{type(env).__name__}", run=run)
        turns = []
        for i, action in enumerate(episode.actions, start=1):
            result = env.step(action)
            turns.append(Turn(index=i, action=action, observation=result.observation, provenance=prov))
            if result.done:
                break
        reward = env.verify()  # the task's real verdict, on the final state
        return Trajectory(
            id=f"{domain}/{episode.task.name}/run{run}",
            domain=domain,
            task=episode.task.instruction,
            system_prompt=env.system_prompt(),
            initial_observation=first,
            turns=turns,
            reward=reward,
            metadata={
                "episode": episode.task.name,
                "family": episode.task.family or episode.task.name,
                "tags": list(episode.tags),
                "run": run,
                "seconds": round(time.monotonic() - t0, 3),
            },
        )
    finally:
        env.close()


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
        KeyError: the domain has no bundled suite or real environment.
    """
    t0 = time.monotonic()
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    episodes = load_suite(config.domain, config.extended)[: config.episodes]
    partial = out / "trajectories.partial.jsonl"
    done: dict[str, Trajectory] = {}
    if partial.exists():
        done = {t.id: t for t in read_trajectories(partial, skip_truncated_tail=True)}
    jobs = [
        (ep, run)
        for ep in episodes
        for run in range(config.runs)
        if f"{config.domain}/{ep.task.name}/run{run}" not in done
    ]
    failed: dict[str, str] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, config.workers))
    try:
        with JsonlAppender(partial) as sink, progress_bar(
            f"collect {config.domain}", total=len(jobs), enabled=show_progress
        ) as advance:
            futures = {pool.submit(play_episode, ep, config.domain, run): (ep, run) for ep, run in jobs}
            for fut in as_completed(futures):
                ep, run = futures[fut]
                try:
                    traj = fut.result()
                except Exception as e:  # a failed run is counted and reported, never fatal
                    failed[f"{config.domain}/{ep.task.name}/run{run}"] = f"{type(e).__name__}: {e}"
                else:
                    sink.append(traj.model_dump(mode="json"))
                    done[traj.id] = traj
                advance()
    finally:
        # On Ctrl-C, queued episodes are dropped; the few running ones finish their sandbox.
        pool.shutdown(wait=True, cancel_futures=True)

    by_episode: dict[str, list[Trajectory]] = defaultdict(list)
    for traj in done.values():
        by_episode[traj.metadata["episode"]].append(traj)
    ordered = [ep.task.name for ep in episodes if ep.task.name in by_episode]
    firsts, all_runs = [], []
    for name in ordered:
        runs = sorted(by_episode[name], key=lambda t: t.metadata["run"])
        all_runs += runs
        firsts.append(mark_volatile(runs) if len(runs) > 1 else runs[0])
    rows = [row for traj in firsts for row in rows_from_trajectory(traj)]
    rows_path = out / f"{config.domain}_test.jsonl"
    write_rows(rows_path, rows)
    marked = {t.id: t for t in firsts}  # first runs are written with their volatile spans
    write_trajectories(out / "trajectories.jsonl", [marked.get(t.id, t) for t in all_runs])
    turns = sum(len(t.turns) for t in all_runs)
    play_seconds = sum(t.metadata["seconds"] for t in all_runs)  # summed: sandboxes play concurrently
    wall_seconds = time.monotonic() - t0
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
        "failed": failed,
        "wall_seconds": round(wall_seconds, 2),
        "play_seconds": round(play_seconds, 2),
        "real_steps_per_second_per_env": round(turns / play_seconds, 3) if play_seconds else None,
    }
    write_atomic(out / "manifest.json", dumps(manifest) + "\n")
    return CollectResult(rows_path, len(all_runs), len(jobs) - len(failed), turns, failed, wall_seconds)

