"""The bundled terminal suite: scripted episodes played in a real sandboxed bash.

Each episode is a short, realistic sequence of keystroke actions (4–8 on average) of one
task family:

``files``        files and directories (mkdir, cp, mv, rm, find, du, stat …)
``pipes``        pipes and text processing (grep, sed, awk, sort, uniq, cut, tr, xargs …)
``errors``       errors and exit codes (missing files, ``$?``, command not found …)
``shell-state``  state carried across turns (cwd in the prompt, variables, aliases …)
``heredoc``      here-documents typed in one action, then used
``python``       ``python3 -c`` one-liners, small scripts, the REPL, tracebacks
``long-running`` output arriving over time, observed by empty-keystroke waits
``ctrl-c``       interrupting running commands (and half-typed lines) with ``C-c``
``git``          git in a fresh repository

Beyond the suite, ``explore(seed, n)`` (:mod:`lwm.domains.terminal.explore`) generates
seeded exploration episodes of everyday commands on random files (``lwm collect --explore``).

A few episodes type odd input on purpose (a typo, an unclosed quote, an empty Enter,
``clear``; tag ``odd-input``), and a handful print volatile things (dates, PIDs, random
names, timings; tag ``volatile``) that differ between two plays of the same episode.
(PIDs do not: the sandbox has its own PID namespace, so ``echo $$`` is always small and
the same.)

Durations are short so that the whole suite plays in a few minutes: about 0.3 s for
instant commands, 0.5–0.6 s for git commits and python3, 1–2.5 s waits for long-running
commands.
"""

from __future__ import annotations

import dataclasses
import random

from lwm.domains.terminal.explore import explore_scripts
from lwm.domains.terminal.spec import keys
from lwm.envs.base import Check, Task
from lwm.envs.episode import Script

PY_WAIT = 0.6  # python3 start-up and a little work
GIT_WAIT = 0.5  # git commands that write objects


def _ep(name: str, family: str, instruction: str, *actions: str, tags: tuple[str, ...] = (),
        files: dict[str, str] | None = None, setup: tuple[str, ...] = ()) -> Script:
    task = Task(name=name, family=family, instruction=instruction, files=dict(files or {}),
                setup=tuple(setup))
    return Script(task=task, actions=tuple(actions), tags=(family, *tags))


# git identity, fixed dates (commit hashes are the same on every play) and branch name.
_GIT_WHO = (
    "git config --global user.name 'Ada Lovelace'",
    "git config --global user.email ada@example.com",
)
_GIT_DATES = ("export GIT_AUTHOR_DATE='2024-01-01T12:00:00+0000'"
              " GIT_COMMITTER_DATE='2024-01-01T12:00:00+0000'",)
_GIT_BRANCH = ("git config --global init.defaultBranch main",)
_GIT_ID = (*_GIT_WHO, *_GIT_DATES)
_GIT_MAIN = (*_GIT_ID, *_GIT_BRANCH)
# A repository with one commit of README.md (seed it with files=_README).
_GIT_REPO = (*_GIT_MAIN, "git init -q", "git add -A", "git commit -q -m 'Initial commit'")

_README = {"/app/README.md": "# Demo\n\nA demo project.\n"}
_POEM = """\
the quick brown fox jumps over the lazy dog
the dog sleeps and the fox runs
a quick fox is a happy fox
"""
_LOG = """\
2024-05-01 10:00:01 INFO server started on port 8080
2024-05-01 10:00:05 INFO GET /index.html 200
2024-05-01 10:01:12 WARN slow response from db (1200 ms)
2024-05-01 10:02:30 ERROR connection refused by cache
2024-05-01 10:02:31 INFO GET /api/users 200
2024-05-01 10:03:44 ERROR timeout while reading /api/orders
2024-05-01 10:04:00 INFO GET /health 200
2024-05-01 10:05:17 WARN retrying cache connection
"""
_SALES = """\
date,region,amount
2024-01-03,north,120
2024-01-04,south,80
2024-01-04,north,45
2024-01-05,east,200
2024-01-06,south,35
2024-01-07,east,15
"""
_CONFIG = """\
[server]
host=localhost
port=5432
debug=true
[client]
retries=3
"""
_NAMES = """\
carol
alice
bob
alice
dave
carol
alice
erin
"""
_DATA_JSON = """\
{"name": "inventory", "items": [{"sku": "A1", "qty": 4, "price": 2.5},
 {"sku": "B2", "qty": 10, "price": 1.25}, {"sku": "C3", "qty": 0, "price": 9.0}]}
"""
_CALC_PY = """\
import argparse

parser = argparse.ArgumentParser(description="Add two integers.")
parser.add_argument("a", type=int)
parser.add_argument("b", type=int)
args = parser.parse_args()
print(f"{args.a} + {args.b} = {args.a + args.b}")
"""
_GREET_PY = """\
def greet(name):
    return "Hello, " + name + "!"


print(greet("world"))
"""

