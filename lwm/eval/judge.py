"""LLM-as-judge evaluation of simulated observations, AgentWorldBench style.

Three ways to ask a judge model about a world model's prediction for one
:class:`~lwm.schema.BenchRow`:

* **Scoring** (:func:`judge_score`): the judge sees the episode so far, the current
  action, the simulated observation and the real one, and rates the simulation on five
  dimensions (:data:`DIMENSIONS`), each an integer 1–5, with the domain's rubric
  (:func:`lwm.domains.rubrics.rubric_for`) as system prompt. A judgement counts only when
  complete: all five dimensions present, each an integer 1–5; its score is their mean,
  reported as ``(x − 1) / 4 × 100`` (:func:`normalize`), per domain and as macro and micro
  means (:mod:`lwm.eval.report`). This follows AgentWorldBench (Qwen-AgentWorld, arXiv
  2606.24597), which averages whatever dimensions it finds; the prompts are our own.
* **Which is real** (:func:`judge_which_real`): a Turing-style test. The judge sees the
  real and the simulated observation unlabeled and names the real one.
* **Which is closer** (:func:`judge_which_closer`): the judge sees the real observation
  and two candidate predictions and names the closer one.

Pairwise questions are asked in both orders (positions swapped) to cancel the judge's
position bias. Model failures never raise: they are retried, and after the last attempt
reported in the result's ``error`` field. An answer cut at ``max_tokens``
(``finish_reason="length"``) is a failure, whatever it contains. Every result keeps the
judge's raw text and ``finish_reason``, failures included.

Failure reasons start with their kind, as ``kind: detail``: ``truncated``, ``incomplete``
(a dimension missing), ``invalid`` (a dimension not an integer 1–5), ``unreadable`` (no
score object or verdict found), or the exception's class name when the call raised.

Judge answer formats (written by the judge, read here):

* scoring: a JSON object inside ``<final_evaluation>…</final_evaluation>`` with integer
  keys ``format``, ``factuality``, ``consistency``, ``realism``, ``quality`` and string
  lists ``strengths``, ``weaknesses`` (:func:`parse_score`; not strictly valid JSON is
  read with ``json_repair``);
* pairwise: reasoning, then ``<answer>A</answer>`` or ``<answer>B</answer>``
  (:func:`parse_choice`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar

import json_repair

from lwm.domains.rubrics import rubric_for
from lwm.models.base import ChatModel, Generation, Message, SamplingParams
from lwm.parse import json_objects, observation_text, split_reasoning
from lwm.schema import TRAILING_INSTRUCTION, BenchRow, _fence

#: The judged dimensions, in the order the rubrics list them.
DIMENSIONS = ("format", "factuality", "consistency", "realism", "quality")

T = TypeVar("T")


def normalize(x: float) -> float:
    """Map a 1–5 score to 0–100: ``(x − 1) / 4 × 100`` (1 → 0, 3 → 50, 5 → 100)."""
    return (x - 1.0) / 4.0 * 100.0


# --------------------------------------------------------------------------- scoring


@dataclass
class JudgeScore:
    """The judge's rating of one simulated observation.

    Attributes:
        scores: the valid dimension scores read: dimension name → integer 1–5 (also kept
            from an incomplete answer, to show what it held).
        total: mean of the five scores on the 1–5 scale when the judgement is complete,
            else ``None``.
        strengths: the judge's listed strengths.
        weaknesses: the judge's listed weaknesses.
        raw: the judge's raw answer (the last one received, after retries).
        finish_reason: why that answer's generation ended (``stop``, ``length`` …), if known.
        absent: dimensions the answer's score object lacks.
        invalid: dimensions whose value is not an integer 1–5: name → the value as written.
        error: why the judgement does not count (``kind: detail``, see the module
            docstring), else ``None``.
        attempts: model calls made (1 when the first answer was usable).
    """

    scores: dict[str, int] = field(default_factory=dict)
    total: float | None = None
    strengths: list[str] = field(default_factory=list)
    weaknesses: list[str] = field(default_factory=list)
    raw: str = ""
    finish_reason: str | None = None
    absent: list[str] = field(default_factory=list)
    invalid: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    attempts: int = 1

    @property
    def normalized(self) -> float | None:
        """``total`` on the 0–100 scale, or ``None``."""
        return None if self.total is None else normalize(self.total)

    @property
    def missing(self) -> list[str]:
        """Dimensions without a valid score (absent or invalid)."""
        return [d for d in DIMENSIONS if d not in self.scores]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clean_action(prompt_item: str) -> str:
    # Row prompts end with the world model's instruction; the judge does not need it.
    text = prompt_item.rstrip()
    if text.endswith(TRAILING_INSTRUCTION):
        text = text[: -len(TRAILING_INSTRUCTION)].rstrip()
    return text


def _history_text(row: BenchRow, max_chars: int | None) -> str:
    items = []
    for i in range(row.turn_idx - 1):
        action = _clean_action(row.prompt[i])
        if not action.lstrip().startswith("### Turn"):
            action = f"### Turn {i + 1}\n\n{action}"
        obs = observation_text(row.response[i])
        items.append(f"{action}\n\n**Observation:**\n{_fence(obs)}")
    if not items:
        return "(none: this is the first turn)"
    omitted = 0
    if max_chars is not None:
        while len(items) > 1 and sum(len(s) + 2 for s in items) > max_chars:
            items.pop(0)
            omitted += 1
    if omitted:
        items.insert(0, f"({omitted} earlier turn{'s' if omitted > 1 else ''} omitted)")
    return "\n\n".join(items)


def _current_action(row: BenchRow) -> str:
    return _clean_action(row.current_prompt or row.prompt[row.turn_idx - 1])


def _context(row: BenchRow, max_history_chars: int | None) -> str:
    return (
        f"Domain: {row.domain}\n\n"
        f"## Episode so far\n\n{_history_text(row, max_history_chars)}\n\n"
        f"## Current action\n\n{_current_action(row)}"
    )


def build_score_messages(
    row: BenchRow, predicted: str, *, max_history_chars: int | None = None
) -> list[Message]:
    """The chat messages that ask the judge to score ``predicted`` for ``row``.

    The system message is the rubric of ``row.domain``. The user message holds, in order:
    the earlier turns (``row.prompt[:turn_idx-1]`` each followed by its real observation
    from ``row.response[:turn_idx-1]``), the current action (``row.current_prompt``, or
    ``row.prompt[turn_idx-1]`` when empty; the world model's trailing instruction is
    removed), the simulated observation inside ``<simulated_observation>`` tags and the
    ground truth inside ``<real_observation>`` tags. Real observations are cleaned with
    :func:`lwm.parse.observation_text` (``**Environment Observation:**`` marker and the
    enclosing fence removed).

    Args:
        row: the benchmark row (``prompt``/``response`` of length ≥ ``turn_idx``).
        predicted: the simulated observation, already extracted from the world model's
            output (e.g. :attr:`lwm.parse.ParsedOutput.observation`); used verbatim.
        max_history_chars: if set, the oldest earlier turns are dropped (and the omission
            noted) until the history fits; the most recent earlier turn is always kept.

    Returns:
        ``[{"role": "system", ...}, {"role": "user", ...}]``.

    Raises:
        IndexError: ``prompt`` or ``response`` is shorter than ``turn_idx``.
    """
    real = observation_text(row.ground_truth)
    user = (
        f"{_context(row, max_history_chars)}\n\n"
        f"## Simulated observation (to be scored)\n\n"
        f"<simulated_observation>\n{predicted}\n</simulated_observation>\n\n"
        f"## Real observation (ground truth)\n\n"
        f"<real_observation>\n{real}\n</real_observation>\n\n"
        "Rate the simulated observation against the real one on format, factuality, "
        "consistency, realism and quality, then end with the <final_evaluation> block."
    )
    return [
        {"role": "system", "content": rubric_for(row.domain)},
        {"role": "user", "content": user},
    ]


_FINAL_OPEN = re.compile(r"<final_evaluation>", re.IGNORECASE)
_FINAL_CLOSE = re.compile(r"</final_evaluation>", re.IGNORECASE)
_SCORE_STR = re.compile(r"\s*(\d+)(?:\.0*)?\s*(?:/\s*(\d+)\s*)?")
_TRUNCATED_LENGTH = "truncated: finish_reason=length"


def _as_score(value: Any) -> int | None:
    """An integer 1–5 from an int, an integral float or a string ``"4"``, ``"4.0"`` or
    ``"4/5"`` (a fraction only with denominator 5); else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        n = value
    elif isinstance(value, float):
        if not value.is_integer():
            return None
        n = int(value)
    elif isinstance(value, str):
        m = _SCORE_STR.fullmatch(value)
        if not m or m.group(2) not in (None, "5"):
            return None
        n = int(m.group(1))
    else:
        return None
    return n if 1 <= n <= 5 else None


