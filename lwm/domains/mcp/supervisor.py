"""In-sandbox supervisor of one MCP server (runs with the sandbox's /usr/bin/python3, stdlib).

It starts the server named in ``/run/lwm/mcp.json`` with pipes, relays its JSON-RPC lines
to the host and back, and handles the host's state operations, all on its own
stdin/stdout as JSON lines:

host -> here:  ``{"msg": <JSON-RPC message>}``     forwarded to the server's stdin
               ``{"op": "snapshot"}``               tar of /app, base64
               ``{"op": "restore", "data": b64}``   stop server, replace /app, start server
               ``{"op": "kill_server"}``            kill the server (fault injection in tests)
here -> host:  ``{"gen": n, "msg": <message>}``     a line the server wrote (generation n)
               ``{"gen": n, "exit": code}``         the server ended
               ``{"op": ..., "ok": bool, ...}``     the answer to an operation

Server lines longer than ``max_message_bytes`` have their text content cut (the marker
``[lwm: output truncated]`` ends the cut text) or, failing that, become a JSON-RPC error
answer, so no reply to the host is unbounded.
"""

import base64
import io
import json
import os
import queue
import shutil
import subprocess
import sys
import tarfile
import threading

CONFIG_PATH = "/run/lwm/mcp.json"
CONFIG = {}  # read in main(): importing this module has no effect
MAX_MSG = 1 << 20
HARD_MAX = 64 << 20  # a server line beyond this kills the server
MAX_SNAPSHOT = 16 << 20
STATE_DIR = "/app"
TRUNCATED = "\n[lwm: output truncated]"

_out_lock = threading.Lock()
_state = {"proc": None, "gen": 0, "inbox": None}


def emit(obj):
    data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "replace")
    with _out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def shrink(line):
    """A bounded version of an oversized server line."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    result = msg.get("result") if isinstance(msg, dict) else None
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        texts = [b for b in result["content"] if isinstance(b, dict) and isinstance(b.get("text"), str)]
        budget = max(1024, (MAX_MSG // 4) // max(1, len(texts)))
        for block in texts:
            if len(block["text"].encode()) > budget:
                block["text"] = block["text"].encode()[:budget].decode("utf-8", "ignore") + TRUNCATED
        result.pop("structuredContent", None)
        result["content"] = [b for b in result["content"] if len(json.dumps(b)) <= MAX_MSG // 2]
        if len(json.dumps(msg)) <= MAX_MSG:
            return msg
    if isinstance(msg, dict) and "id" in msg:
        return {"jsonrpc": "2.0", "id": msg["id"],
                "error": {"code": -32603, "message": "lwm: the server's answer exceeded %d bytes" % MAX_MSG}}
    return None


def pump(proc, gen):
    """Relay the server's stdout lines to the host until it ends."""
    while True:
        line = proc.stdout.readline(HARD_MAX)
        if not line:
            break
        if not line.endswith(b"\n") and len(line) >= HARD_MAX:
            proc.kill()
            break
        line = line.strip()
        if not line:
            continue
        if len(line) > MAX_MSG:
            msg = shrink(line)
            if msg is not None:
                emit({"gen": gen, "msg": msg})
            continue
        try:
            emit({"gen": gen, "msg": json.loads(line)})
        except ValueError:  # servers log to stdout sometimes; the host ignores it
            emit({"gen": gen, "noise": line[:500].decode("utf-8", "replace")})
    emit({"gen": gen, "exit": proc.wait()})


def feed(proc, inbox):
    """Write queued lines to the server's stdin (a thread: a stuck server blocks only it)."""
    while True:
        data = inbox.get()
        if data is None:
            break
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
        except (OSError, ValueError):
            break


def start():
    env = dict(os.environ)
    env.update(CONFIG.get("env", {}))
    proc = subprocess.Popen(CONFIG["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=STATE_DIR)
    _state["gen"] += 1
    inbox = queue.Queue()
    _state.update(proc=proc, inbox=inbox)
    threading.Thread(target=pump, args=(proc, _state["gen"]), daemon=True).start()
    threading.Thread(target=feed, args=(proc, inbox), daemon=True).start()


def stop():
    proc = _state["proc"]
    if proc is not None:
        _state["inbox"].put(None)
        proc.kill()
        proc.wait()
    _state["proc"] = None


def snapshot():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in sorted(os.listdir(STATE_DIR)):
            tar.add(os.path.join(STATE_DIR, name), arcname=name)
            if buf.tell() > MAX_SNAPSHOT:
                raise ValueError("the state is larger than %d bytes" % MAX_SNAPSHOT)
    return base64.b64encode(buf.getvalue()).decode()


def restore(data):
    stop()
    for name in os.listdir(STATE_DIR):
        path = os.path.join(STATE_DIR, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(data)), mode="r") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(STATE_DIR, filter="fully_trusted")
        else:
            tar.extractall(STATE_DIR)
    start()


def main():
    global MAX_MSG, MAX_SNAPSHOT
    with open(CONFIG_PATH) as f:
        CONFIG.update(json.load(f))
    MAX_MSG = int(CONFIG.get("max_message_bytes", MAX_MSG))
    MAX_SNAPSHOT = int(CONFIG.get("max_snapshot_bytes", MAX_SNAPSHOT))
    for cmd in CONFIG.get("setup", []):
        subprocess.run(cmd, cwd=STATE_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    start()
    for raw in sys.stdin.buffer:
        try:
            req = json.loads(raw)
        except ValueError:
            continue
        if "msg" in req:
            _state["inbox"].put((json.dumps(req["msg"], ensure_ascii=False) + "\n").encode())
            continue
        op = req.get("op")
        try:
            if op == "snapshot":
                emit({"op": op, "ok": True, "data": snapshot()})
            elif op == "restore":
                restore(req["data"])
                emit({"op": op, "ok": True, "gen": _state["gen"]})
            elif op == "kill_server":
                _state["proc"].kill()
                emit({"op": op, "ok": True})
            else:
                emit({"op": op, "ok": False, "error": "unknown operation"})
        except Exception as e:  # reported to the host, which raises SandboxError
            emit({"op": op, "ok": False, "error": "%s: %s" % (type(e).__name__, e)})
    stop()


if __name__ == "__main__":
    main()
