"""``lwm data``: build training datasets from trajectories and annotate them with reasoning."""

from __future__ import annotations

from pathlib import Path

import typer

from lwm.cli.common import call, fail, note, option
from lwm.data.annotate import AnnotateConfig
from lwm.data.build import BuildConfig
from lwm.data.verdicts import KINDS, MAX_TRACE_WEIGHT, VerdictDataConfig
from lwm.data.verdicts import ORDERS as VERDICT_ORDERS
from lwm.retrieval import build_index

data_app = typer.Typer(
    help="Training data: build next-observation datasets from trajectories; annotate them with teacher reasoning; "
         "label real episodes for the reward model; index real transitions for retrieval.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
)


@data_app.command("build")
def build_cmd(
    sources: list[Path] = option(BuildConfig, "sources", "--from", metavar="<path>",
                                 help_suffix="Repeat, or list more paths after the options."),
    more: list[Path] | None = typer.Argument(None, help="More sources (same as --from).", show_default=False),
    out: Path = option(BuildConfig, "out"),
    max_tokens: int = option(BuildConfig, "max_tokens", min=16),
    tokenizer: str = option(BuildConfig, "tokenizer"),
    val_fraction: float = option(BuildConfig, "val_fraction", min=0.0, max=1.0),
    seed: int = option(BuildConfig, "seed"),
    predict: str = option(BuildConfig, "prediction", "--predict", metavar="full|change"),
    compact_tools: bool = option(BuildConfig, "compact_tools"),
    prompt_variety: bool = option(BuildConfig, "prompt_variety"),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Turn trajectories into next-observation training examples (one template, all domains)."""
    from lwm.data.build import build

    config = BuildConfig(sources=list(sources) + list(more or []), out=out, max_tokens=max_tokens,
                         tokenizer=tokenizer, val_fraction=val_fraction, seed=seed, prediction=predict,
                         compact_tools=compact_tools, prompt_variety=prompt_variety)
    res = call(build, config, show_progress=progress)
    c = res.manifest["counts"]
    note(f"{c['train']} train + {c['validation']} validation examples "
         f"({len(res.manifest['splits']['train']['families'])} + "
         f"{len(res.manifest['splits']['validation']['families'])} families) in {res.seconds:.1f}s → {out}; "
         f"{c['duplicates']} duplicates, {c['skipped']['target_over_budget'] + c['skipped']['prompt_over_budget']} "
         f"over budget, {c['skipped']['change_unrenderable']} without a renderable change, "
         f"{c['later_run_trajectories']} later-run trajectories left out, "
         f"{c['examples_with_dropped_turns']} examples with dropped history")


@data_app.command("index")
def index_cmd(
    sources: list[Path] = option(build_index, "sources", "--from", metavar="<path>", default=[],
                                 help_suffix="Repeat, or list more paths after the options."),
    more: list[Path] | None = typer.Argument(None, help="More sources (same as --from).", show_default=False),
    out: Path = option(build_index, "out", "--out"),
    leave_out_family: list[str] | None = option(build_index, "leave_out_families", "--leave-out-family",
                                                default=None, help_suffix="Repeat for several."),
) -> None:
    """Index real transitions for retrieval: lwm eval --index puts the nearest ones among the
    candidates the world model scores."""
    paths = [*sources, *(more or [])]
    if not paths:
        fail(ValueError("no sources: give trajectory files or directories (--from PATH, or PATH after the options)"))
    index = call(build_index, paths, out, tuple(leave_out_family or ()))
    counts = ", ".join(f"{d} {len(ts)}" for d, ts in sorted(index.by_domain.items()))
    note(f"wrote {out}: {len(index)} real transitions ({counts})")


@data_app.command("annotate")
def annotate_cmd(
    data: Path = option(AnnotateConfig, "data"),
    out: Path = option(AnnotateConfig, "out"),
    base_url: str = option(AnnotateConfig, "base_url"),
    model: str | None = option(AnnotateConfig, "model"),
    api_key: str = option(AnnotateConfig, "api_key", envvar="LWM_API_KEY"),
    max_examples: int | None = option(AnnotateConfig, "max_examples", min=0),
    max_tokens: int | None = option(AnnotateConfig, "max_total_tokens", "--max-tokens", min=1),
    trace_tokens: int = option(AnnotateConfig, "trace_tokens", min=16),
    concurrency: int = option(AnnotateConfig, "concurrency", min=1),
    leak_threshold: float = option(AnnotateConfig, "leak_threshold", min=0.0, max=1.0),
    verify: bool = option(AnnotateConfig, "verify"),
    verify_threshold: float = option(AnnotateConfig, "verify_threshold", min=0.0, max=1.0),
    split: list[str] = option(AnnotateConfig, "splits", "--split", default=["train", "validation"],
                              help_suffix="Repeat the flag for several."),
    drop_rejected: bool = option(AnnotateConfig, "drop_rejected"),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Have a teacher LLM write the reasoning behind each real next observation."""
    from lwm.data.annotate import annotate

    config = AnnotateConfig(data=data, out=out, base_url=base_url, model=model, api_key=api_key,
                            max_examples=max_examples, max_total_tokens=max_tokens, trace_tokens=trace_tokens,
                            concurrency=concurrency, leak_threshold=leak_threshold, verify=verify,
                            verify_threshold=verify_threshold, splits=tuple(split), drop_rejected=drop_rejected)
    res = call(annotate, config, show_progress=progress, resume=out)
    rejected = ", ".join(f"{k} {v}" for k, v in res.rejected.items()) or "none"
    note(f"{res.accepted}/{res.attempted} traces accepted (rejected: {rejected}); {res.tokens} teacher tokens; "
         f"{res.seconds:.1f}s → {out}")


@data_app.command("verdicts")
def verdicts_cmd(
    out: Path = option(VerdictDataConfig, "out"),
    domain: list[str] = option(VerdictDataConfig, "domains", "--domain", help_suffix="Repeat for several."),
    tasks: int = option(VerdictDataConfig, "tasks", min=0),
    heldout_tasks: int = option(VerdictDataConfig, "heldout_tasks", min=0),
    seed: int = option(VerdictDataConfig, "seed"),
    kind: list[str] = option(VerdictDataConfig, "kinds", "--kind", help_suffix="Repeat for several."),
    negatives_per_positive: float = option(VerdictDataConfig, "negatives_per_positive", min=0.01),
    easy_share: float = option(VerdictDataConfig, "easy_share", min=0.0, max=1.0),
    trace_weight: int = option(VerdictDataConfig, "trace_weight", min=1, max=MAX_TRACE_WEIGHT),
    from_runs: list[Path] = option(VerdictDataConfig, "from_runs", "--from", metavar="<path>",
                                   help_suffix="Repeat for several."),
    order: str = option(VerdictDataConfig, "order", metavar="|".join(VERDICT_ORDERS)),
    workers: int = option(VerdictDataConfig, "workers", min=1),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Real episodes labelled by the real verifier (reference solutions, wrong values, missing steps, plausible
    wrong attempts, prose …) and the reward model's training and held-out examples built from them; resumable."""
    from lwm.data.verdicts import build_verdict_data

    config = call(VerdictDataConfig, out=out, domains=tuple(domain), tasks=tasks, heldout_tasks=heldout_tasks,
                  seed=seed, kinds=tuple(kind) or KINDS, negatives_per_positive=negatives_per_positive,
                  easy_share=easy_share, from_runs=tuple(from_runs), trace_weight=trace_weight, order=order,
                  workers=workers)
    res = call(build_verdict_data, config, show_progress=progress, resume=out)
    s = res.summary
    ex = s["examples"]
    note(f"{s['episodes']} labelled episodes ({s['traces']} from earlier runs) in {s['seconds']:.0f}s → {out}: "
         f"{ex['train']} train, {ex['validation']} validation, {ex['heldout']} held-out examples; "
         f"{sum(s['unverified'].values())} unverified, {len(res.failed)} tasks failed")
    if s["traces_skipped"]:
        note(f"left out of --from: {s['traces_skipped']}", "yellow")
    if res.failed or not s["episodes"]:
        raise typer.Exit(1)
