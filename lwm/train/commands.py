"""``lwm train …``: the typer sub-app (wired in lwm/cli.py with ``app.add_typer(train_app, name="train")``).

Each command parses flags and calls one library function; heavy imports happen inside.
``python -m lwm.train.sft`` (and ``accelerate launch -m lwm.train.sft``) runs the same
``sft`` command on its own through ``sft_main``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from lwm.errors import LwmError

train_app = typer.Typer(help="Train a world model: warm-up SFT (TRL + PEFT LoRA) and export to llama.cpp.",
                        no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
console = Console(stderr=True, soft_wrap=True)


def _fail(e: BaseException) -> None:
    console.print(f"[red]error:[/red] {e}", markup=True, highlight=False)
    raise typer.Exit(2)


def sft(
    data: Path = typer.Option(..., help="Dataset directory from `lwm data build`: train (and validation) split "
                              "in Parquet or JSONL, conversational prompt/completion rows (docs/training.md)."),
    out: Path = typer.Option(..., help="Run directory: checkpoints, the final adapter/ (or model/), metrics.json."),
    model: str = typer.Option("embedded", help="'embedded' (SmolLM2-135M-Instruct, float32 from the bundled GGUF) "
                              "or a local Hugging Face model directory."),
    lora: bool = typer.Option(True, "--lora/--full", help="Train a LoRA adapter, or all weights."),
    lora_r: int = typer.Option(16, min=1, help="LoRA rank."),
    lora_alpha: Optional[float] = typer.Option(None, min=0.0, help="LoRA alpha (default 2 × rank)."),
    lora_dropout: float = typer.Option(0.05, min=0.0, max=0.99, help="Dropout on the LoRA input."),
    target_modules: str = typer.Option(",".join(("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                 "down_proj")), help="Comma-separated modules LoRA wraps."),
    epochs: float = typer.Option(1.0, min=0.0, help="Passes over the training split (unless --max-steps)."),
    max_steps: Optional[int] = typer.Option(None, min=1, help="Optimizer steps in all; overrides --epochs. On "
                                            "--resume, the new total (raise it to train longer)."),
    lr: Optional[float] = typer.Option(None, min=0.0, help="Peak learning rate (default 2e-4 LoRA, 2e-5 full)."),
    batch_size: int = typer.Option(4, min=1, help="Examples per device per forward pass."),
    grad_accum: int = typer.Option(1, min=1, help="Forward passes per optimizer step."),
    max_length: int = typer.Option(1024, min=16, help="Longest example in tokens; longer ones are dropped and "
                                   "counted, never truncated."),
    eval_steps: Optional[int] = typer.Option(None, min=1, help="Validation loss every N steps (default: "
                                             "--save-steps) and at the end."),
    save_steps: int = typer.Option(50, min=1, help="Checkpoint every N steps (and at the last step)."),
    save_total_limit: int = typer.Option(2, min=1, help="Checkpoints kept."),
    logging_steps: int = typer.Option(5, min=1, help="Log the loss every N steps."),
    warmup: float = typer.Option(0.0, min=0.0, help="Learning-rate warm-up: a share of the steps when below 1 "
                                 "(0.05), else a number of steps."),
    seed: int = typer.Option(0, help="Seed of data order, LoRA init and dropout."),
    resume: bool = typer.Option(False, help="Continue from the last checkpoint in --out."),
    eval_on_start: bool = typer.Option(False, help="Also compute the validation loss before the first step."),
    bf16: Optional[bool] = typer.Option(None, "--bf16/--no-bf16", help="bfloat16 mixed precision (default: on "
                                        "with a CUDA GPU that supports it, off on CPU)."),
    gradient_checkpointing: Optional[bool] = typer.Option(None, "--gradient-checkpointing/--no-gradient-"
                                                          "checkpointing", help="Default: on with CUDA, off on CPU."),
    progress: bool = typer.Option(True, help="Show the trainer's progress bar and logs."),
) -> None:
    """Warm-up SFT: TRL SFTTrainer (+ PEFT LoRA), loss on the completion only, checkpoints, resume."""
    from lwm.train.sft import TrainConfig, train_sft

    try:
        config = TrainConfig(
            data=data, out=out, model=model, lora=lora, lora_r=lora_r, lora_alpha=lora_alpha,
            lora_dropout=lora_dropout, target_modules=tuple(t.strip() for t in target_modules.split(",") if t.strip()),
            epochs=epochs, max_steps=max_steps, lr=lr, batch_size=batch_size, grad_accum=grad_accum,
            max_length=max_length, eval_steps=eval_steps, save_steps=save_steps, save_total_limit=save_total_limit,
            logging_steps=logging_steps, warmup=warmup, seed=seed, resume=resume,
            eval_on_start=eval_on_start, bf16=bf16, gradient_checkpointing=gradient_checkpointing,
        )
        res = train_sft(config, show_progress=progress)
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted[/yellow]; continue from the last checkpoint with the same command "
                      f"and --resume (--out {out})")
        raise typer.Exit(130) from None
    except (LwmError, ValueError, OSError) as e:
        _fail(e)
    if res.resumed_from:
        console.print(f"resumed from {res.resumed_from.name}")
    elif resume:
        console.print(f"no checkpoint in {out}: started from scratch")
    dropped = {k: v for k, v in res.dropped_too_long.items() if v}
    if dropped:
        console.print(f"[yellow]dropped examples longer than {max_length} tokens:[/yellow] {dropped}")
    evals = f", validation loss {res.eval_loss:.4f}" if res.eval_loss is not None else " (no validation split)"
    if res.eval_loss_start is not None:
        evals += f" (before training {res.eval_loss_start:.4f})"
    console.print(f"{res.steps} steps on {res.train_examples} examples: train loss {res.train_loss:.4f}{evals}; "
                  f"{res.train_tokens} tokens in {res.seconds:.0f}s ({res.tokens_per_second:.0f} tokens/s)")
    console.print(f"wrote {res.output_dir} and {out}/metrics.json")


def export(
    adapter: Path = typer.Option(..., help="LoRA adapter folder (out/adapter or out/checkpoint-N)."),
    out: Path = typer.Option(..., help="GGUF file to write, e.g. adapter.gguf."),
    base: Optional[str] = typer.Option(None, help="Base model: 'embedded', a .gguf file or a Hugging Face folder "
                                       "(default: the one recorded at training)."),
    dtype: str = typer.Option("f16", help="f16 or f32 LoRA matrices."),
) -> None:
    """Convert a LoRA adapter to GGUF for llama.cpp (`lwm eval` / `Llama(lora_path=…)`)."""
    from lwm.train.export import export_lora_gguf

    try:
        res = export_lora_gguf(adapter, out, base=base, dtype=dtype)
    except (LwmError, ValueError, OSError, KeyError) as e:
        _fail(e)
    console.print(f"wrote {res.path}: {res.tensors} tensors, rank {res.rank}, alpha {res.alpha:g}, "
                  f"architecture {res.architecture}, {res.bytes / 2**20:.1f} MiB")


train_app.command("sft")(sft)
train_app.command("export")(export)

# `python -m lwm.train.sft …`: the sft command alone (a one-command typer app takes no sub-command name).
_sft_alone = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
_sft_alone.command()(sft)


def sft_main() -> None:
    """Entry point of ``python -m lwm.train.sft`` / ``accelerate launch -m lwm.train.sft``."""
    _sft_alone()
