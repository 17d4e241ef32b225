"""Database task families: SQL typed into a real client session (SQLite by default).

Every statement of the setups, solutions and probes is valid for both engines, so a task
also plays on PostgreSQL with ``options={"engine": "postgres"}`` (:func:`on_engine`).
Verifiers run a ``SELECT`` of one text column ``v`` in a separate one-shot client on the
committed final state (``DbEnv.probe``) and want exactly the listed rows: the regex
anchors them between the header's dashes and the end of the output (SQLite's
``-header -column``) or psql's ``(n rows)`` footer. The expected rows never occur in the
probe's own text, so an error message that quotes the query cannot pass.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable

from lwm.domains.tasks import NAMES, WORDS, TaskFamily
from lwm.envs.base import Check, Task

DOMAIN = "db"


def on_engine(task: Task, engine: str) -> Task:
    """The same task on another engine (``sqlite`` or ``postgres``)."""
    return dataclasses.replace(task, options={**task.options, "engine": engine})


def _rows(query: str, rows: list[str]) -> Check:
    """The query's result is exactly ``rows`` (one column, in order)."""
    body = "\n".join(rf"[ \t]*{re.escape(r)}[ \t]*" for r in rows)
    return Check(query, rf"-\n{body}\n(\(\d+ rows?\)\n)?\s*\Z", "regex")


def _task(family: str, instruction: str, check: Check, setup: tuple[str, ...]) -> Task:
    return Task(name=family, family=family, instruction=instruction, setup=setup, check=check,
                options={"engine": "sqlite"})


def _values(*rows: tuple) -> str:
    return ", ".join("(" + ", ".join(f"'{v}'" if isinstance(v, str) else str(v) for v in row) + ")" for row in rows)


def _people(rng: random.Random, k: int) -> list[tuple[str, int]]:
    names, ages = rng.sample(NAMES, k), rng.sample(range(18, 90), k)
    return list(zip(names, ages))


def insert_row(rng: random.Random):
    *old, new = _people(rng, rng.randint(3, 4))
    setup = ("CREATE TABLE people (name TEXT NOT NULL, age INTEGER NOT NULL)",
             f"INSERT INTO people VALUES {_values(*old)}")
    expected = [f"{n}={a}" for n, a in sorted([*old, new], key=lambda p: p[1])]
    return (_task("insert-row", f"Insert a row into the table people with name '{new[0]}' and age {new[1]}.",
                  _rows("SELECT name || '=' || age AS v FROM people ORDER BY age;", expected), setup),
            (f"INSERT INTO people (name, age) VALUES ('{new[0]}', {new[1]});",))


def create_table(rng: random.Random):
    table = rng.choice(WORDS) + "s"
    text_col, int_col = rng.choice(("name", "title", "label", "city")), rng.choice(("qty", "score", "year", "rank"))
    probe = f"SELECT 'columns ' || count(*) AS v FROM (SELECT {text_col}, {int_col} FROM {table}) AS t;"
    return (_task("create-table", f"Create a table named {table} with two columns: {text_col} of type TEXT and "
                  f"{int_col} of type INTEGER.", _rows(probe, ["columns 0"]), ()),
            (f"CREATE TABLE {table} ({text_col} TEXT, {int_col} INTEGER);",))


def _products(rng: random.Random) -> list[tuple[int, str, int]]:
    return [(i + 1, w, rng.randint(0, 60)) for i, w in enumerate(rng.sample(WORDS[:10], rng.randint(3, 5)))]


def update_value(rng: random.Random):
    rows = _products(rng)
    _, name, stock = rng.choice(rows)
    new = rng.choice([s for s in range(5, 100, 5) if s != stock])
    setup = ("CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, stock INTEGER NOT NULL)",
             f"INSERT INTO products VALUES {_values(*rows)}")
    expected = [f"{n}={new if n == name else s}" for _, n, s in rows]
    return (_task("update-value", f"In the table products, change the stock of {name} to {new}.",
                  _rows("SELECT name || '=' || stock AS v FROM products ORDER BY id;", expected), setup),
            (f"UPDATE products SET stock = {new} WHERE name = '{name}';",))


