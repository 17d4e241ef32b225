"""The simulated MCP server (`lwm serve mcp`) measured as a client sees it: seconds per
call, and consistency (a value written, then read back) over scripted sessions of the
notes API (examples/mcp/notes_tools.json).

The server runs as its own process over streamable HTTP (one world model loaded once; the
sessions one after another, each a fresh MCP session, so a fresh simulated state). Each
session makes up to 10 calls (``--calls``): create a note, read it back, update it, read
it again, create a second, list, read both, delete the second, list again. Every read
after a write is a check: the value written (a body, the titles) must appear in what is
read back, and a deleted note must be gone from the list. Ids are the ones the simulated
``create_note`` returned (1, 2 … when its answer holds none). Seconds are wall-clock per
``tools/call`` at the client (world model, MCP transport and recording together).

    python bench/mcp_sim.py [--sessions 3] [--calls 10] [--model embedded-warmup] [--base-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, free_port, machine

NOTES = ROOT / "examples" / "mcp" / "notes_tools.json"
#: The most calls a session's script has.
SCRIPT_CALLS = 10


def note_id(text: str, fallback: int) -> int:
    """The ``id`` of a note the simulated server returned, else ``fallback``."""
    try:
        value = json.loads(text).get("id")
    except (ValueError, AttributeError):
        return fallback
    return value if isinstance(value, int) and not isinstance(value, bool) else fallback


async def session(url: str, s: int, calls: int) -> list[dict]:
    """One scripted session; a record per call: tool, seconds, and for reads the check."""
    from mcp import Client, MCPError

    title_a, title_b = f"dock-{s}-inventory", f"supplier-{s}-call"
    body_1, body_2, body_3 = (f"{17 + s} crates at bay {chr(66 + s)}", f"{23 + s} crates at bay {chr(70 + s)}",
                              f"ring Ms Ortega on {3 + s} May")
    ids = {"a": 1, "b": 2}
    script = [  # (tool, arguments, what a read must show)
        ("create_note", lambda: {"title": title_a, "body": body_1}, None),
        ("get_note", lambda: {"id": ids["a"]}, ("has", [body_1])),
        ("update_note", lambda: {"id": ids["a"], "body": body_2}, None),
        ("get_note", lambda: {"id": ids["a"]}, ("has", [body_2])),
        ("create_note", lambda: {"title": title_b, "body": body_3}, None),
        ("list_notes", lambda: {}, ("has", [title_a, title_b])),
        ("get_note", lambda: {"id": ids["b"]}, ("has", [body_3])),
        ("get_note", lambda: {"id": ids["a"]}, ("has", [body_2])),
        ("delete_note", lambda: {"id": ids["b"]}, None),
        ("list_notes", lambda: {}, ("has-not", [title_b])),
    ][:calls]
    out = []
    async with Client(url, mode="legacy") as client:
        for tool, arguments, check in script:
            args = arguments()
            t0 = time.monotonic()
            try:
                result = await client.call_tool(tool, args)
                text, error = "\n".join(getattr(b, "text", "") for b in result.content), bool(result.is_error)
            except MCPError as e:  # the world model answered with a JSON-RPC error
                text, error = f"[protocol error {e.code}] {e.message}", True
            seconds = time.monotonic() - t0
            if tool == "create_note":
                key = "a" if args["title"] == title_a else "b"
                ids[key] = note_id(text, ids[key])
            record = {"session": s, "tool": tool, "seconds": seconds, "error": error, "text": text}
            if check is not None:
                kind, values = check
                record["consistent"] = (all(v in text for v in values) if kind == "has"
                                        else not error and all(v not in text for v in values))
            out.append(record)
    return out


async def wait_ready(url: str, proc: subprocess.Popen, timeout: float) -> None:
    from mcp import Client

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"lwm serve mcp exited with code {proc.returncode}")
        try:
            async with Client(url, mode="legacy") as client:
                await client.list_tools()
            return
        except Exception:  # noqa: BLE001 - not up yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} not ready after {timeout:g} s") from None
            await asyncio.sleep(0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=3, help="sessions, one after another")
    ap.add_argument("--calls", type=int, default=SCRIPT_CALLS, help=f"calls per session (at most {SCRIPT_CALLS})")
    ap.add_argument("--model", default=None, help="the world model (default: lwm serve mcp's, embedded-warmup)")
    ap.add_argument("--base-url", default=None, help="its OpenAI-compatible endpoint")
    ap.add_argument("--out", type=Path, default=None, help="keep the server's trajectories here (default: a "
                    "temporary directory)")
    ap.add_argument("--show", action="store_true", help="print every call's answer")
    args = ap.parse_args()
    if not 1 <= args.calls <= SCRIPT_CALLS or args.sessions < 1:
        ap.error(f"--calls must be 1..{SCRIPT_CALLS} and --sessions at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "mcp"
        port = free_port()
        argv = [sys.executable, "-m", "lwm.cli", "serve", "mcp", "--tools", str(NOTES), "--transport", "http",
                "--port", str(port), "--out", str(out)]
        argv += ["--model", args.model] if args.model else []
        argv += ["--base-url", args.base_url] if args.base_url else []
        log = open(Path(tmp) / "server.log", "w+")  # noqa: SIM115 - read back below
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            t0 = time.monotonic()
            asyncio.run(wait_ready(url, proc, 600))
            start = time.monotonic() - t0
            records = []
            for s in range(args.sessions):
                records += asyncio.run(session(url, s, args.calls))
        finally:
            proc.send_signal(signal.SIGINT)  # the server records the sessions and exits
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.seek(0)
            server_log = log.read()
            log.close()
        recorded = out / "trajectories.jsonl"
        trajectories = len(recorded.read_text().splitlines()) if recorded.exists() else 0
    report(args, records, start, trajectories, server_log)


def report(args: argparse.Namespace, records: list[dict], start: float, trajectories: int, server_log: str) -> None:
    seconds = sorted(r["seconds"] for r in records)
    checks = [r for r in records if "consistent" in r]
    consistent = sum(r["consistent"] for r in checks)
    p90 = seconds[min(len(seconds) - 1, int(0.9 * len(seconds)))]
    print(machine())
    print(f"\nlwm serve mcp --transport http, model {args.model or 'embedded-warmup (default)'}; notes API "
          f"(examples/mcp/notes_tools.json); {args.sessions} sessions x {args.calls} calls; server ready in "
          f"{start:.1f} s (model load included)\n")
    if args.show:
        for r in records:
            mark = "" if "consistent" not in r else (" [consistent]" if r["consistent"] else " [INCONSISTENT]")
            print(f"session {r['session']} {r['tool']} ({r['seconds']:.2f} s){mark}: {r['text'][:300]!r}")
        print()
    print("| calls | median s/call | p90 s/call | mean s/call | tool errors | reads checked | consistent | "
          "trajectories recorded |\n|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {len(records)} | {statistics.median(seconds):.2f} | {p90:.2f} | {statistics.fmean(seconds):.2f} | "
          f"{sum(r['error'] for r in records)} | {len(checks)} | "
          f"{consistent}/{len(checks)} ({100 * consistent / max(1, len(checks)):.0f} %) | {trajectories} |")
    by_tool: dict[str, list[bool]] = {}
    for r in checks:
        by_tool.setdefault(f"{r['tool']} after a write", []).append(r["consistent"])
    print("\n" + ", ".join(f"{k}: {sum(v)}/{len(v)}" for k, v in by_tool.items()))
    if "error" in server_log.lower() or "traceback" in server_log.lower():
        print("\nserver log:\n" + server_log[-2000:])
    print("\n" + json.dumps({"calls": len(records), "median_s": round(statistics.median(seconds), 3),
                             "consistent": consistent, "checked": len(checks), "trajectories": trajectories}))


if __name__ == "__main__":
    main()
