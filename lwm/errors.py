"""Every error ``lwm`` raises on purpose.

    LwmError
    ├── RowFormatError        a malformed line in a JSONL file (names file and line)
    ├── ActionFormatError     an action that does not follow its domain's format
    ├── SandboxError          the sandbox could not start or was used after close
    ├── EnvironmentClosedError  step() after close() or before reset()
    ├── ModelUnavailableError a world-model backend cannot be reached or loaded
    ├── DataNotFoundError     no input where input was expected
    └── RunMismatchError      resuming a run directory with other settings
"""

from __future__ import annotations

from pathlib import Path


class LwmError(Exception):
    """Base class of every error raised by ``lwm``."""


class RowFormatError(LwmError, ValueError):
    """A line of a JSONL file is not valid JSON or misses a required field.

    Attributes:
        path: the file.
        line: 1-based line number.
        reason: what was expected and what arrived.
    """

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        self.path, self.line, self.reason = Path(path), line, reason
        super().__init__(f"{path}:{line}: {reason}")


class ActionFormatError(LwmError, ValueError):
    """An action does not follow its domain's action format."""

    def __init__(self, domain: str, action: str, reason: str) -> None:
        self.domain, self.action, self.reason = domain, action, reason
        shown = action if len(action) < 200 else action[:200] + "…"
        super().__init__(f"invalid {domain} action {shown!r}: {reason}")


class SandboxError(LwmError, RuntimeError):
    """The sandbox could not be created, or was used after it was closed."""


class EnvironmentClosedError(LwmError, RuntimeError):
    """``step()`` was called on an environment that is closed or was never reset."""


class ModelUnavailableError(LwmError, RuntimeError):
    """A world-model backend cannot be loaded or reached."""


class DataNotFoundError(LwmError, FileNotFoundError):
    """Expected input files are missing."""


class RunMismatchError(LwmError, ValueError):
    """A run directory is being resumed with settings other than those it was started with.

    Attributes:
        out: the run directory.
        differences: ``{setting: (recorded, requested)}``.
    """

    def __init__(self, out: str | Path, differences: dict[str, tuple]) -> None:
        self.out, self.differences = Path(out), differences
        shown = "; ".join(f"{k}: started with {a!r}, now {b!r}" for k, (a, b) in differences.items())
        super().__init__(f"{out} holds a run with other settings ({shown}); resume it with the same "
                         "settings or choose a new --out")