def _lower_keys(obj: dict) -> dict:
    return {str(k).strip().lower(): v for k, v in obj.items()}


def _score_dict(obj: Any) -> dict | None:
    """``obj`` (or a dict nested one level inside it) if it names any dimension."""
    if not isinstance(obj, dict):
        return None
    low = _lower_keys(obj)
    if any(d in low for d in DIMENSIONS):
        return low
    for v in low.values():
        if isinstance(v, dict) and any(d in _lower_keys(v) for d in DIMENSIONS):
            return {**low, **_lower_keys(v)}
    return None


def _score_region(text: str) -> tuple[str | None, str | None]:
    """``(region, None)``: the inside of the last closed ``<final_evaluation>`` block (put
    in braces when it has none: ``format: 4`` lines), or the whole text when it has no
    block; ``(None, reason)`` when the last block is never closed (a cut answer must not be
    read as a complete one)."""
    closes = list(_FINAL_CLOSE.finditer(text))
    opens = list(_FINAL_OPEN.finditer(text))
    if opens and (not closes or opens[-1].start() > closes[-1].start()):
        return None, "truncated: <final_evaluation> not closed"
    if not closes:
        return text, None
    end = closes[-1].start()
    inside = text[max((m.end() for m in opens if m.start() < end), default=0) : end]
    return (inside if "{" in inside else f"{{{inside}}}"), None


