"""Playing one episode: a policy acts in an environment until it stops, the episode ends
or a turn limit is reached; the result is the episode's :class:`~lwm.schema.Trajectory`.

This loop (and :func:`aplay_episode`, the same loop awaited on an event loop) serves the
jobs that play episodes one by one: collection (scripted policies on the real backend),
rollouts on any backend, agent evaluation, rejection sampling and the verifiers
environment. Agent GRPO plays a step's episodes in lockstep instead (one batched
generation per turn, :class:`lwm.train.rl.AgentRollout`), on the same environments.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from lwm.envs.base import StepResult, Task
from lwm.errors import EpisodeBrokenError, SandboxError
from lwm.schema import Provenance, Trajectory, Turn


@dataclass(frozen=True)
class Script:
    """A scripted episode: a task and the actions a scripted policy plays, in order.

    Attributes:
        task: where the episode starts.
        actions: action texts in the domain's format (for the terminal, JSON keystroke
            lists; build them with :func:`lwm.domains.terminal.keys`).
        tags: what behaviour the episode covers (``pipes``, ``ctrl-c`` …).
    """

    task: Task
    actions: tuple[str, ...]
    tags: tuple[str, ...] = field(default_factory=tuple)


@runtime_checkable
class Policy(Protocol):
    """An agent. ``name`` is recorded with every episode it plays."""

    name: str

    def act(self, task: Task, trajectory: Trajectory) -> str | None:
        """The next action (text in the domain's format), or ``None`` when the agent stops."""
        ...


class ScriptedPolicy:
    """Plays the scripted actions of each task (by task name), then stops.

    Args:
        scripts: the scripted episodes whose actions to play.
    """

    name = "scripted"

    def __init__(self, scripts: Iterable[Script]) -> None:
        self.actions = {s.task.name: s.actions for s in scripts}

    def act(self, task: Task, trajectory: Trajectory) -> str | None:
        actions = self.actions.get(task.name, ())
        k = len(trajectory.turns)
        return actions[k] if k < len(actions) else None


class EpisodeEnv(Protocol):
    """What :func:`play_episode` drives: an environment that keeps its episode as a
    trajectory (the backends of :func:`lwm.sim.make_env`)."""

    trajectory: Trajectory | None

    def reset(self, task: Task | None = None) -> str: ...

    def step(self, action: str) -> StepResult: ...

    def verify(self) -> float | None: ...

    def close(self) -> None: ...


def play_episode(env: EpisodeEnv, policy: Policy, task: Task, *, max_turns: int,
                 episode_id: str | None = None, verify: bool = True, metadata: dict[str, Any] | None = None,
                 close: bool = True) -> Trajectory:
    """Play one episode of ``task``: reset, then the policy's actions until it returns
    ``None``, a step ends the episode or ``max_turns`` steps are played; then the task's
    verdict (``env.verify()``: the real check, or the reward model's) unless ``verify`` is
    false.

    Args:
        env: the environment (closed at the end unless ``close`` is false).
        policy: the agent.
        task: the task.
        max_turns: steps at most (fewer where the task sets its own budget:
            :meth:`~lwm.envs.base.Task.turn_budget`).
        episode_id: the trajectory's id (default: the environment's).
        verify: ask for the verdict at the end.
        metadata: added to the trajectory's metadata (with ``policy`` and ``seconds``).

    Returns:
        a copy of the episode's trajectory, its ``reward`` set by the verdict.

    Raises:
        EpisodeBrokenError: an action (or the verdict after it) found the sandbox unusable;
            the error carries the episode so far, a failure (reward 0).
        whatever else the environment or the policy raises.
    """
    t0 = time.monotonic()
    pending = None  # the action being stepped, until its observation is recorded
    try:
        env.reset(task)
        try:
            for _ in range(task.turn_budget(max_turns)):
                if (pending := policy.act(task, env.trajectory)) is None:
                    break
                done, pending = env.step(pending).done, None
                if done:
                    break
            if verify:
                env.verify()
        except SandboxError as e:
            raise _broken(e, env, pending, policy, t0, episode_id, metadata) from e
        traj = env.trajectory.model_copy(deep=True)
    finally:
        if close:
            env.close()
    return _finished(traj, policy, t0, episode_id, metadata)


async def aplay_episode(env: EpisodeEnv, policy: Policy, task: Task, *, max_turns: int,
                        episode_id: str | None = None, verify: bool = True,
                        metadata: dict[str, Any] | None = None) -> Trajectory:
    """:func:`play_episode` on an event loop, for many episodes at once: an asynchronous
    environment (``areset``/``astep``/``averify``, the simulator) and policy (``aact``)
    are awaited; a synchronous environment plays the whole episode in a thread of its own
    (browsers and other thread-bound clients stay on one thread)."""
    if not hasattr(env, "astep"):
        return await asyncio.to_thread(play_episode, env, policy, task, max_turns=max_turns, episode_id=episode_id,
                                       verify=verify, metadata=metadata)
    t0 = time.monotonic()
    act = getattr(policy, "aact", None)
    pending = None
    try:
        await env.areset(task)
        try:
            for _ in range(task.turn_budget(max_turns)):
                if (pending := await act(task, env.trajectory) if act else policy.act(task, env.trajectory)) is None:
                    break
                done, pending = (await env.astep(pending)).done, None
                if done:
                    break
            if verify:
                await env.averify()
        except SandboxError as e:
            raise _broken(e, env, pending, policy, t0, episode_id, metadata) from e
        traj = env.trajectory.model_copy(deep=True)
    finally:
        env.close()
    return _finished(traj, policy, t0, episode_id, metadata)


#: The provenance source of the turn an action broke its sandbox on (after the domain's name).
BROKEN = "(broken)"


def broke_sandbox(turn: Turn) -> bool:
    """Whether ``turn`` is the action that broke its sandbox (its observation is the
    sandbox's error, not the environment's answer: nothing to compare a prediction with)."""
    return turn.provenance.source.endswith(BROKEN)


def _broken(error: SandboxError, env: EpisodeEnv, action: str | None, policy: Policy, t0: float,
            episode_id: str | None, metadata: dict[str, Any] | None) -> EpisodeBrokenError:
    """The episode an action broke, as a failure: reward 0, why, and the action that broke it
    as its last turn (the sandbox's error as the observation) when its step raised."""
    traj = env.trajectory.model_copy(deep=True)
    why = f"{type(error).__name__}: {error}"
    if action is not None:
        traj.turns.append(Turn(index=len(traj.turns) + 1, action=action, observation=f"[sandbox broken] {why}",
                               provenance=Provenance(kind="real", source=f"{traj.domain} {BROKEN}")))
    traj.reward = 0.0
    traj.metadata.update(broken=why)
    return EpisodeBrokenError(f"the episode broke its sandbox: {error}",
                              _finished(traj, policy, t0, episode_id, metadata))


def _finished(traj: Trajectory, policy: Policy, t0: float, episode_id: str | None,
              metadata: dict[str, Any] | None) -> Trajectory:
    if episode_id is not None:
        traj.id = episode_id
    traj.metadata.update({**(metadata or {}), "policy": policy.name, "seconds": round(time.monotonic() - t0, 3)})
    return traj
