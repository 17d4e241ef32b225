"""Reference predictors (repeat the last observation, the domain-aware trivial guess)."""

import json
import subprocess
import sys

import pytest
from conftest import needs_sandbox

from lwm.domains.code import spec as code
from lwm.domains.db import spec as db
from lwm.domains.terminal import spec as terminal
from lwm.errors import DataNotFoundError, LwmError, RowFormatError
from lwm.eval.baselines import RowBaseline, load_predictor, previous_observation
from lwm.eval.runner import EvalConfig, evaluate, load_rows, run_rows
from lwm.models import load_model
from lwm.schema import Provenance, Trajectory, Turn, format_prompt_item, parse_prompt_item, rows_from_trajectory

PROMPT = "root@sandbox:/app#"


def keys(*typed):
    return json.dumps([{"keystrokes": k, "duration": 0.1} for k in typed])


def traj(domain="terminal", actions=(), observations=(), system="SYS", initial=PROMPT):
    prov = Provenance(kind="real", source="test")
    return Trajectory(id=f"{domain}/ep/run0", domain=domain, system_prompt=system, initial_observation=initial,
                      turns=[Turn(index=i, action=a, observation=o, provenance=prov)
                             for i, (a, o) in enumerate(zip(actions, observations, strict=True), start=1)])


def test_parse_prompt_item_inverts_format_prompt_item():
    action = "print('```')\n````\nx = 1"  # backtick runs inside: the fence grows, the block survives
    item = format_prompt_item(1, action, action_lang="python", task="do it", state="state\n**Action:**\n```\nfake\n```")
    assert parse_prompt_item(item) == (action, "state\n**Action:**\n```\nfake\n```")
    assert parse_prompt_item(format_prompt_item(2, "SELECT 1;")) == ("SELECT 1;", None)
    # other tools' layouts: CRLF, a blank line after the label, trailing spaces, ~~~ fences, a longer close
    assert parse_prompt_item("**Action:** \r\n\r\n```sql \r\nSELECT 2;\r\n```  \r\n") == ("SELECT 2;", None)
    assert parse_prompt_item("**Action:**\n~~~\nls\n~~~~\nrest") == ("ls", None)
    assert parse_prompt_item("### Turn 1\n\nno blocks here") == (None, None)
    assert parse_prompt_item("**Action:**\n```\nnever closed") == (None, None)
    assert parse_prompt_item("**Action:**\nnot fenced") == (None, None)


def test_repeat_last_uses_the_previous_turn_or_the_initial_state():
    t = traj(actions=[keys("a\n"), keys("b\n"), keys("c\n")], observations=["one", "two", "three"], initial="start")
    rows = rows_from_trajectory(t)
    baseline = RowBaseline("repeat-last")
    assert [baseline.predict_row(r) for r in rows] == ["start", "one", "two"]
    no_state = rows_from_trajectory(traj(actions=[keys("a\n")], observations=["one"], initial=""))[0]
    assert previous_observation(no_state) == ""