# ---------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------
FILES = [
    _ep("files-project-skeleton", "files",
        "Create a project skeleton with src, tests and docs directories and a few empty files.",
        keys("mkdir -p project/{src,tests,docs}\n"),
        keys("ls project\n"),
        keys("touch project/src/main.py project/tests/test_main.py project/docs/README.md\n"),
        keys("find project | sort\n"),
        keys("find project -type f | wc -l\n")),
    _ep("files-backup-and-archive", "files",
        "Back up notes.txt into an archive directory and check the copy matches.",
        keys("ls\n"),
        keys("cp notes.txt notes.bak\n"),
        keys("mkdir archive && mv notes.bak archive/\n"),
        keys("ls . archive\n"),
        keys("cmp notes.txt archive/notes.bak && echo identical\n"),
        keys("cat archive/notes.bak\n"),
        files={"/app/notes.txt": "buy milk\ncall the plumber\nrenew passport\n"}),
    _ep("files-clean-build", "files",
        "Delete the object files from build/obj, then remove the whole build directory.",
        keys("ls -R build\n"),
        keys("rm build/obj/*.o\n"),
        keys("ls build/obj | wc -l\n"),
        keys("rm -r build\n"),
        keys("ls\n"),
        setup=("mkdir -p build/obj", "touch build/obj/a.o build/obj/b.o build/app build/keep.txt")),
    _ep("files-find-python", "files",
        "List every Python file under src and count them.",
        keys("find src -name '*.py' | sort\n"),
        keys("find src -type d | sort\n"),
        keys("find src -name '*.py' | wc -l\n"),
        keys("find src -name '*.txt' -exec cat {} +\n"),
        keys("find src -empty\n"),
        files={"/app/src/a.py": "print('a')\n", "/app/src/b.py": "print('b')\n",
               "/app/src/c.txt": "not code\n", "/app/src/lib/d.py": "print('d')\n",
               "/app/src/lib/__init__.py": ""}),
    _ep("files-sizes", "files",
        "Find out which of the two binary files is larger and by how many bytes.",
        keys("ls -S\n"),
        keys("du -b big.bin small.bin\n"),
        keys("stat -c '%n %s bytes' big.bin small.bin\n"),
        keys("echo $(( $(stat -c %s big.bin) - $(stat -c %s small.bin) ))\n"),
        keys("du -sh .\n"),
        setup=("head -c 10000 /dev/zero > big.bin", "head -c 100 /dev/zero > small.bin")),
    _ep("files-permissions", "files",
        "Make deploy.sh executable and confirm its permission bits.",
        keys("touch deploy.sh\n"),
        keys("stat -c '%A %a %n' deploy.sh\n"),
        keys("chmod u+x,g+x deploy.sh\n"),
        keys("stat -c '%A %a %n' deploy.sh\n"),
        keys("test -x deploy.sh && echo executable\n"),
        keys("chmod 600 deploy.sh; stat -c %a deploy.sh\n")),
    _ep("files-symlinks", "files",
        "Point a 'current' symlink at the newest release directory.",
        keys("mkdir -p releases/v1 releases/v2\n"),
        keys("echo v2 > releases/v2/VERSION\n"),
        keys("ln -s releases/v2 current\n"),
        keys("readlink current\n"),
        keys("cat current/VERSION\n"),
        keys("test -L current && echo 'current is a symlink'\n")),
    _ep("files-hidden-and-tab", "files",
        "Inspect the hidden files in /app and print the long-named report using tab completion.",
        keys("ls\n"),
        keys("ls -A\n"),
        keys("cat quar", ("Tab", 0.3), ("\n", 0.3)),
        keys("ls -a | wc -l\n"),
        tags=("tab-completion",),
        files={"/app/.env": "SECRET=hunter2\n", "/app/.gitignore": "*.log\n",
               "/app/quarterly_report_2024.txt": "Q1: 10\nQ2: 12\nQ3: 9\nQ4: 15\n"}),
    _ep("files-long-listing", "files",
        "Look at the long listing of /app after creating a few files.",
        keys("touch a.txt b.txt && mkdir logs\n"),
        keys("ls -l\n"),
        keys("ls -ld logs\n"),
        keys("stat -c '%y' a.txt\n"),
        tags=("volatile",)),
]

