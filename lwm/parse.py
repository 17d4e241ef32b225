"""Reading a world model's answer: reasoning removal and observation extraction.

The answer is the **last** ``<predicted_observation>…</predicted_observation>`` block
outside reasoning; without a tag, the cleaned text (DESIGN.md §4, the convention of
Qwen-AgentWorld's ``eval.py``). An observation is whatever the environment prints, so it
may itself contain ``<think>``, ``</think>``, the observation tags or a chat template's
tokens (a ``cat`` of such a file, a web page, a model transcript). The rules, in order:

1. **Reasoning precedes the answer.** Removed as reasoning: ``<think>…</think>`` blocks
   (nested ones included) before the first opening observation tag outside them; text
   before a ``</think>`` that has no opening tag (the chat template opened the block in
   the prompt: ``orphan_think_close``); reasoning the server returned separately. An
   opening observation tag before such an orphan ``</think>`` is taken as reasoning that
   mentions the tag when no closing observation tag comes between them and an opening one
   follows. Once the answer tag has opened, think tags are observation text.
2. **The answer block.** Observation tags nest: an opening tag inside an open block is
   text, not a new block. The answer is the last top-level block and it ends at the
   **last** closing tag of the text (one that closes nothing is text too); the tags it
   contains are observation text (``observation_tag_in_observation``). Where two
   readings look the same the rule reads a lone ``<predicted_observation>`` as
   observation text (not as a tag written before the real one), and
   ``</predicted_observation> … <predicted_observation>`` as two blocks
   (``multiple_observation_tags``: the last wins), not as observation text. Escaped tags
   (``&lt;think&gt;``, JSON's ``<\\/predicted_observation>``) are plain text.
3. **End of turn.** An end-of-turn token (:data:`END_OF_TURN_TOKENS`) or a next-turn
   marker (``### Turn N`` or ``**Action:**`` at a line start, a chat template's turn
   opener in :data:`NEXT_TURN_TOKENS`) outside every observation tag ends the generation:
   nothing after it is read (``end_of_turn_token``, ``invented_next_turn``). A next-turn
   marker counts only after text (a header echoed before the answer is kept). Inside an
   observation block, both are observation text when the block is closed after them
   (``end_of_turn_in_observation``); otherwise the first one ends the block, at its last
   closing tag if it has one (a lone opening tag inside an observation leaves the block
   open). Reasoning is free text: both are kept there.
4. **No answer tag outside reasoning**, tried in order: a block opened inside reasoning
   and closed after it (reasoning left open, then an observation containing
   ``</think>``: ``observation_opened_in_reasoning``); the last complete block inside the
   reasoning, a draft (``observation_inside_reasoning``); the text before a closing tag
   with no opening one (``orphan_observation_close``); the whole cleaned text
   (``no_observation_tag``). Reasoning often mentions the tag, so there a block's
   opening tag is found by matching tags backwards from its closing tag: a mention before
   a draft is left out, nested tags inside it are kept. Without a tag, think blocks
   anywhere are reasoning (``reasoning_after_text`` when answer text came before one).
5. **Truncation.** With ``truncated=True`` (the generation hit ``max_tokens``), the
   observation is a draft, flagged ``truncated``, when it runs to where the text was cut:
   an unclosed answer tag, no answer outside reasoning (the draft is the last complete
   block inside the reasoning, or empty), or an answer without tags, in each case unless
   an end-of-turn token, a next-turn marker or a closing tag ended it first.

Every irregularity is reported in :attr:`ParsedOutput.issues` so callers count it instead
of dropping the row. Parsing is linear in the length of the output.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

#: How a ground-truth response starts in AgentWorldBench rows (``response`` items).
OBSERVATION_MARKER = "**Environment Observation:**"

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
OBS_OPEN, OBS_CLOSE = "<predicted_observation>", "</predicted_observation>"

#: Tokens that end an assistant turn, from the published chat templates: ChatML (Qwen,
#: SmolLM2), Llama 3, Gemma, GPT-2-style ``<|endoftext|>``, Phi-3, Llama 2 / Mistral.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<end_of_turn>", "<eos>",
                      "<|endoftext|>", "<|end|>", "</s>")
#: Tokens that open a new turn in the same templates.
NEXT_TURN_TOKENS = ("<|im_start|>", "<|start_header_id|>", "<start_of_turn>", "<|user|>", "<|assistant|>", "[INST]")

_TOKEN = re.compile(
    r"(?i:(?P<think><think>)|(?P<unthink></think>)"
    r"|(?P<open><predicted_observation>)|(?P<close></predicted_observation>))"
    rf"|(?P<eot>{'|'.join(map(re.escape, END_OF_TURN_TOKENS))})"
    rf"|(?P<turn>^[ \t]*(?:### Turn \d+|\*\*Action:\*\*)|{'|'.join(map(re.escape, NEXT_TURN_TOKENS))})",
    re.MULTILINE,
)
_OBS_TAG = re.compile(r"<(/?)predicted_observation>", re.IGNORECASE)
_TAG = {tag: re.compile(re.escape(tag), re.IGNORECASE) for tag in (THINK_OPEN, THINK_CLOSE, OBS_OPEN, OBS_CLOSE)}
_FENCED = re.compile(r"\A(`{3,})[^\n`]*\n(.*?)\n?\1\s*\Z", re.DOTALL)
_LEADING_FENCE = re.compile(r"\A(`{3,})[^\n`]*\n(.*?)\n\1(?:\n|\Z)", re.DOTALL)

#: Stop strings that end an answer: the close of the answer tag, the start of a new turn
#: (a model that writes "### Turn N" has finished its observation and is inventing the
#: next action), and the ChatML and Llama 3 end-of-turn tokens, which some servers leave
#: in the text as plain characters. Four at most: OpenAI's API refuses more ("Up to 4
#: sequences", its Chat Completions reference). Servers drop special tokens from the text
#: before matching, so the last two only act where a model writes them as plain text. A
#: server cuts at a stop string wherever it appears, an observation's own text included:
#: the parser cannot restore what follows a literal ``</predicted_observation>`` there.
DEFAULT_STOP = (OBS_CLOSE, "### Turn", "<|im_end|>", "<|eot_id|>")

#: Names of the irregularities :func:`parse_output` reports (rule numbers of the module docstring).
ISSUES = (
    "orphan_think_close",  # 1: a </think> with no opening tag (prompt-side <think>): text before it is reasoning
    "unclosed_think",  # a <think> never closed: the rest is reasoning
    "no_observation_tag",  # 4: no <predicted_observation> block: the cleaned text is the answer
    "unclosed_observation_tag",  # 2: the last block is never closed: it runs to the end or an end of turn
    "multiple_observation_tags",  # 2: several top-level blocks: the last one is the answer
    "observation_tag_in_observation",  # 2: the answer holds observation tags, kept as text
    "think_tag_in_observation",  # 1: the answer holds think tags, kept as text
    "end_of_turn_in_observation",  # 3: the closed answer holds an end-of-turn token or next-turn marker, kept
    "end_of_turn_token",  # 3: an end-of-turn token outside a closed tag: the text was cut there
    "invented_next_turn",  # 3: a next-turn marker after answer text: the text was cut there
    "observation_opened_in_reasoning",  # 4: the block opened inside reasoning and closed after it
    "observation_inside_reasoning",  # 4: the only complete block was inside reasoning
    "orphan_observation_close",  # 4: a closing tag with no opening one: the text before it is the answer
    "reasoning_after_text",  # 4: no tag, and a think block after answer text was removed as reasoning
    "text_after_observation",  # a marked, fenced observation followed by commentary (dropped)
    "empty",  # nothing left
    "truncated",  # 5: cut by max_tokens inside the answer or the reasoning: the observation is a draft
)


@dataclass
class ParsedOutput:
    """A world model's output, taken apart.

    Attributes:
        observation: the predicted observation (marker and single enclosing fence removed).
        reasoning: all reasoning text found, joined by blank lines.
        issues: irregularities found, names from :data:`ISSUES`.
    """

    observation: str
    reasoning: str = ""
    issues: list[str] = field(default_factory=list)


@dataclass
class _Split:
    # What precedes the answer: see _split.
    outside: str  # text outside reasoning, up to the answer tag or the end
    reasoning: list[str]
    issues: list[str]
    answer: re.Match | None = None  # the opening tag of the answer, if one is outside reasoning
    open_think: bool = False  # reasoning ran to the end
    cut: bool = False  # the text ended at an end-of-turn token or next-turn marker
    last_close: int | None = None  # offset of the last closing observation tag outside reasoning
    text_before_think: bool = False  # a think block came after non-blank outside text


def _split(text: str, tokens: Iterator[re.Match], *, end_of_turn: bool) -> _Split:
    # Rule 1, one pass over ``tokens`` (continued by the caller past the answer tag). With
    # end_of_turn, rule 3 outside reasoning: an end-of-turn token, or a next-turn marker
    # after outside text (``fresh``: some since the last marker), ends the text.
    out: list[str] = []
    s = _Split(outside="", reasoning=[], issues=[])
    depth = pos = start = checked = 0
    thought, has_text, fresh, mention_until = False, False, False, -1
    for m in tokens:
        kind = m.lastgroup
        if kind == "think":
            if depth == 0:
                out.append(text[pos : m.start()])
                has_text = has_text or bool(out[-1].strip())
                fresh = fresh or bool(text[max(pos, checked) : m.start()].strip())
                s.text_before_think |= has_text
                start, thought = m.end(), True
            depth += 1
        elif kind == "unthink":
            if depth > 0:
                depth -= 1
                if depth == 0:
                    s.reasoning.append(text[start : m.start()])
                    pos = m.end()
            else:  # orphan close: everything so far was reasoning
                s.issues.append("orphan_think_close")
                s.reasoning.append("".join(out) + text[pos : m.start()])
                out, pos, thought, has_text, fresh = [], m.end(), True, False, False
        elif depth > 0:
            continue
        elif kind == "open":
            if m.start() < mention_until or (not thought and (mention_until := _mention_end(text, m.end())) > 0):
                continue
            s.answer = m
            out.append(text[pos : m.start()])
            break
        elif kind == "close":
            s.last_close = m.start()
        elif end_of_turn and kind in ("eot", "turn"):
            if kind == "eot" or fresh or text[max(pos, checked) : m.start()].strip():
                s.issues.append("end_of_turn_token" if kind == "eot" else "invented_next_turn")
                s.cut = True
                out.append(text[pos : m.start()])
                break
            checked = m.end()  # a header echoed before any answer text
    else:
        if depth > 0:
            s.issues.append("unclosed_think")
            s.open_think = True
            s.reasoning.append(text[start:])
        else:
            out.append(text[pos:])
    s.outside = "".join(out)
    return s


def _mention_end(text: str, after: int) -> int:
    # Rule 1's look-ahead for an opening tag at ``after``: the offset of an orphan </think>
    # that ends the reasoning mentioning it, or -1.
    close = _TAG[THINK_CLOSE].search(text, after)
    if (close is None or _TAG[THINK_OPEN].search(text, after, close.start())
            or _TAG[OBS_CLOSE].search(text, after, close.start())
            or not _TAG[OBS_OPEN].search(text, close.end())):
        return -1
    return close.start()


def split_reasoning(text: str) -> tuple[str, str, list[str]]:
    """Separate the reasoning that precedes an answer from the rest (rule 1 of the module
    docstring): closed, nested and unclosed ``<think>`` blocks and a leading orphan
    ``</think>``; text from the first ``<predicted_observation>`` outside reasoning on is
    answer text, think tags included.

    Returns:
        ``(answer_text, reasoning_text, issues)``: the reasoning blocks joined by blank lines,
        each issue name (from :data:`ISSUES`) at most once.
    """
    s = _split(text, _TOKEN.finditer(text), end_of_turn=False)
    answer = s.outside + (text[s.answer.start() :] if s.answer else "")
    return answer, _join(s.reasoning), list(dict.fromkeys(s.issues))


def _join(parts: list[str]) -> str:
    return "\n\n".join(p.strip() for p in parts if p.strip())


def observation_text(text: str) -> str:
    """Clean an observation: drop the ``**Environment Observation:**`` marker and one
    fenced block that encloses everything; without a fence, drop blank lines around it
    and trailing whitespace, keeping the first line's indentation unless that line starts
    on the marker's line. Any other text, tags included, is kept. Works on ground truth and
    predictions alike."""
    return _clean(text)[0]


def _clean(text: str) -> tuple[str, bool]:
    # Returns (observation, whether commentary followed a marked, fenced observation).
    body = text.strip()
    marked = body.startswith(OBSERVATION_MARKER)
    if marked:
        text = body[len(OBSERVATION_MARKER) :]
        body = text.strip()
    if m := _FENCED.match(body):
        return m.group(2), False
    if marked and (m := _LEADING_FENCE.match(body)):  # marker + a fenced block + commentary: keep the block
        return m.group(2), True
    # the first line's indentation is output (``cat -n`` starts with spaces)
    text = text.rstrip()
    body = text.lstrip()
    newline = text.rfind("\n", 0, len(text) - len(body))
    return (text[newline + 1 :] if newline >= 0 else body), False


def _last(pattern: re.Pattern, text: str) -> re.Match | None:
    last = deque(pattern.finditer(text), maxlen=1)
    return last[0] if last else None


def _last_block(text: str) -> str | None:
    # A draft inside reasoning: the block that ends at the last closing tag, its opening
    # tag found by matching tags backwards (a tag mentioned before the draft is then left
    # out); with too few opening tags, the first one.
    tags = list(_OBS_TAG.finditer(text))
    close = next((i for i in range(len(tags) - 1, -1, -1) if tags[i].group(1)), None)
    if close is None:
        return None
    depth, opened = 0, None
    for m in reversed(tags[: close + 1]):
        depth += 1 if m.group(1) else -1
        if not m.group(1):
            opened = m
            if depth == 0:
                break
    return text[opened.end() : tags[close].start()] if opened else None


def _tags_inside(observation: str) -> list[str]:
    kinds = {m.lastgroup for m in _TOKEN.finditer(observation)}
    return [issue for issue, found in (("observation_tag_in_observation", kinds & {"open", "close"}),
                                       ("think_tag_in_observation", kinds & {"think", "unthink"}),
                                       ("end_of_turn_in_observation", kinds & {"eot", "turn"})) if found]


def _answer(text: str, first: re.Match, tokens: Iterator[re.Match]) -> tuple[str, list[str], bool]:
    # Rules 2 and 3 from the answer's opening tag ``first``: (observation, issues, draft).
    # ``pending``: the first end of turn inside the block that no later closing tag has
    # brought back to depth 0 yet; if none does, the text ends there.
    depth, top, blocks, last_close, cut, pending, content_from = 1, first, 1, None, None, None, first.end()
    for m in tokens:
        kind = m.lastgroup
        if kind == "open":
            if depth == 0:
                top, blocks, content_from = m, blocks + 1, m.end()
            depth += 1
        elif kind == "close":
            depth = max(depth - 1, 0)
            if depth == 0:
                pending = None
            if pending is None:
                last_close = m
        elif kind in ("eot", "turn"):
            if depth == 0:
                cut = m
                break
            if pending is None:
                if kind == "eot" or text[content_from : m.start()].strip():
                    pending = m
                else:  # a header echoed before any observation text
                    content_from = m.end()
    cut = pending or cut
    issues = ["multiple_observation_tags"] if blocks > 1 else []
    if last_close is not None and last_close.start() > top.start():
        observation = text[top.end() : last_close.start()]
    else:
        observation = text[top.end() : cut.start() if cut else len(text)]
        issues.append("unclosed_observation_tag")
    if cut is not None:
        issues.append("end_of_turn_token" if cut.lastgroup == "eot" else "invented_next_turn")
    draft = "unclosed_observation_tag" in issues and cut is None
    return observation, issues + _tags_inside(observation), draft


def parse_output(
    text: str, reasoning_content: str | None = None, *, stopped_at: tuple[str, ...] = (), truncated: bool = False
) -> ParsedOutput:
    """Extract the predicted observation from a world model's raw output, by the rules of
    the module docstring.

    Args:
        text: the message content.
        reasoning_content: reasoning the server returned separately (vLLM/SGLang
            ``reasoning_content``), if any.
        stopped_at: the stop strings of a generation that ended on one; OpenAI-compatible
            servers cut the stop string, so when ``</predicted_observation>`` is among them
            and the last observation tag of the text is an opening one that no end-of-turn
            token or next-turn marker follows, the close is restored.
        truncated: the generation ended at ``max_tokens`` (``finish_reason="length"``); a
            draft observation is then flagged ``truncated`` (rule 5) and nothing is restored.

    Returns:
        the observation, the reasoning and the irregularities (names from :data:`ISSUES`,
        each at most once, in the order found).
    """
    text = text or ""
    if not truncated and OBS_CLOSE in stopped_at:  # restore the close, unless an end of turn came first
        opened = _last(_OBS_TAG, text)
        if opened and not opened.group(1):
            if not {m.lastgroup for m in _TOKEN.finditer(text, opened.end())} & {"eot", "turn"}:
                text += OBS_CLOSE
    tokens = _TOKEN.finditer(text)
    s = _split(text, tokens, end_of_turn=True)
    issues = s.issues
    reasoning = _join([reasoning_content or "", *s.reasoning])
    if s.answer is not None:
        obs, found, draft = _answer(text, s.answer, tokens)
        issues += found
    elif s.last_close is not None and (inner := _last_block(text[: s.last_close + len(OBS_CLOSE)])) is not None:
        obs, draft = inner, False
        issues += ["observation_opened_in_reasoning", *_tags_inside(obs)]
    elif (inner := _last_block(reasoning)) is not None:
        obs, draft = inner, not s.cut
        issues += ["observation_inside_reasoning", *_tags_inside(obs)]
    else:
        issues.append("no_observation_tag")
        if s.text_before_think:
            issues.append("reasoning_after_text")
        obs = s.outside
        if (close := _last(_TAG[OBS_CLOSE], obs)) is not None:
            issues.append("orphan_observation_close")
            obs = obs[: close.start()]
        draft = s.open_think or not (s.cut or close)
    obs, commentary = _clean(obs)
    if commentary:
        issues.append("text_after_observation")
    if not obs.strip():
        issues.append("empty")
    if truncated and draft:
        issues.append("truncated")
    return ParsedOutput(observation=obs, reasoning=reasoning, issues=list(dict.fromkeys(issues)))


def json_objects(text: str) -> list:
    """Every top-level JSON object decodable in ``text``, left to right (for reading a
    model's structured answer among its prose)."""
    decoder = json.JSONDecoder()
    found, i = [], text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        found.append(obj)
        i = text.find("{", end)
    return found


def json_strings(value: object) -> list[str]:
    """The strings of a decoded JSON value, in order: a terminal action's keystrokes, a tool
    call's name and arguments; keys and numbers (a duration, an id) left out.

    >>> json_strings({"name": "f", "arguments": {"path": "/a", "n": 3, "tags": ["x"]}})
    ['f', '/a', 'x']
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in json_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in json_strings(v)]
    return []
