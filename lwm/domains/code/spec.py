"""The code domain: a persistent Python interpreter with notebook-like cells.

Action format: :data:`ACTION_FORMAT`.

Observation: the blocks below, in this order, each present only when non-empty, joined
by a newline; ``(no output)`` when there are none::

    [stdout]
    <what the cell wrote to standard output>
    [stderr]
    <what it wrote to standard error>
    Out[<n>]: <repr of the last expression's value>
    [error]
    <CPython's traceback; the cell's code shows as File "<cell n>", line k>
    [interrupted] ...   or   [restarted] ...   (time limit, crash; see NOTICES)

``n`` is the execution count: 1 for the first cell after a (re)start, +1 for every cell
(erroring cells included), as IPython's ``In[n]``. Stream texts lose one trailing
newline. Each block is cut at ``limit`` characters (4000 by default) and then ends with
the line ``[... truncated: showing <limit> of <total> characters]``.
"""

from __future__ import annotations

import ast
import re
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

from lwm.envs.base import invalid_action
from lwm.errors import ActionFormatError

#: The action format, for people and prompts (the agent's tool description is shorter).
ACTION_FORMAT = """\
Action: Python source, one cell (plain text, no JSON, no Markdown fence). It runs in one
persistent namespace, like a Jupyter cell: if the cell's last statement is an
expression, its value is shown as ``Out[n]: repr(value)`` (and stored in ``_``) unless
it is ``None``. There are no IPython magics (``%time``, ``!ls`` are syntax errors) and a
trailing ``;`` does not hide the value.
"""
NAME = "code"
ACTION_LANG = "python"  # the fence of actions in AgentWorldBench rows
#: Largest cell accepted, in characters.
MAX_CELL_CHARS = 65_536
#: Characters kept of each block (stdout, stderr, Out, error) by default.
OUTPUT_LIMIT = 4000
EMPTY = "(no output)"

NOTICES = {
    "interrupted": "[interrupted] the cell ran past the {timeout:g} s time limit and was interrupted "
                   "(KeyboardInterrupt); variables are kept",
    "restarted": "[restarted] the cell ran past the {timeout:g} s time limit and ignored the interrupt: "
                 "the interpreter was killed and restarted; all variables are lost (files are kept)",
    "died": "[restarted] the interpreter exited ({how}) and was restarted; all variables are lost "
            "(files are kept)",
}

SYSTEM_PROMPT = """\
You are a Python Interpreter World Model: you simulate a persistent Python {version} \
interpreter that runs notebook cells, exactly as it would answer.

Environment: CPython {version} (standard library only; no third-party packages) on Debian \
Linux, running as root in /app (home /root); the process has no network access. Files \
written under /app persist across cells. Standard input is empty: input() raises EOFError.

Each turn you receive the agent's action: the Python source of one cell. It runs in one \
persistent namespace (variables, functions, classes and imports carry over between cells). \
If the cell's last statement is an expression whose value is not None, its repr is shown \
as `Out[n]: ...` and stored in `_`. Cells are numbered 1, 2, 3 … (every cell counts, \
failing ones too); the current cell's code appears in tracebacks as `File "<cell n>", \
line k`. There are no IPython magics: `%time` or `!ls` are syntax errors. A cell may run \
at most {timeout:g} seconds: then it is interrupted with KeyboardInterrupt (variables kept); \
if it ignores the interrupt, the interpreter is killed and restarted (variables lost, \
numbering starts again at 1).

Observation format: these blocks, in this order, each only if non-empty, joined by newlines; \
exactly `(no output)` if there are none:
[stdout]
<standard output, without its final newline>
[stderr]
<standard error, without its final newline>
Out[n]: <repr of the last expression's value>
[error]
<CPython's traceback text; a syntax error shows only the File/line, caret and error lines>
[interrupted] the cell ran past the {timeout:g} s time limit and was interrupted (KeyboardInterrupt); \
variables are kept
[restarted] the cell ran past the {timeout:g} s time limit and ignored the interrupt: the interpreter was \
killed and restarted; all variables are lost (files are kept)
[restarted] the interpreter exited (exit code <k> | killed by signal <k> (<NAME>)) and was restarted; \
all variables are lost (files are kept)
(sys.exit() and SystemExit do not end the interpreter: they show as a traceback like any exception.)
A block longer than {limit} characters is cut there and followed by a line \
`[... truncated: showing {limit} of <total> characters]`.

Predict the observation exactly, keeping the interpreter's state (variables, definitions, \
files, the cell number) consistent with the history. Write brief reasoning, then the \
observation inside <predicted_observation></predicted_observation>.\
"""


