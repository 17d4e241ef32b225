"""The fs environment: the reference MCP filesystem server in the sandbox."""

import json

import pytest

from lwm import domains
from lwm.data import collect as C
from lwm.domains.fs import spec as domain
from lwm.domains.fs.suite import random_scripts
from lwm.domains.mcp.spec import call, canonical
from lwm.envs.base import Check, Task
from lwm.errors import ActionFormatError, EnvironmentClosedError
from lwm.schema import read_rows, read_trajectories
from tests.conftest import needs_sandbox

LINKS = {"shell_setup": [["ln", "-s", "/etc/passwd", "/app/out"], ["ln", "-s", "/", "/app/root"],
                         ["ln", "-s", "/app/a.txt", "/app/in"]]}


@pytest.fixture(scope="module")
def env():
    e = domains.get("fs").make_env()
    yield e
    e.close()


@needs_sandbox
def test_real_transitions_and_hostile_paths(env):
    first = env.reset(Task("t", files={"/app/a.txt": "hello\n", "/app/d/b.md": "# B\n"}, options=LINKS))
    assert first.startswith("[connected] secure-filesystem-server")
    assert env.step(call("read_text_file", path="/app/a.txt")).observation == "hello\n"
    assert env.step(call("write_file", path="/app/new.txt", content="ü 🙂")).observation == \
        "Successfully wrote to /app/new.txt"
    assert env.step(call("read_text_file", path="/app/new.txt")).observation == "ü 🙂"
    assert env.step(call("search_files", path="/app", pattern="**/*.md")).observation == "/app/d/b.md"
    # Path traversal, absolute paths outside, symlink escapes: all refused by the server.
    for path in ("../../etc/passwd", "/etc/passwd", "/app/../etc/hostname", "/app/out", "/app/root/etc/passwd"):
        obs = env.step(call("read_text_file", path=path)).observation
        assert obs.startswith("[tool error]\nAccess denied"), (path, obs)
    assert env.step(call("write_file", path="/app/out", content="x")).observation.startswith("[tool error]")
    assert env.step(call("read_text_file", path="/app/in")).observation == "hello\n"
    # Even a symlink the server followed would only show the sandbox's files, never the host's.
    assert "root:x:0:0" not in env.step(call("read_text_file", path="/app/root/etc/shadow")).observation
    # Protocol-level mistakes are the server's own words; non-tool-calls are ours.
    assert env.step(call("nope")).observation == "[tool error]\nMCP error -32602: Tool nope not found"
    assert "expected string, received number" in env.step(call("read_text_file", path=3)).observation
    bad = env.step("read it")
    assert bad.observation.startswith("[invalid action] not JSON") and bad.info["action_error"]
    prompt = env.system_prompt()
    assert '"name":"read_text_file"' in prompt and "[tool error]" in prompt


@needs_sandbox
def test_snapshot_restore_and_large_output(env):
    env.reset(Task("s", files={"/app/a.txt": "one\n"}, check=Check(call("read_text_file", path="/app/a.txt"), "one")))
    snap = env.snapshot()
    env.step(call("write_file", path="/app/a.txt", content="two\n"))
    assert env.step(call("write_file", path="/app/b.txt", content="x" * 60_000)).observation.startswith("Succ")
    assert env.verify() == 0.0
    big = env.step(call("read_text_file", path="/app/b.txt")).observation
    assert big.endswith("[lwm: output truncated]") and len(big) < 20_000
    env.restore(snap)
    assert env.step(call("read_text_file", path="/app/a.txt")).observation == "one\n"
    assert env.step(call("list_directory", path="/app")).observation == "[FILE] a.txt"
    assert env.verify() == 1.0
    env.close()
    env.close()
    with pytest.raises(EnvironmentClosedError):
        env.step(call("list_allowed_directories"))


def test_action_format():
    assert domain.parse_action('{"name": "read_file", "arguments": {"path": "/app/x"}}').arguments == {"path": "/app/x"}
    assert domain.parse_action('```json\n{"name": "list_allowed_directories"}\n```').arguments == {}
    for bad in ("", "[]", '{"arguments": {}}', '{"name": 3}', '{"name": "x", "arguments": [1]}',
                '{"name": "x", "extra": 1}', "x" * 70_000):
        with pytest.raises(ActionFormatError, match="invalid fs action"):
            domain.parse_action(bad)
    assert canonical('{"b": 1,\n "a": 2}') == '{"a": 2, "b": 1}'
    assert canonical("[tool error]\nno  \n") == "[tool error]\nno"


def test_suite_size_and_determinism():
    eps = domains.get("fs").scripts()
    assert len(eps) >= 20 and sum(len(e.actions) for e in eps) >= 100
    assert sum(e.task.check is not None for e in eps) >= 10
    assert all(e.task.family and e.tags for e in eps)
    assert len({e.task.name for e in eps}) == len(eps)
    assert [e.actions for e in random_scripts(3, 4)] == [e.actions for e in random_scripts(3, 4)]
    for e in eps:
        for a in e.actions:
            json.dumps(a)


@needs_sandbox
def test_collect_two_episodes(tmp_path):
    res = C.collect(C.CollectConfig(out=tmp_path, domain="fs", episodes=3, workers=3), show_progress=False)
    eps = domains.get("fs").scripts()[:3]
    assert not res.failed and res.trajectories == 6
    rows = list(read_rows(res.rows_path))
    assert len(rows) == sum(len(e.actions) for e in eps)
    assert rows[0].task == "fs" and '"name":"read_text_file"' in rows[0].system_str
    assert "- buy milk\n- call Ada\n- fix the bike\n" in rows[1].response[-1]
    by_name = {t.id.split("/")[1]: t for t in read_trajectories(tmp_path / "trajectories.jsonl")}
    assert by_name["fs-read-unicode"].reward == 1.0 and by_name["fs-read-notes"].reward is None
