"""Seeded exploration of the terminal: many short episodes of everyday commands on random files.

The bundled suite has a few dozen hand-written episodes; a world model learns from them what
*those* commands print. Exploration episodes are its cheap complement (the seed's recipe:
real transitions at scale, issue 23's "grounded in real transitions"): each one puts a few
random files in ``/app`` (words, numbers, a small CSV; sometimes typed on screen, sometimes
there before the first observation) and runs 4–7 commands drawn from a fixed vocabulary of
coreutils, grep, sed and shell builtins on them. The real sandbox prints the outputs, so
every transition is ground truth; the generator only chooses actions.

Every episode belongs to the family ``explore``, which no bundled task uses, so held-out
task families stay held out: their tasks, file names and contents are never generated here.
The vocabulary of commands is shared, as it would be with any real shell data, so a command
line can recur (``ls -A``; ``sort -u X | wc -l`` of the extended ``pipes-sort-uniq`` episode
when X is one of the generated names). Only coreutils, grep, sed, gawk/mawk and bash are
used, which every sandbox has; nothing printed depends on the clock, so one run per episode
(``--runs 1``) is enough.
"""

from __future__ import annotations

import random
import shlex

from lwm.domains.terminal.spec import keys
from lwm.envs.base import Task
from lwm.envs.episode import Script

FAMILY = "explore"

_WORDS = (
    "apple banana cherry grape lemon mango melon peach pear plum "
    "red green blue yellow black white orange purple "
    "cat dog fox owl bee ant cow hen "
    "alpha beta gamma delta omega "
    "north south east west "
    "error warning info debug "
    "open close read write start stop"
).split()
_NAMES = "ada alan grace linus ken dennis barbara edsger donald margaret".split()
_CITIES = "paris oslo lima cairo delhi tokyo quito rome".split()
_STEMS = "data list words log items report todo input scores ideas".split()  # no suite file's name


def _text(rng: random.Random) -> str:
    """3–8 lines of 1–5 words (repeats likely, so sort/uniq/grep have something to do)."""
    pool = rng.sample(_WORDS, rng.randint(4, 10))
    return "".join(" ".join(rng.choice(pool) for _ in range(rng.randint(1, 5))) + "\n"
                   for _ in range(rng.randint(3, 8)))


def _numbers(rng: random.Random) -> str:
    return "".join(f"{rng.randint(0, 120)}\n" for _ in range(rng.randint(3, 9)))


def _csv(rng: random.Random) -> str:
    rows = [f"{rng.choice(_NAMES)},{rng.choice(_CITIES)},{rng.randint(1, 99)}" for _ in range(rng.randint(3, 6))]
    return "name,city,score\n" + "\n".join(rows) + "\n"


def _printf(path: str, content: str) -> str:
    """A command line that writes ``content`` (lines of plain words) to ``path``."""
    lines = content.splitlines()
    return f"printf '%s\\n' {' '.join(shlex.quote(line) for line in lines)} > {path}"


def _word_of(rng: random.Random, content: str) -> str:
    words = content.replace(",", " ").split()
    return rng.choice(words) if words and rng.random() < 0.8 else rng.choice(_WORDS)


def _file_command(rng: random.Random, path: str, kind: str, content: str) -> str:
    """One command that reads or transforms the file ``path`` (of ``kind``)."""
    n = len(content.splitlines())
    k = rng.randint(1, max(1, n))
    word = _word_of(rng, content)
    common = [
        f"cat {path}", f"wc -l {path}", f"wc -w {path}", f"wc -c {path}", f"wc -l < {path}",
        f"head -n {k} {path}", f"tail -n {k} {path}", f"head -{k} {path} | tail -1", f"sed -n '{k}p' {path}",
        f"nl {path}", f"tac {path}", f"sort {path}", f"sort -r {path}", f"sort {path} | uniq",
        f"sort {path} | uniq -c", f"grep {word} {path}", f"grep -c {word} {path}", f"grep -v {word} {path}",
        f"grep -n {word} {path}", f"grep -i {word.upper()} {path}", f"tr a-z A-Z < {path}",
        f"rev {path}", f"cat -n {path} | head -{k}", f"sed 's/{word}/X/' {path}", f"sed 's/{word}/X/g' {path}",
        f"stat -c '%s %n' {path}", f"du -b {path}", f"md5sum {path} | cut -c1-8", f"grep -o {word} {path} | wc -l",
        f"awk 'NR=={k}' {path}", f"awk '{{print NF}}' {path}", f"cut -c1-3 {path}", f"sort -u {path} | wc -l",
    ]
    if kind == "text":
        common += [f"tr ' ' '\\n' < {path} | sort | uniq -c | sort -rn | head -3", f"awk '{{print $1}}' {path}",
                   f"tr -d ' ' < {path}", f"fold -w 10 {path} | head -{k}"]
    elif kind == "numbers":
        common += [f"sort -n {path}", f"sort -n {path} | tail -1", f"sort -rn {path} | head -{k}",
                   f"awk '{{s+=$1}} END {{print s}}' {path}", f"sort -n {path} | uniq | wc -l",
                   f"sort -n {path} | head -1", f"awk '$1 > 50' {path}"]
    else:  # csv
        common += [f"cut -d, -f1 {path}", f"cut -d, -f2 {path} | sort -u", f"cut -d, -f3 {path} | tail -n +2",
                   f"tail -n +2 {path} | sort -t, -k3 -n", f"tr , ' ' < {path}",
                   f"awk -F, 'NR>1 {{s+=$3}} END {{print s}}' {path}", f"grep -c {word} {path}"]
    return rng.choice(common)


