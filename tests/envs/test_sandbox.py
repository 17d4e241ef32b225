"""The sandbox holds: no host files, variables or network; limits kill runaway processes."""

import os
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import SHOW_PROCESSES, host_paths_in, needs_sandbox, procs_of

from lwm.envs.sandbox import Sandbox, SandboxLimits
from lwm.errors import SandboxError

pytestmark = needs_sandbox


def test_runs_as_root_inside_with_private_dirs():
    with Sandbox(files={"/app/seed.txt": "seeded\n"}) as sb:
        r = sb.run(["bash", "-c", "id -u; hostname; pwd; cat seed.txt; echo hi > /root/f && cat /root/f"])
        assert r.returncode == 0, r.stderr
        assert r.stdout.split("\n")[:5] == ["0", "sandbox", "/app", "seeded", "hi"]
        assert sb.uid >= 2_000_000  # an unprivileged host uid outside


def test_writing_outside_the_sandbox_fails(tmp_path):
    target = tmp_path / "escape.txt"
    with Sandbox() as sb:
        r = sb.run(["bash", "-c", f"echo x > /usr/x; echo x > /etc/x; echo x > /run/lwm/x; echo x > {target}; echo done"])
    assert "done" in r.stdout
    assert r.stderr.count("Read-only file system") >= 3
    assert not target.exists() and not Path("/usr/x").exists() and not Path("/etc/x").exists()


def test_host_files_and_checkout_are_invisible(tmp_path):
    marker = tmp_path / "host-secret.txt"
    marker.write_text("secret")
    checkout = Path(__file__).resolve().parents[2]
    with Sandbox() as sb:
        r = sb.run(["bash", "-c", f"ls -A /root /tmp; test -e {marker} && echo LEAK1; test -e {checkout} && echo LEAK2;"
                                   " test -e /home && echo LEAK3; ls /"])
    assert "LEAK" not in r.stdout
    assert "host-secret" not in r.stdout
    assert set(r.stdout.split()) >= {"usr", "app", "root", "tmp"}
    assert "home" not in r.stdout.split() and "work" not in r.stdout.split()


def test_host_environment_variables_are_invisible(monkeypatch):
    monkeypatch.setenv("LWM_TEST_SECRET_KEY", "sk-should-not-leak")
    with Sandbox() as sb:
        r = sb.run(["env"])
    assert "sk-should-not-leak" not in r.stdout
    assert "LWM_TEST_SECRET_KEY" not in r.stdout
    assert "HOME=/root" in r.stdout


def test_processes_inside_show_no_host_path():
    with tempfile.TemporaryDirectory(prefix="lwm-home-") as tools:  # a read-only bind, like $LWM_HOME's tools
        os.chmod(tools, 0o755)
        with Sandbox(ro_binds={tools: "/opt/tools"}, files={"/app/a.txt": "a\n"}) as sb:
            r = sb.run(["bash", "-c", SHOW_PROCESSES])
    assert r.returncode == 0, r.stderr
    assert "HOME=/root" in r.stdout and " PID " in r.stdout  # the environments and ps were read
    assert host_paths_in(r.stdout, sb) == [] and tools not in r.stdout


def test_network_is_unreachable_even_host_loopback():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    server.settimeout(3)
    accepted = []

    def accept():
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    code = (
        "import socket\n"
        "s = socket.socket(); s.settimeout(2)\n"
        f"print(s.connect_ex(('127.0.0.1', {port})))\n"
        "print(open('/proc/net/dev').read().count(':'))\n"  # interfaces: only lo
    )
    with Sandbox() as sb:
        r = sb.run(["python3", "-c", code])
    thread.join()
    server.close()
    refused, interfaces = r.stdout.split()
    assert int(refused) != 0 and not accepted
    assert interfaces == "1"


def test_endless_loop_is_killed_by_cpu_limit():
    t0 = time.monotonic()
    with Sandbox(limits=SandboxLimits(max_cpu_seconds=2)) as sb:
        r = sb.run(["python3", "-c", "while True: pass"], timeout=30)
    assert r.returncode != 0
    assert time.monotonic() - t0 < 20


def test_wall_clock_limit_kills_the_whole_tree():
    with Sandbox() as sb:
        t0 = time.monotonic()
        r = sb.run(["bash", "-c", "sleep 100 & sleep 100"], timeout=1)
        assert r.returncode == -9 and time.monotonic() - t0 < 5
        time.sleep(0.2)
        assert procs_of(sb.uid) == []


def test_fork_bomb_is_contained_and_killed():
    limits = SandboxLimits(max_processes=64)
    with Sandbox(limits=limits) as sb:
        sb.run(["bash", "-c", "bomb() { bomb | bomb & }; bomb; sleep 3; echo survived"], timeout=6)
        uid = sb.uid
        assert len(procs_of(uid)) <= 64 + 2  # bounded while running (or already gone)
    time.sleep(0.3)
    assert procs_of(uid) == []
    # the host still forks fine
    assert os.system("true") == 0


