"""lwm rollout and lwm wm2real: scripted and LLM policies against real and simulated backends."""

import json
from dataclasses import replace

import pytest
from conftest import needs_sandbox
from servers import vllm_style_server
from typer.testing import CliRunner

from lwm.cli import app
from lwm.data.verdicts import real_label
from lwm.domains.terminal import keys
from lwm.domains.terminal.spec import CHANGE_INSTRUCTION
from lwm.errors import RowFormatError, RunMismatchError
from lwm.eval.wm2real import wm2real
from lwm.models import prompt_cache_mb
from lwm.schema import read_trajectories
from lwm.sim.rollout import RolloutConfig, env_factory_for, rollout

runner = CliRunner()


@needs_sandbox
def test_scripted_policy_on_the_real_backend_resumes(tmp_path):
    config = RolloutConfig(out=tmp_path, backend="real", episodes=3, concurrency=2)
    res = rollout(config, show_progress=False)
    assert (res.episodes, res.played, res.failed) == (3, 3, {})
    trajs = list(read_trajectories(res.path))
    assert [t.id for t in trajs] == ["terminal/files-project-skeleton/ep0", "terminal/files-backup-and-archive/ep1",
                                     "terminal/files-find-python/ep2"]
    assert [t.reward for t in trajs] == [1.0, 1.0, None]  # the real verifiers; the third task has none
    assert all(turn.provenance.kind == "real" for t in trajs for turn in t.turns)
    assert trajs[0].metadata["task_spec"]["check"]["expect"] == "3"
    again = rollout(config, show_progress=False)
    assert (again.played, again.episodes) == (0, 3)
    with pytest.raises(RunMismatchError, match="backend"):
        rollout(RolloutConfig(out=tmp_path, backend="sim", episodes=3), show_progress=False)


@needs_sandbox
def test_simulated_rollout_then_wm2real(tmp_path):
    with vllm_style_server() as (base_url, log):
        config = RolloutConfig(out=tmp_path / "r", backend="sim", episodes=2, world_model="served", base_url=base_url,
                               max_turns=2, controls=("empty",), reward="probe")
        res = rollout(config, show_progress=False)
    assert res.failed == {} and res.episodes == 2
    trajs = list(read_trajectories(res.path))
    assert all(len(t.turns) == 2 and t.turns[0].observation == "hi" for t in trajs)
    assert trajs[0].turns[0].provenance.kind == "simulated" and trajs[0].turns[0].provenance.controls == ["empty"]
    assert "Results are empty" in log[0]["messages"][0]["content"]
    # The task has a verifier: the world model predicts its probe ("hi", not "3"): not achieved.
    assert trajs[0].reward == 0.0 and trajs[0].metadata["reward_source"] == "probe"
    assert trajs[0].metadata["probe_observation"] == "hi"
    with vllm_style_server() as (base_url, log):
        judged = rollout(RolloutConfig(out=tmp_path / "j", backend="sim", episodes=1, world_model="served",
                                       base_url=base_url, max_turns=1, reward="judge"), show_progress=False)
    # The stand-in server never answers with a verdict: the reward is unknown, and said so.
    first = next(read_trajectories(judged.path))
    assert first.reward is None and "no JSON verdict" in first.metadata["reward_error"]

    report = wm2real(res.path, tmp_path / "w", show_progress=False)
    s = report.summary
    assert (s["trajectories"], s["steps"], s["exact"]) == (2, 4, 0.0)  # "hi" is not what bash prints
    assert set(s["by_depth"]) == {1, 2} and s["with_both_rewards"] == 2 and s["failed"] == {}
    assert s["false_success_rate"] == 0.0  # the probe said "not achieved" both times
    assert "Divergence by depth" in (tmp_path / "w" / "report.md").read_text()
    # the episodes as simulated, each with the real verifier's verdict on its replay: what
    # lwm data verdicts --from reads (the task's reference was not played: not achieved)
    labelled = list(read_trajectories(tmp_path / "w" / "labelled.jsonl"))
    assert [t.id for t in labelled] == [t.id for t in trajs] and s["labelled"] == 2
    assert [(t.metadata["real_reward"], t.metadata["real_steps"]) for t in labelled] == [(0.0, 2), (0.0, 2)]
    assert [t.turns for t in labelled] == [t.turns for t in trajs] and labelled[0].reward == 0.0
    assert [real_label(t) for t in labelled] == [0.0, 0.0]
    again = wm2real(res.path, tmp_path / "w", show_progress=False)  # resumes: nothing replayed twice
    assert again.summary["steps"] == 4


