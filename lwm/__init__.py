"""lwm: Language World Models.

Collect real transitions in sandboxed environments, predict them with a world model,
score the predictions, and use the world model as an environment. Heavy parts
(llama.cpp, the environments) load on first use.

Example:
    >>> from lwm import parse_output
    >>> parse_output("<think>ls lists files</think><predicted_observation>a.txt</predicted_observation>").observation
    'a.txt'
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # data
    "Turn": "lwm.schema", "Trajectory": "lwm.schema", "Transition": "lwm.schema", "Provenance": "lwm.schema",
    "BenchRow": "lwm.schema", "read_rows": "lwm.schema", "write_rows": "lwm.schema",
    "rows_from_trajectory": "lwm.schema",
    # parsing and metrics
    "parse_output": "lwm.parse", "observation_text": "lwm.parse",
    "fidelity": "lwm.metrics", "volatile_spans": "lwm.data.volatility",
    # domains and environments
    "Domain": "lwm.domains", "Task": "lwm.envs.base", "Check": "lwm.envs.base", "StepResult": "lwm.envs.base",
    "Script": "lwm.envs.episode", "play_episode": "lwm.envs.episode",
    "Sandbox": "lwm.envs.sandbox", "SandboxLimits": "lwm.envs.sandbox",
    # models
    "load_model": "lwm.models", "ModelSpec": "lwm.models", "SamplingParams": "lwm.models.base",
    "ChatModel": "lwm.models.base",
    # pipelines
    "collect": "lwm.data.collect", "CollectConfig": "lwm.data.collect",
    "evaluate": "lwm.eval.runner", "run_eval": "lwm.eval.runner", "EvalConfig": "lwm.eval.runner",
    "load_rows": "lwm.eval.runner",
    "import_logs": "lwm.data.importers",
    "import_transitions": "lwm.data.transitions",
    # the world model as an environment
    "make_env": "lwm.sim", "EnvFactory": "lwm.sim", "SimEnv": "lwm.sim", "Control": "lwm.sim",
    "ReplayCache": "lwm.sim",
    "rollout": "lwm.sim.rollout", "RolloutConfig": "lwm.sim.rollout", "wm2real": "lwm.eval.wm2real",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'lwm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
