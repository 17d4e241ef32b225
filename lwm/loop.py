"""One background event loop for the synchronous faces of async code.

World-model backends are async (many requests in flight); environments are called
synchronously by RL libraries (Gymnasium, TRL). Every synchronous call runs its coroutine
on this one loop, so that backends holding loop-bound objects (locks, HTTP clients) see a
single loop whichever thread calls.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="lwm-sim-loop", daemon=True).start()
        return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and wait for its result.

    Raises:
        RuntimeError: called from inside the background loop itself (await instead).
        whatever ``coro`` raises.
    """
    loop = _background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("run_sync called from the simulator's own loop: await the async method instead")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()
