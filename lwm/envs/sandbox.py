"""A bubblewrap jail for everything an agent issues.

What runs inside sees only what an episode needs: the system directories read-only
(``/usr`` and its ``/bin``, ``/lib`` links, a minimal ``/etc``), a private writable home
(``/root``), work directory (``/app``) and ``/tmp`` (size-limited tmpfs, gone on close), a
clean environment (no host variable), no network (a private network namespace: not even
the host's loopback services), a hostname of its own, and limits on processes, memory,
CPU time, file size and open files. It runs as an unprivileged host user (a fresh uid per
sandbox, shown as ``root`` inside a user namespace), so even an escape holds no rights on
the host. The whole process tree dies with the sandbox: closing it, the parent dying or
the lifetime running out kills every process inside.

Needs ``bwrap`` (Debian package ``bubblewrap``) and unprivileged user namespaces.
"""

from __future__ import annotations

import json
import os
import posixpath
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lwm.envs.base import seed_file_problem
from lwm.errors import SandboxError

#: Read-only system paths bound into every sandbox (those that exist on the host).
SYSTEM_PATHS = ("/usr", "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf",
                "/etc/ld.so.conf.d", "/etc/localtime", "/etc/inputrc")
HOME, WORKDIR = "/root", "/app"
_UID_BASE, _UID_SPAN = 2_000_000, 1_000_000  # far above any real account


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandbox. Per-process limits are POSIX rlimits.

    Attributes:
        max_processes: processes and threads of the sandbox's own uid (RLIMIT_NPROC).
        max_memory_bytes: address space of each process (RLIMIT_AS).
        max_cpu_seconds: CPU time of each process (RLIMIT_CPU); an endless loop dies.
        max_file_bytes: size of any file written (RLIMIT_FSIZE).
        max_open_files: open descriptors per process (RLIMIT_NOFILE).
        disk_bytes: size of each private tmpfs (``/root``, ``/app``, ``/tmp``).
        max_total_memory_bytes: memory of all processes together, enforced through a
            cgroup where the host lets ``lwm`` create one (cgroup v1 memory controller,
            writable by root); elsewhere only the per-process limit holds.
        lifetime_seconds: wall-clock life of the sandbox; everything inside is killed then.
        command_timeout_seconds: default wall-clock limit of one :meth:`Sandbox.run`.
    """

    max_processes: int = 128
    max_memory_bytes: int = 2 << 30
    max_cpu_seconds: int = 60
    max_file_bytes: int = 64 << 20
    max_open_files: int = 256
    disk_bytes: int = 128 << 20
    max_total_memory_bytes: int = 4 << 30
    lifetime_seconds: int = 900
    command_timeout_seconds: float = 30.0


DEFAULT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": HOME,
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "xterm-256color",
}


def bwrap_available() -> bool:
    """Whether ``bwrap`` is installed and can create namespaces here."""
    if not shutil.which("bwrap"):
        return False
    try:
        with Sandbox() as sb:
            return sb.run(["/bin/true"], timeout=10).returncode == 0
    except (SandboxError, OSError):
        return False


_CGROUP_V1_MEMORY = Path("/sys/fs/cgroup/memory")


def _memory_cgroup(uid: int, limit: int) -> Path | None:
    """A cgroup (v1 memory controller) capping the sandbox's total memory, or None where
    the host does not let us make one."""
    group = _CGROUP_V1_MEMORY / f"lwm-{uid}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(limit))
        os.chown(group / "cgroup.procs", uid, uid)  # so the unprivileged launcher can join
    except OSError:
        try:
            group.rmdir()
        except OSError:
            pass
        return None
    return group


def _remove_cgroup(group: Path, timeout: float = 5.0) -> None:
    """Kill whatever is left in the sandbox's cgroup and remove it. Processes of a pid
    namespace die asynchronously after its init; the cgroup holds every one of them."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pids = (group / "cgroup.procs").read_text().split()
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        try:
            group.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:  # pragma: no cover - a process stuck in the kernel
                return
            time.sleep(0.02)


