"""The bundled database suite: SQL typed into real ``sqlite3`` and ``psql`` sessions.

Scripted episodes, one family each, for both engines (``options["engine"]``):

``schema``        CREATE/ALTER TABLE, the client's schema listings (.tables, \\dt, \\d)
``joins``         inner/left joins, grouping, HAVING, window functions
``nulls``         NULL comparisons, COALESCE, counting and ordering NULLs
``constraints``   UNIQUE, NOT NULL, CHECK, PRIMARY and FOREIGN KEY violations
``errors``        syntax errors, unknown tables and columns, type errors, unfinished statements
``unicode``       accents, CJK, emoji in data, functions and aligned output
``transactions``  BEGIN/COMMIT/ROLLBACK across turns, savepoints, aborted transactions
``empty``         queries with no rows, aggregates over nothing, empty tables
``long``          long results (truncated), and statements cut by the time limit
``files``         seeded .csv/.sql files read with .import/.read, COPY and \\copy
``random``        a seeded random policy over a small grammar, malformed SQL included

Most episodes start from the same small shop database (:data:`SHOP`). Verified episodes
carry a probe — a SELECT printing one distinctive value — run by a separate client on the
committed final state; a few of them fail on purpose (an uncommitted transaction, an
aborted one, ``= NULL`` instead of ``IS NULL``) so that reward agreement can be measured.
"""

from __future__ import annotations

import random

from lwm.envs.base import Check, Task
from lwm.envs.episode import Script

#: The shop database, valid SQL for both engines.
SHOP = (
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, email TEXT UNIQUE)",
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), "
    "product TEXT NOT NULL, qty INTEGER NOT NULL CHECK (qty > 0), price NUMERIC(8,2) NOT NULL)",
    "INSERT INTO customers VALUES (1, 'Ada', 'London', 'ada@example.com'), (2, 'Grace', 'New York', NULL), "
    "(3, 'Linus', 'Helsinki', 'linus@example.com'), (4, 'Margaret', NULL, 'mh@example.com')",
    "INSERT INTO orders VALUES (1, 1, 'keyboard', 1, 49.90), (2, 1, 'mouse', 2, 19.50), "
    "(3, 2, 'monitor', 1, 229.00), (4, 3, 'laptop', 1, 1299.00), (5, 3, 'mouse', 1, 19.50), "
    "(6, 2, 'cable', 5, 4.25)",
)

_PEOPLE_CSV = "name,age,city\nAda,36,London\nAlan,41,Wilmslow\nGrace,85,Arlington\nZoë,29,Köln\n"
_SEED_SQL = ("CREATE TABLE tags (id INTEGER PRIMARY KEY, label TEXT NOT NULL);\n"
             "INSERT INTO tags VALUES (1, 'red');\nINSERT INTO tags VALUES (2, 'green');\n"
             "INSERT INTO tags VALUES (3, 'blue');\n")


def _ep(name: str, family: str, engine: str, instruction: str, *actions: str, tags: tuple[str, ...] = (),
        setup: tuple[str, ...] = SHOP, check: Check | None = None, files: dict[str, str] | None = None) -> Script:
    task = Task(name=name, family=family, instruction=instruction, files=dict(files or {}), setup=tuple(setup),
                check=check, options={"engine": engine})
    return Script(task=task, actions=tuple(actions), tags=(family, engine, *tags))


