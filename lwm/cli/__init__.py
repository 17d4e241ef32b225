"""The ``lwm`` command. Each command parses its flags into the settings of one library
function, calls it through :func:`lwm.cli.common.call` (user errors: one line, exit 2;
Ctrl-C: exit 130) and prints what it did. Flags take their help and defaults from the
settings they fill (:func:`lwm.cli.common.option`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer
from rich.console import Console

from lwm.cli.common import call, fail, note, option
from lwm.data.collect import CollectConfig
from lwm.data.transitions import import_transitions
from lwm.eval.agent import AgentEvalConfig
from lwm.eval.rewards import RewardEvalConfig
from lwm.eval.runner import MAX_NEIGHBOURS, EvalConfig
from lwm.models import ModelSpec
from lwm.models.base import SamplingParams
from lwm.models.server import create_app, serve, served_files
from lwm.paths import run_dir
from lwm.sim.backends import BACKENDS, backend_spec
from lwm.sim.mcp_server import McpServeConfig
from lwm.sim.rollout import RolloutConfig
from lwm.train.curriculum import write_curriculum

app = typer.Typer(
    help="Language World Models: collect real transitions, predict them with a world model, score fidelity, "
         "and use the world model as an environment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: rich's tables truncate option help at 80 columns
)

PROGRESS = typer.Option(True, help="Show progress bars on stderr.")


def _html_report(run: Path) -> None:
    """Write ``run/report.html`` beside the run's other reports (a failure is a warning:
    the run itself is done)."""
    from lwm.errors import LwmError
    from lwm.eval.html_report import write_html_report

    try:
        note(f"wrote {write_html_report([run], Path(run) / 'report.html')}")
    except (LwmError, OSError) as e:
        note(f"warning: no HTML report: {e}", "yellow")


def _default_model(model: str | None, base_url: str | None, api_key: str, adapter: str | None = None) -> str:
    from lwm.models import default_model

    return model or call(default_model, base_url, api_key, adapter)


@app.command()
def collect(
    domain: str = option(CollectConfig, "domain"),
    out: Path | None = option(CollectConfig, "out", default=None, help_suffix="Default: runs/<timestamp>/data."),
    episodes: int | None = option(CollectConfig, "episodes", min=1),
    extended: bool = option(CollectConfig, "extended"),
    runs: int = option(CollectConfig, "runs", min=1),
    workers: int = option(CollectConfig, "workers", min=1),
    explore: int | None = option(CollectConfig, "explore", min=1, max=100_000, metavar="N"),
    seed: int | None = option(CollectConfig, "seed"),
    progress: bool = PROGRESS,
) -> None:
    """Play a domain's scripted episodes in its real sandboxed environment and write transitions.

    With --explore N, play N seeded exploration episodes instead (terminal: random files and
    everyday commands on them): real transitions at scale for training.
    """
    from lwm.data.collect import collect as run_collect

    out = out or run_dir("data")
    config = CollectConfig(out=out, domain=domain, episodes=episodes, extended=extended, runs=runs, workers=workers,
                           explore=explore, seed=seed)
    res = call(run_collect, config, show_progress=progress, resume=out)
    if res.played == 0 and not res.failed:
        note(f"nothing left to play: {res.trajectories} trajectories already in {out}")
    else:
        note(f"played {res.played} run{'s' if res.played != 1 else ''} in {res.seconds:.1f}s; {res.trajectories} "
             f"trajectories, {res.turns} real steps in all → {out}/trajectories.jsonl (lwm data build reads it), "
             f"{res.rows_path.name} (lwm eval --data)")
    if res.failed:
        note(f"{len(res.failed)} runs failed, e.g. {next(iter(res.failed.values()))} (all in {out}/manifest.json)",
             "yellow")
        if res.trajectories == 0:
            raise typer.Exit(1)


@app.command("import")
def import_(
    src: Path = typer.Argument(..., help="A log file or a directory of episodes (searched recursively)."),
    format: str = typer.Option(..., "--format", help="os (OSWorld-style desktop logs with accessibility trees), "
                               "android (AndroidWorld-style JSON) or transitions (your own traces of any domain: "
                               "episodes or (history, action, observation) triples as JSON or JSON Lines; "
                               "docs/data.md)."),
    domain: str | None = typer.Option(None, "--domain", help="With --format transitions (required): the domain "
                                      "the traces come from, e.g. terminal or db."),
    system_prompt: str | None = option(import_transitions, "system_prompt", "--system-prompt", metavar="TEXT|@FILE",
                                       help_suffix="With --format transitions only; @FILE reads it from a file."),
    out: Path | None = typer.Option(None, help="Output directory (default: runs/<timestamp>/data)."),
    strict: bool = typer.Option(False, help="Stop at the first malformed episode or record instead of skipping and "
                                "counting it."),
) -> None:
    """Import agent logs and traces as trajectories and AgentWorldBench rows: os and android
    logs (domains without a real environment here), or your own traces of any domain
    (--format transitions --domain D). Exits 1 when nothing could be imported."""
    from lwm.data.importers import FORMATS, NO_REAL_ENVIRONMENT, import_logs
    from lwm.data.transitions import FORMAT as TRANSITIONS

    if format not in FORMATS + (TRANSITIONS,):
        fail(ValueError(f"--format must be one of {', '.join(FORMATS + (TRANSITIONS,))}, not {format!r}"))
    if format == TRANSITIONS:
        if domain is None:
            from lwm import domains

            fail(ValueError(f"--format {TRANSITIONS} needs --domain, the domain the traces come from "
                            f"(one of {', '.join(domains.names())})"))
        prompt = _text_or_file(system_prompt, "--system-prompt")
    elif domain is not None or system_prompt is not None:
        fail(ValueError(f"--domain and --system-prompt go with --format {TRANSITIONS}; --format {format} has its "
                        "own domain and system prompt"))
    out = out or run_dir("data")
    if (domain or format) in ("os", "android"):
        note(f"note: {NO_REAL_ENVIRONMENT}", "yellow")
    if format == TRANSITIONS:
        res = call(import_transitions, src, out, domain=domain, system_prompt=prompt, strict=strict)
    else:
        res = call(import_logs, format, src, out, strict=strict)
    what = "records" if format == TRANSITIONS else "episodes"
    if res.trajectories == 0:
        first = res.skipped[0] if res.skipped else None
        why = (f"{len(res.skipped)} {what} skipped, first: {first['file']}:{first['line']}: {first['reason']}"
               if first else f"no {what} found in {src}")
        note(f"nothing imported: {why} (see {res.manifest_path})", "red")
        raise typer.Exit(1)
    note(f"imported {res.trajectories} trajectories, {res.turns} turns, {res.rows} rows → {res.rows_path}")
    if format == TRANSITIONS and (empty := json.loads(res.manifest_path.read_text()).get("empty_system_prompts")):
        note(f"{empty} trajectories have an empty system prompt ({domain}'s default needs settings): give "
             "--system-prompt TEXT|@FILE", "yellow")
    if res.skipped or res.dropped_turns:
        dropped = (f", {len(res.dropped_turns)} final turns without a next observation dropped"
                   if format != TRANSITIONS else "")
        note(f"{len(res.skipped)} malformed {what} skipped{dropped} (see {res.manifest_path})", "yellow")


def _text_or_file(value: str | None, flag: str) -> str | None:
    """``value``, or the text of the file it names after ``@`` (trailing newlines dropped);
    exits 2 when that file cannot be read."""
    if value is None or not value.startswith("@"):
        return value
    from lwm.data.importers import _read_file  # a regular file of bounded size (not a pipe, not /dev/zero)

    try:
        return _read_file(Path(value[1:])).decode("utf-8").rstrip("\n")
    except (OSError, UnicodeDecodeError) as e:
        fail(ValueError(f"{flag} {value}: cannot read the file ({getattr(e, 'strerror', None) or e})"))


@app.command()
def setup(force: bool = typer.Option(False, help="Reinstall even what is already there.")) -> None:
    """Install the tools the real environments need into $LWM_HOME: the npm MCP servers,
    the sandbox's Python packages, the search index, the PostgreSQL template cluster.
    Debian packages: `make system-deps`."""
    from lwm import domains
    from lwm.paths import lwm_home

    note(f"installing into {lwm_home()} (set LWM_HOME to change)")
    if call(domains.setup, force, report=note):
        raise typer.Exit(1)


@app.command("eval")
def eval_(
    data: Path | None = option(EvalConfig, "data"),
    out: Path | None = option(EvalConfig, "out", default=None, help_suffix="Default: runs/<timestamp>."),
    model: str | None = option(ModelSpec, "name", "--model", default=None, help_suffix=(
        "Also 'baseline:repeat-last' or 'baseline:trivial' (reference predictors without a model; not --baseline). "
        "Default: the first model --base-url serves, else embedded-warmup (embedded with --adapter).")),
    base_url: str | None = option(ModelSpec, "base_url"),
    api_key: str = option(ModelSpec, "api_key", envvar="LWM_API_KEY"),
    adapter: Path | None = option(ModelSpec, "adapter", default=None),
    domain: list[str] | None = option(EvalConfig, "domains", "--domain", default=None, metavar="<str>",
                                         help_suffix="Repeat the flag for several."),
    limit: int | None = option(EvalConfig, "limit", min=1),
    episodes: int | None = option(EvalConfig, "episodes", min=1),
    heldout: bool = option(EvalConfig, "heldout", "--heldout/--no-heldout"),
    concurrency: int = option(ModelSpec, "concurrency", min=1),
    temperature: float = option(SamplingParams, "temperature", min=0.0),
    top_p: float = option(SamplingParams, "top_p", min=0.0, max=1.0),
    max_tokens: int = option(SamplingParams, "max_tokens", default=320, min=1, help_suffix=(
        "Default 320: the longest real observation of the terminal, db, code and mcp suites is 273 tokens with "
        "tags; raise it for reasoning models.")),
    stop: list[str] | None = option(SamplingParams, "stop", default=None, metavar="<str>", help_suffix=(
        "Repeatable; default: the end of the answer tag and the start of a new turn.")),
    seed: int = option(SamplingParams, "seed", default=0),
    extra_body: str | None = option(SamplingParams, "extra_body", default=None,
                                       help_suffix="As JSON, e.g. '{\"top_k\": 20}'."),
    max_prompt_tokens: int = option(EvalConfig, "max_prompt_tokens", min=64),
    context_window: int | None = option(ModelSpec, "context_window", min=256),
    timeout: float = option(ModelSpec, "timeout", min=0.001),
    judge_model: str | None = option(ModelSpec, "name", "--judge-model", default=None,
                                        help_suffix="(The judge's; giving one enables judging.)"),
    judge_base_url: str | None = option(ModelSpec, "base_url", "--judge-base-url",
                                           help_suffix="(The judge's; default: --base-url.)"),
    judge_api_key: str | None = option(ModelSpec, "api_key", "--judge-api-key", default=None,
                                          envvar="LWM_JUDGE_API_KEY", help_suffix="(The judge's.)"),
    judge_mode: str = option(EvalConfig, "judge_mode"),
    judge_max_tokens: int = option(SamplingParams, "max_tokens", "--judge-max-tokens", default=1024, min=1,
                                   help_suffix="(The judge's. Default 1024, not 256: its verdict follows "
                                               "its reasoning.)"),
    baseline: Path | None = option(EvalConfig, "baseline"),
    predict: str | None = option(EvalConfig, "prediction", "--predict", metavar="full|change"),
    compact_tools: bool | None = option(EvalConfig, "compact_tools", "--compact-tools/--no-compact-tools"),
    score_candidates: bool | None = option(EvalConfig, "score_candidates",
                                           "--score-candidates/--no-score-candidates"),
    index: Path | None = option(EvalConfig, "index", "--index", metavar="FILE"),
    neighbours: int | None = option(EvalConfig, "neighbours", "--neighbours", min=1, max=MAX_NEIGHBOURS),
    certain: bool = option(EvalConfig, "certain", "--certain/--no-certain"),
    progress: bool = PROGRESS,
) -> None:
    """Predict every turn with a world model and score it against the real observation."""
    from lwm.eval.report import print_summary
    from lwm.eval.runner import run_eval
    from lwm.parse import DEFAULT_STOP

    if judge_mode not in ("score", "real", "closer"):
        fail(ValueError(f"--judge-mode must be score, real or closer, not {judge_mode!r}"))
    body = _extra_body(extra_body)
    out = out or run_dir()
    sampling = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, extra_body=body,
                              stop=tuple(stop) if stop is not None else DEFAULT_STOP)
    config = call(EvalConfig, out=out, data=data, domains=tuple(domain) if domain else None, limit=limit,
                  episodes=episodes, heldout=heldout, sampling=sampling, max_prompt_tokens=max_prompt_tokens,
                  judge_mode=judge_mode, baseline=baseline,
                  judge_sampling=SamplingParams(temperature=0.0, max_tokens=judge_max_tokens),
                  prediction=predict, compact_tools=compact_tools, score_candidates=score_candidates,
                  index=index, neighbours=neighbours, certain=certain)
    world = ModelSpec(_default_model(model, base_url, api_key, str(adapter) if adapter else None), base_url, api_key,
                      concurrency, timeout, context_window, str(adapter) if adapter else None)
    judge = ModelSpec(judge_model, judge_base_url or base_url, judge_api_key or api_key, concurrency,
                      timeout) if judge_model else None
    summary = call(run_eval, config, world, judge, show_progress=progress, resume=out)
    # piped (a log, CI), rich would squeeze the tables into 80 columns and cut their heads ("triv…")
    print_summary(summary, Console() if sys.stdout.isatty() else Console(width=200))
    note(f"wrote {out}/predictions.jsonl, summary.json, report.md")
    _html_report(out)
    if summary["failed"] == summary["rows"]:
        note("every row failed; see 'errors' above and re-run the same command to retry them", "red")
        raise typer.Exit(1)


def _extra_body(text: str | None) -> dict:
    """``--extra-body``'s JSON object (``{}`` when not given); exits 2 on anything else."""
    try:
        body = json.loads(text) if text is not None else {}
    except json.JSONDecodeError as e:
        fail(ValueError(f"--extra-body is not JSON: {e}"))
    if not isinstance(body, dict):
        fail(ValueError("--extra-body must be a JSON object, e.g. '{\"top_k\": 20}'"))
    return body


