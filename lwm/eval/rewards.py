"""How far a reward model can be trusted: its verdicts on labelled episodes against the
real verifier's (``lwm agent rewards``).

RL learns whatever the reward rewards, and a false success (the reward model says
"achieved" where the real verifier says not) teaches the agent the wrong thing. Here each
reward source judges episodes whose real verdict is known — real episodes of ``lwm data
verdicts`` and ``lwm agent eval``, and the simulator's own episodes replayed in the real
environment (``lwm agent eval --backend sim``: the closed loop) — with the reward sources
of :class:`~lwm.sim.env.SimEnv`:

* ``verdict``: the trained reward model's P(achieved) (:mod:`lwm.verdict`);
* ``probe``: the world model predicts what the task verifier's probe would show after the
  history, and the verifier's own comparison is applied;
* ``judge``: a free-form judge reads the episode with the domain's reward rubric.

Reported per source, overall, per domain and per kind of episode: agreement with the
verifier, balanced accuracy (the mean of the true-positive and true-negative rates),
precision (of the episodes judged achieved, the share really achieved), the false-success
rate (among really failed episodes, those judged achieved), the missed-success rate,
unreadable verdicts (``None``: counted, and counted as "not achieved" in the rates), the
Brier score of the probabilities, their ranking apart from the 0.5 threshold (AUC, and the
recall at a false-success rate of at most 5 %: :func:`ranking`; overall only) and seconds
per verdict. With ``verdict`` and ``probe``
both measured, their conjunction (achieved only when both say so) is reported too.

Output directory (resumable: re-run with the same one)::

    verdicts.partial.jsonl   one record per (source, episode): label, reward, error, seconds
    summary.json, report.md  the tables
"""

from __future__ import annotations

import bisect
import json
import math
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lwm.data.verdicts import distinct_files, labelled_episodes
from lwm.domains.tasks import SPLITS
from lwm.envs.base import Task
from lwm.jobs import run_jobs
from lwm.jsonl import check_run_settings, write_atomic
from lwm.loop import run_sync
from lwm.models import WORLD_MODEL, ModelSpec, reward_model_for
from lwm.schema import Trajectory
from lwm.sim.env import SimEnv

SOURCES = ("verdict", "probe", "judge")


@dataclass(frozen=True)
class RewardSource:
    """One way of deciding success in the simulator.

    Attributes:
        name: a label for tables.
        world_model: the world model (the probe's predictor; unused by ``verdict``/``judge``).
        reward: ``verdict``, ``probe`` or ``judge``.
        judge: the reward model of ``verdict`` and ``judge`` (default:
            :func:`lwm.models.reward_model_for` the source).
        show_task: whether the world model sees the agent's instruction (``probe``).
    """

    name: str
    world_model: ModelSpec
    reward: str = "verdict"
    judge: ModelSpec | None = None
    show_task: bool = False

    def reward_model(self) -> ModelSpec:
        """The model that judges: ``judge``, else :func:`lwm.models.reward_model_for` the
        source, else the world model (the probe's)."""
        name = reward_model_for(self.reward, self.world_model.name)
        return self.judge or (ModelSpec(name) if name else self.world_model)


def judge_episode(source: RewardSource, traj: Trajectory, task: Task | None) -> dict[str, Any]:
    """The source's verdict on one labelled episode: ``{"reward", "error", "seconds"}``
    (``reward`` ``None`` when there is none; a model failure is an error, not raised)."""
    t0 = time.monotonic()
    env = SimEnv(traj.domain, source.world_model.load(), reward_model=source.reward_model().load(),
                 reward=source.reward, judge_rewards=False, show_task=source.show_task)
    env.task = task
    # nothing of the label reaches the reward source; the real start's own verdict does, as
    # in the simulator (an episode that ran nothing keeps it: SimEnv.averify)
    start = {"reward_at_start": traj.metadata["reward_at_start"]} if "reward_at_start" in traj.metadata else {}
    env.restore(traj.model_copy(update={"reward": None, "metadata": start}))
    try:
        reward = run_sync(env.averify())
        error = env.trajectory.metadata.get("reward_error")
    except Exception as e:  # a model failure is an unreadable verdict, counted as such
        reward, error = None, f"{type(e).__name__}: {e}"
    return {"reward": reward, "error_text": error, "seconds": round(time.monotonic() - t0, 3)}


