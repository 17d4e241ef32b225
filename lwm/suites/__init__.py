"""Bundled episode suites: scripted action sequences played in real environments."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field

from lwm.envs.base import Task


@dataclass(frozen=True)
class Episode:
    """A scripted episode: a task and the actions an agent plays, in order.

    Attributes:
        task: where the episode starts.
        actions: action texts in the domain's format (for the terminal, JSON keystroke
            lists; build them with :func:`keys`).
        tags: what behaviour the episode covers (``pipes``, ``ctrl-c`` …).
    """

    task: Task
    actions: tuple[str, ...]
    tags: tuple[str, ...] = field(default_factory=tuple)


def keys(*items: str | tuple[str, float], duration: float = 0.3) -> str:
    """A terminal action from keystroke strings or ``(keystrokes, duration)`` pairs.

    >>> keys("ls\\n")
    '[{"keystrokes": "ls\\\\n", "duration": 0.3}]'
    >>> keys(("sleep 2\\n", 0.5), ("", 2.0))
    '[{"keystrokes": "sleep 2\\\\n", "duration": 0.5}, {"keystrokes": "", "duration": 2.0}]'
    """
    out = []
    for item in items:
        text, dur = item if isinstance(item, tuple) else (item, duration)
        out.append({"keystrokes": text, "duration": dur})
    return json.dumps(out, ensure_ascii=False)


def load_suite(domain: str, extended: bool = False) -> list[Episode]:
    """The bundled episodes of a domain (module ``lwm.suites.<domain>``: ``EPISODES`` and
    the names of the episodes beyond the core suite, ``EXTENDED``).

    Args:
        domain: e.g. ``terminal``.
        extended: include the episodes beyond the core suite.

    Raises:
        KeyError: no suite for this domain.
    """
    from lwm.envs import REAL_DOMAINS

    if domain not in REAL_DOMAINS:
        raise KeyError(f"no bundled suite for domain {domain!r} (available: {', '.join(REAL_DOMAINS)})")
    suite = importlib.import_module(f"lwm.suites.{domain}")
    extra = getattr(suite, "EXTENDED", set())
    return [e for e in suite.EPISODES if extended or e.task.name not in extra]
