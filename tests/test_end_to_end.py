"""`lwm eval` end to end: real terminal, the embedded (warm-up) world model, from the CLI."""

import json
import subprocess
import sys

import pytest
from conftest import needs_sandbox


@needs_sandbox
@pytest.mark.slow
def test_cli_eval_three_turns_with_embedded_model(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "lwm.cli", "eval", "--episodes", "1", "--limit", "3", "--max-tokens", "48",
           "--out", str(out), "--no-progress"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == 3 and summary["failed"] == 0
    assert summary["run"]["model"] == "SmolLM2-135M-Instruct-Q4_1+smollm2-135m-warmup"  # the default world model
    preds = [json.loads(l) for l in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["turn_idx"] for p in preds] == [1, 2, 3]
    assert all(0.0 <= p["fidelity"]["edit_similarity"] <= 1.0 for p in preds)
    trajs = [json.loads(l) for l in (out / "data" / "terminal" / "trajectories.jsonl").read_text().splitlines()]
    assert [t["metadata"]["run"] for t in trajs] == [0, 1]  # played twice, both kept
    assert all(turn["provenance"]["kind"] == "real" for t in trajs for turn in t["turns"])
    assert "terminal" in r.stdout and "exact" in r.stdout  # the printed table
    assert "Ground truth: 2 runs (2 of each episode: what differs between them is volatile, not scored) played in " \
           "the real terminal suite" in r.stderr
    assert "(prediction change: the model writes what the action changed, lwm draws the observation)" in r.stderr
    # Running the same command again resumes: nothing left to do, same final file.
    before = (out / "predictions.jsonl").read_bytes()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and (out / "predictions.jsonl").read_bytes() == before
    assert "Ground truth: the real terminal suite's 2 runs (2 of each" in r.stderr and "already played" in r.stderr


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("domain", ["fs", "mcp", "db", "code", "search", "web", "swe"])
def test_collect_and_eval_every_domain_with_embedded_model(tmp_path, domain):
    """The base embedded model predicts real rows of every domain (long tool lists included)."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "lwm.cli", "eval", "--domain", domain, "--episodes", "1", "--limit", "2",
           "--model", "embedded", "--max-tokens", "32", "--out", str(out), "--no-progress"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == 2 and summary["failed"] == 0, summary
    preds = [json.loads(l) for l in (out / "predictions.jsonl").read_text().splitlines()]
    assert {p["domain"] for p in preds} == {domain}
    manifest = json.loads((out / "data" / domain / "manifest.json").read_text())
    assert manifest["failed"] == {} and manifest["trajectories"] == 2
