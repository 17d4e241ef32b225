"""The reward model: it decides from the task and the trajectory whether the task was
achieved, in one of two ways.

* :func:`judge_verdict` (the trained reward model): the model is scored on the two fixed
  answers of :mod:`lwm.verdict` after the verdict prompt; the reward is P(achieved), read
  from its probabilities, so it is never unreadable.
* :func:`judge_reward` (a free-form judge, for models never trained to judge): described
  below.

The judge (the world model itself or any other :class:`~lwm.models.base.ChatModel`)
reads the instruction and every action and observation, and answers with a JSON object
``{"achieved": bool, "reward": number in [0, 1], "rationale": str}``. Answers are read
leniently (the last such object in the text, reasoning removed; a bare ``achieved``
becomes 1 or 0); an unreadable answer is retried, then reported in
:attr:`RewardVerdict.error` with ``reward=None``, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from lwm import domains
from lwm.models.base import ChatModel, SamplingParams
from lwm.parse import json_objects, split_reasoning
from lwm.schema import Trajectory
from lwm.verdict import ANSWERS, probability, unnamed_values, verdict_messages

JUDGE_SAMPLING = SamplingParams(temperature=0.0, max_tokens=512)

_SYSTEM = """\
You are the reward model of an agent's episode in a {domain} environment. You receive the \
task the agent was given and every action it took with the environment's observation. \
Decide from the observations alone whether the task was achieved in the environment's \
final state: an agent saying it is done is not evidence; an error, an unfinished step or a \
later action undoing the work means it was not achieved.

{rubric}
Answer with reasoning first if you need it, then one JSON object on its own line:
{{"achieved": true or false, "reward": a number from 0 to 1 (1 = fully achieved, partial \
credit only for measurable partial progress), "rationale": "one or two sentences"}}"""


@dataclass(frozen=True)
class RewardVerdict:
    """A reward model's decision.

    Attributes:
        reward: in [0, 1], or ``None`` when the judge could not be read.
        rationale: the judge's short reason.
        raw: the judge's last answer text.
        error: why ``reward`` is ``None``.
    """

    reward: float | None
    rationale: str = ""
    raw: str = ""
    error: str | None = None


def build_reward_messages(traj: Trajectory, rubric: str = "", max_observation_chars: int = 4000) -> list[dict]:
    """The judge's messages for ``traj`` (observations longer than ``max_observation_chars``
    are cut in the middle, marked)."""
    def cut(text: str) -> str:
        if len(text) <= max_observation_chars:
            return text
        half = max_observation_chars // 2
        return f"{text[:half]}\n[… {len(text) - 2 * half} characters cut …]\n{text[-half:]}"

    parts = [f"## Task\n{traj.task}", f"## Initial observation\n```\n{cut(traj.initial_observation)}\n```"]
    for t in traj.turns:
        parts.append(f"## Turn {t.index}\nAction:\n```\n{t.action}\n```\nObservation:\n```\n{cut(t.observation)}\n```")
    parts.append("Was the task achieved? Answer with the JSON object.")
    system = _SYSTEM.format(domain=traj.domain, rubric=(rubric.strip() + "\n") if rubric else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def parse_verdict(text: str) -> RewardVerdict:
    """Read a judge's answer (see the module docstring)."""
    answer, _, _ = split_reasoning(text or "")
    for obj in reversed(json_objects(answer) or json_objects(text or "")):
        if not isinstance(obj, dict):
            continue
        low = {str(k).lower(): v for k, v in obj.items()}
        reward = low.get("reward", low.get("score"))
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            reward = None
        achieved = low.get("achieved")
        if reward is None and isinstance(achieved, bool):
            reward = 1.0 if achieved else 0.0
        if reward is None:
            continue
        return RewardVerdict(min(1.0, max(0.0, float(reward))), str(low.get("rationale", "")).strip(), text)
    return RewardVerdict(None, "", text, "no JSON verdict with 'reward' or 'achieved' in the judge's answer")


async def judge_reward(model: ChatModel, traj: Trajectory, *, rubric: str = "",
                       sampling: SamplingParams = JUDGE_SAMPLING, attempts: int = 2) -> RewardVerdict:
    """Ask ``model`` whether ``traj``'s task was achieved.

    Args:
        model: the judge.
        traj: the episode (its ``task`` is the instruction).
        rubric: domain-specific success criteria added to the judge's instructions.
        sampling: the judge's decoding settings.
        attempts: tries before giving up on an unreadable or failed answer (later tries
            sample at temperature 0.7 with another seed).

    Returns:
        the verdict; model errors are reported in ``error``, never raised.
    """
    messages = build_reward_messages(traj, rubric)
    verdict = RewardVerdict(None, error="no attempt made")
    for attempt in range(max(1, attempts)):
        s = sampling if attempt == 0 else SamplingParams(
            temperature=0.7, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
            seed=(sampling.seed or 0) + attempt, stop=sampling.stop, extra_body=sampling.extra_body)
        try:
            gen = await model.generate(messages, s)
        except Exception as e:  # counted by the caller through ``error``
            verdict = RewardVerdict(None, error=f"{type(e).__name__}: {e}")
            continue
        verdict = parse_verdict(gen.text if not gen.reasoning else f"<think>{gen.reasoning}</think>{gen.text}")
        if verdict.reward is not None:
            return verdict
    return verdict


async def judge_verdict(model: ChatModel, traj: Trajectory) -> RewardVerdict:
    """P(achieved) of ``traj`` from ``model``'s log-probabilities of the two verdict answers
    (:mod:`lwm.verdict`); one forward pass over the prompt, no text generated. A coroutine:
    ``asyncio.run(judge_verdict(model, traj))``.

    Args:
        model: a model that scores answers (``answer_logprobs``: the llama.cpp, transformers
            and OpenAI-compatible backends; a served model must return log-probabilities).
        traj: the episode (its ``task`` is the instruction).

    Returns:
        the verdict: ``reward`` is the probability, ``rationale`` says it; a model that
        cannot score answers, fails, or gives neither answer any probability gives
        ``reward=None`` with ``error`` (counted by the caller, never guessed). An episode
        in which no action reached the environment (none taken, or every one refused as
        malformed: :meth:`~lwm.domains.base.Domain.refusal`) achieved nothing: 0, without
        asking the model (measured: the trained verdict paid such episodes in closed loop).
        Nor did one, in a domain whose agents type the task's values
        (:attr:`~lwm.domains.base.Domain.actions_name_values`), in which some value of the task
        is named by no action (:func:`lwm.verdict.unnamed_values`: another text, name or path;
        measured in ``docs/results.md``, "The task's values").
    """
    spec = domains.find(traj.domain)
    if not any(spec is None or spec.refusal(t.action) is None for t in traj.turns):
        return RewardVerdict(0.0, "no action reached the environment")
    if spec is not None and spec.actions_name_values and (missing := unnamed_values(traj)):
        return RewardVerdict(0.0, f"no action names the task's {', '.join(map(repr, missing[:3]))}")
    scorer = getattr(model, "answer_logprobs", None)
    if scorer is None:
        return RewardVerdict(None, error=f"{model.name} cannot score answers (no answer_logprobs)")
    try:
        achieved, not_achieved = await scorer(verdict_messages(traj), list(ANSWERS))
        p = probability(achieved, not_achieved)
    except Exception as e:  # counted by the caller through ``error``
        return RewardVerdict(None, error=f"{type(e).__name__}: {e}")
    return RewardVerdict(round(p, 6), f"P(achieved) = {p:.3f}")
