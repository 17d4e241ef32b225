"""The eval runner: concurrency, failures counted, resume to the same final file."""

import json

import pytest
from conftest import make_data, oracle

from lwm.errors import DataNotFoundError, RowFormatError
from lwm.eval.report import certain_line
from lwm.eval.runner import EvalConfig, evaluate, load_rows, row_key
from lwm.models.base import FunctionChatModel, SamplingParams
from lwm.schema import Provenance, Trajectory, Turn, rows_from_trajectory, write_rows


async def test_scores_and_counts(tmp_path):
    data = make_data(tmp_path)
    summary = await evaluate(EvalConfig(out=tmp_path / "run", data=data), FunctionChatModel(oracle), show_progress=False)
    assert summary["rows"] == 12 and summary["failed"] == 0
    assert summary["domains"]["terminal"]["exact"] == 50.0
    assert summary["parse_issues"] == {"no_observation_tag": 6}
    assert summary["depth"]["2"]["exact"] == 100.0 and summary["depth"]["1"]["exact"] == 0.0
    lines = (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 12
    first = json.loads(lines[1])
    assert first["fidelity"]["exact"] == 1.0 and first["sampling"]["temperature"] == 0.0
    assert (tmp_path / "run" / "report.md").read_text().startswith("# lwm eval: function")


async def test_failures_are_counted_not_dropped(tmp_path):
    data = make_data(tmp_path, episodes=1)

    def flaky(messages):
        if "echo 0-3" in messages[-1]["content"]:
            raise ConnectionError("server went away")
        return oracle(messages)

    summary = await evaluate(EvalConfig(out=tmp_path / "run", data=data), FunctionChatModel(flaky), show_progress=False)
    assert summary["rows"] == 4 and summary["failed"] == 1
    assert summary["errors"] == {"ConnectionError": 1}
    recs = [json.loads(l) for l in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert [r["error"] is None for r in recs] == [True, True, False, True]


async def test_interrupted_run_resumes_to_the_same_file(tmp_path):
    data = make_data(tmp_path)
    ref = tmp_path / "ref"
    await evaluate(EvalConfig(out=ref, data=data), FunctionChatModel(oracle), show_progress=False)

    calls = []

    class Interrupted(BaseException):  # like Ctrl-C: not a row failure, it stops the run
        pass

    def interrupted(messages):
        calls.append(1)
        if len(calls) == 5:
            raise Interrupted
        return oracle(messages)

    run = tmp_path / "run"
    with pytest.raises(Interrupted):
        await evaluate(EvalConfig(out=run, data=data), FunctionChatModel(interrupted), show_progress=False)
    partial = run / "predictions.partial.jsonl"
    assert len(partial.read_text().splitlines()) == 4
    with open(partial, "a") as f:  # a crash in the middle of a write
        f.write('{"key": "000009-trunc')
    seen = []

    def resumed(messages):
        seen.append(1)
        return oracle(messages)

    await evaluate(EvalConfig(out=run, data=data), FunctionChatModel(resumed), show_progress=False)
    assert len(seen) == 8  # only the unfinished rows were redone
    assert (run / "predictions.jsonl").read_bytes() == (ref / "predictions.jsonl").read_bytes()


async def test_history_window_drops_oldest_turns(tmp_path):
    data = make_data(tmp_path, episodes=1, turns=6)
    cfg = EvalConfig(out=tmp_path / "run", data=data, max_prompt_tokens=120)
    summary = await evaluate(cfg, FunctionChatModel(oracle), show_progress=False)
    recs = [json.loads(l) for l in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert recs[0]["dropped_turns"] == [] and recs[-1]["dropped_turns"][:1] == [1]
    assert summary["domains"]["terminal"]["truncated_history_rows"] >= 1


def test_load_rows_errors(tmp_path):
    with pytest.raises(DataNotFoundError):
        load_rows(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataNotFoundError):
        load_rows(tmp_path / "empty")
    # a dataset of lwm data build: the message says where its rows are, or that it holds none out
    built = tmp_path / "ds"
    (built / "heldout").mkdir(parents=True)
    (built / "manifest.json").write_text("{}")
    with pytest.raises(DataNotFoundError, match="held-out rows are in .*ds/heldout"):
        load_rows(built)
    with pytest.raises(DataNotFoundError, match="holds nothing out"):
        load_rows(built / "heldout")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "web_test.jsonl").write_text('{"task": "web"}\n')
    with pytest.raises(RowFormatError, match="web_test.jsonl:1"):
        load_rows(bad)
    with pytest.raises(DataNotFoundError, match="^/dev/zero is not a regular file or a directory$"):
        load_rows("/dev/zero")  # not "does not exist", and not read forever


def test_empty_data_files_are_named(tmp_path, capsys):
    data = make_data(tmp_path, episodes=1, turns=2)
    (data / "web_test.jsonl").write_text("\n")
    assert len(load_rows(data)) == 2
    assert capsys.readouterr().err == f"warning: no rows in {data / 'web_test.jsonl'} (empty)\n"
    (data / "terminal_test.jsonl").write_text("")
    with pytest.raises(DataNotFoundError) as e:
        load_rows(data)
    assert str(e.value) == f"no rows: {data / 'terminal_test.jsonl'}, {data / 'web_test.jsonl'} are empty"
    with pytest.raises(DataNotFoundError, match=f"^no rows: {data / 'web_test.jsonl'} is empty$"):
        load_rows(data / "web_test.jsonl")


def test_row_keys_are_stable_and_distinct(tmp_path):
    rows = load_rows(make_data(tmp_path))
    keys = [row_key(i, r) for i, r in enumerate(rows)]
    assert len(set(keys)) == len(keys) and keys == [row_key(i, r) for i, r in enumerate(rows)]


def seven_domain_data(tmp_path):
    """One two-turn trajectory per AgentWorldBench domain, in official file names."""
    data = tmp_path / "awb"
    prov = Provenance(kind="real", source="test")
    for domain in ("mcp", "search", "terminal", "swe", "android", "web", "os"):
        t = Trajectory(id=f"{domain}-1", domain=f"agentworld/{domain}", system_prompt=f"{domain} world model",
                       turns=[Turn(index=i, action=f"act {domain} {i}", observation=f"obs {domain} {i}",
                                   provenance=prov) for i in (1, 2)])
        write_rows(data / f"{domain}_test.jsonl", rows_from_trajectory(t))
    return data


def echo_truth(messages):
    """Right on mcp and web only."""
    act = messages[-1]["content"].split("act ")[1].split("\n")[0]
    domain = act.split()[0]
    return f"<predicted_observation>obs {act}</predicted_observation>" if domain in ("mcp", "web") else "wrong"


async def test_all_seven_domains_macro_and_micro(tmp_path):
    summary = await evaluate(EvalConfig(out=tmp_path / "run", data=seven_domain_data(tmp_path)),
                             FunctionChatModel(echo_truth), show_progress=False)
    assert sorted(summary["domains"]) == ["android", "mcp", "os", "search", "swe", "terminal", "web"]
    assert summary["domains"]["mcp"]["exact"] == 100.0 and summary["domains"]["os"]["exact"] == 0.0
    assert summary["macro"]["exact"] == pytest.approx(200 / 7, abs=0.01)
    assert summary["micro"]["exact"] == pytest.approx(100 * 4 / 14, abs=0.01)


def scoring_judge(messages):
    s = 5 if "<simulated_observation>\nobs " in messages[-1]["content"] else 1
    return f'<final_evaluation>{{"format": {s}, "factuality": {s}, "consistency": {s}, "realism": {s}, "quality": {s}}}</final_evaluation>'


async def test_judge_score_mode_through_the_runner(tmp_path):
    data = seven_domain_data(tmp_path)
    cfg = EvalConfig(out=tmp_path / "run", data=data, domains=("mcp", "os"))
    summary = await evaluate(cfg, FunctionChatModel(echo_truth), judge=FunctionChatModel(scoring_judge, "judge"),
                             show_progress=False)
    assert summary["domains"]["mcp"]["judge_score"] == 100.0 and summary["domains"]["os"]["judge_score"] == 0.0
    assert summary["macro"]["judge_score"] == 50.0 and summary["run"]["judge"] == "judge"
    assert (tmp_path / "run" / "judgments.partial.jsonl").exists()


async def test_judge_pairwise_modes_through_the_runner(tmp_path):
    data = seven_domain_data(tmp_path)
    always_a = FunctionChatModel(lambda m: "<answer>A</answer>", "judge")
    cfg = EvalConfig(out=tmp_path / "real", data=data, domains=("web",), judge_mode="real")
    summary = await evaluate(cfg, FunctionChatModel(echo_truth), judge=always_a, show_progress=False)
    assert summary["domains"]["web"]["judge_wins"] == 50.0  # position bias cancels out

    cfg = EvalConfig(out=tmp_path / "closer", data=data, domains=("web",), judge_mode="closer",
                     baseline=tmp_path / "real" / "predictions.jsonl")
    summary = await evaluate(cfg, FunctionChatModel(echo_truth), judge=always_a, show_progress=False)
    assert summary["domains"]["web"]["judge_wins"] == 50.0 and summary["domains"]["web"]["judge_failed"] == 0

    cfg = EvalConfig(out=tmp_path / "nobase", data=data, domains=("web",), judge_mode="closer")
    with pytest.raises(DataNotFoundError, match="baseline"):
        await evaluate(cfg, FunctionChatModel(echo_truth), judge=always_a, show_progress=False)


async def test_failed_rows_are_retried_on_resume(tmp_path):
    data = make_data(tmp_path, episodes=1)

    def down(messages):
        raise ConnectionError("refused")

    run = tmp_path / "run"
    first = await evaluate(EvalConfig(out=run, data=data), FunctionChatModel(down, "m"), show_progress=False)
    assert first["failed"] == 4
    again = await evaluate(EvalConfig(out=run, data=data), FunctionChatModel(oracle, "m"), show_progress=False)
    assert again["failed"] == 0 and again["domains"]["terminal"]["exact"] == 50.0


async def test_resume_with_other_settings_is_refused(tmp_path):
    from lwm.errors import RunMismatchError

    data = make_data(tmp_path, episodes=1)
    run = tmp_path / "run"
    await evaluate(EvalConfig(out=run, data=data, limit=2), FunctionChatModel(oracle, "model-a"), show_progress=False)
    with pytest.raises(RunMismatchError, match="model-a"):
        await evaluate(EvalConfig(out=run, data=data), FunctionChatModel(oracle, "model-b"), show_progress=False)
    with pytest.raises(RunMismatchError, match="temperature"):
        await evaluate(EvalConfig(out=run, data=data, sampling=SamplingParams(temperature=0.9)),
                       FunctionChatModel(oracle, "model-a"), show_progress=False)


def test_undecodable_and_deep_lines_are_named(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x_test.jsonl").write_bytes(b'{"task": "x"}\n{"task": "\xff"}\n')
    with pytest.raises(RowFormatError, match="x_test.jsonl:1"):
        load_rows(bad)  # line 1 lacks fields
    (bad / "x_test.jsonl").write_bytes(b'\n{"task": "\xff"}\n')
    with pytest.raises(RowFormatError, match=r"x_test.jsonl:2: not valid UTF-8"):
        load_rows(bad)
    (bad / "x_test.jsonl").write_text("[" * 100000 + "\n")
    with pytest.raises(RowFormatError, match="nested too deeply"):
        load_rows(bad)


async def test_truncated_generations_cut_contexts_and_duplicate_rows_are_marked_and_counted(tmp_path, capsys):
    """Behaviours of real servers, on a stub: a generation stopped by max_tokens (a draft in
    an unclosed tag, one inside unclosed reasoning), a server that keeps only the end of a
    long prompt (as Ollama does without num_ctx), and a data file with a repeated row."""
    from servers import chat_stub, completion

    from lwm.models import load_model

    data = make_data(tmp_path, episodes=1, turns=3)
    rows = load_rows(data)
    long_history = rows[2].model_copy(update={"system_str": "x " * 12000})  # about 6,900 estimated tokens
    rows = [rows[0], rows[1], long_history, rows[0]]  # the last repeats the first

    def answer(body):
        content = body["messages"][-1]["content"]
        if "echo 0-1" in content:
            return completion("<predicted_observation>root@sandbox:/app# echo 0-1\n0-", "length",
                              {"prompt_tokens": 40, "completion_tokens": 8})
        if "echo 0-2" in content:
            return completion("<think>it will print 0-2 and", "length", {"prompt_tokens": 60, "completion_tokens": 8})
        return completion("<predicted_observation>ok</predicted_observation>", "stop",
                          {"prompt_tokens": 2048, "completion_tokens": 5})

    with chat_stub(answer) as (url, _):
        model = load_model("stub", base_url=url)
        summary = await evaluate(EvalConfig(out=tmp_path / "run"), model, rows=rows, show_progress=False)
    recs = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert [r["truncated"] for r in recs] == [True, True, False, True]
    assert recs[0]["observation"] == "root@sandbox:/app# echo 0-1\n0-" and "truncated" in recs[0]["parse_issues"]
    assert recs[1]["observation"] == "" and recs[1]["fidelity"]["exact"] == 0.0  # the cut fell inside reasoning
    assert [r["context_cut"] for r in recs] == [False, False, True, False]
    terminal = summary["domains"]["terminal"]
    assert (terminal["truncated_rows"], terminal["context_cut_rows"]) == (3, 1)
    assert summary["run"]["duplicate_rows"] == 1 and summary["rows"] == 4
    err = capsys.readouterr().err
    assert err.count("cut the context") == 1 and "1 rows repeat an earlier row" in err
    report = (tmp_path / "run" / "report.md").read_text()
    assert "truncated_rows" in report and "context_cut_rows" in report


def change_model(outputs: dict[str, str], systems: list | None = None):
    """A scripted world model in mode change: the echoed command, its output, a new prompt."""
    import re

    def fn(messages):
        if systems is not None:
            systems.append(messages[0]["content"])
        cmd = re.search(r'"keystrokes": "(.*?)\\n"', messages[-1]["content"]).group(1)
        return f"<predicted_observation>root@sandbox:/app# {cmd}\n{outputs[cmd]}\nroot@sandbox:/app#</predicted_observation>"

    model = FunctionChatModel(fn, name="change-wm")
    model.prediction = "change"  # as an adapter trained on changes declares it
    return model


async def test_change_mode_is_drawn_into_full_screens_and_scored_as_such(tmp_path):
    from lwm import domains

    prov = Provenance(kind="real", source="test")
    lines, turns, outputs = ["root@sandbox:/app#"], [], {}
    for i in range(1, 4):
        cmd, out = f"echo {i}", str(i)
        outputs[cmd] = out
        lines = lines[:-1] + [f"root@sandbox:/app# {cmd}", out, "root@sandbox:/app#"]
        turns.append(Turn(index=i, action=f'[{{"keystrokes": "{cmd}\\n", "duration": 0.3}}]',
                          observation="\n".join(lines), provenance=prov))
    traj = Trajectory(id="terminal/c/run0", domain="terminal", system_prompt="SYS", turns=turns,
                      initial_observation="root@sandbox:/app#")
    write_rows(tmp_path / "data" / "terminal_test.jsonl", rows_from_trajectory(traj))
    systems = []
    summary = await evaluate(EvalConfig(out=tmp_path / "run", data=tmp_path / "data"), change_model(outputs, systems),
                             show_progress=False)
    assert all(s.startswith("SYS\n\n") and s.endswith(domains.get("terminal").change_instruction) for s in systems)
    assert summary["domains"]["terminal"]["exact"] == 100.0 and summary["run"]["prediction"] == "change"
    recs = [json.loads(l) for l in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert recs[2]["change"] == "root@sandbox:/app# echo 3\n3\nroot@sandbox:/app#"
    assert recs[2]["observation"].startswith("root@sandbox:/app# echo 1\n1\n")
    assert json.loads((tmp_path / "run" / "run.json").read_text())["prediction"] == "change"
    # asked in mode full instead, the same answers are taken whole: the screen's first lines are lost
    full = await evaluate(EvalConfig(out=tmp_path / "full", data=tmp_path / "data", prediction="full"),
                          change_model(outputs), show_progress=False)
    assert full["domains"]["terminal"]["exact"] == pytest.approx(100 / 3, abs=0.1)
    with pytest.raises(ValueError, match="prediction mode"):
        await evaluate(EvalConfig(out=tmp_path / "bad", data=tmp_path / "data", prediction="diff"),
                       change_model(outputs), show_progress=False)


async def test_an_answer_the_action_alone_rules_out_is_replaced_and_counted(tmp_path):
    prov = Provenance(kind="real", source="test")
    cells, real = ["s = 20", "print(s)"], ["(no output)", "[stdout]\n20"]
    t = Trajectory(id="code-1", domain="code", system_prompt="", turns=[
        Turn(index=i + 1, action=a, observation=o, provenance=prov) for i, (a, o) in enumerate(zip(cells, real))])
    write_rows(tmp_path / "data" / "code_test.jsonl", rows_from_trajectory(t, action_lang="python"))

    def invented(messages):   # a syntax error for cells that compile: impossible
        return '<predicted_observation>[error]\n  File "<cell 1>", line 1\n    s = 20\nSyntaxError: invalid syntax' \
            '</predicted_observation>'

    summary = await evaluate(EvalConfig(out=tmp_path / "run", data=tmp_path / "data"), FunctionChatModel(invented),
                             show_progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert [r["observation"] for r in records] == ["(no output)", "(no output)"]
    assert [r["parse_issues"] for r in records] == [["ruled out"], ["ruled out"]]
    assert summary["parse_issues"] == {"ruled out": 2} and summary["domains"]["code"]["exact"] == 50.0
    alone = await evaluate(EvalConfig(out=tmp_path / "alone", data=tmp_path / "data", certain=False),
                           FunctionChatModel(invented), show_progress=False)
    assert alone["parse_issues"] == {} and alone["domains"]["code"]["exact"] == 0.0   # the model alone


async def test_what_the_action_alone_decides_is_answered_without_the_model(tmp_path):
    from lwm.domains.db import spec

    prov = Provenance(kind="real", source="test")
    real = ["", "1", 'Parse error: near "SELEC": syntax error\n  SELEC 1;\n  ^--- error here', "name\n----\nAda"]
    actions = ["SELECT 1", ";", "SELEC 1;", "SELECT name FROM t;"]   # unfinished, runs, broken, runs
    t = Trajectory(id="db-1", domain="db", system_prompt=spec.system_prompt("sqlite", ("CREATE TABLE t (name)",)),
                   turns=[Turn(index=i + 1, action=a, observation=o, provenance=prov)
                          for i, (a, o) in enumerate(zip(actions, real))])
    write_rows(tmp_path / "data" / "db_test.jsonl", rows_from_trajectory(t, action_lang="sql"))
    asked = []

    def nothing(messages):
        asked.append(messages)
        return "<predicted_observation></predicted_observation>"

    summary = await evaluate(EvalConfig(out=tmp_path / "run", data=tmp_path / "data"), FunctionChatModel(nothing),
                             show_progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert [r.get("certain", False) for r in records] == [True, False, True, False] and len(asked) == 2
    assert [r["fidelity"]["exact"] for r in records] == [1.0, 0.0, 1.0, 0.0]
    assert summary["certain_rows"] == {"db": 2} and summary["run"]["certain"] is True
    assert "rows answered without the model" in (tmp_path / "run" / "report.md").read_text()
    alone = await evaluate(EvalConfig(out=tmp_path / "alone", data=tmp_path / "data", certain=False),
                           FunctionChatModel(nothing), show_progress=False)
    assert alone["certain_rows"] == {} and len(asked) == 6 and alone["domains"]["db"]["exact"] == 25.0
    assert certain_line(alone).startswith("every row answered by the model and its answers kept (--no-certain)")
    assert certain_line(summary).startswith("rows answered without the model") and "2 (db 2)" in certain_line(summary)
