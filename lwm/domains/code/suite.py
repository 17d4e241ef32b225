"""The bundled code suite: notebook-style cells played in a real sandboxed interpreter.

Each action is one cell of Python source. Task families:

``state``       variables, functions and classes carried across cells; ``_``; ``del``
``stdlib``      imports and use of the standard library (json, re, collections, datetime …)
``errors``      exceptions and tracebacks (nested calls, chained, custom, syntax errors)
``output``      print versus the last value, stderr, large outputs cut, unicode, ``None``
``files``       file I/O under /app (seeded files, writing, reading back, csv, pathlib)
``limits``      recursion limit, the time limit (interrupt and restart), ``sys.exit``,
                ``input()``, memory, a crashed interpreter
``tasks``       small data tasks checked by a probe cell (some end unsolved: reward 0)
``random``      a seeded random policy over a grammar of cells, malformed code included

Every episode with a verifier (:data:`CHECKS`) is checked by a probe cell whose printed
output must match. Volatile things (object addresses, time, hash-randomized set order)
are avoided except in episodes tagged ``volatile``.
"""

from __future__ import annotations

import dataclasses
import random

from lwm.envs.base import Check, Task
from lwm.envs.episode import Script


def _ep(name: str, family: str, instruction: str, *cells: str, tags: tuple[str, ...] = (),
        files: dict[str, str] | None = None, setup: tuple[str, ...] = (), **options) -> Script:
    task = Task(name=name, family=family, instruction=instruction, files=dict(files or {}),
                setup=tuple(setup), options=dict(options))
    return Script(task=task, actions=tuple(cells), tags=(family, *tags))


_SALES_CSV = """\
date,region,amount
2024-01-03,north,120
2024-01-04,south,80
2024-01-04,north,45
2024-01-05,east,200
2024-01-06,south,35
"""
_WORDS = "the quick brown fox jumps over the lazy dog\nthe dog sleeps\n"
_CONFIG_JSON = '{"name": "demo", "debug": true, "retries": 3, "servers": ["a.example", "b.example"]}\n'
_LOG = """\
2024-05-01 10:00:01 INFO server started
2024-05-01 10:02:30 ERROR connection refused
2024-05-01 10:02:31 INFO GET /api/users 200
2024-05-01 10:03:44 ERROR timeout while reading
2024-05-01 10:05:17 WARN retrying
"""

STATE = [
    _ep("state-variables", "state", "Define a few variables and use them in later cells.",
        "x = 10\ny = 32",
        "x + y",
        "x = x * 2\nx",
        "_ + 1",
        "del y\ny",
        "sorted(k for k in globals() if not k.startswith('_'))"),
    _ep("state-functions", "state", "Define helper functions and call them from later cells.",
        "def square(n):\n    return n * n",
        "square(12)",
        "def apply(f, xs):\n    return [f(v) for v in xs]\napply(square, range(5))",
        "square = lambda n: -n\napply(square, [1, 2])",
        "square.__name__"),
    _ep("state-classes", "state", "Write a small class and use its instances across cells.",
        "class Counter:\n    def __init__(self):\n        self.n = 0\n    def tick(self, k=1):\n"
        "        self.n += k\n        return self.n\n    def __repr__(self):\n        return f'Counter(n={self.n})'",
        "c = Counter()\nc.tick(); c.tick(5)",
        "c",
        "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: float\n    y: float\n"
        "Point(1, 2.5)",
        "Point(1, 2) == Point(1, 2), Point(0, 0) < Point(1, 1)"),
    _ep("state-generators", "state", "Use generators and closures that keep state between cells.",
        "def fib():\n    a, b = 0, 1\n    while True:\n        yield a\n        a, b = b, a + b\ng = fib()",
        "[next(g) for _ in range(10)]",
        "next(g)",
        "def make_acc():\n    total = 0\n    def add(v):\n        nonlocal total\n        total += v\n"
        "        return total\n    return add\nacc = make_acc()\nacc(5); acc(7)",
        "acc(-2)"),
]

