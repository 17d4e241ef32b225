"""`lwm serve mcp`: an MCP server whose tools the world model answers, spoken to with the
MCP SDK's own client (in memory, over stdio, over streamable HTTP)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_notes_model import NOTES_STATE, NOTES_TOOLS, notes_model
from servers import chat_stub, completion, serve_app

from lwm.models.base import FunctionChatModel
from lwm.schema import read_trajectories, rows_from_trajectory
from lwm.sim.controls import Control
from lwm.sim.mcp_server import (
    McpSimulator,
    ToolSet,
    TrajectoryRecorder,
    load_state,
    load_tools,
    read_tools,
    to_result,
)

ROOT = Path(__file__).resolve().parents[2]


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


def simulator(seen=None, tmp_path=None, **kwargs) -> McpSimulator:
    recorder = TrajectoryRecorder(tmp_path) if tmp_path is not None else None
    return McpSimulator(load_tools(NOTES_TOOLS), notes_model(seen), recorder=recorder, **kwargs)


async def test_lists_the_tools_and_reads_back_what_a_call_created():
    seen = []
    sim = simulator(seen)
    async with Client(sim.server, mode="legacy") as client:
        listed = (await client.list_tools()).tools
        assert [t.name for t in listed] == ["create_note", "get_note", "update_note", "list_notes", "delete_note"]
        assert listed[1].input_schema["required"] == ["id"]
        created = await client.call_tool("create_note", {"title": "milk", "body": "2 litres"})
        assert json.loads(text(created)) == {"id": 1, "title": "milk", "body": "2 litres"} and not created.is_error
        # the scripted model answers the read from the history its prompt shows
        read = await client.call_tool("get_note", {"id": 1})
        assert json.loads(text(read))["body"] == "2 litres"
        await client.call_tool("update_note", {"id": 1, "body": "3 litres"})
        assert json.loads(text(await client.call_tool("get_note", {"id": 1})))["body"] == "3 litres"
    assert len(seen) == 4
    prompt = seen[-1]
    assert prompt[0]["content"].startswith("You are an MCP World Model") and "create_note" in prompt[0]["content"]
    assert "[connected] notes: 5 tools" in prompt[1]["content"]
    assert '{"name": "get_note", "arguments": {"id": 1}}' in prompt[-1]["content"]


async def test_a_tool_error_the_model_predicts_is_an_error_result():
    sim = simulator()
    async with Client(sim.server, mode="legacy") as client:
        missing = await client.call_tool("get_note", {"id": 42})
    assert missing.is_error and text(missing) == "note 42 not found"


async def test_malformed_calls_get_the_protocols_errors_and_never_reach_the_model():
    seen = []
    sim = simulator(seen)
    async with Client(sim.server, mode="legacy") as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("drop_table", {})
        wrong_type = await client.call_tool("get_note", {"id": "one"})
        missing = await client.call_tool("create_note", {"title": "no body"})
        still_fine = await client.call_tool("list_notes", {})
    assert unknown.value.code == -32602 and "Unknown tool: drop_table" in unknown.value.message
    assert wrong_type.is_error and "id: 'one' is not of type 'integer'" in text(wrong_type)
    assert missing.is_error and "'body' is a required property" in text(missing)
    assert text(still_fine) == "[]"
    assert len(seen) == 1  # only list_notes was asked


async def test_an_argument_called_name_reaches_the_model_intact():
    seen = []
    tools = ToolSet("greeter", [{"name": "greet", "inputSchema": {"type": "object", "properties": {
        "name": {"type": "string"}}, "required": ["name"]}}])
    sim = McpSimulator(tools, FunctionChatModel(lambda m: seen.append(m) or
                                                "<predicted_observation>hello</predicted_observation>"))
    async with Client(sim.server, mode="legacy") as client:
        assert text(await client.call_tool("greet", {"name": "Ada"})) == "hello"
    assert '{"name": "greet", "arguments": {"name": "Ada"}}' in seen[0][-1]["content"]


def test_observations_map_to_results_and_errors():
    with pytest.raises(MCPError) as err:
        to_result("[protocol error -32602] Unknown tool: x", {})
    assert err.value.code == -32602 and err.value.message == "Unknown tool: x"
    structured = to_result('{"id": 3}', {"outputSchema": {"type": "object"}})
    assert structured.structured_content == {"id": 3} and not structured.is_error
    assert to_result('{"id": 3}', {}).structured_content is None
    assert to_result("[tool error]\nboom", {}).content[0].text == "boom"


async def test_seeded_state_is_the_initial_observation_and_controls_reach_the_prompt():
    seen = []
    sim = simulator(seen, state=load_state(NOTES_STATE), controls=(Control.parse("error:quota exceeded"),))
    async with Client(sim.server, mode="legacy") as client:
        listed = json.loads(text(await client.call_tool("list_notes", {})))
        created = json.loads(text(await client.call_tool("create_note", {"title": "bins", "body": "Thursday"})))
    assert [n["title"] for n in listed] == ["groceries", "call plumber"] and created["id"] == 3
    assert "[initial state] notes\n[{\"id\": 1" in seen[0][1]["content"]
    assert "quota exceeded" in seen[0][0]["content"]


async def test_sessions_are_recorded_as_trajectories_that_eval_and_data_build_read(tmp_path):
    sim = simulator(tmp_path=tmp_path)
    journal = tmp_path / "trajectories.partial.jsonl"
    async with Client(sim.server, mode="legacy") as client:
        await client.call_tool("create_note", {"title": "milk", "body": "2 l"})
        assert len(journal.read_text().splitlines()) == 1  # journalled after each call
        await client.call_tool("get_note", {"id": 1})
        await client.call_tool("get_note", {"id": "bad"})  # refused: not part of the episode
    async with Client(sim.server, mode="legacy"):
        pass  # a session without calls records nothing
    sim.recorder.close()
    assert not journal.exists()
    [traj] = list(read_trajectories(tmp_path / "trajectories.jsonl"))
    assert traj.domain == "mcp" and [t.action for t in traj.turns] == [
        '{"name": "create_note", "arguments": {"title": "milk", "body": "2 l"}}',
        '{"name": "get_note", "arguments": {"id": 1}}']
    assert traj.turns[1].provenance.kind == "simulated" and traj.turns[1].provenance.source == "scripted-notes"
    assert traj.metadata["server"] == "notes" and traj.metadata["session"] == "stdio" and traj.metadata["ended"]
    rows = rows_from_trajectory(traj)
    assert len(rows) == 2 and '{"id": 1, "title": "milk", "body": "2 l"}' in rows[1].ground_truth

    from lwm.eval.runner import load_rows

    assert [(r.id, r.turn_idx) for r in load_rows(tmp_path)] == [(traj.id, 1), (traj.id, 2)]  # lwm eval --data
    from lwm.data.build import read_candidates, source_files

    counts = Counter()
    assert read_candidates(source_files([tmp_path]), counts) == [] and counts["simulated_turns"] == 2


async def test_a_crash_leaves_the_journal_and_the_next_server_recovers_it(tmp_path):
    crashed = simulator(tmp_path=tmp_path)
    recorder = crashed.recorder
    async with Client(crashed.server, mode="legacy") as client:
        await client.call_tool("create_note", {"title": "a", "body": "b"})
        await client.call_tool("list_notes", {})
        crashed.recorder = None  # the server stops here: the session never ends
    recorder.close()  # the session is left in the journal (a killed process leaves it too)
    assert not (tmp_path / "trajectories.jsonl").exists()
    again = TrajectoryRecorder(tmp_path)
    assert again.recovered == 1 and not (tmp_path / "trajectories.partial.jsonl").exists()
    [traj] = list(read_trajectories(tmp_path / "trajectories.jsonl"))
    assert len(traj.turns) == 2 and traj.metadata["ended"] == "recovered"
    again.close()


def test_one_server_at_a_time_records_into_a_directory(tmp_path):
    from lwm.errors import RunBusyError

    first = TrajectoryRecorder(tmp_path)
    with pytest.raises(RunBusyError):
        TrajectoryRecorder(tmp_path)
    first.close()
    TrajectoryRecorder(tmp_path).close()


@pytest.mark.parametrize(("content", "expected"), [
    ("{not json", "the tools file is not JSON"),
    ('{"tool": []}', 'an object with a "tools" list'),
    ("[]", "expected a non-empty list of MCP tools"),
    ('[{"description": "x", "inputSchema": {"type": "object"}}]', "tool 1: name: Field required"),
    ('[{"name": "a"}]', "tool 1 ('a'): inputSchema: Field required"),
    ('[{"name": "a", "inputSchema": {"type": "string"}}]', "inputSchema must be a JSON Schema of type \"object\""),
    ('[{"name": "a", "inputSchema": {"type": "object", "properties": {"n": {"type": "count"}}}}]',
     "inputSchema is not a valid JSON Schema"),
    ('[{"name": "a", "inputSchema": {"type": "object"}}, {"name": "a", "inputSchema": {"type": "object"}}]',
     "tool 2 ('a'): a second tool named 'a'"),
    ('["a"]', "tool 1 is str, not a JSON object"),
])
def test_malformed_tools_files_are_refused_with_the_file_and_the_reason(tmp_path, content, expected):
    path = tmp_path / "tools.json"
    path.write_text(content)
    with pytest.raises(ValueError) as err:
        load_tools(path)
    assert str(err.value).startswith(f"{path}: ") and expected in str(err.value)


def test_the_command_refuses_a_malformed_tools_file_before_loading_a_model(tmp_path):
    bad = tmp_path / "tools.json"
    bad.write_text('{"tools": [{"name": "a"}]}')
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "serve", "mcp", "--tools", str(bad), "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2 and f"{bad}: tool 1 ('a'): inputSchema: Field required" in r.stderr
    assert "tools-from" in subprocess.run([sys.executable, "-m", "lwm.cli", "serve", "mcp", "--help"],
                                          capture_output=True, text=True, timeout=120, cwd=ROOT).stdout


async def test_over_stdio_with_the_sdk_client(tmp_path):
    """The real transport: the SDK client starts the server as a subprocess."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(__file__).parent)])}
    params = StdioServerParameters(command=sys.executable, args=[
        str(Path(__file__).with_name("mcp_notes_model.py")), str(NOTES_TOOLS), str(tmp_path), str(NOTES_STATE)],
        env=env, cwd=str(ROOT))
    async with Client(stdio_client(params)) as client:  # the SDK's default negotiation
        assert len((await client.list_tools()).tools) == 5
        created = json.loads(text(await client.call_tool("create_note", {"title": "bins", "body": "Thu"})))
        read = json.loads(text(await client.call_tool("get_note", {"id": created["id"]})))
    assert created["id"] == 3 and read == created
    deadline = time.monotonic() + 30
    while not (tmp_path / "trajectories.jsonl").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    [traj] = list(read_trajectories(tmp_path / "trajectories.jsonl"))
    assert len(traj.turns) == 2 and traj.initial_observation.startswith("[connected] notes: 5 tools")


