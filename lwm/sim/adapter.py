"""What the RL adapters share (:mod:`lwm.sim.gym`, :mod:`lwm.sim.trl`,
:mod:`lwm.sim.openenv_server`): one episode at a time of any domain on any backend, with
the reward rule they all follow.

Reward rule: ``0.0`` before the episode ends; when it ends (the domain's "done" action or
the real environment ending: ``terminated``; ``max_turns`` on the ``sim`` backend:
``truncated``), the step's own reward if the backend gave one, else the environment's
:meth:`verify` (the real check, or the reward model's judgement on the ``sim`` backend).
A verdict of ``None`` (no check, unreadable judge, ``replay``) counts as ``0.0`` and is
reported as ``info["verdict"] = None``.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from lwm.envs.base import StepResult, Task
from lwm.errors import EnvironmentClosedError
from lwm.sim.backends import EnvFactory, backend_spec


def coerce_task(value: Task | Mapping[str, Any] | str, tasks: Sequence[Task] = ()) -> Task:
    """A :class:`Task` from a task, a dict of its fields (``check`` may be a dict too), or
    the name of one of ``tasks``.

    Raises:
        KeyError: a name not among ``tasks``.
        ValueError: a dict with unknown fields or without ``name``.
    """
    if isinstance(value, Task):
        return value
    if isinstance(value, str):
        for task in tasks:
            if task.name == value:
                return task
        raise KeyError(f"no task named {value!r} (known: {', '.join(t.name for t in tasks) or 'none'})")
    if isinstance(value, Mapping):
        return Task.from_dict(value)
    raise TypeError(f"a task is a Task, a dict of its fields or a task name, not {type(value).__name__}")


class Episode:
    """Environments of one :class:`~lwm.sim.backends.EnvFactory` driven one episode at a
    time, with the reward rule of the module docstring (the face of every RL interface).

    Args:
        factory: the environments' recipe (:func:`~lwm.sim.backends.env_factory` builds one
            from a domain, a backend and their settings). On the ``sim`` backend the reward
            is asked for once, by this class, at the episode's end.
        tasks: the tasks :meth:`reset` picks from when not given one.
    """

    def __init__(self, factory: EnvFactory, *, tasks: Sequence[Task | Mapping[str, Any]] = ()) -> None:
        if backend_spec(factory.backend).all_simulated and "judge_rewards" not in factory.options:
            factory = replace(factory, options={**factory.options, "judge_rewards": False})
        self.factory = factory
        self.domain, self.backend = factory.domain, factory.backend
        self.tasks: tuple[Task, ...] = tuple(coerce_task(t) for t in tasks)
        self.env = factory()
        self.task: Task | None = None
        self.turns = 0
        self.ended = False
        self.reward: float | None = None  # the verdict, once asked for
        self._judged = False

    def pick_task(self, rng: random.Random | Any | None = None) -> Task | None:
        """One of :attr:`tasks` drawn with ``rng`` (``random.Random`` or a numpy
        ``Generator``), the first without one, ``None`` when there are none."""
        if not self.tasks:
            return None
        if rng is None:
            return self.tasks[0]
        if isinstance(rng, random.Random):
            return self.tasks[rng.randrange(len(self.tasks))]
        return self.tasks[int(rng.integers(len(self.tasks)))]

    def reset(self, task: Task | Mapping[str, Any] | str | None = None) -> str:
        """Start an episode of ``task`` (a task, its fields, or the name of one of
        :attr:`tasks`; default: the backend's empty task) and return the first observation."""
        self.task = coerce_task(task, self.tasks) if task is not None else None
        first = self.env.reset(self.task)
        self.task = getattr(self.env, "task", None) or self.task
        self.turns, self.ended, self.reward, self._judged = 0, False, None, False
        return first

    def step(self, action: str) -> StepResult:
        """Play ``action``: the step's observation, ``terminated``/``truncated`` and info
        (plus ``turn``, and ``verdict`` at the end), its reward by the rule of the module
        docstring (a float: 0.0 before the end).

        Raises:
            TypeError: ``action`` is not a string.
            EnvironmentClosedError: not reset, or the episode has ended.
            whatever the backend raises (e.g. ``ActionFormatError`` on a real backend).
        """
        if not isinstance(action, str):
            raise TypeError(f"an action is a string in the {self.domain} action format, not {type(action).__name__}")
        if self.ended:
            raise EnvironmentClosedError("the episode has ended: call reset() to start another")
        if getattr(self.env, "trajectory", None) is None:
            raise EnvironmentClosedError("call reset() before step()")
        result = self.env.step(action)
        self.turns += 1
        info = copy.deepcopy(result.info)
        info["turn"] = self.turns
        out = StepResult(result.observation, 0.0, result.terminated, result.truncated, info)
        if result.done:
            self.ended = True
            if result.reward is not None:
                self.reward, self._judged = float(result.reward), True
            out.reward = self.final_reward()
            info["verdict"] = self.reward
        return out

    def final_reward(self) -> float:
        """The episode's reward (see the module docstring), asked for at most once per
        episode; callable before the end (e.g. when a policy stops acting)."""
        if getattr(self.env, "trajectory", None) is None:
            return 0.0
        if not self._judged:
            self._judged = True
            verdict = self.env.verify()
            self.reward = None if verdict is None else float(verdict)
        return 0.0 if self.reward is None else self.reward

    @property
    def trajectory(self):
        """The episode so far (:class:`~lwm.schema.Trajectory`), or ``None``."""
        return getattr(self.env, "trajectory", None)

    def close(self) -> None:
        """Close the environment (models are shared per process and stay loaded). Safe twice."""
        self.env.close()
