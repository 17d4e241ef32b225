"""Shared helpers of the bench scripts: start servers, wait for them, machine facts, what an
error looks like in an observation."""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent

#: What an error looks like in the observations of terminal, db and code (bash, sqlite3's
#: shell, the Python cell runner): read on this project's real observations, not a general rule.
ERROR = re.compile(r"command not found|No such file|syntax error|Parse error|\[error\]|Error\b|unexpected")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(base_url: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{base_url} not ready after {timeout}s")


@contextmanager
def server(argv: list[str], port: int):
    """Run a server process on 127.0.0.1:port; yield its /v1 base URL."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(base)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def lwm_serve_model(port: int) -> list[str]:
    return [sys.executable, "-m", "lwm.cli", "serve-model", "--port", str(port)]


def delay_server(port: int, delay: float) -> list[str]:
    return [sys.executable, str(ROOT / "bench" / "delay_server.py"), "--port", str(port), "--delay", str(delay)]


def machine() -> str:
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{date.today()}, {os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}"


def rows_and_runs(doc: str, runs_help: str = "lwm eval run directories over those rows"):
    """``ROWS RUN [RUN ...]`` from the command line: the rows (``lwm.eval.runner.load_rows``),
    their directory and each run's ``predictions.jsonl``; an unreadable directory or a run
    without predictions exits with one line."""
    import argparse

    from lwm.errors import LwmError
    from lwm.eval.runner import load_rows

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("rows", type=Path, help="the rows' directory ({domain}_test.jsonl)")
    ap.add_argument("runs", type=Path, nargs="+", help=runs_help)
    args = ap.parse_args()
    try:
        rows = load_rows(args.rows)
    except (LwmError, OSError) as e:
        raise SystemExit(f"error: cannot read {args.rows}: {e}") from None
    for run in args.runs:
        if not (run / "predictions.jsonl").is_file():
            raise SystemExit(f"error: {run / 'predictions.jsonl'} not found (an lwm eval run directory?)")
    return rows, args.rows, [(run, run / "predictions.jsonl") for run in args.runs]


def greedy_run(run: Path, data: Path | None, model_name: str, adapter: str | None):
    """A finished greedy ``lwm eval`` run of a local model, for re-scoring its answers:
    ``(its run.json settings, its rows with their records (lwm.eval.runner.run_rows), the
    run's model loaded again)``. A run with candidates scored, a reference predictor's run,
    or a model other than the run's exits with one line."""
    from lwm.eval.runner import run_rows
    from lwm.jsonl import read_json
    from lwm.models import load_model

    settings = read_json(run / "run.json")
    if settings.get("score_candidates"):
        raise SystemExit(f"{run}: a run with candidates scored; give a greedy run")
    if str(settings.get("model", "")).startswith("baseline:"):
        raise SystemExit(f"{run}: a reference predictor's run; give a world model's")
    rows = run_rows(run, data or run / "data")
    try:
        model = load_model(model_name, adapter=adapter)
    except ValueError as e:  # a reference predictor
        raise SystemExit(f"--model {model_name}: {e}") from None
    if model.name != settings.get("model"):
        raise SystemExit(f"{run} was written by {settings.get('model')}, not {model.name} (--model, --adapter)")
    return settings, rows, model
