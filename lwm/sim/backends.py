"""One interface, four backends: :func:`make_env`.

=========  ==================================================================================
backend    where each observation comes from
=========  ==================================================================================
real       the real sandboxed environment (``lwm.envs``); observations may be recorded into a
           replay cache
sim        the world model (:class:`~lwm.sim.env.SimEnv`)
replay     a :class:`~lwm.envs.cache.ReplayCache` only; a situation never seen raises
           :class:`~lwm.errors.CacheMissError`
hybrid     the cache, then the real environment, then the world model, per a routing rule
=========  ==================================================================================

Every backend offers the same methods (``reset``, ``step``, ``verify``, ``system_prompt``,
``snapshot``, ``restore``, ``close``) and keeps the episode as a
:class:`~lwm.schema.Trajectory` (``env.trajectory``) in which every observation carries
its provenance (``real``, ``replayed`` or ``simulated``); ``step`` also returns it in
``info["provenance"]``. Switching backends is a change of the ``backend`` argument.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from lwm import domains
from lwm.envs.base import StepResult, Task
from lwm.envs.cache import REAL_SOURCE, ReplayCache
from lwm.envs.recorded import RealBackendEnv, RecordedEnv, ReplayEnv
from lwm.errors import SandboxError
from lwm.models import ModelSpec, reward_model_for
from lwm.models.base import ChatModel, SamplingParams
from lwm.prediction import check_prediction
from lwm.schema import Provenance, Trajectory
from lwm.sim.controls import Control
from lwm.sim.env import DEFAULT_REWARD, DEFAULT_SAMPLING, SimEnv

Backend = Literal["real", "sim", "replay", "hybrid"]


@dataclass(frozen=True)
class BackendSpec:
    """What a backend is: where its observations come from and what it needs. Code asks
    the spec (:func:`backend_spec`) instead of comparing names.

    Attributes:
        name: ``real``, ``sim``, ``replay`` or ``hybrid``.
        description: one line, for people.
        simulates: a world model writes observations (needs one; controls apply).
        replays: observations are read from a replay cache (needs one).
        plays_real: actions are played in the real environment (needs the domain's).
    """

    name: str
    description: str
    simulates: bool
    replays: bool
    plays_real: bool

    @property
    def all_simulated(self) -> bool:
        """Every observation is the world model's (the simulator proper): the
        :class:`~lwm.sim.env.SimEnv` settings apply (its reward model, a real first
        observation, how the model is asked), and an episode's actions can be replayed in the
        real environment afterwards to check it."""
        return self.simulates and not (self.replays or self.plays_real)

    @property
    def cache_only(self) -> bool:
        """Every observation is read from a replay cache (nothing is played or predicted: a
        situation the cache does not hold cannot be played)."""
        return self.replays and not (self.simulates or self.plays_real)

    def needs_world_model(self, source: str | None = None) -> bool:
        """Whether a world model must be given: to simulate, or to replay what a model
        wrote (``source``: whose observations a replay reads; ``real`` or ``None``: the
        real environment's)."""
        return self.simulates or (self.replays and source not in (None, REAL_SOURCE))


#: Every backend, by name.
BACKEND_SPECS = {spec.name: spec for spec in (
    BackendSpec("real", "the real environment, recorded", simulates=False, replays=False, plays_real=True),
    BackendSpec("sim", "the world model", simulates=True, replays=False, plays_real=False),
    BackendSpec("replay", "observations read from a replay cache", simulates=False, replays=True, plays_real=False),
    BackendSpec("hybrid", "the cache, then the real environment, then the world model", simulates=True,
                replays=True, plays_real=True),
)}
BACKENDS = tuple(BACKEND_SPECS)
#: The backends an agent's task is played on and judged: the real environment (the task's
#: verifier) or the simulator (its reward model); replay and hybrid hold no verdict to evaluate.
TASK_BACKENDS = ("real", "sim")
TaskBackend = Literal["real", "sim"]


def backend_spec(name: str, allowed: tuple[str, ...] = BACKENDS) -> BackendSpec:
    """The backend called ``name``.

    >>> backend_spec("hybrid").needs_world_model(), backend_spec("replay").needs_world_model("real")
    (True, False)

    Raises:
        ValueError: no such backend, or not one of ``allowed`` (a command that plays only
            some of them).
    """
    if name not in BACKEND_SPECS or name not in allowed:
        raise ValueError(f"unknown backend {name!r} (one of {', '.join(allowed)})" if name not in BACKEND_SPECS else
                         f"backend {name!r} is not one this command plays (one of {', '.join(allowed)})")
    return BACKEND_SPECS[name]


def sim_request(backend: str, prediction: str | None = None, compact_tools: bool | None = None,
                ) -> dict[str, str | bool | None]:
    """How a run on ``backend`` asks its world model, as :class:`~lwm.sim.env.SimEnv`
    settings: ``{"prediction": …, "compact_tools": …}`` where every observation is the world
    model's (``None``: the model's own way, :func:`lwm.prediction.request_format`), ``{}``
    elsewhere. Checked before any model loads.

    Raises:
        ValueError: an unknown backend or prediction mode, or either setting given for a
            backend without a world model to ask.
    """
    if not backend_spec(backend).all_simulated:
        if prediction is not None or compact_tools is not None:
            raise ValueError("prediction and compact_tools (--predict, --compact-tools) say how to ask the world "
                             f"model of the sim backend, not {backend}")
        return {}
    return {"prediction": check_prediction(prediction) if prediction is not None else None,
            "compact_tools": compact_tools}


Route = Literal["real-first", "sim-only"]
ROUTES = ("real-first", "sim-only")


class HybridEnv(RecordedEnv):
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
                 reward_model: ChatModel | None = None, real_options: dict[str, Any] | None = None,
                 **sim_kwargs: Any) -> None:
        super().__init__(domain, cache)
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r} ({' or '.join(ROUTES)})")
        self.route = route
        self.sim = SimEnv(domain, model, sampling=sampling, controls=controls, judge_rewards=False,
                          reward_model=reward_model, **sim_kwargs)
        self.real_options = dict(real_options or {})
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
            self.real = domains.get(self.domain).make_env(**self.real_options)
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
        out.terminated, out.truncated = result.terminated, result.truncated
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


