"""Rollouts: a policy plays N episodes against any backend, with bounded concurrency.

Output directory::

    trajectories.jsonl           every episode, with its reward and provenance per turn
    trajectories.partial.jsonl   episodes appended as they finish (resume reads it)
    manifest.json                settings, counts, mean reward, failures, timings

Tasks come from the domain's bundled suite, cycled (``group_size`` episodes per task in a
row, for group-relative RL). On the ``sim`` backend the episodes run on one event loop,
``concurrency`` of them in flight (a thousand and more against one OpenAI-compatible
server); the other backends play them on threads. With ``ray=True`` every episode is a
Ray task: the same code runs on a local Ray instance or a cluster (``ray.init(address=...)``
first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from lwm import domains
from lwm.envs.base import Task
from lwm.envs.episode import Script, ScriptedPolicy, aplay_episode, play_episode
from lwm.errors import EpisodeBrokenError
from lwm.jobs import arun_jobs, run_jobs
from lwm.jsonl import check_run_settings, dumps, write_atomic
from lwm.loop import run_sync
from lwm.models import WORLD_MODEL, ModelSpec, prompt_cache_mb
from lwm.prediction import request_settings
from lwm.schema import Trajectory, write_trajectories
from lwm.sim.backends import BackendSpec, EnvFactory, backend_spec, sim_request
from lwm.sim.controls import Control
from lwm.sim.env import DEFAULT_REWARD, DEFAULT_SAMPLING
from lwm.sim.policy import PolicySpec


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
            rewards of ``sim``), ``embedded`` (base) or a name served at ``base_url``; for
            ``replay``, whose recorded observations to replay: ``real`` (the default of the
            command) or a world model's name.
        base_url: the world model's endpoint.
        api_key: key for both endpoints.
        cache: replay cache file (``replay``, ``hybrid``; ``real`` records into it).
        route: ``hybrid`` routing rule: ``real-first`` (cache, then the real environment,
            then the world model) or ``sim-only`` (cache, then the world model).
        controls: simulation control labels (e.g. ``empty``, ``error:disk full``).
        max_turns: turns per episode at most.
        reward: ``sim``: where the verdict comes from: ``verdict`` (the trained reward model's
            P(achieved)), ``probe`` (the world model predicts the task's verifier probe),
            ``judge`` (a free-form judge reads the episode) or ``auto`` (the probe for tasks
            with a verifier, else the verdict).
        verified_only: only tasks with a real verifier (to measure reward agreement).
        concurrency: episodes played at once.
        ray: run episodes as Ray tasks.
        prediction: ``sim``: what the world model is asked to write, ``full`` or
            ``change`` (:mod:`lwm.prediction`); default: the model's own (the shipped adapter's
            record says ``change``), ``full`` for a model behind ``base_url``.
        compact_tools: ``sim``: tool lists as one-line signatures in the system prompt;
            default: the model's own (yes for the shipped adapter), no behind ``base_url``.
        real_start: ``sim``: start each episode from the real environment's initial
            observation for its task (one real reset per task, cached in
            ``$LWM_HOME/starts.sqlite``; no real step) instead of one the world model writes.
            The embedded model was never trained to write starts: its web starts have no tree.
        extra_body: fields added to each request to the world model's server
            (``base_url``), e.g. ``{"repeat_penalty": 1.0}``: llama-cpp-python's server
            applies a repeat penalty of 1.1 unless told, the in-process model none. Part of
            the world model's sampling settings, so a replay cache keys on it.
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
    reward: str = DEFAULT_REWARD
    verified_only: bool = False
    concurrency: int = 4
    ray: bool = False
    prediction: str | None = None
    compact_tools: bool | None = None
    real_start: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)

    def settings(self) -> dict[str, Any]:
        """What makes two runs the same run (recorded; a resume must match): the settings
        the backend uses."""
        d = asdict(self)
        for key in ("out", "concurrency", "ray", "api_key", *_unused(backend_spec(self.backend))):
            d.pop(key, None)
        if "cache" in d:
            d["cache"] = str(self.cache) if self.cache else None
        if "controls" in d:
            d["controls"] = list(self.controls)
        for key in ("real_start", "extra_body"):  # left out when off: runs recorded before they existed resume
            if not d.get(key, True):
                d.pop(key)
        return d


def _unused(backend: BackendSpec) -> list[str]:
    """The settings ``backend`` does not use (left out of a run's record)."""
    unused = []
    if not (backend.simulates or backend.replays):  # no model to simulate, or whose cache to replay
        unused += ["world_model", "base_url", "extra_body"]
    if not backend.simulates:
        unused.append("controls")
    if not (backend.simulates and backend.plays_real):  # routing chooses between the two
        unused.append("route")
    if not backend.all_simulated:
        unused += ["reward", "prediction", "compact_tools", "real_start"]
    if not (backend.replays or backend.plays_real):  # a cache is replayed, or records real observations
        unused.append("cache")
    return unused


@dataclass
class RolloutResult:
    """What a rollout produced: counts, mean reward over rewarded episodes, failures."""

    path: Path
    episodes: int
    played: int
    mean_reward: float | None
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to play: picklable, so that a Ray worker can run it (``job()``).

    Attributes:
        factory: the environment.
        policy: the agent.
        task: the task.
        episode_id: the trajectory's id.
        max_turns: steps at most.
        scripts: what a ``scripted`` policy plays (default: the domain's suite).
        metadata: added to the trajectory's metadata.
    """

    factory: EnvFactory
    policy: PolicySpec
    task: Task
    episode_id: str
    max_turns: int
    scripts: tuple[Script, ...] = ()
    metadata: tuple[tuple[str, Any], ...] = ()

    def __call__(self) -> dict[str, Any]:
        """The episode's record; an episode whose action broke its sandbox is recorded as a
        failure (``metadata["broken"]``), not dropped."""
        policy = self.policy.make(self.factory.domain, self.scripts)
        try:
            traj = play_episode(self.factory(), policy, self.task, max_turns=self.max_turns,
                                episode_id=self.episode_id, metadata=self._metadata())
        except EpisodeBrokenError as e:
            traj = e.trajectory
        return self._record(traj, policy)

    async def arun(self) -> dict[str, Any]:
        """The episode on the running event loop (see :func:`~lwm.envs.episode.aplay_episode`)."""
        policy = self.policy.make(self.factory.domain, self.scripts)
        try:
            traj = await aplay_episode(self.factory(), policy, self.task, max_turns=self.max_turns,
                                       episode_id=self.episode_id, metadata=self._metadata())
        except EpisodeBrokenError as e:
            traj = e.trajectory
        return self._record(traj, policy)

    def _metadata(self) -> dict[str, Any]:
        return {"backend": self.factory.backend, "task_spec": self.task.to_dict(), **dict(self.metadata)}

    @staticmethod
    def _record(traj, policy) -> dict[str, Any]:
        if (record := getattr(policy, "record", None)) is not None:  # what an LLM agent wrote
            traj.metadata.update(record())
        return traj.model_dump(mode="json")


def _play(job: EpisodeJob) -> dict[str, Any]:
    return job()


def play_for_real(domain: str, task: Task, actions: Sequence[str]) -> Trajectory:
    """``actions`` played in order in a fresh real environment of ``domain`` from ``task``'s
    start, then the real verifier: what a simulated episode's actions really do (``lwm
    agent eval --backend sim``'s replay, ``lwm wm2real``).

    Returns:
        the real episode, its ``reward`` the real verdict (``None``: the task has no
        verifier). A malformed action is answered as the real environment answers it; an
        action that breaks the sandbox ends the episode as a failure (reward 0,
        ``metadata["broken"]``).

    Raises:
        NoRealEnvironmentError, SandboxError: as the real environment, at its reset.
    """
    from lwm.envs.recorded import RealBackendEnv

    env = RealBackendEnv(domain, domains.get(domain).make_env())
    task = replace(task, options={k: v for k, v in task.options.items() if k != "max_turns"})  # every action
    try:
        return play_episode(env, ScriptedPolicy([Script(task, tuple(actions))]), task, max_turns=len(actions))
    except EpisodeBrokenError as e:
        return e.trajectory


def _tasks(config: RolloutConfig) -> list[tuple[str, Task]]:
    tasks = [e.task for e in domains.get(config.domain).scripts() if e.task.check or not config.verified_only]
    group = max(1, config.group_size)
    out = []
    for i in range(config.episodes):
        task = tasks[(i // group) % len(tasks)]
        out.append((f"{config.domain}/{task.name}/ep{i}", task))
    return out


def env_factory_for(config: RolloutConfig) -> EnvFactory:
    """The environments a rollout plays in (checked here, once)."""
    model, backend = None, backend_spec(config.backend)
    if backend.needs_world_model(config.world_model):
        model = ModelSpec(config.world_model, base_url=config.base_url, api_key=config.api_key,
                          concurrency=max(16, config.concurrency),  # a request in flight per episode
                          prompt_cache_mb=prompt_cache_mb(config.concurrency))
    if config.extra_body and (model is None or config.base_url is None):
        asked = ("the in-process world model takes none" if model is not None else
                 "a replay of real observations asks none" if backend.cache_only else
                 f"the {config.backend} backend asks none")
        raise ValueError(f"extra_body (--extra-body) goes to a world model's server (base_url); {asked}")
    if config.real_start and not backend.all_simulated:
        raise ValueError(f"real_start (--real-start) starts simulated episodes; the {config.backend} backend "
                         "simulates none")
    return EnvFactory(config.domain, config.backend, model=model, cache=str(config.cache) if config.cache else None,
                      controls=tuple(Control.parse(c) for c in config.controls), route=config.route,
                      source="real" if backend.cache_only and config.world_model == "real" else None,
                      max_turns=config.max_turns, options=_sim_options(config),
                      sampling=replace(DEFAULT_SAMPLING, extra_body=dict(config.extra_body)))


def _sim_options(config: RolloutConfig) -> dict[str, Any]:
    """The :class:`~lwm.sim.env.SimEnv` settings of a ``sim`` rollout."""
    request = sim_request(config.backend, config.prediction, config.compact_tools)
    return {"reward": config.reward, "real_start": config.real_start, **request} \
        if backend_spec(config.backend).all_simulated else request


def rollout(config: RolloutConfig, *, show_progress: bool = True) -> RolloutResult:
    """Play ``config.episodes`` episodes; write trajectories and a manifest (resumable).

    Raises:
        UnknownDomainError: unknown domain.
        ValueError: bad backend settings, an unknown control, or a reference predictor's
            name as a model.
        ModelUnavailableError: the policy's or the world model's weights or server are missing.
        RunMismatchError: ``out`` holds a rollout with other settings.
    """
    out = Path(config.out)
    factory = env_factory_for(config)  # refuses an unknown backend first
    # Fail before any episode starts (a missing model file, a reference predictor's name …);
    # the models are loaded once per process, so the episodes of this process share them.
    policy = PolicySpec(config.policy, config.policy_base_url, config.api_key)
    policy.make(config.domain)
    world = factory.world_model()
    out.mkdir(parents=True, exist_ok=True)
    # recorded as the model is asked (a run from before these settings was asked so)
    simulated = backend_spec(config.backend).all_simulated
    asked = request_settings(world, config.prediction, config.compact_tools) if simulated else {}
    settings = config.settings() | asked
    check_run_settings(out / "rollout.json", settings, defaults=asked)
    tasks = _tasks(config)
    items = [(eid, EpisodeJob(factory, policy, task, eid, config.max_turns)) for eid, task in tasks]
    journal, label = out / "trajectories.partial.jsonl", f"rollout {config.domain}/{config.backend}"
    if simulated and not config.ray:  # many episodes in flight on one event loop
        report = run_sync(arun_jobs(items, EpisodeJob.arun, journal=journal, concurrency=config.concurrency,
                                    description=label, progress=show_progress))
    else:
        report = run_jobs(items, _play, journal=journal, concurrency=config.concurrency, description=label,
                          progress=show_progress, executor="ray" if config.ray else "threads")
    ordered = [Trajectory.model_validate(r) for r in report.ordered([eid for eid, _ in tasks])]
    write_trajectories(out / "trajectories.jsonl", ordered)
    rewards = [t.reward for t in ordered if t.reward is not None]
    mean = round(sum(rewards) / len(rewards), 4) if rewards else None
    steps = sum(len(t.turns) for t in ordered)
    seconds = sum(t.metadata.get("seconds", 0) for t in ordered)
    write_atomic(out / "manifest.json", dumps({
        **settings, "episodes_done": len(ordered), "rewarded": len(rewards), "mean_reward": mean,
        "steps": steps, "steps_per_second_per_env": round(steps / seconds, 3) if seconds else None,
        "failed": report.failures, "failures_by_reason": report.failures_by_reason()}) + "\n")
    return RolloutResult(out / "trajectories.jsonl", len(ordered), report.ran - len(report.failures), mean,
                         report.failures, report.seconds)
