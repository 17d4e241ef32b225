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
import contextlib
import hashlib
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

from lwm import domains
from lwm.candidates import candidate_scoring, choose
from lwm.errors import DataNotFoundError, LwmError, RowFormatError
from lwm.eval.baselines import RowBaseline
from lwm.jobs import arun_jobs
from lwm.jsonl import check_run_settings, compare_settings, iter_jsonl, read_json, write_jsonl
from lwm.metrics import fidelity
from lwm.models import WORLD_MODEL, ModelSpec
from lwm.models.base import ChatModel, SamplingParams
from lwm.parse import DEFAULT_STOP, observation_text, parse_output
from lwm.prediction import (
    Prediction,
    action_of,
    certain_observation,
    model_observation,
    request,
    request_format,
    row_prediction,
)
from lwm.retrieval import TransitionIndex, episode_of, qualified
from lwm.schema import BenchRow, read_rows

JudgeMode = Literal["score", "real", "closer"]


#: Retrieved transitions per row (``EvalConfig.neighbours``; its docstring says both): by
#: default, and at most.
DEFAULT_NEIGHBOURS, MAX_NEIGHBOURS = 2, 8


@dataclass
class EvalConfig:
    """Settings of ``lwm eval`` (the CLI's flags mirror these fields).

    Attributes:
        out: run directory (re-run with the same one to resume).
        data: AgentWorldBench data: a directory of ``{domain}_test.jsonl`` files (or of
            such directories) or one file. Not given: the built-in real suite of each domain
            asked for (terminal when none is) is collected into ``out/data`` first.
        domains: only these domains.
        limit: only the first N rows (over all domains, in file order).
        episodes: with no ``data``, collect only the first N episodes of each suite.
        heldout: only the rows of the task families the world model never trained on, as its
            adapter's record says (:func:`lwm.models.embedded.heldout_families`; for a model
            that does not say, those of ``embedded-warmup``: :func:`heldout_families_of`); with
            no ``data``, only those episodes of each suite are played. The rows' families are
            read from the ``trajectories.jsonl`` that ``lwm collect`` writes beside them.
        sampling: decoding settings of the world model.
        max_prompt_tokens: tokens for the history window and the current turn (the system
            prompt is extra); the oldest turns are dropped first.
        judge_mode: ``score`` (five dimensions, each 1-5), ``real`` (which response is real,
            asked in both orders) or ``closer`` (which of this run and ``baseline`` is closer
            to the ground truth, both orders).
        baseline: ``predictions.jsonl`` of another run, for judge mode ``closer``.
        judge_sampling: decoding settings of the judge.
        prediction: what the world model writes (:mod:`lwm.prediction`): ``full`` or
            ``change`` (drawn into the full observation before scoring); not given: the
            model's own (``change`` for an adapter trained on changes, else ``full``).
        compact_tools: send tool lists in system prompts as one-line signatures
            (:func:`lwm.prompts.compact_tools`); not given: as the model was trained.
        score_candidates: let the model choose, by its own likelihood, between its answer,
            the previous observation and the domain's trivial guess (:mod:`lwm.candidates`;
            the embedded and transformers models); off unless ``index`` is given.
        index: a transition index (``lwm data index``, :mod:`lwm.retrieval`): the observations
            of the real transitions whose actions are most like the row's join the
            candidates (never one of the row's own episode).
        neighbours: transitions taken from ``index`` per row, 1 to 8 (2 when not given);
            needs ``index``.
        certain: answer the rows whose observation the action alone decides as the domain
            does (:func:`lwm.prediction.certain_observation`), without the model, as the
            simulator answers them; their predictions record ``"certain": true`` and the
            summary counts them; and replace an answer the action alone rules out
            (:func:`lwm.prediction.ruled_out`: a syntax error for a code cell that
            compiles) by the domain's trivial guess, counted as the parse issue ``ruled
            out`` (and leave such candidates out of ``score_candidates``). ``False``: the
            model answers every row and its answers are kept (the model alone).

    Raises:
        ValueError: ``neighbours`` without ``index``, or out of range.
    """

    out: Path
    data: Path | None = None
    domains: tuple[str, ...] | None = None
    limit: int | None = None
    episodes: int | None = None
    heldout: bool = False
    sampling: SamplingParams = field(
        default_factory=lambda: SamplingParams(temperature=0.0, max_tokens=320, stop=DEFAULT_STOP))
    max_prompt_tokens: int = 2048
    judge_mode: JudgeMode = "score"
    baseline: Path | None = None
    judge_sampling: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=0.0, max_tokens=1024))
    prediction: Prediction | None = None
    compact_tools: bool | None = None
    score_candidates: bool | None = None
    index: Path | None = None
    neighbours: int | None = None
    certain: bool = True

    def __post_init__(self) -> None:
        if self.neighbours is not None:
            if not isinstance(self.neighbours, int) or isinstance(self.neighbours, bool):
                raise ValueError(f"neighbours must be a whole number, got {self.neighbours!r}")
            if self.index is None:
                raise ValueError("neighbours (--neighbours) are taken from a transition index: give index (--index)")
            if not 1 <= self.neighbours <= MAX_NEIGHBOURS:
                raise ValueError(f"neighbours must be in [1, {MAX_NEIGHBOURS}], got {self.neighbours}")

    @property
    def neighbours_per_row(self) -> int:
        """Neighbours taken per row when ``index`` is given."""
        return self.neighbours or DEFAULT_NEIGHBOURS


