"""The machinery every real environment shares: the environment protocol (:mod:`lwm.envs.base`),
the bubblewrap sandbox (:mod:`lwm.envs.sandbox`), in-sandbox controllers
(:mod:`lwm.envs.controller`), the MCP client (:mod:`lwm.domains.mcp.client`), recorded and
replayed episodes (:mod:`lwm.envs.recorded`, :mod:`lwm.envs.cache`) and the episode loop
(:mod:`lwm.envs.episode`). Each domain's own environment lives in its folder
(``lwm/domains/<name>/env.py``); get one with ``lwm.domains.get(name).make_env()``.
"""

from lwm.envs.base import Check, EnvironmentBase, RealEnvironment, StepResult, Task

__all__ = ["Check", "EnvironmentBase", "RealEnvironment", "StepResult", "Task"]
