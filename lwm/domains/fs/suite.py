"""The bundled fs suite: tool calls on the reference MCP filesystem server, confined to /app.

Families:

``read``       reading files (whole, head/tail, several at once, unicode, empty, large)
``write``      creating and overwriting files, creating directories
``edit``       ``edit_file`` replacements, dry runs (diffs), non-matching edits
``organize``   moving/renaming, listing, trees, searching
``errors``     missing files, path traversal, symlink escapes, bad arguments, unknown tools
``random``     a seeded random policy (:func:`random_scripts`) mixing valid and malformed calls

Verified episodes end with a ``read_text_file``/``list_directory``/``search_files`` probe
on the final state; a few are scripted to fail their task (reward 0). ``get_file_info``
(timestamps) is avoided: it differs between plays.
"""

from __future__ import annotations

import json
import random

from lwm.domains.mcp.spec import call
from lwm.envs.base import Check, Task
from lwm.envs.episode import Script

_NOTES = "# Notes\n\n- buy milk\n- call Ada\n- fix the bike\n"
_CSV = "id,name,city\n1,Ada,London\n2,Linus,Helsinki\n3,Grace,Arlington\n"
_CONFIG = '{\n  "debug": false,\n  "port": 8080,\n  "name": "demo"\n}\n'
_PROJECT = {
    "/app/README.md": "# Demo project\n\nRun `make` to build.\n",
    "/app/src/main.py": "def main():\n    print('hello')\n\n\nif __name__ == '__main__':\n    main()\n",
    "/app/src/util.py": "def add(a, b):\n    return a + b\n",
    "/app/tests/test_util.py": "from src.util import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "/app/docs/guide.md": "# Guide\n\nSee README.md.\n",
}
_LONG = "".join(f"line {i:04d}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 1201))


def _ep(
    name: str,
    family: str,
    instruction: str,
    *actions: str,
    files: dict[str, str] | None = None,
    check: Check | None = None,
    tags: tuple[str, ...] = (),
    setup: tuple[str, ...] = (),
    options: dict | None = None,
) -> Script:
    task = Task(
        name=name,
        family=family,
        instruction=instruction,
        files=dict(files or {}),
        check=check,
        setup=tuple(setup),
        options=dict(options or {}),
    )
    return Script(task=task, actions=tuple(actions), tags=(family, *tags))


def _read(path: str) -> str:
    return call("read_text_file", path=path)


SCRIPTED = [
    _ep(
        "fs-read-notes",
        "read",
        "Show the notes and the first two lines of the CSV.",
        call("list_directory", path="/app"),
        _read("/app/notes.md"),
        call("read_text_file", path="/app/people.csv", head=2),
        call("read_text_file", path="/app/people.csv", tail=1),
        files={"/app/notes.md": _NOTES, "/app/people.csv": _CSV},
    ),
    _ep(
        "fs-read-multiple",
        "read",
        "Read the CSV and the config together.",
        call("read_multiple_files", paths=["/app/people.csv", "/app/config.json", "/app/missing.txt"]),
        call("read_multiple_files", paths=[]),
        _read("/app/config.json"),
        call("list_allowed_directories"),
        files={"/app/people.csv": _CSV, "/app/config.json": _CONFIG},
        tags=("errors",),
    ),
    _ep(
        "fs-read-unicode",
        "read",
        "Read the multilingual greetings file.",
        _read("/app/greetings.txt"),
        call("search_files", path="/app", pattern="*.txt"),
        call("write_file", path="/app/emoji-🙂.txt", content="smile 🙂\nçà va\n"),
        _read("/app/emoji-🙂.txt"),
        call("list_directory", path="/app"),
        files={"/app/greetings.txt": "Hello\nBonjour\nこんにちは\nПривет\nمرحبا\n"},
        tags=("unicode",),
        check=Check(_read("/app/emoji-🙂.txt"), "smile 🙂"),
    ),
    _ep(
        "fs-read-empty-and-large",
        "read",
        "Inspect an empty file and a large log.",
        _read("/app/empty.txt"),
        call("list_directory_with_sizes", path="/app"),
        call("read_text_file", path="/app/big.log", head=3),
        _read("/app/big.log"),
        call("read_text_file", path="/app/big.log", tail=2),
        files={"/app/empty.txt": "", "/app/big.log": _LONG},
        tags=("large", "empty"),
    ),
    _ep(
        "fs-write-todo",
        "write",
        "Create /app/todo.txt listing three tasks.",
        call("list_directory", path="/app"),
        call("write_file", path="/app/todo.txt", content="1. write report\n2. review PR\n3. deploy\n"),
        _read("/app/todo.txt"),
        call("list_directory", path="/app"),
        check=Check(_read("/app/todo.txt"), "3. deploy"),
    ),
    _ep(
        "fs-write-nested",
        "write",
        "Create reports/2024/q1.md with a heading.",
        call("write_file", path="/app/reports/2024/q1.md", content="# Q1\n"),
        call("create_directory", path="/app/reports/2024"),
        call("write_file", path="/app/reports/2024/q1.md", content="# Q1 report\n\nRevenue up.\n"),
        call("directory_tree", path="/app/reports"),
        _read("/app/reports/2024/q1.md"),
        check=Check(_read("/app/reports/2024/q1.md"), "# Q1 report"),
        tags=("errors",),
    ),
    _ep(
        "fs-write-overwrite-config",
        "write",
        "Set debug to true in config.json.",
        _read("/app/config.json"),
        call(
            "write_file", path="/app/config.json", content='{\n  "debug": true,\n  "port": 8080,\n  "name": "demo"\n}\n'
        ),
        _read("/app/config.json"),
        files={"/app/config.json": _CONFIG},
        check=Check(_read("/app/config.json"), '"debug": true'),
    ),
    _ep(
        "fs-write-wrong-file",
        "write",
        "Set the port in config.json to 9090.",
        _read("/app/config.json"),
        call("write_file", path="/app/config.json.bak", content=_CONFIG.replace("8080", "9090")),
        call("list_directory", path="/app"),
        files={"/app/config.json": _CONFIG},
        check=Check(_read("/app/config.json"), '"port": 9090'),
        tags=("fails",),
    ),
    _ep(
        "fs-edit-replace",
        "edit",
        "Rename the function add to plus in src/util.py.",
        _read("/app/src/util.py"),
        call(
            "edit_file",
            path="/app/src/util.py",
            edits=[{"oldText": "def add(a, b):", "newText": "def plus(a, b):"}],
            dryRun=True,
        ),
        call("edit_file", path="/app/src/util.py", edits=[{"oldText": "def add(a, b):", "newText": "def plus(a, b):"}]),
        _read("/app/src/util.py"),
        files=_PROJECT,
        check=Check(_read("/app/src/util.py"), "def plus(a, b):"),
    ),
    _ep(
        "fs-edit-nomatch",
        "edit",
        "Change the greeting in main.py to 'hi'.",
        call("edit_file", path="/app/src/main.py", edits=[{"oldText": 'print("hello")', "newText": 'print("hi")'}]),
        _read("/app/src/main.py"),
        call("edit_file", path="/app/src/main.py", edits=[{"oldText": "print('hello')", "newText": "print('hi')"}]),
        call("edit_file", path="/app/src/main.py", edits=[{"oldText": "print('hi')"}]),
        files=_PROJECT,
        check=Check(_read("/app/src/main.py"), "print('hi')"),
        tags=("errors",),
    ),
    _ep(
        "fs-edit-multi",
        "edit",
        "Cross out milk and the bike in the notes.",
        call(
            "edit_file",
            path="/app/notes.md",
            edits=[
                {"oldText": "- buy milk", "newText": "- [x] buy milk"},
                {"oldText": "- fix the bike", "newText": "- [x] fix the bike"},
            ],
        ),
        _read("/app/notes.md"),
        files={"/app/notes.md": _NOTES},
        check=Check(_read("/app/notes.md"), "- [x] fix the bike"),
    ),
    _ep(
        "fs-edit-forgot",
        "edit",
        "Mark 'call Ada' as done in the notes.",
        _read("/app/notes.md"),
        call(
            "edit_file",
            path="/app/notes.md",
            edits=[{"oldText": "- buy milk", "newText": "- [x] buy milk"}],
            dryRun=True,
        ),
        files={"/app/notes.md": _NOTES},
        check=Check(_read("/app/notes.md"), "[x] call Ada"),
        tags=("fails",),
    ),
    _ep(
        "fs-organize-move",
        "organize",
        "Move docs/guide.md to README-guide.md at the top level.",
        call("directory_tree", path="/app"),
        call("move_file", source="/app/docs/guide.md", destination="/app/README-guide.md"),
        call("move_file", source="/app/docs/guide.md", destination="/app/guide2.md"),
        call("list_directory", path="/app/docs"),
        call("list_directory", path="/app"),
        files=_PROJECT,
        check=Check(call("list_directory", path="/app"), "[FILE] README-guide.md"),
    ),
    _ep(
        "fs-organize-move-onto-existing",
        "organize",
        "Rename util.py to main.py (it exists).",
        call("move_file", source="/app/src/util.py", destination="/app/src/main.py"),
        call("list_directory_with_sizes", path="/app/src", sortBy="size"),
        call("directory_tree", path="/app/src"),
        files=_PROJECT,
        tags=("errors",),
    ),
    _ep(
        "fs-organize-search",
        "organize",
        "Find all Python files and markdown files.",
        call("search_files", path="/app", pattern="*.py"),
        call("search_files", path="/app", pattern="**/*.md"),
        call("search_files", path="/app", pattern="*.py", excludePatterns=["tests/**"]),
        call("search_files", path="/app", pattern="*.rs"),
        call("directory_tree", path="/app", excludePatterns=["src"]),
        files=_PROJECT,
        tags=("empty",),
    ),
    _ep(
        "fs-organize-archive",
        "organize",
        "Create archive/ and move every markdown file into it.",
        call("create_directory", path="/app/archive"),
        call("move_file", source="/app/README.md", destination="/app/archive/README.md"),
        call("move_file", source="/app/docs/guide.md", destination="/app/archive/guide.md"),
        call("list_directory", path="/app/archive"),
        call("search_files", path="/app", pattern="**/*.md"),
        files=_PROJECT,
        check=Check(
            call("search_files", path="/app", pattern="**/*.md"),
            "/app/archive/README.md\n/app/archive/guide.md",
            "equals",
        ),
    ),
    _ep(
        "fs-errors-traversal",
        "errors",
        "Try to read files outside the project.",
        _read("../../etc/passwd"),
        _read("/etc/passwd"),
        _read("/app/../etc/hostname"),
        call("list_directory", path="/"),
        call("write_file", path="/tmp/x.txt", content="x"),
        call("move_file", source="/app/a.txt", destination="/root/a.txt"),
        _read("/app/a.txt"),
        files={"/app/a.txt": "inside\n"},
        check=Check(_read("/app/a.txt"), "inside"),
        tags=("hostile",),
    ),
    _ep(
        "fs-errors-symlink",
        "errors",
        "Follow links that point outside /app.",
        call("list_directory", path="/app"),
        _read("/app/link-out"),
        _read("/app/link-in"),
        call("write_file", path="/app/link-out", content="pwned"),
        call("list_directory", path="/app/dirlink"),
        call("list_directory", path="/app/dirlink-in"),
        _read("/app/dirlink-in/target.txt"),
        files={"/app/target.txt": "target\n"},
        tags=("hostile", "symlink"),
        options={
            "shell_setup": [
                ["ln", "-s", "/etc/passwd", "/app/link-out"],
                ["ln", "-s", "/app/target.txt", "/app/link-in"],
                ["ln", "-s", "/etc", "/app/dirlink"],
                ["mkdir", "/app/sub"],
                ["ln", "-s", "/app/sub", "/app/dirlink-in"],
                ["cp", "/app/target.txt", "/app/sub/"],
            ]
        },
        check=Check(_read("/app/link-in"), "target"),
    ),
    _ep(
        "fs-errors-bad-args",
        "errors",
        "Malformed calls.",
        call("read_text_file"),
        call("read_text_file", path=42),
        call("write_file", path="/app/x.txt"),
        call("delete_file", path="/app/x.txt"),
        "read the file please",
        '{"name": "list_directory", "arguments": "/app"}',
        call("list_directory_with_sizes", path="/app", sortBy="date"),
        call("read_text_file", path="/app/nope.txt"),
        call("read_text_file", path="/app/dir", head=1),
        files={"/app/dir/a.txt": "a\n"},
        tags=("malformed",),
    ),
    _ep(
        "fs-errors-directory-as-file",
        "errors",
        "Read a directory and list a file.",
        _read("/app/dir"),
        call("list_directory", path="/app/dir/a.txt"),
        call("create_directory", path="/app/dir/a.txt"),
        call("create_directory", path="/app/dir"),
        call("write_file", path="/app/dir", content="x"),
        files={"/app/dir/a.txt": "a\n"},
    ),
]


# -- the seeded random policy ----------------------------------------------------------
_NAMES = ["a.txt", "b.md", "notes/c.txt", "data/d.csv", "x y.txt", "ü.txt", "deep/er/e.txt"]


def _random_action(rng: random.Random, created: list[str]) -> str:
    path = "/app/" + rng.choice(_NAMES + created)
    r = rng.random()
    if r < 0.18:
        name = f"f{rng.randrange(100)}.txt"
        created.append(name)
        return call("write_file", path=f"/app/{name}", content=f"value {rng.randrange(1000)}\n" * rng.randrange(1, 4))
    if r < 0.34:
        return call("read_text_file", path=path)
    if r < 0.44:
        return call("list_directory", path=rng.choice(["/app", "/app/notes", "/app/data", "/app/missing"]))
    if r < 0.50:
        return call("search_files", path="/app", pattern=rng.choice(["*.txt", "*.md", "**/*", "zzz"]))
    if r < 0.56:
        return call("move_file", source=path, destination=f"/app/moved{rng.randrange(10)}.txt")
    if r < 0.62:
        return call("edit_file", path=path, edits=[{"oldText": rng.choice(["value", "alpha", "1"]), "newText": "Z"}])
    if r < 0.66:
        return call("create_directory", path=f"/app/dir{rng.randrange(5)}")
    if r < 0.70:
        return call("directory_tree", path="/app")
    # malformed or hostile
    return rng.choice(
        [
            call("read_text_file", path="../../etc/passwd"),
            call("read_text_file", path="/etc/shadow"),
            call("read_text_file"),
            call("read_text_file", path=rng.randrange(100)),
            call("write_file", path="/app/z.txt"),
            call("rm", path=path),
            call("list_directory", path="/app/../.."),
            '{"name": "read_text_file", "arguments": {"path": "/app/a.txt"',
            '["read_text_file", "/app/a.txt"]',
            call("read_text_file", path=path, head="two"),
        ]
    )


def random_scripts(seed: int, n: int) -> list[Script]:
    """``n`` open-loop episodes of a seeded random policy (valid, odd and malformed calls)."""
    rng = random.Random(seed)
    files = {
        "/app/a.txt": "alpha\nbeta\n",
        "/app/b.md": "# B\n",
        "/app/notes/c.txt": "see a.txt\n",
        "/app/data/d.csv": "k,v\n1,2\n",
        "/app/ü.txt": "unicode name\n",
    }
    out = []
    for i in range(n):
        created: list[str] = []
        actions = [_random_action(rng, created) for _ in range(rng.randint(5, 8))]
        check = Check(call("read_text_file", path="/app/a.txt"), "alpha") if i % 2 == 0 else None
        out.append(
            _ep(
                f"fs-random-{seed}-{i}",
                "random",
                "Explore the directory.",
                *actions,
                files=files,
                check=check,
                tags=("random", "malformed"),
            )
        )
    return out


SCRIPTS: list[Script] = [*SCRIPTED, *random_scripts(7, 6)]
EXTENDED: set[str] = set()

if __name__ == "__main__":  # pragma: no cover - a quick count
    print(
        len(SCRIPTS),
        sum(len(e.actions) for e in SCRIPTS),
        sum(e.task.check is not None for e in SCRIPTS),
        json.dumps([e.task.name for e in SCRIPTS]),
    )
