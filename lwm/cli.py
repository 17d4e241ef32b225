"""The ``lwm`` command. Each command parses flags and calls one library function."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from lwm.errors import LwmError
from lwm.models import WORLD_MODEL

app = typer.Typer(
    help="Language World Models: collect real transitions, predict them with a world model, score fidelity.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: rich's tables truncate option help at 80 columns
)
console = Console(stderr=True, soft_wrap=True)  # one error, one line


def _default_model(base_url: str | None, api_key: str) -> str:
    """The world model when --model is not given: what --base-url serves, else the warm-up one."""
    from lwm.models import served_model

    return served_model(base_url, api_key) if base_url else WORLD_MODEL


def _run_dir() -> Path:
    return Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")


def _fail(e: BaseException) -> None:
    message = e.args[0] if isinstance(e, KeyError) and e.args else e  # KeyError's str() adds quotes
    console.print(f"[red]error:[/red] {escape(str(message))}", markup=True, highlight=False)  # paths may hold [..]
    raise typer.Exit(2)


@app.command()
def collect(
    domain: str = typer.Option("terminal", help="Domain whose bundled suite to play: terminal, fs, mcp, db, code, "
                               "search, web or swe (os and android: see `lwm import`)."),
    out: Path = typer.Option(None, help="Output directory (default: runs/<timestamp>/data). Re-run to resume."),
    episodes: Optional[int] = typer.Option(None, min=1, help="Play only the first N episodes."),
    extended: bool = typer.Option(False, help="Also play the episodes beyond the core suite."),
    runs: int = typer.Option(2, min=1, help="Real runs per episode; 2 or more finds volatile output."),
    workers: int = typer.Option(8, min=1, help="Episodes played at once, each in its own sandbox."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Play scripted episodes in a real sandboxed environment and write transitions."""
    from lwm.data.collect import CollectConfig
    from lwm.data.collect import collect as run_collect

    out = out or _run_dir() / "data"
    try:
        res = run_collect(CollectConfig(out=out, domain=domain, episodes=episodes, extended=extended, runs=runs,
                                        workers=workers),
                          show_progress=progress)
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted[/yellow]; resume with the same command and --out {out}")
        raise typer.Exit(130) from None
    except (LwmError, KeyError, OSError) as e:
        _fail(e)
    if res.played == 0:
        console.print(f"nothing left to play: {res.trajectories} trajectories already in {out}")
    else:
        console.print(f"played {res.played} runs in {res.seconds:.1f}s; {res.trajectories} trajectories, "
                      f"{res.turns} real steps in all → {res.rows_path}")
    if res.failed:
        first = next(iter(res.failed.values()))
        console.print(f"[yellow]{len(res.failed)} runs failed[/yellow], e.g. {first} (all in {out}/manifest.json)",
                      markup=True, highlight=False)
        if res.trajectories == 0:
            raise typer.Exit(1)


@app.command("import")
def import_(
    src: Path = typer.Argument(..., help="A log file or a directory of episodes."),
    format: str = typer.Option(..., "--format", help="os (OSWorld-style desktop logs with accessibility trees) or "
                               "android (AndroidWorld-style JSON)."),
    out: Path = typer.Option(None, help="Output directory (default: runs/<timestamp>/data)."),
    strict: bool = typer.Option(False, help="Stop at the first malformed episode instead of skipping and counting it."),
) -> None:
    """Import agent logs of domains that have no real environment here (os, android)."""
    from lwm.data.importers import NO_REAL_ENVIRONMENT, import_logs

    out = out or _run_dir() / "data"
    console.print(f"[yellow]note:[/yellow] {NO_REAL_ENVIRONMENT}")
    try:
        res = import_logs(format, src, out, strict=strict)
    except (LwmError, KeyError, ValueError, OSError) as e:
        _fail(e)
    console.print(f"imported {res.trajectories} trajectories, {res.turns} turns, {res.rows} rows → {res.rows_path}")
    if res.skipped or res.dropped_turns:
        console.print(f"[yellow]{len(res.skipped)} malformed episodes skipped, {len(res.dropped_turns)} final turns "
                      f"without a next observation dropped[/yellow] (see {res.manifest_path})")


