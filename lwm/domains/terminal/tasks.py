"""Terminal task families: bash in tmux, working directory ``/app``.

Actions are JSON keystroke lists (:func:`lwm.suites.keys`). Verifiers are shell commands run
beside the agent's shell on the final state (``TerminalEnv.probe``: their standard output
only), so a file check cannot pass because the agent printed the text to the screen. The
one screen check (``print-text``) reads the pane's whole scrollback through tmux and wants
a line that is exactly the text: the echoed command line never is one.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

from lwm.domains.tasks import NAMES, WORDS, TaskFamily
from lwm.domains.terminal.spec import keys
from lwm.envs.base import Check, Task

DOMAIN = "terminal"
# The agent's pane, read through the sandbox's tmux socket (lwm.envs.tmux_controller.SOCKET).
_SCREEN = "tmux -S /run/tmux/tmux.sock capture-pane -p -J -S - -t main:0.0"


def _task(family: str, instruction: str, check: Check, files: dict[str, str] | None = None,
          setup: tuple[str, ...] = ()) -> Task:
    return Task(name=family, family=family, instruction=instruction, files=dict(files or {}), setup=setup,
                check=check)


def _file_is(path: str, content: str) -> Check:
    """The file's exact content (surrounding whitespace aside)."""
    return Check(f"cat {path}", content, "equals")


def _words(rng: random.Random, k: int) -> list[str]:
    return rng.sample(WORDS, k)


def print_text(rng: random.Random):
    text = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randint(2, 999)}"
    return (_task("print-text", f"Print the text '{text}' on the screen (on a line of its own).",
                  Check(_SCREEN, rf"^{re.escape(text)}\s*$", "regex")),
            (keys(f"echo {text}\n"),))


def create_file(rng: random.Random):
    word, name = rng.choice(WORDS), rng.choice(("notes", "todo", "memo", "word", "list", "data")) + ".txt"
    return (_task("create-file", f"Create a file named {name} in /app containing the word {word}.",
                  _file_is(f"/app/{name}", word)),
            (keys(f"echo {word} > {name}\n"),))


def make_dir(rng: random.Random):
    name = f"{rng.choice(WORDS)}_{rng.randint(1, 99)}"
    return (_task("make-dir", f"Create a directory named {name} in /app.",
                  Check(f"test -d /app/{name} && echo directory || echo missing", "directory", "equals")),
            (keys(f"mkdir {name}\n"),))


def append_line(rng: random.Random):
    lines, new = _words(rng, rng.randint(2, 4)), rng.choice(NAMES).lower()
    old = "\n".join(lines) + "\n"
    return (_task("append-line", f"Add the line {new} at the end of the file /app/list.txt, keeping its other lines.",
                  _file_is("/app/list.txt", old + new), files={"/app/list.txt": old}),
            (keys(f"echo {new} >> list.txt\n"),))


def copy_file(rng: random.Random):
    name, folder = f"{rng.choice(WORDS)}.txt", rng.choice(("backup", "copies", "old", "saved"))
    content = " ".join(_words(rng, 5)) + "\n"
    # both files must hold the content: a move leaves one
    return (_task("copy-file", f"Copy the file /app/{name} into the existing directory /app/{folder} "
                  "(keep the original).", Check(f"cat /app/{name} /app/{folder}/{name}", content * 2, "equals"),
                  files={f"/app/{name}": content, f"/app/{folder}/.keep": ""}),
            (keys(f"cp {name} {folder}/\n"),))


def rename_file(rng: random.Random):
    old, new = (f"{w}.txt" for w in _words(rng, 2))
    content = f"{rng.choice(NAMES)} {rng.randint(10, 99)}\n"
    return (_task("rename-file", f"Rename the file /app/{old} to {new} (in /app).",
                  Check("ls /app && cat /app/" + new, f"{new}\n{content}", "equals"), files={f"/app/{old}": content}),
            (keys(f"mv {old} {new}\n"),))


def delete_logs(rng: random.Random):
    words = _words(rng, 6)
    keep, drop = words[:3], words[3:]
    names = sorted({f"{w}.txt" for w in keep} | {f"{w}.md" for w in keep[:1]})
    logs = sorted({f"{w}.log" for w in drop})
    files = {f"/app/{n}": f"{n}\n" for n in names + logs}
    return (_task("delete-logs", "Delete every file whose name ends in .log from /app; keep all the other files.",
                  Check("ls /app", "\n".join(names), "equals"), files=files),
            (keys("rm /app/*.log\n"),))


def count_matches(rng: random.Random):
    word, other = _words(rng, 2)
    lines = [f"{rng.choice((word, other))} {rng.randint(1, 999)}" for _ in range(rng.randint(5, 12))]
    count = sum(line.startswith(word + " ") for line in lines)
    return (_task("count-matches", f"Count the lines of /app/data.txt that contain the word {word} and write "
                  "just that number into a new file /app/count.txt.",
                  _file_is("/app/count.txt", str(count)), files={"/app/data.txt": "\n".join(lines) + "\n"}),
            (keys(f"grep -c {word} data.txt > count.txt\n"),))


def sort_unique(rng: random.Random):
    names = [rng.choice(NAMES[:8]).lower() for _ in range(rng.randint(5, 9))]
    names.insert(rng.randint(0, len(names)), names[0])  # at least one duplicate
    expected = "\n".join(sorted(set(names)))
    return (_task("sort-unique", "Write the distinct lines of /app/names.txt, sorted alphabetically and each once, "
                  "to a new file /app/sorted.txt.", _file_is("/app/sorted.txt", expected),
                  files={"/app/names.txt": "\n".join(names) + "\n"}),
            (keys("sort -u names.txt > sorted.txt\n"),))


