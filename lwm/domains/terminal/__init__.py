"""The terminal domain: bash in tmux inside the sandbox; actions are keystrokes, observations screens."""

from __future__ import annotations

from lwm.domains import AgentTool, Domain, Lazy, rubrics
from lwm.domains.terminal import spec
from lwm.domains.terminal.spec import keys

__all__ = ["DOMAIN", "keys"]


DOMAIN = Domain(
    name=spec.NAME,
    description="bash in tmux; actions are JSON keystroke lists, observations the visible screen",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    action_format=spec.ACTION_FORMAT,
    tool=AgentTool("run_keystrokes", (
        "Type into a bash shell (tmux, 80x24, working directory /app) and see the screen. The action is a "
        "command line, typed and run (example: ls -la), or a JSON list of keystrokes "
        '[{"keystrokes": text, "duration": seconds}] where "\\n" presses Enter and tmux key names such as "C-c" '
        "are key presses."), to_action=spec.agent_action, well_formed=spec.one_command, fence="bash"),
    rubric=rubrics.TERMINAL,
    reward_rubric=('Success in a terminal: the files, directories and outputs the task asks for exist with '
                   'exactly the asked content, as the last screens show them (a command echoed at the prompt is '
                   'not its result; an error message after it means it failed).'),
    ends_episode=spec.ends_episode,
    trivial_observation=spec.trivial_observation,
    certain_answer=spec.certain_answer,
    render_change=spec.render_change,
    observed_change=spec.observed_change,
    ground_change=spec.ground_change,
    change_instruction=spec.CHANGE_INSTRUCTION,
    probe_action=spec.probe_keys,
    probe_output=spec.command_output,
    environment=Lazy("lwm.domains.terminal.env:TerminalEnv"),
    suite=Lazy("lwm.domains.terminal.suite"),
    tasks=Lazy("lwm.domains.terminal.tasks"),
    actions_name_values=True,
)
