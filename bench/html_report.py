"""Size and opening speed of the HTML report (``lwm report``) of a large evaluation run.

Writes synthetic AgentWorldBench rows (db-like: SQL actions, result tables of 1–40 lines,
some errors; ``--rows`` in all, 10 turns per episode), evaluates them for real with the two
reference predictors (``baseline:repeat-last``, ``baseline:trivial``: no model), writes the
report of one run and of both compared, and opens each in headless Chromium (Debian's,
through Playwright) to measure:

* write: seconds of ``write_html_report`` (reading the run and its data, diffs, charts);
* first contentful paint (``performance.getEntriesByType('paint')``: the header may be
  painted before the embedded rows are parsed) and the time the first row is in the page
  (a MutationObserver), both from the start of navigation;
* the longest main-thread task while loading and while scrolling down 2,000 rows
  (``longtask`` entries: tasks over 50 ms; none means no task over 50 ms);
* re-sorting every row worst first (one filter change).

Each page is opened three times: medians, and the longest task of the three.

    python bench/html_report.py [--rows 10000]

Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path
from statistics import median

from _common import machine

from lwm.domains.web.browser import CHROMIUM, EXTRA_FLAGS
from lwm.eval.html_report import write_html_report
from lwm.eval.runner import EvalConfig, evaluate
from lwm.models import load_model
from lwm.schema import Provenance, Trajectory, Turn, rows_from_trajectory, write_rows

# Injected before the page's own script: collects main-thread tasks over 50 ms, and the time the first row appears.
PROBES = """window.__long = [];
new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push(e.duration); })
  .observe({type: "longtask", buffered: true});
const seen = new MutationObserver(() => {
  if (document.querySelector("#row-list .item")) { window.__firstRow = performance.now(); seen.disconnect(); }
});
seen.observe(document, {childList: true, subtree: true});"""


def synthetic_rows(n: int, seed: int = 0) -> list:
    rnd = random.Random(seed)
    real = Provenance(kind="real", source="db/bench")
    rows = []
    for e in range(n // 10):
        turns = []
        for t in range(1, 11):
            table = f"t{rnd.randrange(5)}"
            if rnd.random() < 0.15:
                action = f"SELEC * FROM {table};"
                obs = f'Parse error: near "SELEC": syntax error\n  {action}\n  ^--- error here'
            else:
                width = rnd.randrange(1, 5)
                header = "  ".join(f"col{c}" for c in range(width))
                lines = ["  ".join(str(rnd.randrange(10**6)).ljust(6) for _ in range(width))
                         for _ in range(rnd.randrange(1, 41))]
                action = f"SELECT * FROM {table} LIMIT {len(lines)};"
                obs = "\n".join([header, "-" * len(header), *lines])
            turns.append(Turn(index=t, action=action, observation=obs, provenance=real))
        rows += rows_from_trajectory(Trajectory(id=f"db/bench-{e}/run0", domain="db", system_prompt="SQLite.",
                                                turns=turns))
    return rows[:n]


def measure(browser, page_file: Path) -> dict:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.add_init_script(PROBES)
    page.goto(page_file.as_uri(), wait_until="load")
    page.wait_for_selector("#row-list .item")
    fcp = page.evaluate("() => performance.getEntriesByType('paint').find((p) => p.name === 'first-contentful-paint')"
                        ".startTime")
    first_row = page.evaluate("() => window.__firstRow")
    long_load = max(page.evaluate("() => window.__long"), default=0)
    page.evaluate("() => { window.__long = []; }")
    page.locator("#rows").scroll_into_view_if_needed()
    for _ in range(200):  # about 2,000 rows of 30 px
        page.mouse.wheel(0, 300)
        page.wait_for_timeout(5)
    rendered = page.locator("#row-list .item").count()
    long_scroll = max(page.evaluate("() => window.__long"), default=0)
    sort_ms = page.evaluate("""() => { const s = document.getElementById('f-sort'), t = performance.now();
        s.value = 'worst'; s.dispatchEvent(new Event('change')); return performance.now() - t; }""")
    page.close()
    return {"fcp": fcp, "first_row": first_row, "long_load": long_load, "long_scroll": long_scroll,
            "rendered": rendered, "sort_ms": sort_ms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_rows(tmp / "data" / "db_test.jsonl", synthetic_rows(args.rows))
        runs = []
        for m in ("repeat-last", "trivial"):
            t0 = time.monotonic()
            asyncio.run(evaluate(EvalConfig(out=tmp / m, data=tmp / "data"), load_model(f"baseline:{m}"),
                                 show_progress=False))
            print(f"eval baseline:{m}: {time.monotonic() - t0:.1f} s")
            runs.append(tmp / m)
        reports = []
        for i, (label, chosen) in enumerate(((f"1 run × {args.rows:,} rows", runs[:1]),
                                             (f"2 runs compared × {args.rows:,} rows", runs))):
            t0 = time.monotonic()
            out = write_html_report(chosen, tmp / f"report-{i}.html")
            reports.append((label, time.monotonic() - t0, out))
        lines = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=list(EXTRA_FLAGS))
            for label, write_s, out in reports:
                runs3 = [measure(browser, out) for _ in range(3)]  # the median of three openings, the worst task
                m = {k: (max if k.startswith("long") else median)(r[k] for r in runs3) for k in runs3[0]}
                size = out.stat().st_size / 2**20
                lines.append(f"| {label} | {size:.1f} MiB | {write_s:.1f} s | {m['fcp']:.0f} ms | "
                             f"{m['first_row']:.0f} ms | {m['long_load']:.0f} ms | {m['rendered']:,} rows, "
                             f"{m['long_scroll']:.0f} ms | {m['sort_ms']:.0f} ms |")
            browser.close()
    print("| report | file | write | first contentful paint | first row rendered | longest task, load "
          "| scrolled, longest task | sort all worst first |")
    print("|---|---:|---:|---:|---:|---:|---|---:|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