# -- SQLite -----------------------------------------------------------------------------
SQLITE = [
    _ep("sqlite-schema-notes", "schema", "sqlite",
        "Create a notes table with an id, a title and a body, and add two notes.",
        ".tables",
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT);",
        ".schema notes",
        "INSERT INTO notes (title, body) VALUES ('shopping', 'milk, eggs');\n"
        "INSERT INTO notes (title) VALUES ('call mum');",
        "SELECT * FROM notes;",
        "ALTER TABLE notes ADD COLUMN pinned INTEGER DEFAULT 0;",
        "SELECT id, title, pinned FROM notes ORDER BY id;",
        ".tables",
        setup=(), check=Check("SELECT 'notes=' || count(*) FROM notes;", "notes=2")),
    _ep("sqlite-joins-spend", "joins", "sqlite",
        "Report how much each customer spent, including customers without orders.",
        "SELECT c.name, o.product, o.qty FROM customers c JOIN orders o ON o.customer_id = c.id ORDER BY o.id;",
        "SELECT c.name, count(o.id) AS n FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
        "GROUP BY c.id ORDER BY c.id;",
        "SELECT c.name, round(sum(o.qty * o.price), 2) AS total FROM customers c JOIN orders o "
        "ON o.customer_id = c.id GROUP BY c.name HAVING total > 100 ORDER BY total DESC;",
        "SELECT product, count(*) AS times, group_concat(customer_id) AS who FROM orders GROUP BY product "
        "ORDER BY product;",
        "SELECT name, (SELECT max(price) FROM orders WHERE customer_id = customers.id) AS top FROM customers;",
        tags=("read-only",)),
    _ep("sqlite-aggregates-summary", "joins", "sqlite",
        "Store each customer's total spending in a new table spend(name, total).",
        "SELECT count(*), sum(qty), avg(price), min(price), max(price) FROM orders;",
        "CREATE TABLE spend AS SELECT c.name AS name, sum(o.qty * o.price) AS total FROM customers c "
        "JOIN orders o ON o.customer_id = c.id GROUP BY c.name;",
        "SELECT * FROM spend ORDER BY total DESC;",
        "SELECT typeof(total), count(*) FROM spend GROUP BY 1;",
        check=Check("SELECT name || '=' || total FROM spend WHERE name = 'Linus';", "Linus=1318.5")),
    _ep("sqlite-nulls-emails", "nulls", "sqlite",
        "Give every customer without an email the address unknown@example.com.",
        "SELECT name, email FROM customers WHERE email = NULL;",
        "SELECT name, email FROM customers WHERE email IS NULL;",
        "SELECT count(*), count(email), count(city) FROM customers;",
        "SELECT name, coalesce(city, '(none)') AS city FROM customers ORDER BY city;",
        "UPDATE customers SET email = 'unknown@example.com' WHERE email = NULL;",
        "SELECT NULL = NULL, NULL IS NULL, 1 + NULL, 'a' || NULL;",
        check=Check("SELECT 'missing=' || count(*) FROM customers WHERE email IS NULL;", "missing=0"),
        tags=("fails",)),
    _ep("sqlite-constraints", "constraints", "sqlite",
        "Try to add bad orders and customers; keep the data valid.",
        "INSERT INTO customers VALUES (1, 'Dup', NULL, NULL);",
        "INSERT INTO customers (id, name, email) VALUES (5, 'Eve', 'ada@example.com');",
        "INSERT INTO customers (id, city) VALUES (6, 'Paris');",
        "INSERT INTO orders VALUES (7, 1, 'pen', 0, 1.00);",
        "INSERT INTO orders VALUES (7, 99, 'pen', 1, 1.00);\nSELECT count(*) FROM orders;",
        "DELETE FROM orders WHERE id = 7;\nPRAGMA foreign_keys = ON;\n"
        "INSERT INTO orders VALUES (8, 99, 'pen', 1, 1.00);",
        "PRAGMA foreign_keys;",
        check=Check("SELECT 'orders=' || count(*) FROM orders;", "orders=6")),
    _ep("sqlite-syntax-errors", "errors", "sqlite",
        "Explore the database (with a few typos on the way).",
        "SELEC * FROM customers;",
        "SELECT * FORM customers;",
        "SELECT nme FROM customers;",
        "SELECT * FROM customer;",
        "SELECT name, FROM customers;",
        "SELECT name FROM customers\nWHERE id = 1",
        ";",
        ".tabels",
        "SELECT 'it''s ok' AS quote, 10 / 0 AS div, '5' + 3 AS coerced;",
        tags=("odd-input",)),
    _ep("sqlite-unicode-names", "unicode", "sqlite",
        "Add customers with non-ASCII names and check how SQLite handles them.",
        "INSERT INTO customers (id, name, city) VALUES (5, 'Zoë', 'Köln'), (6, '李小龙', '香港'), "
        "(7, 'Ōsaka 🍣', NULL);",
        "SELECT id, name, city, length(name) AS len FROM customers WHERE id >= 5;",
        "SELECT upper('zoë'), lower('ÉCOLE'), 'é' LIKE 'É' AS like_ci, 'e' LIKE 'E' AS like_ascii;",
        "SELECT name FROM customers WHERE name LIKE '%ö%' OR name LIKE 'Z%';",
        "SELECT hex('é'), unicode('🍣'), char(9731);",
        check=Check("SELECT group_concat(name, '|') FROM customers WHERE id >= 5;", "Zoë|李小龙|Ōsaka 🍣")),
    _ep("sqlite-transactions", "transactions", "sqlite",
        "Raise all mouse prices by 10%, after trying out and rolling back a discount.",
        "BEGIN;",
        "UPDATE orders SET price = price * 0.5;\nSELECT id, price FROM orders ORDER BY id;",
        "ROLLBACK;\nSELECT id, price FROM orders WHERE product = 'mouse';",
        "BEGIN TRANSACTION;\nUPDATE orders SET price = round(price * 1.1, 2) WHERE product = 'mouse';",
        "COMMIT;",
        "COMMIT;",
        "SELECT id, price FROM orders WHERE product = 'mouse';",
        check=Check("SELECT 'mouse=' || group_concat(price) FROM orders WHERE product = 'mouse';",
                    "mouse=21.45,21.45")),
    _ep("sqlite-txn-uncommitted", "transactions", "sqlite",
        "Delete Grace's orders.",
        "BEGIN;",
        "DELETE FROM orders WHERE customer_id = 2;",
        "SELECT id, product FROM orders ORDER BY id;",
        "SELECT count(*) AS left_for_grace FROM orders WHERE customer_id = 2;",
        check=Check("SELECT 'grace=' || count(*) FROM orders WHERE customer_id = 2;", "grace=0"),
        tags=("fails",)),
    _ep("sqlite-empty-results", "empty", "sqlite",
        "Look for things that are not there.",
        "SELECT * FROM orders WHERE qty > 100;",
        "SELECT count(*), sum(qty), max(price) FROM orders WHERE product = 'tablet';",
        "CREATE TABLE archive (id INTEGER, note TEXT);\nSELECT * FROM archive;",
        "DELETE FROM orders WHERE product = 'tablet';\nSELECT changes();",
        "SELECT name FROM customers WHERE id IN (SELECT customer_id FROM orders WHERE price > 5000);",
        ".schema archive"),
    _ep("sqlite-long-results", "long", "sqlite",
        "Produce long outputs and a runaway query.",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60) "
        "SELECT i, i * i AS sq FROM n;",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) "
        "SELECT i, printf('%08d', i * 7919) AS code FROM n;",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n;",
        "SELECT 'still here';",
        tags=("timeout", "truncated")),
    _ep("sqlite-files-import", "files", "sqlite",
        "Load people.csv and seed.sql into the database.",
        ".import --csv /app/people.csv people",
        "SELECT * FROM people;",
        ".read /app/seed.sql",
        "SELECT * FROM tags ORDER BY label;",
        ".read /app/missing.sql",
        "SELECT name, CAST(age AS INTEGER) + 1 AS next_age FROM people WHERE city LIKE 'K%';",
        setup=(), files={"/app/people.csv": _PEOPLE_CSV, "/app/seed.sql": _SEED_SQL},
        check=Check("SELECT 'people=' || count(*) || ' tags=' || (SELECT count(*) FROM tags) FROM people;",
                    "people=4 tags=3")),
]

