"""The real swe environment: coding-agent tools on a sandboxed git repository."""

import json
import os
import time

import pytest
from conftest import needs_sandbox

from lwm import domains
from lwm.data import collect as C
from lwm.domains.swe import spec as domain
from lwm.domains.swe.env import GIT_INIT_SETUP, SweEnv
from lwm.domains.swe.suite import CALC, SCRIPTS, _files, call, random_scripts, sh
from lwm.envs.base import Task
from lwm.errors import ActionFormatError, EnvironmentClosedError
from lwm.schema import read_rows


# -- action format (no sandbox) ------------------------------------------------------------
def test_parse_action_accepts_tool_calls_and_rejects_malformed_ones():
    c = domain.parse_action('{"name": "read", "arguments": {"file_path": "a.py"}}')
    assert c.name == "read" and c.arguments == {"file_path": "a.py"}
    assert domain.parse_action('{"name": "bash"}').arguments == {}
    # the envelope shared by every tool-call domain (lwm.domains.tool_call): fences, null or
    # JSON-string arguments (function-calling APIs), decoded objects
    assert domain.parse_action('```json\n{"name": "bash", "arguments": null}\n```') == domain.ToolCall("bash", {})
    assert domain.parse_action({"name": "read", "arguments": '{"file_path": "a"}'}).arguments == {"file_path": "a"}
    for bad, why in [("nope", "not JSON"), ("[1]", "JSON object"), ('{"arguments": {}}', "name"),
                     ('{"name": "read", "arguments": [1]}', "arguments"),
                     ('{"name": "read", "arguments": "{"}', "a string but not JSON"),
                     ('{"name": "read", "args": {}}', "unexpected keys"),
                     ('{"name": "write", "arguments": {"content": "' + "x" * (1 << 20) + '"}}', "longer")]:
        with pytest.raises(ActionFormatError, match=why):
            domain.parse_action(bad)


def test_validate_reports_harness_errors():
    assert domain.validate(domain.ToolCall("read", {"file_path": "a"})) is None
    assert domain.validate(domain.ToolCall("ls", {})) == \
        "<tool_use_error>Error: No such tool available: ls</tool_use_error>"
    msg = domain.validate(domain.ToolCall("edit", {"file_path": 1, "old_string": "a", "x": 2}))
    assert msg.splitlines() == [
        "<tool_use_error>InputValidationError: edit failed due to the following issues:",
        "The parameter `file_path` type is expected as `string` but provided as `integer`",
        "The required parameter `new_string` is missing",
        "An unexpected parameter `x` was provided</tool_use_error>"]
    assert "must be positive" in domain.validate(domain.ToolCall("read", {"file_path": "a", "limit": 0}))
    assert "boolean" in domain.validate(domain.ToolCall("edit", {"file_path": "a", "old_string": "a",
                                                                 "new_string": "b", "replace_all": 1}))


def test_suite_meets_its_spec():
    core = domains.get("swe").scripts()
    assert len(core) >= 20 and sum(len(e.actions) for e in core) >= 100
    checked = [e for e in core if e.task.check is not None]
    assert len(checked) >= 10
    assert len({e.task.name for e in SCRIPTS}) == len(SCRIPTS)
    assert all(e.task.family for e in core)
    assert random_scripts(3, 2) == random_scripts(3, 2) != random_scripts(4, 2)
    for e in core:
        for a in e.actions:
            try:
                domain.parse_action(a)
            except ActionFormatError:
                assert e.task.family in ("harness", "random")  # malformed on purpose


# -- the real environment ---------------------------------------------------------------------


@pytest.fixture
def env():
    e = SweEnv()
    e.reset(Task("t", files=_files(CALC), setup=GIT_INIT_SETUP))
    yield e
    e.close()


def obs(env, name, **args):
    return env.step(call(name, **args)).observation


@needs_sandbox
def test_reset_describes_the_repository():
    with domains.get("swe").make_env() as env:
        first = env.reset(Task("t", files=_files(CALC), setup=GIT_INIT_SETUP))
    assert first.splitlines() == ["Working directory: /app/repo", "Git repository: yes (branch main, 1 commit)",
                                  "Files (4):", "  .gitignore", "  README.md", "  calc.py", "  test_calc.py"]


