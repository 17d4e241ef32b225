"""World models against their references, on the same held-out rows.

Runs ``lwm eval`` (the Python API, same settings for all) with the base embedded model,
``baseline:repeat-last``, ``baseline:trivial`` and the warm-up model (the shipped adapter,
or ``--adapter``; more with ``--candidate``), each in its own run directory under
``--out`` (resumable: re-run to finish), then prints the Markdown tables of
docs/results.md: line F1, exact match and edit similarity per domain, the macro mean over
domains, the first candidate's margins, and the generated tokens and seconds per row.

    python bench/warmup_results.py --data runs/ds/heldout --out runs/results [--adapter x.gguf] [--no-merge]
    python bench/warmup_results.py --data ds/heldout --out results --per-domain 30 \\
        --candidate warm-up-v1=runs/adapters/warmup-v1.gguf:full

``--per-domain N`` evaluates a seeded sample of at most N rows of each domain (written to
``--out/rows``), the same rows for every model; ``--exclude-family F`` leaves a family's
rows out (one that an adapter under test was trained on). A candidate is ``LABEL=ADAPTER[:MODE]``: a
GGUF adapter on the embedded model, or the run directory of ``lwm train rl --objective
fidelity`` (its adapter on the model it trained), asked in prediction mode ``full`` or
``change`` (default: as the adapter's record says, ``full`` without one; give the mode of
a fidelity run's dataset). ``--no-merge`` has llama.cpp apply adapters at run time
instead of loading the merged copy that ``lwm`` uses by default (see lwm.models.gguf_merge).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
from collections import defaultdict
from pathlib import Path

from _common import machine

from lwm.errors import DataNotFoundError, ModelUnavailableError, RowFormatError
from lwm.eval.baselines import load_predictor
from lwm.eval.runner import EvalConfig, evaluate, load_rows
from lwm.jsonl import iter_jsonl, read_json
from lwm.models import WORLD_MODEL, is_reference, load_model
from lwm.models.base import SamplingParams
from lwm.models.embedded import check_adapter
from lwm.parse import DEFAULT_STOP
from lwm.prediction import PREDICTIONS
from lwm.schema import write_rows
from lwm.train.records import RUN_FILE
from lwm.train.rl import policy_for

REFERENCES = ("embedded", "baseline:repeat-last", "baseline:trivial")
METRICS = (("line_f1", "line F1"), ("exact", "exact"), ("edit_similarity", "edit sim."))


def run(name: str, model_spec: str, adapter: str | None, prediction: str | None, data: Path,
        args: argparse.Namespace) -> dict:
    model = (load_predictor(model_spec) if is_reference(model_spec)
             else load_model(model_spec, adapter=adapter, merge_adapter=not args.no_merge))
    config = EvalConfig(out=args.out / name.replace(":", "-"), data=data, prediction=prediction,
                        sampling=SamplingParams(temperature=0.0, max_tokens=args.max_tokens, stop=DEFAULT_STOP))

    async def go() -> dict:
        try:
            return await evaluate(config, model, show_progress=True)
        finally:
            await model.aclose()

    return asyncio.run(go())


def sample_rows(data: Path, per_domain: int | None, out: Path, exclude: set[str], seed: int = 0) -> Path:
    """A seeded sample of at most ``per_domain`` rows of each domain (all without it), rows of
    the ``exclude`` families left out, written to ``out``."""
    by_domain = defaultdict(list)
    for row in load_rows(data):
        if getattr(row, "family", None) not in exclude:
            by_domain[row.domain].append(row)
    out.mkdir(parents=True, exist_ok=True)
    for domain, rows in sorted(by_domain.items()):
        n = len(rows) if per_domain is None else min(per_domain, len(rows))
        picked = sorted(random.Random(f"{seed}:{domain}").sample(range(len(rows)), n))
        write_rows(out / f"{domain}_test.jsonl", [rows[i] for i in picked])
    return out


def cost(run_dir: Path) -> tuple[float | None, float | None]:
    """Median generated tokens per row and seconds per row of a run."""
    tokens = [r["completion_tokens"] for _, r in iter_jsonl(run_dir / "predictions.jsonl")
              if isinstance(r.get("completion_tokens"), int)]
    run = read_json(run_dir / "summary.json").get("run", {})
    seconds, rows = run.get("predict_seconds_this_invocation"), run.get("rows_predicted_this_invocation")
    return (statistics.median(tokens) if tokens else None,
            seconds / rows if seconds and rows else None)


def table(summaries: dict[str, dict], warm: str, costs: dict[str, tuple]) -> str:
    domains = sorted(summaries[warm]["domains"])
    cols = list(summaries)
    lines = []
    for key, label in METRICS:
        lines += [f"\n**{label}** (×100; rows per domain in brackets)\n",
                  "| domain | " + " | ".join(cols) + f" | {warm} − best other |",
                  "|---|" + "---:|" * (len(cols) + 1)]
        for d in [*domains, "macro"]:
            vals = {c: (summaries[c]["macro"] if d == "macro" else summaries[c]["domains"].get(d, {})).get(key)
                    for c in cols}
            refs = [v for c, v in vals.items() if c != warm and v is not None]  # None: every row failed
            margin = f"{vals[warm] - max(refs):+.1f}" if refs and vals[warm] is not None else "—"
            rows = "" if d == "macro" else f" ({summaries[warm]['domains'][d]['rows']})"
            lines.append(f"| {d}{rows} | " + " | ".join("—" if vals[c] is None else f"{vals[c]:.1f}" for c in cols)
                         + f" | {margin} |")
    base = summaries["embedded"]["macro"]["line_f1"] if "embedded" in summaries else None
    mine = summaries[warm]["macro"]["line_f1"]
    if base is not None and mine is not None:
        lines.append(f"\n{warm} minus base, macro line F1: {mine - base:+.1f} points.")
    lines += ["\n| model | median generated tokens per row | seconds per row |", "|---|---:|---:|"]
    for c in cols:
        tokens, seconds = costs.get(c, (None, None))
        lines.append(f"| {c} | {'—' if tokens is None else f'{tokens:.0f}'} | "
                     f"{'—' if seconds is None else f'{seconds:.2f}'} |")
    return "\n".join(lines)


def candidate(text: str) -> tuple[str, str, str, str | None]:
    """``(label, model, adapter, mode)`` of ``LABEL=ADAPTER[:MODE]``; ``ADAPTER`` is a GGUF
    LoRA file (on the embedded model) or the run directory of ``lwm train rl --objective
    fidelity`` (its adapter on the model it trained)."""
    label, sep, rest = text.partition("=")
    adapter, colon, mode = rest.rpartition(":") if ":" in rest else (rest, "", "")
    if colon and mode not in PREDICTIONS:
        raise argparse.ArgumentTypeError(f"unknown prediction mode {mode!r} in {text!r} (full or change)")
    if not sep or not label or not adapter:
        raise argparse.ArgumentTypeError(f"expected LABEL=ADAPTER[:full|change], not {text!r}")
    try:
        if Path(adapter).is_dir():
            settings = read_json(Path(adapter) / RUN_FILE).get("settings")
            objective = settings.get("objective") if isinstance(settings, dict) else None
            if objective != "fidelity":
                raise argparse.ArgumentTypeError(f"{adapter} is not a run of lwm train rl --objective fidelity "
                                                 f"(objective {objective!r})")
            model, adapter = policy_for(Path(adapter))
        else:
            model = "embedded"
        check_adapter(adapter)
    except (DataNotFoundError, RowFormatError, ModelUnavailableError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return label, model, adapter, mode or None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="held-out rows (lwm data build's heldout/ directory)")
    ap.add_argument("--out", type=Path, required=True, help="one run directory per model is made here")
    ap.add_argument("--adapter", help="a GGUF LoRA to evaluate instead of the shipped warm-up adapter")
    ap.add_argument("--candidate", type=candidate, action="append", default=[], metavar="LABEL=ADAPTER[:MODE]",
                    help="another adapter to evaluate (repeatable)")
    ap.add_argument("--per-domain", type=int, help="a seeded sample of at most N rows per domain")
    ap.add_argument("--exclude-family", action="append", default=[], metavar="FAMILY",
                    help="leave out the rows of this family (e.g. one an adapter under test was trained on)")
    ap.add_argument("--no-base", action="store_true", help="leave out the base model (the references without a "
                    "model are always run)")
    ap.add_argument("--no-merge", action="store_true", help="apply the adapter at run time (llama.cpp LoRA)")
    ap.add_argument("--max-tokens", type=int, default=320, help="generated tokens per row at most (all models)")
    args = ap.parse_args()
    if args.per_domain is not None and args.per_domain < 1:
        ap.error("--per-domain must be at least 1")
    chosen = args.per_domain or args.exclude_family
    data = sample_rows(args.data, args.per_domain, args.out / "rows", set(args.exclude_family)) if chosen else args.data
    warm = "warm-up"
    summaries = {warm: run(warm, "embedded" if args.adapter else WORLD_MODEL, args.adapter, None, data, args)}
    for label, model, adapter, mode in args.candidate:
        summaries[label] = run(label, model, adapter, mode, data, args)
    summaries |= {name: run(name, name, None, None, data, args) for name in REFERENCES
                  if not (args.no_base and name == "embedded")}
    costs = {name: cost(args.out / name.replace(":", "-")) for name in summaries}
    print(machine())
    print(table(summaries, warm, costs))


if __name__ == "__main__":
    main()