def replace_word(rng: random.Random):
    old, new, *rest = _words(rng, 5)
    lines = [f"{old} {w}" if i % 2 == 0 else f"{w} {old} {w}" for i, w in enumerate(rest)]
    text = "\n".join(lines) + "\n"
    return (_task("replace-word", f"In the file /app/config.txt, replace every occurrence of the word {old} "
                  f"with {new}.", _file_is("/app/config.txt", text.replace(old, new)),
                  files={"/app/config.txt": text}),
            (keys(f"sed -i 's/{old}/{new}/g' config.txt\n"),))


def nested_file(rng: random.Random):
    folder, word = _words(rng, 2)
    name = rng.choice(("readme", "info", "hello")) + ".txt"
    return (_task("nested-file", f"Create a directory /app/{folder} and, inside it, a file named {name} "
                  f"containing the word {word}.", _file_is(f"/app/{folder}/{name}", word)),
            (keys(f"mkdir {folder}\n"), keys(f"echo {word} > {folder}/{name}\n")))


def make_script(rng: random.Random):
    text = f"{rng.choice(WORDS)} {rng.randint(1, 99)}"
    name = rng.choice(("run", "hello", "greet", "start")) + ".sh"
    return (_task("make-script", f"Create a shell script /app/{name} that prints '{text}' when run, and make it "
                  f"executable so that ./{name} runs it.",
                  Check(f"cd /app && test -x {name} && ./{name}", text, "equals")),
            (keys(f"echo 'echo {text}' > {name}\n"), keys(f"chmod +x {name}\n")))


def backup_and_edit(rng: random.Random):
    key = rng.choice(("mode", "level", "color", "size"))
    old, new = _words(rng, 2)
    other = f"owner={rng.choice(NAMES).lower()}"
    text = f"{key}={old}\n{other}\n"
    probe = "cat /app/settings.bak; echo ---; cat /app/settings.txt"
    return (_task("backup-and-edit", f"First copy /app/settings.txt to /app/settings.bak, then change the line "
                  f"{key}={old} in /app/settings.txt to {key}={new} (leave the backup unchanged).",
                  Check(probe, f"{text}---\n{key}={new}\n{other}", "equals"), files={"/app/settings.txt": text}),
            (keys("cp settings.txt settings.bak\n"), keys(f"sed -i 's/^{key}={old}$/{key}={new}/' settings.txt\n")))


FAMILIES = [
    TaskFamily("print-text", DOMAIN, 1, "print a given text on the screen", print_text),
    TaskFamily("create-file", DOMAIN, 1, "create a file holding one given word", create_file),
    TaskFamily("make-dir", DOMAIN, 1, "create a directory", make_dir),
    TaskFamily("append-line", DOMAIN, 1, "append a line to an existing file", append_line),
    TaskFamily("copy-file", DOMAIN, 1, "copy a file into a directory, keeping the original", copy_file),
    TaskFamily("rename-file", DOMAIN, 1, "rename a file", rename_file),
    TaskFamily("delete-logs", DOMAIN, 1, "delete the .log files, keep the rest", delete_logs),
    TaskFamily("count-matches", DOMAIN, 1, "count matching lines into a file", count_matches),
    TaskFamily("sort-unique", DOMAIN, 1, "sorted distinct lines into a file", sort_unique),
    TaskFamily("replace-word", DOMAIN, 1, "replace a word throughout a file", replace_word),
    TaskFamily("nested-file", DOMAIN, 2, "create a directory and a file in it", nested_file),
    TaskFamily("make-script", DOMAIN, 2, "write a script and make it executable", make_script),
    TaskFamily("backup-and-edit", DOMAIN, 2, "back a file up, then edit one line of it", backup_and_edit),
]
#: Held-out families: one easy, one harder one-action, one multi-step.
HELD_OUT = ("make-dir", "sort-unique", "backup-and-edit")


def _typed(action: str) -> str:
    return json.loads(action)[0]["keystrokes"]


def _first(task: Task, solution: tuple[str, ...]) -> tuple[str, ...]:
    return solution[:1]


#: Plausible wrong attempts the real verifier must fail (printing instead of writing, a wrong value, a step left out).
WRONG: dict[str, Callable[[Task, tuple[str, ...]], tuple[str, ...]]] = {
    "print-text": lambda t, s: (keys(_typed(s[0]).replace("\n", " > out.txt\n")),),
    "create-file": lambda t, s: (keys(_typed(s[0]).split(" > ")[0] + "\n"),),  # to the screen
    "make-dir": lambda t, s: (keys(_typed(s[0]).replace("mkdir", "touch")),),
    "append-line": lambda t, s: (keys(_typed(s[0]).replace(">>", ">")),),
    "copy-file": lambda t, s: (keys(_typed(s[0]).replace("cp ", "mv ")),),
    "rename-file": lambda t, s: (keys(_typed(s[0]).replace("mv ", "cp ")),),
    "delete-logs": lambda t, s: (keys("rm /app/*\n"),),
    "count-matches": lambda t, s: (keys(_typed(s[0]).split(" > ")[0] + "\n"),),
    "sort-unique": lambda t, s: (keys("sort names.txt > sorted.txt\n"),),
    "replace-word": lambda t, s: (keys(_typed(s[0]).replace("sed -i", "sed")),),
    "nested-file": _first,
    "make-script": _first,
    "backup-and-edit": lambda t, s: s[1:],  # edits without the backup
}
