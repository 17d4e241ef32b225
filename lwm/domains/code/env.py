"""A real persistent Python interpreter (notebook-like cells), inside the sandbox.

Why not a Jupyter kernel: ``ipykernel`` is not installed for the sandbox's
``/usr/bin/python3`` (the sandbox-python asset carries only the MCP packages), and a
kernel speaks ZeroMQ sockets the host would have to reach into the jail. Instead a small
controller (``controller.py``, stdlib only) runs in the sandbox: a supervisor that
talks JSON lines to the host and a worker interpreter that compiles cells with ``ast``
and runs them in one persistent ``__main__`` namespace — the semantics of IPython's
default ``last_expr`` mode, with CPython's own tracebacks.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lwm.domains.code import spec as code_domain
from lwm.envs.base import StepResult, Task
from lwm.envs.controller import ControlledEnvironment, Controller
from lwm.envs.sandbox import Sandbox, SandboxLimits
from lwm.errors import EnvironmentClosedError, SandboxError

_CONTROLLER = Path(__file__).with_name("controller.py")
#: Default limits: 1 GiB of address space per process (a memory bomb gets MemoryError).
DEFAULT_LIMITS = SandboxLimits(max_memory_bytes=1 << 30, max_processes=64, lifetime_seconds=900)
#: Largest total size of the files under /app a snapshot copies, in bytes.
MAX_SNAPSHOT_BYTES = 8 << 20


@dataclass(frozen=True)
class CodeSnapshot:
    """What :meth:`CodeEnv.snapshot` keeps: the cells run since the interpreter last
    (re)started, in order, and every entry under /app (``(path, kind, data)``, kind
    ``dir``/``file``/``link``; file data as bytes)."""

    cells: tuple[str, ...]
    files: tuple[tuple[str, str, bytes | str], ...]


def _seconds(value: object) -> float:
    """A cell's time limit: a finite number of seconds in (0, 3600].

    Raises:
        ValueError: anything else.
    """
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"cell_timeout must be a number of seconds, not {value!r}") from None
    if not 0 < seconds <= 3600:
        raise ValueError(f"cell_timeout must be in (0, 3600] seconds, not {value!r}")
    return seconds


class CodeEnv(ControlledEnvironment):
    """A persistent Python interpreter in the sandbox.

    Args:
        cell_timeout: wall-clock seconds a cell may run before KeyboardInterrupt (a task's
            ``options["cell_timeout"]`` overrides it).
        grace: seconds the interrupted cell has to stop before the interpreter is killed
            and restarted.
        output_limit: characters kept of each observation block.
        limits: sandbox limits.

    Example:
        >>> env = CodeEnv()  # doctest: +SKIP
        >>> env.reset(Task("demo"))  # doctest: +SKIP
        '(no output)'
        >>> env.step("x = 6 * 7\\nx").observation  # doctest: +SKIP
        'Out[1]: 42'
    """

    domain = code_domain.NAME

    def __init__(self, cell_timeout: float = 10.0, grace: float = 2.0, output_limit: int = code_domain.OUTPUT_LIMIT,
                 limits: SandboxLimits | None = None) -> None:
        self.default_timeout = _seconds(cell_timeout)
        self.cell_timeout = cell_timeout
        self.grace = grace
        self.output_limit = output_limit
        self.limits = limits or DEFAULT_LIMITS
        self._sandbox: Sandbox | None = None
        self._control: Controller | None = None
        self._cells: list[str] = []
        self.task: Task | None = None

    def system_prompt(self) -> str:
        return code_domain.system_prompt(self.cell_timeout, self.output_limit)

    # -- lifecycle -------------------------------------------------------------------
    def reset(self, task: Task | None = None) -> str:
        """Start a fresh sandbox and interpreter, seed the task's files, run its setup
        cells (Python source, not recorded, not numbered: the first agent cell is cell 1);
        return ``(no output)``.

        Raises:
            SandboxError: the sandbox or interpreter could not start, or a setup cell failed.
        """
        task = task or Task("empty")
        self.close()
        self.task = task
        self.cell_timeout = _seconds(task.options.get("cell_timeout", self.default_timeout))
        self._sandbox = Sandbox(limits=self.limits, files=dict(task.files))
        (self._sandbox.ctl_dir / "ctl.py").write_text(_CONTROLLER.read_text())
        # Replies carry at most four blocks, or a snapshot's files (base64).
        self._control = Controller(self._sandbox, ["python3", "-I", "/run/lwm/ctl.py"], "the code interpreter",
                                   max_reply_bytes=MAX_SNAPSHOT_BYTES * 2 + (1 << 20))
        ready = self._control.read(time.monotonic() + 15)
        if ready != {"ready": True}:
            raise SandboxError(f"the code interpreter did not start: {ready!r}")
        for cell in task.setup:  # shown as "<setup>" in tracebacks; not numbered, not replayed
            reply = self._run(cell, setup=True)
            if reply["status"] != "ok":
                raise SandboxError(f"setup cell failed: {reply.get('error') or reply['status']}")
        self._cells = []
        return code_domain.EMPTY

    def step(self, action: str) -> StepResult:
        """Run one cell and return its observation (format in :mod:`lwm.domains.code.spec`).

        ``info``: ``status`` (``ok``/``error``/``interrupted``/``restarted``/``died``),
        ``n`` (the cell's number), ``seconds``.

        Raises:
            ActionFormatError: the cell is too long or not encodable.
            EnvironmentClosedError: no episode is running.
            SandboxError: the controller died (e.g. the cell killed it) or stopped answering.
        """
        cell = code_domain.parse_action(action)
        t0 = time.monotonic()
        reply = self._run(cell)
        obs = code_domain.format_observation(reply, self.cell_timeout, self.output_limit)
        info = {"status": reply["status"], "n": reply["n"], "seconds": round(time.monotonic() - t0, 3)}
        return StepResult(obs, info=info)

    def probe(self, action: str) -> str:
        """Run a verifier's cell; return what it printed to stdout (untruncated up to the
        block limit, without headers), followed by its traceback if it failed."""
        reply = self._run(code_domain.parse_action(action))
        out = reply.get("stdout") or ""
        return out + (reply["error"] if reply.get("error") else "")

    # -- snapshot ------------------------------------------------------------------------
    def snapshot(self) -> CodeSnapshot:
        """The cells run since the interpreter last started and the files under /app.

        A live namespace cannot be copied in general (open files, threads, sockets,
        unpicklable objects), so :meth:`restore` rebuilds it by replaying the cells.

        Raises:
            SandboxError: the files under /app exceed :data:`MAX_SNAPSHOT_BYTES`.
        """
        reply = self._request({"op": "files", "max_bytes": MAX_SNAPSHOT_BYTES}, 30)
        if reply.get("too_big"):
            raise SandboxError(f"the files under /app exceed {MAX_SNAPSHOT_BYTES} bytes: cannot snapshot them")
        files = tuple((p, k, base64.b64decode(d) if k == "file" else d) for p, k, d in reply["entries"])
        return CodeSnapshot(tuple(self._cells), files)

    def restore(self, snapshot: CodeSnapshot) -> None:
        """Start a fresh sandbox for the same task, replay the snapshot's cells (their
        output discarded), then put /app back exactly as it was.

        Cells that are not deterministic (random numbers, time, reading files the later
        cells changed) may rebuild different values; files under /tmp and /root are not
        restored. The next cell's number continues from the snapshot's.

        Raises:
            SandboxError: the sandbox could not start again.
        """
        if self.task is None:
            raise EnvironmentClosedError("call reset() before restore()")
        self.reset(self.task)
        for cell in snapshot.cells:
            self._run(cell)
        entries = [[p, k, base64.b64encode(d).decode() if k == "file" else d] for p, k, d in snapshot.files]
        self._request({"op": "put_files", "entries": entries}, 30)

    # -- the controller ------------------------------------------------------------------
    def _run(self, cell: str, setup: bool = False) -> dict[str, Any]:
        reply = self._request({"op": "run", "code": cell, "timeout": self.cell_timeout, "grace": self.grace,
                               "limit": self.output_limit, "setup": setup}, self.cell_timeout + self.grace + 5)
        if not isinstance(reply, dict) or reply.get("status") not in {"ok", "error", "interrupted", "restarted",
                                                                       "died"}:
            raise SandboxError("the code interpreter's controller sent a malformed answer")
        if reply["status"] in ("restarted", "died"):
            self._cells = []  # the namespace is gone: replaying starts from here
        else:
            self._cells.append(cell)
        return reply

    def _request(self, obj: dict[str, Any], timeout: float) -> Any:
        if self._control is None:
            raise EnvironmentClosedError("call reset() before step()")
        try:
            reply = self._control.request(obj, timeout)
        except SandboxError as e:
            self.close()  # nothing more can be done in this sandbox
            raise SandboxError(f"{e} (the interpreter's controller is gone: the episode cannot go on)") from None
        if isinstance(reply, dict) and "fail" in reply:
            raise SandboxError(f"the code interpreter's controller failed: {reply['fail']}")
        return reply
