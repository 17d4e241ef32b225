"""JSON Lines I/O: line-numbered reading, atomic writing, crash-safe appending (and one-document JSON reading).

Lines are split on ``\\n`` only: AgentWorldBench rows contain U+2028 inside strings,
which ``str.splitlines`` would wrongly treat as a line break.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lwm.errors import RowFormatError, RunMismatchError

#: Largest JSONL file read (it is read whole, to split on "\n" only).
MAX_FILE_BYTES = 4 << 30


def iter_jsonl(path: str | Path, *, skip_truncated_tail: bool = False) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for every non-blank line of a JSONL file.

    Args:
        path: the file.
        skip_truncated_tail: tolerate a last line that lacks its newline and does not
            parse (what a crash in the middle of an append leaves behind). Used when
            resuming; the line is skipped, its work is redone.

    Raises:
        RowFormatError: a line is not a JSON object (names the file and the 1-based line).
    """
    path = Path(path)
    data = _read_bytes(path)
    lines = data.split(b"\n")
    last = len(lines) - 1
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            obj = _parse_object(raw, path, i + 1)
        except RowFormatError:
            if skip_truncated_tail and i == last:
                return
            raise
        yield i + 1, obj


def read_json(path: str | Path) -> dict:
    """Read a JSON file holding one object (a manifest, a config file).

    Raises:
        RowFormatError: the file cannot be read or is not a JSON object (names the file).
    """
    path = Path(path)
    return _parse_object(_read_bytes(path), path, 1)


def check_run_settings(path: str | Path, settings: dict, defaults: dict | None = None) -> None:
    """Record a run's settings in ``path`` (a JSON file in its run directory), or, when
    resuming, check them against the recorded ones: resuming with others would mix two runs.
    A setting the record lacks is compared as its value in ``defaults`` (settings added
    after the run was recorded), else as ``None``.

    Raises:
        RunMismatchError: the recorded settings differ (every difference is listed).
        RowFormatError: the recorded file is unreadable.
    """
    path = Path(path)
    if path.exists():
        compare_settings(read_json(path), settings, path.parent, defaults)
    else:
        write_atomic(path, json.dumps(settings, indent=2, ensure_ascii=False) + "\n")


def compare_settings(recorded: dict, settings: dict, run: str | Path, defaults: dict | None = None) -> None:
    """Check a resumed run's ``settings`` against the ``recorded`` ones of the run directory
    ``run``; a setting the record lacks is compared as its value in ``defaults``, else as ``None``.

    Raises:
        RunMismatchError: they differ (every difference is listed).
    """
    defaults = defaults or {}
    before = {k: recorded.get(k, defaults.get(k)) for k in settings}
    diff = {k: (before[k], v) for k, v in settings.items() if before[k] != v}
    if diff:
        raise RunMismatchError(Path(run), diff)


def _read_bytes(path: Path) -> bytes:
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a device or a FIFO would never end
            raise RowFormatError(path, 0, "not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise RowFormatError(path, 0, f"larger than {MAX_FILE_BYTES >> 30} GiB; split it")
        return path.read_bytes()
    except OSError as e:
        raise RowFormatError(path, 0, f"cannot read: {e.strerror or e}") from None


def _parse_object(raw: bytes, path: Path, line: int) -> dict:
    """One JSON object; ``line`` is where ``raw`` starts (a decoding error's own line is added)."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise RowFormatError(path, line, "not valid UTF-8") from None
    except RecursionError:
        raise RowFormatError(path, line, "nested too deeply") from None
    except json.JSONDecodeError as e:
        # Some of json's messages end in "at" ("Unterminated string starting at"): say it once.
        msg = e.msg.removesuffix(" at")
        raise RowFormatError(path, line + e.lineno - 1, f"not valid JSON ({msg} at column {e.colno})") from None
    except ValueError as e:  # an integer too long to convert
        raise RowFormatError(path, line, f"not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise RowFormatError(path, line, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def dumps(obj: Any) -> str:
    """One JSON line (UTF-8 kept readable, no embedded newline). Text that UTF-8 cannot
    encode (lone surrogates from ``\\ud800`` escapes in the input) stays escaped."""
    text = json.dumps(obj, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj)
    return text


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; on success it replaces ``path`` (with the
    usual file mode), on an exception it is removed, so readers see the old file or the new
    one, never half.

    Raises:
        FileExistsError: ``path`` exists and is not a regular file (a directory, a device
            such as ``/dev/null``: replacing it would destroy it, and as root it can).
    """
    path = Path(path)
    if path.exists() and not path.is_file():
        raise FileExistsError(f"{path} exists and is not a regular file; it is not replaced")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def write_jsonl(path: str | Path, objects: Iterable[Any]) -> None:
    """Write objects as JSON Lines, atomically."""
    write_atomic(path, "".join(dumps(o) + "\n" for o in objects))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class JsonlAppender:
    """Append one object per line and flush it to disk at once, so a crash loses at most
    the line being written (which :func:`iter_jsonl` skips when resuming)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self._f = open(self.path, "a", encoding="utf-8")

    def _repair_tail(self) -> None:
        # A crash can leave a last line without its newline; cut it so the next append
        # starts on a fresh line.
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        data = self.path.read_bytes()
        if not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as f:
                f.truncate(cut)

    def append(self, obj: Any) -> None:
        self._f.write(dumps(obj) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
