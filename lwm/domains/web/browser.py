"""Chromium inside the bubblewrap sandbox, launched by Playwright.

Playwright starts a browser as a child process and speaks the Chrome DevTools Protocol
with it over two inherited descriptors (``--remote-debugging-pipe``: the browser reads
commands on fd 3 and writes replies on fd 4). :func:`prepare` writes, next to a fresh
:class:`~lwm.envs.sandbox.Sandbox`, a small launcher script that Playwright runs as its
``executable_path``; the launcher (``python -m lwm.domains.web.browser <sandbox spec> <args>``,
:func:`main`) starts the real Chromium *inside* that sandbox with fds 3 and 4 passed
through and waits for it. The browser therefore has no network (its own network
namespace), sees no host file, and dies with the sandbox; the host keeps only the
DevTools pipe, whose messages Playwright parses as JSON.

Chromium's own sandbox is off (``--no-sandbox``): it needs nested user namespaces, which
bubblewrap forbids inside (``--disable-userns``); bubblewrap is the sandbox.
"""

from __future__ import annotations

import os
import pickle
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from lwm.envs.sandbox import Sandbox, SandboxLimits

#: The Debian Chromium binary (``/usr/bin/chromium`` is a shell launcher around it).
CHROMIUM = "/usr/lib/chromium/chromium"
#: Where the browser's profile lives inside (a private tmpfs).
PROFILE_DIR = "/root/chromium-profile"
#: Host font configuration, shown read-only inside so that text is laid out with fonts.
FONTS_CONFIG = "/etc/fonts"
#: Flags added to Playwright's: no Chromium sandbox (bwrap is), no GPU, no crash reporter.
EXTRA_FLAGS = ("--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-zygote-sandbox",
               "--disable-crash-reporter", "--no-proxy-server", "--disable-breakpad")

#: Limits of a browser sandbox. Chromium reserves terabytes of virtual address space
#: (V8's pointer cage, partition allocator), so the per-process RLIMIT_AS is lifted to a
#: value it never reaches; the cgroup cap on the sandbox's total memory still holds.
BROWSER_LIMITS = SandboxLimits(
    max_processes=1024,  # processes *and threads* of the sandbox's uid
    max_memory_bytes=1 << 46,
    max_cpu_seconds=300,
    max_open_files=4096,
    disk_bytes=256 << 20,
    max_total_memory_bytes=2 << 30,
    lifetime_seconds=1800,
)


def prepare(limits: SandboxLimits = BROWSER_LIMITS) -> tuple[Sandbox, Path]:
    """A fresh sandbox for one browser and the launcher script to give Playwright.

    The sandbox's description is pickled into its own host directory (root-only), where
    the launcher reads it back; the caller keeps the :class:`Sandbox` and closes it.

    Returns:
        ``(sandbox, launcher path)``.

    Raises:
        SandboxError: the sandbox could not be prepared.
    """
    env = {"FONTCONFIG_PATH": "/opt/fonts", "FONTCONFIG_FILE": "/opt/fonts/fonts.conf",
           "XDG_CONFIG_HOME": "/root/.config", "XDG_CACHE_HOME": "/root/.cache"}
    binds = {FONTS_CONFIG: "/opt/fonts"} if os.path.isdir(FONTS_CONFIG) else {}
    sandbox = Sandbox(limits=limits, hostname="browser", env=env, ro_binds=binds)
    spec = sandbox.host_dir / "browser-sandbox.pickle"
    spec.write_bytes(pickle.dumps(sandbox))
    os.chmod(spec, 0o600)
    launcher = sandbox.host_dir / "chromium"
    # This interpreter, finding this copy of lwm (installed or not); no user site-packages.
    root = Path(__file__).resolve().parents[3]
    launcher.write_text(f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(root))} exec {shlex.quote(sys.executable)} -s '
                        f'-m lwm.domains.web.browser {shlex.quote(str(spec))} "$@"\n')
    os.chmod(launcher, 0o700)
    return sandbox, launcher


def inside_args(args: list[str]) -> list[str]:
    """Playwright's browser arguments, made valid inside the sandbox: its host profile
    directory becomes :data:`PROFILE_DIR`; our :data:`EXTRA_FLAGS` come first."""
    out = []
    for arg in args:
        if arg.startswith("--user-data-dir="):
            arg = f"--user-data-dir={PROFILE_DIR}"
        out.append(arg)
    return [*EXTRA_FLAGS, *out]


def kill_uid(uid: int) -> int:
    """Kill (SIGKILL) every host process running as ``uid`` (a sandbox's own uid: nothing
    else runs as it); returns how many were signalled."""
    killed = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uids = next(line for line in status.read_text().splitlines() if line.startswith("Uid:"))
            if int(uids.split()[1]) == uid:
                os.kill(int(status.parent.name), signal.SIGKILL)
                killed += 1
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return killed


def _become_subreaper() -> None:
    # bwrap's outer process exits as soon as the sandbox's init reports its exit code, before
    # that init has been reaped; as a child subreaper the launcher inherits and reaps it
    # (otherwise it lingers as a zombie under a PID 1 that may never reap).
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def _reap_orphans(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.02)


def main(argv: list[str]) -> int:
    """The launcher: ``<sandbox spec> <chromium args…>``; returns Chromium's exit code.

    Runs Chromium in the pickled sandbox with fds 3 and 4 (the DevTools pipe) passed
    through; a SIGTERM/SIGINT/SIGHUP kills the browser's whole sandbox. The launcher does
    not delete the sandbox's files: its owner (the environment) does, on close.
    """
    spec, args = Path(argv[0]), argv[1:]
    sandbox: Sandbox = pickle.loads(spec.read_bytes())
    _become_subreaper()
    proc = sandbox.spawn([CHROMIUM, *inside_args(args)], pass_fds=(3, 4), stdin=subprocess.DEVNULL)

    def stop(signum, frame):  # pragma: no cover - exercised through Playwright
        Sandbox._kill(proc)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    code = proc.wait()
    Sandbox._kill(proc)  # anything left in its process group
    _reap_orphans(2.0)
    sandbox.closed = True  # the environment removes the files; do not let __del__ do it
    return code if code >= 0 else 128 - code


if __name__ == "__main__":  # pragma: no cover - run by Playwright
    sys.exit(main(sys.argv[1:]))
