"""Reference predictors that need no model, to put a world model's scores in context.

* ``baseline:repeat-last`` predicts the previous observation again (for turn 1 the
  initial state shown in the row, else nothing). On screen-like domains (terminal, web)
  most of the screen survives an action, so this is a strong reference for line F1.
* ``baseline:trivial`` is the domain's cheap guess from the action and the previous
  observation, ``trivial_observation(action, previous, system)`` of its module
  (terminal: the command echoed at the prompt and a fresh prompt on the previous screen;
  db: psql's command tags; code: no output); a domain without one gets the empty
  observation.

They predict from the whole AgentWorldBench row (:meth:`RowBaseline.predict_row`), not
from chat messages: ``lwm eval --model baseline:trivial`` runs them through the same
scoring and reports as a model (nothing to parse, no history window). They cannot drive a
simulation or judge (:meth:`RowBaseline.generate` raises).
"""

from __future__ import annotations

from lwm import domains
from lwm.models import load_model
from lwm.models.base import ChatModel, Generation, Message, SamplingParams, approx_tokens
from lwm.models.registry import REFERENCE_PREFIX, REFERENCES, resolve
from lwm.prediction import action_of, previous_observation
from lwm.schema import BenchRow

BASELINES = tuple(REFERENCES)


def load_predictor(name: str, **kwargs) -> ChatModel | RowBaseline:
    """What ``lwm eval --model NAME`` predicts with: a reference predictor for ``baseline:…``
    names, else the chat model :func:`lwm.models.load_model` builds from ``name`` and
    ``kwargs``.

    Raises:
        ValueError: an unknown baseline, or model settings (an adapter, an endpoint) given
            with a reference predictor.
        as :func:`lwm.models.load_model`.
    """
    if not resolve(name).is_reference:
        return load_model(name, **kwargs)
    if kwargs.get("adapter") or kwargs.get("base_url"):
        raise ValueError(f"{name} is a reference predictor: it takes no adapter and no endpoint")
    return RowBaseline(name.removeprefix(REFERENCE_PREFIX))


class RowBaseline:
    """A reference predictor, evaluated like a model (``name`` is recorded).

    Args:
        kind: ``"repeat-last"`` or ``"trivial"``.

    Raises:
        ValueError: unknown kind.
    """

    context_window = None

    def __init__(self, kind: str) -> None:
        if kind not in BASELINES:
            raise ValueError(f"unknown baseline {kind!r}; expected one of {', '.join(BASELINES)}")
        self.kind, self.name = kind, REFERENCE_PREFIX + kind

    def predict_row(self, row: BenchRow) -> str:
        """The predicted observation text for ``row``.

        Raises:
            ValueError: (``trivial``) the row's current prompt has no fenced
                ``**Action:**`` block to read the action from.
        """
        previous = previous_observation(row)
        if self.kind == "repeat-last":
            return previous
        spec = domains.find(row.domain)  # None: a domain lwm does not know (other benchmarks' rows)
        guess = spec.trivial_observation if spec else None
        if guess is None:
            return ""
        action = action_of(row)
        if action is None:
            raise ValueError("no fenced **Action:** block in the row's current prompt")
        return guess(action, previous, row.system_str)

    async def generate(self, messages: list[Message], sampling: SamplingParams) -> Generation:
        raise TypeError(f"{self.name} predicts AgentWorldBench rows (lwm eval), it cannot answer chat messages")

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    async def aclose(self) -> None:
        pass
