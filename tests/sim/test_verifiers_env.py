"""lwm as a verifiers environment, run through verifiers' own entry point (``vf-eval``)
with its ``null`` chat harness in a local subprocess: real episodes and the task's
verifier, an agent served over HTTP (a scripted one, and the embedded model behind
``lwm serve-model``), and the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from servers import chat_stub, completion, lwm_serve_model

from lwm.domains.tasks import task_set

pytest.importorskip("verifiers")
from pydantic import ValidationError  # noqa: E402

from lwm_verifiers import LwmEnv, LwmTaskset, load_environment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def vf_eval(tmp_path: Path, base_url: str, *flags: str) -> list[dict]:
    """``vf-eval lwm-verifiers …`` with the agent at ``base_url``; every trace it wrote."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # uv
    proc = subprocess.run([str(Path(sys.executable).with_name("vf-eval")), "lwm-verifiers", "-m", "agent",
                           "--client.base-url", base_url, "--no-push", "-o", str(tmp_path), *flags],
                          capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [traces] = list(tmp_path.glob("*/traces.jsonl"))
    return [t for line in traces.read_text().splitlines() for t in json.loads(line)["traces"]]


def oracle(domain: str, n: int):
    """An agent that answers with the reference solution of the task its conversation shows."""
    solutions = {t.instruction: s for t, s in task_set(domain, "heldout", n)}

    def answer(body: dict) -> dict:
        messages = body["messages"]
        first = next(m["content"] for m in messages if m["role"] == "user")
        text = first if isinstance(first, str) else first[0]["text"]
        solution = solutions[text.split("\n\nObservation:")[0].removeprefix("Task: ")]
        k = sum(m["role"] == "assistant" for m in messages)
        return completion(solution[k] if k < len(solution) else "DONE")

    return answer


def test_reference_solutions_succeed_in_the_real_environment(tmp_path):
    with chat_stub(oracle("terminal", 2)) as (url, log):
        traces = vf_eval(tmp_path, url, "--env.taskset.tasks", "2")
    assert sorted(t["task"]["data"]["name"] for t in traces) == sorted(
        f"terminal/{t.name}" for t, _ in task_set("terminal", "heldout", 2))
    for t in traces:
        assert t["ok"] and t["rewards"]["lwm_reward"]["score"] == 1.0
        assert t["info"]["lwm"]["verdict"] == "achieved" and t["info"]["lwm"]["backend"] == "real"
    # the conversation lwm agent eval holds: the system prompt names the domain's action, the
    # first user turn the task and the first observation, then the observation after each action
    first = log[0]["messages"]
    assert first[0]["role"] == "system" and "terminal environment" in first[0]["content"]
    assert first[1]["content"].startswith("Task: ") and "\n\nObservation:\n" in first[1]["content"]
    assert any(m["role"] == "user" and m["content"].startswith("Observation:\n") for m in log[-1]["messages"])


def test_an_agent_that_does_nothing_gets_zero(tmp_path):
    with chat_stub(lambda body: completion("I would create the directory now.")) as (url, _):
        [trace] = vf_eval(tmp_path, url, "--env.taskset.tasks", "1", "--env.max-turns", "2")
    assert trace["rewards"]["lwm_reward"]["score"] == 0.0
    assert trace["info"]["lwm"]["verdict"] == "not achieved"
    assert len(trace["info"]["lwm"]["actions"]) == 2   # prose reaches the shell: its turn budget spent


def test_the_python_api():
    env = load_environment(domain=["db", "code"], tasks=2, seed=3, max_turns=3)
    assert isinstance(env, LwmEnv) and isinstance(env.taskset, LwmTaskset)
    names = [t.data.name for t in env.taskset]
    assert names == [f"{d}/{t.name}" for d in ("db", "code") for t, _ in task_set(d, "heldout", 2, 3)]
    assert env.config.max_turns == 3 and env.factory("db").backend == "real"
    assert load_environment(backend="sim", reward="verdict").factory("terminal").options["reward"] == "verdict"


def test_task_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"domain": "terminal", "task": {"name": "hello", "instruction": "Write hi to a.txt",
                                                               "check": {"probe": "cat /app/a.txt", "expect": "hi"}}})
                    + "\n")
    with path.open("a") as f:
        f.write(json.dumps({"domain": "db", "task": {"name": "one", "instruction": "SELECT 1"}}) + "\n")
    assert [t.data.name for t in load_environment(tasks_file=path).taskset] == ["terminal/hello", "db/one"]
    [task] = list(load_environment(domain="terminal", tasks_file=path).taskset)
    assert task.data.name == "terminal/hello" and task.data.task["check"]["expect"] == "hi"
    with pytest.raises(ValueError, match="holds no task of code"):
        list(load_environment(domain="code", tasks_file=path).taskset)


@pytest.mark.parametrize("settings, message", [
    ({"domain": "nowhere"}, "no task families for nowhere"),
    ({"backend": "hybrid"}, "backend"),
    ({"tasks": 0}, "greater than or equal to 1"),
    ({"max_turns": "many"}, "max_turns"),
    ({"reward": "vibes"}, "unknown reward source 'vibes'"),
    ({"tasks_file": "/nonexistent/tasks.jsonl"}, "no task file /nonexistent/tasks.jsonl"),
])
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ValidationError, match=message):
        load_environment(**settings)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["real", "sim"])
def test_the_embedded_model_as_the_agent(tmp_path, backend):
    """The issue's check: verifiers' entry point against the embedded model served by
    ``lwm serve-model``, in the real environment and in the simulator (whose world model
    is the embedded one in-process)."""
    with lwm_serve_model() as url:
        traces = vf_eval(tmp_path, url, "--env.taskset.tasks", "1", "--env.backend", backend,
                         "--env.max-turns", "2", "--sampling.max-tokens", "64")
    [trace] = traces
    lwm_info = trace["info"]["lwm"]
    assert trace["ok"] and lwm_info["backend"] == backend and 1 <= len(lwm_info["actions"]) <= 2
    score = trace["rewards"]["lwm_reward"]["score"]
    # the real verifier says 0 or 1; the simulator's default reward, the trained verdict, P(achieved)
    assert score in (0.0, 1.0) if backend == "real" else 0.0 <= score <= 1.0
    assert lwm_info["verdict"] == ("achieved" if score >= 0.5 else "not achieved")