@app.command()
def rollout(
    domain: str = option(RolloutConfig, "domain"),
    backend: str = option(RolloutConfig, "backend"),
    episodes: int = option(RolloutConfig, "episodes", min=1),
    group_size: int = option(RolloutConfig, "group_size", min=1),
    policy: str = option(RolloutConfig, "policy"),
    policy_base_url: str | None = option(RolloutConfig, "policy_base_url"),
    model: str | None = option(RolloutConfig, "world_model", "--model", default=None, help_suffix=(
        "Default: the first model --base-url serves, else embedded-warmup.")),
    base_url: str | None = option(RolloutConfig, "base_url"),
    api_key: str = option(RolloutConfig, "api_key", envvar="LWM_API_KEY"),
    cache: Path | None = option(RolloutConfig, "cache"),
    route: str = option(RolloutConfig, "route"),
    control: list[str] | None = option(RolloutConfig, "controls", "--control", default=None, metavar="<str>",
                                          help_suffix="Repeat the flag for several."),
    max_turns: int = option(RolloutConfig, "max_turns", min=1),
    reward: str = option(RolloutConfig, "reward"),
    verified_only: bool = option(RolloutConfig, "verified_only"),
    concurrency: int = option(RolloutConfig, "concurrency", min=1),
    ray: bool = option(RolloutConfig, "ray", "--ray"),
    predict: str | None = option(RolloutConfig, "prediction", "--predict", metavar="full|change"),
    compact_tools: bool | None = option(RolloutConfig, "compact_tools", "--compact-tools/--no-compact-tools"),
    real_start: bool = option(RolloutConfig, "real_start", "--real-start/--generated-start"),
    extra_body: str | None = option(RolloutConfig, "extra_body", default=None, help_suffix="As JSON."),
    out: Path | None = option(RolloutConfig, "out", default=None, help_suffix="Default: runs/<timestamp>/rollout."),
    progress: bool = PROGRESS,
) -> None:
    """Play episodes with a policy against a real, simulated, replayed or hybrid environment."""
    from lwm.sim.rollout import rollout as run_rollout

    out = out or run_dir("rollout")
    spec = call(backend_spec, backend)
    if spec.cache_only and model is None:
        model = "real"  # a cache holds real observations unless a model's are asked for
    world = _default_model(model, base_url, api_key) if spec.simulates or spec.replays else RolloutConfig.world_model
    config = RolloutConfig(out=out, domain=domain, backend=backend, episodes=episodes, group_size=group_size,
                           policy=policy, policy_base_url=policy_base_url, world_model=world, base_url=base_url,
                           api_key=api_key, cache=cache, route=route, controls=tuple(control or ()),
                           max_turns=max_turns, reward=reward, verified_only=verified_only,
                           concurrency=concurrency, ray=ray, prediction=predict, compact_tools=compact_tools,
                           real_start=real_start, extra_body=_extra_body(extra_body))
    res = call(run_rollout, config, show_progress=progress, resume=out)
    reward = "n/a" if res.mean_reward is None else f"{res.mean_reward:.3f}"
    note(f"played {res.played} episodes in {res.seconds:.1f}s; {res.episodes} in {res.path} (mean reward {reward})")
    if res.episodes:
        _html_report(out)
    if res.failed:
        note(f"{len(res.failed)} episodes failed, e.g. {next(iter(res.failed.values()))} (see {out}/manifest.json)",
             "yellow")
        if res.episodes == 0:
            raise typer.Exit(1)