def _spec_of(model: ModelSpec | ChatModel | str | None) -> ModelSpec | None:
    # How the model was (or will be) loaded; None for a model built by hand.
    if isinstance(model, str):
        return ModelSpec(model)
    return model if isinstance(model, ModelSpec) else getattr(model, "spec", None)


def _load(model: ModelSpec | ChatModel | str | None) -> ChatModel | None:
    if isinstance(model, str):
        model = ModelSpec(model)
    return model.load() if isinstance(model, ModelSpec) else model


@dataclass(frozen=True)
class EnvFactory:
    """A recipe for fresh environments of one domain on one backend, checked once when it is
    made: what rollouts, Ray workers, the OpenEnv server, Gymnasium and TRL receive. It is
    picklable when its models are given as :class:`~lwm.models.ModelSpec` (or names), which
    each process loads once.

    Args:
        domain: e.g. ``terminal``, ``db``.
        backend: ``real``, ``sim``, ``replay`` or ``hybrid`` (see the module docstring).
        model: the world model (``sim``, ``hybrid``; and ``replay`` of its observations):
            a loaded :class:`~lwm.models.ChatModel`, a :class:`~lwm.models.ModelSpec` or a name.
        reward_model: the reward model of ``sim`` (and of ``hybrid`` once the episode left
            the real environment); default: :func:`lwm.models.reward_model_for` the reward
            source (``options["reward"]``, default :data:`~lwm.sim.env.DEFAULT_REWARD`: the
            trained verdict model), else the world model itself.
        cache: a :class:`~lwm.envs.cache.ReplayCache` or its path (``replay``, ``hybrid``;
            optional for ``real``, which then records into it).
        sampling: the world model's decoding settings.
        controls: simulation controls (``sim``, ``hybrid``).
        route: ``hybrid``'s routing rule (``real-first`` or ``sim-only``).
        source: ``replay``: whose observations (``real``; default: the world model's when
            one is given, else ``real``).
        max_turns: ``sim``: the episode is cut (``truncated``) after this many steps.
        options: passed on: the real environment's options (``real``, ``hybrid``) or
            :class:`~lwm.sim.env.SimEnv` settings (``sim``: ``judge_rewards``,
            ``max_prompt_tokens`` …).

    Raises:
        UnknownDomainError: no such domain.
        NoRealEnvironmentError: ``real`` or ``hybrid`` (``real-first``) on an import-only domain.
        ValueError: an unknown backend or route, or what the backend needs is missing.
    """

    domain: str
    backend: Backend = "real"
    model: ModelSpec | ChatModel | str | None = None
    reward_model: ModelSpec | ChatModel | str | None = None
    cache: ReplayCache | str | None = None
    sampling: SamplingParams = DEFAULT_SAMPLING
    controls: tuple[Control, ...] = ()
    route: Route = "real-first"
    source: str | None = None
    max_turns: int = 50
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        spec = domains.get(self.domain)
        backend = backend_spec(self.backend)
        if backend.needs_world_model(self.source) and self.model is None:
            raise ValueError(f"the {self.backend} backend needs a world model (model=load_model('embedded-warmup'))")
        if backend.replays and self.cache is None:
            raise ValueError(f"the {self.backend} backend needs a cache")
        if self.controls and not backend.simulates:
            raise ValueError(f"simulation controls change what a world model writes; the {self.backend} backend has "
                             "none to control")
        if self.route not in ROUTES:
            raise ValueError(f"unknown route {self.route!r} ({' or '.join(ROUTES)})")
        if backend.plays_real and self.route == "real-first":
            if not spec.runnable:
                spec.make_env()  # raises NoRealEnvironmentError with the reason
        for role in (self.model, self.reward_model):
            if role is not None and not isinstance(role, (str, ModelSpec, ChatModel)):
                raise ValueError(f"{role!r} is not a chat model, a model spec or a name: it cannot simulate or judge")
        if isinstance(self.cache, (bytes, os.PathLike)):
            object.__setattr__(self, "cache", os.fsdecode(self.cache))

    def world_model(self) -> ChatModel | None:
        """The world model, loaded (once per process for specs and names)."""
        return _load(self.model)

    def judge(self) -> ChatModel | None:
        """The reward model, loaded: ``reward_model``, else the one
        :func:`lwm.models.reward_model_for` names for the reward source and the world model
        (a served world model judges itself with ``judge``), else the world model itself."""
        if self.reward_model is not None:
            return _load(self.reward_model)
        spec = _spec_of(self.model)
        local = spec.name if spec is not None and spec.base_url is None else None
        judge = reward_model_for(self.options.get("reward", DEFAULT_REWARD), local)
        return ModelSpec(judge).load() if judge else self.world_model()

    def __call__(self) -> SimEnv | RealBackendEnv | ReplayEnv | HybridEnv:
        """A fresh environment."""
        cache = ReplayCache(self.cache) if isinstance(self.cache, str) else self.cache
        backend = backend_spec(self.backend)
        if not (backend.simulates or backend.replays):
            return RealBackendEnv(self.domain, domains.get(self.domain).make_env(**self.options), cache=cache)
        if backend.all_simulated:
            return SimEnv(self.domain, self.world_model(), sampling=self.sampling, controls=self.controls,
                          max_turns=self.max_turns, reward_model=self.judge(), **self.options)
        if not backend.simulates:  # observations from the cache alone
            source = self.source or (self.world_model().name if self.model is not None else REAL_SOURCE)
            sampling = None if source == REAL_SOURCE else self.sampling.to_dict()
            return ReplayEnv(self.domain, cache=cache, source=source, sampling=sampling)
        return HybridEnv(self.domain, model=self.world_model(), cache=cache, route=self.route,
                         sampling=self.sampling, controls=self.controls, reward_model=self.judge(),
                         real_options=self.options)


