"""An MCP server whose tools the world model answers (``lwm serve mcp``).

Any tool set is served as a real MCP server (the official ``mcp`` SDK, over stdio or
streamable HTTP): ``tools/list`` returns the tools as given, read from a JSON file
(:func:`load_tools`) or from a real MCP server's own ``tools/list`` (:func:`read_tools`);
every ``tools/call`` is answered by the world model, which sees the session's history
(a record created earlier can be read back) and, when given, the state the session
starts from (:func:`state_observation`: records, files …).

Each MCP session has its own :class:`~lwm.sim.env.SimEnv` of the ``mcp`` domain, so
sessions never see each other's calls: over stdio the process serves one client, one
session; over streamable HTTP each ``Mcp-Session-Id`` is a session. A session's calls
are answered one at a time, in order; the model answers sessions as it can (the embedded
model runs one sequence at a time and queues the others; an endpoint takes its
``concurrency``).

The wire (what a client sees):

- an observation in the ``mcp`` domain's text form becomes a tool result: ``[tool
  error]`` first is a result with ``isError: true`` (the text after that line), ``[protocol
  error <code>] <message>`` a JSON-RPC error; anything else is the result's text (and,
  for a tool with an ``outputSchema``, its ``structuredContent`` when it is a JSON
  object);
- a call the real server's SDK would refuse never reaches the model: an unknown tool is
  the JSON-RPC error ``-32602`` (``Unknown tool: <name>``), arguments that do not fit the
  tool's ``inputSchema`` a result with ``isError: true`` naming what is wrong (MCP
  2025-11-25: input validation errors are tool execution errors, so that the agent can
  correct itself); neither is recorded;
- the model failing (an endpoint down) is the JSON-RPC error ``-32603``; nothing is
  recorded.

Sessions are the simulator's unit of state, and the 2026-07-28 protocol has none: over
HTTP the server does not answer ``server/discover``, so that clients negotiating
(``mode="auto"``, the SDK's default) fall back to the ``initialize`` handshake, and a
``tools/call`` outside a session is refused (``-32600``). Over stdio both eras work.

Recording: each session's episode is a :class:`~lwm.schema.Trajectory` (domain ``mcp``,
provenance ``simulated``), appended to ``<out>/trajectories.jsonl`` when the session ends
(stdio: the client closes the connection; HTTP: the client ends the session with
``DELETE``, else when the server stops). After every call the session so far is also
appended to the journal ``<out>/trajectories.partial.jsonl``; a server started on the
same ``out`` moves the sessions a crash left there into ``trajectories.jsonl``
(``metadata.ended = "recovered"``). One server at a time writes an ``out`` directory.
``lwm data build --from <out>`` reads the trajectories (their turns are simulated: counted,
never training targets); their AgentWorldBench rows (``rows_from_trajectory``) go to
``<out>/mcp_test.jsonl``, which ``lwm eval --data <out>`` reads.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from lwm.domains.mcp import spec
from lwm.domains.tool_call import ToolCall
from lwm.envs.base import Task
from lwm.errors import RunBusyError
from lwm.jsonl import JsonlAppender
from lwm.models.base import ChatModel, SamplingParams
from lwm.schema import Trajectory, read_trajectories, rows_from_trajectory
from lwm.sim.controls import Control
from lwm.sim.env import DEFAULT_SAMPLING, SimEnv

if TYPE_CHECKING:  # the SDK loads on first use (about 1.5 s): every lwm command imports this module's settings
    import mcp_types as types
    from mcp.server.lowlevel import Server

#: Where a streamable HTTP server answers.
HTTP_PATH = "/mcp"
#: The tools/list of a real server is read within this many seconds.
TOOLS_FROM_TIMEOUT = 60.0
_PROTOCOL_ERROR = re.compile(r"\[protocol error (-?\d+)\]\s?(.*)", re.S)


@dataclass(frozen=True)
class McpServeConfig:
    """Settings of ``lwm serve mcp``.

    Attributes:
        tools: a JSON file of the tools to serve: a list of MCP tool objects (``name``,
            ``description``, ``inputSchema``), or an object with a ``tools`` list as an
            MCP server's ``tools/list`` answers (``name`` and ``description`` beside it
            name and describe the server to the world model).
        tools_from: serve the tools of a real MCP server instead (its ``tools/list`` is
            read once, at start): a command line started over stdio (e.g. ``npx -y
            @modelcontextprotocol/server-memory``) or a streamable HTTP URL.
        state: a JSON file of the state every session starts from (an object, e.g.
            ``{"notes": [...]}`` or ``{"files": {...}}``), shown to the world model as the
            initial observation.
        name: the server's name, for clients and the world model; default: the tools
            file's ``name``, the real server's name, or the tools file's stem.
        transport: ``stdio`` (a client starts the server as a subprocess) or ``http``
            (streamable HTTP at ``http://<host>:<port>/mcp``).
        host: the address to bind (``http``).
        port: the port (``http``).
        controls: simulation control labels (e.g. ``error:quota exceeded``, ``empty``),
            as in ``lwm rollout``.
        max_prompt_tokens: the history budget of each call (system prompt, state and
            earlier calls); the oldest calls are left out first.
        out: where each session's trajectory is recorded.
    """

    tools: Path | None = None
    tools_from: str | None = None
    state: Path | None = None
    name: str | None = None
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    controls: tuple[str, ...] = ()
    max_prompt_tokens: int = 4096
    out: Path = Path("runs/mcp")


@dataclass(frozen=True)
class ToolSet:
    """The tools a server offers.

    Attributes:
        name: the server's name (``""``: not given).
        tools: the tools as ``tools/list`` gives them (JSON objects).
        description: what the server is, for the world model (``""``: nothing).
    """

    name: str
    tools: list[dict[str, Any]]
    description: str = ""


def _fail(where: str, what: str) -> ValueError:
    return ValueError(f"{where}: {what}")


def check_tools(tools: Any, where: str) -> list[dict[str, Any]]:
    """MCP tool objects, checked and in ``tools/list`` form.

    Args:
        tools: the decoded JSON list.
        where: what to name in errors (a file, a server).

    Raises:
        ValueError: not a non-empty list of tools; a tool without a ``name`` or an
            ``inputSchema`` of ``type: object``, with an invalid JSON Schema, or named twice.
    """
    import mcp_types as types
    from jsonschema import exceptions as schema_errors
    from jsonschema.validators import validator_for

    if not isinstance(tools, list) or not tools:
        raise _fail(where, "expected a non-empty list of MCP tools ({\"name\", \"description\", \"inputSchema\"})")
    out, names = [], set()
    for i, raw in enumerate(tools, 1):
        label = f"tool {i}" + (f" ({raw['name']!r})" if isinstance(raw, dict) and isinstance(raw.get("name"), str)
                               else "")
        if not isinstance(raw, dict):
            raise _fail(where, f"{label} is {type(raw).__name__}, not a JSON object")
        try:
            tool = types.Tool.model_validate(raw, by_name=False)
        except ValidationError as e:
            err = e.errors()[0]
            raise _fail(where, f"{label}: {'.'.join(map(str, err['loc'])) or 'tool'}: {err['msg']}") from None
        dumped = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        schema = dumped["inputSchema"]
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise _fail(where, f"{label}: inputSchema must be a JSON Schema of type \"object\" (MCP), "
                               f"not {schema.get('type')!r}")
        for key in ("inputSchema", "outputSchema"):
            if isinstance(dumped.get(key), dict):
                try:
                    validator_for(dumped[key]).check_schema(dumped[key])
                except schema_errors.SchemaError as e:
                    raise _fail(where, f"{label}: {key} is not a valid JSON Schema: {e.message}") from None
        if tool.name in names:
            raise _fail(where, f"{label}: a second tool named {tool.name!r}")
        names.add(tool.name)
        out.append(dumped)
    return out


def _read_json(path: Path, what: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise _fail(str(path), f"cannot read the {what} ({getattr(e, 'strerror', None) or e})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise _fail(str(path), f"the {what} is not JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None


def load_tools(path: str | Path) -> ToolSet:
    """Read a tools file: a JSON list of MCP tools, or an object with a ``tools`` list (as
    ``tools/list`` answers; ``name`` and ``description`` beside it are the server's).

    Raises:
        ValueError: the file cannot be read, is not JSON, or holds no valid tools (the
            message names the file and what is wrong).
    """
    path = Path(path)
    data = _read_json(path, "tools file")
    name, description = "", ""
    if isinstance(data, dict):
        if "tools" not in data:
            raise _fail(str(path), "expected a list of MCP tools, or an object with a \"tools\" list "
                                   f"(as tools/list answers); this object has {sorted(data)[:5]}")
        name, description = data.get("name") or "", data.get("description") or ""
        if not isinstance(name, str) or not isinstance(description, str):
            raise _fail(str(path), "\"name\" and \"description\" must be strings")
        data = data["tools"]
    return ToolSet(name, check_tools(data, str(path)), description)


async def read_tools(source: str, timeout: float = TOOLS_FROM_TIMEOUT) -> ToolSet:
    """The tools of a real MCP server (all pages of its ``tools/list``) and its name.

    Args:
        source: a command line, started as a subprocess speaking MCP over stdio, or an
            ``http(s)://`` URL of a streamable HTTP server.
        timeout: seconds to start, list and close.

    Raises:
        ValueError: the server could not be started or reached, did not answer in time,
            or listed no valid tools.
    """
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    if source.startswith(("http://", "https://")):
        target: Any = source
    else:
        argv = shlex.split(source)
        if not argv:
            raise ValueError("--tools-from: an empty command")
        target = stdio_client(StdioServerParameters(command=argv[0], args=argv[1:]))
    tools: list[dict[str, Any]] = []
    try:
        with anyio.fail_after(timeout):
            async with Client(target, mode="legacy") as client:
                info = client.server_info
                cursor = None
                for _ in range(100):
                    page = await client.list_tools(cursor=cursor)
                    tools += [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools]
                    if not (cursor := page.next_cursor):
                        break
    except TimeoutError:
        raise ValueError(f"{source}: no tools/list within {timeout:g} s") from None
    except Exception as e:  # noqa: BLE001 - the SDK's task groups wrap what went wrong in exception groups
        while getattr(e, "exceptions", None):
            e = e.exceptions[0]
        if isinstance(e, TimeoutError):
            raise ValueError(f"{source}: no tools/list within {timeout:g} s") from None
        raise ValueError(f"{source}: cannot read its tools: {e or type(e).__name__}") from None
    return ToolSet(info.name if info is not None else "", check_tools(tools, source))


def load_state(path: str | Path) -> dict[str, Any]:
    """Read a state file: a JSON object (``{"notes": [...]}``, ``{"files": {...}}`` …).

    Raises:
        ValueError: the file cannot be read or is not a JSON object.
    """
    data = _read_json(Path(path), "state file")
    if not isinstance(data, dict):
        raise _fail(str(path), f"the state must be a JSON object (e.g. {{\"notes\": [...]}}), not "
                               f"{type(data).__name__}")
    return data


def state_observation(name: str, tools: Sequence[dict[str, Any]], state: dict[str, Any] | None = None) -> str:
    """A session's initial observation: ``[connected] <name>: <n> tools`` (the ``mcp``
    domain's first line), then for each key of ``state`` the line ``[initial state] <key>``
    and its value as JSON.

    >>> print(state_observation("notes", [{}], {"notes": [{"id": 1, "title": "milk"}]}))
    [connected] notes: 1 tools
    [initial state] notes
    [{"id": 1, "title": "milk"}]
    """
    lines = [f"[connected] {name}: {len(tools)} tools"]
    for key, value in (state or {}).items():
        lines += [f"[initial state] {key}", value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)]
    return "\n".join(lines)


def to_result(observation: str, tool: dict[str, Any]) -> types.CallToolResult:
    """The tool result of a simulated observation (``mcp`` domain text form) of ``tool``.

    >>> to_result("[tool error]\\nnote 7 not found", {}).model_dump(by_alias=True, exclude_none=True)["isError"]
    True

    Raises:
        MCPError: the observation is a JSON-RPC error (``[protocol error <code>] …``).
    """
    import mcp_types as types
    from mcp import MCPError

    if (m := _PROTOCOL_ERROR.fullmatch(observation.strip())) is not None:
        raise MCPError(code=int(m.group(1)), message=m.group(2).strip() or "error")
    text, is_error = observation, False
    if observation.startswith(spec.TOOL_ERROR):
        text, is_error = observation[len(spec.TOOL_ERROR):].lstrip("\n"), True
    elif observation.startswith(spec.INVALID_ACTION):  # an action too long to send (the domain's refusal)
        is_error = True
    structured = None
    if not is_error and tool.get("outputSchema"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        structured = parsed if isinstance(parsed, dict) else None
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error,
                                structured_content=structured)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class TrajectoryRecorder:
    """Where a server's sessions are recorded: ``<out>/trajectories.jsonl`` (a session's
    trajectory when it ends; ``lwm data build`` reads it) with its AgentWorldBench rows in
    ``<out>/mcp_test.jsonl`` (``lwm eval --data <out>`` reads them), and the journal
    ``<out>/trajectories.partial.jsonl`` (the session so far, after each call). Opening
    moves the sessions an earlier server left in the journal (a crash) into
    ``trajectories.jsonl``; closing deletes the journal once every session in it is recorded.

    Raises:
        RunBusyError: another server records into ``out`` now.
    """

    def __init__(self, out: str | Path) -> None:
        from filelock import FileLock, Timeout

        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.path = self.out / "trajectories.jsonl"
        self.rows_path = self.out / "mcp_test.jsonl"
        self.journal_path = self.out / "trajectories.partial.jsonl"
        self._lock = FileLock(str(self.out / ".serve-mcp.lock"), timeout=0)
        try:
            self._lock.acquire()
        except Timeout:
            raise RunBusyError(self.out) from None
        self.recovered = self._recover()
        self.sessions = 0
        self._journal: JsonlAppender | None = None  # opened on the first call
        self._unfinished: set[str] = set()

    def _recover(self) -> int:
        if not self.journal_path.exists():
            return 0
        done = {t.id for t in read_trajectories(self.path, skip_truncated_tail=True)} if self.path.exists() else set()
        latest: dict[str, Trajectory] = {}
        for traj in read_trajectories(self.journal_path, skip_truncated_tail=True):
            if traj.id not in done:
                latest[traj.id] = traj
        for traj in latest.values():
            traj.metadata["ended"] = "recovered"
            self._record(traj)
        self.journal_path.unlink()
        return len(latest)

    def progress(self, trajectory: Trajectory) -> None:
        """Journal the session so far."""
        if self._journal is None:
            self._journal = JsonlAppender(self.journal_path)
        self._journal.append(trajectory.model_dump(mode="json"))
        self._unfinished.add(trajectory.id)

    def finish(self, trajectory: Trajectory) -> None:
        """Record a session that has ended."""
        self._record(trajectory)
        self._unfinished.discard(trajectory.id)
        self.sessions += 1

    def _record(self, trajectory: Trajectory) -> None:
        with JsonlAppender(self.path) as sink:
            sink.append(trajectory.model_dump(mode="json"))
        with JsonlAppender(self.rows_path) as sink:
            for row in rows_from_trajectory(trajectory):
                sink.append(row.model_dump(mode="json"))

    def close(self) -> None:
        """Close the journal, and delete it when every session in it is recorded (else the
        next server on ``out`` recovers them). Safe to call twice."""
        if self._lock.is_locked:
            if self._journal is not None:
                self._journal.close()
            if not self._unfinished:
                self.journal_path.unlink(missing_ok=True)
            self._lock.release()


@dataclass
class _Session:
    key: str
    env: SimEnv
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    started: str = field(default_factory=_now)


@dataclass
class _Scope:
    """The sessions of one run of the server's lifespan: one stdio connection (one
    session), or the whole streamable HTTP app (a session per ``Mcp-Session-Id``)."""

    sessions: dict[str, _Session] = field(default_factory=dict)


class McpSimulator:
    """An MCP server (:attr:`server`, an ``mcp.server.lowlevel.Server``) whose tools the
    world model answers, one :class:`~lwm.sim.env.SimEnv` per session.

    Args:
        tools: the tools to serve.
        model: the world model (any :class:`~lwm.models.base.ChatModel`).
        state: the state every session starts from (:func:`state_observation`).
        controls: simulation controls (:class:`~lwm.sim.controls.Control`).
        recorder: where sessions are recorded (none: they are not).
        sampling: the world model's decoding settings.
        max_prompt_tokens: the history budget of each call.

    Example (in a coroutine; ``Client`` is the SDK's ``mcp.Client``)::

        sim = McpSimulator(load_tools("examples/mcp/notes_tools.json"), load_model("embedded-warmup"))
        async with Client(sim.server, mode="legacy") as client:  # one session
            await client.call_tool("create_note", {"title": "milk", "body": "2 l"})
    """

    def __init__(self, tools: ToolSet, model: ChatModel, *, state: dict[str, Any] | None = None,
                 controls: Sequence[Control] = (), recorder: TrajectoryRecorder | None = None,
                 sampling: SamplingParams = DEFAULT_SAMPLING, max_prompt_tokens: int = 4096) -> None:
        from jsonschema.validators import validator_for
        from mcp.server.lowlevel import Server

        self.name = tools.name or "simulated"
        self.tools = tools.tools
        self.by_name = {t["name"]: t for t in tools.tools}
        self._validators = {t["name"]: validator_for(t["inputSchema"])(t["inputSchema"]) for t in tools.tools}
        self.model = model
        self.controls = tuple(controls)
        self.recorder = recorder
        self.sampling = sampling
        self.max_prompt_tokens = max_prompt_tokens
        about = f"{self.name} ({tools.description.strip().rstrip('.')})" if tools.description.strip() else self.name
        self.system_prompt = spec.system_prompt(about, self.tools)
        self.initial_observation = state_observation(self.name, self.tools, state)
        self._scopes: list[_Scope] = []
        self.server: Server[_Scope] = Server(
            self.name, version="lwm-simulated", lifespan=self._lifespan,
            instructions=tools.description or None, on_list_tools=self._list_tools, on_call_tool=self._call_tool)

    # -- sessions ----------------------------------------------------------------------
    @asynccontextmanager
    async def _lifespan(self, _server: Server[_Scope]) -> AsyncIterator[_Scope]:
        scope = _Scope()
        self._scopes.append(scope)
        try:
            yield scope
        finally:
            for key in list(scope.sessions):
                self._end(scope, key)
            self._scopes.remove(scope)

    def _session(self, scope: _Scope, key: str) -> _Session:
        if (session := scope.sessions.get(key)) is None:
            env = SimEnv("mcp", self.model, system_prompt=self.system_prompt, sampling=self.sampling,
                         max_prompt_tokens=self.max_prompt_tokens, max_turns=10**9, controls=self.controls,
                         judge_rewards=False)
            session = scope.sessions[key] = _Session(key, env)
        return session

    def _end(self, scope: _Scope, key: str) -> None:
        session = scope.sessions.get(key)
        if session is None:
            return
        traj = session.env.trajectory
        if traj is not None and traj.turns and self.recorder is not None:
            traj.metadata["ended"] = _now()
            self.recorder.finish(traj)
        session.env.close()
        # Left open until recorded: another thread that sees no open session finds it written.
        del scope.sessions[key]

    def end_session(self, key: str) -> bool:
        """End the session ``key`` (an ``Mcp-Session-Id``) now and record it; ``False`` when
        there is no such session."""
        for scope in self._scopes:
            if key in scope.sessions:
                self._end(scope, key)
                return True
        return False

    @property
    def open_sessions(self) -> int:
        """Sessions that have made a call and not ended."""
        return sum(len(s.sessions) for s in self._scopes)

    # -- handlers ----------------------------------------------------------------------
    async def _list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        import mcp_types as types

        return types.ListToolsResult(tools=[types.Tool.model_validate(t, by_name=False) for t in self.tools])

    def invalid_arguments(self, name: str, arguments: dict[str, Any]) -> str | None:
        """What is wrong with ``arguments`` for tool ``name`` (its ``inputSchema``), or ``None``."""
        from jsonschema import exceptions as schema_errors

        error = schema_errors.best_match(self._validators[name].iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(map(str, error.absolute_path))
        return f"{where}: {error.message}" if where else error.message

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        import mcp_types as types
        from mcp import MCPError

        tool = self.by_name.get(params.name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        arguments = dict(params.arguments or {})
        if (problem := self.invalid_arguments(params.name, arguments)) is not None:
            return types.CallToolResult(content=[types.TextContent(
                type="text", text=f"Invalid arguments for tool {params.name}: {problem}")], is_error=True)
        request = getattr(ctx, "request", None)
        key = "stdio"
        if request is not None:  # streamable HTTP: a session per Mcp-Session-Id
            key = request.headers.get("mcp-session-id") or ""
            if not key:
                raise MCPError(code=types.INVALID_REQUEST, message=(
                    "this simulated server keeps each client's state in an MCP session: connect with the "
                    "initialize handshake (protocol 2025-11-25 or earlier, e.g. the Python SDK's "
                    "Client(url, mode='legacy'))"))
        session = self._session(ctx.lifespan_context, key)
        action = spec.format_action(ToolCall(params.name, arguments))
        async with session.lock:
            env = session.env
            if env.trajectory is None:
                uid = uuid.uuid4().hex[:12]
                await env.areset(Task(f"{self.name}-{uid}", family=self.name), self.initial_observation)
                env.trajectory.metadata.update({"server": self.name, "session": key, "started": session.started,
                                                "served": "lwm serve mcp"})
            try:
                step = await env.astep(action)
            except Exception as e:  # noqa: BLE001 - the model's failure is the call's, not the server's
                raise MCPError(code=types.INTERNAL_ERROR,
                               message=f"the world model could not answer: {type(e).__name__}: {e}") from e
            if self.recorder is not None:
                self.recorder.progress(env.trajectory)
        return to_result(step.observation, tool)

    # -- transports --------------------------------------------------------------------
    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until it disconnects."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    def http_app(self, host: str = "127.0.0.1") -> Any:
        """The streamable HTTP app (ASGI) at :data:`HTTP_PATH`: a session per
        ``Mcp-Session-Id``, recorded when the client ends it (``DELETE``) or the app stops.
        ``host`` is the address it is served on (loopback addresses get the SDK's DNS
        rebinding protection)."""
        import mcp_types as types
        from mcp import MCPError

        async def no_discover(ctx: Any, params: types.RequestParams) -> Any:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="server/discover is not served: this simulated "
                           "server keeps state in sessions (initialize handshake)")

        self.server.add_request_handler("server/discover", types.RequestParams, no_discover)
        inner = self.server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)

        async def app(scope: dict, receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["method"] != "DELETE":
                return await inner(scope, receive, send)
            status = []

            async def watch(message: dict) -> None:
                if message["type"] == "http.response.start":
                    status.append(message["status"])
                await send(message)

            await inner(scope, receive, watch)
            key = dict(scope["headers"]).get(b"mcp-session-id")
            if key and status and status[0] < 300:  # the SDK ended that session: record it
                self.end_session(key.decode("latin-1"))

        return app


def serve_mcp(config: McpServeConfig, model: ChatModel, tools: ToolSet | None = None,
              on_ready: Any = None) -> TrajectoryRecorder:
    """Serve the simulated MCP server until the client disconnects (stdio) or the process
    is stopped (HTTP, Ctrl-C); return the recorder (``sessions``, ``recovered``).

    Args:
        config: the settings.
        model: the world model.
        tools: the tools, when already read (default: ``config.tools`` or ``config.tools_from``).
        on_ready: called with the :class:`McpSimulator` before serving starts.

    Raises:
        ValueError: no tools or both sources, a malformed tools or state file, an unknown
            transport or control.
        RunBusyError: another server records into ``config.out``.
    """
    if config.transport not in ("stdio", "http"):
        raise ValueError(f"transport must be stdio or http, not {config.transport!r}")
    controls = tuple(Control.parse(c) for c in config.controls)
    if tools is None:
        tools = resolve_tools(config)
    if config.name:
        tools = ToolSet(config.name, tools.tools, tools.description)
    state = load_state(config.state) if config.state else None
    recorder = TrajectoryRecorder(config.out)
    try:
        sim = McpSimulator(tools, model, state=state, controls=controls, recorder=recorder,
                           max_prompt_tokens=config.max_prompt_tokens)
        if on_ready is not None:
            on_ready(sim)
        if config.transport == "stdio":
            anyio.run(sim.serve_stdio)
        else:
            import uvicorn

            uvicorn.Server(uvicorn.Config(sim.http_app(config.host), host=config.host, port=config.port,
                                          log_level="warning", lifespan="on")).run()
    finally:
        recorder.close()
    return recorder


def resolve_tools(config: McpServeConfig) -> ToolSet:
    """The tools of ``config``: its tools file, or the real server it names (the name
    falls back to the file's stem).

    Raises:
        ValueError: neither or both given; a malformed file; a server that cannot be read.
    """
    if (config.tools is None) == (config.tools_from is None):
        raise ValueError("give the tools to serve: either --tools FILE or --tools-from COMMAND|URL")
    if config.tools is not None:
        tools = load_tools(config.tools)
        return tools if tools.name else ToolSet(Path(config.tools).stem, tools.tools, tools.description)
    return anyio.run(read_tools, config.tools_from)
