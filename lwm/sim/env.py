"""The world model as an environment: :class:`SimEnv`.

``reset(task)`` gives the initial observation, ``step(action)`` asks the world model for
the next one given the system prompt and the history so far, keeps only the observation
(never the reasoning) in the history, and returns it. The episode's state is its history:
:meth:`SimEnv.fork` copies it cheaply for branching and group sampling. At episode end a
reward model (:func:`lwm.sim.reward.judge_reward`) may decide whether the task was achieved.

The prompt is the one ``lwm eval`` scores (:func:`lwm.prediction.request`, in the model's
prediction mode), so a model's measured fidelity is the fidelity of the simulator built on
it; a model that writes changes has each full observation drawn from the episode's last.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import time
from collections.abc import MutableMapping
from typing import Any, Literal, get_args

from lwm import domains
from lwm.candidates import candidate_scoring, choose
from lwm.envs.base import StepResult, Task
from lwm.envs.cache import cache_key
from lwm.errors import EnvironmentClosedError
from lwm.loop import run_sync
from lwm.models.base import ChatModel, SamplingParams
from lwm.parse import DEFAULT_STOP, parse_output
from lwm.prediction import Prediction, model_observation, request, request_format, row_prediction
from lwm.schema import Provenance, Trajectory, Turn, rows_from_trajectory
from lwm.sim.controls import Control, apply_controls

RewardSource = Literal["verdict", "probe", "judge", "auto"]
REWARD_SOURCES: tuple[str, ...] = get_args(RewardSource)
#: The reward source when none is named: the trained verdict, which recognises more real successes
#: than the probe and pays no more failures in closed loop (docs/results.md, "Rejection sampling
#: with the sixth stage": the probe recognised none of 66).
DEFAULT_REWARD: RewardSource = "verdict"

#: Decoding settings of a simulated step unless given: greedy, room for a screen or a page.
DEFAULT_SAMPLING = SamplingParams(temperature=0.0, max_tokens=512, stop=DEFAULT_STOP)


def with_initial_state(system_prompt: str, task: Task) -> str:
    """The world-model system prompt of ``task``: ``system_prompt`` and, when the task seeds
    files or runs setup steps the prompt does not already show, that initial state (the
    world model must know what the agent will find; the agent does not see it)."""
    setup = [step for step in task.setup if step not in system_prompt]
    if not task.files and not setup:
        return system_prompt
    parts = [system_prompt, "", "The state of the environment when the episode starts (not shown to the agent):"]
    for path, content in task.files.items():
        shown = content if len(content) <= 2000 else content[:2000] + f"\n[… {len(content) - 2000} more characters]"
        parts.append(f"File {path}:\n```\n{shown}\n```")
    if setup:
        parts.append("Prepared before the first action:\n```\n" + "\n".join(setup) + "\n```")
    return "\n".join(parts)


class SimEnv:
    """A simulated environment of ``domain`` backed by a world model.

    Args:
        domain: e.g. ``terminal``.
        model: the world model (any :class:`~lwm.models.base.ChatModel`).
        system_prompt: the world-model system prompt; default: the task's
            ``options["system_prompt"]``, else the domain's default.
        sampling: decoding settings of each step (:data:`DEFAULT_SAMPLING`).
        max_prompt_tokens: history budget; the oldest turns are dropped first.
        max_turns: the episode is cut (``truncated``) after this many steps.
        controls: simulation controls (:class:`~lwm.sim.controls.Control`).
        reward_model: the judge of task success at episode end (default: the trained verdict
            model, :data:`lwm.models.VERDICT_MODEL`, for the verdict; ``model`` for
            ``judge``); set ``judge_rewards=False`` to leave rewards to the caller.
        judge_rewards: ask the reward model when the episode ends.
        judge_every_step: ask it after every step too (dense rewards: the verdict on the
            episode so far); implies ``judge_rewards``.
        judge_sampling: the reward model's decoding settings
            (:data:`lwm.sim.reward.JUDGE_SAMPLING`).
        reward: where the verdict comes from: ``verdict`` (the trained reward model's
            P(achieved) from its probabilities of two fixed answers, :mod:`lwm.verdict`),
            ``probe`` (the world model predicts what the task's verifier probe would show in
            the final state, and the verifier's own comparison is applied: privileged
            verification through the world model's dynamics), ``judge`` (a free-form judge
            reads the episode, with the domain's reward rubric), or ``auto`` (the probe when
            the task has a verifier, else the verdict). Default: :data:`DEFAULT_REWARD`.
        memo: a mapping shared by environments (a GRPO group, a rollout) in which each
            prediction is kept by its situation (system prompt, history, action, model,
            sampling): the same situation gets the same observation and costs one model
            call, also when the environments ask at the same moment (an entry is the
            prediction's future, set once; a failed prediction is dropped and raised to
            those waiting). Environments sharing one must run on one event loop.
        show_task: show the world model the agent's instruction (AgentWorldBench rows carry
            it); a world model that knows the goal may bend observations toward it, so RL
            in the simulator can hide it.
        real_start: start episodes from the real environment's initial observation and
            system prompt for the task (read once per task by a real reset, cached in
            ``$LWM_HOME/starts.sqlite``; no real step is taken), instead of asking the
            world model to write them. A domain whose system prompt needs the real
            environment's settings (fs, mcp: the server's tool list) takes its prompt, and
            unless one is given its initial observation, from a real start whenever no
            system prompt is given.
        prediction: what the world model writes (:mod:`lwm.prediction`): ``full`` or
            ``change`` (drawn into the full observation from the episode's last one);
            not given: the model's own (``change`` for an adapter trained on changes).
        compact_tools: send tool lists as one-line signatures (:func:`lwm.prompts.compact_tools`);
            not given: as the model was trained.
        score_candidates: let the world model choose, by its own likelihood, between its
            answer, the previous observation and the domain's trivial guess
            (:mod:`lwm.candidates`; the embedded and transformers models). Off by default.

    Raises:
        UnknownDomainError: ``domain`` is not registered.
        ValueError: an unknown reward source; ``score_candidates`` for a model that cannot
            score answers.

    Example:
        >>> env = SimEnv("terminal", load_model("embedded-warmup"))  # doctest: +SKIP
        >>> env.reset(Task("demo"), initial_observation="root@sandbox:/app#")  # doctest: +SKIP
        >>> env.step('[{"keystrokes": "pwd\\\\n", "duration": 0.3}]').observation  # doctest: +SKIP
    """

    def __init__(self, domain: str, model: ChatModel, *, system_prompt: str | None = None,
                 sampling: SamplingParams = DEFAULT_SAMPLING, max_prompt_tokens: int = 2048,
                 max_turns: int = 50, controls: tuple[Control, ...] = (), reward_model: ChatModel | None = None,
                 judge_rewards: bool = True, judge_every_step: bool = False,
                 judge_sampling: SamplingParams | None = None, reward: RewardSource = DEFAULT_REWARD,
                 memo: MutableMapping[str, asyncio.Future] | None = None, real_start: bool = False,
                 show_task: bool = True, prediction: Prediction | None = None,
                 compact_tools: bool | None = None, score_candidates: bool = False) -> None:
        if reward not in REWARD_SOURCES:
            raise ValueError(f"unknown reward source {reward!r} ({', '.join(REWARD_SOURCES)})")
        self.spec = domains.get(domain)
        self.domain = domain
        self.model = model
        self.sampling = sampling
        self.max_prompt_tokens = max_prompt_tokens
        self.max_turns = max_turns
        self.controls = tuple(controls)
        self._reward_model = reward_model
        self.judge_rewards = judge_rewards or judge_every_step
        self.judge_every_step = judge_every_step
        self.judge_sampling = judge_sampling
        self.reward = reward
        self.memo = memo
        self.real_start = real_start
        self.show_task = show_task
        self.prediction, self.compact_tools = request_format(model, prediction, compact_tools)
        self.score_candidates = candidate_scoring(model, score_candidates)
        self._system_prompt = system_prompt
        self.task: Task | None = None
        self.trajectory: Trajectory | None = None
        self.parse_issues: dict[str, int] = {}

    @property
    def reward_model(self) -> ChatModel:
        """The reward model: the one given, else (loaded on first use, once per process) the
        trained verdict model for the ``verdict`` reward and the world model for ``judge``."""
        if self._reward_model is None:
            from lwm.models import ModelSpec, reward_model_for

            name = reward_model_for(self.reward, None)
            self._reward_model = ModelSpec(name).load() if name else self.model
        return self._reward_model

    # -- the protocol ----------------------------------------------------------------
    def system_prompt(self) -> str:
        if self.trajectory is not None:
            return self.trajectory.system_prompt
        return apply_controls(self._base_prompt(self.task), self.controls)

    def _base_prompt(self, task: Task | None) -> str:
        if self._system_prompt is not None:
            return self._system_prompt
        if task is not None and task.options.get("system_prompt"):
            return str(task.options["system_prompt"])
        return self.spec.system_prompt()

    def reset(self, task: Task | None = None, initial_observation: str | None = None) -> str:
        """Start an episode (blocking; see :meth:`areset`)."""
        return run_sync(self.areset(task, initial_observation))

    async def areset(self, task: Task | None = None, initial_observation: str | None = None) -> str:
        """Start an episode; return the initial observation: ``initial_observation``, else
        the task's ``options["initial_observation"]``, else one the world model writes from
        the system prompt and the task's description (``info`` of the first step does not
        include it; the trajectory's ``metadata["initial_observation"]`` says ``generated``).

        Raises:
            whatever the model raises while generating the initial observation.
        """
        task = task or Task("simulated")
        first = initial_observation if initial_observation is not None else task.options.get("initial_observation")
        origin, reward_at_start = "given", None
        own_prompt = self._system_prompt is not None or bool(task.options.get("system_prompt"))
        # a domain whose prompt needs the real environment's settings (fs, mcp: the server's
        # tool list) takes it from a real start when none is given
        needs_settings = not own_prompt and any(
            p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            for p in inspect.signature(self.spec.system_prompt).parameters.values())
        if (first is None and self.real_start) or needs_settings:
            from lwm.sim.starts import real_start

            start = await asyncio.to_thread(real_start, self.domain, task)
            if first is None:
                first, origin, reward_at_start = start.initial_observation, "real", start.reward
            base = self._base_prompt(task) if own_prompt else start.system_prompt
        else:
            base = self._base_prompt(task)
        system_prompt = apply_controls(with_initial_state(base, task), self.controls)
        if first is None:
            first, origin = await self._generate_initial(system_prompt, task), "generated"
        self.task = task
        self.parse_issues = {}
        self.trajectory = Trajectory(
            id=f"{self.domain}/{task.name}/sim", domain=self.domain, task=task.instruction,
            system_prompt=system_prompt, initial_observation=str(first),
            metadata={"episode": task.name, "family": task.family or task.name, "backend": "sim",
                      "controls": [c.label() for c in self.controls], "initial_observation": origin},
        )
        if reward_at_start is not None:
            self.trajectory.metadata["reward_at_start"] = reward_at_start
        return str(first)

    async def _generate_initial(self, system_prompt: str, task: Task) -> str:
        what = f"The agent's task: {task.instruction}\n\n" if task.instruction else ""
        messages = [{"role": "system", "content": system_prompt},
                    {"role": "user", "content": f"### Start of the episode\n\n{what}Before any action, what does the "
                                                "agent observe? Write the environment's initial observation inside "
                                                "<predicted_observation></predicted_observation>."}]
        gen = await self.model.generate(messages, self.sampling)
        stopped = self.sampling.stop if gen.finish_reason == "stop" else ()
        return parse_output(gen.text, gen.reasoning, stopped_at=stopped).observation

    def step(self, action: str) -> StepResult:
        """Predict the next observation (blocking; see :meth:`astep`)."""
        return run_sync(self.astep(action))

    async def astep(self, action: str) -> StepResult:
        """Predict the observation that follows ``action``.

        Returns:
            the observation (reasoning removed) with ``info`` holding ``reasoning``,
            ``parse_issues``, ``seconds``, token counts and ``provenance``; ``done`` when
            the action ends the episode (``terminated``) or ``max_turns`` is reached (``truncated``),
            and then the judged ``reward`` if ``judge_rewards`` (after every step with
            ``judge_every_step``). An action the domain's real environment refuses as
            malformed gets that environment's answer, not the model's
            (:meth:`~lwm.domains.base.Domain.refusal`; ``info["action_error"]``, provenance
            ``<domain>/refusal``), as the ``real`` backend gives it; so does an action whose
            answer it alone decides (:meth:`~lwm.domains.base.Domain.certain`: a cell or an SQL
            statement that does not parse; provenance ``<domain>/certain``).

        Raises:
            EnvironmentClosedError: not reset.
            whatever the model raises (the turn is not recorded then).
        """
        traj = self._require()
        t0 = time.monotonic()
        previous = traj.turns[-1].observation if traj.turns else traj.initial_observation
        if (refused := self.spec.refusal(action, previous)) is not None:
            # answered as the real environment answers it: a malformed action reaches nothing
            prov = Provenance(kind="simulated", source=f"{self.domain}/refusal")
            predicted = {"observation": refused.observation, "action_error": refused.reason, "parse_issues": []}
        elif (certain := self.spec.certain(action, [(t.action, t.observation) for t in traj.turns],
                                           traj.system_prompt, traj.initial_observation)) is not None:
            prov = Provenance(kind="simulated", source=f"{self.domain}/certain")  # the action alone decides it
            predicted = {"observation": certain, "parse_issues": []}
        else:
            prov = Provenance(kind="simulated", source=self.model.name, sampling=self.sampling.to_dict(),
                              controls=[c.label() for c in self.controls] or None)
            predicted = await self._predict(action)
        for issue in predicted["parse_issues"]:
            self.parse_issues[issue] = self.parse_issues.get(issue, 0) + 1
        if predicted["parse_issues"]:
            traj.metadata["parse_issues"] = dict(self.parse_issues)
        index = len(traj.turns) + 1
        traj.turns.append(Turn(index=index, action=action, observation=predicted["observation"], provenance=prov))
        ended = self.spec.ends_episode(action)
        budget = self.task.turn_budget(self.max_turns) if self.task is not None else self.max_turns
        truncated = not ended and index >= budget  # the task's own budget, under the run's ceiling
        info: dict[str, Any] = {**{k: v for k, v in predicted.items() if k != "observation"},
                                "seconds": round(time.monotonic() - t0, 3),
                                "provenance": prov.model_dump(exclude_none=True)}
        reward = None
        if self.judge_every_step or (ended or truncated) and self.judge_rewards:
            reward = await self.averify()
        return StepResult(predicted["observation"], reward=reward, terminated=ended, truncated=truncated, info=info)

    async def _predict(self, action: str) -> dict[str, Any]:
        """The world model's answer to ``action`` after the episode so far (not recorded):
        ``observation``, ``reasoning``, ``parse_issues``, ``dropped_turns``, token counts,
        ``memo_hit``."""
        traj = self._require()
        placeholder = Provenance(kind="simulated", source=self.model.name)
        pending = traj.model_copy(update={"turns": [*traj.turns, Turn(index=len(traj.turns) + 1, action=action,
                                                                      observation="", provenance=placeholder)],
                                          "task": traj.task if self.show_task else ""})
        if self.memo is None:
            return await self._generate(pending)
        key = cache_key(self.domain, traj.system_prompt, [("", traj.initial_observation)] +
                        [(t.action, t.observation) for t in traj.turns], action, self.model.name,
                        {**self.sampling.to_dict(), "prediction": self.prediction, "compact_tools": self.compact_tools,
                         "score_candidates": self.score_candidates})
        if (known := self.memo.get(key)) is not None:
            return {**await asyncio.shield(known), "memo_hit": True}
        future = self.memo[key] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # a failure is its waiters' to raise
        try:
            out = await self._generate(pending)
        except BaseException as e:
            del self.memo[key]  # the next asker tries again
            future.cancel() if isinstance(e, asyncio.CancelledError) else future.set_exception(e)
            raise
        future.set_result(out)
        return out

    async def _generate(self, pending: Trajectory) -> dict[str, Any]:
        """The world model's prediction for the last turn of ``pending``."""
        row = rows_from_trajectory(pending, action_lang=self.spec.action_lang, last_only=True)[-1]
        messages, dropped = request(row, self.prediction, self.model.count_tokens, self.max_prompt_tokens,
                                    compact=self.compact_tools)
        gen = await self.model.generate(messages, self.sampling)
        stopped = self.sampling.stop if gen.finish_reason == "stop" else ()
        parsed = parse_output(gen.text, gen.reasoning, stopped_at=stopped, truncated=gen.finish_reason == "length")
        observation, issues = model_observation(row, parsed.observation, parsed.issues, self.prediction)
        written = parsed.observation
        chosen = {}
        if self.score_candidates:
            choice = await choose(self.model, messages, row, self.prediction, parsed.observation)
            observation, written, chosen = choice.observation, choice.written, {"candidate": choice.source}
        changed = {"change": written} if row_prediction(row, self.prediction) == "change" else {}
        out = {"observation": observation, **changed, **chosen,
               "reasoning": parsed.reasoning, "parse_issues": issues,
               "dropped_turns": dropped, "prompt_tokens": gen.prompt_tokens,
               "completion_tokens": gen.completion_tokens, "memo_hit": False}
        return out

    def verify(self) -> float | None:
        """The reward model's verdict on the episode so far (blocking; see :meth:`averify`)."""
        return run_sync(self.averify())

    async def averify(self) -> float | None:
        """The verdict on the episode so far: a reward in [0, 1], also stored on the
        trajectory (``metadata["reward_source"]``: ``verdict``, ``probe`` or ``judge``; with
        the probe's predicted observation in ``metadata["probe_observation"]``, or the
        reward model's ``reward_rationale``); ``None`` when there is nothing to judge (no
        verifier for ``probe``, no instruction for the reward model) or the reward model
        gave no verdict (``metadata["reward_error"]``). The probe is asked on a copy of the
        history: it is never part of the episode. An episode from a real start whose every
        action ran nothing (answered by the domain itself: refused as malformed, or a certain
        answer) has the real verifier's verdict on that start (``reward_source``
        ``unchanged``), whatever the source."""
        traj = self._require()
        if (start := traj.metadata.get("reward_at_start")) is not None and all(
                t.provenance.source in (f"{self.domain}/certain", f"{self.domain}/refusal") for t in traj.turns):
            traj.reward = start
            traj.metadata.update({"reward_source": "unchanged", "reward_rationale": (
                "every action ran nothing (refused, or answered by the domain's rules): the real verifier's "
                "verdict on the start")})
            return traj.reward
        check = self.task.check if self.task is not None else None
        # auto: the probe where the task has a verifier (its errors are misses), else the
        # trained verdict (in closed loop it pays failures: docs/results.md, stage 2)
        source = ("probe" if check is not None else "verdict") if self.reward == "auto" else self.reward
        if source == "verdict":
            return await self._verdict(traj)
        if source == "probe":
            if check is None:
                traj.metadata["reward_error"] = "the task has no verifier to probe"
                return None
            predicted = await self._predict(self.spec.probe_action(check.probe))
            seen = self.spec.probe_output(check.probe, predicted["observation"])
            traj.metadata.update({"reward_source": "probe", "probe_observation": seen,
                                  "probe_parse_issues": predicted["parse_issues"]})
            if "truncated" in predicted["parse_issues"]:  # a cut answer decides nothing: the verdict is unknown
                traj.reward = None
                traj.metadata["reward_error"] = "the world model's answer to the probe was cut at max_tokens"
                return None
            traj.reward = 1.0 if check.passes(seen) else 0.0
            return traj.reward
        if not traj.task:
            return None
        from lwm.sim.reward import JUDGE_SAMPLING, judge_reward

        verdict = await judge_reward(self.reward_model, traj, rubric=self.spec.reward_rubric,
                                     sampling=self.judge_sampling or JUDGE_SAMPLING)
        traj.reward = verdict.reward
        traj.metadata.update({"reward_source": "judge", "reward_rationale": verdict.rationale,
                              "reward_raw": verdict.raw})
        if verdict.error:
            traj.metadata["reward_error"] = verdict.error
        return verdict.reward

    async def _verdict(self, traj: Trajectory) -> float | None:
        from lwm.sim.reward import judge_verdict

        traj.metadata["reward_source"] = "verdict"
        if not traj.task:
            traj.reward = None
            traj.metadata["reward_error"] = "the episode has no instruction to judge"
            return None
        verdict = await judge_verdict(self.reward_model, traj)
        traj.reward = verdict.reward
        traj.metadata["reward_rationale"] = verdict.rationale
        if verdict.error:
            traj.metadata["reward_error"] = verdict.error
        return verdict.reward

    def fork(self) -> SimEnv:
        """An independent copy of this episode (same model, copied history)."""
        twin = copy.copy(self)
        twin.trajectory = self.trajectory.model_copy(deep=True) if self.trajectory else None
        twin.parse_issues = dict(self.parse_issues)
        return twin

    def snapshot(self) -> Trajectory:
        """The episode so far (a deep copy)."""
        return self._require().model_copy(deep=True)

    def restore(self, snapshot: Trajectory) -> None:
        """Continue from a :meth:`snapshot`."""
        self.trajectory = snapshot.model_copy(deep=True)

    def close(self) -> None:
        """End the episode (the model stays loaded; close it yourself). Safe to call twice."""
        self.trajectory = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require(self) -> Trajectory:
        if self.trajectory is None:
            raise EnvironmentClosedError("call reset() before step()")
        return self.trajectory
