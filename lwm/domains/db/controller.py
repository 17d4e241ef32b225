"""The in-sandbox half of the database environment (runs under the sandbox's python3).

It reads its settings from ``/run/lwm/db.json`` (``engine``: ``sqlite`` or ``postgres``,
``max_output``: bytes of client output kept per statement, ``statement_timeout_ms``), then
answers one JSON line per request on stdin:

``{"op": "start"}``
    postgres: copy the read-only template cluster (``/opt/lwm-pgtemplate``) to
    ``/tmp/pgdata`` and start the server (unix socket in ``/tmp/.pgsock`` only, no TCP).
``{"op": "script", "sql": str, "timeout": s, "setup": bool}``
    run SQL through a one-shot, non-interactive client (setup statements, verifier probes);
    ``setup`` stops at the first error.
``{"op": "session"}``
    (re)start the episode's interactive client on a pseudo-terminal; answers its banner.
``{"op": "exec", "sql": str, "timeout": s}``
    type the SQL into the interactive client and answer what it printed.
``{"op": "snapshot" | "restore", "id": int}``
    copy the database's committed state aside / put it back (restarts the client).

The interactive client is the real ``sqlite3`` or ``psql`` on a pty (so it behaves as for
a person at a terminal) with echo off and its prompts replaced by markers: every line it
reads is followed by one marker, so after n lines typed, n markers mean it is waiting for
input again (marker 1 = ready, 2 = inside an unfinished statement, 3 = COPY data). Each
session's markers hold a random nonce, so output cannot pass for one.

Kept to the standard library of Python 3.8+ (the sandbox's system Python).
"""

import fcntl
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import termios
import time

CONFIG = "/run/lwm/db.json"
SQLITE_DB = "/app/data.db"
PG_BIN = "/usr/lib/postgresql/15/bin"
PG_TEMPLATE = "/opt/lwm-pgtemplate"
PG_DATA = "/tmp/pgdata"
PG_SOCK = "/tmp/.pgsock"
SNAPS = "/tmp/.lwm-snapshots"
INPUTRC = "/tmp/.lwm-inputrc"
FLOOD = 8 << 20  # bytes of output after which a statement is interrupted

cfg = {}
client = {"proc": None, "fd": None, "nonce": b"", "mark": None}


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def client_env():
    env = dict(os.environ)
    env.update({"INPUTRC": INPUTRC, "PSQL_HISTORY": "/dev/null", "PGHOST": PG_SOCK, "PGUSER": "postgres",
                "PGDATABASE": "postgres", "PAGER": "cat",
                "PGOPTIONS": "-c statement_timeout=%d" % cfg.get("statement_timeout_ms", 5000)})
    return env


# -- server -------------------------------------------------------------------------
def pg_start():
    opts = ("-c listen_addresses='' -c unix_socket_directories=%s -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c shared_buffers=32MB -c max_connections=20 -c max_worker_processes=4 "
            "-c max_parallel_workers_per_gather=0 -c dynamic_shared_memory_type=posix -c jit=off" % PG_SOCK)
    r = subprocess.run([PG_BIN + "/pg_ctl", "-D", PG_DATA, "-l", "/tmp/.pg.log", "-w", "-t", "30", "-o", opts,
                        "start"], stdin=subprocess.DEVNULL, capture_output=True, timeout=40)
    if r.returncode != 0:
        log = open("/tmp/.pg.log", errors="replace").read()[-2000:] if os.path.exists("/tmp/.pg.log") else ""
        return "pg_ctl start failed: %s %s" % (r.stderr.decode("utf-8", "replace")[-1000:], log)
    return None


def pg_stop(mode="fast"):
    subprocess.run([PG_BIN + "/pg_ctl", "-D", PG_DATA, "-m", mode, "-w", "-t", "30", "stop"],
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=40)


def copy_cluster(src, dst):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    os.chmod(dst, 0o700)  # postgres refuses a data directory others can read


def op_start(_):
    with open(INPUTRC, "w") as f:  # plain line input: no bracketed paste, no tab completion
        f.write("set enable-bracketed-paste off\nset disable-completion on\n")
    if cfg["engine"] == "postgres":
        os.makedirs(PG_SOCK, mode=0o700, exist_ok=True)
        copy_cluster(PG_TEMPLATE, PG_DATA)
        err = pg_start()
        if err:
            return {"ok": False, "error": err}
    return {"ok": True}


