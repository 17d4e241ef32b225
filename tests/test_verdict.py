"""The task's values and the verdict's rule on them: what an instruction names for the agent to
type, which of those an episode's actions never name, and the reward that follows."""

from __future__ import annotations

import asyncio

import pytest

from lwm.domains.tasks import families, task_domains
from lwm.models.base import FunctionChatModel
from lwm.schema import Provenance, Trajectory, Turn
from lwm.sim.reward import judge_verdict
from lwm.verdict import task_values, unnamed_values


def _episode(task: str, *actions: str, domain: str = "db", observation: str = "") -> Trajectory:
    return Trajectory(id="x", domain=domain, task=task, system_prompt="",
                      turns=[Turn(index=i, action=a, observation=observation, provenance=Provenance(kind="real"))
                             for i, a in enumerate(actions, start=1)])


@pytest.mark.parametrize(("instruction", "values"), [
    ("Insert a row into the table people with name 'Ada' and age 36.", ("Ada", "36")),
    ("Print the text 'desert crimson 559' on the screen.", ("desert crimson 559", "559")),
    ('Set its key "name" to "olive2" and save the file.', ("name", "olive2")),
    ("Rename the file /app/desert.txt to crimson.txt (in /app).", ("/app/desert.txt", "crimson.txt")),
    # a file name is one value, not also its stem cut short; parentheses hold remarks and examples
    ("A file named tiger_49.txt is under /app. Write its path (for example /app/x/y.txt) into /app/answer.txt.",
     ("/app/answer.txt", "tiger_49.txt")),
    ("Create a directory named desert_76 in /app.", ("desert_76",)),
    ("Close ticket number 2 with the resolution 'won't fix in v5'.", ("2", "v5")),   # an apostrophe opens no quote
    ("In /app/repo/calc.py fix biggest(a, b) so that the tests in test_calc.py pass.", ("/app/repo/calc.py",)),
    ("Delete every row of the table tasks.", ()),
    ("", ()),
])
def test_task_values_are_what_an_instruction_names_for_the_agent_to_type(instruction, values):
    assert task_values(instruction) == values


def test_unnamed_values_are_read_from_the_actions_alone():
    task = "Create a file named notes.txt in /app containing the word Lemon, then rename /app/b.txt."
    keys = '[{"keystrokes": "echo lemon > \\"notes.txt\\" && mv b.txt c.txt\\n", "duration": 0.3}]'
    # the terminal's keystrokes are read unescaped; case is ignored; a path is named by its file name
    assert unnamed_values(_episode(task, keys, domain="terminal")) == []
    assert unnamed_values(_episode(task, "mv b.txt c.txt", observation="notes.txt")) == ["notes.txt"]
    assert unnamed_values(_episode(task)) == ["/app/b.txt", "notes.txt"]              # no action at all
    age = "Insert a row with name 'Ada' and age 36."
    assert unnamed_values(_episode(age, "INSERT INTO people VALUES ('Ada', 360);")) == ["36"]   # whole words
    assert unnamed_values(_episode(age, "INSERT INTO people VALUES ('Ada', 37);")) == []   # an exclusive bound
    assert unnamed_values(_episode(age, "INSERT INTO people VALUES ('Adam', 35);")) == ["Ada", "36"]
    assert unnamed_values(_episode("Print 'x'.", "{not json")) == ["x"]               # broken JSON read as written
    assert unnamed_values(_episode("Print 'x'.", "[" * 100_000 + "x")) == []         # nested past json's depth
    assert unnamed_values(_episode("Print '²'.", "print(2)")) == ["²"]               # a digit int() cannot read


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
    wrong = _episode("Change the stock of olive to 95.", "UPDATE products SET stock = 59 WHERE name = 'olive';")
    v = asyncio.run(judge_verdict(never, wrong))
    assert (v.reward, v.rationale) == (0.0, "no action names the task's '95'")
    # named, the model is asked (this one cannot score answers: no reward, the reason given)
    right = _episode("Change the stock of olive to 95.", "UPDATE products SET stock = 95 WHERE name = 'olive';")
    cannot = FunctionChatModel(lambda m: "achieved")
    assert "cannot score answers" in asyncio.run(judge_verdict(cannot, right)).error
    # web actions point at elements, not values: the rule does not apply there
    click = _episode("Search for 'blue shoes'.", "click('12')", domain="web")
    assert "cannot score answers" in asyncio.run(judge_verdict(cannot, click)).error
