"""Rejection-sampling fine-tuning of an agent inside the simulator (``lwm train rft``).

A cheaper alternative to GRPO (:mod:`lwm.train.rl`): the policy attempts every task several
times at a sampling temperature, the environment's reward decides which attempts succeeded,
and the policy is fine-tuned (SFT, LoRA) on the answers of the accepted attempts — its own
successful behaviour, made more likely. On the ``sim`` backend the world model plays the
environment and the reward model judges (the trained verdict of :mod:`lwm.verdict` by
default, or the verifier's probe through the world model); the only real steps are the
resets that read each task's initial observation (counted in the summary). On ``real``,
the same with the real environment and verifier: the reference at the same budget.

The prompt of a training example is exactly the agent's prompt in evaluation
(:func:`lwm.sim.policy.agent_messages`), the completion the action it ran, written alone: the
turns of an accepted attempt up to the first after which the reward already accepts the episode
so far (an action after it may undo it), optionally ``DONE`` there, or every turn (``learn``,
:data:`LEARN`).

Output directory (resumable: re-run with the same one)::

    attempts.partial.jsonl   the job journal: one trajectory per attempt
    attempts.jsonl           every attempt, with its reward
    achieved.partial.jsonl   the job journal of the accepted attempts' shorter episodes, judged
    anchors.partial.jsonl    the job journal of the anchor rows (``anchor_tasks``)
    data/train.jsonl         the accepted attempts' well-formed actions (and DONE), then the anchor
                             rows, as prompt-completion rows
    adapter/, adapter.gguf   the fine-tuned LoRA adapter and its llama.cpp form
    lwm_train.json           settings (``lwm agent eval --policy OUT`` plays the result)
    rft.json                 counts: attempts, accepted per domain and family, paid by the reward but
                             refused as ill formed, achieved before their last turn, shorter
                             episodes judged, real and simulated steps, times
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from lwm import domains
from lwm.domains import Domain
from lwm.domains.tasks import read_task_file, refuse_heldout, task_file_digest, task_set
from lwm.envs.base import Task
from lwm.errors import DataNotFoundError, JobsFailedError
from lwm.jobs import JobReport, run_jobs
from lwm.jsonl import check_run_settings, dumps, read_json, write_atomic
from lwm.models import NAMED, WORLD_MODEL, ModelSpec
from lwm.schema import Trajectory, episode_problem, write_trajectories
from lwm.sim.backends import TASK_BACKENDS, EnvFactory, backend_spec, task_env_factory
from lwm.sim.env import DEFAULT_REWARD
from lwm.sim.policy import DONE, PolicySpec, action_text, agent_messages, fenced_action, well_formed_answer
from lwm.sim.rollout import EpisodeJob, play_for_real
from lwm.train.records import check_lr

POLICIES = ("embedded", "embedded-warmup")

#: What is learned of an accepted attempt (:func:`accepted_examples`): ``until-achieved``, its
#: turns up to the first after which the reward already accepts the episode so far
#: (:func:`achieved_turns`; a later action can undo what it achieved);
#: ``until-achieved-then-done``, those and then ``DONE`` (the policy learns to stop);
#: ``until-achieved-then-done-once``, the same with one ``DONE`` row per task (after the first of
#: its accepted attempts that is given one), not one per accepted attempt; or ``every-turn``.
LEARN = ("until-achieved", "until-achieved-then-done", "until-achieved-then-done-once", "every-turn")

#: Which accepted attempts are followed by a ``DONE`` row, per ``learn`` (:func:`accepted_examples`).
DONE_ROWS = {"until-achieved-then-done": "every-attempt", "until-achieved-then-done-once": "once-per-task"}

#: How a learned answer is written, per ``form`` (:func:`accepted_examples`): ``(domain, the
#: answer as the policy wrote it) -> the completion``.
FORMS: dict[str, Callable[[Domain, str], str]] = {
    "action": lambda domain, answer: action_text(answer),
    "fenced": fenced_action,
    "as-written": lambda domain, answer: answer,
}


@dataclass
class RFTConfig:
    """Settings of ``lwm train rft``.

    Attributes:
        out: run directory (re-run with the same one to resume).
        domains: domains whose train task families are attempted (empty: ``terminal``,
            or with ``tasks_file`` every domain of the file).
        tasks: tasks per domain (train families).
        tasks_file: attempt the tasks of this task file instead (``lwm agent curriculum``
            writes one of the families worth training on).
        samples: attempts per task.
        policy: the policy that attempts and is fine-tuned: ``embedded`` (SmolLM2-135M-Instruct),
            ``embedded-warmup`` (the same after the world-model warm-up: the seed's full row), or
            the directory of an earlier ``lwm train rft`` run, whose policy then attempts and
            whose adapter is trained further (a second round: expert iteration).
        temperature: the policy's sampling temperature.
        max_turns: actions per attempt at most.
        backend: ``sim`` (the world model and the reward model) or ``real``.
        world_model: the world model of ``sim``.
        reward: the reward source of ``sim``: ``verdict``, ``probe``, ``judge`` or ``auto`` (the
            probe for tasks with a verifier, else the trained verdict; :class:`~lwm.sim.env.SimEnv`).
        threshold: an attempt is accepted when its reward is at least this, in (0, 1] (and,
            with ``well_formed_only``, its answers are well formed).
        well_formed_only: accept an attempt only when each of its answers was one well-formed
            action and nothing else (:func:`~lwm.sim.policy.well_formed_answer`): a reward model
            can pay prose the simulator silently ran (``docs/results.md``, stage 2), and the
            policy must not learn to write it. Without it an attempt is accepted whatever its
            answers, and only its well-formed actions are learned (:func:`accepted_examples`).
        learn: what is learned of an accepted attempt: ``until-achieved``, its turns up to the
            first after which the reward already accepts the episode so far (the shorter
            episodes judged again: by the reward model on ``sim``, replayed and verified on
            ``real``; an action after it may undo it); ``until-achieved-then-done``, those and
            then ``DONE``; ``until-achieved-then-done-once``, the same with one ``DONE`` row a
            task; or ``every-turn`` (runs before session 14). Measured (``docs/results.md``,
            session 14), the same attempts learned three ways: 20.5 %, 16.5 % and 17.5 % on
            unseen tasks; a ``DONE`` row after every accepted attempt (47 % of the rows) taught
            the policy to answer ``DONE`` before acting on families it was not trained on.
        form: how each learned answer is written, the earlier answers in the prompt too:
            ``fenced``, the action in one code block of the tool's language and nothing
            around it, as the model writes actions unasked; ``action``, the action alone, as
            the agent's system prompt asks (the default until session 16); ``as-written``,
            the answer as the policy wrote it (prose, fences and all, as evaluation shows it).
            The turns learned are the same. Measured on the same rows (``docs/results.md``,
            "Keeping the held-out families"): the action alone taught the policy to begin
            every db answer with the one statement it was trained on and lose held-out
            families the base model solves; as written kept them and taught the prose too;
            fenced kept them and learned as much as the action alone.
        anchor_tasks: a task file whose tasks anchor the policy: each task's first prompt is
            learned with the reference model's own greedy answer, as written — the model the
            policy's adapter applies to, without the adapter (``embedded``). Where the reward
            gives no evidence (``lwm agent curriculum RUN --low 0 --high 0`` writes tasks of
            the training families the policy never solves), the round then pulls the policy
            back to the reference instead of letting the accepted families' habits spread to
            every instruction (rows of the reference's behaviour standing in for the KL term of
            PPO and GRPO). Each task costs one real reset, counted.
        max_steps: SFT optimizer steps.
        lr: SFT learning rate.
        lora_r: LoRA rank.
        seed: seed of the task set and of the attempts (attempt k samples with seed + k).
    """

    out: Path
    domains: tuple[str, ...] = ()
    tasks: int = 32
    tasks_file: Path | None = None
    samples: int = 4
    policy: str = "embedded"
    temperature: float = 1.0
    max_turns: int = 1
    backend: str = "sim"
    world_model: str = WORLD_MODEL
    reward: str = DEFAULT_REWARD
    threshold: float = 0.5
    well_formed_only: bool = True
    learn: str = "until-achieved"
    form: str = "fenced"
    anchor_tasks: Path | None = None
    max_steps: int = 30
    lr: float = 1e-4
    lora_r: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        from lwm.sim.env import REWARD_SOURCES

        self.out = Path(self.out)
        self.domains = tuple(dict.fromkeys(self.domains))
        if self.policy not in POLICIES:
            self.policy = str(earlier_round(self.policy, self.out).resolve())
        backend_spec(self.backend, allowed=TASK_BACKENDS)
        if self.learn not in LEARN:
            raise ValueError(f"learn must be one of {', '.join(LEARN)}, not {self.learn!r}")
        if self.form not in FORMS:
            raise ValueError(f"form must be one of {', '.join(FORMS)}, not {self.form!r}")
        if self.reward not in REWARD_SOURCES:
            raise ValueError(f"unknown reward source {self.reward!r} ({', '.join(REWARD_SOURCES)})")
        for name in ("tasks", "samples", "max_turns", "max_steps", "lora_r"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.seed <= 2**31 - self.samples:  # llama.cpp's seeds are 32-bit; 2**32 - 1 means "random"
            raise ValueError(f"seed must be in [0, 2**31 - samples], got {self.seed}")
        if not 0 < self.threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"temperature must be a finite number ≥ 0, got {self.temperature}")
        check_lr(self.lr)
        if self.out.exists() and not self.out.is_dir():
            raise FileExistsError(f"--out {self.out} is a file, not a directory")
        for name in ("tasks_file", "anchor_tasks"):
            if getattr(self, name) is not None and not Path(getattr(self, name)).is_file():
                raise DataNotFoundError(f"no task file {getattr(self, name)}")

    def settings(self) -> dict[str, Any]:
        """What makes two runs the same run (a resume must match)."""
        d = asdict(self)
        d.pop("out")
        d["domains"] = list(self.domains)
        d["model"] = d.pop("policy")  # the policy trained (read by lwm agent eval --policy OUT)
        if self.tasks_file:  # the file's content makes the task set; --tasks does not apply
            d["tasks_file"] = task_file_digest(self.tasks_file)
            d.pop("tasks")
        if self.anchor_tasks:
            d["anchor_tasks"] = task_file_digest(self.anchor_tasks)
        if not backend_spec(self.backend).simulates:
            for k in ("world_model", "reward"):
                d.pop(k)
        return d


#: What runs recorded before these settings existed did: they learned every answer the reward
#: paid, and every turn; and (sessions 13 and 14) the action alone — session 12's runs, which
#: record none of these, learned answers as written: resuming one is refused, not retrained.
_BEFORE_RULES = {"well_formed_only": False, "learn": "every-turn", "form": "action"}


def _recorded_defaults(settings: Path) -> dict[str, Any]:
    """:data:`_BEFORE_RULES`, with the ``form`` of a run recorded by session 15 (a boolean
    ``as_written`` then) read from its record."""
    recorded = read_json(settings) if settings.is_file() else {}
    if "as_written" in recorded and "form" not in recorded:
        return {**_BEFORE_RULES, "form": "as-written" if recorded["as_written"] is True else "action"}
    return _BEFORE_RULES


def earlier_round(policy: str | Path, out: str | Path) -> Path:
    """The directory of the earlier ``lwm train rft`` run that ``policy`` names, checked: its
    trained adapter (``adapter/``, ``adapter.gguf``) on a model of :data:`POLICIES`.

    Raises:
        ValueError: ``policy`` is neither a name of :data:`POLICIES` nor a finished run's
            directory, or it is ``out`` itself.
    """
    run = Path(policy)
    if not run.is_dir():
        shipped = (f" ({policy} is a shipped adapter; its LoRA weights are not kept in a trainable form: train from "
                   "embedded, or from an earlier run's directory)" if str(policy) in NAMED else "")
        raise ValueError(f"policy must be one of {', '.join(POLICIES)} (the models a new adapter is trained on) or an "
                         f"earlier lwm train rft run's directory, not {str(policy)!r}{shipped}")
    if run.resolve() == Path(out).resolve():
        raise ValueError(f"the policy's run {run} is the run directory itself: choose a new --out for the next round")
    missing = [f for f in ("adapter/adapter_config.json", "adapter.gguf", "lwm_train.json") if not (run / f).is_file()]
    if missing:
        raise ValueError(f"{run} is not a finished lwm train rft run (no {', '.join(missing)})")
    from lwm.train.rl import trained_model

    model = trained_model(run)
    if model not in POLICIES:
        raise ValueError(f"{run} trained {model!r}; a next round needs one of {', '.join(POLICIES)}")
    return run


def _policy(config: RFTConfig) -> PolicySpec:
    """The policy that attempts: a named model, or an earlier round's adapter on its model."""
    if config.policy in POLICIES:
        return PolicySpec(config.policy, temperature=config.temperature)
    from lwm.train.rl import policy_for

    name, adapter = policy_for(Path(config.policy))
    return PolicySpec(name, adapter=adapter, temperature=config.temperature)


def _reference(config: RFTConfig) -> PolicySpec:
    """The model the policy's adapter applies to, without the adapter, greedy: whose answers the
    anchor rows learn (:attr:`RFTConfig.anchor_tasks`)."""
    return replace(_policy(config), adapter=None, temperature=0.0)


def _task_file(path: Path, domains: tuple[str, ...]) -> list[tuple[str, Task]]:
    """The tasks of a task file in ``domains`` (all when empty), held-out families refused."""
    items = [(d, t) for d, t, _ in read_task_file(path) if not domains or d in domains]
    if not items:
        raise ValueError(f"{path} holds no task of {', '.join(domains) or 'any domain'}")
    refuse_heldout(items, path)
    return items


def anchor_row(factory: EnvFactory, reference: PolicySpec, task: Task) -> dict[str, Any]:
    """An anchor row (:attr:`RFTConfig.anchor_tasks`): the agent's first prompt for ``task``
    (its initial observation from the environment's reset, as an attempt's: the real start) and,
    as the completion, the ``reference`` policy's answer to it, as written (prose and fences
    too: the reference's behaviour is what the row keeps; ``cut``: the answer reached the
    policy's ``max_tokens``, as it does in evaluation). TRL prompt-completion, as
    :func:`accepted_examples`."""
    env = factory()
    try:
        first = env.reset(task)
    finally:
        env.close()
    agent = reference.make(factory.domain)
    start = Trajectory(id=task.name, domain=factory.domain, task=task.instruction, system_prompt="",
                       initial_observation=first)
    prompt = agent.messages(task, start)
    agent.act(task, start)
    said = agent.record()
    return {"domain": factory.domain, "family": task.family, "prompt": prompt,
            "completion": [{"role": "assistant", "content": said["agent_answers"][0]}],
            "cut": said["agent_finish_reasons"][0] == "length"}


def _anchor_problem(record: dict[str, Any]) -> str | None:
    completion = record.get("completion")
    whole = (isinstance(record.get("prompt"), list) and isinstance(completion, list) and len(completion) == 1
             and isinstance(completion[0], dict) and isinstance(completion[0].get("content"), str)
             and completion[0]["content"].strip())
    return None if whole else "not a prompt-completion row with an answer"


def _tasks(config: RFTConfig) -> list[tuple[str, Task]]:
    if config.tasks_file:
        items = _task_file(config.tasks_file, config.domains)
    else:
        items = [(d, t) for d in config.domains or ("terminal",) for t, _ in task_set(d, "train", config.tasks,
                                                                                        config.seed)]
    return items


def _factory(config: RFTConfig, domain: str) -> EnvFactory:
    return task_env_factory(domain, config.backend, ModelSpec(config.world_model), reward=config.reward,
                            max_turns=config.max_turns)


def answers_well_formed(traj: Trajectory) -> bool:
    """Whether each of an attempt's actions was written as one well-formed action and nothing
    else (:func:`~lwm.sim.policy.well_formed_answer`): its first ``len(turns)`` answers; the
    answer that ended it (``DONE``, or nothing but reasoning) is not an action and not checked."""
    spec = domains.get(traj.domain)
    return all(well_formed_answer(spec, a) for a in traj.metadata.get("agent_answers", [])[:len(traj.turns)])


def is_accepted(traj: Trajectory, threshold: float, well_formed_only: bool = True) -> bool:
    """Whether an attempt is learned from: its reward is known and at least ``threshold``, and
    (``well_formed_only``) its answers are well formed (:func:`answers_well_formed`)."""
    return bool(traj.turns) and traj.reward is not None and traj.reward >= threshold and (
        not well_formed_only or answers_well_formed(traj))


def accepted_examples(attempts: list[Trajectory], threshold: float, well_formed_only: bool = True,
                      achieved_after: Mapping[str, int] | None = None, done: str = "never",
                      form: str = "fenced") -> list[dict[str, Any]]:
    """The SFT rows of the accepted attempts (:func:`is_accepted`), one per turn learned: the
    agent's prompt as evaluation builds it and, as the completion, the policy's answer written
    in ``form`` (:data:`FORMS`: ``fenced``, the action in one code block of the tool's
    language, :func:`~lwm.sim.policy.fenced_action`; ``action``, the action alone,
    :func:`~lwm.sim.policy.action_text`; or ``as-written``), the earlier answers in its prompt
    written the same way (TRL prompt-completion). A turn whose action is not well formed
    (prose typed into the shell, ``Output:`` sent to sqlite3) is not learned; with
    ``well_formed_only`` there is none. An attempt whose answers were not recorded (fewer than
    its turns) is not learned.

    With ``achieved_after`` (an attempt's id → the turns after which its task was achieved,
    :func:`achieved_turns`), an attempt is learned up to that turn (one it does not name,
    whole). With ``done`` ``every-attempt``, ``DONE`` follows the turns learned (row id
    ``<attempt>/done``): the policy learns to stop — unless none of its actions was learned, or
    the last one ended the episode itself (the agent is not asked again); ``once-per-task``,
    only after the first such attempt of each task; ``never``, no ``DONE``.

    Raises:
        ValueError: ``done`` is none of ``never``, ``every-attempt``, ``once-per-task``, or
            ``form`` is not in :data:`FORMS`.
    """
    if done not in ("never", *DONE_ROWS.values()):
        raise ValueError(f"done must be never, every-attempt or once-per-task, not {done!r}")
    if form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}, not {form!r}")
    rows, stopped = [], set()   # stopped: the tasks already given a DONE row
    for traj in attempts:
        answers = traj.metadata.get("agent_answers", [])
        if not is_accepted(traj, threshold, well_formed_only) or len(answers) < len(traj.turns):
            continue
        task = Task.from_dict(traj.metadata["task_spec"])
        observations = [t.observation for t in traj.turns]
        spec = domains.get(traj.domain)
        ran = [action_text(a) for a in answers]
        said = [FORMS[form](spec, a) for a in answers]
        last = len(traj.turns) if achieved_after is None else achieved_after.get(traj.id, len(traj.turns))
        learned = [(f"turn{i + 1}", i, said[i]) for i, action in enumerate(ran[:last])
                   if well_formed_answer(spec, action)]
        key = (traj.domain, task.name)
        if (done != "never" and learned and not spec.ends_episode(traj.turns[last - 1].action)
                and not (done == "once-per-task" and key in stopped)):
            learned.append(("done", last, DONE))
            stopped.add(key)
        rows += [{"id": f"{traj.id}/{name}", "domain": traj.domain, "family": task.family,
                  "prompt": agent_messages(spec, task, traj.initial_observation, said[:turn], observations[:turn]),
                  "completion": [{"role": "assistant", "content": completion}]} for name, turn, completion in learned]
    return rows


