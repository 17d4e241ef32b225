"""The in-sandbox half of the code environment (runs under the sandbox's /usr/bin/python3).

Two processes, both this script:

* the **supervisor** (no argument) talks to the host: one JSON request per line on
  stdin, one JSON reply per line on stdout. It starts the worker, hands it cells, reads
  the worker's stdout and stderr (pipes, bounded), and enforces the time limit: on expiry
  it sends SIGINT (the worker raises KeyboardInterrupt and keeps its namespace, like
  Jupyter's "interrupt"); if the worker is still busy ``grace`` seconds later, it kills
  every process of the sandbox but itself and its ancestors and starts a fresh worker.
* the **worker** (``--worker``) is the interpreter: it compiles each cell with ``ast``
  (the last statement, if an expression, is evaluated and its ``repr`` returned, like
  IPython's ``Out[n]``), runs it in one persistent ``__main__`` namespace and reports
  the value or the traceback (CPython's own ``traceback`` formatting, cell file name
  ``<cell n>``). Its stdin is /dev/null, so ``input()`` raises EOFError.

Requests and replies (JSON, one line each)::

    {"op": "run", "code": str, "timeout": s, "grace": s, "limit": chars, "setup": bool}
      -> {"n": int, "status": "ok"|"error"|"interrupted"|"restarted"|"died", "stdout": str,
          "stdout_total": chars, "stderr": str, "stderr_total": chars, "value": str|null,
          "error": str|null, "exit": int|null}
    {"op": "files", "max_bytes": n}      -> {"entries": [[path, kind, data]], "too_big": bool}
    {"op": "put_files", "entries": [...]} -> {"ok": true}   (replaces everything under /app)
    {"op": "restart"}                     -> {"ok": true}

Kept to the standard library of Python 3.8+ (the sandbox's system Python).
"""

import ast
import base64
import codecs
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

APP = "/app"
MAX_WORKER_LINE = 1 << 20
EOF = object()  # wait_line's answer when the worker has gone


# --------------------------------------------------------------------------------------
# worker: the interpreter
# --------------------------------------------------------------------------------------
def worker(ctl_in, ctl_out):
    import builtins
    import linecache
    import traceback
    import types

    main = types.ModuleType("__main__")  # the user's module, as in a REPL
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    ns = main.__dict__
    sys.argv = [""]
    sys.path.insert(0, "")  # modules written to /app can be imported, as in a notebook
    # Bound now: a cell that rebinds json.dumps or os.getpid must not break the replies.
    getpid, exit_now, dumps, loads = os.getpid, os._exit, json.dumps, json.loads
    my_pid = getpid()
    saved_fds = [os.dup(fd) for fd in (0, 1, 2)]  # to undo a cell's close() or dup2()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt between cells does nothing

    reader = os.fdopen(ctl_in, "r", encoding="utf-8")
    writer = os.fdopen(ctl_out, "w", encoding="utf-8")
    for line in reader:
        req = loads(line)
        n, code, limit = req["n"], req["code"], req["limit"]
        filename = "<cell %d>" % n if n else "<setup>"
        # linecache makes the cell's lines show in tracebacks (IPython does the same).
        # Lines end with a newline, as read from a file: traceback's caret columns count on it.
        lines = [line if line.endswith("\n") else line + "\n" for line in code.splitlines(True)]
        linecache.cache[filename] = (len(code), None, lines, filename)
        _reset_std_streams(saved_fds)
        value, error = None, None
        try:
            tree = ast.parse(code, filename, "exec")
        except Exception as e:  # SyntaxError, or RecursionError on deep nesting: no traceback, as the REPL
            tree, error = None, "".join(traceback.format_exception_only(type(e), e)).rstrip("\n")
        if tree is not None:
            value, error = _run_cell(tree, filename, ns, traceback)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        if getpid() != my_pid:  # a child the cell forked: it must not answer
            exit_now(0)
        if value is not None and len(value) > limit:
            value = value[:limit] + _marker(limit, len(value))
        if error is not None and len(error) > limit:
            error = error[:limit] + _marker(limit, len(error))
        writer.write(dumps({"value": value, "error": error}) + "\n")
        writer.flush()


