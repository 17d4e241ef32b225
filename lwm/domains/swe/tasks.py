"""Software-engineering task families: a coding agent's tool calls on a small seeded git
repository in ``/app/repo`` (committed before the episode, ``GIT_INIT_SETUP``).

Verifiers are ``bash`` tool calls on the final state. Test-based checks first require the
test file to be unchanged from the first commit (``git diff --quiet``, so committing the
change does not hide it): editing or deleting a test to make it pass fails the check. A
failing command shows ``Exit code N`` first, so it never equals the expected output.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from lwm.domains.swe.env import GIT_INIT_SETUP
from lwm.domains.swe.spec import format_action as call
from lwm.domains.tasks import WORDS, TaskFamily
from lwm.envs.base import Check, Task

DOMAIN = "swe"
R = "/app/repo"
_MODULES = ("mathx", "calc", "numbers_util", "arith", "ops")


def _task(family: str, instruction: str, check: Check, files: dict[str, str]) -> Task:
    return Task(name=family, family=family, instruction=instruction, check=check,
                files={f"{R}/{path}": text for path, text in files.items()}, setup=GIT_INIT_SETUP)


def _sh(command: str) -> str:
    return call("bash", command=command)


def _fix(module: str, doc: str, bad: str, good: str) -> str:
    """The edit that fixes the buggy line (with its docstring: another function may return ``bad`` rightly)."""
    line = f'    """Return {doc}."""\n    return '
    return call("edit", file_path=f"{R}/{module}.py", old_string=f"{line}{bad}\n", new_string=f"{line}{good}\n")


def _unchanged(path: str) -> str:
    """A command that fails when ``path`` differs from the first commit (committed changes included)."""
    return f"git diff --quiet $(git rev-list --max-parents=0 HEAD) -- {path}"


def _tests_pass(test_file: str) -> Check:
    return Check(_sh(f"cd {R} && {_unchanged(test_file)} && python3 -m unittest -q 2>&1 | tail -1"), "OK", "equals")


# (function name, doc, correct expression, buggy expression, ((args, result), …))
_BINARY = (
    ("add", "the sum of a and b", "a + b", "a - b", (((2, 3), 5), ((10, -4), 6))),
    ("sub", "a minus b", "a - b", "b - a", (((9, 4), 5), ((1, 6), -5))),
    ("mul", "the product of a and b", "a * b", "a + b", (((4, 5), 20), ((3, 3), 9))),
    ("biggest", "the larger of a and b", "max(a, b)", "min(a, b)", (((2, 7), 7), ((9, 1), 9))),
    ("avg", "the mean of a and b", "(a + b) / 2", "a + b / 2", (((2, 4), 3.0), ((1, 2), 1.5))),
)


def _binary_repo(rng: random.Random) -> tuple[str, tuple, dict[str, str]]:
    module = rng.choice(_MODULES)
    funcs = rng.sample(_BINARY, 3)
    target = rng.choice(funcs)
    body = "".join(f'def {n}(a, b):\n    """Return {doc}."""\n    return {bad if n == target[0] else good}\n\n\n'
                   for n, doc, good, bad, _ in funcs).rstrip("\n") + "\n"
    tests = "".join(f"    def test_{n}(self):\n" + "".join(f"        self.assertEqual({n}{args}, {res!r})\n"
                                                            for args, res in cases) + "\n"
                    for n, _, _, _, cases in funcs)
    names = ", ".join(sorted(n for n, *_ in funcs))
    test = (f"import unittest\n\nfrom {module} import {names}\n\n\nclass {module.title().replace('_', '')}Test"
            f"(unittest.TestCase):\n{tests}\nif __name__ == '__main__':\n    unittest.main()\n")
    return module, target, {".gitignore": "__pycache__/\n", f"{module}.py": body, f"test_{module}.py": test}


def fix_operator(rng: random.Random):
    module, (name, doc, good, bad, _), files = _binary_repo(rng)
    return (_task("fix-operator", f"In {R}/{module}.py the function {name}(a, b) should return {doc} but returns "
                  f"{bad}. Fix it so that the tests in test_{module}.py pass (do not change the tests).",
                  _tests_pass(f"test_{module}.py"), files),
            (_fix(module, doc, bad, good),))


def find_bug(rng: random.Random):
    module, (name, doc, good, bad, _), files = _binary_repo(rng)
    return (_task("find-bug", f"One function in {R}/{module}.py is wrong and its test in test_{module}.py fails. "
                  "Find the bug and fix it (do not change the tests).", _tests_pass(f"test_{module}.py"), files),
            (_sh("python3 -m unittest -q 2>&1 | tail -5"), call("read", file_path=f"{R}/{module}.py"),
             _fix(module, doc, bad, good)))


def fix_and_commit(rng: random.Random):
    module, (name, doc, good, bad, _), files = _binary_repo(rng)
    message = f"Fix {name}"
    probe = (f"cd {R} && {_unchanged(f'test_{module}.py')} && git log -1 --format=%s && "
             "git status --porcelain | wc -l && python3 -m unittest -q 2>&1 | tail -1")
    return (_task("fix-and-commit", f"In {R}/{module}.py the function {name}(a, b) should return {doc} but returns "
                  f"{bad}. Fix it, check that the tests pass, and commit the fix with the message '{message}'.",
                  Check(_sh(probe), f"{message}\n0\nOK", "equals"), files),
            (_fix(module, doc, bad, good),
             _sh("python3 -m unittest -q 2>&1 | tail -1"),
             _sh(f"git commit -q -am '{message}'")))


def edit_constant(rng: random.Random):
    consts = {"TIMEOUT": rng.choice((10, 20, 30)), "RETRIES": rng.randint(1, 5), "PORT": rng.randrange(8000, 9000)}
    key = rng.choice(sorted(consts))
    new = consts[key] + rng.randint(1, 50)
    text = "".join(f"{k} = {v}\n" for k, v in consts.items())
    after = {**consts, key: new}
    probe = f"cd {R} && python3 -c 'import settings as s; print(s.TIMEOUT, s.RETRIES, s.PORT)'"
    return (_task("edit-constant", f"In {R}/settings.py change {key} from {consts[key]} to {new}.",
                  Check(_sh(probe), f"{after['TIMEOUT']} {after['RETRIES']} {after['PORT']}", "equals"),
                  {"settings.py": text}),
            (call("edit", file_path=f"{R}/settings.py", old_string=f"{key} = {consts[key]}\n",
                  new_string=f"{key} = {new}\n"),))


def add_function(rng: random.Random):
    name = rng.choice(("triple", "scaled", "times_k", "boost", "grow", "stretch", "enlarge", "amplify"))
    k = rng.randint(2, 20)
    text = 'def identity(x):\n    """Return x unchanged."""\n    return x\n'
    probe = f"cd {R} && python3 -c 'from util import {name}, identity; print({name}(3), {name}(-2), identity(7))'"
    return (_task("add-function", f"Add to {R}/util.py a function named {name} that takes one number x and returns "
                  f"x multiplied by {k} (keep the existing function).",
                  Check(_sh(probe), f"{3 * k} {-2 * k} 7", "equals"), {"util.py": text}),
            (call("edit", file_path=f"{R}/util.py", old_string="    return x\n",
                  new_string=f"    return x\n\n\ndef {name}(x):\n    return x * {k}\n"),))


def commit_file(rng: random.Random):
    word, name = rng.choice(WORDS), rng.choice(("NOTES", "TODO", "CHANGES")) + ".md"
    line = f"{rng.choice(('Remember', 'Buy', 'Water', 'Paint', 'Feed'))} the {word}"
    message = f"Add {name}"
    probe = f"cd {R} && git log -1 --format=%s && git show HEAD:{name} && git status --porcelain | wc -l"
    return (_task("commit-file", f"Create the file {R}/{name} containing the line '{line}' and commit it with the "
                  f"message '{message}'.", Check(_sh(probe), f"{message}\n{line}\n0", "equals"),
                  {"README.md": "# demo\n"}),
            (call("write", file_path=f"{R}/{name}", content=line + "\n"),
             _sh(f"git add {name} && git commit -q -m '{message}'")))


def rename_function(rng: random.Random):
    old, new = rng.sample(("greet", "welcome", "salute", "hail", "hello"), 2)
    word = rng.choice(WORDS)
    lib = f'def {old}(name):\n    return "hi " + name\n'
    main = f"from lib import {old}\n\nprint({old}('{word}'))\n"
    probe = (f"cd {R} && python3 -c 'import lib; print(hasattr(lib, \"{old}\"), hasattr(lib, \"{new}\"))' "
             "&& python3 main.py")
    return (_task("rename-function", f"Rename the function {old} in {R}/lib.py to {new}, and update {R}/main.py, "
                  "which uses it, so that it still runs.",
                  Check(_sh(probe), f"False True\nhi {word}", "equals"), {"lib.py": lib, "main.py": main}),
            (call("edit", file_path=f"{R}/lib.py", old_string=f"def {old}(", new_string=f"def {new}("),
             call("edit", file_path=f"{R}/main.py", old_string=old, new_string=new, replace_all=True)))


FAMILIES = [
    TaskFamily("fix-operator", DOMAIN, 1, "fix a named function's wrong expression", fix_operator),
    TaskFamily("edit-constant", DOMAIN, 1, "change a constant's value", edit_constant),
    TaskFamily("add-function", DOMAIN, 1, "add a small function to a module", add_function),
    TaskFamily("commit-file", DOMAIN, 2, "write a file and commit it", commit_file),
    TaskFamily("rename-function", DOMAIN, 2, "rename a function and its caller", rename_function),
    TaskFamily("find-bug", DOMAIN, 3, "find and fix the function that fails its test", find_bug),
    TaskFamily("fix-and-commit", DOMAIN, 3, "fix a function, run the tests, commit", fix_and_commit),
]
#: Held-out families: one easy, one multi-step.
HELD_OUT = ("edit-constant", "fix-and-commit")


def _args(action: str) -> dict:
    return json.loads(action)["arguments"]


def _first(task: Task, solution: tuple[str, ...]) -> tuple[str, ...]:
    return solution[:1]


#: Plausible wrong attempts the real verifier must fail (printing instead of writing, a wrong value, a step left out).
WRONG: dict[str, Callable[[Task, tuple[str, ...]], tuple[str, ...]]] = {
    "fix-operator": lambda t, s: (call("bash", command="rm -f test_*.py"),),
    "find-bug": lambda t, s: (call("bash", command="git rm -q test_*.py && git commit -qm tidy"),),
    "fix-and-commit": lambda t, s: s[:2],
    "edit-constant": lambda t, s: (call("write", file_path=_args(s[0])["file_path"],
                                             content=_args(s[0])["new_string"]),),
    "add-function": lambda t, s: (call("write", file_path=_args(s[0])["file_path"],
                                            content=_args(s[0])["new_string"].split("\n\n\n")[1]),),
    "commit-file": _first,
    "rename-function": _first,
}