def row_key(index: int, row: BenchRow) -> str:
    """Stable key of a row: its position and a hash of its content."""
    h = hashlib.sha1()
    for part in (row.task, str(row.id), str(row.turn_idx), row.system_str, row.current_prompt, row.ground_truth):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return f"{index:06d}-{h.hexdigest()[:12]}"


def load_rows(data: Path, domains: tuple[str, ...] | None = None, limit: int | None = None,
              families: frozenset[str] | None = None) -> list[BenchRow]:
    """Read AgentWorldBench rows from one file or a directory: its ``*_test.jsonl`` files,
    or, when it has none, those of its sub-directories (e.g. one ``lwm collect`` per domain).

    An empty file among others is reported on stderr. ``families`` (``domain/family``) keeps
    only the rows of those task families (:func:`trajectory_families`), before ``limit``.

    Raises:
        DataNotFoundError: no such file, not a regular file or directory, no ``*_test.jsonl``
            in the directory, or every file found is empty (names the files); with
            ``families``, rows whose family nothing beside them names.
        RowFormatError: a malformed line (names file and line).
    """
    data = Path(data)
    if data.is_dir():
        files = sorted(data.glob("*_test.jsonl")) or sorted(data.glob("*/*_test.jsonl"))
        if not files:
            hint = ""
            if (data / "heldout").is_dir() and (data / "manifest.json").is_file():
                hint = f" (a dataset of lwm data build: its held-out rows are in {data / 'heldout'})"
            elif data.name.startswith("heldout") and (data.parent / "manifest.json").is_file():
                hint = " (its dataset holds nothing out: built with --val-fraction 0?)"
            raise DataNotFoundError(f"no *_test.jsonl files in {data}{hint}")
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
    if families is not None:
        family_of = row_families(rows, data if data.is_dir() else data.parent)
        rows = [r for r in rows if family_of[r.id] in families]
    return rows[:limit] if limit else rows


def row_families(rows: list[BenchRow], data: Path) -> dict[str, str]:
    """:func:`trajectory_families` of ``data``, with every row's trajectory in it.

    Raises:
        DataNotFoundError: a row's trajectory has no family recorded (names one).
        RowFormatError: a malformed line.
    """
    family_of = trajectory_families(data)
    unknown = sorted({r.id for r in rows if r.id not in family_of})
    if unknown:
        raise DataNotFoundError(f"{len(unknown)} trajectories of {data} have no family recorded (e.g. "
                                f"{unknown[0]}): only rows collected by lwm collect, with its "
                                "trajectories.jsonl beside them, can be split by family")
    return family_of


def trajectory_families(data: Path) -> dict[str, str]:
    """Trajectory id → its task family (``domain/family``), from the ``trajectories.jsonl`` in
    ``data`` and in its sub-directories (where ``lwm collect`` writes them, beside its rows;
    an episode without a family is a family of its own).

    Raises:
        RowFormatError: a malformed line (names file and line).
    """
    out, data = {}, Path(data)
    for path in sorted(data.glob("trajectories.jsonl")) + sorted(data.glob("*/trajectories.jsonl")):
        for line, t in iter_jsonl(path):
            if not (isinstance(t, dict) and isinstance(t.get("id"), str) and isinstance(t.get("domain"), str)):
                raise RowFormatError(path, line, "not a trajectory: needs an 'id' and a 'domain'")
            meta = t.get("metadata") if isinstance(t.get("metadata"), dict) else {}
            family = str(meta.get("family") or meta.get("episode") or episode_of(t["id"]).split("/", 1)[-1])
            out[t["id"]] = qualified(t["domain"], family)
    return out


