"""Were the simulator's successes real? Replays in the real environment the training episodes
of an `lwm train rl --backend sim` run that the world model's reward judged achieved
(docs/results.md, stage 2: the false successes that teach reward hacking).

Each success of the run's `episodes.jsonl` is played again from a fresh real environment:
its task (regenerated from its family and seed, or looked up in `--tasks-file` when the run
trained on one), the actions read from the policy's answers exactly as training read them
(`lwm.sim.policy.read_action`), then the task's real verifier.

    python bench/replay_sim_successes.py RUN_DIR [--tasks-file FILE]

Prints one line per success (step, task, real verdict, the policy's words, the world model's
probe observation) and the count; JSON with `--json`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lwm import domains
from lwm.domains.tasks import families, read_task_file
from lwm.envs.base import Task
from lwm.errors import LwmError
from lwm.eval.agent import replay_actions
from lwm.jsonl import iter_jsonl
from lwm.sim.policy import read_action


def task_of(domain: str, name: str, listed: dict[tuple[str, str], Task]) -> Task:
    """The task a training episode played: from the task file, else ``<family>-<seed>``."""
    if (domain, name) in listed:
        return listed[domain, name]
    family_name, _, seed = name.rpartition("-")
    for family in families(domain):
        if family.name == family_name and seed.isdigit():
            return family.generate(int(seed))[0]
    raise SystemExit(f"task {domain}/{name} is neither in the task file nor a generated <family>-<seed> name")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="an lwm train rl run directory (agent objective)")
    parser.add_argument("--tasks-file", type=Path, help="the task file the run trained on, if any")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    try:
        replay(args)
    except LwmError as e:  # a damaged file: named with its line, no traceback
        raise SystemExit(f"error: {e}") from None


def replay(args: argparse.Namespace) -> None:
    log = args.run / "episodes.jsonl"
    if not log.is_file():
        raise SystemExit(f"error: {args.run} has no episodes.jsonl (not an lwm train rl run?)")
    listed = {(d, t.name): t for d, t, _ in read_task_file(args.tasks_file)} if args.tasks_file else {}
    episodes = [e for _, e in iter_jsonl(log)]
    if episodes and not {"said", "verdict", "step"} <= set(episodes[0]):
        raise SystemExit(f"error: {log} is not the episode log of an lwm train rl run (agent objective)")
    wins = [e for e in episodes if (e.get("verdict") or 0) >= 0.5]
    results = []
    for e in wins:
        spec = domains.get(e["domain"])
        actions = [a for a in (read_action(spec, text) for text in e["said"]) if a is not None]
        real = replay_actions(e["domain"], task_of(e["domain"], e["task"], listed), actions)
        results.append({"step": e["step"], "domain": e["domain"], "task": e["task"], "real_verdict": real,
                        "said": e["said"], "probe_observation": e.get("probe_observation")})
    real_ok = sum((r["real_verdict"] or 0) >= 0.5 for r in results)
    if args.json:
        print(json.dumps({"run": str(args.run), "episodes": len(episodes), "simulated_successes": len(results),
                          "real_successes": real_ok, "replayed": results}, indent=1))
        return
    for r in results:
        print(f"step {r['step']} {r['domain']}/{r['task']}: real {r['real_verdict']} | said "
              f"{[s[:80] for s in r['said']]} | probe {(r['probe_observation'] or '')[:60]!r}")
    print(f"{len(episodes)} training episodes, {len(results)} judged achieved by the simulator, "
          f"{real_ok} achieved when replayed in the real environment")


if __name__ == "__main__":
    main()
