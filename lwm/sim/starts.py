"""Where simulated episodes start: the real environment's initial observation and system
prompt for a task, and its verifier's verdict on that state, read once by a real reset (no
step is taken) and cached.

A policy trained in the simulator must meet the same first screen as in the real
environment, and every episode of a GRPO group the same one; asking the world model to
invent the start would give neither.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lwm import domains
from lwm.envs.base import Task
from lwm.envs.cache import ReplayCache, cache_key
from lwm.envs.recorded import task_fingerprint
from lwm.errors import LwmError
from lwm.paths import lwm_home


@dataclass(frozen=True)
class Start:
    """A task's starting point in the real environment.

    Attributes:
        system_prompt: the world-model system prompt the real environment gives for it.
        initial_observation: what the agent sees before its first action.
        reward: the task's real verifier on that untouched state (1.0 achieved, 0.0 not;
            ``None`` without a verifier, or when it could not run): the reward of an episode
            that changes nothing.
    """

    system_prompt: str
    initial_observation: str
    reward: float | None = None


def real_start(domain: str, task: Task, cache: ReplayCache | None = None) -> Start:
    """The start of ``task`` in the real environment of ``domain``: from the cache
    (``$LWM_HOME/starts.sqlite`` unless given; the key is the task's fingerprint, as the
    hybrid backend's), else by one real reset, then cached.

    Raises:
        UnknownDomainError, NoRealEnvironmentError: no such domain, or none runnable here.
        SandboxError: the real environment failed to start.
    """
    cache = cache or ReplayCache(lwm_home() / "starts.sqlite")
    key = cache_key(domain, "", [], f"\0reset+verify {task_fingerprint(task)}")
    if (hit := cache.get(key)) is not None:
        start = json.loads(hit[0])
        return Start(start["system_prompt"], start["observation"], start["reward"])
    env = domains.get(domain).make_env()
    try:
        first = env.reset(task)
        prompt = env.system_prompt()
        try:
            reward = env.verify()
        except LwmError:  # a verifier that cannot run on the start: no reward known for it
            reward = None
    finally:
        env.close()
    cache.put(key, json.dumps({"observation": first, "system_prompt": prompt, "reward": reward}), {"kind": "real"})
    return Start(prompt, first, reward)
