"""Controllable simulation: declarative instructions added to the world model's prompt.

A :class:`Control` asks the world model to shape the simulated environment's behaviour
(inject an error, return nothing, paginate, respond slowly, or live in a given fictional
world) while staying self-consistent. Controls are appended to the system prompt and
recorded in every simulated observation's provenance, so a dataset can be filtered by them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["error", "empty", "paginate", "slow", "world"]

_TEMPLATES: dict[str, str] = {
    "error": "The environment fails on this episode's actions in this way: {detail}. Report the failure "
             "exactly as the real environment would print it (its own error format), and nothing else.",
    "empty": "Results are empty in this episode{detail_clause}: searches, listings and queries return no items, "
             "in the exact form the real environment uses for an empty result.",
    "paginate": "Long results are paginated{detail_clause}: show only the first page in the environment's own "
                "pagination format, with the marker or cursor it uses to fetch the next page.",
    "slow": "The environment is slow{detail_clause}: where the real environment would show a timeout, a "
            "partial result or a progress indicator after a long wait, show that.",
    "world": "The environment's world is this fictional but self-consistent one: {detail}. Every observation "
             "must agree with it and with everything shown earlier in the episode.",
}


@dataclass(frozen=True)
class Control:
    """One control instruction.

    Attributes:
        kind: ``error``, ``empty``, ``paginate``, ``slow`` or ``world``.
        detail: what exactly (the error, the page size, the world's facts …); required for
            ``error`` and ``world``.

    Raises:
        ValueError: unknown kind, or a missing detail where one is required.
    """

    kind: Kind
    detail: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _TEMPLATES:
            raise ValueError(f"unknown control kind {self.kind!r} (one of {', '.join(_TEMPLATES)})")
        if self.kind in ("error", "world") and not self.detail.strip():
            raise ValueError(f"a {self.kind!r} control needs a detail, e.g. {self.kind}:'...'")

    def instruction(self) -> str:
        """The sentence added to the system prompt."""
        clause = f" ({self.detail})" if self.detail else ""
        return _TEMPLATES[self.kind].format(detail=self.detail, detail_clause=clause)

    def label(self) -> str:
        """The provenance label, ``kind`` or ``kind:detail``."""
        return f"{self.kind}:{self.detail}" if self.detail else self.kind

    @classmethod
    def parse(cls, text: str) -> Control:
        """From a label such as ``empty``, ``paginate:10 per page`` or ``error:disk full``."""
        kind, _, detail = text.partition(":")
        return cls(kind.strip(), detail.strip())  # type: ignore[arg-type]


def apply_controls(system_prompt: str, controls: tuple[Control, ...]) -> str:
    """``system_prompt`` with the controls' instructions appended (unchanged without controls)."""
    if not controls:
        return system_prompt
    lines = "\n".join(f"- {c.instruction()}" for c in controls)
    return f"{system_prompt}\n\nSimulation controls for this episode (follow them in every observation):\n{lines}"
