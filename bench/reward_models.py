"""How far each reward source agrees with the real verifier (docs/results.md, stage 2, "A
reward model worth trusting?").

Plays real episodes of tasks from every family of six domains — the reference solution
(succeeds), nothing at all, and the solution without its last action (usually fails) — then
asks each reward source for its verdict on the real history and compares it with the real
verifier's (lwm.eval.rewards). Run: python bench/reward_models.py [--tasks 10] [--out FILE].
With --model NAME --base-url URL, a served model (any OpenAI-compatible endpoint) is measured
too: its probe, the probe with the instruction hidden, and it judging.

The trained verdict model is measured on many more labelled episodes (held-out families,
every kind of attempt) by `lwm data verdicts` + `lwm agent rewards` (docs/results.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lwm import domains
from lwm.domains.tasks import task_set
from lwm.envs.episode import Script, ScriptedPolicy, play_episode
from lwm.envs.recorded import RealBackendEnv
from lwm.eval.rewards import RewardSource, measure
from lwm.models import ModelSpec

DOMAINS = ("terminal", "db", "code", "fs", "mcp", "swe")


def real_episodes(n: int) -> list:
    out = []
    for domain in DOMAINS:
        for task, solution in task_set(domain, "all", n, seed=1):
            variants = {"oracle": solution, "nothing": ()}
            if len(solution) > 1:
                variants["partial"] = solution[:-1]
            for kind, actions in variants.items():
                env = RealBackendEnv(domain, domains.get(domain).make_env())
                traj = play_episode(env, ScriptedPolicy([Script(task, tuple(actions))]), task,
                                    max_turns=max(1, len(actions)), episode_id=f"{domain}/{task.name}/{kind}",
                                    metadata={"variant": kind})
                out.append((traj, task))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", type=int, default=10, help="tasks per domain")
    ap.add_argument("--out", type=Path, default=Path("runs/reward-models.json"))
    ap.add_argument("--model", help="a served world model to measure beside the embedded ones")
    ap.add_argument("--base-url", help="its OpenAI-compatible endpoint (with --model)")
    args = ap.parse_args()
    if args.tasks < 1:
        ap.error("--tasks must be at least 1")
    if bool(args.model) != bool(args.base_url):
        ap.error("--model and --base-url go together")
    t0 = time.monotonic()
    episodes = real_episodes(args.tasks)
    print(f"{len(episodes)} real episodes in {time.monotonic() - t0:.0f}s "
          f"({sum(1 for t, _ in episodes if t.reward == 1.0)} achieved)", flush=True)
    warm, base = ModelSpec("embedded-warmup"), ModelSpec("embedded")
    sources = [RewardSource("verdict, the trained reward model", warm, reward="verdict"),
               RewardSource("probe, warm-up world model", warm, reward="probe", show_task=True),
               RewardSource("probe, warm-up world model, instruction hidden", warm, reward="probe"),
               RewardSource("probe, base model", base, reward="probe", show_task=True),
               RewardSource("judge, base model", warm, reward="judge", judge=base),
               RewardSource("judge, warm-up model (itself)", warm, reward="judge", judge=warm)]
    if args.model:
        served = ModelSpec(args.model, base_url=args.base_url)
        sources += [RewardSource(f"probe, {args.model}", served, reward="probe", show_task=True),
                    RewardSource(f"probe, {args.model}, instruction hidden", served, reward="probe"),
                    RewardSource(f"judge, {args.model}", served, reward="judge", judge=served)]
    results = {}
    for source in sources:
        t1 = time.monotonic()
        results[source.name] = measure([source], episodes)[source.name]
        results[source.name]["seconds"] = round(time.monotonic() - t1, 1)
        print(source.name, json.dumps(results[source.name]["overall"]), f"{time.monotonic() - t1:.0f}s", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"episodes": len(episodes), "results": results}, indent=2))
    print(f"wrote {args.out} in {time.monotonic() - t0:.0f}s")


if __name__ == "__main__":
    main()
