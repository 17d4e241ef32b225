"""Verdict data (lwm data verdicts): attempts, labels from the real verifier, the split by
family, balance, resume, and bad input."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from conftest import needs_sandbox
from typer.testing import CliRunner

from lwm.cli import app
from lwm.data.verdicts import (
    VerdictDataConfig,
    attempts,
    balance,
    build_verdict_data,
    by_task,
    labelled_episodes,
    mutate,
    task_of,
)
from lwm.domains.tasks import families
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.schema import Provenance, Trajectory, Turn
from lwm.verdict import ACHIEVED, NOT_ACHIEVED


def _family(domain, name):
    return next(f for f in families(domain) if f.name == name)


def test_mutate_changes_one_of_the_tasks_values_everywhere_the_solution_has_it():
    task, solution = _family("terminal", "create-file").generate(3)
    mutated = mutate(task, solution, random.Random(0))
    assert mutated is not None and mutated != solution
    assert task.check.expect in solution[0] and task.check.expect not in mutated[0]   # the word, changed
    task, solution = _family("db", "insert-row").generate(1)
    assert mutate(task, solution, random.Random(1)) != solution
    # a solution that holds none of the instruction's values has no mutation
    assert mutate(task.__class__(name="t", instruction="Do it."), ("ls",), random.Random(0)) is None


def test_attempts_cover_the_kinds_that_apply_and_never_repeat_actions():
    task, solution = _family("terminal", "create-file").generate(0)   # one action
    sibling = _family("terminal", "create-file").generate(1)[1]
    kinds = dict(attempts("terminal", task, solution, sibling, ("reference", "checked", "looked", "empty", "truncated",
                                                                  "mutated", "sibling", "wrong", "prose"),
                          random.Random(0)))
    assert "truncated" not in kinds   # a one-action task has nothing to leave out
    assert kinds["reference"] == solution and kinds["empty"] == ()
    assert kinds["checked"][:-1] == solution and kinds["looked"][1:] == solution
    assert json.loads(kinds["prose"][0])[0]["keystrokes"].endswith("\n")   # typed into the shell
    assert len(set(kinds.values())) == len(kinds)
    task, solution = _family("db", "transfer").generate(0)   # two actions
    kinds = dict(attempts("db", task, solution, solution, ("truncated", "sibling", "prose"), random.Random(0)))
    assert kinds["truncated"] == solution[:1]
    assert "sibling" not in kinds   # the same actions as the reference teach nothing
    assert not kinds["prose"][0].startswith("SELECT")


def _traj(i, domain="db", family="insert-row", reward=1.0, kind="reference", **meta):
    return Trajectory(id=f"{domain}/{family}-{i}/{kind}", domain=domain, task="t", system_prompt="",
                      turns=[Turn(index=1, action="a", observation="o", provenance=Provenance(kind="real"))],
                      reward=reward, metadata={"family": family, "episode": f"{family}-{i}", "kind": kind, **meta})


def test_balance_keeps_every_positive_and_takes_negative_kinds_in_turn():
    eps = [_traj(i) for i in range(4)] + [_traj(10 + i, reward=0.0, kind="empty") for i in range(6)] + \
        [_traj(20 + i, reward=0.0, kind="mutated") for i in range(2)]
    out = balance(eps, 1.0, seed=0)
    assert sum(t.reward == 1.0 for t in out) == 4
    assert Counter(t.metadata["kind"] for t in out if t.reward == 0.0) == {"empty": 2, "mutated": 2}
    assert len(balance(eps, 2.0, seed=0)) == 12


def test_balance_spends_few_negatives_on_empty_episodes_unless_nothing_else_is_left():
    eps = [_traj(i) for i in range(10)] + [_traj(10 + i, reward=0.0, kind="empty") for i in range(10)] + \
        [_traj(20 + i, reward=0.0, kind="mutated") for i in range(6)] + \
        [_traj(30 + i, reward=0.0, kind="sibling") for i in range(6)]
    kinds = Counter(t.metadata["kind"] for t in balance(eps, 1.0, seed=0, easy_share=0.1) if t.reward == 0.0)
    assert kinds == {"empty": 1, "mutated": 5, "sibling": 4}
    kinds = Counter(t.metadata["kind"] for t in balance(eps, 2.0, seed=0, easy_share=0.1) if t.reward == 0.0)
    assert kinds == {"empty": 8, "mutated": 6, "sibling": 6}   # the hard kinds ran out
    with pytest.raises(ValueError, match="easy_share"):
        VerdictDataConfig(out="x", easy_share=1.5)
    for ratio in (float("inf"), float("nan"), 0.0):   # inf reached balance() and overflowed there
        with pytest.raises(ValueError, match="negatives_per_positive must be a finite number > 0"):
            VerdictDataConfig(out="x", negatives_per_positive=ratio)
    with pytest.raises(ValueError, match="nothing to label"):
        VerdictDataConfig(out="x", tasks=0, heldout_tasks=0)


def test_by_task_puts_a_tasks_success_beside_its_failures_in_a_seeded_order():
    eps = [_traj(i, reward=float(k == "reference"), kind=k) for i in range(5)
           for k in ("reference", "mutated", "sibling")]
    random.Random(0).shuffle(eps)
    out = by_task(eps, seed=1)
    assert sorted(t.id for t in out) == sorted(t.id for t in eps)   # nothing lost or repeated
    tasks = [t.metadata["episode"] for t in out]
    assert all(len(set(tasks[k:k + 3])) == 1 for k in range(0, 15, 3))   # each task's three together
    assert out == by_task(eps, seed=1) and tasks != [t.metadata["episode"] for t in by_task(eps, seed=2)]
    with pytest.raises(ValueError, match="unknown order 'sorted' \\(one of shuffled, by-task, traces-first\\)"):
        VerdictDataConfig(out="x", order="sorted")


def test_traces_first_puts_the_tasks_holding_a_trace_before_the_others():
    eps = [_traj(i, reward=float(k == "reference"), kind=k) for i in range(6) for k in ("reference", "mutated")]
    traced = {2, 5}
    eps += [t.model_copy(update={"id": f"{t.id}/trace"}) for t in (_traj(i, reward=0.0, kind="trace") for i in traced)]
    out = by_task(eps, seed=1, traces_first=True)
    assert sorted(t.id for t in out) == sorted(t.id for t in eps)
    tasks = list(dict.fromkeys(t.metadata["episode"] for t in out))
    assert {tasks[0], tasks[1]} == {_traj(i).metadata["episode"] for i in traced}
    rest = [k for k in dict.fromkeys(t.metadata["episode"] for t in by_task(eps, seed=1)) if k not in tasks[:2]]
    assert tasks[2:] == rest   # the seeded order of the others kept
    with pytest.raises(ValueError, match="traces-first puts the episodes given with --from first"):
        VerdictDataConfig(out="x", order="traces-first")


def test_labelled_episodes_read_real_and_replayed_simulated_episodes_and_count_what_they_skip(tmp_path):
    real = _traj(1)
    sim = _traj(2, reward=1.0, kind="x", backend="sim", real_reward=0.0)   # the simulator said yes, reality no
    unlabelled = _traj(3).model_copy(update={"reward": None})
    stranger = _traj(4, family="no-such-family")
    held = _traj(5, domain="db", family="transfer", reward=0.0)
    path = tmp_path / "episodes.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in (real, sim, unlabelled, stranger, held)))
    skipped = Counter()
    got = labelled_episodes([path], skipped)
    assert [(t.reward, t.metadata["split"], t.metadata["simulated"]) for t, _ in got] == \
        [(1.0, "train", False), (0.0, "train", True), (0.0, "heldout", False)]
    assert got[0][0].metadata["kind"] == "reference" and got[1][0].metadata["kind"] == "x"
    assert skipped == {"no real verdict": 1, "unknown family db/no-such-family": 1}
    # the task comes back from the family and the seed in its name
    assert got[0][1] == _family("db", "insert-row").generate(1)[0]
    assert task_of(stranger) is None
    path.write_text(real.model_dump_json() + "\n" + '{"id": "x"}\n')
    with pytest.raises(RowFormatError, match=r"episodes.jsonl:2: .*(domain|system_prompt)"):
        labelled_episodes([path])


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown kind nonsense"):
        VerdictDataConfig(out=tmp_path, kinds=("reference", "nonsense"))
    with pytest.raises(ValueError, match="no task families for web"):
        VerdictDataConfig(out=tmp_path, domains=("web",))
    result = CliRunner().invoke(app, ["data", "verdicts", "--out", str(tmp_path / "v"), "--domain", "web"])
    assert result.exit_code == 2 and "no task families for web" in result.output


@needs_sandbox
def test_real_episodes_are_labelled_by_the_real_verifier_split_by_family_and_resumed(tmp_path):
    out = tmp_path / "verdicts"
    config = VerdictDataConfig(out=out, domains=("terminal",), tasks=2, heldout_tasks=1,
                               kinds=("reference", "checked", "empty", "mutated", "wrong", "prose"))
    res = build_verdict_data(config, show_progress=False)
    assert not res.failed and res.summary["unverified"] == {}
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    by_kind = {}
    for e in episodes:
        assert e["reward"] == e["metadata"]["label"]
        assert all(t["provenance"]["kind"] == "real" for t in e["turns"])
        assert (e["metadata"]["kind"] == "empty") == (not e["turns"])
        by_kind.setdefault(e["metadata"]["kind"], set()).add(e["reward"])
    # the verifier's labels: solutions achieve, the rest does not (the prose is typed into the shell)
    assert by_kind["reference"] == by_kind["checked"] == {1.0}
    assert by_kind["empty"] == by_kind["wrong"] == by_kind["prose"] == {0.0}
    assert by_kind["mutated"] == {0.0}
    held = {f.name for f in families("terminal", "heldout")}
    heldout_rows = [json.loads(line) for line in (out / "heldout.jsonl").read_text().splitlines()]
    assert heldout_rows and all(r["family"] in held for r in heldout_rows)
    trained = [json.loads(line) for name in ("train", "validation")
               for line in (out / f"{name}.jsonl").read_text().splitlines()]
    assert trained and not {r["family"] for r in trained} & held
    for r in trained + heldout_rows:   # TRL prompt-completion rows with the fixed answers
        assert r["completion"][0]["content"] == (ACHIEVED if r["label"] else NOT_ACHIEVED)
        assert [m["role"] for m in r["prompt"]] == ["system", "user"]
    assert sum(r["label"] for r in trained) * 2 == len(trained)   # balanced
    again = build_verdict_data(config, show_progress=False)
    assert again.summary["episodes"] == res.summary["episodes"]
    assert (out / "episodes.partial.jsonl").read_text().count("\n") == 3   # nothing played twice


def test_every_episode_of_earlier_runs_is_kept_whatever_the_balance(tmp_path):
    # a policy's sampled attempts fail far more often than they succeed; they are the
    # histories the reward model reads, so none is sampled away by the balance
    runs = tmp_path / "attempts.jsonl"
    attempts = [_traj(i, reward=0.0, kind="x", backend="sim", real_reward=0.0) for i in range(8)]
    attempts.append(_traj(9, reward=0.0, kind="x", backend="sim", real_reward=1.0))
    # an attempt that ran nothing: the simulator never asks the reward model about it
    attempts.append(_traj(10, reward=0.0, kind="x", backend="sim", real_reward=0.0, reward_source="unchanged"))
    runs.write_text("".join(t.model_dump_json() + "\n" for t in attempts))
    res = build_verdict_data(VerdictDataConfig(out=tmp_path / "v", domains=("db",), tasks=0, heldout_tasks=0,
                                               from_runs=(runs,), negatives_per_positive=1.0), show_progress=False)
    rows = [json.loads(line) for name in ("train", "validation")
            for line in (tmp_path / "v" / f"{name}.jsonl").read_text().splitlines()]
    assert sorted(r["label"] for r in rows) == [0] * 8 + [1]
    assert res.summary["examples"]["train"] + res.summary["examples"]["validation"] == 9
    assert res.summary["traces_skipped"] == {"ran nothing (its reward is its start's)": 1}


def test_episodes_of_earlier_runs_are_added_with_their_real_label(tmp_path):
    # the simulator's own episodes, labelled by their replay in the real environment: the
    # reward model must not learn to trust the world model's optimism
    runs = tmp_path / "episodes.jsonl"
    said_yes = [_traj(i, reward=1.0, kind="x", backend="sim", real_reward=0.0) for i in range(3)]
    real_yes = [_traj(10 + i, reward=1.0, kind="x", backend="real") for i in range(3)]
    runs.write_text("".join(t.model_dump_json() + "\n" for t in said_yes + real_yes))
    res = build_verdict_data(VerdictDataConfig(out=tmp_path / "v", domains=("db",), tasks=0, heldout_tasks=0,
                                               from_runs=(runs,)), show_progress=False)
    assert res.summary["traces"] == 6 and res.summary["episodes"] == 6
    rows = [json.loads(line) for name in ("train", "validation")
            for line in (tmp_path / "v" / f"{name}.jsonl").read_text().splitlines()]
    assert sorted(r["label"] for r in rows) == [0, 0, 0, 1, 1, 1] and {r["kind"] for r in rows} == {"x"}
    assert all(r["id"].endswith("/trace") for r in rows)
    # the same file twice is read once; an episode of a domain not chosen is left out and said
    other = tmp_path / "terminal.jsonl"
    other.write_text(_traj(1, domain="terminal", family="create-file").model_dump_json() + "\n")
    (tmp_path / "sub").mkdir()
    twice = build_verdict_data(VerdictDataConfig(out=tmp_path / "v2", domains=("db",), tasks=0, heldout_tasks=0,
                                                 from_runs=(runs, tmp_path / "sub" / ".." / runs.name, other)),
                               show_progress=False)
    assert twice.summary["traces"] == 6 and twice.summary["from_runs"] == [str(runs), str(other)]
    assert twice.summary["traces_skipped"] == {"domain terminal not chosen (--domain)": 1}
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(DataNotFoundError, match="empty.jsonl holds no episode$"):
        build_verdict_data(VerdictDataConfig(out=tmp_path / "v3", domains=("db",), tasks=0, heldout_tasks=0,
                                             from_runs=(empty,)), show_progress=False)
    weighted = build_verdict_data(VerdictDataConfig(out=tmp_path / "v", domains=("db",), tasks=0, heldout_tasks=0,
                                                    from_runs=(runs,), trace_weight=3), show_progress=False)
    train = [json.loads(line) for line in (tmp_path / "v" / "train.jsonl").read_text().splitlines()]
    assert weighted.summary["trace_weight"] == 3 and len(train) == 3 * (6 - weighted.summary["examples"]["validation"])
    build_verdict_data(VerdictDataConfig(out=tmp_path / "v", domains=("db",), tasks=0, heldout_tasks=0,
                                         from_runs=(runs,), trace_weight=3, order="traces-first"), show_progress=False)
    ordered = [json.loads(line)["id"] for line in (tmp_path / "v" / "train.jsonl").read_text().splitlines()]
    assert sorted(ordered) == sorted(r["id"] for r in train)
    assert all(len(set(ordered[k:k + 3])) == 1 for k in range(0, len(ordered), 3))   # a task's repeats together
    with pytest.raises(ValueError, match="trace_weight must be a whole number in \\[1, 100\\]"):
        VerdictDataConfig(out=tmp_path / "x", trace_weight=0)
    with pytest.raises(ValueError, match="weighs the episodes given with --from"):
        VerdictDataConfig(out=tmp_path / "x", trace_weight=2)
    # nothing usable: the reasons are said, and the command fails
    web = tmp_path / "web.jsonl"
    web.write_text(_traj(1, domain="web").model_dump_json() + "\n")
    result = CliRunner().invoke(app, ["data", "verdicts", "--out", str(tmp_path / "w"), "--domain", "db", "--tasks",
                                      "0", "--heldout-tasks", "0", "--from", str(web), "--no-progress"])
    assert result.exit_code == 1 and "no task families in web" in result.output


def test_an_episode_read_twice_counts_once_and_a_bad_real_label_is_named(tmp_path):
    # a run's episodes.jsonl beside its partial journal, a copy, a hard link: the same episodes
    runs = tmp_path / "episodes.jsonl"
    runs.write_text("".join(_traj(i, backend="sim", real_reward=0.0).model_dump_json() + "\n" for i in range(3)))
    (tmp_path / "episodes.partial.jsonl").write_text(runs.read_text())
    skipped = Counter()
    got = labelled_episodes([runs, tmp_path / "episodes.partial.jsonl"], skipped)
    assert len(got) == 3 and skipped == {"read twice": 3}
    bad = tmp_path / "bad.jsonl"
    for label in ("yes", [1], 7.0, -0.5, True, float("nan")):
        second = _traj(2, backend="sim").model_dump(mode="json")
        second["metadata"]["real_reward"] = label   # as written by hand or another tool (NaN included)
        bad.write_text(_traj(1, backend="sim", real_reward=0.0).model_dump_json() + "\n" + json.dumps(second) + "\n")
        with pytest.raises(RowFormatError, match=r"bad.jsonl:2: metadata.real_reward must be a number in \[0, 1\]"):
            labelled_episodes([bad])
