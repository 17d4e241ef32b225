"""``lwm`` as a `verifiers <https://github.com/PrimeIntellect-ai/verifiers>`_ environment
(verifiers 0.4, ``import verifiers.v1 as vf``): the tasks of ``lwm``'s task families or of
a task file, played in the real environment or in the simulator, scored by the task's
verifier (real backend) or the simulator's reward model (sim backend).

verifiers loads a *taskset* by its id, a top-level module: ``lwm-verifiers`` is the
module :mod:`lwm_verifiers` shipped with ``lwm``, which exports :class:`LwmTaskset`,
:class:`LwmEnv` and :func:`load_environment`. The environment plays the user, as
verifiers' own OpenEnv and TextArena environments do: it resets ``lwm``'s environment,
opens the conversation with the task and the first observation, reads each reply of the
agent as an action (:func:`lwm.sim.policy.read_action`), steps, and answers with the next
observation, until the agent says ``DONE``, the episode ends or the turn budget is spent.
The conversation is the one ``lwm agent eval`` holds with a policy
(:func:`lwm.sim.policy.agent_messages`), and the episode is played by the one episode loop
(:func:`lwm.envs.episode.aplay_episode`).

Rewards recorded on each trace: ``lwm_reward`` (the real verifier's 1 achieved or 0 not; in the
simulator the reward model's, by default the trained verdict's P(achieved) in [0, 1]; an
episode without a verdict scores 0 and says so in ``trace.info["lwm"]["verdict"]``, which
is ``achieved`` from 0.5 on).

Run with verifiers' CLI (the agent at any OpenAI-compatible endpoint, ``lwm serve-model``
included)::

    vf-eval lwm-verifiers --env.taskset.domain terminal --env.taskset.tasks 5 \\
        --env.backend sim -m embedded --client.base-url http://127.0.0.1:8000/v1 --no-push
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import verifiers.v1 as vf
from pydantic import Field, field_validator, model_validator
from verifiers.v1.harnesses.null import NullHarnessConfig
from verifiers.v1.runtimes import SubprocessConfig

from lwm import domains
from lwm.domains.tasks import read_task_file, task_domains, task_set
from lwm.envs.base import Task
from lwm.envs.episode import aplay_episode
from lwm.errors import EpisodeBrokenError
from lwm.models import WORLD_MODEL, ModelSpec
from lwm.schema import Trajectory
from lwm.sim.backends import TASK_BACKENDS, EnvFactory, TaskBackend, backend_spec, task_env_factory
from lwm.sim.env import DEFAULT_REWARD, REWARD_SOURCES
from lwm.sim.policy import AGENT_SYSTEM, agent_messages, read_action

__all__ = ["LwmData", "LwmEnv", "LwmEnvConfig", "LwmTask", "LwmTaskset", "LwmTasksetConfig", "load_environment"]

#: The taskset id verifiers loads this environment by (the module :mod:`lwm_verifiers`).
TASKSET_ID = "lwm-verifiers"


class LwmTasksetConfig(vf.TasksetConfig):
    """Which tasks: ``tasks`` per domain of a split of the task families
    (:func:`lwm.domains.tasks.task_set`), or every task of a task file."""

    domain: list[str] = Field(default_factory=list)
    """Domains with task families (default: terminal), or of the task file (default: all of
    its domains); several are played in turn (``--env.taskset.domain db terminal``)."""
    split: Literal["train", "heldout"] = "heldout"
    """Task families: ``heldout`` (never trained on) or ``train``."""
    tasks: int = Field(5, ge=1)
    """Tasks per domain."""
    seed: int = 0
    """Seed of the task set (the same seed gives the same tasks)."""
    tasks_file: Path | None = None
    """A task file (``lwm agent curriculum``, ``docs/tasks.md``): its tasks instead."""

    @model_validator(mode="after")
    def _known_domains(self) -> LwmTasksetConfig:
        self.domain = list(dict.fromkeys(self.domain))  # a domain named twice is played once
        if self.tasks_file is not None and not Path(self.tasks_file).is_file():
            raise ValueError(f"no task file {self.tasks_file}")
        if not self.tasks_file and (unknown := [d for d in self.domain if d not in task_domains()]):
            raise ValueError(f"no task families for {', '.join(unknown)} "
                             f"(domains with families: {', '.join(task_domains())})")
        return self


class LwmData(vf.TaskData):
    """One task: its domain and ``lwm``'s :class:`~lwm.envs.base.Task` as a dict."""

    domain: str
    task: dict[str, Any]


