"""Servers the tests start for real: ``lwm serve-model`` and a vLLM-style stand-in."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen | None = None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise TimeoutError(url)


@contextmanager
def lwm_serve_model():
    """``lwm serve-model`` on a free loopback port; yields the /v1 base URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lwm.cli", "serve-model", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_ready(f"http://127.0.0.1:{port}/v1/models", proc)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@contextmanager
def vllm_style_server(fail_first: int = 0):
    """A stand-in for a vLLM server with a reasoning parser (vLLM needs a GPU): answers
    with ``reasoning_content`` separate from ``content``, and with 503 to the first
    ``fail_first`` requests. Yields ``(base_url, request_log)``."""
    app = FastAPI()
    log: list[dict] = []

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        log.append(body)
        if len(log) <= fail_first:
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "reasoning_content": "the command prints hi",
                    "content": "<predicted_observation>hi</predicted_observation>"}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}

    with serve_app(app) as url:
        yield f"{url}/v1", log


def completion(content: str, finish_reason: str | None = "stop", usage: dict | None = None) -> dict:
    """An OpenAI ``chat.completion`` body with one choice."""
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "stub",
            "choices": [{"index": 0, "finish_reason": finish_reason,
                         "message": {"role": "assistant", "content": content}}],
            **({"usage": usage} if usage else {})}


def streamed(body: dict) -> StreamingResponse:
    """A ``chat.completion`` body sent as the server-sent events of ``stream: true``: one
    chunk with the message, one with the finish reason, then ``[DONE]``."""
    choice = body["choices"][0]
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": 0, "model": body["model"]}

    def events():
        for delta, finish in ((choice["message"], None), ({}, choice["finish_reason"])):
            yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}]})}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


@contextmanager
def chat_stub(answer):
    """An OpenAI-compatible ``/v1/chat/completions`` on loopback that answers each request
    body with ``answer(body)``: a dict (sent as JSON with status 200, or as server-sent
    events when the request asks ``stream``) or a Starlette ``Response``. Yields
    ``(base_url, request_log)``."""
    app = FastAPI()
    log: list[dict] = []

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        log.append(body)
        out = answer(body)
        return streamed(out) if body.get("stream") and isinstance(out, dict) else out

    with serve_app(app) as url:
        yield f"{url}/v1", log


@contextmanager
def serve_app(app, timeout: float = 20.0):
    """Run an ASGI app with uvicorn on a free loopback port in a thread; yield its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if time.monotonic() > deadline:
            raise TimeoutError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