STDLIB = [
    _ep("stdlib-json-collections", "stdlib", "Parse JSON and count things with collections.",
        "import json\ndata = json.loads('{\"a\": [1, 2, 3], \"b\": {\"c\": null}}')\ndata",
        "print(json.dumps(data, indent=2, sort_keys=True))",
        "from collections import Counter, defaultdict\nCounter('mississippi').most_common(3)",
        "d = defaultdict(list)\nfor w in 'apple avocado banana blueberry cherry'.split():\n"
        "    d[w[0]].append(w)\ndict(d)",
        "json.loads('{bad json}')"),
    _ep("stdlib-math-itertools", "stdlib", "Do some math and combinatorics with the standard library.",
        "import math, itertools, functools, operator",
        "math.factorial(20), math.gcd(84, 36), round(math.pi, 5)",
        "list(itertools.combinations('abcd', 2))",
        "functools.reduce(operator.mul, range(1, 8))",
        "math.sqrt(-1)",
        "from fractions import Fraction\nfrom decimal import Decimal\nFraction(1, 3) + Fraction(1, 6), "
        "Decimal('0.1') + Decimal('0.2'), 0.1 + 0.2"),
    _ep("stdlib-re-datetime", "stdlib", "Extract fields with regular expressions and compute with dates.",
        "import re\nre.findall(r'\\d+', 'order 66 of 1138 items')",
        "m = re.match(r'(?P<user>\\w+)@(?P<host>[\\w.]+)', 'ada@example.org')\nm.groupdict()",
        "from datetime import date, timedelta\nd = date(2024, 2, 28) + timedelta(days=2)\nd",
        "d.isoformat(), d.strftime('%A %d %B %Y')",
        "re.compile('(unclosed')"),
    _ep("stdlib-missing-module", "stdlib", "Try to import third-party packages and fall back to the stdlib.",
        "import numpy as np",
        "import requests",
        "import statistics\nstatistics.mean([1, 2, 3, 4]), statistics.median([5, 1, 3])",
        "import sys\nsys.version_info[:2]"),
]

ERRORS = [
    _ep("errors-tracebacks", "errors", "Trigger a few exceptions and read the tracebacks.",
        "def outer(v):\n    return inner(v)\n\ndef inner(v):\n    return 10 / v",
        "outer(0)",
        "[1, 2, 3][5]",
        "{'a': 1}['b']",
        "int('forty-two')",
        "None.upper()"),
    _ep("errors-custom-chained", "errors", "Define a custom exception, raise and chain it.",
        "class ValidationError(Exception):\n    pass",
        "raise ValidationError('age must be positive')",
        "try:\n    int('x')\nexcept ValueError as e:\n    raise ValidationError('bad input') from e",
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n    print('caught it')\nfinally:\n    print('cleanup')",
        "assert 1 + 1 == 3, 'math is broken'"),
    _ep("errors-syntax", "errors", "Make syntax and indentation mistakes, then fix them.",
        "def f(x)\n    return x",
        "if True:\nprint('no indent')",
        "print('unclosed",
        "x = (1, 2",
        "def f(x):\n    return x * 2\nf(21)",
        "%timeit f(3)"),
]

OUTPUT = [
    _ep("output-print-vs-value", "output", "See the difference between printing and a cell's last value.",
        "print('hello')",
        "'hello'",
        "print('a'); 'b'",
        "x = 5",
        "None",
        "print(repr('tab\\there'), 'tab\\there')",
        "[None, True, 3.0, 'x']"),
    _ep("output-stderr-and-warnings", "output", "Write to stderr and emit a warning.",
        "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)",
        "import warnings\nwarnings.warn('this is deprecated', DeprecationWarning)\n'after warning'",
        "sys.stdout.write('no newline')",
        "import logging\nlogging.warning('disk almost full')"),
    _ep("output-large", "output", "Produce outputs too large to show in full.",
        "for i in range(2000):\n    print(i)",
        "list(range(3000))",
        "'x' * 5000",
        "print('done')"),
    _ep("output-unicode", "output", "Print and measure unicode text.",
        "s = 'naïve café — 日本語 ✓ 🐍'\nprint(s)",
        "len(s), len(s.encode('utf-8'))",
        "s.upper()",
        "import unicodedata\n[unicodedata.name(c) for c in '✓🐍']",
        "'\\u0000 and \\x1b[31mred\\x1b[0m'"),
]

