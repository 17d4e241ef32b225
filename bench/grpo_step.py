"""Seconds per GRPO step of `lwm train rl` runs and their parts (docs/benchmarks.md, "GRPO").

Reads what a run records as it trains: `rollouts.jsonl` (per step: seconds generating the
policy's answers, in the environment, on the verdict) and the trainer's `step_time` per
logged step (`trainer_state.json` of the run's last checkpoint). The update (loss,
backward pass, optimizer) is the step's time minus the three parts. Medians over the
steps, so that one slow step (a checkpoint save, a cold cache) does not move them.

    python bench/grpo_step.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import median

from _common import machine


def step_times(run: Path) -> dict[int, float]:
    """``{step: seconds}`` from the trainer's log of the run's last checkpoint."""
    checkpoints = sorted(run.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    if not checkpoints:
        raise SystemExit(f"{run}: no checkpoint yet (the trainer's step times are saved with each)")
    state = json.loads((checkpoints[-1] / "trainer_state.json").read_text())
    return {h["step"]: h["step_time"] for h in state["log_history"] if "step_time" in h}


def parts(run: Path) -> dict[str, float | int | str]:
    for name in ("lwm_train.json", "rollouts.jsonl"):
        if not (run / name).is_file():
            raise SystemExit(f"{run}: no {name} (not an lwm train rl run of the agent objective, or not started)")
    settings = json.loads((run / "lwm_train.json").read_text())["settings"]
    rollouts = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines() if line.strip()]
    # a resumed run logs a step again: the last record of a step counts
    by_step = {r["step"]: r for r in rollouts}
    times = step_times(run)
    # rollouts.jsonl names the step being generated (global_step before it), the trainer the step done
    steps = [s for s in by_step if s + 1 in times]
    if not steps:
        raise SystemExit(f"{run}: no step with both its rollout record and its step time")
    gen = [by_step[s]["generation_seconds"] for s in steps]
    env = [by_step[s]["environment_seconds"] for s in steps]
    rew = [by_step[s]["reward_seconds"] for s in steps]
    total = [times[s + 1] for s in steps]
    update = [t - g - e - r for t, g, e, r in zip(total, gen, env, rew)]
    return {"run": run.name, "backend": settings.get("backend"), "steps": len(steps),
            "episodes/step": by_step[steps[0]]["episodes"], "step": median(total), "generation": median(gen),
            "environment": median(env), "reward": median(rew), "update": median(update)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run directories of lwm train rl")
    args = ap.parse_args()
    print(machine(), "\n")
    cols = ("run", "backend", "steps", "episodes/step", "step", "generation", "environment", "reward", "update")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for run in args.runs:
        p = parts(run)
        print("| " + " | ".join(f"{p[c]:.1f}" if isinstance(p[c], float) else str(p[c]) for c in cols) + " |")
    print("\nSeconds, medians over the steps; update = step − generation − environment − reward. In the "
          "simulator the verdict (the probe) is asked at each episode's last step: it is environment time.")


if __name__ == "__main__":
    main()
