"""One progress bar style for every long job (rich)."""

from __future__ import annotations

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


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n=1)``; draws a bar on stderr when ``enabled``."""
    if not enabled:
        yield lambda n=1: None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n=1: progress.advance(task, n)