def verdicts(source: RewardSource, episodes: list[tuple[Trajectory, Task | None]]) -> list[float | None]:
    """The source's verdict on each episode (its task gives the verifier's probe).

    Raises:
        whatever loading the models raises; a model failure on one episode is a ``None``.
    """
    return [judge_episode(source, traj, task)["reward"] for traj, task in episodes]


#: The false-success rate at which ``recall_at_low_fsr`` is read (the goal of issue 22).
LOW_FSR = 0.05


def ranking(real: list[bool], scores: list[float]) -> tuple[float | None, float | None]:
    """How well ``scores`` (rewards, e.g. P(achieved)) rank real successes above failures:
    ``(AUC, recall at a false-success rate of at most LOW_FSR)``.

    AUC is the chance that a random real success scores above a random failure (ties count
    half; the Mann-Whitney statistic). The recall is the share of real successes above the
    lowest threshold that lets at most ``LOW_FSR`` of the failures through, the threshold
    chosen on these same episodes (an upper bound for a threshold fixed beforehand).
    ``None`` when one class is missing.

    >>> ranking([True, True, False, False], [0.9, 0.4, 0.5, 0.1])
    (0.75, 0.5)
    """
    pos = [s for t, s in zip(real, scores) if t]
    neg = sorted(s for t, s in zip(real, scores) if not t)
    if not pos or not neg:
        return None, None
    below = sum((bisect.bisect_left(neg, p) + bisect.bisect_right(neg, p)) / 2 for p in pos)   # ties half
    allowed = math.floor(LOW_FSR * len(neg))   # failures that may score strictly above the bar
    bar = neg[len(neg) - allowed - 1] if allowed < len(neg) else -math.inf
    return round(below / (len(pos) * len(neg)), 4), round(sum(p > bar for p in pos) / len(pos), 4)


def agreement(real: list[float], judged: list[float | None]) -> dict[str, Any]:
    """Agreement statistics of ``judged`` verdicts against ``real`` ones (≥ 0.5 is success);
    ``auc`` and ``recall_at_low_fsr`` (:func:`ranking`). An unreadable verdict (``None``)
    counts as "not achieved" everywhere (a reward of 0 in the ranking) and is counted.

    >>> s = agreement([1, 0, 0, 1], [1, 1, None, 0.9])
    >>> s["false_success_rate"], s["precision"], s["brier"], s["auc"]
    (0.5, 0.6667, 0.3367, 0.625)
    """
    pairs = list(zip([r >= 0.5 for r in real], judged))
    said = [(truth, (v or 0.0) >= 0.5) for truth, v in pairs]
    pos = [s for t, s in said if t]
    neg = [s for t, s in said if not t]
    tpr = sum(pos) / len(pos) if pos else None
    tnr = sum(not s for s in neg) / len(neg) if neg else None
    judged_yes = [t for t, s in said if s]
    readable = [(float(t), v) for t, v in pairs if v is not None]
    return {
        "episodes": len(pairs), "real_successes": len(pos), "judged_successes": len(judged_yes),
        "agreement": round(sum(t == s for t, s in said) / len(said), 4) if said else None,
        "balanced_accuracy": round((tpr + tnr) / 2, 4) if tpr is not None and tnr is not None else None,
        "precision": round(sum(judged_yes) / len(judged_yes), 4) if judged_yes else None,
        "false_success_rate": round(sum(neg) / len(neg), 4) if neg else None,
        "missed_success_rate": round(1 - tpr, 4) if tpr is not None else None,
        "unreadable": sum(1 for _, v in pairs if v is None),
        "brier": round(sum((t - v) ** 2 for t, v in readable) / len(readable), 4) if readable else None,
        **dict(zip(("auc", "recall_at_low_fsr"), ranking([t for t, _ in pairs], [v or 0.0 for _, v in pairs]))),
    }