def episode_reward(factory: EnvFactory, traj: Trajectory, turns: int) -> tuple[float | None, int]:
    """The reward of an attempt's first ``turns`` turns alone, judged as the whole attempt
    was: by the simulator's reward model (``sim``: the same source, from the same start), or
    played again in a fresh real environment and checked by the real verifier (``real``).

    Returns:
        the reward (``None``: no verdict) and the real steps it took (the reset and each action
        on ``real``; none on ``sim``).
    """
    task = Task.from_dict(traj.metadata["task_spec"])
    cut = traj.turns[:turns]
    if not backend_spec(factory.backend).simulates:
        return play_for_real(traj.domain, task, [t.action for t in cut]).reward, len(cut) + 1
    env = factory()
    env.task = task
    # what the reward source saw of the whole attempt, less its later turns and its verdict
    start = {"reward_at_start": traj.metadata["reward_at_start"]} if "reward_at_start" in traj.metadata else {}
    env.restore(traj.model_copy(update={"turns": cut, "reward": None, "metadata": start}))
    return env.verify(), 0


def achieved_turns(factory: EnvFactory, traj: Trajectory, threshold: float) -> dict[str, Any]:
    """After how many turns an accepted attempt had achieved its task: the first ``k`` whose
    episode of ``k`` turns the reward accepts (:func:`episode_reward` at least ``threshold``),
    else all its turns (the whole attempt was accepted).

    Returns:
        ``{"turns": k, "rewards": [the rewards of the shorter episodes judged], "real_steps": n}``.
    """
    rewards, real_steps = [], 0
    for k in range(1, len(traj.turns)):
        reward, steps = episode_reward(factory, traj, k)
        rewards.append(reward)
        real_steps += steps
        if reward is not None and reward >= threshold:
            return {"turns": k, "rewards": rewards, "real_steps": real_steps}
    return {"turns": len(traj.turns), "rewards": rewards, "real_steps": real_steps}


