"""The bundled search suite: research sessions against the offline Python 3.11 docs.

Scripted episodes (4–7 tool calls each) by family:

``stdlib-lookup``  real questions about standard-library APIs: search, then read a result page
``tutorial``       tutorial and language-reference questions
``multi-query``    several queries in one ``web_search`` call
``follow-up``      extracting a URL a result list gave, with fragments, ``/3/`` and directory URLs
``long-page``      pages cut to the extractor's budget (truncation markers, goal-selected windows)
``no-results``     queries without matches, empty and punctuation-only queries
``odd-input``      unicode, emoji, very long queries, FTS5 operators typed as text
``bad-urls``       unknown pages, other hosts, ``file://`` and loopback URLs
``bad-calls``      malformed tool calls (the engine's error observations)
``random``         a seeded exploratory policy (:func:`random_scripts`)

Verifiers: the engine is stateless, so a task's check is a probe (a ``web_search`` or
``web_extractor`` call) that asks whether the corpus really holds what the task asks for;
three tasks ask for what is not there (a ``yaml`` module, a ``tomllib.dumps`` writer, the
host's ``/etc/shadow``) and fail (reward 0). Everything is deterministic: two plays of an
episode give identical observations.
"""

from __future__ import annotations

import random

from lwm.domains.search.spec import format_action
from lwm.envs.base import Check, Task
from lwm.envs.episode import Script

DOCS = "https://docs.python.org/3.11/"


def S(*queries: str) -> str:
    """A ``web_search`` action."""
    return format_action("web_search", query=list(queries))


def X(url: str, goal: str = "") -> str:
    """A ``web_extractor`` action (relative URLs are under :data:`DOCS`)."""
    if "://" not in url and not url.startswith(("docs.python.org", "javascript:", "file:")):
        url = DOCS + url
    return format_action("web_extractor", url=url, goal=goal)


def _ep(name: str, family: str, instruction: str, *actions: str, tags: tuple[str, ...] = (),
        check: Check | None = None) -> Script:
    return Script(Task(name=name, family=family, instruction=instruction, check=check),
                   tuple(actions), tags=(family, *tags, *(("verified",) if check else ())))