def measure(sources: list[RewardSource], episodes: list[tuple[Trajectory, Task | None]]) -> dict[str, Any]:
    """Every source's agreement with the real verifier, overall and per domain.

    Args:
        sources: the reward sources.
        episodes: episodes with a real verdict (``Trajectory.reward`` not ``None``) and the
            task each was played from (``None``: no probe).

    Returns:
        ``{source name: {"overall": stats, "domains": {domain: stats}}}`` (see :func:`agreement`).
    """
    episodes = [(t, task) for t, task in episodes if t.reward is not None]
    out = {}
    for source in sources:
        judged = verdicts(source, episodes)
        out[source.name] = _grouped([t for t, _ in episodes], judged)
    return out


def _grouped(episodes: list[Trajectory], judged: list[float | None]) -> dict[str, Any]:
    real = [t.reward for t in episodes]
    groups: dict[str, dict[str, list[int]]] = {"domains": defaultdict(list), "kinds": defaultdict(list)}
    for i, t in enumerate(episodes):
        groups["domains"][t.domain].append(i)
        groups["kinds"][str(t.metadata.get("kind", "episode"))].append(i)
    return {"overall": agreement(real, judged),
            **{name: {k: agreement([real[i] for i in idx], [judged[i] for i in idx]) for k, idx in sorted(g.items())}
               for name, g in groups.items()}}


# ------------------------------------------------------------------------------ the command

@dataclass
class RewardEvalConfig:
    """Settings of ``lwm agent rewards``.

    Attributes:
        episodes: labelled episode files: ``episodes.jsonl`` of ``lwm data verdicts`` or of
            ``lwm agent eval`` (real episodes, or simulated ones replayed in the real
            environment: their ``real_reward`` is the label).
        out: run directory (re-run with the same one to resume).
        split: which task families: ``heldout`` (never trained on), ``train`` or ``all``.
        rewards: the reward sources to measure: ``verdict``, ``probe``, ``judge``.
        reward_model: the reward model of ``verdict`` and ``judge`` (default: the trained
            verdict model for ``verdict``, the base model for ``judge``): a name of
            :class:`~lwm.models.ModelSpec` or the model served at ``base_url``.
        adapter: a LoRA adapter (GGUF) for a local reward model, e.g. one just trained (on
            the base model, ``embedded``, unless ``reward_model`` names another).
        world_model: the world model of ``probe``.
        base_url: the reward model's OpenAI-compatible endpoint.
        api_key: its bearer token.
        max_episodes: an evenly spaced sample of N of the split's labelled episodes (every
            domain and kind keeps its share; default: all).
    """

    episodes: tuple[Path, ...]
    out: Path
    split: str = "heldout"
    rewards: tuple[str, ...] = ("verdict",)
    reward_model: str | None = None
    adapter: str | None = None
    world_model: str = WORLD_MODEL
    base_url: str | None = None
    api_key: str = "EMPTY"
    max_episodes: int | None = None

    def __post_init__(self) -> None:
        self.episodes, self.out = tuple(Path(p) for p in self.episodes), Path(self.out)
        self.rewards = tuple(dict.fromkeys(self.rewards))
        if not self.episodes:
            raise ValueError("no episode file given (lwm data verdicts or lwm agent eval writes episodes.jsonl)")
        if self.split not in SPLITS:
            raise ValueError(f"unknown split {self.split!r}; expected one of {', '.join(SPLITS)}")
        if bad := [r for r in self.rewards if r not in SOURCES]:
            raise ValueError(f"unknown reward source {', '.join(bad)} (one of {', '.join(SOURCES)})")
        if not self.rewards:
            raise ValueError("no reward source to measure")
        if self.adapter and not self.reward_model:  # the adapter goes on the base model
            self.reward_model = "embedded"
        if self.base_url and not self.reward_model:
            raise ValueError("--base-url needs --reward-model: the name of the model it serves")
        if self.max_episodes is not None and self.max_episodes < 1:
            raise ValueError(f"max_episodes must be at least 1, got {self.max_episodes}")

    def settings(self) -> dict[str, Any]:
        """What makes two runs the same run (a resume must match)."""
        d = asdict(self)
        for k in ("out", "api_key", "rewards"):
            d.pop(k)
        d["episodes"] = [str(p.resolve()) for p in distinct_files(self.episodes)]  # resumable from any directory
        # episodes identical to one read before are read once (labelled_episodes): a run recorded
        # before numbered repeated ids differently, so its journal cannot be resumed
        d["episodes_read_once"] = True
        return d

    def sources(self) -> list[RewardSource]:
        world = ModelSpec(self.world_model)
        judge = ModelSpec(self.reward_model, base_url=self.base_url, api_key=self.api_key,
                          adapter=self.adapter) if self.reward_model else None
        return [RewardSource(r, world, reward=r, judge=judge if r != "probe" else None) for r in self.rewards]