@needs_sandbox
def test_fix_a_failing_test_end_to_end(env):
    assert obs(env, "bash", command="python3 -m unittest -q 2>&1 | tail -1") == "FAILED (failures=1)"
    assert obs(env, "read", file_path="calc.py", offset=4, limit=3) == \
        '     4\tdef add(a, b):\n     5\t    """Return the sum of a and b."""\n     6\t    return a - b'
    assert obs(env, "grep", pattern="a - b", output_mode="content") == "/app/repo/calc.py:6:    return a - b"
    assert obs(env, "grep", pattern="def ") == "Found 2 files\n/app/repo/calc.py\n/app/repo/test_calc.py"
    out = obs(env, "edit", file_path="/app/repo/calc.py", old_string="a - b", new_string="a + b")
    assert out.splitlines()[0] == ("The file /app/repo/calc.py has been updated. Here's the result of "
                                   "running `cat -n` on a snippet of the edited file:")
    assert out.splitlines()[1:] == [f"{n:6}\t{line}" for n, line in
                                    zip(range(2, 11), CALC["calc.py"].replace("a - b", "a + b").split("\n")[1:10])]
    assert obs(env, "glob", pattern="*.py") == "/app/repo/calc.py\n/app/repo/test_calc.py"  # newest first
    assert obs(env, "bash", command="python3 -m unittest -q 2>&1 | tail -1") == "OK"
    commit = obs(env, "bash", command="git commit -qam 'Fix add' && git log --oneline | wc -l")
    assert commit == "2"
    assert env.verify() is None  # the task has no check


@needs_sandbox
def test_edit_errors_and_writes(env):
    assert obs(env, "edit", file_path="calc.py", old_string="nothing", new_string="x") == \
        "<tool_use_error>String to replace not found in file.\nString: nothing</tool_use_error>"
    assert obs(env, "edit", file_path="calc.py", old_string="return", new_string="yield").startswith(
        "<tool_use_error>Found 3 matches of the string to replace, but replace_all is false.")
    assert obs(env, "edit", file_path="calc.py", old_string="a", new_string="a") == \
        "<tool_use_error>No changes to make: old_string and new_string are exactly the same.</tool_use_error>"
    assert obs(env, "edit", file_path="calc.py", old_string="return", new_string="return  ", replace_all=True) == \
        "The file /app/repo/calc.py has been updated. All occurrences of 'return' were replaced with 'return  '."
    assert obs(env, "write", file_path="pkg/new.py", content="ü = 1\n") == \
        "File created successfully at: /app/repo/pkg/new.py"
    assert obs(env, "write", file_path="pkg/new.py", content="a\nb\n") == \
        "The file /app/repo/pkg/new.py has been overwritten (2 lines)."
    assert obs(env, "read", file_path="pkg/new.py", offset=9) == (
        "<system-reminder>Warning: the file exists but is shorter than the provided offset (9). "
        "The file has 2 lines.</system-reminder>")
    assert obs(env, "read", file_path="missing.py") == "<tool_use_error>File does not exist.</tool_use_error>"
    r = env.step('{"name": "read", "arguments": {"file_path": 3}}')
    assert "InputValidationError" in r.observation and r.info["is_error"]
    r = env.step("read calc.py")
    assert r.observation.startswith("<tool_use_error>Malformed tool call") and r.info["action_error"]


@needs_sandbox
def test_bash_cwd_exit_codes_and_timeout(env):
    assert obs(env, "bash", command="mkdir -p sub && cd sub && pwd") == "/app/repo/sub"
    assert obs(env, "bash", command="pwd") == "/app/repo/sub"
    assert obs(env, "read", file_path="../calc.py", limit=1) == '     1\t"""Arithmetic helpers."""'
    assert obs(env, "bash", command="cd /tmp") == "(No content)\nShell cwd was reset to /app/repo"
    assert obs(env, "bash", command="echo a; echo b >&2; exit 3") == "Exit code 3\na\nb"
    t0 = time.monotonic()
    assert obs(env, "bash", command="while :; do :; done", timeout=1000) == "Command timed out after 1 second"
    assert time.monotonic() - t0 < 5
    assert obs(env, "bash", command="sleep 60 & echo started") == "started"
    assert obs(env, "bash", command="pgrep -c sleep || true") == "0"  # nothing outlives its call


