"""How far a reward model can be trusted: its verdicts on real episodes against the real
verifier's.

RL learns whatever the reward rewards, and a false success (the reward model says
"achieved" where the real verifier says not) teaches the agent the wrong thing. Here each
reward source judges episodes that were played in the **real** environment, succeeding
and failing ones, whose real verdict is known:

* ``probe``: the world model predicts what the task verifier's probe would show after the
  real history, and the verifier's own comparison is applied (privileged verification
  through the world model's dynamics, :meth:`lwm.sim.env.SimEnv.averify`);
* ``judge``: a reward model reads the episode with the domain's reward rubric
  (:func:`lwm.sim.reward.judge_reward`).

Reported per source (and per domain): agreement with the verifier, balanced accuracy (the
mean of the true-positive and true-negative rates: the share of successes is far from one
half), the false-success rate (among really failed episodes, those judged achieved), and
unreadable verdicts (``None``: counted, and counted as "not achieved" in the rates).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from lwm.envs.base import Task
from lwm.loop import run_sync
from lwm.models import ModelSpec
from lwm.schema import Trajectory
from lwm.sim.env import SimEnv


@dataclass(frozen=True)
class RewardSource:
    """One way of deciding success in the simulator.

    Attributes:
        name: a label for tables.
        world_model: the world model (the probe's predictor; for ``judge`` unused).
        reward: ``probe`` or ``judge``.
        judge: the reward model of ``judge`` (default: the world model).
        show_task: whether the world model sees the agent's instruction.
    """

    name: str
    world_model: ModelSpec
    reward: str = "probe"
    judge: ModelSpec | None = None
    show_task: bool = True


async def verdicts(source: RewardSource, episodes: list[tuple[Trajectory, Task]]) -> list[float | None]:
    """The source's verdict on each real episode (its task gives the verifier's probe).

    Raises:
        whatever loading the models raises; a model failure on one episode is a ``None``.
    """
    model = source.world_model.load()
    judge = source.judge.load() if source.judge else None
    out: list[float | None] = []
    for traj, task in episodes:
        env = SimEnv(traj.domain, model, reward_model=judge, reward=source.reward, judge_rewards=False,
                     show_task=source.show_task)
        env.task = task
        env.restore(traj.model_copy(update={"reward": None}))
        try:
            out.append(await env.averify())
        except Exception:  # a model failure is an unreadable verdict, counted as such
            out.append(None)
    return out


def agreement(real: list[float], judged: list[float | None]) -> dict[str, Any]:
    """Agreement statistics of ``judged`` verdicts against ``real`` ones (≥ 0.5 is success).

    >>> agreement([1, 0, 0, 1], [1, 1, None, 1])["false_success_rate"]
    0.5
    """
    pairs = list(zip([r >= 0.5 for r in real], judged))
    said = [(truth, (v or 0.0) >= 0.5) for truth, v in pairs]
    pos = [s for t, s in said if t]
    neg = [s for t, s in said if not t]
    tpr = sum(pos) / len(pos) if pos else None
    tnr = sum(not s for s in neg) / len(neg) if neg else None
    return {
        "episodes": len(pairs), "real_successes": len(pos),
        "agreement": round(sum(t == s for t, s in said) / len(said), 4) if said else None,
        "balanced_accuracy": round((tpr + tnr) / 2, 4) if tpr is not None and tnr is not None else None,
        "false_success_rate": round(sum(neg) / len(neg), 4) if neg else None,
        "missed_success_rate": round(1 - tpr, 4) if tpr is not None else None,
        "unreadable": sum(1 for _, v in pairs if v is None),
    }


def measure(sources: list[RewardSource], episodes: list[tuple[Trajectory, Task]]) -> dict[str, Any]:
    """Every source's agreement with the real verifier, overall and per domain.

    Args:
        sources: the reward sources.
        episodes: real episodes with a real verdict (``Trajectory.reward`` not ``None``) and
            the task each was played from.

    Returns:
        ``{source name: {"overall": stats, "domains": {domain: stats}}}`` (see :func:`agreement`).
    """
    episodes = [(t, task) for t, task in episodes if t.reward is not None]
    out = {}
    for source in sources:
        judged = run_sync(verdicts(source, episodes))
        by_domain: dict[str, list[int]] = defaultdict(list)
        for i, (t, _) in enumerate(episodes):
            by_domain[t.domain].append(i)
        out[source.name] = {
            "overall": agreement([t.reward for t, _ in episodes], judged),
            "domains": {d: agreement([episodes[i][0].reward for i in idx], [judged[i] for i in idx])
                        for d, idx in sorted(by_domain.items())},
        }
    return out
