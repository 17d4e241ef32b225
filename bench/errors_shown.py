"""Does a world model show the errors the real environment shows? On held-out rows (``lwm eval``
runs over the same AgentWorldBench rows), per domain and model:

- rows whose real observation shows a new error (``_common.ERROR`` matches more often than in
  the previous observation: a terminal screen keeps an earlier error on screen), and the share
  of them whose prediction shows a new error too (errors shown, ×100);
- rows whose real observation shows none, and the share whose prediction invents one
  (errors invented, ×100);
- mean line F1 of each group.

    lwm eval --data ROWS --model embedded-warmup --out RUN_A        # and other models
    python bench/errors_shown.py ROWS RUN_A RUN_B ...

A simulator that shows no error where the real environment refuses an action gives the
reward model a history that looks successful (docs/results.md, rejection-sampling
fine-tuning inside the simulator).
"""

from __future__ import annotations

from collections import defaultdict

from _common import ERROR, rows_and_runs

from lwm.jsonl import iter_jsonl


def new_error(observation: str, previous: str) -> bool:
    """Whether ``observation`` shows more error matches than ``previous``."""
    return len(ERROR.findall(observation)) > len(ERROR.findall(previous))


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.1f}" if n else "—"


def main() -> None:
    rows, rows_dir, runs = rows_and_runs(__doc__)
    # (id, turn) -> (domain, real new error?, previous observation); the rows' responses are
    # wrapped in the benchmark's fence, which the pattern never matches
    truth = {}
    for r in rows:
        previous = r.response[r.turn_idx - 2] if r.turn_idx > 1 else ""
        truth[(r.id, str(r.turn_idx))] = (r.domain, new_error(r.ground_truth, previous), previous)
    print("| model | domain | rows with a real error | errors shown | line F1 there | rows without "
          "| errors invented | line F1 there |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for run, path in runs:
        cells: dict[str, dict[bool, list[tuple[bool, float]]]] = defaultdict(lambda: {True: [], False: []})
        for _, p in iter_jsonl(path):
            key = (p["id"], str(p["turn_idx"]))
            if key not in truth:
                raise SystemExit(f"error: {path} holds {key}, which is not a row of {rows_dir}")
            domain, real_error, previous = truth[key]
            shown = p.get("error") is None and new_error(p.get("observation") or "", previous)
            f1 = (p.get("fidelity") or {}).get("line_f1", 0.0)
            cells[domain][real_error].append((shown, f1))
        for domain in sorted(cells):
            err, ok = cells[domain][True], cells[domain][False]
            print(f"| {run.name} | {domain} | {len(err)} | {_pct(sum(s for s, _ in err), len(err))} "
                  f"| {_pct(sum(f for _, f in err), len(err))} | {len(ok)} | {_pct(sum(s for s, _ in ok), len(ok))} "
                  f"| {_pct(sum(f for _, f in ok), len(ok))} |")


if __name__ == "__main__":
    main()
