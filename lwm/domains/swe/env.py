"""A real coding-agent environment: a git repository and the agent's tools, in the sandbox.

The tools (read, edit, write, bash, grep, glob; see :mod:`lwm.domains.swe.spec`) run inside
the bubblewrap sandbox behind a controller (``controller.py``) under the sandbox's
``/usr/bin/python3``. The host checks the tool call's arguments, sends it as one JSON
line and reads back a bounded JSON answer; it never touches the repository itself.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lwm.domains.swe import spec as domain
from lwm.envs.base import StepResult, Task
from lwm.envs.controller import ControlledEnvironment, Controller
from lwm.envs.sandbox import Sandbox, SandboxLimits
from lwm.errors import ActionFormatError, EnvironmentClosedError, SandboxError

_CONTROLLER = Path(__file__).with_name("controller.py")
#: Commits are reproducible: one identity, one date for every commit made in the sandbox.
GIT_DATE = "2024-01-01T12:00:00+0000"
GIT_ENV = {"GIT_AUTHOR_DATE": GIT_DATE, "GIT_COMMITTER_DATE": GIT_DATE, "GIT_CONFIG_NOSYSTEM": "1"}
GITCONFIG = """\
[user]
\tname = Ada Lovelace
\temail = ada@example.com
[init]
\tdefaultBranch = main
[advice]
\tdetachedHead = false
"""
#: The setup that turns the seeded /app/repo into a git repository with one commit. Seeded
#: files get one fixed modification time, so mtime-ordered listings are reproducible.
GIT_INIT_SETUP = (
    "find . -exec touch -h -d @1704110400 {} +",
    "git init -q",
    "git add -A",
    "git commit -q -m 'Initial commit'",
)
_MAX_REPLY_BYTES = 8 << 20
#: What one grep or glob may walk: directory entries and seconds (well inside the host's
#: 10-second wait for a tool), beyond which the tool answers with an error.
WALK_MAX_ENTRIES = 100_000
WALK_MAX_SECONDS = 5.0


@dataclass(frozen=True)
class SweSnapshot:
    """A copy of the episode's state: a gzip tar of /app and the shell's directory."""

    tar_gz: bytes
    cwd: str


class SweEnv(ControlledEnvironment):
    """A sandboxed git repository with a coding agent's tools.

    Args:
        limits: sandbox limits.
        max_snapshot_bytes: largest snapshot (gzip tar of /app) kept, in bytes.
        setup_timeout: seconds the task's setup may take.

    Example:
        >>> env = SweEnv()  # doctest: +SKIP
        >>> env.reset(Task("t", files={"/app/repo/a.py": "x = 1\\n"}, setup=GIT_INIT_SETUP))  # doctest: +SKIP
        'Working directory: /app/repo\\nGit repository: yes (branch main, 1 commit)\\nFiles (1):\\n  a.py'
        >>> env.step('{"name": "read", "arguments": {"file_path": "a.py"}}').observation  # doctest: +SKIP
        '     1\\tx = 1'
    """

    domain = domain.NAME

    def __init__(self, *, limits: SandboxLimits | None = None, max_snapshot_bytes: int = 4 << 20,
                 setup_timeout: float = 30.0) -> None:
        self.limits = limits or SandboxLimits()
        self.max_snapshot_bytes = max_snapshot_bytes
        self.setup_timeout = setup_timeout
        self._sandbox: Sandbox | None = None
        self._control: Controller | None = None
        self.task: Task | None = None

    def system_prompt(self) -> str:
        return domain.system_prompt()

    # -- lifecycle -------------------------------------------------------------------
    def reset(self, task: Task | None = None) -> str:
        """Start a fresh sandbox with the task's files, run its setup (bash, in /app/repo),
        and return the overview of the repository (working directory, git branch and
        commit count, tracked files).

        Raises:
            SandboxError: the sandbox or controller could not start, or the setup failed.
        """
        task = task or Task("empty")
        self.close()
        self._sandbox = Sandbox(limits=self.limits, env=dict(GIT_ENV),
                                files={"/root/.gitconfig": GITCONFIG, **task.files})
        (self._sandbox.ctl_dir / "ctl.py").write_text(_CONTROLLER.read_text())
        (self._sandbox.ctl_dir / "config.json").write_text(json.dumps({
            "bash_default_timeout_ms": domain.DEFAULT_BASH_TIMEOUT_MS,
            "bash_max_timeout_ms": domain.MAX_BASH_TIMEOUT_MS,
            "bash_max_output_bytes": domain.BASH_MAX_OUTPUT_BYTES,
            "read_default_limit": domain.READ_DEFAULT_LIMIT,
            "read_max_line_chars": domain.READ_MAX_LINE_CHARS,
            "read_max_chars": domain.READ_MAX_CHARS,
            "grep_max_chars": domain.GREP_MAX_CHARS,
            "list_max_results": domain.LIST_MAX_RESULTS,
            "walk_max_entries": WALK_MAX_ENTRIES,
            "walk_max_seconds": WALK_MAX_SECONDS,
        }))
        self.task = task
        self._control = Controller(self._sandbox, ["python3", "-I", "/run/lwm/ctl.py"], "the swe tools",
                                   max_reply_bytes=_MAX_REPLY_BYTES)
        if not self._control.read(time.monotonic() + 15).get("ready"):
            raise SandboxError("the swe controller did not start")
        if task.setup:
            r = self._request({"op": "setup", "commands": list(task.setup), "timeout": self.setup_timeout},
                              self.setup_timeout)
            if not r.get("ok"):
                raise SandboxError(f"setup of {task.name!r} failed: {str(r.get('output'))[-500:]}")
        return str(self._request({"op": "overview"}, 10)["output"])

    def step(self, action: str) -> StepResult:
        """Run one tool call and return its result text.

        A call that is not a JSON tool call gets a ``<tool_use_error>`` observation with
        ``info["action_error"]``; an unknown tool or invalid arguments get the harness's
        error (``info["is_error"]``), as a real harness answers them. ``info["seconds"]``
        is the wall time of the call.

        Raises:
            EnvironmentClosedError: no episode is running.
            SandboxError: the controller stopped answering (e.g. the agent killed it).
        """
        if self._control is None:
            raise EnvironmentClosedError("call reset() before step()")
        try:
            call = domain.parse_action(action)
        except ActionFormatError as e:
            return StepResult(domain.invalid_answer(e.reason, ""),
                              info={"action_error": e.reason, "is_error": True})
        refusal = domain.validate(call)
        if refusal is not None:
            return StepResult(refusal, info={"is_error": True})
        t0 = time.monotonic()
        timeout = 10.0
        if call.name == "bash":
            timeout = min(call.arguments.get("timeout") or domain.DEFAULT_BASH_TIMEOUT_MS,
                          domain.MAX_BASH_TIMEOUT_MS) / 1000 + 5
        r = self._request({"op": "tool", "name": call.name, "arguments": call.arguments}, timeout)
        if not isinstance(r.get("output"), str):
            raise SandboxError(f"the swe controller failed: {str(r.get('error'))[:300]}")
        return StepResult(r["output"], info={"is_error": bool(r.get("error")),
                                             "seconds": round(time.monotonic() - t0, 3)})

    def snapshot(self) -> SweSnapshot:
        """Copy /app (as a gzip tar made inside the sandbox) and the shell's directory.

        Raises:
            SandboxError: /app is larger than ``max_snapshot_bytes`` compressed.
        """
        r = self._request({"op": "snapshot", "max_bytes": self.max_snapshot_bytes}, 30)
        if "tar" not in r:
            raise SandboxError(f"snapshot failed: {r.get('error')}")
        return SweSnapshot(base64.b64decode(r["tar"]), str(r["cwd"]))

    def restore(self, snapshot: SweSnapshot) -> None:
        """Wipe /app and unpack ``snapshot`` there (inside the sandbox); the shell's
        directory goes back too.

        Raises:
            SandboxError: the controller could not restore it.
        """
        if not isinstance(snapshot, SweSnapshot):
            raise TypeError("restore() takes a snapshot made by SweEnv.snapshot()")
        r = self._request({"op": "restore", "tar": base64.b64encode(snapshot.tar_gz).decode(),
                           "cwd": snapshot.cwd}, 30)
        if not r.get("ok"):
            raise SandboxError(f"restore failed: {r.get('error')}")

    def _request(self, obj: dict[str, Any], timeout: float) -> dict[str, Any]:
        if self._control is None:
            raise EnvironmentClosedError("call reset() first")
        r = self._control.request(obj, timeout)
        if not isinstance(r, dict):
            raise SandboxError("the swe controller sent a malformed answer")
        return r