def run_rows(run: Path, data: Path | None = None) -> list[tuple[BenchRow, dict]]:
    """The rows a finished ``lwm eval`` run evaluated, in its order, each with its prediction
    record (``predictions.jsonl``), for analyses of a run. The rows are read from ``data``
    (default: the run's ``data/``) as the run read them: its domains (those of its predictions)
    and its ``--heldout`` families kept (``run.json``).

    Raises:
        DataNotFoundError: the run's files or rows are missing, or a row's family is unknown.
        RowFormatError: a malformed line.
        LwmError: predictions that match no row (``data`` is not what the run evaluated).
    """
    run = Path(run)
    data = Path(data) if data is not None else run / "data"
    for f in (run / "run.json", run / "predictions.jsonl"):
        if not f.is_file():
            raise DataNotFoundError(f"{run}: no {f.name} (a finished lwm eval run has it)")
    settings = read_json(run / "run.json")
    records = {r["key"]: r for _, r in iter_jsonl(run / "predictions.jsonl") if isinstance(r, dict) and "key" in r}
    held = settings.get("heldout")
    run_domains = tuple(sorted({str(r.get("domain")) for r in records.values()}))
    rows = load_rows(data, run_domains, families=frozenset(held) if isinstance(held, list) else None)
    matched = [(row, records[k]) for i, row in enumerate(rows) if (k := row_key(i, row)) in records]
    if len(matched) < len(records):
        raise LwmError(f"{len(records) - len(matched)} of the {len(records)} predictions of {run} match no row of "
                       f"{data}: give the rows the run evaluated (--data)")
    return matched


#: A server that reports fewer prompt tokens than this share of what was sent has cut the
#: context: remote token counts are estimates (about 3.5 characters a token), so the margin is wide.
CONTEXT_CUT_RATIO = 0.7


def context_cut(sent: int, reported: int | None) -> bool:
    """Whether a server dropped part of the prompt: it reported ``reported`` prompt tokens
    for about ``sent`` (the messages' contents, counted or estimated; the chat template
    adds more, never less). Prompts under 512 tokens are not judged: estimates are noisy
    there, and servers that cut keep at least 2,048.

    >>> context_cut(6000, 2048), context_cut(6000, 5900), context_cut(300, 100), context_cut(6000, None)
    (True, False, False, False)
    """
    return reported is not None and sent >= 512 and reported < CONTEXT_CUT_RATIO * sent


def duplicate_rows(rows: list[BenchRow]) -> int:
    """How many rows repeat an earlier one (same domain, trajectory id, turn, prompt and
    ground truth). AgentWorldBench ids are not unique, so duplicates are evaluated like any
    row; they are counted and reported."""
    seen = set()
    for row in rows:
        seen.add(row_key(0, row))
    return len(rows) - len(seen)


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