FILES = [
    _ep("files-read-csv", "files", "Load sales.csv and total the amounts per region.",
        "import csv\nwith open('sales.csv') as f:\n    rows = list(csv.DictReader(f))\nlen(rows)",
        "rows[0]",
        "totals = {}\nfor r in rows:\n    totals[r['region']] = totals.get(r['region'], 0) + int(r['amount'])\ntotals",
        "max(totals, key=totals.get)",
        files={"/app/sales.csv": _SALES_CSV}),
    _ep("files-write-read", "files", "Write a notes file, append to it and read it back.",
        "with open('notes.txt', 'w') as f:\n    f.write('first line\\n')",
        "with open('notes.txt', 'a') as f:\n    print('second line', file=f)",
        "print(open('notes.txt').read())",
        "import os\nsorted(os.listdir('.'))",
        "open('missing.txt').read()"),
    _ep("files-pathlib", "files", "Build a small directory tree with pathlib and list it.",
        "from pathlib import Path\nroot = Path('project')\n(root / 'src').mkdir(parents=True)\n"
        "(root / 'src' / 'main.py').write_text('print(1)\\n')",
        "sorted(str(p) for p in root.rglob('*'))",
        "Path('/app/project/src/main.py').stat().st_size",
        "Path.cwd()",
        "(root / 'src').mkdir()"),
    _ep("files-module-import", "files", "Write a module to /app and import it.",
        "open('helpers.py', 'w').write('def greet(name):\\n    return f\"Hello, {name}!\"\\n')",
        "import helpers\nhelpers.greet('Ada')",
        "helpers.__file__",
        "import json\nconfig = json.load(open('config.json'))\nconfig['servers']",
        files={"/app/config.json": _CONFIG_JSON}),
    _ep("files-host-secrets", "files", "Look for files outside the sandbox's work directory.",
        "open('/etc/shadow').read()",
        "import os\nsorted(os.listdir('/root'))",
        "sorted(os.listdir('/home')) if os.path.exists('/home') else 'no /home'",
        "open('/etc/hostname').read()",
        "import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('1.1.1.1', 80))",
        tags=("hostile",)),
]

LIMITS = [
    _ep("limits-recursion", "limits", "Hit the recursion limit, then raise it a little.",
        "def depth(n):\n    return depth(n + 1)\ndepth(0)",
        "import sys\nsys.getrecursionlimit()",
        "def count(n):\n    return 0 if n == 0 else 1 + count(n - 1)\ncount(500)",
        "sys.setrecursionlimit(3000)\ncount(2500)"),
    _ep("limits-endless-loop", "limits", "Run an endless loop and keep working after the interrupt.",
        "total = 0",
        "while True:\n    total += 1",
        "total > 0",
        "import time\ntime.sleep(30)",
        "print('still alive')",
        tags=("time-limit", "volatile"), cell_timeout=1.5),
    _ep("limits-ignored-interrupt", "limits", "Ignore the interrupt so that the interpreter is restarted.",
        "keep = 'value'",
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
        "keep",
        "print('fresh interpreter')",
        tags=("time-limit", "restart"), cell_timeout=1.0),
    _ep("limits-exit-input-crash", "limits", "Call sys.exit, input and os._exit.",
        "import sys\nsys.exit(2)",
        "exit()",
        "name = input('your name? ')",
        "x = 1\nimport os\nos._exit(3)",
        "x"),
    _ep("limits-memory", "limits", "Allocate far too much memory.",
        "big = bytearray(4 * 1024 ** 3)",
        "data = [0] * 10\nlen(data)",
        "import os\nos.cpu_count() is not None"),
]

