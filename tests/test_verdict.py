"""The task's values and the verdict's rule on them: what an instruction names for the agent to
type, which of those an episode's actions never name, and the reward that follows."""

from __future__ import annotations

import asyncio

import pytest

from lwm.domains.tasks import families, task_domains
from lwm.models.base import FunctionChatModel
from lwm.schema import Provenance, Trajectory, Turn
from lwm.sim.reward import judge_verdict
from lwm.verdict import MAX_INSTRUCTION_CHARS, task_values, unnamed_values


def _episode(task: str, *actions: str, domain: str = "db", observation: str = "") -> Trajectory:
    return Trajectory(id="x", domain=domain, task=task, system_prompt="",
                      turns=[Turn(index=i, action=a, observation=observation, provenance=Provenance(kind="real"))
                             for i, a in enumerate(actions, start=1)])


@pytest.mark.parametrize(("instruction", "values"), [
    ("Insert a row into the table people with name 'Ada' and age 36.", ("Ada",)),   # numbers are not read
    ("Print the text 'desert crimson 559' on the screen.", ("desert crimson 559",)),
    ('Set its key "name" to "olive2" and save the file.', ("name", "olive2")),
    ("Rename the file /app/desert.txt to crimson.txt (in /app).", ("/app/desert.txt",)),
    ("Create a directory named desert_76 in /app.", ("desert_76",)),
    ("Add a class `ShoppingCart` to ~/shop/cart.py; see src/main.py.", ("ShoppingCart", "/shop/cart.py")),
    ("Close ticket number 2 with the resolution 'won't fix in v5'.", ()),          # an apostrophe opens no quote
    # parentheses hold remarks and examples, nested too; inside quotes they are text
    ("A file named tiger_49.txt is under /app. Write its path (for example /app/x/y.txt) into /app/answer.txt.",
     ("/app/answer.txt",)),
    ("Write 'f(x) = 3' into /app/f.txt (for example with f(x) from /app/x/y.txt).", ("f(x) = 3", "/app/f.txt")),
    ("Create the directory /app/out/.", ("/app/out",)),
    # what checks the work, and words that are no values
    ("Fix /app/repo/calc.py so that /app/repo/test_calc.py, calc_test.go and test_sum pass.", ("/app/repo/calc.py",)),
    ("Compute the MD5 checksum, i.e. the hash, with python3 and Node.js for UTF-8 data of 1,000 lines.", ()),
    ("Delete every row of the table tasks.", ()),
    ("", ()),
])
def test_task_values_are_what_an_instruction_names_for_the_agent_to_type(instruction, values):
    assert task_values(instruction) == values


def test_unnamed_values_are_read_from_what_the_actions_type():
    task = "Write 'Lemon' into /app/notes.txt, then rename /app/b.txt."
    keys = '[{"keystrokes": "echo lemon > \\"notes.txt\\" && mv b.txt c.txt\\n", "duration": 0.3}]'
    # the terminal's keystrokes are read unescaped; case is ignored; a path is named by its file name
    assert unnamed_values(_episode(task, keys, domain="terminal")) == []
    assert unnamed_values(_episode(task, "mv b.txt c.txt", observation="Lemon notes.txt")) == ["Lemon", "/app/notes.txt"]
    assert unnamed_values(_episode(task)) == ["Lemon", "/app/notes.txt", "/app/b.txt"]     # no action at all
    name = "Insert a row with name 'Ada' into people."
    assert unnamed_values(_episode(name, "INSERT INTO people VALUES ('Adam');")) == ["Ada"]   # whole words
    assert unnamed_values(_episode("Print 'x'.", "{not json")) == ["x"]               # broken JSON read as written
    assert unnamed_values(_episode("Print 'x'.", "[" * 100_000 + "x")) == []         # nested past json's depth
    # a JSON action's keys and numbers are not what it types
    call = '{"name": "write_file", "arguments": {"path": "/app/a.txt", "content": "", "mode": 3}}'
    assert unnamed_values(_episode("Write 'name' and '3' into /app/a.txt.", call, domain="fs")) == ["name", "3"]


@pytest.mark.parametrize(("task", "action"), [
    # correct solutions other than the references: the rule must not refuse them
    ("Compute the sum of 80 and 75 and store it in a variable named total.", "total = 155"),
    ("Define a class Score with inc(); create c and call c.inc() 3 times.", "c = Score(); c.inc(); c.inc(); c.inc()"),
    ("In /app/repo/settings.py change TIMEOUT from 20 to 22.", "sed -i 's/^TIMEOUT = .*/TIMEOUT = 22/' settings.py"),
    ("Create a file named 'New York' in /app.", "touch New\\ York"),
    ("Create a file named 'New York' in /app.", "touch 'New'\" York\""),
    ("Insert a row with the title 'O\'Brien' into people.", "INSERT INTO people VALUES ('O''Brien');"),
    ("Start the Node.js server in /app/srv.", "cd /app/srv && node server.js"),
])
def test_other_correct_solutions_are_not_refused(task, action):
    assert unnamed_values(_episode(task, action)) == []


def test_only_the_start_of_a_long_instruction_is_read():
    assert task_values("x " * (MAX_INSTRUCTION_CHARS // 2) + "'late'") == ()
    for hostile in ("a-" * 20_000, " " + "a1" * 20_000 + ".b", " " + "a_" * 20_000 + ".b", "(" * 50_000, "'" * 50_000):
        assert len(unnamed_values(_episode(hostile, "x" * 1_000_000))) <= 1   # read within the cap: at most one


def test_every_reference_solution_names_its_tasks_values():
    """The rule must never refuse what a family's reference does (20 tasks of every family)."""
    unnamed = {}
    for domain in task_domains():
        for family in families(domain):
            for seed in range(20):
                task, solution = family.generate(seed)
                if missing := unnamed_values(_episode(task.instruction, *solution, domain=domain)):
                    unnamed[f"{domain}/{family.name}-{seed}"] = missing
    assert unnamed == {}


def test_the_verdict_gives_nothing_to_an_episode_whose_actions_never_name_a_value():
    never = FunctionChatModel(lambda m: pytest.fail("the reward model was asked"))
    wrong = _episode("Change the stock of 'olive' to 95.", "UPDATE products SET stock = 95 WHERE name = 'plum';")
    v = asyncio.run(judge_verdict(never, wrong))
    assert (v.reward, v.rationale) == (0.0, "no action names the task's 'olive'")
    # named, the model is asked (this one cannot score answers: no reward, the reason given)
    right = _episode("Change the stock of 'olive' to 95.", "UPDATE products SET stock = 95 WHERE name = 'olive';")
    cannot = FunctionChatModel(lambda m: "achieved")
    assert "cannot score answers" in asyncio.run(judge_verdict(cannot, right)).error
    # web actions point at elements, not values: the rule does not apply there
    click = _episode("Search for 'blue shoes'.", "click('12')", domain="web")
    assert "cannot score answers" in asyncio.run(judge_verdict(cannot, click)).error
