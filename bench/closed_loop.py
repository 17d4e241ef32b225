"""Closed-loop fidelity: a world model predicting from its own earlier predictions.

``lwm eval`` scores each turn from the real history (teacher forcing). In a simulation the
history is the model's own: this plays the first N scripted episodes of a domain's suite in
the real environment and, from the same real start, in the simulator (the same actions), and
scores each simulated observation against the real one of that step (line F1, ×100). Also
printed: the share of steps whose simulated observation differs from the real one, the
previous real observation as the guess ("repeat-last"), how many steps changed
the observation's body (web: the tree; elsewhere: the whole observation) in each, and the
seconds per simulated step.

    python bench/closed_loop.py --adapter A.gguf --predict change [--domain web] [--episodes 8] [--max-turns 6]
        [--score-candidates]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import machine

from lwm import domains
from lwm.metrics import line_f1, normalize
from lwm.models import ModelSpec
from lwm.sim.env import SimEnv


def body(observation: str) -> str:
    """What the page shows: a web observation's tree (after its header); elsewhere all of it."""
    return observation.split("\n\n", 1)[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--domain", default="web")
    ap.add_argument("--model", default="embedded", help="embedded (with --adapter) or embedded-warmup")
    ap.add_argument("--adapter", default=None, help="a GGUF LoRA adapter for the embedded model")
    ap.add_argument("--predict", choices=("full", "change"), default=None, help="default: the model's own")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--score-candidates", action="store_true", help="candidate scoring (lwm.candidates)")
    args = ap.parse_args()
    spec = domains.get(args.domain)
    model = ModelSpec(args.model, adapter=args.adapter).load()
    real_env = spec.make_env()
    scores, repeat, seconds, changed, differs = [], [], [], {"real": 0, "sim": 0}, 0
    try:
        for script in spec.scripts()[: args.episodes]:
            first = real_env.reset(script.task)
            sim = SimEnv(args.domain, model, prediction=args.predict, judge_rewards=False, max_turns=args.max_turns,
                         score_candidates=args.score_candidates)
            sim.reset(script.task, initial_observation=first)
            previous = {"real": first, "sim": first}
            for action in script.actions[: args.max_turns]:
                real = real_env.step(action)
                t0 = time.monotonic()
                simulated = sim.step(action)
                seconds.append(time.monotonic() - t0)
                scores.append(line_f1(simulated.observation, real.observation))
                differs += normalize(simulated.observation) != normalize(real.observation)
                repeat.append(line_f1(previous["real"], real.observation))
                for side, observation in (("real", real.observation), ("sim", simulated.observation)):
                    changed[side] += body(observation) != body(previous[side])
                    previous[side] = observation
                if real.done or simulated.done:
                    break
    finally:
        real_env.close()
    scoring = ", candidates scored" if sim.score_candidates else ""
    print(f"{machine()}: {args.domain}, {args.adapter or args.model}, prediction {sim.prediction}{scoring}: "
          f"{len(scores)} steps of {args.episodes} episodes; simulated observation differs from the real one in "
          f"{differs} ({100 * differs / len(scores):.1f} %); closed-loop line F1 {100 * statistics.mean(scores):.1f} "
          f"(repeat-last {100 * statistics.mean(repeat):.1f}); body changed in {changed['real']} real steps, "
          f"{changed['sim']} simulated; {statistics.mean(seconds):.2f} s a simulated step")


if __name__ == "__main__":
    main()
