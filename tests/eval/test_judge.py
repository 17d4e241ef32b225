"""Tests of the LLM judge (lwm.eval.judge) and the judge rubrics (lwm.domains.rubrics)."""

from __future__ import annotations

import json
import re

import json_repair
import pytest
from conftest import make_data, oracle
from servers import chat_stub, completion

from lwm import domains
from lwm.domains.rubrics import GENERIC, rubric_for
from lwm.eval.judge import (
    DIMENSIONS,
    WHICH_CLOSER_SYSTEM,
    WHICH_REAL_SYSTEM,
    build_score_messages,
    build_which_real_messages,
    judge_score,
    judge_which_closer,
    judge_which_real,
    normalize,
    parse_choice,
    parse_score,
)
from lwm.eval.runner import EvalConfig, evaluate
from lwm.models import load_model
from lwm.models.base import FunctionChatModel, Generation, SamplingParams
from lwm.schema import (
    OBSERVATION_MARKER,
    TRAILING_INSTRUCTION,
    BenchRow,
    Provenance,
    Trajectory,
    Turn,
    rows_from_trajectory,
)

#: The domains with a rubric of their own (their specs' ``rubric``).
RUBRICS = {n: domains.get(n).rubric for n in domains.names() if domains.get(n).rubric is not GENERIC}

SAMPLING = SamplingParams(temperature=0.0, max_tokens=512)

SCREEN_1 = "root@box:/app# mkdir data\nroot@box:/app# "
SCREEN_2 = "root@box:/app# ls\ndata  notes.txt\nroot@box:/app# "


def _rows() -> list[BenchRow]:
    real = Provenance(kind="real", source="terminal/test")
    traj = Trajectory(
        id="terminal/demo/run0",
        domain="terminal",
        task="Create a data directory and list the files.",
        system_prompt="You simulate a terminal.",
        initial_observation="root@box:/app# ",
        turns=[
            Turn(index=1, action='[{"keystrokes": "mkdir data\\n", "duration": 0.5}]',
                 observation=SCREEN_1, provenance=real),
            Turn(index=2, action='[{"keystrokes": "ls\\n", "duration": 0.5}]',
                 observation=SCREEN_2, provenance=real),
        ],
    )
    return rows_from_trajectory(traj)


def _final(scores: dict, strengths=("good layout",), weaknesses=()) -> str:
    body = {**scores, "strengths": list(strengths), "weaknesses": list(weaknesses)}
    return f"<final_evaluation>\n{json.dumps(body)}\n</final_evaluation>"


ALL_FOUR = {d: 4 for d in DIMENSIONS}


# ---------------------------------------------------------------- scale and rubrics


def test_normalize_maps_scale_endpoints():
    assert normalize(1) == 0.0
    assert normalize(3) == 50.0
    assert normalize(5) == 100.0
    assert normalize(4.2) == pytest.approx(80.0)


def test_rubrics_cover_domains_and_state_output_format():
    assert set(RUBRICS) == {"mcp", "search", "terminal", "swe", "android", "web", "os"}
    for text in [*RUBRICS.values(), GENERIC]:
        assert len(text.split()) < 450
        assert "<final_evaluation>" in text and "</final_evaluation>" in text
        for key in (*DIMENSIONS, "strengths", "weaknesses"):
            assert f'"{key}"' in text
        assert "5 =" in text and "1 =" in text
    assert len(set(RUBRICS.values()) | {GENERIC}) == 8  # all different
    assert "prompt string" in RUBRICS["terminal"]
    assert "accessibility tree" in RUBRICS["web"]


def test_rubric_for_falls_back_to_generic():
    assert rubric_for("terminal") is RUBRICS["terminal"]
    assert rubric_for(" Web ") is RUBRICS["web"]
    assert rubric_for("suite/android") is RUBRICS["android"]
    for domain in ("fs", "db", "code", ""):
        assert rubric_for(domain) is GENERIC


# ------------------------------------------------------------------------ parse_score