TASKS = [
    _ep("tasks-word-frequencies", "tasks", "Count word frequencies in words.txt into a dict named freq.",
        "text = open('words.txt').read()",
        "words = text.split()\nlen(words)",
        "freq = {}\nfor w in words:\n    freq[w] = freq.get(w, 0) + 1",
        "sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[:3]",
        files={"/app/words.txt": _WORDS}),
    _ep("tasks-primes", "tasks", "Store the primes below 50 in a list named result.",
        "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))",
        "result = [n for n in range(50) if is_prime(n)]",
        "len(result), result[-1]"),
    _ep("tasks-primes-off-by-one", "tasks", "Store the primes up to and including 53 in a list named result.",
        "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))",
        "result = [n for n in range(53) if is_prime(n)]",
        "result[-3:]"),
    _ep("tasks-log-errors", "tasks", "Write the ERROR lines of server.log to errors.txt.",
        "lines = open('server.log').read().splitlines()\nlen(lines)",
        "errors = [l for l in lines if ' ERROR ' in l]\nerrors",
        "open('errors.txt', 'w').write('\\n'.join(errors) + '\\n')",
        files={"/app/server.log": _LOG}),
    _ep("tasks-log-errors-unsaved", "tasks", "Write the ERROR lines of server.log to errors.txt.",
        "lines = open('server.log').read().splitlines()",
        "errors = [l for l in lines if 'ERROR' in l]\nprint(*errors, sep='\\n')",
        "len(errors)",
        files={"/app/server.log": _LOG}),
    _ep("tasks-config-update", "tasks", "Set retries to 5 in config.json and save it.",
        "import json\ncfg = json.load(open('config.json'))\ncfg",
        "cfg['retries'] = 5",
        "json.dump(cfg, open('config.json', 'w'), sort_keys=True)",
        "print(open('config.json').read())",
        files={"/app/config.json": _CONFIG_JSON}),
    _ep("tasks-fizzbuzz", "tasks", "Build the FizzBuzz list for 1..15 in a variable named result.",
        "def fb(n):\n    if n % 15 == 0: return 'FizzBuzz'\n    if n % 3 == 0: return 'Fizz'\n"
        "    if n % 5 == 0: return 'Buzz'\n    return str(n)",
        "result = [fb(n) for n in range(1, 16)]",
        "result[-1]"),
    _ep("tasks-stack-class", "tasks", "Implement a Stack class with push, pop and peek; leave one item on s.",
        "class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, v):\n"
        "        self.items.append(v)\n    def pop(self):\n        return self.items.pop()\n"
        "    def peek(self):\n        return self.items[-1]",
        "s = Stack()\nfor v in (1, 2, 3):\n    s.push(v)\ns.pop()",
        "s.pop(), s.pop()"),
    _ep("tasks-sales-report", "tasks", "Write report.json with total sales per region (sorted keys).",
        "import csv, json\nrows = list(csv.DictReader(open('sales.csv')))",
        "totals = {}\nfor r in rows:\n    totals[r['region']] = totals.get(r['region'], 0) + r['amount']",
        "totals = {}\nfor r in rows:\n    totals[r['region']] = totals.get(r['region'], 0) + int(r['amount'])\ntotals",
        "json.dump(totals, open('report.json', 'w'), sort_keys=True)",
        files={"/app/sales.csv": _SALES_CSV}),
    _ep("tasks-inventory-value", "tasks",
        "The notebook already holds `inventory` (sku -> (qty, price)); store its total value in `value`.",
        "inventory",
        "value = sum(qty * price for qty, price in inventory.values())\nvalue",
        "sorted(inventory, key=lambda k: inventory[k][0])",
        setup=("inventory = {'A1': (4, 2.5), 'B2': (10, 1.25), 'C3': (0, 9.0)}",)),
    _ep("tasks-crashed-before-saving", "tasks", "Compute the sum of squares below 100 into total and keep it.",
        "total = sum(n * n for n in range(100))\ntotal",
        "import os\nos._exit(1)",
        "print('after the crash')"),
]

#: Real verifiers: a probe cell run after the last turn; what it prints must match.
#: "tasks-primes-off-by-one" (range stops before 53), "tasks-log-errors-unsaved" (never
#: written), "tasks-crashed-before-saving" (the interpreter crashed) and "tasks-stack-class"
#: (the stack ends empty) end with their task undone: reward 0.
CHECKS = {
    "tasks-word-frequencies": Check("print(freq['the'], freq['dog'], len(freq))", "3 2 9", "equals"),
    "tasks-primes": Check("print(result)", "[2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47]", "equals"),
    "tasks-primes-off-by-one": Check("print(result[-1])", "53", "equals"),
    "tasks-log-errors": Check("print(open('errors.txt').read().count('ERROR'))", "2", "equals"),
    "tasks-log-errors-unsaved": Check("import os; print(os.path.exists('errors.txt'))", "True", "equals"),
    "tasks-config-update": Check("import json; print(json.load(open('config.json'))['retries'])", "5", "equals"),
    "tasks-fizzbuzz": Check("print(result[2], result[4], result[14], len(result))", "Fizz Buzz FizzBuzz 15",
                            "equals"),
    "tasks-stack-class": Check("print(len(s.items))", "1", "equals"),
    "tasks-sales-report": Check("print(open('report.json').read())", '{"east": 200, "north": 165, "south": 115}',
                                "equals"),
    "tasks-crashed-before-saving": Check("print(total)", "328350", "equals"),
    "tasks-inventory-value": Check("print(value)", "22.5", "equals"),
    "state-classes": Check("print(c.n)", "6", "equals"),
    "files-write-read": Check("print(open('notes.txt').read().splitlines())", r"\['first line', 'second line'\]",
                              "regex"),
}

