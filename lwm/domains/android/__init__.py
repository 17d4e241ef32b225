"""The android domain: no real environment here; AndroidWorld-style logs are imported."""

from __future__ import annotations

from lwm.domains import rubrics
from lwm.domains.android import spec
from lwm.domains.base import AgentTool, Domain

__all__ = ["DOMAIN"]

DOMAIN = Domain(
    name=spec.NAME,
    description="a phone's numbered UI elements; actions are AndroidWorld JSON actions (import only)",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    action_format=spec.ACTION_FORMAT,
    tool=AgentTool("phone_action", (
        'Act on the phone and return its UI elements. The action is a JSON object such as '
        '{"action_type": "click", "index": 3}, {"action_type": "input_text", "text": "hi", "index": 5} or '
        '{"action_type": "status", "goal_status": "complete"} (which ends the episode).')),
    canonical=spec.canonical,
    rubric=rubrics.ANDROID,
    reward_rubric=('Success on a phone: the asked state shows in the last UI elements, or the agent answered '
                   'correctly.'),
    ends_episode=spec.ends_episode,
    import_only="an Android emulator cannot run here",
)
