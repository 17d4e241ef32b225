"""Evaluation throughput: the reference script's sequential loop against ``lwm eval``.

The same rows and the same endpoint, predicted (1) one request at a time, as the
reference AgentWorldBench script does, and (2) by ``lwm``'s runner with bounded
concurrency. Two endpoints:

* ``lwm serve-model`` (the embedded SmolLM2-135M on this CPU);
* a delay server (bench/delay_server.py): a stand-in for a GPU server that answers
  after a fixed delay with unlimited parallelism, to show that the runner keeps its
  requests in flight and is never the bottleneck.

Also reports the embedded model's generation speed, single and batched.

    python bench/eval_throughput.py [--rows 24] [--delay 0.5] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from pathlib import Path

from _common import delay_server, free_port, lwm_serve_model, machine, server
from openai import OpenAI

from lwm.data.collect import CollectConfig, collect
from lwm.eval.runner import EvalConfig, evaluate, load_rows
from lwm.models.base import SamplingParams
from lwm.models.openai_compat import OpenAIChatModel
from lwm.prompts import build_messages


def sequential(base_url: str, model: str, rows, sampling: SamplingParams) -> tuple[float, int]:
    """The reference way: one blocking request after another."""
    client = OpenAI(base_url=base_url, api_key="EMPTY")
    t0, tokens = time.monotonic(), 0
    for row in rows:
        messages, _ = build_messages(row)
        r = client.chat.completions.create(model=model, messages=messages, temperature=sampling.temperature,
                                           max_tokens=sampling.max_tokens)
        tokens += r.usage.completion_tokens if r.usage else 0
    return time.monotonic() - t0, tokens


def concurrent(base_url: str, model: str, rows, sampling: SamplingParams, concurrency: int,
               out: Path) -> tuple[float, int]:
    wm = OpenAIChatModel(model, base_url, concurrency=concurrency)
    t0 = time.monotonic()
    asyncio.run(evaluate(EvalConfig(out=out, sampling=sampling, max_prompt_tokens=10**6), wm, rows=rows,
                         show_progress=False))
    seconds = time.monotonic() - t0
    import json

    tokens = sum(json.loads(l).get("completion_tokens") or 0 for l in (out / "predictions.jsonl").open())
    return seconds, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=24, help="rows predicted by the embedded model")
    ap.add_argument("--delay-rows", type=int, default=200, help="rows sent to the delay server")
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=16, help="lwm eval's requests in flight (embedded)")
    ap.add_argument("--delay-concurrency", type=int, default=64, help="requests in flight (delay server)")
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="lwm-bench-"))
    res = collect(CollectConfig(out=tmp / "data", runs=1), show_progress=False)
    all_rows = load_rows(res.rows_path)
    sampling = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    print(f"machine: {machine()}")

    rows = all_rows[: args.delay_rows]
    port = free_port()
    with server(delay_server(port, args.delay), port) as base:
        s_t, _ = sequential(base, "delay", rows, sampling)
        c_t, _ = concurrent(base, "delay", rows, sampling, args.delay_concurrency, tmp / "delay")
        floor = math.ceil(len(rows) / args.delay_concurrency) * args.delay
        print(f"delay server, {len(rows)} rows, {args.delay}s per request, concurrency {args.delay_concurrency}: "
              f"sequential {s_t:.1f}s, lwm eval {c_t:.1f}s (floor {floor:.1f}s), ratio {s_t / c_t:.1f}x "
              f"(ideal {s_t / floor:.1f}x)")

    rows = all_rows[: args.rows]

    port = free_port()
    with server(lwm_serve_model(port), port) as base:
        model = OpenAI(base_url=base, api_key="EMPTY").models.list().data[0].id
        sequential(base, model, rows[:2], sampling)  # warm-up
        s_t, s_tok = sequential(base, model, rows, sampling)
        c_t, c_tok = concurrent(base, model, rows, sampling, args.concurrency, tmp / "embedded")
        print(f"lwm serve-model ({model}), {len(rows)} rows, max_tokens {args.max_tokens}, concurrency "
              f"{args.concurrency}: sequential {s_t:.1f}s ({s_tok / s_t:.1f} generated tokens/s), "
              f"lwm eval {c_t:.1f}s ({c_tok / c_t:.1f} tokens/s), ratio {s_t / c_t:.2f}x")


if __name__ == "__main__":
    main()