# ---------------------------------------------------------------------------------------
# pipes
# ---------------------------------------------------------------------------------------
PIPES = [
    _ep("pipes-word-frequency", "pipes",
        "Find the five most frequent words in poem.txt.",
        keys("wc -l poem.txt\n"),
        keys("wc -w poem.txt\n"),
        keys("tr -s ' ' '\\n' < poem.txt | sort | uniq -c | sort -k1,1nr -k2 | head -5\n"),
        keys("grep -o fox poem.txt | wc -l\n"),
        files={"/app/poem.txt": _POEM}),
    _ep("pipes-log-errors", "pipes",
        "Count the errors in server.log and show only their messages.",
        keys("grep -c ERROR server.log\n"),
        keys("grep ERROR server.log | cut -d' ' -f4-\n"),
        keys("grep -v INFO server.log | wc -l\n"),
        keys("awk '{print $3}' server.log | sort | uniq -c\n"),
        keys("grep -n WARN server.log | cut -d: -f1\n"),
        files={"/app/server.log": _LOG}),
    _ep("pipes-csv-totals", "pipes",
        "Compute total sales and sales per region from sales.csv.",
        keys("head -3 sales.csv\n"),
        keys("cut -d, -f2 sales.csv | tail -n +2 | sort -u\n"),
        keys("awk -F, 'NR>1 {s+=$3} END {print \"total\", s}' sales.csv\n"),
        keys("awk -F, 'NR>1 {t[$2]+=$3} END {for (k in t) print k, t[k]}' sales.csv | sort\n"),
        keys("sort -t, -k3,3nr sales.csv | head -2\n"),
        files={"/app/sales.csv": _SALES}),
    _ep("pipes-sed-config", "pipes",
        "Point config.ini at db.internal and turn debug off.",
        keys("cat config.ini\n"),
        keys("sed 's/localhost/db.internal/' config.ini | head -3\n"),
        keys("sed -i -e 's/localhost/db.internal/' -e 's/debug=true/debug=false/' config.ini\n"),
        keys("grep -E 'host|debug' config.ini\n"),
        keys("sed -n '2,3p' config.ini\n"),
        files={"/app/config.ini": _CONFIG}),
    _ep("pipes-tr-and-friends", "pipes",
        "Transform a few strings with tr, rev and paste.",
        keys("echo 'Hello World' | tr a-z A-Z\n"),
        keys("echo 'a:b:c' | tr ':' '\\n'\n"),
        keys("echo 'stressed' | rev\n"),
        keys("seq 1 10 | paste -sd+ | bc\n"),
        keys("echo 'too    many   spaces' | tr -s ' '\n"),
        keys("echo 'remove digits 123 now 45' | tr -d 0-9\n")),
    _ep("pipes-xargs-touch", "pipes",
        "Create one text file per word with xargs and measure them.",
        keys("seq 1 3 | xargs -n1 echo item\n"),
        keys("mkdir d && echo 'one two three' | xargs -n1 | xargs -I{} touch d/{}.txt\n"),
        keys("ls d\n"),
        keys("ls d | xargs -I{} sh -c 'echo {} > d/{}'\n"),
        keys("find d -type f -name '*.txt' | sort | xargs wc -c\n")),
    _ep("pipes-head-tail", "pipes",
        "Extract the first, last and middle lines of a numbered file.",
        keys("seq 100 > nums.txt\n"),
        keys("head -3 nums.txt\n"),
        keys("tail -3 nums.txt\n"),
        keys("sed -n '50p' nums.txt\n"),
        keys("awk 'NR % 25 == 0' nums.txt | tr '\\n' ' '; echo\n"),
        keys("head -20 nums.txt | tail -2\n")),
    _ep("pipes-sort-uniq", "pipes",
        "Find the duplicated names in names.txt and how often each appears.",
        keys("sort names.txt | uniq -d\n"),
        keys("sort -u names.txt | wc -l\n"),
        keys("sort names.txt | uniq -c | sort -k1,1nr -k2 | head -3\n"),
        keys("sort -r names.txt | uniq | head -2\n"),
        files={"/app/names.txt": _NAMES}),
    _ep("pipes-tee-and-nl", "pipes",
        "Number the lines of the uppercase log levels and save a copy with tee.",
        keys("cut -d' ' -f3 server.log | tee levels.txt | head -3\n"),
        keys("wc -l levels.txt\n"),
        keys("sort levels.txt | uniq | nl\n"),
        keys("grep -c -e WARN -e ERROR levels.txt\n"),
        files={"/app/server.log": _LOG}),
]

# ---------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------
ERRORS = [
    _ep("errors-missing-file", "errors",
        "Try to read a file that does not exist and inspect the exit codes.",
        keys("cat missing.txt\n"),
        keys("echo $?\n"),
        keys("ls nowhere\n"),
        keys("echo \"exit=$?\"\n"),
        keys("cat missing.txt 2>/dev/null || echo 'fallback: no file'\n")),
    _ep("errors-typo-command", "errors",
        "Check the git version, recovering from mistyped commands.",
        keys("gti --version\n"),
        keys("echo $?\n"),
        keys("pyhton3 -V\n"),
        keys("git --version\n"),
        keys("python3 -V\n", duration=0.4),
        tags=("odd-input", "typo")),
    _ep("errors-or-and", "errors",
        "Show how && and || react to success and failure.",
        keys("false || echo recovered\n"),
        keys("true && echo ok\n"),
        keys("false && echo never\n"),
        keys("echo $?\n"),
        keys("(exit 3); echo \"status $?\"\n"),
        keys("! true; echo $?\n")),
    _ep("errors-set-e", "errors",
        "Compare a script with and without set -e when a command fails.",
        keys("bash -c 'echo start; false; echo still running'\n"),
        keys("bash -c 'set -e; echo start; false; echo unreachable'\n"),
        keys("echo $?\n"),
        keys("false | true; echo $?\n"),
        keys("set -o pipefail; false | true; echo $?; set +o pipefail\n")),
    _ep("errors-permission-denied", "errors",
        "Run a script that lacks the execute bit, fix it, and try writing to a read-only place.",
        keys("printf '#!/bin/sh\\necho it works\\n' > run.sh\n"),
        keys("./run.sh\n"),
        keys("echo $?\n"),
        keys("chmod +x run.sh && ./run.sh\n"),
        keys("touch /usr/newfile\n"),
        keys("echo $?\n")),
    _ep("errors-directory-mistakes", "errors",
        "Make the common directory mistakes and read the error messages.",
        keys("mkdir data\n"),
        keys("mkdir data\n"),
        keys("touch data/x && rm data\n"),
        keys("rmdir data\n"),
        keys("cd data/x\n"),
        keys("rm -r data && echo removed\n")),
    _ep("errors-grep-exit-codes", "errors",
        "Learn grep's exit codes for match, no match and error.",
        keys("grep -q port config.ini; echo $?\n"),
        keys("grep -q nosuchword config.ini; echo $?\n"),
        keys("grep port nofile.ini; echo $?\n"),
        keys("test -f config.ini && echo exists || echo absent\n"),
        keys("[ -d config.ini ]; echo $?\n"),
        files={"/app/config.ini": _CONFIG}),
    _ep("errors-bad-syntax", "errors",
        "Type commands with syntax and usage errors and look at the messages.",
        keys("if true; then echo yes fi\n"),
        keys("fi\n"),
        keys("echo $((1 / 0))\n"),
        keys("ls --no-such-flag\n"),
        keys("echo $?\n"),
        tags=("odd-input",)),
]

