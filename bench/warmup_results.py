"""The warm-up world model against its references, on the same held-out rows.

Runs ``lwm eval`` (the Python API, same settings for all) with the base embedded model,
``baseline:repeat-last``, ``baseline:trivial`` and the warm-up model (or ``--adapter``),
each in its own run directory under ``--out`` (resumable: re-run to finish), then prints
the Markdown table of docs/results.md: line F1, exact match and edit similarity per
domain, the macro mean over domains, and the warm-up model's margins.

    python bench/warmup_results.py --data runs/ds/heldout --out runs/results [--adapter x.gguf] [--no-merge]

``--no-merge`` has llama.cpp apply the adapter at run time instead of loading the merged
copy that ``lwm`` uses by default (see lwm.models.gguf_merge).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from _common import machine

from lwm.eval.runner import EvalConfig, evaluate
from lwm.models import WORLD_MODEL, load_model
from lwm.models.base import SamplingParams
from lwm.parse import DEFAULT_STOP

REFERENCES = ("embedded", "baseline:repeat-last", "baseline:trivial")
METRICS = (("line_f1", "line F1"), ("exact", "exact"), ("edit_similarity", "edit sim."))


def run(name: str, model_spec: str, adapter: str | None, args: argparse.Namespace) -> dict:
    model = load_model(model_spec, adapter=adapter, merge_adapter=not args.no_merge)
    config = EvalConfig(out=args.out / name.replace(":", "-"), data=args.data,
                        sampling=SamplingParams(temperature=0.0, max_tokens=args.max_tokens, stop=DEFAULT_STOP))

    async def go() -> dict:
        try:
            return await evaluate(config, model, show_progress=True)
        finally:
            await model.aclose()

    return asyncio.run(go())


def table(summaries: dict[str, dict], warm: str) -> str:
    domains = sorted(summaries[warm]["domains"])
    cols = list(summaries)
    lines = []
    for key, label in METRICS:
        lines += [f"\n**{label}** (×100; rows per domain in brackets)\n",
                  "| domain | " + " | ".join(cols) + f" | {warm} − best reference |",
                  "|---|" + "---:|" * (len(cols) + 1)]
        for d in [*domains, "macro"]:
            vals = {c: (summaries[c]["macro"] if d == "macro" else summaries[c]["domains"][d])[key] for c in cols}
            refs = [v for c, v in vals.items() if c != warm and v is not None]  # None: every row failed
            margin = f"{vals[warm] - max(refs):+.1f}" if refs and vals[warm] is not None else "—"
            rows = "" if d == "macro" else f" ({summaries[warm]['domains'][d]['rows']})"
            lines.append(f"| {d}{rows} | " + " | ".join("—" if vals[c] is None else f"{vals[c]:.1f}" for c in cols)
                         + f" | {margin} |")
    base, mine = summaries["embedded"]["macro"]["line_f1"], summaries[warm]["macro"]["line_f1"]
    if base is not None and mine is not None:
        lines.append(f"\nWarm-up minus base, macro line F1: {mine - base:+.1f} points.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="held-out rows (lwm data build's heldout/ directory)")
    ap.add_argument("--out", type=Path, required=True, help="one run directory per model is made here")
    ap.add_argument("--adapter", help="a GGUF LoRA to evaluate instead of the shipped warm-up adapter")
    ap.add_argument("--no-merge", action="store_true", help="apply the adapter at run time (llama.cpp LoRA)")
    ap.add_argument("--max-tokens", type=int, default=320, help="generated tokens per row at most (all models)")
    args = ap.parse_args()
    warm = "warm-up"
    mine = run(warm, "embedded" if args.adapter else WORLD_MODEL, args.adapter, args)
    summaries = {name: run(name, name, None, args) for name in REFERENCES} | {warm: mine}
    print(machine())
    print(table(summaries, warm))


if __name__ == "__main__":
    main()