@needs_sandbox
def test_huge_output_is_bounded(env):
    out = obs(env, "bash", command="seq 1 1000000")
    assert len(out) <= domain.BASH_MAX_OUTPUT_BYTES + 100
    head, tail = out.split("\n... [", 1)
    assert head.startswith("1\n2\n") and tail.endswith("999999\n1000000")
    cut = int(tail.split(" lines truncated]")[0])
    assert cut + head.count("\n") + tail.count("\n") - 1 == 1000000  # every line is counted once


@needs_sandbox
def test_hostile_commands_are_contained(env, tmp_path):
    canary = tmp_path / "canary.txt"
    canary.write_text("host file\n")
    out = obs(env, "bash", command=f"cat /etc/shadow {canary}; ls /home /work")
    assert "No such file or directory" in out and "host file" not in out
    net = obs(env, "bash", command="python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), 2)\"")
    assert net.startswith("Exit code 1") and "Network is unreachable" in net
    assert obs(env, "read", file_path="/etc/passwd") == \
        "<tool_use_error>Path /etc/passwd is outside the allowed directory /app.</tool_use_error>"
    obs(env, "bash", command="ln -s /etc link && ln -s /etc/passwd passwd.py")
    assert "outside the allowed directory" in obs(env, "grep", pattern="root", path="link")
    assert obs(env, "grep", pattern="root:") == "No files found"  # the link out is not followed
    obs(env, "bash", command="rm -rf --no-preserve-root / 2>/dev/null", timeout=20000)
    assert canary.read_text() == "host file\n" and os.path.exists("/usr/bin/git")
    assert obs(env, "read", file_path="/app/repo/calc.py") == "<tool_use_error>File does not exist.</tool_use_error>"
    assert obs(env, "bash", command="echo alive; pwd; ls -A /app | wc -l") == "alive\n/app\n0"


@needs_sandbox
def test_a_fork_bomb_ends_with_its_call(env):
    obs(env, "bash", command=":(){ :|:& };:", timeout=2000)  # the controller kills the call's process group
    alive = obs(env, "bash", command="echo alive; ps -e --no-headers | wc -l")
    assert alive.split("\n")[0] == "alive" and int(alive.split("\n")[1]) < 10


@needs_sandbox
def test_no_job_outlives_its_call_not_even_in_a_session_of_its_own(env):
    obs(env, "bash", command="setsid sleep 300 & nohup setsid bash -c 'sleep 301' >/dev/null 2>&1 & echo started")
    assert obs(env, "bash", command="pgrep -c sleep || true") == "0"


@needs_sandbox
def test_a_catastrophic_pattern_is_stopped_at_the_time_limit(env):
    obs(env, "write", file_path="/app/repo/a.txt", content="a" * 40 + "b\n")
    t0 = time.monotonic()
    assert obs(env, "grep", pattern="(a+)+$", output_mode="content") == \
        "<tool_use_error>Search stopped after 5 seconds. Use a more specific path or pattern.</tool_use_error>"
    assert time.monotonic() - t0 < 8
    assert obs(env, "bash", command="echo alive") == "alive"   # the episode goes on


@needs_sandbox
def test_searches_stay_in_the_repository(env):
    outside = "<tool_use_error>Path / is outside the allowed directory /app.</tool_use_error>"
    obs(env, "bash", command="ln -s / root && ln -s /app/repo loop && mkdir -p pkg/sub && touch pkg/sub/m.py")
    t0 = time.monotonic()
    assert obs(env, "glob", pattern="/**/x") == outside
    assert obs(env, "glob", pattern="../../**/x") == outside
    assert obs(env, "glob", pattern="/usr/*") == outside.replace("Path /", "Path /usr")
    assert obs(env, "glob", pattern="*/../../**/x") == \
        "<tool_use_error>'..' may only come before the first wildcard of a pattern: */../../**/x</tool_use_error>"
    py = ["/app/repo/calc.py", "/app/repo/pkg/sub/m.py", "/app/repo/test_calc.py"]
    assert sorted(obs(env, "glob", pattern="**/*.py").splitlines()) == py  # neither link is followed
    assert sorted(obs(env, "glob", pattern="/app/repo/**/*.py").splitlines()) == py
    assert obs(env, "glob", pattern="../repo/pkg/*/*.py") == "/app/repo/pkg/sub/m.py"
    assert obs(env, "glob", pattern="*.py", path="loop/pkg/sub") == "/app/repo/loop/pkg/sub/m.py"  # named: followed
    assert obs(env, "glob", pattern=".git*") == "/app/repo/.gitignore"  # hidden names when the pattern asks
    assert obs(env, "grep", pattern="root:x") == "No files found"
    assert time.monotonic() - t0 < 5


