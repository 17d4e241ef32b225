"""The host side of an in-sandbox controller: one JSON line out, one JSON line back.

Environments keep their long-lived processes (a shell, an interpreter, a database
client, an MCP server) inside the sandbox behind a small controller script run by the
sandbox's own Python. The host only writes requests and reads replies that are bounded
in time and size and parsed as data: whatever the agent does inside, the host never
runs its programs or trusts its output beyond JSON.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from lwm.envs.base import EnvironmentBase
from lwm.envs.sandbox import Sandbox
from lwm.errors import EnvironmentClosedError, SandboxError

#: Largest reply the host reads from a controller, in bytes.
MAX_REPLY_BYTES = 1 << 20


class Controller:
    """A controller process inside ``sandbox``, spoken to in JSON lines.

    Args:
        sandbox: the open sandbox to start it in.
        argv: its command line inside (e.g. ``["python3", "-I", "/run/lwm/ctl.py"]``).
        name: what it is, for error messages (``the terminal``, ``the database`` …).
        max_reply_bytes: replies longer than this raise :class:`SandboxError`.

    Raises:
        SandboxError: the sandbox could not start it.
    """

    def __init__(self, sandbox: Sandbox, argv: Sequence[str], name: str = "the environment",
                 max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        self.name = name
        self.max_reply_bytes = max_reply_bytes
        self.broken: str | None = None  # why the pipe is out of step, after a failed read
        self.proc: subprocess.Popen | None = sandbox.spawn(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def request(self, obj: Any, timeout: float, max_reply_bytes: int | None = None) -> Any:
        """Send ``obj`` and return the decoded reply.

        Args:
            obj: the request (JSON-serializable).
            timeout: seconds to wait for the answer (plus a 5-second grace).
            max_reply_bytes: this answer's size limit (default: the controller's).

        Raises:
            EnvironmentClosedError: the controller was closed.
            SandboxError: it exited, did not answer within ``timeout`` seconds, answered
                too much or not JSON — after which the pipe is out of step, and every
                later request raises too (start a new episode).
        """
        if self.proc is None or self.proc.stdin is None:
            raise EnvironmentClosedError(f"{self.name} is closed")
        if self.broken:
            raise SandboxError(f"{self.name} is unusable after an earlier failure ({self.broken}); reset it")
        try:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise SandboxError(f"{self.name}'s controller has exited") from None
        return self.read(time.monotonic() + timeout + 5, max_reply_bytes)

    def read(self, deadline: float, max_reply_bytes: int | None = None) -> Any:
        """Read one reply line before ``deadline`` (a ``time.monotonic()`` value).

        Raises:
            SandboxError: as :meth:`request`.
        """
        if self.proc is None or self.proc.stdout is None:
            raise EnvironmentClosedError(f"{self.name} is closed")
        try:
            return self._read(deadline, max_reply_bytes or self.max_reply_bytes)
        except SandboxError as e:
            self.broken = str(e)
            raise

    def _read(self, deadline: float, limit: int) -> Any:
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], left)[0] if left > 0 else []
            if not ready:
                raise SandboxError(f"{self.name} did not answer in time")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise SandboxError(f"{self.name}'s controller has exited")
            buf += chunk
            if len(buf) > limit:
                raise SandboxError(f"{self.name}'s answer exceeded {limit} bytes")
        try:
            return json.loads(buf)
        except ValueError:
            raise SandboxError(f"{self.name}'s controller sent a malformed answer") from None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        """Close the pipes (the sandbox kills the process). Safe to call twice."""
        if self.proc is not None:
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:  # the other end died with unread input: nothing to flush to
                        pass
        self.proc = None


class ControlledEnvironment(EnvironmentBase):
    """An environment whose programs live in one sandbox behind one :class:`Controller`
    (``self._sandbox``, ``self._control``, both ``None`` between episodes)."""

    _sandbox: Sandbox | None = None
    _control: Controller | None = None

    def close(self) -> None:
        """Kill everything in the sandbox and delete it. Safe to call twice."""
        if self._sandbox is not None:
            self._sandbox.close()
        if self._control is not None:
            self._control.close()
        self._sandbox = self._control = None
