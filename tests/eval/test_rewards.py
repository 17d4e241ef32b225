"""The reward model's verdict read from probabilities (never unreadable), the backends that
score answers, and lwm agent rewards: agreement with the real verifier, resume, bad input."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from servers import chat_stub
from typer.testing import CliRunner

from lwm.cli import app
from lwm.errors import ModelUnavailableError
from lwm.eval.rewards import RewardEvalConfig, agreement, judged_episodes, ranking, reward_eval
from lwm.models import load_model
from lwm.models.base import FunctionChatModel, SamplingParams
from lwm.models.openai_compat import OpenAIChatModel
from lwm.schema import Provenance, Trajectory, Turn
from lwm.sim.env import SimEnv
from lwm.sim.reward import judge_verdict
from lwm.verdict import ANSWERS, probability, verdict_messages

MESSAGES = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Is 2 + 2 = 4? Answer."}]


KEYS = '[{"keystrokes": "ls\\n", "duration": 0.3}]'


def _episode(i: int, reward: float, action: str | None, observation: str, family: str = "create-file") -> Trajectory:
    """One turn of the family's ``i``-th task: ``action``, or its reference solution's first (``None``)."""
    from lwm.domains.tasks import families

    fam = next(f for f in families("terminal") if f.name == family)
    task, solution = fam.generate(i)
    action = solution[0] if action is None else action
    return Trajectory(id=f"terminal/{task.name}/x", domain="terminal", task=task.instruction, system_prompt="",
                      turns=[Turn(index=1, action=action, observation=observation, provenance=Provenance(kind="real"))],
                      reward=reward, metadata={"family": family, "episode": task.name, "kind": "k"})


def test_probability_is_a_softmax_of_the_two_answers_and_refuses_neither():
    assert probability(0.0, 0.0) == 0.5
    assert probability(-math.inf, -1.0) == 0.0 and probability(-1.0, -math.inf) == 1.0
    assert abs(probability(math.log(0.3), math.log(0.1)) - 0.75) < 1e-9
    with pytest.raises(ValueError, match="neither answer"):
        probability(-math.inf, -math.inf)


def test_the_embedded_model_scores_answers_deterministically_and_as_it_generates():
    model = load_model("embedded")
    greedy = asyncio.run(model.generate(MESSAGES, SamplingParams(max_tokens=3))).text
    first = asyncio.run(model.answer_logprobs(MESSAGES, [greedy, "Banana"]))
    again = asyncio.run(model.answer_logprobs(MESSAGES, [greedy, "Banana"]))
    assert first == again   # the prompt's last token is always decoded alone
    assert first[0] > first[1] and all(lp < 0 for lp in first)   # its greedy answer is the likelier
    tokens = asyncio.run(model.token_logprobs(MESSAGES, "Banana split"))
    assert "".join(t for t, _ in tokens) == "Banana split" and len(tokens) >= 2
    assert sum(lp for _, lp in tokens) == pytest.approx(asyncio.run(model.answer_logprobs(MESSAGES, ["Banana split"]))[0])
    assert all(lp <= 0 for _, lp in tokens) and asyncio.run(model.token_logprobs(MESSAGES, "")) == []


def test_a_verdict_is_a_probability_and_a_model_that_cannot_score_gives_none_with_the_reason():
    traj = _episode(0, 1.0, None, "x")
    v = asyncio.run(judge_verdict(load_model("embedded"), traj))
    assert v.error is None and 0.0 <= v.reward <= 1.0 and v.rationale.startswith("P(achieved)")
    v = asyncio.run(judge_verdict(FunctionChatModel(lambda m: "achieved"), traj))
    assert v.reward is None and "cannot score answers" in v.error


def test_a_served_model_is_scored_from_the_first_tokens_top_logprobs():
    def answer(body):
        assert body["logprobs"] is True and body["max_tokens"] == 1
        top = [{"token": " not", "logprob": math.log(0.6), "bytes": None},
               {"token": "ach", "logprob": math.log(0.3), "bytes": None},
               {"token": "Achieved", "logprob": math.log(0.05), "bytes": None},
               {"token": "the", "logprob": math.log(0.05), "bytes": None}]
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": " not"},
                             "logprobs": {"content": [{"token": " not", "logprob": math.log(0.6), "bytes": None,
                                                       "top_logprobs": top}]}}]}

    with chat_stub(answer) as (url, _):
        lps = asyncio.run(OpenAIChatModel("m", url).answer_logprobs(MESSAGES, list(ANSWERS)))
    assert abs(math.exp(lps[0]) - 0.35) < 1e-9 and abs(math.exp(lps[1]) - 0.6) < 1e-9
    with chat_stub(lambda body: {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": "yes"}}]}) as (url, _):
        traj = _episode(0, 1.0, None, "o")
        v = asyncio.run(judge_verdict(OpenAIChatModel("m", url), traj))
    assert v.reward is None and "no log-probabilities" in v.error
    # what arrived is named: another JSON body, or entries that are not (token, log-probability)
    for body, shown in (([1, 2, 3], "[1,2,3]"), (None, "null"), (
            {"choices": [{"logprobs": {"content": [{"top_logprobs": [{"token": 5, "logprob": "x"}]}]}}]}, "\"token\":5")):
        with chat_stub(lambda _, b=body: b) as (url, _):
            with pytest.raises(ModelUnavailableError, match="no log-probabilities") as e:
                asyncio.run(OpenAIChatModel("m", url).answer_logprobs(MESSAGES, list(ANSWERS)))
        assert shown in str(e.value)


def test_an_episode_whose_actions_never_reached_the_environment_achieved_nothing():
    """Measured in closed loop: the trained verdict paid episodes of refused actions only."""
    never = FunctionChatModel(lambda m: pytest.fail("the reward model was asked"))
    for actions in ([], ["ls -la", "Create the file"]):   # none, or all refused (not keystroke JSON)
        traj = _episode(0, 0.0, "x", "o").model_copy(update={"turns": [
            Turn(index=i, action=a, observation="[invalid action] not JSON", provenance=Provenance(kind="real"))
            for i, a in enumerate(actions, start=1)]})
        v = asyncio.run(judge_verdict(never, traj))
        assert (v.reward, v.rationale) == (0.0, "no action reached the environment")


def test_an_episode_that_ran_nothing_is_measured_as_the_simulator_judges_it():
    from lwm.eval.rewards import RewardSource, judge_episode
    from lwm.models import ModelSpec

    class Never(ModelSpec):
        def load(self):
            return FunctionChatModel(lambda m: pytest.fail("the reward model was asked"))

    certain = Provenance(kind="simulated", source="code/certain")
    traj = _episode(0, 0.0, "x", "o").model_copy(update={"domain": "code", "turns": [
        Turn(index=1, action="print(1", observation="[error] …", provenance=certain)],
        "metadata": {"family": "create-file", "reward_at_start": 0.0, "real_reward": 1.0, "label": 1.0}})
    never = Never("embedded")
    got = judge_episode(RewardSource("s", never, judge=never), traj, None)
    assert got["reward"] == 0.0 and got["error_text"] is None   # the start's verdict; the label never seen


def test_the_simulators_default_reward_is_the_verdict_of_the_reward_model():
    traj = _episode(0, 1.0, KEYS, "o")
    base = load_model("embedded")
    env = SimEnv("terminal", FunctionChatModel(lambda m: "never asked"), reward_model=base, judge_rewards=False)
    env.restore(traj.model_copy(update={"reward": None}))
    reward = env.verify()
    assert 0.0 <= reward <= 1.0 and env.trajectory.metadata["reward_source"] == "verdict"
    no_task = traj.model_copy(update={"task": "", "reward": None})
    env.restore(no_task)
    assert env.verify() is None and "no instruction" in env.trajectory.metadata["reward_error"]


def test_verdict_messages_show_every_action_and_observation_cut_in_the_middle():
    traj = _episode(0, 1.0, "a" * 2000, "line\n" * 10 + "\n\n\n")
    text = verdict_messages(traj, max_item_chars=100)[1]["content"]
    assert "characters cut" in text and text.count("a") < 200 and "line\n```" in text   # trailing blanks dropped
    empty = traj.model_copy(update={"turns": []})
    assert "took no action" in verdict_messages(empty)[1]["content"]


def test_reward_eval_measures_each_source_per_domain_and_kind_and_resumes(tmp_path):
    eps = [_episode(0, 1.0, None, "root@sandbox:/app#"),
           _episode(1, 0.0, '[{"keystrokes": "ls\\n", "duration": 0.3}]', "root@sandbox:/app# ls"),
           _episode(2, 0.0, '[{"keystrokes": "mkdir a\\n", "duration": 0.3}]', "", family="make-dir")]
    path = tmp_path / "episodes.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in eps))
    config = RewardEvalConfig(episodes=(path,), out=tmp_path / "r", split="all", rewards=("verdict",),
                              reward_model="embedded")
    res = reward_eval(config, show_progress=False)
    o = res.summary["sources"]["verdict"]["overall"]
    assert o["episodes"] == 3 and o["real_successes"] == 1 and o["unreadable"] == 0
    assert set(res.summary["sources"]["verdict"]["domains"]) == {"terminal"}
    lines = [json.loads(line) for line in (tmp_path / "r" / "verdicts.partial.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(0.0 <= r["reward"] <= 1.0 for r in lines)
    held = reward_eval(RewardEvalConfig(episodes=(path,), out=tmp_path / "h", reward_model="embedded"),
                       show_progress=False)
    assert held.summary["episodes"] == 1   # make-dir is a held-out family
    again = reward_eval(config, show_progress=False)   # resumed: nothing judged twice
    assert (tmp_path / "r" / "verdicts.partial.jsonl").read_text().count("\n") == 3
    assert again.summary["sources"]["verdict"]["overall"] == o
    assert "| verdict | 3 | 1 |" in (tmp_path / "r" / "report.md").read_text()
    # a second run of the same tasks (another policy): the same episode ids, each its own verdict
    other = tmp_path / "other.jsonl"
    other.write_text(eps[1].model_copy(update={"id": eps[0].id, "reward": 0.0}).model_dump_json() + "\n")
    both = reward_eval(RewardEvalConfig(episodes=(path, other), out=tmp_path / "b", split="all",
                                        rewards=("verdict",), reward_model="embedded"), show_progress=False)
    records = {json.loads(line)["id"]: json.loads(line)["reward"]
               for line in (tmp_path / "b" / "verdicts.partial.jsonl").read_text().splitlines()}
    assert both.summary["episodes"] == 4 and len(records) == 4
    assert records[f"verdict:{eps[0].id}#2"] == pytest.approx(records[f"verdict:{eps[1].id}"], abs=1e-3)
    assert records[f"verdict:{eps[0].id}#2"] != records[f"verdict:{eps[0].id}"]


def test_the_judged_episodes_are_the_splits_evenly_spaced(tmp_path):
    path = tmp_path / "episodes.jsonl"
    eps = [_episode(i, float(i % 2), KEYS, "") for i in range(10)]
    path.write_text("".join(e.model_dump_json() + "\n" for e in eps))
    picked = judged_episodes(RewardEvalConfig(episodes=(path,), out=tmp_path / "r", split="all", max_episodes=4))
    assert [t.metadata["episode"] for t, _ in picked] == [eps[i].metadata["episode"] for i in (0, 2, 5, 7)]
    assert len(judged_episodes(RewardEvalConfig(episodes=(path,), out=tmp_path / "r", split="all"))) == 10
    with pytest.raises(ValueError, match="no labelled episode of held-out families"):   # create-file trains
        judged_episodes(RewardEvalConfig(episodes=(path,), out=tmp_path / "r", split="heldout"))


def test_reward_eval_refuses_bad_input(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text(_episode(0, 1.0, "a", "o").model_dump_json() + "\n")
    with pytest.raises(ValueError, match="unknown reward source oracle"):
        RewardEvalConfig(episodes=(path,), out=tmp_path / "r", rewards=("oracle",))
    with pytest.raises(ValueError, match="unknown split"):
        RewardEvalConfig(episodes=(path,), out=tmp_path / "r", split="test")
    with pytest.raises(ValueError, match="no labelled episode of held-out families .*none was left out"):
        reward_eval(RewardEvalConfig(episodes=(path,), out=tmp_path / "r"), show_progress=False)
    unusable = tmp_path / "unusable.jsonl"
    unusable.write_text(_episode(0, 1.0, "a", "o").model_copy(update={"domain": "web"}).model_dump_json() + "\n")
    with pytest.raises(ValueError, match="any task family .*1 left out: no task families in web"):
        reward_eval(RewardEvalConfig(episodes=(unusable,), out=tmp_path / "u", split="all"), show_progress=False)
    # an adapter alone goes on the base model, and a missing one is an error, never ignored
    assert RewardEvalConfig(episodes=(path,), out=tmp_path / "a", adapter="x.gguf").sources()[0].judge.adapter == \
        "x.gguf"
    with pytest.raises(Exception, match="no adapter file at .*missing.gguf"):
        reward_eval(RewardEvalConfig(episodes=(path,), out=tmp_path / "m", split="all",
                                     adapter=str(tmp_path / "missing.gguf")), show_progress=False)
    runner = CliRunner()
    result = runner.invoke(app, ["agent", "rewards", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "no episode file" in result.output
    result = runner.invoke(app, ["agent", "rewards", str(tmp_path), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "is a directory, not an episode file" in result.output
    result = runner.invoke(app, ["agent", "rewards", str(path), "--base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2 and "needs --reward-model" in result.output


def test_the_ranking_of_rewards_is_measured_apart_from_the_threshold():
    # a reward that ranks every success above every failure, although 0.5 calls them all failures
    s = agreement([1, 1, 0, 0, 0], [0.4, 0.3, 0.2, 0.1, 0.0])
    assert s["balanced_accuracy"] == 0.5 and s["auc"] == 1.0 and s["recall_at_low_fsr"] == 1.0
    # ties count half; 5 % of 20 failures allows one at or above the threshold, not two
    assert ranking([True, False], [0.5, 0.5]) == (0.5, 0.0)
    assert ranking([True] + [False] * 20, [0.7] + [0.7] + [0.1] * 19) == (0.975, 1.0)
    assert ranking([True] + [False] * 20, [0.7] + [0.7] * 2 + [0.1] * 18) == (0.95, 0.0)
    assert ranking([True, True], [0.1, 0.9]) == (None, None)   # no failure to rank against
    # an unreadable verdict ranks as a reward of 0, as it counts as "not achieved" in the rates
    assert agreement([1, 0], [None, 0.2])["auc"] == 0.0 and agreement([1, 0], [0.3, None])["auc"] == 1.0


def test_a_run_is_the_same_run_from_any_directory_and_with_a_file_named_twice(tmp_path, monkeypatch):
    (tmp_path / "runs").mkdir()
    episodes = tmp_path / "runs" / "episodes.jsonl"
    episodes.write_text("")
    monkeypatch.chdir(tmp_path)
    here = RewardEvalConfig(episodes=("runs/episodes.jsonl",), out="r").settings()
    monkeypatch.chdir(tmp_path / "runs")
    assert RewardEvalConfig(episodes=(str(episodes), "./episodes.jsonl"), out="r").settings() == here
    assert RewardEvalConfig(episodes=("episodes.jsonl",), out="r").settings()["episodes"] == [str(episodes)]
