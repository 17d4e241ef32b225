"""A reward run's decisions at other thresholds than 0.5, read offline: balanced accuracy,
precision, recall and false-success rate of the P(achieved) that ``lwm agent rewards`` wrote
(its ``verdicts.partial.jsonl``), against the real labels of the episodes it judged
(docs/results.md, the reward model's fifth stage).

    python bench/verdict_thresholds.py RUN_DIR EPISODES.jsonl [EPISODES.jsonl ...] \
        [--split heldout|train|all] [--thresholds 0.5 0.6 0.7 0.8 0.9]

Give the episode files in the order the run was given them (repeated ids are numbered in
that order, as ``lwm agent rewards`` numbers them). Rates ×100.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lwm.data.verdicts import labelled_episodes
from lwm.eval.rewards import unique_ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="an lwm agent rewards --out directory")
    ap.add_argument("episodes", nargs="+", type=Path, help="the episode files the run judged, in its order")
    ap.add_argument("--split", default="all", choices=("heldout", "train", "all"))
    ap.add_argument("--thresholds", nargs="+", type=float, default=[0.5, 0.6, 0.7, 0.8, 0.9])
    args = ap.parse_args()
    eps = [t for t, _ in labelled_episodes(args.episodes) if args.split == "all" or t.metadata["split"] == args.split]
    real = dict(zip(unique_ids([t.id for t in eps]), [(t.reward or 0) >= 0.5 for t in eps]))
    scores = {}
    for line in (args.run / "verdicts.partial.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["id"].startswith("verdict:"):
            scores[row["id"].removeprefix("verdict:")] = row["reward"] if row["reward"] is not None else 0.0
    unknown = [k for k in scores if k not in real]
    if unknown:
        raise SystemExit(f"{len(unknown)} judged episodes are not in the files given (e.g. {unknown[0]}): "
                         "give the run's episode files, in its order, with its --split")
    pos = [s for k, s in scores.items() if real[k]]
    neg = [s for k, s in scores.items() if not real[k]]
    print(f"{args.run}: {len(scores)} verdicts, {len(pos)} real successes")
    print("| threshold | balanced accuracy | precision | recall | false-success rate |\n|---:|---:|---:|---:|---:|")
    for th in args.thresholds:
        tp, fp = sum(s >= th for s in pos), sum(s >= th for s in neg)
        tpr, fpr = tp / len(pos) if pos else 0.0, fp / len(neg) if neg else 0.0
        prec = f"{100 * tp / (tp + fp):.1f}" if tp + fp else "—"
        print(f"| {th:.2f} | {100 * (tpr + 1 - fpr) / 2:.1f} | {prec} | {100 * tpr:.1f} | {100 * fpr:.1f} |")


if __name__ == "__main__":
    main()
