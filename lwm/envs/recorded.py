"""Environments that keep their episode as a trajectory: the real environment recorded
(:class:`RealBackendEnv`) and observations replayed from a cache (:class:`ReplayEnv`).

Both are backends of :func:`lwm.sim.make_env` (``real``, ``replay``); collection plays
scripted episodes on :class:`RealBackendEnv` (``lwm.data.collect``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lwm.envs.base import EnvironmentBase, RealEnvironment, StepResult, Task, invalid_action
from lwm.envs.cache import REAL_SOURCE, ReplayCache, cache_key
from lwm.errors import ActionFormatError, CacheMissError, EnvironmentClosedError
from lwm.schema import Provenance, Trajectory, Turn


def task_fingerprint(task: Task) -> str:
    """A short hash of everything a task starts from (name, files, setup, options)."""
    payload = json.dumps([task.name, task.files, list(task.setup), task.options], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


class RecordedEnv(EnvironmentBase):
    """An environment that keeps its episode as a :class:`~lwm.schema.Trajectory`
    (``self.trajectory``, every observation with its provenance) and reads or writes a
    replay cache. The backends of :func:`lwm.sim.make_env` build on it."""

    def __init__(self, domain: str, cache: ReplayCache | None, run: int | None = None) -> None:
        self.domain = domain
        self.cache = cache
        self.run = run
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

    def _record(self, action: str, observation: str, prov: Provenance, /, **info: Any) -> StepResult:
        traj = self._require()
        traj.turns.append(Turn(index=len(traj.turns) + 1, action=action, observation=observation, provenance=prov))
        return StepResult(observation, info={**info, "provenance": prov.model_dump(exclude_none=True)})

    def _record_replayed(self, action: str, hit: tuple[str, dict], source: str, **info: Any) -> StepResult:
        observation, original = hit
        prov = Provenance(kind="replayed", source=original.get("source", source),
                          sampling=original.get("sampling"), controls=original.get("controls"))
        return self._record(action, observation, prov, **info)

    def _record_real(self, real: Any, action: str, **info: Any) -> StepResult:
        """Play ``action`` in the real environment ``real``; record it (and cache it). An
        action the environment refuses as malformed (``ActionFormatError``) reaches nothing
        and is answered ``[invalid action] <reason>`` (``info["action_error"]``), as the
        tool-call domains answer: an agent's garbage is a turn, not a crash (the simulator
        answers it the same: :meth:`lwm.domains.base.Domain.refusal`)."""
        key = self._key(action) if self.cache is not None else None
        try:
            result = real.step(action)
        except ActionFormatError as e:
            result = StepResult(invalid_action(e.reason, ""), info={"action_error": e.reason})
        prov = Provenance(kind="real", source=f"{self.domain}/{type(real).__name__}", run=self.run)
        if key is not None:
            self.cache.put(key, result.observation, prov.model_dump(exclude_none=True))
        out = self._record(action, result.observation, prov, **{**info, **result.info})  # any keys an env reports
        out.reward, out.terminated, out.truncated = result.reward, result.terminated, result.truncated
        return out

    def snapshot(self) -> Trajectory:
        return self._require().model_copy(deep=True)

    def _require(self) -> Trajectory:
        if self.trajectory is None:
            raise EnvironmentClosedError("call reset() before step()")
        return self.trajectory


class RealBackendEnv(RecordedEnv):
    """A real environment, its observations recorded (and written to ``cache`` if given).

    Args:
        domain: the domain's name.
        real: a fresh real environment of that domain (``lwm.domains.get(domain).make_env()``);
            this object owns and closes it.
        cache: where to record observations, if anywhere.
        run: which of repeated real runs this is (recorded in provenance).

    Snapshots are the real environment's own (``snapshot``/``restore``)."""

    def __init__(self, domain: str, real: RealEnvironment, *, cache: ReplayCache | None = None,
                 run: int | None = None) -> None:
        super().__init__(domain, cache, run)
        self.real = real

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


class ReplayEnv(RecordedEnv):
    """Observations from the cache only.

    Args:
        domain: the domain.
        cache: where observations were recorded (by the ``real``, ``sim`` or ``hybrid``
            backend).
        source: whose observations to replay: ``real`` or a world model's name.
        sampling: that model's decoding settings (``SamplingParams.to_dict()``, part of the
            key), for model sources.

    Raises (from ``reset``/``step``):
        CacheMissError: the situation was never recorded.
    """

    def __init__(self, domain: str, *, cache: ReplayCache, source: str = REAL_SOURCE,
                 sampling: dict[str, Any] | None = None) -> None:
        super().__init__(domain, cache)
        self.source = source
        self.sampling = None if source == REAL_SOURCE else sampling

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