# -- PostgreSQL ---------------------------------------------------------------------------
POSTGRES = [
    _ep("pg-schema-notes", "schema", "postgres",
        "Create a notes table with a serial id, a title and a creation day, and add two notes.",
        "\\dt",
        "CREATE TABLE notes (id serial PRIMARY KEY, title text NOT NULL, day date DEFAULT '2024-01-01');",
        "\\d notes",
        "INSERT INTO notes (title) VALUES ('shopping'), ('call mum') RETURNING id, title;",
        "ALTER TABLE notes ADD COLUMN pinned boolean NOT NULL DEFAULT false;",
        "SELECT * FROM notes ORDER BY id;",
        "\\dt",
        setup=(), check=Check("SELECT 'notes=' || count(*) FROM notes;", "notes=2")),
    _ep("pg-joins-window", "joins", "postgres",
        "Rank customers by spending and list their products.",
        "SELECT c.name, o.product, o.qty FROM customers c JOIN orders o ON o.customer_id = c.id ORDER BY o.id;",
        "SELECT c.name, count(o.id) AS n FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
        "GROUP BY c.id, c.name ORDER BY c.id;",
        "SELECT c.name, sum(o.qty * o.price) AS total, rank() OVER (ORDER BY sum(o.qty * o.price) DESC) "
        "FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.name;",
        "SELECT product, count(*) AS times, string_agg(customer_id::text, ',' ORDER BY customer_id) AS who "
        "FROM orders GROUP BY product HAVING count(*) > 1;",
        "SELECT name, city FROM customers WHERE EXISTS (SELECT 1 FROM orders WHERE customer_id = customers.id "
        "AND price > 100) ORDER BY name;",
        tags=("read-only",)),
    _ep("pg-nulls-emails", "nulls", "postgres",
        "Give every customer without an email the address unknown@example.com.",
        "SELECT name, email FROM customers WHERE email = NULL;",
        "SELECT name, email FROM customers WHERE email IS NULL;",
        "SELECT count(*), count(email), count(city) FROM customers;",
        "SELECT name, city FROM customers ORDER BY city NULLS FIRST;",
        "UPDATE customers SET email = 'unknown@example.com' WHERE email = NULL;",
        "SELECT NULL = NULL AS eq, NULL IS NULL AS is_null, 1 + NULL AS plus, coalesce(NULL, 'x') AS c;",
        check=Check("SELECT 'missing=' || count(*) FROM customers WHERE email IS NULL;", "missing=0"),
        tags=("fails",)),
    _ep("pg-constraints", "constraints", "postgres",
        "Try to add bad orders and customers; keep the data valid.",
        "INSERT INTO customers VALUES (1, 'Dup', NULL, NULL);",
        "INSERT INTO customers (id, name, email) VALUES (5, 'Eve', 'ada@example.com');",
        "INSERT INTO customers (id, city) VALUES (6, 'Paris');",
        "INSERT INTO orders VALUES (7, 1, 'pen', 0, 1.00);",
        "INSERT INTO orders VALUES (7, 99, 'pen', 1, 1.00);",
        "DELETE FROM customers WHERE id = 1;",
        "INSERT INTO orders VALUES (7, 4, 'pen', 1, 1.999);\nSELECT * FROM orders WHERE id = 7;",
        check=Check("SELECT 'orders=' || count(*) FROM orders;", "orders=7")),
    _ep("pg-syntax-errors", "errors", "postgres",
        "Explore the database (with a few typos on the way).",
        "SELEC * FROM customers;",
        "SELECT * FORM customers;",
        "SELECT nme FROM customers;",
        "SELECT * FROM customer;",
        "SELECT 'abc'::integer;",
        "SELECT name FROM customers\nWHERE id = 1",
        ";",
        "SELECT 10 / 0;",
        "\\dx",
        tags=("odd-input",)),
    _ep("pg-unicode-names", "unicode", "postgres",
        "Add customers with non-ASCII names and check how PostgreSQL handles them.",
        "INSERT INTO customers (id, name, city) VALUES (5, 'Zoë', 'Köln'), (6, '李小龙', '香港'), "
        "(7, 'Ōsaka 🍣', NULL);",
        "SELECT id, name, city, length(name) AS len, octet_length(name) AS bytes FROM customers WHERE id >= 5;",
        "SELECT upper('zoë') AS up, lower('ÉCOLE') AS low, 'é' ILIKE 'É' AS ilike;",
        "SELECT name FROM customers WHERE name ~ '[^[:ascii:]]' ORDER BY id;",
        "SELECT chr(9731) AS snowman, ascii('é') AS code, reverse('日本語') AS rev;",
        check=Check("SELECT string_agg(name, '|' ORDER BY id) FROM customers WHERE id >= 5;", "Zoë|李小龙|Ōsaka 🍣")),
    _ep("pg-transactions-savepoint", "transactions", "postgres",
        "Add a tablet order for Margaret inside a transaction, recovering from a mistake with a savepoint.",
        "BEGIN;",
        "INSERT INTO orders VALUES (7, 4, 'tablet', 1, 399.00);",
        "SAVEPOINT before_bad;",
        "INSERT INTO orders VALUES (7, 4, 'tablet', 1, 399.00);",
        "SELECT count(*) FROM orders;",
        "ROLLBACK TO SAVEPOINT before_bad;\nSELECT count(*) FROM orders;",
        "COMMIT;",
        check=Check("SELECT 'tablet=' || count(*) FROM orders WHERE product = 'tablet';", "tablet=1")),
    _ep("pg-txn-aborted", "transactions", "postgres",
        "Add two orders for Margaret in one transaction.",
        "BEGIN;",
        "INSERT INTO orders VALUES (7, 4, 'tablet', 1, 399.00);",
        "INSERT INTO orders VALUES (8, 4, 'case', -1, 19.00);",
        "INSERT INTO orders VALUES (8, 4, 'case', 1, 19.00);",
        "COMMIT;",
        "SELECT count(*) FROM orders WHERE customer_id = 4;",
        check=Check("SELECT 'margaret=' || count(*) FROM orders WHERE customer_id = 4;", "margaret=2"),
        tags=("fails",)),
    _ep("pg-empty-results", "empty", "postgres",
        "Look for things that are not there.",
        "SELECT * FROM orders WHERE qty > 100;",
        "SELECT count(*), sum(qty), max(price) FROM orders WHERE product = 'tablet';",
        "CREATE TABLE archive (id int, note text);\nSELECT * FROM archive;",
        "DELETE FROM orders WHERE product = 'tablet';",
        "SELECT name FROM customers WHERE id IN (SELECT customer_id FROM orders WHERE price > 5000);",
        "\\d archive"),
    _ep("pg-long-results", "long", "postgres",
        "Produce long outputs and a runaway query.",
        "SELECT i, i * i AS sq FROM generate_series(1, 60) AS i;",
        "SELECT i, lpad((i * 7919)::text, 8, '0') AS code FROM generate_series(1, 5000) AS i;",
        "SELECT pg_sleep(100);",
        "SELECT 'still here' AS msg;",
        tags=("timeout", "truncated")),
    _ep("pg-update-sequences", "schema", "postgres",
        "Add a stock column to products and set stock levels.",
        "CREATE TABLE products (id serial PRIMARY KEY, name text UNIQUE NOT NULL);",
        "INSERT INTO products (name) SELECT DISTINCT product FROM orders ORDER BY 1;",
        "SELECT currval('products_id_seq'), nextval('products_id_seq');",
        "ALTER TABLE products ADD COLUMN stock int NOT NULL DEFAULT 10;",
        "UPDATE products SET stock = stock - 3 WHERE name IN ('mouse', 'cable') RETURNING name, stock;",
        "DELETE FROM products WHERE name = 'monitor' RETURNING *;",
        "SELECT * FROM products ORDER BY id;",
        setup=SHOP, check=Check("SELECT 'stock=' || sum(stock) FROM products;", "stock=34")),
    _ep("pg-files-copy", "files", "postgres",
        "Load people.csv with COPY and seed.sql with \\i.",
        "CREATE TABLE people (name text, age int, city text);",
        "COPY people FROM '/app/people.csv' WITH (FORMAT csv, HEADER true);",
        "\\copy people FROM '/app/people.csv' WITH (FORMAT csv, HEADER true)",
        "SELECT city, count(*) FROM people GROUP BY city ORDER BY city;",
        "\\i /app/seed.sql",
        "COPY people FROM '/app/nope.csv';",
        setup=(), files={"/app/people.csv": _PEOPLE_CSV, "/app/seed.sql": _SEED_SQL},
        check=Check("SELECT 'people=' || count(*) || ' tags=' || (SELECT count(*) FROM tags) FROM people;",
                    "people=8 tags=3")),
]