def test_parse_score_well_formed():
    text = "The layout matches.\n" + _final(
        {"format": 5, "factuality": 4, "consistency": 4, "realism": 3, "quality": 4},
        strengths=["prompt correct"],
        weaknesses=["missing file"],
    )
    s = parse_score(text)
    assert s.error is None
    assert s.scores == {"format": 5, "factuality": 4, "consistency": 4, "realism": 3, "quality": 4}
    assert s.total == pytest.approx(4.0)
    assert s.normalized == pytest.approx(75.0)
    assert s.strengths == ["prompt correct"]
    assert s.weaknesses == ["missing file"]
    assert s.raw == text
    assert s.missing == []


def test_parse_score_ignores_reasoning_and_takes_last_block():
    decoy = _final({d: 1 for d in DIMENSIONS})
    text = (
        f"<think>Draft: {decoy} no wait, better.</think>\n"
        + _final({d: 2 for d in DIMENSIONS})
        + "\nOn second look:\n"
        + _final({"format": 5, "factuality": 5, "consistency": 4, "realism": 4, "quality": 5})
    )
    s = parse_score(text)
    assert s.scores == {"format": 5, "factuality": 5, "consistency": 4, "realism": 4, "quality": 5}
    assert s.total == pytest.approx(4.6)


def test_parse_score_orphan_think_close():
    text = "thinking with " + _final({d: 1 for d in DIMENSIONS}) + "</think>" + _final(ALL_FOUR)
    assert parse_score(text).scores == ALL_FOUR


def test_parse_score_json_without_tags():
    text = (
        'I think {"a": 1} is irrelevant. Scores:\n```json\n'
        '{"format": 3, "factuality": 2, "consistency": 5, "realism": 4, "quality": 1, '
        '"strengths": "clear", "weaknesses": ["wrong files", "no prompt"]}\n```'
    )
    s = parse_score(text)
    assert s.error is None
    assert s.scores == {"format": 3, "factuality": 2, "consistency": 5, "realism": 4, "quality": 1}
    assert s.total == pytest.approx(3.0)
    assert s.strengths == ["clear"]
    assert s.weaknesses == ["wrong files", "no prompt"]


def test_parse_score_accepts_numeric_strings_integral_floats_and_nested():
    text = _final(
        {"Format": "4", "factuality": 5.0, "consistency": " 3 ", "realism": "2/5", "quality": 1}
    )
    s = parse_score(text)
    assert s.scores == {"format": 4, "factuality": 5, "consistency": 3, "realism": 2, "quality": 1}
    nested = (
        '<final_evaluation>{"scores": {"format": 2, "quality": 4}, "strengths": []}'
        "</final_evaluation>"
    )
    s = parse_score(nested)
    assert s.scores == {"format": 2, "quality": 4}
    # two dimensions of five: read, recorded, but not a judgement that counts
    assert s.total is None and s.absent == ["factuality", "consistency", "realism"]
    assert s.error == "incomplete: missing factuality, consistency, realism"
    nested = '<final_evaluation>{"scores": {"format": 2, "factuality": 3, "consistency": 3, "realism": 3, ' \
        '"quality": 4}}</final_evaluation>'
    assert parse_score(nested).total == pytest.approx(3.0)


def test_parse_score_ignores_out_of_range_and_non_integers():
    text = _final({"format": 0, "factuality": 6, "consistency": 4.5, "realism": True, "quality": 2})
    s = parse_score(text)
    # issue 16: invalid dimensions are no longer averaged away; the judgement fails
    assert s.error == "invalid: format=0, factuality=6, consistency=4.5, realism=True"
    assert s.scores == {"quality": 2}
    assert s.total is None
    assert s.missing == ["format", "factuality", "consistency", "realism"]
    assert s.absent == [] and s.invalid == {"format": 0, "factuality": 6, "consistency": 4.5, "realism": True}


def test_parse_score_all_invalid_sets_error():
    s = parse_score(_final({"format": 9, "factuality": "high"}))
    assert s.error is not None and "9" in s.error
    assert s.scores == {} and s.total is None


def test_parse_score_reads_invalid_json_by_pattern():
    text = (
        "<final_evaluation>\n{'format': 4, 'factuality': 3, 'consistency': 5, "
        "'realism': 4, 'quality': 4,}\n</final_evaluation>"
    )
    s = parse_score(text)
    assert s.scores == {"format": 4, "factuality": 3, "consistency": 5, "realism": 4, "quality": 4}
    assert s.strengths == []


