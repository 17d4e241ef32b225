"""The protocol every real environment follows.

``reset(task) -> observation``, ``step(action) -> StepResult``, ``close()``. Actions and
observations are text in the domain's format (see ``lwm.domains``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Task:
    """What an episode starts from.

    Attributes:
        name: unique name of the episode (e.g. ``pipes-wordcount``).
        family: the task family, for leak-free splits (e.g. ``pipes``).
        instruction: the instruction given to the agent (may be empty for probes).
        files: files created before the episode, ``{absolute path inside: content}``.
        setup: shell commands run before the first observation (not recorded).
    """

    name: str
    family: str = ""
    instruction: str = ""
    files: dict[str, str] = field(default_factory=dict)
    setup: tuple[str, ...] = ()


@dataclass
class StepResult:
    """What ``step`` returns.

    Attributes:
        observation: the next observation, in the domain's format.
        reward: the task reward where the environment can verify the task, else ``None``.
        done: the episode has ended (the agent said it is done, or the environment ended).
        info: diagnostics (e.g. ``duration_capped``, timings in seconds).
    """

    observation: str
    reward: float | None = None
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class RealEnvironment(Protocol):
    """A real, sandboxed environment of one domain."""

    domain: str

    def reset(self, task: Task) -> str:
        """Start a fresh episode; return the initial observation."""
        ...

    def step(self, action: str) -> StepResult:
        """Apply one action (text in the domain's format)."""
        ...

    def system_prompt(self) -> str:
        """The world-model system prompt describing this environment."""
        ...

    def close(self) -> None:
        """Release everything (processes, files). Safe to call twice."""
        ...
