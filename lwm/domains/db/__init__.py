"""The database domain: SQL typed into a real ``sqlite3`` or ``psql`` client in the sandbox."""

from __future__ import annotations

from lwm.domains import AgentTool, Asset, Domain, Lazy, rubrics
from lwm.domains.base import TaskOption
from lwm.domains.db import spec

__all__ = ["DOMAIN"]


def _postgres_template(force: bool):
    from lwm.domains.db.env import postgres_template

    return postgres_template()


DOMAIN = Domain(
    name=spec.NAME,
    description="sqlite3 and psql (PostgreSQL 15) sessions; actions are SQL, observations what the client prints",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    invalid_answer=spec.invalid_answer,
    action_format=spec.ACTION_FORMAT,
    action_lang=spec.ACTION_LANG,
    tool=AgentTool("run_sql", (
        "Type SQL (statements ending in ';', or client meta-commands such as .tables) into the database "
        "client and return what it prints. Example: SELECT name FROM customers WHERE city = 'London';"),
        well_formed=spec.ends_a_statement),
    canonical=spec.canonical,
    rubric=rubrics.GENERIC,
    reward_rubric=('Success in a database: the tables and rows the task asks for are in the committed state, as '
                   "a query's output shows them; a statement answered by an error, or a transaction left open or "
                   'rolled back, changed nothing.'),
    trivial_observation=spec.trivial_observation,
    certain_answer=spec.certain_answer,
    environment=Lazy("lwm.domains.db.env:DbEnv"),
    task_options=(TaskOption.choice("engine", spec.ENGINES),),
    suite=Lazy("lwm.domains.db.suite"),
    tasks=Lazy("lwm.domains.db.tasks"),
    assets=(Asset("PostgreSQL template cluster", _postgres_template),),
    actions_name_values=True,
)
