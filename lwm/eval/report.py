"""Aggregate scored predictions into tables: per domain, per turn depth, macro and micro.

Deterministic metrics are means over the rows that produced a prediction, ×100; rows
whose generation failed are counted in ``failed``, never dropped silently. Beside them,
``trivial_line_f1``: the line F1 of ``baseline:trivial`` (the domain's one-line rule) on
the same rows, so that a score can be read against what no model achieves. A generation
cut by ``max_tokens`` is scored on its draft, what a simulator would have emitted (the
text of an unclosed observation tag; when the cut fell inside the reasoning, the last
complete observation block written there, else nothing: see :func:`lwm.parse.parse_output`)
and counted in ``truncated_rows``; rows whose server cut the prompt are counted in
``context_cut_rows``. Judge scores
follow AgentWorldBench: a row's score is the mean of its five dimensions (1–5), reported
as (x − 1) / 4 × 100; the headline is the macro mean over domains. Only complete
judgements count (all five dimensions present, each an integer 1–5, the answer not cut);
the rest are counted in ``judge_failed``, with ``judge_incomplete`` (a dimension missing
or invalid) and ``judge_truncated`` (the judge's answer cut short) among them, and their
kinds in ``judge_errors``; rows never sent to the judge (their prediction failed, or in mode
``closer`` the baseline has no prediction for them) are counted apart, in ``judge_not_asked``.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from statistics import mean

from rich.console import Console
from rich.table import Table

from lwm.eval.judge import normalize
from lwm.jsonl import dumps, write_atomic
from lwm.metrics import FIDELITY_METRICS, METRIC_LABELS

DEPTHS = ((1, 1, "1"), (2, 2, "2"), (3, 4, "3-4"), (5, 8, "5-8"), (9, 10**9, "9+"))


def _depth(turn: int) -> str:
    return next(name for lo, hi, name in DEPTHS if lo <= turn <= hi)


def _pct(values: list[float]) -> float | None:
    return round(100 * mean(values), 2) if values else None


def _group(records: list[dict]) -> dict:
    ok = [r for r in records if r.get("error") is None]
    g: dict = {
        "rows": len(records),
        "failed": len(records) - len(ok),
        # an empty answer is no irregularity by itself (many actions print nothing): listed, not counted here
        "parse_issue_rows": sum(1 for r in ok if set(r.get("parse_issues") or ()) - {"empty"}),
        "truncated_history_rows": sum(1 for r in records if r.get("dropped_turns")),
        "truncated_rows": sum(1 for r in ok if r.get("truncated")),
        "context_cut_rows": sum(1 for r in ok if r.get("context_cut")),
    }
    for m in FIDELITY_METRICS:
        g[m] = _pct([r["fidelity"][m] for r in ok])
    if any("trivial_fidelity" in r for r in ok):  # the reference beside the headline metric
        g["trivial_line_f1"] = _pct([r["trivial_fidelity"]["line_f1"] for r in ok if "trivial_fidelity" in r])
    # asked: not a row whose prediction failed, nor one with nothing to compare it with
    judged = [r["judge"] for r in records if "judge" in r and not r["judge"].get("not_asked")]
    if judged:
        mode = judged[0]["mode"]
        g["judge_truncated"] = sum(1 for j in judged if "truncated" in _judge_error_kinds(j))
        if mode == "score":
            valid = [j for j in judged if j.get("error") is None and j.get("total") is not None]
            g["judge_score"] = round(normalize(mean(j["total"] for j in valid)), 2) if valid else None
            g["judge_incomplete"] = sum(1 for j in judged if j.get("absent") or j.get("invalid"))
        else:  # a pairwise verdict counts when at least one ordering gave an answer
            valid = [j for j in judged if j.get("wins") is not None]
            g["judge_wins"] = _pct([j["wins"] for j in valid])
        g["judge_failed"] = len(judged) - len(valid)
    if any("judge" in r for r in records):
        g["judge_not_asked"] = len(records) - len(judged)
    return g


def _judge_error_kinds(judge: dict) -> list[str]:
    """The kind (``truncated``, ``incomplete``, ``ConnectionError`` …) of each failure in a
    judge record: its ``error``, or for a pairwise verdict each ordering's."""
    errors = judge.get("errors") or [judge.get("error")]
    return [e.split(":")[0] for e in errors if e]


