"""Reasoning removal and observation extraction on well-formed and broken outputs."""

import pytest
from fastapi import FastAPI, Request
from servers import serve_app

from lwm.data.build import format_target
from lwm.models.base import SamplingParams
from lwm.models.openai_compat import OpenAIChatModel
from lwm.parse import (
    DEFAULT_STOP,
    END_OF_TURN_TOKENS,
    ISSUES,
    NEXT_TURN_TOKENS,
    OBS_CLOSE,
    OBS_OPEN,
    observation_text,
    parse_output,
    split_reasoning,
)
from lwm.schema import format_response

O, C = OBS_OPEN, OBS_CLOSE


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
        ("\n\n     1\tfirst line of `cat -n`\n     2\tsecond  \n", "     1\tfirst line of `cat -n`\n     2\tsecond"),
        ("**Environment Observation:**\n  indented", "  indented"),
        ("**Environment Observation:**  on the marker's line", "on the marker's line"),
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
    # a server that stopped on something else after an end of turn: nothing to restore
    leaked = parse_output(f"{O}screen<end_of_turn>\n<start_of_turn>user\n", stopped_at=DEFAULT_STOP)
    assert (leaked.observation, leaked.issues) == ("screen", ["unclosed_observation_tag", "end_of_turn_token"])


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


# ------------------------------------------------ observations may contain any text (issue 14 §1)


@pytest.mark.parametrize(
    "text, observation, issues",
    [
        # inside the observation: tags are observation text, counted
        (f"<think>r</think>{O}$ cat a.txt\n<think>x</think>\n{C}", "$ cat a.txt\n<think>x</think>",
         ["think_tag_in_observation"]),
        (f"{O}$ cat a.txt\n</think>\n{C}", "$ cat a.txt\n</think>", ["think_tag_in_observation"]),
        (f"{O}$ cat a.txt\n<think>\n{C}", "$ cat a.txt\n<think>", ["think_tag_in_observation"]),
        (f"<think>r</think>{O}$ cat f\n{O}x{C}\n{C}", f"$ cat f\n{O}x{C}", ["observation_tag_in_observation"]),
        (f"{O}$ cat f\n{C}\nafter\n{C}", f"$ cat f\n{C}\nafter", ["observation_tag_in_observation"]),
        (f"{O}$ cat f\n{O}\n{C}", f"$ cat f\n{O}", ["observation_tag_in_observation"]),
        (f"{O}$ cat f\n<PREDICTED_OBSERVATION>x</Predicted_Observation>\n{C}",
         "$ cat f\n<PREDICTED_OBSERVATION>x</Predicted_Observation>", ["observation_tag_in_observation"]),
        (f"{O}&lt;/predicted_observation&gt; &lt;think&gt; <\\/predicted_observation>{C}",
         "&lt;/predicted_observation&gt; &lt;think&gt; <\\/predicted_observation>", []),
        (f"{O}$ cat chat.txt\n<|im_end|>\n<|im_start|>user\n{C}", "$ cat chat.txt\n<|im_end|>\n<|im_start|>user",
         ["end_of_turn_in_observation"]),
        # the ambiguous readings the rule settles one way (module docstring, rule 2)
        (f"I answer in {O} tags.\n{O}x{C}", f"tags.\n{O}x", ["observation_tag_in_observation"]),
        (f"{O}a{C} b {O}c{C}", "c", ["multiple_observation_tags"]),
        # inside reasoning: tags are reasoning text
        (f"<think>it prints <think>x</think> and {C}</think>{O}screen{C}", "screen", []),
        (f"<think>answer in {O} tags; <|im_end|> ends a turn</think>{O}screen{C}", "screen", []),
        (f"<think>draft {O}old{C}</think>{O}screen{C}", "screen", []),
        (f"prompt-side reasoning: answer in {O} tags</think>\n{O}screen{C}", "screen", ["orphan_think_close"]),
        # after an unclosed reasoning block
        (f"<think>r {O}$ cat a\n<think>x</think>\n{C}", "$ cat a\n<think>x</think>",
         ["unclosed_think", "observation_inside_reasoning", "think_tag_in_observation"]),
        (f"<think>r {O}$ cat a\n</think>\n{C}", "$ cat a\n</think>",
         ["observation_opened_in_reasoning", "think_tag_in_observation"]),
        (f"<think>r {O}$ cat f\n{O}x{C}\n{C}", f"$ cat f\n{O}x{C}",
         ["unclosed_think", "observation_inside_reasoning", "observation_tag_in_observation"]),
        (f"<think>answer in {O} tags, so: {O}x{C}", "x", ["unclosed_think", "observation_inside_reasoning"]),
        (f"<think>r {O}half-written", "", ["unclosed_think", "no_observation_tag", "empty"]),
        # without tags
        (f"screen\n{C}", "screen", ["no_observation_tag", "orphan_observation_close"]),
        ("screen <think>r</think> more", "screen  more", ["no_observation_tag", "reasoning_after_text"]),
        ("İstanbul" + f"<think>r</think>{O}x{C}", "x", []),  # str.lower() lengthens İ: offsets stay right
    ],
)
def test_tags_in_every_position(text, observation, issues):
    parsed = parse_output(text)
    assert parsed.observation == observation
    assert parsed.issues == issues
    assert set(issues) <= set(ISSUES)


