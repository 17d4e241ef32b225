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
('Ada',)
>>> unnamed_values(t.model_copy(update={"task": "Insert a row with name 'Adam' and age 36."}))
['Adam']
"""

from __future__ import annotations

import json
import math
import re

from lwm.parse import json_strings
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

#: Values are read from this much of an instruction (characters): a task is a few sentences, and
#: the patterns stay fast on hostile text.
MAX_INSTRUCTION_CHARS = 2000

_QUOTED = re.compile(r"""(?<!\w)(['"`])([^'"`\n]+?)\1(?!\w)""")  # 'desert crimson 76', "olive2", `Cart`
_UNQUOTED = (
    re.compile(r"(?<![\w/])(/[\w.-]+(?:/[\w.-]+)+)"),                    # a path of two parts or more: /app/list.txt
    re.compile(r"(?<![\w/.-])([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)(?!\w|\.\w)"),  # a snake_case name: desert_76
)
# test files and functions (pytest's and Go's names): what checks the work, not what the agent types
_TEST_NAME = re.compile(r"test_.*|.*_test(?:\.\w+)?|.*\.test\.\w+", re.IGNORECASE)


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for a, b in spans:
        chars[a:b] = " " * (b - a)
    return "".join(chars)


def _remarks(text: str) -> list[tuple[int, int]]:
    """The spans of balanced parentheses, nested ones included (an unclosed one is text)."""
    spans, opened = [], []
    for i, c in enumerate(text):
        if c == "(":
            opened.append(i)
        elif c == ")" and opened:
            spans.append((opened.pop(), i + 1))
    return spans


def task_values(instruction: str) -> tuple[str, ...]:
    """The values an instruction gives the agent to type: text in single, double or back quotes
    (as written), absolute paths of two parts or more (``/app/list.txt``) and snake_case names,
    each once, quoted text first. Not read: text in parentheses (remarks and examples: "(keep
    the original)", "(for example /app/x/y.txt)"; parentheses inside quotes are text), test
    files and functions (``test_*``, ``*_test.go``: what checks the work), numbers (an operand,
    a count or an old value is often not typed: ``total = 155`` for "the sum of 80 and 75"),
    bare file and dotted names ("Node.js", "i.e."), and anything past
    :data:`MAX_INSTRUCTION_CHARS`.

    A heuristic, not a parser: it knows no family. On 20 tasks of each of the 60 task
    families every reference solution names all its task's values (a test checks it, and
    others check other correct solutions).
    """
    text = instruction[:MAX_INSTRUCTION_CHARS]
    quoted = list(_QUOTED.finditer(text))
    masked = _blank(text, [m.span() for m in quoted])  # a parenthesis inside quotes is not a remark's
    remarks = _remarks(masked)
    found = [m[2] for m in quoted if not any(a < m.start() < b for a, b in remarks)]
    rest = _blank(masked, remarks)
    for pattern in _UNQUOTED:
        found += [m[1].rstrip(".").rstrip("/") for m in pattern.finditer(rest)]
    named = [v for v in found if v.strip() and not _TEST_NAME.fullmatch(v.rsplit("/", 1)[-1])]
    return tuple(dict.fromkeys(named))


def _action_text(action: str) -> str:
    """What an action types: a JSON action's strings (a tool call's arguments, the terminal's
    keystrokes), unescaped, not its keys or numbers (read strictly, as the environments read
    it; :func:`lwm.retrieval.action_text` is the lenient reading for comparing actions); any
    other action as written."""
    try:
        parsed = json.loads(action)
        return "\n".join(json_strings(parsed)) if isinstance(parsed, (dict, list)) else action
    except (ValueError, RecursionError):  # not JSON, or nested past Python's depth
        return action


def _unquoted(text: str) -> str:
    """``text`` with the shell's and SQL's quoting taken off: backslash escapes resolved, quote
    marks dropped (``New\\ York`` and ``'New'" York"`` are ``New York``)."""
    return re.sub(r"\\(.)", r"\1", text).replace("'", "").replace('"', "")


def _named(value: str, texts: tuple[str, str]) -> bool:
    candidates = [value]
    if "/" in value:
        candidates.append(value.rsplit("/", 1)[1])  # by its file name: the agent works in its directory
    for v in candidates:
        for t, form in zip(texts, (v, _unquoted(v))):
            if form.strip() and re.search(rf"(?<!\w){re.escape(form)}(?!\w)", t, re.IGNORECASE):
                return True
    return False


def unnamed_values(trajectory: Trajectory) -> list[str]:
    """The task's values (:func:`task_values` of ``trajectory.task``) that no action of the
    episode names: compared without case, as whole words, in what the actions type (a JSON
    action's strings) and in it again with shell and SQL quoting taken off; a path is also
    named by its file name. Observations are not read: a value the environment printed is
    not one the agent typed."""
    text = "\n".join(_action_text(t.action) for t in trajectory.turns)
    texts = (text, _unquoted(text))
    return [v for v in task_values(trajectory.task) if not _named(v, texts)]
