"""The bundled swe suite: a coding agent's tool calls on small seeded git repositories.

Every episode seeds a small Python project into /app/repo (files below, plus
``repos/units.py``, a 452-line generated module) and commits it (``GIT_INIT_SETUP``:
fixed author and dates, so commit hashes are the same on every play). Families:

``fix-test``   the classic loop: read the failing test, grep, edit, run ``python3 -m
               unittest``, ``git diff``, commit (some agents fail: reward 0)
``edit``       the edit tool's errors: not found, not unique, identical, replace_all, create
``new-file``   writing new modules and tests, then running and committing them
``read``       long files with offset/limit, empty files, binary files, directories
``search``     grep's output modes, flags and errors; glob's patterns and ordering
``bash``       exit codes, stderr, cd carried over, timeouts, truncated huge output
``git``        branches, logs, diffs, stashes, reverts
``paths``      relative paths, paths outside /app, symlinks out of /app
``harness``    malformed calls, unknown tools, invalid arguments
``random``     a seeded random policy (:func:`random_scripts`), odd and malformed calls

Verified episodes carry a ``Check`` whose probe is a bash tool call run on the final state
(usually the unit tests' last line, expected to be ``OK``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from lwm.domains.swe.env import GIT_INIT_SETUP
from lwm.domains.swe.spec import format_action
from lwm.envs.base import Check, Task
from lwm.envs.episode import Script

R = "/app/repo"
_UNITS = (Path(__file__).with_name("repos") / "units.py").read_text()


def call(name: str, /, **arguments) -> str:
    """A tool call action (JSON text)."""
    return format_action(name, **arguments)


def sh(command: str, **extra) -> str:
    """A bash tool call."""
    return call("bash", command=command, **extra)


TESTS_OK = Check(sh("cd /app/repo && python3 -m unittest -q 2>&1 | tail -1"), "OK", "equals")


def _files(repo: dict[str, str]) -> dict[str, str]:
    return {f"{R}/{path}": text for path, text in repo.items()}


def _ep(name: str, family: str, instruction: str, repo: dict[str, str], *actions: str,
        tags: tuple[str, ...] = (), check: Check | None = None, setup: tuple[str, ...] = ()) -> Script:
    task = Task(name=name, family=family, instruction=instruction, files=_files(repo),
                setup=(*GIT_INIT_SETUP, *setup), check=check)
    return Script(task=task, actions=tuple(actions), tags=(family, *tags))


# -- seed repositories --------------------------------------------------------------------
_GITIGNORE = {".gitignore": "__pycache__/\n*.pyc\n"}
CALC = {
    **_GITIGNORE,
    "README.md": "# calc\n\nTiny arithmetic helpers.\n\nRun the tests with `python3 -m unittest`.\n",
    "calc.py": '''\
"""Arithmetic helpers."""


def add(a, b):
    """Return the sum of a and b."""
    return a - b


def mul(a, b):
    """Return the product of a and b."""
    return a * b


def mean(values):
    """Return the arithmetic mean of a non-empty list."""
    return sum(values) / len(values)
''',
    "test_calc.py": '''\
import unittest

from calc import add, mean, mul


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(4, 5), 20)

    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)


if __name__ == "__main__":
    unittest.main()
''',
}

TEXT = {
    **_GITIGNORE,
    "textutil.py": '''\
"""Small text utilities."""
import re


def slugify(title):
    """'Hello, World!' -> 'hello-world'."""
    words = re.findall(r"[a-z0-9]+", title)
    return "-".join(words)


def word_count(text):
    """Number of whitespace-separated words."""
    return len(text.split(" "))


def shout(text):
    return text.upper() + "!"


def shout_lines(text):
    return "\\n".join(shout(line) for line in text.splitlines())
''',
    "test_textutil.py": '''\
import unittest

from textutil import shout, slugify, word_count


class TextTest(unittest.TestCase):
    def test_slugify(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_word_count(self):
        self.assertEqual(word_count("one  two\\nthree"), 3)

    def test_shout(self):
        self.assertEqual(shout("hi"), "HI!")
''',
}

INVENTORY = {
    **_GITIGNORE,
    "inventory/__init__.py": '"""A tiny inventory."""\nfrom inventory.store import Store\n\n__all__ = ["Store"]\n',
    "inventory/store.py": '''\
class Store:
    """Items with a quantity and a unit price (in cents)."""

    def __init__(self):
        self.items = {}

    def add(self, sku, qty, price):
        if qty < 0:
            raise ValueError("qty must be >= 0")
        self.items[sku] = (qty, price)

    def total(self):
        """Value of the stock in cents."""
        return sum(qty * price for qty, price in list(self.items.values())[1:])

    def low_stock(self, threshold=5):
        return sorted(sku for sku, (qty, _) in self.items.items() if qty < threshold)
''',
    "tests/__init__.py": "",
    "tests/test_store.py": '''\
import unittest

from inventory import Store


class StoreTest(unittest.TestCase):
    def setUp(self):
        self.store = Store()
        self.store.add("A1", 4, 250)
        self.store.add("B2", 10, 125)

    def test_total(self):
        self.assertEqual(self.store.total(), 2250)

    def test_low_stock(self):
        self.assertEqual(self.store.low_stock(), ["A1"])

    def test_negative(self):
        with self.assertRaises(ValueError):
            self.store.add("C3", -1, 10)
''',
    "setup.cfg": "[metadata]\nname = inventory\nversion = 0.1.0\n",
}

UNITS = {
    **_GITIGNORE,
    "units.py": _UNITS,
    "test_units.py": '''\
import unittest

import units


class UnitsTest(unittest.TestCase):
    def test_mile_to_foot(self):
        self.assertAlmostEqual(units.mile_to_foot(1), 5280.0, places=6)

    def test_inch_to_centimeter(self):
        self.assertAlmostEqual(units.inch_to_centimeter(1), 2.54, places=6)
''',
}

MIXED = {
    "app.py": 'import json\n\nCONFIG = json.load(open("config.json"))\nprint(CONFIG["greeting"])\n',
    "config.json": '{"greeting": "Grüß dich, 世界", "debug": false}\n',
    "assets/logo.bin": "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01",
    "assets/empty.txt": "",
    "docs/notes.md": "# Notes\n\n- TODO: write docs\n- todo: add tests\n- Done: setup\n",
    ".env.example": "TOKEN=changeme\n",
}

# -- scripted episodes ------------------------------------------------------------------------
_SCRIPTED = [
    _ep("fix-calc-add", "fix-test", "The add test fails. Fix calc.py so that all tests pass, then commit.",
        CALC,
        sh("python3 -m unittest -q 2>&1 | tail -5"),
        call("read", file_path="test_calc.py", offset=6, limit=4),
        call("grep", pattern="def add", output_mode="content", **{"-C": 2}),
        call("read", file_path=f"{R}/calc.py"),
        call("edit", file_path="calc.py", old_string="return a - b", new_string="return a + b"),
        sh("python3 -m unittest -q 2>&1 | tail -1"),
        sh("git diff"),
        sh("git commit -am 'Fix add' && git log --oneline"),
        tags=("happy-path", "git"), check=TESTS_OK),
    _ep("fix-calc-wrong-file", "fix-test", "The add test fails. Fix it so that all tests pass.",
        CALC,
        sh("python3 -m unittest 2>&1 | grep -E 'FAIL|Error' | head"),
        call("read", file_path="calc.py", limit=8),
        # The agent "fixes" the wrong function: the failure stays.
        call("edit", file_path="calc.py", old_string="return a * b", new_string="return b * a"),
        sh("python3 -m unittest -q 2>&1 | tail -1"),
        sh("git status --short"),
        tags=("fails-task",), check=TESTS_OK),
    _ep("fix-textutil-all", "fix-test", "Make test_textutil.py pass.",
        TEXT,
        sh("python3 -m unittest test_textutil 2>&1 | grep -E '^(FAIL|ERROR|AssertionError)'"),
        call("read", file_path="textutil.py"),
        call("edit", file_path="textutil.py", old_string='re.findall(r"[a-z0-9]+", title)',
             new_string='re.findall(r"[a-z0-9]+", title.lower())'),
        call("edit", file_path="textutil.py", old_string='len(text.split(" "))', new_string="len(text.split())"),
        sh("python3 -m unittest -v 2>&1 | head -4"),
        sh("git add -A && git commit -q -m 'Fix slugify and word_count' && git show --stat HEAD | tail -3"),
        tags=("happy-path",), check=TESTS_OK),
    _ep("fix-textutil-half", "fix-test", "Make test_textutil.py pass.",
        TEXT,
        call("grep", pattern="def ", path="textutil.py", output_mode="content"),
        call("edit", file_path="textutil.py", old_string="title)", new_string="title.lower())"),
        sh("python3 -m unittest -q 2>&1 | tail -1"),
        call("read", file_path="textutil.py", offset=11, limit=3),
        tags=("fails-task",), check=TESTS_OK),
    _ep("fix-inventory-total", "fix-test", "The total of the store is wrong; fix it and commit.",
        INVENTORY,
        call("glob", pattern="**/*.py"),
        sh("python3 -m unittest 2>&1 | tail -4"),
        call("grep", pattern="def total", output_mode="content", **{"-n": True}),
        call("read", file_path="inventory/store.py", offset=12, limit=4),
        call("edit", file_path="inventory/store.py", old_string="list(self.items.values())[1:]",
             new_string="self.items.values()"),
        sh("python3 -m unittest -q 2>&1 | tail -1"),
        sh("git commit -qam 'Count every item in total()' && git log --format='%h %an %ad %s' --date=iso"),
        tags=("happy-path", "package"), check=TESTS_OK),
    _ep("fix-units-typo", "fix-test", "test_units.py fails; find the bad factor in units.py and fix it.",
        UNITS,
        sh("python3 -m unittest -q 2>&1 | tail -3"),
        call("grep", pattern="FIXME|TODO", output_mode="content"),
        call("read", file_path="units.py", offset=143, limit=5),
        call("edit", file_path="units.py", old_string="1609.344 / 0.3084  # FIXME: typo in the factor?",
             new_string="1609.344 / 0.3048"),
        sh("python3 -m unittest -q 2>&1 | tail -1"),
        sh("git diff --stat"),
        tags=("long-file", "happy-path"), check=TESTS_OK),
    _ep("units-gives-up", "fix-test", "test_units.py fails; fix units.py.",
        UNITS,
        call("read", file_path="units.py", limit=12),
        call("grep", pattern="mile_to_foot", output_mode="count"),
        call("edit", file_path="units.py", old_string="return value", new_string="return float(value)"),
        sh("python3 -m unittest -q 2>&1 | tail -1"),
        tags=("fails-task", "edit-error", "long-file"), check=TESTS_OK),
    _ep("edit-errors", "edit", "Rename the helper shout() to exclaim() everywhere.",
        TEXT,
        call("edit", file_path="textutil.py", old_string="def yell(", new_string="def exclaim("),
        call("edit", file_path="textutil.py", old_string="shout", new_string="exclaim"),
        call("edit", file_path="textutil.py", old_string="def shout(", new_string="def shout("),
        call("edit", file_path="textutil.py", old_string="shout", new_string="exclaim", replace_all=True),
        call("edit", file_path="test_textutil.py", old_string="shout", new_string="exclaim", replace_all=True),
        call("edit", file_path="missing.py", old_string="x", new_string="y"),
        call("edit", file_path="textutil.py", old_string="", new_string="# header\n"),
        call("edit", file_path="CHANGELOG.md", old_string="", new_string="## 0.2.0\n- shout() is now exclaim()\n"),
        call("grep", pattern="exclaim", output_mode="count"),
        tags=("edit-error", "replace-all"),
        check=Check(sh("cd /app/repo && grep -c exclaim textutil.py test_textutil.py"),
                    "textutil.py:3\ntest_textutil.py:3", "equals")),
    _ep("edit-multiline", "edit", "Add a docstring to shout() and make mul() handle None.",
        {**CALC, **TEXT},
        call("edit", file_path="textutil.py", old_string='def shout(text):\n    return',
             new_string='def shout(text):\n    """Upper-case text with an exclamation mark."""\n    return'),
        call("edit", file_path="calc.py", old_string='    """Return the product of a and b."""\n',
             new_string='    """Return the product of a and b (None counts as 1)."""\n'
                        '    a = 1 if a is None else a\n    b = 1 if b is None else b\n'),
        call("read", file_path="calc.py", offset=9, limit=7),
        sh("python3 -c 'from calc import mul; print(mul(None, 7), mul(3, None))'"),
        sh("git diff --numstat"),
        tags=("multiline",), check=Check(sh("cd /app/repo && python3 -c 'from calc import mul; print(mul(None, 2))'"),
                                         "2", "equals")),
    _ep("new-module", "new-file", "Add a stats module with median() and tests for it; commit.",
        CALC,
        call("write", file_path="stats.py", content='"""Order statistics."""\n\n\ndef median(values):\n'
             '    s = sorted(values)\n    n = len(s)\n    mid = n // 2\n'
             '    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2\n'),
        call("write", file_path="tests_stats/test_median.py", content="import unittest\n"),
        call("write", file_path="test_stats.py", content='import unittest\n\nfrom stats import median\n\n\n'
             'class MedianTest(unittest.TestCase):\n    def test_odd(self):\n'
             '        self.assertEqual(median([3, 1, 2]), 2)\n\n'
             '    def test_even(self):\n        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n'),
        sh("python3 -m unittest test_stats -q 2>&1 | tail -1"),
        sh("rm -r tests_stats && git status --short"),
        sh("git add stats.py test_stats.py && git commit -qm 'Add median' && git log --oneline | head -3"),
        call("write", file_path="stats.py", content='"""Order statistics."""\n'),
        sh("git diff --stat; git checkout -- stats.py; git status --short | wc -l"),
        tags=("write", "git"),
        check=Check(sh("cd /app/repo && git log -1 --format=%s && python3 -m unittest test_stats -q 2>&1 | tail -1"),
                    "Add median\nOK", "equals")),
    _ep("new-script-unicode", "new-file", "Write a script that prints the greeting from config.json.",
        MIXED,
        call("read", file_path="config.json"),
        call("write", file_path="greet.py",
             content='import json\n\nprint("»", json.load(open("config.json"))["greeting"], "«")\n'),
        sh("python3 greet.py"),
        call("grep", pattern="世界|»"),
        call("edit", file_path="config.json", old_string="Grüß dich", new_string="Hallo"),
        sh("python3 app.py && git diff --word-diff | tail -2"),
        tags=("unicode",), check=Check(sh("cd /app/repo && python3 greet.py"), "» Hallo, 世界 «", "equals")),
    _ep("read-long-file", "read", "Look around units.py.",
        UNITS,
        call("read", file_path="units.py", limit=20),
        call("read", file_path="units.py", offset=440),
        call("read", file_path="units.py", offset=1000),
        call("read", file_path="units.py", offset=5, limit=1),
        call("grep", pattern="def league_to", path="units.py", output_mode="content", head_limit=3),
        sh("wc -l units.py && grep -c '^def ' units.py"),
        tags=("long-file", "offset")),
    _ep("read-odd-files", "read", "Inspect the assets.",
        MIXED,
        call("glob", pattern="assets/*"),
        call("read", file_path="assets/logo.bin"),
        call("read", file_path="assets/empty.txt"),
        call("read", file_path="assets"),
        call("read", file_path="assets/missing.png"),
        sh("od -c assets/logo.bin | head -2; file assets/logo.bin 2>&1 | head -1"),
        call("read", file_path=".env.example"),
        tags=("binary", "empty", "errors")),
    _ep("grep-modes", "search", "Find the TODOs.",
        MIXED,
        call("grep", pattern="todo"),
        call("grep", pattern="todo", **{"-i": True}, output_mode="content"),
        call("grep", pattern="todo", **{"-i": True, "-n": False}, output_mode="content"),
        call("grep", pattern="o", output_mode="count", glob="*.{md,json}"),
        call("grep", pattern="([unclosed", output_mode="content"),
        call("grep", pattern="no such text anywhere"),
        call("grep", pattern="no such text anywhere", output_mode="content"),
        call("grep", pattern="TOKEN"),
        call("grep", pattern="PNG"),
        call("grep", pattern="import", path="/app/repo/missing-dir"),
        tags=("grep", "empty-result", "hidden")),
    _ep("glob-patterns", "search", "List the project's files.",
        INVENTORY,
        call("glob", pattern="*"),
        call("glob", pattern="**/*.py"),
        call("glob", pattern="*.py", path="inventory"),
        call("glob", pattern="**/*.rs"),
        call("edit", file_path="tests/test_store.py", old_string="A1", new_string="Z9", replace_all=True),
        call("glob", pattern="**/*.py"),
        sh("for i in $(seq 1 120); do touch -d @1704110400 gen_$i.txt; done; ls | wc -l"),
        call("glob", pattern="gen_*.txt"),
        call("glob", pattern="*", path="/app/repo/nope"),
        tags=("glob", "mtime", "truncated")),
    _ep("bash-behaviour", "bash", "Explore the shell.",
        CALC,
        sh("echo out; echo err >&2; exit 4"),
        sh("cd docs 2>/dev/null || mkdir -p docs && cd docs && pwd"),
        sh("pwd && ls -a"),
        sh("cd / && ls -d /app"),
        sh("pwd"),
        sh("export X=1; echo ${X:-unset}"),
        sh("echo ${X:-unset}"),
        sh("sleep 5; echo never", timeout=1000),
        sh("seq 1 20000"),
        sh("true"),
        sh("nonexistent-command --flag"),
        sh("python3 -c 'import sys; print(sys.version_info[:2])'"),
        tags=("exit-code", "cwd", "timeout", "truncated", "stderr")),
    _ep("git-branches", "git", "Make the add fix on a branch named fix-add and merge it.",
        CALC,
        sh("git status && git branch"),
        sh("git checkout -b fix-add"),
        call("edit", file_path="calc.py", old_string="a - b", new_string="a + b"),
        sh("git commit -qam 'Fix add on a branch' && git log --oneline --all --graph"),
        sh("git checkout -q main && git merge --no-ff -q -m 'Merge fix-add' fix-add && git log --oneline | head -3"),
        sh("git show --stat HEAD~1 | head -8"),
        sh("git branch -d fix-add && git branch"),
        tags=("branch", "merge"), check=TESTS_OK),
    _ep("git-stash-revert", "git", "Try a change, stash it, and revert a bad commit.",
        TEXT,
        call("edit", file_path="textutil.py", old_string='"!"', new_string='"!!"'),
        sh("git stash && git stash list && git status --short"),
        sh("git stash pop -q && git diff --stat"),
        sh("git commit -qam 'Louder shout' && git revert --no-edit HEAD 2>&1 | head -2"),
        sh("git log --oneline && git rev-list --count HEAD"),
        sh("git diff HEAD~2 --stat | wc -l; git log -1 --format='%s%n%b'"),
        tags=("stash", "revert"),
        check=Check(sh("cd /app/repo && git rev-list --count HEAD"), "3", "equals")),
    _ep("paths-outside", "paths", "Poke at paths outside the repository.",
        CALC,
        call("read", file_path="/etc/passwd"),
        call("read", file_path="../../etc/hostname"),
        call("read", file_path="/app/repo/../repo/calc.py", limit=2),
        call("write", file_path="/tmp/x.txt", content="x\n"),
        sh("ln -s /etc/passwd link && ls -l link | cut -c1-10"),
        call("read", file_path="link"),
        call("grep", pattern="root", path="/etc"),
        call("glob", pattern="/etc/*"),
        call("write", file_path="/app/outside-repo.txt", content="still under /app\n"),
        sh("cat /etc/shadow; ls /home; cat /app/outside-repo.txt"),
        tags=("permission", "symlink", "hostile")),
    _ep("harness-errors", "harness", "Make a few broken calls.",
        CALC,
        call("read"),
        call("read", file_path=7),
        call("read", file_path="calc.py", offset=0),
        call("read", file_path="calc.py", limit="10"),
        call("edit", file_path="calc.py", old_string="x"),
        call("bash", command="ls", timeout=-1),
        call("bash", cmd="ls"),
        call("grep", pattern="x", output_mode="lines"),
        call("run", command="ls"),
        "not json at all",
        '{"name": "read", "arguments": "calc.py"}',
        '["read", "calc.py"]',
        call("glob", pattern="*.md"),
        tags=("malformed", "validation")),
]


# -- the seeded random policy ----------------------------------------------------------------
_RANDOM_PATHS = ("calc.py", "test_calc.py", "README.md", f"{R}/calc.py", "nope.py", "", ".", "..", "/",
                 "/etc/passwd", "sub/dir/new.py", "calc.py/", "../repo/README.md", "ü.txt", "a b.txt")
_RANDOM_STRINGS = ("return a - b", "return", "a", "", "def ", "\n", "x", "ünïcödé ☃", "    ", "calc",
                   '"""', "add(", "\t", "1" * 300)