SCRIPTED = [
    _ep("json-pretty-print", "stdlib-lookup",
        "How do I pretty-print JSON with sorted keys in Python? Find the documented parameters.",
        S("json pretty print indent"),
        X("library/json.html", "indent parameter of json.dumps"),
        S("json.dumps sort_keys separators"),
        X("library/json.html#json.dumps", "sort_keys"),
        check=Check(X("library/json.html", "Basic Usage indent"), "If *indent* is a non-negative integer")),
    _ep("pathlib-rglob", "stdlib-lookup",
        "Find how to list all .py files recursively with pathlib.",
        S("pathlib glob recursive", "Path.rglob"),
        X("library/pathlib.html", "rglob recursive glob"),
        S("os.walk directory tree"),
        X("library/os.html", "os.walk"),
        check=Check(X("library/pathlib.html", "rglob"), "Path.rglob(")),
    _ep("asyncio-taskgroup", "multi-query",
        "What is the difference between asyncio.gather and asyncio.TaskGroup?",
        S("asyncio.gather return_exceptions", "asyncio TaskGroup", "structured concurrency python"),
        X("library/asyncio-task.html", "TaskGroup"),
        X("library/asyncio-task.html", "gather return_exceptions"),
        S("\"New in version 3.11\" TaskGroup"),
        check=Check(X("library/asyncio-task.html", "class asyncio.TaskGroup"), "asyncio.TaskGroup")),
    _ep("dataclass-frozen", "stdlib-lookup",
        "How do I make a dataclass immutable and hashable?",
        S("dataclass frozen immutable"),
        X("library/dataclasses.html", "frozen"),
        S("dataclass unsafe_hash eq"),
        X("library/dataclasses.html", "hash unsafe_hash"),
        check=Check(X("library/dataclasses.html", "FrozenInstanceError"), "dataclasses.FrozenInstanceError")),
    _ep("walrus-operator", "tutorial",
        "Which PEP introduced assignment expressions (the walrus operator) and in which version?",
        S("walrus operator", "\"assignment expressions\""),
        X("whatsnew/3.8.html", "assignment expressions walrus"),
        S("PEP 572"),
        X("reference/expressions.html", "Assignment expressions"),
        check=Check(X("whatsnew/3.8.html", "assignment expressions"), "PEP 572")),
    _ep("list-comprehensions", "tutorial",
        "Find the tutorial section on list comprehensions and its example.",
        S("list comprehension tutorial"),
        X("tutorial/datastructures.html", "list comprehensions squares"),
        S("nested list comprehensions transpose matrix"),
        S("tuple unpacking sequence"),
        X("tutorial/datastructures.html", "Tuples and Sequences"),
        check=Check(X("tutorial/datastructures.html", "List Comprehensions"), "squares")),
    _ep("regex-named-groups", "stdlib-lookup",
        "How do I use named groups and backreferences in re.sub?",
        S("re.sub backreference", "regular expression named group"),
        X("library/re.html", "named groups (?P<name>"),
        X("library/re.html", "re.sub repl backreferences \\g<name>"),
        S("regular expression HOWTO"),
        check=Check(X("library/re.html", "named group"), "(?P<name>...)")),
    _ep("logging-basicconfig", "stdlib-lookup",
        "How do I configure logging to print timestamps?",
        S("logging basicConfig format", "logging timestamp asctime"),
        X("library/logging.html", "basicConfig format"),
        X("howto/logging.html", "Changing the format of displayed messages"),
        check=Check(X("library/logging.html", "basicConfig"), "logging.basicConfig(")),
    _ep("zoneinfo-aware", "multi-query",
        "Create a timezone-aware datetime for Europe/Paris.",
        S("zoneinfo ZoneInfo", "datetime timezone aware", "IANA time zone database"),
        X("library/zoneinfo.html", "ZoneInfo example"),
        X("library/datetime.html", "aware and naive objects"),
        S("tzdata package"),
        check=Check(X("library/zoneinfo.html", "Using ZoneInfo"), "ZoneInfo(\"America/Los_Angeles\")")),
    _ep("subprocess-follow-up", "follow-up",
        "How do I run a command and capture its output? Open the top result and the function's anchor.",
        S("subprocess run capture output"),
        X("library/subprocess.html", "capture_output"),
        X("https://docs.python.org/3/library/subprocess.html#subprocess.run", "check returncode"),
        X("docs.python.org/3.11/library/", "list of modules"),
        X("http://docs.python.org/3.11/library/subprocess.html?highlight=run", "timeout"),
        check=Check(X("library/subprocess.html", "capture_output"), "capture_output")),
    _ep("long-pages", "long-page",
        "Read the os module documentation on directory scanning.",
        X("library/os.html"),
        X("library/os.html", "os.scandir DirEntry is_dir"),
        X("library/stdtypes.html", "str.removeprefix"),
        X("library/functions.html", "zzqx nothing matches this goal"),
        check=Check(X("library/os.html", "scandir"), r"^\[… [\d,]+ more characters truncated …\]$", "regex")),
    _ep("no-results", "no-results",
        "Search for things the documentation does not contain.",
        S("zzqxvj flibbertigibbet"),
        S(""),
        S("!!! ??? ... ---"),
        S("   ", "qwertyuiopasdfgh"),
        S("kubernetes helm chart"),
        S("json")),
    _ep("unicode-queries", "odd-input",
        "Search with non-ASCII text and normalize Unicode strings.",
        S("Ünïcödé normalization NFC", "日本語 エンコーディング", "emoji 🐍 python"),
        S("straße casefold"),
        X("library/unicodedata.html", "normalize NFC NFD"),
        S("ß", "é", "\u200b"),
        S("“smart quotes” — em dash"),
        check=Check(X("library/unicodedata.html", "normalize"), "unicodedata.normalize(")),
    _ep("long-queries", "odd-input",
        "Try very long queries.",
        S(" ".join(["python"] * 300)),
        S("how do I " + " ".join(f"w{i}" for i in range(40)) + " json dumps"),
        S("json " * 5 + "x" * 3000),
        S("y" * 4001),
        S(*(["json"] * 6)),
        S("sqlite3 connect row_factory " + "please help " * 20)),
    _ep("fts-syntax", "odd-input",
        "Type search-engine operators and SQL as plain text.",
        S("title:json", "json*", "NEAR(\"json\" \"dumps\", 3)"),
        S("\"unterminated phrase", "AND OR NOT", "^json"),
        S("{title body}: pickle", "'; DROP TABLE pages; --"),
        S("\"\"\"", "(((", "json -dumps +loads"),
        S("json"),
        check=Check(S("json module"), DOCS + "library/json.html")),
    _ep("bad-urls", "bad-urls",
        "Fetch pages that do not exist or are not on the site.",
        X("library/nonexistent.html"),
        X("https://docs.python.org/2/library/json.html"),
        X("https://example.com/", "anything"),
        X("file:///etc/passwd"),
        X("http://127.0.0.1:8000/", "local server"),
        X("javascript:alert(1)"),
        X("docs.python.org/3/library/os.path.html", "os.path.join"),
        check=Check(X("file:///etc/shadow"), "root:")),
    _ep("bad-calls", "bad-calls",
        "Send malformed tool calls.",
        "web_search json",
        '{"name": "browse", "arguments": {"url": "https://docs.python.org/3.11/"}}',
        '{"name": "web_search", "arguments": {}}',
        '{"name": "web_search", "arguments": {"query": 42}}',
        '{"name": "web_search", "arguments": "{\\"query\\": [\\"heapq merge\\"]}"}',
        '{"name": "web_extractor", "arguments": {"url": "https://docs.python.org/3.11/library/heapq.html", '
        '"goal": ["merge"]}}',
        '{"name": "web_extractor", "arguments": {"url": "https://docs.python.org/3.11/library/heapq.html", '
        '"goal": "heapq.merge"}}'),
    _ep("yaml-module", "stdlib-lookup",
        "Find the standard-library module for parsing YAML files.",
        S("yaml parser module", "parse YAML file python"),
        S("configparser ini file"),
        X("library/configparser.html", "supported ini file structure"),
        S("tomllib parse TOML"),
        check=Check(S("yaml module"), DOCS + "library/yaml.html")),
    _ep("tomllib-write", "stdlib-lookup",
        "Find the function that writes (dumps) TOML in the standard library.",
        S("tomllib dumps write TOML"),
        X("library/tomllib.html", "dumps write"),
        S("\"tomllib\" write", "toml writer"),
        check=Check(X("library/tomllib.html", "dumps"), "tomllib.dumps(")),
    _ep("match-statement", "tutorial",
        "Find where the structural pattern matching statement (match) is documented.",
        S("match statement pattern matching"),
        S("PEP 634 structural pattern matching", "PEP 636 tutorial"),
        X("reference/compound_stmts.html", "The match statement"),
        X("tutorial/controlflow.html", "match Statements"),
        check=Check(X("reference/compound_stmts.html", "match statement"), "match_stmt")),
]