@app.command()
def wm2real(
    trajectories: Path = typer.Argument(
        ..., help="simulated episodes: lwm rollout's trajectories.jsonl, lwm train rft's attempts.jsonl."),
    out: Path | None = typer.Option(None, help="Report directory (default: runs/<timestamp>/wm2real). Re-run "
                                       "with the same directory to resume."),
    concurrency: int = typer.Option(1, min=1, help="Trajectories replayed at once, each in its own sandbox."),
    progress: bool = PROGRESS,
) -> None:
    """Replay simulated episodes in the real environment: divergence per step and by depth,
    reward agreement, false successes; labelled.jsonl holds the episodes with their real
    verdict (metadata.real_reward) for lwm data verdicts --from and lwm agent rewards."""
    from lwm.eval.wm2real import to_markdown
    from lwm.eval.wm2real import wm2real as run_wm2real

    out = out or run_dir("wm2real")
    res = call(run_wm2real, trajectories, out, concurrency=concurrency, show_progress=progress, resume=out)
    Console(soft_wrap=True).print(to_markdown(res.summary), markup=False, highlight=False)
    if res.summary["trajectories"]:
        _html_report(out)
    if res.summary["labelled"]:
        n = res.summary["labelled"]
        note(f"{n} episode{'' if n == 1 else 's'} with their real verdict: {out / 'labelled.jsonl'}")
    if res.summary["failed"]:
        note(f"{len(res.summary['failed'])} trajectories could not be replayed (see {out}/summary.json)", "yellow")
        if res.summary["trajectories"] == 0:
            raise typer.Exit(1)