def test_parse_score_template_placeholders_are_not_scores():
    # A judge that copies the rubric's template verbatim has not scored anything.
    text = '<final_evaluation>{"format": <1-5>, "factuality": <1-5>}</final_evaluation>'
    s = parse_score(text)
    assert s.error is not None and s.scores == {}


@pytest.mark.parametrize(
    "garbage",
    ["", "I cannot evaluate this.", "<final_evaluation></final_evaluation>", "{not json"],
)
def test_parse_score_garbage(garbage):
    s = parse_score(garbage)
    assert s.error is not None
    assert s.scores == {}
    assert s.total is None
    assert s.raw == garbage


def test_parse_score_unclosed_think_with_evaluation_inside():
    text = "<think>The screens agree. " + _final(ALL_FOUR)
    assert parse_score(text).scores == ALL_FOUR


# -------------------------------------------------------------- build_score_messages


def test_build_score_messages_contents():
    row = _rows()[1]
    assert OBSERVATION_MARKER in row.ground_truth and "```" in row.ground_truth
    msgs = build_score_messages(row, "root@box:/app# ls\ndata\nroot@box:/app# ")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == RUBRICS["terminal"]
    user = msgs[1]["content"]
    # history: turn 1's action and its real observation; the task and initial state
    assert "mkdir data" in user
    assert SCREEN_1 in user
    assert "Create a data directory" in user
    # current action, without the world model's instruction
    cur = user.index("## Current action")
    assert '"keystrokes": "ls\\n"' in user[cur:]
    assert TRAILING_INSTRUCTION not in user
    # simulated and real observations, the latter cleaned of marker and fence
    sim = re.search(r"<simulated_observation>\n(.*?)\n</simulated_observation>", user, re.S)
    assert sim.group(1) == "root@box:/app# ls\ndata\nroot@box:/app# "
    real = re.search(r"<real_observation>\n(.*?)\n</real_observation>", user, re.S)
    assert real.group(1) == SCREEN_2
    assert OBSERVATION_MARKER not in user
    # order: history, action, simulated, real
    assert user.index("mkdir data") < cur < sim.start() < real.start()


def test_build_score_messages_first_turn_has_no_history():
    row = _rows()[0]
    user = build_score_messages(row, "x")[1]["content"]
    assert "first turn" in user
    real = re.search(r"<real_observation>\n(.*?)\n</real_observation>", user, re.S)
    assert real.group(1) == SCREEN_1


def test_build_score_messages_generic_rubric_for_own_domain():
    row = _rows()[1].model_copy(update={"task": "lwm/fs"})
    assert build_score_messages(row, "x")[0]["content"] == GENERIC


def test_build_score_messages_history_limit():
    real = Provenance(kind="real", source="t")
    traj = Trajectory(
        id="t/long/run0",
        domain="terminal",
        system_prompt="s",
        turns=[
            Turn(index=i, action=f"echo {i}", observation=f"OUT{i}-" + "x" * 200, provenance=real)
            for i in (1, 2, 3)
        ],
    )
    row = rows_from_trajectory(traj)[2]
    full = build_score_messages(row, "p")[1]["content"]
    assert "OUT1-" in full and "OUT2-" in full and "omitted" not in full
    short = build_score_messages(row, "p", max_history_chars=300)[1]["content"]
    assert "OUT1-" not in short and "echo 1" not in short
    assert "OUT2-" in short  # the most recent earlier turn is always kept
    assert "(1 earlier turn omitted)" in short
    tiny = build_score_messages(row, "p", max_history_chars=1)[1]["content"]
    assert "(1 earlier turn omitted)" in tiny and "OUT2-" in tiny


# ----------------------------------------------------------------------- judge_score


async def test_judge_score_retries_then_succeeds():
    calls = []

    def fn(messages):
        calls.append(messages)
        if len(calls) == 1:
            raise ConnectionError("server down")
        if len(calls) == 2:
            return "I refuse."
        return _final(ALL_FOUR)

    s = await judge_score(FunctionChatModel(fn), _rows()[1], "pred", SAMPLING, retries=3)
    assert len(calls) == 3
    assert s.error is None
    assert s.scores == ALL_FOUR
    assert s.total == 4.0
    assert s.attempts == 3