def system_prompt(timeout: float = 10.0, limit: int = OUTPUT_LIMIT, version: str = "3.11") -> str:
    """The world-model system prompt of an interpreter with this time limit (seconds) and
    block limit (characters)."""
    return SYSTEM_PROMPT.format(timeout=timeout, limit=limit, version=version)


def parse_action(text: Any) -> str:
    """Check a code action and return the cell's source.

    Any text is a cell (syntax errors are the interpreter's to report), within bounds.

    Raises:
        ActionFormatError: not a string, longer than :data:`MAX_CELL_CHARS`, or holding
            characters that cannot be encoded in UTF-8 (lone surrogates).
    """
    if not isinstance(text, str):
        raise ActionFormatError(NAME, repr(text), f"a cell is Python source text, not {type(text).__name__}")
    if len(text) > MAX_CELL_CHARS:
        raise ActionFormatError(NAME, text, f"cell of {len(text)} characters; at most {MAX_CELL_CHARS}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ActionFormatError(NAME, text, "the cell holds characters that cannot be encoded in UTF-8") from None
    return text


def truncate(text: str, total: int, limit: int = OUTPUT_LIMIT) -> str:
    """``text`` (already at most ``limit`` characters of a ``total``-character output)
    with the truncation marker when something was cut."""
    if total <= limit:
        return text
    return f"{text[:limit]}\n[... truncated: showing {limit} of {total} characters]"


def format_observation(reply: dict[str, Any], timeout: float, limit: int = OUTPUT_LIMIT) -> str:
    """The observation text of one cell from the in-sandbox controller's reply (see
    ``lwm/domains/code/controller.py`` for its fields)."""
    blocks = []
    for stream in ("stdout", "stderr"):
        text = reply.get(stream) or ""
        total = int(reply.get(f"{stream}_total") or 0)
        if text.endswith("\n") and total == len(text):
            text, total = text[:-1], total - 1
        if text or total:
            blocks.append(f"[{stream}]\n{truncate(text, total, limit)}")
    if reply.get("value") is not None:
        blocks.append(f"Out[{reply['n']}]: {reply['value']}")
    if reply.get("error") is not None:
        blocks.append(f"[error]\n{reply['error']}")
    status = reply.get("status")
    if status in NOTICES:
        blocks.append(NOTICES[status].format(timeout=timeout, how=exit_description(reply.get("exit"))))
    return "\n".join(blocks) if blocks else EMPTY


def exit_description(code: int | None) -> str:
    """``exit code 3`` / ``killed by signal 9 (SIGKILL)`` / ``exit status unknown``."""
    import signal

    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]+>")


def probe_output(probe: str, observation: str) -> str:
    """What a verifier's cell printed (stdout, then the traceback), read off the observation
    a world model predicted for it (the real probe returns them without headers).

    >>> probe_output("print(x)", "[stdout]\\n42\\n[error]\\nTraceback …")
    '42\\nTraceback …'
    """
    blocks = {}
    for m in re.finditer(r"^\[(stdout|stderr|error)\]\n(.*?)(?=^\[(?:stdout|stderr|error)\]\n|^Out\[\d+\]: |\Z)",
                         observation, re.S | re.M):
        blocks[m.group(1)] = m.group(2).rstrip("\n")
    out = blocks.get("stdout", "")
    return "\n".join(x for x in (out, blocks.get("error", "")) if x)


def compiles(text: str) -> bool:
    """Whether an agent's cell is Python that compiles: the format it is asked for."""
    try:
        compile(text, "<cell>", "exec", dont_inherit=True)  # not this module's __future__ imports
    except (SyntaxError, ValueError):
        return False
    return bool(text.strip())


def canonical(observation: str) -> str:
    """Normal form for the deterministic comparator: trailing spaces removed from every
    line and object addresses in default reprs (``<object at 0x7f…>``) replaced by
    ``at 0x?>``, since they differ from run to run."""
    lines = [line.rstrip() for line in observation.strip("\n").split("\n")]
    return _ADDRESS.sub("at 0x?>", "\n".join(lines))


def trivial_observation(action: str, previous: str = "", system: str = "") -> str:
    """The domain-aware trivial guess (a baseline, not a world model): most cells
    (assignments, definitions, imports) print nothing."""
    return EMPTY


_VERSION = re.compile(r"a persistent Python (\d+)\.(\d+) interpreter")
_LIMIT = re.compile(r"A block longer than (\d+) characters")


#: How an action refused as malformed begins (the environment's answer, no cell run).
_REFUSED = invalid_action("", "").rstrip()
#: The last line of an observation after which the interpreter starts again (NOTICES).
_RESTARTED = re.compile(r"(?:^|\n)\[restarted\] the (?:cell ran past|interpreter exited)[^\n]*all variables are "
                        r"lost \(files are kept\)$")