class LwmTask(vf.Task[LwmData]):
    """A task of :class:`LwmTaskset`."""


class LwmTaskset(vf.Taskset[LwmTask, LwmTasksetConfig]):
    """The tasks of :class:`LwmTasksetConfig`, in a fixed order.

    Raises (when loaded):
        ValueError, KeyError: as :func:`lwm.domains.tasks.task_set`.
        RowFormatError, DataNotFoundError: a damaged or missing task file.
    """

    def load(self) -> Iterator[LwmTask]:
        config = self.config
        if config.tasks_file:
            items = [(d, t) for d, t, _ in read_task_file(config.tasks_file) if not config.domain or d in config.domain]
            if not items:
                raise ValueError(f"{config.tasks_file} holds no task of {', '.join(config.domain)}")
        else:
            items = [(d, t) for d in config.domain or ("terminal",)
                     for t, _ in task_set(d, config.split, config.tasks, config.seed)]
        for domain, task in items:
            spec = domains.get(domain)
            yield LwmTask(LwmData(id=f"{domain}/{task.name}", name=f"{domain}/{task.name}",
                                  description=task.instruction, prompt=None,  # the environment opens
                                  system_prompt=AGENT_SYSTEM.format(domain=spec.name, tool=spec.tool.description),
                                  domain=domain, task=task.to_dict()),
                          config.task)


class LwmEnvConfig(vf.EnvConfig):
    """The backend the agent plays in, and the agent's seat.

    The seat's default harness is verifiers' ``null`` harness (a plain chat loop, no tools)
    in a local subprocess: the actions are the replies themselves.
    """

    player: vf.AgentConfig = vf.AgentConfig(harness=NullHarnessConfig(id="null"), runtime=SubprocessConfig())
    backend: TaskBackend = "real"
    """``real``: sandboxed environments and the task's verifier; ``sim``: the world model
    plays the environment and the reward model judges."""
    world_model: str = WORLD_MODEL
    """sim: the world model (a name ``lwm`` knows, or the name served at ``world_model_base_url``)."""
    world_model_base_url: str | None = None
    """sim: the world model's OpenAI-compatible endpoint (default: the embedded model in-process)."""
    reward: str | None = None
    """sim: the reward source (:data:`lwm.sim.env.REWARD_SOURCES`; default: the simulator's, see
    ``lwm agent eval``)."""
    show_task: bool = False
    """sim: show the world model the agent's instruction (off, as in ``lwm agent eval`` and
    ``lwm train rl``: told the goal, the warm-up world model predicted it after prose answers)."""
    max_turns: int = Field(4, ge=1)
    """Actions per episode at most (a task's own budget may be lower)."""

    @field_validator("reward")
    @classmethod
    def _known_reward(cls, reward: str | None) -> str | None:
        if reward is not None and reward not in REWARD_SOURCES:
            raise ValueError(f"unknown reward source {reward!r} ({', '.join(REWARD_SOURCES)})")
        return reward