def test_rollout_on_a_local_ray_instance(tmp_path):
    ray = pytest.importorskip("ray")
    try:
        with vllm_style_server() as (base_url, _):
            config = RolloutConfig(out=tmp_path, backend="sim", episodes=2, world_model="served", base_url=base_url,
                                   max_turns=1, concurrency=2, ray=True)
            res = rollout(config, show_progress=False)
    finally:
        ray.shutdown()
    assert res.failed == {} and res.episodes == 2
    assert [t.turns[0].observation for t in read_trajectories(res.path)] == ["hi", "hi"]


@pytest.mark.parametrize("args,message", [
    (["--backend", "dream"], "unknown backend 'dream'"),
    (["--backend", "replay"], "the replay backend needs a cache"),
    (["--control", "explode"], "unknown control kind"),
    (["--domain", "nowhere", "--backend", "real"], "unknown domain 'nowhere'"),
    (["--model", "baseline:trivial"], "reference predictor"),
    (["--policy", "baseline:repeat-last"], "reference predictor"),
    (["--predict", "diff"], "unknown prediction mode 'diff'"),
    (["--backend", "real", "--predict", "change"], "not real"),
    (["--backend", "real", "--no-compact-tools"], "not real"),
    (["--extra-body", "[1]"], "must be a JSON object"),
    (["--extra-body", "{top_k: 2}"], "not JSON"),
    (["--backend", "real", "--extra-body", '{"top_k": 2}'], "the real backend asks none"),
    (["--extra-body", '{"top_k": 2}'], "the in-process world model takes none"),
    (["--backend", "real", "--real-start"], "the real backend simulates none"),
])
def test_rollout_cli_rejects_bad_input(tmp_path, args, message):
    result = runner.invoke(app, ["rollout", "--out", str(tmp_path), "--no-progress", *args])
    assert result.exit_code == 2 and message in result.output


def test_a_served_world_model_is_asked_for_changes_when_told(tmp_path):
    """A server cannot say which prediction mode its model was trained on: ``prediction``
    asks for it, and a resume with another mode is refused."""
    with vllm_style_server() as (base_url, log):
        config = RolloutConfig(out=tmp_path, backend="sim", episodes=1, world_model="served", base_url=base_url,
                               max_turns=1, reward="judge", prediction="change", compact_tools=True)
        res = rollout(config, show_progress=False)
        asked = len(log)
        full = rollout(RolloutConfig(out=tmp_path / "full", backend="sim", episodes=1, world_model="served",
                                     base_url=base_url, max_turns=1, reward="judge"), show_progress=False)
    assert res.failed == {} and full.failed == {}
    changes = [CHANGE_INSTRUCTION in b["messages"][0]["content"] for b in log]
    assert changes[:asked].count(True) == 1 and not any(changes[asked:])  # the step; the start is a whole screen
    assert json.loads((tmp_path / "rollout.json").read_text())["prediction"] == "change"
    # recorded as the model was asked: the default spelled out resumes the same run
    assert json.loads((tmp_path / "full" / "rollout.json").read_text())["prediction"] == "full"
    again = rollout(RolloutConfig(out=tmp_path / "full", backend="sim", episodes=1, world_model="served",
                                  base_url=base_url, max_turns=1, reward="judge", prediction="full",
                                  compact_tools=False), show_progress=False)
    assert again.played == 0 and again.episodes == 1
    with pytest.raises(RunMismatchError, match="prediction"):
        rollout(RolloutConfig(out=tmp_path, backend="sim", episodes=1, world_model="served", base_url=base_url,
                              max_turns=1, reward="judge", compact_tools=True), show_progress=False)


