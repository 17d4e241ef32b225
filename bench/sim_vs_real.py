"""Simulated against real steps per second, for the same episodes, in every runnable domain.

Plays the first N tasks of each domain's suite with the scripted policy (the suite's own
actions) through ``lwm.sim.rollout`` twice: on the ``real`` backend and on the ``sim``
backend with a world model (default: the shipped warm-up model in-process; or any model at
``--base-url``, e.g. a vLLM server). On the sim side the world model also answers each
verified task's probe (the reward).

    python bench/sim_vs_real.py [--domain terminal --domain web] [--episodes 4] [--concurrency 2]
                                [--model embedded-warmup] [--base-url URL] [--max-turns 6]
                                [--predict change --compact-tools]   # a served change-mode model

Prints a Markdown table for docs/benchmarks.md: steps per second per environment on each
side and their ratio, one row per domain.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import machine

from lwm import domains
from lwm.models import WORLD_MODEL
from lwm.sim.rollout import RolloutConfig, rollout


def run(domain: str, backend: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        config = RolloutConfig(out=Path(tmp), domain=domain, backend=backend, episodes=args.episodes,
                               world_model=args.model, base_url=args.base_url, concurrency=args.concurrency,
                               max_turns=args.max_turns,
                               **({"prediction": args.predict, "compact_tools": args.compact_tools}
                                  if backend == "sim" else {}))
        t0 = time.monotonic()
        res = rollout(config, show_progress=False)
        wall = time.monotonic() - t0
        manifest = json.loads((Path(tmp) / "manifest.json").read_text())
    return {"steps": manifest["steps"], "wall": wall, "per_env": manifest["steps_per_second_per_env"],
            "failed": len(res.failed), "reward": manifest["mean_reward"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--domain", action="append", default=[],
                    help="repeatable; default: every domain with a real environment and a suite")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--model", default=WORLD_MODEL)
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--predict", choices=("full", "change"), default=None,
                    help="how to ask a served world model (default: the model's own; full over HTTP)")
    ap.add_argument("--compact-tools", action=argparse.BooleanOptionalAction, default=None,
                    help="tool lists as signatures (default: the model's own; off over HTTP)")
    args = ap.parse_args()
    if args.episodes < 1 or args.concurrency < 1 or args.max_turns < 1:
        ap.error("--episodes, --concurrency and --max-turns must be at least 1")
    chosen = args.domain or [d for d in domains.names(runnable=True) if domains.get(d).suite]
    for d in chosen:
        if d not in domains.names():
            ap.error(f"unknown domain {d} (one of {', '.join(domains.names())})")
        if not domains.get(d).runnable:
            ap.error(f"domain {d} has no real environment here")
    print(machine())
    print(f"\nThe first {args.episodes} episodes of each suite, scripted policy, {args.concurrency} at once, at most "
          f"{args.max_turns} turns; world model {args.model}\n")
    print("| domain | real steps | real wall s | real steps/s per env | sim steps | sim wall s | "
          "sim steps/s per env | sim ÷ real | failed (real/sim) |\n|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for domain in chosen:
        real, sim = run(domain, "real", args), run(domain, "sim", args)
        ratio = sim["per_env"] / real["per_env"] if real["per_env"] and sim["per_env"] is not None else None
        print(f"| {domain} | {real['steps']} | {real['wall']:.1f} | {real['per_env']} | {sim['steps']} | "
              f"{sim['wall']:.1f} | {sim['per_env']} | {'—' if ratio is None else f'{ratio:.2f}'} | "
              f"{real['failed']}/{sim['failed']} |", flush=True)


if __name__ == "__main__":
    main()