class LwmEnv(vf.Env[LwmEnvConfig]):
    """Plays an :class:`LwmTask` with the ``player`` agent (see the module docstring).

    Raises:
        NoRealEnvironmentError: on the real backend, a task of a domain without a real
            environment here (an import-only domain of a task file; the simulator plays it).
    """

    def __init__(self, config: LwmEnvConfig) -> None:
        super().__init__(config)
        if backend_spec(config.backend, allowed=TASK_BACKENDS).plays_real:
            for name in dict.fromkeys(task.data.domain for task in self.taskset):
                if not (spec := domains.get(name)).runnable:
                    spec.make_env()  # raises, saying why

    def factory(self, domain: str) -> EnvFactory:
        """The environment factory of ``domain`` for this configuration."""
        config = self.config
        world = ModelSpec(config.world_model, base_url=config.world_model_base_url)
        return task_env_factory(domain, config.backend, world, reward=config.reward or DEFAULT_REWARD,
                                show_task=config.show_task, max_turns=config.max_turns)

    async def run(self, task: LwmTask, agents: Any) -> None:
        """One episode; records ``lwm_reward`` and ``trace.info["lwm"]``."""
        domain, lwm_task = task.data.domain, Task.from_dict(task.data.task)
        async with agents.player.interaction(task) as interaction:
            policy = _SeatPolicy(interaction, domain, asyncio.get_running_loop())
            try:
                traj = await aplay_episode(self.factory(domain)(), policy, lwm_task, max_turns=self.config.max_turns)
            except EpisodeBrokenError as e:   # the agent broke its sandbox: a failure, counted
                traj = e.trajectory
        _record(interaction.trace, traj, self.config.backend)


class _SeatPolicy:
    """An ``lwm`` policy whose answers come from a verifiers interaction: each call sends
    the newest observation as the user's turn and reads the reply as the next action."""

    name = "verifiers"

    def __init__(self, interaction: Any, domain: str, loop: asyncio.AbstractEventLoop) -> None:
        self.interaction, self.domain, self.loop = interaction, domains.get(domain), loop

    async def aact(self, task: Task, trajectory: Trajectory) -> str | None:
        if trajectory.turns:
            message = f"Observation:\n{trajectory.turns[-1].observation}"
        else:
            message = agent_messages(self.domain, task, trajectory.initial_observation, [], [])[-1]["content"]
        segment = await self.interaction.turn(message)
        return None if segment.terminated else read_action(self.domain, segment.last_reply or "")

    def act(self, task: Task, trajectory: Trajectory) -> str | None:
        # a real environment plays its episode in a thread of its own; the seat lives on the loop
        return asyncio.run_coroutine_threadsafe(self.aact(task, trajectory), self.loop).result()


def _record(trace: Any, traj: Trajectory, backend: str) -> None:
    verdict = "unknown" if traj.reward is None else "achieved" if traj.reward >= 0.5 else "not achieved"
    trace.record_reward("lwm_reward", float(traj.reward or 0.0))
    trace.info["lwm"] = {"backend": backend, "domain": traj.domain, "verdict": verdict,
                         "actions": [t.action for t in traj.turns], "broken": traj.metadata.get("broken")}


def load_environment(domain: str | Sequence[str] = (), backend: TaskBackend = "real",
                     tasks: int = 5, split: Literal["train", "heldout"] = "heldout", seed: int = 0,
                     tasks_file: str | Path | None = None, **env_settings: Any) -> LwmEnv:
    """The environment as a Python object (what ``vf-eval lwm-verifiers`` builds from flags).

    Args:
        domain: domains with task families (default: terminal), or of ``tasks_file`` (default:
            all of its domains).
        backend: ``real`` or ``sim``.
        tasks, split, seed, tasks_file: as :class:`LwmTasksetConfig`.
        env_settings: further fields of :class:`LwmEnvConfig` (``world_model``, ``reward``,
            ``max_turns``, ``player`` …).

    Raises:
        pydantic.ValidationError: a setting of the wrong type or value (an unknown domain).
    """
    taskset = LwmTasksetConfig(id=TASKSET_ID, domain=[domain] if isinstance(domain, str) else list(domain),
                               split=split, tasks=tasks, seed=seed, tasks_file=tasks_file)
    return LwmEnv(LwmEnvConfig(taskset=taskset, backend=backend, **env_settings))
