"""MCP task families: tool calls on lwm's ticket tracker and the reference knowledge-graph
server (``options["server"]``: ``tickets`` or ``memory``).

Verifiers read the final state with a read-only call (``get_ticket``, ``list_tickets``,
``open_nodes``) whose JSON the servers print with a fixed indentation and key order; a
check wants each listed line whole (``_lines``: one look-ahead per line, in any order), so
other fields, added by a more thorough agent, do not matter. Error results ("Ticket 9 not
found") never contain those lines.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

from lwm.domains.mcp.spec import call
from lwm.domains.tasks import NAMES, WORDS, TaskFamily
from lwm.envs.base import Check, Task

DOMAIN = "mcp"
_PRIORITIES = ("low", "high", "urgent")  # not "normal": the default must not pass by itself
_VERBS = ("Fix", "Update", "Review", "Check", "Document", "Refactor")
_THINGS = ("login page", "backup job", "search box", "export button", "billing report", "sign-up form",
           "cache layer", "error page", "audit log", "user settings")


def _lines(probe: str, *fields: tuple[int, str, object]) -> Check:
    """Every ``(indent, key, value)`` line of the pretty JSON is present (key ``""``: a list item)."""
    heads = []
    for indent, key, value in fields:
        text = json.dumps(value, ensure_ascii=False)
        body = f"{json.dumps(key)}: {text}" if key else text
        heads.append(rf"(?=[\s\S]*^{' ' * indent}{re.escape(body)},?$)")
    return Check(probe, r"\A" + "".join(heads), "regex")


def _task(family: str, server: str, instruction: str, check: Check, setup: tuple[str, ...] = ()) -> Task:
    return Task(name=family, family=family, instruction=instruction, setup=setup, check=check,
                options={"server": server})


def _tickets(rng: random.Random, n: int, assignees: tuple[str, ...] = ()) -> list[dict]:
    pool = assignees or tuple(name.lower() for name in rng.sample(NAMES, 3))
    titles = rng.sample([f"{v} the {t}" for v in _VERBS for t in _THINGS], n)
    return [{"title": t, "priority": rng.choice(("low", "normal", "high")), "assignee": rng.choice(pool)}
            for t in titles]


def _create(tickets: list[dict]) -> tuple[str, ...]:
    return tuple(call("create_ticket", **t) for t in tickets)


def create_ticket(rng: random.Random):
    existing = _tickets(rng, rng.randint(0, 3))
    title = f"{rng.choice(_VERBS)} the {rng.choice(WORDS)} {rng.choice(('page', 'job', 'report', 'form'))}"
    priority = rng.choice(_PRIORITIES)
    new_id = len(existing) + 1
    return (_task("create-ticket", "tickets", f"Create a ticket titled '{title}' with priority {priority}.",
                  _lines(call("get_ticket", ticket_id=new_id), (2, "title", title), (2, "priority", priority)),
                  _create(existing)),
            (call("create_ticket", title=title, priority=priority),))


def close_ticket(rng: random.Random):
    tickets = _tickets(rng, rng.randint(2, 5))
    tid = rng.randint(1, len(tickets))
    resolution = rng.choice(("fixed", "duplicate", "won't fix", "works for me")) + f" in v{rng.randint(2, 9)}"
    return (_task("close-ticket", "tickets", f"Close ticket number {tid} with the resolution '{resolution}'.",
                  _lines(call("get_ticket", ticket_id=tid), (2, "status", "closed"), (2, "resolution", resolution)),
                  _create(tickets)),
            (call("close_ticket", ticket_id=tid, resolution=resolution),))


def assign_ticket(rng: random.Random):
    tickets = _tickets(rng, rng.randint(2, 5))
    tid = rng.randint(1, len(tickets))
    who = rng.choice([n.lower() for n in NAMES if n.lower() != tickets[tid - 1]["assignee"]])
    return (_task("assign-ticket", "tickets", f"Assign ticket number {tid} to {who}.",
                  _lines(call("get_ticket", ticket_id=tid), (2, "assignee", who), (2, "status", "open")),
                  _create(tickets)),
            (call("update_ticket", ticket_id=tid, assignee=who),))


def comment_ticket(rng: random.Random):
    tickets = _tickets(rng, rng.randint(1, 4))
    tid = rng.randint(1, len(tickets))
    author = rng.choice(NAMES).lower()
    body = f"{rng.choice(('Seen again on', 'Cannot reproduce on', 'Fixed on'))} {rng.choice(WORDS)} server"
    return (_task("comment-ticket", "tickets", f"Add a comment to ticket number {tid} as author {author} with the text "
                  f"'{body}'.", _lines(call("get_ticket", ticket_id=tid), (6, "author", author), (6, "body", body)),
                  _create(tickets)),
            (call("add_comment", ticket_id=tid, author=author, body=body),))


def close_by_title(rng: random.Random):
    tickets = _tickets(rng, rng.randint(3, 6))
    tid = rng.randint(2, len(tickets))  # not the first: closing ticket 1 blindly must fail
    title, resolution = tickets[tid - 1]["title"], f"done in v{rng.randint(2, 9)}"
    return (_task("close-by-title", "tickets", f"Close the ticket titled '{title}' with the resolution "
                  f"'{resolution}'. You do not know its number.",
                  _lines(call("get_ticket", ticket_id=tid), (2, "status", "closed"), (2, "resolution", resolution)),
                  _create(tickets)),
            (call("search_tickets", query=title), call("close_ticket", ticket_id=tid, resolution=resolution)))


def escalate_assignee(rng: random.Random):
    people = tuple(n.lower() for n in rng.sample(NAMES, 3))
    tickets = _tickets(rng, rng.randint(4, 6), people)
    who = people[0]
    tickets[0]["assignee"] = tickets[1]["assignee"] = who  # at least two
    mine = [i + 1 for i, t in enumerate(tickets) if t["assignee"] == who]
    # no ticket starts urgent: the urgent ones at the end are exactly the ones changed
    return (_task("escalate-assignee", "tickets", f"Set the priority of every ticket assigned to {who} to urgent "
                  "(and of no other ticket).",
                  Check(call("list_tickets", priority="urgent", page_size=50),
                        rf'\A(?=[\s\S]*^  "total": {len(mine)},$)(?![\s\S]*"assignee": "(?!{who}"))', "regex"),
                  _create(tickets)),
            (call("list_tickets", assignee=who, page_size=50),
             *(call("update_ticket", ticket_id=i, priority="urgent") for i in mine)))


def _entity(name: str, kind: str, observations: list[str]) -> dict:
    return {"name": name, "entityType": kind, "observations": observations}


def add_entity(rng: random.Random):
    name, kind = rng.choice(NAMES), rng.choice(("person", "engineer", "author", "pilot"))
    fact = f"likes {rng.choice(WORDS)}"
    return (_task("add-entity", "memory", f"Add to the knowledge graph an entity named {name} of type {kind} with "
                  f"the observation '{fact}'.",
                  _lines(call("open_nodes", names=[name]), (6, "name", name), (6, "entityType", kind), (8, "", fact))),
            (call("create_entities", entities=[_entity(name, kind, [fact])]),))


def add_observation(rng: random.Random):
    names = rng.sample(NAMES, 3)
    who, fact = rng.choice(names), f"lives near the {rng.choice(WORDS)} {rng.choice(('park', 'lake', 'station'))}"
    setup = (call("create_entities", entities=[_entity(n, "person", [f"born in {rng.randint(1900, 2000)}"])
                                               for n in names]),)
    return (_task("add-observation", "memory", f"Add the observation '{fact}' to the existing entity {who} of the "
                  "knowledge graph.", _lines(call("open_nodes", names=[who]), (6, "name", who), (8, "", fact)), setup),
            (call("add_observations", observations=[{"entityName": who, "contents": [fact]}]),))


def relate_entities(rng: random.Random):
    a, b = rng.sample(NAMES, 2)
    relation = rng.choice(("knows", "mentors", "works with", "admires"))
    probe = call("open_nodes", names=[a, b])
    return (_task("relate-entities", "memory", f"Add two entities of type person, {a} and {b}, to the knowledge "
                  f"graph, then a relation from {a} to {b} of type '{relation}'.",
                  _lines(probe, (6, "name", a), (6, "name", b), (6, "from", a), (6, "to", b),
                         (6, "relationType", relation))),
            (call("create_entities", entities=[_entity(a, "person", []), _entity(b, "person", [])]),
             call("create_relations", relations=[{"from": a, "to": b, "relationType": relation}])))


FAMILIES = [
    TaskFamily("create-ticket", DOMAIN, 1, "create a ticket with a title and priority", create_ticket),
    TaskFamily("close-ticket", DOMAIN, 1, "close a ticket by number", close_ticket),
    TaskFamily("assign-ticket", DOMAIN, 1, "assign a ticket by number", assign_ticket),
    TaskFamily("comment-ticket", DOMAIN, 1, "comment on a ticket", comment_ticket),
    TaskFamily("close-by-title", DOMAIN, 2, "find a ticket by title, then close it", close_by_title),
    TaskFamily("escalate-assignee", DOMAIN, 3, "raise the priority of one person's tickets", escalate_assignee),
    TaskFamily("add-entity", DOMAIN, 1, "add an entity to the knowledge graph", add_entity),
    TaskFamily("add-observation", DOMAIN, 1, "add an observation to an entity", add_observation),
    TaskFamily("relate-entities", DOMAIN, 2, "add two entities and a relation", relate_entities),
]
#: Held-out families: one easy, one multi-step.
HELD_OUT = ("assign-ticket", "escalate-assignee")


def _args(action: str) -> dict:
    return json.loads(action)["arguments"]


def _first(task: Task, solution: tuple[str, ...]) -> tuple[str, ...]:
    return solution[:1]


#: Plausible wrong attempts the real verifier must fail (printing instead of writing, a wrong value, a step left out).
WRONG: dict[str, Callable[[Task, tuple[str, ...]], tuple[str, ...]]] = {
    "create-ticket": lambda t, s: (call("create_ticket", title=_args(s[0])["title"]),),
    "close-ticket": lambda t, s: (call("update_ticket", ticket_id=_args(s[0])["ticket_id"],
                                            status="in_progress"),),
    "assign-ticket": lambda t, s: (call("add_comment", ticket_id=_args(s[0])["ticket_id"], author="me",
                                             body="assign to " + _args(s[0])["assignee"]),),
    "comment-ticket": lambda t, s: (call("create_ticket", title=_args(s[0])["body"]),),
    "close-by-title": lambda t, s: (call("close_ticket", ticket_id=1, resolution=_args(s[1])["resolution"]),),
    "escalate-assignee": lambda t, s: s[:2],
    "add-entity": lambda t, s: (s[0].replace('"entityType": "', '"entityType": "x'),),
    "add-observation": lambda t, s: (call("create_entities", entities=[
        {"name": "Someone", "entityType": "person", "observations": _args(s[0])["observations"][0]["contents"]}]),),
    "relate-entities": _first,
}
