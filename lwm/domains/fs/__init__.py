"""The filesystem domain: the reference MCP filesystem server on ``/app`` in the sandbox."""

from __future__ import annotations

from lwm.domains import AgentTool, Asset, Domain, Lazy, rubrics
from lwm.domains.base import SHELL_SETUP
from lwm.domains.fs import spec
from lwm.domains.mcp.spec import canonical
from lwm.envs.assets import install_node_packages

__all__ = ["DOMAIN"]


DOMAIN = Domain(
    name=spec.NAME,
    description="the reference MCP filesystem server on /app; actions are tool calls, observations tool results",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    action_format=spec.ACTION_FORMAT,
    tool=AgentTool("call_tool", (
        'Call a filesystem tool (files live under /app) and return its result. The action is a JSON object '
        '{"name": tool, "arguments": {...}} with tools such as read_text_file {path}, write_file {path, content}, '
        'list_directory {path}, move_file {source, destination}, search_files {path, pattern}. '
        'Example: {"name": "write_file", "arguments": {"path": "/app/a.txt", "content": "hi"}}')),
    canonical=canonical,
    rubric=rubrics.GENERIC,
    reward_rubric=('Success in a filesystem: the files and directories the task asks for exist under /app with '
                   'exactly the asked content, as the tool results show; a result marked [tool error] changed '
                   'nothing.'),
    environment=Lazy("lwm.domains.fs.env:FsEnv"),
    task_options=(SHELL_SETUP,),
    suite=Lazy("lwm.domains.fs.suite"),
    tasks=Lazy("lwm.domains.fs.tasks"),
    assets=(Asset("npm MCP servers", install_node_packages),),
    actions_name_values=True,
)
