"""Volatile spans: what differs between two real runs of the same episode.

Timestamps, PIDs, temporary names and races make some output differ from one real run
to the next. A world model cannot be expected to predict those, so the deterministic
metrics mask them. A span is widened to whole words (runs of non-space characters), and
to whole lines when the runs differ by line structure.
"""

from __future__ import annotations

import difflib
import re

from lwm.schema import Span

_WORD = re.compile(r"\S+")


def volatile_spans(a: str, b: str) -> list[Span]:
    """Spans of ``a`` (``[start, end)`` character offsets) that differ in ``b``.

    Returns:
        sorted, non-overlapping spans; ``[]`` when ``a == b``.

    >>> volatile_spans("pid 4121 ok", "pid 977 ok")
    [(4, 8)]
    >>> volatile_spans("same", "same")
    []
    """
    if a == b:
        return []
    spans: list[Span] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if "\n" in a[i1:i2] or "\n" in b[j1:j2]:
            spans.append(_widen_to_lines(a, i1, i2))
        else:
            spans.append(_widen_to_words(a, i1, i2))
    return _merge(spans)


def _widen_to_words(text: str, start: int, end: int) -> Span:
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    if start == end:  # an insertion between two spaces: take the next word if any
        m = _WORD.search(text, end)
        if m and "\n" not in text[end : m.start()]:
            end = m.end()
    return start, end


def _widen_to_lines(text: str, start: int, end: int) -> Span:
    start = text.rfind("\n", 0, start) + 1
    nl = text.find("\n", end)
    return start, len(text) if nl < 0 else nl


def _merge(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def merge_spans(*groups: list[Span]) -> list[Span]:
    """Union of span lists."""
    return _merge([s for g in groups for s in g])
