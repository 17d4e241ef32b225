"""A Gymnasium environment over :func:`lwm.sim.make_env`: any domain, any backend.

Observations and actions are text (:class:`UnicodeText` spaces). ``reset(seed, options)``
starts an episode of a task drawn (seeded) from ``tasks`` or named in
``options["task"]``; ``step(action)`` returns ``(observation, reward, terminated,
truncated, info)`` with the reward rule of :mod:`lwm.sim.adapter` (0.0 until the episode
ends, then the check's or the reward model's verdict). ``info`` carries the task's
``instruction`` on reset (the agent needs it; observations are the environment's only)
and the backend's step info (``provenance``, ``reasoning`` …) on steps.

Registered ids (importing this module registers them)::

    lwm/World-v0            kwargs: domain (default "terminal"), backend (default "sim"), …
    lwm/Terminal-v0, lwm/DB-v0, lwm/Code-v0, … one per domain, backend "sim" by default

Example:
    >>> import gymnasium as gym
    >>> from lwm.models import load_model
    >>> env = gym.make("lwm.sim.gym:lwm/Terminal-v0", model=load_model("embedded-warmup"),
    ...                tasks=[Task("demo", instruction="create a.txt")])  # doctest: +SKIP
    >>> obs, info = env.reset(seed=0)  # doctest: +SKIP
    >>> action = '[{"keystrokes": "ls\\n", "duration": 0.5}]'
    >>> obs, reward, terminated, truncated, info = env.step(action)  # doctest: +SKIP

``gym.make("lwm.sim.gym:lwm/World-v0", …)`` imports this module first; after
``import lwm.sim.gym`` plain ``gym.make("lwm/World-v0", …)`` works. Episodes are cut by
the backend's ``max_turns`` (``sim``) or by Gymnasium's ``max_episode_steps``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from lwm import domains
from lwm.envs.base import Task
from lwm.envs.cache import ReplayCache
from lwm.models import ModelSpec
from lwm.models.base import ChatModel
from lwm.sim.adapter import Episode
from lwm.sim.backends import env_factory

#: What :class:`UnicodeText` samples from: printable ASCII, tab and newline.
SAMPLE_CHARSET = "".join(chr(c) for c in range(32, 127)) + "\t\n"

#: Default bounds, in characters (observations: whole screens, pages, tool results).
MAX_OBSERVATION_CHARS = 1_048_576
MAX_ACTION_CHARS = 65_536


class UnicodeText(spaces.Text):
    """A :class:`gymnasium.spaces.Text` of any Unicode string between ``min_length`` and
    ``max_length`` characters.

    Gymnasium's ``Text`` needs an explicit character set and tests membership against it;
    a set of all 1,112,064 Unicode scalar values would cost hundreds of megabytes (Text
    also builds a list and an index of it). So membership here is any ``str`` within the
    length bounds whose characters are all Unicode scalar values (lone surrogates, which
    cannot be encoded as UTF-8, are out), while :meth:`sample` draws from ``sample_charset``
    (default :data:`SAMPLE_CHARSET`) and ``character_set`` is that sampling set. The space
    is not flattenable to integer arrays (``is_np_flattenable`` is ``False``): text goes to
    a tokenizer, not to ``flatten``.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, sample_charset: str = SAMPLE_CHARSET,
                 seed: int | np.random.Generator | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=sample_charset, seed=seed)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, str) or not self.min_length <= len(x) <= self.max_length:
            return False
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object, /) -> bool:
        return isinstance(other, UnicodeText) and (self.min_length, self.max_length) == (other.min_length,
                                                                                         other.max_length)


