"""One interface, four backends: :func:`make_env`.

=========  ==================================================================================
backend    where each observation comes from
=========  ==================================================================================
real       the real sandboxed environment (``lwm.envs``); observations may be recorded into a
           replay cache
sim        the world model (:class:`~lwm.sim.env.SimEnv`)
replay     a :class:`~lwm.sim.cache.ReplayCache` only; a situation never seen raises
           :class:`CacheMissError`
hybrid     the cache, then the real environment, then the world model, per a routing rule
=========  ==================================================================================

Every backend offers the same methods (``reset``, ``step``, ``verify``, ``system_prompt``,
``snapshot``, ``restore``, ``close``) and keeps the episode as a
:class:`~lwm.schema.Trajectory` (``env.trajectory``) in which every observation carries
its provenance (``real``, ``replayed`` or ``simulated``); ``step`` also returns it in
``info["provenance"]``. Switching backends is a change of the ``backend`` argument.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from lwm.envs import make_real_env
from lwm.envs.base import EnvironmentBase, StepResult, Task
from lwm.errors import EnvironmentClosedError, LwmError, SandboxError
from lwm.models.base import ChatModel, SamplingParams
from lwm.schema import Provenance, Trajectory, Turn
from lwm.sim.cache import REAL_SOURCE, ReplayCache, cache_key
from lwm.sim.controls import Control
from lwm.sim.env import DEFAULT_SAMPLING, SimEnv

Backend = Literal["real", "sim", "replay", "hybrid"]
BACKENDS = ("real", "sim", "replay", "hybrid")


class CacheMissError(LwmError, KeyError):
    """The replay cache has no observation for this situation."""

    def __str__(self) -> str:  # KeyError's str() would quote the message
        return str(self.args[0]) if self.args else ""


def task_fingerprint(task: Task) -> str:
    """A short hash of everything a task starts from (name, files, setup, options)."""
    payload = json.dumps([task.name, task.files, list(task.setup), task.options], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


class _Recorded(EnvironmentBase):
    """Keeps the episode as a trajectory and reads/writes the cache."""

    def __init__(self, domain: str, cache: ReplayCache | None) -> None:
        self.domain = domain
        self.cache = cache
        self.task: Task | None = None
        self.trajectory: Trajectory | None = None

    def system_prompt(self) -> str:
        return self._require().system_prompt

    def _start(self, task: Task, system_prompt: str, first: str, backend: str) -> None:
        self.task = task
        self.trajectory = Trajectory(
            id=f"{self.domain}/{task.name}/{backend}", domain=self.domain, task=task.instruction,
            system_prompt=system_prompt, initial_observation=first,
            metadata={"episode": task.name, "family": task.family or task.name, "backend": backend})

    def _history(self) -> list[tuple[str, str]]:
        traj = self._require()
        return [("", traj.initial_observation)] + [(t.action, t.observation) for t in traj.turns]

    def _key(self, action: str, source: str = REAL_SOURCE, sampling: dict | None = None) -> str:
        traj = self._require()
        return cache_key(self.domain, traj.system_prompt, self._history(), action, source, sampling)

    def _reset_key(self, task: Task) -> str:
        return cache_key(self.domain, "", [], f"\0reset {task_fingerprint(task)}")

    def _save_start(self, task: Task, first: str, system_prompt: str) -> None:
        self.cache.put(self._reset_key(task), json.dumps({"observation": first, "system_prompt": system_prompt}),
                       {"kind": "real"})

    def _cached_start(self, task: Task) -> tuple[str, str] | None:
        """``(initial observation, system prompt)`` recorded for ``task``, or ``None``."""
        hit = self.cache.get(self._reset_key(task))
        if hit is None:
            return None
        start = json.loads(hit[0])
        return start["observation"], start["system_prompt"]

    def _record(self, action: str, observation: str, prov: Provenance, **info: Any) -> StepResult:
        traj = self._require()
        traj.turns.append(Turn(index=len(traj.turns) + 1, action=action, observation=observation, provenance=prov))
        return StepResult(observation, info={**info, "provenance": prov.model_dump(exclude_none=True)})

    def _record_replayed(self, action: str, hit: tuple[str, dict], source: str, **info: Any) -> StepResult:
        observation, original = hit
        prov = Provenance(kind="replayed", source=original.get("source", source),
                          sampling=original.get("sampling"), controls=original.get("controls"))
        return self._record(action, observation, prov, **info)

    def _record_real(self, real: Any, action: str, **info: Any) -> StepResult:
        """Play ``action`` in the real environment ``real``; record it (and cache it)."""
        key = self._key(action) if self.cache is not None else None
        result = real.step(action)
        prov = Provenance(kind="real", source=f"{self.domain}/{type(real).__name__}")
        if key is not None:
            self.cache.put(key, result.observation, prov.model_dump(exclude_none=True))
        out = self._record(action, result.observation, prov, **info, **result.info)
        out.reward, out.done = result.reward, result.done
        return out

    def snapshot(self) -> Trajectory:
        return self._require().model_copy(deep=True)

    def _require(self) -> Trajectory:
        if self.trajectory is None:
            raise EnvironmentClosedError("call reset() before step()")
        return self.trajectory


class RealBackendEnv(_Recorded):
    """The real environment, its observations recorded (and written to ``cache`` if given).

    Snapshots are the real environment's own (``snapshot``/``restore`` of ``lwm.envs``)."""

    def __init__(self, domain: str, *, cache: ReplayCache | None = None, **env_kwargs: Any) -> None:
        super().__init__(domain, cache)
        self.real = make_real_env(domain, **env_kwargs)

    def reset(self, task: Task | None = None) -> str:
        task = task or Task("empty")
        first = self.real.reset(task)
        self._start(task, self.real.system_prompt(), first, "real")
        if self.cache is not None:
            self._save_start(task, first, self.real.system_prompt())
        return first

    def step(self, action: str) -> StepResult:
        return self._record_real(self.real, action)

    def verify(self) -> float | None:
        reward = self.real.verify()
        self._require().reward = reward
        return reward

    def snapshot(self) -> tuple[Any, Trajectory]:
        return self.real.snapshot(), super().snapshot()

    def restore(self, snapshot: tuple[Any, Trajectory]) -> None:
        self.real.restore(snapshot[0])
        self.trajectory = snapshot[1].model_copy(deep=True)

    def close(self) -> None:
        self.real.close()


