"""The bundled mcp suite: tool calls on three real, stateful MCP servers
(``Task.options["server"]``):

``sqlite``   the reference SQLite server: tables, inserts, queries, SQL errors, insights memo
``memory``   the reference knowledge-graph server: entities, relations, observations, search
``tickets``  lwm's ticket tracker: create/list (paginated)/update/comment/close/search,
             validation errors

Families are ``<server>-<topic>``. Verified episodes end with a probe call on the final
state (``read_query``, ``open_nodes``/``search_nodes``, ``get_ticket``/``list_tickets``);
some are scripted to fail their task (tag ``fails``). :func:`random_scripts` adds a seeded
random policy per server with malformed calls (unknown tools, missing arguments, wrong
types, non-JSON).
"""

from __future__ import annotations

import random

from lwm.domains.mcp.spec import call
from lwm.envs.base import Check, Task
from lwm.envs.episode import Script


def _ep(
    name: str,
    server: str,
    topic: str,
    instruction: str,
    *actions: str,
    setup: tuple[str, ...] = (),
    check: Check | None = None,
    tags: tuple[str, ...] = (),
) -> Script:
    family = f"{server}-{topic}"
    task = Task(
        name=name, family=family, instruction=instruction, setup=tuple(setup), check=check, options={"server": server}
    )
    return Script(task=task, actions=tuple(actions), tags=(server, topic, *tags))


def _sql(q: str) -> str:
    return call("read_query", query=q)


def _w(q: str) -> str:
    return call("write_query", query=q)


_SHOP = (
    call(
        "create_table",
        query="CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, stock INTEGER)",
    ),
    _w(
        "INSERT INTO products (name, price, stock) VALUES ('apple', 0.5, 100), ('banana', 0.25, 150), "
        "('cherry', 3.0, 0), ('dragonfruit', 4.5, 12)"
    ),
)
_GRAPH = (
    call(
        "create_entities",
        entities=[
            {
                "name": "Ada Lovelace",
                "entityType": "person",
                "observations": ["mathematician", "wrote the first program"],
            },
            {"name": "Analytical Engine", "entityType": "machine", "observations": ["designed by Babbage"]},
            {"name": "Charles Babbage", "entityType": "person", "observations": ["inventor"]},
        ],
    ),
    call(
        "create_relations",
        relations=[
            {"from": "Ada Lovelace", "to": "Analytical Engine", "relationType": "wrote about"},
            {"from": "Charles Babbage", "to": "Analytical Engine", "relationType": "designed"},
        ],
    ),
)
_TICKETS = tuple(
    call("create_ticket", title=t, priority=p, assignee=a, tags=g)
    for t, p, a, g in [
        ("Login page returns 500", "urgent", "ada", ["web", "auth"]),
        ("Typo on pricing page", "low", None, ["web"]),
        ("Nightly backup failed", "high", "linus", ["ops"]),
        ("Add dark mode", "normal", "grace", ["ui"]),
        ("Slow search on large accounts", "high", "ada", ["perf"]),
        ("Export to CSV drops unicode", "normal", None, ["data"]),
        ("Update TLS certificates", "urgent", "linus", ["ops", "security"]),
    ]
)

