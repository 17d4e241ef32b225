"""The real Python interpreter environment: cells, tracebacks, limits, containment,
snapshot/restore, its suite and one collection."""

import json
import time

import pytest
from conftest import needs_sandbox

from lwm import domains
from lwm.data import collect as C
from lwm.domains.code import spec as D
from lwm.domains.code.env import CodeEnv
from lwm.domains.code.suite import random_scripts
from lwm.envs.base import Task
from lwm.errors import ActionFormatError, EnvironmentClosedError, SandboxError
from lwm.schema import read_rows


@pytest.fixture
def env():
    e = CodeEnv(cell_timeout=1.0, grace=1.0)
    e.reset(Task("t", files={"/app/data.txt": "alpha\nbeta\n"}))
    yield e
    e.close()


def obs(env, cell: str) -> str:
    return env.step(cell).observation


# -- the domain module (no sandbox) -------------------------------------------------------
def test_parse_action_bounds():
    assert D.parse_action("x = 1") == "x = 1"
    assert D.parse_action("") == ""
    with pytest.raises(ActionFormatError, match="not int"):
        D.parse_action(42)
    with pytest.raises(ActionFormatError, match="at most"):
        D.parse_action("x" * (D.MAX_CELL_CHARS + 1))
    with pytest.raises(ActionFormatError, match="UTF-8"):
        D.parse_action("s = '\ud800'")


def test_format_observation_blocks_in_order():
    reply = {"n": 3, "status": "error", "stdout": "hi\n", "stdout_total": 3, "stderr": "", "stderr_total": 0,
             "value": None, "error": "Traceback ...\nValueError: x"}
    assert D.format_observation(reply, 10) == "[stdout]\nhi\n[error]\nTraceback ...\nValueError: x"
    assert D.format_observation({"n": 1, "status": "ok", "value": "42"}, 10) == "Out[1]: 42"
    assert D.format_observation({"n": 1, "status": "ok"}, 10) == "(no output)"
    cut = D.format_observation({"n": 1, "status": "ok", "stdout": "abcd", "stdout_total": 10}, 10, limit=4)
    assert cut == "[stdout]\nabcd\n[... truncated: showing 4 of 10 characters]"
    died = D.format_observation({"n": 2, "status": "died", "exit": -9}, 10)
    assert "killed by signal 9 (SIGKILL)" in died and "all variables are lost" in died
    assert D.canonical("Out[1]: <object object at 0x7f12ab>  \n") == "Out[1]: <object object at 0x?>"


def test_suite_meets_its_spec():
    core, full = domains.get("code").scripts(), domains.get("code").scripts(extended=True)
    assert len(core) >= 20 and sum(len(e.actions) for e in core) >= 100
    checked = [e for e in core if e.task.check is not None]
    assert len(checked) >= 10
    assert len({e.task.name for e in full}) == len(full) > len(core)
    assert all(e.task.family and e.tags for e in full)
    assert random_scripts(7, 3) == random_scripts(7, 3) != random_scripts(8, 3)
    families = {e.task.family for e in core}
    assert families >= {"state", "stdlib", "errors", "output", "files", "limits", "tasks", "random"}


# -- the real interpreter -------------------------------------------------------------------
@needs_sandbox
def test_state_values_and_numbering(env):
    assert obs(env, "x = 6 * 7") == "(no output)"
    assert obs(env, "x") == "Out[2]: 42"
    assert obs(env, "print('a'); x + 1") == "[stdout]\na\nOut[3]: 43"
    assert obs(env, "_ * 2") == "Out[4]: 86"
    assert obs(env, "def f(n):\n    return n * x\nf(2)") == "Out[5]: 84"
    assert obs(env, "class P:\n    def __repr__(self):\n        return 'P!'\nP()") == "Out[6]: P!"
    assert obs(env, "import sys\nprint('err', file=sys.stderr)") == "[stderr]\nerr"
    assert obs(env, "open('data.txt').read().split()") == "Out[8]: ['alpha', 'beta']"
    assert obs(env, "s = 'naïve ✓ 🐍'\nprint(s, len(s))") == "[stdout]\nnaïve ✓ 🐍 9"


