"""The swe domain: a git repository in the sandbox behind a coding agent's tools."""

from __future__ import annotations

from lwm.domains import AgentTool, Domain, Lazy, rubrics
from lwm.domains.swe import spec

__all__ = ["DOMAIN"]


DOMAIN = Domain(
    name=spec.NAME,
    description="a git repository with read/edit/write/bash/grep/glob tools; observations the tools' envelopes",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    invalid_answer=spec.invalid_answer,
    action_format=spec.ACTION_FORMAT,
    tool=AgentTool("call_tool", (
        'Call a coding tool in the repository /app/repo and return its output. The action is a JSON object '
        '{"name": tool, "arguments": {...}} with the tools read {file_path}, edit {file_path, old_string, '
        'new_string}, write {file_path, content}, bash {command}, grep {pattern}, glob {pattern}. '
        'Example: {"name": "bash", "arguments": {"command": "python3 -m unittest -q"}}')),
    rubric=rubrics.SWE,
    reward_rubric=('Success in a repository: the asked change is in the files and the tests pass when run (the '
                   "bash tool's output says so); an edit answered by a tool error did not happen."),
    environment=Lazy("lwm.domains.swe.env:SweEnv"),
    suite=Lazy("lwm.domains.swe.suite"),
    tasks=Lazy("lwm.domains.swe.tasks"),
    actions_name_values=True,
)
