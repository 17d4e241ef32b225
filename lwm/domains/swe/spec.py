"""The swe domain: a coding agent's tools on a sandboxed git repository.

Action format: :data:`ACTION_FORMAT`.
"""

from __future__ import annotations

import json
from typing import Any

from lwm.domains.tool_call import ToolCall, parse_tool_call

#: The action format, for people and prompts (the agent's tool description is shorter).
ACTION_FORMAT = """\
Action format: one JSON tool call ``{"name": <tool>, "arguments": {…}}`` with the tools
``read``, ``edit``, ``write``, ``bash``, ``grep`` and ``glob``. Their parameters and result
envelopes follow the file tools of a widely used coding agent (Anthropic's Claude Code:
``Read`` numbers lines like ``cat -n``, ``Edit`` replaces an exact string that must be
unique, ``Grep`` has the ``files_with_matches``/``content``/``count`` output modes, and
tool errors come wrapped in ``<tool_use_error>…</tool_use_error>``); the prose of the
messages is our own. :data:`TOOLS` is the single source of the tool definitions, and
:func:`validate` the single source of the argument checks (the in-sandbox controller
trusts what passes them).
"""
NAME = "swe"
MAX_ACTION_CHARS = 1 << 20  # a write's content is the largest argument
DEFAULT_BASH_TIMEOUT_MS = 10_000
MAX_BASH_TIMEOUT_MS = 30_000
READ_DEFAULT_LIMIT = 2000  # lines
READ_MAX_LINE_CHARS = 2000
READ_MAX_CHARS = 100_000
BASH_MAX_OUTPUT_BYTES = 30_000  # head and tail halves are kept, the middle is cut
LIST_MAX_RESULTS = 100  # glob results
GREP_MAX_CHARS = 30_000

#: Tool definitions: name -> (description, {parameter: (JSON type, required, description)}).
TOOLS: dict[str, tuple[str, dict[str, tuple[str, bool, str]]]] = {
    "read": ("Read a text file; lines are numbered like `cat -n`.", {
        "file_path": ("string", True, "file to read (absolute, or relative to the shell's directory)"),
        "offset": ("integer", False, "1-based line to start from (default 1)"),
        "limit": ("integer", False, f"number of lines (default {READ_DEFAULT_LIMIT})"),
    }),
    "edit": ("Replace an exact string in a file.", {
        "file_path": ("string", True, "file to edit"),
        "old_string": ("string", True, "text to replace; must occur exactly once unless replace_all"),
        "new_string": ("string", True, "replacement text (must differ from old_string)"),
        "replace_all": ("boolean", False, "replace every occurrence (default false)"),
    }),
    "write": ("Create a file or overwrite it (parent directories are created).", {
        "file_path": ("string", True, "file to write"),
        "content": ("string", True, "the whole new content"),
    }),
    "bash": ("Run a bash command; stdout and stderr are combined.", {
        "command": ("string", True, "the command"),
        "timeout": ("integer", False, (f"milliseconds (default {DEFAULT_BASH_TIMEOUT_MS}, "
                                     f"at most {MAX_BASH_TIMEOUT_MS})")),
        "description": ("string", False, "what the command does (ignored)"),
    }),
    "grep": ("Search file contents with a regular expression (Python `re` syntax).", {
        "pattern": ("string", True, "the regular expression"),
        "path": ("string", False, "file or directory to search (default: the shell's directory)"),
        "glob": ("string", False, "only files whose name (or relative path, if it has a /) matches"),
        "output_mode": ("string", False, "files_with_matches (default), content or count"),
        "-i": ("boolean", False, "ignore case"),
        "-n": ("boolean", False, "line numbers in content mode (default true)"),
        "-C": ("integer", False, "lines of context around each match in content mode"),
        "head_limit": ("integer", False, "keep only the first N lines/entries"),
    }),
    "glob": ("Find files by glob pattern (`**` matches directories recursively).", {
        "pattern": ("string", True, "e.g. **/*.py"),
        "path": ("string", False, "directory to search (default: the shell's directory)"),
    }),
}
_PY_TYPES = {"string": str, "integer": int, "boolean": bool}
OUTPUT_MODES = ("files_with_matches", "content", "count")