def _find_scores(region: str) -> dict | None:
    """The last object in ``region`` that names a dimension: strict JSON first, then what
    ``json_repair`` reads (trailing commas, single quotes, unquoted ``4/5`` …)."""
    for obj in reversed(json_objects(region)):
        if (scores := _score_dict(obj)) is not None:
            return scores
    repaired = json_repair.loads(region)
    for obj in reversed(repaired if isinstance(repaired, list) else [repaired]):
        if (scores := _score_dict(obj)) is not None:
            return scores
    return None


def _str_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None and str(v).strip()]
    return []


def parse_score(text: str, finish_reason: str | None = None) -> JudgeScore:
    """Read a judge's scoring answer; only a complete one counts.

    Reasoning (``<think>…</think>``, also unclosed or with an orphan close tag) is removed
    with :func:`lwm.parse.split_reasoning`. The scores come from the JSON object in the
    **last** ``<final_evaluation>`` block; without any block, from the last JSON object in
    the text that names a dimension (fenced or bare). If the judge never left its reasoning
    (unclosed ``<think>``) and the answer holds no scores, the reasoning's last block is
    used. Keys are case-insensitive; a score object nested one level (``{"scores": {...}}``)
    is accepted. JSON that is not strictly valid (trailing commas, single quotes, comments,
    unquoted ``4/5``, a block of ``name: score`` lines without braces) is read with
    ``json_repair``.

    A cut answer is never repaired into a valid one: ``finish_reason="length"`` or a last
    ``<final_evaluation>`` block that is never closed make the answer a failure, whatever
    it holds.

    A score is valid if it is an integer 1–5 given as an int, an integral float (``4.0``)
    or a string ``"4"``, ``"4.0"`` or ``"4/5"`` (denominator 5 only). The judgement is
    complete when all five :data:`DIMENSIONS` have a valid score.

    Args:
        text: the judge's raw answer.
        finish_reason: why its generation ended, as the server reported it.

    Returns:
        a :class:`JudgeScore` keeping ``text`` and ``finish_reason``. When incomplete,
        ``error`` says why (``truncated: …``, ``unreadable: …``, ``incomplete: missing
        quality``, ``invalid: realism='6'``), ``absent`` and ``invalid`` name the
        dimensions, and ``total`` is ``None``. Never raises.
    """
    raw = text or ""
    kept = {"raw": raw, "finish_reason": finish_reason}
    if finish_reason == "length":
        return JudgeScore(**kept, error=_TRUNCATED_LENGTH)
    answer, reasoning, issues = split_reasoning(raw)
    region, cut = _score_region(answer)
    found = None if region is None else _find_scores(region)
    if found is None and cut is None and "unclosed_think" in issues and _FINAL_OPEN.search(reasoning):
        region, cut = _score_region(reasoning)
        found = None if region is None else _find_scores(region)
    if cut:
        return JudgeScore(**kept, error=cut)
    if found is None:
        return JudgeScore(**kept, error="unreadable: no <final_evaluation> block or score object found")
    scores = {d: s for d in DIMENSIONS if (s := _as_score(found.get(d))) is not None}
    absent = [d for d in DIMENSIONS if d not in found]
    invalid = {d: found[d] for d in DIMENSIONS if d in found and d not in scores}
    reasons = []
    if absent:
        reasons.append(f"incomplete: missing {', '.join(absent)}")
    if invalid:
        reasons.append("invalid: " + ", ".join(f"{d}={v!r}" for d, v in invalid.items()))
    return JudgeScore(
        scores=scores,
        total=None if reasons else sum(scores.values()) / len(scores),
        strengths=_str_list(found.get("strengths")),
        weaknesses=_str_list(found.get("weaknesses")),
        absent=absent,
        invalid=invalid,
        error="; ".join(reasons) or None,
        **kept,
    )