# -- the seeded exploratory policy --------------------------------------------------------
_WORDS = ("json", "dumps", "pathlib", "asyncio", "socket", "thread", "lock", "dict", "list", "sort",
          "key", "lambda", "decorator", "context", "manager", "iterator", "generator", "yield", "csv",
          "reader", "sqlite3", "cursor", "datetime", "timedelta", "random", "seed", "heapq", "bisect",
          "enum", "typing", "Protocol", "unittest", "mock", "argparse", "subparsers", "logging",
          "handler", "zip", "file", "open", "encoding", "bytes", "str", "format", "f-string", "regex",
          "how", "to", "the", "in", "python", "error", "exception", "raise", "traceback", "tempfile")
_ODD = ("🐍", "日本語", "naïve café", "\u200b", "NEAR(", "*", "\"", "-", "^", "AND", "::", "%", "\\",
        "Ω≈ç√", "") 
_PAGES = ("library/json.html", "library/csv.html", "library/heapq.html", "library/enum.html",
          "library/typing.html", "library/functions.html", "tutorial/classes.html", "glossary.html",
          "reference/datamodel.html", "howto/sorting.html", "faq/programming.html", "index.html",
          "library/sqlite3.html", "library/argparse.html", "whatsnew/3.11.html")
_BAD_URLS = ("library/missing.html", "https://pypi.org/project/requests/", "file:///proc/self/environ",
             "http://localhost/", "ftp://docs.python.org/3.11/", "https://docs.python.org/3.11/../../etc/passwd",
             "docs.python.org/3/library/", "https://docs.python.org/3.11/library/json.html#json.loads")
_MALFORMED = ('{"name": "web_search"', '{"name": "web_search", "arguments": {"query": []}}',
              '{"name": "web_extractor", "arguments": {"goal": "x"}}', "[]", '{"tool": "web_search"}',
              '{"name": "WEB_SEARCH", "arguments": {"query": ["json"]}}', "null")


def _random_query(rng: random.Random) -> str:
    words = rng.sample(_WORDS, rng.randint(1, 5))
    if rng.random() < 0.25:
        words.insert(rng.randrange(len(words) + 1), rng.choice(_ODD))
    if rng.random() < 0.15:
        return "\"" + " ".join(words[:2]) + "\" " + " ".join(words[2:])
    return " ".join(words)


def random_scripts(seed: int, n: int) -> list[Script]:
    """``n`` episodes of a seeded exploratory policy: 4–6 calls each, mostly searches of
    1–5 random words (sometimes with odd characters or a quoted phrase, sometimes several
    queries), page extractions (known pages, bad URLs, random goals) and about one call in
    ten malformed. Open-loop and deterministic: the same seed gives the same actions."""
    rng = random.Random(seed)
    episodes = []
    for i in range(n):
        actions = []
        for _ in range(rng.randint(4, 6)):
            r = rng.random()
            if r < 0.5:
                actions.append(S(*(_random_query(rng) for _ in range(rng.choice((1, 1, 1, 2, 3))))))
            elif r < 0.75:
                actions.append(X(rng.choice(_PAGES), _random_query(rng) if rng.random() < 0.7 else ""))
            elif r < 0.9:
                actions.append(X(rng.choice(_BAD_URLS), _random_query(rng)))
            else:
                actions.append(rng.choice(_MALFORMED))
        episodes.append(Script(Task(name=f"random-{seed}-{i}", family="random",
                                     instruction="Explore the Python documentation."),
                                tuple(actions), tags=("random",)))
    return episodes


RANDOM = random_scripts(seed=20260501, n=6)

SCRIPTS: list[Script] = [*SCRIPTED, *RANDOM]
#: Episodes beyond the core suite (none yet: the whole suite plays in well under a minute).
EXTENDED: frozenset[str] = frozenset()