async def test_the_command_over_stdio_with_a_served_world_model(tmp_path):
    """`lwm serve mcp` itself, started by the SDK client, its world model behind --base-url."""
    answer = notes_model().fn
    with chat_stub(lambda body: completion(answer(body["messages"]))) as (base_url, log):
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "lwm.cli", "serve", "mcp", "--tools", str(NOTES_TOOLS), "--state", str(NOTES_STATE),
            "--base-url", base_url, "--model", "stub", "--control", "paginate:2 per page", "--out", str(tmp_path)],
            cwd=str(ROOT))
        async with Client(stdio_client(params)) as client:
            created = json.loads(text(await client.call_tool("create_note", {"title": "bins", "body": "Thu"})))
            listed = json.loads(text(await client.call_tool("list_notes", {})))
    assert created["id"] == 3 and [n["id"] for n in listed] == [1, 2, 3]
    assert "paginate" in log[0]["messages"][0]["content"] and "[initial state] notes" in log[0]["messages"][1]["content"]
    deadline = time.monotonic() + 30
    while not (tmp_path / "trajectories.jsonl").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    [traj] = list(read_trajectories(tmp_path / "trajectories.jsonl"))
    assert traj.turns[0].provenance.source == "stub" and traj.turns[0].provenance.controls == ["paginate:2 per page"]