async def test_judge_score_fails_after_retries():
    calls = []

    def fn(messages):
        calls.append(1)
        if len(calls) == 2:
            raise TimeoutError("slow")
        return "no scores here"

    s = await judge_score(FunctionChatModel(fn), _rows()[1], "pred", SAMPLING, retries=3)
    assert len(calls) == 3
    assert s.error is not None and "3 attempt" in s.error
    assert s.scores == {} and s.total is None
    assert s.raw == "no scores here"


async def test_judge_score_exception_on_last_attempt_reported():
    def fn(messages):
        raise RuntimeError("boom")

    s = await judge_score(FunctionChatModel(fn), _rows()[0], "pred", SAMPLING, retries=2)
    assert s.error is not None and "RuntimeError: boom" in s.error
    assert s.attempts == 2


async def test_judge_score_bumps_seed_on_retry():
    seeds = []

    class Model(FunctionChatModel):
        async def generate(self, messages, sampling):
            seeds.append(sampling.seed)
            return await super().generate(messages, sampling)

    answers = iter(["bad", "bad", _final(ALL_FOUR)])
    s = await judge_score(Model(lambda m: next(answers)), _rows()[0], "p", SamplingParams(seed=7))
    assert s.error is None
    assert seeds == [7, 8, 9]


# -------------------------------------------------------------------------- pairwise


@pytest.mark.parametrize(
    "text, expected",
    [
        ("reasoning...\n<answer>A</answer>", "A"),
        ("<answer>b</answer>", "B"),
        ("<answer> Response B </answer>", "B"),
        ("<answer>**Observation A**</answer>", "A"),
        ("First <answer>A</answer>, but actually <answer>B</answer>", "B"),
        ("<think><answer>A</answer></think>So: <answer>B</answer>", "B"),
        ("<answer>A or B</answer>", None),
        ("The final answer is Response B.", "B"),
        ("Answer: A", "A"),
        ("The answer is a difficult one.", None),
        ("no verdict", None),
        ("", None),
    ],
)
def test_parse_choice(text, expected):
    assert parse_choice(text) == expected


def _blocks(messages):
    user = messages[-1]["content"]
    a = re.search(r"<response_a>\n(.*?)\n</response_a>", user, re.S).group(1)
    b = re.search(r"<response_b>\n(.*?)\n</response_b>", user, re.S).group(1)
    return a, b


async def test_which_real_position_biased_judge_gives_half():
    seen = []

    def fn(messages):
        seen.append(_blocks(messages))
        return "Looks real.\n<answer>A</answer>"

    row = _rows()[1]
    v = await judge_which_real(FunctionChatModel(fn), row, "PREDICTED SCREEN", SAMPLING)
    assert v.mode == "real"
    assert v.verdicts == ["A", "A"]
    assert v.valid == 2
    assert v.wins == 0.5
    assert v.error is None
    assert v.orderings == [("real", "predicted"), ("predicted", "real")]
    assert sorted(seen) == sorted([(SCREEN_2, "PREDICTED SCREEN"), ("PREDICTED SCREEN", SCREEN_2)])


async def test_which_real_judge_that_recognizes_real_gives_zero():
    def fn(messages):
        assert messages[0]["content"] == WHICH_REAL_SYSTEM
        a, b = _blocks(messages)
        return "<answer>A</answer>" if "notes.txt" in a else "<answer>B</answer>"

    v = await judge_which_real(FunctionChatModel(fn), _rows()[1], "root@box:/app# ls\n", SAMPLING)
    assert v.wins == 0.0
    assert v.verdicts == ["A", "B"]
    assert v.valid == 2


async def test_which_real_fooled_judge_gives_one():
    def fn(messages):
        a, _ = _blocks(messages)
        return "<answer>A</answer>" if a == "FAKE" else "<answer>B</answer>"

    v = await judge_which_real(FunctionChatModel(fn), _rows()[1], "FAKE", SAMPLING)
    assert v.wins == 1.0


def test_which_real_ground_truth_only_as_candidate():
    msgs = build_which_real_messages(_rows()[1], "X", "Y")
    assert SCREEN_2 not in msgs[1]["content"]
    assert "<real_observation>" not in msgs[1]["content"]


