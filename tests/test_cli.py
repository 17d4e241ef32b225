"""The `lwm` command: wiring of flags, clear errors and exit codes."""

import json
import subprocess
import sys

from servers import vllm_style_server
from test_eval_runner import make_data


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
    r = lwm("collect", "--domain", "android", "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and "android" in r.stderr