class ReplayEnv(_Recorded):
    """Observations from the cache only.

    Args:
        domain: the domain.
        cache: where observations were recorded (by the ``real``, ``sim`` or ``hybrid``
            backend).
        source: whose observations to replay: ``real`` or a world model's name.
        sampling: that model's decoding settings (part of the key), for model sources.

    Raises (from ``reset``/``step``):
        CacheMissError: the situation was never recorded.
    """

    def __init__(self, domain: str, *, cache: ReplayCache, source: str = REAL_SOURCE,
                 sampling: SamplingParams | None = None) -> None:
        super().__init__(domain, cache)
        self.source = source
        self.sampling = None if source == REAL_SOURCE else (sampling or DEFAULT_SAMPLING).to_dict()

    def reset(self, task: Task | None = None) -> str:
        task = task or Task("empty")
        start = self._cached_start(task)
        if start is None:
            raise CacheMissError(f"no recorded start for task {task.name!r} in {self.cache.path}")
        first, prompt = start
        self._start(task, prompt, first, "replay")
        return first

    def step(self, action: str) -> StepResult:
        hit = self.cache.get(self._key(action, self.source, self.sampling))
        if hit is None:
            raise CacheMissError(f"no recorded observation for turn {len(self._require().turns) + 1} of "
                                 f"{self.task.name!r} after this history (source {self.source!r})")
        return self._record_replayed(action, hit, self.source)

    def verify(self) -> float | None:
        return None  # a cache holds observations, not verdicts

    def restore(self, snapshot: Trajectory) -> None:
        self.trajectory = snapshot.model_copy(deep=True)

    def close(self) -> None:
        self.trajectory = None


Route = Literal["real-first", "sim-only"]