def parse_action(text: str | dict) -> ToolCall:
    """Parse ``{"name": str, "arguments": {…}}`` (:func:`lwm.domains.tool_call.parse_tool_call`).

    Only the envelope is checked here; whether the tool exists and its arguments are
    valid is the tool's business (:func:`validate`), answered as an observation.

    Raises:
        ActionFormatError: not a tool call, or longer than :data:`MAX_ACTION_CHARS`.
    """
    return parse_tool_call(text, NAME, MAX_ACTION_CHARS)


def format_action(name: str, **arguments: Any) -> str:
    """The canonical JSON text of a tool call (what suites and rows store)."""
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def tool_error(message: str) -> str:
    """A tool's error envelope."""
    return f"<tool_use_error>{message}</tool_use_error>"


def invalid_answer(reason: str, previous: str) -> str:
    """The harness's answer to a call :func:`parse_action` refuses."""
    return tool_error(f"Malformed tool call: {reason}")


def validate(call: ToolCall) -> str | None:
    """The harness's answer to a call it refuses before running it, or ``None``.

    Unknown tool: ``<tool_use_error>Error: No such tool available: NAME</tool_use_error>``.
    Bad arguments: ``<tool_use_error>InputValidationError: TOOL failed due to the
    following issue(s):`` then one line per problem (missing parameter, wrong type,
    unexpected parameter, value out of range).
    """
    if call.name not in TOOLS:
        return tool_error(f"Error: No such tool available: {call.name[:200]}")
    params = TOOLS[call.name][1]
    issues = []
    for p, (typ, required, _) in params.items():
        if p not in call.arguments:
            if required:
                issues.append(f"The required parameter `{p}` is missing")
            continue
        v = call.arguments[p]
        ok = isinstance(v, _PY_TYPES[typ]) and (typ == "boolean" or not isinstance(v, bool))
        if not ok:
            issues.append(f"The parameter `{p}` type is expected as `{typ}` but provided as `{_json_type(v)}`")
        elif typ == "integer" and v < (1 if p in ("offset", "limit", "timeout", "head_limit") else 0):
            issues.append(f"The parameter `{p}` must be {'positive' if p != '-C' else 'non-negative'}")
        elif p == "output_mode" and v not in OUTPUT_MODES:
            issues.append(f"The parameter `output_mode` must be one of {', '.join(OUTPUT_MODES)}")
        elif typ == "string" and "\0" in v:
            issues.append(f"The parameter `{p}` contains a NUL character")
    for p in call.arguments:
        if p not in params:
            issues.append(f"An unexpected parameter `{str(p)[:100]}` was provided")
    if not issues:
        return None
    return tool_error(f"InputValidationError: {call.name} failed due to the following "
                      f"issue{'s' if len(issues) > 1 else ''}:\n" + "\n".join(issues))


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(v), type(v).__name__)


def _tool_docs() -> str:
    lines = []
    for name, (desc, params) in TOOLS.items():
        lines.append(f"- {name}: {desc}")
        for p, (typ, req, pdesc) in params.items():
            lines.append(f"    {p} ({typ}{', required' if req else ''}): {pdesc}")
    return "\n".join(lines)


