"""The in-sandbox half of the terminal environment (runs under the sandbox's python3).

It starts the tmux server, then answers requests from the host on stdin, one JSON line
each: ``{"commands": [[tmux args…], …], "timeout": seconds}``. It runs the tmux client
commands in order (stopping at the first failure) and answers one JSON line:
``[[returncode, stdout, stderr], …]``. A request ``{"shell": command}`` runs a
verifier's probe with bash beside the agent's shell and answers ``[[0, stdout, exit]]``;
``{"snapshot": true}`` answers the private directories as a base64 gzipped tar and
``{"restore": tar}`` puts them back. The host never runs a tmux client itself: a
client does what its server tells it, and the server belongs to the agent.

Kept to the standard library of Python 3.8+ (the sandbox's system Python).
"""

import base64
import json
import os
import subprocess
import sys
import time

SOCKET = "/run/tmux/tmux.sock"


def main():
    subprocess.Popen(["tmux", "-D", "-S", SOCKET, "-f", "/run/lwm/tmux.conf"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(SOCKET) and time.monotonic() < deadline:
        time.sleep(0.01)
    ready = os.path.exists(SOCKET)
    reply([[0, "", ""] if ready else [1, "", "no tmux socket"]])
    for line in sys.stdin:
        request = json.loads(line)
        if "shell" in request:  # a verifier's probe: a command beside the agent's shell
            try:
                r = subprocess.run(["bash", "-c", request["shell"]], stdin=subprocess.DEVNULL, cwd="/app",
                                   capture_output=True, timeout=request.get("timeout", 10))
                reply([[0, r.stdout.decode("utf-8", "replace")[:65536], str(r.returncode)]])
            except subprocess.TimeoutExpired:
                reply([[0, "", "timeout"]])
            continue
        if "snapshot" in request:  # the files of the private directories, as a gzipped tar
            r = subprocess.run(["tar", "-czf", "-", "-C", "/", "app", "root", "tmp"], capture_output=True)
            reply([[r.returncode, base64.b64encode(r.stdout).decode(), r.stderr.decode("utf-8", "replace")[-300:]]])
            continue
        if "restore" in request:
            data = base64.b64decode(request["restore"])
            r = subprocess.run(["tar", "-tzf", "-"], input=data, capture_output=True)  # whole and readable?
            if r.returncode == 0:
                subprocess.run(["find", "/app", "/root", "/tmp", "-mindepth", "1", "-delete"], capture_output=True)
                r = subprocess.run(["tar", "-xzf", "-", "-C", "/"], input=data, capture_output=True)
            reply([[r.returncode, "", r.stderr.decode("utf-8", "replace")[-300:]]])
            continue
        results = []
        for args in request["commands"]:
            try:
                r = subprocess.run(["tmux", "-S", SOCKET] + args, stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=request.get("timeout", 10))
                results.append([r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")])
            except subprocess.TimeoutExpired:
                results.append([124, "", "timed out"])
            if results[-1][0] != 0:
                break
        reply(results)


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
