"""The database domain: SQL typed into a real ``sqlite3`` or ``psql`` client.

Action format: :data:`ACTION_FORMAT`.

Observation format: exactly what the client prints for that input, its prompts left out
(one persistent session per episode):

- SQLite 3.40 (``sqlite3 -header -column /app/data.db``): column mode with a header
  line and dashes; statements without rows print nothing; errors as the interactive
  shell prints them (``Parse error: near "SELEC": syntax error`` and a caret line).
- PostgreSQL 15 (``psql -X``, default aligned format): a header, dashes, rows and
  ``(N rows)``; command tags such as ``CREATE TABLE``, ``INSERT 0 1``; errors as
  ``ERROR:  relation "x" does not exist`` with ``LINE n:`` and a caret.

Trailing newlines are removed; output beyond the kept size ends with a line
``[output truncated: N more bytes]``; a statement cut by the time limit shows the
engine's cancel message (``Runtime error: interrupted (9)`` / ``ERROR:  canceling
statement due to statement timeout``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from lwm.errors import ActionFormatError

#: The action format, for people and prompts (the agent's tool description is shorter).
ACTION_FORMAT = """\
Action format: SQL text — one or more statements, or client meta-commands (sqlite3's
``.tables``, psql's ``\\dt``), exactly as a person would type them at the client's
prompt; each line is one line of input. A statement without its terminating ``;`` is
left unfinished: the client prints nothing and waits for the rest (the next action).
"""
NAME = "db"
#: Language of the action's code fence in AgentWorldBench rows.
ACTION_LANG = "sql"
ENGINES = ("sqlite", "postgres")
MAX_ACTION_CHARS = 65536
# Control characters other than tab and newline would be read as editing keys by the
# client's line editor (readline), not as SQL.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

_CLIENT = {
    "sqlite": (
        "SQLite 3.40.1, the `sqlite3` command-line shell, started as `sqlite3 -header -column /app/data.db` "
        "(column output mode with headers) in /app",
        "column mode: a header line, a line of dashes, then the rows, columns padded to their widths; "
        "statements without rows (CREATE, INSERT …) print nothing; errors look like "
        "`Parse error: near \"SELEC\": syntax error` followed by the statement and a `^--- error here` caret, "
        "or `Runtime error: UNIQUE constraint failed: t.id (19)`; dot-commands such as .tables and .schema work",
    ),
    "postgres": (
        "PostgreSQL 15.18, the `psql` client connected as superuser `postgres` to database `postgres` "
        "(default settings: aligned output, no pager)",
        "aligned tables: a centered header, a line of dashes with `+` between columns, the rows, then "
        "`(N rows)` and a blank line; command tags such as `CREATE TABLE`, `INSERT 0 1`, `BEGIN`; errors like "
        "`ERROR:  relation \"x\" does not exist` with `LINE 1: …` and a caret; notices as `NOTICE:  …`; "
        "meta-commands such as \\dt and \\d work",
    ),
}

SYSTEM_PROMPT = """\
You are a Database World Model: you simulate a SQL database and its command-line client exactly.

Environment: {client}. One client session lasts the whole episode, so transactions, \
temporary tables and session settings carry over between turns. There is no network; \
each statement is cancelled after {timeout} seconds.
{setup}
Each turn you receive the agent's action: SQL text (one or more statements or client \
meta-commands, one line of input per line). A statement is run when its terminating \
semicolon is typed; an unfinished statement prints nothing and is continued by the next action.

Predict exactly what the client prints for that input, without its prompts: \
{format}. Output of several statements follows in order. Keep the database's state \
(tables, rows, sequences, the open transaction) consistent across turns.

Write brief reasoning, then the output inside <predicted_observation></predicted_observation>.\
"""


EMPTY_ACTION = "empty action: type at least one statement"


def invalid_answer(reason: str, previous: str) -> str | None:
    """What the session answers to an action :func:`parse_action` refuses: it is not sent
    to the client, except an empty one, which is typed like any line (the client prints
    nothing new)."""
    return None if reason == EMPTY_ACTION else f"lwm: action not sent to the client: {reason}"


def parse_action(action: str) -> str:
    """Check a database action: non-empty SQL text.

    Args:
        action: the SQL text as typed.

    Returns:
        the text, unchanged.

    Raises:
        ActionFormatError: not a string, empty, longer than :data:`MAX_ACTION_CHARS`, or
            with control characters other than tab and newline (a lone ``\\r`` included).
    """
    if not isinstance(action, str):
        raise ActionFormatError(NAME, repr(action), "expected SQL text")
    if not action.strip():
        raise ActionFormatError(NAME, action, EMPTY_ACTION)
    if len(action) > MAX_ACTION_CHARS:
        raise ActionFormatError(NAME, action, f"{len(action)} characters; at most {MAX_ACTION_CHARS}")
    bad = _CONTROL.search(action.replace("\r\n", "\n"))
    if bad:
        raise ActionFormatError(NAME, action, f"control character {bad.group()!r} at {bad.start()}; "
                                "only tab and newline are allowed")
    try:
        action.encode("utf-8")
    except UnicodeEncodeError:
        raise ActionFormatError(NAME, action, "text is not encodable as UTF-8") from None
    return action.replace("\r\n", "\n")


#: Words an SQL statement of SQLite or PostgreSQL starts with.
_STATEMENT_WORDS = frozenset("""
ABORT ALTER ANALYZE ANALYSE ATTACH BEGIN CALL CHECKPOINT CLOSE CLUSTER COMMENT COMMIT COPY CREATE DEALLOCATE DECLARE
DELETE DETACH DISCARD DO DROP END EXECUTE EXPLAIN FETCH GRANT IMPORT INSERT LISTEN LOAD LOCK MOVE NOTIFY PRAGMA
PREPARE REASSIGN REFRESH REINDEX RELEASE REPLACE RESET REVOKE ROLLBACK SAVEPOINT SECURITY SELECT SET SHOW START
TABLE TRUNCATE UNLISTEN UPDATE VACUUM VALUES WITH (
""".split())


def ends_a_statement(text: str) -> bool:
    """Whether an agent's SQL is finished statements and nothing else (each ended by ``;``)
    or a client meta-command (``.tables``, ``\\dt``): the format it is asked for. Every
    statement must start with an SQL statement's word (``SELECT``, ``INSERT`` …): a sentence
    ending in ``;`` is prose, and so is text after the last ``;`` (comments aside).

    >>> ends_a_statement("INSERT INTO t VALUES (1);"), ends_a_statement("I inserted the row;")
    (True, False)
    >>> ends_a_statement("SELECT 1; -- done"), ends_a_statement("SELECT 1; That prints the row.")
    (True, False)
    >>> ends_a_statement("SELECT 1;;\\n.tables")   # an empty statement and a meta-command line are fine
    True
    """
    import sqlparse

    stripped = text.strip()
    if stripped.startswith((".", "\\")):
        return True
    sql = "\n".join(line for line in stripped.splitlines() if not line.lstrip().startswith((".", "\\")))
    statements = list(_finished_statements(sql))
    every = [s for s in sqlparse.split(sql) if sqlparse.format(s, strip_comments=True).strip(" \n\t;")]
    return bool(statements) and len(statements) == len(every) and all(
        words[0] in _STATEMENT_WORDS or words[0].startswith("(") for words in statements)


def canonical(observation: str) -> str:
    """The deterministic comparator's normal form: trailing spaces of every line and
    trailing blank lines removed (psql pads aligned cells; padding carries no content)."""
    return "\n".join(line.rstrip() for line in observation.split("\n")).rstrip("\n")


def system_prompt(engine: str = "sqlite", setup: tuple[str, ...] = (), timeout: float = 5.0) -> str:
    """The world-model system prompt for an episode of ``engine``.

    Args:
        engine: ``sqlite`` or ``postgres``.
        setup: the SQL that prepared the database before the episode (shown to the model:
            it is the initial state).
        timeout: the per-statement time limit in seconds.

    Raises:
        ValueError: unknown engine.
    """
    if engine not in _CLIENT:
        raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")
    client, fmt = _CLIENT[engine]
    text = "\n".join(setup).strip()
    setup_text = f"\nThe database was prepared (before the episode) with:\n```sql\n{text}\n```\n" if text else \
        "\nThe database starts empty.\n"
    return SYSTEM_PROMPT.format(client=client, format=fmt, setup=setup_text, timeout=f"{timeout:g}")


def _finished_statements(sql: str) -> Iterator[list[str]]:
    """The upper-cased words (comments left out) of each statement the client runs: those
    ended by ``;``. A statement left open (no ``;`` yet, or inside a string, quoted name or
    dollar quote) and what follows it are not run yet. ``sqlparse`` splits and tokenizes
    (string literals, dollar quotes and comments respected; no statement-size limit)."""
    import sqlparse
    from sqlparse import tokens as T
    from sqlparse.lexer import tokenize

    for statement in sqlparse.split(sql):
        toks = [(t, v) for t, v in tokenize(statement) if t not in T.Comment and t not in T.Whitespace]
        if not toks or any(t in T.Error for t, _ in toks) or toks[-1][1] != ";":
            return
        if len(toks) > 1:
            yield " ".join(v for _, v in toks[:-1]).upper().split()


_TAGS = {"INSERT": "INSERT 0 1", "UPDATE": "UPDATE 1", "DELETE": "DELETE 1", "BEGIN": "BEGIN", "START": "BEGIN",
         "COMMIT": "COMMIT", "END": "COMMIT", "ROLLBACK": "ROLLBACK", "ABORT": "ROLLBACK", "SET": "SET",
         "SAVEPOINT": "SAVEPOINT", "RELEASE": "RELEASE", "TRUNCATE": "TRUNCATE TABLE"}
_OBJECT_MODIFIERS = {"OR", "REPLACE", "UNIQUE", "TEMP", "TEMPORARY", "UNLOGGED", "MATERIALIZED", "IF", "NOT", "EXISTS"}


#: The line an observation ends with when the client did not come back after a time-out
#: and a fresh one replaced it (:class:`~lwm.domains.db.env.DbEnv`).
RESTARTED = "[no answer within {timeout:g} s: the client was restarted]"
_RESTARTED = RESTARTED.split("}", 1)[1].lstrip()  # "s: the client was restarted]", wherever it stands
#: Bytes of output the environment keeps per action (``DbEnv``'s ``max_output`` is 16 KiB):
#: a longer answer may have been cut there.
_KEPT = 8192


def certain_answer(action: str, turns: Sequence[tuple[str, str]], system: str = "",
                   start: str = "") -> str | None:
    """What the ``sqlite3`` shell prints where the SQL typed alone decides it: nothing for
    input that completes no statement (the shell waits for the rest), ``Parse error: …``
    with its caret for a first statement that does not prepare: a syntax error, or, while
    the schema is the setup's (:func:`setup_statements`), a name's error such as ``no such
    table`` (:mod:`lwm.domains.db.sqlite_shell`). ``None`` otherwise, and for psql sessions
    (``system`` names the client): the world model predicts it. ``turns`` are the episode's
    earlier ``(action, observation)`` pairs: what they left unfinished is continued by
    ``action``.

    >>> sqlite = system_prompt("sqlite")
    >>> certain_answer("SELECT name FROM users", [], sqlite), certain_answer("';", [("SELECT 'a", "")], sqlite)
    ('', None)
    >>> print(certain_answer("Here is the query: SELECT 1;", [], sqlite))
    Parse error: near "Here": syntax error
      Here is the query: SELECT 1;
      ^--- error here
    """
    from lwm.domains.db import sqlite_shell

    if f"Environment: {_CLIENT['sqlite'][0]}" not in system:
        return None
    typed: list[str] = []
    for earlier, observation in turns:
        if _RESTARTED in observation:
            return None  # a fresh client after a time-out: what the old one left is not known
        try:
            typed.append(parse_action(earlier))
        except ActionFormatError as e:  # never typed; an empty action is, as it is
            if e.reason == EMPTY_ACTION:
                if earlier.strip(" \t\n"):
                    return None  # \r, \v, \f … are keys to the client's line editor
                typed.append(earlier)
    answer = sqlite_shell.answer(action, typed, setup_statements(system))
    return None if answer is not None and len(answer.encode()) > _KEPT else answer


_SETUP_BLOCKS = (re.compile(r"^The database was prepared \(before the episode\) with:\n```sql\n(.*)\n```\n\nEach turn ",
                            re.M | re.S),  # SYSTEM_PROMPT's
                 re.compile(r"^Prepared before the first action:\n```\n(.*)\n```\Z", re.M | re.S))  # the simulator's


def setup_statements(system: str) -> list[str] | None:
    r"""The statements that prepared the database, read from a system prompt of
    :func:`system_prompt` (and the block :func:`lwm.sim.env.with_initial_state` adds):
    one starts on each line that begins with a statement's first word. ``[]`` when it says
    the database starts empty; ``None`` when it says neither.

    >>> setup_statements(system_prompt("sqlite", ("CREATE TABLE t (\n  x INT\n)", "INSERT INTO t VALUES (1)")))
    ['CREATE TABLE t (\n  x INT\n)', 'INSERT INTO t VALUES (1)']
    """
    import sqlite3

    blocks = [m[1] for pattern in _SETUP_BLOCKS if (m := pattern.search(system))]
    if not blocks:
        return [] if "\nThe database starts empty.\n" in system else None
    text = "\n".join(blocks)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None  # a lone surrogate: not SQL a client could have been given
    if "\0" in text:
        return None
    statements: list[str] = []
    for line in text.split("\n"):
        first = line.split(None, 1)[0].upper() if line[:1].isalpha() else ""
        # a statement's word starts the next one, unless inside a string or comment
        if not statements or first in _STATEMENT_WORDS and sqlite3.complete_statement(statements[-1] + ";"):
            statements.append(line)
        else:
            statements[-1] += "\n" + line
    return statements


def trivial_observation(action: str, previous: str = "", system: str = "") -> str:
    """The domain-aware trivial guess (a baseline, not a world model): what the client
    prints for statements that return no rows. sqlite3 prints nothing for them; psql
    (when the system prompt's environment is the psql client) prints a command tag per finished
    statement, guessed from its first words (``CREATE TABLE``, ``INSERT 0 1``, ``UPDATE 1``
    …). Queries are guessed empty."""
    if f"Environment: {_CLIENT['postgres'][0]}" not in system:
        return ""
    sql = "\n".join(line for line in action.split("\n") if not line.lstrip().startswith("\\"))  # meta-commands
    tags = []
    for words in _finished_statements(sql):
        if words[0] in _TAGS:
            tags.append(_TAGS[words[0]])
        elif words[0] in ("CREATE", "DROP", "ALTER"):
            rest = [w for w in words[1:] if w not in _OBJECT_MODIFIERS]
            if rest:
                tags.append(f"{words[0]} {rest[0]}")
    return "\n".join(tags)