SYSTEM_PROMPT = """\
You are a Software-Engineering World Model: you simulate, exactly, the tools a coding \
agent uses on a git repository inside a Linux sandbox.

Environment: a Debian sandbox with python3 (3.11, standard library only), git and the usual \
command-line tools; no network. The repository is /app/repo (branch main; author \
Ada Lovelace <ada@example.com>; every commit is dated 2024-01-01T12:00:00+0000, so hashes \
are reproducible; the seeded files' modification time is that same instant). The shell \
starts in /app/repo; `cd` in a bash call carries over to later calls (a directory outside \
/app is reset to /app/repo, with the note "Shell cwd was reset to /app/repo"), environment \
variables do not, and processes a call starts (even in the background) are killed when it \
returns. The file tools only accept paths under /app (after following symbolic links). The \
first observation describes the repository: working directory, git branch and commit \
count, and the files git tracks.

Each turn you receive one tool call as JSON: {{"name": TOOL, "arguments": {{...}}}}. Tools:
{tools}

Answer with the tool's exact result text:
- read: each line as its 1-based number right-aligned in 6 columns, a tab, then the line \
(lines over {maxline} characters are cut). An empty file gives \
"<system-reminder>Warning: the file exists but its contents are empty.</system-reminder>"; an \
offset past the end gives "<system-reminder>Warning: the file exists but is shorter than the \
provided offset (OFFSET). The file has N lines.</system-reminder>".
- edit: an empty old_string creates a file that does not exist yet ("File created \
successfully at: PATH"). Otherwise "The file PATH has been updated. Here's the result of running `cat -n` on a snippet \
of the edited file:" then the numbered lines from 4 before to 4 after the change; with \
replace_all: "The file PATH has been updated. All occurrences of 'OLD' were replaced with 'NEW'."
- write: "File created successfully at: PATH" for a new file, "The file PATH has been \
overwritten (N lines)." for an existing one.
- bash: stdout and stderr interleaved, trailing newlines removed; "(No content)" when \
empty. A non-zero exit puts "Exit code N" on the first line; a timeout puts "Command timed \
out after S seconds" there instead (e.g. "Command timed out after 1 second"). Output over \
{maxbash} bytes keeps its head and tail around a line "... [N lines truncated] ...".
- grep (ripgrep-like: hidden files and directories such as .git and binary files are \
skipped): files_with_matches gives "Found N file(s)" then one absolute path per line; \
content gives "PATH:LINE:text" lines (context lines "PATH-LINE-text", groups separated by \
"--"); count gives "PATH:N" lines. Files are listed most recently modified first, then by \
path. Nothing found: "No files found" (files_with_matches) or "No matches found" (content, count).
- glob: matching files (absolute paths), most recently modified first, then by path, at \
most {maxlist} (then "(Results are truncated. Use a more specific path or pattern.)"); \
"No files found" when none match.
Errors are wrapped in <tool_use_error>...</tool_use_error>, for example:
<tool_use_error>File does not exist.</tool_use_error>
<tool_use_error>String to replace not found in file.
String: retrun x</tool_use_error>
<tool_use_error>Found 2 matches of the string to replace, but replace_all is false. To \
replace all occurrences, set replace_all to true. To replace only one occurrence, please \
provide more context to uniquely identify the instance.
String: x = 1</tool_use_error>
<tool_use_error>No changes to make: old_string and new_string are exactly the same.</tool_use_error>
<tool_use_error>Path /etc/passwd is outside the allowed directory /app.</tool_use_error>
<tool_use_error>InputValidationError: read failed due to the following issue:
The required parameter `file_path` is missing</tool_use_error>
<tool_use_error>Error: No such tool available: run</tool_use_error>
<tool_use_error>Malformed tool call: not JSON (Expecting value)</tool_use_error>
Reading a directory, a binary file (one with NUL bytes) or a missing path is an error too.

Example:
Action: {{"name": "read", "arguments": {{"file_path": "/app/repo/calc.py", "limit": 2}}}}
Observation:
     1\tdef add(a, b):
     2\t    return a - b

Keep the repository, the files you have seen and the git history consistent across turns.
Write brief reasoning, then the tool result inside <predicted_observation></predicted_observation>.\
"""


def system_prompt() -> str:
    """The world-model system prompt of the swe domain (tool definitions and result formats)."""
    return SYSTEM_PROMPT.format(tools=_tool_docs(), maxline=READ_MAX_LINE_CHARS,
                                maxbash=BASH_MAX_OUTPUT_BYTES, maxlist=LIST_MAX_RESULTS)