@app.command()
def setup(force: bool = typer.Option(False, help="Reinstall even what is already there.")) -> None:
    """Install the tools the real environments need into $LWM_HOME: the npm MCP servers,
    the sandbox's Python packages, the search index, the PostgreSQL template cluster.
    Debian packages: `make system-deps`."""
    from lwm.envs.assets import lwm_home
    from lwm.envs.assets import setup as run_setup

    console.print(f"installing into {lwm_home()} (set LWM_HOME to change)")
    failures = run_setup(force, report=lambda line: console.print(line, markup=False, highlight=False))
    if failures:
        raise typer.Exit(1)


@app.command("eval")
def eval_(
    data: Optional[Path] = typer.Option(None, help="AgentWorldBench data: a directory of {domain}_test.jsonl "
                                        "files or one file. Default: collect the built-in real suite of each "
                                        "--domain (terminal when none is given)."),
    out: Optional[Path] = typer.Option(None, help="Run directory (default: runs/<timestamp>). Re-run with the "
                                       "same directory to resume."),
    model: Optional[str] = typer.Option(None, help="'embedded-warmup' (default: SmolLM2-135M on llama.cpp with "
                                        "the shipped warm-up adapter), 'embedded' (the base model), a .gguf path, "
                                        "'baseline:repeat-last' or 'baseline:trivial' (reference predictors without "
                                        "a model; not to be confused with --baseline), or the model name served at "
                                        "--base-url (default there: the first one it lists)."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."),
    api_key: str = typer.Option("EMPTY", envvar="LWM_API_KEY", help="API key for --base-url."),
    adapter: Optional[Path] = typer.Option(None, help="A LoRA adapter in GGUF form (lwm train export) for the local "
                                           "llama.cpp model; without --model it goes on the base model instead of "
                                           "the warm-up adapter."),
    domain: Optional[list[str]] = typer.Option(None, help="Only these domains (repeatable)."),
    limit: Optional[int] = typer.Option(None, min=1, help="Only the first N rows (over all domains, in file order)."),
    episodes: Optional[int] = typer.Option(None, min=1, help="Built-in suite: only the first N episodes."),
    concurrency: int = typer.Option(16, min=1, help="Requests in flight (OpenAI-compatible backends)."),
    temperature: float = typer.Option(0.0, min=0.0, help="Sampling temperature (0 = greedy)."),
    top_p: float = typer.Option(1.0, min=0.0, max=1.0, help="Nucleus sampling mass."),
    max_tokens: int = typer.Option(320, min=1, help="Generated tokens per row at most (the longest real "
                                   "observation of the terminal, db, code and mcp suites: 273 tokens with tags; "
                                   "raise it for reasoning models)."),
    stop: Optional[list[str]] = typer.Option(None, help="Stop strings (repeatable; default: the end of the answer "
                                             "tag and the start of a new turn)."),
    seed: int = typer.Option(0, help="Sampling seed."),
    extra_body: Optional[str] = typer.Option(None, help="JSON passed through in each request body, e.g. "
                                             "'{\"chat_template_kwargs\": {\"enable_thinking\": false}}'."),
    max_prompt_tokens: int = typer.Option(2048, min=64, help="Tokens for the history window and the current turn "
                                          "(the system prompt is extra); oldest turns dropped first."),
    context_window: Optional[int] = typer.Option(None, min=256, help="Model context length (embedded default 8192, "
                                                 "the model's training context)."),
    timeout: float = typer.Option(600.0, min=0.001, help="Seconds per request."),
    judge_model: Optional[str] = typer.Option(None, help="Judge model name (enables judging)."),
    judge_base_url: Optional[str] = typer.Option(None, help="Judge endpoint (default: --base-url)."),
    judge_api_key: Optional[str] = typer.Option(None, envvar="LWM_JUDGE_API_KEY", help="Judge API key."),
    judge_mode: str = typer.Option("score", help="score | real | closer."),
    judge_max_tokens: int = typer.Option(1024, min=1, help="Judge tokens per call."),
    baseline: Optional[Path] = typer.Option(None, help="predictions.jsonl of another run (judge mode 'closer')."),
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """Predict every turn with a world model and score it against the real observation."""
    from lwm.eval.baselines import is_baseline
    from lwm.eval.report import print_summary
    from lwm.eval.runner import EvalConfig, evaluate, load_rows
    from lwm.models import load_model
    from lwm.models.base import SamplingParams
    from lwm.parse import DEFAULT_STOP

    if judge_mode not in ("score", "real", "closer"):
        _fail(ValueError(f"--judge-mode must be score, real or closer, not {judge_mode!r}"))
    try:
        body = json.loads(extra_body) if extra_body else {}
    except json.JSONDecodeError as e:
        _fail(ValueError(f"--extra-body is not JSON: {e}"))
    if not isinstance(body, dict):
        _fail(ValueError("--extra-body must be a JSON object, e.g. '{\"top_k\": 20}'"))
    if episodes is not None and data is not None:
        _fail(ValueError("--episodes applies to the built-in suite; with --data use --limit"))
    out = out or _run_dir()
    sampling = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, extra_body=body,
                              stop=tuple(stop) if stop is not None else DEFAULT_STOP)
    config = EvalConfig(
        out=out, data=data, domains=tuple(domain) if domain else None, limit=limit, sampling=sampling,
        max_prompt_tokens=max_prompt_tokens, judge_mode=judge_mode, baseline=baseline,
        judge_sampling=SamplingParams(temperature=0.0, max_tokens=judge_max_tokens),
    )
    try:
        # The models first: a missing file or a typo fails before minutes of collection.
        if model is None:  # your adapter goes on the base model
            model = "embedded" if adapter and not base_url else _default_model(base_url, api_key)
        wm = load_model(model, base_url=base_url, api_key=api_key, concurrency=concurrency, timeout=timeout,
                        context_window=context_window, adapter=str(adapter) if adapter else None)
        judge = None
        if judge_model:
            if is_baseline(judge_model):
                raise ValueError(f"{judge_model} is a reference predictor, not a judge")
            judge = load_model(judge_model, base_url=judge_base_url or base_url, api_key=judge_api_key or api_key,
                               concurrency=concurrency, timeout=timeout)
        if data is None:
            from lwm.data.collect import CollectConfig
            from lwm.data.collect import collect as run_collect

            for d in domain or ["terminal"]:
                console.print(f"Collecting ground truth from the real {d} suite into {out / 'data' / d} …")
                got = run_collect(CollectConfig(out=out / "data" / d, domain=d, episodes=episodes),
                                  show_progress=progress)
                if got.trajectories == 0 and got.failed:
                    raise LwmError(f"no {d} episode could be played: {next(iter(got.failed.values()))}")
            config.data = out / "data"
        rows = load_rows(config.data, config.domains, config.limit)
        summary = asyncio.run(evaluate(config, wm, judge, rows=rows, show_progress=progress))
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted[/yellow]; resume with the same command and --out {out}")
        raise typer.Exit(130) from None
    except (LwmError, KeyError, ValueError, OSError) as e:
        _fail(e)
    print_summary(summary, Console())
    console.print(f"wrote {out}/predictions.jsonl, summary.json, report.md")
    if summary["failed"] == summary["rows"]:
        console.print("[red]every row failed[/red]; see 'errors' above and re-run the same command to retry them")
        raise typer.Exit(1)


@app.command()
def rollout(
    domain: str = typer.Option("terminal", help="Domain; tasks come from its bundled suite."),
    backend: str = typer.Option("sim", help="real | sim | replay | hybrid."),
    episodes: int = typer.Option(8, min=1, help="Episodes to play."),
    group_size: int = typer.Option(1, min=1, help="Episodes per task in a row (group sampling)."),
    policy: str = typer.Option("scripted", help="'scripted' (the suite's actions), 'embedded', or the agent model "
                               "served at --policy-base-url."),
    policy_base_url: Optional[str] = typer.Option(None, help="The agent's OpenAI-compatible endpoint."),
    model: Optional[str] = typer.Option(None, help="World model (sim, hybrid, replay of model output): "
                                        "'embedded-warmup' (default), 'embedded' (base), or the name served at "
                                        "--base-url (default there: the first one it lists); 'real' replays real "
                                        "observations."),
    base_url: Optional[str] = typer.Option(None, help="The world model's OpenAI-compatible endpoint."),
    api_key: str = typer.Option("EMPTY", envvar="LWM_API_KEY", help="API key for the endpoints."),
    cache: Optional[Path] = typer.Option(None, help="Replay cache file (replay, hybrid; real records into it)."),
    route: str = typer.Option("real-first", help="Hybrid routing rule: real-first | sim-only."),
    control: Optional[list[str]] = typer.Option(None, help="Simulation control (repeatable): empty, slow, "
                                                "paginate[:detail], error:<what>, world:<facts>."),
    max_turns: int = typer.Option(20, min=1, help="Turns per episode at most."),
    verified_only: bool = typer.Option(False, help="Only tasks with a real verifier (to measure reward agreement "
                                       "with lwm wm2real)."),
    concurrency: int = typer.Option(4, min=1, help="Episodes played at once."),
    ray: bool = typer.Option(False, "--ray", help="Run episodes as Ray tasks (local instance, or the cluster "
                             "RAY_ADDRESS points to)."),
    out: Optional[Path] = typer.Option(None, help="Output directory (default: runs/<timestamp>/rollout). Re-run "
                                       "with the same directory to resume."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Play episodes with a policy against a real, simulated, replayed or hybrid environment."""
    from lwm.eval.baselines import is_baseline
    from lwm.sim.backends import BACKENDS
    from lwm.sim.controls import Control
    from lwm.sim.rollout import RolloutConfig
    from lwm.sim.rollout import rollout as run_rollout

    if backend not in BACKENDS:
        _fail(ValueError(f"--backend must be one of {', '.join(BACKENDS)}, not {backend!r}"))
    if backend in ("replay", "hybrid") and cache is None:
        _fail(ValueError(f"--backend {backend} needs --cache (a file the real or hybrid backend recorded into)"))
    try:
        for c in control or []:
            Control.parse(c)
    except ValueError as e:
        _fail(e)
    if is_baseline(model) or is_baseline(policy):
        _fail(ValueError("baseline:… are reference predictors for lwm eval; they cannot act or simulate"))
    out = out or _run_dir() / "rollout"
    try:
        model = model or _default_model(base_url, api_key)
    except LwmError as e:
        _fail(e)
    config = RolloutConfig(out=out, domain=domain, backend=backend, episodes=episodes, group_size=group_size,
                           policy=policy, policy_base_url=policy_base_url, world_model=model, base_url=base_url,
                           api_key=api_key, cache=cache, route=route, controls=tuple(control or ()),
                           max_turns=max_turns, verified_only=verified_only, concurrency=concurrency, ray=ray)
    try:
        res = run_rollout(config, show_progress=progress)
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted[/yellow]; resume with the same command and --out {out}")
        raise typer.Exit(130) from None
    except (LwmError, KeyError, ValueError, OSError) as e:
        _fail(e)
    reward = "n/a" if res.mean_reward is None else f"{res.mean_reward:.3f}"
    console.print(f"played {res.played} episodes in {res.seconds:.1f}s; {res.episodes} in {res.path} "
                  f"(mean reward {reward})")
    if res.failed:
        console.print(f"[yellow]{len(res.failed)} episodes failed[/yellow] (see {out}/manifest.json)")
        if res.episodes == 0:
            raise typer.Exit(1)


@app.command()
def wm2real(
    trajectories: Path = typer.Argument(..., help="trajectories.jsonl of simulated episodes (lwm rollout)."),
    out: Optional[Path] = typer.Option(None, help="Report directory (default: runs/<timestamp>/wm2real)."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Replay simulated episodes in the real environment: divergence per step and by depth,
    reward agreement, false successes."""
    from lwm.eval.wm2real import to_markdown
    from lwm.eval.wm2real import wm2real as run_wm2real

    out = out or _run_dir() / "wm2real"
    try:
        res = run_wm2real(trajectories, out, show_progress=progress)
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted[/yellow]; resume with the same command and --out {out}")
        raise typer.Exit(130) from None
    except (LwmError, KeyError, OSError) as e:
        _fail(e)
    Console().print(to_markdown(res.summary), markup=False, highlight=False)
    if res.summary["failed"]:
        console.print(f"[yellow]{len(res.summary['failed'])} trajectories could not be replayed[/yellow] "
                      f"(see {out}/summary.json)")
        if res.summary["trajectories"] == 0:
            raise typer.Exit(1)


@app.command()
def report(
    runs: list[Path] = typer.Argument(..., help="Run directories of lwm eval, rollout, wm2real or train sft; runs "
                                      "of one kind are compared side by side."),
    out: Path = typer.Option(Path("report.html"), help="The HTML file to write (self-contained, opens offline)."),
    title: Optional[str] = typer.Option(None, help="Page title (default: the runs' names)."),
) -> None:
    """Write one self-contained HTML report of one or several runs."""
    from lwm.eval.html_report import write_html_report

    try:
        path = write_html_report(runs, out, title=title)
    except (LwmError, OSError) as e:
        _fail(e)
    console.print(f"wrote {path}", markup=False, highlight=False)


from lwm.data.commands import data_app  # noqa: E402  (sub-apps after the top-level commands)
from lwm.train.commands import train_app  # noqa: E402

app.add_typer(data_app, name="data")
app.add_typer(train_app, name="train")

serve_app = typer.Typer(
    help="Serve a world model or an environment over HTTP.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(serve_app, name="serve")


@serve_app.command("env")
def serve_env(
    domain: str = typer.Option("terminal", help="Domain of the environment."),
    backend: str = typer.Option("sim", help="real | sim | replay | hybrid."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8000, help="Port."),
    model: Optional[str] = typer.Option(None, help="World model (sim, hybrid): 'embedded-warmup' (default), "
                                        "'embedded' (base) or the name served at --base-url (default there: the "
                                        "first one it lists)."),
    base_url: Optional[str] = typer.Option(None, help="The world model's OpenAI-compatible endpoint."),
    api_key: str = typer.Option("EMPTY", envvar="LWM_API_KEY", help="API key for --base-url."),
    cache: Optional[Path] = typer.Option(None, help="Replay cache file (replay, hybrid; real records into it)."),
    max_sessions: int = typer.Option(64, min=1, help="Concurrent sessions at most."),
    max_turns: int = typer.Option(50, min=1, help="Turns per simulated episode at most."),
    suite: bool = typer.Option(True, help="Offer the domain's bundled suite as the tasks reset() picks from."),
) -> None:
    """Serve an environment (any domain, any backend) as an OpenEnv server: sessions over
    the WebSocket /ws, each with its own isolated environment."""
    from lwm.eval.baselines import is_baseline
    from lwm.models import judge_for, load_model
    from lwm.sim.backends import BACKENDS
    from lwm.sim.openenv_server import serve_env as run_server
    from lwm.suites import load_suite

    if backend not in BACKENDS:
        _fail(ValueError(f"--backend must be one of {', '.join(BACKENDS)}, not {backend!r}"))
    if backend in ("replay", "hybrid") and cache is None:
        _fail(ValueError(f"--backend {backend} needs --cache"))
    try:
        tasks = [e.task for e in load_suite(domain)] if suite else []
        model = model or _default_model(base_url, api_key)
        if is_baseline(model):
            raise ValueError(f"{model} is a reference predictor for lwm eval; it cannot simulate")
        wm = load_model(model, base_url=base_url, api_key=api_key) if backend in ("sim", "hybrid") else None
        extra: dict = {"max_turns": max_turns} if backend == "sim" else {}
        if backend == "sim" and (judge := judge_for(model)):
            extra["reward_model"] = load_model(judge)
        run_server(domain, backend, host, port, model=wm, cache=str(cache) if cache else None,
                   max_sessions=max_sessions, tasks=tasks, **extra)
    except (LwmError, KeyError, ValueError, OSError) as e:
        _fail(e)


@serve_app.command("model")
@app.command("serve-model")
def serve_model(
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8000, help="Port."),
    model_path: Optional[Path] = typer.Option(None, help="A GGUF file (default: the embedded SmolLM2)."),
    name: Optional[str] = typer.Option(None, help="Model name clients use (default: the file's model name, "
                                       "+<adapter file stem> with --adapter)."),
    n_ctx: int = typer.Option(8192, help="Context window in tokens (the embedded model was trained on 8192)."),
    threads: int = typer.Option(os.cpu_count() or 1, help="CPU threads."),
    prompt_cache_mb: int = typer.Option(1024, min=0, help="Memory for cached prompt states (0: no cache)."),
    adapter: Optional[str] = typer.Option(None, help="A LoRA adapter in GGUF form (lwm train export), or 'warmup' "
                                          "for the shipped warm-up world model (default: the base model)."),
) -> None:
    """Serve the embedded model as an OpenAI-compatible HTTP endpoint (llama.cpp server)."""
    from lwm.models.server import serve

    try:
        serve(host=host, port=port, model_path=model_path, name=name, n_ctx=n_ctx, threads=threads,
              prompt_cache_bytes=prompt_cache_mb << 20, adapter=adapter)
    except LwmError as e:
        _fail(e)


def main() -> None:  # pragma: no cover - console entry
    sys.exit(app())


if __name__ == "__main__":  # pragma: no cover
    main()
