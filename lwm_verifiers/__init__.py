"""The verifiers taskset ``lwm-verifiers``: ``lwm``'s tasks in the real environment or the
simulator (see :mod:`lwm.sim.verifiers_env`). verifiers imports a taskset by its id as a
top-level module, hence this one; ``pip install 'lwm[verifiers]'``."""

from lwm.sim.verifiers_env import LwmEnv, LwmTaskset, load_environment

__all__ = ["LwmEnv", "LwmTaskset", "load_environment"]
