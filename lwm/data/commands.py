"""``lwm data``: build training datasets from trajectories and annotate them with reasoning.

A typer sub-app; the main CLI mounts it with ``app.add_typer(data_app, name="data")``.
Each command parses flags and calls one library function (:func:`lwm.data.build.build`,
:func:`lwm.data.annotate.annotate`); errors exit 2 with one line on stderr, Ctrl-C 130.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from lwm.errors import LwmError

data_app = typer.Typer(
    help="Training data: build next-observation datasets from trajectories; annotate them with teacher reasoning.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True, soft_wrap=True)


def _fail(e: BaseException) -> None:
    console.print(f"[red]error:[/red] {e}", markup=True, highlight=False)
    raise typer.Exit(2)


@data_app.command("build")
def build_cmd(
    sources: List[Path] = typer.Option(..., "--from", help="A directory written by `lwm collect` (its "
                                       "trajectories.jsonl), a trajectories file or an AgentWorldBench rows file. "
                                       "Repeat, or list more paths after the options."),
    more: Optional[List[Path]] = typer.Argument(None, help="More sources (same as --from).", show_default=False),
    out: Path = typer.Option(..., help="Output directory (Parquet + JSONL + manifest.json; heldout/: the "
                             "validation split as AgentWorldBench rows for lwm eval --data)."),
    max_tokens: int = typer.Option(2048, min=16, help="Token budget per example: prompt + target, chat template "
                                   "included; the oldest history turns are dropped first."),
    tokenizer: str = typer.Option("embedded", help="Tokenizer that measures examples: 'embedded' (the SmolLM2 "
                                  "GGUF's) or a Hugging Face tokenizer directory."),
    val_fraction: float = typer.Option(0.2, min=0.0, max=1.0, help="Share of each domain's examples held out, "
                                       "as whole task families."),
    seed: int = typer.Option(0, help="Seed of the family hash that chooses the held-out families."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Turn trajectories into next-observation training examples (one template, all domains)."""
    from lwm.data.build import BuildConfig, build

    try:
        res = build(BuildConfig(sources=list(sources) + list(more or []), out=out, max_tokens=max_tokens,
                                tokenizer=tokenizer, val_fraction=val_fraction, seed=seed), show_progress=progress)
    except KeyboardInterrupt:
        console.print("\n[yellow]interrupted[/yellow]; nothing was written")
        raise typer.Exit(130) from None
    except (LwmError, OSError, ValueError) as e:
        _fail(e)
    c = res.manifest["counts"]
    skipped = sum(c["skipped"].values())
    console.print(f"{c['train']} train + {c['validation']} validation examples "
                  f"({len(res.manifest['splits']['train']['families'])} + "
                  f"{len(res.manifest['splits']['validation']['families'])} families) in {res.seconds:.1f}s → {out}; "
                  f"{c['duplicates']} duplicates, {skipped} over budget, {c['later_run_trajectories']} later-run "
                  f"trajectories left out, {c['examples_with_dropped_turns']} examples with dropped history")


@data_app.command("annotate")
def annotate_cmd(
    data: Path = typer.Option(..., help="A dataset directory written by `lwm data build`."),
    out: Path = typer.Option(..., help="Output dataset directory (same layout). Re-run to resume."),
    base_url: str = typer.Option(..., help="The teacher's OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."),
    model: Optional[str] = typer.Option(None, help="Served model name (default: the first one the endpoint lists)."),
    api_key: str = typer.Option("EMPTY", envvar="LWM_API_KEY", help="Bearer token for the endpoint."),
    max_examples: Optional[int] = typer.Option(None, min=0, help="Examples sent to the teacher at most (all runs)."),
    max_tokens: Optional[int] = typer.Option(None, min=1, help="Teacher tokens (prompt + completion, all calls, "
                                             "all runs) at most."),
    trace_tokens: int = typer.Option(512, min=16, help="Generated tokens per trace at most."),
    concurrency: int = typer.Option(8, min=1, help="Teacher requests in flight."),
    leak_threshold: float = typer.Option(0.6, min=0.0, max=1.0, help="Reject a trace that reproduces more than this "
                                         "share of the observation's new content (see docs/data.md)."),
    verify: bool = typer.Option(False, help="Keep only traces from which the teacher itself predicts the observation."),
    verify_threshold: float = typer.Option(0.5, min=0.0, max=1.0, help="Minimum edit similarity for --verify."),
    split: List[str] = typer.Option(["train", "validation"], help="Splits to annotate (repeat)."),
    drop_rejected: bool = typer.Option(False, help="Leave examples without an accepted trace out of the output."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Have a teacher LLM write the reasoning behind each real next observation."""
    from lwm.data.annotate import AnnotateConfig, annotate

    cfg = AnnotateConfig(data=data, out=out, base_url=base_url, model=model, api_key=api_key,
                         max_examples=max_examples, max_total_tokens=max_tokens, trace_tokens=trace_tokens,
                         concurrency=concurrency, leak_threshold=leak_threshold, verify=verify,
                         verify_threshold=verify_threshold, splits=tuple(split), drop_rejected=drop_rejected)
    try:
        res = annotate(cfg, show_progress=progress)
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted[/yellow]; finished traces are kept: resume with the same command "
                      f"(--out {out})")
        raise typer.Exit(130) from None
    except (LwmError, OSError, ValueError) as e:
        _fail(e)
    rejected = ", ".join(f"{k} {v}" for k, v in res.rejected.items()) or "none"
    console.print(f"{res.accepted}/{res.attempted} traces accepted (rejected: {rejected}); "
                  f"{res.tokens} teacher tokens; {res.seconds:.1f}s → {out}")
