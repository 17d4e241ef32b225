"""The tool-call action shared by the mcp, fs, swe and search domains: a JSON object
``{"name": <tool>, "arguments": {...}}``, as in an MCP ``tools/call`` request
(https://modelcontextprotocol.io/specification, "Tools") and OpenAI function calling.

Only the envelope is checked here; which tools exist and what their arguments must be
is each domain's (or each real tool's) business.
"""

from __future__ import annotations

import json
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
    raw = action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)
    if len(raw) > max_chars:
        raise ActionFormatError(domain, raw[:200], f"longer than {max_chars} characters")
    if isinstance(action, str):
        body = action.strip()
        if body.startswith("```"):
            body = body.split("\n", 1)[1] if "\n" in body else ""
            body = body.rsplit("```", 1)[0]
        try:
            action = json.loads(body)
        except json.JSONDecodeError as e:
            raise ActionFormatError(domain, raw, f"not JSON ({e.msg})") from None
    if not isinstance(action, dict):
        raise ActionFormatError(domain, raw, 'expected a JSON object {"name": ..., "arguments": {...}}')
    extra = set(action) - {"name", "arguments"}
    if extra:
        raise ActionFormatError(domain, raw, f"unexpected keys {sorted(extra)}; only 'name' and 'arguments'")
    name, arguments = action.get("name"), action.get("arguments")
    if not isinstance(name, str) or not name:
        raise ActionFormatError(domain, raw, "'name' must be a non-empty string")
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            raise ActionFormatError(domain, raw, "'arguments' is a string but not JSON") from None
    if not isinstance(arguments, dict):
        raise ActionFormatError(domain, raw, "'arguments' must be a JSON object")
    return ToolCall(name, arguments)
