"""The real search engine: FTS5 over the offline Python docs, queried inside the sandbox."""

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import needs_sandbox

from lwm.domains.search import spec as D
from lwm.envs.base import Task
from lwm.errors import ActionFormatError, AssetMissingError, EnvironmentClosedError

DOCS = "https://docs.python.org/3.11/"


def _index_built() -> bool:
    from lwm.domains.search.index import index_path

    try:
        index_path()
        return True
    except AssetMissingError:
        return False


needs_index = pytest.mark.skipif(not _index_built(), reason="search index not built (run `lwm setup`)")


def S(*q):
    return D.format_action("web_search", query=list(q))


def X(url, goal=""):
    return D.format_action("web_extractor", url=url, goal=goal)


def _controller():
    path = Path(__file__).parents[2] / "lwm" / "domains" / "search" / "controller.py"
    spec = importlib.util.spec_from_file_location("search_controller", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- without the sandbox -------------------------------------------------------------------
def test_parse_action_accepts_the_tool_call_forms():
    assert D.parse_action(S("a", "b")).queries == ("a", "b")
    assert D.parse_action('{"name": "web_search", "arguments": {"query": "one"}}').queries == ("one",)
    call = D.parse_action('{"name": "web_search", "arguments": "{\\"query\\": [\\"x\\"]}"}')
    assert call.queries == ("x",)
    call = D.parse_action(X(" https://docs.python.org/3/ ", "goal"))
    assert (call.name, call.url, call.goal) == ("web_extractor", "https://docs.python.org/3/", "goal")


@pytest.mark.parametrize("action, reason", [
    ("web_search json", "not JSON"),
    ("[]", "expected a JSON object"),
    ('{"name": "browse", "arguments": {}}', "unknown tool 'browse'"),
    ('{"name": "web_search", "arguments": {"query": []}}', "non-empty list"),
    ('{"name": "web_search", "arguments": {"query": [1]}}', "non-empty list"),
    (S(*["q"] * 6), "at most 5"),
    (S("x" * 4001), "longer than 4000"),
    (S("a\u0000b"), "NUL"),
    ('{"name": "web_extractor", "arguments": {"goal": "x"}}', "needs 'url'"),
    ('{"name": "web_extractor", "arguments": {"url": "u", "goal": 3}}', "'goal' must be a string"),
    ('{"name": "web_search", "arguments": {"query": ["' + "a " * 20000 + '"]}}', "longer than 32000"),
])
def test_parse_action_rejects_malformed_calls(action, reason):
    with pytest.raises(ActionFormatError, match=reason):
        D.parse_action(action)


def test_fts_queries_are_only_quoted_terms_and_never_syntax_errors():
    ctl = _controller()
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE pages_fts USING fts5(title, body)")
    db.execute("CREATE TABLE pages(id INTEGER PRIMARY KEY, title, url, date)")
    db.execute("INSERT INTO pages VALUES (1, 't', 'u', 'd')")
    db.execute("INSERT INTO pages_fts(rowid, title, body) VALUES (1, 'json', 'dumps the json')")
    hostile = ['title:json', 'json*', 'NEAR("json" "dumps", 3)', '"unterminated', 'AND OR NOT', '^json',
               '{title body}: x', "'; DROP TABLE pages; --", '"""', "(((", "json -dumps +loads", "🐍 日本語"]
    for q in hostile:
        terms, content = ctl.fts_terms(q, 32)
        assert all(t.startswith('"') and t.endswith('"') and '"' not in t[1:-1] for t in terms)
        ctl.search(db, q, 5, 32)  # no sqlite3.OperationalError
    assert ctl.fts_terms('a "json dumps" b', 32)[0] == ['"a"', '"json dumps"', '"b"']
    assert len(ctl.fts_terms(" ".join(f"w{i}" for i in range(100)), 32)[0]) == 32


def test_url_mapping_stays_inside_the_corpus():
    ctl = _controller()
    assert ctl.page_path("https://docs.python.org/3/library/json.html#json.dumps") == "library/json.html"
    assert ctl.page_path("docs.python.org/3.11/library/") == "library/index.html"
    assert ctl.page_path("HTTP://DOCS.PYTHON.ORG/3.11?x=1") == "index.html"
    for url in ("file:///etc/passwd", "http://127.0.0.1/", "https://docs.python.org/2/x.html", "ftp://docs.python.org/3/"):
        assert ctl.page_path(url) is None
    assert D.fetch_error("file:///etc/passwd") == \
        'Error: failed to fetch file:///etc/passwd: unsupported URL scheme "file"'
    assert D.fetch_error("http://127.0.0.1:8000/").endswith("could not resolve host 127.0.0.1")
    assert D.fetch_error(DOCS + "nope.html").endswith("404 Not Found")


def test_page_window_follows_the_goal():
    ctl = _controller()
    page = "# Top\n\nintro\n\n## Alpha\n\n" + "filler line\n" * 300 + "## Beta\n\nbeta gamma here\n" + "more\n" * 300
    text, before, after = ctl.select(page, "gamma", 1000)
    assert text.startswith("## Beta") and before == page.index("## Beta") and after > 0
    assert ctl.select(page, "nothing-matches", 1000)[1] == 0
    assert ctl.select("short", "x", 1000) == ("short", 0, 0)


def test_index_path_says_how_to_build(monkeypatch, tmp_path):
    from lwm.domains.search.index import index_path

    monkeypatch.setenv("LWM_HOME", str(tmp_path))
    with pytest.raises(AssetMissingError, match="lwm setup"):
        index_path()


def test_suite_meets_its_spec():
    from lwm import domains
    from lwm.domains.search.suite import random_scripts

    core = domains.get("search").scripts()
    assert len(core) >= 20 and sum(len(e.actions) for e in core) >= 100
    assert len({e.task.name for e in core}) == len(core)
    checks = [e for e in core if e.task.check]
    assert len(checks) >= 10
    families = {e.task.family for e in core}
    assert {"stdlib-lookup", "odd-input", "bad-urls", "bad-calls", "no-results", "random"} <= families
    assert random_scripts(7, 3) == random_scripts(7, 3) != random_scripts(8, 3)
    assert "search" in D.system_prompt() and "web_extractor" in D.system_prompt()


# -- in the sandbox ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def env():
    from lwm.domains.search.env import SearchEnv

    e = SearchEnv()
    e.reset(Task("t"))
    yield e
    e.close()


@needs_sandbox
@needs_index
def test_search_finds_the_json_page_first(env):
    obs = env.step(S("json dumps indent", "zzqxvj flibbertigibbet")).observation
    first, second = obs.split("\n\n")
    lines = first.split("\n")
    assert lines[0] == '## Search results for "json dumps indent"'
    assert lines[1] == f"1. [json — JSON encoder and decoder — Python 3.11.2 documentation]({DOCS}library/json.html)"
    assert lines[2].startswith("   2026-10-07 · ") or lines[2][3:13].count("-") == 2
    assert second == '## Search results for "zzqxvj flibbertigibbet"\nNo results found.'


@needs_sandbox
@needs_index
def test_extractor_returns_markdown_windowed_by_goal(env):
    obs = env.step(X("https://docs.python.org/3/library/json.html#json.dumps", "Basic Usage indent")).observation
    head = obs.split("\n")
    assert head[:2] == ["Title: json — JSON encoder and decoder — Python 3.11.2 documentation",
                        f"URL: {DOCS}library/json.html"]
    assert head[4].startswith("[… ") and head[4].endswith(" characters omitted …]")
    assert "## Basic Usage" in obs and "If *indent* is a non-negative integer" in obs
    assert obs.split("\n")[-1].endswith("more characters truncated …]")
    assert len(obs) < D.MAX_PAGE_CHARS + 500
    small = env.step(X(DOCS + "library/keyword.html")).observation
    assert "truncated" not in small and "keyword.iskeyword(" in small


@needs_sandbox
@needs_index
def test_hostile_urls_and_queries_read_nothing_outside_the_corpus(env):
    for url in ("file:///etc/passwd", "file:///etc/shadow", "http://127.0.0.1:8000/", "http://localhost/",
                DOCS + "../../../etc/passwd", "/etc/passwd", "docs.python.org/3.11/_sources/library/json.rst.txt"):
        res = env.step(X(url, "root"))
        assert res.observation.startswith("Error: failed to fetch"), url
        assert "root:" not in res.observation
    for q in ('NEAR("json" "dumps", 3)', "'; DROP TABLE pages; --", '"', "title:json*", "x" * 3999,
              " ".join(["python"] * 570)):
        res = env.step(S(q))
        assert res.observation.startswith("## Search results for") and res.info["seconds"] < 5
    assert "library/json.html" in env.step(S("json")).observation  # the index is intact
    res = env.step(S("y" * 5000))
    assert res.observation == "Error: invalid tool call: a query is longer than 4000 characters"
    assert res.info["action_error"]


@needs_sandbox
@needs_index
def test_snapshot_restore_is_trivial_and_checks_the_episode(env):
    snap = env.snapshot()
    before = env.step(S("heapq merge")).observation
    env.step(S("something else"))
    env.restore(snap)
    assert env.step(S("heapq merge")).observation == before
    with pytest.raises(ValueError):
        env.restore(("search", -1))


@needs_sandbox
@needs_index
def test_lifecycle_errors():
    from lwm.domains.search.env import SearchEnv

    e = SearchEnv()
    with pytest.raises(EnvironmentClosedError):
        e.step(S("x"))
    e.reset()
    assert e.step(S("x")).observation.startswith("## Search results")
    e.close()
    e.close()
    with pytest.raises(EnvironmentClosedError):
        e.step(S("x"))


@needs_sandbox
@needs_index
def test_collect_plays_the_suite(tmp_path):
    from lwm import domains
    from lwm.data import collect as C
    from lwm.schema import read_rows

    cfg = C.CollectConfig(domain="search", out=tmp_path, episodes=3, workers=2)
    res = C.collect(cfg, show_progress=False)
    episodes = domains.get("search").scripts()[:3]
    rows = list(read_rows(res.rows_path))
    assert len(rows) == sum(len(e.actions) for e in episodes) and not res.failed
    assert all(not r.volatile_spans for r in rows)  # the engine is deterministic
    trajs = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert {t["reward"] for t in trajs} == {1.0}
    assert rows[0].response[-1].startswith("**Environment Observation:**")
