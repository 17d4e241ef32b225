"""AgentWorldBench rows and trajectories: building, reading, writing, bad input."""

import json

import pytest

from lwm.errors import RowFormatError
from lwm.parse import observation_text
from lwm.schema import (
    TRAILING_INSTRUCTION,
    Provenance,
    Trajectory,
    Turn,
    read_rows,
    read_trajectories,
    rows_from_trajectory,
    write_rows,
    write_trajectories,
)


def make_traj(n=3):
    prov = Provenance(kind="real", source="test", run=0)
    turns = [Turn(index=i, action=f'[{{"keystrokes": "echo {i}\\n"}}]', observation=f"out {i}\u2028x", provenance=prov)
             for i in range(1, n + 1)]
    return Trajectory(id="terminal/t/run0", domain="terminal", task="say numbers", system_prompt="SYS",
                      initial_observation="root@sandbox:/app#", turns=turns)


def test_rows_follow_agentworldbench_semantics():
    rows = rows_from_trajectory(make_traj(3))
    assert [r.turn_idx for r in rows] == [1, 2, 3]
    r = rows[2]
    assert r.total_turns == 3 and r.task == "terminal" and r.system_str == "SYS"
    assert len(r.prompt) == len(r.response) == 3
    assert r.prompt[0].startswith("### Turn 1\n\n**Task Instruction:**\nsay numbers\n\n**Current State:**")
    assert "**Task Instruction:**" not in r.prompt[1]
    assert r.prompt[-1] == r.current_prompt + "\n\n" + TRAILING_INSTRUCTION
    assert TRAILING_INSTRUCTION not in r.prompt[0]  # only the last item carries the instruction
    assert r.response[-1].startswith("**Environment Observation:**")
    assert observation_text(r.ground_truth) == "out 3\u2028x"
    assert rows_from_trajectory(make_traj(3), last_only=True) == [r]  # what a simulator asks, per step


def test_u2028_round_trip(tmp_path):
    rows = rows_from_trajectory(make_traj(2))
    path = tmp_path / "terminal_test.jsonl"
    write_rows(path, rows)
    assert path.read_text().count("\n") == 2  # U+2028 did not split lines
    again = list(read_rows(path))
    assert [r.model_dump() for r in again] == [r.model_dump() for r in rows]


def test_unknown_fields_and_string_prompts_are_accepted(tmp_path):
    path = tmp_path / "mcp_test.jsonl"
    row = {"task": "agentworld/mcp", "id": 7, "turn_idx": 1, "total_turns": 2, "system_str": "s",
           "prompt": "### Turn 1", "response": "**Environment Observation:**\n{}", "current_prompt": "### Turn 1",
           "extra_field": {"kept": True}}
    path.write_text(json.dumps(row) + "\n")
    (r,) = read_rows(path)
    assert r.domain == "mcp" and r.prompt == ["### Turn 1"]
    assert r.model_dump()["extra_field"] == {"kept": True}


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({"task": "x", "id": 1, "turn_idx": 1, "total_turns": 1, "prompt": []}), "response"),
        (json.dumps({"task": "x", "id": 1, "turn_idx": 3, "total_turns": 3, "prompt": ["a"], "response": ["b"]}),
         "turn_idx=3"),
        (json.dumps({"task": "x", "id": 1, "turn_idx": 0, "total_turns": 1, "prompt": ["a"], "response": ["b"]}),
         "turn_idx"),
        (json.dumps({"task": "bench/", "id": "i", "turn_idx": 1, "total_turns": 1, "prompt": ["a"], "response": ["b"]}),
         "task 'bench/' names no domain"),
        (json.dumps({"task": " ", "id": "i", "turn_idx": 1, "total_turns": 1, "prompt": ["a"], "response": ["b"]}),
         "task ' ' names no domain"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, line, message):
    good = rows_from_trajectory(make_traj(1))[0].model_dump_json()
    path = tmp_path / "bad_test.jsonl"
    path.write_text(good + "\n\n" + line + "\n")
    with pytest.raises(RowFormatError) as err:
        list(read_rows(path))
    assert err.value.line == 3 and err.value.path == path
    assert str(err.value).startswith(f"{path}:3: ") and message in str(err.value)


def test_trajectories_round_trip_and_transitions(tmp_path):
    traj = make_traj(3)
    write_trajectories(tmp_path / "t.jsonl", [traj])
    (back,) = read_trajectories(tmp_path / "t.jsonl")
    assert back == traj
    transitions = list(back.transitions())
    assert [len(t.history) for t in transitions] == [0, 1, 2]
    assert transitions[2].observation == "out 3\u2028x"


def test_provenance_rejects_unknown_kind():
    with pytest.raises(ValueError):
        Provenance(kind="guessed")


def test_fifos_devices_and_out_of_range_spans_are_refused(tmp_path):
    import os

    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(RowFormatError, match="not a regular file"):
        list(read_rows(fifo))
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    with pytest.raises(RowFormatError, match="not a regular file"):
        list(read_rows(link))
    row = {"task": "terminal", "id": 1, "turn_idx": 1, "total_turns": 1, "prompt": ["p"],
           "response": ["**Environment Observation:**\n```\nhello\n```"], "volatile_spans": [[-1, 10**12]]}
    bad = tmp_path / "terminal_test.jsonl"
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(RowFormatError, match=r"terminal_test.jsonl:1.*not inside the observation"):
        list(read_rows(bad))
