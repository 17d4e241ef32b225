"""Filesystem task families: tool calls on the reference MCP filesystem server, confined to ``/app``.

Verifiers are read-only tool calls on the final state (``read_text_file``, ``list_directory``,
``read_multiple_files``, ``search_files``) compared exactly: ``list_directory`` and
``search_files`` list names in sorted order (Node's ``readdir``), so listings are stable.
Seeded text files have no final newline, so a copy written from what ``read_text_file``
showed is byte-identical. The server cannot delete files and ``write_file`` does not create
parent directories (a family relies on the latter: ``write-nested``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from lwm.domains.mcp.spec import call
from lwm.domains.tasks import NAMES, WORDS, TaskFamily
from lwm.envs.base import Check, Task

DOMAIN = "fs"


def _task(family: str, instruction: str, check: Check, files: dict[str, str] | None = None) -> Task:
    return Task(name=family, family=family, instruction=instruction, files=dict(files or {}), check=check)


def _read_is(path: str, content: str) -> Check:
    return Check(call("read_text_file", path=path), content, "equals")


def _text(rng: random.Random, k: int = 4) -> str:
    return " ".join(rng.sample(WORDS, k))


def write_file(rng: random.Random):
    path, text = f"/app/{rng.choice(WORDS)}.txt", _text(rng, 2)
    return (_task("write-file", f"Write the text '{text}' into a new file {path}.", _read_is(path, text)),
            (call("write_file", path=path, content=text),))


def make_dir(rng: random.Random):
    name = f"{rng.choice(WORDS)}_{rng.randint(1, 99)}"
    other = f"/app/{rng.choice(WORDS)}.txt"
    return (_task("make-dir", f"Create the directory /app/{name}.",
                  Check(call("list_directory", path="/app"), rf"^\[DIR\] {name}$", "regex"), {other: _text(rng)}),
            (call("create_directory", path=f"/app/{name}"),))


def rename_file(rng: random.Random):
    old, new = (f"{w}.txt" for w in rng.sample(WORDS, 2))
    return (_task("rename-file", f"Rename the file /app/{old} to /app/{new}.",
                  Check(call("list_directory", path="/app"), f"[FILE] {new}", "equals"), {f"/app/{old}": _text(rng)}),
            (call("move_file", source=f"/app/{old}", destination=f"/app/{new}"),))


def edit_word(rng: random.Random):
    old, new, *rest = rng.sample(WORDS, 6)
    lines = [f"{rest[0]} {old}", f"{rest[1]} {rest[2]}", f"{old} {rest[3]}"]
    path = f"/app/{rng.choice(('notes', 'draft', 'poem'))}.txt"
    text = "\n".join(lines)
    return (_task("edit-word", f"In the file {path}, replace every occurrence of the word {old} with {new}.",
                  _read_is(path, text.replace(old, new)), {path: text}),
            (call("edit_file", path=path, edits=[{"oldText": line, "newText": line.replace(old, new)}
                                                 for line in lines if old in line]),))


def copy_file(rng: random.Random):
    src, dst = (f"/app/{w}.txt" for w in rng.sample(WORDS, 2))
    text = _text(rng, 5)
    # both paths must hold the text: a move leaves one
    probe = call("read_multiple_files", paths=[src, dst])
    return (_task("copy-file", f"Make a copy of the file {src} named {dst} (keep the original).",
                  Check(probe, f"{src}:\n{text}\n\n---\n{dst}:\n{text}", "equals"), {src: text}),
            (call("read_text_file", path=src), call("write_file", path=dst, content=text)))


def find_file(rng: random.Random):
    target = f"{rng.choice(WORDS)}_{rng.randint(10, 99)}.txt"
    dirs = rng.sample(WORDS, 3)
    where = f"/app/{dirs[0]}/{dirs[1]}/{target}"
    files = {where: _text(rng), f"/app/{dirs[2]}/other.txt": _text(rng), f"/app/{dirs[0]}/readme.txt": _text(rng)}
    return (_task("find-file", f"A file named {target} is somewhere under /app. Write its full path (for example "
                  "/app/x/y.txt) into a new file /app/answer.txt.", _read_is("/app/answer.txt", where), files),
            (call("search_files", path="/app", pattern=f"**/{target}"),
             call("write_file", path="/app/answer.txt", content=where)))


def append_line(rng: random.Random):
    path = f"/app/{rng.choice(('list', 'todo', 'names'))}.txt"
    lines, new = rng.sample(WORDS, rng.randint(2, 4)), rng.choice(NAMES).lower()
    text = "\n".join(lines)
    return (_task("append-line", f"Add the line {new} at the end of the file {path}, keeping its other lines.",
                  _read_is(path, f"{text}\n{new}"), {path: text}),
            (call("read_text_file", path=path), call("write_file", path=path, content=f"{text}\n{new}\n")))


def write_nested(rng: random.Random):
    a, b, word = rng.sample(WORDS, 3)
    path = f"/app/{a}/{b}/notes.txt"
    return (_task("write-nested", f"Create the file {path} containing the word {word} (its directories do not exist "
                  "yet).", _read_is(path, word)),
            (call("create_directory", path=f"/app/{a}/{b}"), call("write_file", path=path, content=word)))


def organize(rng: random.Random):
    docs, keep = rng.sample(WORDS, 2), rng.choice(WORDS)
    folder = rng.choice(("docs", "notes", "pages"))
    files = {f"/app/{d}.md": _text(rng) for d in docs} | {f"/app/{keep}.txt": _text(rng)}
    expected = "\n".join(f"/app/{folder}/{d}.md" for d in sorted(docs))
    return (_task("organize", f"Create the directory /app/{folder} and move every .md file of /app into it.",
                  Check(call("search_files", path="/app", pattern="**/*.md"), expected, "equals"), files),
            (call("create_directory", path=f"/app/{folder}"),
             *(call("move_file", source=f"/app/{d}.md", destination=f"/app/{folder}/{d}.md") for d in docs)))


def merge_files(rng: random.Random):
    a, b = _text(rng, 3), _text(rng, 3)
    return (_task("merge-files", "Create the file /app/all.txt holding the text of /app/part1.txt, then on the next "
                  "line the text of /app/part2.txt.", _read_is("/app/all.txt", f"{a}\n{b}"),
                  {"/app/part1.txt": a, "/app/part2.txt": b}),
            (call("read_text_file", path="/app/part1.txt"), call("read_text_file", path="/app/part2.txt"),
             call("write_file", path="/app/all.txt", content=f"{a}\n{b}")))


FAMILIES = [
    TaskFamily("write-file", DOMAIN, 1, "write a given text to a new file", write_file),
    TaskFamily("make-dir", DOMAIN, 1, "create a directory", make_dir),
    TaskFamily("rename-file", DOMAIN, 1, "rename a file", rename_file),
    TaskFamily("edit-word", DOMAIN, 1, "replace a word in a file", edit_word),
    TaskFamily("copy-file", DOMAIN, 2, "copy a file (read, then write)", copy_file),
    TaskFamily("find-file", DOMAIN, 2, "find a file and write down its path", find_file),
    TaskFamily("append-line", DOMAIN, 2, "append a line to a file (read, then write)", append_line),
    TaskFamily("write-nested", DOMAIN, 2, "create directories, then a file in them", write_nested),
    TaskFamily("organize", DOMAIN, 3, "create a directory and move the .md files into it", organize),
    TaskFamily("merge-files", DOMAIN, 3, "concatenate two files into a new one", merge_files),
]
#: Held-out families: one easy, one two-step, one three-step.
HELD_OUT = ("make-dir", "copy-file", "organize")


def _args(action: str) -> dict:
    return json.loads(action)["arguments"]


#: Plausible wrong attempts the real verifier must fail (printing instead of writing, a wrong value, a step left out).
WRONG: dict[str, Callable[[Task, tuple[str, ...]], tuple[str, ...]]] = {
    "write-file": lambda t, s: (call("write_file", path="/app/wrong.txt", content=_args(s[0])["content"]),),
    "make-dir": lambda t, s: (call("write_file", path=_args(s[0])["path"], content=""),),
    "rename-file": lambda t, s: (call("write_file", path=_args(s[0])["destination"], content="copy"),),
    "edit-word": lambda t, s: (call("edit_file", **_args(s[0]), dryRun=True),),
    "copy-file": lambda t, s: (call("move_file", source=_args(s[0])["path"], destination=_args(s[1])["path"]),),
    "find-file": lambda t, s: (call("write_file", path="/app/answer.txt",
                                        content=_args(s[1])["content"].rsplit("/", 1)[1]),),
    "append-line": lambda t, s: (call("write_file", path=_args(s[1])["path"],
                                          content=_args(s[1])["content"].split("\n")[-2]),),
    "write-nested": lambda t, s: s[1:],
    "organize": lambda t, s: s[:2],
    "merge-files": lambda t, s: (call("write_file", path="/app/all.txt", content="part1"),),
}