@needs_sandbox
def test_searches_are_bounded(monkeypatch):
    import lwm.domains.swe.env as swe_env

    monkeypatch.setattr(swe_env, "WALK_MAX_ENTRIES", 50)
    with SweEnv() as env:
        env.reset(Task("t", files=_files(CALC), setup=GIT_INIT_SETUP))
        obs(env, "bash", command="mkdir many && touch many/f{1..60}.py")
        stopped = ("<tool_use_error>Search stopped after visiting 50 files and directories. "
                   "Use a more specific path or pattern.</tool_use_error>")
        assert obs(env, "glob", pattern="**/*.py") == stopped
        assert obs(env, "grep", pattern="def") == stopped
        assert obs(env, "glob", pattern="*.py") == "/app/repo/calc.py\n/app/repo/test_calc.py"  # a small walk
    monkeypatch.setattr(swe_env, "WALK_MAX_SECONDS", 0.0)
    with SweEnv() as env:
        env.reset(Task("t", files=_files(CALC), setup=GIT_INIT_SETUP))
        assert obs(env, "glob", pattern="**/*.py") == \
            "<tool_use_error>Search stopped after 0 seconds. Use a more specific path or pattern.</tool_use_error>"
        assert obs(env, "read", file_path="calc.py", limit=1) == '     1\t"""Arithmetic helpers."""'  # usable


@needs_sandbox
def test_snapshot_and_restore_bring_back_files_and_git_state(env):
    obs(env, "bash", command="cd /app/repo && mkdir -p d && cd d")
    snap = env.snapshot()
    obs(env, "bash", command="cd /app/repo && git commit -q --allow-empty -m later && rm calc.py")
    obs(env, "write", file_path="/app/repo/extra.txt", content="x\n")
    assert obs(env, "bash", command="git log --oneline | wc -l") == "2"
    env.restore(snap)
    assert obs(env, "bash", command="pwd && git log --format=%s && git status --short | wc -l") == \
        "/app/repo/d\nInitial commit\n0"
    assert obs(env, "glob", pattern="**/extra.txt", path="/app") == "No files found"
    assert obs(env, "read", file_path="/app/repo/calc.py", limit=1) == '     1\t"""Arithmetic helpers."""'


@needs_sandbox
def test_verifier_and_closed_environment():
    ep = next(e for e in SCRIPTS if e.task.name == "fix-calc-add")
    with SweEnv() as env:
        env.reset(ep.task)
        assert env.verify() == 0.0
        env.step(call("edit", file_path="calc.py", old_string="a - b", new_string="a + b"))
        assert env.verify() == 1.0
    with pytest.raises(EnvironmentClosedError):
        env.step(sh("ls"))
    env.close()  # idempotent


@needs_sandbox
def test_collect_plays_the_suite(tmp_path):
    res = C.collect(C.CollectConfig(domain="swe", out=tmp_path, episodes=2, workers=2), show_progress=False)
    eps = domains.get("swe").scripts()[:2]
    rows = list(read_rows(res.rows_path))
    assert len(rows) == sum(len(e.actions) for e in eps) and res.trajectories == 4 and not res.failed
    trajs = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    rewards = {t["metadata"]["episode"]: t["reward"] for t in trajs}
    assert rewards == {"fix-calc-add": 1.0, "fix-calc-wrong-file": 0.0}
    assert "FAILED (failures=1)" in rows[0].response[-1]
