"""An LLM agent behind any chat backend, as a policy (:class:`~lwm.envs.episode.Policy`:
it sees the task and the episode so far and returns the next action text in the domain's
format, or ``None`` to stop). Scripted policies are :class:`lwm.envs.episode.ScriptedPolicy`.
"""

from __future__ import annotations

import re

from lwm.envs.base import Task
from lwm.models.base import ChatModel, SamplingParams
from lwm.parse import split_reasoning
from lwm.schema import Trajectory
from lwm.sim.loop import run_sync

_FENCE = re.compile(r"\A\s*```[^\n]*\n(.*?)\n```\s*\Z", re.DOTALL)


AGENT_PROMPT = """\
You are an agent acting in an environment. Reach the task's goal with as few actions as \
you can. Each turn you see the environment's latest observation; answer with exactly one \
action in the environment's action format and nothing else (no explanation). When the \
task is done, answer with the environment's "done" action if it has one, else DONE.

The environment, as its own documentation describes it (for the action format; you do \
not predict observations):
{environment}"""


class ChatPolicy:
    """An LLM agent: any :class:`~lwm.models.base.ChatModel` (an OpenAI-compatible
    endpoint, the embedded model).

    Args:
        model: the agent's model.
        sampling: its decoding settings.
        max_history_turns: earlier turns shown to it at most (the newest ones).
    """

    def __init__(self, model: ChatModel, sampling: SamplingParams | None = None, max_history_turns: int = 8) -> None:
        self.model = model
        self.name = f"chat:{model.name}"
        self.sampling = sampling or SamplingParams(temperature=0.7, max_tokens=256)
        self.max_history_turns = max_history_turns

    def messages(self, task: Task, trajectory: Trajectory) -> list[dict]:
        """The agent's chat messages for its next action."""
        out = [{"role": "system", "content": AGENT_PROMPT.format(environment=trajectory.system_prompt)},
               {"role": "user", "content": f"Task: {task.instruction or '(explore the environment)'}\n\n"
                                           f"Observation:\n{trajectory.initial_observation}"}]
        turns = trajectory.turns[-self.max_history_turns:]
        for t in turns:
            out += [{"role": "assistant", "content": t.action},
                    {"role": "user", "content": f"Observation:\n{t.observation}"}]
        return out

    def act(self, task: Task, trajectory: Trajectory) -> str | None:
        gen = run_sync(self.model.generate(self.messages(task, trajectory), self.sampling))
        answer, _, _ = split_reasoning(gen.text)
        answer = answer.strip()
        if (m := _FENCE.match(answer)) is not None:
            answer = m.group(1).strip()
        return None if answer.upper() == "DONE" or not answer else answer