# -- one-shot client ------------------------------------------------------------------
def op_script(req):
    if cfg["engine"] == "sqlite":
        argv = ["sqlite3", "-header", "-column"] + (["-bail"] if req.get("setup") else []) + [SQLITE_DB]
    else:
        argv = ["psql", "-X", "-P", "pager=off"] + (["-q", "-v", "ON_ERROR_STOP=1"] if req.get("setup") else [])
    try:
        r = subprocess.run(argv, input=req["sql"].encode(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=client_env(), cwd="/app", timeout=req.get("timeout", 10))
    except subprocess.TimeoutExpired:
        return {"ok": False, "out": "", "timed_out": True}
    return {"ok": r.returncode == 0, "out": r.stdout[: cfg["max_output"]].decode("utf-8", "replace")}


# -- interactive client ---------------------------------------------------------------
def stop_client():
    proc, fd = client["proc"], client["fd"]
    if proc is not None:
        try:
            proc.kill()
        except OSError:
            pass
        proc.wait()
    if fd is not None:
        os.close(fd)
    client["proc"] = client["fd"] = None


def op_session(_):
    stop_client()
    master, slave = os.openpty()
    attr = termios.tcgetattr(slave)
    # Raw input (no line-length limit, no echo, no CR translation), raw output; keep ISIG.
    attr[0] &= ~(termios.ICRNL | termios.IXON | termios.INLCR)
    attr[1] &= ~termios.OPOST
    attr[3] &= ~(termios.ECHO | termios.ICANON | termios.IEXTEN)
    termios.tcsetattr(slave, termios.TCSANOW, attr)
    # a fresh nonce in every marker: output the agent's SQL prints (char(29) || 'P1' …) cannot forge one
    nonce = os.urandom(6).hex()  # sqlite3 keeps 19 characters of a prompt
    client["nonce"] = nonce.encode()
    client["mark"] = re.compile(b"\x1dP([123])" + client["nonce"] + b"\x1d")
    mark = {n: "\x1dP%s%s\x1d" % (n, nonce) for n in "123"}
    if cfg["engine"] == "sqlite":
        argv = ["sqlite3", "-header", "-column", "-cmd", ".prompt '%s' '%s'" % (mark["1"], mark["2"]), SQLITE_DB]
    else:
        argv = ["psql", "-X", "-P", "pager=off", "-v", "PROMPT1=" + mark["1"], "-v", "PROMPT2=" + mark["2"],
                "-v", "PROMPT3=" + mark["3"]]
    client["proc"] = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=client_env(), cwd="/app",
                                      start_new_session=True)
    os.close(slave)
    fcntl.fcntl(master, fcntl.F_SETFL, fcntl.fcntl(master, fcntl.F_GETFL) | os.O_NONBLOCK)
    client["fd"] = master
    res = talk(b"", 0, 15)
    res["ok"] = res["marks"] >= 1 and not res["exited"]
    return res


