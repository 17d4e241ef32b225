"""A stand-in for a GPU inference server: an OpenAI-compatible endpoint that answers
every chat completion after a fixed delay, with unlimited parallelism.

It does no inference. It exists to show that a client keeps many requests in flight:
against it, a client's throughput is bounded only by its own concurrency.

    python bench/delay_server.py --port 8011 --delay 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import time

import uvicorn
from fastapi import FastAPI, Request


def create_app(delay: float,
               answer: str = "<predicted_observation>root@sandbox:/app#</predicted_observation>") -> FastAPI:
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": "delay", "object": "model", "owned_by": "bench"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict:
        body = await request.json()
        await asyncio.sleep(delay)
        return {
            "id": "cmpl-delay", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "delay"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 8, "total_tokens": 9},
        }

    return app


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--delay", type=float, default=0.5, help="seconds before each answer")
    args = ap.parse_args()
    uvicorn.run(create_app(args.delay), host=args.host, port=args.port, log_level="warning")
