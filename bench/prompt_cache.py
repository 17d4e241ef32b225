"""The in-process world model with and without a prompt cache, on episodes simulated at once.

llama.cpp keeps the KV state of the last prompt only. Episodes simulated at once send their
requests in turn (episode A's step, B's, A's next …), so each request shares with the one
before it little more than the system prompt and processes the rest of its history again.
A prompt cache (``LlamaCppChatModel(prompt_cache_bytes=…)``, llama-cpp-python's RAM cache)
keeps one saved state per conversation. This plays the first N tasks of each domain's suite
with the suite's own actions on the ``sim`` backend, the shipped warm-up world model, once
without and once with the cache, and checks that both wrote the same observations (greedy).
Rewards are not judged (steps only).

    python bench/prompt_cache.py [--domain terminal --domain web] [--episodes 4] [--concurrency 4]
                                 [--max-turns 6] [--cache-mb 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from _common import machine

from lwm import domains
from lwm.models.embedded import LlamaCppChatModel, warmup_adapter_path
from lwm.sim.backends import EnvFactory
from lwm.sim.policy import PolicySpec
from lwm.sim.rollout import EpisodeJob


async def play(model: LlamaCppChatModel, domain: str, args: argparse.Namespace) -> tuple[float, list[list[str]]]:
    """Seconds for the episodes, and each episode's observations."""
    factory = EnvFactory(domain, "sim", model=model, max_turns=args.max_turns, options={"judge_rewards": False})
    tasks = [s.task for s in domains.get(domain).scripts()][: args.episodes]
    jobs = [EpisodeJob(factory, PolicySpec(), task, f"{domain}/{task.name}/ep{i}", args.max_turns)
            for i, task in enumerate(tasks)]
    gate = asyncio.Semaphore(args.concurrency)

    async def one(job: EpisodeJob) -> list[str]:
        async with gate:
            return [t["observation"] for t in (await job.arun())["turns"]]

    t0 = time.monotonic()
    observations = await asyncio.gather(*(one(j) for j in jobs))
    return time.monotonic() - t0, observations


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--domain", action="append", default=[], help="repeatable; default: terminal and web")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--cache-mb", type=int, default=1024)
    args = ap.parse_args()
    if min(args.episodes, args.concurrency, args.max_turns, args.cache_mb) < 1:
        ap.error("--episodes, --concurrency, --max-turns and --cache-mb must be at least 1")
    chosen = args.domain or ["terminal", "web"]
    for d in chosen:  # before the model loads
        if d not in domains.names() or not domains.get(d).suite:
            ap.error(f"domain {d} has no bundled suite here")
    print(machine())
    print(f"\nThe first {args.episodes} episodes of each suite, {args.concurrency} at once, at most {args.max_turns} "
          f"turns, the shipped warm-up world model in-process; cache {args.cache_mb} MiB\n")
    print("| domain | steps | seconds, no cache | seconds, cache | speed-up | same observations |\n"
          "|---|---:|---:|---:|---:|---|")
    for domain in chosen:
        results = []
        for cache in (0, args.cache_mb << 20):
            model = LlamaCppChatModel(lora_path=warmup_adapter_path(), prompt_cache_bytes=cache)
            try:
                results.append(asyncio.run(play(model, domain, args)))
            finally:
                asyncio.run(model.aclose())
        (plain, obs_plain), (cached, obs_cached) = results
        steps = sum(len(o) for o in obs_plain)
        print(f"| {domain} | {steps} | {plain:.1f} | {cached:.1f} | {plain / cached:.2f}× | "
              f"{'yes' if obs_plain == obs_cached else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