class WorldEnv(gymnasium.Env[str, str]):
    """One domain on one backend as a Gymnasium environment.

    Args:
        domain: e.g. ``terminal``.
        backend: ``sim`` (default), ``real``, ``replay`` or ``hybrid``.
        model: the world model: a :class:`ChatModel`, a :class:`~lwm.models.ModelSpec` or a
            name such as ``"embedded-warmup"`` (loaded once per process).
        cache: the replay cache or its path (``replay``, ``hybrid``; optional for ``real``).
        tasks: the tasks ``reset`` draws from (seeded by ``reset(seed=…)``); none: the
            backend's empty task.
        render_mode: ``None`` or ``"ansi"`` (:meth:`render` returns the episode as text).
        max_observation_chars: observation space bound; longer observations are cut to
            it (``info["observation_cut"]`` gives the original length).
        max_action_chars: action space bound.
        timings: keep the backend's wall-clock ``seconds`` in step ``info``; off by default,
            as it makes ``info`` differ between identical steps (Gymnasium's determinism
            check compares infos).
        make_env_kwargs: passed to :func:`lwm.sim.backends.env_factory` (``max_turns``, ``route``,
            ``sampling``, ``controls`` …).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, domain: str = "terminal", backend: str = "sim", *,
                 model: ChatModel | ModelSpec | str | None = None,
                 cache: ReplayCache | str | None = None, tasks: Sequence[Task | Mapping[str, Any]] = (),
                 render_mode: str | None = None, max_observation_chars: int = MAX_OBSERVATION_CHARS,
                 max_action_chars: int = MAX_ACTION_CHARS, timings: bool = False, **make_env_kwargs: Any) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.timings = timings
        self.episode = Episode(env_factory(domain, backend, model=model, cache=cache, **make_env_kwargs), tasks=tasks)
        self.observation_space = UnicodeText(max_observation_chars)
        self.action_space = UnicodeText(max_action_chars)

    @property
    def domain(self) -> str:
        return self.episode.domain

    @property
    def backend(self) -> str:
        return self.episode.backend

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode.

        Args:
            seed: seeds the task draw (and ``self.np_random``).
            options: ``{"task": <Task, dict of its fields, or a task name>}`` to choose the
                task instead of drawing it.

        Returns:
            ``(observation, info)`` with ``info["task"]`` (its name) and
            ``info["instruction"]``.
        """
        super().reset(seed=seed)
        options = options or {}
        unknown = set(options) - {"task"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)} (known: task)")
        task = options.get("task") or self.episode.pick_task(self.np_random)
        first = self.episode.reset(task)
        info: dict[str, Any] = {"domain": self.domain, "backend": self.backend}
        current = self.episode.task
        info["task"] = current.name if current else None
        info["instruction"] = current.instruction if current else ""
        return self._bounded(first, info), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play ``action`` (text in the domain's action format).

        Raises:
            TypeError: not a string.
            EnvironmentClosedError: before ``reset`` or after the episode ended.
            whatever the backend raises (e.g. ``ActionFormatError`` on ``real``).
        """
        t = self.episode.step(action)
        if not self.timings:
            t.info.pop("seconds", None)
        return self._bounded(t.observation, t.info), t.reward, t.terminated, t.truncated, t.info

    def render(self) -> str | None:
        """``ansi``: the episode so far (initial observation, then each action and
        observation)."""
        if self.render_mode != "ansi":
            return None
        traj = self.episode.trajectory
        if traj is None:
            return ""
        parts = [traj.initial_observation]
        for turn in traj.turns:
            parts.append(f"\n>>> {turn.action}\n{turn.observation}")
        return "\n".join(parts)

    def close(self) -> None:
        """Close the environment. Safe twice."""
        self.episode.close()
        super().close()

    def _bounded(self, observation: str, info: dict[str, Any]) -> str:
        if not self.observation_space.contains(observation):
            info["observation_cut"] = len(observation)
            observation = observation.encode("utf-8", "replace").decode("utf-8")[: self.observation_space.max_length]
        return observation


def _env_id(domain: str) -> str:
    return f"lwm/{domain.upper() if len(domain) <= 3 else domain.capitalize()}-v0"


def register_envs() -> list[str]:
    """Register ``lwm/World-v0`` and one id per domain (idempotent); return the ids."""
    ids = []
    for env_id, kwargs in [("lwm/World-v0", {})] + [(_env_id(d), {"domain": d}) for d in domains.names()]:
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="lwm.sim.gym:WorldEnv", kwargs=kwargs,
                               disable_env_checker=False, nondeterministic=False)
        ids.append(env_id)
    return ids


ENV_IDS = register_envs()
