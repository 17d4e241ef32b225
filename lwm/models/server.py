"""``lwm serve-model``: the embedded model behind an OpenAI-compatible HTTP API.

Built on ``llama_cpp.server`` (the server shipped with llama-cpp-python), so any tool
that speaks ``/v1/chat/completions`` can use the embedded world model. The server runs
one sequence at a time; a prompt cache keeps the KV state of recent prompts, so
interleaved requests from several episodes still reuse their shared prefixes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from lwm.asgi import RequestGuard
from lwm.errors import ModelUnavailableError
from lwm.models.embedded import (
    EMBEDDED_NAME,
    adapter_name,
    bounded_ram_cache,
    check_adapter,
    embedded_gguf_path,
    merged_gguf,
    shipped_adapter_path,
    warmup_adapter_path,
)
from lwm.models.registry import NAMED, resolve, shipped_adapter_file

#: Request fields the runtime must not see: llama.cpp parses a grammar in C, and a
#: malformed one ends the process (llama-cpp-python 0.3.36).
REFUSED_FIELDS = {"grammar": "a llama.cpp grammar that fails to parse crashes the server; use response_format"}


_ROLES = ("system", "developer", "user", "assistant", "tool")
_TYPES = {"max_tokens": int, "n": int, "seed": int, "top_k": int, "stream": bool, "logprobs": bool,
          "top_logprobs": int, "temperature": float, "top_p": float, "min_p": float, "repeat_penalty": float,
          "presence_penalty": float, "frequency_penalty": float}


def check_request(path: str, body: dict) -> str | None:
    """What is wrong with an OpenAI-style request body before llama-cpp-python sees it
    (where it would answer 500), or ``None``: messages a non-empty list of ``{role, content}``
    with text content, a completion's prompt text, numbers and flags of their types,
    ``logit_bias`` keys token ids."""
    if path.endswith("/chat/completions"):
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "'messages' must be a non-empty list of {role, content} objects"
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in _ROLES:
                return f"messages[{i}] needs a role, one of {', '.join(_ROLES)}"
            content = m.get("content")
            if not (content is None or isinstance(content, (str, list))):
                return f"messages[{i}].content must be text"
    elif path.endswith("/completions") and not (isinstance(body.get("prompt"), str) or (
            isinstance(body.get("prompt"), list) and all(isinstance(p, str) for p in body["prompt"]))):
        return "'prompt' must be text or a list of texts"
    for key, kind in _TYPES.items():
        value = body.get(key)
        if value is None:
            continue
        ok = isinstance(value, bool) if kind is bool else (
            not isinstance(value, bool) and isinstance(value, (int, float) if kind is float else int))
        if not ok or (kind is not bool and value < 0):
            return f"{key!r} must be a {'flag' if kind is bool else 'number'}" + ("" if kind is bool else " >= 0")
    bias = body.get("logit_bias")
    if bias is not None and not (isinstance(bias, dict) and all(str(k).isdigit() for k in bias)):
        return "'logit_bias' maps token ids to numbers"
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "the request holds text that is not valid Unicode (a lone surrogate)"
    return None


def served_files(model: str = "embedded", adapter: str | Path | None = None) -> tuple[Path, Path | None]:
    """The GGUF model file and LoRA adapter file ``lwm serve-model`` serves for ``model``
    (a named model of :mod:`lwm.models.registry` or a GGUF file) and ``adapter`` (a GGUF
    adapter, or ``"warmup"``: the shipped warm-up adapter).

    Raises:
        ValueError: a model llama.cpp cannot serve (a transformers directory, a reference
            predictor), or an adapter on a named model that carries its own.
        ModelUnavailableError: the model or adapter file is missing or not one.
    """
    ref = resolve(model)
    if ref.kind not in ("embedded", "gguf"):
        raise ValueError(f"lwm serve-model serves a llama.cpp model: one of {', '.join(NAMED)} or a .gguf file, "
                         f"not {model!r}")
    if adapter and not ref.takes_adapter:
        raise ValueError(f"{model!r} already has its adapter; serve --model embedded with --adapter")
    path = Path(ref.path) if ref.path else embedded_gguf_path()
    if not path.is_file():
        raise ModelUnavailableError(f"no model file at {path}")
    if ref.adapter:
        return path, shipped_adapter_path(shipped_adapter_file(ref))
    return path, warmup_adapter_path() if adapter == "warmup" else check_adapter(adapter) if adapter else None


def create_app(model: str = "embedded", name: str | None = None, n_ctx: int = 8192,
               threads: int | None = None, prompt_cache_bytes: int = 1 << 30, adapter: str | Path | None = None):
    """The ASGI app serving one GGUF model under ``name``, behind :class:`lwm.asgi.RequestGuard`
    (bodies of at most 4 MiB, no ``grammar`` field, short errors).

    Args:
        model: a named model (``embedded``, ``embedded-warmup``, ``embedded-verdict``: see
            ``lwm models``) or a GGUF file.
        name: the model name clients send (default: the model's name, ``+<adapter stem>``
            with an adapter).
        n_ctx: context window in tokens.
        threads: CPU threads.
        prompt_cache_bytes: memory for cached prompt states (0 disables the cache).
        adapter: a LoRA adapter in GGUF form, or ``"warmup"`` for the shipped warm-up adapter
            (for a model without one); it is merged into a cached copy of the model
            (:func:`~lwm.models.embedded.merged_gguf`).

    Raises:
        ModelUnavailableError: ``llama-cpp-python[server]``, the weights or the adapter are missing.
        ValueError: as :func:`served_files`.
    """
    try:
        import llama_cpp.server.app as server_app
        from llama_cpp.server.settings import ModelSettings, ServerSettings
    except ImportError as e:
        raise ModelUnavailableError("llama-cpp-python[server] is not installed: run `make install`") from e
    path, lora = served_files(model, adapter)
    alias = name or (EMBEDDED_NAME if path == embedded_gguf_path() else path.stem)
    if lora is not None:
        alias = name or adapter_name(alias, lora)
        if merged := merged_gguf(path, lora):  # faster than the LoRA applied at run time
            path, lora = merged, None
    settings = ModelSettings(model=str(path), model_alias=alias, n_ctx=n_ctx, lora_path=str(lora) if lora else None,
                             n_threads=threads or os.cpu_count() or 1, verbose=False)
    app = server_app.create_app(server_settings=ServerSettings(), model_settings=[settings])
    app.state.lwm_model_name = alias
    if prompt_cache_bytes > 0:
        # The model is loaded by create_app; llama-cpp-python 0.3.36 keeps it here.
        server_app._llama_proxy._current_model.set_cache(bounded_ram_cache(prompt_cache_bytes))
    return RequestGuard(app, refused=REFUSED_FIELDS, check=check_request)


def serve(host: str = "127.0.0.1", port: int = 8000, **kwargs) -> None:
    """Run the server until interrupted (blocks)."""
    import uvicorn

    app = create_app(**kwargs)
    name = app.state.lwm_model_name
    print(f"serving {name} at http://{host}:{port}/v1 (OpenAI-compatible; Ctrl-C to stop)", file=sys.stderr)
    uvicorn.run(app, host=host, port=port, log_level="warning")