def test_memory_limit():
    with Sandbox(limits=SandboxLimits(max_memory_bytes=512 << 20)) as sb:
        r = sb.run(["python3", "-c", "b = bytearray(2 << 30); print('allocated')"])
    assert "allocated" not in r.stdout and "MemoryError" in r.stderr


def test_file_size_limit():
    with Sandbox(limits=SandboxLimits(max_file_bytes=1 << 20)) as sb:
        r = sb.run(["bash", "-c", "head -c 5000000 /dev/zero > /tmp/big; ls -l /tmp/big | awk '{print $5}'"])
    assert int(r.stdout.split()[-1]) <= 1 << 20


def test_closed_sandbox_refuses_and_cleans_up():
    sb = Sandbox()
    host_dir = sb.host_dir
    sb.close()
    sb.close()  # twice is fine
    assert not host_dir.exists()
    with pytest.raises(SandboxError):
        sb.run(["true"])


@pytest.mark.parametrize("path", ["/etc/passwd", "/tmp/../../../../etc/x", "/app/./a", "/app//a", "app/a"])
def test_seed_files_must_stay_inside(path):
    before = set(Path(tempfile.gettempdir()).glob("lwm-sandbox-*"))
    with pytest.raises(SandboxError, match="must be a plain absolute path"):
        Sandbox(files={path: "x"})
    assert set(Path(tempfile.gettempdir()).glob("lwm-sandbox-*")) == before  # nothing left behind


def test_dev_is_bounded_and_nested_namespaces_are_refused():
    with Sandbox(limits=SandboxLimits(disk_bytes=8 << 20)) as sb:
        r = sb.run(["bash", "-c", "head -c 20000000 /dev/zero > /dev/shm/big; du -b /dev/shm/big | cut -f1;"
                                  " echo x > /dev/newfile; echo ok > /dev/null && echo null-ok;"
                                  " unshare -U true 2>/dev/null || echo userns-refused"])
    size, null_ok, userns = r.stdout.split()
    assert int(size) <= 8 << 20 and null_ok == "null-ok" and userns == "userns-refused"
    assert "/dev/newfile: Read-only file system" in r.stderr


def test_output_flood_is_bounded():
    with Sandbox(limits=SandboxLimits(max_file_bytes=4 << 20)) as sb:
        r = sb.run(["bash", "-c", "yes flood"], timeout=20, max_output_bytes=1000)
    assert r.returncode != 0 and len(r.stdout) == 1000  # killed at the file-size limit (SIGXFSZ)


def test_hostile_deletion_leaves_the_host_unchanged(tmp_path):
    canary = tmp_path / "lwm-canary.txt"
    canary.write_text("still here")
    before = sorted(p.name for p in Path("/usr/bin").iterdir())
    script = (f"rm -f {canary} /usr/bin/env /etc/hostname; find / -name 'lwm-canary*' -delete 2>/dev/null;"
              " rm -rf /root/* /app /tmp/* 2>/dev/null; chmod 000 /usr/bin/ls 2>/dev/null; echo finished")
    with Sandbox() as sb:
        assert "finished" in sb.run(["bash", "-c", script], timeout=60).stdout
    assert canary.read_text() == "still here"
    assert sorted(p.name for p in Path("/usr/bin").iterdir()) == before
    assert os.access("/usr/bin/ls", os.X_OK)


@pytest.mark.skipif(not os.access("/sys/fs/cgroup/memory", os.W_OK), reason="no writable cgroup-v1 memory controller")
def test_total_memory_is_capped_by_a_cgroup():
    limits = SandboxLimits(max_total_memory_bytes=300 << 20, max_memory_bytes=1 << 30)
    hog = "python3 -c 'b = bytearray(200 << 20); import time; time.sleep(3)'"
    with Sandbox(limits=limits) as sb:
        group = sb.cgroup
        r = sb.run(["bash", "-c", f"{hog} & {hog} & wait; echo done"], timeout=30)
        assert group is not None and (group / "memory.max_usage_in_bytes").exists()
        assert int((group / "memory.max_usage_in_bytes").read_text()) <= 300 << 20
    assert r.stdout == "done\n" and r.stderr.count("Killed") == 1  # one of the two hogs was OOM-killed
    assert not group.exists()


@pytest.mark.parametrize("files,message", [
    ({"/app/a": 123}, "must be text"),
    ({"/app/big": "x", "/app/big/z": "y"}, "directory of another"),
    ({"/app/" + "n" * 300: "x"}, "cannot create the seed files"),
    ({"/app/huge": "x" * (2 << 20)}, "exceed the sandbox's disk"),
])
def test_bad_seed_files_are_refused_and_leave_nothing(files, message):
    before = set(Path(tempfile.gettempdir()).glob("lwm-sandbox-*"))
    with pytest.raises(SandboxError, match=message):
        Sandbox(files=files, limits=SandboxLimits(disk_bytes=1 << 20))
    assert set(Path(tempfile.gettempdir()).glob("lwm-sandbox-*")) <= before