def _another_python(system: str) -> bool:
    """Whether the system prompt simulates another Python version than the one running
    ``lwm``: its messages and what compiles may differ."""
    version = _VERSION.search(system)
    return bool(version) and tuple(map(int, version.groups())) != sys.version_info[:2]


def cell_number(observations: Sequence[str]) -> int:
    """The execution count of the next cell after ``observations`` (the episode's earlier
    observations, oldest first): 1 after a (re)start, +1 for every cell; an action refused
    as malformed (``[invalid action] …``) never reached the interpreter and is not counted.

    >>> cell_number([]), cell_number(["Out[1]: 2", "(no output)"]), cell_number(["x", NOTICES["died"]])
    (1, 3, 1)
    >>> cell_number(["[stdout]\\n[restarted] printed by the cell", "[invalid action] too long"])
    2
    """
    count = 0
    for obs in observations:
        if _RESTARTED.search(obs):
            count = 0
        elif not obs.startswith(_REFUSED):
            count += 1
    return count + 1


def certain_answer(action: str, turns: Sequence[tuple[str, str]], system: str = "",
                   start: str = "") -> str | None:
    """The interpreter's answer to a cell that does not parse: it runs nothing and shows
    CPython's syntax error for ``File "<cell n>"`` (as the controller formats it:
    ``traceback.format_exception_only``), so no world model is needed. ``None`` for a
    cell that parses (errors only ``compile`` raises, such as ``return`` outside a function,
    come after the cell's earlier statements ran: the model's to predict) or holds a null
    byte, or when ``system`` (the world model's system prompt) simulates another Python
    version than the one running ``lwm`` (its messages differ; ``lwm check-env code``
    compares the answers to a few such cells with the sandbox's interpreter).

    >>> print(certain_answer("x = (1,", [("1 + 1", "Out[1]: 2")]))
    [error]
      File "<cell 2>", line 1
        x = (1,
            ^
    SyntaxError: '(' was never closed
    """
    if "\0" in action or _another_python(system):
        return None  # a null byte: refused before parsing, in words that differ between 3.11 releases
    filename = f"<cell {cell_number([observation for _, observation in turns])}>"
    try:
        ast.parse(action, filename, "exec")
    except SyntaxError as e:
        error = "".join(traceback.format_exception_only(type(e), e)).rstrip("\n")
    except (RecursionError, MemoryError):  # deep nesting: the message depends on the process's stack
        return None
    else:
        return None
    limit = int(m.group(1)) if (m := _LIMIT.search(system)) else OUTPUT_LIMIT
    return f"[error]\n{truncate(error[:limit], len(error), limit)}"


#: How the interpreter answers a cell that does not compile: the error alone (no
#: ``Traceback`` header, a frame line with no ``, in <name>``), since nothing of it ran.
_COMPILE_ERROR = re.compile(r'\[error\]\n  File "<cell \d+>", line \d+\n')


def rules_out(observation: str, action: str, system: str = "") -> bool:
    """Whether the cell alone rules ``observation`` out: it is the interpreter's answer to
    a cell that does not compile (``[error]`` then the cell's own syntax error, and no
    traceback anywhere) while the cell compiles without a warning. (An error a running cell
    raises, ``eval("1+")`` included, comes with a ``Traceback`` header, as does a chained
    one; an error only ``compile`` finds, such as ``return`` outside a function, is not
    ruled out: the cell does not compile; nor is a cell that warns, since a session that
    turned warnings into errors gets a ``SyntaxError`` for an invalid escape such as
    ``'\\d'``.) ``False`` where the system prompt simulates another Python version than the
    one running ``lwm``, for a null byte, and for a cell too deep to compile here. Not
    covered: a cell that raises, from C code with no frame of its own (a ``__repr__`` that is
    ``compile`` itself), a syntax error naming its own cell.

    >>> rules_out('[error]\\n  File "<cell 1>", line 1\\n    s = 20\\nSyntaxError: invalid syntax', "s = 20")
    True
    >>> rules_out('[error]\\n  File "<cell 1>", line 1\\n    s = (\\nSyntaxError: x', "s = (")
    False
    """
    if not _COMPILE_ERROR.match(observation) or "Traceback (most recent call last)" in observation \
            or "\0" in action or _another_python(system):
        return False
    # Warnings are recorded, not raised: the filters are the process's, and another thread's
    # warning raised as an error here would break that thread. Any warning seen says "not sure".
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            compile(action, "<cell>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return False
    return not seen