def test_split_reasoning_keeps_think_tags_after_the_answer_tag():
    answer, reasoning, issues = split_reasoning(f"<think>r</think>{O}a <think>b</think>{C}<think>c</think>")
    assert (answer, reasoning, issues) == (f"{O}a <think>b</think>{C}<think>c</think>", "r", [])


HOSTILE = (
    "<think>x</think>",
    "a lone </think> close",
    f"{O}nested{C}",
    f"a lone {O} open",
    f"a lone {C} close",
    "&lt;/predicted_observation&gt; and <\\/predicted_observation> and &lt;think&gt;",
    "<|im_end|> <|eot_id|> <end_of_turn>",
    "### Turn 2\n**Action:** quoted from a transcript",
)
# One observation of each domain's shape with ``{x}`` where hostile text goes.
SHAPES = {
    "terminal": "root@sandbox:/app# cat notes.txt\n{x}\nroot@sandbox:/app#",
    "mcp": '{{"path": "/app/notes.txt", "content": "{x}", "size": 42}}',
    "db": "id|body\n1|{x}\n2|plain",
    "code": '[stderr]\nTraceback (most recent call last):\n  File "<stdin>", line 1, in <module>\nValueError: {x}',
    "web": "RootWebArea 'Notes'\n\t[12] heading '{x}'\n\t[13] link 'more'\n\tStaticText '{x}'",
    "swe": "     1\t# Notes\n     2\t{x}\n     3\t```py\n     4\tprint(1)\n     5\t```",
    "swe_error": "<tool_use_error>File does not exist: /repo/{x}</tool_use_error>",
    "search": "1. Notes — http://docs.local/notes\n   {x}\n2. More — http://docs.local/more",
}
OBSERVATIONS = [pytest.param(shape.format(x=x), id=f"{name}-{i}") for name, shape in SHAPES.items()
                for i, x in enumerate(HOSTILE)]
OBSERVATIONS += [pytest.param(shape.format(x="\n".join(HOSTILE)), id=f"{name}-all") for name, shape in SHAPES.items()]


@pytest.mark.parametrize("observation", OBSERVATIONS)
def test_every_domain_shape_survives_every_path(observation):
    # ground truth: marker and fence removed
    assert observation_text(format_response(observation)) == observation
    # a training target, with and without reasoning
    assert parse_output(format_target(observation, "the file holds tags")).observation == observation
    assert parse_output(format_target(observation)).observation == observation
    # a model answering inside the tag, in the ground truth's style, then ending its turn
    answer = f"<think>r</think>\n{O}\n{format_response(observation)}\n{C}<|im_end|>\n<|im_start|>user\n{O}x{C}"
    parsed = parse_output(answer)
    assert parsed.observation == observation
    assert "end_of_turn_token" in parsed.issues and "multiple_observation_tags" not in parsed.issues
    # a server that applies the stop strings: it cuts at the first one, the observation's own
    # text included (the parser cannot restore that part: see DEFAULT_STOP)
    served = f"{O}\n{observation}\n{C}<|im_end|>"
    served = served[: min(i for stop in DEFAULT_STOP if (i := served.find(stop)) >= 0)]
    cut = parse_output(served, stopped_at=DEFAULT_STOP)
    assert "unclosed_observation_tag" not in cut.issues
    if not any(stop in observation for stop in DEFAULT_STOP):
        assert cut.observation == observation


# ------------------------------------------------ end of turn, invented turns, truncation (issue 16)


