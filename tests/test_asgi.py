"""lwm.asgi.RequestGuard: body caps, refused fields and short errors, in front of a real
FastAPI application."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from lwm.asgi import RequestGuard


def _app() -> FastAPI:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request):
        return await request.json()

    @app.post("/crash")
    async def crash():
        raise RuntimeError("boom in /home/secret/lwm/models/server.py")

    @app.post("/fails")
    async def fails():
        return JSONResponse({"message": "Traceback: /usr/lib/python3/x.py"}, status_code=500)

    return app


def test_a_good_request_passes_unchanged():
    client = TestClient(RequestGuard(_app(), max_body_bytes=1000, refused={"grammar": "crashes"}))
    assert client.post("/echo", json={"a": 1}).json() == {"a": 1}


def test_bad_bodies_are_refused_before_the_application_sees_them():
    client = TestClient(RequestGuard(_app(), max_body_bytes=1000, refused={"grammar": "it crashes the runtime"}))
    big = client.post("/echo", content=b'{"a": "' + b"x" * 2000 + b'"}', headers={"content-type": "application/json"})
    assert big.status_code == 413 and big.json()["error"]["message"] == "the request body is over 1000 bytes"
    for body, message in ((b"[1, 2, 3]", "must be a JSON object, not an array"), (b"null", "not null"),
                          (b"{oops", "is not JSON"), (b'{"grammar": "root ::= x"}', "'grammar' is not accepted")):
        r = client.post("/echo", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and message in r.json()["error"]["message"], (body, r.text)


def test_failures_are_answered_briefly_and_their_details_stay_in_the_log(caplog):
    client = TestClient(RequestGuard(_app()), raise_server_exceptions=False)
    for path in ("/crash", "/fails"):
        r = client.post(path, json={})
        assert r.status_code == 500 and r.json() == {"error": {
            "message": "internal error (details in the server's log)", "type": "server_error", "code": 500}}
    assert "boom in /home/secret" in caplog.text


def test_lwm_serve_env_caps_bodies_as_it_runs():
    """The command itself, as a user starts it: a 5 MiB reset body is refused with 413 and a
    short JSON error before the environment server reads it."""
    import subprocess
    import sys

    import httpx
    from servers import free_port, wait_ready

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lwm.cli", "serve", "env", "--backend", "real", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_ready(f"http://127.0.0.1:{port}/health", proc)
        r = httpx.post(f"http://127.0.0.1:{port}/reset", content=b'{"task": "' + b"x" * (5 << 20) + b'"}',
                       headers={"content-type": "application/json"}, timeout=30)
        assert r.status_code == 413 and set(r.json()) == {"error"}
    finally:
        proc.terminate()
        proc.wait(timeout=20)
