"""A real terminal: bash in tmux, inside the bubblewrap sandbox.

The tmux server, the shell and the tmux client commands all run inside the sandbox: a
small controller there (``controller.py``) takes requests on a pipe and answers
with the screen. The host only reads bounded JSON from that pipe.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

from lwm.domains.terminal import spec as domain
from lwm.envs.base import StepResult, Task
from lwm.envs.controller import ControlledEnvironment, Controller
from lwm.envs.sandbox import DEFAULT_ENV, Sandbox, SandboxLimits
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
_PANE = "main:0.0"  # the episode's pane, even if the agent opens other windows
_CONTROLLER = Path(__file__).with_name("controller.py")
_MAX_SNAPSHOT_REPLY = 64 << 20  # base64 of a gzipped tar of the private directories


class TerminalEnv(ControlledEnvironment):
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
        self._control: Controller | None = None
        self.task: Task | None = None

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
        (self._sandbox.ctl_dir / "tmux.conf").write_text(_TMUX_CONF)
        (self._sandbox.ctl_dir / "ctl.py").write_text(_CONTROLLER.read_text())
        self.task = task
        self._control = Controller(self._sandbox, ["python3", "-I", "/run/lwm/ctl.py"], "the terminal")
        (code, _, err), = self._reply(self._control.read(time.monotonic() + 15))  # "ready"
        if code != 0:
            raise SandboxError(f"tmux server did not start: {err}")
        self._tmux(["new-session", "-d", "-s", "main", "-x", str(self.width), "-y", str(self.height),
                    "-c", "/app", "bash --rcfile /root/.bashrc -i"])
        self._wait_for(lambda: self.screen().endswith("#"), 10, "shell prompt")
        if task.setup:
            # Setup runs in the shell itself (so its state carries over); it signals its end
            # through tmux, then clears the screen so the episode starts on a clean prompt.
            # The leading space keeps it out of the shell's history (HISTCONTROL).
            self._type(" " + " && ".join(task.setup) + "; tmux wait-for -S lwm-setup; clear\n",
                       time.monotonic() + self.limits.command_timeout_seconds)
            self._tmux(["wait-for", "lwm-setup"], timeout=self.limits.command_timeout_seconds)
            self._wait_for(lambda: "\n" not in self.screen(), 10, "screen clear after setup")
        return self.screen()

    def step(self, action: str) -> StepResult:
        """Type the action's keystrokes, wait their durations, read the screen.

        The whole action, typing included, is cut at ``max_action_seconds``
        (``info["duration_capped"]``). ``[]`` ends the episode (``terminated=True``) and returns
        the current screen; so does a shell that has exited (``info["shell_exited"]``).

        Raises:
            ActionFormatError: the action is not a JSON keystroke list.
            EnvironmentClosedError: no episode is running.
            SandboxError: the terminal stopped answering (e.g. the agent killed tmux).
        """
        if self._control is None:
            raise EnvironmentClosedError("call reset() before step()")
        keys = domain.parse_action(action)
        if not keys:
            return StepResult(self.screen(), terminated=True)
        t0 = time.monotonic()
        deadline, capped = t0 + self.max_action_seconds, False
        for key in keys:
            if key.keystrokes:
                if key.is_key_name:
                    self._tmux(["send-keys", "-t", _PANE, key.keystrokes])
                else:
                    capped |= not self._type(key.keystrokes, deadline)
            wait = min(key.duration, max(0.0, deadline - time.monotonic()))
            capped |= wait < key.duration
            time.sleep(wait)
        screen, dead = self._screen_and_state()
        info = {"seconds": round(time.monotonic() - t0, 3), "duration_capped": capped}
        if dead:
            info["shell_exited"] = True
        return StepResult(screen, terminated=dead, info=info)

    def probe(self, action: str) -> str:
        """Run a verifier's shell command beside the agent's shell (same files, same
        processes) and return its standard output; the screen is left alone."""
        if self._control is None:
            raise EnvironmentClosedError("call reset() before verify()")
        timeout = self.limits.command_timeout_seconds
        (_, out, _), = self._reply(self._control.request({"shell": action, "timeout": timeout}, timeout))
        return str(out)

    def snapshot(self) -> bytes:
        """The files of ``/app``, ``/root`` and ``/tmp`` as a gzipped tar (at most about
        48 MB compressed). Processes, the shell's variables and its directory are not part
        of it: a terminal's running programs cannot be copied.

        Raises:
            SandboxError: the files are too large or tar failed.
        """
        if self._control is None:
            raise EnvironmentClosedError("call reset() before snapshot()")
        (code, data, err), = self._reply(self._control.request({"snapshot": True}, 60, _MAX_SNAPSHOT_REPLY))
        if code != 0:
            raise SandboxError(f"snapshot failed: {err}")
        return base64.b64decode(data)

    def restore(self, snapshot: bytes) -> None:
        """Replace the files of ``/app``, ``/root`` and ``/tmp`` with a snapshot's (the
        screen and running processes stay as they are)."""
        if self._control is None:
            raise EnvironmentClosedError("call reset() before restore()")
        (code, _, err), = self._reply(self._control.request({"restore": base64.b64encode(snapshot).decode()}, 30))
        if code != 0:
            raise SandboxError(f"restore failed: {err}")

    # -- tmux, through the in-sandbox controller ----------------------------------------
    def screen(self) -> str:
        """The visible screen: lines right-stripped, trailing blank lines removed."""
        return self._screen_and_state()[0]

    def _screen_and_state(self) -> tuple[str, bool]:
        # Read exactly the window's rows and columns, whatever the agent did to tmux.
        capture, state = self._tmux(
            ["capture-pane", "-p", "-t", _PANE, "-S", "0", "-E", str(self.height - 1)],
            ["display-message", "-p", "-t", _PANE, "#{pane_dead}"],
        )
        lines = [line[: self.width].rstrip() for line in capture.split("\n")[: self.height]]
        return "\n".join(lines).rstrip("\n"), state.strip() == "1"

    def _type(self, text: str, deadline: float) -> bool:
        """Type ``text`` in one tmux call; returns False if the deadline cut it short.

        Literal text (-l) so that words like "Enter" are typed, not pressed; newlines are
        pressed as Enter. tmux reads a ';' that ends an argument as a command separator,
        so trailing semicolons are typed as an escaped '\\;' each.
        """
        commands = []
        for i, chunk in enumerate(text.split("\n")):
            if i:
                commands.append(["send-keys", "-t", _PANE, "Enter"])
            body = chunk.rstrip(";")
            if body:
                commands.append(["send-keys", "-t", _PANE, "-l", "--", body])
            commands += [["send-keys", "-t", _PANE, "-l", "--", "\\;"]] * (len(chunk) - len(body))
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        # a batch that starts gets at least 1 s: with the milliseconds left near the deadline
        # tmux timed out mid-batch, a sandbox failure instead of a capped action
        self._tmux(*commands, timeout=max(left, 1.0))
        return True

    def _tmux(self, *commands: list[str], timeout: float = 10.0) -> list[str]:
        """Run tmux client commands inside the sandbox; return their outputs.

        Raises:
            SandboxError: a command failed or the controller did not answer in time.
        """
        if self._control is None:
            raise EnvironmentClosedError("terminal is closed")
        results = self._reply(self._control.request({"commands": list(commands), "timeout": timeout}, timeout), None)
        for code, _, err in results:
            if code != 0:
                raise SandboxError(f"tmux failed ({code}): {str(err).strip()[:300]}")
        if len(results) != len(commands):
            raise SandboxError("the terminal's controller answered out of step")
        return [str(out) for _, out, _ in results]

    @staticmethod
    def _reply(reply, count: int | None = 1) -> list:
        if not (isinstance(reply, list) and all(isinstance(r, list) and len(r) == 3 for r in reply)
                and (count is None or len(reply) == count)):
            raise SandboxError("the terminal's controller sent a malformed answer")
        return reply

    def _wait_for(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except SandboxError:
                if not self._control.alive:
                    break
            time.sleep(0.02)
        raise SandboxError(f"timed out after {timeout}s waiting for {what}")
