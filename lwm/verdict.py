"""The verdict: has an episode's task been achieved? The reward model's question, asked in
one fixed form so that a model can be trained to answer it and its answer read from
probabilities.

An example is the task instruction and the episode (every action with its observation);
the answer is one of two fixed texts, :data:`ACHIEVED` or :data:`NOT_ACHIEVED`. A trained
model is never asked to *write* a verdict: the reward model compares the log-probabilities
it gives the two answers after the prompt (:func:`probability`), so a verdict is never
unreadable and the reward can be a probability, not only a yes or no.

The same messages are the training prompt (``lwm data verdicts`` writes them with the
real verifier's answer as the completion) and the question asked in the simulator
(:func:`lwm.sim.reward.judge_verdict`), so what is measured is what is used.

>>> from lwm.schema import Trajectory, Turn
>>> t = Trajectory(id="x", domain="db", task="Insert the row (Ada, 36) into people.", system_prompt="",
...                turns=[Turn(index=1, action="INSERT INTO people VALUES ('Ada', 36);", observation="",
...                            provenance={"kind": "real"})])
>>> [m["role"] for m in verdict_messages(t)]
['system', 'user']
>>> round(probability(-0.1, -2.4), 3)
0.909
>>> task_values("Insert a row into the table people with name 'Ada' and age 36.")
('Ada', '36')
>>> unnamed_values(t.model_copy(update={"task": "Insert a row with name 'Ada' and age 37."}))
['37']
"""

from __future__ import annotations

import json
import math
import re

from lwm.schema import Message, Trajectory

#: The two answers, as the completion of a verdict example and the choices a reward model
#: is scored on. Their first tokens differ, so one forward pass tells them apart.
ACHIEVED = "achieved"
NOT_ACHIEVED = "not achieved"
ANSWERS = (ACHIEVED, NOT_ACHIEVED)

#: An action or observation longer than this is cut in the middle (characters).
MAX_ITEM_CHARS = 500

# Short on purpose: every training example and every verdict pays for it in tokens.
_SYSTEM = ("You are the reward model of a {domain} environment. Is the agent's task achieved in the final state? "
           "A claim, printed text instead of the change, an error or a wrong value is not achieved.")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters cut …]\n{text[-half:]}"


def verdict_messages(trajectory: Trajectory, max_item_chars: int = MAX_ITEM_CHARS) -> list[Message]:
    """The reward model's question about ``trajectory``: a system and a user message.

    Args:
        trajectory: the episode; its ``task`` is the instruction, its ``domain`` names the
            environment, its turns are read (the initial observation is not: the agent's
            actions and what they did decide the verdict); trailing blank lines of an
            observation (a terminal screen's) are dropped.
        max_item_chars: each action and observation is cut in the middle beyond this.

    Returns:
        ``[system, user]`` chat messages; the expected answer is :data:`ACHIEVED` or
        :data:`NOT_ACHIEVED` (:func:`completion`).
    """
    parts = [f"## Task\n{trajectory.task.strip()}", "## Episode"]
    if not trajectory.turns:
        parts.append("(the agent took no action)")
    for t in trajectory.turns:
        parts.append(f"### Action {t.index}\n```\n{_cut(t.action, max_item_chars)}\n```\n"
                     f"### Observation {t.index}\n```\n{_cut(t.observation.rstrip(), max_item_chars)}\n```")
    parts.append("Is the task achieved? Answer \"achieved\" or \"not achieved\".")
    return [{"role": "system", "content": _SYSTEM.format(domain=trajectory.domain)},
            {"role": "user", "content": "\n\n".join(parts)}]


def completion(achieved: bool) -> str:
    """The training answer for a verdict example."""
    return ACHIEVED if achieved else NOT_ACHIEVED


def probability(logprob_achieved: float, logprob_not_achieved: float) -> float:
    """P(achieved) from the log-probabilities a model gives the two answers, normalised
    over the two (a softmax of two; ``-inf`` for an answer the model gives no mass).

    Raises:
        ValueError: both are ``-inf`` or one is NaN (the model said neither).
    """
    a, b = logprob_achieved, logprob_not_achieved
    if math.isnan(a) or math.isnan(b) or (a == -math.inf and b == -math.inf):
        raise ValueError("the model gave neither answer any probability")
    if a == -math.inf or b == -math.inf:
        return 0.0 if a == -math.inf else 1.0
    return 1.0 / (1.0 + math.exp(b - a))


# ---------------------------------------------------------------------- the task's values

_REMARK = re.compile(r"\([^()]*\)")  # "(keep the original)", "(for example /app/x/y.txt)": not values to type
_VALUE_PATTERNS = (
    re.compile(r"""(?<!\w)(['"])([^'"\n]+?)\1(?!\w)"""),           # quoted text: 'desert 76', "olive2"
    re.compile(r"(?<![\w/])(/[\w.-]+(?:/[\w.-]+)+)"),                # a path of two parts or more: /app/list.txt
    re.compile(r"(?<![\w/.])([\w-]+\.[A-Za-z]\w*)(?![\w/])"),        # a file or dotted name: notes.txt, c.inc
    re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?!\w)"),                  # a number: 36, 2.5
    re.compile(r"(?<![\w/.])([A-Za-z]\w*(?:_\w+|\d\w*))(?!\w|\.\w)"),  # a name with a digit or underscore: desert_76
)
_TEST_FILE = re.compile(r"(?:test_\w+|\w+_test)\.py", re.IGNORECASE)  # pytest's names: what checks the work


def task_values(instruction: str) -> tuple[str, ...]:
    """The values an instruction names for the agent to type: quoted text, paths of two parts
    or more, file (or dotted) names, numbers, and names holding a digit or an underscore, in
    the order of the patterns, each once. Text in parentheses is skipped (remarks and
    examples), and so are a path's trailing full stop and test files (``test_*.py``,
    ``*_test.py``: what checks the work, not what the agent types).

    A heuristic, not a parser: it knows no family. On 20 tasks of each of the 60 task
    families, every reference solution names all its task's values (with
    :func:`unnamed_values`' exclusive bound; a test checks it).
    """
    text = _REMARK.sub(" ", instruction)
    found: list[str] = []
    for pattern in _VALUE_PATTERNS:
        for m in pattern.finditer(text):
            value = m[m.lastindex or 0].rstrip(".")
            if value and value not in found and not _TEST_FILE.fullmatch(value):
                found.append(value)
    return tuple(found)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _action_text(action: str) -> str:
    """An action as written, and, when it is JSON (a tool call, the terminal's keystrokes),
    its strings unescaped too."""
    try:
        return "\n".join([action, *_strings(json.loads(action))])
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth: read as written
        return action


def _named(value: str, text: str) -> bool:
    candidates = [value]
    if "/" in value:
        candidates.append(value.rsplit("/", 1)[1])  # a path by its file name: the agent works in its directory
    if value.isdecimal():
        candidates.append(str(int(value) + 1))  # an exclusive bound: range(6, 9) for "from 6 to 8"
    return any(re.search(rf"(?<!\w){re.escape(v)}(?!\w)", text, re.IGNORECASE) for v in candidates if v)


def unnamed_values(trajectory: Trajectory) -> list[str]:
    """The task's values (:func:`task_values` of ``trajectory.task``) that no action of the
    episode names: compared without case, as whole words; a path is also named by its file
    name, and a whole number N by N + 1 (an exclusive bound). Observations are not read: a
    value the environment printed is not one the agent typed."""
    text = "\n".join(_action_text(t.action) for t in trajectory.turns)
    return [v for v in task_values(trajectory.task) if not _named(v, text)]