def _achieved_problem(record: dict[str, Any]) -> str | None:
    return None if isinstance(record.get("turns"), int) and record["turns"] >= 1 else "no whole number of turns"


def _judged_id(traj: Trajectory) -> str:
    # the attempt's id and what it did: an attempt sampled again under its id is judged again
    return f"{traj.id}#{hashlib.sha256(json.dumps([t.action for t in traj.turns]).encode()).hexdigest()[:12]}"


def _refuse_failures(report: JobReport, what: str, total: int) -> None:
    if report.failures:  # learning from the rest would change what the run learns from on a retry
        first, reason = next(iter(report.failures.items()))
        raise JobsFailedError(f"{len(report.failures)} of {total} {what} failed ({first}: {reason}); run the same "
                              "command again to retry them")


@dataclass
class RFTResult:
    """What ``lwm train rft`` did: where, its counts (``rft.json``), the adapter (GGUF)."""

    out: Path
    summary: dict[str, Any]
    adapter_gguf: Path | None


def train_rft(config: RFTConfig, *, show_progress: bool = True) -> RFTResult:
    """Sample attempts, keep the accepted ones, fine-tune the policy on them (resumable).

    Raises:
        ValueError: bad settings, a task of a held-out family in ``tasks_file``, or no
            attempt was accepted (nothing to learn from; the counts are in ``rft.json``).
        RunMismatchError: ``out`` holds a run with other settings.
        ModelUnavailableError: a model cannot be loaded (before ``out`` is written).
        JobsFailedError: attempts, or the judging of their shorter episodes, failed (the first
            named; run again to retry them).
        RowFormatError: a line of the attempts' journal is not an attempt (file and line).
    """
    from lwm.train.rl import _export, trained_model
    from lwm.train.sft import TrainConfig, train_sft

    t0 = time.monotonic()
    settings = config.out / "rft_settings.json"
    defaults = _recorded_defaults(settings)
    if settings.is_file():  # a resume with other settings is refused before any model loads
        check_run_settings(settings, config.settings(), defaults=defaults)
    tasks = _tasks(config)
    anchors = _task_file(config.anchor_tasks, config.domains) if config.anchor_tasks else []
    factories = {d: _factory(config, d) for d in dict.fromkeys(d for d, _ in tasks + anchors)}
    # the models load here, once: a mistyped name fails before the run directory is claimed (the
    # simulator's first: its names are typed, the policy's checked already)
    for factory in factories.values():
        if factory.model is not None:  # the simulator: its world model and its reward model
            factory.world_model()
            factory.judge()
    policy = _policy(config)
    policy.make(tasks[0][0])
    reference = _reference(config)
    if anchors:
        reference.make(anchors[0][0])
    config.out.mkdir(parents=True, exist_ok=True)
    check_run_settings(settings, config.settings(), defaults=defaults)
    items = []
    for domain, task in tasks:
        for k in range(config.samples):
            eid = f"{domain}/{task.name}/s{k}"
            items.append((eid, EpisodeJob(factories[domain], replace(policy, seed=config.seed + k), task, eid,
                                          config.max_turns,
                                          metadata=(("sample", k),))))
    report = run_jobs(items, lambda job: job(), journal=config.out / "attempts.partial.jsonl",
                      description=f"attempts ({config.backend})", progress=show_progress, check=episode_problem)
    _refuse_failures(report, "attempts", len(items))
    attempts = [Trajectory.model_validate(r) for r in report.ordered([eid for eid, _ in items])]
    write_trajectories(config.out / "attempts.jsonl", attempts)
    previous = read_json(config.out / "rft.json") if (config.out / "rft.json").is_file() else {}
    accepted = [t for t in attempts if is_accepted(t, config.threshold, config.well_formed_only)]
    achieved, judged, judging = None, {}, None
    if config.learn != "every-turn":  # accepted attempts of several turns: their shorter episodes judged again
        longer = {_judged_id(t): t for t in accepted if len(t.turns) > 1}
        judging = run_jobs([(i, (factories[t.domain], t)) for i, t in longer.items()],
                           lambda job: achieved_turns(*job, config.threshold),
                           journal=config.out / "achieved.partial.jsonl", description="achieved after",
                           progress=show_progress, check=_achieved_problem)
        _refuse_failures(judging, "shorter episodes' judgements", len(longer))
        judged = {longer[r["id"]].id: r for r in judging.ordered(list(longer))}
        achieved = {i: r["turns"] for i, r in judged.items()}
    rows = accepted_examples(accepted, config.threshold, config.well_formed_only, achieved,
                             done=DONE_ROWS.get(config.learn, "never"), form=config.form)
    anchor_rows = []
    if rows:  # no anchor is paid for when there is nothing to fine-tune on
        jobs = [(f"{d}/{t.name}/anchor", (factories[d], reference, t)) for d, t in anchors]
        anchored = run_jobs(jobs, lambda job: anchor_row(*job), journal=config.out / "anchors.partial.jsonl",
                            description="anchors", progress=show_progress, check=_anchor_problem)
        _refuse_failures(anchored, "anchors", len(anchors))
        anchor_rows = anchored.ordered([i for i, _ in jobs])
    learned = {t.id: (achieved or {}).get(t.id, len(t.turns)) for t in accepted}  # turns learned from
    done = sum(1 for r in rows if r["id"].endswith("/done"))
    paid = [t for t in attempts if is_accepted(t, config.threshold, well_formed_only=False)]
    simulated = backend_spec(config.backend).all_simulated
    summary: dict[str, Any] = {
        "settings": config.settings(), "attempts": len(attempts),
        "accepted": len(accepted), "examples": len(rows) + len(anchor_rows), "done_examples": done,
        # the reference's answers learned to keep its behaviour, and those cut at max_tokens
        "anchor_examples": len(anchor_rows), "anchor_answers_cut": sum(1 for r in anchor_rows if r.get("cut")),
        # accepted attempts whose task was achieved before their last turn: learned up to it
        "achieved_early": sum(1 for t in accepted if learned[t.id] < len(t.turns)),
        # the shorter episodes judged to find it, and the time it took (every invocation's)
        "shorter_episodes_judged": sum(len(r["rewards"]) for r in judged.values()),
        "judging_seconds": round(previous.get("judging_seconds", 0.0) + (judging.seconds if judging else 0.0), 1),
        # turns learned from whose action was not well formed, so not learned (--any-answer)
        "turns_ill_formed": sum(learned.values()) - (len(rows) - done),
        # paid by the reward but refused: an answer was prose, or not one action (well_formed_only)
        "refused_ill_formed": len(paid) - len(accepted),
        "accepted_by_family": dict(Counter(f"{t.domain}/{t.metadata.get('family')}" for t in accepted)),
        "unknown_verdicts": sum(1 for t in attempts if t.reward is None),
        # sim: one real reset per task for its initial observation (an anchor's too); real: every step
        # and check, every step of the shorter episodes replayed, and the anchors' resets
        "real_steps": (len({(d, t.name) for d, t in tasks + (anchors if anchor_rows else [])}) if simulated else
                       sum(len(t.turns) + 1 for t in attempts) + sum(r["real_steps"] for r in judged.values())
                       + len(anchor_rows)),
        "simulated_steps": sum(len(t.turns) for t in attempts) if simulated else 0,
        # every invocation's (a resumed run samples only what was left)
        "sampling_seconds": round(previous.get("sampling_seconds", 0.0) + report.seconds, 1)}
    write_atomic(config.out / "rft.json", json.dumps(summary, indent=1) + "\n")
    if not rows:
        what = (f"{len(accepted)} of {len(attempts)} attempts were accepted, but none ran a well-formed action"
                if accepted else f"no attempt of {len(attempts)} was accepted (reward ≥ {config.threshold}"
                f"{', answers well formed' if config.well_formed_only else ''})")
        raise ValueError(f"{what}: nothing to fine-tune on (counts in {config.out / 'rft.json'})")
    write_atomic(config.out / "data" / "train.jsonl", "".join(dumps(r) + "\n" for r in rows + anchor_rows))
    # the adapter is read beside rft.json: the run may be resumed from another working directory
    finished = config.out / Path(previous["adapter_gguf"]).name if previous.get("adapter_gguf") else None
    if previous.get("sft_steps") == config.max_steps and previous.get("examples") == summary["examples"] and finished \
            and finished.is_file():  # a finished run resumed: nothing left to train
        write_atomic(config.out / "rft.json", json.dumps(previous, indent=1) + "\n")
        return RFTResult(config.out, previous, finished)
    # a next round trains the earlier round's adapter further, on the model it was trained on
    earlier = None if config.policy in POLICIES else Path(config.policy)
    model = trained_model(earlier) if earlier else config.policy
    sft = train_sft(TrainConfig(data=config.out / "data", out=config.out, model=model, lora_r=config.lora_r,
                                max_steps=config.max_steps, lr=config.lr, batch_size=4, max_length=1024,
                                save_steps=max(config.max_steps, 1), seed=config.seed, resume=True,
                                init_adapter=str(earlier / "adapter") if earlier else None),
                    show_progress=show_progress)
    gguf, error = _export(sft.output_dir, model)
    summary.update(sft_steps=sft.steps, sft_seconds=round(sft.seconds, 1), train_loss=sft.train_loss,
                   adapter_gguf=str(gguf) if gguf else None, export_error=error,
                   seconds=round(time.monotonic() - t0, 1))
    write_atomic(config.out / "rft.json", json.dumps(summary, indent=1) + "\n")
    return RFTResult(config.out, summary, gguf)
