"""Minimum-Bayes-risk choice: would the world model beat the trivial guess if it answered with the
candidate its own samples agree with most, in line F1?

Greedy decoding writes the likeliest answer token by token; where the model cannot know what a
command prints (a file's content it never saw), that answer is a fluent guess, and every wrong
line costs line F1 that writing nothing would not. Minimum-Bayes-risk decoding (Kumar & Byrne,
2004; used in machine translation since) instead treats ``n`` samples of the model as its belief
about the observation and answers with the candidate of highest expected line F1 against them:
where the samples disagree on the output, the candidate that writes only what they share (the
trivial guess: the command echoed at a fresh prompt) wins; where they agree, their answer does.

For a finished greedy ``lwm eval`` run of a local llama.cpp model, this samples ``n`` answers per
row (prompts built as the run built them; temperature ``--temperature``, one seed per sample,
kept in ``--cache`` so that a second call re-scores without sampling), takes as candidates the
greedy answer, the samples, the trivial guess and the previous observation (ties go to the trivial
guess, then the previous observation, then greedy), and prints exact /
edit similarity / line F1 (×100) of greedy, of the MBR choice and of the trivial guess on the
same rows, and which candidate the choice took.

    python bench/mbr.py RUN [--data ROWS] [--model embedded-warmup | --model embedded --adapter X.gguf]
                        [--samples 6] [--temperature 1.0] [--cache RUN/mbr-samples.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from collections import Counter
from pathlib import Path

from _common import greedy_run

from lwm import domains
from lwm.candidates import candidates
from lwm.errors import LwmError
from lwm.metrics import fidelity, line_f1
from lwm.models import WORLD_MODEL
from lwm.models.base import ChatModel, Message, SamplingParams
from lwm.parse import observation_text, parse_output
from lwm.prediction import model_observation, request

METRICS = ("exact", "edit_similarity", "line_f1")


def mbr_choice(options: dict[str, str], samples: list[str]) -> str:
    """The source in ``options`` (``{source: full observation}``, in order of preference on a tie)
    whose observation has the highest mean line F1 against ``samples`` (a sample candidate
    is not compared with itself).

    >>> mbr_choice({"trivial": "$ ls\\n$", "sample-0": "$ ls\\na\\n$"}, ["$ ls\\na\\n$", "$ ls\\nb\\n$"])
    'trivial'
    >>> mbr_choice({"trivial": "$ ls\\n$", "sample-0": "$ ls\\na\\n$"}, ["$ ls\\na\\n$", "$ ls\\na\\n$"])
    'sample-0'
    """
    def expected(source: str, text: str) -> float:
        others = [s for k, s in enumerate(samples) if source != f"sample-{k}"]
        return sum(line_f1(text, s) for s in others) / max(len(others), 1)

    return max(options, key=lambda source: expected(source, options[source]))  # max keeps the first on a tie


async def sample_row(model: ChatModel, messages: list[Message], sampling: SamplingParams, n: int) -> list[dict]:
    """``n`` answers to ``messages``, one seed each: ``[{"text", "reasoning", "finish_reason"}]``."""
    out = []
    for k in range(n):
        gen = await model.generate(messages, dataclasses.replace(sampling, seed=1000 + k))
        out.append({"text": gen.text, "reasoning": gen.reasoning, "finish_reason": gen.finish_reason})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a finished greedy lwm eval run")
    ap.add_argument("--data", type=Path, help="the rows the run evaluated: its --data (default: RUN/data, where "
                    "lwm eval collects the suites itself)")
    ap.add_argument("--model", default=WORLD_MODEL, help="the run's model, a local llama.cpp model (default: "
                    "%(default)s)")
    ap.add_argument("--adapter", help="the run's adapter (GGUF), with --model embedded")
    ap.add_argument("--samples", type=int, default=6, help="samples per row (default: %(default)s)")
    ap.add_argument("--temperature", type=float, default=1.0,
                    help="sampling temperature; 1.0 samples the model's own distribution (default: %(default)s)")
    ap.add_argument("--cache", type=Path, help="samples file, resumed and re-read (default: RUN/mbr-samples.jsonl)")
    args = ap.parse_args()
    try:
        run(args)
    except LwmError as e:
        raise SystemExit(f"{args.run}: {e}") from None


def run(args: argparse.Namespace) -> None:
    if args.samples < 1:
        raise SystemExit("--samples must be at least 1")
    settings, rows, model = greedy_run(args.run, args.data, args.model, args.adapter)
    mode = settings["prediction"]
    recorded = settings["sampling"]  # the run's, at another temperature
    sampling = SamplingParams(temperature=args.temperature, max_tokens=recorded["max_tokens"],
                              stop=tuple(recorded["stop"]))
    cache = args.cache or args.run / "mbr-samples.jsonl"
    done = {}
    if cache.is_file():
        for line in cache.read_text().splitlines():
            rec = json.loads(line)
            done[rec["key"]] = rec
    sums: dict[str, list[float]] = {k: [0.0, 0.0, 0.0] for k in ("greedy", "mbr", "trivial")}
    picks, n = Counter(), 0
    with cache.open("a") as journal:
        for row, rec in rows:
            if rec.get("error") or "trivial_fidelity" not in rec:
                continue
            real = observation_text(row.ground_truth)
            canonical = domains.get(row.domain).canonical
            chosen = rec["observation"]
            if rec.get("output") and not rec.get("certain"):
                if rec["key"] not in done or len(done[rec["key"]]["samples"]) < args.samples:
                    messages = request(row, mode, model.count_tokens, settings["max_prompt_tokens"],
                                       compact=settings.get("compact_tools", False))[0]
                    done[rec["key"]] = {"key": rec["key"], "samples": asyncio.run(
                        sample_row(model, messages, sampling, args.samples))}
                    journal.write(json.dumps(done[rec["key"]]) + "\n")
                    journal.flush()
                samples = []
                for s in done[rec["key"]]["samples"][: args.samples]:
                    parsed = parse_output(s["text"], s["reasoning"], truncated=s["finish_reason"] == "length")
                    samples.append(model_observation(row, parsed.observation, parsed.issues, mode)[0])
                written = rec.get("change", rec["observation"])
                cheap = candidates(row, mode, written, rule_out=False)  # ties go to the earlier: trivial first
                options = {k: cheap[k][1] for k in ("trivial", "repeat-last") if k in cheap}
                options |= {"greedy": rec["observation"], **{f"sample-{k}": s for k, s in enumerate(samples)}}
                source = mbr_choice(options, samples)
                picks["sample" if source.startswith("sample") else source] += 1
                chosen = options[source]
            else:
                picks["not sampled"] += 1
            mbr = fidelity(chosen, real, row.volatile, canonical).to_dict()
            for name, f in (("greedy", rec["fidelity"]), ("mbr", mbr), ("trivial", rec["trivial_fidelity"])):
                for j, m in enumerate(METRICS):
                    sums[name][j] += f[m]
            n += 1
    print(f"{n} rows, {args.samples} samples each at temperature {args.temperature} ({settings['model']})")
    print("| answer | exact | edit sim. | line F1 |\n|---|---:|---:|---:|")
    for name, s in sums.items():
        print(f"| {name} | " + " | ".join(f"{100 * v / max(n, 1):.2f}" for v in s) + " |")
    print("chosen:", dict(picks))


if __name__ == "__main__":
    main()
