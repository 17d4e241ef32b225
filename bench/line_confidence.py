"""Would the world model beat the trivial guess if it left out the lines it is unsure of?

A wrong output line costs more line F1 than writing nothing (the trivial guess of the
terminal writes no output), so a model that knew which of its lines it is unsure of could
leave them out. For an ``lwm eval`` run of a local llama.cpp model, this scores every token
of each answer the run's model wrote (``LlamaCppChatModel.token_logprobs``, the prompt built
as the run built it), and prints exact / edit similarity / line F1 (×100) when the lines whose
least likely token is below a probability ``tau`` are left out (lines at the shell's prompt —
the echo of the command and the prompt after it — always kept), on the rows of the task
families the adapter never trained on (:func:`lwm.models.embedded.heldout_families`) and on
the others, with the trivial guess on the same rows. ``tau`` 0 is the run itself.

    lwm eval --out RUN                                 # the whole terminal suite
    python bench/line_confidence.py RUN [--model embedded-warmup] [--adapter X.gguf] [--data ROWS]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
from collections import defaultdict
from pathlib import Path

from _common import greedy_run

from lwm import domains
from lwm.errors import LwmError
from lwm.eval.runner import row_families
from lwm.jsonl import read_json
from lwm.metrics import fidelity
from lwm.models import WORLD_MODEL
from lwm.models.embedded import WARMUP_ADAPTER, heldout_families
from lwm.parse import observation_text, parse_output
from lwm.prediction import model_observation, request

PROMPT_LINE = re.compile(r"^\S+@\S+:[^\n]*[#$]")
METRICS = ("exact", "edit_similarity", "line_f1")
TAUS = (0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9, 0.95)


def line_confidence(tokens: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The answer's lines, each with the log-probability of its least likely token (a token
    that ends one line and starts the next counts for both; an empty line gets 0)."""
    lines, current, worst = [], "", 0.0
    for text, logprob in tokens:
        parts = text.split("\n")
        for k, part in enumerate(parts):
            if part or k == 0:
                worst = min(worst, logprob)
            current += part
            if k < len(parts) - 1:
                lines.append((current, worst))
                current, worst = "", logprob if parts[k + 1] else 0.0
    lines.append((current, worst))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a finished lwm eval run (its data/ holds the rows)")
    ap.add_argument("--data", type=Path, help="the rows the run evaluated (default: the run's data/)")
    ap.add_argument("--model", default=WORLD_MODEL, help="the run's model (a local llama.cpp model)")
    ap.add_argument("--adapter", help="the run's adapter (GGUF), with --model embedded")
    ap.add_argument("--record", type=Path, default=WARMUP_ADAPTER.with_suffix(".json"),
                    help="the adapter's record (its held-out families)")
    args = ap.parse_args()
    try:
        scored, mode = score_lines(args)
    except LwmError as e:  # missing files, unknown families, a model that cannot be loaded: one line
        raise SystemExit(f"{args.run}: {e}") from None
    print_table(scored, mode)


def score_lines(args: argparse.Namespace) -> tuple[list[tuple], str]:
    """Each row of the run with its record, its group and its answer's lines with their
    confidence (``None`` for a row the model did not answer); and the run's prediction mode."""
    data = args.data or args.run / "data"
    held = heldout_families(read_json(args.record))
    if held is None:
        raise SystemExit(f"{args.record}: the record does not say which families the adapter never trained on")
    settings, rows, model = greedy_run(args.run, data, args.model, args.adapter)
    family = row_families([row for row, _ in rows], data)
    if not hasattr(model, "token_logprobs"):
        raise SystemExit(f"{args.model} cannot score its answers' tokens (a local llama.cpp model can)")
    mode = settings["prediction"]
    scored = []
    for row, rec in rows:
        if rec.get("error") or "trivial_fidelity" not in rec:
            continue
        group = "held-out families" if family[row.id] in held else "training families"
        lines = None
        if rec.get("output") and not rec.get("certain"):
            messages = request(row, mode, model.count_tokens, settings["max_prompt_tokens"],
                               compact=settings.get("compact_tools", False))[0]
            lines = line_confidence(asyncio.run(model.token_logprobs(messages, rec["output"])))
        scored.append((row, rec, group, lines))
    return scored, mode


def print_table(scored: list[tuple], mode: str) -> None:
    """The table of fidelity for each ``tau`` (see the module docstring); ``mode``: the run's
    prediction mode."""
    print("| tau | rows | lines left out | exact | edit sim. | line F1 | trivial (exact / edit / line F1) |")
    print("|---:|---|---:|---:|---:|---:|---|")
    for tau in TAUS:
        sums: dict[str, list[float]] = defaultdict(lambda: [0.0] * 8)
        for row, rec, group, lines in scored:
            s, f, dropped = sums[group], rec["fidelity"], 0
            if tau > 0 and lines is not None:
                keep = [text for text, worst in lines if PROMPT_LINE.match(text) or worst >= math.log(tau)]
                dropped = len(lines) - len(keep)
                parsed = parse_output("\n".join(keep), rec.get("reasoning"), truncated=bool(rec.get("truncated")))
                observation = model_observation(row, parsed.observation, parsed.issues, mode)[0]
                f = fidelity(observation, observation_text(row.ground_truth), row.volatile,
                             domains.get(row.domain).canonical).to_dict()
            s[0] += 1
            s[1] += dropped
            for j, m in enumerate(METRICS):
                s[2 + j] += f[m]
                s[5 + j] += rec["trivial_fidelity"][m]
        for group in ("held-out families", "training families"):
            s = sums[group]
            if s[0]:
                model_f = " | ".join(f"{100 * v / s[0]:.2f}" for v in s[2:5])
                trivial = " / ".join(f"{100 * v / s[0]:.2f}" for v in s[5:8])
                print(f"| {tau} | {group} ({int(s[0])}) | {int(s[1])} | {model_f} | {trivial} |")


if __name__ == "__main__":
    main()
