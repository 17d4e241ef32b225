"""lwm agent eval: a policy on held-out task families, in the real environment and in the
simulator; garbage from the policy is counted, never a crash."""

from __future__ import annotations

import json
import os

import pytest
from conftest import needs_sandbox
from servers import chat_stub, completion, vllm_style_server
from typer.testing import CliRunner

from lwm.cli import app
from lwm.errors import RunMismatchError
from lwm.eval.agent import AgentEvalConfig, agent_eval, summarize
from lwm.schema import read_trajectories

runner = CliRunner()


@needs_sandbox
def test_the_oracle_succeeds_in_the_real_environment_and_resumes(tmp_path):
    config = AgentEvalConfig(out=tmp_path, domains=("terminal", "db"), tasks=2, policy="oracle", concurrency=2)
    res = agent_eval(config, show_progress=False)
    s = res.summary
    assert s["episodes"] == 4 and not res.failed
    assert s["overall"]["success"] == {"n": 4, "successes": 4, "rate": 1.0, "ci95": [0.5101, 1.0]}
    assert s["overall"]["valid_action_rate"] == 1.0 and s["overall"]["real_steps"] >= 4
    episodes = list(read_trajectories(tmp_path / "episodes.jsonl"))
    assert {e.metadata["family"] for e in episodes} <= {f"{n}" for n in _heldout("terminal") + _heldout("db")}
    assert "100.0 % [51.0, 100.0] (4/4)" in (tmp_path / "report.md").read_text()
    again = agent_eval(config, show_progress=False)  # resumes: nothing played twice
    assert again.summary["seconds_this_invocation"] < s["seconds_this_invocation"] + 1
    with pytest.raises(RunMismatchError, match="tasks"):
        agent_eval(AgentEvalConfig(out=tmp_path, domains=("terminal", "db"), tasks=3, policy="oracle"),
                   show_progress=False)


def _heldout(domain: str) -> list[str]:
    from lwm.domains.tasks import heldout_families

    return [f.name for f in heldout_families(domain)]


@needs_sandbox
def test_a_policy_that_emits_garbage_is_counted_not_a_crash(tmp_path):
    garbage = "\x00\x07 not an action \x1b[2J"
    with chat_stub(lambda body: completion(garbage)) as (url, log):
        res = agent_eval(AgentEvalConfig(out=tmp_path, domains=("terminal", "db"), tasks=1, policy="garbage",
                                         policy_base_url=url, max_turns=2), show_progress=False)
    s = res.summary
    assert not res.failed and s["episodes"] == 2 and s["overall"]["success"]["successes"] == 0
    assert s["overall"]["valid_action_rate"] == 0.0 and s["overall"]["mean_turns"] == 2.0
    terminal = next(e for e in read_trajectories(tmp_path / "episodes.jsonl") if e.domain == "terminal")
    assert terminal.turns[0].observation.startswith("[invalid action]")
    assert len(log) == 4 and "You are an agent" in log[0]["messages"][0]["content"]


@needs_sandbox
def test_in_the_simulator_then_replayed_in_the_real_environment(tmp_path):
    with vllm_style_server() as (url, requests):
        res = agent_eval(AgentEvalConfig(out=tmp_path, domains=("db",), tasks=2, policy="oracle", backend="sim",
                                         world_model="stand-in", base_url=url, reward="probe"), show_progress=False)
        # the world model is not told the goal (it would predict it: docs/results.md, stage 2) ...
        prompts = [json.dumps(r["messages"]) for r in requests]
        assert prompts and not any("Task Instruction" in p for p in prompts)
        agent_eval(AgentEvalConfig(out=tmp_path / "shown", domains=("db",), tasks=1, policy="oracle", backend="sim",
                                   world_model="stand-in", base_url=url, show_task=True, reward="probe"),
                   show_progress=False)
        # ... unless asked
        assert "Task Instruction" in json.dumps(requests[-1]["messages"])
        # the trained reward model: a probability for every episode, never unreadable
        judged = agent_eval(AgentEvalConfig(out=tmp_path / "verdict", domains=("db",), tasks=2, policy="oracle",
                                            backend="sim", world_model="stand-in", base_url=url, reward="verdict"),
                            show_progress=False)
    verdicts = list(read_trajectories(tmp_path / "verdict" / "episodes.jsonl"))
    assert all(t.metadata["reward_source"] == "verdict" and 0.0 <= t.reward <= 1.0 for t in verdicts)
    assert judged.summary["domains"]["db"]["unknown_verdicts"] == 0
    assert judged.summary["domains"]["db"]["reward_recall"] is not None   # the oracle really succeeds
    db = res.summary["domains"]["db"]
    # The stand-in world model answers "hi" to every probe: never "achieved"; the oracle's
    # actions, replayed in the real environment, always are.
    assert db["success"]["successes"] == 0 and db["real_success_of_simulated_actions"]["successes"] == 2
    assert db["sim_to_real_ratio"] == 0.0 and db["false_successes"] == 0
    first = next(read_trajectories(tmp_path / "episodes.jsonl"))
    assert first.turns[0].provenance.kind == "simulated" and first.metadata["reward_source"] == "probe"
    assert first.metadata["real_reward"] == 1.0 and first.metadata["initial_observation"] == "real"


