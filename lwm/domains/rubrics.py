"""Judge rubrics: the system prompts of the LLM judge, one per domain.

The judge compares a world model's simulated observation with the real one and scores it
on five dimensions (format, factuality, consistency, realism, quality), each an integer
1–5, as AgentWorldBench does (Qwen-AgentWorld, arXiv 2606.24597). The wording here is
our own: every rubric is built from a domain-specific part (what an observation of that
domain is and what each dimension means for it) and two shared parts (the scale anchors
and the exact output format that :func:`lwm.eval.judge.parse_score` reads).

Each domain spec names its rubric; ``fs``, ``db``, ``code`` use :data:`GENERIC`.
"""

from __future__ import annotations

from lwm.errors import UnknownDomainError

_SCALE = """\
How to score (the same scale for every dimension):
5 = matches the real observation on this dimension; any difference is something the real \
environment itself could produce on another run (a timestamp, a process id, a random name).
4 = small deviations that a careful reader notices but that would not change what the agent \
does next.
3 = clear errors mixed with correct parts; an agent relying on it could be misled on a detail.
2 = mostly wrong; only a surface resemblance to the real observation remains.
1 = wrong, empty, unrelated, or not an observation at all (commentary, a refusal, a question).

Judge only the simulated observation, not how long it is. The real observation is one \
sample: do not penalize values that differ between runs of the real environment when the \
simulated value is plausible. Never reward text the environment would not print \
(explanations, notes, placeholders such as "..." or "<output here>")."""

_OUTPUT = """\
Answer format: first a short analysis, then exactly one block, and nothing after it:
<final_evaluation>
{"format": <1-5>, "factuality": <1-5>, "consistency": <1-5>, "realism": <1-5>, \
"quality": <1-5>, "strengths": ["..."], "weaknesses": ["..."]}
</final_evaluation>
The block holds one JSON object. The five scores are integers from 1 to 5. "strengths" and \
"weaknesses" are lists of short strings (they may be empty)."""


def _rubric(role: str, dimensions: str) -> str:
    return f"{role}\n\n{dimensions}\n\n{_SCALE}\n\n{_OUTPUT}"


_INTRO = (
    "You are grading a world model: a model that imitates {what}. You see the episode so "
    "far, the agent's current action, the observation the world model SIMULATED for that "
    "action and the REAL observation the environment returned. Rate how faithfully the "
    "simulation reproduces the real observation."
)

MCP = _rubric(
    _INTRO.format(what="tool servers reached through the Model Context Protocol, where each "
                  "action is a tool call and each observation is the server's result"),
    """\
The five dimensions for tool results:
- format: the shape of the result. Valid JSON where the real one is JSON; the same envelope \
(content items, text fields, error objects); the field names, nesting and value types the \
tool returns.
- factuality: the values. The same records, identifiers, counts, names and messages as the \
real result. Reporting an error where the tool succeeded, or success where it failed, is a \
severe factual error.
- consistency: agreement with earlier results in the episode: items created earlier exist, \
deleted ones are gone, identifiers are reused correctly, totals and counters move as they \
should.
- realism: it reads as if a real server produced it: plausible ids, timestamps, pagination \
and error codes; no invented explanations.
- quality: overall value as a stand-in: would an agent receiving it take the same next step \
as with the real result?""",
)

SEARCH = _rubric(
    _INTRO.format(what="web search and page fetching, where actions are queries or page "
                  "visits and observations are result lists or page text"),
    """\
The five dimensions for search and browsing results:
- format: the layout of the result: how results are numbered, which fields each one has \
(title, URL, snippet, date), how many results are shown, how fetched page text is laid out \
and cut off.
- factuality: the same sources, titles, URLs and facts as the real result; above all, the \
facts the agent is looking for must be correct. A fabricated fact presented as found is a \
severe error.
- consistency: agreement with earlier turns: the same URL yields the same content, follow-up \
queries and visits fit what earlier results showed.
- realism: plausible websites, URL paths, snippet truncation, dates and ranking; no commentary \
from the simulator.
- quality: overall value as a stand-in: would the agent learn the same things and act the \
same way as with the real result?""",
)

TERMINAL = _rubric(
    _INTRO.format(what="a Linux terminal, where actions are keystrokes and each observation "
                  "is the visible terminal screen afterwards"),
    """\
The five dimensions for terminal screens:
- format: the exact screen layout: line breaks and wrapping at the terminal width, the prompt \
string (user, host, directory, `$` or `#`), the echoed command on the prompt line, blank \
lines, earlier lines still on screen, and where the screen ends (a new prompt, or none while \
a command is still running).
- factuality: the output itself: file names and contents, numbers, sizes, exit messages, and \
the exact wording of errors (`command not found`, `No such file or directory`, tracebacks).
- consistency: state carried across turns: the working directory shown in the prompt, files \
created or removed earlier, environment variables, installed packages, background processes, \
and earlier screen lines scrolled as they should be.
- realism: it looks like a real shell session: believable tool versions, permissions, \
timing-dependent output, no narration or markdown.
- quality: overall value as a stand-in: would the agent see the same situation and type the \
same next keystrokes?""",
)