async def test_tools_from_a_real_servers_tools_list(tmp_path):
    """--tools-from: a command line started over stdio (here the scripted notes server)."""
    command = f"{sys.executable} {Path(__file__).with_name('mcp_notes_model.py')} {NOTES_TOOLS} {tmp_path / 'out'}"
    tools = await read_tools(command)
    assert tools.name == "notes" and [t["name"] for t in tools.tools] == [t["name"] for t in load_tools(
        NOTES_TOOLS).tools] and tools.tools[0]["inputSchema"]["required"] == ["title", "body"]
    with pytest.raises(ValueError, match="no-such-mcp-server --flag: cannot read its tools: .*No such file"):
        await read_tools("no-such-mcp-server --flag", timeout=30)


async def test_concurrent_sessions_over_streamable_http_stay_apart(tmp_path):
    seen = []
    sim = simulator(seen, tmp_path=tmp_path)

    async def session(title: str, started: asyncio.Event, other: asyncio.Event) -> list:
        async with Client(url) as client:  # the SDK's default negotiation falls back to the handshake
            await client.call_tool("create_note", {"title": title, "body": "x"})
            started.set()
            await other.wait()  # both sessions are open and have written before either reads
            return json.loads(text(await client.call_tool("list_notes", {})))

    with serve_app(sim.http_app()) as base:
        url = f"{base}/mcp"
        a, b = asyncio.Event(), asyncio.Event()
        alpha, beta = await asyncio.gather(session("alpha", a, b), session("beta", b, a))
        assert alpha == [{"id": 1, "title": "alpha"}] and beta == [{"id": 1, "title": "beta"}]
        deadline = time.monotonic() + 10
        while sim.open_sessions and time.monotonic() < deadline:  # recorded once the DELETE is answered
            await asyncio.sleep(0.02)
        assert sim.open_sessions == 0  # each client ended its session (DELETE)
        assert len((tmp_path / "trajectories.jsonl").read_text().splitlines()) == 2  # before the server stops
        from mcp_types.version import LATEST_MODERN_VERSION

        async with Client(url, mode=LATEST_MODERN_VERSION) as stateless:  # 2026-07-28: no sessions
            assert len((await stateless.list_tools()).tools) == 5
            with pytest.raises(MCPError) as refused:
                await stateless.call_tool("list_notes", {})
        assert refused.value.code == -32600 and "mode='legacy'" in refused.value.message
        assert len((await read_tools(url)).tools) == 5  # --tools-from a streamable HTTP URL
    sim.recorder.close()
    trajectories = list(read_trajectories(tmp_path / "trajectories.jsonl"))
    assert sorted(json.loads(t.turns[0].action)["arguments"]["title"] for t in trajectories) == ["alpha", "beta"]
    assert len({t.metadata["session"] for t in trajectories}) == 2 and len(seen) == 4


