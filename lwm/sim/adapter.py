"""What the RL adapters share (:mod:`lwm.sim.gym`, :mod:`lwm.sim.trl`,
:mod:`lwm.sim.openenv_server`): one episode of any domain on any backend, with the
reward rule they all follow.

Reward rule: ``0.0`` before the episode ends; when it ends (the domain's "done" action,
the real environment ending, or ``max_turns`` on the ``sim`` backend, reported as
``info["truncated"]``), the step's own reward if the backend gave one, else the
environment's :meth:`verify` (the real check, or the reward model's judgement on the
``sim`` backend). A verdict of ``None`` (no check, unreadable judge, ``replay``) counts
as ``0.0`` and is reported as ``info["verdict"] = None``.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from lwm.envs.base import Check, Task
from lwm.errors import EnvironmentClosedError
from lwm.models.base import ChatModel
from lwm.sim.backends import BACKENDS, make_env
from lwm.sim.cache import ReplayCache
from lwm.sim.loop import run_sync

_TASK_FIELDS = {f.name for f in fields(Task)}


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
        unknown = set(value) - _TASK_FIELDS
        if unknown:
            raise ValueError(f"unknown task fields {sorted(unknown)} (known: {sorted(_TASK_FIELDS)})")
        if not value.get("name"):
            raise ValueError("a task needs a name")
        data = dict(value)
        if isinstance(data.get("check"), Mapping):
            data["check"] = Check(**data["check"])
        data["setup"] = tuple(data.get("setup", ()))
        data["files"] = dict(data.get("files", {}))
        data["options"] = dict(data.get("options", {}))
        return Task(**data)
    raise TypeError(f"a task is a Task, a dict of its fields or a task name, not {type(value).__name__}")


def resolve_model(model: ChatModel | str | None) -> tuple[ChatModel | None, bool]:
    """``(model, owned)``: a model spec (``"embedded-warmup"``, a ``.gguf`` path …) is loaded
    with :func:`lwm.models.load_model` and owned by the caller (close it)."""
    if isinstance(model, str):
        from lwm.models import load_model

        return load_model(model), True
    return model, False


def check_arguments(domain: str, backend: str, model: object, cache: object) -> None:
    """Fail early, with the same messages as :func:`make_env`, on arguments that could
    only fail at the first reset."""
    from lwm.domains import DOMAINS

    if domain not in DOMAINS:
        raise KeyError(f"unknown domain {domain!r} (known: {', '.join(DOMAINS)})")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})")
    if backend in ("sim", "hybrid") and model is None:
        raise ValueError(f"the {backend} backend needs a world model (model=load_model('embedded-warmup'))")
    if backend in ("replay", "hybrid") and cache is None:
        raise ValueError(f"the {backend} backend needs a cache")


@dataclass
class Transition:
    """One step as RL libraries want it.

    Attributes:
        observation: the next observation.
        reward: 0.0 before the end; the episode's reward at the end.
        terminated: the episode ended by itself (done action, environment ended).
        truncated: cut by a turn limit.
        info: the backend's step info (``provenance``, ``reasoning`` …) plus ``turn``
            and, at the end, ``verdict`` (the raw reward, possibly ``None``).
    """

    observation: str
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


class Episode:
    """An environment from :func:`make_env` driven one episode at a time.

    Args:
        domain: e.g. ``terminal``.
        backend: ``real``, ``sim``, ``replay`` or ``hybrid``.
        model: the world model (a :class:`ChatModel`, or a spec for ``load_model``).
        cache: the replay cache (``replay``/``hybrid``; optional for ``real``).
        tasks: the tasks :meth:`reset` picks from when not given one.
        make_env_kwargs: passed to :func:`make_env` (``max_turns``, ``route`` …). On the
            ``sim`` backend ``judge_rewards`` defaults to ``False``: the reward is asked
            for once, by this class, at the episode's end.
    """

    def __init__(self, domain: str, backend: str = "sim", *, model: ChatModel | str | None = None,
                 cache: ReplayCache | str | None = None, tasks: Sequence[Task | Mapping[str, Any]] = (),
                 **make_env_kwargs: Any) -> None:
        check_arguments(domain, backend, model, cache)
        self.domain, self.backend = domain, backend
        self.tasks: tuple[Task, ...] = tuple(coerce_task(t) for t in tasks)
        self.model, self._owns_model = resolve_model(model)
        if backend == "sim":
            make_env_kwargs.setdefault("judge_rewards", False)
        self.env = make_env(domain, backend, model=self.model, cache=cache, **make_env_kwargs)
        self.task: Task | None = None
        self.turns = 0
        self.ended = False
        self.reward: float | None = None  # the verdict, once asked for
        self._judged = False

    # -- episode ------------------------------------------------------------------------
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

    def step(self, action: str) -> Transition:
        """Play ``action``.

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
        truncated = bool(info.get("truncated"))
        out = Transition(result.observation, 0.0, bool(result.done) and not truncated, truncated, info)
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
        """Close the environment, and the model if this episode loaded it. Safe twice."""
        self.env.close()
        if self._owns_model and self.model is not None:
            run_sync(self.model.aclose())
            self._owns_model = False
