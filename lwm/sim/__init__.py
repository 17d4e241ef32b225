"""The world model as an environment: simulated episodes, the reward model, one interface
for real, simulated, replayed and hybrid environments (:func:`make_env`,
:class:`EnvFactory`), rollouts and the RL interfaces (Gymnasium, TRL, OpenEnv)."""

from lwm.envs.cache import ReplayCache, cache_key
from lwm.envs.recorded import RealBackendEnv, ReplayEnv
from lwm.errors import CacheMissError
from lwm.sim.backends import BACKENDS, EnvFactory, HybridEnv, env_factory, make_env
from lwm.sim.controls import Control
from lwm.sim.env import SimEnv
from lwm.sim.reward import RewardVerdict, judge_reward

__all__ = ["BACKENDS", "CacheMissError", "Control", "EnvFactory", "HybridEnv", "RealBackendEnv", "ReplayCache",
           "ReplayEnv", "RewardVerdict", "SimEnv", "cache_key", "env_factory", "judge_reward", "make_env"]
