"""The in-sandbox half of the swe environment (runs under the sandbox's python3).

It executes the coding agent's tools (read, edit, write, bash, grep, glob) on the
repository under /app and answers the host on stdout, one JSON line per request (read
from stdin, one JSON line each):

``{"op": "tool", "name": str, "arguments": {…}}`` -> ``{"output": str, "error": bool}``
``{"op": "setup", "commands": [str, …], "timeout": s}`` -> ``{"ok": bool, "output": str}``
``{"op": "overview"}`` -> ``{"output": str}`` (the episode's first observation)
``{"op": "snapshot", "max_bytes": n}`` -> ``{"tar": base64 gzip tar of /app, "cwd": str}``
``{"op": "restore", "tar": …, "cwd": str}`` -> ``{"ok": true}``

The host has already checked the arguments (``lwm.domains.swe.validate``); limits come
from /run/lwm/config.json. Result texts follow the envelopes documented in
``lwm.domains.swe.spec``. Kept to the standard library of Python 3.11.
"""

import base64
import contextlib
import fcntl
import fnmatch
import io
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import time

ROOT = "/app"
REPO = "/app/repo"
with open("/run/lwm/config.json") as _f:
    CONFIG = json.load(_f)
STATE = {"cwd": REPO}


class ToolError(Exception):
    """A tool's error: its message becomes ``<tool_use_error>message</tool_use_error>``."""


# -- paths ----------------------------------------------------------------------------
def resolve(path):
    """Absolute, normalized path of ``path`` (relative to the shell's directory); must
    stay under /app once symbolic links are followed."""
    full = os.path.normpath(os.path.join(STATE["cwd"], path))
    if full.startswith("//"):
        full = "/" + full.lstrip("/")
    real = os.path.realpath(full)
    if not (real == ROOT or real.startswith(ROOT + "/")):
        raise ToolError(f"Path {full} is outside the allowed directory /app.")
    return full


def is_binary(path):
    with open(path, "rb") as f:
        return b"\0" in f.read(8192)


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "surrogateescape")


def write_text(path, text):
    with open(path, "wb") as f:
        f.write(text.encode("utf-8", "surrogateescape"))


def show(text):
    # Undecodable bytes are shown as U+FFFD, as a UTF-8 reader would.
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def split_lines(text):
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def numbered(lines, first):
    cut = CONFIG["read_max_line_chars"]
    return "\n".join(f"{first + i:6d}\t{show(line[:cut])}" for i, line in enumerate(lines))


def order_by_mtime(paths):
    """Most recently modified first, then by path (ripgrep's --sortr=modified order)."""
    def key(p):
        try:
            return (-os.stat(p).st_mtime_ns, p)
        except OSError:
            return (0, p)
    return sorted(paths, key=key)


def existing_file(path):
    if not os.path.lexists(path):
        raise ToolError("File does not exist.")
    if os.path.isdir(path):
        raise ToolError(f"Path is a directory, not a file: {path}")
    if not os.path.isfile(path):  # a FIFO or device would block the tool
        raise ToolError(f"Not a regular file: {path}")
    return path


# -- tools ----------------------------------------------------------------------------
def tool_read(file_path, offset=1, limit=None):
    path = existing_file(resolve(file_path))
    if is_binary(path):
        raise ToolError(f"This tool cannot read binary files: {path}")
    lines = split_lines(read_text(path))
    if not lines:
        return "<system-reminder>Warning: the file exists but its contents are empty.</system-reminder>"
    if offset > len(lines):
        return ("<system-reminder>Warning: the file exists but is shorter than the provided offset "
                f"({offset}). The file has {len(lines)} lines.</system-reminder>")
    limit = limit or CONFIG["read_default_limit"]
    out = numbered(lines[offset - 1:offset - 1 + limit], offset)
    if len(out) > CONFIG["read_max_chars"]:
        raise ToolError(f"File content ({len(out)} characters) exceeds the maximum of "
                        f"{CONFIG['read_max_chars']} characters. Read a part with offset and limit, "
                        "or search it with grep.")
    return out