def test_extra_body_goes_to_the_world_models_server_and_is_recorded(tmp_path):
    with vllm_style_server() as (base_url, log):
        config = RolloutConfig(out=tmp_path, backend="sim", episodes=1, world_model="served", base_url=base_url,
                               max_turns=1, reward="judge", extra_body={"repeat_penalty": 1.0})
        assert rollout(config, show_progress=False).failed == {}
    # the start and the step carry it; the reward model's requests (retried: the stand-in
    # answers no verdict) are the judge's, with the judge's own settings
    assert [body.get("repeat_penalty") for body in log[:2]] == [1.0, 1.0]
    assert len(log) > 2 and not any("repeat_penalty" in body for body in log[2:])
    assert json.loads((tmp_path / "rollout.json").read_text())["extra_body"] == {"repeat_penalty": 1.0}
    # not given: not recorded, so runs from before the setting existed resume
    assert not {"extra_body", "real_start"} & set(RolloutConfig(out=tmp_path).settings())


@needs_sandbox
def test_a_real_start_gives_the_simulated_episode_the_real_page(tmp_path):
    with vllm_style_server() as (base_url, _):
        config = RolloutConfig(out=tmp_path, domain="web", backend="sim", episodes=1, world_model="served",
                               base_url=base_url, max_turns=1, reward="judge", real_start=True)
        res = rollout(config, show_progress=False)
    start = next(read_trajectories(res.path))
    assert start.metadata["initial_observation"] == "real"
    assert start.initial_observation.startswith("URL: http://shop.test/") and "\nRootWebArea '" in start.initial_observation
    assert json.loads((tmp_path / "rollout.json").read_text())["real_start"] is True


def test_a_simulator_serving_episodes_at_once_keeps_their_prompt_states(tmp_path):
    """The in-process world model gets room for each concurrent episode's last state; the
    cache changes speed, not answers, so it is not part of a model's recorded settings."""
    assert [prompt_cache_mb(n) for n in (1, 2, 4, 100)] == [0, 384, 768, 2048]
    config = RolloutConfig(out=tmp_path, backend="sim", concurrency=4)
    spec = env_factory_for(config).model
    assert spec.prompt_cache_mb == 768 and "prompt_cache_mb" not in spec.settings()
    assert env_factory_for(replace(config, concurrency=1)).model.prompt_cache_mb == 0


def test_wm2real_names_a_malformed_line(tmp_path):
    bad = tmp_path / "t.jsonl"
    bad.write_text(json.dumps({"id": "x"}) + "\n")
    result = runner.invoke(app, ["wm2real", str(bad), "--out", str(tmp_path / "w"), "--no-progress"])
    assert result.exit_code == 2 and "t.jsonl:1" in result.output


def _os_trajectory(id_, reward=None):
    # a domain with no real environment here: its replay fails at once, counted (no sandbox needed)
    return json.dumps({"id": id_, "domain": "os", "system_prompt": "s", "initial_observation": "", "turns": [],
                       "reward": reward, "metadata": {"task_spec": {"name": "t"}}}) + "\n"


@pytest.mark.parametrize("text,message", [
    (_os_trajectory("os/a") + _os_trajectory("os/a", 1.0), "t.jsonl:2: trajectory os/a is already on line 1"),
    ("\n", "t.jsonl holds no trajectory"),
])
def test_wm2real_refuses_a_file_it_could_not_report_truly(tmp_path, text, message):
    (tmp_path / "t.jsonl").write_text(text)
    result = runner.invoke(app, ["wm2real", str(tmp_path / "t.jsonl"), "--out", str(tmp_path / "w"), "--no-progress"])
    assert result.exit_code == 2 and message in result.output.replace("\n", ""), result.output
    assert not (tmp_path / "w").exists()


