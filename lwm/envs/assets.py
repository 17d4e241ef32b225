"""Installers of the tools the real environments need beyond the Python environment, run
once by ``lwm setup`` (each domain lists its own in its spec's ``assets``) into
``$LWM_HOME`` (see :func:`lwm.paths.lwm_home`):

- ``node/``: Node.js MCP servers from npm (the reference filesystem and memory servers),
  run inside the sandbox with the machine's ``node``;
- ``sandbox-python/``: Python packages for the sandbox's own interpreter
  (``/usr/bin/python3``), such as the ``mcp`` SDK and the SQLite MCP server;
- whatever a domain builds from registry packages (e.g. the search index), under its
  own sub-directory.

System packages (bubblewrap, tmux, sqlite3, PostgreSQL, Chromium, Node.js, git,
python3-doc) come from Debian; ``make system-deps`` installs them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from lwm.errors import AssetMissingError
from lwm.paths import lwm_home

#: npm packages pinned to the versions the bundled suites were recorded with.
NPM_PACKAGES = {
    "@modelcontextprotocol/server-filesystem": "2026.8.31",
    "@modelcontextprotocol/server-memory": "2026.8.31",
}
#: Packages for the sandbox's Python (``/usr/bin/python3``), pinned likewise.
SANDBOX_PY_PACKAGES = ("mcp==2.3.0", "mcp-server-sqlite==2025.4.25")
SANDBOX_PYTHON = "/usr/bin/python3"
#: mcp-server-sqlite 2025.4.25 uses the mcp 1.x low-level server API (mcp 2 removed it): it
#: gets a separate directory with the last mcp 1.x.
SANDBOX_PY_SQLITE_PACKAGES = ("mcp==1.30.0", "mcp-server-sqlite==2025.4.25")


def node_modules() -> Path:
    """The ``node_modules`` directory of the npm MCP servers.

    Raises:
        AssetMissingError: not installed (run ``lwm setup``).
    """
    path = lwm_home() / "node" / "node_modules"
    if not all((path / name / "package.json").exists() for name in NPM_PACKAGES):
        raise AssetMissingError(f"the npm MCP servers are not installed in {path.parent}: run `lwm setup`")
    return path


def sandbox_site_packages() -> Path:
    """Python packages for the sandbox's interpreter (put on its ``PYTHONPATH``).

    Raises:
        AssetMissingError: not installed (run ``lwm setup``).
    """
    path = lwm_home() / "sandbox-python"
    if not (path / ".complete").exists():
        raise AssetMissingError(f"the sandbox's Python packages are not installed in {path}: run `lwm setup`")
    return path


def sandbox_sqlite_site_packages() -> Path:
    """Packages of the SQLite MCP server (with mcp 1.x) for the sandbox's interpreter.

    Raises:
        AssetMissingError: not installed (run ``lwm setup``).
    """
    path = lwm_home() / "sandbox-python-mcp1"
    if not (path / ".complete").exists():
        raise AssetMissingError(f"the SQLite MCP server is not installed in {path}: run `lwm setup`")
    return path


def system_tool(name: str, package: str) -> str:
    """The absolute path of a system program.

    Raises:
        AssetMissingError: not installed (the message names the Debian package).
    """
    path = shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if path is None:
        raise AssetMissingError(f"{name} not found: install the Debian package {package!r} (make system-deps)")
    return path


def install_node_packages(force: bool = False) -> Path:
    """``npm install`` the pinned MCP servers into ``$LWM_HOME/node``; returns ``node_modules``.

    Raises:
        AssetMissingError: npm is missing or failed.
    """
    prefix = lwm_home() / "node"
    if not force:
        try:
            return node_modules()
        except AssetMissingError:
            pass
    npm = system_tool("npm", "npm")
    _make_home()
    prefix.mkdir(parents=True, exist_ok=True)
    specs = [f"{name}@{version}" for name, version in NPM_PACKAGES.items()]
    _run([npm, "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(prefix), *specs], "npm install")
    return node_modules()


def install_sandbox_python(force: bool = False) -> Path:
    """Install :data:`SANDBOX_PY_PACKAGES` as wheels for the sandbox's interpreter.

    Raises:
        AssetMissingError: pip failed or the sandbox's Python is missing.
    """
    target = lwm_home() / "sandbox-python"
    if not force and (target / ".complete").exists() and (lwm_home() / "sandbox-python-mcp1" / ".complete").exists():
        return target
    py = system_tool("python3", "python3")
    version = subprocess.run([py, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                             capture_output=True, text=True, check=True).stdout.strip()
    shutil.rmtree(target, ignore_errors=True)
    _make_home()
    _run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target), "--python-version", version,
          "--only-binary=:all:", "--implementation", "cp", *SANDBOX_PY_PACKAGES], "pip install (sandbox Python)")
    (target / ".complete").write_text(" ".join(SANDBOX_PY_PACKAGES) + "\n")
    legacy = lwm_home() / "sandbox-python-mcp1"
    if force or not (legacy / ".complete").exists():
        shutil.rmtree(legacy, ignore_errors=True)
        _run([sys.executable, "-m", "pip", "install", "-q", "--target", str(legacy), "--python-version", version,
              "--only-binary=:all:", "--implementation", "cp", *SANDBOX_PY_SQLITE_PACKAGES],
             "pip install (sandbox Python, SQLite MCP server)")
        (legacy / ".complete").write_text(" ".join(SANDBOX_PY_SQLITE_PACKAGES) + "\n")
    return target


def _make_home() -> None:
    home = lwm_home()
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o755)  # the sandboxes' users read from it


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssetMissingError(f"{what} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-500:]}")
