"""The terminal domain: bash in tmux inside the sandbox; actions are keystrokes, observations screens."""

from __future__ import annotations

from lwm.domains import rubrics
from lwm.domains.base import AgentTool, Domain
from lwm.domains.terminal import spec
from lwm.domains.terminal.spec import keys

__all__ = ["DOMAIN", "keys"]


def _environment(**options):
    from lwm.domains.terminal.env import TerminalEnv

    return TerminalEnv(**options)


def _tasks():
    from lwm.domains.terminal import tasks

    return tasks


def _suite():
    from lwm.domains.terminal import suite

    return suite


DOMAIN = Domain(
    name=spec.NAME,
    description="bash in tmux; actions are JSON keystroke lists, observations the visible screen",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    action_format=spec.ACTION_FORMAT,
    tool=AgentTool("run_keystrokes", (
        "Type keystrokes into a bash shell (tmux, 80x24, working directory /app) and return the screen. "
        'The action is a JSON list of {"keystrokes": text, "duration": seconds}; "\\n" presses Enter and '
        'tmux key names such as "C-c" are key presses. Example: [{"keystrokes": "ls -la\\n", "duration": 0.5}]. '
        "The empty list [] means you are done.")),
    rubric=rubrics.TERMINAL,
    ends_episode=spec.ends_episode,
    trivial_observation=spec.trivial_observation,
    environment=_environment,
    suite=_suite,
    tasks=_tasks,
)
