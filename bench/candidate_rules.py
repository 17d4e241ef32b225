"""How candidate scoring's choice rule would have done, from one ``lwm eval --score-candidates``
run: every candidate is rebuilt from the run's rows and the model's raw answer, scored against
the real observation, and picked by each rule from the log-probabilities the run recorded.
(For a run without ``--index``: the retrieved neighbours are not rebuilt.)

    python bench/candidate_rules.py RUN_DIR DATA   # DATA: the rows the run evaluated

Rules: ``model`` (greedy decoding alone), ``mean`` (the highest mean log-probability per
token: what lwm.candidates does), ``sum`` (the highest total), ``mean±b`` (the model's own
answer gets b nats per token more), ``oracle`` (the best candidate by line F1: the
ceiling). Prints exact / edit similarity / line F1 (×100) per rule and how often each
candidate was picked.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from lwm import domains
from lwm.candidates import candidates
from lwm.eval.runner import load_rows, row_key
from lwm.metrics import fidelity
from lwm.parse import observation_text, parse_output
from lwm.prediction import row_prediction


def main(run: Path, data: Path) -> None:
    rows = load_rows(data)
    records = {json.loads(line)["key"]: json.loads(line) for line in (run / "predictions.jsonl").open()}
    mode = json.loads((run / "run.json").read_text())["prediction"]
    rules = {"model": lambda s: "model",
             "mean": lambda s: max(s, key=lambda k: (s[k][0] / max(s[k][1], 1), k == "model")),
             "sum": lambda s: max(s, key=lambda k: (s[k][0], k == "model"))}
    for bonus in (0.1, -0.05, -0.1, -0.15, -0.2, -0.3, -0.5):
        rules[f"mean{bonus:+}"] = lambda s, b=bonus: max(
            s, key=lambda k: (s[k][0] / max(s[k][1], 1) + (b if k == "model" else 0), k == "model"))
    for bonus in (0.0, -0.1, -0.15, -0.2, -0.3):
        rules[f"no-rl{bonus:+}"] = lambda s, b=bonus: max(
            (k for k in s if k != "repeat-last"),
            key=lambda k: (s[k][0] / max(s[k][1], 1) + (b if k == "model" else 0), k == "model"))
    totals = {name: [0.0, 0.0, 0.0] for name in [*rules, "oracle"]}
    picks = {name: Counter() for name in totals}
    n = 0
    for i, row in enumerate(rows):
        rec = records.get(row_key(i, row))
        if not rec or rec.get("error") or "candidate_scores" not in rec:
            continue
        n += 1
        written = parse_output(rec["output"], rec.get("reasoning")).observation
        options = candidates(row, mode, written)
        scores = rec["candidate_scores"]
        spec = domains.find(row.domain)
        real = observation_text(row.ground_truth)
        fid = {k: fidelity(full, real, row.volatile, spec and spec.canonical) for k, (_, full) in options.items()}
        chosen = {name: rule({k: v for k, v in scores.items() if k in options}) for name, rule in rules.items()}
        chosen["oracle"] = max(options, key=lambda k: (fid[k].line_f1, fid[k].exact, k == "model"))
        for name, source in chosen.items():
            f = fid[source]
            totals[name] = [t + v for t, v in zip(totals[name], (f.exact, f.edit_similarity, f.line_f1))]
            picks[name][source] += 1
        assert row_prediction(row, mode) in ("full", "change")
    if n == 0:
        raise SystemExit(f"{run}: no row has candidate scores (run lwm eval --score-candidates)")
    print(f"{n} rows of {run} (mode {mode})")
    print(f"{'rule':<10} {'exact':>7} {'edit':>7} {'line F1':>8}  picks")
    for name, (e, s, f) in totals.items():
        print(f"{name:<10} {100 * e / n:7.2f} {100 * s / n:7.2f} {100 * f / n:8.2f}  {dict(picks[name])}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
