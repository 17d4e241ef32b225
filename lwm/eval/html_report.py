"""One self-contained HTML page for one or several run directories (``lwm report``).

The page opens from disk on an offline laptop: no network, no CDN. It has, per kind of
run, a first screen read in a minute where the kind has one (``lwm eval``: the headline,
line F1, in one sentence against the trivial reference's on the same rows; a small table
of the main metrics by domain, each heading saying ×100; bar charts of them on a fixed
0–100 axis), then, behind an "All metrics" fold there, the headline table with every
column and the breakdowns (by domain, by turn depth…) with the runs side by side and more
static SVG charts (other kinds show these first); the run settings, folded; then a row
viewer (``lwm eval``: action, real observation and each run's prediction, line diff,
volatile spans shaded, filters, worst first, a permalink per row, rows where the runs
differ one click away) and an episode viewer (``lwm rollout`` and ``lwm wm2real``: every
step with its provenance, the reward and the reward model's rationale, the simulated
observation beside the real one's scores).

Decisions:

* **Hostile content stays text.** Observations are arbitrary program output. Rows are
  embedded once as JSON in a ``<script type="application/json">`` block with ``<``, ``>``
  and ``&`` written as ``\\u003c``… (so ``</script>`` and ``<!--`` inside cannot end or
  comment it), and the page's script inserts them with ``textContent`` and text nodes,
  never as HTML; control characters (ANSI escapes) are shown as their Unicode control
  pictures (ESC as ``␛``). Everything the template writes is autoescaped by jinja2. A
  Content-Security-Policy allows only the page's own script (by its SHA-256) and no
  network at all, so even an escaping mistake could not run a script or fetch anything.
* **Large runs** (10,000 rows): the row and episode lists render 100 entries at a time as
  the user scrolls (an IntersectionObserver), and a row's detail is built when it is
  opened. Observations longer than :data:`CUT_CHARS` are cut with a visible marker; the
  full text is in the page, one click away. Figures: ``bench/html_report.py``.
* **Line diff in Python with difflib** (the standard library's, well tested): the diff is
  computed once when the report is written and embedded as ``SequenceMatcher`` opcodes (a
  few integers per row: the page already holds both texts), so the page needs no diff
  code of its own and opens a row instantly. Texts over :data:`DIFF_MAX_LINES` lines are
  not diffed (the page says so): difflib is quadratic in the worst case.
* **Charts on a fixed scale.** A bar's length is its value against the metric's whole range
  (0–100 for metrics ×100, 0–1 for rates: :attr:`Run.chart_max`), never against the
  largest value drawn, so one exact row in 81 (1.23) draws a sliver, not a full bar. The
  first screen's charts are drawn here (:func:`scale_chart`: horizontal bars, the value
  written at each end, a reference in grey); the others with pygal, its axis fixed.
* **Charts with pygal** (pure Python, no dependency beyond the standard library): static
  SVG inlined in the page. pygal always adds a small inline ``<script>`` (configuration
  for its optional tooltip script, which it would load from a CDN); the charts are made
  with ``js=[]`` and that script is removed, so the charts are plain SVG and the page's
  script policy stays strict.

Adding a run kind
-----------------
A kind of run directory is one function that reads it into a :class:`Run`, registered with
the files that identify it. Kinds are tried in registration order; the first whose marker
files all exist wins. Every field of :class:`Run` is optional and drawn generically, so a
new kind needs no change to the page::

    @run_kind("agent-eval", "agent_eval.jsonl")
    def _load_agent_eval(path: Path) -> Run:
        records = [obj for _, obj in iter_jsonl(path / "agent_eval.jsonl")]
        return Run(settings=read_json(path / "run.json"),
                   headline={"episodes": len(records), "success": ...},
                   groups={"domain": {...}}, chart_metrics=("success",),
                   episodes=[_episode(...) for ...])

A training kind can reuse :func:`series_from_log_history` for its curves.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from lwm import __version__
from lwm.errors import DataNotFoundError, LwmError, RowFormatError
from lwm.eval.judge import normalize
from lwm.jsonl import iter_jsonl, read_json, write_atomic
from lwm.metrics import FIDELITY_METRICS, HEADLINE_METRIC, METRIC_LABELS
from lwm.models import REFERENCE_PREFIX, is_reference
from lwm.parse import observation_text
from lwm.schema import parse_prompt_item, read_trajectories

#: Characters of an observation shown before the "cut" marker (the rest is one click away).
CUT_CHARS = 20_000
#: Texts longer than this (lines of both together) are not line-diffed: difflib's matcher
#: is quadratic and worse on texts of many equal lines (blank-heavy screens: 2,000 lines
#: took 42 s on 2 cores), and a report must stay quick to write.
DIFF_MAX_LINES = 600
#: Section titles of the known kinds (others are titled by their name).
KIND_TITLES = {"eval": "World-model evaluation (lwm eval)", "rollout": "Rollouts (lwm rollout)",
               "collect": "Real episodes (lwm collect)", "agent eval": "Agents (lwm agent eval)",
               "wm2real": "Simulated vs real (lwm wm2real)", "train": "Training (lwm train)"}
#: What the numbers of a kind's first screen mean, said under its headline.
KIND_HELP = {"eval": "Line F1: how well the predicted lines match the real observation's lines (an F1 score); "
                     "exact: the share of rows predicted exactly (volatile spans such as times match anything); "
                     "edit similarity: 1 − edit distance / length. All ×100: 100 is perfect. The trivial reference, "
                     "baseline:trivial, is each domain's one-line guess that needs no model: a world model should "
                     "beat it."}

Point = tuple[float, float]


@dataclass
class Run:
    """What the page shows of one run directory; every field is optional.

    Attributes:
        settings: the run's settings as a key/value table (model, sampling, data, date…);
            nested values are shown as JSON.
        headline: one row of the kind's headline table, ``{column: value}``.
        groups: breakdowns compared across runs of the kind, ``{group: {name: {column:
            value}}}``, e.g. ``{"domain": {"db": {"rows": 12, "exact": 41.67}}}``.
        chart_metrics: columns of ``groups`` drawn as bar charts (one chart per group and
            metric, one bar per run).
        series: curves against step, ``{chart title: {line name: [(step, value), …]}}``.
        tables: extra tables, ``(title, header, rows)``.
        rows: row-viewer records (see :func:`_eval_rows`); rows of several runs with the
            same ``join`` key are shown together.
        episodes: episode-viewer records (see :func:`_episode`).
        warnings: shown at the top of the page.
        overview: sentences that open the kind's section (the headline in words); ``{run}``
            stands for the run's label, text between ``**`` is shown bold.
        main: the few columns of the first group shown first, in a small table (one line
            per group entry and run, then ``main_total``) and, those in ``chart_metrics``,
            as bar charts on a fixed axis; with ``main``, the wide tables are folded under
            "All metrics".
        main_total: the last line of the small table, ``(name, {column: value})`` (e.g.
            the mean over domains).
        heads: column headings (the unit included, e.g. ``"line F1 ×100"``); others are
            the column name.
        references: a main column → ``(column, name)`` of a reference's value on the same
            entries, drawn beside it in its chart (e.g. the trivial guess's line F1).
        chart_max: the top of every bar chart's value axis, fixed (100 for metrics ×100, 1
            for rates), so that a small value draws a small bar; None scales it to the
            values. A value above it widens the axis.
        kind, path, label: set by :func:`load_run` and :func:`write_html_report`.
    """

    settings: dict[str, Any] = field(default_factory=dict)
    headline: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    chart_metrics: tuple[str, ...] = ()
    series: dict[str, dict[str, list[Point]]] = field(default_factory=dict)
    tables: list[tuple[str, list[str], list[list[Any]]]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    overview: list[str] = field(default_factory=list)
    main: tuple[str, ...] = ()
    main_total: tuple[str, dict[str, Any]] | None = None
    heads: dict[str, str] = field(default_factory=dict)
    references: dict[str, tuple[str, str]] = field(default_factory=dict)
    chart_max: float | None = None
    kind: str = ""
    path: Path = Path()
    label: str = ""


Loader = Callable[[Path], Run]
_KINDS: list[tuple[str, tuple[str, ...], Loader]] = []


def run_kind(name: str, *markers: str) -> Callable[[Loader], Loader]:
    """Register ``loader(path) -> Run`` for directories that hold every file in ``markers``."""
    def register(loader: Loader) -> Loader:
        _KINDS.append((name, markers, loader))
        return loader
    return register


def detect_kind(path: Path) -> str:
    """The kind of run directory ``path`` (the first registered kind whose files it holds).

    Raises:
        DataNotFoundError: ``path`` is not a directory, or holds no known run.
    """
    path = Path(path)
    if not path.is_dir():
        raise DataNotFoundError(f"{path}: no such run directory")
    for name, markers, _ in _KINDS:
        if all((path / m).is_file() for m in markers):
            return name
    known = "; ".join(f"{' + '.join(m)} ({n})" for n, m, _ in _KINDS)
    unfinished = " (it holds *.partial.jsonl: an unfinished run; finish it by re-running its command)" if any(
        path.glob("*.partial.jsonl")) else ""
    raise DataNotFoundError(f"{path} is not a run directory lwm knows: expected {known}{unfinished}")


def load_run(path: Path) -> Run:
    """Read one run directory into a :class:`Run`.

    Raises:
        DataNotFoundError: see :func:`detect_kind`.
        RowFormatError: a corrupt JSON or JSONL file (names the file and line).
    """
    path = Path(path)
    kind = detect_kind(path)
    try:
        run = next(loader for name, _, loader in _KINDS if name == kind)(path)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as e:
        if isinstance(e, LwmError):
            raise
        article = "an" if kind[0] in "aeiou" else "a"
        raise RowFormatError(path, 0, f"{article} {kind} run whose files lwm did not write this way "
                                      f"({type(e).__name__}: {e}); re-run the command that made it") from None
    run.kind, run.path = kind, path
    return run


# ----------------------------------------------------------------------------- lwm eval


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100 * x, 1)


def _diff(real: str, pred: str) -> list[list] | None:
    """Line opcodes ``[tag, i1, i2, j1, j2]`` turning ``real`` into ``pred`` (tag: e, r, d, i),
    or None when either text is too long to diff."""
    a, b = real.split("\n"), pred.split("\n")
    if len(a) + len(b) > DIFF_MAX_LINES:
        return None
    return [[tag[0], i1, i2, j1, j2] for tag, i1, i2, j1, j2 in
            difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()]


def _utf16(text: str, spans: list) -> list[list[int]]:
    """Code-point spans as the UTF-16 offsets JavaScript strings use."""
    def at(i: int) -> int:
        return len(text[:i].encode("utf-16-le")) // 2
    return [[at(s), at(e)] for s, e in spans]


def _judge_pct(judge: dict | None) -> float | None:
    if not judge:
        return None
    if judge.get("mode") == "score":
        return None if judge.get("total") is None else round(normalize(judge["total"]), 1)
    return _pct(judge.get("wins"))


def _find_data(path: Path, recorded: str | None) -> Path | None:
    # The recorded path is relative to where `lwm eval` ran; without --data it collected into <run>/data.
    for candidate in ([Path(recorded)] if recorded else []) + [path / "data"]:
        if candidate.exists():
            return candidate
    return None


def _score_trivial(records: list[dict], truth: dict[str, Any]) -> int:
    """Score ``baseline:trivial`` beside each prediction of a run that did not record it (no
    record has ``trivial_fidelity``: a run written before lwm did), as
    :func:`lwm.eval.runner.score_rows` scores it when a run ends, on the rows in ``truth``
    (join key → row); the records are completed in memory. Returns how many were scored."""
    from lwm.eval.runner import row_key, score_rows

    if any("trivial_fidelity" in r for r in records):
        return 0
    scored = 0
    for rec in records:
        row = truth.get(rec["key"].split("-", 1)[-1])
        if row is None or rec.get("error") is not None or rec.get("observation") is None:
            continue
        (again,) = score_rows([row], {row_key(0, row): rec}, {})
        if "trivial_fidelity" in again:  # absent where the row has no action the guess can read
            rec["trivial_fidelity"] = again["trivial_fidelity"]
            scored += 1
    return scored


def _eval_rows(path: Path, records: list[dict], recorded: str | None) -> tuple[list[dict], list[str], int | None]:
    """Row-viewer records of an eval run, with the action and real observation read from the data it
    recorded (``recorded``); the warnings; how many records :func:`_score_trivial` completed (None:
    the data is not found)."""
    # lwm.eval.report and .runner are imported here: they may write this report when a run ends.
    from lwm.eval.report import _depth
    from lwm.eval.runner import load_rows, row_key

    warnings, truth, data, scored = [], {}, _find_data(path, recorded), None
    if data is None:
        warnings.append(f"{path}: the data this run read is not found (recorded: {recorded}); "
                        "real observations and actions are not shown")
    else:
        truth = {row_key(i, r).split("-", 1)[1]: r for i, r in enumerate(load_rows(data))}
        scored = _score_trivial(records, truth)
    out, unmatched = [], 0
    for rec in records:
        join = rec["key"].split("-", 1)[-1]
        row = truth.get(join)
        unmatched += bool(truth) and row is None
        real = observation_text(row.ground_truth) if row else None
        action = None
        if row:
            action = parse_prompt_item(row.current_prompt)[0] or row.current_prompt
        fid, err = rec.get("fidelity") or {}, rec.get("error")
        obs = rec.get("observation")
        pred = {"o": obs, "err": err, "iss": rec.get("parse_issues") or [], "dr": len(rec.get("dropped_turns") or []),
                "m": {**{m: _pct(fid.get(m)) for m in FIDELITY_METRICS}, "judge": _judge_pct(rec.get("judge"))}}
        if rec.get("reasoning"):
            pred["rs"] = rec["reasoning"]
        if rec.get("output") and rec.get("output") != obs:
            pred["out"] = rec["output"]
        if rec.get("judge"):
            pred["jd"] = {k: v for k, v in rec["judge"].items() if k not in ("mode",)}
        if real is not None and obs is not None:
            pred["df"] = _diff(real, obs)
        out.append({"join": join, "k": rec["key"], "d": rec["domain"], "id": str(rec.get("id")),
                    "t": rec["turn_idx"], "dep": _depth(rec["turn_idx"]), "a": action, "r": real,
                    "v": _utf16(real, row.volatile) if row and real else [], "p": pred})
    if unmatched:
        warnings.append(f"{path}: {unmatched} of {len(records)} predictions have no row in {data} (the data changed "
                        "after the run?); their real observations are not shown")
    return out, warnings, scored


#: Headings of the eval columns shown first (the unit said: metrics are ×100).
_HEADLINE_FIRST = (HEADLINE_METRIC, *(m for m in FIDELITY_METRICS if m != HEADLINE_METRIC))
_EVAL_HEADS = {HEADLINE_METRIC: f"{METRIC_LABELS[HEADLINE_METRIC]} ×100",
               f"trivial_{HEADLINE_METRIC}": f"trivial reference: {METRIC_LABELS[HEADLINE_METRIC]} ×100",
               **{m: f"{METRIC_LABELS[m]} ×100" for m in _HEADLINE_FIRST[1:]},
               "judge_score": "judge score ×100", "judge_wins": "judge wins ×100"}


def _one(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"


def _eval_headline(summary: dict, model: str, scored_here: int | None) -> str:
    """The headline of an eval run in one sentence: its line F1 against the trivial reference's on
    the same rows (``{run}`` stands for the run's label, ``**`` marks the numbers)."""
    domains, rows, failed = summary["domains"], summary["rows"], summary["failed"]
    line_f1 = summary["macro"].get("line_f1")
    if line_f1 is None:
        return f"{{run}} ({model}): no row produced a prediction ({failed:,} of {rows:,} failed), nothing to score."
    mean = f"mean of {len(domains)} domains" if len(domains) > 1 else f"domain {next(iter(domains))}"
    head = f"Line F1 (the headline score, ×100, {mean}): **{_one(line_f1)}** for {{run}}" + (
        f" ({model})" if model else "")
    scored = f"{rows - failed:,} of {rows:,} rows ({failed:,} failed)" if failed else f"{rows:,} rows"
    if model == f"{REFERENCE_PREFIX}trivial":
        return f"{head}, the trivial reference itself, on {scored}."
    covered = [d for d, g in domains.items() if g.get("trivial_line_f1") is not None]
    if not covered:
        why = ("the data this run read is not found" if scored_here is None else
               "no row has an action the guess can read")
        return f"{head} on {scored}; the trivial reference (baseline:trivial) is not available: {why}."
    note = " (scored by this report: the run did not record it)" if scored_here else ""
    trivial = f"**{_one(summary['macro']['trivial_line_f1'])}**"
    if len(covered) == len(domains):
        return f"{head} against {trivial} for the trivial reference (baseline:trivial){note} on the same {scored}."
    own = f"**{_one(sum(domains[d]['line_f1'] for d in covered) / len(covered))}**"
    return (f"{head} on {scored}; on the rows of {', '.join(covered)} ({len(covered)} of {len(domains)} domains, "
            f"where the trivial reference has a guess): {own} against {trivial} for the trivial reference "
            f"(baseline:trivial){note}.")


@run_kind("eval", "predictions.jsonl")
def _load_eval(path: Path) -> Run:
    from lwm.eval.report import summarize

    records = [obj for _, obj in iter_jsonl(path / "predictions.jsonl")]
    info = read_json(path / "summary.json").get("run", {}) if (path / "summary.json").is_file() else (
        read_json(path / "run.json") if (path / "run.json").is_file() else {})
    rows, warnings, scored_here = _eval_rows(path, records, info.get("data"))  # first: it may score the reference
    summary = summarize(records, info)
    model = str(info.get("model", ""))

    def counts(d: dict) -> str:
        return ", ".join(f"{k} {n}" for k, n in d.items())

    headline: dict[str, Any] = {"model": model, "reference": "yes" if is_reference(model) else "",
                                "rows": summary["rows"], "failed": summary["failed"]}
    headline |= {f"macro {k}": v for k, v in summary["macro"].items()}
    headline |= {f"micro {k}": v for k, v in summary["micro"].items()}
    headline |= {"parse issue rows": sum(g["parse_issue_rows"] for g in summary["domains"].values()),
                 "truncated history rows": sum(g["truncated_history_rows"] for g in summary["domains"].values()),
                 "errors": counts(summary["errors"]), "parse issues": counts(summary["parse_issues"])}
    main = ("rows", *(("failed",) if summary["failed"] else ()),
            *(m for m in _EVAL_HEADS if m in summary["macro"]))
    return Run(settings=info, headline=headline,
               groups={"domain": summary["domains"], "turn depth": summary["depth"]},
               chart_metrics=(*_HEADLINE_FIRST, "judge_score", "judge_wins"),
               rows=rows, warnings=warnings, overview=[_eval_headline(summary, model, scored_here)], main=main,
               main_total=("all (mean of domains)" if len(summary["domains"]) > 1 else "all",
                           {"rows": summary["rows"], "failed": summary["failed"], **summary["macro"]}),
               heads=_EVAL_HEADS, chart_max=100,
               references={"line_f1": ("trivial_line_f1", "trivial reference (baseline:trivial)")})


# ------------------------------------------------------------------ rollout, wm2real


def _provenance_label(p: Any) -> str:
    parts = [p.kind, p.source]
    if p.run is not None:
        parts.append(f"run {p.run}")
    if p.sampling:
        parts.append(json.dumps(p.sampling, sort_keys=True))
    if p.controls:
        parts.append("controls: " + ", ".join(p.controls))
    return " · ".join(x for x in parts if x)


def _episode(traj: Any) -> dict[str, Any]:
    """Episode-viewer record of a :class:`lwm.schema.Trajectory`."""
    meta = dict(traj.metadata)
    why = meta.pop("reward_rationale", None)
    return {"id": traj.id, "d": traj.domain, "task": traj.task, "rw": traj.reward, "why": why,
            "init": traj.initial_observation, "meta": meta,
            "st": [{"t": t.index, "a": t.action, "o": t.observation, "pk": t.provenance.kind,
                    "pv": _provenance_label(t.provenance), "v": _utf16(t.observation, t.volatile)}
                   for t in traj.turns]}


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


@run_kind("collect", "trajectories.jsonl", "manifest.json")  # registered second: a rollout holds both files
@run_kind("rollout", "trajectories.jsonl", "rollout.json")
def _load_rollout(path: Path) -> Run:
    manifest = read_json(path / "manifest.json")
    trajs = list(read_trajectories(path / "trajectories.jsonl"))
    by_domain: dict[str, list] = defaultdict(list)
    for t in trajs:
        by_domain[t.domain].append(t)

    def stats(ts: list) -> dict[str, Any]:
        rewards = [t.reward for t in ts if t.reward is not None]
        return {"episodes": len(ts), "rewarded": len(rewards), "mean_reward": _mean(rewards),
                "success": _mean([1.0 if r >= 0.5 else 0.0 for r in rewards]),
                "steps": sum(len(t.turns) for t in ts)}

    kinds = Counter(turn.provenance.kind for t in trajs for turn in t.turns)
    failed = manifest.get("failed") or {}
    settings = {k: v for k, v in manifest.items() if k != "failed"}
    return Run(settings=settings,
               headline={**stats(trajs), "failed": len(failed), **{f"{k} steps": n for k, n in sorted(kinds.items())}},
               groups={"domain": {d: stats(ts) for d, ts in sorted(by_domain.items())}},
               chart_metrics=("success", "mean_reward"), chart_max=1,
               tables=[("Failed episodes", ["episode", "error"], sorted(failed.items()))] if failed else [],
               episodes=[_episode(t) for t in trajs])


@run_kind("agent eval", "episodes.jsonl", "agent_eval.json")
def _load_agent_eval(path: Path) -> Run:
    summary = read_json(path / "summary.json")
    episodes = list(read_trajectories(path / "episodes.jsonl"))

    def row(g: dict[str, Any]) -> dict[str, Any]:
        out = {"success": g["success"]["rate"], "n": g["success"]["n"],
               "ci95": " – ".join(f"{x:.3f}" for x in g["success"]["ci95"]) if g["success"]["ci95"] else None,
               "valid_action_rate": g["valid_action_rate"], "mean_turns": g["mean_turns"],
               "real_steps": g["real_steps"]}
        if "real_success_of_simulated_actions" in g:
            out.update(real_success_of_simulated_actions=g["real_success_of_simulated_actions"]["rate"],
                       sim_to_real_ratio=g["sim_to_real_ratio"], false_successes=g["false_successes"])
        return out

    failed = summary.get("failed") or {}
    return Run(settings={**summary.get("settings", {}), "backend": summary["backend"]},
               headline={**row(summary["overall"]), "failed": len(failed)},
               groups={"domain": {d: row(g) for d, g in summary["domains"].items()}},
               chart_metrics=("success", "valid_action_rate"), chart_max=1,
               tables=[("Failed episodes", ["episode", "error"], sorted(failed.items()))] if failed else [],
               episodes=[_episode(t) for t in episodes])


@run_kind("wm2real", "wm2real.jsonl")
def _load_wm2real(path: Path) -> Run:
    records = [obj for _, obj in iter_jsonl(path / "wm2real.jsonl")]
    summary = read_json(path / "summary.json") if (path / "summary.json").is_file() else {}
    by_depth: dict[int, list] = defaultdict(list)
    for r in records:
        for s in r.get("steps", []):
            by_depth[s["turn"]].append(s)
    depth = {str(t): {"steps": len(ss), **{m: _pct(_mean([s[m] for s in ss])) for m in FIDELITY_METRICS}}
             for t, ss in sorted(by_depth.items())}
    judged = [r for r in records if "agree" in r]
    cell = Counter((r["sim_reward"] >= 0.5, r["real_reward"] >= 0.5) for r in judged)
    confusion = ("Reward model against the real verifier (episodes with both rewards; achieved = reward ≥ 0.5)",
                 ["", "real: achieved", "real: not achieved"],
                 [["simulated: achieved", cell[True, True], cell[True, False]],
                  ["simulated: not achieved", cell[False, True], cell[False, False]]])
    all_steps = [s for ss in by_depth.values() for s in ss]
    headline = {"trajectories": len(records), "steps": len(all_steps),
                **{m: _pct(_mean([s[m] for s in all_steps])) for m in FIDELITY_METRICS},
                "with both rewards": len(judged),
                "reward agreement": _pct(_mean([1.0 if r["agree"] else 0.0 for r in judged])),
                "false success": _pct(_mean([1.0 if r["false_success"] else 0.0 for r in judged])),
                "failed": len(summary.get("failed") or {})}
    episodes = [{"id": r["id"], "d": r["domain"], "task": "", "rw": r.get("sim_reward"),
                 "extra": {"task": r.get("task"), "real reward": r.get("real_reward"), "agree": r.get("agree"),
                           "false success": r.get("false_success")},
                 "st": [{"t": s["turn"], "pk": s.get("kind"), "real": s.get("real_observation"),
                         "m": {m: _pct(s.get(m)) for m in FIDELITY_METRICS}} for s in r.get("steps", [])]}
                for r in records]
    return Run(settings={"file": str(path / "wm2real.jsonl")}, headline=headline, groups={"turn": depth},
               chart_metrics=_HEADLINE_FIRST, chart_max=100,
               tables=[confusion] if judged else [], episodes=episodes)


def _join_wm2real(runs: list[Run]) -> None:
    """Give wm2real steps the action and simulated observation of the rollout run (if given) they replayed."""
    played = {ep["id"]: ep for r in runs if r.kind == "rollout" for ep in r.episodes}
    for r in runs:
        if r.kind != "wm2real":
            continue
        missing = 0
        for ep in r.episodes:
            sim = played.get(ep["id"])
            if sim is None:
                missing += 1
                continue
            steps = {s["t"]: s for s in sim["st"]}
            ep |= {"task": sim["task"], "init": sim["init"], "why": sim["why"]}
            for s in ep["st"]:
                if s["t"] in steps:
                    s |= {k: steps[s["t"]][k] for k in ("a", "o", "pv", "v")}
        if missing:
            r.warnings.append(f"{r.path}: {missing} of {len(r.episodes)} episodes are not in a rollout run given "
                              "to this report; pass the run that produced its trajectories to see their steps")


def _compare_agent_evals(runs: list[Run]) -> None:
    """Give the first of several agent eval runs the tables of :func:`lwm.eval.compare.compare_agent_runs`:
    the runs task by task against it (or a warning saying why they cannot be)."""
    from lwm.eval.agent import format_rate
    from lwm.eval.compare import FAMILY_HEAD, PAIRED_HEAD, compare_agent_runs

    agents = [r for r in runs if r.kind == "agent eval"]
    if len(agents) < 2:
        return
    try:
        c = compare_agent_runs([r.path for r in agents])
    except (ValueError, LwmError) as e:
        agents[0].warnings.append(f"the agent eval runs are not compared task by task: {e}")
        return
    labels = [r.label for r in agents]
    rows = [[label, policy, format_rate(rate), *c.paired_cells(i)]
            for i, (label, policy, rate) in enumerate(zip(labels, c.policies, c.overall))]
    agents[0].tables += [
        (f"the runs task by task, this one the baseline ({c.tasks} tasks, the same for every run)",
         ["run", "policy", "success ± 95% CI", *PAIRED_HEAD], rows),
        ("successes per family", [*FAMILY_HEAD, *labels], c.family_rows())]
    agents[0].warnings += [f"the agent eval runs differ in {k} ({', '.join(map(str, v))}): their rates measure "
                           "different things" for k, v in c.differing.items()]


# ----------------------------------------------------------------------------- training

#: log_history keys that are bookkeeping, not curves.
_NOT_CURVES = re.compile(r"(^|_)(step|epoch|runtime|per_second|flos|total_flos)$")


def series_from_log_history(log_history: list[dict]) -> dict[str, dict[str, list[Point]]]:
    """Curves of a Hugging Face ``TrainerState.log_history`` (list of dicts with ``step``):
    every numeric key except bookkeeping (runtime, throughput, FLOs, epoch), as
    ``{chart title: {key: [(step, value), …]}}``; keys ending in ``loss`` share the first
    chart, keys containing ``reward`` the second, every other key has its own."""
    lines: dict[str, list[Point]] = defaultdict(list)
    for entry in log_history:
        step = entry.get("step")
        if not isinstance(step, (int, float)):
            continue
        for k, v in entry.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and not _NOT_CURVES.search(k):
                lines[k].append((step, v))
    charts: dict[str, dict[str, list[Point]]] = {"loss": {}, "reward": {}}
    for k, pts in lines.items():
        charts.setdefault("loss" if k.endswith("loss") else "reward" if "reward" in k else k, {})[k] = pts
    return {title: lines for title, lines in charts.items() if lines}


def _last_trainer_state(path: Path) -> Path | None:
    checkpoints = [p for p in path.glob("checkpoint-*/trainer_state.json") if p.parent.name[11:].isdigit()]
    return max(checkpoints, key=lambda p: int(p.parent.name[11:]), default=None)


@run_kind("train", "lwm_train.json")
def _load_train(path: Path) -> Run:
    run_file = read_json(path / "lwm_train.json")
    metrics = read_json(path / "metrics.json") if (path / "metrics.json").is_file() else {}
    state = _last_trainer_state(path)
    history = read_json(state).get("log_history", []) if state else []
    warnings = [] if metrics or history else [f"{path}: no metrics.json and no checkpoint yet"]
    headline = {k: v for k, v in metrics.items() if k not in ("out", "output_dir")}
    if state:
        headline["curves from"] = str(state.relative_to(path))
    return Run(settings=run_file.get("config", run_file), headline=headline,
               series=series_from_log_history(history), warnings=warnings)


# ----------------------------------------------------------------------------- charts


def _svg(chart: Any) -> str:
    """The chart as plain SVG: pygal's inline configuration script removed (see the module docstring)."""
    from pygal.etree import etree

    root = chart.render_tree()
    for parent in list(root.iter()):
        for child in list(parent):
            if isinstance(child.tag, str) and child.tag.rsplit("}", 1)[-1] == "script":
                parent.remove(child)
    return etree.tostring(root, encoding="unicode")


#: Colours of the charts' series, in order; a reference is drawn in :data:`REFERENCE_COLOR`.
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
REFERENCE_COLOR = "#b4b9be"


def _chart_config(title: str) -> Any:
    import pygal
    from pygal.style import Style

    style = Style(background="white", plot_background="white", font_family="sans-serif", title_font_size=14,
                  legend_font_size=12, label_font_size=11, major_label_font_size=11, colors=COLORS)
    return pygal.Config(js=[], disable_xml_declaration=True, title=title, width=560, height=300, style=style,
                        legend_at_bottom=True, truncate_legend=40, truncate_label=20, max_scale=6, include_x_axis=True)


def bar_chart(title: str, labels: list[str], bars: dict[str, list[float | None]], top: float | None = None) -> str:
    """A grouped bar chart as SVG: ``labels`` on the x axis, one bar per entry of ``bars`` (name → values);
    the value axis from 0 to ``top`` (widened to a larger value) when given, else scaled to the values."""
    import pygal

    fixed = {} if top is None else {"range": (0, max([top, *(v for vs in bars.values() for v in vs if v is not None)]))}
    chart = pygal.Bar(_chart_config(title), x_labels=labels, **fixed)
    for name, values in bars.items():
        chart.add(name, values)
    return _svg(chart)


def scale_chart(title: str, labels: list[str], bars: dict[str, list[float | None]], top: float = 100,
                references: tuple[str, ...] = ()) -> str:
    """A grouped horizontal bar chart as SVG on a fixed axis from 0 to ``top``: a value ``v``
    draws a bar ``v / top`` of the axis long whatever the other values are, and is written
    at its end. One line of bars per entry of ``labels``, one bar per entry of ``bars`` (name →
    one value per label; None draws no bar); the series named in ``references`` are grey.
    A value above ``top`` widens the axis to it."""
    from html import escape

    top = max([top, *(v for vs in bars.values() for v in vs if v is not None)])
    width, bar_h, gap, group_gap, value_w = 420, 13, 2, 10, 46
    label_w = min(140, 14 + 7 * max((len(label) for label in labels), default=1))
    axis_w = width - label_w - value_w
    colors = iter(COLORS * (len(bars) // len(COLORS) + 1))
    color = {name: REFERENCE_COLOR if name in references else next(colors) for name in bars}

    def num(v: float) -> str:
        return f"{v:.1f}" if top >= 10 else f"{v:.2f}"

    def x_of(v: float) -> float:
        return round(label_w + axis_w * v / top, 2)

    out = [f'<text class="title" x="{width / 2}" y="17" text-anchor="middle" font-size="14">{escape(title)}</text>']
    x, y = 8.0, 38  # the legend: one entry per series, wrapped
    for name in bars:
        shown = name if len(name) <= 56 else name[:55] + "…"
        size = 18 + 6.6 * len(shown) + 14
        if x + size > width and x > 8:
            x, y = 8.0, y + 17
        out.append(f'<rect x="{x}" y="{y - 10}" width="11" height="11" fill="{color[name]}"/>'
                   f'<text x="{x + 16}" y="{y}" font-size="12"><title>{escape(name)}</title>{escape(shown)}</text>')
        x += size
    plot_y = y + 14
    group_h = len(bars) * bar_h + (len(bars) - 1) * gap
    plot_h = len(labels) * (group_h + group_gap) + group_gap
    out.append(f'<rect class="plot" x="{label_w}" y="{plot_y}" width="{axis_w}" height="{plot_h}" fill="none" '
               f'stroke="#c5ccd3" data-top="{top:g}"/>')
    for i in range(5):
        v = top * i / 4
        out.append(f'<line x1="{x_of(v)}" x2="{x_of(v)}" y1="{plot_y}" y2="{plot_y + plot_h + 4}" stroke="#e3e6e9"/>'
                   f'<text x="{x_of(v)}" y="{plot_y + plot_h + 17}" text-anchor="middle" font-size="11" '
                   f'fill="#5f6b76">{v:g}</text>')
    for i, label in enumerate(labels):
        gy = plot_y + group_gap + i * (group_h + group_gap)
        shown = label if len(label) <= 18 else label[:17] + "…"
        out.append(f'<text x="{label_w - 6}" y="{gy + group_h / 2 + 4}" text-anchor="end" font-size="12">'
                   f'<title>{escape(label)}</title>{escape(shown)}</text>')
        for j, (name, values) in enumerate(bars.items()):
            v, by = values[i], gy + j * (bar_h + gap)
            if v is None:
                out.append(f'<text x="{label_w + 4}" y="{by + bar_h - 2}" font-size="11" fill="#5f6b76">'
                           f'no value</text>')
                continue
            out.append(f'<rect class="bar" x="{label_w}" y="{by}" width="{x_of(v) - label_w:.2f}" height="{bar_h}" '
                       f'fill="{color[name]}" data-value="{v:g}"><title>{escape(label)} · {escape(name)}: {num(v)}'
                       f'</title></rect><text x="{x_of(v) + 4}" y="{by + bar_h - 2}" font-size="11">{num(v)}</text>')
    height = plot_y + plot_h + 24
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="scale-chart" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" font-family="sans-serif" '
            f'fill="#1d2125"><title>{escape(title)}</title>{"".join(out)}</svg>')


def line_chart(title: str, lines: dict[str, list[Point]]) -> str:
    """Curves against step as SVG: ``lines`` maps a name to ``[(step, value), …]``."""
    import pygal

    chart = pygal.XY(_chart_config(title), stroke=True, show_dots=False, x_title="step")
    for name, pts in lines.items():
        chart.add(name, sorted(pts))
    return _svg(chart)


# ----------------------------------------------------------------------------- page


def _cell(v: Any) -> str:
    if v is None or v == "":
        return "—"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    return str(v)


def _num(v: Any) -> str:
    if isinstance(v, float):
        return _one(v)
    return f"{v:,}" if isinstance(v, int) else _cell(v)


def _first_screen(runs: list[Run], group: str) -> dict[str, Any]:
    """The small table and the fixed-scale charts of the runs' ``main`` columns of ``group``."""
    cols = list(dict.fromkeys(c for r in runs for c in r.main))
    heads = {k: v for r in runs for k, v in r.heads.items()}
    names = list(dict.fromkeys(n for r in runs for n in r.groups.get(group, {})))
    rows = [{"cells": [n, r.label, *(_num(r.groups[group][n].get(c)) for c in cols)], "total": False}
            for n in names for r in runs if n in r.groups.get(group, {})]
    rows += [{"cells": [r.main_total[0], r.label, *(_num(r.main_total[1].get(c)) for c in cols)], "total": True}
             for r in runs if r.main_total]
    top = next((r.chart_max for r in runs if r.chart_max is not None), 100)
    charts = []
    for m in (c for c in cols if any(c in r.chart_metrics for r in runs)):
        bars = {r.label: [r.groups.get(group, {}).get(n, {}).get(m) for n in names] for r in runs}
        refs: dict[str, list] = {}
        for r in runs:
            if m in r.references:
                col, name = r.references[m]
                refs[f"{r.label}: {name}"] = [r.groups.get(group, {}).get(n, {}).get(col) for n in names]
        if len({tuple(vs) for vs in refs.values()}) == 1:  # the same rows: one reference
            refs = {next(r.references[m][1] for r in runs if m in r.references): next(iter(refs.values()))}
        # a reference that is one of the runs (baseline:trivial itself) is not drawn twice
        refs = {k: vs for k, vs in refs.items() if any(v is not None for v in vs) and vs not in bars.values()}
        if any(v is not None for vs in bars.values() for v in vs):
            charts.append(scale_chart(f"{heads.get(m, m)} by {group}", names, bars | refs, top, tuple(refs)))
    return {"group": group, "several": len(runs) > 1, "cols": [heads.get(c, c.replace("_", " ")) for c in cols],
            "rows": rows, "charts": charts, "metrics": cols}


def _section(kind: str, runs: list[Run]) -> dict[str, Any]:
    """Tables and charts of the runs of one kind, side by side: first the overview (sentences, a
    small table, fixed-scale charts) when a run has ``main`` columns, then the rest."""
    keys = list(dict.fromkeys(k for r in runs for k in r.settings))
    settings = [[k, *(_cell(r.settings.get(k)) for r in runs)] for k in keys]
    cols = list(dict.fromkeys(k for r in runs for k in r.headline))
    headline = [[r.label, *(_cell(r.headline.get(c)) for c in cols)] for r in runs]
    lead = next((r for r in runs if r.main and r.groups), None)
    first = _first_screen(runs, next(iter(lead.groups))) if lead else None
    top = next((r.chart_max for r in runs if r.chart_max is not None), None)
    groups, charts = [], []
    for g in dict.fromkeys(g for r in runs for g in r.groups):
        names = list(dict.fromkeys(n for r in runs for n in r.groups.get(g, {})))
        gcols = list(dict.fromkeys(c for r in runs for v in r.groups.get(g, {}).values() for c in v))
        table = [[n, r.label, *(_cell(r.groups.get(g, {}).get(n, {}).get(c)) for c in gcols)]
                 for n in names for r in runs if n in r.groups.get(g, {})]
        groups.append({"name": g, "cols": gcols, "rows": table, "runs": len(runs)})
        for m in dict.fromkeys(m for r in runs for m in r.chart_metrics):
            if first and g == first["group"] and m in first["metrics"]:
                continue  # drawn first
            bars = {r.label: [r.groups.get(g, {}).get(n, {}).get(m) for n in names] for r in runs}
            if any(v is not None for vs in bars.values() for v in vs):
                charts.append(bar_chart(f"{m.replace('_', ' ')} by {g}", names, bars, top))
    for title in dict.fromkeys(t for r in runs for t in r.series):
        lines = {(f"{r.label}: {k}" if len(runs) > 1 else k): pts
                 for r in runs for k, pts in r.series.get(title, {}).items()}
        charts.append(line_chart(f"{title} against step", lines))
    tables = [{"title": f"{r.label}: {t}" if len(runs) > 1 else t, "header": header,
               "rows": [[_cell(c) for c in row] for row in rows]} for r in runs for t, header, rows in r.tables]
    return {"kind": kind, "title": KIND_TITLES.get(kind, kind), "settings": settings, "settings_runs":
            [r.label for r in runs], "headline_cols": cols, "headline": headline, "groups": groups,
            "charts": charts, "tables": tables, "first": first, "help": KIND_HELP.get(kind, ""),
            "overview": [s.replace("{run}", r.label).split("**") for r in runs for s in r.overview]}


def _labels(paths: list[Path]) -> list[str]:
    """Short distinct labels: the directory name, with as many parents as needed to tell runs apart."""
    parts = [p.resolve().parts for p in paths]
    for depth in range(1, max(len(p) for p in parts) + 1):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{lab} #{i + 1}" for i, lab in enumerate(labels)]  # the same directory given twice


def _viewer_data(runs: list[Run]) -> dict[str, Any]:
    """Rows of every run joined by row content; episodes of every run."""
    row_runs = [i for i, r in enumerate(runs) if r.rows]
    merged: dict[str, dict] = {}
    for slot, i in enumerate(row_runs):
        for rec in runs[i].rows:
            entry = merged.setdefault(rec["join"], {**{k: v for k, v in rec.items() if k not in ("join", "p")},
                                                    "p": [None] * len(row_runs)})
            if entry["r"] is None and rec["r"] is not None:
                entry |= {"a": rec["a"], "r": rec["r"], "v": rec["v"]}
            entry["p"][slot] = rec["p"]
    episodes = [{**ep, "run": i} for i, r in enumerate(runs) for ep in r.episodes]
    return {"runs": [{"label": r.label, "kind": r.kind} for r in runs], "rowRuns": row_runs,
            "rows": list(merged.values()), "episodes": episodes, "cut": CUT_CHARS,
            # the row metrics the viewer shows and filters by, named as in every table
            "metrics": [[m, METRIC_LABELS[m]] for m in FIDELITY_METRICS] + [["judge", "judge"]]}


def _script_json(obj: Any) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' that could end or comment it. Text
    UTF-8 cannot encode (lone surrogates) makes it all-ASCII, as in :func:`lwm.jsonl.dumps`."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(runs: list[Run], *, title: str | None = None) -> str:
    """The page of already loaded runs (labels set), as a string."""
    import jinja2

    assets = resources.files("lwm.eval") / "report_assets"
    script = (assets / "report.js").read_text(encoding="utf-8")
    assert "</script" not in script.lower()  # it is inlined
    _join_wm2real(runs)
    _compare_agent_evals(runs)
    kinds = list(dict.fromkeys(r.kind for r in runs))
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    template = env.from_string((assets / "report.html.j2").read_text(encoding="utf-8"))
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    data = _viewer_data(runs)
    return template.render(
        title=title or "lwm report: " + ", ".join(r.label for r in runs),
        generated=datetime.now(timezone.utc).isoformat(timespec="seconds"), version=__version__,
        runs=runs, warnings=[w for r in runs for w in r.warnings],
        sections=[_section(k, [r for r in runs if r.kind == k]) for k in kinds],
        has_rows=bool(data["rows"]), has_episodes=bool(data["episodes"]), metrics=data["metrics"],
        css=(assets / "report.css").read_text(encoding="utf-8"), script=script, script_hash=digest,
        data=_script_json(data))


def check_report_path(out: Path, flag: str = "--out") -> None:
    """Refuse a report path that would overwrite something else: a directory, or an existing
    file that is not an HTML page.

    Raises:
        FileExistsError: it would (``flag`` named).
    """
    if out.is_dir() or (out.exists() and out.suffix.lower() not in (".html", ".htm")):
        raise FileExistsError(f"{flag} {out} exists and is not an HTML file: it would be overwritten")


def write_html_report(runs: list[Path], out: Path, *, title: str | None = None) -> Path:
    """Write one self-contained HTML page (no network needed) for one or several run directories.

    Args:
        runs: run directories of ``lwm eval`` (``predictions.jsonl``), ``lwm rollout``
            (``trajectories.jsonl`` + ``manifest.json``), ``lwm wm2real`` (``wm2real.jsonl``)
            or ``lwm train sft`` (``lwm_train.json``); runs of one kind are compared side
            by side, eval runs on the same rows row by row.
        out: the HTML file to write (atomically; parent directories are created).
        title: the page title (default: the runs' names).

    Returns:
        ``out``.

    Raises:
        DataNotFoundError: no run given, a path that is not a directory, or a directory
            that holds no known run (the message names it).
        RowFormatError: a corrupt JSON or JSONL file in a run (names the file and line).
    """
    if not runs:
        raise DataNotFoundError("no run directory given")
    out = Path(out)
    check_report_path(out)
    paths = [Path(p) for p in runs]
    loaded = [load_run(p) for p in paths]
    for run, label in zip(loaded, _labels(paths)):
        run.label = label
    row_sets = {r.label: {row["join"] for row in r.rows} for r in loaded if r.kind == "eval"}
    if len({frozenset(rows) for rows in row_sets.values()}) > 1:  # compared runs that saw different rows
        counts = ", ".join(f"{label}: {len(rows)}" for label, rows in row_sets.items())
        loaded[0].warnings.append(f"these eval runs predicted different rows ({counts}): their tables average over "
                                  "different rows; the row viewer shows each run where it has a prediction")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, render_html(loaded, title=title))
    return out