def _sampling_for(sampling: SamplingParams, attempt: int) -> SamplingParams:
    # A fresh seed on each retry, so a seeded sampler does not repeat a broken answer.
    if attempt == 0 or sampling.seed is None:
        return sampling
    return replace(sampling, seed=sampling.seed + attempt)


@dataclass
class _Asked(Generic[T]):
    """What :func:`_ask` got: the last answer read (``parsed``, ``None`` if no call
    returned) and its generation, and the failure of the last attempt (``None`` on success)."""

    parsed: T | None
    generation: Generation | None
    error: str | None
    attempts: int


async def _ask(
    model: ChatModel,
    messages: list[Message],
    sampling: SamplingParams,
    retries: int,
    read: Callable[[Generation], T],
    failure: Callable[[T, Generation], str | None],
) -> _Asked[T]:
    """Call ``model`` until ``failure(read(generation), generation)`` is ``None``, at most
    ``max(1, retries)`` times. A model exception is a failed attempt
    (``ClassName: message``); the error of a failed run is the last attempt's reason
    followed by ``(N attempt(s) failed)``."""
    attempts = max(1, retries)
    asked: _Asked[T] = _Asked(None, None, None, attempts)
    for k in range(attempts):
        try:
            gen = await model.generate(messages, _sampling_for(sampling, k))
        except Exception as e:  # noqa: BLE001 — a failing model is a counted outcome
            asked.error = f"{type(e).__name__}: {e}"
            continue
        asked.parsed, asked.generation = read(gen), gen
        asked.error = failure(asked.parsed, gen)
        if asked.error is None:
            asked.attempts = k + 1
            return asked
    asked.error = f"{asked.error} ({attempts} attempt(s) failed)"
    return asked