@needs_sandbox
def test_setup_cells_run_unnumbered():
    with CodeEnv() as e:
        assert e.reset(Task("t", setup=("base = 40", "def plus2(v):\n    return v + 2"))) == "(no output)"
        assert obs(e, "plus2(base)") == "Out[1]: 42"
        with pytest.raises(SandboxError, match="setup cell failed"):
            e.reset(Task("t", setup=("1/0",)))


@needs_sandbox
def test_tracebacks_are_cpythons(env):
    env.step("def inner(v):\n    return 10 / v")
    assert obs(env, "inner(0)") == (
        "[error]\nTraceback (most recent call last):\n"
        '  File "<cell 2>", line 1, in <module>\n    inner(0)\n'
        '  File "<cell 1>", line 2, in inner\n    return 10 / v\n           ~~~^~~\n'
        "ZeroDivisionError: division by zero")
    assert obs(env, "x = (1, 2") == (
        '[error]\n  File "<cell 3>", line 1\n    x = (1, 2\n        ^\nSyntaxError: \'(\' was never closed')
    r = env.step("input('name? ')")
    assert r.observation.endswith("EOFError: EOF when reading a line") and r.info["status"] == "error"
    assert obs(env, "y = 5\nimport sys; sys.exit(3)").endswith("SystemExit: 3")
    assert obs(env, "y") == "Out[6]: 5"  # SystemExit keeps the interpreter
    assert obs(env, "exit()").endswith("SystemExit: None")
    assert obs(env, "input()").endswith("EOFError: EOF when reading a line")  # stdin reopened


@needs_sandbox
def test_large_output_is_cut(env):
    out = obs(env, "for i in range(3000):\n    print(i)")
    assert out.startswith("[stdout]\n0\n1\n") and out.endswith("[... truncated: showing 4000 of 13890 characters]")
    out = obs(env, "'x' * 10000")
    assert len(out) < 4100 and out.endswith("[... truncated: showing 4000 of 10002 characters]")


@needs_sandbox
def test_endless_loop_is_interrupted_and_state_kept(env):
    env.step("total = 0")
    t0 = time.monotonic()
    r = env.step("while True:\n    total += 1")
    assert time.monotonic() - t0 < 3
    assert r.info["status"] == "interrupted"
    assert "KeyboardInterrupt" in r.observation and r.observation.endswith("variables are kept")
    assert obs(env, "total > 0") == "Out[3]: True"


@needs_sandbox
def test_ignored_interrupt_restarts_the_interpreter(env):
    env.step("keep = 1\nopen('kept.txt', 'w').write('yes')")
    t0 = time.monotonic()
    r = env.step("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass")
    assert time.monotonic() - t0 < 5 and r.info["status"] == "restarted"
    assert "all variables are lost" in r.observation
    assert obs(env, "keep").endswith("NameError: name 'keep' is not defined")
    assert obs(env, "open('kept.txt').read()") == "Out[2]: 'yes'"  # numbering restarted, files kept


@needs_sandbox
def test_crash_restarts_the_interpreter(env):
    r = env.step("import os\nos._exit(4)")
    assert r.info["status"] == "died" and "exit code 4" in r.observation
    assert obs(env, "1 + 1") == "Out[1]: 2"


@needs_sandbox
def test_hostile_cells_are_contained(env):
    assert obs(env, "open('/etc/shadow')").endswith("No such file or directory: '/etc/shadow'")
    assert obs(env, "import os\nsorted(os.listdir('/root')), os.path.exists('/home'), os.path.exists('/work')") \
        == "Out[2]: ([], False, False)"
    assert obs(env, "import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('1.1.1.1', 80))").endswith(
        "OSError: [Errno 101] Network is unreachable")
    assert obs(env, "b = bytearray(8 * 1024 ** 3)").endswith("MemoryError")
    t0 = time.monotonic()
    r = env.step("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass")
    assert time.monotonic() - t0 < 5 and r.info["status"] in ("interrupted", "restarted")
    assert obs(env, "print('alive')").startswith("[stdout]\nalive")