@dataclass
class RewardEvalResult:
    """What ``lwm agent rewards`` produced: where, its summary, the verdicts that failed."""

    out: Path
    summary: dict[str, Any]
    failed: dict[str, str] = field(default_factory=dict)


def unique_ids(ids: list[str]) -> list[str]:
    """``ids`` with each repeat suffixed by a count (``x``, ``x#2``, ``x#3``), in order; a
    suffixed id that is already taken takes the next count.

    >>> unique_ids(["a", "b", "a", "a"]), unique_ids(["a", "a", "a#2"])
    (['a', 'b', 'a#2', 'a#3'], ['a', 'a#2', 'a#2#2'])
    """
    taken: set[str] = set()
    out = []
    for i in ids:
        new, n = i, 1
        while new in taken:
            n += 1
            new = f"{i}#{n}"
        taken.add(new)
        out.append(new)
    return out


def judged_episodes(config: RewardEvalConfig,
                    skipped: Counter[str] | None = None) -> list[tuple[Trajectory, Task | None]]:
    """The labelled episodes a run of ``config`` judges, in its order: those of the split,
    ``max_episodes`` of them evenly spaced; the rest counted in ``skipped`` as
    :func:`~lwm.data.verdicts.labelled_episodes` counts them.

    Raises:
        DataNotFoundError, RowFormatError: an episode file is missing or malformed.
        ValueError: no labelled episode of the split in the files.
    """
    skipped = Counter() if skipped is None else skipped
    episodes = [(t, task) for t, task in labelled_episodes(config.episodes, skipped)
                if config.split == "all" or t.metadata.get("split") == config.split]
    if not episodes:
        which = {"heldout": "held-out families", "train": "train families", "all": "any task family"}[config.split]
        why = "; ".join(f"{n} left out: {reason}" for reason, n in skipped.items()) or "none was left out"
        raise ValueError(f"no labelled episode of {which} in {', '.join(map(str, config.episodes))} ({why})")
    if config.max_episodes and config.max_episodes < len(episodes):
        n = config.max_episodes
        episodes = [episodes[i * len(episodes) // n] for i in range(n)]
    return episodes


def reward_eval(config: RewardEvalConfig, *, show_progress: bool = True) -> RewardEvalResult:
    """Judge every labelled episode of the split with every source; write the tables.

    Raises:
        DataNotFoundError, RowFormatError: an episode file is missing or malformed.
        ValueError: no labelled episode of the split in the files.
        RunMismatchError: ``out`` holds a run with other settings.
        ModelUnavailableError: a model cannot be loaded.
    """
    t0 = time.monotonic()
    skipped: Counter[str] = Counter()
    episodes = judged_episodes(config, skipped)
    for source in config.sources():  # a model that cannot load fails the run here, not each verdict
        source.world_model.load(), source.reward_model().load()
    config.out.mkdir(parents=True, exist_ok=True)
    check_run_settings(config.out / "settings.json", config.settings())
    # two runs of the same tasks (two policies, say) hold the same episode ids: each keeps its own verdict
    ids = unique_ids([t.id for t, _ in episodes])
    items = [(f"{s.reward}:{i}", (s, t, task)) for s in config.sources() for i, (t, task) in zip(ids, episodes)]
    report = run_jobs(items, lambda item: judge_episode(*item), journal=config.out / "verdicts.partial.jsonl",
                      description="verdicts", progress=show_progress)
    summary: dict[str, Any] = {"settings": config.settings(), "episodes": len(episodes), "skipped": dict(skipped),
                               "sources": {}}
    judged: dict[str, list[float | None]] = {}
    for source in config.sources():
        records = [report.records.get(f"{source.reward}:{i}") for i in ids]
        judged[source.reward] = [r["reward"] if r else None for r in records]
        seconds = [r["seconds"] for r in records if r]
        summary["sources"][source.reward] = {
            "reward_model": source.reward_model().label,
            **_grouped([t for t, _ in episodes], judged[source.reward]),
            "seconds_per_verdict": round(sum(seconds) / len(seconds), 3) if seconds else None,
            "errors": sum(1 for r in records if r and r.get("error_text"))}
    if "verdict" in judged and "probe" in judged:  # achieved only when both say so
        both = [None if v is None or p is None else min(v, p) for v, p in zip(judged["verdict"], judged["probe"])]
        summary["sources"]["verdict and probe"] = _grouped([t for t, _ in episodes], both)
    summary["seconds"] = round(time.monotonic() - t0, 1)
    summary["failed"] = report.failures
    write_atomic(config.out / "summary.json", json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    write_atomic(config.out / "report.md", to_markdown(summary))
    return RewardEvalResult(config.out, summary, dict(report.failures))


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def to_markdown(summary: dict[str, Any]) -> str:
    """The summary's tables: every source overall, then per domain and per kind."""
    head = ("| reward source | episodes | real successes | agreement | balanced accuracy | precision | "
            "false-success rate | missed-success rate | unreadable | Brier | AUC | "
            f"recall at ≤ {LOW_FSR:.0%} false successes | seconds per verdict |")
    lines = [f"# Reward models against the real verifier ({summary['episodes']} labelled episodes, "
             f"{summary['settings']['split']} families)", "", "Rates ×100.", "", head,
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, s in summary["sources"].items():
        o = s["overall"]
        lines.append(f"| {name} | {o['episodes']} | {o['real_successes']} | {_pct(o['agreement'])} | "
                     f"{_pct(o['balanced_accuracy'])} | {_pct(o['precision'])} | {_pct(o['false_success_rate'])} | "
                     f"{_pct(o['missed_success_rate'])} | {o['unreadable']} | {o['brier']} | "
                     f"{'—' if o.get('auc') is None else o['auc']} | {_pct(o.get('recall_at_low_fsr'))} | "
                     f"{s.get('seconds_per_verdict', '—')} |")
    for group in ("domains", "kinds"):
        lines += ["", f"Balanced accuracy / false-success rate / missed-success rate by {group[:-1]}:", "",
                  "| reward source | " + " | ".join(next(iter(summary["sources"].values()))[group]) + " |",
                  "|---|" + "---|" * len(next(iter(summary["sources"].values()))[group])]
        for name, s in summary["sources"].items():
            cells = [f"{_pct(g['balanced_accuracy'])} / {_pct(g['false_success_rate'])} / "
                     f"{_pct(g['missed_success_rate'])}" for g in s[group].values()]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
