"""The search domain: a real search engine (SQLite FTS5) over Debian's Python documentation."""

from __future__ import annotations

from lwm.domains import AgentTool, Asset, Domain, Lazy, rubrics
from lwm.domains.search import spec

__all__ = ["DOMAIN"]


def _index(force: bool):
    from lwm.domains.search.index import build_index

    return build_index(force=force)


DOMAIN = Domain(
    name=spec.NAME,
    description="web_search / web_extractor over an offline corpus (Python docs); observations results and pages",
    system_prompt=spec.system_prompt,
    parse_action=spec.parse_action,
    invalid_answer=spec.invalid_answer,
    action_format=spec.ACTION_FORMAT,
    tool=AgentTool("call_search_tool", (
        'Search the documentation or read a page, and return the results. The action is a JSON object: '
        '{"name": "web_search", "arguments": {"query": ["words to search"]}} or '
        '{"name": "web_extractor", "arguments": {"url": "https://docs.python.org/3.11/...", "goal": "what to find"}}')),
    canonical=spec.canonical,
    rubric=rubrics.SEARCH,
    reward_rubric=('Success in search: the answer the task asks for was found in a page the agent read '
                   '(web_extractor), not guessed.'),
    environment=Lazy("lwm.domains.search.env:SearchEnv"),
    suite=Lazy("lwm.domains.search.suite"),
    assets=(Asset("search index of the Python documentation", _index),),
)