SCRIPTED = [
    # -- sqlite ----------------------------------------------------------------------
    _ep(
        "sqlite-shop-basics",
        "sqlite",
        "basics",
        "Create a products table and list what is in stock.",
        call("list_tables"),
        *_SHOP,
        call("list_tables"),
        call("describe_table", table_name="products"),
        _sql("SELECT name, price FROM products WHERE stock > 0 ORDER BY price DESC"),
        check=Check(_sql("SELECT COUNT(*) AS n FROM products"), "'n': 4"),
    ),
    _ep(
        "sqlite-restock",
        "sqlite",
        "update",
        "Restock cherries to 40 and raise banana's price to 0.3.",
        _sql("SELECT * FROM products WHERE stock = 0"),
        _w("UPDATE products SET stock = 40 WHERE name = 'cherry'"),
        _w("UPDATE products SET price = 0.3 WHERE name = 'banana'"),
        _sql("SELECT name, stock, price FROM products"),
        setup=_SHOP,
        check=Check(_sql("SELECT stock FROM products WHERE name = 'cherry'"), "'stock': 40"),
    ),
    _ep(
        "sqlite-delete-wrong",
        "sqlite",
        "update",
        "Delete the products that are out of stock.",
        _sql("SELECT name FROM products WHERE stock = 0"),
        _w("DELETE FROM products WHERE stock > 100"),
        _sql("SELECT name FROM products ORDER BY id"),
        setup=_SHOP,
        check=Check(_sql("SELECT COUNT(*) AS n FROM products WHERE stock = 0"), "'n': 0"),
        tags=("fails",),
    ),
    _ep(
        "sqlite-errors",
        "sqlite",
        "errors",
        "Run some broken SQL.",
        _sql("SELEC * FROM products"),
        _sql("DELETE FROM products"),
        _w("SELECT * FROM products"),
        _sql("SELECT * FROM nowhere"),
        call("describe_table", table_name="nowhere"),
        call("create_table", query="INSERT INTO products VALUES (9, 'x', 1, 1)"),
        _w("INSERT INTO products (id, name) VALUES (1, 'dup')"),
        _sql("SELECT COUNT(*) FROM products"),
        setup=_SHOP,
        tags=("malformed",),
    ),
    _ep(
        "sqlite-aggregate-unicode",
        "sqlite",
        "analytics",
        "Summarize orders per customer.",
        call("create_table", query="CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, total REAL)"),
        _w("INSERT INTO orders (customer, total) VALUES ('Zoë', 12.5), ('Zoë', 7.5), ('José', 20), ('李', 3.25)"),
        _sql("SELECT customer, COUNT(*) AS n, SUM(total) AS spent FROM orders GROUP BY customer ORDER BY spent DESC"),
        _sql("SELECT * FROM orders WHERE customer = 'nobody'"),
        call("append_insight", insight="José is the top customer by spend."),
        check=Check(_sql("SELECT SUM(total) AS s FROM orders WHERE customer = 'Zoë'"), "'s': 20.0"),
        tags=("unicode", "empty"),
    ),
    _ep(
        "sqlite-hostile-attach",
        "sqlite",
        "hostile",
        "Try to read host files through SQLite.",
        _w("ATTACH DATABASE '/etc/shadow' AS s"),
        _w("ATTACH DATABASE '/etc/passwd' AS p"),
        _w("ATTACH DATABASE '/tmp/side.db' AS side"),
        _sql("SELECT name FROM pragma_database_list ORDER BY seq"),
        _sql("SELECT load_extension('/usr/lib/x86_64-linux-gnu/libm.so.6')"),
        _sql("SELECT COUNT(*) AS n FROM products"),
        setup=_SHOP,
        check=Check(_sql("SELECT COUNT(*) AS n FROM products"), "'n': 4"),
        tags=("hostile",),
    ),
    _ep(
        "sqlite-big-result",
        "sqlite",
        "analytics",
        "Generate and read a large result.",
        _w(
            "CREATE TABLE nums AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000) "
            "SELECT x, x * x AS sq FROM c"
        ),
        _sql("SELECT COUNT(*) AS n, MAX(sq) AS m FROM nums"),
        _sql("SELECT * FROM nums"),
        _sql("SELECT * FROM nums WHERE x % 500 = 0"),
        tags=("large",),
    ),
    # -- memory ----------------------------------------------------------------------
    _ep(
        "memory-build-graph",
        "memory",
        "build",
        "Record Ada, Babbage and the Analytical Engine.",
        call("read_graph"),
        *_GRAPH,
        call("read_graph"),
        check=Check(call("open_nodes", names=["Ada Lovelace"]), "wrote the first program"),
    ),
    _ep(
        "memory-observations",
        "memory",
        "update",
        "Add that Ada was born in 1815; drop 'inventor' from Babbage.",
        call(
            "add_observations",
            observations=[{"entityName": "Ada Lovelace", "contents": ["born 1815", "mathematician"]}],
        ),
        call("delete_observations", deletions=[{"entityName": "Charles Babbage", "observations": ["inventor"]}]),
        call("add_observations", observations=[{"entityName": "Nobody", "contents": ["x"]}]),
        call("open_nodes", names=["Ada Lovelace", "Charles Babbage", "Nobody"]),
        setup=_GRAPH,
        check=Check(call("open_nodes", names=["Ada Lovelace"]), "born 1815"),
    ),
    _ep(
        "memory-search",
        "memory",
        "search",
        "Find everything about engines and people.",
        call("search_nodes", query="engine"),
        call("search_nodes", query="person"),
        call("search_nodes", query="zzz"),
        call("search_nodes", query="BABBAGE"),
        setup=_GRAPH,
        tags=("empty",),
    ),
    _ep(
        "memory-delete",
        "memory",
        "delete",
        "Remove Babbage and the 'designed' relation.",
        call(
            "delete_relations",
            relations=[{"from": "Charles Babbage", "to": "Analytical Engine", "relationType": "designed"}],
        ),
        call("delete_entities", entityNames=["Charles Babbage"]),
        call("read_graph"),
        call("delete_entities", entityNames=["Charles Babbage"]),
        setup=_GRAPH,
        check=Check(call("search_nodes", query="Babbage"), "Charles Babbage"),
        tags=("fails",),
    ),
    _ep(
        "memory-malformed",
        "memory",
        "errors",
        "Malformed graph calls.",
        call("create_entities", entities=[{"name": "X"}]),
        call("create_entities"),
        call("create_relations", relations="r"),
        call("forget_everything"),
        call("open_nodes", names="Ada"),
        '{"name": "read_graph", "arguments": []}',
        call("create_entities", entities=[{"name": "Ünïcödé ✓", "entityType": "thing", "observations": []}]),
        call("create_entities", entities=[{"name": "Ünïcödé ✓", "entityType": "thing", "observations": []}]),
        call("read_graph"),
        tags=("malformed", "unicode"),
    ),
    # -- tickets ---------------------------------------------------------------------
    _ep(
        "tickets-triage",
        "tickets",
        "triage",
        "Assign the unassigned tickets to grace and mark the urgent ones in progress.",
        call("list_tickets", assignee=None, page_size=10),
        call("update_ticket", ticket_id=2, assignee="grace"),
        call("update_ticket", ticket_id=6, assignee="grace"),
        call("list_tickets", priority="urgent"),
        call("update_ticket", ticket_id=1, status="in_progress"),
        call("update_ticket", ticket_id=7, status="in_progress"),
        call("list_tickets", status="in_progress"),
        setup=_TICKETS,
        check=Check(call("list_tickets", assignee="grace", page_size=10), '"total": 3'),
    ),
    _ep(
        "tickets-pagination",
        "tickets",
        "list",
        "Page through all tickets three at a time.",
        call("list_tickets", page_size=3),
        call("list_tickets", page_size=3, page=2),
        call("list_tickets", page_size=3, page=3),
        call("list_tickets", page_size=3, page=4),
        call("list_tickets", page=0),
        call("list_tickets", page_size=500),
        setup=_TICKETS,
        tags=("empty", "errors"),
    ),
    _ep(
        "tickets-close-flow",
        "tickets",
        "lifecycle",
        "Fix the backup ticket: comment, then close it.",
        call("get_ticket", ticket_id=3),
        call("add_comment", ticket_id=3, author="linus", body="Disk was full; cleaned up."),
        call("close_ticket", ticket_id=3, resolution=""),
        call("close_ticket", ticket_id=3, resolution="Freed disk space"),
        call("close_ticket", ticket_id=3, resolution="again"),
        call("update_ticket", ticket_id=3, priority="low"),
        call("list_tickets", status="closed"),
        setup=_TICKETS,
        check=Check(call("get_ticket", ticket_id=3), '"status": "closed"'),
    ),
    _ep(
        "tickets-create-validation",
        "tickets",
        "create",
        "File a bug about the broken export.",
        call("create_ticket", title="   "),
        call("create_ticket", title="x" * 250),
        call("create_ticket", title="Export broken", priority="critical"),
        call(
            "create_ticket",
            title="Export broken",
            priority="high",
            tags=["data", "data", "export"],
            description="CSV export fails for names with ü",
        ),
        call("get_ticket", ticket_id=1),
        call("search_tickets", query="ü"),
        check=Check(call("search_tickets", query="export"), '"count": 1'),
        tags=("errors", "unicode"),
    ),
    _ep(
        "tickets-search",
        "tickets",
        "search",
        "Find tickets about the web and ops.",
        call("search_tickets", query="page"),
        call("search_tickets", query="%"),
        call("search_tickets", query=""),
        call("search_tickets", query="tls", limit=0),
        call("search_tickets", query="backup", limit=1),
        setup=_TICKETS,
        tags=("errors",),
    ),
    _ep(
        "tickets-wrong-ticket",
        "tickets",
        "lifecycle",
        "Close the dark-mode ticket as won't-fix.",
        call("search_tickets", query="dark"),
        call("close_ticket", ticket_id=5, resolution="Won't fix"),
        call("get_ticket", ticket_id=5),
        setup=_TICKETS,
        check=Check(call("get_ticket", ticket_id=4), '"status": "closed"'),
        tags=("fails",),
    ),
    _ep(
        "tickets-malformed",
        "tickets",
        "errors",
        "Malformed ticket calls.",
        call("get_ticket"),
        call("get_ticket", ticket_id="one"),
        call("get_ticket", ticket_id=99),
        call("update_ticket", ticket_id=1),
        call("update_ticket", ticket_id=1, status="closed"),
        call("delete_ticket", ticket_id=1),
        "get ticket 1",
        call("add_comment", ticket_id=1, author="a", body=" "),
        setup=_TICKETS[:2],
        tags=("malformed",),
    ),
]


