"""Collection from the real terminal: double runs, volatility, rows, resume."""

import json

from conftest import needs_sandbox

from lwm import domains
from lwm.data import collect as C
from lwm.domains.terminal import keys
from lwm.envs.base import Task
from lwm.envs.episode import Script
from lwm.schema import read_rows

pytestmark = needs_sandbox


def test_bundled_suite_meets_its_spec():
    core, full = domains.get("terminal").scripts(), domains.get("terminal").scripts(extended=True)
    assert len(core) >= 40 and sum(len(e.actions) for e in core) >= 200
    assert len({e.task.name for e in full}) == len(full) > len(core)
    families = {e.task.family for e in core}
    assert families >= {"files", "pipes", "errors", "shell-state", "heredoc", "python", "long-running",
                        "ctrl-c", "git"}


def test_volatile_output_is_found_by_two_real_runs():
    ep = Script(Task("volatile", setup=()), (keys("echo stable; date +%s%N\n"), keys("echo done\n")))
    runs = [C.play_script(ep, "terminal", run=k) for k in range(2)]
    marked = C.mark_volatile(runs)
    first, second = marked.turns
    stamp = first.observation.split("\n")[2]
    assert [first.observation[s:e] for s, e in first.volatile] == [stamp]
    # The timestamp is still on the next screen; the new output ("done") is stable.
    assert [second.observation[s:e] for s, e in second.volatile] == [stamp]
    assert second.observation.split("\n")[-2] == "done"
    assert runs[0].turns[0].provenance.kind == "real" and runs[1].turns[0].provenance.run == 1


def test_collect_writes_rows_and_resumes(tmp_path, monkeypatch):
    cfg = C.CollectConfig(out=tmp_path, episodes=2, workers=2)
    res = C.collect(cfg, show_progress=False)
    rows = list(read_rows(res.rows_path))
    n_turns = sum(len(e.actions) for e in domains.get("terminal").scripts()[:2])
    assert len(rows) == n_turns and res.trajectories == 4 and res.played == 4 and not res.failed
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["real_steps"] == 2 * n_turns and manifest["real_steps_per_second_per_env"] > 0
    # two workers: the four runs overlap, so their summed time exceeds the collection's
    assert manifest["wall_seconds"] == round(res.seconds, 2) < manifest["play_seconds"]

    # Lose one finished run (and leave a torn line): only that run is played again.
    partial = tmp_path / "trajectories.partial.jsonl"
    lines = partial.read_text().splitlines(keepends=True)
    partial.write_text("".join(lines[:-1]) + lines[-1][:50])
    played = []
    real_play = C.play_script
    monkeypatch.setattr(C, "play_script", lambda *a, **k: played.append(a) or real_play(*a, **k))
    again = C.collect(cfg, show_progress=False)
    assert len(played) == 1 and again.trajectories == 4 and again.played == 1
    assert [r.model_dump(exclude={"volatile_spans"}) for r in read_rows(again.rows_path)] == \
        [r.model_dump(exclude={"volatile_spans"}) for r in rows]


def test_explore_collects_seeded_real_episodes(tmp_path):
    res = C.collect(C.CollectConfig(out=tmp_path, explore=3, seed=5, runs=1, workers=3), show_progress=False)
    trajs = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    scripts = domains.get("terminal").explore_scripts(5, 3)
    assert res.trajectories == 3 and not res.failed
    assert [t["id"] for t in trajs] == [f"terminal/explore-5-{i}/run0" for i in range(3)]
    assert {t["metadata"]["family"] for t in trajs} == {"explore"}
    for traj, script in zip(trajs, scripts):
        assert [turn["action"] for turn in traj["turns"]] == list(script.actions)
        # every command ran in the real shell: the screen ends at a fresh prompt, no command missing,
        # no file missing but the one named .missing on purpose
        last = traj["turns"][-1]["observation"]
        assert last.rstrip().endswith("root@sandbox:/app#") and "command not found" not in last
        for turn in traj["turns"]:
            assert "No such file" not in turn["observation"] or ".missing" in turn["observation"]


def test_explore_settings_that_cannot_hold_are_refused(tmp_path):
    import pytest

    from lwm.errors import RunMismatchError

    for config, message in ((C.CollectConfig(out=tmp_path / "x", domain="db", explore=2), "no exploration episodes"),
                            (C.CollectConfig(out=tmp_path / "x", seed=3), "give --explore"),
                            (C.CollectConfig(out=tmp_path / "x", explore=2, extended=True), "give one of them")):
        with pytest.raises(ValueError, match=message):
            C.collect(config, show_progress=False)
    assert not (tmp_path / "x").exists()
    # a directory holds one collection: another seed (or the suite) would replace its files
    first = C.collect(C.CollectConfig(out=tmp_path / "y", explore=1, seed=1, runs=1), show_progress=False)
    before = (tmp_path / "y" / "trajectories.jsonl").read_text()
    for other in (C.CollectConfig(out=tmp_path / "y", explore=1, seed=2, runs=1),
                  C.CollectConfig(out=tmp_path / "y", episodes=1, runs=1)):
        with pytest.raises(RunMismatchError, match="explore_seed"):
            C.collect(other, show_progress=False)
    assert (tmp_path / "y" / "trajectories.jsonl").read_text() == before and first.trajectories == 1
    # more episodes of the same seed resume it: the first is not played again
    more = C.collect(C.CollectConfig(out=tmp_path / "y", explore=2, seed=1, runs=1), show_progress=False)
    assert more.played == 1 and more.trajectories == 2
