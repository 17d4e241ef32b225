"""An adapter's fidelity on the task families it never trained on, apart from the rest.

``lwm eval`` without ``--heldout`` evaluates the whole terminal suite, whose training families
the shipped warm-up adapter was trained on (the same episodes, and the same outputs where they
do not change from run to run), so its headline mixes seen and unseen rows. For ``lwm eval``
runs over rows collected by ``lwm collect`` (the trajectories beside the rows name each
episode's family), this prints exact / edit similarity / line F1 (×100) of each run on the rows
of the families the adapter never trained on (its record's validation families less those an
earlier stage trained on: :func:`lwm.models.embedded.heldout_families`, what ``--heldout``
keeps), on the other rows, and on all, with the trivial guess's on the same rows (what the
runs recorded as ``trivial_fidelity``), and the rows where the run's answer scores above /
below it in line F1. The model's greedy answer (without candidate scoring) is drawn again from
what it wrote.

    lwm eval --model embedded-warmup --out RUN          # collects the whole suite into RUN/data
    lwm eval --model embedded --adapter X.gguf --data RUN/data --out RUN2   # the same rows
    python bench/family_split.py RUN [RUN ...] [--data ROWS] [--record lwm/models/adapters/X.json]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from lwm import domains
from lwm.errors import LwmError
from lwm.eval.runner import row_families, run_rows
from lwm.jsonl import read_json
from lwm.metrics import fidelity
from lwm.models.embedded import heldout_families
from lwm.parse import observation_text, parse_output
from lwm.prediction import model_observation

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "lwm/models/adapters/smollm2-135m-warmup.json"
METRICS = ("exact", "edit_similarity", "line_f1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="lwm eval run directories (their data/ holds the rows)")
    ap.add_argument("--record", type=Path, default=SHIPPED, help="the adapter's record (its held-out families)")
    ap.add_argument("--data", type=Path, help="the rows the runs evaluated (default: each run's data/)")
    args = ap.parse_args()
    try:
        held = heldout_families(read_json(args.record))
    except LwmError as e:
        raise SystemExit(f"--record: {e}") from None
    if held is None:
        raise SystemExit(f"{args.record}: the record does not say which families the adapter never trained on")
    runs = {}
    for run in args.runs:
        data = args.data or run / "data"
        try:
            rows = run_rows(run, data)
            runs[run] = rows, row_families([row for row, _ in rows], data), read_json(run / "run.json")
        except LwmError as e:  # the files, the rows, a family unknown: one line, not a traceback
            raise SystemExit(f"{run}: {e}") from None
        if not isinstance(runs[run][2].get("prediction"), str):
            raise SystemExit(f"{run}: run.json names no prediction mode (not a finished lwm eval run)")
    print("| run | rows | answer | exact | edit sim. | line F1 | trivial (exact / edit / line F1) "
          "| above / below trivial |")
    print("|---|---|---|---:|---:|---:|---|---|")
    for run, (rows, family, settings) in runs.items():
        mode, scored = settings["prediction"], settings.get("score_candidates", False)
        sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0] * 4)
        margin: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for row, rec in rows:
            if rec.get("error") or "trivial_fidelity" not in rec:  # no trivial guess: not compared
                continue
            spec, real = domains.get(row.domain), observation_text(row.ground_truth)
            answers = {"run": rec["fidelity"], "trivial": rec["trivial_fidelity"]}
            if scored:  # the greedy answer drawn again (a row answered without the model has one answer)
                answers["greedy"] = answers["run"]
                if rec.get("candidate"):
                    parsed = parse_output(rec["output"], rec.get("reasoning"), truncated=bool(rec.get("truncated")))
                    greedy = model_observation(row, parsed.observation, parsed.issues, mode)[0]
                    answers["greedy"] = fidelity(greedy, real, row.volatile, spec.canonical).to_dict()
            group = "held-out families" if family.get(row.id) in held else "training families"
            for g in (group, "all"):
                for name, f in answers.items():
                    s = sums[g, name]
                    s[0] += 1
                    for j, m in enumerate(METRICS, start=1):
                        s[j] += f[m]
                    if name != "trivial":
                        d = f["line_f1"] - answers["trivial"]["line_f1"]
                        margin[g, name][0] += d > 0
                        margin[g, name][1] += d < 0
        for g in ("held-out families", "training families", "all"):
            t = sums[g, "trivial"]
            if not t[0]:
                print(f"| {run.name} | {g} (0) | — | | | | | |")
                continue
            trivial = " / ".join(f"{100 * v / t[0]:.2f}" for v in t[1:])
            for name in ("run", "greedy"):
                s = sums.get((g, name))
                if s is None:
                    continue
                above, below = margin[g, name]
                vals = " | ".join(f"{100 * v / s[0]:.2f}" for v in s[1:])
                print(f"| {run.name} | {g} ({int(s[0])}) | {name} | {vals} | {trivial} | {above} / {below} |")


if __name__ == "__main__":
    main()