def _reset_std_streams(saved_fds):
    """Standard streams as at start for every cell: fds 0-2 point at /dev/null and the
    supervisor's pipes again, and a closed sys.stdin/stdout/stderr (``exit()`` closes
    stdin) is reopened, so that ``input()`` always meets end of file."""
    for fd, saved in enumerate(saved_fds):
        os.dup2(saved, fd)
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        stream = getattr(sys, "__%s__" % name)
        if stream is None or stream.closed:
            stream = open(fd, mode, encoding="utf-8", errors="backslashreplace" if fd else "strict",
                          buffering=1, closefd=False)
            setattr(sys, "__%s__" % name, stream)
        setattr(sys, name, stream)


def _run_cell(tree, filename, ns, traceback):
    """Run a parsed cell; return ``(repr of the last expression's value or None,
    traceback text or None)``. SIGINT raises KeyboardInterrupt only while the cell runs."""
    value = error = None
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a C handler: no extra frame
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec"), ns)
        if last is not None:
            result = eval(compile(last, filename, "eval"), ns)
            if result is not None:
                ns["_"] = result
                value = repr(result)
    except BaseException as e:  # noqa: BLE001 - every exception is the cell's result
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        error = _format_error(e, traceback)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return value, error


def _format_error(e, traceback):
    """CPython's own traceback text, without the worker's frame (syntax errors show no
    ``Traceback`` header, as in the REPL)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    try:
        return "".join(traceback.format_exception(type(e), e, tb)).rstrip("\n")
    except BaseException:  # noqa: BLE001 - a broken __str__ must not kill the worker
        return "%s: <exception str() failed>" % type(e).__name__


def _marker(limit, total):
    return "\n[... truncated: showing %d of %d characters]" % (limit, total)


# --------------------------------------------------------------------------------------
# supervisor
# --------------------------------------------------------------------------------------
class Stream:
    """A worker pipe read incrementally: the first ``limit`` characters are kept, the
    rest only counted."""

    def __init__(self, fd):
        self.fd = fd
        self.eof = False
        os.set_blocking(fd, False)
        self.start(0)

    def start(self, limit):
        self.limit = limit
        self.kept = []
        self.kept_len = 0
        self.total = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self):
        """Read what is available (marks ``eof`` at end of file)."""
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            self.eof = True
        self.add(self.decoder.decode(chunk))

    def add(self, text):
        self.total += len(text)
        room = self.limit - self.kept_len
        if room > 0:
            self.kept.append(text[:room])
            self.kept_len += min(room, len(text))

    def drain(self):
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.add(self.decoder.decode(chunk))
        self.add(self.decoder.decode(b"", True))
        return "".join(self.kept), self.total


class Supervisor:
    def __init__(self):
        self.proc = None
        self.n = 0
        self.start_worker()

    def start_worker(self):
        ctl_in_r, ctl_in_w = os.pipe()  # supervisor -> worker
        ctl_out_r, ctl_out_w = os.pipe()  # worker -> supervisor
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-u", os.path.abspath(__file__), "--worker", str(ctl_in_r), str(ctl_out_w)],
            stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w, cwd=APP,
            pass_fds=(ctl_in_r, ctl_out_w), start_new_session=True)
        for fd in (ctl_in_r, ctl_out_w, out_w, err_w):
            os.close(fd)
        self.to_worker = ctl_in_w
        self.from_worker = ctl_out_r
        self.out, self.err = Stream(out_r), Stream(err_r)
        self.n = 0

    def stop_worker(self):
        """Kill the worker and everything else in the sandbox but this process and its
        ancestors (what the cells started, even in new sessions), then reap."""
        self.kill_others(spare_worker=False)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.to_worker, self.from_worker, self.out.fd, self.err.fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def kill_others(self, spare_worker):
        """SIGKILL every process of the sandbox but this one, its ancestors and (if
        ``spare_worker``) the worker; reap those that were our children."""
        keep = set()
        pid = os.getpid()
        while pid > 1:
            keep.add(pid)
            pid = _ppid(pid)
        keep.add(1)
        if spare_worker:
            keep.add(self.proc.pid)
        for _ in range(3):
            for name in os.listdir("/proc"):
                if name.isdigit() and int(name) not in keep:
                    try:
                        os.kill(int(name), signal.SIGKILL)
                    except OSError:
                        pass
            time.sleep(0.05)
        while not spare_worker:  # reap orphans that were re-parented to us
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break

    def run(self, req):
        timeout, grace, limit = float(req["timeout"]), float(req["grace"]), int(req["limit"])
        if not req.get("setup"):  # a task's setup cells are not counted
            self.n += 1
        n = 0 if req.get("setup") else self.n
        self.out.start(limit)
        self.err.start(limit)
        self.buf = bytearray()
        reply = {"n": n, "value": None, "error": None, "exit": None}
        try:
            data = (json.dumps({"n": n, "code": req["code"], "limit": limit}) + "\n").encode()
            while data:  # the worker is reading: a blocking pipe write completes
                data = data[os.write(self.to_worker, data):]
        except OSError:
            return self.died(reply)
        line = self.wait_line(time.monotonic() + timeout)
        status = None
        if line is None:
            try:
                os.kill(self.proc.pid, signal.SIGINT)
            except OSError:
                pass
            line = self.wait_line(time.monotonic() + grace)
            status = "interrupted"
            if line is None:
                return self.restart(reply, "restarted")
        if line is EOF:
            return self.died(reply)
        try:
            answer = json.loads(line)
        except ValueError:
            return self.restart(reply, "died")
        reply["value"], reply["error"] = answer.get("value"), answer.get("error")
        if status is None:
            status = "error" if reply["error"] is not None else "ok"
        elif reply["error"] is None:  # the interrupt came after the cell had finished
            status = "ok"
        reply["status"] = status
        self.collect(reply)
        if status == "interrupted":  # what the cell left running dies with it
            self.kill_others(spare_worker=True)
        return reply

    def wait_line(self, deadline):
        """The worker's answer line, None at the deadline, or EOF if it exited. A partial
        line is kept in ``self.buf`` for the next call (the interrupt's grace period)."""
        buf = self.buf
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            fds = [self.from_worker] + [s.fd for s in (self.out, self.err) if not s.eof]
            ready = select.select(fds, [], [], min(left, 0.5))[0]
            for stream in (self.out, self.err):
                if stream.fd in ready:
                    stream.feed()
            if self.from_worker in ready:
                chunk = os.read(self.from_worker, 1 << 16)
                if not chunk:
                    return EOF
                buf += chunk
                if b"\n" in buf:
                    return bytes(buf.split(b"\n", 1)[0])
                if len(buf) > MAX_WORKER_LINE:
                    return b"{"  # garbage: treated as a dead worker
            elif self.proc.poll() is not None:
                return EOF

    def collect(self, reply):
        reply["stdout"], reply["stdout_total"] = self.out.drain()
        reply["stderr"], reply["stderr_total"] = self.err.drain()

    def died(self, reply):
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        reply["exit"] = self.proc.poll()
        return self.restart(reply, "died")

    def restart(self, reply, status):
        self.collect(reply)
        self.stop_worker()
        self.start_worker()
        reply["status"] = status
        return reply


def _ppid(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def list_files(max_bytes):
    """Everything under /app: ``[path, "dir"|"file"|"link", data]`` (file data base64)."""
    entries, size = [], 0
    for root, dirs, files in os.walk(APP):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(root, name)
            if os.path.islink(path):
                entries.append([path, "link", os.readlink(path)])
            elif os.path.isdir(path):
                entries.append([path, "dir", ""])
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    data = f.read(max_bytes - size + 1)
                size += len(data)
                if size > max_bytes:
                    return [], True
                entries.append([path, "file", base64.b64encode(data).decode()])
    return entries, False


def put_files(entries):
    for name in os.listdir(APP):
        path = os.path.join(APP, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    for path, kind, data in entries:
        if not path.startswith(APP + "/"):
            continue
        if kind == "dir":
            os.makedirs(path, exist_ok=True)
        elif kind == "link":
            os.symlink(data, path)
        else:
            with open(path, "wb") as f:
                f.write(base64.b64decode(data))


def serve():
    sup = Supervisor()
    send({"ready": True})
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        try:
            if op == "run":
                send(sup.run(req))
            elif op == "files":
                entries, too_big = list_files(int(req["max_bytes"]))
                send({"entries": entries, "too_big": too_big})
            elif op == "put_files":
                put_files(req["entries"])
                send({"ok": True})
            elif op == "restart":
                sup.stop_worker()
                sup.start_worker()
                send({"ok": True})
            else:
                send({"fail": "unknown op %r" % op})
        except Exception as e:  # noqa: BLE001 - reported to the host, which raises
            send({"fail": "%s: %s" % (type(e).__name__, e)})


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), int(sys.argv[3]))
    else:
        serve()