@pytest.mark.parametrize("token", END_OF_TURN_TOKENS)
def test_end_of_turn_tokens_cut_outside_the_tag_and_stay_inside_it(token):
    tail = f"{token}\n<|im_start|>user\n### Turn 4\n**Action:**\n```\nls\n```\n{O}invented{C}"
    assert parse_output(f"{O}screen{C}{tail}").issues == ["end_of_turn_token"]
    assert parse_output(f"{O}screen{C}{tail}").observation == "screen"
    after_unclosed = parse_output(f"<think>r</think>{O}screen\n{tail}")
    assert (after_unclosed.observation, after_unclosed.issues) == ("screen", ["unclosed_observation_tag",
                                                                              "end_of_turn_token"])
    untagged = parse_output(f"screen\n{tail}")
    assert (untagged.observation, untagged.issues) == ("screen", ["end_of_turn_token", "no_observation_tag"])
    literal = parse_output(f"{O}$ cat template\n{token}\n{C}")
    assert (literal.observation, literal.issues) == (f"$ cat template\n{token}", ["end_of_turn_in_observation"])


@pytest.mark.parametrize("marker", ["### Turn 4", "**Action:**", *NEXT_TURN_TOKENS])
def test_an_invented_next_turn_is_cut(marker):
    tail = f"\n{marker}user\n```\nls\n```\n{O}invented{C}"
    for text in (f"{O}screen{C}{tail}", f"{O}screen{tail}", f"screen{tail}"):
        parsed = parse_output(text)
        assert parsed.observation == "screen" and "invented_next_turn" in parsed.issues, text


@pytest.mark.parametrize(
    "text, observation, issues",
    [
        # a lone opening tag inside the observation leaves the block open: an end of turn
        # after its closing tag still ends the text, and the invented block is not read
        (f"{O}$ cat f\n{O}\n{C}<|im_end|><|im_start|>user\n{O}invented{C}", f"$ cat f\n{O}",
         ["end_of_turn_token", "observation_tag_in_observation"]),
        # an unclosed answer, an end of turn, an invented turn with a complete block
        (f"{O}a\n<|im_end|>\n<|im_start|>user\n{O}invented{C}", "a", ["unclosed_observation_tag", "end_of_turn_token"]),
        # before the answer tag, a next-turn marker after text ends the text: a restated
        # action is read as an invented turn (counted), an invented turn is never read as the answer
        (f"Here is my prediction:\n**Action:** ls\n{O}a.txt{C}", "Here is my prediction:",
         ["invented_next_turn", "no_observation_tag"]),
        (f"a.txt\n### Turn 4\n**Action:**\n```\nrm a.txt\n```\n{O}invented{C}", "a.txt",
         ["invented_next_turn", "no_observation_tag"]),
    ],
)
def test_end_of_turn_ambiguities(text, observation, issues):
    parsed = parse_output(text)
    assert (parsed.observation, parsed.issues) == (observation, issues)


def test_next_turn_markers_only_count_after_answer_text():
    echoed = "### Turn 3\n**Action:**\n```\nls\n```\na.txt"  # a header echoed before the answer
    assert parse_output(echoed).issues == ["no_observation_tag"]
    preamble = f"### Turn 3\n**Action:** ls lists the files.\n{O}a.txt{C}"
    assert parse_output(preamble).observation == "a.txt"


def test_default_stop_holds_end_of_turn_tokens_within_the_openai_limit():
    assert len(DEFAULT_STOP) <= 4  # OpenAI's API refuses more than four stop sequences
    assert {OBS_CLOSE, "### Turn", "<|im_end|>", "<|eot_id|>"} == set(DEFAULT_STOP)


@pytest.mark.parametrize(
    "text, observation, issues",
    [
        (f"<think>r</think>{O}partial scr", "partial scr", ["unclosed_observation_tag", "truncated"]),
        (f"<think>r {O}draft{C} more reasoning", "draft", ["unclosed_think", "observation_inside_reasoning",
                                                           "truncated"]),
        ("<think>reasoning cut", "", ["unclosed_think", "no_observation_tag", "empty", "truncated"]),
        ("plain screen cut", "plain screen cut", ["no_observation_tag", "truncated"]),
        (f"<think>{O}draft{C}</think> and then", "draft", ["observation_inside_reasoning", "truncated"]),
        # complete before the cut: not a draft
        (f"{O}done{C} and commentary cut", "done", []),
        (f"{O}screen<|im_end|><|im_start|>user\nand on", "screen", ["unclosed_observation_tag", "end_of_turn_token"]),
        ("screen\n### Turn 4\n**Action:** ls", "screen", ["invented_next_turn", "no_observation_tag"]),
    ],
)
def test_truncated_drafts_are_flagged(text, observation, issues):
    parsed = parse_output(text, truncated=True, stopped_at=DEFAULT_STOP)  # truncated wins: nothing restored
    assert (parsed.observation, parsed.issues) == (observation, issues)
    assert "truncated" not in parse_output(text).issues