async def test_which_real_partial_failure():
    def fn(messages):
        a, _ = _blocks(messages)
        return "<answer>B</answer>" if a == SCREEN_2 else "undecided"

    v = await judge_which_real(FunctionChatModel(fn), _rows()[1], "FAKE", SAMPLING, retries=2)
    assert v.verdicts == ["B", None]
    assert v.valid == 1
    assert v.wins == 1.0
    assert v.error is not None and "predicted/real" in v.error
    assert v.raw == ["<answer>B</answer>", "undecided"]


async def test_which_real_total_failure_has_no_wins():
    def fn(messages):
        raise ConnectionError("down")

    v = await judge_which_real(FunctionChatModel(fn), _rows()[1], "FAKE", SAMPLING, retries=1)
    assert v.valid == 0 and v.wins is None
    assert v.verdicts == [None, None]
    assert "ConnectionError" in v.error


async def test_which_closer_content_judge():
    def fn(messages):
        assert messages[0]["content"] == WHICH_CLOSER_SYSTEM
        user = messages[1]["content"]
        real = re.search(r"<real_observation>\n(.*?)\n</real_observation>", user, re.S).group(1)
        a, b = _blocks(messages)
        return "<answer>A</answer>" if a == real else "<answer>B</answer>"

    row = _rows()[1]
    v = await judge_which_closer(FunctionChatModel(fn), row, SCREEN_2, "something else", SAMPLING)
    assert v.mode == "closer"
    assert v.wins == 1.0 and v.valid == 2
    assert v.verdicts == ["A", "B"]
    assert v.orderings == [("candidate", "baseline"), ("baseline", "candidate")]
    v = await judge_which_closer(FunctionChatModel(fn), row, "something else", SCREEN_2, SAMPLING)
    assert v.wins == 0.0


async def test_which_closer_position_biased_judge_gives_half():
    judge = FunctionChatModel(lambda m: "<answer>B</answer>")
    v = await judge_which_closer(judge, _rows()[0], "x", "y", SAMPLING)
    assert v.verdicts == ["B", "B"] and v.wins == 0.5


# ------------------------------------------- issue 16: complete judgements, kept raw text


class Answers(FunctionChatModel):
    """The FunctionChatModel seam with a finish reason: ``fn(messages) -> (text, finish_reason)``."""

    async def generate(self, messages, sampling):
        text, finish_reason = self.fn(messages)
        return Generation(text=text, finish_reason=finish_reason)


FIVE = {"format": 5, "factuality": 4, "consistency": 4, "realism": 3, "quality": 4}
# a judge stopped by max_tokens inside its score block: all five scores already written
CUT = '<final_evaluation>\n{"format": 5, "factuality": 4, "consistency": 4, "realism": 3, "quality": 4, "stren'


def test_cut_score_block_is_never_repaired_into_a_judgement():
    # json_repair alone would complete the cut object, with all five dimensions
    assert {d: v for d, v in json_repair.loads(CUT.split(">", 1)[1]).items() if d in DIMENSIONS} == FIVE
    s = parse_score(CUT, "length")
    assert s.error == "truncated: finish_reason=length" and s.total is None and s.scores == {}
    assert s.raw == CUT and s.finish_reason == "length"
    s = parse_score(CUT, "stop")  # a server that says "stop" does not make the block whole
    assert s.error == "truncated: <final_evaluation> not closed" and s.total is None
    s = parse_score(_final(ALL_FOUR) + "\nOn reflection:\n" + CUT)  # a closed block before the cut one
    assert s.error == "truncated: <final_evaluation> not closed"
    # a closed block followed by more text that ran into max_tokens: the last word is unknown
    assert parse_score(_final(ALL_FOUR) + "\nOn reflection", "length").error == "truncated: finish_reason=length"
    assert parse_score("<think>" + _final(ALL_FOUR) + " hmm, let me re", "length").total is None
    assert parse_score(_final(ALL_FOUR), "stop").total == 4.0


def test_mentioning_the_tag_before_the_block_is_not_a_cut():
    s = parse_score("I end with the <final_evaluation> block:\n" + _final(FIVE))
    assert s.error is None and s.scores == FIVE