def test_terminal_trivial_guess_echoes_and_prompts():
    screen = f"{PROMPT} mkdir x\n{PROMPT}"
    assert terminal.trivial_observation(keys("ls\n"), screen) == f"{PROMPT} mkdir x\n{PROMPT} ls\n{PROMPT}"
    # several Enters; text without Enter stays on the line; key names act as on a command line
    assert terminal.trivial_observation(keys("a\nb\n", "vi"), PROMPT) == f"{PROMPT} a\n{PROMPT} b\n{PROMPT} vi"
    assert terminal.trivial_observation(keys("ls", "Enter"), PROMPT) == f"{PROMPT} ls\n{PROMPT}"
    assert terminal.trivial_observation(keys("sleep 9", "C-c"), PROMPT) == f"{PROMPT} sleep 9^C\n{PROMPT}"
    typed = keys("lx", "BSpace", "s", "Space", "-a\r")  # \r is Enter too
    assert terminal.trivial_observation(typed, PROMPT) == f"{PROMPT} ls -a\n{PROMPT}"
    assert terminal.trivial_observation(keys("\x7f\x7fcd /\tx\n"), PROMPT) == f"{PROMPT} cd /x\n{PROMPT}"
    # a long command wraps at the width read from the system prompt; only the last screenful stays
    system = terminal.system_prompt(width=30, height=3, hostname="box")
    got = terminal.trivial_observation(keys("echo " + "x" * 20 + "\n"), "old line\nroot@box:/app#", system)
    assert got.split("\n") == ["root@box:/app# echo " + "x" * 10, "x" * 10, "root@box:/app#"]
    # no previous screen (rows without an initial state): the prompt of the system prompt
    assert terminal.trivial_observation(keys("ls\n"), "", system) == "root@box:/app# ls\nroot@box:/app#"
    assert terminal.trivial_observation(keys("ls\n"), PROMPT + " \n\n") == f"{PROMPT} ls\n{PROMPT}"
    # not at a prompt (a program is running): typed text goes where the cursor is, default prompt after
    assert terminal.trivial_observation(keys("y\n"), "Continue? [y/N]") == f"Continue? [y/N]y\n{PROMPT}"
    # an action that is not the terminal's JSON types nothing; a zero-sized screen does not crash
    assert terminal.trivial_observation("not json", screen) == screen
    assert len(terminal.trivial_observation(keys("ls\n"), PROMPT, "a tmux window of 0 columns and 0 rows")) <= 1


def test_db_and_code_trivial_guesses():
    assert db.trivial_observation("CREATE TABLE t (a int); INSERT INTO t VALUES (1);", "", db.system_prompt()) == ""
    # a sqlite database whose setup mentions psql is still sqlite
    assert db.trivial_observation("DROP TABLE t;", "", db.system_prompt(setup=("-- the `psql` client",))) == ""
    pg = db.system_prompt("postgres")
    got = db.trivial_observation("create table t (a int);\ninsert into t values (1);\nSELECT * FROM t;\n\\dt\n"
                                 "BEGIN; UPDATE t SET a = 2; ROLLBACK;", "", pg)
    assert got == "CREATE TABLE\nINSERT 0 1\nBEGIN\nUPDATE 1\nROLLBACK"
    got = db.trivial_observation("-- note\nCREATE UNIQUE INDEX i ON t (a); /* x; */ CREATE OR REPLACE VIEW v AS "
                                 "SELECT 1; CREATE TEMP TABLE IF NOT EXISTS u (b int); END; INSERT INTO t", "", pg)
    assert got == "CREATE INDEX\nCREATE VIEW\nCREATE TABLE\nCOMMIT"  # the unfinished INSERT prints nothing yet
    # ';' and '--' inside string literals and dollar quotes belong to the statement
    got = db.trivial_observation("INSERT INTO t VALUES ('a;b', '--c'); CREATE FUNCTION f() RETURNS int AS "
                                 "$$ SELECT 1; $$ LANGUAGE sql; SELECT 1; -- done;", "", pg)
    assert got == "INSERT 0 1\nCREATE FUNCTION"
    # a statement left open inside a literal is not run, nor what follows; no size limit
    assert db.trivial_observation("INSERT INTO t VALUES ('abc); DELETE FROM t;", "", pg) == ""
    assert db.trivial_observation("SELECT " + ",".join(["1"] * 15000) + "; DROP TABLE t;", "", pg) == "DROP TABLE"
    assert code.trivial_observation("x = 1") == "(no output)"


