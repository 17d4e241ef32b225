"""The curriculum (families the policy sometimes solves) and rejection-sampling fine-tuning
(lwm train rft): accepted answers as the agent's own prompts, a tiny task end to end with a
real verifier and TRL's real trainer, bad input."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import needs_sandbox
from typer.testing import CliRunner

from lwm import domains
from lwm.cli import app
from lwm.domains.tasks import families, read_task_file, write_task_file
from lwm.domains.terminal.spec import keys
from lwm.envs.base import Check, Task
from lwm.errors import DataNotFoundError, ModelUnavailableError, RowFormatError
from lwm.models.base import FunctionChatModel
from lwm.schema import Provenance, Trajectory, Turn
from lwm.sim.backends import EnvFactory, task_env_factory
from lwm.sim.policy import PolicySpec, action_text, agent_messages, fenced_action
from lwm.train.curriculum import choose, family_table, write_curriculum
from lwm.train.rft import (
    FORMS,
    RFTConfig,
    accepted_examples,
    achieved_turns,
    answers_well_formed,
    episode_reward,
    is_accepted,
    train_rft,
)


def _rate(successes, n):
    return {"success": {"n": n, "successes": successes, "rate": successes / n, "ci95": [0, 1]}}


def test_the_curriculum_keeps_train_families_the_policy_sometimes_solves(tmp_path):
    summary = {"families": {"db/insert-row": _rate(3, 10), "db/create-table": _rate(0, 10),
                            "db/update-value": _rate(10, 10), "db/delete-rows": _rate(5, 10)}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "episodes.jsonl").write_text("")
    rows = write_curriculum(tmp_path, tmp_path / "c.jsonl", low=0.05, high=0.9, tasks_per_family=4)
    chosen = {r["family"]: r["chosen"] for r in rows}
    # never solved: no signal; always solved: nothing to learn; held out: never trained on
    assert chosen == {"insert-row": True, "create-table": False, "update-value": False, "delete-rows": False}
    tasks = read_task_file(tmp_path / "c.jsonl")
    assert len(tasks) == 4 and {t.family for _, t, _ in tasks} == {"insert-row"}
    assert json.loads((tmp_path / "c.jsonl.json").read_text())["families"][0]["written"] == 4
    widened = choose(family_table(summary), 0.0, 1.0)   # widening is the same call with wider bounds
    assert sum(r["chosen"] for r in widened) == 3


def test_the_curriculum_refuses_unknown_families_and_empty_choices(tmp_path):
    (tmp_path / "episodes.jsonl").write_text("")
    (tmp_path / "summary.json").write_text(json.dumps({"families": {"db/no-such": _rate(1, 2)}}))
    with pytest.raises(ValueError, match="unknown family 'db/no-such'"):
        write_curriculum(tmp_path, tmp_path / "c.jsonl")
    (tmp_path / "summary.json").write_text(json.dumps({"families": {"db/insert-row": _rate(0, 2)}}))
    with pytest.raises(ValueError, match=r"no train family with a success rate in \[0.05, 0.9\]: db/insert-row 0/2"):
        write_curriculum(tmp_path, tmp_path / "c.jsonl")
    with pytest.raises(DataNotFoundError, match="no summary.json"):
        write_curriculum(tmp_path / "nowhere", tmp_path / "c.jsonl")
    for malformed in ({}, {"success": "x"}, {"success": {"n": 4, "successes": 2, "rate": "0.5"}}):
        (tmp_path / "summary.json").write_text(json.dumps({"families": {"db/insert-row": malformed}}))
        with pytest.raises(ValueError, match="malformed success of 'db/insert-row'"):
            write_curriculum(tmp_path, tmp_path / "c.jsonl")
    (tmp_path / "summary.json").write_text(json.dumps({"families": {"db/delete-rows": _rate(1, 1)}}))
    with pytest.raises(ValueError, match=r"db/delete-rows 1/1 \(held out: never trained on\)"):
        write_curriculum(tmp_path, tmp_path / "c.jsonl", low=0.0, high=1.0)
    (tmp_path / "summary.json").write_text(json.dumps({"episodes": 3}))
    result = CliRunner().invoke(app, ["agent", "curriculum", str(tmp_path), "--out", str(tmp_path / "c.jsonl")])
    assert result.exit_code == 2 and "no per-family success" in result.output
    # the evaluation's episodes say which tasks not to reuse: they must be readable, and there
    (tmp_path / "summary.json").write_text(json.dumps({"families": {"db/insert-row": _rate(3, 10)}}))
    (tmp_path / "episodes.jsonl").write_text("\n[1]\n")
    with pytest.raises(RowFormatError, match=r"episodes.jsonl:2: "):
        write_curriculum(tmp_path, tmp_path / "c.jsonl")
    (tmp_path / "episodes.jsonl").unlink()
    with pytest.raises(DataNotFoundError, match="no episodes.jsonl: the evaluation is unfinished"):
        write_curriculum(tmp_path, tmp_path / "c.jsonl")


def test_accepted_attempts_become_the_agents_own_prompts_and_answers():
    task, _ = families("terminal")[1].generate(0)
    prov = Provenance(kind="simulated")
    turns = [Turn(index=1, action=keys("ls\n"), observation="root@sandbox:/app# ls", provenance=prov),
             Turn(index=2, action=keys("echo x > y\n"), observation="root@sandbox:/app#", provenance=prov)]
    ok = Trajectory(id="terminal/t/s0", domain="terminal", task=task.instruction, system_prompt="",
                    initial_observation="root@sandbox:/app#", turns=turns, reward=0.8,
                    metadata={"task_spec": task.to_dict(), "agent_answers": ["ls", "echo x > y"]})
    failed = ok.model_copy(update={"id": "terminal/t/s1", "reward": 0.2})
    unknown = ok.model_copy(update={"id": "terminal/t/s2", "reward": None})
    rows = accepted_examples([ok, failed, unknown], threshold=0.5, form="action")
    assert [r["completion"][0]["content"] for r in rows] == ["ls", "echo x > y"]
    fenced = ok.model_copy(update={"metadata": {**ok.metadata, "agent_answers": ["```bash\nls\n```", "echo x > y"]}})
    assert accepted_examples([fenced], threshold=0.5, form="action") == rows   # the fence is not part of the action
    spec = domains.get("terminal")
    assert rows[1]["prompt"] == agent_messages(spec, task, "root@sandbox:/app#", ["ls"], ["root@sandbox:/app# ls"])
    # as written: the same turns, each answer with its fence, and the earlier one so in the prompt
    written = accepted_examples([fenced], threshold=0.5, form="as-written")
    assert [r["completion"][0]["content"] for r in written] == ["```bash\nls\n```", "echo x > y"]
    assert written[1]["prompt"] == agent_messages(spec, task, "root@sandbox:/app#", ["```bash\nls\n```"],
                                                  ["root@sandbox:/app# ls"])
    # fenced: every action in a block of the tool's language, nothing around it, whatever the policy wrote
    talkative = ok.model_copy(update={"metadata": {**ok.metadata, "agent_answers": [
        "To list them:\n```\nls\n```\nOutput: a.txt", "echo x > y"]}})
    in_fences = accepted_examples([talkative], 0.5, well_formed_only=False, form="fenced")
    assert [r["completion"][0]["content"] for r in in_fences] == ["```bash\nls\n```", "```bash\necho x > y\n```"]
    assert in_fences[1]["prompt"] == written[1]["prompt"]
    assert [r["completion"][0]["content"] for r in accepted_examples([talkative], 0.5, well_formed_only=False,
                                                                      form="action")] == ["ls", "echo x > y"]
    assert accepted_examples([talkative], 0.5, well_formed_only=False) == in_fences   # the default form
    prose = fenced.model_copy(update={"metadata": {**ok.metadata, "agent_answers": ["I would list them.", "echo x > y"]}})
    for form in FORMS:   # a turn whose action is not well formed is not learned, in any form
        assert [r["id"] for r in accepted_examples([prose], 0.5, well_formed_only=False, form=form)] == [
            "terminal/t/s0/turn2"]
    with pytest.raises(ValueError, match="form must be one of action, fenced, as-written, not 'prose'"):
        accepted_examples([ok], 0.5, form="prose")


def test_a_fenced_action_is_tagged_with_its_tools_language_and_read_back_the_same():
    for domain, answer, block in (("db", "SELECT 1;", "```sql\nSELECT 1;\n```"),
                                  ("code", "```py\nx = 1\n```\nThis sets x.", "```python\nx = 1\n```"),
                                  ("swe", '{"name": "read", "arguments": {}}', '```json\n{"name": "read", "arguments": {}}\n```'),
                                  ("web", "click('3')", "```python\nclick('3')\n```"),
                                  ("terminal", "ls -la", "```bash\nls -la\n```")):
        spec = domains.get(domain)
        assert fenced_action(spec, answer) == block
        assert action_text(block) == action_text(answer)   # read back, the same action
    for answer in ("DONE", "done.", "", "<think>nothing yet</think>"):
        assert fenced_action(domains.get("db"), answer) == action_text(answer)   # no action: not fenced


def test_an_attempt_is_learned_up_to_the_turn_that_achieved_its_task_then_done():
    task, _ = families("terminal")[1].generate(0)
    prov = Provenance(kind="simulated")
    turns = [Turn(index=i + 1, action=keys(a + "\n"), observation=f"root@sandbox:/app# {a}", provenance=prov)
             for i, a in enumerate(["echo x > y", "rm y", "ls"])]
    early = Trajectory(id="terminal/t/s0", domain="terminal", task=task.instruction, system_prompt="",
                       initial_observation="root@sandbox:/app#", turns=turns, reward=0.8,
                       metadata={"task_spec": task.to_dict(), "agent_answers": ["echo x > y", "rm y", "ls"]})
    whole = early.model_copy(update={"id": "terminal/t/s1"})
    rows = accepted_examples([early, whole], 0.5, achieved_after={"terminal/t/s0": 1}, done="every-attempt",
                             form="action")
    assert [(r["id"], r["completion"][0]["content"]) for r in rows] == [
        ("terminal/t/s0/turn1", "echo x > y"), ("terminal/t/s0/done", "DONE"),   # the undoing `rm y` is not learned
        ("terminal/t/s1/turn1", "echo x > y"), ("terminal/t/s1/turn2", "rm y"), ("terminal/t/s1/turn3", "ls"),
        ("terminal/t/s1/done", "DONE")]   # not named: learned whole, then DONE
    spec = domains.get("terminal")
    assert rows[1]["prompt"] == agent_messages(spec, task, "root@sandbox:/app#", ["echo x > y"],
                                               ["root@sandbox:/app# echo x > y"])
    assert rows[-1]["prompt"] == agent_messages(spec, task, "root@sandbox:/app#", ["echo x > y", "rm y", "ls"],
                                                [t.observation for t in turns])
    # until achieved, without DONE; and every turn (the default, and the rule of runs recorded before it)
    assert [r["id"] for r in accepted_examples([early], 0.5, achieved_after={"terminal/t/s0": 1})] == [
        "terminal/t/s0/turn1"]
    assert [r["id"] for r in accepted_examples([early], 0.5)] == [f"terminal/t/s0/turn{i}" for i in (1, 2, 3)]
    # no DONE after nothing learned (prose alone), nor after an action that ended the episode itself
    prose = early.model_copy(update={"metadata": {**early.metadata, "agent_answers": ["I would write y."] * 3}})
    assert accepted_examples([prose], 0.5, well_formed_only=False, achieved_after={"terminal/t/s0": 1}, done="every-attempt") == []
    quit_ = early.model_copy(update={"turns": [turns[0].model_copy(update={"action": "[]"})]})
    assert [r["id"] for r in accepted_examples([quit_], 0.5, done="every-attempt")] == ["terminal/t/s0/turn1"]
    # one DONE row a task: after its first accepted attempt only; another task gets its own
    other = early.model_copy(update={"id": "terminal/u/s0", "metadata": {
        **early.metadata, "task_spec": {**task.to_dict(), "name": task.name + "-other"}}})
    once = accepted_examples([early, whole, other], 0.5, achieved_after={"terminal/t/s0": 1, "terminal/u/s0": 1},
                             done="once-per-task")
    assert [r["id"] for r in once if r["id"].endswith("/done")] == ["terminal/t/s0/done", "terminal/u/s0/done"]
    assert len(once) == len(rows) - 1 + 2
    with pytest.raises(ValueError, match="once-per-task"):
        accepted_examples([early], 0.5, done="yes")
    # answers not recorded for every turn: what the agent saw is unknown, so nothing is learned
    unrecorded = early.model_copy(update={"metadata": {**early.metadata, "agent_answers": ["echo x > y"]}})
    assert accepted_examples([unrecorded], 0.5, done="every-attempt") == []


def _db_attempt(family: str, actions: list[str]) -> Trajectory:
    task, _ = next(f for f in families("db") if f.name == family).generate(0)
    prov = Provenance(kind="simulated")
    return Trajectory(id=f"db/{task.name}/s0", domain="db", task=task.instruction, system_prompt="",
                      initial_observation="", reward=1.0,
                      turns=[Turn(index=i + 1, action=a, observation="", provenance=prov) for i, a in enumerate(actions)],
                      metadata={"task_spec": task.to_dict(), "agent_answers": actions})


def test_the_turn_that_achieved_the_task_is_found_by_replaying_shorter_episodes_for_real():
    real = task_env_factory("db", "real")
    # the first action achieves it; the second undoes it (what the policy learned to do on held-out tasks)
    undone = _db_attempt("delete-rows", ["DELETE FROM tasks WHERE status = 'done';", "DELETE FROM tasks;"])
    assert episode_reward(real, undone, 1) == (1.0, 2) and episode_reward(real, undone, 2) == (0.0, 3)
    assert achieved_turns(real, undone, 0.5) == {"turns": 1, "rewards": [1.0], "real_steps": 2}
    # two steps needed: the first alone achieves nothing, so the whole attempt is learned
    task, solution = next(f for f in families("db") if f.name == "add-column").generate(0)
    both = _db_attempt("add-column", [*solution])
    assert achieved_turns(real, both, 0.5) == {"turns": 2, "rewards": [0.0], "real_steps": 2}
    # the judging journal names an attempt by what it did: one sampled again under its id is judged again
    from lwm.train.rft import _judged_id

    again = undone.model_copy(update={"turns": [undone.turns[1], undone.turns[0]]})
    assert _judged_id(undone) != _judged_id(again) and _judged_id(undone) == _judged_id(undone.model_copy())
    # one turn: nothing shorter to judge
    assert achieved_turns(real, _db_attempt("delete-rows", ["SELECT 1;"]), 0.5) == {
        "turns": 1, "rewards": [], "real_steps": 0}


class _Judge(FunctionChatModel):
    """A reward model that says P(achieved) = 0.9 and records what it was shown (a fake: the
    wiring is under test, not the verdict, which tests/eval/test_rewards.py measures)."""

    def __init__(self) -> None:
        super().__init__(lambda m: "never asked", name="judge")
        self.shown: list[str] = []

    async def answer_logprobs(self, messages, answers):
        self.shown.append("\n".join(m["content"] for m in messages))
        return [math.log(0.9), math.log(0.1)]


def test_on_the_simulator_the_reward_model_judges_the_shorter_episode_alone():
    judge = _Judge()
    sim = EnvFactory("db", "sim", model=FunctionChatModel(lambda m: "never asked"), reward_model=judge)
    undone = _db_attempt("delete-rows", ["DELETE FROM tasks WHERE status = 'done';", "DELETE FROM tasks;"])
    reward, real_steps = episode_reward(sim, undone, 1)
    assert reward == pytest.approx(0.9) and real_steps == 0
    assert "status = 'done'" in judge.shown[0] and "DELETE FROM tasks;" not in judge.shown[0]   # not the later turn
    assert achieved_turns(sim, undone, 0.5) == {"turns": 1, "rewards": [pytest.approx(0.9)], "real_steps": 0}
    assert achieved_turns(sim, undone, 0.95)["turns"] == 2   # never accepted shorter: learned whole
    # the real start's own verdict, as in the simulator: a first action that ran nothing keeps it
    certain = undone.model_copy(update={"metadata": {**undone.metadata, "reward_at_start": 0.0}, "turns": [
        undone.turns[0].model_copy(update={"action": "", "provenance": Provenance(kind="simulated", source="db/certain")}),
        undone.turns[1]]})
    assert episode_reward(sim, certain, 1) == (0.0, 0) and len(judge.shown) == 3


def test_prose_the_reward_model_paid_is_refused_unless_any_answer_is_asked():
    task, _ = families("terminal")[1].generate(0)
    prov = Provenance(kind="simulated")
    prose = "Here is how you would create the file: first open an editor."
    turns = [Turn(index=1, action=keys(prose + "\n"), observation="root@sandbox:/app#", provenance=prov),
             Turn(index=2, action=keys("echo x > y\n"), observation="root@sandbox:/app#", provenance=prov)]
    paid = Trajectory(id="terminal/t/s0", domain="terminal", task=task.instruction, system_prompt="",
                      initial_observation="root@sandbox:/app#", turns=turns, reward=0.95,
                      metadata={"task_spec": task.to_dict(), "agent_answers": [prose, "echo x > y"]})
    clean = paid.model_copy(update={"id": "terminal/t/s1", "metadata": {
        **paid.metadata, "agent_answers": ["ls", "echo x > y", ""]}})   # the empty answer ended it: not a turn
    assert not answers_well_formed(paid) and answers_well_formed(clean)
    assert not is_accepted(paid, 0.5) and is_accepted(paid, 0.5, well_formed_only=False)
    assert [r["id"] for r in accepted_examples([paid, clean], 0.5)] == ["terminal/t/s1/turn1", "terminal/t/s1/turn2"]
    # accepted whatever its answers, the attempt teaches its well-formed action only
    assert [r["id"] for r in accepted_examples([paid], 0.5, well_formed_only=False)] == ["terminal/t/s0/turn2"]


def test_the_policy_learns_the_action_it_ran_without_the_words_around_it():
    task, _ = families("db")[0].generate(0)
    prov = Provenance(kind="simulated")
    chatty = "```sql\nCREATE TABLE t (a TEXT);\n```\nThis creates the table."
    after = "CREATE TABLE t (a TEXT);\n\nOutput:\n\n```\n\nOutput:\n\n```"   # runs the block: `Output:`
    turns = [Turn(index=1, action="CREATE TABLE t (a TEXT);", observation="", provenance=prov),
             Turn(index=2, action="Output:", observation="Parse error: near \"Output\"", provenance=prov)]
    traj = Trajectory(id="db/t/s0", domain="db", task=task.instruction, system_prompt="", initial_observation="",
                      turns=turns, reward=0.9, metadata={"task_spec": task.to_dict(), "agent_answers": [chatty, after]})
    assert not answers_well_formed(traj)
    rows = accepted_examples([traj], 0.5, well_formed_only=False, form="action")
    assert [(r["id"], r["completion"][0]["content"]) for r in rows] == [("db/t/s0/turn1", "CREATE TABLE t (a TEXT);")]
    rows = accepted_examples([traj], 0.5, well_formed_only=False)   # fenced, nothing around it
    assert [r["completion"][0]["content"] for r in rows] == ["```sql\nCREATE TABLE t (a TEXT);\n```"]


def test_an_attempt_with_no_action_is_never_accepted():
    task, _ = families("terminal")[1].generate(0)
    done_at_once = Trajectory(id="terminal/t/s0", domain="terminal", task=task.instruction, system_prompt="",
                              initial_observation="root@sandbox:/app#", turns=[], reward=0.9,
                              metadata={"task_spec": task.to_dict(), "agent_answers": ["DONE"]})
    assert not is_accepted(done_at_once, 0.5) and not is_accepted(done_at_once, 0.5, well_formed_only=False)


def test_rft_refuses_held_out_tasks_a_mistyped_model_and_a_damaged_journal(tmp_path):
    held = families("db", "heldout")[0].generate(0)
    write_task_file(tmp_path / "held.jsonl", [("db", *held)])
    with pytest.raises(ValueError, match=r"held.jsonl: task .* is of the held-out family db/"):
        train_rft(RFTConfig(out=tmp_path / "h", tasks_file=tmp_path / "held.jsonl"), show_progress=False)
    train = families("db", "train")[0].generate(0)
    write_task_file(tmp_path / "train.jsonl", [("db", *train)])
    with pytest.raises(ValueError, match=r"held.jsonl: task .* is of the held-out family db/"):   # an anchor too
        train_rft(RFTConfig(out=tmp_path / "a", tasks_file=tmp_path / "train.jsonl",
                            anchor_tasks=tmp_path / "held.jsonl"), show_progress=False)
    with pytest.raises(ValueError, match=r"train.jsonl holds no task of terminal"):   # --domain left no anchor
        train_rft(RFTConfig(out=tmp_path / "a", domains=("terminal",), tasks=1, anchor_tasks=tmp_path / "train.jsonl"),
                  show_progress=False)
    assert not (tmp_path / "a").exists()
    with pytest.raises(ModelUnavailableError):
        train_rft(RFTConfig(out=tmp_path / "typo", world_model="nosuchmodel", tasks=1, samples=1),
                  show_progress=False)
    assert not (tmp_path / "typo" / "rft_settings.json").exists()   # the directory is not claimed by the typo
    out = tmp_path / "damaged"
    out.mkdir()
    (out / "attempts.partial.jsonl").write_text(json.dumps({"id": "terminal/x/s0", "reward": "high"}) + "\n")
    with pytest.raises(RowFormatError, match=r"attempts.partial.jsonl:1: not an episode record"):
        train_rft(RFTConfig(out=out, backend="real", tasks=1, samples=1), show_progress=False)


def test_rft_refuses_bad_settings(tmp_path):
    for kwargs, message in (({"samples": 0}, "samples must be at least 1"), ({"reward": "oracle"}, "unknown reward"),
                            ({"temperature": float("inf")}, "temperature must be a finite"),
                            ({"lr": float("nan")}, r"lr must be a number in \(0, 1\]"), ({"lr": 0.0}, "lr must be"),
                            ({"lr": 10.0}, "lr must be"), ({"learn": "done"}, "learn must be one of until-achieved"),
                            ({"form": "prose"}, "form must be one of action, fenced, as-written"),
                            ({"seed": -1}, r"seed must be in \[0, 2\*\*31 - samples\]"),
                            ({"threshold": 0.0}, "threshold"), ({"backend": "hybrid"}, "backend .hybrid. is not one this command plays .one of real, sim.")):
        with pytest.raises(ValueError, match=message):
            RFTConfig(out=tmp_path, **kwargs)
    for name in ("tasks_file", "anchor_tasks"):
        with pytest.raises(DataNotFoundError, match="no task file"):
            RFTConfig(out=tmp_path, **{name: tmp_path / "missing.jsonl"})
    (tmp_path / "unfinished").mkdir()
    for policy, message in (("nosuchpolicy", r"policy must be one of embedded, embedded-warmup \(the models a new "
                                             r"adapter is trained on\) or an earlier lwm train rft run's directory, "
                                             r"not 'nosuchpolicy'$"),
                            ("embedded-agent", "'embedded-agent' .embedded-agent is a shipped adapter"),
                            (str(tmp_path / "unfinished"), "is not a finished lwm train rft run .no adapter/"),
                            (str(tmp_path), "is the run directory itself")):
        with pytest.raises(ValueError, match=message):
            RFTConfig(out=tmp_path, policy=policy)
    damaged = tmp_path / "damaged-record"
    (damaged / "adapter").mkdir(parents=True)
    for name in ("adapter/adapter_config.json", "adapter.gguf"):
        (damaged / name).write_text("{}")
    (damaged / "lwm_train.json").write_text(json.dumps({"settings": 3}))
    with pytest.raises(RowFormatError, match=r"lwm_train.json:1: its settings are not a JSON object"):
        RFTConfig(out=tmp_path / "next", policy=str(damaged))
    (tmp_path / "afile").write_text("")
    with pytest.raises(FileExistsError, match="is a file, not a directory"):
        RFTConfig(out=tmp_path / "afile")
    (tmp_path / "tasks.jsonl").write_text("")
    a, b = (RFTConfig(out=tmp_path, tasks_file=tmp_path / "tasks.jsonl", tasks=n).settings() for n in (32, 5))
    assert a == b and "tasks" not in a   # a task file makes the task set: --tasks does not apply


def test_a_resume_with_other_settings_is_refused_before_any_model_loads(tmp_path, monkeypatch):
    from lwm.errors import RunMismatchError
    from lwm.train import rft

    task, _ = next(f for f in families("db") if f.name == "insert-row").generate(0)
    write_task_file(tmp_path / "t.jsonl", [("db", task, ())])
    config = RFTConfig(out=tmp_path / "run", tasks_file=tmp_path / "t.jsonl", backend="real")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "rft_settings.json").write_text(json.dumps({**config.settings(), "learn": "every-turn"}))
    monkeypatch.setattr(rft, "_policy", lambda c: pytest.fail("a model was loaded"))
    monkeypatch.setattr(rft, "_factory", lambda c, d: pytest.fail("a model was loaded"))
    with pytest.raises(RunMismatchError, match="learn: started with 'every-turn', now 'until-achieved'"):
        train_rft(config, show_progress=False)
    # a run recorded before the setting existed learned every turn: resumed with the default, refused
    (tmp_path / "run" / "rft_settings.json").write_text(json.dumps(
        {k: v for k, v in config.settings().items() if k != "learn"}))
    with pytest.raises(RunMismatchError, match="learn"):
        train_rft(config, show_progress=False)
    # a run recorded with anchor rows, resumed without them (or the other way), is refused; one recorded before
    # the setting existed had none
    anchored = RFTConfig(out=tmp_path / "run", tasks_file=tmp_path / "t.jsonl", backend="real",
                         anchor_tasks=tmp_path / "t.jsonl")
    (tmp_path / "run" / "rft_settings.json").write_text(json.dumps(anchored.settings()))
    with pytest.raises(RunMismatchError, match="anchor_tasks"):
        train_rft(config, show_progress=False)
    (tmp_path / "run" / "rft_settings.json").write_text(json.dumps(config.settings()))
    with pytest.raises(RunMismatchError, match="anchor_tasks"):
        train_rft(anchored, show_progress=False)
    assert config.settings()["anchor_tasks"] is None
    # session 15 recorded the form as a boolean: as_written true is resumed as form as-written, and only so
    recorded = {k: v for k, v in config.settings().items() if k != "form"}
    (tmp_path / "run" / "rft_settings.json").write_text(json.dumps({**recorded, "as_written": True}))
    with pytest.raises(RunMismatchError, match="form: started with 'as-written', now 'fenced'"):
        train_rft(config, show_progress=False)

    class Resumed(Exception):
        pass

    def resumed(config, domain):
        raise Resumed

    monkeypatch.setattr(rft, "_factory", resumed)
    with pytest.raises(Resumed):   # past the settings check, on to load the models
        train_rft(replace(config, form="as-written"), show_progress=False)
    (tmp_path / "run" / "rft_settings.json").write_text(json.dumps({**recorded, "as_written": False}))
    with pytest.raises(Resumed):
        train_rft(replace(config, form="action"), show_progress=False)
    with pytest.raises(RunMismatchError, match="form: started with 'action', now 'fenced'"):
        train_rft(config, show_progress=False)


@needs_sandbox
@pytest.mark.slow
def test_rft_on_a_tiny_task_samples_accepts_fine_tunes_and_exports(tmp_path, monkeypatch):
    pytest.importorskip("trl")
    # a task every attempt achieves (its check always passes) and one none does: the real
    # verifier decides which attempts are kept
    always = Task(name="always", family="always", instruction="Show the files in /app.",
                  check=Check("echo ok", "ok", "equals"))
    never = Task(name="never", family="never", instruction="Show the files in /app.",
                 check=Check("echo no", "yes", "equals"))
    write_task_file(tmp_path / "tasks.jsonl", [("terminal", always, ()), ("terminal", never, ())])
    # every answer counts here (the sampled ones may be prose): the verifier alone decides
    monkeypatch.chdir(tmp_path)   # a run directory given relative to the working directory
    config = RFTConfig(out=Path("rft"), tasks_file=tmp_path / "tasks.jsonl", samples=2, backend="real",
                       max_steps=1, temperature=1.0, well_formed_only=False)
    res = train_rft(config, show_progress=False)
    s = res.summary
    assert s["attempts"] == 4 and s["accepted"] == 2 and s["accepted_by_family"] == {"terminal/always": 2}
    assert s["real_steps"] == sum(1 + len(json.loads(line)["turns"]) for line in
                                  (tmp_path / "rft" / "attempts.jsonl").read_text().splitlines())
    rows = [json.loads(line) for line in (tmp_path / "rft" / "data" / "train.jsonl").read_text().splitlines()]
    assert rows and all(r["family"] == "always" for r in rows)
    assert res.adapter_gguf is not None and res.adapter_gguf.is_file() and s["sft_steps"] == 1
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")   # resumed from another directory: finished, nothing played twice
    again = train_rft(RFTConfig(**{**config.__dict__, "out": tmp_path / "rft"}), show_progress=False)
    assert again.summary == s and again.adapter_gguf == tmp_path / "rft" / "adapter.gguf"
    assert json.loads((tmp_path / "rft" / "rft.json").read_text())["sft_steps"] == 1
    assert (tmp_path / "rft" / "attempts.partial.jsonl").read_text().count("\n") == 4
    # a second round: the first round's policy (loaded with its adapter) attempts, and its adapter is trained
    # further; the attempts are the first round's, given as the journal of attempts already made (what the
    # round's model writes at these settings is prose as often as not, and prose is not learned)
    (tmp_path / "rft2").mkdir()
    shutil.copy(tmp_path / "rft" / "attempts.partial.jsonl", tmp_path / "rft2" / "attempts.partial.jsonl")
    # with an anchor: the never-solved task's first prompt, answered by the reference (the base model, no adapter)
    write_task_file(tmp_path / "anchor.jsonl", [("terminal", never, ())])
    second = train_rft(RFTConfig(**{**config.__dict__, "out": tmp_path / "rft2", "policy": str(tmp_path / "rft"),
                                    "anchor_tasks": tmp_path / "anchor.jsonl"}), show_progress=False)
    anchor = [json.loads(line) for line in (tmp_path / "rft2" / "data" / "train.jsonl").read_text().splitlines()][-1]
    reference = PolicySpec("embedded").make("terminal")
    env = task_env_factory("terminal", "real")()
    start = Trajectory(id="x", domain="terminal", task=never.instruction, system_prompt="",
                       initial_observation=env.reset(never))
    env.close()
    assert anchor["id"] == "terminal/never/anchor" and anchor["family"] == "never"
    assert anchor["prompt"] == agent_messages(domains.get("terminal"), never, start.initial_observation, [], [])
    reference.act(never, start)
    assert anchor["completion"] == [{"role": "assistant", "content": reference.record()["agent_answers"][0]}]
    assert second.summary["anchor_examples"] == 1 and second.summary["real_steps"] == s["real_steps"] + 1
    record = json.loads((tmp_path / "rft2" / "lwm_train.json").read_text())["settings"]
    assert record["model"] == "embedded"   # what lwm agent eval --policy rft2 applies the adapter to
    assert Path(record["init_adapter"]) == (tmp_path / "rft" / "adapter").resolve()
    assert second.summary["settings"]["model"] == str((tmp_path / "rft").resolve())
    assert second.summary["attempts"] == 4 and second.adapter_gguf and second.adapter_gguf.is_file()
    none = RFTConfig(out=tmp_path / "none", tasks_file=tmp_path / "tasks.jsonl", domains=("terminal",), samples=1,
                     backend="real", threshold=1.0)
    write_task_file(tmp_path / "never.jsonl", [("terminal", never, ())])
    none.tasks_file = tmp_path / "never.jsonl"
    with pytest.raises(ValueError, match="no attempt of 1 was accepted"):
        train_rft(none, show_progress=False)
