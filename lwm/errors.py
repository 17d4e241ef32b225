"""Every error ``lwm`` raises on purpose.

    LwmError
    ├── RowFormatError          a malformed line in a JSONL file (names file and line)
    ├── UnknownDomainError      a domain name no registry entry has (lists the known ones)
    ├── NoRealEnvironmentError  a domain whose real environment cannot run here (import only)
    ├── ActionFormatError       an action that does not follow its domain's format
    ├── SandboxError            the sandbox could not start or was used after close
    ├── EnvironmentClosedError  step() after close() or before reset()
    ├── AssetMissingError       a tool an environment needs is not installed (says how to install it)
    ├── CacheMissError          the replay cache has no observation for this situation
    ├── ModelUnavailableError   a world-model backend cannot be reached or loaded
    ├── AdapterExportError      a LoRA adapter cannot be converted to GGUF
    ├── DataNotFoundError       no input where input was expected
    └── RunMismatchError        resuming a run directory with other settings

Errors that are also ``KeyError`` (unknown domain, cache miss) print their message
without the quotes ``KeyError`` adds.
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


class _Message:
    """``str()`` of a ``KeyError`` subclass is its message, not its quoted repr."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownDomainError(_Message, LwmError, KeyError):
    """No domain of this name is registered.

    Attributes:
        name: the name asked for.
        known: the registered names.
    """

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name, self.known = name, tuple(known)
        super().__init__(f"unknown domain {name!r} (known: {', '.join(self.known)})")


class NoRealEnvironmentError(LwmError, ValueError):
    """The domain's real environment cannot run here (a desktop VM, an emulator): its
    trajectories come from importers. The message gives the reason."""


class ActionFormatError(LwmError, ValueError):
    """An action does not follow its domain's action format."""

    def __init__(self, domain: str, action: str, reason: str) -> None:
        self.domain, self.action, self.reason = domain, action, reason
        shown = action if len(action) < 200 else action[:200] + "…"
        super().__init__(f"invalid {domain} action {shown!r}: {reason}")


class SandboxError(LwmError, RuntimeError):
    """The sandbox could not be created, or was used after it was closed."""


class EpisodeBrokenError(SandboxError):
    """An action left the sandbox unusable mid-episode (``tmux kill-server``, ``rm -rf /``):
    the episode is a failure, not a missing one. ``trajectory`` holds it, that action its last
    turn (:class:`lwm.schema.Trajectory`, ``reward`` 0 and ``metadata["broken"]`` saying why)."""

    def __init__(self, message: str, trajectory: object) -> None:
        super().__init__(message)
        self.trajectory = trajectory


class EnvironmentClosedError(LwmError, RuntimeError):
    """``step()`` was called on an environment that is closed or was never reset."""


class AssetMissingError(LwmError):
    """A tool an environment needs is not installed; the message says how to install it."""


class CacheMissError(_Message, LwmError, KeyError):
    """The replay cache has no observation for this situation."""


class ModelUnavailableError(LwmError, RuntimeError):
    """A world-model backend cannot be loaded or reached."""


class AdapterExportError(LwmError, ValueError):
    """The adapter cannot be expressed as a llama.cpp LoRA (the message says why)."""


class UnsafePathError(LwmError, PermissionError):
    """A directory lwm would keep its tools or models in could be someone else's (a link,
    another owner, writable by others)."""


class DataNotFoundError(LwmError, FileNotFoundError):
    """Expected input files are missing."""


class JobsFailedError(LwmError, RuntimeError):
    """Items of a resumable run failed, so what comes after them (training on their results)
    was not done; running the same command again retries them."""


class RunBusyError(LwmError, RuntimeError):
    """Another run is writing the same run directory now (its journal's lock is held).

    Attributes:
        out: the run directory.
    """

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        super().__init__(f"{out} is being written by another lwm run now; wait for it to finish, "
                         "or choose another --out")


def _brief(value: object) -> str:
    # a long list (held-out families) is named by its first items and its length
    if isinstance(value, list) and len(value) > 3:
        return "[" + ", ".join(map(repr, value[:3])) + f", … ({len(value)} in all)]"
    return repr(value)


def _difference(key: str, recorded: object, requested: object) -> str:
    # two dicts (sampling settings): only the keys whose values differ
    if isinstance(recorded, dict) and isinstance(requested, dict):
        keys = [k for k in {**recorded, **requested} if recorded.get(k) != requested.get(k)]
        return "; ".join(_difference(f"{key}.{k}", recorded.get(k), requested.get(k)) for k in keys)
    return f"{key}: started with {_brief(recorded)}, now {_brief(requested)}"


class RunMismatchError(LwmError, ValueError):
    """A run directory is being resumed with settings other than those it was started with.

    Attributes:
        out: the run directory.
        differences: ``{setting: (recorded, requested)}``.
    """

    def __init__(self, out: str | Path, differences: dict[str, tuple]) -> None:
        self.out, self.differences = Path(out), differences
        shown = "; ".join(_difference(k, a, b) for k, (a, b) in differences.items())
        super().__init__(f"{out} holds a run with other settings ({shown}); resume it with the same "
                         "settings or choose a new --out")