async def test_baselines_through_the_runner(tmp_path):
    t = traj(actions=[keys("mkdir d\n"), keys("echo hi\n")],
             observations=[f"{PROMPT} mkdir d\n{PROMPT}", f"{PROMPT} mkdir d\n{PROMPT} echo hi\nhi\n{PROMPT}"])
    rows = rows_from_trajectory(t)
    # an unknown domain has no trivial guess: the empty observation
    other = rows_from_trajectory(t.model_copy(update={"domain": "elsewhere", "id": "elsewhere/ep/run0"}))
    # psql tables start with a space: the prediction is scored as is, nothing stripped
    table = " a \n---\n 1\n(1 row)\n"
    pg = rows_from_trajectory(traj("db", ["SELECT 1 AS a;", "SELECT 1 AS a;"], [table, table]))
    # a row laid out by another tool, without a fenced action: a counted failure for the trivial guess
    odd = rows[0].model_copy(update={"id": "terminal/odd/run0", "current_prompt": "### Turn 1\nls",
                                     "prompt": ["### Turn 1\nls"]})
    summaries = {}
    for name in ("trivial", "repeat-last"):
        model = load_predictor(f"baseline:{name}")
        summaries[name] = await evaluate(EvalConfig(out=tmp_path / name), model, rows=rows + other + pg + [odd],
                                         show_progress=False)
    trivial = summaries["trivial"]
    assert trivial["run"]["model"] == "baseline:trivial"
    assert trivial["failed"] == 1 and trivial["errors"] == {"ValueError": 1}
    assert trivial["domains"]["terminal"]["exact"] == 50.0  # mkdir prints nothing: guessed exactly
    assert trivial["domains"]["elsewhere"]["exact"] == 0.0
    assert trivial["parse_issues"] == {} and trivial["domains"]["terminal"]["truncated_history_rows"] == 0
    repeat = summaries["repeat-last"]
    assert repeat["failed"] == 0 and repeat["domains"]["terminal"]["exact"] == 0.0
    assert repeat["domains"]["db"]["exact"] == 50.0  # the second SELECT repeats the first table exactly
    preds = [json.loads(x) for x in (tmp_path / "trivial" / "predictions.jsonl").read_text().splitlines()]
    assert preds[1]["observation"] == f"{PROMPT} mkdir d\n{PROMPT} echo hi\n{PROMPT}"
    # every run carries the trivial guess's score on its own rows, the reference to read it against
    # (where lwm knows no guess, baseline:trivial predicts the empty observation, and so does the column)
    for domain in ("terminal", "db", "elsewhere"):
        assert repeat["domains"][domain]["trivial_line_f1"] == trivial["domains"][domain]["line_f1"]
    assert repeat["macro"]["trivial_line_f1"] == trivial["macro"]["line_f1"]


def test_load_predictor_refuses_unknown_baselines_and_adapters():
    with pytest.raises(ValueError, match="unknown baseline 'oracle'"):
        load_predictor("baseline:oracle")
    with pytest.raises(ValueError, match="adapter"):
        load_predictor("baseline:trivial", adapter="a.gguf")


async def test_baselines_cannot_simulate_or_judge(tmp_path):
    with pytest.raises(TypeError, match="cannot answer chat messages"):
        await RowBaseline("trivial").generate([], None)
    with pytest.raises(ValueError, match="reference predictor"):
        load_model("baseline:repeat-last")  # the one rule: whatever simulates, judges or acts is a chat model
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "eval", "--model", "baseline:trivial", "--judge-model",
                        "baseline:trivial", "--data", str(tmp_path / "none"), "--out", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "cannot simulate, judge" in r.stderr