@needs_sandbox
def test_processes_show_no_host_path():
    from conftest import SHOW_PROCESSES, host_paths_in

    with CodeEnv(output_limit=1 << 20) as env:
        env.reset(Task("t"))
        seen = obs(env, f"import subprocess\nprint(subprocess.run(['bash', '-c', {SHOW_PROCESSES!r}], "
                        "capture_output=True, text=True).stdout)")
        assert "/run/lwm/ctl.py --worker" in seen and "HOME=/root" in seen  # ps and the environments
        assert host_paths_in(seen, env._sandbox) == []


@needs_sandbox
def test_killing_the_controller_is_a_sandbox_error(env):
    t0 = time.monotonic()
    with pytest.raises(SandboxError, match="controller"):
        env.step("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
    assert time.monotonic() - t0 < 5
    with pytest.raises(EnvironmentClosedError):
        env.step("1")


@needs_sandbox
def test_snapshot_restore_brings_back_variables_and_files(env):
    env.step("import os\nitems = [1, 2]\nos.makedirs('d', exist_ok=True)\nopen('d/f.txt', 'w').write('one')")
    snap = env.snapshot()
    assert len(snap.cells) == 1 and ("/app/d/f.txt", "file", b"one") in snap.files
    env.step("items.append(3)\nopen('d/f.txt', 'w').write('two')\nos.remove('data.txt')\nextra = 1")
    assert obs(env, "items, open('d/f.txt').read()") == "Out[3]: ([1, 2, 3], 'two')"
    env.restore(snap)
    assert obs(env, "items, open('d/f.txt').read(), sorted(os.listdir('.')), 'extra' in globals()") == \
        "Out[2]: ([1, 2], 'one', ['d', 'data.txt'], False)"


@needs_sandbox
def test_bad_actions_and_lifecycle():
    e = CodeEnv()
    with pytest.raises(EnvironmentClosedError):
        e.step("1")
    e.reset()
    with pytest.raises(ActionFormatError):
        e.step("x" * (D.MAX_CELL_CHARS + 1))
    big = "x = 0\n" + "x += 1\n" * 9000 + "x"
    assert e.step(big).observation == "Out[1]: 9000"  # a 63 KB cell passes the pipe
    deep = "x = " + "1 + " * 15000 + "1"
    assert e.step(deep).observation.endswith("RecursionError: maximum recursion depth exceeded during ast construction")
    sandbox_procs = list(e._sandbox._procs)
    e.close()
    e.close()
    assert all(p.poll() is not None for p in sandbox_procs)
    assert isinstance(domains.get("code").make_env(), CodeEnv)


@needs_sandbox
def test_verify_runs_the_probe_cell():
    suite = {e.task.name: e for e in domains.get("code").scripts()}
    for name, reward in (("tasks-primes", 1.0), ("tasks-primes-off-by-one", 0.0)):
        ep = suite[name]
        with CodeEnv() as e:
            e.reset(ep.task)
            for a in ep.actions:
                e.step(a)
            assert e.verify() == reward


@needs_sandbox
def test_collect_two_episodes(tmp_path):
    names = ["tasks-primes", "tasks-log-errors-unsaved", "limits-endless-loop"]
    suite = [e for e in domains.get("code").scripts() if e.task.name in names]
    res = C.collect(C.CollectConfig(out=tmp_path, domain="code", workers=3, names=tuple(names)), show_progress=False)
    assert res.trajectories == 6 and not res.failed
    rows = list(read_rows(res.rows_path))
    assert len(rows) == sum(len(e.actions) for e in suite)
    trajs = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    rewards = {t["metadata"]["episode"]: t["reward"] for t in trajs}
    assert rewards == {"tasks-primes": 1.0, "tasks-log-errors-unsaved": 0.0, "limits-endless-loop": None}
    first = next(t for t in trajs if t["id"] == "code/tasks-primes/run0")
    assert first["turns"][2]["observation"] == "Out[3]: (15, 47)"
    assert first["turns"][0]["provenance"]["kind"] == "real"