@app.command()
def report(
    runs: list[Path] = typer.Argument(..., help="Run directories of lwm eval, rollout, wm2real or train sft; runs "
                                      "of one kind are compared side by side."),
    out: Path = typer.Option(Path("report.html"), help="The HTML file to write (self-contained, opens offline)."),
    title: str | None = typer.Option(None, help="Page title (default: the runs' names)."),
) -> None:
    """Write one self-contained HTML report of one or several runs."""
    from lwm.eval.html_report import write_html_report

    note(f"wrote {call(write_html_report, runs, out, title=title)}")


@app.command("check-env")
def check_env(
    domain: str = typer.Argument(..., help="A domain's name (built in, or an installed package's lwm.domains entry "
                                 "point), or module:attribute of a Domain object (e.g. my_package.kv:DOMAIN)."),
) -> None:
    """Check a domain's real environment on its own suite, as Gymnasium's check_env does: reset
    and step types, malformed actions answered alike by both backends, determinism of two
    identical episodes, step before reset and after close, close twice. Exit 1 if a check fails."""
    from rich.markup import escape
    from rich.table import Table

    from lwm import domains
    from lwm.domains.check import check_env as run_checks

    spec = call(domains.load, domain)
    checks = call(run_checks, spec)
    table = Table(title=f"lwm check-env {spec.name}")
    for column in ("check", "status", "detail"):
        table.add_column(column, overflow="fold")
    colours = {"pass": "green", "fail": "red", "warn": "yellow", "skip": "dim"}
    for c in checks:
        table.add_row(escape(c.name), f"[{colours[c.status]}]{c.status}[/]", escape(c.detail))
    Console(soft_wrap=True).print(table)
    if failed := [c.name for c in checks if c.status == "fail"]:
        note(f"{len(failed)} of {len(checks)} checks failed: {', '.join(failed)}", "red")
        raise typer.Exit(1)