# -- seeded random policy ------------------------------------------------------------------
_COLUMNS = {"customers": ["id", "name", "city", "email"], "orders": ["id", "customer_id", "product", "qty", "price"]}
_PRODUCTS = ["mouse", "cable", "pen", "lamp", "desk", "naïve chair"]
_BROKEN = [
    "SELECT FROM WHERE;", "SELECT * FROM orders WHERE;", "INSERT INTO orders VALUES (;", "UPDATE SET x = 1;",
    "SELECT (1 + 2;", "DROP TABLE nothing_here;", "SELECT * FROM orders ORDER BY;", "SELEC 1;",
    "SELECT qty FROM orders GROUP BY;", "SELECT price * FROM orders;", "CREATE TABLE (id int);",
    "SELECT * FROM orders LIMIT -;",
]


def _random_action(rng: random.Random, next_id: list[int]) -> str:
    """One statement of the random grammar (a few per cent malformed)."""
    kind = rng.choices(["select", "agg", "insert", "update", "delete", "join", "broken", "typo"],
                       weights=[5, 3, 3, 2, 1, 2, 2, 1])[0]
    table = rng.choice(list(_COLUMNS))
    cols = _COLUMNS[table]
    if kind == "select":
        picked = rng.sample(cols, rng.randint(1, len(cols)))
        where = rng.choice(["", f" WHERE id > {rng.randint(0, 6)}", " WHERE id % 2 = 0"])
        return f"SELECT {', '.join(picked)} FROM {table}{where} ORDER BY id LIMIT {rng.randint(1, 8)};"
    if kind == "agg":
        fn = rng.choice(["count(*)", "sum(qty)", "max(price)", "min(product)", "avg(qty)"])
        group = rng.choice(["", " GROUP BY customer_id ORDER BY customer_id"])
        return f"SELECT {'customer_id, ' if group else ''}{fn} FROM orders{group};"
    if kind == "insert":
        next_id[0] += 1
        qty = rng.choice([1, 2, 3, 0, -2]) if rng.random() < 0.3 else rng.randint(1, 9)
        return (f"INSERT INTO orders VALUES ({next_id[0]}, {rng.randint(1, 5)}, '{rng.choice(_PRODUCTS)}', "
                f"{qty}, {rng.randint(1, 500)}.{rng.randint(0, 99):02d});")
    if kind == "update":
        return f"UPDATE orders SET qty = qty + {rng.randint(1, 3)} WHERE product = '{rng.choice(_PRODUCTS)}';"
    if kind == "delete":
        return f"DELETE FROM orders WHERE id = {rng.randint(1, next_id[0])};"
    if kind == "join":
        return ("SELECT c.name, o.product FROM customers c JOIN orders o ON o.customer_id = c.id "
                f"WHERE o.qty >= {rng.randint(1, 4)} ORDER BY o.id;")
    if kind == "broken":
        return rng.choice(_BROKEN)
    word = rng.choice(["SELECT", "FROM", "WHERE", "ORDER"])  # a keyword typo in a valid statement
    good = f"SELECT id FROM {table} WHERE id < 3 ORDER BY id;"
    return good.replace(word, word[:-1] + word[-1].lower() * 2, 1)


def random_scripts(seed: int, n: int) -> list[Script]:
    """``n`` open-loop episodes of the random policy on the shop database, engines
    alternating (sqlite first), 5–7 statements each; deterministic in ``seed``."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        engine = ("sqlite", "postgres")[k % 2]
        next_id = [6]
        actions = [_random_action(rng, next_id) for _ in range(rng.randint(5, 7))]
        out.append(_ep(f"random-{engine}-s{seed}-{k}", "random", engine,
                       "Explore the shop database with arbitrary statements.", *actions, tags=("odd-input",)))
    return out


#: The whole suite.
SCRIPTS: list[Script] = [*SQLITE, *POSTGRES, *random_scripts(7, 4), *random_scripts(8, 6)]

#: Episodes beyond the core suite (more random exploration, for training data).
EXTENDED = frozenset(e.task.name for e in random_scripts(8, 6))
