"""The OpenEnv wire against a real server (uvicorn on 127.0.0.1, the sim backend with a
scripted world model): a timed-out or cancelled call never shifts later answers, and
sessions that end log nothing alarming."""

import asyncio
import contextlib
import json
import logging
import re
import threading
import time

import pytest
from servers import free_port

from lwm.domains.terminal import keys
from lwm.envs.base import Task
from lwm.models.base import FunctionChatModel

pytest.importorskip("openenv")
uvicorn = pytest.importorskip("uvicorn")

# The client's timeout is well above a fast step's time under load (CI's tests run beside model
# jobs) and well below the slow step's.
SLOW_SECONDS = 6.0
TIMEOUT_S = 2.0


def slow_echo_model(finished: threading.Event):
    """The observation names the action's keystrokes (so an answer to another request is
    visible); the action ``slow`` takes :data:`SLOW_SECONDS`, then sets ``finished``."""
    def fn(messages):
        typed = re.findall(r'"keystrokes": "(\w+)', messages[-1]["content"])
        if typed and typed[-1] == "slow":
            time.sleep(SLOW_SECONDS)
            finished.set()
        return f"<predicted_observation>typed {typed[-1] if typed else None}</predicted_observation>"
    return FunctionChatModel(fn, name="slow-echo")


@contextlib.contextmanager
def logged_server(finished: threading.Event):
    """A real OpenEnv server whose log records reach the root logger (pytest's caplog)."""
    from lwm.sim.openenv_server import make_app

    app = make_app("terminal", "sim", model=slow_echo_model(finished), tasks=[Task("t")], max_sessions=4)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="info", log_config=None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def typed(result) -> str:
    return result.observation.text


def test_a_timed_out_step_never_shifts_later_answers():
    from lwm.sim.openenv_server import WorldAction, WorldClient

    finished = threading.Event()
    with logged_server(finished) as url, WorldClient(url, message_timeout_s=TIMEOUT_S).sync() as client:
        client.reset(task="t")
        assert typed(client.step(WorldAction(text=keys("one\n")))) == "typed one"
        with pytest.raises(TimeoutError, match=r"no answer to 'step' within 2 s.*call reset\(\)"):
            client.step(WorldAction(text=keys("slow\n")))
        with pytest.raises(ConnectionError, match=r"session was lost \(no answer to 'step' within 2 s\)"):
            client.step(WorldAction(text=keys("two\n")))
        with pytest.raises(ConnectionError, match="session was lost"):
            client.state()
        assert finished.wait(SLOW_SECONDS + 10)  # the late answer exists now: it must not be read as the next one
        time.sleep(0.2)
        client.reset(task="t")  # a new connection, a new session
        assert typed(client.step(WorldAction(text=keys("three\n")))) == "typed three"
        assert typed(client.step(WorldAction(text=keys("four\n")))) == "typed four"
        assert client.state().step_count == 2  # the new episode, not the lost one


def test_a_cancelled_step_drops_the_session_too():
    from lwm.sim.openenv_server import WorldAction, WorldClient

    async def play(url):
        async with WorldClient(url) as client:
            await client.reset(task="t")
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.step(WorldAction(text=keys("slow\n"))), 0.3)
            with pytest.raises(ConnectionError, match=r"'step' was interrupted \(CancelledError\)"):
                await client.step(WorldAction(text=keys("two\n")))
            await client.reset(task="t")
            return typed(await client.step(WorldAction(text=keys("three\n"))))

    with logged_server(threading.Event()) as url:
        assert asyncio.run(play(url)) == "typed three"


def test_sessions_that_end_log_nothing_alarming(caplog):
    from websockets.sync.client import connect

    from lwm.sim.openenv_server import WorldAction, WorldClient

    finished = threading.Event()
    with caplog.at_level(logging.INFO), logged_server(finished) as url:
        with WorldClient(url).sync() as client:  # a clean close: OpenEnv's close message, then the socket
            client.reset(task="t")
            client.step(WorldAction(text=keys("one\n")))
        with connect(url.replace("http", "ws") + "/ws") as ws:  # the socket closed without a close message
            ws.send(json.dumps({"type": "reset", "data": {}}))
            assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        with WorldClient(url, message_timeout_s=TIMEOUT_S).sync() as client:  # gone mid-step
            client.reset(task="t")
            with pytest.raises(TimeoutError):
                client.step(WorldAction(text=keys("slow\n")))
        assert finished.wait(SLOW_SECONDS + 10)
        time.sleep(0.5)  # the server tries to answer the client that left, then ends the session
    alarming = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert [r.getMessage() for r in alarming] == []
    assert [r.getMessage() for r in caplog.records if r.name == "lwm.sim.openenv_server"] == \
        ["a WebSocket client left before its answer was sent; the answer is dropped"]
    assert sum("connection open" in r.getMessage() for r in caplog.records) == 3  # the log was captured


def test_a_frame_that_is_json_but_not_an_object_is_refused_and_the_session_goes_on():
    from websockets.sync.client import connect

    with logged_server(threading.Event()) as url, connect(url.replace("http", "ws") + "/ws") as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        for frame in ("[1, 2]", "5", "null", '"s"', "{not json"):
            ws.send(frame)
            answer = json.loads(ws.recv(timeout=10))
            assert answer["type"] == "error" and answer["data"]["code"] == "INVALID_JSON", (frame, answer)
        ws.send(json.dumps({"type": "step", "data": {"text": keys("one\n")}}))
        assert json.loads(ws.recv(timeout=10))["data"]["observation"]["text"] == "typed one"