@dataclass
class Sandbox:
    """One jail. Use as a context manager, or call :meth:`close`.

    Args:
        limits: resource limits.
        hostname: hostname shown inside.
        env: extra environment variables (on top of :data:`DEFAULT_ENV`; nothing of the
            host's environment is passed).
        files: files to create inside before start, ``{path inside: content}``; paths under
            ``/root``, ``/app`` and ``/tmp`` are copied into the private tmpfs.
        ro_binds: host directories or files shown read-only inside, ``{host path: path
            inside}`` (tools an environment needs: Node packages, a search index …). The
            inside path must be under ``/opt``.

    Example:
        >>> with Sandbox() as sb:  # doctest: +SKIP
        ...     sb.run(["bash", "-c", "echo hi"]).stdout
        'hi\\n'
    """

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    hostname: str = "sandbox"
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    ro_binds: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not shutil.which("bwrap"):
            raise SandboxError("bwrap not found: install the Debian package 'bubblewrap'")
        for host, inside in self.ro_binds.items():
            if not (inside.startswith("/opt/") and posixpath.normpath(inside) == inside):
                raise SandboxError(f"read-only bind target {inside!r} must be a plain path under /opt")
            if not os.path.exists(host):
                raise SandboxError(f"read-only bind source {host!r} does not exist")
        for path, content in self.files.items():
            if problem := seed_file_problem(path, self.files):
                raise SandboxError(problem)
            if not isinstance(content, str):
                raise SandboxError(f"seed file {path!r}: content must be text, not {type(content).__name__}")
        if sum(len(c) for c in self.files.values()) > self.limits.disk_bytes:
            raise SandboxError(f"seed files exceed the sandbox's disk ({self.limits.disk_bytes} bytes)")
        self.uid = _UID_BASE + secrets.randbelow(_UID_SPAN)
        self.host_dir = Path(tempfile.mkdtemp(prefix="lwm-sandbox-"))
        # The control directory is the one host path the sandbox sees (read-only, at
        # /run/lwm): seed files and configuration. Owned by the sandbox's uid so that
        # copied seeds belong to root inside.
        self.ctl_dir = self.host_dir / "ctl"
        self.etc_dir = self.host_dir / "etc"
        self.ctl_dir.mkdir()
        self.etc_dir.mkdir()
        (self.etc_dir / "passwd").write_text(
            "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        )
        (self.etc_dir / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
        (self.etc_dir / "hostname").write_text(self.hostname + "\n")
        (self.etc_dir / "hosts").write_text(f"127.0.0.1\tlocalhost {self.hostname}\n::1\tlocalhost\n")
        (self.etc_dir / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files\n")
        seed = self.ctl_dir / "seed"
        try:
            for path, content in self.files.items():
                dest = seed / path.lstrip("/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(content)
        except (OSError, UnicodeEncodeError) as e:  # e.g. a name too long, a lone surrogate
            shutil.rmtree(self.host_dir, ignore_errors=True)
            raise SandboxError(f"cannot create the seed files: {e}") from None
        os.chmod(self.host_dir, 0o711)
        for p in [self.ctl_dir, *self.ctl_dir.rglob("*")]:
            os.chown(p, self.uid, self.uid)
        self._procs: list[subprocess.Popen] = []
        self.cgroup = _memory_cgroup(self.uid, self.limits.max_total_memory_bytes)
        self.closed = False

    # -- command lines -------------------------------------------------------------
    def _prefix(self) -> list[str]:
        lim = self.limits
        cmd = [
            "prlimit",
            f"--nproc={lim.max_processes}",
            f"--as={lim.max_memory_bytes}",
            f"--cpu={lim.max_cpu_seconds}",
            f"--fsize={lim.max_file_bytes}",
            f"--nofile={lim.max_open_files}",
            "--core=0",
            "--",
            "bwrap",
            "--unshare-all",  # user, ipc, pid, net, uts, cgroup namespaces
            "--unshare-user",
            "--disable-userns",  # no nested namespaces: no capabilities to regain inside
            "--uid", "0", "--gid", "0",
            "--hostname", self.hostname,
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--proc", "/proc",
            "--dev", "/dev",
        ]
        for path in SYSTEM_PATHS:
            if os.path.exists(path):
                cmd += ["--ro-bind", path, path]
        for name in ("bin", "sbin", "lib", "lib64"):
            if os.path.islink(f"/{name}") or os.path.isdir(f"/usr/{name}"):
                cmd += ["--symlink", f"usr/{name}", f"/{name}"]
        for name in ("passwd", "group", "hostname", "hosts", "nsswitch.conf"):
            cmd += ["--ro-bind", str(self.etc_dir / name), f"/etc/{name}"]
        for path in (HOME, WORKDIR, "/tmp"):
            cmd += ["--perms", "0755", "--size", str(lim.disk_bytes), "--tmpfs", path]
        # Seed files and configuration come in read-only; /run/tmux is a small private
        # tmpfs for sockets.
        cmd += ["--ro-bind", str(self.ctl_dir), "/run/lwm"]
        cmd += ["--perms", "0700", "--size", str(1 << 20), "--tmpfs", "/run/tmux", "--chdir", WORKDIR]
        # /dev is bwrap's own tmpfs: its shared memory gets a bounded tmpfs, the rest is
        # read-only (writing to device nodes such as /dev/null still works).
        cmd += ["--perms", "1777", "--size", str(lim.disk_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
        # Hide the host's locally installed software: the sandbox is a plain Debian.
        cmd += ["--perms", "0755", "--size", "4096", "--tmpfs", "/usr/local", "--remount-ro", "/usr/local"]
        cmd += ["--remount-ro", "/"]  # the sandbox's own root: only the tmpfs mounts stay writable
        for k, v in {**DEFAULT_ENV, **self.env}.items():
            cmd += ["--setenv", k, v]
        return cmd

    def _command(self, argv: Sequence[str]) -> list[str]:
        # Seed files are copied inside (as the sandbox's root), then the command runs
        # under a hard wall-clock lifetime.
        inner = (
            'if [ -d /run/lwm/seed ]; then cp -a /run/lwm/seed/. / 2>/dev/null; fi; '
            f'exec timeout -s KILL {self.limits.lifetime_seconds} "$@"'
        )
        return ["/bin/sh", "-c", inner, "sh", *argv]

    def _host_env(self) -> dict[str, str]:
        return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}

    # -- running ---------------------------------------------------------------------
    def spawn(self, argv: Sequence[str], **popen_kwargs) -> subprocess.Popen:
        """Start ``argv`` inside the sandbox (killed on close).

        bwrap's options (host paths among them) reach it through ``--args`` (a memfd it
        reads and closes), and it starts in ``/``: its process is the sandbox's pid 1, whose
        command line (``bwrap --args N`` and the command) and environment (``PATH``,
        ``LANG``, ``PWD=/``) are readable inside and show nothing of the host.

        Returns:
            the host-side process (bwrap).

        Raises:
            SandboxError: bwrap could not create the sandbox.
        """
        self._check_open()
        info_r, info_w = os.pipe()
        launcher = self._prefix()
        at = launcher.index("bwrap") + 1
        launcher, options = launcher[:at], ["--info-fd", str(info_w), *launcher[at:]]
        # Read-only binds go in as descriptors the host opened: the sandbox's uid need not
        # be able to reach the host path (e.g. under a 0700 home), only to read the files.
        bind_fds = [os.open(host, os.O_PATH) for host in self.ro_binds]
        extra_fds = tuple(popen_kwargs.pop("pass_fds", ()))  # a caller's own (e.g. a browser's pipe)
        at = options.index("--remount-ro", options.index("/run/lwm"))
        for fd, inside in zip(bind_fds, self.ro_binds.values()):
            options[at:at] = ["--ro-bind-fd", str(fd), inside]
        args_fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
        os.write(args_fd, b"".join(o.encode() + b"\0" for o in options))
        os.lseek(args_fd, 0, os.SEEK_SET)
        cmd = [*launcher, "--args", str(args_fd), *self._command(argv)]
        if self.cgroup is not None:  # join the cgroup before anything else starts
            cmd = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.cgroup / "cgroup.procs"), *cmd]
        try:
            proc = subprocess.Popen(
                cmd,
                user=self.uid,
                group=self.uid,
                extra_groups=[],
                process_group=0,
                env=self._host_env(),
                cwd="/",
                pass_fds=(info_w, args_fd, *bind_fds, *extra_fds),
                **popen_kwargs,
            )
        finally:
            for fd in (info_w, args_fd, *bind_fds):
                os.close(fd)
        self._procs.append(proc)
        with os.fdopen(info_r, "rb") as f:
            info = f.read()  # bwrap closes the fd once the namespaces exist
        try:
            json.loads(info)["child-pid"]
        except (ValueError, KeyError):
            proc.wait(timeout=10)
            raise SandboxError(f"bwrap failed to start (exit {proc.returncode})") from None
        return proc

    def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        timeout: float | None = None,
        max_output_bytes: int = 1 << 20,
    ) -> subprocess.CompletedProcess:
        """Run ``argv`` to completion in a fresh jail of this sandbox's kind.

        Each call gets fresh private directories (state does not persist between calls;
        use a long-lived process such as the terminal environment's shell for that).

        Args:
            argv: the command.
            input: text for standard input.
            timeout: wall-clock limit in seconds (default ``limits.command_timeout_seconds``);
                on expiry the whole process tree is killed and ``returncode`` is ``-9``.
            max_output_bytes: stdout and stderr are each cut to this size. They go to files
                that the sandbox's file-size limit bounds, so a flood of output never
                reaches the host's memory.

        Returns:
            the completed process, with text ``stdout``/``stderr``.
        """
        self._check_open()
        timeout = self.limits.command_timeout_seconds if timeout is None else timeout
        with tempfile.TemporaryFile(dir=self.host_dir) as out, tempfile.TemporaryFile(dir=self.host_dir) as err:
            proc = self.spawn(
                argv,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
            try:
                proc.communicate(input.encode() if input is not None else None, timeout=timeout)
            except subprocess.TimeoutExpired:
                self._kill(proc)
                proc.wait()
            texts = []
            for f in (out, err):
                f.seek(0)
                texts.append(f.read(max_output_bytes).decode("utf-8", "replace"))
        return subprocess.CompletedProcess(list(argv), proc.returncode, *texts)

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError("sandbox is closed")

    def close(self) -> None:
        """Kill every process inside and delete the sandbox's files. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        for proc in self._procs:
            self._kill(proc)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a zombie bwrap
                pass
        shutil.rmtree(self.host_dir, ignore_errors=True)
        if self.cgroup is not None:
            _remove_cgroup(self.cgroup)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # last resort: never leave processes behind
        if not getattr(self, "closed", True):
            self.close()