# ---------------------------------------------------------------------------------------
# shell-state
# ---------------------------------------------------------------------------------------
SHELL_STATE = [
    _ep("shell-cd-prompt", "shell-state",
        "Move around a nested directory tree and watch the prompt follow.",
        keys("mkdir -p a/b/c\n"),
        keys("cd a/b\n"),
        keys("pwd\n"),
        keys("cd c && touch here.txt\n"),
        keys("cd ../..\n"),
        keys("cd ~\n"),
        keys("cd -\n"),
        keys("ls b/c\n")),
    _ep("shell-env-vars", "shell-state",
        "Check which variables a child process can see.",
        keys("export GREETING=hello\n"),
        keys("NAME=world\n"),
        keys("echo \"$GREETING $NAME\"\n"),
        keys("bash -c 'echo \"[$GREETING] [$NAME]\"'\n"),
        keys("unset GREETING\n"),
        keys("echo \"${GREETING:-unset} ${NAME:-unset}\"\n"),
        keys("env | grep -c '^NAME='\n")),
    _ep("shell-alias", "shell-state",
        "Define an ll alias, use it, then remove it.",
        keys("alias ll='ls -A'\n"),
        keys("touch .hidden visible\n"),
        keys("ll\n"),
        keys("alias ll\n"),
        keys("unalias ll\n"),
        keys("ll\n")),
    _ep("shell-functions", "shell-state",
        "Write shell functions and call them in later turns.",
        keys("greet() { echo \"hi, $1\"; }\n"),
        keys("greet Bob\n"),
        keys("count_lines() { wc -l < \"$1\"; }\n"),
        keys("printf 'a\\nb\\nc\\n' > abc.txt\n"),
        keys("count_lines abc.txt\n"),
        keys("type greet\n")),
    _ep("shell-unclosed-quote", "shell-state",
        "Print a two-line message, finishing an unclosed quote on the next turn.",
        keys("echo \"hello\n"),
        keys("world\"\n"),
        keys("echo 'it''s fine'\n"),
        keys("echo 'unfinished\n"),
        keys("still going\n"),
        keys("'\n"),
        tags=("odd-input", "unclosed-quote")),
    _ep("shell-empty-enter-clear", "shell-state",
        "Press Enter on empty prompts, clear the screen, and carry on.",
        keys("\n"),
        keys("\n"),
        keys("echo before clear\n"),
        keys("clear\n"),
        keys("echo after clear\n"),
        keys("   \n"),
        tags=("odd-input", "empty-enter", "clear")),
    _ep("shell-arithmetic-arrays", "shell-state",
        "Keep a counter and an array in shell variables across turns.",
        keys("x=5\n"),
        keys("x=$((x * 2)); echo $x\n"),
        keys("arr=(alpha beta gamma)\n"),
        keys("echo ${#arr[@]} ${arr[1]}\n"),
        keys("arr+=(delta); echo \"${arr[@]}\"\n"),
        keys("for v in \"${arr[@]}\"; do echo ${#v}; done | paste -sd,\n")),
    _ep("shell-pushd-popd", "shell-state",
        "Visit /tmp and /root with pushd and come back with popd.",
        keys("pushd /tmp\n"),
        keys("pushd /root\n"),
        keys("dirs -v\n"),
        keys("popd\n"),
        keys("popd\n"),
        keys("pwd\n")),
    _ep("shell-path-script", "shell-state",
        "Install a small command into ~/bin and call it by name.",
        keys("mkdir -p ~/bin\n"),
        keys("printf '#!/bin/sh\\necho \"hello from $0\"\\n' > ~/bin/hello"
             " && chmod +x ~/bin/hello\n"),
        keys("hello\n"),
        keys("export PATH=\"$HOME/bin:$PATH\"\n"),
        keys("hello\n"),
        keys("command -v hello\n")),
    _ep("shell-read-input", "shell-state",
        "Read a name interactively and greet it.",
        keys("read -p 'Name: ' name\n"),
        keys("Ada\n"),
        keys("echo \"Hello, $name\"\n"),
        keys("echo ${#name}\n")),
    _ep("shell-history-up", "shell-state",
        "Recall and re-run the previous command with the Up arrow.",
        keys("echo first run\n"),
        keys(("Up", 0.2), ("\n", 0.3)),
        keys("echo second\n"),
        keys(("Up", 0.2), ("Up", 0.2), ("\n", 0.3)),
        tags=("odd-input",)),
    _ep("shell-pid-and-date", "shell-state",
        "Print the shell's PID, the current date and a temporary file name.",
        keys("echo $$\n"),
        keys("date\n"),
        keys("f=$(mktemp)\n"),
        keys("echo $f\n"),
        keys("test -f \"$f\" && echo created\n"),
        tags=("volatile",)),
]

