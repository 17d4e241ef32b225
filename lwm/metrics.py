"""Deterministic fidelity metrics: masked exact match, edit similarity, line F1.

All three compare a predicted observation with the real one after the same
normalization (lines right-stripped, trailing blank lines dropped). Volatile spans of
the real observation (see :mod:`lwm.data.volatility`) match anything: a word span any
word, a line span any lines.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

from rapidfuzz.distance import Levenshtein

from lwm.schema import Span

_MASK = "\x00"  # stands for a volatile span in both texts when they are compared


@dataclass(frozen=True)
class Fidelity:
    """Scores of one prediction, each in [0, 1].

    Attributes:
        exact: 1.0 if the prediction equals the real observation outside volatile spans.
        edit_similarity: 1 − Levenshtein distance / length of the longer text.
        line_f1: F1 of the multisets of lines.
    """

    exact: float
    edit_similarity: float
    line_f1: float

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 6) for k, v in asdict(self).items()}


#: The fidelity metrics' names, in report order (the fields of :class:`Fidelity`).
FIDELITY_METRICS: tuple[str, ...] = tuple(f.name for f in fields(Fidelity))
#: The headline metric: the first column and chart of every report.
HEADLINE_METRIC = "line_f1"
#: Their names in tables and charts.
METRIC_LABELS = {"exact": "exact", "edit_similarity": "edit similarity", "line_f1": "line F1"}


def normalize(text: str) -> str:
    """Right-strip every line and drop trailing blank lines."""
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip("\n")


def _pattern(text: str, spans: list[Span]) -> str:
    parts, pos = [], 0
    for s, e in spans:
        parts.append(re.escape(text[pos:s]))
        parts.append(r"[\s\S]*?" if _covers_lines(text, s, e) else r"\S*")
        pos = e
    parts.append(re.escape(text[pos:]))
    return "".join(parts)


def _covers_lines(text: str, s: int, e: int) -> bool:
    # A span across or over whole lines may match any lines; a word span, any word.
    starts_line = s == 0 or text[s - 1] == "\n"
    ends_line = e == len(text) or text[e] == "\n"
    return "\n" in text[s:e] or (starts_line and ends_line)


def _masked(text: str, spans: list[Span]) -> str:
    parts, pos = [], 0
    for s, e in spans:
        parts += [text[pos:s], _MASK]
        pos = e
    parts.append(text[pos:])
    return "".join(parts)


def _clip(spans: list[Span], n: int) -> list[Span]:
    return [(max(0, s), min(n, e)) for s, e in spans if s < n and e > s]


def fidelity(predicted: str, real: str, volatile: list[Span] | None = None,
             canonical: Callable[[str], str] | None = None) -> Fidelity:
    """Score ``predicted`` against ``real``.

    Args:
        predicted: the predicted observation text (already extracted, see
            :func:`lwm.parse.parse_output`).
        real: the real observation text, as the environment wrote it.
        volatile: ``[start, end)`` spans of ``real`` that vary between real runs.
        canonical: the domain's comparator (see :func:`lwm.domains.comparator`): when the
            texts differ but their normal forms are equal (e.g. the same JSON with another
            key order), ``exact`` is 1.0. Not applied with volatile spans (the spans are
            offsets in the raw text).

    Returns:
        the three scores. With volatile spans, a prediction that matches ``real`` with
        any text in the spans scores 1.0 on all three; otherwise each predicted line that
        matches a real line up to its spans counts as equal to it, and other lines are
        compared as they are.
    """
    pred = normalize(predicted)
    spans = _clip(sorted(volatile or []), len(real))
    if not spans:
        a, b = pred, normalize(real)
    elif re.fullmatch(_pattern(real, spans), pred):
        return Fidelity(1.0, 1.0, 1.0)
    else:
        patterns = _line_patterns(real, spans)
        a = "\n".join(next((masked for pat, masked in patterns if pat.fullmatch(line)), line)
                      for line in pred.split("\n"))
        b = normalize(_masked(real, spans))
    exact = a == b or (canonical is not None and not spans and _same_canonical(canonical, pred, real))
    return Fidelity(1.0 if exact else 0.0, Levenshtein.normalized_similarity(a, b), line_f1(a, b))


def _same_canonical(canonical: Callable[[str], str], predicted: str, real: str) -> bool:
    try:
        return canonical(predicted) == canonical(real)
    except Exception:  # a comparator must not fail a row on a model's odd output
        return False


def _line_patterns(real: str, spans: list[Span]) -> list[tuple[re.Pattern, str]]:
    out, start = [], 0
    for line in real.split("\n"):
        end = start + len(line)
        local = [(max(s, start) - start, min(e, end) - start) for s, e in spans if s < end and e > start]
        if local:
            out.append((re.compile(_pattern(line, local)), _masked(line, local).rstrip()))
        start = end + 1
    return out


def line_f1(predicted: str, real: str) -> float:
    """F1 between the multisets of lines of two texts (1.0 when both are empty)."""
    p, r = Counter(predicted.split("\n")), Counter(real.split("\n"))
    if not predicted and not real:
        return 1.0
    overlap = sum((p & r).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / sum(p.values()), overlap / sum(r.values())
    return 2 * precision * recall / (precision + recall)


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a success rate (E. B. Wilson, "Probable inference, the
    law of succession, and statistical inference", JASA 22, 1927): ``(low, high)`` in
    [0, 1], 95 % by default (``z`` is the normal quantile). Better than the normal
    approximation for small ``n`` and rates near 0 or 1.

    >>> [round(x, 3) for x in wilson_interval(0, 20)]
    [0.0, 0.161]
    >>> [round(x, 3) for x in wilson_interval(10, 20)]
    [0.299, 0.701]

    Raises:
        ValueError: ``n`` < 1 or ``successes`` outside [0, n].
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got {successes} of {n}")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def sign_test(wins: int, losses: int) -> float:
    """The exact two-sided sign test of paired outcomes (McNemar's exact test): the
    probability, were both sides equally likely to win a discordant pair, of a split at
    least as uneven as ``wins`` against ``losses`` (the binomial with p = 1/2; ties are left
    out before). 1.0 when there is no discordant pair.

    >>> round(sign_test(21, 0), 8), round(sign_test(14, 11), 3), sign_test(0, 0)
    (9.5e-07, 0.69, 1.0)

    Raises:
        ValueError: a count below 0.
    """
    if wins < 0 or losses < 0:
        raise ValueError(f"counts must be at least 0, got {wins} and {losses}")
    n = wins + losses
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2 * tail)