def talk(data, lines, timeout, stmt_timeout=None):
    """Write ``data`` and read until ``lines`` markers (at least one) came.

    A line that runs ``stmt_timeout`` seconds without the next marker is interrupted with
    SIGINT (the client's own cancel); the whole exchange ends after ``timeout`` seconds.
    """
    fd, proc = client["fd"], client["proc"]
    want = max(lines, 1)
    kept, dropped, pending, buf = bytearray(), 0, bytes(data), b""
    marks, state, exited, timed_out, stuck = 0, "", False, False, False
    interrupted_at, flooded = None, False
    deadline = time.monotonic() + timeout
    progress = time.monotonic()
    stmt_timeout = stmt_timeout or timeout
    while marks < want:
        now = time.monotonic()
        if now > deadline + 5 or (interrupted_at is not None and now - interrupted_at > 3):
            timed_out = stuck = True  # not even Ctrl-C brought the prompt back
            break
        if interrupted_at is None and (now >= deadline or now - progress > stmt_timeout
                                       or (dropped > FLOOD and not flooded)):
            # The engine's own cancel, as Ctrl-C at the terminal would do.
            timed_out = timed_out or dropped <= FLOOD or flooded
            flooded = flooded or dropped > FLOOD
            interrupted_at = now
            try:
                proc.send_signal(signal.SIGINT)
            except OSError:
                pass
            continue
        wait = max(0.01, min(0.5, deadline - now, stmt_timeout - (now - progress)))
        r, w, _ = select.select([fd], [fd] if pending else [], [], wait)
        if w:
            try:
                n = os.write(fd, pending[:4096])
                pending = pending[n:]
            except BlockingIOError:
                pass
        if r:
            try:
                chunk = os.read(fd, 1 << 16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:  # EIO: the client has exited and closed the terminal
                chunk = b""
            if not chunk:
                exited = True
                break
            buf += chunk
            while True:
                m = client["mark"].search(buf)
                split = len(client["nonce"]) + 3  # a marker may be split: keep what may be its start
                text = buf[: m.start()] if m else buf[: max(0, len(buf) - split)]
                room = cfg["max_output"] - len(kept)
                kept += text[:room]
                dropped += max(0, len(text) - max(room, 0))
                if not m:
                    buf = buf[len(text):]
                    break
                marks += 1
                progress, interrupted_at = time.monotonic(), None
                state = {b"1": "ready", b"2": "continue", b"3": "copy"}[m.group(1)]
                buf = buf[m.end():]
        elif proc.poll() is not None:
            exited = True
            break
    if exited:
        kept += buf[: max(0, cfg["max_output"] - len(kept))]
    return {"out": kept.decode("utf-8", "replace"), "dropped": dropped, "state": state, "marks": marks,
            "timed_out": timed_out, "stuck": stuck, "exited": exited or proc.poll() is not None}


def op_exec(req):
    if client["proc"] is None or client["proc"].poll() is not None:
        return {"out": "", "dropped": 0, "state": "", "marks": 0, "timed_out": False, "stuck": False,
                "exited": True}
    try:  # drop anything printed since the last answer (e.g. a prompt after a late Ctrl-C)
        while select.select([client["fd"]], [], [], 0)[0] and os.read(client["fd"], 1 << 16):
            pass
    except OSError:
        pass
    data = req["sql"].encode("utf-8")
    if not data.endswith(b"\n"):
        data += b"\n"
    res = talk(data, data.count(b"\n"), req.get("timeout", 10), req.get("stmt_timeout"))
    if res["stuck"] and not res["exited"]:
        op_session(None)  # the client did not come back even after Ctrl-C: a fresh one
        res["restarted"] = True
    return res


# -- snapshots --------------------------------------------------------------------------
def op_snapshot(req):
    os.makedirs(SNAPS, exist_ok=True)
    path = "%s/%d" % (SNAPS, int(req["id"]))
    if cfg["engine"] == "sqlite":  # the backup API copies the committed state consistently
        r = subprocess.run(["sqlite3", SQLITE_DB, ".backup '%s'" % path], capture_output=True, timeout=30)
        return {"ok": r.returncode == 0, "error": r.stderr.decode("utf-8", "replace")}
    stop_client()
    pg_stop("fast")
    copy_cluster(PG_DATA, path)
    err = pg_start()
    if err:
        return {"ok": False, "error": err}
    return op_session(None)


def op_restore(req):
    path = "%s/%d" % (SNAPS, int(req["id"]))
    if not os.path.exists(path):
        return {"ok": False, "error": "no such snapshot"}
    stop_client()
    if cfg["engine"] == "sqlite":
        for suffix in ("-journal", "-wal", "-shm"):  # a hot journal would roll the copy "back"
            if os.path.exists(SQLITE_DB + suffix):
                os.remove(SQLITE_DB + suffix)
        if os.path.isdir(path):
            return {"ok": False, "error": "bad snapshot"}
        shutil.copyfile(path, SQLITE_DB)
    else:
        pg_stop("immediate")
        copy_cluster(path, PG_DATA)
        err = pg_start()
        if err:
            return {"ok": False, "error": err}
    return op_session(None)


OPS = {"start": op_start, "script": op_script, "session": op_session, "exec": op_exec,
       "snapshot": op_snapshot, "restore": op_restore}


def main():
    cfg.update(json.load(open(CONFIG)))
    reply({"ok": True})
    for line in sys.stdin:
        req = json.loads(line)
        try:
            reply(OPS[req["op"]](req))
        except Exception as e:  # report, keep serving: the host decides what is fatal
            reply({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})


if __name__ == "__main__":
    main()
