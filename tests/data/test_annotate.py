"""`lwm data annotate`: teacher traces, leak guard, verification, resume, budgets."""

from __future__ import annotations

import hashlib
import json
import re
from contextlib import contextmanager

import pytest
from fastapi import FastAPI, Request
from servers import lwm_serve_model, serve_app
from typer.testing import CliRunner

from lwm.cli.data import data_app
from lwm.data.annotate import TEACHER_SYSTEM, AnnotateConfig, annotate, leak_score
from lwm.data.build import SPLITS, BuildConfig, build, load_built, load_tokenizer, read_built
from lwm.errors import RunMismatchError
from lwm.jsonl import iter_jsonl
from lwm.parse import parse_output
from lwm.schema import Provenance, Trajectory, Turn, write_trajectories


def env_output(action: str) -> str:
    """The synthetic environment: the output of `run NAME I` is a line only it knows."""
    return f"{action} -> {hashlib.sha256(action.encode()).hexdigest()[:24]}\nready>"


def make_traj(episode: str, family: str, turns: int = 2) -> Trajectory:
    prov = Provenance(kind="real", source="terminal/test", run=0)
    return Trajectory(
        id=f"terminal/{episode}/run0", domain="terminal", task=f"do {episode}", system_prompt="You simulate a shell.",
        turns=[Turn(index=i, action=f"run {episode} {i}", observation=env_output(f"run {episode} {i}"),
                    provenance=prov) for i in range(1, turns + 1)],
        metadata={"episode": episode, "family": family, "run": 0})


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("embedded")


@pytest.fixture(scope="module")
def dataset(tok, tmp_path_factory):
    """12 examples: episodes named `leaky-*` get leaking traces, `wrong-*` fail verification."""
    d = tmp_path_factory.mktemp("ann")
    trajs = [make_traj(f"{kind}-{i}", f"fam-{kind}-{i}") for kind in ("good", "leaky", "wrong") for i in range(2)]
    write_trajectories(d / "src" / "trajectories.jsonl", trajs)
    build(BuildConfig([d / "src"], d / "ds", max_tokens=512, val_fraction=0.34), tokenizer=tok, show_progress=False)
    return d / "ds"


@contextmanager
def scripted_teacher():
    """An OpenAI-compatible stand-in for a teacher LLM. Teacher requests: a trace that
    quotes the real output for `leaky-*` episodes, an honest trace otherwise. Verification
    requests: the right output, except for `wrong-*` episodes. Yields (base_url, log)."""
    app = FastAPI()
    log: list[dict] = []

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": "teacher", "object": "model", "owned_by": "test"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        log.append(body)
        last = body["messages"][-1]["content"]
        action = re.findall(r"\*\*Action:\*\*\n`{3,}\w*\n(.*?)\n`{3,}", last, re.S)[-1]
        if body["messages"][0]["content"].startswith(TEACHER_SYSTEM[:40]):
            if "leaky" in action:
                content = f"The environment will print exactly:\n{env_output(action)}"
            else:
                content = (f"`{action}` runs a job named after its argument; the environment answers with the "
                           "action, an arrow and the job's digest, then the ready> prompt on its own line.")
        else:
            out = "something else entirely" if "wrong" in action else env_output(action)
            content = f"<predicted_observation>\n{out}\n</predicted_observation>"
        return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}

    with serve_app(app) as url:
        yield f"{url}/v1", log


def test_leak_score_definition():
    obs = "total 48\ndrwxr-xr-x 2 root root 4096 Jan  1 00:00 src"
    assert leak_score(f"The listing is:\n{obs}", obs) == 1.0
    assert leak_score("ls -l prints a total line, then one line per entry with mode, owner and size", obs) == 0.0
    half = leak_score("first comes drwxr-xr-x 2 root root", obs)
    assert 0.3 < half < 0.8
    # text the input already shows (the echoed command) is not a leak
    screen = "$ cat /etc/hostname\nsandbox-42"
    assert leak_score("It echoes `$ cat /etc/hostname` and prints the host name.", screen,
                      context="**Action:** $ cat /etc/hostname") == 0.0
    assert leak_score("short", "ok") == 0.0  # nothing of 12+ characters to leak


