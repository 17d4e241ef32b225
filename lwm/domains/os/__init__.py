"""The os domain (desktop GUI): no real environment here; OSWorld-style logs are imported."""

from __future__ import annotations

from lwm.domains import rubrics
from lwm.domains.base import AgentTool, Domain
from lwm.domains.os import spec

__all__ = ["DOMAIN"]

DOMAIN = Domain(
    name=spec.NAME,
    description="a desktop's accessibility tree; actions are pyautogui code or computer_13 JSON (import only)",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    action_format=spec.ACTION_FORMAT,
    tool=AgentTool("computer_action", (
        "Act on the desktop and return its accessibility tree. The action is pyautogui code such as "
        "pyautogui.click(960, 540) or pyautogui.typewrite('hi'), or one of WAIT, DONE, FAIL.")),
    canonical=spec.canonical,
    rubric=rubrics.OS,
    reward_rubric=('Success on a desktop: the asked state shows in the last accessibility tree.'),
    ends_episode=spec.ends_episode,
    import_only="a desktop virtual machine cannot run here",
)
