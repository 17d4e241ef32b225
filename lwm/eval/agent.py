"""``lwm agent eval``: how well a policy does its tasks, in the real environment or in the
simulator.

A policy (a scripted oracle playing the reference solutions, any OpenAI-compatible
endpoint, the embedded model with or without an adapter, a trained checkpoint) plays a set
of tasks drawn from the domains' task families (:mod:`lwm.domains.tasks`; held-out
families by default, never trained on), or the tasks of a task file
(:func:`lwm.domains.tasks.read_task_file`).

* On the **real** backend each episode ends with the task's real verifier: the success
  rate per domain with its 95 % Wilson interval, the share of valid actions, mean turns,
  real steps and wall time.
* On the **sim** backend the world model plays the environment and the reward model
  decides success (``reward``: the trained verdict by default, the verifier's probe
  through the world model, or a free-form judge).
  Each simulated episode is then replayed in the real environment (``replay``): its
  actions again, in order, then the real verifier — the real success of the simulated
  action sequences, and the ratio of simulated to real success (Word2World's closed-loop
  consistency), with the false successes that would teach an agent the wrong thing.

Output directory (resumable: re-run with the same one)::

    episodes.partial.jsonl   one trajectory per finished episode (the job engine's journal)
    episodes.jsonl           every episode, in task order
    summary.json, report.md  the tables
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lwm import domains
from lwm.domains.tasks import read_task_file, task_file_digest, task_set
from lwm.envs.base import Task
from lwm.envs.episode import Script
from lwm.jobs import run_jobs
from lwm.jsonl import check_run_settings, dumps, write_atomic
from lwm.metrics import wilson_interval
from lwm.models import WORLD_MODEL, ModelSpec, prompt_cache_mb
from lwm.prediction import request_settings
from lwm.schema import Trajectory, episode_problem, write_trajectories
from lwm.sim.backends import TASK_BACKENDS, EnvFactory, backend_spec, task_env_factory
from lwm.sim.env import DEFAULT_REWARD
from lwm.sim.policy import PolicySpec
from lwm.sim.rollout import EpisodeJob, play_for_real


@dataclass
class AgentEvalConfig:
    """Settings of ``lwm agent eval``.

    Attributes:
        out: run directory (re-run with the same one to resume).
        domains: the domains whose tasks are played (those with task families; empty:
            ``terminal``, or with ``tasks_file`` every domain of the file).
        split: which task families: ``heldout`` (never trained on), ``train`` or ``all``.
        tasks: tasks per domain.
        seed: seed of the task set (the same seed gives the same tasks).
        tasks_file: play the tasks of this task file (``lwm agent tasks`` writes one)
            instead of drawing them from families; ``split``, ``tasks`` and ``seed`` then
            do not apply.
        policy: the agent: ``oracle`` (plays the tasks' reference solutions), ``embedded``
            (SmolLM2-135M-Instruct), ``embedded-agent`` (the same with the shipped agent
            adapter, trained inside the simulator), ``embedded-warmup`` (with the world-model
            warm-up), a ``.gguf`` file, ``hf:<model dir>``, or the model name served at
            ``policy_base_url``.
        policy_base_url: the agent's OpenAI-compatible endpoint.
        policy_adapter: a LoRA adapter (GGUF) for a local llama.cpp agent.
        temperature: the agent's sampling temperature (0: greedy).
        max_turns: actions per episode at most.
        backend: ``real`` or ``sim``.
        world_model: the world model of ``sim`` (``embedded-warmup``, ``embedded``, a
            ``.gguf`` file, or the name served at ``base_url``).
        base_url: the world model's OpenAI-compatible endpoint.
        api_key: bearer token for both endpoints.
        reward: ``sim``: ``verdict`` (the trained reward model's P(achieved)), ``probe`` (the
            world model predicts the verifier's probe), ``judge`` (a free-form judge reads the
            episode) or ``auto`` (the probe for tasks with a verifier, else the verdict).
        show_task: ``sim``: show the world model the agent's instruction. Off by default:
            a world model that knows the goal predicts it (docs/results.md, stage 2).
        replay: ``sim``: replay each simulated episode's actions in the real environment
            and run the real verifier.
        concurrency: episodes played at once.
        timeout: seconds per request to an OpenAI-compatible endpoint (the agent's, the
            world model's).
        prediction: ``sim``: what the world model is asked to write, ``full`` or ``change``
            (:mod:`lwm.prediction`); default: the model's own, ``full`` behind ``base_url``.
        compact_tools: ``sim``: tool lists as one-line signatures in the system prompt;
            default: the model's own (yes for the shipped adapter), no behind ``base_url``.
    """

    out: Path
    domains: tuple[str, ...] = ()
    split: str = "heldout"
    tasks: int = 20
    seed: int = 0
    tasks_file: Path | None = None
    policy: str = "embedded"
    policy_base_url: str | None = None
    policy_adapter: str | None = None
    temperature: float = 0.0
    max_turns: int = 4
    backend: str = "real"
    world_model: str = WORLD_MODEL
    base_url: str | None = None
    api_key: str = "EMPTY"
    reward: str = DEFAULT_REWARD
    show_task: bool = False
    replay: bool = True
    concurrency: int = 4
    timeout: float = 600.0
    prediction: str | None = None
    compact_tools: bool | None = None

    def settings(self) -> dict[str, Any]:
        """What makes two runs the same run (recorded; a resume must match)."""
        d = asdict(self)
        for k in ("out", "concurrency", "api_key", "timeout"):
            d.pop(k)
        d["domains"] = list(self.domains)
        if self.tasks_file:  # the file's content, not its name, makes the task set
            for k in ("split", "tasks", "seed"):
                d.pop(k)
            d["tasks_file"] = task_file_digest(self.tasks_file)
        if not backend_spec(self.backend).all_simulated:
            for k in ("world_model", "base_url", "reward", "show_task", "replay", "prediction", "compact_tools"):
                d.pop(k)
        return d


@dataclass
class AgentEvalResult:
    """What an agent evaluation produced: where, its summary, the failed episodes."""

    out: Path
    summary: dict[str, Any]
    failed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Episode:
    """One task to play and, on ``sim``, to replay in the real environment (picklable)."""

    job: EpisodeJob
    replay: bool

    def __call__(self) -> dict[str, Any]:
        t0 = time.monotonic()
        record = self.job()
        traj = Trajectory.model_validate(record)
        spec = domains.get(traj.domain)
        actions = [t.action for t in traj.turns]
        meta = {"valid_actions": sum(spec.accepts(a) for a in actions), "actions": len(actions),
                "real_steps": len(actions) if backend_spec(self.job.factory.backend).plays_real else 0}
        if self.replay:
            real = play_for_real(traj.domain, self.job.task, actions).reward
            meta.update(real_reward=real, real_steps=len(actions))
        record["metadata"].update(meta, play_seconds=round(time.monotonic() - t0, 3))
        return record


def _tasks(config: AgentEvalConfig) -> list[tuple[str, Task, tuple[str, ...]]]:
    """``(episode id, task, reference solution)`` of every task to play."""
    if config.tasks_file:
        chosen = set(config.domains)
        every = read_task_file(config.tasks_file)
        items = [(d, t, s) for d, t, s in every if not chosen or d in chosen]
        if not items:
            raise ValueError(f"{config.tasks_file} holds no task of {', '.join(config.domains)} "
                             f"(its domains: {', '.join(sorted({d for d, _, _ in every}))})")
    else:
        items = [(d, t, s) for d in config.domains or ("terminal",)
                 for t, s in task_set(d, config.split, config.tasks, config.seed)]
    return [(f"{d}/{t.name}", t, s) for d, t, s in items]


def agent_eval(config: AgentEvalConfig, *, show_progress: bool = True) -> AgentEvalResult:
    """Play the task set with the policy and write the episodes and the summary (resumable).

    Raises:
        UnknownDomainError, KeyError: a domain without task families.
        ValueError: bad backend settings, an unknown split, too many tasks asked of a split,
            no task of the chosen domains in the task file, the oracle on a task without a
            reference solution.
        RowFormatError, DataNotFoundError: a damaged, empty or missing task file (file and
            line named).
        ModelUnavailableError: the policy's or the world model's weights or server are missing.
        RunMismatchError: ``out`` holds an evaluation with other settings.
    """
    out = Path(config.out)
    simulated = backend_spec(config.backend, allowed=TASK_BACKENDS).all_simulated
    if config.policy == "scripted":
        raise ValueError("task families have no scripts: the policy that plays their reference solutions is 'oracle'")
    if config.policy == "oracle" and (config.policy_base_url or config.policy_adapter):
        raise ValueError("the oracle plays the tasks' reference solutions: it takes no --policy-base-url or "
                         "--policy-adapter")
    config.domains = tuple(dict.fromkeys(config.domains))  # a domain named twice is played once
    oracle = config.policy == "oracle"
    policy = PolicySpec("scripted" if oracle else config.policy, config.policy_base_url, config.api_key,
                        config.policy_adapter, config.temperature, timeout=config.timeout)
    tasks = _tasks(config)
    if oracle and (unsolved := [eid for eid, _, solution in tasks if not solution]):
        raise ValueError(f"the oracle plays reference solutions; {unsolved[0]} has none "
                         f"({len(unsolved)} tasks without one)")
    played = tuple(dict.fromkeys(eid.split("/", 1)[0] for eid, _, _ in tasks))
    factories = {d: _factory(config, d) for d in played}
    if not oracle:
        policy.make(played[0])  # load the agent once, here: a bad name fails before any episode
    worlds = [factory.world_model() for factory in factories.values()]
    out.mkdir(parents=True, exist_ok=True)
    # recorded as the model is asked (a run from before these settings was asked so)
    asked = request_settings(worlds[0], config.prediction, config.compact_tools) if simulated else {}
    settings = config.settings() | asked
    check_run_settings(out / "agent_eval.json", settings, defaults=asked)
    items = []
    for eid, task, solution in tasks:
        domain = eid.split("/", 1)[0]
        job = EpisodeJob(factories[domain], policy, task, eid, config.max_turns,
                         scripts=(Script(task, solution),) if oracle else (),
                         metadata=(("split", "file" if config.tasks_file else config.split),
                                   ("policy_label", "oracle" if oracle else policy.label)))
        items.append((eid, _Episode(job, replay=simulated and config.replay)))
    report = run_jobs(items, lambda episode: episode(), journal=out / "episodes.partial.jsonl",
                      concurrency=config.concurrency, description=f"agent eval ({config.backend})",
                      progress=show_progress, check=_trajectory_problem)
    episodes = [Trajectory.model_validate(r) for r in report.ordered([eid for eid, _, _ in tasks])]
    write_trajectories(out / "episodes.jsonl", episodes)
    summary = summarize(episodes, config.backend)
    summary.update(settings=settings, failed=report.failures, seconds_this_invocation=round(report.seconds, 1))
    write_atomic(out / "summary.json", dumps(summary) + "\n")
    write_atomic(out / "report.md", to_markdown(summary))
    return AgentEvalResult(out, summary, report.failures)


def _trajectory_problem(record: dict) -> str | None:
    # A journal line that is not an episode, or whose counts are not numbers: named, not guessed at.
    return episode_problem(record, lambda t: (int(t.metadata.get("actions", 0)),
                                              int(t.metadata.get("valid_actions", 0))))


def _factory(config: AgentEvalConfig, domain: str) -> EnvFactory:
    model = ModelSpec(config.world_model, base_url=config.base_url, api_key=config.api_key,
                      concurrency=max(16, config.concurrency), timeout=config.timeout,
                      prompt_cache_mb=prompt_cache_mb(config.concurrency))
    return task_env_factory(domain, config.backend, model, reward=config.reward, show_task=config.show_task,
                            max_turns=config.max_turns, prediction=config.prediction,
                            compact_tools=config.compact_tools)


def succeeded(episode: Trajectory) -> bool:
    """Whether an episode counts as a success: its reward is at least 0.5 (an unknown verdict
    is a failure)."""
    return _success(episode.reward)


def _success(reward: float | None) -> bool:
    return (reward or 0) >= 0.5


def success_rate(successes: int, n: int) -> dict[str, Any]:
    """A success count as ``{"n", "successes", "rate", "ci95"}``: the rate and its 95 % Wilson
    interval in [0, 1] (``None`` for no episode)."""
    if n == 0:
        return {"n": 0, "successes": 0, "rate": None, "ci95": None}
    low, high = wilson_interval(successes, n)
    return {"n": n, "successes": successes, "rate": round(successes / n, 4), "ci95": [round(low, 4), round(high, 4)]}


def summarize(episodes: list[Trajectory], backend: str) -> dict[str, Any]:
    """Per domain and over all: success (reward ≥ 0.5; an unknown verdict is a failure,
    counted in ``unknown_verdicts``, and so is an episode whose action broke its sandbox,
    counted in ``broken_episodes``) with its 95 % Wilson interval; the valid-action rate
    (actions that follow the domain's format), the well-formed-answer rate (answers that
    were one action and nothing else: no prose, :func:`~lwm.sim.policy.well_formed_answer`)
    and the answers cut by ``max_tokens``; mean turns, real steps, and the episodes' own
    seconds summed (``play_seconds``: they overlap); on ``sim`` also the real success of
    the replayed action sequences, the sim/real ratio, the false successes, and the reward
    model's precision (of the episodes it judged achieved, the share achieved when replayed)
    and recall (of the replayed real successes, the share it judged achieved). Per family,
    the success alone (``families``: what a curriculum is chosen from)."""
    by_domain: dict[str, list[Trajectory]] = defaultdict(list)
    by_family: dict[str, list[Trajectory]] = defaultdict(list)
    for e in episodes:
        by_domain[e.domain].append(e)
        by_family[f"{e.domain}/{e.metadata.get('family', '?')}"].append(e)

    def group(eps: list[Trajectory]) -> dict[str, Any]:
        meta = [e.metadata for e in eps]
        actions = sum(m.get("actions", 0) for m in meta)
        answers = [w for m in meta for w in m.get("agent_well_formed", [])]
        g = {"success": success_rate(sum(map(succeeded, eps)), len(eps)),
             "unknown_verdicts": sum(1 for e in eps if e.reward is None),
             "broken_episodes": sum(1 for m in meta if m.get("broken")),
             "valid_action_rate": round(sum(m.get("valid_actions", 0) for m in meta) / actions, 4) if actions else None,
             "well_formed_answer_rate": round(sum(answers) / len(answers), 4) if answers else None,
             "cut_answers": sum(1 for m in meta for r in m.get("agent_finish_reasons", []) if r == "length"),
             "mean_turns": round(sum(len(e.turns) for e in eps) / len(eps), 2) if eps else None,
             "real_steps": sum(m.get("real_steps", 0) for m in meta),
             "play_seconds": round(sum(m.get("play_seconds", 0) for m in meta), 1)}
        replayed = [e for e in eps if "real_reward" in e.metadata]
        if backend_spec(backend).all_simulated and replayed:
            verdicts = [(succeeded(e), _success(e.metadata["real_reward"])) for e in replayed]  # (simulated, real)
            sim_ok, real_ok = sum(s for s, _ in verdicts), sum(r for _, r in verdicts)
            g["real_success_of_simulated_actions"] = success_rate(real_ok, len(replayed))
            g["sim_to_real_ratio"] = round(sim_ok / real_ok, 3) if real_ok else None
            g["false_successes"] = sum(s and not r for s, r in verdicts)
            both = sum(s and r for s, r in verdicts)
            g["reward_precision"] = round(both / sim_ok, 4) if sim_ok else None
            g["reward_recall"] = round(both / real_ok, 4) if real_ok else None
        return g

    return {"backend": backend, "episodes": len(episodes), "overall": group(episodes),
            "domains": {d: group(eps) for d, eps in sorted(by_domain.items())},
            "families": {f: {"success": success_rate(sum(map(succeeded, eps)), len(eps))}
                         for f, eps in sorted(by_family.items())}}


def format_rate(r: dict[str, Any] | None) -> str:
    """A :func:`success_rate` as ``"12.5 % [8.6, 17.8] (25/200)"`` (``"—"`` for none)."""
    if not r or r["rate"] is None:
        return "—"
    return f"{100 * r['rate']:.1f} % [{100 * r['ci95'][0]:.1f}, {100 * r['ci95'][1]:.1f}] ({r['successes']}/{r['n']})"


def to_markdown(summary: dict[str, Any]) -> str:
    """The summary as Markdown."""
    s = summary.get("settings", {})
    sim = backend_spec(summary["backend"]).all_simulated
    head = ["domain", "success ± 95% CI", "unknown verdicts", "broken episodes", "valid actions",
            "well-formed answers", "cut answers", "mean turns", "real steps", "episode s (summed)"]
    if sim:
        head += ["real success of simulated actions", "sim/real", "false successes", "reward precision",
                 "reward recall"]
    source = (f"the task file (sha256 {s['tasks_file'][:12]})" if s.get("tasks_file") else
              f"{s.get('split')} families, {s.get('tasks')} per domain, seed {s.get('seed')}")
    adapter = f" with the adapter {s['policy_adapter']}" if s.get("policy_adapter") else ""
    lines = [f"# lwm agent eval: {s.get('policy')}{adapter} on {summary['backend']}", "",
             f"{summary['episodes']} episodes; tasks: {source}; at most {s.get('max_turns')} turns; "
             f"{summary.get('seconds_this_invocation')} s this invocation." + (
                 f" World model {s.get('world_model')}, reward {s.get('reward')}." if sim else ""), "",
             "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name, g in [*summary["domains"].items(), ("all", summary["overall"])]:
        row = [format_rate(g["success"]), g["unknown_verdicts"], g.get("broken_episodes", 0), g["valid_action_rate"],
               g["well_formed_answer_rate"], g["cut_answers"],
               g["mean_turns"], g["real_steps"], g["play_seconds"]]
        if sim:
            row += [format_rate(g.get("real_success_of_simulated_actions")), g.get("sim_to_real_ratio"),
                    g.get("false_successes"), g.get("reward_precision"), g.get("reward_recall")]
        lines.append(f"| {name} | " + " | ".join("—" if v is None else str(v) for v in row) + " |")
    if summary.get("families"):
        lines += ["", "| family | success ± 95% CI |", "|---|---|"]
        lines += [f"| {f} | {format_rate(g['success'])} |" for f, g in summary["families"].items()]
    if summary.get("failed"):
        lines += ["", f"{len(summary['failed'])} episodes failed to play (see summary.json)."]
    return "\n".join(lines) + "\n"
