"""Training throughput of warm-up SFT: training tokens per second on this machine.

Runs ``lwm.train.sft.train_sft`` (TRL SFTTrainer + PEFT LoRA on the embedded SmolLM2-135M,
float32 on the CPU) for a few steps on real world-model examples and prints one Markdown
table row for docs/benchmarks.md. Tokens are those of the prompt and completion (chat
template included, no padding), as TRL counts them; time is the wall time of
``trainer.train`` (the final checkpoint save included, no evaluation).

Data: ``--data DIR`` (a dataset built by ``lwm data build``), or by default the first
``--episodes`` episodes of the real terminal suite, collected in the sandbox and built
with a ``--max-length`` token budget (needs bubblewrap and tmux).

    python bench/train_throughput.py [--data DIR] [--steps 6] [--batch-size 4] [--max-length 512]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
from pathlib import Path

from _common import machine


def build_real_dataset(root: Path, episodes: int, max_tokens: int) -> Path:
    """Collect real terminal transitions and build a dataset from them."""
    from lwm.data.build import BuildConfig, build
    from lwm.data.collect import CollectConfig, collect

    collect(CollectConfig(out=root / "collected", domain="terminal", episodes=episodes), show_progress=False)
    build(BuildConfig(sources=[root / "collected"], out=root / "data", max_tokens=max_tokens, val_fraction=0.0),
          show_progress=False)
    return root / "data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, help="A dataset directory (default: collect and build the terminal suite).")
    ap.add_argument("--episodes", type=int, default=20, help="Terminal episodes to collect without --data.")
    ap.add_argument("--steps", type=int, default=6, help="Optimizer steps to time.")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--max-length", type=int, default=512, help="Token budget per example.")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--full", action="store_true", help="Full fine-tuning instead of LoRA.")
    args = ap.parse_args()

    from lwm.train.sft import TrainConfig, load_sft_dataset, train_sft

    with tempfile.TemporaryDirectory(prefix="lwm-train-bench-") as tmp:
        root = Path(tmp)
        data = args.data or build_real_dataset(root, args.episodes, args.max_length)
        n_examples = len(load_sft_dataset(data)["train"])
        load_before = os.getloadavg()[0]
        res = train_sft(TrainConfig(data=data, out=root / "run", lora=not args.full, lora_r=args.lora_r,
                                    max_steps=args.steps, batch_size=args.batch_size, max_length=args.max_length,
                                    save_steps=args.steps, eval_steps=10 * args.steps, logging_steps=1),
                        show_progress=False)
        load_after = os.getloadavg()[0]
    per_example = res.train_tokens / (res.steps * args.batch_size)
    steps = [h for h in res.log_history if "loss" in h]
    losses = f"{steps[0]['loss']:.2f} → {steps[-1]['loss']:.2f}" if steps else "?"
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    method = "full fine-tune" if args.full else f"LoRA r={args.lora_r} (7 projections)"
    print("| date, machine | model, method | batch × mean tokens | steps | training tokens/s | s/step | loss | "
          "peak RSS | load avg |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {machine()} | SmolLM2-135M fp32, {method} | {args.batch_size} × {per_example:.0f} "
          f"({n_examples} real examples) | {res.steps} | **{res.tokens_per_second:.0f}** | "
          f"{res.seconds / res.steps:.1f} | {losses} | {peak_gb:.1f} GB | "
          f"{statistics.mean((load_before, load_after)):.1f} |")


if __name__ == "__main__":
    main()
