"""The fs environment: the reference MCP filesystem server in the sandbox, confined to
``/app`` (the episode's files), spoken to with the MCP SDK (see :mod:`lwm.domains.mcp.client`).

Snapshot/restore: a tar of ``/app`` made and unpacked inside the sandbox (the server keeps
no other state).
"""

from __future__ import annotations

from lwm.domains.fs import spec as domain
from lwm.domains.mcp.client import NODE_MODULES, McpToolEnv, ServerSpec
from lwm.domains.mcp.spec import call
from lwm.envs.base import Task

SERVER_JS = f"{NODE_MODULES}/@modelcontextprotocol/server-filesystem/dist/index.js"


class FsEnv(McpToolEnv):
    """A real filesystem environment (tool calls on ``@modelcontextprotocol/server-filesystem``).

    Args:
        limits: sandbox limits.
        call_timeout: wall-clock limit of one tool call, in seconds.

    Example:
        >>> env = FsEnv()  # doctest: +SKIP
        >>> env.reset(Task("demo", files={"/app/a.txt": "hi\\n"}))  # doctest: +SKIP
        '[connected] secure-filesystem-server 0.2.0: 14 tools'
        >>> env.step('{"name": "read_text_file", "arguments": {"path": "/app/a.txt"}}').observation  # doctest: +SKIP
        'hi\\n'
    """

    domain = domain.NAME

    def server_spec(self, task: Task) -> ServerSpec:
        return ServerSpec("filesystem", ("node", SERVER_JS, domain.ROOT), node=True)

    def initial_views(self, task: Task) -> list[str]:
        """The directory tree of /app when the task seeds files."""
        return [call("directory_tree", path=domain.ROOT)] if task.files or task.options.get("shell_setup") else []

    def system_prompt(self) -> str:
        return domain.system_prompt(self.tools)
