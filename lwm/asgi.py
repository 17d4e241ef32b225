"""A guard in front of lwm's HTTP servers (``lwm serve-model``, ``lwm serve env``).

Requests are checked before the application sees them, and failures are answered briefly:

* a body larger than ``max_body_bytes`` is refused with 413 (declared or not: a body is
  read only up to the cap, so a client cannot keep the server busy sending megabytes);
* a POST body that is not a JSON object, or holds a field on the ``refused`` list (with
  the reason, e.g. a llama.cpp grammar, which crashes the runtime when malformed), is
  refused with 400;
* a 5xx answer of the application is replaced by a short JSON error: its text (file paths,
  a traceback) stays in the server's log.

Errors are OpenAI-style, ``{"error": {"message": …, "type": …, "code": status}}``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]

#: Largest request body by default (bytes): far above any prompt a context window holds.
MAX_BODY_BYTES = 4 << 20

_log = logging.getLogger("lwm.asgi")


class RequestGuard:
    """Wrap an ASGI ``app`` (see the module docstring).

    Args:
        app: the application.
        max_body_bytes: largest body accepted.
        refused: top-level JSON fields refused, each with the reason given to the client.
        check: ``check(path, body) -> problem | None`` for a POST's JSON object (the fields
            an application would fail on with a 500).
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES,
                 refused: Mapping[str, str] | None = None,
                 check: Callable[[str, dict], str | None] | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.refused = dict(refused or {})
        self.check = check

    def __getattr__(self, name: str) -> Any:   # app.state, routes … of the wrapped app
        return getattr(self.app, name)

    async def __call__(self, scope: dict, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            return await _error(send, 413, f"the request body is over {self.max_body_bytes} bytes")
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body_bytes:
                return await _error(send, 413, f"the request body is over {self.max_body_bytes} bytes")
        if scope.get("method") == "POST" and (body or self.check is not None):
            problem = self._problem(scope.get("path", ""), body)
            if problem:
                return await _error(send, 400, problem)
        return await self._call(scope, body, receive, send)

    def _problem(self, path: str, body: bytes) -> str | None:
        if not body:
            return "the request body is empty: a JSON object is expected"
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):
            return "the request body is not JSON"
        if not isinstance(obj, dict):
            kind = {type(None): "null", list: "an array", str: "a string", bool: "a boolean"}.get(type(obj), "a number")
            return f"the request body must be a JSON object, not {kind}"
        for name, why in self.refused.items():
            if name in obj:
                return f"{name!r} is not accepted: {why}"
        return self.check(path, obj) if self.check is not None else None

    async def _call(self, scope: dict, body: bytes, client_receive, send) -> None:
        sent = False

        async def receive() -> dict:   # the body read, then the client's own (a disconnect)
            nonlocal sent
            if sent:
                return await client_receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        failed = answered = False

        async def guarded_send(message: dict) -> None:
            nonlocal failed, answered
            if message["type"] == "http.response.start" and message["status"] >= 500:
                failed = True
                return await _error(send, message["status"], "internal error (details in the server's log)")
            if failed:
                return None   # the application's own error text stays here
            answered = answered or message["type"] == "http.response.start"
            return await send(message)

        try:
            await self.app(scope, receive, guarded_send)
        except Exception:
            _log.exception("request to %s failed", scope.get("path"))
            if not answered and not failed:
                await _error(send, 500, "internal error (details in the server's log)")


async def _error(send, status: int, message: str) -> None:
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
