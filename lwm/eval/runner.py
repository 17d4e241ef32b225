"""``lwm eval``: predict every row with a world model, score it, report.

Unlike the reference script, requests run concurrently, a crashed or interrupted run
resumes without redoing finished rows, every failure is counted, and decoding settings
are explicit and recorded. Output directory::

    predictions.partial.jsonl  one line per finished row, appended as rows finish
    judgments.partial.jsonl    the same for judge verdicts (with a judge)
    run.json                   the settings the run was started with (a resume must match)
    predictions.jsonl          final: every row in input order, with its scores
    summary.json, report.md    aggregate tables
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from lwm import __version__
from lwm.domains import comparator
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.eval.metrics import fidelity
from lwm.jsonl import JsonlAppender, check_run_settings, iter_jsonl, write_jsonl
from lwm.models.base import ChatModel, SamplingParams
from lwm.parse import DEFAULT_STOP, observation_text, parse_output
from lwm.progress import progress_bar
from lwm.prompts import build_messages
from lwm.schema import BenchRow, read_rows

JudgeMode = Literal["score", "real", "closer"]


@dataclass
class EvalConfig:
    """Settings of ``lwm eval`` (the CLI's flags mirror these fields).

    Attributes:
        out: run directory (resumed if it holds a partial run).
        data: AgentWorldBench directory (``{domain}_test.jsonl`` files) or one file.
        domains: only these domains.
        limit: only the first N rows (after the domain filter).
        sampling: decoding settings of the world model.
        max_prompt_tokens: history window budget in tokens (oldest turns dropped first).
        judge_mode: ``score`` (five-dimension rubric), ``real`` (which response is real,
            both orders) or ``closer`` (which of this run and ``baseline`` is closer to the
            ground truth, both orders).
        baseline: ``predictions.jsonl`` of another run, for ``judge_mode="closer"``.
        judge_sampling: decoding settings of the judge.
    """

    out: Path
    data: Path | None = None
    domains: tuple[str, ...] | None = None
    limit: int | None = None
    sampling: SamplingParams = field(
        default_factory=lambda: SamplingParams(temperature=0.0, max_tokens=320, stop=DEFAULT_STOP))
    max_prompt_tokens: int = 2048
    judge_mode: JudgeMode = "score"
    baseline: Path | None = None
    judge_sampling: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=0.0, max_tokens=1024))


def row_key(index: int, row: BenchRow) -> str:
    """Stable key of a row: its position and a hash of its content."""
    h = hashlib.sha1()
    for part in (row.task, str(row.id), str(row.turn_idx), row.system_str, row.current_prompt, row.ground_truth):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return f"{index:06d}-{h.hexdigest()[:12]}"


def load_rows(data: Path, domains: tuple[str, ...] | None = None, limit: int | None = None) -> list[BenchRow]:
    """Read AgentWorldBench rows from one file or a directory: its ``*_test.jsonl`` files,
    or, when it has none, those of its sub-directories (e.g. one ``lwm collect`` per domain).

    An empty file among others is reported on stderr.

    Raises:
        DataNotFoundError: no such file, not a regular file or directory, no ``*_test.jsonl``
            in the directory, or every file found is empty (names the files).
        RowFormatError: a malformed line (names file and line).
    """
    data = Path(data)
    if data.is_dir():
        files = sorted(data.glob("*_test.jsonl")) or sorted(data.glob("*/*_test.jsonl"))
        if not files:
            raise DataNotFoundError(f"no *_test.jsonl files in {data}")
    elif data.is_file():
        files = [data]
    elif data.exists():
        raise DataNotFoundError(f"{data} is not a regular file or a directory")
    else:
        raise DataNotFoundError(f"{data} does not exist")
    rows, empty = [], []
    for f in files:
        file_rows = list(read_rows(f))
        rows += file_rows
        if not file_rows:
            empty.append(str(f))
    if empty:
        if not rows:
            raise DataNotFoundError(f"no rows: {', '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty")
        print(f"warning: no rows in {', '.join(empty)} (empty)", file=sys.stderr)
    rows = [r for r in rows if not domains or r.domain in domains]
    return rows[:limit] if limit else rows


def _load_partial(path: Path) -> dict[str, dict]:
    records: dict[str, dict] = {}
    if path.exists():
        for line, obj in iter_jsonl(path, skip_truncated_tail=True):
            if not isinstance(obj.get("key"), str):
                raise RowFormatError(path, line, "a record without its 'key' (delete the line to redo the row)")
            records[obj["key"]] = obj
    return records


def load_baseline(config: EvalConfig) -> dict[str, dict]:
    """Predictions of another run, by row key, for ``judge_mode="closer"``.

    Raises:
        DataNotFoundError: no baseline given, or the file is missing.
        RowFormatError: a line without ``key`` or ``observation``.
    """
    if not config.baseline:
        raise DataNotFoundError("judge mode 'closer' needs --baseline PREDICTIONS.jsonl")
    if not Path(config.baseline).is_file():
        raise DataNotFoundError(f"baseline {config.baseline} does not exist")
    out = {}
    for line, obj in iter_jsonl(config.baseline):
        if not isinstance(obj.get("key"), str) or not isinstance(obj.get("observation", ""), str):
            raise RowFormatError(config.baseline, line, "not a predictions.jsonl record (needs 'key')")
        out[obj["key"]] = obj
    return out


async def _in_order_tasks(coros):
    """Yield results as they finish. Tasks are created in list order (``as_completed``
    alone would shuffle them), so a local model sees an episode's turns one after another;
    on an exception or interruption the unfinished tasks are cancelled."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        for fut in asyncio.as_completed(tasks):
            yield await fut
    finally:
        for t in tasks:
            t.cancel()


async def predict_rows(
    rows: list[BenchRow], model: ChatModel, config: EvalConfig, *, show_progress: bool = True
) -> tuple[dict[str, dict], int]:
    """Predict every row not yet done in ``predictions.partial.jsonl``.

    Returns:
        ``(records by row key, rows predicted by this call)``.
    """
    path = Path(config.out) / "predictions.partial.jsonl"
    records = _load_partial(path)
    # Rows that failed before are tried again: the last record of a key wins.
    todo = [(k, r) for i, r in enumerate(rows) if (rec := records.get(k := row_key(i, r))) is None or rec.get("error")]
    if len(todo) < len(rows):
        print(f"resuming {config.out}: {len(rows) - len(todo)} of {len(rows)} rows already done", file=sys.stderr)
    sampling = config.sampling.to_dict()

    async def one(key: str, row: BenchRow) -> dict:
        rec: dict[str, Any] = {"key": key, "domain": row.domain, "id": row.id, "turn_idx": row.turn_idx,
                               "model": model.name, "sampling": sampling, "dropped_turns": []}
        predict_row = getattr(model, "predict_row", None)
        if predict_row:  # a reference predictor (lwm.eval.baselines): reads the whole row, nothing to parse
            try:
                obs = predict_row(row)
            except Exception as e:
                return rec | {"error": f"{type(e).__name__}: {e}"[:2000]}
            return rec | {"output": obs, "reasoning": "", "observation": obs, "parse_issues": [], "error": None}
        messages, rec["dropped_turns"] = build_messages(row, model.count_tokens, config.max_prompt_tokens)
        try:
            gen = await model.generate(messages, config.sampling)
        except Exception as e:  # counted as a failed row, never fatal
            return rec | {"error": f"{type(e).__name__}: {e}"[:2000]}
        stopped = config.sampling.stop if gen.finish_reason == "stop" else ()
        parsed = parse_output(gen.text, gen.reasoning, stopped_at=stopped)
        return rec | {"output": gen.text, "reasoning": parsed.reasoning, "observation": parsed.observation,
                      "parse_issues": parsed.issues, "finish_reason": gen.finish_reason,
                      "prompt_tokens": gen.prompt_tokens, "completion_tokens": gen.completion_tokens,
                      "error": None}

    with JsonlAppender(path) as sink, progress_bar("predict", len(todo), show_progress) as advance:
        async for rec in _in_order_tasks([one(k, r) for k, r in todo]):
            sink.append(rec)
            records[rec["key"]] = rec
            advance()
    return records, len(todo)


async def judge_rows(
    rows: list[BenchRow], records: dict[str, dict], judge: ChatModel, config: EvalConfig,
    *, show_progress: bool = True,
) -> dict[str, dict]:
    """Judge every predicted row not yet in ``judgments.partial.jsonl``; return all verdicts.

    Each verdict record is ``{"key": …}`` plus :meth:`lwm.eval.judge.JudgeScore.to_dict` (mode
    ``score``) or :meth:`lwm.eval.judge.PairwiseVerdict.to_dict`, so the judge's raw text and
    ``finish_reason`` are kept with every verdict, failures included."""
    from lwm.eval import judge as J

    path = Path(config.out) / "judgments.partial.jsonl"
    verdicts = _load_partial(path)
    baseline = load_baseline(config) if config.judge_mode == "closer" else {}
    keyed = [(row_key(i, r), r) for i, r in enumerate(rows)]
    todo = [(k, r) for k, r in keyed
            if (k not in verdicts or verdicts[k].get("error")) and records.get(k, {}).get("error") is None]

    async def one(key: str, row: BenchRow) -> dict:
        pred = records[key]["observation"]
        if config.judge_mode == "score":
            s = await J.judge_score(judge, row, pred, config.judge_sampling)
            return {"key": key, "mode": "score", **s.to_dict()}
        if config.judge_mode == "real":
            v = await J.judge_which_real(judge, row, pred, config.judge_sampling)
        else:
            other = baseline.get(key, {}).get("observation")
            if other is None:
                return {"key": key, "mode": "closer", "wins": None, "error": "no baseline prediction for this row"}
            v = await J.judge_which_closer(judge, row, pred, other, config.judge_sampling)
        return {"key": key, **v.to_dict()}

    with JsonlAppender(path) as sink, progress_bar(f"judge ({config.judge_mode})", len(todo), show_progress) as advance:
        async for v in _in_order_tasks([one(k, r) for k, r in todo]):
            sink.append(v)
            verdicts[v["key"]] = v
            advance()
    return verdicts


def score_rows(rows: list[BenchRow], records: dict[str, dict], verdicts: dict[str, dict]) -> list[dict]:
    """Final records in input order: prediction, deterministic fidelity, judge verdict."""
    out = []
    for i, row in enumerate(rows):
        key = row_key(i, row)
        rec = dict(records.get(key) or {"key": key, "domain": row.domain, "id": row.id,
                                         "turn_idx": row.turn_idx, "error": "not predicted"})
        if rec.get("error") is None:
            real = observation_text(row.ground_truth)
            rec["fidelity"] = fidelity(rec["observation"], real, row.volatile, comparator(row.domain)).to_dict()
        if key in verdicts:
            rec["judge"] = {k: v for k, v in verdicts[key].items() if k != "key"}
        out.append(rec)
    return out


async def evaluate(
    config: EvalConfig,
    model: ChatModel,
    judge: ChatModel | None = None,
    *,
    rows: list[BenchRow] | None = None,
    show_progress: bool = True,
) -> dict:
    """Run (or resume) an evaluation and write its outputs.

    Args:
        config: settings.
        model: the world model.
        judge: the judge model, or ``None`` for deterministic metrics only.
        rows: rows to evaluate (default: read from ``config.data``).

    Returns:
        the summary (also written to ``summary.json``).

    Raises:
        DataNotFoundError: no input rows.
        RowFormatError: a malformed input line.
    """
    from lwm.eval.report import summarize, write_reports

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    if rows is None:
        if config.data is None:
            raise DataNotFoundError("no rows: pass --data DIR")
        rows = load_rows(config.data, config.domains, config.limit)
    if not rows:
        raise DataNotFoundError(f"no rows to evaluate in {config.data}")
    if judge is not None and config.judge_mode == "closer":
        load_baseline(config)  # fail before predicting, not after
    check_run_settings(out / "run.json", {
        "model": model.name, "sampling": config.sampling.to_dict(), "max_prompt_tokens": config.max_prompt_tokens,
        "judge": judge.name if judge else None, "judge_mode": config.judge_mode if judge else None,
        "judge_sampling": config.judge_sampling.to_dict() if judge else None,
    })
    t0 = time.monotonic()
    records, n_predicted = await predict_rows(rows, model, config, show_progress=show_progress)
    t_pred = time.monotonic() - t0
    verdicts = await judge_rows(rows, records, judge, config, show_progress=show_progress) if judge else {}
    final = score_rows(rows, records, verdicts)
    write_jsonl(out / "predictions.jsonl", final)
    run_info = {
        "model": model.name,
        "judge": judge.name if judge else None,
        "judge_mode": config.judge_mode if judge else None,
        "sampling": config.sampling.to_dict(),
        "judge_sampling": config.judge_sampling.to_dict() if judge else None,
        "max_prompt_tokens": config.max_prompt_tokens,
        "data": str(config.data) if config.data else None,
        "predict_seconds_this_invocation": round(t_pred, 2),
        "rows_predicted_this_invocation": n_predicted,
        "lwm_version": __version__,
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    summary = summarize(final, run_info)
    write_reports(out, summary)
    return summary