async def judge_score(
    model: ChatModel,
    row: BenchRow,
    predicted: str,
    sampling: SamplingParams,
    retries: int = 3,
) -> JudgeScore:
    """Ask ``model`` to score ``predicted`` for ``row`` (messages of
    :func:`build_score_messages`, answer read by :func:`parse_score`).

    Args:
        model: the judge.
        row: the benchmark row whose ground truth is the reference.
        predicted: the simulated observation (already extracted from the world model's
            output).
        sampling: the judge's decoding settings; on retry ``k`` the seed (if any) is
            increased by ``k``.
        retries: model calls at most (values below 1 mean 1). A call is repeated when the
            model raises or its answer is not a complete judgement (truncated, a dimension
            missing or invalid, nothing readable).

    Returns:
        the first complete :class:`JudgeScore`; after the last failed attempt, the last
        answer received as read (its raw text, ``finish_reason``, ``absent``, ``invalid``;
        empty if every call raised) with ``total=None`` and ``error`` giving the last
        attempt's reason and the number of attempts. Never raises for model failures
        (``asyncio.CancelledError`` still propagates).
    """
    asked = await _ask(
        model,
        build_score_messages(row, predicted),
        sampling,
        retries,
        lambda gen: parse_score(gen.text, gen.finish_reason),
        lambda s, gen: s.error,
    )
    score = asked.parsed or JudgeScore()
    if asked.error is not None:
        score = replace(score, error=asked.error)
    score.attempts = asked.attempts
    return score


# -------------------------------------------------------------------------- pairwise

WHICH_REAL_SYSTEM = """\
You are an expert on how software environments behave. An agent acted in an environment; \
you see the episode so far and the agent's current action. Two observations for that \
action follow, labeled A and B. One was returned by the real environment. The other was \
written by a model that imitates the environment.

Decide which observation is the real one. Useful evidence: exact formats and wording the \
real system uses, details that follow from the earlier turns (files, state, identifiers), \
believable values, and the tell-tale signs of imitation (generic or invented content, \
tidy placeholder values, explanations the environment would not print, contradictions \
with the history). Both may look plausible; pick the one more likely to be real. The \
order in which they are shown means nothing.

Reason briefly, then end with exactly one line: <answer>A</answer> or <answer>B</answer>."""

WHICH_CLOSER_SYSTEM = """\
You compare two imitations of a software environment. An agent acted in an environment; \
you see the episode so far, the agent's current action and the observation the real \
environment returned. Two predicted observations for the same action follow, labeled A \
and B, each written by a model that imitates the environment.

Decide which prediction is closer to the real observation. Weigh, in this order: the \
facts an agent would rely on (values, names, results, errors), agreement with the state \
built up in earlier turns, and the exact format and layout. Differences in values that \
change from run to run in the real environment (timestamps, process ids, random names) \
matter little. Length is not a merit. The order in which they are shown means nothing.

Reason briefly, then end with exactly one line: <answer>A</answer> or <answer>B</answer>."""


def build_which_real_messages(
    row: BenchRow, response_a: str, response_b: str, *, max_history_chars: int | None = None
) -> list[Message]:
    """Messages asking which of two observations is the real one.

    The user message holds the episode context (as in :func:`build_score_messages`) and
    the two observations inside ``<response_a>`` / ``<response_b>`` tags. The ground
    truth is not shown apart from being one of the two responses.

    Returns:
        ``[system, user]`` with :data:`WHICH_REAL_SYSTEM` as system prompt.
    """
    user = (
        f"{_context(row, max_history_chars)}\n\n"
        f"## Observation A\n\n<response_a>\n{response_a}\n</response_a>\n\n"
        f"## Observation B\n\n<response_b>\n{response_b}\n</response_b>\n\n"
        "Which observation did the real environment return? End with <answer>A</answer> "
        "or <answer>B</answer>."
    )
    return [{"role": "system", "content": WHICH_REAL_SYSTEM}, {"role": "user", "content": user}]


