"""Code task families: cells of Python in a persistent interpreter (working directory ``/app``).

Verifiers are probe cells run in the same namespace after the last turn (``CodeEnv.probe``:
what they print, then any traceback). A probe inspects a variable, a function or a file the
agent had to make, and prints its ``repr`` where the type matters: printing the answer to
the screen does not set a variable, so it cannot pass. The probe never prints the expected
text when the name it reads is missing (a ``NameError`` traceback quotes only the name).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

from lwm.domains.tasks import NAMES, WORDS, TaskFamily
from lwm.envs.base import Check, Task

DOMAIN = "code"


def _task(family: str, instruction: str, probe: str, expect: str, files: dict[str, str] | None = None,
          setup: tuple[str, ...] = ()) -> Task:
    return Task(name=family, family=family, instruction=instruction, files=dict(files or {}), setup=setup,
                check=Check(probe, expect, "equals"))


def sum_variable(rng: random.Random):
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    name = rng.choice(("total", "result", "answer", "s"))
    return (_task("sum-variable", f"Compute the sum of {a} and {b} and store it in a variable named {name}.",
                  f"print(repr({name}))", str(a + b)),
            (f"{name} = {a} + {b}",))


def upper_variable(rng: random.Random):
    word = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
    name = rng.choice(("loud", "shout", "big", "caps"))
    return (_task("upper-variable", f"Store the text '{word}' in upper case (all capital letters) in a variable "
                  f"named {name}.", f"print(repr({name}))", repr(word.upper())),
            (f"{name} = '{word}'.upper()",))


def define_function(rng: random.Random):
    k = rng.randint(2, 25)
    name = rng.choice(("scale", "times", "mult", "grow", "enlarge", "stretch", "boost", "magnify"))
    return (_task("define-function", f"Define a function named {name} that takes one number and returns that "
                  f"number multiplied by {k}.", f"print({name}(3), {name}(10), {name}(-1))", f"{3 * k} {10 * k} {-k}"),
            (f"def {name}(x):\n    return x * {k}",))


def write_file(rng: random.Random):
    text = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randint(1, 99)}"
    name = rng.choice(("out", "result", "message", "note")) + ".txt"
    return (_task("write-file", f"Write the text '{text}' into a new file /app/{name}.",
                  f"print(repr(open('/app/{name}').read().strip()))", repr(text)),
            (f"with open('/app/{name}', 'w') as f:\n    f.write('{text}')",))


def squares_list(rng: random.Random):
    low = rng.randint(1, 6)
    high = low + rng.randint(2, 10)
    name = rng.choice(("squares", "values", "nums", "result"))
    return (_task("squares-list", f"Make a list named {name} holding the squares of the whole numbers from {low} to "
                  f"{high} ({low} and {high} included), in increasing order.",
                  f"print(repr({name}))", repr([i * i for i in range(low, high + 1)])),
            (f"{name} = [i * i for i in range({low}, {high + 1})]",))


def filter_evens(rng: random.Random):
    numbers = [rng.randint(1, 99) for _ in range(rng.randint(6, 10))]
    numbers[0] += numbers[0] % 2  # at least one even number
    return (_task("filter-evens", "A list named numbers is already defined. Make a new list named evens holding "
                  "the even numbers of numbers, in the same order.", "print(repr(evens))",
                  repr([x for x in numbers if x % 2 == 0]), setup=(f"numbers = {numbers!r}",)),
            ("evens = [x for x in numbers if x % 2 == 0]",))


def dict_build(rng: random.Random):
    people = dict(zip(rng.sample(NAMES, rng.randint(2, 3)), rng.sample(range(18, 90), 3)))
    said = " and ".join(f"'{n}' to {a}" for n, a in people.items())
    return (_task("dict-build", f"Create a dictionary named ages that maps {said}.",
                  "print(repr(sorted(ages.items())))", repr(sorted(people.items()))),
            (f"ages = {people!r}",))


def count_word(rng: random.Random):
    word, *others = rng.sample(WORDS, 4)
    words = [rng.choice([word, *others]) for _ in range(rng.randint(8, 20))]
    text = "\n".join(" ".join(words[i:i + 5]) for i in range(0, len(words), 5)) + "\n"
    return (_task("count-word", f"Count how many times the word {word} appears in the file /app/text.txt and store "
                  "the number in a variable named count.", "print(repr(count))", str(words.count(word)),
                  files={"/app/text.txt": text}),
            (f"count = open('/app/text.txt').read().split().count('{word}')",))


def sum_csv(rng: random.Random):
    rows = [(w, rng.randint(1, 500)) for w in rng.sample(WORDS, rng.randint(3, 7))]
    csv = "item,amount\n" + "".join(f"{w},{a}\n" for w, a in rows)
    return (_task("sum-csv", "The file /app/sales.csv has a header line and the columns item and amount. Store the "
                  "sum of the amount column in a variable named total (an int).", "print(repr(total))",
                  str(sum(a for _, a in rows)), files={"/app/sales.csv": csv}),
            ("lines = open('/app/sales.csv').read().split()[1:]",
             "total = sum(int(line.split(',')[1]) for line in lines)"))


def json_update(rng: random.Random):
    config = {"name": rng.choice(WORDS), "port": rng.randrange(8000, 9000), "debug": False}
    key, value = rng.choice((("port", rng.randrange(9000, 9999)), ("name", rng.choice(WORDS) + "2")))
    shown = json.dumps(value)
    after = json.dumps({**config, key: value}, sort_keys=True)
    probe = "import json\nprint(json.dumps(json.load(open('/app/config.json')), sort_keys=True))"
    return (_task("json-update", f"The file /app/config.json holds a JSON object. Set its key \"{key}\" to {shown} "
                  "and save the file, keeping the other keys.", probe, after,
                  files={"/app/config.json": json.dumps(config, indent=2) + "\n"}),
            ("import json\nconfig = json.load(open('/app/config.json'))",
             f"config[{key!r}] = {value!r}\nwith open('/app/config.json', 'w') as f:\n    json.dump(config, f)"))


def counter_class(rng: random.Random):
    k, step = rng.randint(2, 6), rng.randint(1, 5)
    cls, attr = rng.choice(("Counter", "Tally", "Clicker", "Meter", "Score")), rng.choice(("n", "count", "total"))
    return (_task("counter-class", f"Define a class named {cls} whose instances start with an attribute {attr} equal "
                  f"to 0 and have a method inc() that adds {step} to {attr}. Then create an instance named c and call "
                  f"c.inc() {k} times.", f"print(type(c).__name__, c.{attr})", f"{cls} {k * step}"),
            (f"class {cls}:\n    def __init__(self):\n        self.{attr} = 0\n\n    def inc(self):\n"
             f"        self.{attr} += {step}",
             f"c = {cls}()\nfor _ in range({k}):\n    c.inc()"))


FAMILIES = [
    TaskFamily("sum-variable", DOMAIN, 1, "store the sum of two numbers in a variable", sum_variable),
    TaskFamily("upper-variable", DOMAIN, 1, "store a text in upper case in a variable", upper_variable),
    TaskFamily("define-function", DOMAIN, 1, "define a function multiplying by a constant", define_function),
    TaskFamily("write-file", DOMAIN, 1, "write a given text to a file", write_file),
    TaskFamily("squares-list", DOMAIN, 1, "a list of the squares of the numbers a..b", squares_list),
    TaskFamily("filter-evens", DOMAIN, 1, "the even numbers of a given list", filter_evens),
    TaskFamily("dict-build", DOMAIN, 1, "a dictionary of given names and ages", dict_build),
    TaskFamily("count-word", DOMAIN, 1, "count a word's occurrences in a file", count_word),
    TaskFamily("sum-csv", DOMAIN, 2, "sum a CSV column", sum_csv),
    TaskFamily("json-update", DOMAIN, 2, "change one key of a JSON file", json_update),
    TaskFamily("counter-class", DOMAIN, 2, "define a class, then use an instance", counter_class),
]
#: Held-out families: one easy, one harder one-action, one multi-step.
HELD_OUT = ("upper-variable", "count-word", "counter-class")


def _first(task: Task, solution: tuple[str, ...]) -> tuple[str, ...]:
    return solution[:1]


#: Plausible wrong attempts the real verifier must fail (printing instead of writing, a wrong value, a step left out).
WRONG: dict[str, Callable[[Task, tuple[str, ...]], tuple[str, ...]]] = {
    "sum-variable": lambda t, s: ("print(" + s[0].split(" = ")[1] + ")",),
    "upper-variable": lambda t, s: (s[0].replace(".upper()", ""),),
    "define-function": lambda t, s: (s[0].replace("return x", "print(x") + ")",),
    "write-file": lambda t, s: ("print(" + re.search(r"f\.write\((.*)\)", s[0]).group(1) + ")",),
    "squares-list": lambda t, s: (re.sub(r", (\d+)\)", lambda m: f", {int(m[1]) - 1})", s[0]),),
    "filter-evens": lambda t, s: (s[0].replace("== 0", "== 1"),),
    "dict-build": lambda t, s: ("print(" + s[0].split(" = ")[1] + ")",),
    "count-word": lambda t, s: ("print(" + s[0].split(" = ", 1)[1] + ")",),
    "sum-csv": _first,
    "json-update": _first,
    "counter-class": _first,
}