async def test_a_model_failure_is_an_internal_error_and_is_not_recorded(tmp_path):
    def broken(messages):
        raise ConnectionError("endpoint down")

    sim = McpSimulator(load_tools(NOTES_TOOLS), FunctionChatModel(broken), recorder=TrajectoryRecorder(tmp_path))
    async with Client(sim.server, mode="legacy") as client:
        with pytest.raises(MCPError) as err:
            await client.call_tool("list_notes", {})
    sim.recorder.close()
    assert err.value.code == -32603 and "endpoint down" in err.value.message
    assert not (tmp_path / "trajectories.jsonl").exists()


@pytest.mark.slow
async def test_with_the_embedded_world_model(tmp_path):
    pytest.importorskip("llama_cpp")
    from lwm.errors import ModelUnavailableError
    from lwm.models import load_model

    try:
        model = load_model("embedded-warmup")
    except ModelUnavailableError as e:
        pytest.skip(str(e))
    sim = McpSimulator(ToolSet("notes", load_tools(NOTES_TOOLS).tools), model, recorder=TrajectoryRecorder(tmp_path))
    async with Client(sim.server, mode="legacy") as client:
        created = await client.call_tool("create_note", {"title": "milk", "body": "2 litres"})
        read = await client.call_tool("get_note", {"id": 1})
    sim.recorder.close()
    assert isinstance(text(created), str) and isinstance(text(read), str)
    [traj] = list(read_trajectories(tmp_path / "trajectories.jsonl"))
    assert len(traj.turns) == 2 and traj.turns[0].provenance.source == model.name
