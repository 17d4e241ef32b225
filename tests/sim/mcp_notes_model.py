"""A scripted world model of the notes API (examples/mcp/notes_tools.json) for the MCP
server's tests: it answers each call from what its prompt shows (the seeded state and the
calls before), so what a session reads back proves that its history reached the model.

Run as a script, it serves that model over stdio (``lwm serve mcp`` without the embedded
model): ``python mcp_notes_model.py TOOLS OUT [STATE]``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from lwm.models.base import FunctionChatModel

NOTES_TOOLS = Path(__file__).resolve().parents[2] / "examples" / "mcp" / "notes_tools.json"
NOTES_STATE = NOTES_TOOLS.with_name("notes_state.json")


def tool_calls(text: str) -> list[tuple[str, dict]]:
    """Every ``{"name": …, "arguments": {…}}`` object in ``text``, in order."""
    decoder, out = json.JSONDecoder(), []
    for m in re.finditer(r'\{"name": ', text):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(obj, dict) and set(obj) == {"name", "arguments"}:
            out.append((obj["name"], obj["arguments"]))
    return out


def apply(name: str, args: dict, notes: dict[int, dict]) -> str:
    """The notes service's answer to one call (changing ``notes``)."""
    if name == "create_note":
        note = {"id": max(notes, default=0) + 1, "title": args["title"], "body": args["body"]}
        notes[note["id"]] = note
        return json.dumps(note)
    if name == "list_notes":
        return json.dumps([{"id": n["id"], "title": n["title"]} for n in notes.values()])
    if args.get("id") not in notes:
        return f"[tool error]\nnote {args.get('id')} not found"
    if name == "update_note":
        notes[args["id"]]["body"] = args["body"]
    if name == "delete_note":
        notes.pop(args["id"])
        return "deleted"
    return json.dumps(notes[args["id"]])


def notes_model(seen: list | None = None, name: str = "scripted-notes") -> FunctionChatModel:
    """The scripted world model; every prompt it is asked is appended to ``seen``."""

    def fn(messages):
        if seen is not None:
            seen.append(messages)
        text = "\n".join(m["content"] for m in messages[1:])
        notes: dict[int, dict] = {}
        if (m := re.search(r"\[initial state\] notes\n(.*)", text)) is not None:
            notes = {n["id"]: dict(n) for n in json.loads(m.group(1))}
        *history, (tool, args) = tool_calls(text)
        for h_tool, h_args in history:
            apply(h_tool, h_args, notes)
        return f"<think>the notes so far</think><predicted_observation>{apply(tool, args, notes)}" \
               "</predicted_observation>"

    return FunctionChatModel(fn, name=name)


if __name__ == "__main__":
    from lwm.sim.mcp_server import McpServeConfig, serve_mcp

    tools, out, *state = sys.argv[1:]
    serve_mcp(McpServeConfig(tools=Path(tools), out=Path(out), state=Path(state[0]) if state else None),
              notes_model())