def delete_rows(rng: random.Random):
    n = rng.randint(4, 7)
    statuses = ["done", "open"] + [rng.choice(("done", "open")) for _ in range(n - 2)]
    rng.shuffle(statuses)
    rows = [(i + 1, w, s) for i, (w, s) in enumerate(zip(rng.sample(WORDS, n), statuses))]
    setup = ("CREATE TABLE tasks (id INTEGER PRIMARY KEY, title TEXT NOT NULL, status TEXT NOT NULL)",
             f"INSERT INTO tasks VALUES {_values(*rows)}")
    expected = [f"{i} {t}" for i, t, s in rows if s == "open"]
    return (_task("delete-rows", "Delete every row of the table tasks whose status is 'done'.",
                  _rows("SELECT id || ' ' || title AS v FROM tasks ORDER BY id;", expected), setup),
            ("DELETE FROM tasks WHERE status = 'done';",))


def increase_all(rng: random.Random):
    rows = [(i + 1, w, rng.randint(1, 50)) for i, w in enumerate(rng.sample(WORDS[10:20], rng.randint(3, 5)))]
    add = rng.randint(2, 20)
    setup = ("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price INTEGER NOT NULL)",
             f"INSERT INTO items VALUES {_values(*rows)}")
    return (_task("increase-all", f"Increase the price of every row of the table items by {add}.",
                  _rows("SELECT name || '=' || price AS v FROM items ORDER BY id;",
                        [f"{n}={p + add}" for _, n, p in rows]), setup),
            (f"UPDATE items SET price = price + {add};",))


def _orders(rng: random.Random, customers: list[str]) -> list[tuple[int, str, int]]:
    return [(i + 1, rng.choice(customers), rng.randint(5, 300)) for i in range(rng.randint(5, 9))]


_ORDERS = "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL, amount INTEGER NOT NULL)"


def save_count(rng: random.Random):
    rows = _orders(rng, rng.sample(NAMES, 3))
    limit = rng.choice((50, 100, 150, 200))
    count = sum(a > limit for *_, a in rows)
    return (_task("save-count", f"Create a table named answer with a single column n holding the number of rows "
                  f"of the table orders whose amount is greater than {limit}.",
                  _rows("SELECT 'answer ' || n AS v FROM answer;", [f"answer {count}"]),
                  (_ORDERS, f"INSERT INTO orders VALUES {_values(*rows)}")),
            (f"CREATE TABLE answer AS SELECT count(*) AS n FROM orders WHERE amount > {limit};",))


def add_column(rng: random.Random):
    names = rng.sample(NAMES, rng.randint(3, 4))
    who, city = rng.choice(names), rng.choice(("London", "Paris", "Oslo", "Lima", "Cairo", "Kyoto"))
    setup = ("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
             f"INSERT INTO users VALUES {_values(*enumerate(names, 1))}")
    expected = [f"{n}:{city if n == who else '-'}" for n in names]
    return (_task("add-column", f"Add a column named city of type TEXT to the table users, then set the city of "
                  f"{who} to '{city}' (the other users keep no city).",
                  _rows("SELECT name || ':' || coalesce(city, '-') AS v FROM users ORDER BY id;", expected), setup),
            ("ALTER TABLE users ADD COLUMN city TEXT;", f"UPDATE users SET city = '{city}' WHERE name = '{who}';"))


def create_and_fill(rng: random.Random):
    table = rng.choice(("stock", "basket", "pantry", "cart"))
    (a, qa), (b, qb) = zip(rng.sample(WORDS[:10], 2), rng.sample(range(1, 20), 2))
    probe = f"SELECT item || ' x' || qty AS v FROM {table} ORDER BY qty;"
    expected = [f"{i} x{q}" for i, q in sorted([(a, qa), (b, qb)], key=lambda r: r[1])]
    return (_task("create-and-fill", f"Create a table named {table} with columns item (TEXT) and qty (INTEGER), "
                  f"then insert two rows: item '{a}' with qty {qa}, and item '{b}' with qty {qb}.",
                  _rows(probe, expected), ()),
            (f"CREATE TABLE {table} (item TEXT, qty INTEGER);",
             f"INSERT INTO {table} (item, qty) VALUES ('{a}', {qa}), ('{b}', {qb});"))


