"""An LLM agent as a policy (:class:`~lwm.envs.episode.Policy`): it sees the task and the
episode so far and answers with its next action. Scripted policies are
:class:`lwm.envs.episode.ScriptedPolicy`.

The agent's prompt and the reading of its answer are written once, here, and shared by
evaluation (:class:`ChatPolicy` on any chat backend) and RL training (the GRPO rollouts of
:mod:`lwm.train.rl`, which generate with the model being trained), so that a policy is
trained on exactly the conversation it is evaluated with:

* system: the domain's agent tool (:attr:`lwm.domains.Domain.tool`: what an action is,
  with an example) and the rule "answer with one action and nothing else";
* user: ``Task: <instruction>`` and the initial observation; then, per turn, the agent's
  own words (assistant) and the observation that followed (user).

The answer is read by :func:`read_action`: reasoning removed; when the answer holds a
fenced code block, the first block is the action (small models wrap it in prose); ``DONE``
(or nothing) ends the episode; the text goes through the tool's ``to_action`` (the
terminal's tool takes a plain command line). Whether the result is a valid action of the
domain is :meth:`lwm.domains.Domain.accepts`; whether the answer was nothing but a well-formed action
(the format reward of RL) is :func:`well_formed_answer`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lwm import domains
from lwm.domains import Domain
from lwm.envs.base import Task
from lwm.envs.episode import Policy, Script, ScriptedPolicy
from lwm.loop import run_sync
from lwm.models import ModelSpec
from lwm.models.base import ChatModel, SamplingParams
from lwm.parse import split_reasoning
from lwm.schema import Message, Trajectory

_FENCE = re.compile(r"\A\s*```[^\n]*\n(.*?)\n?```\s*\Z", re.DOTALL)
_FIRST_BLOCK = re.compile(r"```[^\n`]*\n(.*?)\n?```", re.DOTALL)
_FENCE_LINE = re.compile(r"^\s*```", re.MULTILINE)

#: The answer that ends an episode: the agent says the task is done.
DONE = "DONE"

AGENT_SYSTEM = """\
You are an agent that completes tasks in a {domain} environment, one action per turn.
{tool}
Answer with exactly one action and nothing else: no explanation. When the task is done, answer DONE."""

#: Decoding settings of an agent unless given: greedy (evaluation); RL samples instead.
AGENT_SAMPLING = SamplingParams(temperature=0.0, max_tokens=128)


def agent_messages(domain: Domain, task: Task, initial_observation: str, said: list[str],
                   observations: list[str], max_history_turns: int = 8) -> list[Message]:
    """The agent's chat messages for its next action.

    Args:
        domain: the domain (its agent tool describes the actions).
        task: the task (its instruction is shown).
        initial_observation: what the environment showed before the first action.
        said: the agent's own earlier answers, as it wrote them (one per turn).
        observations: the observation after each of them (same length as ``said``).
        max_history_turns: earlier turns shown at most (the newest ones).
    """
    first = f"Task: {task.instruction or '(explore the environment)'}\n\nObservation:\n{initial_observation}"
    out: list[Message] = [{"role": "system", "content": AGENT_SYSTEM.format(domain=domain.name,
                                                                          tool=domain.tool.description)},
                          {"role": "user", "content": first}]
    start = max(0, len(said) - max_history_turns)
    for answer, observation in zip(said[start:], observations[start:]):
        out += [{"role": "assistant", "content": answer}, {"role": "user", "content": f"Observation:\n{observation}"}]
    return out


def _answer(text: str) -> tuple[str, bool]:
    # (the action text in an answer, whether the answer was only that: bare or one fenced block)
    answer, _, _ = split_reasoning(text or "")
    answer = answer.strip()
    # one block that is the whole answer; not two blocks read as one (a fence line inside it)
    if (m := _FENCE.match(answer)) is not None and not _FENCE_LINE.search(m.group(1)):
        return m.group(1).strip(), True
    if (m := _FIRST_BLOCK.search(answer)) is not None:
        return m.group(1).strip(), False
    return answer, True


def _says_done(action: str) -> bool:
    return action.upper().rstrip(".") == DONE   # "DONE", "done." …


def action_text(text: str) -> str:
    """The action an agent's answer holds, as it would be written alone: the answer without
    its reasoning, without the fence of a fenced block and without the words around the first
    one (the text :func:`read_action` gives the domain's tool). ``""`` when there is none."""
    return _answer(text)[0]


def fenced_action(domain: Domain, text: str) -> str:
    """An agent's answer rewritten as its action (:func:`action_text`) in one Markdown code block
    tagged with the tool's language (:attr:`lwm.domains.AgentTool.fence`, else the domain's
    ``action_lang``) and nothing around it: the form chat models write actions in unasked,
    without their prose. ``DONE`` (or no action) stays as it is."""
    action = action_text(text)
    if not action or _says_done(action):
        return action
    lang = domain.action_lang if domain.tool.fence is None else domain.tool.fence
    return f"```{lang}\n{action}\n```"


def read_action(domain: Domain, text: str) -> str | None:
    """The action in an agent's answer (see the module docstring); ``None`` when the agent
    is done (``DONE``, or nothing but reasoning)."""
    answer = action_text(text)
    if not answer or _says_done(answer):
        return None
    return domain.tool.to_action(answer)


def well_formed_answer(domain: Domain, text: str) -> bool:
    """Whether an agent's answer is one action and nothing else: no prose around it (a bare
    action, or one fenced block), well formed for the domain's tool
    (:attr:`lwm.domains.AgentTool.well_formed`: a command line on one line, SQL that ends a
    statement, Python that compiles …) and valid in its action format. ``DONE`` is well formed."""
    answer, alone = _answer(text)
    if _says_done(answer):
        return True
    return bool(answer) and alone and domain.tool.well_formed(answer) and domain.accepts(
        domain.tool.to_action(answer))


class ChatPolicy:
    """An LLM agent on any :class:`~lwm.models.base.ChatModel` (an OpenAI-compatible
    endpoint, the embedded model with or without an adapter, a transformers checkpoint).
    One instance plays one episode at a time (it remembers its own words).

    Args:
        model: the agent's model.
        domain: the domain's name.
        sampling: decoding settings (:data:`AGENT_SAMPLING`).
        max_history_turns: earlier turns shown at most.
    """

    def __init__(self, model: ChatModel, domain: str, sampling: SamplingParams = AGENT_SAMPLING,
                 max_history_turns: int = 8) -> None:
        self.model = model
        self.domain = domains.get(domain)
        self.name = f"chat:{model.name}"
        self.sampling = sampling
        self.max_history_turns = max_history_turns
        self.said: list[str] = []
        self.finish_reasons: list[str | None] = []

    def messages(self, task: Task, trajectory: Trajectory) -> list[Message]:
        """The agent's chat messages for its next action."""
        if not trajectory.turns:
            self.said, self.finish_reasons = [], []
        said = self.said[: len(trajectory.turns)]
        said += [t.action for t in trajectory.turns[len(said):]]  # turns it did not write (a resumed episode)
        return agent_messages(self.domain, task, trajectory.initial_observation, said,
                              [t.observation for t in trajectory.turns], self.max_history_turns)

    def act(self, task: Task, trajectory: Trajectory) -> str | None:
        """The next action, or ``None`` when the agent says it is done (blocking; see :meth:`aact`)."""
        return run_sync(self.aact(task, trajectory))

    async def aact(self, task: Task, trajectory: Trajectory) -> str | None:
        """The next action, or ``None`` when the agent says it is done.

        Raises:
            whatever the model raises.
        """
        gen = await self.model.generate(self.messages(task, trajectory), self.sampling)
        self.said = self.said[: len(trajectory.turns)] + [gen.text.strip()]
        self.finish_reasons = self.finish_reasons[: len(trajectory.turns)] + [gen.finish_reason]
        return read_action(self.domain, gen.text)

    def record(self) -> dict[str, Any]:
        """What the agent wrote in the episode, for its trajectory's metadata: its answers,
        each answer's ``finish_reason`` (``length``: cut by ``max_tokens``), and whether each
        was one well-formed action and nothing else."""
        return {"agent_answers": list(self.said), "agent_finish_reasons": list(self.finish_reasons),
                "agent_well_formed": [well_formed_answer(self.domain, a) for a in self.said]}


@dataclass(frozen=True)
class PolicySpec:
    """How to build a policy: picklable, so that it can travel to worker processes.

    Attributes:
        name: ``scripted`` (the scripted episodes' own actions, by task name: the suite's,
            or a task set's reference solutions), or the agent's model: ``embedded`` (the
            bundled SmolLM2-135M-Instruct), ``embedded-agent``, ``embedded-warmup``, a ``.gguf`` file,
            ``hf:<model dir>`` (a trained checkpoint, transformers), or the name served at
            ``base_url``.
        base_url: the agent's OpenAI-compatible endpoint.
        api_key: bearer token for ``base_url``.
        adapter: a LoRA adapter in GGUF form for a local llama.cpp agent (``lwm train
            export`` of a trained policy).
        temperature: the agent's sampling temperature (0: greedy).
        max_tokens: tokens per answer at most.
        timeout: seconds per request to ``base_url``.
        seed: the sampling seed (attempts of one task with different seeds differ at a
            temperature above 0).
    """

    name: str = "scripted"
    base_url: str | None = None
    api_key: str = "EMPTY"
    adapter: str | None = None
    temperature: float = 0.0
    max_tokens: int = 128
    timeout: float = 600.0
    seed: int = 0

    @property
    def label(self) -> str:
        """A short name for messages and records (the adapter's file name included)."""
        return self.name + (f"+{Path(self.adapter).stem}" if self.adapter else "")

    def make(self, domain: str, scripts: Sequence[Script] = ()) -> Policy:
        """The policy for episodes of ``domain`` (``scripts``: what ``scripted`` plays;
        default: the domain's suite). Models are loaded once per process.

        Raises:
            as :func:`lwm.models.load_model` (a reference predictor's name included).
        """
        if self.name == "scripted":
            return ScriptedPolicy(scripts or domains.get(domain).scripts(extended=True))
        model = ModelSpec(self.name, base_url=self.base_url, api_key=self.api_key, adapter=self.adapter,
                          timeout=self.timeout).load()
        return ChatPolicy(model, domain, SamplingParams(temperature=self.temperature, max_tokens=self.max_tokens,
                                                        seed=self.seed))
