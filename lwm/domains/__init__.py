"""Per-domain knowledge: system prompts, action formats, comparators, judge rubrics.

One module per domain (``lwm.domains.<name>``) with ``NAME``, ``system_prompt(…)``,
``parse_action(text)``, where observations have an equivalent normal form (JSON key
order, table row order …), ``canonical(observation) -> str``, and where a cheap guess
exists, ``trivial_observation(action, previous, system) -> str`` (a reference predictor).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

#: Every domain ``lwm`` knows: real environments here, then import-only ones.
DOMAINS = ("terminal", "fs", "mcp", "db", "code", "search", "web", "swe", "os", "android")


def _attribute(domain: str, name: str, default: Any) -> Any:
    # A domain module's attribute; the default for an unknown domain or a missing attribute.
    if domain not in DOMAINS:
        return default
    try:
        module = importlib.import_module(f"lwm.domains.{domain}")
    except ImportError:
        return default
    return getattr(module, name, default)


def comparator(domain: str) -> Callable[[str], str] | None:
    """The domain's ``canonical`` normal form, or ``None`` (unknown domain, or none defined)."""
    return _attribute(domain, "canonical", None)


def action_lang(domain: str) -> str:
    """The info string of the fence around the domain's actions in AgentWorldBench rows
    (the module's ``ACTION_LANG``: ``sql``, ``python`` …; ``json`` by default)."""
    return _attribute(domain, "ACTION_LANG", "json")


def trivial_guess(domain: str) -> Callable[[str, str, str], str] | None:
    """The domain's ``trivial_observation(action, previous, system)`` (the reference guess
    of ``lwm eval --model baseline:trivial``), or ``None``."""
    return _attribute(domain, "trivial_observation", None)