# ---------------------------------------------------------------------------------------
# heredoc
# ---------------------------------------------------------------------------------------
HEREDOC = [
    _ep("heredoc-config-file", "heredoc",
        "Write app.conf with a here-document and read the port back.",
        keys("cat <<'EOF' > app.conf\nname=demo\nport=8080\nworkers=4\nEOF\n"),
        keys("cat app.conf\n"),
        keys("grep port app.conf | cut -d= -f2\n"),
        keys("wc -l app.conf\n")),
    _ep("heredoc-shell-script", "heredoc",
        "Write a greeting script with a here-document and run it.",
        keys("cat <<'EOF' > greet.sh\n#!/bin/bash\nfor n in \"$@\"; do\n"
             "  echo \"Hello, $n\"\ndone\nEOF\n"),
        keys("chmod +x greet.sh\n"),
        keys("./greet.sh Ann Bo\n"),
        keys("head -1 greet.sh\n"),
        keys("bash greet.sh\n")),
    _ep("heredoc-expansion", "heredoc",
        "Compare an unquoted and a quoted here-document delimiter.",
        keys("NAME=lwm\n"),
        keys("cat <<EOF\nproject: $NAME\nsum: $((2 + 3))\nEOF\n"),
        keys("cat <<'EOF'\nproject: $NAME\nsum: $((2 + 3))\nEOF\n"),
        keys("cat <<EOF | tr a-z A-Z\nshout $NAME\nEOF\n")),
    _ep("heredoc-python-stats", "heredoc",
        "Write a Python statistics script with a here-document and feed it numbers.",
        keys("cat <<'EOF' > stats.py\nimport sys\nnums = [int(x) for x in sys.stdin]\n"
             "print('n', len(nums))\nprint('sum', sum(nums))\n"
             "print('mean', sum(nums) / len(nums))\nEOF\n"),
        keys("seq 1 10 | python3 stats.py\n", duration=PY_WAIT),
        keys("printf '4\\n8\\n' | python3 stats.py\n", duration=PY_WAIT),
        keys("wc -l stats.py\n")),
    _ep("heredoc-append-list", "heredoc",
        "Build a shopping list with two appending here-documents and sort it.",
        keys("cat <<'EOF' >> list.txt\nmilk\neggs\nEOF\n"),
        keys("cat <<'EOF' >> list.txt\nbread\napples\nEOF\n"),
        keys("wc -l list.txt\n"),
        keys("sort list.txt\n")),
    _ep("heredoc-csv-table", "heredoc",
        "Write a small CSV table with a here-document and query it with awk.",
        keys("cat > people.csv <<'END'\nname,age\nann,31\nbob,27\ncy,45\nEND\n"),
        keys("awk -F, 'NR>1 && $2 > 30 {print $1}' people.csv\n"),
        keys("awk -F, 'NR>1 {s+=$2} END {print s/(NR-1)}' people.csv\n"),
        keys("column -t -s, people.csv\n")),
]

# ---------------------------------------------------------------------------------------
# python
# ---------------------------------------------------------------------------------------
PYTHON = [
    _ep("python-one-liners", "python",
        "Use Python one-liners as a calculator.",
        keys("python3 -c 'print(2 ** 100)'\n", duration=PY_WAIT),
        keys("python3 -c 'print(sum(range(101)))'\n", duration=PY_WAIT),
        keys("python3 -c 'import math; print(round(math.pi, 5))'\n", duration=PY_WAIT),
        keys("python3 -c \"print('-'.join(['a', 'b', 'c']))\"\n", duration=PY_WAIT)),
    _ep("python-json-inventory", "python",
        "Inspect data.json with Python and total the stock value.",
        keys("python3 -m json.tool data.json | head -8\n", duration=PY_WAIT),
        keys("python3 -c 'import json; d = json.load(open(\"data.json\"));"
             " print(len(d[\"items\"]))'\n",
             duration=PY_WAIT),
        keys("python3 -c 'import json; d = json.load(open(\"data.json\")); "
             "print(sum(i[\"qty\"] * i[\"price\"] for i in d[\"items\"]))'\n", duration=PY_WAIT),
        keys("python3 -c 'import json; print([i[\"sku\"] for i in json.load(open(\"data.json\"))"
             "[\"items\"] if i[\"qty\"] == 0])'\n", duration=PY_WAIT),
        files={"/app/data.json": _DATA_JSON}),
    _ep("python-tracebacks", "python",
        "Trigger a Python exception and a missing module and read the exit codes.",
        keys("python3 -c '1 / 0'\n", duration=PY_WAIT),
        keys("echo $?\n"),
        keys("python3 -c 'import nosuchmodule'\n", duration=PY_WAIT),
        keys("python3 -c 'import sys; sys.exit(7)'; echo $?\n", duration=PY_WAIT)),
    _ep("python-stdin-filters", "python",
        "Use Python as a filter on piped input.",
        keys("printf '3\\n1\\n2\\n' | python3 -c"
             " 'import sys; print(sorted(map(int, sys.stdin)))'\n",
             duration=PY_WAIT),
        keys("echo 'hello world' | python3 -c"
             " 'import sys; print(sys.stdin.read().title(), end=\"\")'\n",
             duration=PY_WAIT),
        keys("seq 5 | python3 -c 'import sys; print(sum(int(l) ** 2 for l in sys.stdin))'\n",
             duration=PY_WAIT),
        keys("python3 -c 'import sys; print(sys.stdin.isatty())'\n", duration=PY_WAIT)),
    _ep("python-repl", "python",
        "Do a little arithmetic in the interactive Python interpreter and leave it.",
        keys("python3\n", duration=0.8),
        keys("1 + 1\n"),
        keys("xs = [3, 1, 2]\n"),
        keys("sorted(xs)\n"),
        keys("for x in xs:\n    print(x * 10)\n\n", duration=0.4),
        keys("exit()\n", duration=0.5),
        keys("echo back in bash\n")),
    _ep("python-argparse-script", "python",
        "Run calc.py with good and bad arguments.",
        keys("python3 calc.py 3 4\n", duration=PY_WAIT),
        keys("python3 calc.py --help\n", duration=PY_WAIT),
        keys("python3 calc.py three 4\n", duration=PY_WAIT),
        keys("echo $?\n"),
        files={"/app/calc.py": _CALC_PY}),
    _ep("python-write-then-run", "python",
        "Fix the greeting script so it greets the user by name from the command line.",
        keys("python3 greet.py\n", duration=PY_WAIT),
        keys("sed -i 's/greet(\"world\")/greet(__import__(\"sys\").argv[1])/' greet.py\n"),
        keys("tail -1 greet.py\n"),
        keys("python3 greet.py Ada\n", duration=PY_WAIT),
        keys("python3 greet.py\n", duration=PY_WAIT),
        files={"/app/greet.py": _GREET_PY}),
    _ep("python-random-values", "python",
        "Generate a random UUID and a random number with Python.",
        keys("python3 -c 'import uuid; print(uuid.uuid4())'\n", duration=PY_WAIT),
        keys("python3 -c 'import random; print(random.randint(1, 1000))'\n", duration=PY_WAIT),
        keys("python3 -c 'import os; print(os.getpid())'\n", duration=PY_WAIT),
        keys("python3 -c 'import random; random.seed(1); print(random.randint(1, 1000))'\n",
             duration=PY_WAIT),
        tags=("volatile",)),
]

