"""The mcp domain: MCP servers over stdio in the sandbox (SQLite, knowledge-graph memory, tickets)."""

from __future__ import annotations

from lwm.domains import AgentTool, Asset, Domain, Lazy, rubrics
from lwm.domains.base import SHELL_SETUP, TaskOption, is_texts
from lwm.domains.mcp import spec
from lwm.envs.assets import install_node_packages, install_sandbox_python

__all__ = ["DOMAIN"]


DOMAIN = Domain(
    name=spec.NAME,
    description="MCP servers over stdio (SQLite, memory, tickets); actions are tool calls, observations results",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    action_format=spec.ACTION_FORMAT,
    tool=AgentTool("call_tool", (
        'Call one of the server\'s tools and return its result. The action is a JSON object '
        '{"name": tool, "arguments": {...}} using a tool listed in the task. '
        'Example: {"name": "list_tickets", "arguments": {"status": "open"}}')),
    canonical=spec.canonical,
    rubric=rubrics.MCP,
    reward_rubric=('Success with tool servers: the records the task asks for exist with the asked values, as the '
                   "tools' results show; a result marked as an error changed nothing."),
    environment=Lazy("lwm.domains.mcp.env:McpEnv"),
    task_options=(TaskOption.choice("server", spec.SERVERS), SHELL_SETUP,
                  TaskOption("initial_views", "a list of tool-call actions shown as the initial state", is_texts)),
    suite=Lazy("lwm.domains.mcp.suite"),
    tasks=Lazy("lwm.domains.mcp.tasks"),
    assets=(Asset("npm MCP servers", install_node_packages),
            Asset("Python packages for the sandbox", install_sandbox_python)),
    actions_name_values=True,
)