async def predict_rows(
    rows: list[BenchRow], model: ChatModel, config: EvalConfig, *, index: TransitionIndex | None = None,
    show_progress: bool = True
) -> tuple[dict[str, dict], int]:
    """Predict every row not yet done in ``predictions.partial.jsonl``.

    Args:
        index: ``config.index``, loaded (:meth:`TransitionIndex.load`; loaded here when not
            given; ignored without ``config.index``).

    Returns:
        ``(records by row key, rows predicted by this call)``.
    """
    sampling = config.sampling.to_dict()
    mode, compact = request_format(model, config.prediction, config.compact_tools)
    scoring = candidate_scoring(model, config.score_candidates, config.index is not None)
    if config.index is None:  # what run.json records is what is used
        index = None
    elif index is None:
        index = TransitionIndex.load(config.index)
    if index is not None and (bare := sorted({r.domain for r in rows} - set(index.by_domain))):
        print(f"warning: the index {config.index} holds no transition of {', '.join(bare)}: those rows get no "
              "retrieved candidate", file=sys.stderr)

    # Scored right after its generation, a row's prompt is still in llama.cpp's KV cache (a
    # transformers model loses its batching to this lock; it has no cache to keep).
    one_row_at_a_time = asyncio.Lock() if scoring else contextlib.nullcontext()

    async def one(item: tuple[str, BenchRow]) -> dict:
        key, row = item
        rec: dict[str, Any] = {"key": key, "domain": row.domain, "id": row.id, "turn_idx": row.turn_idx,
                               "model": model.name, "sampling": sampling, "dropped_turns": []}
        predict_row = getattr(model, "predict_row", None)
        if predict_row:  # a reference predictor (lwm.eval.baselines): reads the whole row, nothing to parse
            try:
                obs = predict_row(row)
            except Exception as e:
                return rec | {"error": f"{type(e).__name__}: {e}"[:2000]}
            return rec | {"output": obs, "reasoning": "", "observation": obs, "parse_issues": [], "error": None}
        if config.certain and (obs := certain_observation(row)) is not None:  # no model: the action decides
            return rec | {"output": "", "reasoning": "", "observation": obs, "certain": True, "parse_issues": [],
                          "error": None}
        messages, rec["dropped_turns"] = request(row, mode, model.count_tokens, config.max_prompt_tokens,
                                                     compact=compact)
        async with one_row_at_a_time:
            try:
                gen = await model.generate(messages, config.sampling)
            except Exception as e:  # counted as a failed row, never fatal
                return rec | {"error": f"{type(e).__name__}: {e}"[:2000]}
            truncated = gen.finish_reason == "length"
            stopped = config.sampling.stop if gen.finish_reason == "stop" else ()
            parsed = parse_output(gen.text, gen.reasoning, stopped_at=stopped, truncated=truncated)
            chosen = None
            if scoring:
                near = index.nearest(row.domain, action_of(row) or "", config.neighbours_per_row,
                                     exclude_episode=episode_of(row.id)) if index is not None else ()
                try:
                    chosen = await choose(model, messages, row, mode, parsed.observation, near, config.certain)
                except Exception as e:  # recorded; the answer the model wrote is kept
                    rec["candidate_error"] = f"{type(e).__name__}: {e}"[:2000]
        sent = sum(model.count_tokens(m["content"]) for m in messages)
        cut = context_cut(sent, gen.prompt_tokens)
        if cut and not warned:
            warned.append(key)
            print(f"warning: the server counted {gen.prompt_tokens} prompt tokens where about {sent} were sent: it "
                  "cut the context (Ollama keeps 2,048-4,096 tokens unless num_ctx is set; see README, 'Serving "
                  "a world model'); such rows are marked context_cut", file=sys.stderr)
        observation, issues = model_observation(row, parsed.observation, parsed.issues, mode, config.certain)
        written = parsed.observation
        if chosen is not None:
            observation, written = chosen.observation, chosen.written
            rec |= {"candidate": chosen.source, "candidate_scores": chosen.scores}
        changed = {"change": written} if row_prediction(row, mode) == "change" else {}
        return rec | {"output": gen.text, "reasoning": parsed.reasoning, "observation": observation, **changed,
                      "parse_issues": issues, "finish_reason": gen.finish_reason, "truncated": truncated,
                      "context_cut": cut, "prompt_tokens": gen.prompt_tokens,
                      "completion_tokens": gen.completion_tokens, "error": None}

    warned: list[str] = []  # one warning per run about a server that cuts the context

    keyed = [(row_key(i, r), r) for i, r in enumerate(rows)]
    report = await arun_jobs([(k, (k, r)) for k, r in keyed], one,
                             journal=Path(config.out) / "predictions.partial.jsonl", key="key",
                             concurrency=max(len(keyed), 1), description="predict", progress=show_progress,
                             check=_prediction_problem)
    failed = {k: {"key": k, "error": reason} for k, reason in report.failures.items()}
    return {**failed, **report.failed_records, **report.records}, report.ran


def _prediction_problem(rec: dict) -> str | None:
    # A journal line that is not a prediction (hand-edited, another tool's): named, not guessed at.
    expected = {"observation": str, "domain": str, "turn_idx": int}
    wrong = [k for k, kind in expected.items() if not isinstance(rec.get(k), kind)]
    if not isinstance(rec.get("dropped_turns", []), list):
        wrong.append("dropped_turns")
    return f"not a prediction record ({', '.join(wrong)}); delete the line to predict the row again" if wrong else None


