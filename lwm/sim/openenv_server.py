"""An OpenEnv environment server over :func:`lwm.sim.make_env` (``openenv-core`` 0.3).

Protocol (OpenEnv's, unchanged): episodes run over the WebSocket ``/ws``; each connection
is a session with its own :class:`WorldEnvironment` (its own environment from
``make_env``: own history, own sandbox on ``real``), destroyed when the connection closes.
Messages are ``{"type": "reset", "data": {…}}``, ``{"type": "step", "data": {"text":
"<action>"}}``, ``{"type": "state"}``, ``{"type": "close"}``; answers are ``{"type":
"observation", "data": {"observation": {…}, "reward": …, "done": …}}``, ``{"type":
"state", "data": {…}}`` or ``{"type": "error", "data": {"message", "code"}}`` (a bad
action, a step before reset or after the end: the session stays usable). OpenEnv's
clients speak it (``GenericEnvClient(base_url=…)``, or :class:`WorldClient` here, typed).
``POST /reset`` and ``POST /step`` are OpenEnv's one-shot HTTP endpoints (a fresh
environment per request, closed after it): fine to probe a reset, useless for episodes.
``GET /health``, ``/schema``, ``/metadata`` describe the server.

What the world model is asked (and the sandbox it may start) is shared by nothing
between sessions but the model itself and the replay cache (content-addressed, safe to
share); up to ``max_sessions`` sessions run at once.

Reset data: ``task`` (a task name among the server's ``tasks``, or a dict of
:class:`~lwm.envs.base.Task` fields), else ``seed`` draws one of ``tasks``, else the
first (or the backend's empty task when there are none); ``episode_id`` is kept in the
state. Rewards follow :mod:`lwm.sim.adapter`: 0.0 until the episode ends, then the verdict.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field


def _import_openenv() -> None:
    """Import ``openenv.core`` without its optional Gradio web UI: ``openenv.core`` imports
    ``gradio`` eagerly (seconds of start-up) only to offer ``ENABLE_WEB_INTERFACE``, which
    this server does not use; it skips the UI when ``gradio`` cannot be imported. Gradio
    stays importable afterwards."""
    import sys

    if "openenv.core" in sys.modules or "gradio" in sys.modules:
        return
    sys.modules["gradio"] = None  # type: ignore[assignment]  # import gradio -> ModuleNotFoundError
    try:
        import openenv.core  # noqa: F401
    finally:
        if sys.modules.get("gradio", 0) is None:
            del sys.modules["gradio"]


_import_openenv()

from openenv.core.client_types import StepResult  # noqa: E402
from openenv.core.env_client import EnvClient  # noqa: E402
from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State  # noqa: E402

from lwm.asgi import MAX_BODY_BYTES, RequestGuard  # noqa: E402
from lwm.envs.base import Task  # noqa: E402
from lwm.envs.cache import ReplayCache  # noqa: E402
from lwm.models import ModelSpec  # noqa: E402
from lwm.models.base import ChatModel  # noqa: E402
from lwm.sim.adapter import Episode, coerce_task  # noqa: E402
from lwm.sim.backends import EnvFactory, env_factory  # noqa: E402

_log = logging.getLogger(__name__)


class WorldAction(Action):
    """One action, as text in the domain's action format."""

    text: str = Field(..., description="the action, in the domain's action format (e.g. terminal keystrokes JSON)")


class WorldObservation(Observation):
    """An observation (``reward`` and ``done`` are OpenEnv's fields)."""

    text: str = Field(default="", description="the observation, in the domain's observation format")
    truncated: bool = Field(default=False, description="the episode was cut by the turn limit")
    task: str | None = Field(default=None, description="the task's name")
    instruction: str = Field(default="", description="the task's instruction (on reset)")
    info: dict[str, Any] = Field(default_factory=dict,
                                 description="the backend's step info: provenance, reasoning, turn, verdict …")


class WorldState(State):
    """The session's episode."""

    domain: str = ""
    backend: str = ""
    task: str | None = None
    instruction: str = ""
    done: bool = False
    reward: float | None = Field(default=None, description="the verdict, once the episode has ended")
    trajectory: dict[str, Any] | None = Field(default=None, description="the episode so far (lwm Trajectory)")


