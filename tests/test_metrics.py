"""Volatility detection and the masked fidelity metrics."""

import pytest

from lwm.data.volatility import volatile_spans
from lwm.metrics import fidelity, line_f1

DATE_A = "root@sandbox:/app# date\nSun Nov 29 10:31:05 UTC 2026\nroot@sandbox:/app#"
DATE_B = "root@sandbox:/app# date\nSun Nov 29 10:31:07 UTC 2026\nroot@sandbox:/app#"


def test_volatile_spans_widen_to_words():
    spans = volatile_spans(DATE_A, DATE_B)
    assert [DATE_A[s:e] for s, e in spans] == ["10:31:05"]
    assert volatile_spans("pid 4121 ok", "pid 977 ok") == [(4, 8)]
    assert volatile_spans("same", "same") == []


def test_volatile_spans_widen_to_lines_when_line_structure_differs():
    a, b = "x\nline one\nline two\ny", "x\nother\ny"
    assert [a[s:e] for s, e in volatile_spans(a, b)] == ["line one\nline two"]


def test_masked_exact_match_ignores_volatile_words_only():
    spans = volatile_spans(DATE_A, DATE_B)
    other_time = DATE_A.replace("10:31:05", "23:59:59")
    assert fidelity(other_time, DATE_A, spans).exact == 1.0
    assert fidelity(other_time, DATE_A).exact == 0.0  # without masks the time counts
    wrong_day = DATE_A.replace("Sun", "Mon")
    f = fidelity(wrong_day, DATE_A, spans)
    # a line wrong outside its mask is compared as is (the mask only forgives matching lines)
    assert f.exact == 0.0 and 0.8 < f.edit_similarity < 1.0 and f.line_f1 == pytest.approx(2 / 3)


def test_line_mask_accepts_any_lines():
    a, b = "x\nline one\nline two\ny", "x\nother\ny"
    spans = volatile_spans(a, b)
    assert fidelity("x\nwhatever\nmore\nlines\ny", a, spans).exact == 1.0
    assert fidelity("z\nwhatever\ny", a, spans).exact == 0.0


def test_unmasked_scores():
    f = fidelity("hello\nworld", "hello\nthere")
    assert f.exact == 0.0 and f.line_f1 == 0.5
    assert f.edit_similarity == pytest.approx(1 - 5 / 11)
    assert fidelity("a  \nb\n\n", "a\nb").exact == 1.0  # trailing spaces and blank lines do not count
    assert fidelity("", "").exact == 1.0
    assert fidelity("", "something").edit_similarity == 0.0


def test_line_f1_counts_duplicates():
    assert line_f1("a\na\nb", "a\nb") == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert line_f1("x", "y") == 0.0


def test_canonical_comparator_declares_equivalent_texts_exact():
    import json

    def canon(text):
        return json.dumps(json.loads(text), sort_keys=True)

    real, pred = '{"a": 1, "b": 2}', '{"b": 2, "a": 1}'
    assert fidelity(pred, real).exact == 0.0
    assert fidelity(pred, real, canonical=canon).exact == 1.0
    assert fidelity("not json", real, canonical=canon).exact == 0.0  # a failing comparator is a miss
    assert fidelity(pred, real, [(6, 7)], canonical=canon).exact == 0.0  # not with volatile spans
