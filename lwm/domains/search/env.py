"""A real search engine (SQLite FTS5, bm25) over the offline Python 3.11 documentation.

The index is built once on the host from Debian's ``python3-doc`` (``index.py``).
Queries and page fetches run inside the bubblewrap sandbox: a controller there
(``controller.py``, the sandbox's ``/usr/bin/python3``) opens the index read-only
(bound at ``/opt/search/index.sqlite``) and answers bounded JSON; the host formats the
observation (``lwm.domains.search.spec``). Nothing but the index is readable by the engine:
a URL is only a key looked up in the index.

The engine is stateless: :meth:`SearchEnv.snapshot` is an opaque token of the episode and
:meth:`SearchEnv.restore` only checks it belongs to the current episode.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

from lwm.domains.search import spec as sd
from lwm.domains.search.index import index_path
from lwm.envs.base import StepResult, Task
from lwm.envs.controller import ControlledEnvironment, Controller
from lwm.envs.sandbox import Sandbox, SandboxLimits
from lwm.errors import ActionFormatError, EnvironmentClosedError, SandboxError

_CONTROLLER = Path(__file__).with_name("controller.py")
_INDEX_INSIDE = "/opt/search/index.sqlite"
_EPISODES = itertools.count(1)


class SearchEnv(ControlledEnvironment):
    """A real search environment.

    Args:
        limits: sandbox limits (defaults: 512 MiB per process, 16 processes).
        action_timeout: wall-clock limit of one action, in seconds.
        results_per_query: results shown per query.
        max_page_chars: characters of a page ``web_extractor`` shows.

    Raises (on :meth:`reset`):
        AssetMissingError: the index is not built (run ``lwm setup``).

    Example:
        >>> env = SearchEnv()  # doctest: +SKIP
        >>> env.reset(Task("demo"))  # doctest: +SKIP
        ''
        >>> call = '{"name": "web_search", "arguments": {"query": ["json dumps"]}}'
        >>> print(env.step(call).observation)  # doctest: +SKIP
        ## Search results for "json dumps"
        1. [json — JSON encoder and decoder — Python 3.11.2 documentation](https://docs.python.org/3.11/library/json.html)
           2026-10-07 · …
    """

    domain = sd.NAME

    def __init__(
        self,
        *,
        limits: SandboxLimits | None = None,
        action_timeout: float = 10.0,
        results_per_query: int = sd.RESULTS_PER_QUERY,
        max_page_chars: int = sd.MAX_PAGE_CHARS,
    ) -> None:
        self.limits = limits or SandboxLimits(max_processes=16, max_memory_bytes=512 << 20,
                                              max_cpu_seconds=120, disk_bytes=8 << 20)
        self.action_timeout = action_timeout
        self.results_per_query = results_per_query
        self.max_page_chars = max_page_chars
        self._sandbox: Sandbox | None = None
        self._control: Controller | None = None
        self._episode = 0
        self.task: Task | None = None

    def system_prompt(self) -> str:
        return sd.system_prompt()

    # -- lifecycle -------------------------------------------------------------------
    def reset(self, task: Task | None = None) -> str:
        """Start a fresh sandbox with the engine; return the initial observation (empty:
        a search engine shows nothing before the first call).

        Raises:
            AssetMissingError: the index is not built.
            SandboxError: the sandbox or the engine could not start.
        """
        task = task or Task("empty")
        self.close()
        index = index_path()
        self._sandbox = Sandbox(limits=self.limits, ro_binds={str(index): _INDEX_INSIDE})
        (self._sandbox.ctl_dir / "ctl.py").write_text(_CONTROLLER.read_text())
        self._control = Controller(self._sandbox, ["python3", "-I", "/run/lwm/ctl.py"], "the search engine")
        ready = self._control.read(time.monotonic() + 15)
        if not (isinstance(ready, dict) and ready.get("ready")):
            self.close()
            raise SandboxError("the search engine did not start")
        self.task = task
        self._episode = next(_EPISODES)
        return ""

    def step(self, action: str) -> StepResult:
        """Run one tool call; a malformed call gives an ``Error: invalid tool call: …``
        observation with ``info["action_error"]``.

        Raises:
            EnvironmentClosedError: no episode is running.
            SandboxError: the engine failed or did not answer in time.
        """
        if self._control is None:
            raise EnvironmentClosedError("call reset() before step()")
        t0 = time.monotonic()
        try:
            call = sd.parse_action(action)
        except ActionFormatError as e:
            return StepResult(sd.invalid_answer(e.reason, ""), info={"action_error": e.reason})
        if call.name == "web_search":
            reply = self._ask({"op": "search", "queries": list(call.queries), "k": self.results_per_query,
                               "max_terms": sd.MAX_QUERY_WORDS})
            results = reply.get("results")
            if not (isinstance(results, list) and len(results) == len(call.queries)):
                raise SandboxError("the search engine sent a malformed answer")
            obs = sd.format_search(call.queries, results)
        else:
            reply = self._ask({"op": "extract", "url": call.url, "goal": call.goal,
                               "max_chars": self.max_page_chars})
            obs = sd.format_page(reply.get("page"), call.url)
        return StepResult(obs, info={"seconds": round(time.monotonic() - t0, 3), "tool": call.name})

    # -- state -------------------------------------------------------------------------
    def snapshot(self) -> Any:
        """An opaque token of the current episode: the engine has no state to copy.

        Raises:
            EnvironmentClosedError: no episode is running.
        """
        if self._control is None:
            raise EnvironmentClosedError("call reset() before snapshot()")
        return ("search", self._episode)

    def restore(self, snapshot: Any) -> None:
        """Nothing to put back (stateless engine); only checks the snapshot's episode.

        Raises:
            EnvironmentClosedError: no episode is running.
            ValueError: the snapshot is not from this episode.
        """
        if self._control is None:
            raise EnvironmentClosedError("call reset() before restore()")
        if snapshot != ("search", self._episode):
            raise ValueError("snapshot does not belong to the current search episode")

    # -- engine ------------------------------------------------------------------------
    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._control is not None
        reply = self._control.request(request, self.action_timeout)
        if not isinstance(reply, dict) or not reply.get("ok"):
            err = reply.get("error") if isinstance(reply, dict) else None
            raise SandboxError(f"the search engine failed: {err or 'malformed answer'}")
        return reply
