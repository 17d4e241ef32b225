"""Aggregation: macro over domains as the headline, micro over rows, failures counted."""

import pytest

from lwm.eval.report import summarize, to_markdown


def rec(domain, turn, exact=None, total=None, error=None):
    r = {"key": f"{domain}{turn}{exact}{total}", "domain": domain, "turn_idx": turn, "error": error}
    if error is None:
        r["fidelity"] = {"exact": exact, "edit_similarity": exact, "line_f1": exact}
    if total is not None or error is None:
        r["judge"] = {"mode": "score", "total": total, "error": None if total is not None else "unparseable"}
    return r


def test_macro_micro_and_failures():
    records = [rec("terminal", 1, 1.0, 5), rec("terminal", 2, 1.0, 5), rec("terminal", 3, 0.0, 4),
               rec("terminal", 4, 0.0, 4), rec("web", 1, 0.0, 1), rec("web", 2, 1.0, 3),
               rec("web", 3, error="APIConnectionError: refused"), rec("web", 9, 0.0, None)]
    s = summarize(records, {"model": "m"})
    assert s["rows"] == 8 and s["failed"] == 1 and s["errors"] == {"APIConnectionError": 1}
    assert s["domains"]["terminal"]["exact"] == 50.0
    assert s["domains"]["web"]["exact"] == pytest.approx(100 / 3, abs=0.01)
    # judge: terminal mean 4.5 → 87.5; web mean 2 → 25 (one unscored, one failed row)
    assert s["domains"]["terminal"]["judge_score"] == 87.5 and s["domains"]["web"]["judge_score"] == 25.0
    # one row judged and unreadable, one never sent (its prediction failed): counted apart
    assert s["domains"]["web"]["judge_failed"] == 1 and s["domains"]["web"]["judge_not_asked"] == 1
    assert s["domains"]["terminal"]["judge_not_asked"] == 0
    assert s["macro"]["judge_score"] == pytest.approx((87.5 + 25.0) / 2)
    assert s["micro"]["judge_score"] == pytest.approx((sum([5, 5, 4, 4, 1, 3]) / 6 - 1) / 4 * 100, abs=0.01)
    assert s["depth"]["9+"]["rows"] == 1 and s["depth"]["3-4"]["rows"] == 3
    md = to_markdown(s)
    assert "| terminal | 4 | 0 |" in md and "judge_score" in md


def test_judge_failures_are_counted_and_only_complete_judgements_score():
    complete = {"mode": "score", "total": 4.0, "error": None, "absent": [], "invalid": {}}
    cut = {"mode": "score", "total": None, "error": "truncated: finish_reason=length (3 attempt(s) failed)",
           "absent": [], "invalid": {}, "finish_reason": "length"}
    missing = {"mode": "score", "total": None, "error": "incomplete: missing quality (3 attempt(s) failed)",
               "absent": ["quality"], "invalid": {}}
    invalid = {"mode": "score", "total": None, "error": "invalid: realism='6' (3 attempt(s) failed)",
               "absent": [], "invalid": {"realism": "6"}}
    down = {"mode": "score", "total": None, "error": "ConnectionError: refused (3 attempt(s) failed)"}
    records = [rec("web", t, 1.0) | {"judge": j} for t, j in enumerate([complete, cut, missing, invalid, down], 1)]
    records.append(rec("terminal", 1, 1.0) | {"judge": complete | {"total": 5.0}})
    s = summarize(records, {"model": "m"})
    web = s["domains"]["web"]
    assert web["judge_score"] == 75.0 and s["domains"]["terminal"]["judge_score"] == 100.0
    assert (web["judge_failed"], web["judge_incomplete"], web["judge_truncated"]) == (4, 2, 1)
    assert s["domains"]["terminal"]["judge_failed"] == 0 and s["domains"]["terminal"]["judge_incomplete"] == 0
    assert s["judge_errors"] == {"truncated": 1, "incomplete": 1, "invalid": 1, "ConnectionError": 1}
    md = to_markdown(s)
    assert "| web | 5 | 0 | 0 | 0 | 100.0 | 100.0 | 100.0 | 75.0 | 4 | 2 | 1 |" in md
    assert 'judge failures: `{"truncated": 1, "incomplete": 1, "invalid": 1, "ConnectionError": 1}`' in md


def test_pairwise_truncations_are_counted_per_row():
    real = {"mode": "real", "wins": 0.0, "valid": 1, "verdicts": ["A", None], "finish_reasons": ["stop", "length"],
            "errors": [None, "truncated: finish_reason=length (3 attempt(s) failed)"]}
    s = summarize([rec("web", 1, 1.0) | {"judge": real}], {"model": "m"})
    assert s["domains"]["web"]["judge_truncated"] == 1 and s["domains"]["web"]["judge_failed"] == 0
    assert "judge_incomplete" not in s["domains"]["web"] and s["judge_errors"] == {"truncated": 1}


def test_a_row_the_closer_judge_was_never_asked_about_is_not_a_judge_failure():
    won = {"mode": "closer", "wins": 1.0, "valid": 2}
    unasked = {"mode": "closer", "wins": None, "not_asked": "no baseline prediction for this row"}
    s = summarize([rec("web", 1, 1.0) | {"judge": won}, rec("web", 2, 1.0) | {"judge": unasked},
                   rec("db", 1, 1.0) | {"judge": unasked}], {"model": "m"})
    web, db = s["domains"]["web"], s["domains"]["db"]
    assert (web["judge_wins"], web["judge_failed"], web["judge_not_asked"]) == (100.0, 0, 1)
    assert db["judge_not_asked"] == 1 and "judge_failed" not in db   # a domain where none was asked
