"""What rejection sampling inside the simulator kept, against the real environment: the
attempts of an ``lwm train rft --backend sim`` run, their actions replayed for real by ``lwm
wm2real`` (docs/results.md, rejection-sampling fine-tuning inside the simulator).

    lwm wm2real RFT_DIR/attempts.jsonl --out REPLAY_DIR
    python bench/rft_acceptance.py RFT_DIR REPLAY_DIR [--threshold T]

Per domain and in all: attempts, real successes of their actions, and for two acceptance
rules — the reward alone (``--any-answer``) and the reward with every answer well formed (the
default, :func:`lwm.train.rft.is_accepted`) — how many were accepted, the precision (accepted
attempts that succeed for real, ×100) and the recall (real successes accepted, ×100). Then
the real successes per family, and per domain the attempts whose first action's real
observation shows an error (``_common.ERROR``), and how many of those the simulator showed one
for (first actions only: a terminal screen keeps an error on screen at later steps).
"""

from __future__ import annotations

import argparse
import hashlib
from collections import defaultdict
from pathlib import Path

from _common import ERROR

from lwm.errors import LwmError
from lwm.eval.rewards import agreement
from lwm.jsonl import iter_jsonl, read_json
from lwm.schema import read_trajectories
from lwm.train.rft import is_accepted


def _replay_problem(record: dict) -> str | None:
    """What is wrong with a line of ``wm2real.jsonl``, or ``None``."""
    reward, steps = record.get("real_reward"), record.get("steps")
    if not isinstance(record.get("id"), str):
        return "no episode id"
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))
                               or not 0 <= reward <= 1):
        return f"real_reward must be a number in [0, 1] or null, not {reward!r}"
    if not isinstance(steps, list) or not all(isinstance(s, dict) and isinstance(s.get("real_observation"), str)
                                              for s in steps):
        return "steps must be a list of replayed steps, each with its real_observation"
    return None


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rft", type=Path, help="an lwm train rft --backend sim --out directory")
    ap.add_argument("replay", type=Path, help="the lwm wm2real --out directory of its attempts.jsonl")
    ap.add_argument("--threshold", type=float, help="the reward an attempt needs (default: the run's own)")
    args = ap.parse_args()
    try:
        attempts = list(read_trajectories(args.rft / "attempts.jsonl"))
        replays = {}
        for line, r in iter_jsonl(args.replay / "wm2real.jsonl"):
            if problem := _replay_problem(r):
                raise SystemExit(f"error: {args.replay / 'wm2real.jsonl'}:{line}: {problem}")
            replays[r["id"]] = r
        real = {i: r.get("real_reward") for i, r in replays.items()}
        replayed = read_json(args.replay / "wm2real_run.json")["trajectories"]   # its sha256
        if replayed != hashlib.sha256((args.rft / "attempts.jsonl").read_bytes()).hexdigest():
            raise SystemExit(f"error: {args.replay} replayed another file than {args.rft / 'attempts.jsonl'}")
        threshold = (args.threshold if args.threshold is not None
                     else read_json(args.rft / "rft.json")["settings"]["threshold"])
    except KeyError as e:
        raise SystemExit(f"error: {args.rft / 'rft.json'} or {args.replay / 'wm2real_run.json'} lacks {e} "
                         "(written by lwm train rft and lwm wm2real?)") from None
    except (LwmError, OSError) as e:
        raise SystemExit(f"error: cannot read the run or its replay: {e}") from None
    if not (isinstance(threshold, (int, float)) and 0 < threshold <= 1):  # NaN fails too
        raise SystemExit(f"error: the threshold must be in (0, 1] as lwm train rft takes it, not {threshold!r}")
    unreplayed = sum(1 for t in attempts if real.get(t.id) is None)
    attempts = [t for t in attempts if real.get(t.id) is not None]   # replayed, with a real verdict
    if not attempts:
        raise SystemExit(f"error: no attempt of {args.rft} has a real verdict in {args.replay}")
    if unreplayed:
        print(f"({unreplayed} attempts without a real verdict in {args.replay} are left out)\n")
    groups: dict[str, list] = defaultdict(list)
    for t in attempts:
        groups[t.domain].append(t)
    groups["all"] = attempts
    print("| domain | attempts | real successes | accepted, reward alone | precision | recall "
          "| accepted, well formed | precision | recall |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, group in groups.items():
        truth = [real[t.id] for t in group]
        cells = [name, str(len(group)), str(sum(r >= 0.5 for r in truth))]
        for gated in (False, True):
            a = agreement(truth, [float(is_accepted(t, threshold, gated)) for t in group])
            cells += [str(a["judged_successes"]), _pct(a["precision"]),
                      _pct(None if a["missed_success_rate"] is None else 1 - a["missed_success_rate"])]
        print("| " + " | ".join(cells) + " |")
    families: dict[str, list[float]] = defaultdict(list)
    for t in attempts:
        families[f"{t.domain}/{t.metadata.get('family')}"].append(real[t.id])
    print("\nreal successes per family: " + ", ".join(
        f"{f} {sum(r >= 0.5 for r in v)}/{len(v)}" for f, v in sorted(families.items())))
    print("\n| domain | first actions replayed | real error shown | the simulator showed one too |\n"
          "|---|---:|---:|---:|")
    for name, group in groups.items():
        pairs = [(ERROR.search(replays[t.id]["steps"][0]["real_observation"]), ERROR.search(t.turns[0].observation))
                 for t in group if t.turns and replays[t.id]["steps"]]
        print(f"| {name} | {len(pairs)} | {sum(bool(r) for r, _ in pairs)} | {sum(bool(r and s) for r, s in pairs)} |")


if __name__ == "__main__":
    main()
