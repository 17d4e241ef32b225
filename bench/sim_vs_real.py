"""Simulated against real steps per second, for the same episodes.

Plays the first N tasks of a domain's suite with the scripted policy (the suite's own
actions) through ``lwm.sim.rollout`` twice: on the ``real`` backend and on the ``sim``
backend with a world model (default: the embedded SmolLM2 in-process; or any model at
``--base-url``, e.g. a vLLM server). Rewards are judged on the sim side unless
``--no-judge``.

    python bench/sim_vs_real.py [--domain terminal] [--episodes 6] [--concurrency 4]
                                [--model embedded] [--base-url URL] [--max-tokens 256]

Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import machine

from lwm.sim.rollout import RolloutConfig, rollout


def run(domain: str, backend: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        config = RolloutConfig(out=Path(tmp), domain=domain, backend=backend, episodes=args.episodes,
                               world_model=args.model, base_url=args.base_url, concurrency=args.concurrency,
                               max_turns=args.max_turns)
        t0 = time.monotonic()
        res = rollout(config, show_progress=False)
        wall = time.monotonic() - t0
        manifest = json.loads((Path(tmp) / "manifest.json").read_text())
    return {"steps": manifest["steps"], "wall": wall, "per_env": manifest["steps_per_second_per_env"],
            "failed": len(res.failed), "reward": manifest["mean_reward"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--domain", default="terminal")
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-turns", type=int, default=20)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--base-url", default=None)
    args = ap.parse_args()
    print(machine())
    print(f"\n{args.episodes} episodes of the {args.domain} suite, scripted policy, {args.concurrency} at once\n")
    print("| backend | steps | failed | wall s | steps/s total | steps/s per env | mean reward |\n"
          "|---|---:|---:|---:|---:|---:|---:|")
    for backend in ("real", "sim"):
        r = run(args.domain, backend, args)
        print(f"| {backend} | {r['steps']} | {r['failed']} | {r['wall']:.1f} | {r['steps'] / r['wall']:.2f} "
              f"| {r['per_env']} | {r['reward']} |", flush=True)


if __name__ == "__main__":
    main()