agent_app = typer.Typer(help="Agents (policies) on the domains' task families: evaluate them in the real "
                        "environment or in the simulator; measure reward models against the real verifier.",
                        no_args_is_help=True, rich_markup_mode=None)
app.add_typer(agent_app, name="agent")


@agent_app.command("eval")
def agent_eval(
    domain: list[str] = option(AgentEvalConfig, "domains", "--domain", default=[],
                               help_suffix="Repeat the flag for several."),
    split: str = option(AgentEvalConfig, "split"),
    tasks: int = option(AgentEvalConfig, "tasks", min=1),
    seed: int = option(AgentEvalConfig, "seed"),
    tasks_file: Path | None = option(AgentEvalConfig, "tasks_file", default=None),
    policy: str = option(AgentEvalConfig, "policy", help_suffix="Or a run directory of lwm train rl or lwm train rft."),
    policy_base_url: str | None = option(AgentEvalConfig, "policy_base_url"),
    policy_adapter: Path | None = option(AgentEvalConfig, "policy_adapter", default=None),
    temperature: float = option(AgentEvalConfig, "temperature", min=0.0),
    max_turns: int = option(AgentEvalConfig, "max_turns", min=1),
    backend: str = option(AgentEvalConfig, "backend"),
    model: str | None = option(AgentEvalConfig, "world_model", "--model", default=None, help_suffix=(
        "Default: the first model --base-url serves, else embedded-warmup.")),
    base_url: str | None = option(AgentEvalConfig, "base_url"),
    api_key: str = option(AgentEvalConfig, "api_key", envvar="LWM_API_KEY"),
    reward: str = option(AgentEvalConfig, "reward"),
    show_task: bool = option(AgentEvalConfig, "show_task"),
    replay: bool = option(AgentEvalConfig, "replay"),
    concurrency: int = option(AgentEvalConfig, "concurrency", min=1),
    timeout: float = option(AgentEvalConfig, "timeout", min=0.001),
    predict: str | None = option(AgentEvalConfig, "prediction", "--predict", metavar="full|change"),
    compact_tools: bool | None = option(AgentEvalConfig, "compact_tools", "--compact-tools/--no-compact-tools"),
    out: Path | None = option(AgentEvalConfig, "out", default=None, help_suffix="Default: runs/<timestamp>/agent."),
    progress: bool = PROGRESS,
) -> None:
    """Play tasks of the task families (held-out by default) with a policy; success rate with a 95%
    interval, in the real environment or in the simulator (then replayed in the real one)."""
    from lwm.eval.agent import agent_eval as run_agent_eval
    from lwm.eval.agent import to_markdown

    out = out or run_dir("agent")
    world = _default_model(model, base_url, api_key) if call(backend_spec, backend).simulates else \
        AgentEvalConfig.world_model
    if not policy_base_url and (Path(policy) / "lwm_train.json").is_file():  # a run of `lwm train rl`
        from lwm.train.rl import policy_for

        policy, trained = call(policy_for, Path(policy))
        policy_adapter = policy_adapter or Path(trained)
    config = AgentEvalConfig(out=out, domains=tuple(domain), split=split, tasks=tasks, seed=seed,
                             tasks_file=tasks_file, policy=policy,
                             policy_base_url=policy_base_url,
                             policy_adapter=str(policy_adapter) if policy_adapter else None,
                             temperature=temperature, max_turns=max_turns, backend=backend, world_model=world,
                             base_url=base_url, api_key=api_key, reward=reward, show_task=show_task, replay=replay,
                             concurrency=concurrency, timeout=timeout, prediction=predict,
                             compact_tools=compact_tools)
    res = call(run_agent_eval, config, show_progress=progress, resume=out)
    Console(soft_wrap=True).print(to_markdown(res.summary), markup=False, highlight=False)
    if res.failed:
        note(f"{len(res.failed)} episodes failed, e.g. {next(iter(res.failed.values()))} (see {out}/summary.json)",
             "yellow")
        if not res.summary["episodes"]:
            raise typer.Exit(1)
    _html_report(out)


