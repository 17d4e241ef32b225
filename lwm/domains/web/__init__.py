"""The web domain: Chromium in the sandbox, driven by Playwright, on three local sites."""

from __future__ import annotations

from lwm.domains import AgentTool, Domain, Lazy, rubrics
from lwm.domains.base import TaskOption, is_text
from lwm.domains.web import spec

__all__ = ["DOMAIN"]


DOMAIN = Domain(
    name=spec.NAME,
    description="Chromium on local sites; actions are BrowserGym calls, observations accessibility trees",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    action_format=spec.ACTION_FORMAT,
    action_lang=spec.ACTION_LANG,
    tool=AgentTool("browser_action", (
        "Act in the browser and return the page's accessibility tree. The action is one call such as "
        "click('12'), fill('7', 'text'), select_option('9', 'red'), goto('http://shop.local/'), go_back(), "
        "scroll(0, 400) or send_msg_to_user('answer') (which ends the episode); numbers are the [ids] shown in "
        "the tree.")),
    canonical=spec.canonical,
    rubric=rubrics.WEB,
    reward_rubric=('Success in a browser: the page state the task asks for (a form sent, an item in the cart, an '
                   'answer given with send_msg_to_user) shows in the last accessibility trees.'),
    ends_episode=spec.ends_episode,
    invalid_answer=spec.invalid_answer,
    render_change=spec.render_change,
    observed_change=spec.observed_change,
    change_instruction=spec.CHANGE_INSTRUCTION,
    environment=Lazy("lwm.domains.web.env:WebEnv"),
    task_options=(TaskOption("start_url", "text: the page the episode starts on", is_text),),
    suite=Lazy("lwm.domains.web.suite"),
)
