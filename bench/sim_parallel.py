"""Massively parallel simulation: simulated steps per second against a GPU stand-in (an
OpenAI-compatible server answering every request after a fixed delay, with unlimited
parallelism: bench/delay_server.py) at 64, 256 and 1,024 episodes in flight, beside real
steps per second of the same scripted episodes on this machine, in one run.

The stand-in does no inference and runs in its own process, so the simulated figure is
the rollout engine's own ceiling (prompt building, parsing, bookkeeping on one event loop,
HTTP), the delay the GPU's latency per step; a real GPU server adds its throughput limit.
The real figure is bounded by this machine's cores and sandboxes.

    python bench/sim_parallel.py [--delay 0.5] [--domain terminal] [--real-concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import delay_server, free_port, machine, server

from lwm.sim.rollout import RolloutConfig, rollout


def measure(domain: str, backend: str, episodes: int, concurrency: int, base_url: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        config = RolloutConfig(out=Path(tmp), domain=domain, backend=backend, episodes=episodes,
                               world_model="delay", base_url=base_url, concurrency=concurrency, max_turns=8)
        t0 = time.monotonic()
        res = rollout(config, show_progress=False)
        wall = time.monotonic() - t0
        steps = json.loads((Path(tmp) / "manifest.json").read_text())["steps"]
    return {"episodes": res.episodes, "failed": len(res.failed), "steps": steps, "wall": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay", type=float, default=0.5, help="seconds the stand-in waits before each answer")
    ap.add_argument("--domain", default="terminal")
    ap.add_argument("--real-episodes", type=int, default=24)
    ap.add_argument("--real-concurrency", type=int, default=8)
    args = ap.parse_args()
    port = free_port()
    with server(delay_server(port, args.delay), port) as url:  # its own process, as a GPU server would be
        table(args, url)


def table(args: argparse.Namespace, url: str) -> None:
    print(machine())
    print(f"\n{args.domain} suite, scripted policy; stand-in delay {args.delay} s per request "
          "(each simulated step, and the probe of each verified episode, is one request)\n")
    print("| backend | episodes in flight | episodes | steps | failed | wall s | steps/s | ideal steps/s | × real |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    real = measure(args.domain, "real", args.real_episodes, args.real_concurrency, None)
    real_rate = real["steps"] / real["wall"]
    print(f"| real | {args.real_concurrency} | {real['episodes']} | {real['steps']} | {real['failed']} | "
          f"{real['wall']:.1f} | {real_rate:.1f} | — | 1 |", flush=True)
    for n in (64, 256, 1024):
        r = measure(args.domain, "sim", 2 * n, n, url)
        rate = r["steps"] / r["wall"]
        print(f"| sim | {n} | {r['episodes']} | {r['steps']} | {r['failed']} | {r['wall']:.1f} | {rate:.1f} | "
              f"{n / args.delay:.0f} | {rate / real_rate:.1f} |", flush=True)


if __name__ == "__main__":
    main()
