"""Rollouts: a policy plays N episodes against any backend, with bounded concurrency.

Output directory::

    trajectories.jsonl           every episode, with its reward and provenance per turn
    trajectories.partial.jsonl   episodes appended as they finish (resume reads it)
    manifest.json                settings, counts, mean reward, failures, timings

Tasks come from the domain's bundled suite, cycled (``group_size`` episodes per task in a
row, for group-relative RL). With ``ray=True`` every episode is a Ray task: the same code
runs on a local Ray instance or a cluster (``ray.init(address=...)`` first).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lwm.envs.base import Task
from lwm.jsonl import JsonlAppender, check_run_settings, dumps, write_atomic
from lwm.models import WORLD_MODEL, judge_for
from lwm.progress import progress_bar
from lwm.schema import Trajectory, read_trajectories, write_trajectories
from lwm.suites import load_suite


@dataclass
class RolloutConfig:
    """Settings of ``lwm rollout``.

    Attributes:
        out: output directory (re-run with the same one to resume).
        domain: the domain; tasks come from its bundled suite.
        backend: ``real``, ``sim``, ``replay`` or ``hybrid``.
        episodes: episodes to play.
        group_size: episodes per task in a row.
        policy: ``scripted`` (the suite's own actions) or a model for an LLM agent
            (``embedded`` or a name served at ``policy_base_url``).
        policy_base_url: the agent's OpenAI-compatible endpoint.
        world_model: the world model (``sim``/``hybrid``): ``embedded-warmup`` (the
            embedded model with the shipped warm-up adapter; the base model then judges the
            rewards of ``sim``), ``embedded`` (base) or a name served at ``base_url``.
        base_url: the world model's endpoint.
        api_key: key for both endpoints.
        cache: replay cache file (``replay``, ``hybrid``; ``real`` records into it).
        route: ``hybrid`` routing rule.
        controls: simulation control labels (e.g. ``empty``, ``error:disk full``).
        max_turns: turns per episode at most.
        verified_only: only tasks with a real verifier (to measure reward agreement).
        concurrency: episodes played at once.
        ray: run episodes as Ray tasks.
    """

    out: Path
    domain: str = "terminal"
    backend: str = "sim"
    episodes: int = 8
    group_size: int = 1
    policy: str = "scripted"
    policy_base_url: str | None = None
    world_model: str = WORLD_MODEL
    base_url: str | None = None
    api_key: str = "EMPTY"
    cache: Path | None = None
    route: str = "real-first"
    controls: tuple[str, ...] = ()
    max_turns: int = 20
    verified_only: bool = False
    concurrency: int = 4
    ray: bool = False

    def settings(self) -> dict[str, Any]:
        """What makes two runs the same run (recorded; a resume must match)."""
        d = asdict(self)
        d.pop("out"), d.pop("concurrency"), d.pop("ray"), d.pop("api_key")
        d["cache"] = str(self.cache) if self.cache else None
        d["controls"] = list(self.controls)
        return d


@dataclass
class RolloutResult:
    """What a rollout produced: counts, mean reward over rewarded episodes, failures."""

    path: Path
    episodes: int
    played: int
    mean_reward: float | None
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


_models: dict[tuple, Any] = {}
_models_lock = threading.Lock()


def _model(name: str, base_url: str | None, api_key: str):
    """One instance per model and process, loaded once even when episodes start together
    (llama.cpp's loader redirects the process's stdout/stderr while it runs: two at once
    can leave them pointing at /dev/null)."""
    from lwm.models import load_model

    key = (name, base_url, api_key)
    with _models_lock:
        if key not in _models:
            _models[key] = load_model(name, base_url=base_url, api_key=api_key)
        return _models[key]


def play(settings: dict[str, Any], task_data: dict[str, Any], episode_id: str,
         api_key: str = "EMPTY") -> dict[str, Any]:
    """Play one episode; returns the trajectory as JSON-ready data (what a Ray task returns).
    ``settings`` are :meth:`RolloutConfig.settings` (the key travels apart: it is not recorded).

    Raises:
        whatever the environment, the policy or the world model raises.
    """
    from lwm.sim.backends import make_env
    from lwm.sim.controls import Control
    from lwm.sim.policy import ChatPolicy, ScriptedPolicy

    s = settings
    task = Task.from_dict(task_data)
    if s["policy"] == "scripted":
        policy = ScriptedPolicy(load_suite(s["domain"], extended=True))
    else:
        policy = ChatPolicy(_model(s["policy"], s["policy_base_url"], api_key))
    kwargs: dict[str, Any] = {}
    if s["backend"] in ("sim", "hybrid", "replay") and not (s["backend"] == "replay" and s["world_model"] == "real"):
        kwargs["model"] = _model(s["world_model"], s["base_url"], api_key)
    if s["backend"] in ("sim", "hybrid"):
        kwargs["controls"] = tuple(Control.parse(c) for c in s["controls"])
    if s["backend"] == "sim":
        kwargs["max_turns"] = s["max_turns"]
        if judge := judge_for(s["world_model"]):
            kwargs["reward_model"] = _model(judge, None, api_key)
    if s["backend"] == "hybrid":
        kwargs["route"] = s["route"]
    if s["backend"] == "replay" and s["world_model"] == "real":
        kwargs["source"] = "real"
    env = make_env(s["domain"], s["backend"], cache=s["cache"], **kwargs)
    t0 = time.monotonic()
    try:
        env.reset(task)
        for _ in range(s["max_turns"]):
            action = policy.act(task, env.trajectory)
            if action is None or env.step(action).done:
                break
        env.verify()
        traj = env.trajectory.model_copy(deep=True)
    finally:
        env.close()
    traj.id = episode_id
    traj.metadata.update({"policy": policy.name, "backend": s["backend"], "task_spec": task.to_dict(),
                          "seconds": round(time.monotonic() - t0, 3)})
    return traj.model_dump(mode="json")


def _jobs(config: RolloutConfig) -> list[tuple[str, Task]]:
    tasks = [e.task for e in load_suite(config.domain) if e.task.check or not config.verified_only]
    group = max(1, config.group_size)
    out = []
    for i in range(config.episodes):
        task = tasks[(i // group) % len(tasks)]
        out.append((f"{config.domain}/{task.name}/ep{i}", task))
    return out


def rollout(config: RolloutConfig, *, show_progress: bool = True) -> RolloutResult:
    """Play ``config.episodes`` episodes; write trajectories and a manifest (resumable).

    Raises:
        KeyError: unknown domain.
        ValueError: bad backend settings.
        RunMismatchError: ``out`` holds a rollout with other settings.
    """

    t0 = time.monotonic()
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = config.settings()
    check_run_settings(out / "rollout.json", settings)
    jobs = _jobs(config)
    partial = out / "trajectories.partial.jsonl"
    done: dict[str, Trajectory] = {}
    if partial.exists():
        done = {t.id: t for t in read_trajectories(partial, skip_truncated_tail=True)}
    todo = [(eid, task) for eid, task in jobs if eid not in done]
    failed: dict[str, str] = {}
    with JsonlAppender(partial) as sink, progress_bar(f"rollout {config.domain}/{config.backend}", len(todo),
                                                      show_progress) as advance:
        for eid, result in _run(todo, settings, config):
            if isinstance(result, BaseException):
                failed[eid] = f"{type(result).__name__}: {result}"
            else:
                sink.append(result)
                done[eid] = Trajectory.model_validate(result)
            advance()
    ordered = [done[eid] for eid, _ in jobs if eid in done]
    write_trajectories(out / "trajectories.jsonl", ordered)
    rewards = [t.reward for t in ordered if t.reward is not None]
    mean = round(sum(rewards) / len(rewards), 4) if rewards else None
    steps = sum(len(t.turns) for t in ordered)
    seconds = sum(t.metadata.get("seconds", 0) for t in ordered)
    write_atomic(out / "manifest.json", dumps({
        **settings, "episodes_done": len(ordered), "rewarded": len(rewards), "mean_reward": mean,
        "steps": steps, "steps_per_second_per_env": round(steps / seconds, 3) if seconds else None,
        "failed": failed}) + "\n")
    return RolloutResult(out / "trajectories.jsonl", len(ordered), len(todo) - len(failed), mean, failed,
                         time.monotonic() - t0)


def _run(todo: list[tuple[str, Task]], settings: dict[str, Any], config: RolloutConfig):
    """Yield ``(episode id, trajectory data or exception)`` as episodes finish."""
    if config.ray:
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=config.concurrency, include_dashboard=False, log_to_driver=False)
        remote = ray.remote(play)
        pending = {remote.remote(settings, task.to_dict(), eid, config.api_key): eid for eid, task in todo}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            eid = pending.pop(ready[0])
            try:
                yield eid, ray.get(ready[0])
            except Exception as e:  # a failed episode is counted, never fatal
                yield eid, e
        return
    pool = ThreadPoolExecutor(max_workers=max(1, config.concurrency))
    try:
        futures = {pool.submit(play, settings, task.to_dict(), eid, config.api_key): eid for eid, task in todo}
        for fut in as_completed(futures):
            try:
                yield futures[fut], fut.result()
            except Exception as e:  # a failed episode is counted, never fatal
                yield futures[fut], e
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