def tool_edit(file_path, old_string, new_string, replace_all=False):
    path = resolve(file_path)
    if old_string == new_string:
        raise ToolError("No changes to make: old_string and new_string are exactly the same.")
    if old_string == "" and not os.path.lexists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_text(path, new_string)
        return f"File created successfully at: {path}"
    existing_file(path)
    content = read_text(path)
    if old_string == "":
        if content:
            raise ToolError("Cannot create new file - file already exists.")
        write_text(path, new_string)
        return f"The file {path} has been updated."
    count = content.count(old_string)
    if count == 0:
        raise ToolError(f"String to replace not found in file.\nString: {old_string}")
    if count > 1 and not replace_all:
        raise ToolError(f"Found {count} matches of the string to replace, but replace_all is false. "
                        "To replace all occurrences, set replace_all to true. To replace only one "
                        "occurrence, please provide more context to uniquely identify the instance."
                        f"\nString: {old_string}")
    if replace_all:
        write_text(path, content.replace(old_string, new_string))
        return (f"The file {path} has been updated. All occurrences of '{old_string}' were "
                f"replaced with '{new_string}'.")
    at = content.index(old_string)
    updated = content[:at] + new_string + content[at + len(old_string):]
    write_text(path, updated)
    start = content.count("\n", 0, at)
    lines = split_lines(updated)
    lo, hi = max(0, start - 4), start + new_string.count("\n") + 5
    return (f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet of the "
            f"edited file:\n{numbered(lines[lo:hi], lo + 1)}")