# -- the seeded random policy ------------------------------------------------------------
def _random_sqlite(rng: random.Random) -> str:
    n = rng.randrange(1, 6)
    return rng.choice(
        [
            _sql(f"SELECT * FROM products WHERE stock > {rng.randrange(200)}"),
            _w(f"UPDATE products SET stock = stock + {n} WHERE id = {n}"),
            _w(f"INSERT INTO products (name, price, stock) VALUES ('item{n}', {n}.5, {n})"),
            call("list_tables"),
            call("describe_table", table_name=rng.choice(["products", "nope"])),
            _sql("SELECT name FROM products ORDER BY price"),
            _sql("SELECT broken FROM"),
            call("read_query"),
            call("read_query", query=n),
            call("drop_table", table="products"),
            '{"name": "read_query", "arguments": {"query": "SELECT 1"}',
            "SELECT 1",
        ]
    )


def _random_memory(rng: random.Random) -> str:
    who = rng.choice(["Ada Lovelace", "Charles Babbage", "Analytical Engine", "Grace Hopper"])
    return rng.choice(
        [
            call("read_graph"),
            call("search_nodes", query=rng.choice(["Ada", "machine", "zzz"])),
            call("open_nodes", names=[who]),
            call("add_observations", observations=[{"entityName": who, "contents": [f"fact {rng.randrange(9)}"]}]),
            call("create_entities", entities=[{"name": who, "entityType": "person", "observations": []}]),
            call("delete_entities", entityNames=[who]),
            call("create_relations", relations=[{"from": who, "to": "Ada Lovelace", "relationType": "knows"}]),
            call("create_entities", entities="nope"),
            call("search_nodes"),
            call("remember", text=who),
            '{"arguments": {}}',
        ]
    )


