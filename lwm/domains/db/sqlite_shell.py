"""What the ``sqlite3`` shell (3.40) prints where the SQL typed alone decides it: input that
runs nothing (an unfinished statement) and a statement that does not prepare.

The interactive shell reads a line at a time and collects lines until they end a complete
statement (``sqlite3_complete``), then runs the collected text statement by statement; the
first statement that fails ends that text (the rest of it is not run) and the shell prints
``Parse error: <message>`` with the text around the error and a caret. Whether a statement
parses is SQLite's own parser, reached through ``ctypes`` in the library that Python's
``sqlite3`` module uses, on a database of its own that holds the episode's schema: the
tables, indexes and views the setup created (shown in the world model's system prompt), as
long as no statement the episode ran can have changed them. Then the errors of names are
known too (``no such table: x``, ``table x already exists``). Otherwise only syntax errors
are: they are found before any table is looked up, except in statements whose parser checks
the schema part-way (``CREATE TABLE``, ``CREATE TRIGGER``, ``CREATE VIRTUAL TABLE``, ``ALTER
TABLE``: an existing table is reported before the syntax error after it), which are then
left to the world model. Nothing is run: statements are only prepared.

The line handling follows ``process_input`` and the error text ``shell_error_context`` of
SQLite's ``shell.c`` (3.40); ``lwm check-env db`` and ``tests/domains/test_db_certain.py``
compare the answers with the real shell.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import itertools
import os
import re
import sqlite3
import tempfile
from collections.abc import Sequence
from typing import NamedTuple

#: Messages of SQLite's tokenizer and parser: the statement's text alone causes them.
_SYNTAX = re.compile(r'near ".*": syntax error|unrecognized token: ".*"', re.S)
#: Messages of the names a statement refers to: the schema decides them, where it is known.
_NAMES = re.compile(r"(?:no such (?:table|column|index|view|trigger)|ambiguous column name): .*"
                    r"|(?:table|index|view|trigger) \S+ already exists|table \S+ has no column named .*"
                    r"|table \S+ has \d+ columns but \d+ values were supplied|\d+ values for \d+ columns", re.S)
#: Statements whose parser may look at the schema before it reaches their end (``CREATE
#: TABLE``, ``CREATE TRIGGER``, ``ALTER TABLE`` …, also after ``EXPLAIN``): any that names them.
_SCHEMA_FIRST = re.compile(r"\b(?:CREATE|ALTER)\b", re.I)
#: First words of the statements that change rows only.
_ROWS = {"SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH", "VALUES"}
#: The setup statements that make the schema the episode's session sees (a temporary one
#: lived in the setup's own client).
_SETUP_SCHEMA = re.compile(r"CREATE\s+(?:UNIQUE\s+INDEX|INDEX|TABLE|VIEW|TRIGGER|VIRTUAL\s+TABLE)\b", re.I)
#: Tables the shell adds to SQLite's own (its extensions): a missing table of that name is not.
_SHELL_TABLES = {"generate_series", "fsdir", "completion", "zipfile", "sqlite_dbdata", "sqlite_dbptr"}
#: First words of the statements that leave the schema as it was.
_KEEPS_SCHEMA = _ROWS | {"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "EXPLAIN"}
#: Dot-commands that change neither what later SQL prints nor how lines are read.
_PLAIN_DOT = {"tables", "table", "schema", "indexes", "indices", "databases", "help", "show", "headers", "header",
              "mode", "width", "nullvalue", "dbinfo", "fullschema"}
_SPACE = " \t\n\v\f\r"
_SPACE_BYTES = _SPACE.encode()
#: The schema of a database whose schema is not known: one table, so that a fresh connection
#: has a schema still to read, as the episode's session has until a statement reads it.
_UNKNOWN = ("CREATE TABLE lwm_schema_not_known (x)",)
#: What a setup statement may not do here (reach another file, change the connection).
_DENIED = {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH, sqlite3.SQLITE_PRAGMA}


class _Library:
    """The SQLite library's prepare and error-offset calls (``sqlite3_error_offset``: 3.38+),
    each on a fresh connection to a probe database file that holds a schema: a session's
    first statements see a schema not yet read, and some syntax errors are then reported with
    ``SQLITE_SCHEMA`` (``… (17)``) — such answers depend on what the session ran before and
    are left to the world model. Nothing is ever run: statements are only prepared."""

    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        lib.sqlite3_open_v2.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                        ctypes.c_char_p]
        lib.sqlite3_prepare_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                           ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        lib.sqlite3_errmsg.argtypes = [ctypes.c_void_p]
        lib.sqlite3_errmsg.restype = ctypes.c_char_p
        for name in ("sqlite3_error_offset", "sqlite3_finalize", "sqlite3_close_v2"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        self.lib = lib
        self._dir = tempfile.TemporaryDirectory(prefix="lwm-sqlite-")
        self._files: dict[tuple[str, ...], str | None] = {}
        self._names = itertools.count()

    def probe(self, schema: tuple[str, ...]) -> str | None:
        """A database file holding the schema that the setup statements ``schema`` made, or
        ``None`` when it is not known: a statement other than ``CREATE`` or a change of rows
        (``DROP``, ``ALTER``, a transaction, ``CREATE TEMP`` …), or one that fails or runs
        long. Rows are never written: they do not change what prepares."""
        if schema not in self._files:
            if len(self._files) >= 256:  # one file per task setup seen: keep the latest
                if old := self._files.pop(next(iter(self._files))):
                    os.unlink(old)
            path: str | None = os.path.join(self._dir.name, f"{next(self._names)}.db")
            steps = itertools.count()
            try:
                with contextlib.closing(sqlite3.connect(path)) as db:
                    # the setup comes from a system prompt: nothing in it may reach a file or run long
                    db.set_authorizer(lambda action, *_: sqlite3.SQLITE_DENY if action in _DENIED else 0)
                    db.set_progress_handler(lambda: next(steps) > 100, 10_000)
                    for statement in schema:
                        if _SETUP_SCHEMA.match(_strip_comments(statement, leading=True)):
                            db.execute(statement)
                        elif _first_word(statement) not in _ROWS:
                            raise ValueError(f"the setup's {_first_word(statement)} may change the schema")
                    db.commit()
            except (sqlite3.Error, ValueError):  # UnicodeError (a lone surrogate) is a ValueError
                os.unlink(path)
                path = None
            self._files[schema] = path
        return self._files[schema]

    def statements(self, file: str, sql: bytes) -> list[tuple[int, int, str, int]]:
        """Prepare the statements of ``sql`` one after another on a fresh read-only connection
        to ``file``: for each, (where it starts in ``sql``, the result code, the error message,
        the error's byte offset from its start), up to the first that fails. Empty statements
        (``;`` alone, comments) and the white space after each are passed over, as the shell
        does."""
        out: list[tuple[int, int, str, int]] = []
        db = ctypes.c_void_p()
        try:
            if self.lib.sqlite3_open_v2(file.encode(), ctypes.byref(db), 1, None) != 0:  # 1: read-only
                return [(0, -1, "the probe database did not open", -1)]
            buf = ctypes.create_string_buffer(sql)
            start, end = ctypes.addressof(buf), ctypes.addressof(buf) + len(sql)
            at = start
            while True:
                while at < end and sql[at - start] in _SPACE_BYTES:
                    at += 1
                if at >= end:
                    return out
                stmt, tail = ctypes.c_void_p(), ctypes.c_void_p()
                rc = self.lib.sqlite3_prepare_v2(db, ctypes.c_void_p(at), -1, ctypes.byref(stmt), ctypes.byref(tail))
                if rc != 0:
                    message = self.lib.sqlite3_errmsg(db).decode("utf-8", "replace")
                    return [*out, (at - start, rc, message, self.lib.sqlite3_error_offset(db))]
                if stmt.value:
                    self.lib.sqlite3_finalize(stmt)
                    out.append((at - start, 0, "", -1))
                if not tail.value or tail.value <= at:
                    return out
                at = tail.value
        finally:
            self.lib.sqlite3_close_v2(db)


@functools.cache
def _library() -> _Library | None:
    """SQLite 3.40 as Python's ``sqlite3`` module has it, or ``None`` (another version parses
    other SQL and words its errors otherwise; no library found)."""
    if not sqlite3.sqlite_version.startswith("3.40."):
        return None
    path = ctypes.util.find_library("sqlite3")
    try:
        return _Library(path) if path else None
    except (OSError, AttributeError):
        return None


def _first_word(sql: str) -> str:
    words = _strip_comments(sql, leading=True).split(None, 1)
    return re.split(r"\W", words[0], maxsplit=1)[0].upper() if words else ""


def _error_context(sql: str, offset: int) -> str:
    """The two lines ``shell_error_context`` adds under a message: up to 78 bytes of the
    statement from at most 50 before the error, white space shown as spaces, and a caret
    under the error (``^--- error here``, or ``error here ---^`` when it is far right)."""
    raw = sql.encode("utf-8")
    pos = 0
    while offset > 50:
        offset -= 1
        pos += 1
        while pos < len(raw) and raw[pos] & 0xC0 == 0x80:
            pos += 1
            offset -= 1
    code = raw[pos:]
    if len(code) > 78:
        end = 78
        while code[end] & 0xC0 == 0x80:
            end -= 1
        code = code[:end]
    text = bytes(32 if chr(b) in _SPACE else b for b in code).decode("utf-8", "replace")
    caret = " " * offset + "^--- error here" if offset < 25 else " " * (offset - 14) + "error here ---^"
    return f"\n  {text}\n  {caret}"


def _is_space(line: str) -> bool:
    return all(c in _SPACE for c in line)


class _Scan(NamedTuple):
    """What the shell's ``quickscan`` knows after the text read so far: the quote or comment
    still open (``''``: none; ``*/`` for a block comment), whether the last character that is
    not white space or a comment was a ``;``, and whether any such character was read."""

    open: str = ""
    semicolon: bool = False
    dark: bool = False

    @property
    def plain_white(self) -> bool:  # white space and comments alone (a ``;`` aside)
        return not self.open and not self.dark

    @property
    def ends_statement(self) -> bool:
        return not self.open and self.semicolon


def _scan(line: str, scan: _Scan) -> _Scan:
    """``scan`` after reading ``line`` (``quickscan`` in ``shell.c``)."""
    wait, semicolon, dark = scan
    i, n = 0, len(line)
    while i < n:
        if wait:
            j = line.find(wait, i)
            if j < 0:
                break
            wait, i = "", j + len(wait)
            continue
        c = line[i]
        if c in _SPACE:
            i += 1
        elif line.startswith("--", i):
            break
        elif line.startswith("/*", i):
            wait, i = "*/", i + 2
        elif c == ";":
            semicolon, i = True, i + 1
        else:
            if c in "'\"`[":
                wait = "]" if c == "[" else c
            semicolon, dark, i = False, True, i + 1
    return _Scan(wait, semicolon, dark)


def _is_terminator(line: str) -> bool:
    """A line that ends a statement as ``;`` would: ``/`` (Oracle) or ``GO`` (SQL Server),
    then white space and comments only."""
    line = line.lstrip(_SPACE)
    rest = line[1:] if line[:1] == "/" else line[2:] if line[:2].lower() == "go" else None
    return rest is not None and _scan(rest, _Scan()) == _Scan()


def _runs(lines: Sequence[str], pending: str, scan: _Scan) -> tuple[list[str], str, _Scan] | None:
    """The texts the shell runs for ``lines`` typed after ``pending`` (collected, not yet
    run; ``scan`` after it), and what is left pending (``process_input`` in ``shell.c``);
    ``None`` when a line is a dot-command that may change what later lines print. A plain
    dot-command is given as its line (it prints what the world model predicts)."""
    ran: list[str] = []
    for line in lines:
        if not pending and _is_space(line):
            continue
        if not pending and line[:1] in ".#":  # a dot-command or a comment line
            if line[:1] == ".":
                words = line[1:].split(maxsplit=1)
                if words and words[0] not in _PLAIN_DOT:
                    return None
                ran.append(line)
            continue
        if _is_terminator(line) and (not pending or sqlite3.complete_statement(pending + ";")):
            line = ";"
        scan = _scan(line, scan)
        if not pending and scan.plain_white:
            scan = _Scan()  # a line of white space, comments and semicolons alone is swallowed
            continue
        pending = pending + "\n" + line if pending else line.lstrip(_SPACE)
        if scan.ends_statement and sqlite3.complete_statement(pending):
            ran.append(pending)
            pending, scan = "", _Scan()
        elif scan.plain_white:
            pending, scan = "", _Scan()
    return ran, pending, scan


def _strip_comments(sql: str, leading: bool = False) -> str:
    """``sql`` without its comments (``leading``: only those before its first word)."""
    if leading:
        return re.sub(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?(?:\*/|\Z))*", "", sql, flags=re.S)
    return re.sub(r"--[^\n]*|/\*.*?(?:\*/|\Z)", " ", sql, flags=re.S)  # a comment separates words


def answer(action: str, previous_actions: Sequence[str], setup: Sequence[str] | None = None) -> str | None:
    """What ``sqlite3`` prints for ``action`` typed after ``previous_actions`` (the episode's
    earlier actions, oldest first), where the text alone decides it, else ``None``.

    Args:
        setup: the statements that prepared the database before the episode, when known
            (``[]``: it started empty). While no earlier statement can have changed the schema
            (every one that ran is a query, a change of rows or a transaction's), the errors of
            names are known too (``no such table``, ``table … already exists`` …); without it,
            only syntax errors.

    >>> answer("SELECT * FROM users", [])   # unfinished: nothing runs yet
    ''
    >>> print(answer("SELEC * FROM users;", []))
    Parse error: near "SELEC": syntax error
      SELEC * FROM users;
      ^--- error here
    >>> answer("SELECT * FROM users;", []) is None   # it runs: the world model predicts it
    True
    >>> answer("SELECT * FROM users;", [], setup=[])
    'Parse error: no such table: users'
    """
    lib = _library()
    if lib is None:
        return None
    schema_file = lib.probe(tuple(setup)) if setup is not None else None  # None: the schema is not known
    pending, scan = "", _Scan()
    for earlier in previous_actions:
        left = _runs(_typed_lines(earlier), pending, scan)
        if left is None:
            return None
        ran, pending, scan = left
        if schema_file is not None and any(_changes_schema(lib, schema_file, text) for text in ran):
            schema_file = None
    now = _runs(_typed_lines(action), pending, scan)
    probe = schema_file or lib.probe(_UNKNOWN)
    if now is None or probe is None:
        return None
    shown = []
    for text in now[0]:
        if text.startswith("."):
            return None  # a dot-command prints what the world model predicts
        raw = text.encode("utf-8")
        prepared = lib.statements(probe, raw)
        if not prepared:
            continue  # empty statements: nothing is printed
        if prepared[0][1] != 1:
            return None  # a statement runs: what it prints is the world model's
        start, _, message, offset = prepared[0]
        statement = raw[start:].decode("utf-8", "replace")
        if not _decided(message, schema_file is not None) or schema_file is None and _SCHEMA_FIRST.search(
                _strip_comments(statement)):
            return None
        shown.append(f"Parse error: {message}{_error_context(statement, offset) if offset >= 0 else ''}")
    return "\n".join(shown)


def _decided(message: str, schema_known: bool) -> bool:
    """Whether a statement's error ``message`` is the shell's too: a syntax error, or, with the
    schema known, a name's error (not a table the shell's extensions add)."""
    if _SYNTAX.fullmatch(message):
        return True
    missing = re.fullmatch(r"no such table: (?:\w+\.)?(\w+)", message)
    return schema_known and bool(_NAMES.fullmatch(message)) and not (missing and missing[1].lower() in _SHELL_TABLES)


def _changes_schema(lib: _Library, schema_file: str, text: str) -> bool:
    """Whether a statement of ``text`` that the shell ran may have changed the schema (one that
    fails here for a reason the shell may not share, such as a function of its own, may have)."""
    if text.startswith("."):
        return False  # a plain dot-command
    raw = text.encode("utf-8")
    for start, rc, message, _ in lib.statements(schema_file, raw):
        if rc:
            return not _decided(message, True)  # the shell stops at it too: nothing after it runs
        if _first_word(raw[start:].decode("utf-8", "replace")) not in _KEEPS_SCHEMA:
            return True
    return False


def _typed_lines(action: str) -> list[str]:
    """The lines the environment types for ``action`` (a final newline is added)."""
    text = action.replace("\r\n", "\n")
    return (text[:-1] if text.endswith("\n") else text).split("\n")
