"""The tool-call action shared by the mcp, fs, swe and search domains: a JSON object
``{"name": <tool>, "arguments": {...}}``, as in an MCP ``tools/call`` request
(https://modelcontextprotocol.io/specification, "Tools") and OpenAI function calling.

Only the envelope is checked here; which tools exist and what their arguments must be
is each domain's (or each real tool's) business.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from lwm.errors import ActionFormatError


@dataclass(frozen=True)
class ToolCall:
    """One action: a tool call.

    Attributes:
        name: the tool's name.
        arguments: its arguments (a JSON object).
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


def parse_tool_call(action: str | dict, domain: str, max_chars: int) -> ToolCall:
    """Parse a tool-call action.

    Args:
        action: the JSON text (surrounding Markdown code fences are ignored) or the decoded
            object. ``arguments`` may be left out or ``null`` (``{}``), or be a JSON-encoded
            string (as function-calling APIs send it).
        domain: the domain named in errors.
        max_chars: the longest action text accepted.

    Raises:
        ActionFormatError: longer than ``max_chars``, not JSON, not an object, keys other
            than ``name`` and ``arguments``, no non-empty string ``name``, or ``arguments``
            not a JSON object.
    """
    raw = action if isinstance(action, str) else json.dumps(action, ensure_ascii=False, default=repr)
    if len(raw) > max_chars:
        raise ActionFormatError(domain, raw[:200], f"longer than {max_chars} characters")
    if isinstance(action, str):
        fenced = _FENCE.match(action)
        action = _loads(fenced.group(2) if fenced else action, domain, raw, "")
    if not isinstance(action, dict):
        raise ActionFormatError(domain, raw, 'expected a JSON object {"name": ..., "arguments": {...}}')
    extra = set(action) - {"name", "arguments"}
    if extra:
        raise ActionFormatError(domain, raw, f"unexpected keys {sorted(map(str, extra))}; only 'name' and 'arguments'")
    name, arguments = action.get("name"), action.get("arguments")
    if not isinstance(name, str) or not name.strip():
        raise ActionFormatError(domain, raw, "'name' must be a non-empty string")
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        arguments = _loads(arguments, domain, raw, "'arguments' is a string but ")
    if not isinstance(arguments, dict):
        raise ActionFormatError(domain, raw, "'arguments' must be a JSON object")
    return ToolCall(name, arguments)


#: A whole action wrapped in one Markdown code fence (any info string, 3+ backticks).
_FENCE = re.compile(r"\s*(`{3,})[\w+.-]*[ \t]*\n?(.*?)\n?[ \t]*\1\s*\Z", re.DOTALL)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(text: str, domain: str, raw: str, what: str) -> Any:
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as e:
        reason = f"not JSON ({e.msg})"
    except RecursionError:
        reason = "nested too deeply"
    except ValueError as e:  # NaN / Infinity, or an integer too long to convert
        reason = f"not JSON ({e})"
    raise ActionFormatError(domain, raw, what + reason)