def test_wm2real_does_not_resume_into_another_trajectories_file(tmp_path):
    # rollouts name episodes by task and number: two runs share ids, and the first one's
    # replays must not stand for the second's
    (tmp_path / "a.jsonl").write_text(_os_trajectory("os/a"))
    (tmp_path / "b.jsonl").write_text(_os_trajectory("os/a", 1.0))
    first = wm2real(tmp_path / "a.jsonl", tmp_path / "w", show_progress=False)
    assert list(first.summary["failed"]) == ["os/a"] and "NoRealEnvironmentError" in first.summary["failed"]["os/a"]
    with pytest.raises(RunMismatchError, match="trajectories"):
        wm2real(tmp_path / "b.jsonl", tmp_path / "w", show_progress=False)
    assert wm2real(tmp_path / "a.jsonl", tmp_path / "w", show_progress=False).summary["trajectories"] == 0
    (tmp_path / "w" / "wm2real.jsonl").write_text(json.dumps({"id": "os/a", "steps": [{"turn": 1}]}) + "\n")
    with pytest.raises(RowFormatError, match="wm2real.jsonl:1: not a wm2real record"):  # not a bare KeyError
        wm2real(tmp_path / "a.jsonl", tmp_path / "w", show_progress=False)


def test_llm_policy_against_the_simulator(tmp_path):
    with vllm_style_server() as (base_url, log):
        config = RolloutConfig(out=tmp_path, backend="sim", episodes=1, policy="agent", policy_base_url=base_url,
                               world_model="served", base_url=base_url, max_turns=2)
        res = rollout(config, show_progress=False)
    assert res.failed == {} and res.episodes == 1
    traj = next(read_trajectories(res.path))
    # The stand-in answers every request the same way: the agent's answer, typed as a command line.
    typed = keys(("<predicted_observation>hi</predicted_observation>\n", 1.0))
    assert [t.action for t in traj.turns] == [typed] * 2
    assert traj.metadata["policy"] == "chat:agent"
    agent_calls = [b for b in log if b["model"] == "agent"]
    assert len(agent_calls) == 2 and "You are an agent" in agent_calls[0]["messages"][0]["content"]
    assert agent_calls[1]["messages"][-1]["content"].startswith("Observation:\nhi")
    assert agent_calls[1]["messages"][-2] == {"role": "assistant",
                                              "content": "<predicted_observation>hi</predicted_observation>"}


@needs_sandbox
def test_wm2real_counts_a_replay_that_breaks_the_sandbox(tmp_path):
    """The simulator let an action pass that breaks the real sandbox: the replay is a real
    failure with the reason, compared up to that action, not a lost trajectory."""
    from lwm.eval.wm2real import replay_in_real
    from lwm.schema import Trajectory

    traj = Trajectory.model_validate({
        "id": "t/1", "domain": "terminal", "system_prompt": "s", "initial_observation": "", "reward": 1.0,
        "metadata": {"task_spec": {"name": "t", "instruction": "write ok to a.txt",
                                   "check": {"probe": "cat /app/a.txt", "expect": "ok"}}},
        "turns": [{"index": i + 1, "action": keys(cmd), "observation": "root@sandbox:/app# ",
                   "provenance": {"kind": "simulated", "source": "wm"}}
                  for i, cmd in enumerate(("tmux kill-server\n", "echo ok > a.txt\n"))]})
    record = replay_in_real(traj)
    assert record["real_reward"] == 0.0 and record["false_success"] and "SandboxError" in record["broken"]
    assert record["steps"] == []   # the breaking action observed nothing to compare with