def summarize(records: list[dict], run_info: dict) -> dict:
    """Summary of a scored run (the content of ``summary.json``)."""
    by_domain: dict[str, list[dict]] = defaultdict(list)
    by_depth: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_domain[r["domain"]].append(r)
        by_depth[_depth(r["turn_idx"])].append(r)
    domains = {d: _group(rs) for d, rs in sorted(by_domain.items())}
    headline = [m for m in (*FIDELITY_METRICS, "trivial_line_f1", "judge_score", "judge_wins")
                if any(m in g for g in domains.values())]
    macro = {m: round(mean(vals), 2) if (vals := [g[m] for g in domains.values() if g.get(m) is not None]) else None
             for m in headline}
    micro = _group(records)
    issues = Counter(i for r in records for i in r.get("parse_issues") or [])
    scored = [r for r in records if "candidate" in r or "candidate_error" in r]
    candidates = {
        "chosen": {d: dict(Counter(r["candidate"] for r in rs if "candidate" in r)) for d, rs in by_domain.items()
                   if any("candidate" in r for r in rs)},
        "rows_with_a_neighbour": sum(any(k.startswith("neighbour-") for k in r.get("candidate_scores", {}))
                                     for r in scored),
        "errors": sum("candidate_error" in r for r in scored),
    } if scored else None
    certain = {d: n for d, rs in by_domain.items() if (n := sum(bool(r.get("certain")) for r in rs))}
    return {
        "run": run_info,
        "rows": len(records),
        "failed": micro["failed"],
        "errors": dict(Counter((r["error"] or "").split(":")[0] for r in records if r.get("error"))),
        "parse_issues": dict(issues),
        "judge_errors": dict(Counter(k for r in records if "judge" in r for k in _judge_error_kinds(r["judge"]))),
        "macro": macro,
        "micro": {m: micro.get(m) for m in headline},
        "domains": domains,
        "depth": {name: _group(by_depth[name]) for _, _, name in DEPTHS if name in by_depth},
        "candidates": candidates,
        "certain_rows": certain,
    }


#: Columns shown only when a row needs them (always in summary.json).
_WHEN_ANY = ("truncated_rows", "context_cut_rows")


def _columns(groups: dict[str, dict]) -> list[str]:
    return [c for c in ("rows", "failed", "parse_issue_rows", "truncated_history_rows", *_WHEN_ANY, *FIDELITY_METRICS,
                        "trivial_line_f1", "judge_score", "judge_wins", "judge_failed", "judge_not_asked",
                        "judge_incomplete", "judge_truncated")
            if any(g.get(c) if c in (*_WHEN_ANY, "judge_not_asked") else c in g for g in groups.values())]


#: Short column heads for the terminal (80 columns hold them); Markdown keeps the summary's keys.
_HEADS = {"parse_issue_rows": "parse issues", "truncated_history_rows": "history cut", "truncated_rows": "answer cut",
          "context_cut_rows": "context cut", **METRIC_LABELS, "edit_similarity": "edit sim",
          "trivial_line_f1": "trivial",
          "judge_score": "judge", "judge_wins": "wins", "judge_failed": "judge failed", "judge_not_asked": "not judged",
          "judge_incomplete": "incomplete", "judge_truncated": "judge cut"}


def _table(title: str, groups: dict[str, dict], first: str) -> Table:
    cols = _columns(groups)
    t = Table(title=title)
    t.add_column(first, no_wrap=True)
    for c in cols:
        t.add_column(_HEADS.get(c, c.replace("_", " ")), justify="right")
    for name, g in groups.items():
        t.add_row(name, *("—" if g.get(c) is None else str(g.get(c)) for c in cols))
    return t


def _headline(metrics: dict) -> str:
    return " · ".join(f"{_HEADS.get(m, m)} {'—' if v is None else v}" for m, v in metrics.items())


