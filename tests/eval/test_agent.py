"""lwm agent eval: a policy on held-out task families, in the real environment and in the
simulator; garbage from the policy is counted, never a crash."""

from __future__ import annotations

import json

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
    with vllm_style_server() as (url, _):
        res = agent_eval(AgentEvalConfig(out=tmp_path, domains=("db",), tasks=2, policy="oracle", backend="sim",
                                         world_model="stand-in", base_url=url), show_progress=False)
    db = res.summary["domains"]["db"]
    # The stand-in world model answers "hi" to every probe: never "achieved"; the oracle's
    # actions, replayed in the real environment, always are.
    assert db["success"]["successes"] == 0 and db["real_success_of_simulated_actions"]["successes"] == 2
    assert db["sim_to_real_ratio"] == 0.0 and db["false_successes"] == 0
    first = next(read_trajectories(tmp_path / "episodes.jsonl"))
    assert first.turns[0].provenance.kind == "simulated" and first.metadata["reward_source"] == "probe"
    assert first.metadata["real_reward"] == 1.0 and first.metadata["initial_observation"] == "real"


@pytest.mark.parametrize("args,message", [
    (["--domain", "nowhere"], "unknown domain 'nowhere'"),
    (["--domain", "search"], "no task families for domain 'search'"),
    (["--split", "test"], "unknown split 'test'"),
    (["--backend", "replay"], "--backend must be real or sim"),
    (["--policy", "baseline:trivial"], "reference predictor"),
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