class HybridEnv(_Recorded):
    """The cache first, then the real environment, then the world model.

    Routing rule (``route``):

    * ``real-first``: a cache hit (real, then this model's) is replayed; on a miss the
      real environment plays the action, after catching up on the turns replayed from the
      cache; if the real environment fails (:class:`~lwm.errors.SandboxError`), or an
      earlier turn was simulated (the real state no longer matches the history), the world
      model predicts it.
    * ``sim-only``: cache hits are replayed; misses are predicted by the world model (the
      real environment is never started).

    Every real or simulated observation is written to the cache.
    """

    def __init__(self, domain: str, *, model: ChatModel, cache: ReplayCache, route: Route = "real-first",
                 sampling: SamplingParams = DEFAULT_SAMPLING, controls: tuple[Control, ...] = (),
                 **sim_kwargs: Any) -> None:
        super().__init__(domain, cache)
        if route not in ("real-first", "sim-only"):
            raise ValueError(f"unknown route {route!r} (real-first or sim-only)")
        self.route = route
        self.sim = SimEnv(domain, model, sampling=sampling, controls=controls, judge_rewards=False, **sim_kwargs)
        self.real: Any = None
        self._real_turns = 0  # turns of the history the real environment has played
        self._diverged = False  # a simulated turn: the real state no longer matches

    def reset(self, task: Task | None = None) -> str:
        task = task or Task("empty")
        self.close()
        start = self._cached_start(task)
        if start is not None:
            first, prompt = start
        elif self.route == "real-first":
            first, prompt = self._real_reset(task), self.real.system_prompt()
            self._save_start(task, first, prompt)
        else:
            self.sim.reset(task)
            first, prompt = self.sim.trajectory.initial_observation, self.sim.trajectory.system_prompt
        self._start(task, prompt, first, "hybrid")
        self._real_turns, self._diverged = 0, False
        return first

    def step(self, action: str) -> StepResult:
        for source, sampling in ((REAL_SOURCE, None), (self.sim.model.name, self.sim.sampling.to_dict())):
            hit = self.cache.get(self._key(action, source, sampling))
            if hit is not None:
                if source != REAL_SOURCE:
                    self._diverged = True
                return self._record_replayed(action, hit, source, route="cache")
        failure = None
        if self.route == "real-first" and not self._diverged:
            try:
                return self._real_step(action)
            except SandboxError as e:
                failure = f"{type(e).__name__}: {e}"
        return self._sim_step(action, failure)

    def _real_reset(self, task: Task) -> str:
        if self.real is None:
            self.real = make_real_env(self.domain)
        return self.real.reset(task)

    def _catch_up(self) -> None:
        """Start the real environment if needed and play the turns it has not played (those
        replayed from the cache), so that its state matches the history."""
        traj = self._require()
        if self.real is None:
            self._real_reset(self.task)
        for turn in traj.turns[self._real_turns:]:
            self.real.step(turn.action)
        self._real_turns = len(traj.turns)

    def _real_step(self, action: str) -> StepResult:
        self._catch_up()
        out = self._record_real(self.real, action, route="real")
        self._real_turns += 1
        return out

    def _sim_step(self, action: str, failure: str | None) -> StepResult:
        traj = self._require()
        key = self._key(action, self.sim.model.name, self.sim.sampling.to_dict())
        self.sim.restore(traj)
        result = self.sim.step(action)
        observation = result.observation
        prov = Provenance.model_validate(result.info["provenance"])
        self.cache.put(key, observation, prov.model_dump(exclude_none=True))
        self._diverged = True
        info = {k: v for k, v in result.info.items() if k != "provenance"}
        if failure:
            info["real_failure"] = failure
        out = self._record(action, observation, prov, route="sim", **info)
        out.done = result.done
        return out

    def verify(self) -> float | None:
        """The real verifier when every observation of the episode is real (played, or
        replayed from real recordings: the real environment then catches up on the
        actions first), with ``real-first``; else the reward model's judgement."""
        traj = self._require()
        if self.route == "real-first" and not self._diverged:
            self._catch_up()
            traj.reward = self.real.verify()
        else:
            self.sim.restore(traj)
            self.sim.task = self.task
            traj.reward = self.sim.verify()
        return traj.reward

    def restore(self, snapshot: Trajectory) -> None:
        """Continue from a snapshot; the real environment replays it when next needed."""
        self.trajectory = snapshot.model_copy(deep=True)
        if self.real is not None:
            self.real.close()
            self.real = None
        self._real_turns = 0
        # Model-written turns (simulated, or replayed from the model's cache entries, which
        # carry sampling settings) mean the real environment cannot take over again.
        self._diverged = any(t.provenance.kind == "simulated" or t.provenance.sampling is not None
                             for t in self.trajectory.turns)

    def close(self) -> None:
        if self.real is not None:
            self.real.close()
            self.real = None


def make_env(domain: str, backend: Backend = "real", *, model: ChatModel | None = None,
             cache: ReplayCache | str | None = None, sampling: SamplingParams = DEFAULT_SAMPLING,
             controls: tuple[Control, ...] = (), **kwargs: Any):
    """An environment of ``domain`` with the chosen backend.

    Args:
        domain: e.g. ``terminal``, ``db``.
        backend: ``real``, ``sim``, ``replay`` or ``hybrid`` (see the module docstring).
        model: the world model (``sim``, ``hybrid``; and ``replay`` of its observations).
        cache: a :class:`ReplayCache` or its path (``replay``, ``hybrid``; optional for
            ``real``, which then records into it).
        sampling: the world model's decoding settings.
        controls: simulation controls (``sim``, ``hybrid``).
        kwargs: passed on (``route`` for ``hybrid``, ``source`` for ``replay``, the real
            environment's options for ``real``, :class:`SimEnv` options for ``sim``).

    Raises:
        ValueError: unknown backend, or a backend's required argument missing.
        KeyError: unknown domain.
    """
    if isinstance(cache, (str, bytes)) or hasattr(cache, "__fspath__"):
        cache = ReplayCache(cache)
    if backend == "real":
        return RealBackendEnv(domain, cache=cache, **kwargs)
    if backend == "sim":
        if model is None:
            raise ValueError("the sim backend needs a world model (model=load_model('embedded-warmup'))")
        return SimEnv(domain, model, sampling=sampling, controls=controls, **kwargs)
    if backend == "replay":
        if cache is None:
            raise ValueError("the replay backend needs a cache")
        source = kwargs.pop("source", model.name if model is not None else REAL_SOURCE)
        return ReplayEnv(domain, cache=cache, source=source, sampling=sampling, **kwargs)
    if backend == "hybrid":
        if model is None or cache is None:
            raise ValueError("the hybrid backend needs a world model and a cache")
        return HybridEnv(domain, model=model, cache=cache, sampling=sampling, controls=controls, **kwargs)
    raise ValueError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})")