def transfer(rng: random.Random):
    names = rng.sample(NAMES, 3)
    balances = [rng.randrange(100, 1000, 10) for _ in names]
    src, dst = rng.sample(range(3), 2)
    amount = rng.randrange(10, balances[src], 10)
    after = list(balances)
    after[src] -= amount
    after[dst] += amount
    setup = ("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT NOT NULL, balance INTEGER NOT NULL)",
             f"INSERT INTO accounts VALUES {_values(*zip(range(1, 4), names, balances))}")
    return (_task("transfer", f"In the table accounts, move {amount} from the balance of {names[src]} to the "
                  f"balance of {names[dst]}.",
                  _rows("SELECT name || '=' || balance AS v FROM accounts ORDER BY id;",
                        [f"{n}={b}" for n, b in zip(names, after)]), setup),
            (f"UPDATE accounts SET balance = balance - {amount} WHERE name = '{names[src]}';",
             f"UPDATE accounts SET balance = balance + {amount} WHERE name = '{names[dst]}';"))


def archive_rows(rng: random.Random):
    customers = rng.sample(NAMES, 3)
    rows = _orders(rng, customers)
    who = rows[0][1]
    moved = sum(c == who for _, c, _ in rows)
    probe = ("SELECT (SELECT count(*) FROM archive) || '/' || (SELECT count(*) FROM orders) || '/' || "
             f"(SELECT count(*) FROM archive WHERE customer <> '{who}') || '/' || "
             f"(SELECT count(*) FROM orders WHERE customer = '{who}') AS v;")
    return (_task("archive-rows", f"Create a table named archive holding the rows of the table orders whose customer "
                  f"is '{who}' (same columns), then delete those rows from orders.",
                  _rows(probe, [f"{moved}/{len(rows) - moved}/0/0"]),
                  (_ORDERS, f"INSERT INTO orders VALUES {_values(*rows)}")),
            (f"CREATE TABLE archive AS SELECT * FROM orders WHERE customer = '{who}';",
             f"DELETE FROM orders WHERE customer = '{who}';"))


FAMILIES = [
    TaskFamily("insert-row", DOMAIN, 1, "insert one given row", insert_row),
    TaskFamily("create-table", DOMAIN, 1, "create a table with two given columns", create_table),
    TaskFamily("update-value", DOMAIN, 1, "change one row's value", update_value),
    TaskFamily("delete-rows", DOMAIN, 1, "delete the rows with a given status", delete_rows),
    TaskFamily("increase-all", DOMAIN, 1, "add a number to a column of every row", increase_all),
    TaskFamily("save-count", DOMAIN, 1, "store a filtered count in a new table", save_count),
    TaskFamily("add-column", DOMAIN, 2, "add a column, then fill it for one row", add_column),
    TaskFamily("create-and-fill", DOMAIN, 2, "create a table and insert two rows", create_and_fill),
    TaskFamily("transfer", DOMAIN, 2, "move an amount between two rows", transfer),
    TaskFamily("archive-rows", DOMAIN, 2, "copy rows to a new table, then delete them", archive_rows),
]
#: Held-out families: one easy, one harder one-action, one multi-step.
HELD_OUT = ("delete-rows", "save-count", "transfer")


def _first(task: Task, solution: tuple[str, ...]) -> tuple[str, ...]:
    return solution[:1]


#: Plausible wrong attempts the real verifier must fail (printing instead of writing, a wrong value, a step left out).
WRONG: dict[str, Callable[[Task, tuple[str, ...]], tuple[str, ...]]] = {
    "insert-row": lambda t, s: (s[0].replace("INSERT INTO people (name, age) VALUES", "SELECT")
                                    .replace("(", "").replace(")", ""),),
    "create-table": lambda t, s: (re.sub(r"\(.*\)", "(a TEXT, b INTEGER)", s[0]),),
    "update-value": lambda t, s: (s[0].split(" WHERE ")[0] + ";",),
    "delete-rows": lambda t, s: ("DELETE FROM tasks;",),
    "increase-all": lambda t, s: (s[0].replace("price + ", ""),),
    "save-count": lambda t, s: (s[0].replace("CREATE TABLE answer AS ", ""),),
    "add-column": _first,
    "create-and-fill": _first,
    "transfer": _first,
    "archive-rows": _first,
}