def build_which_closer_messages(
    row: BenchRow, response_a: str, response_b: str, *, max_history_chars: int | None = None
) -> list[Message]:
    """Messages asking which of two predictions is closer to the ground truth.

    The user message holds the episode context, the cleaned ground truth inside
    ``<real_observation>`` tags and the two predictions inside ``<response_a>`` /
    ``<response_b>`` tags.

    Returns:
        ``[system, user]`` with :data:`WHICH_CLOSER_SYSTEM` as system prompt.
    """
    real = observation_text(row.ground_truth)
    user = (
        f"{_context(row, max_history_chars)}\n\n"
        f"## Real observation (ground truth)\n\n<real_observation>\n{real}\n</real_observation>\n\n"
        f"## Prediction A\n\n<response_a>\n{response_a}\n</response_a>\n\n"
        f"## Prediction B\n\n<response_b>\n{response_b}\n</response_b>\n\n"
        "Which prediction is closer to the real observation? End with <answer>A</answer> "
        "or <answer>B</answer>."
    )
    return [{"role": "system", "content": WHICH_CLOSER_SYSTEM}, {"role": "user", "content": user}]


_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<answer>([^<\n]*)", re.IGNORECASE)
_FILLER = {
    "response", "observation", "prediction", "option", "candidate", "output",
    "the", "is", "real", "closer",
}
# Without tags only an upper-case letter after an explicit keyword counts ("answer: B").
_ANSWER_PHRASE = re.compile(
    r"\b(?:final answer|answer|verdict|choice)\b\s*(?:is)?\s*[:\-]?\s*\**\s*"
    r"(?:(?:response|observation|prediction|option)\s+)?\(?((?-i:[AB]))\)?(?![\w])",
    re.IGNORECASE,
)


def _letter(inner: str) -> str | None:
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", inner)]
    words = [w for w in words if w not in _FILLER]
    return words[0].upper() if words in (["a"], ["b"]) else None


def parse_choice(text: str) -> str | None:
    """Read a pairwise verdict: ``"A"``, ``"B"`` or ``None``.

    Reasoning is removed first (:func:`lwm.parse.split_reasoning`). The **last**
    ``<answer>…</answer>`` block decides; its content may be lower case, padded, in
    markdown or worded (``<answer> response b </answer>``, ``<answer>**A**</answer>``,
    ``<answer>Observation A</answer>``); content naming both or neither letter gives
    ``None``. Without a closed block, an unclosed ``<answer>`` at the end, then a phrase
    such as ``Answer: B`` / ``final answer is Response A`` (upper-case letter only), are
    tried.

    Args:
        text: the judge's raw answer.

    Returns:
        the chosen label, or ``None`` if none can be read.
    """
    answer, _, _ = split_reasoning(text or "")
    blocks = _ANSWER_BLOCK.findall(answer)
    if blocks:
        return _letter(blocks[-1])
    opens = _ANSWER_OPEN.findall(answer)
    if opens:
        return _letter(opens[-1])
    phrases = _ANSWER_PHRASE.findall(answer)
    return phrases[-1] if phrases else None


@dataclass
class PairwiseVerdict:
    """The outcome of one pairwise question asked in both orders.

    Attributes:
        mode: ``real`` (which observation is real) or ``closer`` (which prediction is
            closer to the ground truth).
        verdicts: the judge's choice per ordering, ``"A"``, ``"B"`` or ``None`` (no usable
            answer), in the order of ``orderings``.
        wins: fraction of valid orderings that favoured the item under test (``real``:
            the judge took the prediction for the real observation, so 0.5 means
            indistinguishable; ``closer``: the candidate was judged closer). ``None`` if
            no ordering gave a valid verdict.
        valid: orderings with a valid verdict (0–2).
        error: the failures of orderings without a valid verdict, each prefixed with its
            ordering, else ``None``.
        raw: the judge's last raw answer per ordering (``""`` if every call raised).
        orderings: what was shown as A and B in each ordering, e.g.
            ``[("real", "predicted"), ("predicted", "real")]``.
        finish_reasons: ``finish_reason`` of the last answer per ordering.
        errors: the failure per ordering (``kind: detail (N attempt(s) failed)``), ``None``
            where the verdict is valid.
    """

    mode: Literal["real", "closer"]
    verdicts: list[str | None]
    wins: float | None
    valid: int
    error: str | None = None
    raw: list[str] = field(default_factory=list)
    orderings: list[tuple[str, str]] = field(default_factory=list)
    finish_reasons: list[str | None] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _choice_failure(choice: str | None, gen: Generation) -> str | None:
    if gen.finish_reason == "length":  # the last <answer> may be the one never written
        return _TRUNCATED_LENGTH
    return None if choice is not None else "unreadable: no <answer>A</answer> or <answer>B</answer> found"


