"""The world model as an environment: simulated episodes, reward judging, one interface
for real, simulated, replayed and hybrid environments."""

from lwm.sim.backends import (
           BACKENDS,
           CacheMissError,
           HybridEnv,
           RealBackendEnv,
           ReplayEnv,
           make_env,
)
from lwm.sim.cache import ReplayCache, cache_key
from lwm.sim.controls import Control
from lwm.sim.env import SimEnv
from lwm.sim.reward import RewardVerdict, judge_reward

__all__ = ["BACKENDS", "CacheMissError", "Control", "HybridEnv", "RealBackendEnv", "ReplayCache", "ReplayEnv",
           "RewardVerdict", "SimEnv", "cache_key", "judge_reward", "make_env"]
