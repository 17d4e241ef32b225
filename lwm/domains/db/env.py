"""A real database: SQLite or a PostgreSQL server, with its own command-line client,
inside the bubblewrap sandbox.

Everything runs inside the sandbox: the ``sqlite3`` shell on ``/app/data.db``, or a
private PostgreSQL 15 cluster in the sandbox's ``/tmp`` (unix socket in a private
directory, no TCP, fsync off) with ``psql``. A controller there (``controller.py``)
drives one interactive client session per episode on a pseudo-terminal; the host only
reads bounded JSON from it.

PostgreSQL refuses to run as root, so a postgres sandbox shows its user as
``postgres`` (uid 999) instead of ``root``; its cluster is copied from a template made
once by ``initdb`` (itself run in a sandbox) under ``$LWM_HOME/postgres-template``:
copying takes about 0.1 s where ``initdb`` takes over 1 s of CPU.
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

from lwm.domains.db import spec as domain
from lwm.envs.assets import system_tool
from lwm.envs.base import StepResult, Task
from lwm.envs.controller import ControlledEnvironment, Controller
from lwm.envs.sandbox import Sandbox, SandboxLimits
from lwm.errors import ActionFormatError, AssetMissingError, EnvironmentClosedError, SandboxError
from lwm.paths import lwm_home

_CONTROLLER = Path(__file__).with_name("controller.py")
PG_BIN = "/usr/lib/postgresql/15/bin"
PG_UID = 999
_PASSWD = ("root:x:0:0:root:/root:/bin/bash\npostgres:x:999:999:PostgreSQL administrator:/tmp:/bin/bash\n"
           "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
_GROUP = "root:x:0:\npostgres:x:999:\nnogroup:x:65534:\n"
#: Limits of a database sandbox: the defaults, with room on the tmpfs for a cluster
#: (about 40 MB) and its snapshots.
DB_LIMITS = SandboxLimits(disk_bytes=512 << 20)


class _PostgresSandbox(Sandbox):
    """A sandbox whose user inside is ``postgres`` (uid 999), not root: the server will
    not start as root. Same jail otherwise."""

    def __post_init__(self) -> None:
        super().__post_init__()
        (self.etc_dir / "passwd").write_text(_PASSWD)
        (self.etc_dir / "group").write_text(_GROUP)

    def _prefix(self) -> list[str]:
        cmd = super()._prefix()
        at = cmd.index("--uid")
        if cmd[at + 2] != "--gid":  # pragma: no cover - the sandbox's command line changed
            raise SandboxError("unexpected sandbox command line: cannot set the user")
        cmd[at + 1] = cmd[at + 3] = str(PG_UID)
        return cmd


def postgres_template(limits: SandboxLimits | None = None) -> Path:
    """The template cluster (``initdb`` output), built on first use.

    ``initdb`` runs inside a sandbox (as uid 999, UTF-8, locale C.UTF-8, trust auth for
    the local socket); the cluster comes out as a tar archive, is unpacked (data-only
    filter) next to its final place, made world-readable (the sandboxes' users copy it)
    and renamed into place, under a lock so that parallel episodes build it once.

    Raises:
        AssetMissingError: PostgreSQL 15 is not installed.
        SandboxError: initdb failed.
    """
    if not os.path.exists(f"{PG_BIN}/initdb"):
        raise AssetMissingError("PostgreSQL 15 not found: install the Debian package 'postgresql-15'")
    system_tool("psql", "postgresql-client-15")
    home = lwm_home()
    final = home / "postgres-template"
    if (final / "PG_VERSION").exists():
        return final
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o755)
    with open(home / "postgres-template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "PG_VERSION").exists():
            return final
        script = (f"{PG_BIN}/initdb -N -A trust -U postgres -E UTF8 --locale=C.UTF-8 -D /tmp/pg >/dev/null "
                  "&& rm -rf /tmp/pg/pg_log && tar -C /tmp -cz pg | base64 -w0")
        with _PostgresSandbox(limits=limits or DB_LIMITS) as sb:
            r = sb.run(["/bin/sh", "-c", script], timeout=180, max_output_bytes=64 << 20)
        if r.returncode != 0:
            raise SandboxError(f"initdb failed ({r.returncode}): {r.stderr.strip()[-500:]}")
        tmp = Path(tempfile.mkdtemp(prefix=".postgres-template-", dir=home))
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(r.stdout)), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        for p in [tmp, *tmp.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        os.rename(tmp / "pg", final)
        shutil.rmtree(tmp, ignore_errors=True)
    return final


class DbEnv(ControlledEnvironment):
    """A real database environment (SQLite or PostgreSQL) behind its command-line client.

    Args:
        engine: ``sqlite`` or ``postgres``, unless the task's ``options["engine"]`` says.
        limits: sandbox limits (default :data:`DB_LIMITS`).
        statement_timeout: seconds a statement may run before the engine cancels it
            (psql: ``statement_timeout``; sqlite3: an interrupt, as Ctrl-C sends).
        action_timeout: wall-clock limit of one action, in seconds (all its statements).
        max_output: bytes of client output kept per action; more is cut and counted.

    Example:
        >>> env = DbEnv()  # doctest: +SKIP
        >>> env.reset(Task("demo", options={"engine": "sqlite"}))  # doctest: +SKIP
        'SQLite version 3.40.1 2022-12-28 14:03:47\\nEnter ".help" for usage hints.'
        >>> env.step("SELECT 1 AS a;").observation  # doctest: +SKIP
        'a\\n-\\n1'
    """

    domain = domain.NAME

    def __init__(self, *, engine: str = "sqlite", limits: SandboxLimits | None = None,
                 statement_timeout: float = 5.0, action_timeout: float = 20.0, max_output: int = 16384) -> None:
        if engine not in domain.ENGINES:
            raise ValueError(f"unknown engine {engine!r}; expected one of {domain.ENGINES}")
        self.engine = engine
        self.limits = limits or DB_LIMITS
        self.statement_timeout = statement_timeout
        self.action_timeout = action_timeout
        self.max_output = max_output
        self._sandbox: Sandbox | None = None
        self._control: Controller | None = None
        self._snapshots = 0
        self.task: Task | None = None

    def system_prompt(self) -> str:
        setup = self.task.setup if self.task else ()
        return domain.system_prompt(self.engine, setup, self.statement_timeout)

    # -- lifecycle -------------------------------------------------------------------
    def reset(self, task: Task | None = None) -> str:
        """Start a fresh sandbox, server (postgres) and client; run the task's setup SQL
        (one-shot client, stops at the first error); return the client's banner.

        Raises:
            ValueError: unknown engine in ``task.options``.
            SandboxError: the sandbox, server or client did not start, or setup failed.
        """
        task = task or Task("empty")
        self.close()
        engine = task.options.get("engine", self.engine)
        if engine not in domain.ENGINES:
            raise ValueError(f"unknown engine {engine!r}; expected one of {domain.ENGINES}")
        self.engine = engine
        if engine == "postgres":
            template = postgres_template(self.limits)
            self._sandbox = _PostgresSandbox(limits=self.limits, files=dict(task.files),
                                             ro_binds={str(template): "/opt/lwm-pgtemplate"})
        else:
            self._sandbox = Sandbox(limits=self.limits, files=dict(task.files))
        config = {"engine": engine, "max_output": self.max_output,
                  "statement_timeout_ms": int(self.statement_timeout * 1000)}
        (self._sandbox.ctl_dir / "db.json").write_text(json.dumps(config))
        (self._sandbox.ctl_dir / "ctl.py").write_text(_CONTROLLER.read_text())
        self.task = task
        self._control = Controller(self._sandbox, ["python3", "-I", "/run/lwm/ctl.py"], "the database")
        self._control.read(time.monotonic() + 15)  # ready
        self._ok(self._request({"op": "start"}, 60), "the database server did not start")
        if task.setup:
            sql = "\n".join(s if s.rstrip().endswith(";") else s + ";" for s in task.setup)
            res = self._request({"op": "script", "sql": sql, "setup": True, "timeout": 60}, 60)
            if not res.get("ok"):
                raise SandboxError(f"setup SQL failed: {str(res.get('out', ''))[-500:]}")
        banner = self._ok(self._request({"op": "session"}, 20), "the database client did not start")
        return str(banner.get("out", "")).rstrip("\n")

    def step(self, action: str) -> StepResult:
        """Type ``action`` into the client and return what it printed.

        Info: ``seconds``; ``state`` (``ready``, or ``continue`` inside an unfinished
        statement, ``copy`` in COPY input); ``timed_out`` when the action hit the time limit
        (``client_restarted`` if the client had to be replaced); ``truncated_bytes``;
        ``client_exited`` (then ``done``) after ``.quit`` / ``\\q``; ``action_error`` for
        text the client cannot be given (control characters, too long).

        Raises:
            EnvironmentClosedError: no episode is running.
            SandboxError: the controller stopped answering.
        """
        if self._control is None:
            raise EnvironmentClosedError("call reset() before step()")
        try:
            sql = domain.parse_action(action)
        except ActionFormatError as e:
            if (answer := domain.invalid_answer(e.reason, "")) is not None:
                return StepResult(answer, info={"action_error": e.reason})
            sql = action
        t0 = time.monotonic()
        # The server cancels postgres statements itself (statement_timeout); the client-side
        # interrupt is the fallback for sqlite3 and for a session that disabled it.
        stmt = self.statement_timeout + (1.0 if self.engine == "postgres" else 0.0)
        res = self._request({"op": "exec", "sql": sql, "timeout": self.action_timeout, "stmt_timeout": stmt},
                            self.action_timeout + 20)
        obs = str(res.get("out", "")).rstrip("\n")
        info: dict = {"seconds": round(time.monotonic() - t0, 3), "state": res.get("state", "")}
        if res.get("dropped"):
            # Cut at a line boundary so that the kept part shows whole rows.
            cut = obs.rfind("\n")
            dropped = int(res["dropped"]) + (len(obs[cut:].encode()) if cut > 0 else 0)
            obs = obs[:cut] if cut > 0 else obs
            info["truncated_bytes"] = dropped
            obs += f"\n[output truncated: {dropped} more bytes]"
        if res.get("timed_out"):
            info["timed_out"] = True
            if res.get("restarted"):
                info["client_restarted"] = True
                obs += "\n" + domain.RESTARTED.format(timeout=self.action_timeout)
        done = bool(res.get("exited")) and not res.get("restarted")
        if done:
            info["client_exited"] = True
        return StepResult(obs, terminated=done, info=info)

    def probe(self, action: str) -> str:
        """Run a verifier's SQL in a separate one-shot client (non-interactive
        ``sqlite3 -header -column`` / ``psql -X``): it sees the committed state and leaves
        the episode's session alone."""
        if self._control is None:
            raise EnvironmentClosedError("call reset() before verify()")
        res = self._request({"op": "script", "sql": action, "timeout": self.action_timeout}, self.action_timeout + 10)
        return str(res.get("out", ""))

    def snapshot(self) -> dict:
        """Copy the database's committed state inside the sandbox.

        SQLite: the shell's ``.backup`` (the backup API: a consistent copy of committed
        data, the session untouched). PostgreSQL: the server is stopped cleanly, its data
        directory copied, and it is started again — an exact physical copy (every
        database, role, sequence) that pg_dump would not give; the client session is
        restarted, so an open transaction is rolled back.

        Raises:
            EnvironmentClosedError: no episode is running.
            SandboxError: the copy failed.
        """
        if self._control is None:
            raise EnvironmentClosedError("call reset() before snapshot()")
        self._snapshots += 1
        self._ok(self._request({"op": "snapshot", "id": self._snapshots}, 90), "snapshot failed")
        return {"engine": self.engine, "id": self._snapshots, "sandbox": id(self._sandbox)}

    def restore(self, snapshot: dict) -> None:
        """Put back a snapshot of this episode; the client session starts afresh.

        Raises:
            ValueError: the snapshot belongs to another episode.
            SandboxError: the copy failed.
        """
        if self._control is None:
            raise EnvironmentClosedError("call reset() before restore()")
        if not isinstance(snapshot, dict) or snapshot.get("sandbox") != id(self._sandbox):
            raise ValueError("this snapshot was not taken in the current episode")
        self._ok(self._request({"op": "restore", "id": int(snapshot["id"])}, 90), "restore failed")

    # -- controller ----------------------------------------------------------------------
    def _request(self, obj: dict, timeout: float) -> dict:
        if self._control is None:
            raise EnvironmentClosedError("the database is closed")
        reply = self._control.request(obj, timeout)
        if not isinstance(reply, dict):
            raise SandboxError("the database's controller sent a malformed answer")
        return reply

    @staticmethod
    def _ok(reply: dict, what: str) -> dict:
        if not reply.get("ok"):
            raise SandboxError(f"{what}: {str(reply.get('error', ''))[-800:]}")
        return reply
