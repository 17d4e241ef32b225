"""The `lwm` command: wiring of flags, clear errors and exit codes."""

import json
import os
import subprocess
import sys

import pytest
from conftest import make_data
from servers import vllm_style_server


def lwm(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "lwm.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_help_lists_commands():
    r = lwm("--help")
    assert r.returncode == 0 and all(c in r.stdout for c in ("collect", "eval", "serve-model"))
    assert "--judge-mode" in lwm("eval", "--help").stdout


def test_eval_with_endpoint_and_judge_flags(tmp_path):
    data = make_data(tmp_path, episodes=1, turns=2)
    with vllm_style_server() as (base_url, log):
        r = lwm("eval", "--data", str(data), "--out", str(tmp_path / "run"), "--base-url", base_url,
                "--model", "served", "--judge-model", "judge", "--temperature", "0.6", "--max-tokens", "77",
                "--extra-body", '{"chat_template_kwargs": {"enable_thinking": true}}', "--no-progress")
    assert r.returncode == 0, r.stderr
    world = [b for b in log if b["model"] == "served"]
    judge = [b for b in log if b["model"] == "judge"]
    assert len(world) == 2 and world[0]["max_tokens"] == 77 and world[0]["temperature"] == 0.6
    assert world[0]["chat_template_kwargs"] == {"enable_thinking": True}
    assert len(judge) == 2 * 3  # the stand-in never answers in the rubric's format: 3 tries per row
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["domains"]["terminal"]["judge_failed"] == 2 and summary["failed"] == 0
    assert summary["domains"]["terminal"]["exact"] == 0.0 and summary["run"]["sampling"]["max_tokens"] == 77


def test_clear_errors(tmp_path):
    r = lwm("eval", "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "terminal_test.jsonl").write_text('{"task": "terminal"}\n{oops\n')
    r = lwm("eval", "--data", str(bad), "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and "terminal_test.jsonl:1" in r.stderr and "Traceback" not in r.stderr
    r = lwm("eval", "--judge-mode", "vibes", "--data", str(bad))
    assert r.returncode == 2 and "--judge-mode" in r.stderr
    r = lwm("eval", "--extra-body", "{not json", "--data", str(bad))
    assert r.returncode == 2 and "--extra-body" in r.stderr
    r = lwm("eval", "--extra-body", '{"top_k": 2}', "--data", str(bad))  # nothing to send it to
    assert r.returncode == 2 and "the in-process model takes none" in r.stderr
    r = lwm("collect", "--domain", "android", "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and "error: no bundled suite for domain 'android'" in r.stderr
    r = lwm("eval", "--data", str(bad), "--episodes", "2")
    assert r.returncode == 2 and "--limit" in r.stderr
    good = make_data(tmp_path, episodes=1, turns=1)
    r = lwm("eval", "--model", str(tmp_path / "missing.gguf"), "--data", str(good), "--out", str(tmp_path / "m"))
    assert r.returncode == 2 and "no model file at" in r.stderr and "Traceback" not in r.stderr


def test_every_row_failing_exits_nonzero(tmp_path):
    data = make_data(tmp_path, episodes=1, turns=2)
    r = lwm("eval", "--data", str(data), "--out", str(tmp_path / "run"), "--base-url", "http://127.0.0.1:9/v1",
            "--model", "x", "--timeout", "2", "--no-progress")
    assert r.returncode == 1 and "every row failed" in r.stderr


def test_eval_tables_piped_keep_their_heads_and_the_trivial_guess_is_read_on_the_same_rows(tmp_path):
    data = make_data(tmp_path, episodes=1, turns=2)
    rows = (data / "terminal_test.jsonl").read_text()
    (data / "quantum_test.jsonl").write_text(rows.replace('"task": "terminal"', '"task": "quantum"'))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "eval", "--data", str(data), "--out", str(tmp_path / "run"),
                        "--model", "baseline:trivial", "--no-progress"], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert "┃ line F1 ┃ trivial ┃" in r.stdout and "…" not in r.stdout  # not squeezed into 80 columns
    # a domain lwm does not know (quantum) has no guess: the trivial column scores the empty
    # observation there, as baseline:trivial itself predicts, so both columns cover the same rows
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    terminal, quantum = summary["domains"]["terminal"], summary["domains"]["quantum"]
    assert terminal["trivial_line_f1"] == terminal["line_f1"] > 0
    assert quantum["trivial_line_f1"] == quantum["line_f1"] == 0
    macro = summary["macro"]
    assert macro["line_f1"] == pytest.approx(terminal["line_f1"] / 2, abs=0.01)
    assert (f"line F1 {macro['line_f1']} against {macro['trivial_line_f1']} for the trivial guess "
            "(baseline:trivial, column 'trivial') on the same rows") in r.stdout


def test_the_trivial_sentence_names_the_domains_it_covers():
    """A domain whose rows have no readable action has no trivial score: the headline compares
    line F1 on the domains that do."""
    from rich.console import Console

    from lwm.eval.report import print_summary

    group = {"rows": 2, "line_f1": 60.0}
    summary = {"domains": {"terminal": {**group, "trivial_line_f1": 50.0}, "db": {**group, "line_f1": 20.0}},
               "depth": {}, "macro": {"line_f1": 40.0, "trivial_line_f1": 50.0}, "micro": {"line_f1": 40.0},
               "rows": 4, "failed": 0, "errors": {}, "parse_issues": {}}
    console = Console(record=True, width=200)
    print_summary(summary, console)
    assert ("line F1 60.0 against 50.0 for the trivial guess (baseline:trivial, column 'trivial') "
            "on the rows of terminal (1 of 2 domains have a guess)") in console.export_text()


def test_adapter_needs_a_local_model(tmp_path):
    data = make_data(tmp_path, episodes=1, turns=1)
    r = lwm("eval", "--data", str(data), "--out", str(tmp_path / "run"), "--base-url", "http://127.0.0.1:9/v1",
            "--model", "m", "--adapter", str(tmp_path / "a.gguf"), "--no-progress")
    assert r.returncode == 2 and "adapter applies to a local llama.cpp model" in r.stderr


def test_every_command_has_help():
    for cmd in (["collect"], ["import"], ["rollout"], ["wm2real"], ["setup"], ["serve", "env"], ["serve", "model"],
                ["serve", "mcp"], ["data", "build"], ["data", "annotate"], ["train", "sft"], ["train", "export"]):
        r = lwm(*cmd, "--help")
        assert r.returncode == 0 and "Usage" in r.stdout, cmd


def test_collect_exits_nonzero_with_the_reason_when_nothing_could_be_played(tmp_path):
    import os

    env = {**os.environ, "LWM_HOME": str(tmp_path / "empty-home")}  # no npm servers installed there
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "collect", "--domain", "fs", "--episodes", "1",
                        "--out", str(tmp_path / "out"), "--no-progress"], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 1 and "lwm setup" in r.stderr
