"""Real steps per second per domain: the figure a simulated environment is compared with.

For each domain, plays the first N episodes of its core suite once (no determinism
double-run) through ``lwm.data.collect.collect`` and reports:

* ``steps/s per env``: real steps divided by the time spent inside episodes (sandbox start,
  setup and teardown included), i.e. the speed of ONE environment;
* ``steps/s total``: real steps divided by wall time with ``--workers`` environments at once.

    python bench/collect_rates.py [--domains terminal db ...] [--episodes 12] [--workers 4]

Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import machine

from lwm.data.collect import CollectConfig, collect
from lwm.envs import REAL_DOMAINS


def rate(domain: str, episodes: int, workers: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        res = collect(CollectConfig(out=Path(tmp), domain=domain, episodes=episodes, runs=1, workers=workers),
                      show_progress=False)
        wall = time.monotonic() - t0
        manifest = json.loads((Path(tmp) / "manifest.json").read_text())
    return {"domain": domain, "episodes": manifest["episodes"], "steps": res.turns, "failed": len(res.failed),
            "per_env": manifest["real_steps_per_second_per_env"], "total": round(res.turns / wall, 2),
            "wall": round(wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--domains", nargs="+", default=list(REAL_DOMAINS))
    ap.add_argument("--episodes", type=int, default=12, help="episodes per domain (first N of the core suite)")
    ap.add_argument("--workers", type=int, default=4, help="environments at once")
    args = ap.parse_args()
    print(machine())
    print(f"\n| domain | episodes | real steps | failed | steps/s per env | steps/s total ({args.workers} envs) "
          "| wall s |\n|---|---:|---:|---:|---:|---:|---:|")
    for d in args.domains:
        r = rate(d, args.episodes, args.workers)
        print(f"| {d} | {r['episodes']} | {r['steps']} | {r['failed']} | {r['per_env']} | {r['total']} | {r['wall']} |",
              flush=True)


if __name__ == "__main__":
    main()