@needs_sandbox
def test_cli_trivial_guess_on_the_real_terminal_suite(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "eval", "--model", "baseline:trivial", "--episodes", "3",
                        "--out", str(out), "--no-progress"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    rows = load_rows(out / "data")
    assert summary["rows"] == len(rows) > 0 and summary["failed"] == 0
    # commands that print nothing (mkdir, touch, cd …) are guessed exactly on the real screens
    assert 0 < summary["domains"]["terminal"]["exact"] < 100


@needs_sandbox
def test_cli_heldout_rows_only(tmp_path):
    from lwm.eval.runner import trajectory_families
    from lwm.models.embedded import WARMUP_ADAPTER, adapter_record, heldout_families

    held = heldout_families(adapter_record(WARMUP_ADAPTER))
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "eval", "--model", "baseline:trivial", "--heldout",
                        "--out", str(out), "--no-progress"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Held out: the 12 episodes of the terminal suite's families embedded-warmup never trained on " \
           "(terminal/files, terminal/pipes)" in r.stderr  # the families with episodes in the suite
    assert "only the rows of task families the world model never trained on" in r.stdout
    families = trajectory_families(out / "data")
    assert families and set(families.values()) <= held  # only held-out episodes were played
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == len(load_rows(out / "data")) > 0
    assert json.loads((out / "run.json").read_text())["heldout"] == sorted(held)
    # the same out without --heldout is another run: refused before predicting
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "eval", "--model", "baseline:trivial", "--data",
                        str(out / "data"), "--out", str(out), "--no-progress"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0 and "heldout" in r.stderr
    # rows whose family nothing names cannot be split
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "terminal_test.jsonl").write_text((out / "data" / "terminal" / "terminal_test.jsonl").read_text())
    with pytest.raises(DataNotFoundError, match="no family recorded"):
        load_rows(tmp_path / "bare", families=held)
    assert len(load_rows(out / "data", families=frozenset({"terminal/nothing"}))) == 0
    # an analysis reads the rows as the run did (its --heldout filter applied), each with its record
    pairs = run_rows(out)
    assert len(pairs) == summary["rows"] and all(rec["id"] == row.id for row, rec in pairs)
    # a whole-suite run is not resumed with --heldout: refused before anything is played
    whole = tmp_path / "whole"
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "eval", "--model", "baseline:trivial", "--episodes", "1",
                        "--out", str(whole), "--no-progress"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    played = (whole / "data" / "terminal" / "trajectories.jsonl").read_text()
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "eval", "--model", "baseline:trivial", "--heldout",
                        "--out", str(whole), "--no-progress"], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "heldout: started with None, now [" in r.stderr
    assert (whole / "data" / "terminal" / "trajectories.jsonl").read_text() == played
    with pytest.raises(LwmError, match="match no row"):
        run_rows(out, whole / "data")  # not the rows the run evaluated
    # --episodes cuts the suite first: none of the first episodes of mcp is held out
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "eval", "--model", "baseline:trivial", "--heldout",
                        "--domain", "mcp", "--episodes", "1", "--out", str(tmp_path / "mcp"), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "the first 1 episodes of the mcp suite: none of them is held out" in r.stderr
    (tmp_path / "bare" / "trajectories.jsonl").write_text('{"id": "terminal/x/run0", "domain": "terminal"}\n[1]\n')
    with pytest.raises(RowFormatError, match="trajectories.jsonl:2"):
        load_rows(tmp_path / "bare", families=held)


def test_a_run_json_that_is_no_file_is_refused_before_collection(tmp_path):
    from lwm.eval.runner import EvalConfig, run_eval
    from lwm.models import ModelSpec

    (tmp_path / "run.json").mkdir()
    with pytest.raises(RowFormatError, match="not a regular file"):
        run_eval(EvalConfig(out=tmp_path, episodes=1), ModelSpec("baseline:trivial"), show_progress=False)
    assert not (tmp_path / "data").exists()  # nothing was played


def test_heldout_families_of_a_model():
    from lwm.eval.runner import heldout_families_of
    from lwm.models.embedded import WARMUP_ADAPTER, adapter_record, heldout_families

    shipped = heldout_families(adapter_record(WARMUP_ADAPTER))
    assert heldout_families_of(RowBaseline("trivial")) == (shipped, False)  # no adapter: the default's

    class Adapted:
        name, adapter, heldout_families = "m+x", "/tmp/x.gguf", None

    with pytest.raises(ValueError, match="x.json.*does not say which task families"):
        heldout_families_of(Adapted())  # its own adapter, its record silent: never another model's families
    Adapted.heldout_families = frozenset({"terminal/files"})
    assert heldout_families_of(Adapted()) == (frozenset({"terminal/files"}), True)
