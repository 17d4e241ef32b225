import shutil
from pathlib import Path

import pytest

from lwm.envs.sandbox import Sandbox, bwrap_available
from lwm.schema import Provenance, Trajectory, Turn, rows_from_trajectory, write_rows

needs_sandbox = pytest.mark.skipif(
    not (shutil.which("bwrap") and shutil.which("tmux") and bwrap_available()),
    reason="bubblewrap/tmux with user namespaces are required (make system-deps)",
)


def pytest_collection_modifyitems(config, items):
    # The sandbox is required in CI: a machine without it must fail loudly there, not skip.
    import os

    if os.environ.get("CI") and not bwrap_available():
        raise pytest.UsageError("CI needs bubblewrap + tmux (make system-deps)")


def make_data(tmp_path, episodes=3, turns=4):
    prov = Provenance(kind="real", source="test")
    rows = []
    for e in range(episodes):
        t = Trajectory(id=f"terminal/ep{e}/run0", domain="terminal", system_prompt="SYS",
                       turns=[Turn(index=i, action=f'[{{"keystrokes": "echo {e}-{i}\\n"}}]',
                                   observation=f"root@sandbox:/app# echo {e}-{i}\n{e}-{i}\nroot@sandbox:/app#",
                                   provenance=prov) for i in range(1, turns + 1)])
        rows += rows_from_trajectory(t)
    data = tmp_path / "data"
    write_rows(data / "terminal_test.jsonl", rows)
    return data


def procs_of(uid: int) -> list[int]:
    """Live processes of a host uid (zombies are dead, only waiting for the host's init)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                status = (d / "status").read_text()
            except OSError:
                continue
            if status.split("Uid:")[1].split()[1] == str(uid) and "(zombie)" not in status:
                pids.append(int(d.name))
    return pids


def oracle(messages):
    """Answers with the real observation for even echo numbers, garbage otherwise."""
    action = messages[-1]["content"]
    tag = action.split("echo ")[1].split("\\n")[0]
    if int(tag.split("-")[1]) % 2 == 0:
        return f"<think>echo prints</think><predicted_observation>root@sandbox:/app# echo {tag}\n{tag}\nroot@sandbox:/app#</predicted_observation>"
    return "no idea"


#: A shell command that prints what a sandbox's processes show of themselves: every command
#: line and environment under /proc (pid 1, bwrap's, included) and `ps -ef` (full width).
SHOW_PROCESSES = ("for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do tr '\\0' ' ' < $f; echo; done; "
                  "ps -efww")


def host_paths_in(text: str, sandbox: Sandbox) -> list[str]:
    """The host paths that occur in ``text``: the sandbox's own directory on the host (or
    any sandbox's), ``$LWM_HOME``, ``/work`` and this checkout."""
    from lwm.paths import lwm_home

    paths = [str(sandbox.host_dir), "lwm-sandbox-", str(lwm_home()), "/work", str(Path(__file__).parents[1])]
    return [p for p in paths if p in text]
