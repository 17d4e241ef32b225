"""Real, sandboxed environments (ground truth) behind one protocol."""

from __future__ import annotations

import importlib

from lwm.envs.base import Check, EnvironmentBase, RealEnvironment, StepResult, Task

__all__ = ["Check", "EnvironmentBase", "RealEnvironment", "StepResult", "Task", "make_real_env",
           "REAL_DOMAINS", "IMPORT_ONLY_DOMAINS"]

# domain -> "module:class"; imported on use so that one domain's tools are not needed by another.
_ENVIRONMENTS = {
    "terminal": "lwm.envs.terminal:TerminalEnv",
    "fs": "lwm.envs.fs:FsEnv",
    "mcp": "lwm.envs.mcp:McpEnv",
    "db": "lwm.envs.db:DbEnv",
    "code": "lwm.envs.code:CodeEnv",
    "search": "lwm.envs.search:SearchEnv",
    "web": "lwm.envs.web:WebEnv",
    "swe": "lwm.envs.swe:SweEnv",
}
#: Domains with a real environment on this machine.
REAL_DOMAINS = tuple(_ENVIRONMENTS)
#: Domains whose real environment (a desktop VM, an Android emulator) cannot run here:
#: their trajectories come from importers (``lwm import``).
IMPORT_ONLY_DOMAINS = ("os", "android")


def make_real_env(domain: str, **kwargs) -> RealEnvironment:
    """A fresh real environment of ``domain`` (keyword arguments go to its class).

    Raises:
        KeyError: no real environment for this domain.
    """
    if domain not in _ENVIRONMENTS:
        hint = " (it has no real environment here; use `lwm import`)" if domain in IMPORT_ONLY_DOMAINS else ""
        raise KeyError(f"no real environment for domain {domain!r}{hint}; available: {', '.join(REAL_DOMAINS)}")
    module, cls = _ENVIRONMENTS[domain].split(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)
