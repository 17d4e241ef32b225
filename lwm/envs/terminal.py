"""A real terminal: bash in tmux, inside the bubblewrap sandbox.

The tmux server and the shell run inside the sandbox; the host only talks to the server
through its socket (as the sandbox's unprivileged uid), to type keys and read the screen.
"""

from __future__ import annotations

import subprocess
import time

from lwm.domains import terminal as domain
from lwm.envs.base import StepResult, Task
from lwm.envs.sandbox import DEFAULT_ENV, Sandbox, SandboxLimits, SandboxProcess
from lwm.errors import EnvironmentClosedError, SandboxError

_TMUX_CONF = """\
set -g status off
set -g remain-on-exit on
set -g update-environment ''
set -g escape-time 0
set -g history-limit 2000
set -g default-terminal xterm-256color
"""
# Prompt as AgentWorldBench terminal rows show it: root@host:/path#
_BASHRC = """\
PS1='\\u@\\h:\\w\\$ '
HISTFILE=/dev/null
HISTCONTROL=ignorespace
PROMPT_COMMAND=
export PATH={path}
"""
_SOCKET = "run/tmux/tmux.sock"


class TerminalEnv:
    """A real terminal environment.

    Args:
        width: screen columns.
        height: screen rows.
        limits: sandbox limits.
        max_action_seconds: wall-clock limit of one action: the sum of its durations is
            cut to this (``info["duration_capped"]`` says so).

    Example:
        >>> env = TerminalEnv()  # doctest: +SKIP
        >>> env.reset(Task("demo"))  # doctest: +SKIP
        'root@sandbox:/app#'
        >>> env.step('[{"keystrokes": "echo hi\\\\n", "duration": 0.3}]').observation  # doctest: +SKIP
        'root@sandbox:/app# echo hi\\nhi\\nroot@sandbox:/app#'
    """

    domain = domain.NAME

    def __init__(
        self,
        width: int = 80,
        height: int = 24,
        limits: SandboxLimits | None = None,
        max_action_seconds: float = 30.0,
    ) -> None:
        self.width, self.height = width, height
        self.limits = limits or SandboxLimits()
        self.max_action_seconds = max_action_seconds
        self._sandbox: Sandbox | None = None
        self._server: SandboxProcess | None = None

    def system_prompt(self) -> str:
        return domain.system_prompt(self.width, self.height, "sandbox")

    # -- lifecycle -------------------------------------------------------------------
    def reset(self, task: Task | None = None) -> str:
        """Start a fresh sandbox and shell; run the task's setup; return the first screen.

        Raises:
            SandboxError: the sandbox or tmux could not start.
        """
        task = task or Task("empty")
        self.close()
        files = {"/root/.bashrc": _BASHRC.format(path=DEFAULT_ENV["PATH"]), **task.files}
        self._sandbox = Sandbox(limits=self.limits, files=files)
        conf = self._sandbox.ctl_dir / "tmux.conf"
        conf.write_text(_TMUX_CONF)
        # The tmux server runs in the foreground (-D) as the sandbox's main process.
        self._server = self._sandbox.spawn(["tmux", "-D", "-S", "/" + _SOCKET, "-f", "/run/lwm/tmux.conf"])
        self._wait_for(lambda: (self._server.root / _SOCKET).exists(), 10, "tmux server")
        self._tmux("new-session", "-d", "-s", "main", "-x", str(self.width), "-y", str(self.height), "-c", "/app",
                   "bash --rcfile /root/.bashrc -i")
        self._wait_for(lambda: self.screen().endswith("#"), 10, "shell prompt")
        if task.setup:
            # Setup runs in the shell itself (so its state carries over); it signals its end
            # through tmux, then clears the screen so the episode starts on a clean prompt.
            # The leading space keeps it out of the shell's history (HISTCONTROL).
            self._type(" " + " && ".join(task.setup) + "; tmux wait-for -S lwm-setup; clear\n")
            self._tmux("wait-for", "lwm-setup", timeout=self.limits.command_timeout_seconds)
            self._wait_for(lambda: "\n" not in self.screen(), 10, "screen clear after setup")
        return self.screen()

    def step(self, action: str) -> StepResult:
        """Type the action's keystrokes, wait their durations, read the screen.

        ``[]`` ends the episode (``done=True``) and returns the current screen.

        Raises:
            ActionFormatError: the action is not a JSON keystroke list.
            EnvironmentClosedError: no episode is running.
        """
        if self._server is None:
            raise EnvironmentClosedError("call reset() before step()")
        keys = domain.parse_action(action)
        if not keys:
            return StepResult(self.screen(), done=True)
        budget, capped = self.max_action_seconds, False
        t0 = time.monotonic()
        for key in keys:
            if key.keystrokes:
                if key.is_key_name:
                    self._tmux("send-keys", "-t", "main", key.keystrokes)
                else:
                    self._type(key.keystrokes)
            wait = min(key.duration, max(0.0, budget - (time.monotonic() - t0)))
            capped |= wait < key.duration
            time.sleep(wait)
        info = {"seconds": round(time.monotonic() - t0, 3), "duration_capped": capped}
        return StepResult(self.screen(), info=info)

    def close(self) -> None:
        """Kill the shell and everything it started; delete the sandbox. Safe to call twice."""
        if self._sandbox is not None:
            self._sandbox.close()
        self._sandbox = self._server = None

    def __enter__(self) -> "TerminalEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tmux ------------------------------------------------------------------------
    def screen(self) -> str:
        """The visible screen: lines right-stripped, trailing blank lines removed."""
        out = self._tmux("capture-pane", "-p", "-t", "main")
        return "\n".join(line.rstrip() for line in out.split("\n")).rstrip("\n")

    def _type(self, text: str) -> None:
        # Literal text (-l) so that words like "Enter" are typed, not pressed; newlines
        # are pressed as Enter. tmux reads a ';' that ends an argument as a command
        # separator, so trailing semicolons are sent escaped ('\\;'), one per call.
        for i, chunk in enumerate(text.split("\n")):
            if i:
                self._tmux("send-keys", "-t", "main", "Enter")
            body = chunk.rstrip(";")
            if body:
                self._tmux("send-keys", "-t", "main", "-l", "--", body)
            for _ in range(len(chunk) - len(body)):
                self._tmux("send-keys", "-t", "main", "-l", "--", "\\;")

    def _tmux(self, *args: str, timeout: float = 10.0) -> str:
        if self._sandbox is None or self._server is None:
            raise EnvironmentClosedError("terminal is closed")
        sock = str(self._server.root / _SOCKET)
        try:
            r = self._sandbox.host_command(["tmux", "-S", sock, *args], timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SandboxError(f"tmux {args[0]} timed out after {timeout}s") from None
        if r.returncode != 0:
            raise SandboxError(f"tmux {args[0]} failed: {r.stderr.strip()}")
        return r.stdout

    def _wait_for(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except SandboxError:
                pass
            if self._server.process.poll() is not None:
                raise SandboxError(f"sandbox exited (code {self._server.process.returncode}) before {what}")
            time.sleep(0.02)
        raise SandboxError(f"timed out after {timeout}s waiting for {what}")
