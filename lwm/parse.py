"""Reading a world model's answer: reasoning removal and observation extraction.

The answer is the **last** ``<predicted_observation>…</predicted_observation>`` block
after all reasoning is removed; without a tag, the cleaned text (DESIGN.md §4, the
convention of Qwen-AgentWorld's ``eval.py``). Broken output is parsed as well as it can
be, and every irregularity is reported in :attr:`ParsedOutput.issues` so callers count
it instead of dropping the row.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

#: How a ground-truth response starts in AgentWorldBench rows (``response`` items).
OBSERVATION_MARKER = "**Environment Observation:**"

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
OBS_OPEN, OBS_CLOSE = "<predicted_observation>", "</predicted_observation>"
_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)
_FENCED = re.compile(r"\A(`{3,})[^\n`]*\n(.*?)\n?\1\s*\Z", re.DOTALL)
_LEADING_FENCE = re.compile(r"\A(`{3,})[^\n`]*\n(.*?)\n\1(?:\n|\Z)", re.DOTALL)

#: Stop strings that end an answer: the close of the answer tag, and the start of a new
#: turn (a model that writes "### Turn N" has finished its observation and is inventing
#: the next action).
DEFAULT_STOP = (OBS_CLOSE, "### Turn")

#: Names of the irregularities :func:`parse_output` reports.
ISSUES = (
    "orphan_think_close",  # a </think> with no opening tag (prompt-side <think>): text before it is reasoning
    "unclosed_think",  # a <think> never closed: the rest is reasoning
    "no_observation_tag",  # no <predicted_observation> block: the cleaned text is the answer
    "unclosed_observation_tag",  # an opening tag without its close (truncated output)
    "multiple_observation_tags",  # several blocks: the last one is the answer
    "observation_inside_reasoning",  # the only complete block was inside reasoning
    "text_after_observation",  # a marked, fenced observation followed by commentary (dropped)
    "empty",  # nothing left
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


def split_reasoning(text: str) -> tuple[str, str, list[str]]:
    """Separate reasoning from the rest.

    Handles closed, nested and unclosed ``<think>`` blocks, and a leading orphan
    ``</think>`` (chat templates that open the block in the prompt).

    Returns:
        ``(answer_text, reasoning_text, issues)``.
    """
    issues: list[str] = []
    reasoning: list[str] = []
    out: list[str] = []
    depth, pos, start = 0, 0, 0
    for m in _THINK_TAG.finditer(text):
        closing = m.group(1) == "/"
        if not closing:
            if depth == 0:
                out.append(text[pos : m.start()])
                start = m.end()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                reasoning.append(text[start : m.start()])
                pos = m.end()
        else:  # orphan close: everything so far was reasoning
            issues.append("orphan_think_close")
            reasoning = ["".join(out) + text[pos : m.start()]]
            out = []
            pos = m.end()
    if depth > 0:
        issues.append("unclosed_think")
        reasoning.append(text[start:])
    else:
        out.append(text[pos:])
    return "".join(out), "\n\n".join(r.strip() for r in reasoning if r.strip()), issues


def observation_text(text: str) -> str:
    """Clean an observation: drop the ``**Environment Observation:**`` marker and one
    fenced block that encloses everything. Works on ground truth and predictions alike."""
    return _clean(text)[0]


def _clean(text: str) -> tuple[str, bool]:
    # Returns (observation, whether commentary followed a marked, fenced observation).
    text = text.strip("\n")
    stripped = text.strip()
    marked = stripped.startswith(OBSERVATION_MARKER)
    if marked:
        text = stripped[len(OBSERVATION_MARKER) :].strip("\n")
    m = _FENCED.match(text.strip())
    if m:
        return m.group(2), False
    if marked:  # "**Environment Observation:**" + a fenced block + commentary: keep the block
        m = _LEADING_FENCE.match(text.strip())
        if m:
            return m.group(2), True
    return text.strip(), False


def _last_block(text: str) -> str | None:
    # The last complete <predicted_observation> block, found in linear time (a regex
    # scan is quadratic on outputs that repeat the opening tag without closing it).
    low = text.lower()
    close = low.rfind(OBS_CLOSE)
    opened = low.rfind(OBS_OPEN, 0, close) if close >= 0 else -1
    return text[opened + len(OBS_OPEN) : close] if opened >= 0 else None


def parse_output(
    text: str, reasoning_content: str | None = None, *, stopped_at: tuple[str, ...] = ()
) -> ParsedOutput:
    """Extract the predicted observation from a world model's raw output.

    Args:
        text: the message content.
        reasoning_content: reasoning the server returned separately (vLLM/SGLang
            ``reasoning_content``), if any.
        stopped_at: the stop strings of a generation that ended on one; OpenAI-compatible
            servers cut the stop string, so a closing ``</predicted_observation>`` among
            them is restored.

    Returns:
        the observation, the reasoning and the list of irregularities.
    """
    text = text or ""
    if OBS_CLOSE in stopped_at and text.lower().count(OBS_OPEN) > text.lower().count(OBS_CLOSE):
        text += OBS_CLOSE
    answer, reasoning, issues = split_reasoning(text)
    if reasoning_content:
        reasoning = (reasoning_content.strip() + "\n\n" + reasoning).strip()
    block = _last_block(answer)
    if block is not None:
        obs = block
        if answer.lower().count(OBS_CLOSE) > 1:
            issues.append("multiple_observation_tags")
    elif (opened := answer.lower().rfind(OBS_OPEN)) >= 0:
        issues.append("unclosed_observation_tag")
        obs = answer[opened + len(OBS_OPEN) :]
    elif (inner := _last_block(reasoning)) is not None:
        issues.append("observation_inside_reasoning")
        obs = inner
    else:
        issues.append("no_observation_tag")
        obs = answer
    obs, commentary = _clean(obs)
    if commentary:
        issues.append("text_after_observation")
    if not obs.strip():
        issues.append("empty")
    return ParsedOutput(observation=obs, reasoning=reasoning, issues=issues)


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