def _random_tickets(rng: random.Random) -> str:
    tid = rng.randrange(0, 10)
    return rng.choice(
        [
            call("create_ticket", title=f"Issue {rng.randrange(100)}", priority=rng.choice(["low", "high", "bogus"])),
            call("get_ticket", ticket_id=tid),
            call("list_tickets", page=rng.randrange(1, 4), page_size=rng.randrange(1, 4)),
            call("update_ticket", ticket_id=tid, assignee=rng.choice(["ada", "linus"])),
            call("close_ticket", ticket_id=tid, resolution="done"),
            call("search_tickets", query=rng.choice(["page", "x", "ops"])),
            call("add_comment", ticket_id=tid, author="bot", body="ping"),
            call("get_ticket", ticket_id=str(tid) + "x"),
            call("list_tickets", page_size=-1),
            call("reopen_ticket", ticket_id=tid),
            '{"name": "get_ticket", "arguments": {"ticket_id": 1}, "extra": true}',
        ]
    )


_RANDOM = {
    "sqlite": (_random_sqlite, _SHOP, _sql("SELECT COUNT(*) AS n FROM products"), "'n': "),
    "memory": (_random_memory, _GRAPH, call("open_nodes", names=["Ada Lovelace"]), "mathematician"),
    "tickets": (_random_tickets, _TICKETS[:3], call("get_ticket", ticket_id=1), '"id": 1'),
}


def random_scripts(seed: int, n: int) -> list[Script]:
    """``n`` open-loop episodes of a seeded random policy, cycling over the servers."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        server = ("sqlite", "memory", "tickets")[i % 3]
        policy, setup, probe, expect = _RANDOM[server]
        actions = [policy(rng) for _ in range(rng.randint(5, 7))]
        check = Check(probe, expect) if i % 2 == 0 else None
        out.append(
            _ep(
                f"mcp-random-{seed}-{i}",
                server,
                "random",
                "Explore the server's tools.",
                *actions,
                setup=setup,
                check=check,
                tags=("random", "malformed"),
            )
        )
    return out


SCRIPTS: list[Script] = [*SCRIPTED, *random_scripts(11, 6)]
EXTENDED: set[str] = set()
