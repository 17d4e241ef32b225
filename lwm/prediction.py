"""What a world model writes: the whole next observation, or only what the action changed.

Two prediction modes, one contract: whatever the mode, ``lwm`` hands out (and scores) the
full next observation.

* ``full``: the model writes the whole observation (AgentWorldBench's own task).
* ``change``: the model writes what the action changed, and ``lwm`` draws the full
  observation from the previous one, the action and the change with the domain's renderer
  (:attr:`lwm.domains.base.Domain.render_change`). The terminal's change is what appears
  below the echoed keystrokes (a command's output and the new prompt) instead of a whole
  24-line screen; the web's is the header and the accessibility-tree nodes the action
  changed (a new page is written whole). The earlier turns of the prompt are shown as
  changes too, so a history window holds more turns for the same tokens. In a domain whose
  observation is already the result of the action alone (db, code, tool calls) there is
  nothing to repeat and both modes are the same.

Published work is split on the choice (web and SWE world models predict changes or
states, Word2World full text); ``docs/results.md`` measures both for the embedded model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from lwm import domains
from lwm.models.base import Message
from lwm.parse import observation_text
from lwm.prompts import build_messages, compact_tools
from lwm.schema import BenchRow, format_response, parse_prompt_item

Prediction = Literal["full", "change"]
PREDICTIONS: tuple[str, ...] = ("full", "change")


def check_prediction(prediction: str) -> Prediction:
    """``prediction`` if it is a known mode.

    Raises:
        ValueError: an unknown mode (the message lists the known ones).
    """
    if prediction not in PREDICTIONS:
        raise ValueError(f"unknown prediction mode {prediction!r}; expected one of {', '.join(PREDICTIONS)}")
    return prediction  # type: ignore[return-value]


def request_format(model: object, prediction: str | None = None, compact_tools: bool | None = None,
                   ) -> tuple[Prediction, bool]:
    """``(prediction, compact_tools)``: how to ask ``model``; each setting as given, else the
    model's own (its ``prediction`` and ``compact_tools`` attributes: the embedded model
    with the shipped adapter says ``change`` and ``True``), else ``full`` and ``False``.

    Raises:
        ValueError: an unknown prediction mode.
    """
    if prediction is None:
        prediction = getattr(model, "prediction", "full")
        prediction = prediction if prediction in PREDICTIONS else "full"
    if compact_tools is None:
        compact_tools = getattr(model, "compact_tools", False) is True
    return check_prediction(prediction), compact_tools


def request_settings(model: object, prediction: str | None = None, compact_tools: bool | None = None,
                     ) -> dict[str, Prediction | bool]:
    """:func:`request_format` as a run records it: ``{"prediction": …, "compact_tools": …}``.

    Raises:
        ValueError: an unknown prediction mode.
    """
    return dict(zip(("prediction", "compact_tools"), request_format(model, prediction, compact_tools)))


def previous_observation(row: BenchRow, turn: int | None = None) -> str:
    """The observation before turn ``turn`` (default: the row's current turn): the earlier
    turn's ground truth, or for turn 1 the ``**Current State:**`` block of the first prompt
    (empty without one)."""
    turn = row.turn_idx if turn is None else turn
    if turn > 1:
        return observation_text(row.response[turn - 2])
    _, state = parse_prompt_item(row.prompt[0]) if row.prompt else (None, None)
    return state or ""


def action_of(row: BenchRow, turn: int | None = None) -> str | None:
    """The action of turn ``turn`` (default: the current one), ``None`` when the turn's
    prompt has no fenced ``**Action:**`` block."""
    turn = row.turn_idx if turn is None else turn
    item = row.current_prompt if turn == row.turn_idx and row.current_prompt else row.prompt[turn - 1]
    return parse_prompt_item(item)[0]


def certain_observation(row: BenchRow) -> str | None:
    """The real observation of the row's current turn where the action alone decides it
    (:meth:`~lwm.domains.base.Domain.certain`: a code cell or sqlite3 input that does not
    parse, SQL that completes no statement), from the row's earlier turns (their real
    observations: teacher forcing); ``None``: a world model predicts it (also for a domain
    ``lwm`` does not know and a turn without a readable action)."""
    spec, action = domains.find(row.domain), action_of(row)
    if spec is None or action is None:
        return None
    earlier = [(action_of(row, t) or "", observation_text(row.response[t - 1])) for t in range(1, row.turn_idx)]
    return spec.certain(action, earlier, row.system_str, previous_observation(row, 1))


def observed_change(row: BenchRow, turn: int | None = None) -> str | None:
    """The change of turn ``turn`` (default: the current one) of ``row``: what a world model
    in mode ``change`` writes for it, read from the real observations. The observation
    itself in a domain without a renderer; ``None`` when no change renders back into the
    observation (the terminal after ``clear``); an unreadable action is passed as ``""``."""
    turn = row.turn_idx if turn is None else turn
    observation = observation_text(row.response[turn - 1])
    spec = domains.find(row.domain)
    if not (spec and spec.render_change):
        return observation
    return spec.observed_change(previous_observation(row, turn), action_of(row, turn) or "", observation,
                                row.system_str)


def row_prediction(row: BenchRow, prediction: Prediction) -> Prediction:
    """The mode ``row`` is asked and drawn in: ``change`` only where the domain draws changes
    and the row's observations have the form its renderer draws (a terminal screen, a page
    in ``lwm``'s layout): there is an observation before the current turn to draw on, and
    most of the row's earlier turns are drawn back from their changes (a ``clear`` now and
    then is no reason to stop). Elsewhere, say a command's raw output after another's,
    ``full``: a mode must never lower the score of a perfect answer.

    Raises:
        ValueError: an unknown prediction mode.
    """
    spec = domains.find(row.domain)
    if check_prediction(prediction) == "full" or not (spec and spec.render_change):
        return "full"
    def drawn(turn: int) -> bool:   # on an observation, not on nothing
        return bool(previous_observation(row, turn).strip()) and observed_change(row, turn) is not None

    earlier = range(1, row.turn_idx)
    if not previous_observation(row).strip() or 2 * sum(map(drawn, earlier)) < len(earlier):
        return "full"
    return "change"


def change_row(row: BenchRow) -> BenchRow:
    """The row as a world model in mode ``change`` reads it: the domain's instruction added
    to the system prompt and each earlier turn's observation written as its change (kept
    whole where no change renders it). The ground truth stays the full observation."""
    spec = domains.find(row.domain)
    if not (spec and spec.render_change):
        return row
    responses = list(row.response)
    for turn in range(1, row.turn_idx):
        change = observed_change(row, turn)
        if change is not None:
            responses[turn - 1] = format_response(change)
    system = f"{row.system_str}\n\n{spec.change_instruction}".lstrip()
    return row.model_copy(update={"response": responses, "system_str": system})


def request(row: BenchRow, prediction: Prediction = "full", count_tokens: Callable[[str], int] | None = None,
            max_prompt_tokens: int | None = None, *, compact: bool = False) -> tuple[list[Message], list[int]]:
    """The chat messages asking for the row's current turn in mode ``prediction``
    (:func:`lwm.prompts.build_messages` of the row, or of :func:`change_row` where
    :func:`row_prediction` says ``change``); with
    ``compact``, tool lists in the system prompt are one-line signatures
    (:func:`lwm.prompts.compact_tools`).

    Raises:
        ValueError: an unknown prediction mode.
    """
    if compact:
        row = row.model_copy(update={"system_str": compact_tools(row.system_str)})
    changed = row_prediction(row, prediction) == "change"
    return build_messages(change_row(row) if changed else row, count_tokens, max_prompt_tokens)


def drawn_observation(row: BenchRow, predicted: str, prediction: Prediction = "full") -> str:
    """The full observation of the row's current turn as the model wrote it: as it is
    where :func:`row_prediction` says ``full``, else drawn by the domain's renderer
    from the previous observation (the row's ground truth before this turn: teacher
    forcing), the action and ``predicted`` (an unreadable action types nothing), with what the
    action alone decides put right first (:attr:`~lwm.domains.base.Domain.ground_change`: the
    terminal's echo of typed keystrokes). An empty
    prediction stays empty: a model that wrote nothing is not credited with the previous
    observation."""
    if row_prediction(row, prediction) == "full" or not predicted.strip():
        return predicted
    spec, previous, action = domains.get(row.domain), previous_observation(row), action_of(row) or ""
    if spec.ground_change is not None:
        predicted = spec.ground_change(predicted, previous, action, row.system_str)
    return spec.render_change(predicted, previous, action, row.system_str)


def ruled_out(row: BenchRow, observation: str) -> str | None:
    """The domain's trivial guess for the row's current turn where its action alone rules
    the full ``observation`` out (:attr:`~lwm.domains.base.Domain.rules_out`: a syntax
    error reported for a code cell that compiles), else ``None``."""
    spec, action = domains.find(row.domain), action_of(row)
    if spec is None or spec.rules_out is None or action is None or \
            not spec.rules_out(observation, action, row.system_str):
        return None
    return spec.trivial_observation(action, previous_observation(row), row.system_str)


def model_observation(row: BenchRow, predicted: str, issues: Sequence[str] = (), prediction: Prediction = "full",
                      rule_out: bool = True) -> tuple[str, list[str]]:
    """The full observation of the row's current turn from what the model wrote
    (:func:`drawn_observation`) and the answer's parse ``issues``: replaced by the domain's
    trivial guess where the action alone rules it out (:func:`ruled_out`; not when
    ``rule_out`` is false), with the issue ``ruled out`` added."""
    drawn = drawn_observation(row, predicted, prediction)
    guess = ruled_out(row, drawn) if rule_out else None
    return (drawn, list(issues)) if guess is None else (guess, [*issues, "ruled out"])


def full_observation(row: BenchRow, predicted: str, prediction: Prediction = "full") -> str:
    """The full observation of the row's current turn from what the model wrote, as
    :func:`model_observation` gives it."""
    return model_observation(row, predicted, (), prediction)[0]


__all__ = [
    "PREDICTIONS", "Prediction", "action_of", "certain_observation", "change_row", "check_prediction",
    "drawn_observation", "full_observation", "model_observation", "observed_change",
    "previous_observation", "request", "request_format", "row_prediction", "ruled_out",
]