@pytest.mark.parametrize(
    "scores, error, absent, invalid",
    [
        ({**FIVE, "quality": None}, "invalid: quality=None", [], {"quality": None}),
        ({d: v for d, v in FIVE.items() if d != "quality"}, "incomplete: missing quality", ["quality"], {}),
        ({**FIVE, "realism": "high"}, "invalid: realism='high'", [], {"realism": "high"}),
        ({**FIVE, "realism": "6"}, "invalid: realism='6'", [], {"realism": "6"}),
        ({**FIVE, "realism": 6}, "invalid: realism=6", [], {"realism": 6}),
        ({**FIVE, "realism": "4/10"}, "invalid: realism='4/10'", [], {"realism": "4/10"}),
        ({**FIVE, "realism": 3.5}, "invalid: realism=3.5", [], {"realism": 3.5}),
        ({"format": 4, "factuality": 0}, "incomplete: missing consistency, realism, quality; invalid: factuality=0",
         ["consistency", "realism", "quality"], {"factuality": 0}),
    ],
)
def test_incomplete_or_invalid_dimension_fails_and_is_recorded(scores, error, absent, invalid):
    s = parse_score(_final(scores))
    assert s.error == error and s.total is None and s.normalized is None
    assert s.absent == absent and s.invalid == invalid
    assert s.scores == {d: v for d, v in scores.items() if isinstance(v, int) and 1 <= v <= 5}


def test_tolerant_json_trailing_commas_single_quotes_and_string_scores():
    trailing = '<final_evaluation>{"format": 5, "factuality": 4, "consistency": 4, "realism": 3, "quality": 4,' \
        ' "strengths": ["prompt right",], "weaknesses": [],}</final_evaluation>'
    s = parse_score(trailing)
    assert s.error is None and s.scores == FIVE and s.total == pytest.approx(4.0) and s.strengths == ["prompt right"]
    single = "<final_evaluation>{'format': 5, 'factuality': 4, 'consistency': 4, 'realism': 3, 'quality': 4, " \
        "'strengths': ['exact prompt', \"the file's name\"], 'weaknesses': ['missing line']}</final_evaluation>"
    s = parse_score(single)
    assert s.error is None and s.scores == FIVE
    assert s.strengths == ["exact prompt", "the file's name"] and s.weaknesses == ["missing line"]
    # "4/5" in JSON that is otherwise malformed (unquoted fraction, trailing comma) is still 4
    fractions = '<final_evaluation>{"format": 4/5, "factuality": "4/5", "consistency": "4", "realism": " 3 / 5 ", ' \
        '"quality": 4.0,}</final_evaluation>'
    s = parse_score(fractions)
    assert s.error is None and s.scores == {"format": 4, "factuality": 4, "consistency": 4, "realism": 3, "quality": 4}
    # a closed block of "name: score" lines, without braces
    s = parse_score("<final_evaluation>\n" + "\n".join(f"{d}: {v}" for d, v in FIVE.items()) + "\n</final_evaluation>")
    assert s.error is None and s.scores == FIVE


async def test_judge_score_retries_a_cut_answer_and_keeps_the_final_raw_text():
    answers = iter([(CUT, "length"), (_final(FIVE), "stop")])
    s = await judge_score(Answers(lambda m: next(answers)), _rows()[1], "pred", SAMPLING, retries=3)
    assert s.error is None and s.attempts == 2 and s.total == pytest.approx(4.0)
    assert s.raw == _final(FIVE) and s.finish_reason == "stop"


async def test_judge_score_failure_keeps_raw_text_finish_reason_and_dimensions():
    calls = []

    def fn(messages):
        calls.append(1)
        return (CUT, "length") if len(calls) < 3 else (_final({**FIVE, "quality": "6"}), "stop")

    s = await judge_score(Answers(fn), _rows()[1], "pred", SAMPLING, retries=3)
    assert len(calls) == 3
    assert s.error == "invalid: quality='6' (3 attempt(s) failed)" and s.total is None
    assert s.raw == _final({**FIVE, "quality": "6"}) and s.finish_reason == "stop"
    assert s.invalid == {"quality": "6"} and s.attempts == 3
    s = await judge_score(Answers(lambda m: (CUT, "length")), _rows()[1], "pred", SAMPLING, retries=2)
    assert s.error == "truncated: finish_reason=length (2 attempt(s) failed)"
    assert s.raw == CUT and s.finish_reason == "length" and s.to_dict()["raw"] == CUT