@agent_app.command("compare")
def agent_compare(
    runs: list[Path] = typer.Argument(..., help="lwm agent eval run directories of the same tasks; the first is the "
                                      "baseline the others are compared with, task by task."),
    out: Path | None = typer.Option(None, help="Also write the comparison as JSON to this file."),
    report: Path | None = typer.Option(None, help="Also write an HTML report of the runs side by side (as lwm "
                                       "report) to this file."),
) -> None:
    """Policies side by side on the same tasks: success with 95% intervals over all, per domain and per family
    (held-out families marked), and against the baseline the tasks only each solved, with the exact sign test."""
    from lwm.eval.compare import compare_agent_runs, outside_runs, safe_json_output
    from lwm.eval.html_report import check_report_path, write_html_report
    from lwm.jsonl import write_atomic

    if out is not None:
        call(safe_json_output, out, "--out", runs)
    if report is not None:
        call(outside_runs, report, "--report", runs)
        call(check_report_path, report, "--report")
    if out is not None and report is not None and out.resolve() == report.resolve():
        fail(ValueError("--out and --report name the same file"))
    comparison = call(compare_agent_runs, runs)
    Console(soft_wrap=True).print(comparison.to_markdown(), markup=False, highlight=False)
    if out:
        call(write_atomic, out, json.dumps(comparison.to_dict(), indent=2) + "\n")
        note(f"wrote {out}")
    if report:
        note(f"wrote {call(write_html_report, runs, report, title='lwm agent compare')}")


@agent_app.command("tasks")
def agent_tasks(
    out: Path = typer.Argument(..., help="The task file to write (JSONL; read by lwm agent eval --tasks-file)."),
    domain: list[str] = typer.Option(["terminal"], "--domain", help="A domain with task families. Repeat the flag "
                                     "for several. Default: terminal."),
    split: str = option(AgentEvalConfig, "split"),
    tasks: int = option(AgentEvalConfig, "tasks", min=1),
    seed: int = option(AgentEvalConfig, "seed"),
    force: bool = typer.Option(False, "--force", help="Write over an existing task file that holds other tasks "
                               "(its edits are lost)."),
) -> None:
    """Write a task set (tasks, their verifiers and reference solutions) as a task file, to read,
    edit or extend and play with lwm agent eval --tasks-file."""
    from lwm.domains.tasks import task_set, write_task_file

    items = [(d, t, s) for d in dict.fromkeys(domain) for t, s in call(task_set, d, split, tasks, seed)]
    note(f"wrote {call(write_task_file, out, items, overwrite=force)} tasks to {out}")


@agent_app.command("rewards")
def agent_rewards(
    episodes: list[Path] = typer.Argument(..., help="Labelled episode files: episodes.jsonl of lwm data verdicts or "
                                          "of lwm agent eval (real, or simulated and replayed for real)."),
    out: Path | None = option(RewardEvalConfig, "out", default=None, help_suffix="Default: runs/<timestamp>/rewards."),
    split: str = option(RewardEvalConfig, "split"),
    reward: list[str] = option(RewardEvalConfig, "rewards", "--reward", default=["verdict"],
                               help_suffix="Repeat the flag for several."),
    reward_model: str | None = option(RewardEvalConfig, "reward_model"),
    adapter: Path | None = option(RewardEvalConfig, "adapter", default=None),
    model: str = option(RewardEvalConfig, "world_model", "--model"),
    base_url: str | None = option(RewardEvalConfig, "base_url"),
    api_key: str = option(RewardEvalConfig, "api_key", envvar="LWM_API_KEY"),
    max_episodes: int | None = option(RewardEvalConfig, "max_episodes", min=1),
    progress: bool = PROGRESS,
) -> None:
    """How far reward models agree with the real verifier on labelled episodes: agreement, balanced accuracy,
    false and missed successes, per domain and kind of episode; resumable."""
    from lwm.eval.rewards import reward_eval, to_markdown

    out = out or run_dir("rewards")
    config = call(RewardEvalConfig, episodes=tuple(episodes), out=out, split=split, rewards=tuple(reward),
                  reward_model=reward_model, adapter=str(adapter) if adapter else None, world_model=model,
                  base_url=base_url, api_key=api_key, max_episodes=max_episodes)
    res = call(reward_eval, config, show_progress=progress, resume=out)
    Console(soft_wrap=True).print(to_markdown(res.summary), markup=False, highlight=False)
    if skipped := res.summary.get("skipped"):
        note("episodes left out: " + ", ".join(f"{n} {why}" for why, n in skipped.items()), "yellow")
    if res.failed:
        note(f"{len(res.failed)} verdicts failed, e.g. {next(iter(res.failed.values()))}", "yellow")
        raise typer.Exit(1)