def tool_write(file_path, content):
    path = resolve(file_path)
    if os.path.isdir(path):
        raise ToolError(f"Path is a directory, not a file: {path}")
    existed = os.path.lexists(path)
    if existed and not os.path.isfile(path):
        raise ToolError(f"Not a regular file: {path}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_text(path, content)
    if not existed:
        return f"File created successfully at: {path}"
    return f"The file {path} has been overwritten ({len(split_lines(content))} lines)."


def tool_bash(command, timeout=None, description=None):
    timeout_ms = min(timeout or CONFIG["bash_default_timeout_ms"], CONFIG["bash_max_timeout_ms"])
    cwd = STATE["cwd"] if os.path.isdir(STATE["cwd"]) else ROOT
    # The shell reports its final directory through a pipe so that `cd` carries over.
    cwd_r, cwd_w = os.pipe()
    script = f"trap 'pwd -P >&{cwd_w} 2>/dev/null' EXIT; {command}"
    proc = subprocess.Popen(["/bin/bash", "-c", script], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            pass_fds=(cwd_w,))
    os.close(cwd_w)
    half = CONFIG["bash_max_output_bytes"] // 2
    head, tail, total, newlines = bytearray(), bytearray(), 0, 0
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout_ms / 1000
    timed_out, exited_at = False, None
    while True:
        now = time.monotonic()
        if now >= deadline:
            timed_out = proc.poll() is None
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        # Background jobs may hold the pipe open: stop shortly after the shell exits.
        wait = deadline - now if exited_at is None else exited_at + 0.2 - now
        if wait <= 0:
            break
        if not select.select([fd], [], [], min(wait, 0.05))[0]:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        total += len(chunk)
        newlines += chunk.count(b"\n")
        if len(head) < half:
            head += chunk[:half - len(head)]
        tail = (tail + chunk)[-half:]
    # Nothing the call started outlives it (background jobs, a fork bomb's copies).
    # The leader is reaped first: its zombie would keep the group alive.
    killpg(proc.pid)
    code = proc.wait()
    for _ in range(20):
        if not killpg(proc.pid):
            break
        time.sleep(0.005)
    kill_strays()
    proc.stdout.close()
    fcntl.fcntl(cwd_r, fcntl.F_SETFL, os.O_NONBLOCK)
    try:
        new_cwd = os.read(cwd_r, 4096).decode("utf-8", "replace").strip()
    except BlockingIOError:
        new_cwd = ""
    os.close(cwd_r)
    if total <= 2 * half:
        data = bytes(head) + bytes(tail[len(tail) - (total - len(head)):]) if total > len(head) else bytes(head)
        text = data.decode("utf-8", "replace")
    else:
        h = bytes(head[:head.rfind(b"\n") + 1] or head)
        t = bytes(tail[tail.find(b"\n") + 1:] if b"\n" in tail else tail)
        cut = newlines - h.count(b"\n") - t.count(b"\n")
        text = (h.decode("utf-8", "replace") + f"\n... [{cut} lines truncated] ...\n\n"
                + t.decode("utf-8", "replace"))
    text = text.rstrip("\n")
    note = ""
    if new_cwd:
        if new_cwd == ROOT or new_cwd.startswith(ROOT + "/"):
            STATE["cwd"] = new_cwd
        else:
            STATE["cwd"] = REPO
            note = f"Shell cwd was reset to {REPO}"
    if timed_out:
        secs = timeout_ms / 1000
        text = "Command timed out after {:g} second{}\n{}".format(secs, "" if secs == 1 else "s", text)
    elif code != 0:
        text = f"Exit code {code if code >= 0 else 128 - code}\n{text}"
    text = text.rstrip("\n") or "(No content)"
    if note:
        text += "\n" + note
    return text, timed_out or code != 0


def kill_strays():
    """SIGKILL every process of the sandbox but this controller and its ancestors: what a
    call started outside its process group too (``setsid``, a double fork). A few passes,
    for processes forked while the first one ran."""
    keep, pid = set(), os.getpid()
    while pid > 0 and pid not in keep:
        keep.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    for _ in range(5):
        others = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) not in keep]
        if not others:
            return
        for other in others:
            try:
                os.kill(other, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def killpg(pgid):
    """SIGKILL a process group; False when it no longer exists."""
    try:
        os.killpg(pgid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def expand_braces(pattern):
    """``*.{py,md}`` -> ``['*.py', '*.md']`` (one level, as ripgrep's globs allow)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    out = []
    for alt in m.group(1).split(","):
        out += expand_braces(pattern[:m.start()] + alt + pattern[m.end():])
    return out


class Budget:
    """What one search may spend: directory entries visited and seconds (it must answer
    well before the host gives up on the controller). Exceeding either is the tool's error."""

    def __init__(self):
        self.entries = CONFIG["walk_max_entries"]
        self.deadline = time.monotonic() + CONFIG["walk_max_seconds"]

    def spend(self, entries):
        self.entries -= entries
        if self.entries < 0:
            raise ToolError(f"Search stopped after visiting {CONFIG['walk_max_entries']} files and directories. "
                            "Use a more specific path or pattern.")
        if time.monotonic() > self.deadline:
            self.stop()

    def stop(self, *_):
        raise ToolError(f"Search stopped after {CONFIG['walk_max_seconds']:g} seconds. "
                        "Use a more specific path or pattern.")

    @contextlib.contextmanager
    def alarm(self):
        """Stop at the deadline inside one match too: a catastrophic pattern (``(a+)+$``)
        never comes back to :meth:`spend` (the controller answers from the main thread)."""
        previous = signal.signal(signal.SIGALRM, self.stop)
        signal.setitimer(signal.ITIMER_REAL, max(self.deadline - time.monotonic(), 0.001))
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def list_dir(d, budget):
    """Names in directory ``d``, sorted ([] if unreadable); each counts against ``budget``."""
    names = []
    try:
        with os.scandir(d) as entries:
            for entry in entries:
                budget.spend(1)
                names.append(entry.name)
    except OSError:
        return []
    return sorted(names)


def is_real_dir(p):
    """A directory that is not a symbolic link: searches never follow links (as ripgrep),
    so none leads out of /app or round a loop."""
    return os.path.isdir(p) and not os.path.islink(p)


def inside_app(p):
    real = os.path.realpath(p)
    return real == ROOT or real.startswith(ROOT + "/")


def search_files(root, glob, budget):
    """Files under ``root`` that grep looks at: not hidden, not binary, optionally
    matching ``glob`` (by name, or by relative path when it has a ``/``)."""
    pats = expand_braces(glob) if glob else []
    if os.path.isfile(root):
        candidates = [root]
    else:
        candidates, pending = [], [root]
        while pending:
            d = pending.pop()
            names = [n for n in list_dir(d, budget) if not n.startswith(".")]
            paths = [os.path.join(d, n) for n in names]
            candidates += [p for p in paths if not os.path.isdir(p)]
            pending += reversed([p for p in paths if is_real_dir(p)])
    out = []
    for p in candidates:
        rel = os.path.relpath(p, root) if p != root else os.path.basename(p)
        if pats and not any(fnmatch.fnmatch(rel if "/" in g else os.path.basename(p), g.lstrip("/"))
                            for g in pats):
            continue
        if not inside_app(p):  # a symbolic link out of /app is not followed
            continue
        try:
            if os.path.isfile(p) and os.path.getsize(p) <= 8 << 20 and not is_binary(p):
                out.append(p)
        except OSError:
            pass
    return out


def tool_grep(pattern, path=None, glob=None, output_mode="files_with_matches", head_limit=None, **flags):
    root = resolve(path or STATE["cwd"])
    if not os.path.exists(root):
        raise ToolError(f"Path does not exist: {root}")
    try:
        rx = re.compile(pattern, re.IGNORECASE if flags.get("-i") else 0)
    except re.error as e:
        raise ToolError(f"Invalid regular expression: {e}") from None
    show_n, ctx = flags.get("-n", True), flags.get("-C", 0) if output_mode == "content" else 0
    hits = []  # (path, [(index, line)], lines)
    budget = Budget()
    with budget.alarm():
        for p in order_by_mtime(search_files(root, glob, budget)):
            budget.spend(0)  # reading and matching count against its time
            lines = split_lines(show(read_text(p)))
            matched = [i for i, line in enumerate(lines) if rx.search(line)]
            if matched:
                hits.append((p, matched, lines))
    if output_mode == "files_with_matches":
        paths = [p for p, _, _ in hits][:head_limit]
        if not paths:
            return "No files found"
        return f"Found {len(paths)} file{'' if len(paths) == 1 else 's'}\n" + "\n".join(paths)
    if output_mode == "count":
        out = [f"{p}:{len(m)}" for p, m, _ in hits]
    else:
        out = []
        for p, matched, lines in hits:
            shown, last = set(matched), None
            wanted = sorted({j for i in matched for j in range(max(0, i - ctx), min(len(lines), i + ctx + 1))})
            for j in wanted:
                if ctx and last is not None and j != last + 1:
                    out.append("--")
                if ctx and last is None and out:
                    out.append("--")
                sep = ":" if j in shown else "-"
                number = f"{j + 1}{sep}" if show_n else ""
                out.append(f"{p}{sep}{number}{lines[j]}")
                last = j
    out = out[:head_limit]
    if not out:
        return "No matches found"
    text = "\n".join(out)
    if len(text) > CONFIG["grep_max_chars"]:
        text = text[:CONFIG["grep_max_chars"]].rsplit("\n", 1)[0] + "\n... [output truncated] ..."
    return text


MAGIC = re.compile(r"[*?[]")


def tool_glob(pattern, path=None):
    """Files matching ``pattern`` (``*``, ``?``, ``[…]`` within a name, ``**`` across
    directories; hidden names only where the pattern's part starts with a dot) under
    ``path``, never outside /app: the pattern's leading parts without wildcards (``/``
    and ``..`` included) move the base of the search, which must stay inside."""
    base = resolve(path or STATE["cwd"])
    if not os.path.isdir(base):
        raise ToolError(f"Directory does not exist: {base}")
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    literal = 0
    while literal < len(parts) and not MAGIC.search(parts[literal]):
        literal += 1
    if ".." in parts[literal:]:
        raise ToolError(f"'..' may only come before the first wildcard of a pattern: {pattern}")
    base = resolve(os.path.join("/" if pattern.startswith("/") else base, *parts[:literal]))
    found = glob_files(base, parts[literal:], Budget()) if literal < len(parts) else [base]
    found = order_by_mtime(sorted({p for p in found if os.path.isfile(p) and inside_app(p)}))
    if not found:
        return "No files found"
    limit = CONFIG["list_max_results"]
    text = "\n".join(found[:limit])
    if len(found) > limit:
        text += "\n(Results are truncated. Use a more specific path or pattern.)"
    return text


def glob_files(base, parts, budget):
    """Paths under directory ``base`` that match the pattern ``parts`` (directories
    reached through a symbolic link are not entered)."""
    found, pending = [], [(base, 0)]
    while pending:
        d, i = pending.pop()
        part, last = parts[i], i == len(parts) - 1
        if part == "**":  # no directory, or one more (not hidden) and ** again
            if not last:
                pending.append((d, i + 1))
            for name in list_dir(d, budget):
                if name.startswith("."):
                    continue
                p = os.path.join(d, name)
                if is_real_dir(p):
                    pending.append((p, i))
                elif last:
                    found.append(p)
            continue
        for name in list_dir(d, budget) if MAGIC.search(part) else [part]:
            if (name.startswith(".") and not part.startswith(".")) or not fnmatch.fnmatchcase(name, part):
                continue
            p = os.path.join(d, name)
            if last:
                found.append(p)
            elif is_real_dir(p):
                pending.append((p, i + 1))
    return found


TOOLS = {"read": tool_read, "edit": tool_edit, "write": tool_write, "bash": tool_bash,
         "grep": tool_grep, "glob": tool_glob}


def run_tool(name, arguments):
    try:
        result = TOOLS[name](**arguments)
    except ToolError as e:
        return {"output": f"<tool_use_error>{e}</tool_use_error>", "error": True}
    except OSError as e:  # the filesystem's own refusal (read-only, full disk, …)
        return {"output": f"<tool_use_error>{type(e).__name__}: {e.strerror or e}</tool_use_error>",
                "error": True}
    if isinstance(result, tuple):
        return {"output": result[0], "error": result[1]}
    return {"output": result, "error": False}


# -- episode management -----------------------------------------------------------------
def setup(commands, timeout):
    cwd = REPO if os.path.isdir(REPO) else ROOT
    r = subprocess.run(["/bin/bash", "-ec", "\n".join(commands)], cwd=cwd, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, check=False)
    return {"ok": r.returncode == 0, "output": r.stdout.decode("utf-8", "replace")[-4000:]}


def overview():
    cwd = STATE["cwd"]
    lines = [f"Working directory: {cwd}"]
    git = subprocess.run(["git", "-C", cwd, "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True,
                         text=True, check=False)
    if git.returncode == 0:
        n = subprocess.run(["git", "-C", cwd, "rev-list", "--count", "HEAD"], capture_output=True, text=True,
                           check=False)
        lines.append("Git repository: yes (branch {}, {} commit{})".format(
            git.stdout.strip(), n.stdout.strip(), "" if n.stdout.strip() == "1" else "s"))
        files = subprocess.run(["git", "-C", cwd, "ls-files"], capture_output=True, text=True,
                               check=False).stdout.split()
    else:
        lines.append("Git repository: no")
        files = sorted(os.path.relpath(os.path.join(d, f), cwd) for d, _, fs in os.walk(cwd) for f in fs)
    lines.append(f"Files ({len(files)}):")
    lines += ["  " + f for f in files[:200]]
    if len(files) > 200:
        lines.append(f"  ... ({len(files) - 200} more)")
    return {"output": "\n".join(lines)}


def snapshot(max_bytes):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(ROOT, arcname="app")
    if buf.tell() > max_bytes:
        return {"error": f"snapshot of /app is {buf.tell()} bytes (gzip), above the {max_bytes}-byte bound"}
    return {"tar": base64.b64encode(buf.getvalue()).decode(), "cwd": STATE["cwd"]}


def restore(data, cwd):
    # Read the whole archive before deleting anything: a bad snapshot changes nothing.
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(data)), mode="r:gz") as tar:
        tar.getmembers()
    os.chdir("/")
    for name in os.listdir(ROOT):
        p = os.path.join(ROOT, name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(data)), mode="r:gz") as tar:
        kwargs = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
        tar.extractall("/", **kwargs)
    STATE["cwd"] = cwd
    return {"ok": True}


def handle(req):
    op = req.get("op")
    if op == "tool":
        return run_tool(req["name"], req["arguments"])
    if op == "setup":
        return setup(req["commands"], req.get("timeout", 30))
    if op == "overview":
        return overview()
    if op == "snapshot":
        return snapshot(req["max_bytes"])
    if op == "restore":
        return restore(req["tar"], req["cwd"])
    return {"error": f"unknown op {op!r}"}


def main():
    os.makedirs(REPO, exist_ok=True)
    reply({"ready": True})
    for line in sys.stdin:
        try:
            answer = handle(json.loads(line))
        except Exception as e:  # noqa: BLE001 - never die: the host turns this into a SandboxError
            answer = {"error": f"{type(e).__name__}: {e}"}
        reply(answer)


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