SWE = _rubric(
    _INTRO.format(what="a software repository worked on by a coding agent, where actions are "
                  "file views, edits, searches, shell commands and test runs"),
    """\
The five dimensions for software-engineering tool output:
- format: the tool's own output format: line-numbered file views, edit confirmations with \
the changed snippet, grep and find listings, diffs, test-runner summaries and tracebacks laid \
out as the real tools lay them out.
- factuality: the content: file text and line numbers, search hits, which tests pass or fail \
and how many, exception types, messages and the files and lines a traceback names.
- consistency: the effect of earlier actions: edits show up in later views, line numbers \
shift after insertions, a fixed bug stops failing, created files exist.
- realism: real-looking paths, package layouts, warnings and durations; no invented helper \
text.
- quality: overall value as a stand-in: would the agent reach the same conclusion and make \
the same next change?""",
)

ANDROID = _rubric(
    _INTRO.format(what="an Android phone, where actions are taps, swipes, typing and key "
                  "presses and each observation describes the screen afterwards"),
    """\
The five dimensions for Android screen states:
- format: the structure of the screen description: element list or view hierarchy, the \
indexing scheme, attribute names (text, resource id, class, bounds, clickable, checked), \
and any header such as the current app or activity.
- factuality: the right screen after the action (the tapped item opened what it opens, text \
went into the focused field) and the right elements with their texts and states (checked, \
enabled, selected, focused).
- consistency: state kept across turns: toggled settings stay toggled, entered text stays, \
Back returns to the previous screen, element indices stay stable where the screen did not \
change.
- realism: believable package names, resource ids, bounds, status and navigation bars, the \
keyboard appearing when a field is focused.
- quality: overall value as a stand-in: would the agent see the same options and make the \
same next move?""",
)

WEB = _rubric(
    _INTRO.format(what="a web browser, where actions are clicks, typing, scrolling and "
                  "navigation on element ids and each observation is the page state afterwards"),
    """\
The five dimensions for browser page states:
- format: the accessibility tree structure: nesting and indentation, role names, the \
`[id]` numbering of elements, how names, values and properties are written, and the header \
lines (URL, title, tabs) if the real observation has them.
- factuality: the right page after the action (the link led where it leads, the form was \
submitted, the search returned its results), element names and values, and element ids \
that agree with the real ones.
- consistency: browser and site state kept across turns: cart contents, the signed-in user, \
filled form fields, open tabs, scroll position; unchanged parts of the page keep their ids.
- realism: a page a real site would render: landmarks, navigation, footers, a believable \
amount of content; no placeholders.
- quality: overall value as a stand-in: would the agent find the same elements and act on \
the same ids next?""",
)

OS = _rubric(
    _INTRO.format(what="a desktop operating system, where actions are mouse, keyboard or "
                  "shell operations and observations are window and accessibility-tree "
                  "states or command output"),
    """\
The five dimensions for desktop states:
- format: the same representation as the real observation: accessibility tree (roles, names, \
coordinates, states), window list, or command output, with the same structure and ordering.
- factuality: the right windows, dialogs and applications after the action, the right file \
contents and messages, the right values in fields and menus.
- consistency: state kept across turns: files saved earlier exist with their content, \
settings changed earlier stay changed, windows opened earlier remain unless closed.
- realism: believable application names, dialog wording, paths and system widgets; no \
narration.
- quality: overall value as a stand-in: would the agent see the same situation and take the \
same next action?""",
)

GENERIC = _rubric(
    _INTRO.format(what="an environment an agent acts in, where each action produces an "
                  "observation in the environment's own format"),
    """\
The five dimensions:
- format: the observation's form: the same representation (plain text, JSON, table, screen, \
tree), the same structure, field names, ordering and line layout as the real one.
- factuality: the same content: values, names, numbers, results and error messages.
- consistency: agreement with what earlier turns established about the environment's state.
- realism: it looks like the real environment produced it, with believable details and no \
commentary from the simulator.
- quality: overall value as a stand-in: would the agent understand the same situation and \
take the same next action?""",
)

_ALIASES = {"bash": "terminal", "shell": "terminal", "browser": "web", "webarena": "web"}


def rubric_for(domain: str) -> str:
    """The judge system prompt for ``domain`` (its spec's ``rubric``).

    Args:
        domain: a domain name such as ``terminal`` (case and surrounding spaces ignored;
            a ``suite/domain`` task name is reduced to its last part; ``bash``, ``shell``,
            ``browser`` and ``webarena`` are read as ``terminal`` and ``web``).

    Returns:
        the domain's rubric, or :data:`GENERIC` for an unknown domain or one without its own.
    """
    from lwm.domains import get

    key = domain.strip().lower().rsplit("/", 1)[-1]
    try:
        return get(_ALIASES.get(key, key)).rubric or GENERIC
    except UnknownDomainError:
        return GENERIC
