"""The mcp domain: a real, stateful MCP server; actions are tool calls, observations are
the tool results.

Action format: :data:`ACTION_FORMAT`.

Observation format (one deterministic text form, shared with the ``fs`` domain):

- a result: the text of its content blocks, joined by a newline (an image block is shown
  as ``[image <mimeType>, <n> bytes]``, an embedded resource as ``[resource <uri>]``
  followed by its text, any other block as its JSON);
- a result with ``isError: true``: the line ``[tool error]`` then the server's text;
- a JSON-RPC error answer (e.g. an unknown tool or invalid arguments on servers that
  answer so): ``[protocol error <code>] <message>``;
- an action that is not a tool call at all (not JSON, no ``name`` …), which no server
  ever sees: ``[invalid action] <reason>``;
- text longer than :data:`MAX_OBSERVATION_CHARS` is cut, ending ``[lwm: output truncated]``.

The initial observation is ``[connected] <server name> <version>: <n> tools``; when the
episode starts from a seeded state, each line ``[initial state] <tool call>`` follows with
that call's result (e.g. ``list_tickets``, ``read_graph``, ``directory_tree``).
"""

from __future__ import annotations

import json
from typing import Any

from lwm.domains.tool_call import ToolCall, parse_tool_call

#: The action format, for people and prompts (the agent's tool description is shorter).
ACTION_FORMAT = """\
Action format: a JSON object ``{"name": <tool name>, "arguments": {...}}`` (``arguments``
may be omitted: ``{}``), as in an MCP ``tools/call`` request
(https://modelcontextprotocol.io/specification, "Tools").
"""
NAME = "mcp"
MAX_ACTION_CHARS = 64_000
MAX_OBSERVATION_CHARS = 16_000
TRUNCATED = "\n[lwm: output truncated]"
#: The MCP servers a task can start (``Task.options["server"]``).
SERVERS = ("sqlite", "memory", "tickets")
TOOL_ERROR, PROTOCOL_ERROR, INVALID_ACTION = "[tool error]", "[protocol error", "[invalid action]"

_OBSERVATION_RULES = """\
The first observation names the server and may show the starting state: lines \
`[initial state] <tool call>` followed by that call's real result.
Each turn you receive the agent's action, a tool call as JSON: {{"name": <tool>, "arguments": {{...}}}}. \
Answer with the tool's result exactly as the real server would produce it, in this text form:
- a normal result: the text of its content blocks, joined by newlines;
- a result the server marks as an error (isError): the line `[tool error]`, then the server's error text;
- a JSON-RPC error from the server: `[protocol error <code>] <message>`;
- an action that is not a well-formed tool call: `[invalid action] <reason>`;
- text longer than {limit} characters is cut and ends with `[lwm: output truncated]`.
Servers validate arguments against the input schemas below and report unknown tools and \
invalid arguments in their own words. Keep the server's state (files, rows, entities, tickets) \
consistent across turns: earlier calls change what later calls return.

Write brief reasoning, then the observation inside <predicted_observation></predicted_observation>."""

SYSTEM_PROMPT = """\
You are an MCP World Model: you simulate a real Model Context Protocol server exactly.

Server: {server}. {about}

Its tools, exactly as the server lists them (tools/list, JSON):
{tools}

""" + _OBSERVATION_RULES


def parse_action(text: str | dict) -> ToolCall:
    """Parse a tool-call action (:func:`lwm.domains.tool_call.parse_tool_call`).

    Raises:
        ActionFormatError: not a tool call, or longer than :data:`MAX_ACTION_CHARS`.
    """
    return parse_tool_call(text, NAME, MAX_ACTION_CHARS)


def format_action(call: ToolCall) -> str:
    """The canonical JSON text of a tool call."""
    return json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)


def call(name: str, /, **arguments: Any) -> str:
    """A tool-call action text, for suites: ``call("read_file", path="/app/a")``."""
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def render_result(content: list[dict[str, Any]], is_error: bool) -> str:
    """A tool result (its content blocks as JSON dicts) in the observation format."""
    parts = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.get('mimeType', '')}, {len(str(block.get('data', '')))} bytes]")
        elif kind == "resource":
            res = block.get("resource", {})
            parts.append(f"[resource {res.get('uri', '')}]" + (f"\n{res['text']}" if "text" in res else ""))
        else:
            parts.append(json.dumps(block, ensure_ascii=False, sort_keys=True))
    text = "\n".join(parts)
    return truncate(f"{TOOL_ERROR}\n{text}" if is_error else text)


def render_protocol_error(code: int, message: str) -> str:
    """A JSON-RPC error answer in the observation format."""
    return truncate(f"{PROTOCOL_ERROR} {code}] {message}")


def truncate(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with the truncation marker."""
    return text if len(text) <= limit else text[:limit] + TRUNCATED


def canonical(observation: str) -> str:
    """Normal form for the deterministic comparator: an observation that is JSON (after
    an optional ``[tool error]`` line) is re-serialized with sorted keys and no
    indentation; otherwise trailing whitespace is stripped from every line."""
    head, body = "", observation.strip()
    if body.startswith(TOOL_ERROR):
        head, body = TOOL_ERROR + "\n", body[len(TOOL_ERROR):].strip()
    try:
        return head + json.dumps(json.loads(body), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return head + "\n".join(line.rstrip() for line in body.split("\n"))


def tools_json(tools: list[dict[str, Any]]) -> str:
    """Tool definitions as the system prompt shows them: the ``list_tools`` JSON array, one
    compact tool per line (a third of the tokens of indented JSON: world models with short
    contexts must fit a dozen tools and still see the episode)."""
    return "[\n" + ",\n".join(json.dumps(t, ensure_ascii=False, separators=(",", ":")) for t in tools) + "\n]"


ABOUT = {
    "sqlite": "The reference SQLite MCP server (mcp-server-sqlite) on the database /app/data.db; "
              "results are Python-style lists of row dictionaries.",
    "memory": "The reference knowledge-graph memory server (@modelcontextprotocol/server-memory), "
              "storing entities, relations and observations in /app/memory.jsonl.",
    "tickets": "A ticket tracker (lwm's own MCP server, SQLite-backed): tickets with priority, status, "
               "assignee, tags and comments; results are JSON; time is a logical counter (seq).",
}


def system_prompt(server: str, tools: list[dict[str, Any]]) -> str:
    """The world-model system prompt for an MCP server with these tools."""
    return SYSTEM_PROMPT.format(server=server, about=ABOUT.get(server, ""), tools=tools_json(tools),
                                limit=MAX_OBSERVATION_CHARS)
