"""``lwm agent compare``: real ``lwm agent eval`` runs compared task by task."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from conftest import needs_sandbox
from servers import chat_stub, completion
from typer.testing import CliRunner

from lwm.cli import app
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.eval.agent import AgentEvalConfig, agent_eval
from lwm.eval.compare import compare_agent_runs
from lwm.metrics import sign_test
from lwm.schema import read_trajectories


def test_the_sign_test_is_exact_and_two_sided():
    assert sign_test(0, 0) == 1.0 and sign_test(1, 0) == 1.0 and sign_test(1, 1) == 1.0
    assert sign_test(5, 0) == sign_test(0, 5) == 2 / 32
    assert sign_test(3, 18) == pytest.approx(0.0014896, abs=1e-7)   # the session-14 round three against the base
    assert sign_test(30, 0) == pytest.approx(1.8626e-09, rel=1e-4)   # not rounded to 0
    with pytest.raises(ValueError, match="at least 0"):
        sign_test(-1, 2)


@needs_sandbox
def test_policies_are_compared_task_by_task_on_the_same_tasks(tmp_path):
    tasks = dict(domains=("db",), split="all", tasks=4, seed=5, max_turns=1)
    agent_eval(AgentEvalConfig(out=tmp_path / "oracle", policy="oracle", **tasks), show_progress=False)
    with chat_stub(lambda body: completion("DONE")) as (url, _):   # a policy that stops at once: no success
        agent_eval(AgentEvalConfig(out=tmp_path / "done", policy="quitter", policy_base_url=url, **tasks),
                   show_progress=False)
    c = compare_agent_runs([tmp_path / "oracle", tmp_path / "done"])
    assert c.tasks == 4 and c.backend == "real" and c.policies == ["oracle", "quitter"]
    assert [r["successes"] for r in c.overall] == [4, 0] and c.overall[0]["ci95"] == [0.5101, 1.0]
    assert c.paired[0] is None and c.paired[1] == {"only_this": 0, "only_baseline": 4, "p": 0.125, "only_this_tasks": [],
                                                   "only_baseline_tasks": list(c.paired[1]["only_baseline_tasks"])}
    assert sorted(c.paired[1]["only_baseline_tasks"]) == sorted(
        e.id for e in read_trajectories(tmp_path / "oracle" / "episodes.jsonl")) and c.differing == {}
    assert sum(f["n"] for f in c.families.values()) == 4
    assert all(f["successes"] == [f["n"], 0] for f in c.families.values())
    assert {f["heldout"] for f in c.families.values()} <= {True, False}
    md = c.to_markdown()
    assert "| 0 / 4 | 0.125 |" in md and "100.0 % [51.0, 100.0] (4/4)" in md
    # from the CLI, with the JSON and the report page of both
    result = CliRunner().invoke(app, ["agent", "compare", str(tmp_path / "oracle"), str(tmp_path / "done"),
                                      "--out", str(tmp_path / "c.json"), "--report", str(tmp_path / "c.html")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "c.json").read_text())["paired"][1]["only_baseline"] == 4
    page = (tmp_path / "c.html").read_text()
    assert "quitter" in page and "the runs task by task" in page and "successes per family" in page
    # run again over its own earlier outputs: allowed; over anything else, or inside a run: refused, nothing written
    result = CliRunner().invoke(app, ["agent", "compare", str(tmp_path / "oracle"), str(tmp_path / "done"),
                                      "--out", str(tmp_path / "c.json"), "--report", str(tmp_path / "c.html")])
    assert result.exit_code == 0, result.output
    (tmp_path / "notes.txt").write_text("mine")
    for args, message in ((["--out", str(tmp_path / "notes.txt")], "--out .*notes.txt exists and is not an lwm agent "
                                                                     "compare JSON"),
                          (["--report", str(tmp_path / "notes.txt")], "--report .*notes.txt exists and is not an HTML"),
                          (["--out", str(tmp_path / "oracle" / "summary.json")], "--out .* is inside the compared run"),
                          (["--report", str(tmp_path / "done" / "new.html")], "--report .* is inside the compared run"),
                          (["--out", str(tmp_path / "x.html"), "--report", str(tmp_path / "x.html")], "the same file")):
        result = CliRunner().invoke(app, ["agent", "compare", str(tmp_path / "oracle"), str(tmp_path / "done"), *args])
        assert result.exit_code == 2 and re.search(message, " ".join(result.output.split())), (args, result.output)
    assert (tmp_path / "notes.txt").read_text() == "mine" and not (tmp_path / "done" / "new.html").exists()
    assert not (tmp_path / "x.html").exists()
    # runs of other settings are compared, with a note that their rates measure different things
    agent_eval(AgentEvalConfig(out=tmp_path / "longer", policy="oracle", **{**tasks, "max_turns": 3}),
               show_progress=False)
    assert compare_agent_runs([tmp_path / "oracle", tmp_path / "longer"]).differing == {"max_turns": [1, 3]}
    assert "Note: the runs differ in max_turns (1, 3)" in compare_agent_runs(
        [tmp_path / "oracle", tmp_path / "longer"]).to_markdown()

    # bad input: other tasks, one run, an unfinished run, a damaged episode line
    agent_eval(AgentEvalConfig(out=tmp_path / "fewer", policy="oracle", **{**tasks, "tasks": 3}), show_progress=False)
    with pytest.raises(ValueError, match=r"fewer lacks 1 of the tasks of .*oracle \(e.g. db/"):
        compare_agent_runs([tmp_path / "oracle", tmp_path / "fewer"])
    with pytest.raises(ValueError, match="at least two runs"):
        compare_agent_runs([tmp_path / "oracle"])
    with pytest.raises(ValueError, match="a run is given twice"):
        compare_agent_runs([tmp_path / "oracle", tmp_path / "oracle" / "."])
    with pytest.raises(DataNotFoundError, match="no run directory .*nowhere"):
        compare_agent_runs([tmp_path / "oracle", tmp_path / "nowhere"])
    shutil.copytree(tmp_path / "done", tmp_path / "unfinished")
    (tmp_path / "unfinished" / "episodes.jsonl").unlink()
    with pytest.raises(DataNotFoundError, match="no episodes.jsonl in .*unfinished: not a finished lwm agent eval"):
        compare_agent_runs([tmp_path / "oracle", tmp_path / "unfinished"])
    lines = (tmp_path / "done" / "episodes.jsonl").read_text().splitlines()
    (tmp_path / "unfinished" / "episodes.jsonl").write_text("\n".join([lines[0], "{not json", *lines[2:]]) + "\n")
    with pytest.raises(RowFormatError, match=r"episodes.jsonl:2"):
        compare_agent_runs([tmp_path / "oracle", tmp_path / "unfinished"])
    (tmp_path / "unfinished" / "episodes.jsonl").write_text(lines[0] + "\n" + lines[0] + "\n")
    with pytest.raises(ValueError, match="holds the episode db/.* twice"):
        compare_agent_runs([tmp_path / "oracle", tmp_path / "unfinished"])
    (tmp_path / "unfinished" / "episodes.jsonl").write_text("")
    with pytest.raises(ValueError, match="holds no episode"):
        compare_agent_runs([tmp_path / "oracle", tmp_path / "unfinished"])
    (tmp_path / "unfinished" / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    summary = (tmp_path / "unfinished" / "summary.json").read_text()
    for damaged, message in (("{}", "not the summary of an lwm agent eval run"), ("[1]", "expected a JSON object"),
                             ('{"backend": "real", "settings": null}', "not the summary"),
                             ('{"backend": ["real"], "settings": {}}', "not the summary")):
        (tmp_path / "unfinished" / "summary.json").write_text(damaged)
        with pytest.raises(RowFormatError, match=f"summary.json:1: {message}"):
            compare_agent_runs([tmp_path / "oracle", tmp_path / "unfinished"])
    (tmp_path / "unfinished" / "summary.json").write_text(summary)
    edited = [json.loads(line) for line in lines]
    edited[0]["metadata"]["task_spec"]["instruction"] += " Then stop."
    (tmp_path / "unfinished" / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in edited))
    with pytest.raises(ValueError, match="played different tasks under the same id"):
        compare_agent_runs([tmp_path / "oracle", tmp_path / "unfinished"])
    result = CliRunner().invoke(app, ["agent", "compare", str(tmp_path / "oracle"), str(tmp_path / "fewer")])
    assert result.exit_code == 2 and "lacks 1 of the tasks" in result.output
