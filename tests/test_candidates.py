"""Candidate scoring: the candidates as the model writes them, whole-answer log-probabilities
in one batch, the choice, and the switch in lwm eval and the simulator."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from conftest import make_data
from typer.testing import CliRunner

from lwm.candidates import candidate_scoring, candidates, choose
from lwm.cli import app
from lwm.data.build import format_target
from lwm.envs.base import Task
from lwm.envs.episode import BROKEN
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.eval.baselines import RowBaseline
from lwm.eval.runner import EvalConfig
from lwm.models import load_model
from lwm.models.base import FunctionChatModel, SamplingParams
from lwm.prediction import full_observation, request
from lwm.retrieval import IndexEntry, TransitionIndex, build_index, episode_of
from lwm.schema import Provenance, Trajectory, Turn, rows_from_trajectory, write_rows, write_trajectories
from lwm.sim.env import SimEnv

PROMPT = "root@sandbox:/app#"


def _row(turns: list[tuple[str, str]]):
    traj = Trajectory(id="terminal/t/run0", domain="terminal", system_prompt="SYS", initial_observation=PROMPT,
                      turns=[Turn(index=i, action=json.dumps([{"keystrokes": f"{cmd}\n", "duration": 0.3}]),
                                  observation=obs, provenance=Provenance(kind="real"))
                             for i, (cmd, obs) in enumerate(turns, start=1)])
    return rows_from_trajectory(traj)[-1]


SCREEN = [("echo a", f"{PROMPT} echo a\na\n{PROMPT}"), ("echo b", f"{PROMPT} echo a\na\n{PROMPT} echo b\nb\n{PROMPT}"),
          ("touch f", f"{PROMPT} echo a\na\n{PROMPT} echo b\nb\n{PROMPT} touch f\n{PROMPT}")]


def test_each_candidate_is_written_in_the_rows_mode_and_draws_back_into_itself():
    row = _row(SCREEN)
    previous = SCREEN[1][1]
    options = candidates(row, "change", "b\n" + PROMPT)
    # the previous screen is not a candidate: keys typed at a prompt are echoed (Domain.ground_change)
    assert list(options) == ["model", "trivial"]
    assert options["trivial"][1] == f"{previous} touch f\n{PROMPT}" == SCREEN[2][1]   # the real screen, here
    for written, full in options.values():
        assert full_observation(row, written, "change") == full   # the change draws exactly that screen
    assert options["trivial"][0] != options["trivial"][1]          # … and is shorter than it
    full = candidates(row, "full", SCREEN[2][1])                   # the model wrote the trivial guess
    assert list(full) == ["model", "repeat-last"] and full["repeat-last"] == (previous, previous)


def test_a_candidate_the_action_alone_rules_out_is_left_out():
    error = '[error]\n  File "<cell 1>", line 1\n    x = (\n        ^\nSyntaxError: \'(\' was never closed'
    traj = Trajectory(id="code/t/run0", domain="code", system_prompt="", turns=[
        Turn(index=1, action="x = (", observation=error, provenance=Provenance(kind="real")),
        Turn(index=2, action="x = 1", observation="(no output)", provenance=Provenance(kind="real"))])
    row = rows_from_trajectory(traj)[-1]
    # the previous observation, a syntax error, cannot be this cell's answer: it compiles
    assert candidates(row, "full", "Out[2]: 1") == {"model": ("Out[2]: 1", "Out[2]: 1"),
                                                     "trivial": ("(no output)", "(no output)")}
    invented = error.replace("<cell 1>", "<cell 2>")   # the model's own impossible answer is left out too
    assert candidates(row, "full", invented) == {"trivial": ("(no output)", "(no output)")}


def test_answers_are_scored_in_one_batch_as_token_by_token():
    model = load_model("embedded")
    row = _row(SCREEN)
    messages, _ = request(row, "full")
    answers = [format_target(SCREEN[2][1]), format_target("bash: touch: command not found"), ""]
    batched = asyncio.run(model.answer_logprobs(messages, answers))
    llm = model._llm
    prompt = model._chat_tokens(messages)
    reference = []
    for answer in answers[:2]:   # the slow way: one token at a time, the logits after each
        llm.reset()
        llm.eval(prompt[:-1])
        last, total = prompt[-1], 0.0
        for token in llm.tokenize(answer.encode(), add_bos=False, special=False):
            llm.eval([last])
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)
            total += logits[token] - (logits.max() + np.log(np.exp(logits - logits.max()).sum()))
            last = token
        reference.append(total)
    assert batched[2] == 0.0
    assert batched[:2] == pytest.approx(reference, rel=0.02)
    assert batched == asyncio.run(model.answer_logprobs(messages, answers))   # whatever the cache held
    with pytest.raises(ValueError, match="do not fit the context window"):
        asyncio.run(model.answer_logprobs(messages, ["x " * 9000]))


def test_the_likeliest_candidate_wins_and_every_score_is_kept():
    model = load_model("embedded")
    row = _row(SCREEN)
    messages, _ = request(row, "full")
    choice = asyncio.run(choose(model, messages, row, "full", "zzz qqq xxx vvv"))   # gibberish loses
    assert set(choice.scores) == {"model", "repeat-last", "trivial"} and choice.source != "model"
    totals = {s: total for s, (total, _) in choice.scores.items()}
    assert choice.source == max(totals, key=totals.get)
    assert choice.observation == choice.written == candidates(row, "full", "zzz qqq xxx vvv")[choice.source][1]


def test_models_that_cannot_score_whole_answers_are_refused():
    assert candidate_scoring(load_model("embedded")) is False   # off unless asked or the model says so
    assert candidate_scoring(load_model("embedded"), True) is True
    for model in (RowBaseline("trivial"), FunctionChatModel(lambda m: "x")):
        assert candidate_scoring(model) is False
        with pytest.raises(ValueError, match="cannot score whole answers"):
            candidate_scoring(model, True)
    with pytest.raises(ValueError, match="cannot score whole answers"):
        asyncio.run(choose(FunctionChatModel(lambda m: "x"), [], _row(SCREEN), "full", "x"))


def test_lwm_eval_scores_candidates_and_records_the_choice(tmp_path):
    data = make_data(tmp_path, episodes=1, turns=2)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "--model", "embedded", "--data", str(data), "--out", str(out),
                                      "--max-tokens", "24", "--score-candidates", "--no-progress"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for rec in records:
        assert rec["candidate"] in rec["candidate_scores"] and rec["error"] is None
    assert json.loads((out / "run.json").read_text())["score_candidates"] is True
    refused = CliRunner().invoke(app, ["eval", "--model", "baseline:trivial", "--data", str(data),
                                       "--out", str(tmp_path / "b"), "--score-candidates"])
    assert refused.exit_code == 2 and "cannot score whole answers" in refused.output


def _traj(episode: str, run: int, family: str, turns: list[tuple[str, str]], kind: str = "real") -> Trajectory:
    return Trajectory(id=f"terminal/{episode}/run{run}", domain="terminal", system_prompt="SYS",
                      initial_observation=PROMPT, metadata={"episode": episode, "family": family},
                      turns=[Turn(index=i, action=json.dumps([{"keystrokes": f"{cmd}\n", "duration": 0.3}]),
                                  observation=obs, provenance=Provenance(kind=kind))
                             for i, (cmd, obs) in enumerate(turns, start=1)])


def test_the_index_holds_real_turns_and_never_returns_the_rows_own_episode(tmp_path):
    own = _traj("notes", 0, "files", [("cat notes.txt", f"{PROMPT} cat notes.txt\nhello\n{PROMPT}")])
    again = _traj("notes", 1, "files", [("cat notes.txt", f"{PROMPT} cat notes.txt\nhello\n{PROMPT}")])
    other = _traj("todo", 0, "files", [("cat note.txt", f"{PROMPT} cat note.txt\nbuy milk\n{PROMPT}")])
    far = _traj("git", 0, "vcs", [("git status", f"{PROMPT} git status\nfatal: not a git repository\n{PROMPT}")])
    simulated = _traj("sim", 0, "files", [("cat notes.txt", "made up")], kind="simulated")
    path = tmp_path / "trajectories.jsonl"
    write_trajectories(path, [own, again, other, far, simulated])
    index = build_index([tmp_path], tmp_path / "index.jsonl")
    assert len(index) == 3 and len(TransitionIndex.load(tmp_path / "index.jsonl")) == 3   # runs repeat, sims not
    action = own.turns[0].action
    assert [t.episode for t in index.nearest("terminal", action, exclude_episode=episode_of(own.id))] == ["terminal/todo"]
    assert index.nearest("terminal", action, exclude_episode="terminal/notes", exclude_families=["files"]) == []
    assert index.nearest("web", action) == []
    left = build_index([path], tmp_path / "train.jsonl", leave_out_families=["vcs"])
    assert {t.family for ts in left.by_domain.values() for t in ts} == {"terminal/files"}
    row = rows_from_trajectory(own)[-1]
    near = index.nearest("terminal", action, exclude_episode=episode_of(row.id))
    for mode in ("change", "full"):   # a screen holds its episode: only the same keys give this one's
        assert "neighbour-1" not in candidates(row, mode, "x\n" + PROMPT, near)
    same = IndexEntry("terminal", "terminal/todo", "files", PROMPT, action, f"{PROMPT} cat notes.txt\nbuy milk\n{PROMPT}")
    for mode in ("change", "full"):
        assert candidates(row, mode, "x\n" + PROMPT, [same])["neighbour-1"][1] == same.observation   # on this screen


def test_a_bad_index_is_refused_with_file_and_line(tmp_path):
    with pytest.raises(DataNotFoundError, match="no transition index"):
        TransitionIndex.load(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"domain": "terminal"}\n')
    with pytest.raises(RowFormatError, match="bad.jsonl:1: not a transition"):
        TransitionIndex.load(bad)
    with pytest.raises(DataNotFoundError, match="no trajectories.jsonl or episodes.jsonl"):
        build_index([tmp_path / "nowhere"], tmp_path / "i.jsonl")
    write_trajectories(tmp_path / "t" / "trajectories.jsonl",
                       [_traj("sim", 0, "files", [("ls", "x")], kind="simulated")])
    with pytest.raises(DataNotFoundError, match="no real transition"):
        build_index([tmp_path / "t"], tmp_path / "i.jsonl")
    result = CliRunner().invoke(app, ["data", "index", "--from", str(tmp_path / "nowhere"), "--out",
                                      str(tmp_path / "i.jsonl")])
    assert result.exit_code == 2 and "no trajectories.jsonl" in result.output


def test_lwm_eval_with_an_index_scores_the_neighbours(tmp_path):
    episodes = [_traj("notes", 0, "files", [("cat notes.txt", f"{PROMPT} cat notes.txt\nhello\n{PROMPT}")]),
                _traj("todo", 0, "files", [("cat notes.txt", f"{PROMPT} cat notes.txt\nbuy milk\n{PROMPT}")])]
    data = tmp_path / "data"
    write_trajectories(data / "trajectories.jsonl", episodes)
    write_rows(data / "terminal_test.jsonl", [r for t in episodes for r in rows_from_trajectory(t)])
    made = CliRunner().invoke(app, ["data", "index", str(data), "--out", str(tmp_path / "index.jsonl")])
    assert made.exit_code == 0 and "2 real transitions" in made.output, made.output
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "--model", "embedded", "--data", str(data), "--out", str(out),
                                      "--max-tokens", "16", "--index", str(tmp_path / "index.jsonl"),
                                      "--neighbours", "1", "--no-progress"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert all("neighbour-1" in rec["candidate_scores"] for rec in records)   # the other episode's turn
    assert json.loads((out / "run.json").read_text())["retrieval"]["neighbours"] == 1
    summary = json.loads((out / "summary.json").read_text())["candidates"]
    assert summary["rows_with_a_neighbour"] == 2 and summary["errors"] == 0
    assert sum(summary["chosen"]["terminal"].values()) == 2 and "candidates chosen" in result.output
    refused = CliRunner().invoke(app, ["eval", "--model", "embedded", "--data", str(data), "--out",
                                       str(tmp_path / "r2"), "--index", str(tmp_path / "index.jsonl"),
                                       "--no-score-candidates"])
    assert refused.exit_code == 2 and "need candidate scoring" in refused.output
    alone = CliRunner().invoke(app, ["eval", "--model", "embedded", "--data", str(data), "--out",
                                     str(tmp_path / "r3"), "--neighbours", "3"])   # no index to take them from
    assert alone.exit_code == 2 and "give index (--index)" in alone.output and not (tmp_path / "r3").exists()
    with pytest.raises(ValueError, match="neighbours must be in \\[1, 8\\], got 9"):
        EvalConfig(out=tmp_path / "r4", index=tmp_path / "index.jsonl", neighbours=9)
    typo = CliRunner().invoke(app, ["eval", "--data", str(data), "--out", str(tmp_path / "r5"), "--index",
                                    str(tmp_path / "idnex.jsonl")])   # named before the model loads
    assert typo.exit_code == 2 and "no transition index" in typo.output
    with pytest.raises(ValueError, match="a whole number, got 2.5"):   # nearest() would return every match
        EvalConfig(out=tmp_path / "r4", index=tmp_path / "index.jsonl", neighbours=2.5)


def test_the_simulator_scores_candidates_when_asked():
    env = SimEnv("terminal", load_model("embedded"), score_candidates=True, judge_rewards=False,
                 sampling=SamplingParams(max_tokens=24))
    env.reset(Task("t"), initial_observation=PROMPT)
    step = env.step(json.dumps([{"keystrokes": "touch f\n", "duration": 0.3}]))
    assert step.info["candidate"] in ("model", "repeat-last", "trivial")
    assert step.observation == env.trajectory.turns[-1].observation
    with pytest.raises(ValueError, match="cannot score whole answers"):
        SimEnv("terminal", FunctionChatModel(lambda m: "x"), score_candidates=True)


def test_the_index_refuses_what_would_lose_data_or_leave_nothing_out(tmp_path):
    broken = _traj("notes", 0, "files", [("cat notes.txt", f"{PROMPT} cat notes.txt\nhello\n{PROMPT}"),
                                         ("tmux kill-server", "[sandbox broken] SandboxError: tmux server died")])
    broken.turns[-1].provenance = Provenance(kind="real", source=f"terminal{BROKEN}")
    path = tmp_path / "data" / "trajectories.jsonl"
    write_trajectories(path, [broken])
    (tmp_path / "data" / "rl").mkdir()
    (tmp_path / "data" / "rl" / "episodes.jsonl").write_text('{"step": 1, "call": 0, "domain": "terminal"}\n')
    index = build_index([tmp_path / "data"], tmp_path / "index.jsonl")   # the training log is skipped
    assert [t.action for t in index.by_domain["terminal"]] == [broken.turns[0].action]   # not the broken turn
    before = path.read_bytes()
    for out in (path, tmp_path / "elsewhere" / "trajectories.jsonl"):
        with pytest.raises(ValueError, match="would replace a trajectory file"):
            build_index([tmp_path / "data"], out)
    assert path.read_bytes() == before
    with pytest.raises(ValueError, match="no transition of the families 'nosuch' to leave out.*terminal/files"):
        build_index([path], tmp_path / "i.jsonl", leave_out_families=["nosuch"])
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DataNotFoundError, match="holds no transition"):
        TransitionIndex.load(tmp_path / "empty.jsonl")