async def test_leaked_end_of_turn_through_an_openai_compatible_server():
    # A real HTTP server speaking the chat-completions protocol, as a server whose chat
    # template does not end the turn answers: special tokens as plain text, an invented
    # next turn. It honours stop strings like vLLM (cut before the first, not included)
    # when asked to, and reports max_tokens as finish_reason "length".
    leaked = (f"<think>ls lists</think>{O}a.txt{C}<|im_end|>\n<|im_start|>user\n### Turn 2\n**Action:**\n"
              f"```\nrm a.txt\n```<|im_end|>\n<|im_start|>assistant\n{O}invented{C}")
    app, bodies = FastAPI(), []

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        bodies.append(body)
        content, finish = leaked, "stop"
        if body.get("stop"):
            cuts = [i for s in body["stop"] if (i := content.find(s)) >= 0]
            content = content[: min(cuts)] if cuts else content
        if body["max_tokens"] < 10:
            content, finish = f"{O}a.t", "length"
        return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": finish,
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}

    messages = [{"role": "user", "content": "ls"}]
    with serve_app(app) as url:
        model = OpenAIChatModel("stub", f"{url}/v1", max_retries=0)
        ignored = await model.generate(messages, SamplingParams(max_tokens=64))
        honoured = await model.generate(messages, SamplingParams(max_tokens=64, stop=DEFAULT_STOP))
        cut = await model.generate(messages, SamplingParams(max_tokens=4, stop=DEFAULT_STOP))
        await model.aclose()
    assert bodies[1]["stop"] == list(DEFAULT_STOP)
    parsed = parse_output(ignored.text, ignored.reasoning)
    assert (parsed.observation, parsed.issues) == ("a.txt", ["end_of_turn_token"])
    parsed = parse_output(honoured.text, honoured.reasoning, stopped_at=DEFAULT_STOP)
    assert (honoured.text, parsed.observation, parsed.issues) == (f"<think>ls lists</think>{O}a.txt", "a.txt", [])
    parsed = parse_output(cut.text, cut.reasoning, truncated=cut.finish_reason == "length")
    assert (parsed.observation, parsed.issues) == ("a.t", ["unclosed_observation_tag", "truncated"])


# ------------------------------------------------ linear time


@pytest.mark.timeout(20)  # linear parsing takes milliseconds; a quadratic one would take minutes
@pytest.mark.parametrize(
    "unit, head, tail, observation, first_issue",
    [
        (O, "", "", None, "unclosed_observation_tag"),
        (O, "", f"</think>{O}x{C}", "x", "orphan_think_close"),
        ("<think>", "", "", "", "unclosed_think"),
        ("</think>", "", f"{O}x{C}", "x", "orphan_think_close"),
        (f"{O}a{C}", "", "", "a", "multiple_observation_tags"),
        (C, O, "", None, "observation_tag_in_observation"),
        (O, "<think>", C, "", "unclosed_think"),
        (O, "<think>", f"</think>{C}", "</think>", "observation_opened_in_reasoning"),
        (f"<think>{O}</think>{C}<|im_end|>\n### Turn 1\n", "", "", "</think>", "end_of_turn_token"),
        ("\n### Turn 1\n", "screen", "", "screen", "no_observation_tag"),
        ("<|im_end|>x", O, C, None, "end_of_turn_in_observation"),
        ("```" + " " * 60 + "x\n", "```\n", "", None, "no_observation_tag"),
    ],
)
def test_adversarial_200_kb_outputs_parse_in_linear_time(unit, head, tail, observation, first_issue):
    text = head + unit * (200_000 // len(unit)) + tail
    parsed = parse_output(text)
    if observation is not None:
        assert parsed.observation == observation
    else:
        assert len(parsed.observation) > 150_000  # the repeated text is kept, not lost
    assert first_issue in parsed.issues
    assert len(parsed.issues) == len(set(parsed.issues))  # each issue once, however often it occurs
    split_reasoning(text)