@agent_app.command("curriculum")
def agent_curriculum(
    run: Path = typer.Argument(..., help="An lwm agent eval run of the policy on the train families (--split train)."),
    out: Path = typer.Option(..., help="The task file to write (read by lwm train rft/rl --tasks-file); the table "
                             "goes beside it as <out>.json."),
    low: float = option(write_curriculum, "low", min=0.0, max=1.0),
    high: float = option(write_curriculum, "high", min=0.0, max=1.0),
    tasks_per_family: int = option(write_curriculum, "tasks_per_family", min=1),
    seed: int = option(write_curriculum, "seed"),
) -> None:
    """Choose the train families the policy sometimes solves (success between --low and --high) and write new
    tasks of them as a task file: where GRPO and rejection sampling get a signal."""
    rows = call(write_curriculum, run, out, low=low, high=high, tasks_per_family=tasks_per_family, seed=seed)
    lines = ["| family | split | success | chosen | tasks written |", "|---|---|---:|---|---:|"]
    lines += [f"| {r['domain']}/{r['family']} | {r['split']} | {r['successes']}/{r['n']} | "
              f"{'yes' if r['chosen'] else 'no'} | {r['written']} |" for r in rows]
    Console(soft_wrap=True).print("\n".join(lines), markup=False, highlight=False)
    note(f"wrote {sum(r['written'] for r in rows)} tasks of {sum(r['chosen'] for r in rows)} families to {out}")


serve_app = typer.Typer(help="Serve a world model or an environment over HTTP, or a tool set the world model "
                        "answers as an MCP server.", no_args_is_help=True,
                        rich_markup_mode=None)
app.add_typer(serve_app, name="serve")


