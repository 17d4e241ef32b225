"""What putting a predicted change right (``Domain.ground_change``: the terminal's echo of
typed keys) does, on recorded generations: no model is run.

For ``lwm eval`` runs in mode ``change`` (their ``predictions.jsonl`` records what the model
wrote, ``change``), per run and domain with a ``ground_change``: the mean fidelity of the
change drawn as it was written, and drawn through the domain's ``ground_change`` (what
``lwm.prediction.full_observation`` does now), beside the trivial guess; and, on the rows'
own real observations, how many real changes ``ground_change`` leaves as they are (all of
them, or a perfect answer would lose points).

    lwm eval --data ROWS --model embedded-warmup --out RUN
    python bench/ground_change.py ROWS RUN [RUN ...]
"""

from __future__ import annotations

from collections import defaultdict

from _common import rows_and_runs

from lwm import domains
from lwm.jsonl import iter_jsonl
from lwm.metrics import FIDELITY_METRICS, fidelity
from lwm.parse import observation_text
from lwm.prediction import action_of, observed_change, previous_observation, row_prediction


def main() -> None:
    rows, _, runs = rows_and_runs(__doc__, "lwm eval run directories over those rows (mode change)")
    rows = {(r.id, r.turn_idx): r for r in rows}
    grounded = {k: r for k, r in rows.items() if domains.get(r.domain).ground_change is not None
                and row_prediction(r, "change") == "change"}
    kept, changed = 0, 0
    for row in grounded.values():
        spec, real = domains.get(row.domain), observed_change(row)
        if real is not None:
            kept += spec.ground_change(real, previous_observation(row), action_of(row) or "", row.system_str) == real
            changed += 1
    print(f"real changes left as they are: {kept} of {changed}")
    print("| run | domain | rows | put right | as written (exact / edit / line F1) | grounded | trivial |")
    print("|---|---|---:|---:|---|---|---|")
    for run, path in runs:
        sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0] * 3))
        counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for _, p in iter_jsonl(path):
            row = grounded.get((p["id"], p["turn_idx"]))
            if row is None or p.get("error") or "change" not in p:
                continue
            spec, previous, action = domains.get(row.domain), previous_observation(row), action_of(row) or ""
            put_right = spec.ground_change(p["change"], previous, action, row.system_str)
            real = observation_text(row.ground_truth)
            drawn = {"as written": spec.render_change(p["change"], previous, action, row.system_str),
                     "grounded": spec.render_change(put_right, previous, action, row.system_str),
                     "trivial": spec.trivial_observation(action, previous, row.system_str)}
            for name, observation in drawn.items():
                score = fidelity(observation, real, row.volatile, spec.canonical).to_dict()
                for i, metric in enumerate(FIDELITY_METRICS):
                    sums[row.domain][name][i] += score[metric]
            counts[row.domain][0] += 1
            counts[row.domain][1] += put_right != p["change"]
        for domain, (n, fixed) in sorted(counts.items()):
            cells = [" / ".join(f"{100 * v / n:.2f}" for v in sums[domain][name])
                     for name in ("as written", "grounded", "trivial")]
            print(f"| {run.name} | {domain} | {n} | {fixed} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