async def judge_rows(
    rows: list[BenchRow], records: dict[str, dict], judge: ChatModel, config: EvalConfig,
    *, show_progress: bool = True,
) -> dict[str, dict]:
    """Judge every predicted row not yet in ``judgments.partial.jsonl``; return all verdicts.

    Each verdict record is ``{"key": …}`` plus :meth:`lwm.eval.judge.JudgeScore.to_dict` (mode
    ``score``) or :meth:`lwm.eval.judge.PairwiseVerdict.to_dict`, so the judge's raw text and
    ``finish_reason`` are kept with every verdict, failures included."""
    from lwm.eval import judge as J

    baseline = load_baseline(config) if config.judge_mode == "closer" else {}
    keyed = [(row_key(i, r), r) for i, r in enumerate(rows)]
    predicted = [(k, r) for k, r in keyed if k in records and records[k].get("error") is None]

    async def one(item: tuple[str, BenchRow]) -> dict:
        key, row = item
        pred = records[key]["observation"]
        if config.judge_mode == "score":
            s = await J.judge_score(judge, row, pred, config.judge_sampling)
            return {"key": key, "mode": "score", **s.to_dict()}
        if config.judge_mode == "real":
            v = await J.judge_which_real(judge, row, pred, config.judge_sampling)
        else:
            other = baseline.get(key, {}).get("observation")
            if other is None:
                return {"key": key, "mode": "closer", "wins": None, "not_asked": "no baseline prediction for this row"}
            v = await J.judge_which_closer(judge, row, pred, other, config.judge_sampling)
        return {"key": key, **v.to_dict()}

    report = await arun_jobs([(k, (k, r)) for k, r in predicted], one,
                             journal=Path(config.out) / "judgments.partial.jsonl", key="key",
                             concurrency=max(len(predicted), 1), description=f"judge ({config.judge_mode})",
                             progress=show_progress)
    failed = {k: {"key": k, "mode": config.judge_mode, "error": reason} for k, reason in report.failures.items()}
    return {**failed, **report.failed_records, **report.records}


