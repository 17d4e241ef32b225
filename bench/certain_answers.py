"""How often a domain's certain answer (``Domain.certain``: what the action alone decides, a
code cell or an SQL statement that does not parse) applies in recorded episodes, and how often it equals the
observation recorded there: on real episodes it must be every time; on simulated ones it
says how often the world model got those steps right without it. Also how many recorded
observations the action alone rules out (``Domain.rules_out``: a syntax error reported for a
code cell that compiles): on real episodes it must be none; on simulated ones, recorded
before the rule, it says how often the world model wrote one.

    python bench/certain_answers.py runs/verdicts/episodes.jsonl runs/sim5-embedded/episodes.jsonl

Prints, per file and provenance (real or simulated): steps, steps with a certain answer,
those whose recorded observation equals it, what the others recorded (first line), and the
steps whose recorded observation is ruled out.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from lwm import domains
from lwm.errors import LwmError
from lwm.schema import read_trajectories


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("episodes", nargs="+", type=Path, help="episodes.jsonl files (lwm collect, agent eval, …)")
    args = ap.parse_args()
    for path in args.episodes:
        counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        others: Counter[str] = Counter()
        try:
            trajectories = list(read_trajectories(path))
        except (OSError, LwmError, ValueError) as e:
            raise SystemExit(f"{path}: {e}") from None
        for traj in trajectories:
            spec = domains.find(traj.domain)
            seen: list[tuple[str, str]] = []
            for turn in traj.turns:
                c = counts[turn.provenance.kind]
                c[0] += 1
                certain = None if spec is None else \
                    spec.certain(turn.action, seen, traj.system_prompt, traj.initial_observation)
                if certain is not None:
                    c[1] += 1
                    c[2] += certain == turn.observation
                    if certain != turn.observation:
                        others[(turn.observation.splitlines() or [""])[0][:60]] += 1
                elif spec is not None and spec.rules_out is not None:
                    c[3] += spec.rules_out(turn.observation, turn.action, traj.system_prompt)
                seen.append((turn.action, turn.observation))
        for kind, (steps, certain, equal, ruled) in sorted(counts.items()):
            print(f"{path}  {kind}: {steps} steps, {certain} with a certain answer, {equal} recorded the same; "
                  f"{ruled} recorded observations ruled out")
        for first, n in others.most_common(5):
            print(f"    recorded instead ({n}): {first!r}")


if __name__ == "__main__":
    main()
