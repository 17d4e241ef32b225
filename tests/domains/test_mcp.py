"""The mcp environment: real stateful MCP servers (SQLite, memory graph, tickets) in the sandbox."""

import json
import os
import signal
import time

import pytest

from lwm import domains
from lwm.data import collect as C
from lwm.domains.mcp import spec as domain
from lwm.domains.mcp.client import McpConnection, ServerSpec
from lwm.domains.mcp.spec import call
from lwm.domains.mcp.suite import random_scripts
from lwm.envs.base import Check, Task
from lwm.errors import ActionFormatError, SandboxError
from lwm.schema import read_rows, read_trajectories
from tests.conftest import needs_sandbox


@pytest.fixture(scope="module")
def env():
    e = domains.get("mcp").make_env()
    yield e
    e.close()


def _sql(q):
    return call("read_query", query=q)


@needs_sandbox
def test_sqlite_transitions_and_host_files_unreachable(env):
    assert env.reset(Task("q", options={"server": "sqlite"})) == "[connected] sqlite 0.1.0: 6 tools"
    assert env.step(call("create_table", query="CREATE TABLE t (a INTEGER, b TEXT)")).observation == \
        "Table created successfully"
    assert env.step(call("write_query", query="INSERT INTO t VALUES (1, 'x'), (2, 'ü')")).observation == \
        "[{'affected_rows': 2}]"
    assert env.step(_sql("SELECT * FROM t ORDER BY a")).observation == "[{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'ü'}]"
    assert env.step(_sql("SELECT * FROM nope")).observation == "Database error: no such table: nope"
    # The server sees the sandbox's files only: no /etc/shadow, and /etc/passwd is the jail's own.
    assert env.step(call("write_query", query="ATTACH DATABASE '/etc/shadow' AS s")).observation == \
        "Database error: unable to open database: /etc/shadow"
    obs = env.step(call("write_query", query="ATTACH DATABASE '/etc/passwd' AS p")).observation
    assert obs == "Database error: file is not a database"
    missing = env.step(call("read_query")).observation
    assert missing.startswith("[tool error]") and "'query' is a required property" in missing
    # 40 MB of output: cut inside the sandbox, then to the observation limit.
    huge = env.step(_sql("SELECT hex(zeroblob(20000000)) AS h")).observation
    assert huge.endswith("[lwm: output truncated]") and len(huge) < 20_000
    assert '"name":"read_query"' in env.system_prompt()


@needs_sandbox
def test_tickets_snapshot_restore_and_errors(env):
    env.reset(Task("t", options={"server": "tickets"}, setup=(call("create_ticket", title="First"),),
                   check=Check(call("get_ticket", ticket_id=1), '"status": "open"')))
    snap = env.snapshot()
    closed = json.loads(env.step(call("close_ticket", ticket_id=1, resolution="done")).observation)
    assert closed["status"] == "closed" and closed["resolution"] == "done"
    assert env.step(call("close_ticket", ticket_id=1, resolution="x")).observation == \
        "[tool error]\nError executing tool close_ticket: Ticket 1 is already closed"
    assert env.step(call("reopen", ticket_id=1)).observation == "[tool error]\nUnknown tool: reopen"
    assert env.verify() == 0.0
    env.restore(snap)  # the server restarts on the restored database
    assert json.loads(env.step(call("get_ticket", ticket_id=1)).observation)["status"] == "open"
    assert env.verify() == 1.0
    page = json.loads(env.step(call("list_tickets", page_size=1)).observation)
    assert page == {"tickets": [{"id": 1, "title": "First", "priority": "normal", "status": "open",
                                 "assignee": None}], "page": 1, "page_size": 1, "total": 1, "next_page": None}


@needs_sandbox
def test_memory_graph_state(env):
    env.reset(Task("m", options={"server": "memory"}))
    env.step(call("create_entities", entities=[{"name": "Ada", "entityType": "person", "observations": ["math"]}]))
    snap = env.snapshot()
    env.step(call("delete_entities", entityNames=["Ada"]))
    assert json.loads(env.step(call("read_graph")).observation) == {"entities": [], "relations": []}
    env.restore(snap)
    graph = json.loads(env.step(call("read_graph")).observation)
    assert graph["entities"] == [{"name": "Ada", "entityType": "person", "observations": ["math"]}]
    bad = env.step(call("create_entities", entities="x")).observation
    assert bad.startswith("[tool error]\nMCP error -32602: Input validation error")


@needs_sandbox
def test_killed_or_hung_server_is_a_sandbox_error(env):
    env.reset(Task("k", options={"server": "tickets"}))
    env.conn.kill_server()
    with pytest.raises(SandboxError):
        env.step(call("list_tickets"))
    # A server that never answers the handshake: bounded by start_timeout.
    t0 = time.monotonic()
    with pytest.raises(SandboxError):
        McpConnection(ServerSpec("hang", ("/usr/bin/python3", "-c", "import time; time.sleep(60)")), start_timeout=2)
    # A whole sandbox killed under a live session.
    env.reset(Task("k2", options={"server": "sqlite"}))
    os.killpg(env.conn._proc.pid, signal.SIGKILL)
    with pytest.raises(SandboxError):
        env.step(_sql("SELECT 1"))
    assert time.monotonic() - t0 < 30
    env.close()


def test_action_format_and_rendering():
    assert domain.parse_action('{"name": "get_ticket", "arguments": {"ticket_id": 1}}') == \
        domain.ToolCall("get_ticket", {"ticket_id": 1})
    for bad in ("get ticket 1", "null", '{"name": ""}', '{"name": "x", "arguments": "a"}'):
        with pytest.raises(ActionFormatError, match="invalid mcp action"):
            domain.parse_action(bad)
    assert domain.render_result([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], False) == "a\nb"
    assert domain.render_result([{"type": "text", "text": "boom"}], True) == "[tool error]\nboom"
    assert domain.render_protocol_error(-32602, "bad") == "[protocol error -32602] bad"
    assert domain.truncate("x" * 20_000).endswith("[lwm: output truncated]")


def test_suite_size_and_servers():
    eps = domains.get("mcp").scripts()
    assert len(eps) >= 20 and sum(len(e.actions) for e in eps) >= 100
    assert sum(e.task.check is not None for e in eps) >= 10
    assert {e.task.options["server"] for e in eps} == {"sqlite", "memory", "tickets"}
    assert any("fails" in e.tags for e in eps)
    assert [e.actions for e in random_scripts(5, 3)] == [e.actions for e in random_scripts(5, 3)]


@needs_sandbox
def test_collect_three_episodes(tmp_path):
    names = ["sqlite-shop-basics", "sqlite-restock", "sqlite-delete-wrong"]
    res = C.collect(C.CollectConfig(out=tmp_path, domain="mcp", episodes=3, workers=3), show_progress=False)
    assert [e.task.name for e in domains.get("mcp").scripts()[:3]] == names
    assert not res.failed and res.trajectories == 6
    rows = list(read_rows(res.rows_path))
    assert len(rows) == sum(len(e.actions) for e in domains.get("mcp").scripts()[:3])
    assert rows[0].task == "mcp" and "mcp-server-sqlite" in rows[0].system_str and rows[0].response[-1]
    rewards = {t.id.split("/")[1]: t.reward for t in read_trajectories(tmp_path / "trajectories.jsonl")}
    assert rewards == {"sqlite-shop-basics": 1.0, "sqlite-restock": 1.0, "sqlite-delete-wrong": 0.0}
