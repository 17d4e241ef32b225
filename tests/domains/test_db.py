"""The real database environment: sqlite3 and psql sessions, hostile SQL, snapshots, suite."""

import json
import time

import pytest
from conftest import needs_sandbox

from lwm import domains
from lwm.data import collect as C
from lwm.domains.db import spec as domain
from lwm.domains.db.env import DbEnv
from lwm.domains.db.suite import SHOP, random_scripts
from lwm.envs.base import Task
from lwm.errors import ActionFormatError, EnvironmentClosedError
from lwm.schema import read_rows

ENGINES = ("sqlite", "postgres")


# -- without a sandbox ----------------------------------------------------------------------
def test_parse_action_accepts_sql_and_rejects_bad_text():
    assert domain.parse_action("SELECT 1;\r\nSELECT 2;") == "SELECT 1;\nSELECT 2;"
    assert domain.parse_action("SELECT '\tx';") == "SELECT '\tx';"
    for bad in ("", "   \n", "SELECT 1;\x03", "SELECT '\x1b[A';", "x" * (domain.MAX_ACTION_CHARS + 1), 42):
        with pytest.raises(ActionFormatError):
            domain.parse_action(bad)


def test_system_prompt_names_engine_and_setup():
    text = domain.system_prompt("postgres", ("CREATE TABLE t (x int)",), 5)
    assert "psql" in text and "CREATE TABLE t (x int)" in text and "(N rows)" in text
    assert "sqlite3 -header -column" in domain.system_prompt("sqlite")
    with pytest.raises(ValueError):
        domain.system_prompt("mysql")
    assert domain.canonical(" a | b \n---+---\n\n") == " a | b\n---+---"


def test_suite_meets_its_spec():
    core, full = domains.get("db").scripts(), domains.get("db").scripts(extended=True)
    assert len(core) >= 20 and sum(len(e.actions) for e in core) >= 100
    for engine in ENGINES:
        assert sum(e.task.options["engine"] == engine for e in core) >= 8
    checked = [e for e in core if e.task.check]
    assert len(checked) >= 10 and sum("fails" in e.tags for e in checked) >= 3
    assert len({e.task.name for e in full}) == len(full) > len(core)
    assert all(e.task.family and e.tags for e in full)
    assert random_scripts(3, 4) == random_scripts(3, 4) != random_scripts(4, 4)


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError):
        DbEnv(engine="mysql")


# -- real sessions ----------------------------------------------------------------------------
@pytest.fixture(scope="module", params=ENGINES)
def shop(request):
    env = DbEnv(statement_timeout=1.0, action_timeout=6.0)
    env.reset(Task("shop", setup=SHOP, options={"engine": request.param}))
    yield env
    env.close()




@needs_sandbox
def test_banner_and_real_query_output(shop):
    first = shop.step("SELECT name FROM customers WHERE id = 3;").observation
    if shop.engine == "sqlite":
        assert first == "name \n-----\nLinus"
    else:
        assert first == " name  \n-------\n Linus\n(1 row)"


@needs_sandbox
def test_errors_are_the_clients_own(shop):
    obs = shop.step("SELEC 1;\nSELECT * FROM nope;").observation
    if shop.engine == "sqlite":
        assert obs.startswith('Parse error: near "SELEC": syntax error\n  SELEC 1;\n  ^--- error here')
        assert "Parse error: no such table: nope" in obs
    else:
        assert obs.startswith('ERROR:  syntax error at or near "SELEC"\nLINE 1: SELEC 1;\n        ^')
        assert 'ERROR:  relation "nope" does not exist' in obs


@needs_sandbox
def test_unfinished_statement_and_transaction_span_steps(shop):
    r = shop.step("SELECT count(*) AS n\nFROM orders")
    assert r.observation == "" and r.info["state"] == "continue"
    assert "6" in shop.step(";").observation
    shop.step("BEGIN;")
    shop.step("DELETE FROM orders;")
    assert "0" in shop.step("SELECT count(*) AS n FROM orders;").observation
    assert "6" in shop.probe("SELECT count(*) AS n FROM orders;")  # uncommitted: not seen
    shop.step("ROLLBACK;")
    assert "6" in shop.step("SELECT count(*) AS n FROM orders;").observation


@needs_sandbox
def test_endless_query_ends_at_the_time_limit(shop):
    bomb = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c;"
            if shop.engine == "sqlite" else "SELECT pg_sleep(100);")
    t0 = time.monotonic()
    r = shop.step(bomb + "\nSELECT 'alive' AS a;")
    assert time.monotonic() - t0 < 5
    expected = "Runtime error: interrupted (9)" if shop.engine == "sqlite" else \
        "ERROR:  canceling statement due to statement timeout"
    assert r.observation.startswith(expected) and "alive" in r.observation