def _tree_command(rng: random.Random, files: dict[str, tuple[str, str]], dirs: list[str]) -> str:
    """A command that looks at or changes the file tree; ``files`` is updated as the command
    changes it (``cp``, ``mv``, ``rm``), so later commands name files that exist."""
    paths = list(files)
    path = rng.choice(paths)
    stem = path.rsplit(".", 1)[0]
    new_dir = rng.choice(["out", "backup", "tmp2", "archive", "docs"])
    command = rng.choice([
        "ls", "ls -A", "ls -1", "ls | wc -l", "find . -type f | sort", "find . -name '*.txt' | sort",
        "find . -type d | sort", f"ls {rng.choice(dirs)}" if dirs else "ls -a",
        f"mkdir -p {new_dir} && ls", f"cp {path} {stem}.bak && ls", f"mv {path} {stem}.old && ls",
        f"test -e {path} && echo yes || echo no", f"test -d {new_dir} && echo dir || echo none",
        f"touch {new_dir}.txt && ls", f"rm -f {path} && ls", f"cmp {path} {rng.choice(paths)} && echo same",
        f"chmod +x {path} && stat -c '%A %n' {path}", f"stat -c '%a %n' {path}", "pwd", "echo $?",
        f"cat {stem}.missing", f"ls {new_dir}", f"wc -l {' '.join(paths[:2])}",
        f"basename /app/{path} .txt", f"dirname /app/{rng.choice(dirs) if dirs else 'x'}/{path}",
    ])
    if command.startswith("cp "):
        files[f"{stem}.bak"] = files[path]
    elif command.startswith(("mv ", "rm ")) and len(files) > 1:  # the last file stays: commands need one
        moved = files.pop(path)
        if command.startswith("mv "):
            files[f"{stem}.old"] = moved
    elif command.startswith(("mv ", "rm ")):
        command = f"test -e {path} && echo yes || echo no"
    return command


def _echo_command(rng: random.Random) -> str:
    """A command on literal text (echo, printf, seq, arithmetic)."""
    a, b = rng.randint(1, 30), rng.randint(1, 30)
    phrase = " ".join(rng.sample(_WORDS, rng.randint(1, 3)))
    return rng.choice([
        f"echo {phrase}", f"echo '{phrase}' | tr a-z A-Z", f"echo '{phrase}' | rev", f"echo '{phrase}' | wc -w",
        f"echo '{phrase}' | wc -c", f"echo {phrase} | tr ' ' '\\n'", f"seq {min(a, b)} {max(a, b) % 12 + min(a, b)}",
        f"seq {a % 9 + 1}", f"echo $(( {a} + {b} ))", f"echo $(( {a} * {b} ))", f"printf '%s-%s\\n' {a} {b}",
        f"echo {phrase} | cut -d' ' -f1", f"echo {phrase} | awk '{{print NF}}'", f"printf '%03d\\n' {a}",
        f"echo {' '.join(str(rng.randint(1, 9)) for _ in range(4))} | tr ' ' '\\n' | sort -n",
    ])


def explore_scripts(seed: int, n: int) -> list[Script]:
    """``n`` exploration episodes, deterministic in ``seed`` (episode ``i`` of a seed is the
    same whatever ``n`` is).

    Each episode: 1–3 random files (``.txt`` text, a numbers file, a CSV), put in place
    before the episode or typed on screen (``printf … > file``) as its first actions, then
    4–7 commands reading, transforming or moving them, or on literal text.

    >>> a, b = explore_scripts(7, 3), explore_scripts(7, 5)
    >>> [s.task.name for s in a] == [s.task.name for s in b[:3]] and a[2].actions == b[2].actions
    True
    >>> {s.task.family for s in b}
    {'explore'}
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [_episode(seed, i) for i in range(n)]


def _episode(seed: int, i: int) -> Script:
    rng = random.Random(f"lwm-explore:{seed}:{i}")
    files: dict[str, tuple[str, str]] = {}
    for stem in rng.sample(_STEMS, rng.randint(1, 3)):
        kind = rng.choice(["text", "text", "numbers", "csv"])
        ext = ".csv" if kind == "csv" else ".txt"
        files[stem + ext] = (kind, {"text": _text, "numbers": _numbers, "csv": _csv}[kind](rng))
    dirs = rng.sample(["src", "data", "logs"], rng.randint(0, 2))
    typed = rng.random() < 0.5  # typed on screen: the model sees every file's content
    actions = [_printf(p, c) for p, (_, c) in files.items()] if typed else []
    preset = {} if typed else {f"/app/{p}": c for p, (_, c) in files.items()}
    for _ in range(rng.randint(4, 7)):
        roll = rng.random()
        if roll < 0.6:
            path = rng.choice(list(files))
            actions.append(_file_command(rng, path, *files[path]))
        elif roll < 0.85:
            actions.append(_tree_command(rng, files, dirs))
        else:
            actions.append(_echo_command(rng))
    preset.update({f"/app/{d}/.keep": "" for d in dirs})
    task = Task(name=f"explore-{seed}-{i}", family=FAMILY, instruction="", files=preset)
    return Script(task=task, actions=tuple(keys(a + "\n") for a in actions), tags=(FAMILY,))
