"""Embedded model speed on this machine: both runtimes, single sequence and batched.

* llama.cpp (llama-cpp-python, the default runtime): prompt processing and generation
  tokens/s for one sequence (its Python API does not batch), for the base model, with the
  shipped warm-up LoRA adapter merged into a copy of the model (the default) and with the
  adapter applied at run time;
* transformers on the dequantized GGUF (``hf:embedded``): generation tokens/s for one
  sequence and for batches of 8 and 32 requests submitted together.

    python bench/embedded_speed.py [--tokens 64] [--skip-hf]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from _common import machine

from lwm.models.base import SamplingParams

PROMPT = [{"role": "system", "content": "You simulate a Linux terminal. Print the screen."},
          {"role": "user", "content": "Action: ls -la /etc && cat /etc/hostname"}]


def llama_cpp(tokens: int, adapter: str | None = None, merge: bool = True) -> None:
    from lwm.models.embedded import LlamaCppChatModel

    t = time.monotonic()
    m = LlamaCppChatModel(lora_path=adapter, merge_adapter=merge)
    label = f"llama.cpp + warm-up LoRA ({'merged' if merge else 'at run time'})" if adapter else "llama.cpp"
    print(f"{label}: load {time.monotonic() - t:.2f}s")
    llm = m._llm
    text = "the quick brown fox jumps over the lazy dog " * 120
    llm.reset()
    t = time.monotonic()
    out = llm.create_completion(text, max_tokens=1, temperature=0)
    n = out["usage"]["prompt_tokens"]
    print(f"{label}: prompt processing {n / (time.monotonic() - t):.0f} tokens/s ({n} tokens)")
    rates = []
    for i in range(3):
        llm.reset()
        t = time.monotonic()
        out = llm.create_completion(f"{i} Once upon a time", max_tokens=tokens, temperature=0.8, seed=i)
        rates.append(out["usage"]["completion_tokens"] / (time.monotonic() - t))
    print(f"{label}: generation, one sequence: {max(rates):.1f} tokens/s (best of 3, {tokens} tokens)")


def transformers_runtime(tokens: int) -> None:
    from lwm.models.transformers_backend import TransformersChatModel

    t = time.monotonic()
    m = TransformersChatModel("embedded")
    print(f"transformers: load {time.monotonic() - t:.1f}s")
    sampling = SamplingParams(temperature=0.8, max_tokens=tokens, seed=0)

    async def run(n: int) -> float:
        t0 = time.monotonic()
        gens = await asyncio.gather(*(m.generate(PROMPT, sampling) for _ in range(n)))
        return sum(g.completion_tokens for g in gens) / (time.monotonic() - t0)

    for n in (1, 8, 32):
        print(f"transformers: generation, batch {n}: {asyncio.run(run(n)):.1f} tokens/s in total")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--skip-hf", action="store_true")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    from lwm.models.embedded import WARMUP_ADAPTER

    llama_cpp(args.tokens)
    llama_cpp(args.tokens, str(WARMUP_ADAPTER))  # the merge is cached: a first run's load includes it
    llama_cpp(args.tokens, str(WARMUP_ADAPTER), merge=False)
    if not args.skip_hf:
        transformers_runtime(args.tokens)


if __name__ == "__main__":
    main()