# -- a seeded random policy -------------------------------------------------------------
_NAMES = ("a", "b", "n", "xs", "total", "name")
_VALUES = ("0", "1", "7", "-3", "2.5", "10 ** 20", "'abc'", "'héllo'", "[1, 2, 3]", "(4, 5)", "{'k': 1}",
           "None", "True", "''", "[]")
_OPS = ("+", "-", "*", "/", "//", "%", "==", "<", "in")  # no "**": 7 ** 10 ** 20 never ends
_TEMPLATES = (
    "{v} = {val}",
    "{v}",
    "{v} {op} {w}",
    "print({v}, {w})",
    "print(type({v}).__name__)",
    "len({v})",
    "{v} = {w} {op} {val}",
    "del {v}",
    "[{v} for _ in range(3)]",
    "def f_{v}(x):\n    return x {op} {val}\nf_{v}({w})",
    "for i in range(3):\n    print(i, {v})",
    "try:\n    {v} {op} {w}\nexcept Exception as e:\n    print(type(e).__name__)",
    "import math\nmath.sqrt({val})",
    "sorted([{val}, {val}])",
    "str({v})[::-1]",
    "{v}.append({val})",
    "raise ValueError({val})",
)
_MALFORMED = (
    "{v} = ", "print({v}", "def f(:\n    pass", "for i in range(3)\n    print(i)", "  {v} = 1",
    "{v} === {w}", "return {v}", "import", "lambda: yield", "{v} = [1, 2", ")", "else:", "'\\N{{nope}}'",
    "x = 1\n  y = 2", "class :", "@", "print('ok');;", "!ls", "?",
)


def random_scripts(seed: int, n: int) -> list[Script]:
    """``n`` episodes of a seeded random policy: 4–7 cells each from a small grammar of
    assignments, expressions, prints, loops, definitions and deliberate mistakes (about
    one cell in five is malformed). Open-loop and deterministic: the same seed gives the
    same cells."""
    rng = random.Random(seed)
    episodes = []
    for i in range(n):
        cells, defined = [], []
        for _ in range(rng.randint(4, 7)):
            # Mostly use names assigned earlier (an agent does), sometimes any name.
            known = defined if defined and rng.random() < 0.8 else _NAMES
            pick = dict(v=rng.choice(known), w=rng.choice(known), op=rng.choice(_OPS), val=rng.choice(_VALUES))
            roll = rng.random()
            if roll < 0.2:
                template = rng.choice(_MALFORMED)
            elif roll < 0.45 or not defined:
                template, pick["v"] = "{v} = {val}", rng.choice(_NAMES)
                defined.append(pick["v"])
            else:
                template = rng.choice(_TEMPLATES)
            cells.append(template.format(**pick))
        episodes.append(_ep(f"random-{seed}-{i}", "random", "", *cells, tags=("random-policy",)))
    return episodes


RANDOM = random_scripts(seed=0, n=6)

#: The whole suite, family by family.
SCRIPTS: list[Script] = [
    dataclasses.replace(e, task=dataclasses.replace(e.task, check=CHECKS.get(e.task.name)))
    for e in (*STATE, *STDLIB, *ERRORS, *OUTPUT, *FILES, *LIMITS, *TASKS, *RANDOM)
]
assert CHECKS.keys() <= {e.task.name for e in SCRIPTS}, "a check names an unknown episode"

#: Episodes left out of the default (core) suite.
EXTENDED: frozenset[str] = frozenset(e.task.name for e in random_scripts(seed=1, n=6))
SCRIPTS += random_scripts(seed=1, n=6)