def score_rows(rows: list[BenchRow], records: dict[str, dict], verdicts: dict[str, dict]) -> list[dict]:
    """Final records in input order: prediction, deterministic fidelity, the fidelity of
    ``baseline:trivial`` on the same row (the reference a score is read against: the
    domain's one-line rule, the empty observation where it has none; absent where the
    row has no readable action), judge verdict."""
    trivial = RowBaseline("trivial")
    out = []
    for i, row in enumerate(rows):
        key = row_key(i, row)
        rec = dict(records.get(key) or {"key": key, "domain": row.domain, "id": row.id,
                                         "turn_idx": row.turn_idx, "error": "not predicted"})
        if rec.get("error") is None:
            spec = domains.find(row.domain)  # rows of domains lwm does not know are compared as text
            real = observation_text(row.ground_truth)
            canonical = spec and spec.canonical
            rec["fidelity"] = fidelity(rec["observation"], real, row.volatile, canonical).to_dict()
            try:
                rec["trivial_fidelity"] = fidelity(trivial.predict_row(row), real, row.volatile, canonical).to_dict()
            except ValueError:  # no readable action in the row: baseline:trivial fails on it too
                pass
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
    index: TransitionIndex | None = None,
    show_progress: bool = True,
) -> dict:
    """Run (or resume) an evaluation and write its outputs.

    Args:
        config: settings.
        model: the world model.
        judge: the judge model, or ``None`` for deterministic metrics only.
        rows: rows to evaluate (default: read from ``config.data``).
        index: ``config.index``, loaded (default: loaded here).

    Returns:
        the summary (also written to ``summary.json``).

    Raises:
        DataNotFoundError: no input rows.
        RowFormatError: a malformed input line.
    """
    from lwm.eval.report import summarize, write_reports

    out = Path(config.out)
    settings = run_settings(config, model, judge)
    families = frozenset(settings["heldout"]) if settings["heldout"] is not None else None
    if rows is None:
        if config.data is None:
            raise DataNotFoundError("no rows: pass --data DIR")
        rows = load_rows(config.data, config.domains, config.limit, families)
    if not rows:
        only = f" of the domains {', '.join(config.domains)}" if config.domains else ""
        held = " of the held-out families" if families is not None else ""
        raise DataNotFoundError(f"no rows{only}{held} to evaluate in {config.data}")
    out.mkdir(parents=True, exist_ok=True)
    duplicates = duplicate_rows(rows)
    if duplicates:
        print(f"warning: {duplicates} rows repeat an earlier row (same trajectory, turn, prompt and ground truth); "
              "they are evaluated like the others and counted in summary.json", file=sys.stderr)
    if judge is not None and config.judge_mode == "closer":
        load_baseline(config)  # fail before predicting, not after
    check_run_settings(out / "run.json", settings, defaults=SETTING_DEFAULTS)
    t0 = time.monotonic()
    records, n_predicted = await predict_rows(rows, model, config, index=index, show_progress=show_progress)
    t_pred = time.monotonic() - t0
    verdicts = await judge_rows(rows, records, judge, config, show_progress=show_progress) if judge else {}
    final = score_rows(rows, records, verdicts)
    write_jsonl(out / "predictions.jsonl", final)
    run_info = settings | {
        "data": str(config.data) if config.data else None,
        "predict_seconds_this_invocation": round(t_pred, 2),
        "rows_predicted_this_invocation": n_predicted,
        "duplicate_rows": duplicates,
        "lwm_version": version("lwm"),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    summary = summarize(final, run_info)
    write_reports(out, summary)
    return summary


#: A setting's value in runs recorded before the setting existed.
SETTING_DEFAULTS = {"prediction": "full", "compact_tools": False, "score_candidates": False, "retrieval": None,
                    "certain": False, "heldout": None}


def run_settings(config: EvalConfig, model: ChatModel, judge: ChatModel | None = None) -> dict:
    """What a run is recorded with in ``run.json`` and must be resumed with: the model's
    name, how it is asked (prediction mode, tool lists, candidate scoring, retrieval index
    by content), the held-out families (``--heldout``), sampling and the judge.

    Raises:
        ValueError: ``score_candidates`` or ``index`` for a model that cannot score answers;
            ``heldout`` for a model whose adapter's record names no held-out families.
    """
    families = heldout_families_of(model)[0] if config.heldout else None
    prediction, compact = request_format(model, config.prediction, config.compact_tools)
    retrieval = None
    if config.index is not None:  # the file's content is the setting: a rebuilt index is another run
        retrieval = {"index_sha256": hashlib.sha256(Path(config.index).read_bytes()).hexdigest(),
                     "neighbours": config.neighbours_per_row}
    return {
        "model": model.name, "prediction": prediction, "compact_tools": compact,
        "score_candidates": candidate_scoring(model, config.score_candidates, config.index is not None),
        "retrieval": retrieval,
        "certain": config.certain and getattr(model, "predict_row", None) is None,  # a reference guess answers all
        "heldout": sorted(families) if families is not None else None,
        "sampling": config.sampling.to_dict(), "max_prompt_tokens": config.max_prompt_tokens,
        "judge": judge.name if judge else None, "judge_mode": config.judge_mode if judge else None,
        "judge_sampling": config.judge_sampling.to_dict() if judge else None,
    }


def heldout_families_of(model: object) -> tuple[frozenset[str], bool]:
    """The task families ``model`` never trained on, and whether they are its own: its
    adapter's (``heldout_families``: the embedded model reads them from its adapter's record,
    :func:`lwm.models.embedded.heldout_families`), else, for a model without an adapter (the
    base model, a reference predictor, a served model), those of the default world model,
    ``embedded-warmup``, so that it is measured on the same rows.

    Raises:
        ValueError: the model has an adapter whose record does not say which families it
            never trained on.
    """
    own, adapter = getattr(model, "heldout_families", None), getattr(model, "adapter", None)
    if own is not None:
        return own, True
    if adapter is not None:
        raise ValueError(f"--heldout: the record beside {adapter} ({Path(adapter).with_suffix('.json').name}) does "
                         "not say which task families the adapter never trained on (data.splits.validation.families,"
                         " and each earlier stage's training families under 'previous'; lwm train export writes "
                         "them), so its held-out rows are unknown")
    from lwm.models.embedded import WARMUP_ADAPTER, adapter_record, heldout_families

    return heldout_families(adapter_record(WARMUP_ADAPTER)) or frozenset(), False


#: What the world model writes in each prediction mode, for the line ``lwm eval`` starts with.
_WRITES = {"full": "the model writes the whole observation",
           "change": "the model writes what the action changed, lwm draws the observation"}


def run_eval(config: EvalConfig, model: ModelSpec, judge: ModelSpec | None = None, *,
             show_progress: bool = True) -> dict:
    """What ``lwm eval`` does: load the world model (or reference predictor) and the
    judge first (a typo fails before minutes of collection), collect the built-in suites
    when ``config.data`` is not given, then :func:`evaluate`.

    Returns:
        the summary (also in ``config.out/summary.json``).

    Raises:
        ValueError: ``episodes`` with ``data``; a reference predictor as the judge;
            ``score_candidates`` (or ``index``) for a model that cannot score answers, or
            ``index`` with ``score_candidates`` off;
            ``extra_body`` for a model without ``base_url`` (nothing would send it).
        LwmError: as :func:`evaluate`; no episode of a suite could be played.
        ModelUnavailableError: a model cannot be loaded or reached.
    """
    from lwm.data.collect import CollectConfig, collect
    from lwm.eval.baselines import load_predictor

    if config.episodes is not None and config.data is not None:
        raise ValueError("--episodes applies to the built-in suite; with --data use --limit")
    if config.sampling.extra_body and model.base_url is None:
        raise ValueError("extra_body (--extra-body) goes to the world model's server (--base-url); the in-process "
                         "model takes none")
    index = TransitionIndex.load(config.index) if config.index is not None else None  # before a model loads
    loading = model.settings() | {"api_key": model.api_key}
    predictor = load_predictor(loading.pop("name"), **loading)
    judge_model = judge.load() if judge is not None else None
    settings = run_settings(config, predictor, judge_model)  # bad settings fail before collection
    run_file = Path(config.out) / "run.json"
    if run_file.exists():  # so does resuming a run with other settings (or a run.json that is no file)
        compare_settings(read_json(run_file), settings, config.out, SETTING_DEFAULTS)
    families = frozenset(settings["heldout"]) if settings["heldout"] is not None else None
    held_by = model.label if families is not None and heldout_families_of(predictor)[1] else WORLD_MODEL  # whose
    retrieved = f", {config.neighbours_per_row} neighbours from {config.index}" if index is not None else ""
    mode = settings["prediction"]
    asked = "" if hasattr(predictor, "predict_row") else f" (prediction {mode}: {_WRITES[mode]}" + (
        f"; candidates scored{retrieved}" if settings["score_candidates"] else "") + ")"
    print(f"Evaluating {predictor.name}{asked}", file=sys.stderr)
    if families is not None and config.data is not None:
        print(f"Held out: only the rows of the task families {held_by} never trained on", file=sys.stderr)
    if config.data is None:
        suites = {domain: None for domain in config.domains or ("terminal",)}  # domain -> held-out episodes
        if families is not None:  # only the held-out episodes are played: every domain checked first
            for domain in suites:
                suites[domain] = [s.task for s in domains.get(domain).scripts()[: config.episodes]
                                  if qualified(domain, s.task.family or s.task.name) in families]
                if not suites[domain]:
                    first = f"the first {config.episodes} episodes of " if config.episodes else ""
                    raise LwmError(f"{held_by} trained on the families of {first}the {domain} suite: none of them "
                                   "is held out")
        for domain, tasks in suites.items():
            where = Path(config.out) / "data" / domain
            names = None if tasks is None else tuple(t.name for t in tasks)
            if tasks is not None:
                shown = sorted({qualified(domain, t.family or t.name) for t in tasks})
                print(f"Held out: the {len(tasks)} episodes of the {domain} suite's families {held_by} never "
                      f"trained on ({', '.join(shown)})", file=sys.stderr)
            print(f"Ground truth: the real {domain} suite in {where} …", file=sys.stderr)
            got = collect(CollectConfig(out=where, domain=domain, episodes=config.episodes, names=names),
                          show_progress=show_progress)
            if got.trajectories == 0 and got.failed:
                raise LwmError(f"no {domain} episode could be played: {next(iter(got.failed.values()))}")
            runs = f"runs ({CollectConfig.runs} of each episode: what differs between them is volatile, not scored)"
            done = f"{got.played} {runs} played in the real {domain} suite" if got.played else \
                f"the real {domain} suite's {got.trajectories} {runs} already played"
            print(f"Ground truth: {done}", file=sys.stderr)
        config.data = Path(config.out) / "data"
    rows = load_rows(config.data, config.domains, config.limit, families)
    return asyncio.run(evaluate(config, predictor, judge_model, rows=rows, index=index, show_progress=show_progress))
