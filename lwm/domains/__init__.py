"""Per-domain knowledge: system prompts, action formats, comparators, judge rubrics.

One module per domain (``lwm.domains.<name>``) with ``NAME``, ``system_prompt(…)``,
``parse_action(text)`` and, where observations have an equivalent normal form (JSON key
order, table row order …), ``canonical(observation) -> str``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

#: Every domain ``lwm`` knows: real environments here, then import-only ones.
DOMAINS = ("terminal", "fs", "mcp", "db", "code", "search", "web", "swe", "os", "android")


def comparator(domain: str) -> Callable[[str], str] | None:
    """The domain's ``canonical`` normal form, or ``None`` (unknown domain, or none defined)."""
    if domain not in DOMAINS:
        return None
    try:
        module = importlib.import_module(f"lwm.domains.{domain}")
    except ImportError:
        return None
    return getattr(module, "canonical", None)


def action_lang(domain: str) -> str:
    """The info string of the fence around the domain's actions in AgentWorldBench rows
    (the module's ``ACTION_LANG``: ``sql``, ``python`` …; ``json`` by default)."""
    if domain not in DOMAINS:
        return "json"
    try:
        module = importlib.import_module(f"lwm.domains.{domain}")
    except ImportError:
        return "json"
    return getattr(module, "ACTION_LANG", "json")