async def _pairwise(
    mode: Literal["real", "closer"],
    model: ChatModel,
    build: Callable[[str, str], list[Message]],
    items: dict[str, str],
    under_test: str,
    orderings: list[tuple[str, str]],
    sampling: SamplingParams,
    retries: int,
) -> PairwiseVerdict:
    async def one(order: tuple[str, str]) -> _Asked[str | None]:
        messages = build(items[order[0]], items[order[1]])
        return await _ask(model, messages, sampling, retries, lambda gen: parse_choice(gen.text), _choice_failure)

    results = await asyncio.gather(*(one(o) for o in orderings))
    verdicts, favoured = [], []
    for order, asked in zip(orderings, results):
        choice = None if asked.error else asked.parsed
        verdicts.append(choice)
        if choice is not None:
            favoured.append(order["AB".index(choice)] == under_test)
    errors = [a.error for a in results]
    valid = len(favoured)
    return PairwiseVerdict(
        mode=mode,
        verdicts=verdicts,
        wins=sum(favoured) / valid if valid else None,
        valid=valid,
        error="; ".join(f"order {o[0]}/{o[1]}: {e}" for o, e in zip(orderings, errors) if e) or None,
        raw=[(a.generation.text or "") if a.generation else "" for a in results],
        orderings=list(orderings),
        finish_reasons=[a.generation.finish_reason if a.generation else None for a in results],
        errors=errors,
    )


async def judge_which_real(
    model: ChatModel,
    row: BenchRow,
    predicted: str,
    sampling: SamplingParams,
    retries: int = 3,
) -> PairwiseVerdict:
    """Turing-style test: can the judge tell the real observation from the prediction?

    Asked twice (messages of :func:`build_which_real_messages`): real as A and predicted
    as B, then predicted as A and real as B. The real observation is ``row.ground_truth``
    cleaned with :func:`lwm.parse.observation_text`.

    Args:
        model: the judge.
        row: the benchmark row.
        predicted: the simulated observation.
        sampling: the judge's decoding settings.
        retries: model calls at most per ordering.

    Returns:
        a :class:`PairwiseVerdict` with ``mode="real"``; ``wins`` is the fraction of valid
        orderings in which the judge picked the **prediction** as real (1.0: the world
        model always fooled the judge, 0.5: indistinguishable or position-biased judge,
        0.0: always caught). Never raises for model failures.
    """
    items = {"real": observation_text(row.ground_truth), "predicted": predicted}
    return await _pairwise(
        "real",
        model,
        lambda a, b: build_which_real_messages(row, a, b),
        items,
        "predicted",
        [("real", "predicted"), ("predicted", "real")],
        sampling,
        retries,
    )


async def judge_which_closer(
    model: ChatModel,
    row: BenchRow,
    candidate: str,
    baseline: str,
    sampling: SamplingParams,
    retries: int = 3,
) -> PairwiseVerdict:
    """Which of two predictions (e.g. from two world models) is closer to the ground truth?

    Asked twice (messages of :func:`build_which_closer_messages`): candidate as A and
    baseline as B, then the reverse.

    Args:
        model: the judge.
        row: the benchmark row (its ground truth is shown to the judge).
        candidate: the prediction under test.
        baseline: the prediction it is compared with.
        sampling: the judge's decoding settings.
        retries: model calls at most per ordering.

    Returns:
        a :class:`PairwiseVerdict` with ``mode="closer"``; ``wins`` is the fraction of
        valid orderings in which the candidate was judged closer (a judge that always
        picks the same position gives 0.5). Never raises for model failures.
    """
    items = {"candidate": candidate, "baseline": baseline}
    return await _pairwise(
        "closer",
        model,
        lambda a, b: build_which_closer_messages(row, a, b),
        items,
        "candidate",
        [("candidate", "baseline"), ("baseline", "candidate")],
        sampling,
        retries,
    )