class WorldEnvironment(Environment[WorldAction, WorldObservation, WorldState]):
    """One session's environment: an :class:`~lwm.sim.adapter.Episode` built lazily on
    first reset (OpenEnv also makes throwaway instances for ``/state``, ``/metadata``).

    Args:
        factory: the sessions' environment recipe (checked once by :func:`make_app`).
        tasks: the tasks ``reset`` picks from.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, factory: EnvFactory, tasks: Sequence[Task] = ()) -> None:
        super().__init__()
        self.factory = factory
        self.domain, self.backend = factory.domain, factory.backend
        self.tasks = tuple(tasks)
        self.episode: Episode | None = None
        self._state = WorldState(domain=self.domain, backend=self.backend)

    def _require_episode(self) -> Episode:
        if self.episode is None:
            self.episode = Episode(self.factory, tasks=self.tasks)
        return self.episode

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              task: str | Mapping[str, Any] | None = None, **kwargs: Any) -> WorldObservation:
        if kwargs:
            raise ValueError(f"unknown reset fields {sorted(kwargs)} (known: seed, episode_id, task)")
        episode = self._require_episode()
        if task is None:
            task = episode.pick_task(random.Random(seed) if seed is not None else None)
        else:
            task = coerce_task(task, self.tasks)
        first = episode.reset(task)
        current = episode.task
        self._state = WorldState(episode_id=episode_id or str(uuid.uuid4()), step_count=0, domain=self.domain,
                                 backend=self.backend, task=current.name if current else None,
                                 instruction=current.instruction if current else "")
        return WorldObservation(text=first, reward=0.0, done=False, task=self._state.task,
                                instruction=self._state.instruction)

    def step(self, action: WorldAction, timeout_s: float | None = None, **kwargs: Any) -> WorldObservation:
        if self.episode is None:
            from lwm.errors import EnvironmentClosedError

            raise EnvironmentClosedError("call reset() before step()")
        t = self.episode.step(action.text)
        self._state.step_count += 1
        if t.done:
            self._state.done, self._state.reward = True, self.episode.reward
        return WorldObservation(text=t.observation, reward=t.reward, done=t.done, truncated=t.truncated,
                                task=self._state.task, info=_jsonable(t.info))

    @property
    def state(self) -> WorldState:
        traj = self.episode.trajectory if self.episode is not None else None
        data = self._state.model_copy()
        data.trajectory = traj.model_dump(mode="json") if traj is not None else None
        return data

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=f"lwm-{self.domain}-{self.backend}",
            description=f"The {self.domain} domain on lwm's {self.backend} backend "
                        "(actions and observations are text in the domain's format).",
            version="0.1.0")

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()
            self.episode = None


def _jsonable(value: Any) -> Any:
    import json

    return json.loads(json.dumps(value, default=str))


def make_app(domain: str, backend: str = "sim", *, model: ChatModel | ModelSpec | str | None = None,
             cache: ReplayCache | str | None = None, max_sessions: int = 64, tasks: Sequence[Task | Mapping] = (),
             session_timeout: float | None = None, **make_env_kwargs: Any):
    """The FastAPI application of :func:`serve_env` (to mount or to run yourself).

    Raises:
        as :class:`~lwm.sim.backends.EnvFactory`: unknown domain or backend, or a backend's
        model or cache missing (before any session starts).
    """
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.types import ConcurrencyConfig

    if isinstance(cache, str) or hasattr(cache, "__fspath__"):
        cache = ReplayCache(cache)  # one connection pool for every session
    env = env_factory(domain, backend, model=model, cache=cache, **make_env_kwargs)
    factory = functools.partial(WorldEnvironment, env, tuple(coerce_task(t) for t in tasks))
    app = create_app(factory, WorldAction, WorldObservation, env_name=f"lwm-{domain}",
                     concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions,
                                                          session_timeout=session_timeout))
    _add_error_handlers(app)
    app.add_middleware(_WebSocketGuard)
    return app


class _WebSocketGuard:
    """ASGI middleware around openenv-core 0.3.0's WebSocket sessions, for two of its faults:

    * what the server sends on a WebSocket whose client has gone is dropped (an answer is
      logged at INFO level); the session ends at its next receive, which reports the
      disconnect. openenv-core closes every session's socket in a ``finally`` and catches
      only ``RuntimeError`` there; when the client has closed first (a clean close
      included), uvicorn refuses the send with ``ClientDisconnected`` (an ``OSError``),
      Starlette turns it into ``WebSocketDisconnect``, and uvicorn logged "Exception in ASGI
      application" for every session that ended; a client gone mid-step (its timeout) got
      four tracebacks;
    * a frame that is JSON but not an object (``[1, 2]``, ``5``, ``null``) is answered as
      OpenEnv answers a frame that is not JSON (an ``INVALID_JSON`` error) and the session
      goes on; openenv-core reads ``.get`` of it, answers ``SESSION_ERROR`` and closes the
      socket, ending the episode.
    """

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return

        async def send_unless_gone(message) -> None:
            try:
                await send(message)
            except OSError:
                if message.get("type") != "websocket.close":
                    _log.info("a WebSocket client left before its answer was sent; the answer is dropped")

        async def receive_objects():
            while True:
                message = await receive()
                text = message.get("text") if message.get("type") == "websocket.receive" else None
                try:
                    value = json.loads(text) if text is not None else {}
                except ValueError:  # not JSON: OpenEnv's own answer
                    return message
                if isinstance(value, dict):
                    return message
                from openenv.core.env_server.types import WSErrorCode, WSErrorResponse

                error = WSErrorResponse(data={"message": f"a message must be a JSON object, not {type(value).__name__}",
                                              "code": WSErrorCode.INVALID_JSON})
                await send_unless_gone({"type": "websocket.send", "text": error.model_dump_json()})

        await self.app(scope, receive_objects, send_unless_gone)


def _add_error_handlers(app) -> None:
    """Errors of the one-shot HTTP endpoints as JSON answers (4xx), not 500s."""
    from fastapi.responses import JSONResponse

    from lwm.errors import EnvironmentClosedError, LwmError

    def answer(status: int):
        async def handler(request, exc: Exception) -> JSONResponse:
            detail = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            if isinstance(exc, EnvironmentClosedError) and request.url.path == "/step":
                detail += (" (HTTP /step is one-shot in OpenEnv: a fresh environment per request; "
                           "play episodes over the WebSocket /ws)")
            return JSONResponse(status_code=status, content={"detail": detail, "error": type(exc).__name__})
        return handler

    app.add_exception_handler(EnvironmentClosedError, answer(409))
    for exc_type in (LwmError, ValueError, KeyError, TypeError):
        app.add_exception_handler(exc_type, answer(400))


def serve_env(domain: str, backend: str = "sim", host: str = "127.0.0.1", port: int = 8000, *,
              model: ChatModel | str | None = None, cache: ReplayCache | str | None = None, max_sessions: int = 64,
              tasks: Sequence[Task | Mapping] = (), session_timeout: float | None = None,
              log_level: str = "info", **make_env_kwargs: Any) -> None:
    """Serve ``make_env(domain, backend, …)`` as an OpenEnv environment until interrupted
    (requests and WebSocket messages of at most 4 MiB, :class:`lwm.asgi.RequestGuard`).

    Args:
        domain: e.g. ``terminal``.
        backend: ``sim`` (default), ``real``, ``replay`` or ``hybrid``.
        host: interface to bind (``0.0.0.0`` for every interface).
        port: TCP port.
        model: the world model (a ``ChatModel`` or a ``load_model`` spec such as
            ``"embedded-warmup"``, loaded once and shared by the sessions).
        cache: replay cache or its path (``replay``, ``hybrid``; optional for ``real``).
        max_sessions: concurrent sessions at most (more are refused with
            ``CAPACITY_REACHED``).
        tasks: what ``reset`` picks from (see the module docstring).
        session_timeout: seconds of inactivity after which a session is closed.
        log_level: uvicorn's.
        make_env_kwargs: passed to :func:`lwm.sim.make_env` (``max_turns``, ``route`` …).
    """
    import uvicorn

    app = make_app(domain, backend, model=model, cache=cache, max_sessions=max_sessions, tasks=tasks,
                   session_timeout=session_timeout, **make_env_kwargs)
    # bodies and WebSocket messages capped alike (an action or a task is text, not megabytes)
    uvicorn.run(RequestGuard(app), host=host, port=port, log_level=log_level, ws_max_size=MAX_BODY_BYTES)


class WorldClient(EnvClient[WorldAction, WorldObservation, WorldState]):
    """A typed OpenEnv client of a :func:`serve_env` server: async (``async with``), or
    blocking through ``.sync()``. ``step(WorldAction(text=…))`` returns a ``StepResult``
    whose ``observation`` is a :class:`WorldObservation`; an error answer raises
    ``RuntimeError("Server error: …")``.

    The protocol carries no request ids: answers come in order, one per request. A request
    whose answer was not read (no answer within ``message_timeout_s``, a cancelled call, a
    broken connection) would leave that answer to the next request, and every later answer
    one step behind. So such a call closes the connection instead, which ends the session
    and its episode on the server, and raises (``TimeoutError`` for a timeout); until
    ``reset()`` starts a new session on a new connection, ``step()`` and ``state()`` raise
    ``ConnectionError`` saying why the session was lost.

    Example:
        >>> with WorldClient("http://127.0.0.1:8000").sync() as env:  # doctest: +SKIP
        ...     first = env.reset(task="demo").observation.text
        ...     result = env.step(WorldAction(text='[{"keystrokes": "ls\\n", "duration": 0.5}]'))
    """

    _lost: str | None = None  # why the session was lost, until the next reset

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        kind = message.get("type")
        if self._lost and kind != "reset":
            raise ConnectionError(f"the session was lost ({self._lost}); call reset() to start a new one")
        self._lost = None
        try:
            return await super()._send_and_receive(message)
        except RuntimeError:  # the server's error answer, read in turn: the session goes on
            raise
        except BaseException as e:
            why = (f"no answer to {kind!r} within {self._message_timeout:g} s" if isinstance(e, TimeoutError)
                   else f"{kind!r} was interrupted ({type(e).__name__})")
            self._lost = why
            self._drop_connection()
            if isinstance(e, TimeoutError):
                raise TimeoutError(f"{why}: the connection is closed and the server ends the session; "
                                   "call reset() to start a new one") from None
            raise

    def _drop_connection(self) -> None:
        """Close the socket at once: no close handshake with a server that may be mid-step,
        nothing awaited in a call being cancelled."""
        ws, self._ws = self._ws, None
        if ws is not None:
            ws.transport.abort()

    def _step_payload(self, action: WorldAction | Mapping[str, Any]) -> dict[str, Any]:
        return {"text": action.text} if isinstance(action, WorldAction) else dict(action)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[WorldObservation]:
        obs = WorldObservation(**payload.get("observation", {}), reward=payload.get("reward"),
                               done=payload.get("done", False))
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> WorldState:
        return WorldState(**payload)