_RANDOM_COMMANDS = ("ls", "ls -la", "cat calc.py", "git status --short", "git log --oneline", "false",
                    "echo $((6*7))", "python3 -m unittest -q 2>&1 | tail -1", "wc -l *.py", "cd ..",
                    "cd /app/repo", "pwd", "no-such-cmd", "grep -n def calc.py", "echo 'unterminated",
                    "git diff", "git add -A && git commit -qm wip && git log --oneline | head -2",
                    "head -c 50 /dev/zero | tr '\\0' x", "rm -f README.md", "mkdir -p sub/dir", "")
_RANDOM_PATTERNS = ("def", "return", "[", "^import", "a+", "", "ü", "(?i)CALC", "\\d+", "xyz")
_MALFORMED = ("", "{", "null", "[]", '{"name": ""}', '{"arguments": {}}', '{"name": 5}',
              '{"name": "bash", "arguments": []}', '{"name": "read", "arguments": {"file_path": null}}',
              '{"name": "Bash", "arguments": {"command": "ls"}}')


def _random_action(rng: random.Random) -> str:
    kind = rng.choices(["read", "edit", "write", "bash", "grep", "glob", "bad"], [3, 3, 2, 4, 2, 2, 2])[0]
    if kind == "bad":
        return rng.choice(_MALFORMED)
    args: dict = {}
    if kind == "read":
        args["file_path"] = rng.choice(_RANDOM_PATHS)
        if rng.random() < 0.4:
            args["offset"] = rng.choice([1, 2, 5, 50, 0, "3"])
        if rng.random() < 0.3:
            args["limit"] = rng.choice([1, 3, 100])
    elif kind == "edit":
        args.update(file_path=rng.choice(_RANDOM_PATHS[:6]), old_string=rng.choice(_RANDOM_STRINGS),
                    new_string=rng.choice(_RANDOM_STRINGS))
        if rng.random() < 0.3:
            args["replace_all"] = rng.choice([True, False, "yes"])
    elif kind == "write":
        args.update(file_path=rng.choice(_RANDOM_PATHS), content=rng.choice(_RANDOM_STRINGS))
    elif kind == "bash":
        args["command"] = rng.choice(_RANDOM_COMMANDS)
        if rng.random() < 0.2:
            args["timeout"] = rng.choice([2000, 0, 99_999_999])
    elif kind == "grep":
        args["pattern"] = rng.choice(_RANDOM_PATTERNS)
        if rng.random() < 0.5:
            args["output_mode"] = rng.choice(["content", "count", "files_with_matches", "all"])
        if rng.random() < 0.3:
            args["-i"] = True
        if rng.random() < 0.2:
            args["path"] = rng.choice(_RANDOM_PATHS)
    else:
        args["pattern"] = rng.choice(["*", "**/*", "*.py", "**/*.md", "[", "", "../*", "sub/**"])
    if rng.random() < 0.05:
        args["unexpected"] = 1
    return json.dumps({"name": kind, "arguments": args}, ensure_ascii=False)


def random_scripts(seed: int, n: int, turns: int = 7) -> list[Script]:
    """``n`` open-loop episodes of ``turns`` random tool calls each (some malformed), on the
    calc repository, drawn with ``random.Random(seed)``. Deterministic for a seed."""
    rng = random.Random(seed)
    return [
        _ep(f"random-{seed}-{i}", "random", "Explore the repository.", CALC,
            *(_random_action(rng) for _ in range(turns)), tags=("random", "odd-input"))
        for i in range(n)
    ]


SCRIPTS: list[Script] = _SCRIPTED + random_scripts(seed=7, n=6)
#: Episodes beyond the core suite (none yet: the whole suite plays in well under a minute).
EXTENDED: frozenset[str] = frozenset()