def print_summary(summary: dict, console: Console | None = None) -> None:
    """Print the domain and depth tables and the headline."""
    console = console or Console()
    console.print(_table("World-model fidelity by domain (metrics ×100)", summary["domains"], "domain"))
    console.print(_table("By turn depth", summary["depth"], "turn"))
    console.print(f"[bold]macro[/bold] {_headline(summary['macro'])}")
    console.print(f"[bold]micro[/bold] {_headline(summary['micro'])}")
    if summary.get("run", {}).get("heldout") is not None:
        console.print("only the rows of task families the world model never trained on (--heldout; run.json "
                      "lists the families)")
    if summary["macro"].get("trivial_line_f1") is not None:
        # read against the domains it was computed for (not for a row without a readable action)
        covered = [d for d, g in summary["domains"].items() if g.get("trivial_line_f1") is not None]
        line_f1 = round(mean(summary["domains"][d]["line_f1"] for d in covered), 2)
        where = "on the same rows" if len(covered) == len(summary["domains"]) else \
            f"on the rows of {', '.join(covered)} ({len(covered)} of {len(summary['domains'])} domains have a guess)"
        console.print(f"line F1 {line_f1} against {summary['macro']['trivial_line_f1']} for the trivial guess "
                      f"(baseline:trivial, column 'trivial') {where}")
    errors = f" {summary['errors']}" if summary["errors"] else ""
    console.print(f"rows {summary['rows']}, failed {summary['failed']}{errors}, "
                  f"parse issues {summary['parse_issues'] or 'none'}")
    if summary.get("judge_errors"):
        console.print(f"judge failures {summary['judge_errors']}")
    for line in (candidates_line(summary), certain_line(summary)):
        if line:
            console.print(line)


def candidates_line(summary: dict) -> str | None:
    """What candidate scoring chose (``None`` for a run without it)."""
    c = summary.get("candidates")
    if not c:
        return None
    chosen = Counter()
    for picks in c["chosen"].values():
        chosen.update(picks)
    neighbours = f", rows with a retrieved neighbour {c['rows_with_a_neighbour']}" \
        if summary["run"].get("retrieval") else ""
    return (f"candidates chosen {dict(chosen.most_common())}{neighbours}, scoring errors {c['errors']} "
            "(the model's own answer kept)")


def certain_line(summary: dict) -> str | None:
    """How many rows the domain answered without the model; that the model answered every
    row of a run made with ``--no-certain``; ``None`` otherwise (no such row, a reference
    guess, a run recorded before the setting)."""
    counts = summary.get("certain_rows")
    if not counts:
        run = summary.get("run") or {}
        if run.get("certain") is False and not str(run.get("model", "")).startswith("baseline:"):
            return ("every row answered by the model and its answers kept (--no-certain): none answered as the "
                    "action alone decides (Domain.certain), none ruled out (Domain.rules_out)")
        return None
    each = ", ".join(f"{d} {n}" for d, n in sorted(counts.items()))
    return (f"rows answered without the model, as the real environment answers them (what the action alone "
            f"decides, Domain.certain): {sum(counts.values())} ({each}); --no-certain to let the model answer them")


def to_markdown(summary: dict) -> str:
    """The summary as Markdown tables."""
    def md(groups: dict[str, dict], first: str) -> str:
        cols = _columns(groups)
        lines = [f"| {first} | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
        for name, g in groups.items():
            lines.append(f"| {name} | " + " | ".join("—" if g.get(c) is None else str(g[c]) for c in cols) + " |")
        return "\n".join(lines)

    run = summary["run"]
    judge_errors = f"; judge failures: `{dumps(summary['judge_errors'])}`" if summary.get("judge_errors") else ""
    return "\n\n".join([
        f"# lwm eval: {run.get('model')}",
        f"lwm {run.get('lwm_version')}, finished {run.get('finished_at')}; data `{run.get('data')}`.  \n"
        f"Sampling: `{dumps(run.get('sampling'))}`; history budget {run.get('max_prompt_tokens')} tokens; "
        f"judge: {run.get('judge') or 'none'}.",
        "## By domain (metrics ×100)", md(summary["domains"], "domain"),
        "## By turn depth", md(summary["depth"], "turn"),
        f"Macro: `{dumps(summary['macro'])}`  \nMicro: `{dumps(summary['micro'])}`",
        f"Rows: {summary['rows']}; failed: {summary['failed']} {dumps(summary['errors'])}; "
        f"parse issues: `{dumps(summary['parse_issues'])}`{judge_errors}",
        *(line for line in (candidates_line(summary), certain_line(summary)) if line),
    ]) + "\n"


def write_reports(out: Path, summary: dict) -> None:
    """Write ``summary.json`` and ``report.md`` atomically."""
    write_atomic(Path(out) / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    write_atomic(Path(out) / "report.md", to_markdown(summary))
