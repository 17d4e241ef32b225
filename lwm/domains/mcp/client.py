"""Shared plumbing of the MCP environments: a real MCP server inside the sandbox, spoken
to from the host with the official ``mcp`` SDK's :class:`mcp.ClientSession`.

Inside the sandbox, a small supervisor (``supervisor.py``, the sandbox's own
Python, stdlib only) starts the server with pipes, relays its JSON-RPC lines and takes
snapshots/restores of ``/app``. On the host, the session runs on a private event loop
thread (an anyio blocking portal); its read/write streams are bridged to the
supervisor's pipes the way ``mcp.client.stdio.stdio_client`` bridges a subprocess, but
every line is bounded in size and every call in time. Any failure of the server or the
supervisor (exit, hang, oversize, garbage) raises :class:`SandboxError`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import mcp_types as types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from lwm.domains.mcp import spec as domain_mcp
from lwm.envs import assets
from lwm.envs.base import EnvironmentBase, StepResult, Task, invalid_action
from lwm.envs.sandbox import Sandbox, SandboxLimits
from lwm.errors import ActionFormatError, EnvironmentClosedError, SandboxError

_SUPERVISOR = Path(__file__).with_name("supervisor.py")
NODE_MODULES = "/opt/node_modules"  # where the npm servers are bound inside
SITE_PACKAGES = "/opt/sandbox-python"  # where the sandbox's Python packages are bound
#: Largest line read from the supervisor (a snapshot is the biggest), in bytes.
MAX_LINE_BYTES = 32 << 20
#: Largest single MCP message relayed (the supervisor cuts larger tool output).
MAX_MESSAGE_BYTES = 1 << 20

# The SDK warns on every call of a tool the server did not list; for us that is an
# ordinary (recorded) mistake of the agent, not something to log.
logging.getLogger("client").addFilter(lambda record: "not listed by server" not in record.getMessage())


@dataclass(frozen=True)
class ServerSpec:
    """How to start one MCP server inside the sandbox.

    Attributes:
        name: what it is, for messages (``filesystem``, ``sqlite`` …).
        argv: its command line inside the sandbox.
        env: extra environment variables of the server.
        node: bind the npm servers at :data:`NODE_MODULES`.
        python: which sandbox-python packages to bind at :data:`SITE_PACKAGES` (and put on
            ``PYTHONPATH``): ``"sdk"`` (the mcp 2 SDK), ``"sqlite"`` (mcp-server-sqlite with
            mcp 1.x) or ``""`` (none).
        files: extra files to seed (``{path inside: content}``), e.g. our own server's code.
    """

    name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    node: bool = False
    python: str = ""
    files: dict[str, str] = field(default_factory=dict)


class McpConnection:
    """One sandbox, one supervised MCP server, one SDK client session.

    Args:
        spec: the server.
        seed_files: the episode's files (``{path inside: content}``, under /app …).
        limits: sandbox limits.
        call_timeout: wall-clock limit of one tool call, in seconds.
        start_timeout: limit of the server's start and MCP handshake, in seconds.
        setup_commands: command lines (argv lists) run inside, in ``/app``, before the
            server starts (e.g. making symbolic links the tools cannot make).

    Raises:
        SandboxError: the sandbox or the server could not start, or did not complete the
            MCP handshake in time.
        AssetMissingError: the npm servers or sandbox-python packages are not installed.
    """

    def __init__(self, spec: ServerSpec, seed_files: dict[str, str] | None = None, *,
                 limits: SandboxLimits | None = None, call_timeout: float = 20.0,
                 start_timeout: float = 30.0, setup_commands: list[list[str]] | None = None) -> None:
        self.spec = spec
        self.call_timeout, self.start_timeout = call_timeout, start_timeout
        ro_binds: dict[str, str] = {}
        env = dict(spec.env)
        if spec.node:
            ro_binds[str(assets.node_modules())] = NODE_MODULES
        if spec.python:
            site = assets.sandbox_sqlite_site_packages() if spec.python == "sqlite" else assets.sandbox_site_packages()
            ro_binds[str(site)] = SITE_PACKAGES
            env["PYTHONPATH"] = SITE_PACKAGES
        self._sandbox: Sandbox | None = Sandbox(limits=limits or SandboxLimits(), ro_binds=ro_binds,
                                                files={**spec.files, **(seed_files or {})})
        self._stack = contextlib.ExitStack()
        self._gen = 0
        self._session: ClientSession | None = None
        self._broken: str | None = None
        self.server_info: dict[str, Any] = {}
        try:
            (self._sandbox.ctl_dir / "supervisor.py").write_text(_SUPERVISOR.read_text())
            config = {"argv": list(spec.argv), "env": env, "max_message_bytes": MAX_MESSAGE_BYTES,
                      "setup": [list(map(str, c)) for c in setup_commands or []]}
            (self._sandbox.ctl_dir / "mcp.json").write_text(json.dumps(config))
            self._proc = self._sandbox.spawn(["/usr/bin/python3", "-I", "/run/lwm/supervisor.py"],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL)
            for pipe in (self._proc.stdin, self._proc.stdout):
                os.set_blocking(pipe.fileno(), False)
            self._portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())
            self._portal.call(self._setup_streams)
            self._reader = self._portal.start_task_soon(self._read_loop)
            self.tools: list[dict[str, Any]] = self._open_session(1)
        except BaseException:
            self.close()
            raise

    # -- public, synchronous -------------------------------------------------------------
    def call_tool(self, name: str, arguments: Any) -> types.CallToolResult:
        """Call a tool; returns the server's result (``isError`` results included).

        Raises:
            MCPError: the server answered with a JSON-RPC error (unknown tool, invalid
                arguments …); its message is the server's.
            SandboxError: the server died, hung past ``call_timeout`` or misbehaved.
        """
        return self._call(self._call_tool, name, arguments, timeout=self.call_timeout)

    def snapshot(self) -> bytes:
        """A tar of the sandbox's ``/app`` (the server's whole state), taken inside."""
        reply = self._call(self._op, {"op": "snapshot"}, timeout=self.call_timeout)
        return base64.b64decode(reply["data"])

    def restore(self, snap: bytes) -> None:
        """Replace ``/app`` with ``snap`` and restart the server (new MCP session)."""
        data = base64.b64encode(snap).decode()
        reply = self._call(self._op, {"op": "restore", "data": data}, timeout=self.call_timeout)
        self.tools = self._open_session(int(reply["gen"]))

    def kill_server(self) -> None:
        """Kill the server process inside (fault injection, for tests)."""
        self._call(self._op, {"op": "kill_server"}, timeout=self.call_timeout)

    def close(self) -> None:
        """Stop the session, the event loop thread and the sandbox. Safe to call twice."""
        if self._sandbox is not None:
            self._sandbox.close()  # kills the server first: nothing below can wait on it
            self._sandbox = None
            self._broken = self._broken or "closed"
            portal = getattr(self, "_portal", None)
            if portal is not None:  # cancel the reader and session tasks, then end the loop
                with contextlib.suppress(Exception):
                    portal.call(portal.stop, True)
            with contextlib.suppress(Exception):
                self._stack.close()
            for pipe in (getattr(self, "_proc", None) and (self._proc.stdin, self._proc.stdout)) or ():
                with contextlib.suppress(OSError):
                    pipe.close()

    # -- async internals (on the portal's thread) -----------------------------------------
    def _call(self, fn, *args, timeout: float):
        if self._sandbox is None:
            raise EnvironmentClosedError(f"the {self.spec.name} MCP server is closed")
        if self._broken:
            raise SandboxError(f"the {self.spec.name} MCP server is unusable: {self._broken}")
        try:
            return self._portal.call(self._bounded, fn, args, timeout)
        except TimeoutError:
            self._broken = f"no answer within {timeout} s"
            raise SandboxError(f"the {self.spec.name} MCP server did not answer within {timeout} s") from None
        except MCPError:
            if self._broken:  # the connection closed under the call
                raise SandboxError(f"the {self.spec.name} MCP server stopped: {self._broken}") from None
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError) as e:
            self._broken = self._broken or type(e).__name__
            raise SandboxError(f"the {self.spec.name} MCP server stopped: {self._broken}") from None

    async def _bounded(self, fn, args, timeout: float):
        with anyio.fail_after(timeout):
            return await fn(*args)

    async def _setup_streams(self) -> None:
        self._ops_send, self._ops_recv = anyio.create_memory_object_stream[dict](16)
        self._session_stop: anyio.Event | None = None
        self._to_session = None  # the current generation's read-stream writer

    async def _read_loop(self) -> None:
        """Demultiplex the supervisor's lines: server messages to the current session,
        operation answers to :meth:`_op`."""
        fd = self._proc.stdout.fileno()
        buf = bytearray()
        try:
            while True:
                await anyio.wait_readable(fd)
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._broken = self._broken or "the sandbox's supervisor exited"
                    break
                buf += chunk
                if len(buf) > MAX_LINE_BYTES and b"\n" not in buf:
                    self._broken = "the supervisor sent an oversized line"
                    break
                while (nl := buf.find(b"\n")) >= 0:
                    line, buf = bytes(buf[:nl]), buf[nl + 1:]
                    await self._dispatch(line)
        finally:
            if self._to_session is not None:
                await self._to_session.aclose()
            await self._ops_send.aclose()

    async def _dispatch(self, line: bytes) -> None:
        try:
            obj = json.loads(line)
        except ValueError:
            return
        if not isinstance(obj, dict):
            return
        if "op" in obj:
            await self._ops_send.send(obj)
            return
        if obj.get("gen") != self._gen or self._to_session is None:
            return  # an earlier server's leftovers
        if "exit" in obj:
            self._broken = f"the server exited with code {obj['exit']}"
            await self._to_session.aclose()
        elif "msg" in obj:
            try:
                message: SessionMessage | Exception = SessionMessage(
                    types.jsonrpc_message_adapter.validate_python(obj["msg"], by_name=False))
            except ValueError as e:
                message = e
            try:
                await self._to_session.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # that session has ended

    async def _write_line(self, obj: dict) -> None:
        data = (json.dumps(obj, ensure_ascii=False) + "\n").encode()
        fd = self._proc.stdin.fileno()
        while data:
            await anyio.wait_writable(fd)
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                continue

    async def _op(self, request: dict) -> dict:
        await self._write_line(request)
        reply = await self._ops_recv.receive()
        if not reply.get("ok"):
            raise SandboxError(f"the supervisor failed {request['op']}: {reply.get('error')}")
        return reply

    def _open_session(self, gen: int) -> list[dict[str, Any]]:
        """Start a session with the server of generation ``gen``; return its tools as
        ``list_tools`` gives them (JSON)."""
        self._portal.call(self._prepare_session, gen)
        self._portal.start_task_soon(self._run_session)
        return self._call(self._list_tools, timeout=self.start_timeout)

    async def _prepare_session(self, gen: int) -> None:
        if self._session_stop is not None:
            self._session_stop.set()  # the previous session ends
        self._broken, self._gen, self._session = None, gen, None
        self._to_session, self._read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](64)
        self._write_stream, self._from_session = anyio.create_memory_object_stream[SessionMessage](64)
        self._session_ready = anyio.Event()
        self._session_stop = anyio.Event()
        self._session_failure: BaseException | None = None

    async def _run_session(self) -> None:
        ready, stop, from_session = self._session_ready, self._session_stop, self._from_session

        async def writer() -> None:
            async with from_session:
                async for message in from_session:
                    await self._write_line({"msg": message.message.model_dump(
                        by_alias=True, exclude_unset=True, mode="json")})

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer)
                async with ClientSession(self._read_stream, self._write_stream) as session:
                    await session.initialize()
                    self._session = session
                    ready.set()
                    await stop.wait()
                tg.cancel_scope.cancel()
        except Exception as e:  # noqa: BLE001 - reported to the waiting caller
            self._session_failure = e
        finally:
            ready.set()

    async def _list_tools(self) -> list[dict[str, Any]]:
        await self._session_ready.wait()
        if self._session is None:
            self._broken = self._broken or f"handshake failed: {self._session_failure!r}"
            raise SandboxError(f"the {self.spec.name} MCP server failed to start: {self._broken}")
        info = self._session.server_info
        self.server_info = info.model_dump(mode="json") if info is not None else {}
        tools = await self._session.list_tools()
        return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools.tools]

    async def _call_tool(self, name: str, arguments: Any) -> types.CallToolResult:
        return await self._session.call_tool(name, arguments)


class McpToolEnv(EnvironmentBase):
    """Shared behaviour of the environments whose actions are tool calls on one MCP
    server (``fs``, ``mcp``): subclasses say which server an episode uses
    (:meth:`server_spec`) and write the system prompt.

    ``Task.setup`` items are tool-call actions run after the server starts and before the
    first observation (not recorded); ``Task.files`` seed the sandbox (under ``/app``);
    ``Task.options["shell_setup"]`` (argv lists) run inside the sandbox before the server
    starts (for what the tools cannot do, e.g. symbolic links).

    Args:
        limits: sandbox limits.
        call_timeout: wall-clock limit of one tool call, in seconds.
    """

    domain = ""

    def __init__(self, *, limits: SandboxLimits | None = None, call_timeout: float = 20.0) -> None:
        self.limits = limits or SandboxLimits(lifetime_seconds=600)
        self.call_timeout = call_timeout
        self.conn: McpConnection | None = None
        self.task: Task | None = None

    def server_spec(self, task: Task) -> ServerSpec:  # pragma: no cover - overridden
        raise NotImplementedError

    def initial_views(self, task: Task) -> list[str]:
        """Tool calls whose results show the starting state in the first observation
        (``Task.options["initial_views"]`` overrides); none by default."""
        return list(task.options.get("initial_views", []))

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The server's tools, as ``list_tools`` returned them (JSON)."""
        if self.conn is None:
            raise EnvironmentClosedError("call reset() first")
        return self.conn.tools

    def reset(self, task: Task | None = None) -> str:
        """Start a fresh sandbox and server; run the setup calls; return
        ``[connected] <server> <version>: <n> tools``, followed, for each of
        :meth:`initial_views`, by the line ``[initial state] <tool call>`` and its result.

        Raises:
            SandboxError: the server did not start, or a setup call failed.
        """
        task = task or Task("empty")
        self.close()
        self.task = task
        self.conn = McpConnection(self.server_spec(task), task.files, limits=self.limits,
                                  call_timeout=self.call_timeout, setup_commands=task.options.get("shell_setup"))
        for action in task.setup:
            obs = self.step(action).observation
            if obs.startswith((domain_mcp.TOOL_ERROR, domain_mcp.PROTOCOL_ERROR, domain_mcp.INVALID_ACTION)):
                raise SandboxError(f"setup call {action[:200]!r} failed: {obs[:300]}")
        info = self.conn.server_info
        label = f"{info.get('name', '?')} {info.get('version') or ''}".strip()
        lines = [f"[connected] {label}: {len(self.conn.tools)} tools"]
        for action in task.options.get("initial_views", self.initial_views(task)):
            lines += [f"[initial state] {action}", self.step(action).observation]
        return "\n".join(lines)

    def step(self, action: str) -> StepResult:
        """Call the tool; the observation is its result in the domain's text form.

        A malformed action that no server can see (not JSON, no name, arguments not an
        object) is answered ``[invalid action] <reason>`` with ``info["action_error"]``.

        Raises:
            EnvironmentClosedError: not reset.
            SandboxError: the server died or did not answer within ``call_timeout``.
        """
        if self.conn is None:
            raise EnvironmentClosedError("call reset() before step()")
        try:
            call = domain_mcp.parse_action(action)
        except ActionFormatError as e:
            return StepResult(invalid_action(e.reason, ""), info={"action_error": e.reason})
        t0 = time.monotonic()
        try:
            result = self.conn.call_tool(call.name, call.arguments)
        except MCPError as e:
            obs = domain_mcp.render_protocol_error(e.code, e.message)
        else:
            content = [b.model_dump(by_alias=True, exclude_none=True, mode="json") for b in result.content]
            obs = domain_mcp.render_result(content, bool(result.is_error))
        return StepResult(obs, info={"seconds": round(time.monotonic() - t0, 3)})

    def snapshot(self) -> bytes:
        """A tar of ``/app`` (all the server's state), taken inside the sandbox."""
        if self.conn is None:
            raise EnvironmentClosedError("call reset() first")
        return self.conn.snapshot()

    def restore(self, snapshot: bytes) -> None:
        """Put ``/app`` back as :meth:`snapshot` took it and restart the server."""
        if self.conn is None:
            raise EnvironmentClosedError("call reset() first")
        self.conn.restore(snapshot)

    def close(self) -> None:
        """Stop the server and delete the sandbox. Safe to call twice."""
        if self.conn is not None:
            self.conn.close()
        self.conn = None