@serve_app.command("env")
def serve_env(
    domain: str = typer.Option("terminal", help="Domain of the environment."),
    backend: str = typer.Option("sim", help=" | ".join(BACKENDS) + "."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port."),
    model: str | None = option(ModelSpec, "name", "--model", default=None, help_suffix=(
        "(The world model of sim and hybrid. Default: the first model --base-url serves, else embedded-warmup.)")),
    base_url: str | None = option(ModelSpec, "base_url"),
    api_key: str = option(ModelSpec, "api_key", envvar="LWM_API_KEY"),
    cache: Path | None = typer.Option(None, help="Replay cache file (replay, hybrid; real records into it)."),
    max_sessions: int = typer.Option(64, min=1, help="Concurrent sessions at most."),
    max_turns: int = typer.Option(50, min=1, help="Turns per simulated episode at most."),
    suite: bool = typer.Option(True, help="Offer the domain's bundled suite as the tasks reset() picks from."),
) -> None:
    """Serve an environment (any domain, any backend) as an OpenEnv server: sessions over
    the WebSocket /ws, each with its own isolated environment."""
    from lwm import domains
    from lwm.sim.openenv_server import serve_env as run_server

    def serve() -> None:
        tasks = [s.task for s in domains.get(domain).scripts()] if suite else []
        world = ModelSpec(_default_model(model, base_url, api_key), base_url, api_key) \
            if backend_spec(backend).simulates else None
        if world is not None:
            world.load()  # a model that cannot load fails now, not at every session's reset
        run_server(domain, backend, host, port, model=world,
                   cache=str(cache) if cache else None, max_sessions=max_sessions, tasks=tasks,
                   max_turns=max_turns)

    call(serve)


@serve_app.command("mcp")
def serve_mcp(
    tools: Path | None = option(McpServeConfig, "tools", metavar="FILE"),
    tools_from: str | None = option(McpServeConfig, "tools_from", metavar="COMMAND|URL"),
    state: Path | None = option(McpServeConfig, "state", metavar="FILE"),
    name: str | None = option(McpServeConfig, "name"),
    transport: str = option(McpServeConfig, "transport", metavar="stdio|http"),
    host: str = option(McpServeConfig, "host"),
    port: int = option(McpServeConfig, "port", min=1, max=65535),
    model: str | None = option(ModelSpec, "name", "--model", default=None, help_suffix=(
        "(The world model. Default: the first model --base-url serves, else embedded-warmup.)")),
    base_url: str | None = option(ModelSpec, "base_url"),
    api_key: str = option(ModelSpec, "api_key", envvar="LWM_API_KEY"),
    control: list[str] | None = option(McpServeConfig, "controls", "--control", default=None, metavar="<str>",
                                          help_suffix="Repeat the flag for several."),
    max_prompt_tokens: int = option(McpServeConfig, "max_prompt_tokens", min=256),
    out: Path | None = option(McpServeConfig, "out", default=None, help_suffix="Default: runs/<timestamp>/mcp."),
) -> None:
    """Serve a tool set as an MCP server whose every call the world model answers from the
    session's history (stdio for a client that starts it; --transport http for streamable
    HTTP); each session is recorded as a trajectory (docs/interfaces.md)."""
    from lwm.sim.controls import Control
    from lwm.sim.mcp_server import load_state, resolve_tools
    from lwm.sim.mcp_server import serve_mcp as run_server

    if transport not in ("stdio", "http"):
        fail(ValueError(f"--transport must be stdio or http, not {transport!r}"))
    out = out or run_dir("mcp")
    config = McpServeConfig(tools=tools, tools_from=tools_from, state=state, name=name, transport=transport,
                            host=host, port=port, controls=tuple(control or ()),
                            max_prompt_tokens=max_prompt_tokens, out=out)
    toolset = call(resolve_tools, config)  # a malformed file fails before the model loads
    if state is not None:
        call(load_state, state)
    call(lambda: [Control.parse(c) for c in config.controls])
    world = call(ModelSpec(_default_model(model, base_url, api_key), base_url, api_key).load)
    where = "stdio" if transport == "stdio" else f"http://{host}:{port}/mcp"

    def ready(sim) -> None:
        recovered = f"; {sim.recorder.recovered} sessions recovered from a crash" if sim.recorder.recovered else ""
        note(f"serving {len(sim.tools)} tools of {sim.name}, answered by {world.name}, over {where}; "
             f"sessions recorded in {sim.recorder.path}{recovered}")

    recorder = call(run_server, config, world, toolset, on_ready=ready,
                    hint=f"the sessions so far are recorded in {out}/trajectories.jsonl")
    note(f"{recorder.sessions} sessions recorded in {recorder.path}")


@app.command("models")
def models() -> None:
    """The models lwm ships and the reference predictors of lwm eval. Any GGUF file, hf:<dir> (transformers), or
    with --base-url the name of a model an OpenAI-compatible server serves can be named too."""
    from rich.table import Table

    from lwm.models import NAMED, WORLD_MODEL
    from lwm.models.registry import REFERENCE_PREFIX, REFERENCES

    table = Table("name", "kind", "what it is", title="Models by name (--model, --policy, --reward-model)")
    for ref in NAMED.values():
        table.add_row(ref.name + (" (default)" if ref.name == WORLD_MODEL else ""), ref.kind, ref.description)
    for kind, description in REFERENCES.items():
        table.add_row(REFERENCE_PREFIX + kind, "reference (lwm eval only)", description)
    Console(width=None if sys.stdout.isatty() else 160).print(table)


@serve_app.command("model")
@app.command("serve-model")
def serve_model(
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8000, help="Port."),
    model: str = option(create_app, "model", "--model", "--model-path"),
    name: str | None = typer.Option(None, help="Model name clients use (default: the file's model name, "
                                       "+<adapter file stem> with an adapter)."),
    n_ctx: int = typer.Option(8192, help="Context window in tokens (the embedded model was trained on 8192)."),
    threads: int = typer.Option(os.cpu_count() or 1, help="CPU threads."),
    prompt_cache_mb: int = typer.Option(1024, min=0, help="Memory for cached prompt states (0: no cache)."),
    adapter: str | None = typer.Option(None, help="A LoRA adapter in GGUF form (lwm train export) for a model "
                                          "without one; 'warmup' is --model embedded-warmup."),
) -> None:
    """Serve the embedded model as an OpenAI-compatible HTTP endpoint (llama.cpp server)."""
    from lwm.models.embedded import adapter_request

    _, lora = call(served_files, model, adapter)
    if lora is not None:
        prediction, compact = adapter_request(lora)
        if prediction != "full" or compact:  # an HTTP client cannot read the adapter's record
            flags = " ".join(f for f, on in (("--predict change", prediction == "change"),
                                             ("--compact-tools", compact)) if on)
            note(f"this adapter was trained to be asked with {flags}: an HTTP client cannot read that from the "
                 f"server, so pass {flags} to lwm eval, lwm rollout and lwm agent eval "
                 "(SimEnv(prediction=…, compact_tools=…) in Python)")

    call(serve, host=host, port=port, model=model, name=name, n_ctx=n_ctx, threads=threads,
         prompt_cache_bytes=prompt_cache_mb << 20, adapter=adapter)


from lwm.cli.data import data_app  # noqa: E402  (sub-apps after the top-level commands: the help lists them last)
from lwm.cli.train import train_app  # noqa: E402

app.add_typer(data_app, name="data")
app.add_typer(train_app, name="train")
