"""One engine for every resumable batch job (collect, rollout, eval, judge, wm2real,
annotate, agent evaluation, …).

A job is a list of work items, each with a stable id, and a function that turns an item
into a JSON record. The engine

* keeps a **journal** (``*.partial.jsonl``): every record is appended and flushed as soon
  as its item finishes, so a crash or Ctrl-C loses at most the items in flight; one run
  at a time writes it (a lock file beside it, ``*.partial.jsonl.lock``: a second
  invocation on the same run directory is refused instead of playing everything twice);
* on a re-run **skips finished items** (ids in the journal whose record has no ``error``)
  and retries the rest: items that failed and items never reached;
* runs items with **bounded concurrency** on threads, on an asyncio loop, or as Ray tasks;
* shows **progress** and counts **failures by reason**: an item fails when its function
  raises (nothing is journaled) or returns a record whose ``error`` is set (journaled, for
  the record's details, and retried next time);
* returns a :class:`JobReport` from which the job writes its final files (atomically, see
  :func:`lwm.jsonl.write_atomic`) and its manifest.

>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp())
>>> squares = lambda n: {"id": str(n), "square": n * n}
>>> report = run_jobs([(str(n), n) for n in range(4)], squares, journal=out / "j.partial.jsonl", progress=None)
>>> [report.records[str(n)]["square"] for n in range(4)], report.ran
([0, 1, 4, 9], 4)
>>> run_jobs([(str(n), n) for n in range(5)], squares, journal=out / "j.partial.jsonl", progress=None).ran
1
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from lwm.errors import RowFormatError, RunBusyError
from lwm.jsonl import JsonlAppender, iter_jsonl
from lwm.progress import progress_bar

Item = tuple[str, Any]


@dataclass
class JobReport:
    """What a job run produced.

    Attributes:
        records: the record of every finished item, by id (earlier runs' included).
        ran: items attempted by this invocation.
        failures: ``{id: reason}`` of the items that failed in this invocation (the reason
            is ``"ExceptionType: message"`` or the record's ``error``).
        seconds: wall-clock time of this invocation.
        finished: items that finished without failing in this invocation.
        skipped: items not started because the job's ``stop`` condition held.
        failed_records: the records that came back with an ``error`` in this invocation, by id.
    """

    records: dict[str, dict] = field(default_factory=dict)
    ran: int = 0
    failures: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    finished: int = 0
    skipped: int = 0
    failed_records: dict[str, dict] = field(default_factory=dict)

    def ordered(self, ids: Sequence[str]) -> list[dict]:
        """The finished records in the order of ``ids`` (unfinished ids left out)."""
        return [self.records[i] for i in ids if i in self.records]

    def failures_by_reason(self) -> dict[str, int]:
        """How many items failed for each reason (the exception type, or the text before the
        first ``:`` of the record's error)."""
        return dict(Counter(reason.split(":", 1)[0].strip() for reason in self.failures.values()))


def failure(exc: BaseException) -> str:
    """The reason recorded for an item whose function raised ``exc`` (bounded length)."""
    return f"{type(exc).__name__}: {exc}"[:2000]


def load_journal(path: Path, key: str = "id", check: Callable[[dict], str | None] | None = None) -> dict[str, dict]:
    """The records of a journal by id, the last record of an id winning. A torn last line
    (a crash in the middle of an append) is skipped: its item is redone.

    Args:
        check: the job's test of a finished record: what is wrong with it, or ``None``.

    Raises:
        RowFormatError: a line is not JSON, a record has no string ``key``, or ``check``
            finds it wrong (names the file and the line).
    """
    records: dict[str, dict] = {}
    if path.exists():
        for line, obj in iter_jsonl(path, skip_truncated_tail=True):
            if not isinstance(obj.get(key), str):
                raise RowFormatError(path, line, f"a record without its {key!r} (delete the line to redo the item)")
            if check is not None and not obj.get("error") and (problem := check(obj)):
                raise RowFormatError(path, line, problem)
            records[obj[key]] = obj
    return records


class _Run:
    """The bookkeeping shared by the three executors."""

    def __init__(self, items: Sequence[Item], journal: Path, key: str, description: str | None,
                 check: Callable[[dict], str | None] | None = None) -> None:
        self.journal, self.key = Path(journal), key
        self.t0 = time.monotonic()
        self.report = JobReport(records=load_journal(self.journal, key, check))
        self.report.records = {k: r for k, r in self.report.records.items() if not r.get("error")}
        self.todo = [(i, x) for i, x in items if i not in self.report.records]
        self.report.ran = len(self.todo)  # skipped items are subtracted when the run is done
        done = len(items) - len(self.todo)
        if done and self.todo and description is not None:
            print(f"resuming {self.journal.parent}: {done} of {len(items)} already done", file=sys.stderr)
        self.description = description
        self.rewarded = self.successes = 0

    def finish(self, item_id: str, outcome: dict | BaseException, sink: JsonlAppender) -> None:
        if isinstance(outcome, BaseException):
            self.report.failures[item_id] = failure(outcome)
            return
        if outcome.get(self.key) != item_id:
            outcome = {**outcome, self.key: item_id}
        sink.append(outcome)
        if outcome.get("error"):
            self.report.failures[item_id] = str(outcome["error"])
            self.report.failed_records[item_id] = outcome
        else:
            self.report.records[item_id] = outcome
            self.report.finished += 1
            if isinstance(outcome.get("reward"), (int, float)):
                self.rewarded += 1
                self.successes += outcome["reward"] >= 0.5

    def status(self) -> str:
        """This invocation so far, for a plain progress line: failures, and successes when
        the records are episodes with a verdict."""
        parts = [f"{self.successes}/{self.rewarded} with a verdict achieved"] if self.rewarded else []
        return " · ".join([*parts, f"{len(self.report.failures)} failed"])

    def done(self) -> JobReport:
        self.report.seconds = time.monotonic() - self.t0
        self.report.ran -= self.report.skipped
        return self.report


def run_jobs(items: Sequence[Item], work: Callable[[Any], dict], *, journal: Path, key: str = "id",
             concurrency: int = 1, description: str | None = "job", progress: bool | None = True,
             executor: str = "threads", check: Callable[[dict], str | None] | None = None) -> JobReport:
    """Run ``work(payload)`` for every ``(id, payload)`` of ``items`` not finished yet.

    Args:
        items: the work, in order; ids are unique and stable across runs.
        work: turns a payload into a JSON-ready record (its ``key`` field is set to the id).
            On Ray, ``work`` and the payloads must be picklable.
        journal: the ``*.partial.jsonl`` file.
        key: the records' id field.
        concurrency: items in flight at most (threads; on Ray, CPUs asked of a local instance).
        description: the progress bar's label (``None``: no resume message either).
        progress: draw a progress bar on stderr (``None`` or ``False``: no).
        executor: ``threads`` or ``ray`` (``ray.init(address=…)`` first for a cluster).
        check: what is wrong with a journaled record, or ``None`` (see :func:`load_journal`).

    Returns:
        the report (see :class:`JobReport`).

    Raises:
        ValueError: two items share an id, or an unknown executor (nothing is written).
        RowFormatError: the journal is corrupt beyond a torn last line.
        RunBusyError: another run is writing the journal now.
        KeyboardInterrupt: passed on after the items in flight finish (queued ones are
            dropped; finished ones are in the journal).
    """
    if executor not in ("threads", "ray"):
        raise ValueError(f"unknown executor {executor!r} (threads or ray)")
    _check_ids(items)
    source = _ray_outcomes if executor == "ray" else _thread_outcomes
    with _exclusive(journal):
        run = _Run(items, journal, key, description, check)
        with JsonlAppender(run.journal) as sink, progress_bar(description or "", len(run.todo), bool(progress),
                                                                  status=run.status) as step:
            for item_id, outcome in source(run.todo, work, concurrency):
                run.finish(item_id, outcome, sink)
                step()
    return run.done()


def _check_ids(items: Sequence[Item]) -> None:
    """Refuse two items with one id (the journal keeps one record per id), before any file is touched."""
    twice = [i for i, n in Counter(i for i, _ in items).items() if n > 1]
    if twice:
        raise ValueError(f"two jobs share the id {twice[0]!r}: the journal would keep one record for both")


@contextmanager
def _exclusive(journal: Path) -> Iterator[None]:
    """Hold the journal's lock while the run lasts, or refuse at once (RunBusyError). It is an
    OS lock on an open file: a run that dies leaves no stale lock behind."""
    Path(journal).parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(f"{journal}.lock", timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunBusyError(Path(journal).parent) from None
    try:
        yield
    finally:
        lock.release()


async def arun_jobs(items: Sequence[Item], work: Callable[[Any], Awaitable[dict]], *, journal: Path,
                    key: str = "id", concurrency: int = 64, description: str | None = "job",
                    progress: bool | None = True, stop: Callable[[JobReport], bool] | None = None,
                    abort: Callable[[JobReport], BaseException | None] | None = None,
                    check: Callable[[dict], str | None] | None = None) -> JobReport:
    """:func:`run_jobs` for coroutine functions, on the running event loop. Items start in
    order (a local model then sees an episode's turns one after another), at most
    ``concurrency`` at once; on an exception or cancellation the unfinished ones are cancelled.

    Args:
        stop: checked before each item starts; when true, the item is skipped (a budget
            is spent) and counted in :attr:`JobReport.skipped`.
        abort: called after each failure; an exception it returns is raised at once (e.g.
            a server that failed every request so far).
        check: as :func:`run_jobs`.
    """
    _check_ids(items)
    with _exclusive(journal):
        return await _arun(_Run(items, journal, key, description, check), work, concurrency, progress, stop, abort)


async def _arun(run: _Run, work: Callable[[Any], Awaitable[dict]], concurrency: int, progress: bool | None,
                stop: Callable[[JobReport], bool] | None,
                abort: Callable[[JobReport], BaseException | None] | None) -> JobReport:
    gate = asyncio.Semaphore(max(1, concurrency))
    halted: list[BaseException] = []  # an interruption (Ctrl-C) or an abort: start nothing more

    async def one(item_id: str, payload: Any, sink: JsonlAppender, step: Callable[[], None]) -> None:
        async with gate:  # the outcome is recorded before the next item starts: ``stop`` sees it
            if halted:
                return
            if stop is not None and stop(run.report):
                run.report.skipped += 1
            else:
                try:
                    outcome: dict | BaseException = await work(payload)
                except Exception as e:  # a failed item is counted, never fatal
                    outcome = e
                except BaseException as e:
                    halted.append(e)
                    raise
                run.finish(item_id, outcome, sink)
                if item_id in run.report.failures and abort is not None and (exc := abort(run.report)):
                    halted.append(exc)
                    raise exc
            step()

    with JsonlAppender(run.journal) as sink, progress_bar(run.description or "", len(run.todo), bool(progress),
                                                                  status=run.status) as step:
        tasks = [asyncio.ensure_future(one(i, x, sink, step)) for i, x in run.todo]
        try:
            for fut in asyncio.as_completed(tasks):
                await fut
        finally:
            for t in tasks:
                t.cancel()
    return run.done()


def _thread_outcomes(todo: list[Item], work: Callable, concurrency: int) -> Iterator[tuple[str, Any]]:
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    try:
        futures = {pool.submit(work, payload): item_id for item_id, payload in todo}
        for fut in as_completed(futures):
            try:
                yield futures[fut], fut.result()
            except Exception as e:  # a failed item is counted, never fatal
                yield futures[fut], e
    finally:
        # On Ctrl-C, queued items are dropped; the running ones finish (their sandboxes close).
        pool.shutdown(wait=True, cancel_futures=True)


def _ray_outcomes(todo: list[Item], work: Callable, concurrency: int) -> Iterator[tuple[str, Any]]:
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=concurrency, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(work)
    pending = {remote.remote(payload): item_id for item_id, payload in todo}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            item_id = pending.pop(ready[0])
            try:
                yield item_id, ray.get(ready[0])
            except Exception as e:  # a failed item is counted, never fatal
                yield item_id, e
    finally:
        for ref in pending:
            ray.cancel(ref)
