"""World-model backends behind one interface (:class:`ChatModel`)."""

from __future__ import annotations

from lwm.models.base import ChatModel, FunctionChatModel, Generation, Message, SamplingParams

#: The default world model: the embedded SmolLM2 with the shipped warm-up adapter
#: (``"embedded"`` alone is the base model, for comparison and for non-world-model roles).
WORLD_MODEL = "embedded-warmup"


def judge_for(world_model: str) -> str | None:
    """The model spec that should judge rewards when ``world_model`` simulates, if not the
    world model itself: the base model for the warm-up one (its adapter learned to predict
    observations, not to judge; its verdicts were unreadable in a test rollout)."""
    return "embedded" if world_model == WORLD_MODEL else None


__all__ = ["WORLD_MODEL", "ChatModel", "FunctionChatModel", "Generation", "Message", "SamplingParams", "judge_for",
           "load_model", "served_model"]


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
    model: str = WORLD_MODEL,
    *,
    base_url: str | None = None,
    api_key: str = "EMPTY",
    concurrency: int = 16,
    timeout: float = 600.0,
    context_window: int | None = None,
    adapter: str | None = None,
    merge_adapter: bool = True,
) -> ChatModel:
    """Build a world-model backend.

    Args:
        model: ``"embedded-warmup"`` (:data:`WORLD_MODEL`: the bundled SmolLM2 on llama.cpp
            with the shipped warm-up adapter), ``"embedded"`` (the base model without it), a
            path to a ``.gguf`` file, ``"hf:<model dir>"`` or ``"hf:embedded"`` for the
            transformers runtime,
            ``"baseline:repeat-last"`` or ``"baseline:trivial"`` (reference predictors, see
            :mod:`lwm.eval.baselines`), or (with ``base_url``) the model name served by an
            OpenAI-compatible endpoint.
        base_url: the endpoint (e.g. ``http://127.0.0.1:8000/v1``); selects the
            OpenAI-compatible backend.
        api_key: bearer token for the endpoint.
        concurrency: requests in flight at most (OpenAI-compatible backend).
        timeout: seconds per request (OpenAI-compatible backend).
        context_window: context length in tokens, if known.
        adapter: a LoRA adapter in GGUF form (``lwm train export``) applied to a local
            llama.cpp model.
        merge_adapter: load the adapter (``adapter`` or the warm-up one) merged into a cached
            copy of the model, the faster way (see :class:`~lwm.models.embedded.LlamaCppChatModel`);
            ``False`` applies it at run time.

    Raises:
        ModelUnavailableError: the local runtime or weights are missing.
        ValueError: an unknown baseline, or an adapter for a model that cannot take one.
    """
    from lwm.eval.baselines import PREFIX, RowBaseline

    if adapter and (base_url or model.startswith(("hf:", PREFIX))):
        raise ValueError("an adapter applies to a local llama.cpp model (the embedded one or a .gguf file)")
    if model.startswith(PREFIX):
        return RowBaseline(model.removeprefix(PREFIX))
    if base_url:
        from lwm.models.openai_compat import OpenAIChatModel

        return OpenAIChatModel(
            model, base_url, api_key, concurrency=concurrency, timeout=timeout, context_window=context_window
        )
    if model.startswith("hf:"):
        from lwm.models.transformers_backend import TransformersChatModel

        return TransformersChatModel(model[3:])
    from lwm.models.embedded import LlamaCppChatModel, adapter_name, warmup_adapter_path

    if model == WORLD_MODEL:
        if adapter:
            raise ValueError(f"{WORLD_MODEL!r} already has its adapter; use --model embedded with --adapter")
        adapter = str(warmup_adapter_path())
    path = None if model in ("embedded", WORLD_MODEL) else model
    wm = LlamaCppChatModel(path, n_ctx=context_window or 8192, lora_path=adapter, merge_adapter=merge_adapter)
    if adapter:  # the adapter is part of the model's identity (provenance, resume checks)
        wm.name = adapter_name(wm.name, adapter)
    return wm
