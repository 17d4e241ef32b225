"""One progress display for every long job: a rich bar on a terminal, plain lines elsewhere.

A job whose output goes to a file or a pipe (``lwm agent eval … > log 2>&1``, a CI log)
gets a line every ``interval`` seconds and at the end instead of a bar drawn when it
finishes: ``agent eval (sim): 12/60 (20 %) · 0.31/s · eta 2m35s · 3/12 with a verdict achieved · 0 failed``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: Seconds between two plain progress lines.
LINE_INTERVAL = 30.0


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True, *, status: Callable[[], str] | None = None,
                 interval: float = LINE_INTERVAL) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n=1)``; shows progress on stderr when ``enabled``: a bar on a
    terminal, else a plain line every ``interval`` seconds and one at the end (with
    ``status()``, e.g. successes so far, appended)."""
    if not enabled or total <= 0:
        yield lambda n=1: None
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        lines = _Lines(description, total, status, interval)
        yield lines.advance
        lines.finish()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n=1: progress.advance(task, n)


class _Lines:
    """Plain progress lines for a log."""

    def __init__(self, description: str, total: int, status: Callable[[], str] | None, interval: float) -> None:
        self.description, self.total, self.status, self.interval = description or "progress", total, status, interval
        self.done, self.t0 = 0, time.monotonic()
        self.show()   # at once: a log shows the job has started

    def advance(self, n: int = 1) -> None:
        self.done += n
        if time.monotonic() - self.shown_at >= self.interval:
            self.show()

    def finish(self) -> None:
        if self.shown != self.done:
            self.show()

    def show(self) -> None:
        elapsed = time.monotonic() - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.description}: {self.done}/{self.total} ({100 * self.done / self.total:.0f} %)",
                 f"{rate:.2f}/s" if rate else "", _eta(rate, self.total - self.done)]
        if self.status is not None:
            parts.append(self.status())
        print(" · ".join(p for p in parts if p), file=sys.stderr, flush=True)
        self.shown_at, self.shown = time.monotonic(), self.done


@contextmanager
def library_progress(enabled: bool) -> Iterator[None]:
    """With ``enabled`` false, the Hugging Face libraries' own progress bars (datasets' map
    and filter bars, transformers' "Loading weights", the hub's file bars) hidden inside the
    block, and those it hid shown again after it; with ``enabled`` true, nothing changes (a
    user's ``HF_*_DISABLE_PROGRESS_BARS`` stays in force). ``--no-progress`` hides them with
    lwm's own bars; a library not installed is left alone. The switches are the process's:
    not for threads that want different settings at once."""
    switches = []  # (is_on, enable, disable) of each library installed
    if not enabled:
        try:
            import datasets

            switches.append((datasets.is_progress_bar_enabled, datasets.enable_progress_bars,
                             datasets.disable_progress_bars))
        except ImportError:
            pass
        try:
            from transformers.utils import logging as tf_logging

            switches.append((tf_logging.is_progress_bar_enabled, tf_logging.enable_progress_bar,
                             tf_logging.disable_progress_bar))
        except ImportError:
            pass
        try:
            from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

            switches.append((lambda: not are_progress_bars_disabled(), enable_progress_bars, disable_progress_bars))
        except ImportError:
            pass
    hidden = []
    for is_on, enable, disable in switches:
        if is_on():
            disable()
            hidden.append(enable)
    try:
        yield
    finally:
        for enable in hidden:
            enable()


def _eta(rate: float, left: int) -> str:
    if not rate or left <= 0:
        return ""
    seconds = round(left / rate)
    return f"eta {seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"eta {seconds}s"
