"""The code domain: a persistent Python interpreter in the sandbox; actions are cells."""

from __future__ import annotations

from lwm.domains import AgentTool, Domain, Lazy, rubrics
from lwm.domains.base import TaskOption
from lwm.domains.code import spec

__all__ = ["DOMAIN"]


DOMAIN = Domain(
    name=spec.NAME,
    description="a persistent Python 3.11 interpreter; actions are cells, observations stdout, stderr, Out[n]",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    action_format=spec.ACTION_FORMAT,
    action_lang=spec.ACTION_LANG,
    tool=AgentTool("run_cell", (
        "Run a cell of Python source in a persistent interpreter (working directory /app) and return its "
        "stdout, stderr and the value of a final expression (Out[n]). Plain Python, no Markdown. "
        "Example: print(sum(range(10)))"), well_formed=spec.compiles),
    canonical=spec.canonical,
    rubric=rubrics.GENERIC,
    reward_rubric=('Success in a Python interpreter: the variables, functions or files the task asks for hold '
                   "exactly the asked values at the end; a traceback after a cell means the cell's work stopped "
                   'there.'),
    certain_answer=spec.certain_answer,
    trivial_observation=spec.trivial_observation,
    rules_out=spec.rules_out,
    probe_output=spec.probe_output,
    environment=Lazy("lwm.domains.code.env:CodeEnv"),
    task_options=(TaskOption("cell_timeout", "a number of seconds in (0, 3600]",
                             lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 3600),),
    suite=Lazy("lwm.domains.code.suite"),
    tasks=Lazy("lwm.domains.code.tasks"),
    actions_name_values=True,
)