def test_scripted_teacher_leak_caught_verify_resume_budget(dataset, tok, tmp_path):
    n = sum(len(v) for v in read_built(dataset)[0].values())
    assert n == 12
    with scripted_teacher() as (url, log):
        cfg = AnnotateConfig(data=dataset, out=tmp_path / "ann", base_url=url, concurrency=4, verify=True)
        res = annotate(cfg, tokenizer=tok, show_progress=False)
        assert res.attempted == 12
        assert res.rejected == {"leak": 4, "verify_failed": 4}
        assert res.accepted == 4
        assert res.tokens == 12 * 120 + 8 * 120  # a teacher call each, a verification for the 8 not leaking
        examples, manifest = read_built(tmp_path / "ann")
        assert manifest["annotation"]["rejected"] == {"leak": 4, "verify_failed": 4}
        assert {s: len(examples[s]) for s in SPLITS} == {s: len(read_built(dataset)[0][s]) for s in SPLITS}
        for r in examples["train"] + examples["validation"]:
            target = r["completion"][0]["content"]
            parsed = parse_output(target)
            assert parsed.observation == r["observation"]
            if r["episode"].startswith("terminal/good"):
                assert target.startswith("<think>\n") and parsed.reasoning == r["reasoning"] != ""
                assert tok.count_chat(r["prompt"] + r["completion"]) == r["num_tokens"] <= 512
            else:
                assert "<think>" not in target and r["reasoning"] == ""
        logged = [obj for _, obj in iter_jsonl(tmp_path / "ann" / "annotations.jsonl")]
        assert len(logged) == 12
        leaks = [r for r in logged if r["reason"] == "leak"]
        assert all(r["leak"] > 0.6 for r in leaks)
        assert load_built(tmp_path / "ann")["train"].num_rows == len(examples["train"])

        # resume: everything is in the log, the teacher is not asked again
        calls = len(log)
        again = annotate(cfg, tokenizer=tok, show_progress=False)
        assert len(log) == calls and again.accepted == 4 and again.rejected == res.rejected
        with pytest.raises(RunMismatchError, match="leak_threshold"):
            annotate(AnnotateConfig(data=dataset, out=tmp_path / "ann", base_url=url, leak_threshold=0.9),
                     tokenizer=tok, show_progress=False)

        # budgets: examples, then total tokens (one call of 120 tokens exhausts 100)
        calls = len(log)
        small = annotate(AnnotateConfig(data=dataset, out=tmp_path / "b1", base_url=url, max_examples=3),
                         tokenizer=tok, show_progress=False)
        assert small.attempted == 3 and len(log) - calls == 3
        tiny = annotate(AnnotateConfig(data=dataset, out=tmp_path / "b2", base_url=url, max_total_tokens=100,
                                       concurrency=1), tokenizer=tok, show_progress=False)
        assert tiny.attempted == 1 and tiny.tokens == 120

        # the CLI, with --drop-rejected: only annotated examples remain
        out = tmp_path / "cli"
        result = CliRunner().invoke(data_app, ["annotate", "--data", str(dataset), "--out", str(out), "--base-url",
                                               url, "--drop-rejected", "--no-progress"])
        assert result.exit_code == 0, result.output
        assert "rejected: leak 4" in result.output
        kept = read_built(out)[0]
        assert sum(len(v) for v in kept.values()) == 8 and all(r["reasoning"] for v in kept.values() for r in v)


def test_lwm_serve_model_as_teacher(dataset, tok, tmp_path):
    with lwm_serve_model() as url:
        res = annotate(AnnotateConfig(data=dataset, out=tmp_path / "ann", base_url=url, max_examples=2,
                                      trace_tokens=24, concurrency=2), tokenizer=tok, show_progress=False)
    assert res.attempted == 2 and res.accepted + sum(res.rejected.values()) == 2
    assert set(res.rejected) <= {"empty", "truncated", "answer_tag", "leak"}
    logged = [obj for _, obj in iter_jsonl(tmp_path / "ann" / "annotations.jsonl")]
    assert len(logged) == 2 and all(r["tokens"] > 24 for r in logged)
    manifest = json.loads((tmp_path / "ann" / "manifest.json").read_text())
    assert manifest["annotation"]["settings"]["base_url"] == url
    assert manifest["counts"]["train"] + manifest["counts"]["validation"] == 12
