"""Reasoning removal and observation extraction on well-formed and broken outputs."""

import pytest

from lwm.parse import observation_text, parse_output, split_reasoning


@pytest.mark.parametrize(
    "text, observation, issues",
    [
        ("<think>r</think><predicted_observation>obs</predicted_observation>", "obs", []),
        ("<think>a<think>nested</think>b</think>\n<predicted_observation>x</predicted_observation>", "x", []),
        ("prompt-side reasoning</think><predicted_observation>y</predicted_observation>", "y", ["orphan_think_close"]),
        ("<think>never closed, answer inside <predicted_observation>z</predicted_observation>", "z",
         ["unclosed_think", "observation_inside_reasoning"]),
        ("<think>never closed and no answer", "", ["unclosed_think", "no_observation_tag", "empty"]),
        ("<predicted_observation>1</predicted_observation> then <predicted_observation>2</predicted_observation>",
         "2", ["multiple_observation_tags"]),
        ("<think><predicted_observation>draft</predicted_observation></think><predicted_observation>final"
         "</predicted_observation>", "final", []),
        ("just the screen\nroot@sandbox:/app#", "just the screen\nroot@sandbox:/app#", ["no_observation_tag"]),
        ("<predicted_observation>cut off mid", "cut off mid", ["unclosed_observation_tag"]),
        ("<PREDICTED_OBSERVATION>upper</PREDICTED_OBSERVATION>", "upper", []),
        ("", "", ["no_observation_tag", "empty"]),
    ],
)
def test_parse_output(text, observation, issues):
    parsed = parse_output(text)
    assert parsed.observation == observation
    assert parsed.issues == issues


def test_reasoning_content_from_server_is_kept_separately():
    parsed = parse_output("<predicted_observation>ok</predicted_observation>", reasoning_content="server reasoning")
    assert parsed.observation == "ok" and parsed.reasoning == "server reasoning"


def test_split_reasoning_keeps_text_around_blocks():
    answer, reasoning, issues = split_reasoning("a<think>r1</think>b<think>r2</think>c")
    assert (answer, reasoning, issues) == ("abc", "r1\n\nr2", [])


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("**Environment Observation:**\n```\nroot@sandbox:/app# ls\n```", "root@sandbox:/app# ls"),
        ("**Environment Observation:**\n{\"ok\": true}", "{\"ok\": true}"),
        ("````\nhas ``` inside\n````", "has ``` inside"),
        ("```json\n[1]\n```", "[1]"),
        ("```\na\n```\ntext after", "```\na\n```\ntext after"),  # not one enclosing fence: untouched
        ("  plain  ", "plain"),
    ],
)
def test_observation_text(raw, clean):
    assert observation_text(raw) == clean


def test_commentary_after_a_marked_fenced_observation_is_dropped():
    parsed = parse_output("**Environment Observation:**\n```\nroot@sandbox:/app# ls\na\n```\n\nThis lists files.")
    assert parsed.observation == "root@sandbox:/app# ls\na"
    assert parsed.issues == ["no_observation_tag", "text_after_observation"]


def test_stop_string_cut_by_the_server_is_restored():
    cut = "<think>r</think><predicted_observation>screen"
    assert parse_output(cut, stopped_at=("</predicted_observation>",)).issues == []
    assert parse_output(cut).issues == ["unclosed_observation_tag"]


def test_answer_before_a_stray_think_close_is_recovered():
    # The answer tag opens first, so the later </think> is text after the answer, not the
    # end of prompt-side reasoning (it used to be read so, with observation_inside_reasoning).
    parsed = parse_output("<predicted_observation>ok</predicted_observation>\nmore</think>")
    assert (parsed.observation, parsed.issues) == ("ok", [])


def test_repeated_open_tags_parse_in_linear_time():
    import time

    t0 = time.monotonic()
    parsed = parse_output("<predicted_observation>" * 20000)
    assert time.monotonic() - t0 < 1.0 and parsed.issues[0] == "unclosed_observation_tag"
