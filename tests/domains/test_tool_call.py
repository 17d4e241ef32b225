"""The tool-call envelope shared by the mcp, fs, swe and search domains."""

import pytest

from lwm.domains.fs import spec as fs
from lwm.domains.mcp import spec as mcp
from lwm.domains.search import spec as search
from lwm.domains.swe import spec as swe
from lwm.domains.tool_call import ToolCall, parse_tool_call
from lwm.errors import ActionFormatError


@pytest.mark.parametrize("text", [
    '{"name": "read", "arguments": {"path": "a"}}',
    '```json\n{"name": "read", "arguments": {"path": "a"}}\n```',
    '````\n{"name": "read", "arguments": {"path": "a"}}\n````',
    '```json {"name": "read", "arguments": {"path": "a"}}```',
    '{"name": "read", "arguments": "{\\"path\\": \\"a\\"}"}',
])
def test_accepted_forms(text):
    assert parse_tool_call(text, "mcp", 1000) == ToolCall("read", {"path": "a"})


@pytest.mark.parametrize("text, reason", [
    ("read a", "not JSON"),
    ("[1]", "expected a JSON object"),
    ('{"name": " "}', "non-empty string"),
    ('{"name": "a", "args": {}}', r"unexpected keys \['args'\]"),
    ('{"name": "a", "arguments": [1]}', "must be a JSON object"),
    ('{"name": "a", "arguments": "x"}', "a string but not JSON"),
    ('{"name": "a", "arguments": {"n": NaN}}', "NaN is not JSON"),
    ('{"name": "a", "arguments": {"q": ' + "[" * 5000 + "]" * 5000 + "}}", "nested too deeply"),
    ('{"name": "a", "arguments": {"n": ' + "1" * 5000 + "}}", "not JSON"),
    ('```json\n{"name": "a"}\n```\nthanks', "not JSON"),
    ('{"name": "' + "a" * 20_000 + '"}', "longer than 16000 characters"),
])
def test_refused_forms(text, reason):
    with pytest.raises(ActionFormatError, match=reason):
        parse_tool_call(text, "mcp", 16_000)


def test_every_tool_call_domain_uses_it_and_names_itself():
    for domain in (mcp, fs, swe):
        assert domain.parse_action('{"name": "x"}').arguments == {}
        with pytest.raises(ActionFormatError, match=f"invalid {domain.NAME} action"):
            domain.parse_action('{"name": "x", "extra": 1}')
    assert search.parse_action('```\n{"name": "web_search", "arguments": {"query": "q"}}\n```').queries == ("q",)