# ---------------------------------------------------------------------------------------
# long-running
# ---------------------------------------------------------------------------------------
LONG_RUNNING = [
    _ep("long-ticks", "long-running",
        "Run a loop that prints a tick every second and watch it finish.",
        keys(("for i in 1 2 3; do echo tick $i; sleep 1; done\n", 0.5)),
        keys(("", 1.0)),
        keys(("", 1.0)),
        keys(("", 1.0)),
        keys("echo loop done\n")),
    _ep("long-sleep-then-echo", "long-running",
        "Wait for a two-second job to print its result.",
        keys("sleep 2; echo finished\n", duration=0.5),
        keys(("", 1.0)),
        keys(("", 1.0)),
        keys("echo next\n")),
    _ep("long-progress-steps", "long-running",
        "Follow a five-step job that prints progress every half second.",
        keys("for i in $(seq 1 5); do echo \"step $i/5\"; sleep 0.5; done; echo all steps done\n",
             duration=0.25),
        keys(("", 1.0)),
        keys(("", 1.5)),
        keys("wc -c < /dev/null\n")),
    _ep("long-timeout", "long-running",
        "Run a slow command under timeout and check the exit status.",
        keys("timeout 1 sleep 5\n", duration=0.4),
        keys(("", 1.0)),
        keys("echo $?\n"),
        keys("timeout 3 sleep 1 && echo 'finished in time'\n", duration=0.4),
        keys(("", 1.0))),
    _ep("long-background-job", "long-running",
        "Start a background job, keep working, and notice when it finishes.",
        keys("(sleep 2; echo bg-done) &\n"),
        keys("jobs\n"),
        keys("echo working meanwhile\n"),
        keys(("", 2.0)),
        keys("\n"),
        keys("jobs\n")),
    _ep("long-time-sleep", "long-running",
        "Measure how long a one-second sleep really takes.",
        keys("time sleep 1\n", duration=0.4),
        keys(("", 1.0)),
        keys("time (seq 100000 | wc -l)\n", duration=0.5),
        keys("echo $?\n"),
        tags=("volatile",)),
    _ep("long-python-chunks", "long-running",
        "Watch a Python program print chunks of output over three seconds.",
        keys("python3 -u -c 'import time\nfor i in range(3):\n"
             "    print(\"chunk\", i)\n    time.sleep(1)'\n",
             duration=PY_WAIT),
        keys(("", 1.0)),
        keys(("", 1.0)),
        keys(("", 1.0)),
        keys("echo $?\n")),
    _ep("long-build-log", "long-running",
        "Run a fake build that writes to a log file and follow the log as it grows.",
        keys("(for s in compile link test; do sleep 1; echo \"$s ok\" >> build.log; done) &\n"),
        keys(("", 1.0)),
        keys("cat build.log\n"),
        keys(("", 2.0)),
        keys("cat build.log\n")),
]

