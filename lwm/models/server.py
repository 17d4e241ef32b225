"""``lwm serve-model``: the embedded model behind an OpenAI-compatible HTTP API.

Built on ``llama_cpp.server`` (the server shipped with llama-cpp-python), so any tool
that speaks ``/v1/chat/completions`` can use the embedded world model.
"""

from __future__ import annotations

import os
from pathlib import Path

from lwm.errors import ModelUnavailableError
from lwm.models.embedded import EMBEDDED_NAME, embedded_gguf_path


def create_app(model_path: str | Path | None = None, name: str | None = None, n_ctx: int = 4096,
               threads: int | None = None):
    """The ASGI app serving one GGUF model under ``name``.

    Raises:
        ModelUnavailableError: ``llama-cpp-python[server]`` or the weights are missing.
    """
    try:
        from llama_cpp.server.app import create_app as llama_app
        from llama_cpp.server.settings import ModelSettings, ServerSettings
    except ImportError as e:
        raise ModelUnavailableError("llama-cpp-python[server] is not installed: run `make install`") from e
    path = Path(model_path) if model_path else embedded_gguf_path()
    alias = name or (EMBEDDED_NAME if model_path is None else path.stem)
    model = ModelSettings(model=str(path), model_alias=alias, n_ctx=n_ctx,
                          n_threads=threads or os.cpu_count() or 1, verbose=False,
                          cache=True, cache_type="ram", cache_size=1 << 30)
    return llama_app(server_settings=ServerSettings(), model_settings=[model])


def serve(host: str = "127.0.0.1", port: int = 8000, **kwargs) -> None:
    """Run the server until interrupted (blocks)."""
    import uvicorn

    uvicorn.run(create_app(**kwargs), host=host, port=port, log_level="warning")
