"""What an agent's first action alone achieves, against its whole episode: each episode of an
``lwm agent eval`` run (real environment, real verifier) cut to its first action, played again
in a fresh real environment from the task's start and checked by the real verifier. No model
runs. Where the whole episode fails and its first action alone succeeds, a later action undid
what the first achieved (docs/results.md, "Learning to stop, and the seventh stage finished").

    python bench/first_action.py RUN [RUN ...]

Per run: episodes, successes of the whole episode and of the first action alone, and how many
the later actions undid (first alone succeeds, whole fails) or completed (the other way); then
the same per family, for the families where either succeeded.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from lwm.envs.base import Task
from lwm.errors import LwmError
from lwm.schema import read_trajectories
from lwm.sim.rollout import play_for_real


def first_action_table(run: Path) -> tuple[Counter, dict[str, Counter]]:
    """``(counts, counts per family)``: ``episodes``, ``whole``, ``first``, ``undone``, ``completed``."""
    total, by_family = Counter(), defaultdict(Counter)
    for traj in read_trajectories(run / "episodes.jsonl"):
        if not traj.turns:  # nothing done: nothing to cut
            continue
        task = Task.from_dict(traj.metadata["task_spec"])
        whole = bool(traj.reward)
        first = bool(play_for_real(traj.domain, task, [traj.turns[0].action]).reward)
        for c in (total, by_family[f"{traj.domain}/{task.family}"]):
            c.update(episodes=1, whole=whole, first=first, undone=first and not whole, completed=whole and not first)
    return total, by_family


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="lwm agent eval run directories (episodes.jsonl)")
    args = ap.parse_args()
    keys = ("episodes", "whole", "first", "undone", "completed")
    print("| run | family | " + " | ".join(keys) + " |\n|---|---|" + "---:|" * len(keys))
    for run in args.runs:
        try:
            total, by_family = first_action_table(run)
        except (LwmError, OSError) as e:
            raise SystemExit(f"error: {run}: {e}") from None
        print(f"| {run} | all | " + " | ".join(str(total[k]) for k in keys) + " |")
        for family, c in sorted(by_family.items()):
            if c["whole"] or c["first"]:
                print(f"| | {family} | " + " | ".join(str(c[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
