"""Real, sandboxed environments (ground truth) behind one protocol."""

from __future__ import annotations

from lwm.envs.base import RealEnvironment, StepResult, Task

__all__ = ["RealEnvironment", "StepResult", "Task", "make_real_env", "REAL_DOMAINS"]

#: Domains with a real environment on this machine.
REAL_DOMAINS = ("terminal",)


def make_real_env(domain: str) -> RealEnvironment:
    """A fresh real environment of ``domain``.

    Raises:
        KeyError: no real environment for this domain.
    """
    if domain == "terminal":
        from lwm.envs.terminal import TerminalEnv

        return TerminalEnv()
    raise KeyError(f"no real environment for domain {domain!r} (available: {', '.join(REAL_DOMAINS)})")
