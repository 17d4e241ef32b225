"""The fs domain: a sandboxed directory behind the reference MCP filesystem server
(``@modelcontextprotocol/server-filesystem``), allowed to touch ``/app`` only.

Action format: :data:`ACTION_FORMAT`.
"""

from __future__ import annotations

from typing import Any

from lwm.domains.mcp.spec import (
    _OBSERVATION_RULES,
    MAX_ACTION_CHARS,
    MAX_OBSERVATION_CHARS,
    call,
    canonical,
    format_action,
    tools_json,
)
from lwm.domains.tool_call import ToolCall, parse_tool_call

#: The action format, for people and prompts (the agent's tool description is shorter).
ACTION_FORMAT = """\
Actions and observations are those of the :mod:`lwm.domains.mcp.spec` domain: a tool call
``{"name": ..., "arguments": {...}}`` and the tool result's text (``[tool error]`` first
line for results the server marks as errors, ``[protocol error <code>]`` for JSON-RPC
errors, ``[invalid action]`` for actions that are not tool calls). Comparator normal form:
:func:`lwm.domains.mcp.canonical`.
"""
NAME = "fs"
ROOT = "/app"

SYSTEM_PROMPT = """\
You are a Filesystem World Model: you simulate the reference MCP filesystem server \
(@modelcontextprotocol/server-filesystem) exactly.

The server may only access the directory {root} and what is below it (paths are absolute, \
or relative to the server's working directory {root}; anything outside, including through \
symbolic links, is refused with "Access denied - path outside allowed directories"). The \
directory holds the files of the task; nothing else changes them.

Its tools, exactly as the server lists them (tools/list, JSON):
{tools}

""" + _OBSERVATION_RULES

__all__ = ["NAME", "ROOT", "ToolCall", "call", "canonical", "format_action", "parse_action", "system_prompt"]


def parse_action(text: str | dict) -> ToolCall:
    """Parse a tool-call action (:func:`lwm.domains.tool_call.parse_tool_call`).

    Raises:
        ActionFormatError: not a JSON tool call (the error names the ``fs`` domain).
    """
    return parse_tool_call(text, NAME, MAX_ACTION_CHARS)


def system_prompt(tools: list[dict[str, Any]], root: str = ROOT) -> str:
    """The world-model system prompt for the filesystem server with these tools."""
    return SYSTEM_PROMPT.format(root=root, tools=tools_json(tools), limit=MAX_OBSERVATION_CHARS)
