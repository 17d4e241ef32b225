"""The mcp environment: one of several real, stateful MCP servers in the sandbox, spoken
to with the MCP SDK (see :mod:`lwm.domains.mcp.client`). ``Task.options["server"]`` picks it:

``sqlite``   the reference SQLite server (PyPI ``mcp-server-sqlite``) on ``/app/data.db``
``memory``   the reference knowledge-graph server (npm ``@modelcontextprotocol/server-memory``),
             its graph in ``/app/memory.jsonl``
``tickets``  lwm's own ticket tracker (``servers/tickets.py``, the SDK's MCPServer) on
             ``/app/tickets.db``

Snapshot/restore: a tar of ``/app`` (the server's state files), made inside the sandbox;
the server is restarted on restore.
"""

from __future__ import annotations

from pathlib import Path

from lwm.domains.mcp import spec as domain
from lwm.domains.mcp.client import NODE_MODULES, McpToolEnv, ServerSpec
from lwm.envs.base import Task

_TICKETS = Path(__file__).with_name("servers") / "tickets.py"
_SQLITE_MAIN = "import sys, mcp_server_sqlite; sys.argv[0] = 'mcp-server-sqlite'; mcp_server_sqlite.main()"
SERVERS = domain.SERVERS
_VIEWS = {"sqlite": domain.call("read_query", query="SELECT type, name, sql FROM sqlite_master ORDER BY name"),
          "memory": domain.call("read_graph"), "tickets": domain.call("list_tickets", page_size=50)}
DEFAULT_SERVER = "tickets"


def server_spec(server: str) -> ServerSpec:
    """How to start the named server inside the sandbox.

    Raises:
        ValueError: unknown server name (see :data:`SERVERS`).
    """
    if server == "sqlite":
        return ServerSpec("sqlite", ("/usr/bin/python3", "-c", _SQLITE_MAIN, "--db-path", "/app/data.db"),
                          python="sqlite")
    if server == "memory":
        return ServerSpec("memory", ("node", f"{NODE_MODULES}/@modelcontextprotocol/server-memory/dist/index.js"),
                          env={"MEMORY_FILE_PATH": "/app/memory.jsonl"}, node=True)
    if server == "tickets":
        return ServerSpec("tickets", ("/usr/bin/python3", "/root/.lwm/tickets.py", "--db", "/app/tickets.db"),
                          python="sdk", files={"/root/.lwm/tickets.py": _TICKETS.read_text()})
    raise ValueError(f"unknown MCP server {server!r}; one of {', '.join(SERVERS)}")


class McpEnv(McpToolEnv):
    """A real MCP server environment (``Task.options["server"]``, default ``tickets``).

    Args:
        limits: sandbox limits.
        call_timeout: wall-clock limit of one tool call, in seconds.

    Example:
        >>> env = McpEnv()  # doctest: +SKIP
        >>> env.reset(Task("demo", options={"server": "tickets"}))  # doctest: +SKIP
        '[connected] tickets ...: 7 tools'
    """

    domain = domain.NAME

    @property
    def server(self) -> str:
        return (self.task.options.get("server") if self.task else None) or DEFAULT_SERVER

    def server_spec(self, task: Task) -> ServerSpec:
        return server_spec(task.options.get("server") or DEFAULT_SERVER)

    def initial_views(self, task: Task) -> list[str]:
        """When the task starts from a non-empty state: the tickets (``list_tickets``),
        the graph (``read_graph``) or the database schema (``sqlite_master``)."""
        if not (task.setup or task.files):
            return []
        return [_VIEWS[task.options.get("server") or DEFAULT_SERVER]]

    def system_prompt(self) -> str:
        return domain.system_prompt(self.server, self.tools)
