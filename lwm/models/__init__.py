"""Chat-model backends behind one interface (:class:`ChatModel`): any OpenAI-compatible
server, the embedded SmolLM2 on llama.cpp (with or without a LoRA adapter), or a
transformers model. This package knows nothing of domains or data: every part of ``lwm``
that talks to an LLM (the world model, the reward model, the judge, a policy, a teacher)
builds one here, from a name or a :class:`ModelSpec`.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

from lwm.models.base import ChatModel, FunctionChatModel, Generation, Message, SamplingParams
from lwm.models.registry import NAMED, REFERENCE_PREFIX, ModelRef, is_reference, resolve

#: The default world model: the embedded SmolLM2 with the shipped warm-up adapter
#: (``"embedded"`` alone is the base model, for comparison and for non-world-model roles).
WORLD_MODEL = "embedded-warmup"

#: The trained reward model: the embedded SmolLM2 with the shipped verdict adapter, trained on
#: real episodes labelled by the real verifiers (:mod:`lwm.verdict`, docs/results.md).
VERDICT_MODEL = "embedded-verdict"

__all__ = ["NAMED", "REFERENCE_PREFIX", "VERDICT_MODEL", "WORLD_MODEL", "ChatModel", "FunctionChatModel",
           "Generation", "Message", "ModelRef", "ModelSpec", "SamplingParams", "check_reachable", "default_model",
           "is_reference", "judge_for", "load_model", "prompt_cache_mb", "resolve", "reward_model_for", "served_model"]


def judge_for(world_model: str) -> str | None:
    """The model that should judge rewards when ``world_model`` simulates, if not the world
    model itself (:attr:`ModelRef.judged_by` of a named model)."""
    ref = NAMED.get(world_model)
    return ref.judged_by if ref else None


def reward_model_for(reward: str, world_model: str | None) -> str | None:
    """The reward model to load for a reward source when none is given: the trained verdict
    model (:data:`VERDICT_MODEL`) for ``verdict`` and ``auto`` (which asks it for tasks
    without a verifier); :func:`judge_for` the world model for ``judge``; ``None`` (the world
    model itself) otherwise.

    >>> reward_model_for("auto", "embedded-warmup"), reward_model_for("probe", "embedded-warmup")
    ('embedded-verdict', None)
    """
    if reward in ("auto", "verdict"):
        return VERDICT_MODEL
    if reward == "judge" and world_model is not None:
        return judge_for(world_model)
    return None


def prompt_cache_mb(episodes_at_once: int) -> int:
    """:attr:`ModelSpec.prompt_cache_mb` for an in-process world model serving this many
    episodes at once: room for each episode's last state (about 150 MB for SmolLM2 at 2,000
    tokens, most of it the logits llama-cpp-python saves with it), at most 2 GiB; none for
    one episode, which the KV cache of the last prompt already serves (docs/benchmarks.md:
    2.07× on the terminal and 1.34× on web at 4 episodes at once).

    >>> [prompt_cache_mb(n) for n in (1, 4, 100)]
    [0, 768, 2048]
    """
    return 0 if episodes_at_once < 2 else min(2048, 192 * episodes_at_once)


@dataclass(frozen=True)
class ModelSpec:
    """How to load a chat model: picklable, so that it can travel to worker processes
    (Ray) and be recorded with a run (:func:`load_model` takes the same settings).

    Attributes:
        name: ``embedded-warmup`` (the bundled SmolLM2 on llama.cpp with the shipped
            warm-up adapter), ``embedded-verdict`` (the same with the shipped verdict
            adapter: the reward model), ``embedded`` (the base model), a ``.gguf`` file, ``hf:<model
            dir>`` (transformers), or the model name served at ``base_url``.
        base_url: an OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8000/v1`` (vLLM,
            SGLang, llama.cpp, Ollama, hosted APIs).
        api_key: bearer token for ``base_url``.
        concurrency: requests in flight at most (OpenAI-compatible endpoints).
        timeout: seconds per request (OpenAI-compatible endpoints).
        context_window: the model's context length in tokens (embedded default 8192, the
            model's training context).
        adapter: a LoRA adapter in GGUF form (``lwm train export``) for a local llama.cpp model.
        merge_adapter: load the adapter merged into a cached copy of the model (faster);
            false applies it at run time.
        prompt_cache_mb: a local llama.cpp model: memory for saved KV states of earlier
            prompts, so that conversations asked in turn (episodes simulated at once) each
            resume where they stopped (0: none). It changes speed, not answers, and is not
            part of :meth:`settings`.

    >>> ModelSpec("embedded-warmup").label
    'embedded-warmup'
    >>> ModelSpec("qwen", base_url="http://gpu:8000/v1").label
    'qwen@http://gpu:8000/v1'
    """

    name: str = WORLD_MODEL
    base_url: str | None = None
    api_key: str = "EMPTY"
    concurrency: int = 16
    timeout: float = 600.0
    context_window: int | None = None
    adapter: str | None = None
    merge_adapter: bool = True
    prompt_cache_mb: int = 0

    @property
    def label(self) -> str:
        """A short name for messages and run records (no API key)."""
        return f"{self.name}@{self.base_url}" if self.base_url else self.name

    def settings(self) -> dict:
        """What makes two models the same model (recorded with runs; no API key)."""
        d = asdict(self)
        d.pop("api_key")
        d.pop("prompt_cache_mb")
        return d

    def load(self) -> ChatModel:
        """The model; one instance per spec and process, loaded once even when many
        threads ask at the same time (llama.cpp's loader redirects the process's stdout
        and stderr while it runs: two at once can leave them pointing at /dev/null).

        Raises:
            as :func:`load_model`.
        """
        with _shared_lock:
            if self not in _shared:
                _shared[self] = load_model(**asdict(self))
            return _shared[self]


_shared: dict[ModelSpec, ChatModel] = {}
_shared_lock = threading.Lock()


def default_model(base_url: str | None = None, api_key: str = "EMPTY", adapter: str | None = None) -> str:
    """The model to use when none is named: the first one ``base_url`` serves; else the base
    model when an ``adapter`` is given (it goes on the base); else :data:`WORLD_MODEL`.

    Raises:
        ModelUnavailableError: ``base_url`` cannot be reached or serves no model.
    """
    if base_url:
        return served_model(base_url, api_key)
    return "embedded" if adapter else WORLD_MODEL


def check_reachable(base_url: str, api_key: str = "EMPTY") -> None:
    """Whether anything answers at ``base_url`` (asked for ``/models``; any HTTP answer, an
    error status included, counts: a minimal server may not list its models).

    Raises:
        ModelUnavailableError: the connection was refused or timed out (10 s, one retry).
    """
    from openai import APIConnectionError, OpenAI, OpenAIError

    from lwm.errors import ModelUnavailableError

    try:
        OpenAI(base_url=base_url, api_key=api_key, max_retries=1, timeout=10).models.list()
    except APIConnectionError as e:  # a timeout is one too
        raise ModelUnavailableError(f"cannot reach {base_url}: {e}") from None
    except OpenAIError:  # it answered
        pass


def served_model(base_url: str, api_key: str = "EMPTY") -> str:
    """The first model an OpenAI-compatible endpoint lists at ``/v1/models``.

    Raises:
        ModelUnavailableError: the endpoint cannot be reached or lists no model.
    """
    from openai import OpenAI, OpenAIError

    from lwm.errors import ModelUnavailableError

    try:
        models = OpenAI(base_url=base_url, api_key=api_key, max_retries=1, timeout=10).models.list().data
    except OpenAIError as e:
        raise ModelUnavailableError(f"cannot list the models of {base_url}: {e}") from None
    if not models:
        raise ModelUnavailableError(f"{base_url} serves no model")
    return models[0].id


def load_model(
    name: str = WORLD_MODEL,
    *,
    base_url: str | None = None,
    api_key: str = "EMPTY",
    concurrency: int = 16,
    timeout: float = 600.0,
    context_window: int | None = None,
    adapter: str | None = None,
    merge_adapter: bool = True,
    prompt_cache_mb: int = 0,
) -> ChatModel:
    """Build a chat-model backend (the settings are :class:`ModelSpec`'s; ``base_url``
    selects the OpenAI-compatible backend, ``hf:`` the transformers runtime, anything
    else llama.cpp; the adapter merge is :class:`~lwm.models.embedded.LlamaCppChatModel`'s).

    Returns:
        the model; its ``spec`` attribute is the :class:`ModelSpec` it was built from.

    Raises:
        ModelUnavailableError: the local runtime or weights are missing.
        ValueError: an adapter for a model that cannot take one, or a reference predictor's
            name (``baseline:…``: those predict ``lwm eval`` rows, see :mod:`lwm.eval.baselines`).
    """
    spec = ModelSpec(name, base_url, api_key, concurrency, timeout, context_window, adapter, merge_adapter,
                     prompt_cache_mb)
    ref = resolve(name, base_url)
    if ref.is_reference:
        raise ValueError(f"{name} is a reference predictor of lwm eval (lwm.eval.baselines), not a chat model: "
                         "it cannot simulate, judge or act")
    if adapter and not ref.takes_adapter:
        raise ValueError(f"{name!r} already has its adapter: give the base model, embedded, with the other adapter"
                         if ref.adapter
                         else "an adapter applies to a local llama.cpp model (the embedded one or a .gguf file)")
    if ref.kind == "served":
        from lwm.models.openai_compat import OpenAIChatModel

        model = OpenAIChatModel(name, base_url, api_key, concurrency=concurrency, timeout=timeout,
                                context_window=context_window)
    elif ref.kind == "hf":
        from lwm.models.transformers_backend import TransformersChatModel

        model = TransformersChatModel(ref.path)
    else:
        from lwm.models.embedded import LlamaCppChatModel, adapter_name, shipped_adapter_path
        from lwm.models.registry import shipped_adapter_file

        if ref.adapter:
            adapter = str(shipped_adapter_path(shipped_adapter_file(ref)))
        model = LlamaCppChatModel(ref.path, n_ctx=context_window or 8192, lora_path=adapter,
                                  merge_adapter=merge_adapter, prompt_cache_bytes=prompt_cache_mb << 20)
        if adapter:  # the adapter is part of the model's identity (provenance, resume checks)
            model.name = adapter_name(model.name, adapter)
    model.spec = spec
    return model
