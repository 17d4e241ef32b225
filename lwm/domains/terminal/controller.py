"""The in-sandbox half of the terminal environment (runs under the sandbox's python3).

It starts the tmux server, then answers requests from the host on stdin, one JSON line
each: ``{"commands": [[tmux args…], …], "timeout": seconds}``. It runs the tmux client
commands in order (stopping at the first failure) and answers one JSON line:
``[[returncode, stdout, stderr], …]``. A request ``{"shell": command}`` runs a
verifier's probe with bash beside the agent's shell and answers ``[[0, stdout, exit]]``;
``{"snapshot": true}`` answers the private directories as a base64 gzipped tar and
``{"restore": tar}`` puts them back. The host never runs a tmux client itself: a
client does what its server tells it, and the server belongs to the agent.

The tmux server (so the agent's shell and all it starts) may have fewer processes than
this controller: under a fork bomb the shell prints its own ``fork: retry`` errors, as on
a real terminal, while the controller still forks its tmux clients and reads the screen.
A process that cannot start anyway is an error answer, never the controller's end.

Kept to the standard library of Python 3.8+ (the sandbox's system Python).
"""

import base64
import json
import os
import resource
import subprocess
import sys
import time

SOCKET = "/run/tmux/tmux.sock"
#: Processes kept free for this controller (its tmux clients, probes, tar): the tmux server,
#: and so the agent's shell and everything it starts, may have this many fewer.
RESERVED_PROCESSES = 16


def agent_process_limit():
    """Cap the process count (RLIMIT_NPROC, soft and hard: the agent cannot raise it back)
    of what the agent runs below this controller's own, so that a fork bomb leaves the
    controller room to fork its tmux clients and the screen stays readable."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY:
        cap = max(1, soft - min(RESERVED_PROCESSES, soft // 4))
        resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))


def run(argv, **kwargs):
    """subprocess.run, retried while fork fails for want of processes (the agent's are at
    their cap, and this controller's own helpers may hold the reserve for a moment) for up
    to the call's ``timeout`` (10 s without one); then the OSError stands."""
    deadline = time.monotonic() + (kwargs.get("timeout") or 10)
    while True:
        try:
            return subprocess.run(argv, **kwargs)
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def main():
    subprocess.Popen(["tmux", "-D", "-S", SOCKET, "-f", "/run/lwm/tmux.conf"], preexec_fn=agent_process_limit,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(SOCKET) and time.monotonic() < deadline:
        time.sleep(0.01)
    ready = os.path.exists(SOCKET)
    reply([[0, "", ""] if ready else [1, "", "no tmux socket"]])
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply(handle(request))
        except OSError as e:  # a process could not start: an answer, never the controller's end
            reply([[126, "", "cannot start a process: %s" % e]])


def handle(request):
    if "shell" in request:  # a verifier's probe: a command beside the agent's shell
        try:
            r = run(["bash", "-c", request["shell"]], stdin=subprocess.DEVNULL, cwd="/app",
                    capture_output=True, timeout=request.get("timeout", 10))
            return [[0, r.stdout.decode("utf-8", "replace")[:65536], str(r.returncode)]]
        except subprocess.TimeoutExpired:
            return [[0, "", "timeout"]]
    if "snapshot" in request:  # the files of the private directories, as a gzipped tar
        r = run(["tar", "-czf", "-", "-C", "/", "app", "root", "tmp"], capture_output=True)
        return [[r.returncode, base64.b64encode(r.stdout).decode(), r.stderr.decode("utf-8", "replace")[-300:]]]
    if "restore" in request:
        data = base64.b64decode(request["restore"])
        r = run(["tar", "-tzf", "-"], input=data, capture_output=True)  # whole and readable?
        if r.returncode == 0:
            run(["find", "/app", "/root", "/tmp", "-mindepth", "1", "-delete"], capture_output=True)
            r = run(["tar", "-xzf", "-", "-C", "/"], input=data, capture_output=True)
        return [[r.returncode, "", r.stderr.decode("utf-8", "replace")[-300:]]]
    results = []
    for args in request["commands"]:
        try:
            r = run(["tmux", "-S", SOCKET] + args, stdin=subprocess.DEVNULL, capture_output=True,
                    timeout=request.get("timeout", 10))
            results.append([r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")])
        except subprocess.TimeoutExpired:
            results.append([124, "", "timed out"])
        if results[-1][0] != 0:
            break
    return results


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