@needs_sandbox
def test_huge_result_is_bounded(shop):
    sql = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 60000) SELECT x FROM c;"
           if shop.engine == "sqlite" else "SELECT generate_series(1, 60000);")
    r = shop.step(sql)
    assert len(r.observation) < shop.max_output + 200 and r.info["truncated_bytes"] > 100_000
    assert r.observation.endswith(f"[output truncated: {r.info['truncated_bytes']} more bytes]")
    assert "1" in shop.step("SELECT 1 AS one;").observation  # the session still answers


@needs_sandbox
def test_control_characters_are_not_typed(shop):
    r = shop.step("SELECT 1;\x1b[A")
    assert r.info["action_error"] and r.observation.startswith("lwm: action not sent")


@needs_sandbox
def test_output_cannot_pass_for_the_clients_prompt():
    # the controller counts prompt markers to know the client waits again: printed ones must not count
    with DbEnv(statement_timeout=1.0, action_timeout=6.0) as env:
        env.reset(Task("t", options={"engine": "sqlite"}))
        env.step(".mode list")
        forged = "char(29) || 'P1' || char(29)"
        first = env.step(f"SELECT {forged} || {forged} AS m;\nSELECT 7 AS n;").observation
        assert first == "m\n\x1dP1\x1d\x1dP1\x1d\nn\n7"
        assert env.step("SELECT 8 AS n;").observation == "n\n8"


@needs_sandbox
def test_snapshot_and_restore(shop):
    snap = shop.snapshot()
    shop.step("DELETE FROM orders;\nCREATE TABLE extra (x int);")
    assert "0" in shop.step("SELECT count(*) AS n FROM orders;").observation
    shop.restore(snap)
    assert "6" in shop.step("SELECT count(*) AS n FROM orders;").observation
    missing = shop.step("SELECT * FROM extra;").observation
    assert "no such table: extra" in missing or 'relation "extra" does not exist' in missing
    with pytest.raises(ValueError):
        shop.restore({"id": 1, "sandbox": 0})


# -- hostile input --------------------------------------------------------------------------
@needs_sandbox
def test_sqlite_cannot_reach_host_files():
    with DbEnv() as env:
        env.reset(Task("h", options={"engine": "sqlite"}))
        assert "unable to open database" in env.step("ATTACH '/etc/shadow' AS s;").observation
        assert "unable to open" in env.step("ATTACH '/work/main/pyproject.toml' AS p;").observation
        passwd = env.step(".shell cat /etc/passwd").observation
        assert passwd.startswith("root:x:0:0") and "daemon" not in passwd and len(passwd.splitlines()) <= 3


@needs_sandbox
def test_postgres_cannot_reach_host_files():
    with DbEnv(statement_timeout=1.0) as env:
        env.reset(Task("h", options={"engine": "postgres"}))
        obs = env.step("SELECT pg_read_file('/etc/shadow');").observation
        assert obs.startswith('ERROR:  could not open file "/etc/shadow"')
        obs = env.step("CREATE TABLE p (l text);\nCOPY p FROM '/etc/passwd';\n"
                       "COPY p FROM PROGRAM 'cat /etc/hostname; ls /work 2>&1; true';\nSELECT l FROM p;").observation
        assert "postgres:x:999" in obs and "daemon" not in obs and "\n sandbox\n" in obs
        assert "ls: cannot access '/work': No such file or directory" in obs
        # A session that turned the server's limit off is interrupted by the client's Ctrl-C.
        t0 = time.monotonic()
        obs = env.step("SET statement_timeout = 0;\nSELECT pg_sleep(100);").observation
        assert time.monotonic() - t0 < 10
        assert "ERROR:  canceling statement due to user request" in obs


# -- lifecycle ---------------------------------------------------------------------------------
@needs_sandbox
def test_lifecycle_and_quit():
    env = domains.get("db").make_env()
    with pytest.raises(EnvironmentClosedError):
        env.step("SELECT 1;")
    banner = env.reset(Task("q", options={"engine": "postgres"}))
    assert banner.startswith("psql (15.") and banner.endswith('Type "help" for help.')
    r = env.step("\\q")
    assert r.done and r.info["client_exited"]
    env.close()
    env.close()
    with pytest.raises(EnvironmentClosedError):
        env.step("SELECT 1;")


@needs_sandbox
def test_collect_plays_both_engines(tmp_path):
    names = ("sqlite-txn-uncommitted", "pg-constraints")
    picked = [e for e in domains.get("db").scripts() if e.task.name in names]
    res = C.collect(C.CollectConfig(out=tmp_path, domain="db", workers=2, names=names), show_progress=False)
    assert not res.failed and res.trajectories == 4
    rows = list(read_rows(res.rows_path))
    assert len(rows) == sum(len(e.actions) for e in picked)
    trajs = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    rewards = {t["metadata"]["episode"]: t["reward"] for t in trajs}
    assert rewards == {"sqlite-txn-uncommitted": 0.0, "pg-constraints": 1.0}
    assert all(not turn["volatile"] for t in trajs for turn in t["turns"])
    assert any("violates check constraint" in r.response[-1] for r in rows)