@needs_sandbox
def test_a_served_change_mode_world_model_is_asked_for_changes(tmp_path):
    from lwm.domains.terminal.spec import CHANGE_INSTRUCTION

    with vllm_style_server() as (url, requests):
        agent_eval(AgentEvalConfig(out=tmp_path, domains=("terminal",), tasks=1, policy="oracle", backend="sim",
                                   world_model="stand-in", base_url=url, max_turns=1, prediction="change"),
                   show_progress=False)
    assert any(CHANGE_INSTRUCTION in r["messages"][0]["content"] for r in requests)
    assert json.loads((tmp_path / "agent_eval.json").read_text())["prediction"] == "change"


@pytest.mark.parametrize("args,message", [
    (["--domain", "nowhere"], "unknown domain 'nowhere'"),
    (["--domain", "search"], "no task families for domain 'search'"),
    (["--split", "test"], "unknown split 'test'"),
    (["--backend", "replay"], "backend 'replay' is not one this command plays (one of real, sim)"),
    (["--policy", "baseline:trivial"], "reference predictor"),
    (["--policy", "oracle", "--policy-base-url", "http://127.0.0.1:9/v1"], "it takes no --policy-base-url"),
    (["--policy", "oracle", "--predict", "change"], "not real"),
    (["--policy", "oracle", "--backend", "sim", "--base-url", "http://127.0.0.1:9/v1", "--model", "x",
      "--predict", "diff"], "unknown prediction mode 'diff'"),
])
def test_bad_input_is_refused_with_one_line(tmp_path, args, message):
    result = runner.invoke(app, ["agent", "eval", "--out", str(tmp_path), "--no-progress", *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_summary_counts_unknown_verdicts_as_failures():
    from lwm.schema import Provenance, Trajectory, Turn

    prov = Provenance(kind="real")
    eps = [Trajectory(id=f"e{i}", domain="db", system_prompt="", reward=r,
                      turns=[Turn(index=1, action="SELECT 1;", observation="1", provenance=prov)],
                      metadata={"actions": 1, "valid_actions": 1}) for i, r in enumerate([1.0, None, 0.0])]
    s = summarize(eps, "real")
    assert s["overall"]["success"]["successes"] == 1 and s["overall"]["unknown_verdicts"] == 1
    assert json.loads(json.dumps(s))["domains"]["db"]["success"]["n"] == 3


def test_summary_gives_success_per_family_and_the_rewards_precision_and_recall_in_closed_loop():
    from lwm.schema import Provenance, Trajectory, Turn

    prov = Provenance(kind="simulated")
    # (family, the reward model's verdict in the simulator, the real verdict of the replay)
    played = [("insert-row", 0.9, 1.0), ("insert-row", 0.8, 0.0), ("insert-row", 0.1, 1.0), ("create-table", 0.2, 0.0)]
    eps = [Trajectory(id=f"e{i}", domain="db", system_prompt="", reward=sim,
                      turns=[Turn(index=1, action="SELECT 1;", observation="1", provenance=prov)],
                      metadata={"family": fam, "real_reward": real, "actions": 1, "valid_actions": 1})
           for i, (fam, sim, real) in enumerate(played)]
    s = summarize(eps, "sim")
    assert s["families"]["db/insert-row"]["success"]["successes"] == 2 and s["families"]["db/create-table"]["success"]["n"] == 1
    db = s["domains"]["db"]
    assert (db["reward_precision"], db["reward_recall"], db["false_successes"]) == (0.5, 0.5, 1)


@needs_sandbox
def test_an_episode_that_breaks_its_sandbox_is_a_failure_counted_and_shown(tmp_path):
    from lwm.domains.tasks import write_task_file
    from lwm.domains.terminal.spec import keys
    from lwm.envs.base import Check, Task

    easy = Task(name="easy", instruction="Create /app/a.txt containing ok.", check=Check("cat /app/a.txt", "ok"))
    write_task_file(tmp_path / "tasks.jsonl", [("terminal", easy, (keys("echo ok > a.txt\n"),)),
                                               ("terminal", easy.__class__(**{**easy.to_dict(), "name": "hard"}),
                                                (keys("tmux kill-server\n"), keys("echo ok > a.txt\n")))])
    res = agent_eval(AgentEvalConfig(out=tmp_path / "run", tasks_file=tmp_path / "tasks.jsonl", policy="oracle"),
                     show_progress=False)
    overall = res.summary["overall"]
    assert not res.failed and overall["success"]["n"] == 2 and overall["success"]["successes"] == 1
    assert overall["broken_episodes"] == 1   # not left out of the count: a failure
    broken = next(e for e in read_trajectories(tmp_path / "run" / "episodes.jsonl") if e.id.endswith("hard"))
    assert broken.reward == 0.0 and "SandboxError" in broken.metadata["broken"]
    assert "tmux kill-server" in broken.turns[-1].action and "[sandbox broken]" in broken.turns[-1].observation
    assert "| 50.0 % [9.4, 90.5] (1/2) | 0 | 1 |" in (tmp_path / "run" / "report.md").read_text()


def test_a_damaged_journal_is_named_with_its_line(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "episodes.partial.jsonl").write_text(json.dumps({"id": "terminal/x-1", "reward": "high"}) + "\n")
    result = runner.invoke(app, ["agent", "eval", "--policy", "oracle", "--tasks", "1", "--out", str(out),
                                 "--no-progress"])
    assert result.exit_code == 2 and "episodes.partial.jsonl:1: not an episode record" in result.output


@pytest.mark.parametrize("args,message", [
    (["--policy", "scripted"], "'oracle'"),
])
def test_policies_that_cannot_play_task_families(tmp_path, args, message):
    result = runner.invoke(app, ["agent", "eval", "--out", str(tmp_path), "--no-progress", *args])
    assert result.exit_code == 2 and message in result.output


@needs_sandbox
def test_a_task_file_written_edited_and_played(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    result = runner.invoke(app, ["agent", "tasks", str(tasks), "--domain", "db", "--domain", "terminal",
                                 "--tasks", "2"])
    assert result.exit_code == 0 and "wrote 4 tasks" in result.output, result.output
    lines = [json.loads(x) for x in tasks.read_text().splitlines()]
    assert [x["domain"] for x in lines] == ["db", "db", "terminal", "terminal"] and all(x["solution"] for x in lines)
    # a task of one's own, beside the drawn ones: a file the agent must create, and its check
    own = {"name": "make-note", "instruction": "Create /app/note.txt containing the line: ok",
           "check": {"probe": "cat /app/note.txt\n", "expect": "ok"}}
    tasks.write_text(tasks.read_text() + json.dumps({"domain": "terminal", "task": own}) + "\n")
    out = tmp_path / "run"
    result = runner.invoke(app, ["agent", "eval", "--tasks-file", str(tasks), "--domain", "db", "--policy", "oracle",
                                 "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["overall"]["success"]["successes"] == 2  # db only
    # the Markdown table on stdout keeps one row a line (not wrapped at 80 columns); no answers: "—"
    assert "| domain | success ± 95% CI | unknown verdicts | broken episodes | valid actions | well-formed answers |" \
        in result.output and "| all | 100.0 % [34.2, 100.0] (2/2) | 0 | 0 | 1.0 | — | 0 | 1.0 | 2 |" in result.output
    assert "| db/delete-rows | 100.0 % [20.6, 100.0] (1/1) |" in result.output   # success per family
    # every domain of the file; the oracle needs a solution on every line
    result = runner.invoke(app, ["agent", "eval", "--tasks-file", str(tasks), "--policy", "oracle",
                                 "--out", str(tmp_path / "all"), "--no-progress"])
    assert result.exit_code == 2 and "terminal/make-note has none" in result.output, result.output
    with chat_stub(lambda body: completion('echo ok > /app/note.txt')) as (url, _):
        agent_eval(AgentEvalConfig(out=tmp_path / "own", tasks_file=tasks, domains=("terminal",),
                                   policy="stub", policy_base_url=url, max_turns=1), show_progress=False)
    own_episode = next(e for e in read_trajectories(tmp_path / "own" / "episodes.jsonl") if e.id.endswith("make-note"))
    assert own_episode.reward == 1.0 and own_episode.metadata["split"] == "file"
    # the file is part of the run: another content does not resume it
    tasks.write_text("\n".join(tasks.read_text().splitlines()[:-1]) + "\n")
    with pytest.raises(RunMismatchError, match="tasks_file"):
        agent_eval(AgentEvalConfig(out=tmp_path / "own", tasks_file=tasks, domains=("terminal",), policy="stub",
                                   policy_base_url="http://127.0.0.1:9/v1"), show_progress=False)


GOOD_TASK = {"name": "t", "instruction": "do it", "check": {"probe": "SELECT 1;", "expect": "1"}}


@pytest.mark.parametrize("line,message", [
    ('{"domain": "db", "task": ', ":2: not valid JSON"),
    (json.dumps({"domain": "nowhere", "task": GOOD_TASK}), ":2: unknown domain 'nowhere'"),
    (json.dumps({"domain": "db", "task": GOOD_TASK, "level": 3}), ":2: a task line has the fields"),
    (json.dumps({"domain": "db"}), ":2: a task line has the fields"),
    (json.dumps({"domain": "db", "task": [1]}), ":2: 'task' must be an object"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "check": {"probe": 1, "x": 2}}}), ":2: malformed task"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "colour": "red"}}), ":2: malformed task: unknown task fields"),
    (json.dumps({"domain": "db", "task": GOOD_TASK, "solution": "SELECT 1;"}), ":2: 'solution' must be a list"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "name": "first"}}), ":2: task db/first is already on line 1"),
    # wrong types and checks that could never pass, refused on reading rather than when an episode ends
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "setup": "CREATE TABLE t (a)"}}), ":2: malformed task: a task's "
     "setup is a list of texts"),  # a string, not split into characters
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "name": 7}}), ":2: malformed task: a task needs a name"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "name": "  "}}), ":2: malformed task: a task needs a name"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "instruction": ["do"]}}), ":2: malformed task: a task's "
     "instruction is text"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "files": {"/app/a": 5}}}), ":2: malformed task: a task's files"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "options": [1]}}), ":2: malformed task: a task's options"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "check": "SELECT 1;"}}), ":2: malformed task: a task's check "
     "is an object"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "check": {"probe": "SELECT 1;", "expect": 1}}}),
     ":2: malformed task: a check's probe and expect are text"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "check": {"probe": "SELECT 1;", "expect": "1", "match": "glob"}}}),
     ":2: malformed task: a check's match is contains, equals or regex, not 'glob'"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "check": {"probe": "SELECT 1;", "expect": "(1", "match": "regex"}}}),
     ":2: malformed task: a check's regex '(1' does not compile"),
    # seed files the sandbox would refuse, options the domain does not know or of the wrong kind
    *[(json.dumps({"domain": "db", "task": {**GOOD_TASK, "files": {path: "x"}}}),
       f":2: malformed task: seed file '{path}' must be a plain absolute path under /root, /app or /tmp")
      for path in ("/etc/passwd", "/app/../etc/x", "app/a", "/app/./a")],
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "files": {"/app/a\nb": "x"}}}),
     ":2: malformed task: seed file path '/app/a\\nb' is not text (or holds a control character)"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "files": {"/app/a": "x", "/app/a/b": "y"}}}),
     ":2: malformed task: seed file '/app/a' is also the directory of another seed file"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "options": {"engine": "oracle"}}}),
     ":2: malformed task: option engine='oracle' of a task of db: expected 'sqlite' or 'postgres'"),
    (json.dumps({"domain": "code", "task": {**GOOD_TASK, "options": {"cell_timeout": "abc"}}}),
     ":2: malformed task: option cell_timeout='abc' of a task of code: expected a number of seconds in (0, 3600]"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "options": {"max_turns": 0}}}),
     ":2: malformed task: option max_turns=0 of a task of db: expected a whole number >= 1"),
    (json.dumps({"domain": "db", "task": {**GOOD_TASK, "options": {"egnine": "sqlite"}}}),
     ":2: malformed task: unknown option 'egnine' of a task of db; known: engine, max_turns, system_prompt"),
    # every domain: a seed file outside the sandbox's places, and an option of the wrong kind
    *[(json.dumps({"domain": d, "task": {**GOOD_TASK, "files": {"/etc/cron.d/x": "x"}}}),
       ":2: malformed task: seed file '/etc/cron.d/x' must be a plain absolute path under /root, /app or /tmp")
      for d in ("terminal", "code", "fs", "mcp", "web", "search", "swe")],
    *[(json.dumps({"domain": d, "task": {**GOOD_TASK, "options": {option: value}}}),
       f":2: malformed task: option {option}={value!r} of a task of {d}: expected {expected}")
      for d, option, value, expected in (
          ("terminal", "max_turns", "3", "a whole number >= 1"), ("search", "max_turns", 2.5, "a whole number >= 1"),
          ("swe", "system_prompt", 7, "text"), ("fs", "shell_setup", "rm -rf /", "a list of argv lists of texts"),
          ("mcp", "server", "oracle", "'sqlite' or 'memory' or 'tickets'"), ("web", "start_url", 5, "text"))],
])
def test_a_broken_task_file_line_is_named(tmp_path, line, message):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"domain": "db", "task": {**GOOD_TASK, "name": "first"}}) + "\n" + line + "\n")
    result = runner.invoke(app, ["agent", "eval", "--tasks-file", str(tasks), "--policy", "oracle",
                                 "--out", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 2 and f"{tasks}{message}" in result.output.replace("\n", ""), result.output
    assert not (tmp_path / "run").exists()  # refused before anything was written


@needs_sandbox
def test_a_check_whose_probe_is_no_action_gives_no_verdict(tmp_path):
    # the probe's error text ("[invalid action] not JSON (Expecting value)") holds the "o" the
    # check expects: it was read as a success
    task = {"name": "t", "instruction": "look", "check": {"probe": "not a tool call", "expect": "o"}}
    line = {"domain": "fs", "task": task, "solution": ['{"name": "list_directory", "arguments": {"path": "/app"}}']}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(line) + "\n")
    res = agent_eval(AgentEvalConfig(out=tmp_path / "run", tasks_file=tmp_path / "tasks.jsonl", policy="oracle"),
                     show_progress=False)
    fs = res.summary["domains"]["fs"]
    assert fs["success"]["successes"] == 0 and fs["unknown_verdicts"] == 1 and fs["valid_action_rate"] == 1.0


def test_a_task_file_is_never_written_over_a_device_or_a_folder(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for out in (fifo, tmp_path):
        result = runner.invoke(app, ["agent", "tasks", str(out), "--tasks", "1"])
        assert result.exit_code == 2 and f"{out} exists and is not a regular file" in result.output, result.output
    assert fifo.is_fifo()


def test_an_edited_task_file_is_kept_unless_forced(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    assert runner.invoke(app, ["agent", "tasks", str(tasks), "--domain", "db", "--tasks", "2"]).exit_code == 0
    again = runner.invoke(app, ["agent", "tasks", str(tasks), "--domain", "db", "--tasks", "2"])
    assert again.exit_code == 0   # the same tasks: written again, nothing lost
    edited = tasks.read_text().replace("Create", "Make", 1)
    tasks.write_text(edited)
    refused = runner.invoke(app, ["agent", "tasks", str(tasks), "--domain", "db", "--tasks", "2"])
    assert refused.exit_code == 2 and "holds other tasks (edited?): --force writes over it" in refused.output
    assert tasks.read_text() == edited
    assert runner.invoke(app, ["agent", "tasks", str(tasks), "--domain", "db", "--tasks", "2", "--force"]).exit_code == 0
    assert tasks.read_text() != edited and len(tasks.read_text().splitlines()) == 2


def test_a_domain_the_task_file_lacks_is_named_with_those_it_has(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"domain": "db", "task": GOOD_TASK}) + "\n")
    result = runner.invoke(app, ["agent", "eval", "--tasks-file", str(tasks), "--domain", "fs", "--policy", "oracle",
                                 "--out", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 2 and "holds no task of fs (its domains: db)" in result.output, result.output


def test_an_empty_or_missing_task_file_is_refused(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    for name, message in (("empty.jsonl", "holds no task"), ("missing.jsonl", "no task file")):
        result = runner.invoke(app, ["agent", "eval", "--tasks-file", str(tmp_path / name), "--out",
                                     str(tmp_path / "run"), "--no-progress"])
        assert result.exit_code == 2 and message in result.output, result.output