# ---------------------------------------------------------------------------------------
# ctrl-c
# ---------------------------------------------------------------------------------------
CTRL_C = [
    _ep("ctrlc-sleep", "ctrl-c",
        "Start a long sleep, interrupt it and check the exit status.",
        keys("sleep 100\n"),
        keys(("", 0.5)),
        keys("C-c"),
        keys("echo $?\n")),
    _ep("ctrlc-infinite-loop", "ctrl-c",
        "Stop an endless loop with Ctrl-C and continue working.",
        keys("while true; do echo spinning; sleep 1; done\n", duration=0.4),
        keys(("", 1.2)),
        keys("C-c"),
        keys("echo stopped\n")),
    _ep("ctrlc-tail-follow", "ctrl-c",
        "Follow app.log with tail -f, then stop following.",
        keys("tail -f app.log\n"),
        keys(("", 0.5)),
        keys("C-c"),
        keys("wc -l app.log\n"),
        files={"/app/app.log": "boot\nready\nlistening on :80\n"}),
    _ep("ctrlc-cat-stdin", "ctrl-c",
        "Type a note into cat, end it with Ctrl-D, then abandon a second cat with Ctrl-C.",
        keys("cat > note.txt\n"),
        keys("first line\n"),
        keys("second line\n"),
        keys("C-d"),
        keys("cat note.txt\n"),
        keys("cat\n"),
        keys("C-c"),
        tags=("ctrl-d",)),
    _ep("ctrlc-abandon-line", "ctrl-c",
        "Abandon a half-typed command with Ctrl-C and run a different one.",
        keys("echo this will never run"),
        keys("C-c"),
        keys("echo fresh line\n"),
        keys("rm -rf important", ("C-c", 0.3)),
        keys("ls\n"),
        tags=("odd-input",)),
    _ep("ctrlc-python", "ctrl-c",
        "Interrupt a sleeping Python program and read the traceback.",
        keys("python3 -c 'import time; time.sleep(100)'\n", duration=PY_WAIT),
        keys(("", 0.5)),
        keys("C-c", duration=0.4),
        keys("echo $?\n")),
    _ep("ctrlc-yes-pipeline", "ctrl-c",
        "Interrupt a pipeline that would run forever, after letting it count.",
        keys("yes | head -3\n"),
        keys("while :; do sleep 1; done | cat\n"),
        keys(("", 0.5)),
        keys("C-c"),
        keys("echo ${PIPESTATUS[@]} done\n")),
]

# ---------------------------------------------------------------------------------------
# git
# ---------------------------------------------------------------------------------------
GIT = [
    _ep("git-first-commit", "git",
        "Create a repository, set the author identity and make the first commit.",
        keys("git init -q -b main\n"),
        keys("git config user.name 'Ada Lovelace'\n"),
        keys("git config user.email ada@example.com\n"),
        keys("echo '# Demo' > README.md\n"),
        keys("git add README.md\n"),
        keys("git commit -m 'Initial commit'\n", duration=GIT_WAIT),
        keys("git log --oneline\n"),
        setup=_GIT_DATES),
    _ep("git-init-hint", "git",
        "Initialise a repository with default settings and check its status.",
        keys("git init\n", duration=GIT_WAIT),
        keys("git status\n"),
        keys("ls -A\n"),
        keys("git branch --show-current\n"),
        setup=_GIT_ID),
    _ep("git-status-diff", "git",
        "Change README.md, review the diff, and commit the change.",
        keys("git status -s\n"),
        keys("echo 'More text.' >> README.md\n"),
        keys("git status\n"),
        keys("git diff\n"),
        keys("git commit -am 'Extend README'\n", duration=GIT_WAIT),
        keys("git log --oneline\n"),
        files=_README, setup=_GIT_REPO),
    _ep("git-feature-branch", "git",
        "Do some work on a feature branch and compare it with main.",
        keys("git checkout -b feature\n"),
        keys("echo 'def f(): pass' > feature.py\n"),
        keys("git add feature.py && git commit -q -m 'Add feature'\n", duration=GIT_WAIT),
        keys("git branch\n"),
        keys("git checkout main\n"),
        keys("ls\n"),
        keys("git log --oneline --all\n"),
        files=_README, setup=_GIT_REPO),
    _ep("git-gitignore", "git",
        "Ignore log files in the repository and check what git still sees.",
        keys("touch debug.log notes.txt\n"),
        keys("git status -s\n"),
        keys("echo '*.log' > .gitignore\n"),
        keys("git status -s\n"),
        keys("git check-ignore -v debug.log\n"),
        keys("git add . && git status -s\n"),
        files=_README, setup=_GIT_REPO),
    _ep("git-merge-ff", "git",
        "Merge a feature branch into main with a fast-forward.",
        keys("git switch -c hotfix\n"),
        keys("echo fixed > fix.txt && git add fix.txt && git commit -q -m 'Fix bug'\n",
             duration=GIT_WAIT),
        keys("git switch main\n"),
        keys("git merge hotfix\n", duration=GIT_WAIT),
        keys("git log --oneline\n"),
        keys("git branch -d hotfix\n"),
        files=_README, setup=_GIT_REPO),
    _ep("git-commit-today", "git",
        "Commit a file with the current date and look at the commit's date and hash.",
        keys("git init -q && echo hello > hello.txt\n"),
        keys("git add hello.txt && git commit -m 'Say hello'\n", duration=GIT_WAIT),
        keys("git log -1 --format='%h %an <%ae>'\n"),
        keys("git log -1 --date=iso --format=%ad\n"),
        keys("git show --stat --oneline HEAD\n"),
        tags=("volatile",),
        setup=(*_GIT_WHO, *_GIT_BRANCH)),
    _ep("git-errors", "git",
        "Hit git's common errors outside and inside a new repository.",
        keys("git status\n"),
        keys("git init -q && git log\n"),
        keys("git commit -m 'empty'\n"),
        keys("git checkout nosuchbranch\n"),
        keys("git add nosuchfile\n"),
        setup=_GIT_MAIN),
    _ep("git-restore-file", "git",
        "Accidentally overwrite README.md and restore it from the last commit.",
        keys("echo oops > README.md\n"),
        keys("git diff --stat\n"),
        keys("git restore README.md\n"),
        keys("cat README.md\n"),
        keys("git status -s | wc -l\n"),
        files=_README, setup=_GIT_REPO),
]

