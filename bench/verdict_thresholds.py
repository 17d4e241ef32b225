"""A reward run's decisions at other thresholds than 0.5, read offline: balanced accuracy,
precision, recall and false-success rate of the rewards (e.g. P(achieved)) that ``lwm agent
rewards`` wrote in its journal, against the real labels of the episodes it judged
(docs/results.md, the reward model's fifth stage). The episodes are those the run's
``settings.json`` names, selected as the run selected them; run it from the directory the
run was started in (the episode paths are recorded as given).

    python bench/verdict_thresholds.py RUN_DIR [--thresholds 0.5 0.6 0.7 0.8 0.9]

Rates ×100, one table per reward source of the run; as in the run's own tables, a missing or
unreadable verdict counts as "not achieved".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lwm.errors import LwmError
from lwm.eval.rewards import RewardEvalConfig, agreement, judged_episodes, unique_ids
from lwm.jsonl import iter_jsonl, read_json


def _threshold(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:   # also refuses nan
        raise argparse.ArgumentTypeError(f"a threshold is a probability in [0, 1], got {text}")
    return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="an lwm agent rewards --out directory")
    ap.add_argument("--thresholds", nargs="+", type=_threshold, default=[0.5, 0.6, 0.7, 0.8, 0.9])
    args = ap.parse_args()
    try:
        settings = read_json(args.run / "settings.json")
        config = RewardEvalConfig(episodes=tuple(settings["episodes"]), out=args.run, split=settings["split"],
                                  max_episodes=settings.get("max_episodes"))
        episodes = judged_episodes(config)
        rewards = {row["id"]: row["reward"] for _, row in iter_jsonl(args.run / "verdicts.partial.jsonl")}
    except (LwmError, ValueError, KeyError) as e:
        raise SystemExit(f"error: {args.run} is not a readable lwm agent rewards run: {e}") from None
    if not rewards:
        raise SystemExit(f"error: {args.run} holds no verdict yet (its verdicts.partial.jsonl is empty)")
    ids = unique_ids([t.id for t, _ in episodes])   # the journal's keys, as the run made them
    real = [t.reward for t, _ in episodes]
    for source in sorted({key.split(":", 1)[0] for key in rewards}):
        judged = [rewards.get(f"{source}:{i}") for i in ids]
        print(f"{args.run}, {source}: {sum(v is not None for v in judged)} verdicts of {len(ids)} episodes, "
              f"{sum(r >= 0.5 for r in real)} real successes")
        print("| threshold | balanced accuracy | precision | recall | false-success rate |\n|---:|---:|---:|---:|---:|")
        for th in args.thresholds:
            a = agreement(real, [float(v is not None and v >= th) for v in judged])
            recall = None if a["missed_success_rate"] is None else 1 - a["missed_success_rate"]
            cells = (a["balanced_accuracy"], a["precision"], recall, a["false_success_rate"])
            print(f"| {th:.2f} | " + " | ".join("—" if c is None else f"{100 * c:.1f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