async def test_pairwise_keeps_raw_text_and_finish_reason_of_both_orders():
    def fn(messages):
        a, _ = _blocks(messages)
        if a == SCREEN_2:
            return "The real one is A.\n<answer>A</answer>", "stop"
        return "<answer>A</answer> although, looking again at the prompt line, B sh", "length"

    v = await judge_which_real(Answers(fn), _rows()[1], "FAKE", SAMPLING, retries=2)
    assert v.verdicts == ["A", None] and v.valid == 1 and v.wins == 0.0
    assert v.raw == ["The real one is A.\n<answer>A</answer>", "<answer>A</answer> although, looking again at "
                     "the prompt line, B sh"]
    assert v.finish_reasons == ["stop", "length"]
    assert v.errors == [None, "truncated: finish_reason=length (2 attempt(s) failed)"]
    assert v.error == "order predicted/real: truncated: finish_reason=length (2 attempt(s) failed)"
    d = v.to_dict()
    assert d["raw"] == v.raw and d["finish_reasons"] == ["stop", "length"]


async def test_pairwise_unreadable_answer_is_kept():
    v = await judge_which_closer(Answers(lambda m: ("Both are fine.", "stop")), _rows()[0], "x", "y", SAMPLING,
                                 retries=1)
    assert v.raw == ["Both are fine.", "Both are fine."] and v.wins is None
    assert v.errors == ["unreadable: no <answer>A</answer> or <answer>B</answer> found (1 attempt(s) failed)"] * 2


def _stub_judge_answer(body):
    """A judge server's answers, chosen by the current action of the row (echo 0-1 … 0-4)."""
    action = body["messages"][-1]["content"].split("## Current action")[1]
    if "echo 0-1" in action:  # complete, in sloppy JSON
        return completion("<final_evaluation>{'format': 5, 'factuality': '4/5', 'consistency': \"4\", 'realism': 4, "
                          "'quality': 3, 'strengths': ['prompt right'], 'weaknesses': ['wrong echo',],}"
                          "</final_evaluation>")
    if "echo 0-2" in action:  # stopped by max_tokens inside the block
        return completion(CUT, "length")
    if "echo 0-3" in action:
        return completion(_final({d: v for d, v in FIVE.items() if d != "quality"}))
    return completion(_final({**FIVE, "realism": "6"}))


async def test_judge_failures_through_the_runner_with_a_judge_server(tmp_path):
    data = make_data(tmp_path, episodes=1, turns=4)
    with chat_stub(_stub_judge_answer) as (base_url, log):
        judge = load_model("stub-judge", base_url=base_url)
        summary = await evaluate(EvalConfig(out=tmp_path / "run", data=data), FunctionChatModel(oracle), judge=judge,
                                 show_progress=False)
        await judge.aclose()
    assert len(log) == 1 + 3 * 3  # the three failed rows are asked three times each
    terminal = summary["domains"]["terminal"]
    assert terminal["judge_score"] == 75.0  # only the complete judgement: mean 4 → 75
    assert (terminal["judge_failed"], terminal["judge_incomplete"], terminal["judge_truncated"]) == (3, 2, 1)
    assert summary["micro"]["judge_score"] == 75.0 and summary["macro"]["judge_score"] == 75.0
    assert summary["judge_errors"] == {"truncated": 1, "incomplete": 1, "invalid": 1}
    records = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    ok, cut, missing, invalid = (r["judge"] for r in records)
    assert ok["error"] is None and ok["total"] == 4.0 and ok["strengths"] == ["prompt right"]
    assert ok["weaknesses"] == ["wrong echo"] and ok["finish_reason"] == "stop" and ok["raw"].startswith("<final_")
    assert cut["raw"] == CUT and cut["finish_reason"] == "length" and cut["total"] is None
    assert cut["error"] == "truncated: finish_reason=length (3 attempt(s) failed)"
    assert missing["absent"] == ["quality"] and missing["invalid"] == {} and missing["error"].startswith("incomplete")
    assert invalid["invalid"] == {"realism": "6"} and invalid["error"].startswith("invalid: realism='6'")
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| judge_score | judge_failed | judge_incomplete | judge_truncated |" in report
    assert "| 75.0 | 3 | 2 | 1 |" in report
    assert 'judge failures: `{"truncated": 1, "incomplete": 1, "invalid": 1}`' in report
