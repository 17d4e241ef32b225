"""``lwm train``: warm-up SFT of a world model (TRL + PEFT LoRA) and export of its adapter to
llama.cpp. On GPUs, ``accelerate launch … -m lwm.cli train sft …`` runs the same command
(docs/training.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from lwm.cli.common import call, note, option
from lwm.train.export import export_lora_gguf
from lwm.train.interpolate import interpolate_run
from lwm.train.rft import RFTConfig
from lwm.train.rl import RLConfig
from lwm.train.sft import ORDERS, TrainConfig

train_app = typer.Typer(help="Train: warm-up SFT of a world model (TRL + PEFT LoRA), GRPO or rejection-sampling "
                        "fine-tuning of an agent inside the world model (or GRPO of the world model for fidelity), "
                        "export to llama.cpp.",
                        no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                        rich_markup_mode=None)


@train_app.command("sft")
def sft(
    data: Path = option(TrainConfig, "data"),
    out: Path = option(TrainConfig, "out"),
    model: str = option(TrainConfig, "model"),
    lora: bool = option(TrainConfig, "lora", "--lora/--full"),
    lora_r: int = option(TrainConfig, "lora_r", min=1),
    lora_alpha: float | None = option(TrainConfig, "lora_alpha", min=0.0),
    lora_dropout: float = option(TrainConfig, "lora_dropout", min=0.0, max=0.99),
    target_modules: str = option(TrainConfig, "target_modules", default=",".join(TrainConfig.target_modules),
                                 show_default=False, help_suffix="Comma-separated; default: every projection "
                                 "of a Llama/Qwen block (q, k, v, o, gate, up, down)."),
    epochs: float = option(TrainConfig, "epochs", min=0.0),
    max_steps: int | None = option(TrainConfig, "max_steps", min=1),
    lr: float | None = option(TrainConfig, "lr"),
    batch_size: int = option(TrainConfig, "batch_size", min=1),
    grad_accum: int = option(TrainConfig, "grad_accum", min=1),
    max_length: int = option(TrainConfig, "max_length", min=16),
    eval_steps: int | None = option(TrainConfig, "eval_steps", min=1),
    save_steps: int = option(TrainConfig, "save_steps", min=1),
    save_total_limit: int = option(TrainConfig, "save_total_limit", min=1),
    logging_steps: int = option(TrainConfig, "logging_steps", min=1),
    warmup: float = option(TrainConfig, "warmup", min=0.0),
    seed: int = option(TrainConfig, "seed"),
    order: str = option(TrainConfig, "order", metavar="|".join(ORDERS)),
    resume: bool = option(TrainConfig, "resume"),
    eval_on_start: bool = option(TrainConfig, "eval_on_start"),
    bf16: bool | None = option(TrainConfig, "bf16", "--bf16/--no-bf16"),
    gradient_checkpointing: bool | None = option(TrainConfig, "gradient_checkpointing",
                                                    "--gradient-checkpointing/--no-gradient-checkpointing"),
    init_adapter: str | None = option(TrainConfig, "init_adapter", metavar="warmup|<path>"),
    progress: bool = typer.Option(True, help="Show progress bars (the trainer's and the Hugging Face "
                                  "libraries') and the trainer's logs."),
) -> None:
    """Warm-up SFT: TRL SFTTrainer (+ PEFT LoRA), loss on the completion only, checkpoints, resume."""
    from lwm.train.sft import train_sft

    def run():
        config = TrainConfig(
            data=data, out=out, model=model, lora=lora, lora_r=lora_r, lora_alpha=lora_alpha,
            lora_dropout=lora_dropout, target_modules=tuple(t.strip() for t in target_modules.split(",") if t.strip()),
            epochs=epochs, max_steps=max_steps, lr=lr, batch_size=batch_size, grad_accum=grad_accum,
            max_length=max_length, eval_steps=eval_steps, save_steps=save_steps, save_total_limit=save_total_limit,
            logging_steps=logging_steps, warmup=warmup, seed=seed, order=order, resume=resume,
            eval_on_start=eval_on_start, bf16=bf16, gradient_checkpointing=gradient_checkpointing,
            init_adapter=init_adapter)
        return train_sft(config, show_progress=progress)

    res = call(run, hint=f"continue from the last checkpoint with the same command and --resume (--out {out})")
    if res.resumed_from:
        note(f"resumed from {res.resumed_from.name}")
    elif resume:
        note(f"no checkpoint in {out}: started from scratch")
    dropped = {k: v for k, v in res.dropped_too_long.items() if v}
    if dropped:
        note(f"dropped examples longer than {max_length} tokens: {dropped}", "yellow")
    evals = f", validation loss {res.eval_loss:.4f}" if res.eval_loss is not None else " (no validation split)"
    if res.eval_loss_start is not None:
        evals += f" (before training {res.eval_loss_start:.4f})"
    note(f"{res.steps} steps on {res.train_examples} examples: train loss {res.train_loss:.4f}{evals}; "
         f"{res.train_tokens} tokens in {res.seconds:.0f}s ({res.tokens_per_second:.0f} tokens/s)")
    note(f"wrote {res.output_dir} and {out}/metrics.json")
    from lwm.cli import _html_report

    _html_report(out)


@train_app.command("rl")
def rl(
    out: Path = option(RLConfig, "out"),
    objective: str = option(RLConfig, "objective"),
    model: str = option(RLConfig, "model"),
    domain: list[str] = option(RLConfig, "domains", "--domain", default=[],
                               help_suffix="Repeat the flag for several."),
    tasks: int = option(RLConfig, "tasks", min=1),
    tasks_file: Path | None = option(RLConfig, "tasks_file"),
    max_task_steps: int = option(RLConfig, "max_task_steps", min=1),
    backend: str = option(RLConfig, "backend"),
    world_model: str | None = option(RLConfig, "world_model", default=None, help_suffix=(
        "Default: the first model --base-url serves, else embedded-warmup.")),
    base_url: str | None = option(RLConfig, "base_url"),
    api_key: str = option(RLConfig, "api_key", envvar="LWM_API_KEY"),
    extra_body: str | None = option(RLConfig, "extra_body", default=None, help_suffix="As JSON."),
    reward: str = option(RLConfig, "reward"),
    show_task: bool = option(RLConfig, "show_task"),
    predict: str | None = option(RLConfig, "prediction", "--predict", metavar="full|change"),
    compact_tools: bool | None = option(RLConfig, "compact_tools", "--compact-tools/--no-compact-tools"),
    cache: Path | None = option(RLConfig, "cache"),
    max_turns: int = option(RLConfig, "max_turns", min=1),
    data: Path | None = option(RLConfig, "data"),
    format_weight: float = option(RLConfig, "format_weight", min=0.0),
    num_generations: int = option(RLConfig, "num_generations", min=2),
    prompts_per_step: int = option(RLConfig, "prompts_per_step", min=1),
    max_steps: int = option(RLConfig, "max_steps", min=1),
    max_new_tokens: int = option(RLConfig, "max_new_tokens", min=1),
    temperature: float = option(RLConfig, "temperature", min=0.0),
    lr: float = option(RLConfig, "lr"),
    lora_r: int = option(RLConfig, "lora_r", min=1),
    beta: float = option(RLConfig, "beta", min=0.0),
    save_steps: int = option(RLConfig, "save_steps", min=1),
    seed: int = option(RLConfig, "seed"),
    resume: bool = option(RLConfig, "resume"),
    vllm_server_base_url: str | None = option(RLConfig, "vllm_server_base_url"),
    progress: bool = typer.Option(True, help="Show progress bars (the trainer's and the Hugging Face "
                                  "libraries') and the trainer's logs."),
) -> None:
    """GRPO (TRL GRPOTrainer + PEFT LoRA): an agent learns tasks inside the world model (or the
    real environment), or the world model learns fidelity; checkpoints, resume, GGUF export."""
    from lwm.cli import _default_model, _extra_body
    from lwm.sim.backends import backend_spec
    from lwm.train.rl import train_rl

    def run():
        world = _default_model(world_model, base_url, api_key) if backend_spec(backend).simulates else \
            RLConfig.world_model
        config = RLConfig(out=out, objective=objective, model=model, domains=tuple(domain), tasks=tasks,
                          tasks_file=tasks_file, max_task_steps=max_task_steps, backend=backend, world_model=world,
                          base_url=base_url, api_key=api_key, extra_body=_extra_body(extra_body), reward=reward,
                          show_task=show_task, prediction=predict,
                          compact_tools=compact_tools, cache=cache,
                          max_turns=max_turns, data=data, format_weight=format_weight,
                          num_generations=num_generations, prompts_per_step=prompts_per_step, max_steps=max_steps,
                          max_new_tokens=max_new_tokens, temperature=temperature, lr=lr, lora_r=lora_r, beta=beta,
                          save_steps=save_steps, seed=seed, resume=resume, vllm_server_base_url=vllm_server_base_url)
        return train_rl(config, show_progress=progress)

    res = call(run, hint=f"continue from the last checkpoint with the same command and --resume (--out {out})")
    rewards = f"mean reward {res.mean_reward_first} → {res.mean_reward_last}" if res.mean_reward_first is not None \
        else "no reward logged"
    note(f"{res.steps} GRPO steps in {res.seconds:.0f}s; {rewards}; wrote {res.adapter}")
    if res.adapter_gguf:
        note(f"for llama.cpp: {res.adapter_gguf} (lwm agent eval --policy-adapter {res.adapter_gguf})")
    else:
        note(f"warning: no GGUF export: {res.export_error}", "yellow")
    from lwm.cli import _html_report

    _html_report(out)


@train_app.command("rft")
def rft(
    out: Path = option(RFTConfig, "out"),
    domain: list[str] = option(RFTConfig, "domains", "--domain", default=[], help_suffix="Repeat for several."),
    tasks: int = option(RFTConfig, "tasks", min=1),
    tasks_file: Path | None = option(RFTConfig, "tasks_file", default=None),
    samples: int = option(RFTConfig, "samples", min=1),
    policy: str = option(RFTConfig, "policy"),
    temperature: float = option(RFTConfig, "temperature", min=0.0),
    max_turns: int = option(RFTConfig, "max_turns", min=1),
    backend: str = option(RFTConfig, "backend"),
    world_model: str = option(RFTConfig, "world_model", "--model"),
    reward: str = option(RFTConfig, "reward"),
    threshold: float = option(RFTConfig, "threshold"),
    well_formed_only: bool = option(RFTConfig, "well_formed_only", "--well-formed-only/--any-answer"),
    learn: str = option(RFTConfig, "learn"),
    form: str = option(RFTConfig, "form"),
    anchor_tasks: Path | None = option(RFTConfig, "anchor_tasks", default=None),
    max_steps: int = option(RFTConfig, "max_steps", min=1),
    lr: float = option(RFTConfig, "lr"),
    lora_r: int = option(RFTConfig, "lora_r", min=1),
    seed: int = option(RFTConfig, "seed"),
    progress: bool = typer.Option(True, help="Show progress bars; without them the trainer logs its loss as lines, "
                                  "for a log file."),
) -> None:
    """Rejection-sampling fine-tuning: the policy attempts each task several times inside the world model, the
    reward model accepts some, the policy is fine-tuned on its accepted answers; resumable."""
    from lwm.train.rft import train_rft

    config = call(RFTConfig, out=out, domains=tuple(domain), tasks=tasks, tasks_file=tasks_file, samples=samples,
                  policy=policy, temperature=temperature, max_turns=max_turns, backend=backend, world_model=world_model,
                  reward=reward, threshold=threshold, well_formed_only=well_formed_only, learn=learn,
                  form=form, anchor_tasks=anchor_tasks, max_steps=max_steps, lr=lr, lora_r=lora_r,
                  seed=seed)
    res = call(train_rft, config, show_progress=progress, resume=out)
    s = res.summary
    refused = f", {s['refused_ill_formed']} more paid but ill formed" if s.get("refused_ill_formed") else ""
    early = f", {s['achieved_early']} achieved before their last turn" if s.get("achieved_early") else ""
    anchors = f", {s['anchor_examples']} of them anchor rows" if s.get("anchor_examples") else ""
    note(f"{s['accepted']} of {s['attempts']} attempts accepted ({s['examples']} examples{anchors}{refused}{early}), "
         f"{s['real_steps']} real steps; {s['sft_steps']} SFT steps; wrote {res.adapter_gguf or s['export_error']} "
         f"(lwm agent eval --policy {out})")


@train_app.command("interpolate")
def interpolate(
    run: Path = typer.Argument(..., help="a finished training run's directory (lwm train sft, rl or rft)"),
    out: Path = option(interpolate_run, "out"),
    weight: float = option(interpolate_run, "weight"),
) -> None:
    """The run's adapter at part strength (WiSE-FT): the weights between the model it was trained from and the
    fine-tuned one; a finished run that lwm agent eval --policy plays and lwm train rft --policy trains further."""
    gguf = call(interpolate_run, run, out, weight, hint="run the same command again")
    note(f"wrote {out}: {run}'s adapter at weight {weight:g} ({gguf}; lwm agent eval --policy {out})")


@train_app.command("export")
def export(
    adapter: Path = option(export_lora_gguf, "adapter"),
    out: Path = option(export_lora_gguf, "out"),
    base: str | None = option(export_lora_gguf, "base"),
    dtype: str = option(export_lora_gguf, "dtype"),
) -> None:
    """Convert a LoRA adapter to GGUF for llama.cpp (`lwm eval --adapter` / `Llama(lora_path=…)`)."""
    res = call(export_lora_gguf, adapter, out, base=base, dtype=dtype)
    note(f"wrote {res.path}: {res.tensors} tensors, rank {res.rank}, alpha {res.alpha:g}, "
         f"architecture {res.architecture}, {res.bytes / 2**20:.1f} MiB")
    note(f"and {res.path.with_suffix('.json')}: prediction {res.request['prediction']}, compact tools "
         f"{'on' if res.request['compact_tools'] else 'off'} (how lwm asks the model when it loads the adapter)")
    if res.request_from is None:
        note(f"(defaults: the data this adapter trained on has no lwm data build manifest.json saying how it was "
             f"asked; that matters only for a world model: edit {res.path.with_suffix('.json')} if it learned "
             "changes or compact tool lists)", "yellow")
