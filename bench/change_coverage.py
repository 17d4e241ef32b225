"""How much of each observation a change-mode world model writes, on real trajectories.

For every turn of the given trajectory files (``lwm collect`` output) of a domain with a
change renderer (``Domain.render_change``), this writes the turn's change from the real
observations (``Domain.observed_change``), checks that it renders back into the real
observation exactly, and counts the turns by what the change is: partial (shorter than the
observation: the terminal's new lines, the web's changed nodes), whole (the observation
itself: a new page) or unrenderable (no change draws it: the terminal after ``clear``).
``chars`` is the changes' share of the observations' characters.

    python bench/change_coverage.py /work/data/terminal /work/data/web
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from _common import machine

from lwm import domains
from lwm.schema import read_trajectories


def coverage(path: Path) -> tuple[str, Counter]:
    """``(domain, counts)`` over the turns of one trajectory file."""
    counts: Counter = Counter()
    domain = ""
    for trajectory in read_trajectories(path):
        spec = domains.get(trajectory.domain)
        domain = trajectory.domain
        if spec.render_change is None:
            raise SystemExit(f"{path}: domain {domain} has no change renderer")
        previous = trajectory.initial_observation
        for turn in trajectory.turns:
            change = spec.observed_change(previous, turn.action, turn.observation, trajectory.system_prompt)
            if change is None:
                counts["unrenderable"] += 1
            else:
                rendered = spec.render_change(change, previous, turn.action, trajectory.system_prompt)
                counts["renders back" if rendered == turn.observation.strip("\n") else "renders wrong"] += 1
                counts["whole" if change == turn.observation else "partial"] += 1
                counts["change chars"] += len(change)
                counts["observation chars"] += len(turn.observation)
            previous = turn.observation
    return domain, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", nargs="+", type=Path, help="trajectories.jsonl files or the folders holding them")
    args = ap.parse_args()
    print(f"# Change coverage ({machine()})\n")
    print("| domain | turns | renders back | partial | whole | unrenderable | chars |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for data in args.data:
        domain, c = coverage(data / "trajectories.jsonl" if data.is_dir() else data)
        turns = c["renders back"] + c["renders wrong"] + c["unrenderable"]
        share = c["change chars"] / max(c["observation chars"], 1)
        print(f"| {domain} | {turns} | {c['renders back']} | {c['partial']} | {c['whole']} | {c['unrenderable']} "
              f"| {share:.0%} |")


if __name__ == "__main__":
    main()
