"""The search domain: a search engine over an offline copy of the Python 3.11 documentation.

Action format: :data:`ACTION_FORMAT`.

Observation formats (the engine's exact output; see :func:`format_search` and
:func:`format_page`)::

    ## Search results for "q1"
    1. [Title](https://docs.python.org/3.11/library/x.html)
       2026-10-07 · …snippet of the page text…
    2. …

    ## Search results for "q2"
    No results found.

    Title: <page title>
    URL: https://docs.python.org/3.11/library/x.html
    Last updated: 2026-10-07

    [… 1,234 characters omitted …]          (only when the page was cut at the start)

    <the page as Markdown>

    [… 5,678 more characters truncated …]    (only when the page was cut at the end)

Tool-call mistakes and failed fetches are observations starting with ``Error:``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from lwm.domains.tool_call import parse_tool_call
from lwm.errors import ActionFormatError

#: The action format, for people and prompts (the agent's tool description is shorter).
ACTION_FORMAT = """\
Action format (tool calls in the style of AgentWorldBench's search domain), one JSON
object per action::

{"name": "web_search", "arguments": {"query": ["q1", "q2"]}}     one or more queries
    {"name": "web_extractor", "arguments": {"url": "https://…", "goal": "what to look for"}}
"""
NAME = "search"
TOOLS = ("web_search", "web_extractor")
#: Bounds of an action (larger actions are format errors, never sent to the engine).
MAX_ACTION_CHARS = 32_000
MAX_QUERIES = 5
MAX_QUERY_CHARS = 4_000
MAX_URL_CHARS = 2_048
MAX_GOAL_CHARS = 2_000
#: Engine settings (also stated in the system prompt).
RESULTS_PER_QUERY = 5
MAX_QUERY_WORDS = 32
MAX_PAGE_CHARS = 8_000
SHOWN_QUERY_CHARS = 200
HOST = "docs.python.org"

TOOL_DEFINITIONS = [
    {
        "name": "web_search",
        "description": "Search the web. Returns the top results of each query: title, URL, date and a snippet.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                     "maxItems": MAX_QUERIES,
                                     "description": "One or more search queries, run separately."}},
            "required": ["query"],
        },
    },
    {
        "name": "web_extractor",
        "description": "Fetch a web page and return its content as Markdown, focused on the goal.",
        "parameters": {
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The page's URL (http or https)."},
                "goal": {"type": "string", "description": "What information to look for on the page."},
            },
            "required": ["url"],
        },
    },
]

SYSTEM_PROMPT = """\
You are a Search World Model: you simulate a web search engine and a page extractor exactly.

The reachable web is one site: the Python 3.11 documentation at https://docs.python.org/3.11/ \
(Python 3.11.2 docs: tutorial, library reference, language reference, HOWTOs, FAQs, C API, \
What's New). Page titles end with " — Python 3.11.2 documentation" (the home page's is \
"3.11.2 Documentation"); every page shows \
the date it was last updated (ISO format). No other host can be reached.

Each turn you receive the agent's action: one JSON tool call, {{"name": ..., "arguments": ...}}. Tools:
{tools}

web_search runs each query separately: full-text search (words are stemmed; case and accents \
are ignored; "double-quoted" parts must match as a phrase; only the first {max_words} words of a \
query count; punctuation and operators are ignored). Pages containing every significant word \
come first, ranked by relevance (title matches weigh most), then pages containing some of the \
words. It shows at most {k} results per query, in this exact format, with a blank line between queries:

## Search results for "<query, whitespace collapsed, cut to {shown} characters with …>"
1. [<page title>](<url>)
   <YYYY-MM-DD> · <snippet: about 32 words of the page text around the matches, with … where cut>
2. ...

A query with no match (or no words) gives its header, then the line: No results found.

web_extractor fetches one page of the site (http or https, /3/ or /3.11/ prefix, ignoring \
?query and #fragment; a directory URL means its index.html) and returns:

Title: <page title>
URL: <canonical https://docs.python.org/3.11/... URL>
Last updated: <YYYY-MM-DD>

<the page body as Markdown: ATX headings, fenced code blocks, links as absolute URLs>

Pages longer than {max_chars} characters are cut to a window of {max_chars} characters chosen \
by the goal: the first line containing the most distinct words of the goal (very common words \
ignored) is found; the window starts at the heading above that line if the heading is at most \
{quarter} characters above it, else at the start of that line's paragraph; with no goal word \
on the page, at the top. A cut start is announced by a line "[… N characters omitted …]" \
before the text, a cut end by a line "[… N more characters truncated …]" after it (N with \
thousands separators, e.g. 12,345).

Errors are one line:
- unknown page on the site: Error: failed to fetch <url>: 404 Not Found
- another host: Error: failed to fetch <url>: could not resolve host <host>
- another scheme (file:, ftp: …): Error: failed to fetch <url>: unsupported URL scheme "<scheme>"
- a malformed call: Error: invalid tool call: <reason>

Write brief reasoning, then the observation inside <predicted_observation></predicted_observation>.\
"""


@dataclass(frozen=True)
class ToolCall:
    """One search action.

    Attributes:
        name: ``web_search`` or ``web_extractor``.
        queries: the queries of a ``web_search`` (one or more).
        url: the page of a ``web_extractor``.
        goal: what the extractor should look for (may be empty).
    """

    name: str
    queries: tuple[str, ...] = field(default_factory=tuple)
    url: str = ""
    goal: str = ""


def invalid_answer(reason: str, previous: str) -> str:
    """The engine's answer to a call :func:`parse_action` refuses."""
    return f"Error: invalid tool call: {reason}"


def parse_action(action: str | dict) -> ToolCall:
    """Parse a search action.

    Args:
        action: the JSON text of a tool call, or the decoded object
            (:func:`lwm.domains.tool_call.parse_tool_call`). ``query`` may be one string or
            a list of strings.

    Raises:
        ActionFormatError: not a JSON object ``{"name", "arguments"}`` of a known tool with
            valid, bounded arguments (sizes: :data:`MAX_ACTION_CHARS`, :data:`MAX_QUERIES`,
            :data:`MAX_QUERY_CHARS`, :data:`MAX_URL_CHARS`, :data:`MAX_GOAL_CHARS`).
    """
    call = parse_tool_call(action, NAME, MAX_ACTION_CHARS)
    name, args = call.name, call.arguments
    text = action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)
    if name not in TOOLS:
        raise ActionFormatError(NAME, text, f"unknown tool {name!r}; available tools: {', '.join(TOOLS)}")
    if name == "web_search":
        query = args.get("query")
        queries = [query] if isinstance(query, str) else query
        if not isinstance(queries, list) or not queries or not all(isinstance(q, str) for q in queries):
            raise ActionFormatError(NAME, text, "web_search needs 'query': a string or a non-empty list of strings")
        if len(queries) > MAX_QUERIES:
            raise ActionFormatError(NAME, text, f"{len(queries)} queries; at most {MAX_QUERIES} per call")
        for q in queries:
            if len(q) > MAX_QUERY_CHARS:
                raise ActionFormatError(NAME, text, f"a query is longer than {MAX_QUERY_CHARS} characters")
            _check_text(q, text, "query")
        return ToolCall(name, queries=tuple(queries))
    url, goal = args.get("url"), args.get("goal", "")
    if not isinstance(url, str) or not url.strip():
        raise ActionFormatError(NAME, text, "web_extractor needs 'url': a non-empty string")
    if not isinstance(goal, str):
        raise ActionFormatError(NAME, text, "'goal' must be a string")
    if len(url) > MAX_URL_CHARS or len(goal) > MAX_GOAL_CHARS:
        raise ActionFormatError(NAME, text, f"'url' is limited to {MAX_URL_CHARS} and 'goal' to "
                                            f"{MAX_GOAL_CHARS} characters")
    _check_text(url, text, "url")
    _check_text(goal, text, "goal")
    return ToolCall(name, url=url.strip(), goal=goal)


def _check_text(value: str, text: str, what: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ActionFormatError(NAME, text, f"{what} contains an unencodable character") from None
    if "\0" in value:
        raise ActionFormatError(NAME, text, f"{what} contains a NUL character")


def format_action(name: str, **arguments: Any) -> str:
    """The canonical JSON text of a tool call (what suites and trajectories store)."""
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def shown_query(query: str) -> str:
    """The query as a results header shows it: whitespace collapsed, cut with … ."""
    q = " ".join(query.split())
    return q if len(q) <= SHOWN_QUERY_CHARS else q[:SHOWN_QUERY_CHARS] + "…"


def format_search(queries: tuple[str, ...] | list[str], results: list[list[dict[str, str]]]) -> str:
    """The observation of a ``web_search``: one block per query (format in the module doc)."""
    blocks = []
    for query, hits in zip(queries, results):
        lines = [f'## Search results for "{shown_query(query)}"']
        if not hits:
            lines.append("No results found.")
        for i, h in enumerate(hits, start=1):
            lines.append(f"{i}. [{h['title']}]({h['url']})")
            lines.append(f"   {h['date']} · {h['snippet']}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def fetch_error(url: str) -> str:
    """The error line of a ``web_extractor`` whose URL is not a page of the corpus."""
    parts = urlsplit(url if "://" in url or url.startswith(("file:", "data:", "javascript:", "mailto:"))
                     else "https://" + url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return f'Error: failed to fetch {url}: unsupported URL scheme "{scheme}"'
    host = (parts.hostname or "").lower()
    if host != HOST:
        return f"Error: failed to fetch {url}: could not resolve host {host or '(none)'}"
    return f"Error: failed to fetch {url}: 404 Not Found"


def format_page(page: dict[str, Any] | None, url: str) -> str:
    """The observation of a ``web_extractor`` (format in the module doc); ``page`` is the
    controller's answer, None for an unknown URL."""
    if page is None:
        return fetch_error(url)
    out = [f"Title: {page['title']}", f"URL: {page['url']}", f"Last updated: {page['date']}", ""]
    if page["omitted_before"]:
        out += [f"[… {page['omitted_before']:,} characters omitted …]", ""]
    out.append(page["text"].strip("\n"))
    if page["omitted_after"]:
        out += ["", f"[… {page['omitted_after']:,} more characters truncated …]"]
    return "\n".join(out)


def canonical(observation: str) -> str:
    """Normal form for the deterministic comparator: trailing spaces of each line and
    surrounding blank lines removed (the engine's output is otherwise deterministic)."""
    return "\n".join(line.rstrip() for line in observation.strip().splitlines())


def system_prompt() -> str:
    """The world-model system prompt of the search environment."""
    tools = "\n".join(json.dumps(t, ensure_ascii=False) for t in TOOL_DEFINITIONS)
    return SYSTEM_PROMPT.format(tools=tools, max_words=MAX_QUERY_WORDS, k=RESULTS_PER_QUERY,
                                shown=SHOWN_QUERY_CHARS, max_chars=f"{MAX_PAGE_CHARS:,}",
                                quarter=f"{MAX_PAGE_CHARS // 4:,}")