#: Real verifiers: a shell command run beside the agent's shell after the last turn, and
#: what its output must show. "files-permissions" and "python-write-then-run" end with
#: their task undone (the last actions undo or never finish it): their reward is 0.
CHECKS = {
    "files-project-skeleton": Check("find project -type f | wc -l", "3", "equals"),
    "files-backup-and-archive": Check("cmp notes.txt archive/notes.bak && echo same", "same", "equals"),
    "files-clean-build": Check("test -e build && echo present || echo gone", "gone", "equals"),
    "files-permissions": Check("test -x deploy.sh && echo yes || echo no", "yes", "equals"),
    "files-symlinks": Check("readlink current", "releases/v2", "equals"),
    "pipes-sed-config": Check("grep -E '^(host|debug)=' config.ini", "host=db.internal\ndebug=false", "regex"),
    "heredoc-config-file": Check("grep -c = app.conf", "3", "equals"),
    "heredoc-shell-script": Check("./greet.sh Ada", "Hello, Ada", "equals"),
    "python-write-then-run": Check("python3 greet.py 2>&1; echo exit=$?", "exit=0"),
    "git-first-commit": Check("git log --format='%an %s'", "Ada Lovelace Initial commit", "equals"),
    "git-feature-branch": Check("git log --format=%s feature -1 && git branch --show-current",
                                "Add feature\nmain", "regex"),
    "git-status-diff": Check("git log --format=%s -1 && git status --porcelain | wc -l",
                             "Extend README\n0", "equals"),
    "errors-permission-denied": Check("./run.sh", "it works", "equals"),
    "git-restore-file": Check("git status --porcelain | wc -l", "0", "equals"),
}

#: A seeded exploratory policy's vocabulary: ordinary commands, mistakes and odd input.
_RANDOM_ACTIONS = (
    "ls\n", "ls -la /app\n", "pwd\n", "echo $?\n", "cd /tmp\n", "cd ..\n", "cd /nonexistent\n",
    "cat missing.txt\n", "mkdir -p d/e && touch d/e/f\n", "find . -maxdepth 2 | sort\n",
    "echo 'héllo wörld ✓'\n", "printf '%s\\n' a b c | sort -r\n", "wc -c /etc/hostname\n",
    "sl\n", "grep\n", "ls --bogus-flag\n", "echo 'unclosed\n", "python3 -c 'print(1/0)'\n",
    "python3 -c 'print(sum(range(10)))'\n", "seq 1 40\n", "true && echo ok || echo no\n",
    "false; echo $?\n", "export X=$RANDOM_UNSET; echo [$X]\n", "\n", "   \n", "history | tail -3\n",
    "echo $((7 * 6))\n", "date +%Y >/dev/null; echo done\n", "yes | head -3\n", "uname -s\n",
)
_RANDOM_KEYS = ("C-c", "C-d", "Up", "Tab", "C-l")


def random_scripts(seed: int, n: int) -> list[Script]:
    """``n`` episodes of a seeded exploratory policy: 4–7 random actions each (commands,
    typos, unclosed quotes, key presses such as ``C-c``, empty waits). Open-loop and
    deterministic: the same seed gives the same actions."""
    rng = random.Random(seed)
    episodes = []
    for i in range(n):
        actions = []
        for _ in range(rng.randint(4, 7)):
            roll = rng.random()
            if roll < 0.75:
                actions.append(keys(rng.choice(_RANDOM_ACTIONS)))
            elif roll < 0.9:
                actions.append(keys(rng.choice(_RANDOM_KEYS)))
            else:
                actions.append(keys(("", round(rng.uniform(0.1, 0.6), 1))))
        episodes.append(_ep(f"random-{seed}-{i}", "random", "", *actions, tags=("random-policy",),
                            files={"/app/notes.txt": "one\ntwo\n"}))
    return episodes


RANDOM = random_scripts(seed=0, n=8)

#: Seeded exploration episodes beyond the suite (``lwm collect --explore``).
explore = explore_scripts

#: The whole suite, family by family.
SCRIPTS: list[Script] = [
    dataclasses.replace(e, task=dataclasses.replace(e.task, check=CHECKS.get(e.task.name)))
    for e in (*FILES, *PIPES, *ERRORS, *SHELL_STATE, *HEREDOC, *PYTHON, *LONG_RUNNING, *CTRL_C, *GIT, *RANDOM)
]
assert CHECKS.keys() <= {e.task.name for e in SCRIPTS}, "a check names an unknown episode"

#: Episodes left out of the default (core) suite, so that ``lwm eval`` with the embedded
#: model fits in 15 minutes on 2 cores; ``--extended`` plays them too (more training data).
EXTENDED = frozenset({
    "files-clean-build", "files-sizes", "files-symlinks",
    "pipes-sort-uniq", "pipes-tee-and-nl", "pipes-xargs-touch",
    "errors-directory-mistakes", "errors-grep-exit-codes",
    "shell-alias", "shell-arithmetic-arrays", "shell-pushd-popd", "shell-path-script", "shell-read-input",
    "shell-functions",
    "heredoc-append-list", "heredoc-csv-table",
    "python-stdin-filters", "python-argparse-script", "python-write-then-run",
    "long-progress-steps", "long-python-chunks", "long-build-log",
    "ctrlc-tail-follow", "ctrlc-yes-pipeline",
    "git-merge-ff", "git-restore-file", "git-init-hint", "git-gitignore",
    *(e.task.name for e in RANDOM[3:]),
})