def env_factory(domain: str, backend: Backend = "real", **settings: Any) -> EnvFactory:
    """An :class:`EnvFactory` from keyword settings: its own fields by name (``model``,
    ``cache``, ``max_turns`` …), every other setting into ``options`` (the real
    environment's or :class:`~lwm.sim.env.SimEnv`'s).

    Raises:
        as :class:`EnvFactory`.
    """
    own = {k: settings.pop(k) for k in list(settings) if k in _FACTORY_FIELDS}
    own["options"] = {**own.get("options", {}), **settings}
    return EnvFactory(domain, backend, **own)


def task_env_factory(domain: str, backend: str, world_model: ModelSpec | None = None, *, reward: str = DEFAULT_REWARD,
                     show_task: bool = False, max_turns: int = 50, prediction: str | None = None,
                     compact_tools: bool | None = None, cache: str | None = None,
                     sampling: SamplingParams = DEFAULT_SAMPLING) -> EnvFactory:
    """The environments an agent's task episodes are played in (``lwm agent eval``, ``lwm
    train rft``, ``lwm train rl``, the verifiers environment): one rule for all of them.

    Args:
        domain: the tasks' domain.
        backend: a name of :data:`BACKENDS`. On the simulator (``sim``) the world model
            plays from the task's real first observation (one real reset per task, cached)
            and ``reward`` judges the episode; every other backend is played as it is.
        world_model: the world model, where the backend simulates (ignored elsewhere).
        reward: the simulator's reward source (:data:`lwm.sim.env.REWARD_SOURCES`).
        show_task: show the world model the agent's instruction (the simulator).
        max_turns: the simulator's turn limit.
        prediction, compact_tools: how the simulator asks its world model
            (:func:`sim_request`; ``None``: the model's own way).
        cache: a replay cache file (replay and hybrid).
        sampling: the world model's decoding settings.

    Raises:
        ValueError: an unknown backend, or settings the backend does not take (as
            :func:`sim_request` and :class:`EnvFactory`).
    """
    spec = backend_spec(backend)
    request = sim_request(backend, prediction, compact_tools)
    options = {"reward": reward, "real_start": True, "show_task": show_task, **request} if spec.all_simulated else {}
    return EnvFactory(domain, backend, model=world_model if spec.simulates else None, cache=cache,
                      max_turns=max_turns, sampling=sampling, options=options)


def make_env(domain: str, backend: Backend = "real",
             **settings: Any) -> SimEnv | RealBackendEnv | ReplayEnv | HybridEnv:
    """A fresh environment of ``domain`` with the chosen backend: ``env_factory(domain,
    backend, **settings)()`` (see :class:`EnvFactory` for the settings and errors)."""
    return env_factory(domain, backend, **settings)()


_FACTORY_FIELDS = frozenset(f.name for f in fields(EnvFactory)) - {"domain", "backend"}
