"""Candidate scoring: the world model picks, by its own likelihood, between what it wrote and
the cheap answers that are often right.

A small world model decodes greedily into answers that are fluent and wrong, while the
answer "nothing much happened" (the previous observation, or the domain's trivial guess:
the command echoed at a fresh prompt, psql's command tag) is right more often than it
is. Published simulators re-rank candidates with the model's own likelihood (e.g.
DreamGym's experience model, which also scores retrieved transitions); here the
candidates are

* ``model``: the answer the model wrote;
* ``repeat-last``: the previous observation (:func:`lwm.prediction.previous_observation`);
* ``trivial``: the domain's trivial guess (``Domain.trivial_observation``), where it has one;
* ``neighbour-1`` …: the observations of real transitions whose actions are like this one
  (:mod:`lwm.retrieval`), where an index is given.

Each is written as the model would write it (:func:`lwm.data.build.format_target`: in
mode ``change``, the change that draws it, :func:`lwm.prediction.observed_change`) and
scored as the whole assistant reply after the same prompt
(``ChatModel.answer_logprobs``: the prompt's KV cache is shared, so the cost is the
candidates' tokens). The likeliest candidate wins (the highest log-probability of the
whole answer); ties go to the model's own answer. ``docs/results.md`` ("Candidate scoring
and retrieval") measures it against greedy decoding alone, and this rule against the mean
log-probability per token (``bench/candidate_rules.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from lwm import domains
from lwm.data.build import format_target
from lwm.models.base import Message
from lwm.prediction import (
    Prediction,
    action_of,
    drawn_observation,
    previous_observation,
    row_prediction,
    ruled_out,
)
from lwm.retrieval import IndexEntry, action_text
from lwm.schema import BenchRow


@dataclass(frozen=True)
class Choice:
    """The candidate scoring's answer for one turn.

    Attributes:
        observation: the chosen full observation.
        written: the chosen answer as the model writes it in the row's mode (the change
            in mode ``change``, else the observation).
        source: which candidate won: ``model``, ``repeat-last``, ``trivial`` or ``neighbour-N``.
        scores: each distinct candidate's ``[sum of log-probabilities (nats), tokens]``
            as the model writes it (the answer tags included), by source; a candidate equal
            to an earlier one is not scored again.
    """

    observation: str
    written: str
    source: str
    scores: dict[str, list[float]] = field(default_factory=dict)


def can_score(model: object) -> bool:
    """Whether ``model`` scores whole answers (``answer_logprobs`` over every token: the
    embedded and transformers models; an OpenAI-compatible server reads the first token
    only, so it cannot)."""
    return callable(getattr(model, "answer_logprobs", None)) and getattr(model, "scores_whole_answers", False)


def candidate_scoring(model: object, setting: bool | None = None, retrieval: bool = False) -> bool:
    """Whether to score candidates for ``model``: ``setting`` as given, else only with
    ``retrieval`` (retrieved transitions are candidates).

    Raises:
        ValueError: scoring asked (or retrieval) and the model cannot score whole answers;
            retrieval with ``setting`` ``False``.
    """
    if retrieval and setting is False:
        raise ValueError("retrieved transitions (--index) are candidates the world model scores: they need "
                         "candidate scoring, which --no-score-candidates turns off")
    if not (setting or retrieval):
        return False
    if not can_score(model):
        served = " (a server returns the log-probabilities of the first token only: run the model in-process, " \
                 "without --base-url)" if getattr(model, "base_url", None) else ""
        raise ValueError(f"{getattr(model, 'name', model)} cannot score whole answers{served}: candidate scoring "
                         "(--score-candidates, --index) needs the embedded or a transformers model")
    return True


def candidates(row: BenchRow, mode: Prediction, written: str, neighbours: Sequence[IndexEntry] = (),
               rule_out: bool = True) -> dict[str, tuple[str, str]]:
    """The distinct candidates for the row's current turn, ``{source: (written, full)}``:
    the model's answer ``written`` (as it wrote it, in the row's mode) first, then
    ``repeat-last``, ``trivial`` and ``neighbour-1`` … (the observations of ``neighbours``,
    real transitions like this one: :mod:`lwm.retrieval`; in a domain that draws changes,
    the change of a neighbour whose action says the same, drawn on this row's
    observation). An alternative that the row's mode cannot write (no change draws it),
    that repeats an earlier candidate, or that the action alone rules out
    (:func:`lwm.prediction.ruled_out`, unless ``rule_out`` is false; the model's answer
    too, unless nothing else is left) is left out."""
    spec = domains.find(row.domain)
    previous, action = previous_observation(row), action_of(row)
    changed = row_prediction(row, mode) == "change"

    def as_written(full: str) -> str | None:  # the change that draws exactly ``full`` here
        if not changed:
            return full
        text = spec.observed_change(previous, action or "", full, row.system_str)
        return text if text is not None and drawn_observation(row, text, mode) == full else None

    options: dict[str, tuple[str, str]] = {}

    def add(source: str, text: str | None) -> None:
        if text is None:
            return
        full = drawn_observation(row, text, mode)
        if (not rule_out or ruled_out(row, full) is None) and full not in {f for _, f in options.values()}:
            options[source] = (text, full)

    add("model", written)
    add("repeat-last", as_written(previous))
    if spec is not None and spec.trivial_observation is not None and action is not None:
        add("trivial", as_written(spec.trivial_observation(action, previous, row.system_str)))
    for i, nb in enumerate(neighbours, start=1):
        if not (spec and spec.render_change):  # an observation that is the action's result alone
            add(f"neighbour-{i}", nb.observation)
            continue
        # A screen carries its episode's history: the neighbour's change is drawn on this row's
        # observation, which only a neighbour that typed the same keys can give.
        if action_text(nb.action) != action_text(action or ""):
            continue
        change = spec.observed_change(nb.previous, nb.action, nb.observation, row.system_str)
        if change is not None:
            add(f"neighbour-{i}", change if changed else spec.render_change(change, previous, action or "",
                                                                            row.system_str))
    return options or {"model": (written, drawn_observation(row, written, mode))}


async def choose(model: object, messages: list[Message], row: BenchRow, mode: Prediction, written: str,
                 neighbours: Sequence[IndexEntry] = (), rule_out: bool = True) -> Choice:
    """The candidate the model finds likeliest after ``messages`` (the prompt its answer
    ``written`` was generated from): the highest log-probability of the whole answer.

    A candidate that does not fit the model's context window scores ``-inf``.

    Raises:
        ValueError: the model cannot score whole answers (:func:`can_score`).
    """
    candidate_scoring(model, True)  # raises for a model that cannot score
    options = candidates(row, mode, written, neighbours, rule_out)
    scores = {}
    for source, (text, _) in options.items():
        target = format_target(text)
        try:
            [total] = await model.answer_logprobs(messages, [target])
        except ValueError:  # it does not fit the context window: never chosen
            total = -math.inf
        scores[source] = [total, float(model.count_tokens(target))]
    best = max(options, key=lambda s: (scores[s][0], s == "model"))
    text, full = options[best]
    return Choice(observation=full, written=text, source=best, scores=scores)


__all__ = ["Choice", "can_score", "candidate_scoring", "candidates", "choose"]
