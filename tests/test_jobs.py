"""The job engine every resumable batch job runs on (lwm.jobs)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from lwm.errors import ModelUnavailableError, RowFormatError, RunBusyError
from lwm.jobs import arun_jobs, load_journal, run_jobs


def work(n: int) -> dict:
    if n % 3 == 2:
        raise ConnectionError(f"item {n} failed")
    if n == 4:
        return {"error": "ValueError: bad item"}
    return {"value": n * 10}


def test_failures_are_counted_by_reason_and_retried_on_resume(tmp_path):
    journal = tmp_path / "j.partial.jsonl"
    items = [(f"i{n}", n) for n in range(6)]
    first = run_jobs(items, work, journal=journal, concurrency=3, progress=None)
    assert sorted(first.records) == ["i0", "i1", "i3"] and first.ran == 6 and first.finished == 3
    assert first.failures_by_reason() == {"ConnectionError": 2, "ValueError": 1}
    assert first.failed_records["i4"]["error"] == "ValueError: bad item"  # journaled, with its details
    assert [r["value"] for r in first.ordered([i for i, _ in items])] == [0, 10, 30]
    again = run_jobs(items, lambda n: {"value": n * 10}, journal=journal, progress=None)
    assert again.ran == 3 and not again.failures and len(again.records) == 6  # only the failed three ran
    assert load_journal(journal)["i4"]["value"] == 40  # the last record of an id wins


def test_a_torn_last_line_is_redone_and_a_corrupt_one_is_named(tmp_path):
    journal = tmp_path / "j.partial.jsonl"
    journal.write_text(json.dumps({"id": "a", "v": 1}) + "\n" + '{"id": "b", "v"')
    assert run_jobs([("a", 1), ("b", 2)], lambda n: {"v": n}, journal=journal, progress=None).ran == 1
    journal.write_text(json.dumps({"id": "a"}) + "\nnot json\n" + json.dumps({"id": "b"}) + "\n")
    with pytest.raises(RowFormatError, match=r"j.partial.jsonl:2"):
        run_jobs([("a", 1)], lambda n: {}, journal=journal, progress=None)
    journal.write_text(json.dumps({"v": 1}) + "\n")
    with pytest.raises(RowFormatError, match=r":1: a record without its 'id'"):
        run_jobs([("a", 1)], lambda n: {}, journal=journal, progress=None)


def test_an_interruption_stops_the_job_and_keeps_what_finished(tmp_path):
    journal = tmp_path / "j.partial.jsonl"

    def interrupted(n):
        if n == 2:
            raise KeyboardInterrupt
        return {"v": n}

    with pytest.raises(KeyboardInterrupt):
        run_jobs([(str(n), n) for n in range(4)], interrupted, journal=journal, concurrency=1, progress=None)
    assert sorted(load_journal(journal)) == ["0", "1"]


def test_async_jobs_stop_on_a_budget_and_abort_on_a_dead_server(tmp_path):
    async def spend(n):
        return {"tokens": 60}

    report = asyncio.run(arun_jobs([(str(n), n) for n in range(5)], spend, journal=tmp_path / "a.jsonl",
                                   concurrency=1, progress=None,
                                   stop=lambda r: sum(x["tokens"] for x in r.records.values()) >= 100))
    assert (len(report.records), report.skipped, report.ran) == (2, 3, 2)

    async def dead(n):
        raise ConnectionError("refused")

    def give_up(r):
        return ModelUnavailableError("the server is down") if r.finished == 0 and len(r.failures) >= 3 else None

    with pytest.raises(ModelUnavailableError, match="down"):
        asyncio.run(arun_jobs([(str(n), n) for n in range(10)], dead, journal=tmp_path / "b.jsonl", concurrency=2,
                              progress=None, abort=give_up))


def test_an_unknown_executor_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="unknown executor"):
        run_jobs([("a", 1)], work, journal=tmp_path / "j.jsonl", executor="processes", progress=None)
    assert not (tmp_path / "j.jsonl").exists()


def test_two_jobs_with_one_id_are_refused_before_anything_runs(tmp_path):
    # the journal keeps one record per id: the second job's result would replace the first's
    ran = []
    for runner in (lambda items, **kw: run_jobs(items, ran.append, **kw),
                   lambda items, **kw: asyncio.run(arun_jobs(items, _async_append(ran), **kw))):
        with pytest.raises(ValueError, match="two jobs share the id 'a'"):
            runner([("a", 1), ("b", 2), ("a", 3)], journal=tmp_path / "j.jsonl", progress=None)
    assert ran == [] and not list(tmp_path.iterdir())   # not even the lock file


def _async_append(out):
    async def work(x):
        out.append(x)
        return {}
    return work


def test_a_second_run_on_the_same_journal_is_refused_until_the_first_ends(tmp_path):
    journal = tmp_path / "run" / "j.partial.jsonl"
    started, release = threading.Event(), threading.Event()

    def slow(n):
        started.set()
        release.wait(10)
        return {"n": n}

    first = threading.Thread(target=run_jobs, args=([("a", 1)], slow), kwargs=dict(journal=journal, progress=None))
    first.start()
    started.wait(10)
    with pytest.raises(RunBusyError, match="being written by another lwm run"):
        run_jobs([("a", 1), ("b", 2)], lambda n: {"n": n}, journal=journal, progress=None)
    with pytest.raises(RunBusyError):
        asyncio.run(arun_jobs([("b", 2)], _async_square, journal=journal, progress=None))
    release.set()
    first.join(10)
    again = run_jobs([("a", 1), ("b", 2)], lambda n: {"n": n}, journal=journal, progress=None)
    assert again.ran == 1 and set(again.records) == {"a", "b"}  # the lock went with the first run


async def _async_square(n):
    return {"n": n * n}


def test_without_a_terminal_progress_is_plain_lines_with_successes_so_far(tmp_path, capsys):
    """`lwm agent eval … > log 2>&1` printed nothing until the end: a log gets lines."""
    items = [(str(n), n) for n in range(4)]
    run_jobs(items, lambda n: {"reward": float(n % 2)}, journal=tmp_path / "j.partial.jsonl",
             description="agent eval (real)")
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("agent eval (real): 0/4 (0 %)")
    assert lines[-1].startswith("agent eval (real): 4/4 (100 %)") and lines[-1].endswith("2/4 with a verdict achieved · 0 failed")


def test_library_progress_hides_the_libraries_bars_and_restores_them():
    """--no-progress also hides the Hugging Face libraries' bars, only inside the block, even
    when it raises; bars the user had turned off stay off, and showing progress changes nothing."""
    datasets = pytest.importorskip("datasets")
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as tf_logging

    from lwm.progress import library_progress

    def shown():
        return datasets.is_progress_bar_enabled(), tf_logging.is_progress_bar_enabled(), not are_progress_bars_disabled()

    assert shown() == (True, True, True)
    with pytest.raises(RuntimeError), library_progress(False):
        assert shown() == (False, False, False)
        with library_progress(True):
            assert shown() == (False, False, False)  # showing changes nothing
        raise RuntimeError
    assert shown() == (True, True, True)
    datasets.disable_progress_bars()  # the user's choice
    try:
        with library_progress(False):
            assert not datasets.is_progress_bar_enabled()
        assert not datasets.is_progress_bar_enabled()
        with library_progress(True):
            assert not datasets.is_progress_bar_enabled()
    finally:
        datasets.enable_progress_bars()
