"""The HTML report (lwm report), rendered in a real headless Chromium through Playwright."""

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import needs_sandbox
from playwright.sync_api import expect

from lwm.domains.web.browser import CHROMIUM, EXTRA_FLAGS
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.eval.baselines import load_predictor
from lwm.eval.html_report import write_html_report
from lwm.eval.runner import EvalConfig, evaluate
from lwm.parse import observation_text
from lwm.schema import (
    Provenance,
    Trajectory,
    Turn,
    format_response,
    rows_from_trajectory,
    write_rows,
    write_trajectories,
)

needs_browser = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is required")

HOSTILE = ('<script>window.__pwned = 1</script>\n'
           '</textarea><img src=x onerror="window.__pwned = 2">\n'
           '</script><script>window.__pwned = 3</script><!-- never closed\n'
           '\x1b[31mred\x1b[0m done')
HUGE = "".join(f"line {i:06d}\n" for i in range(10_000))  # 120,000 characters
REAL = Provenance(kind="real", source="db/DbEnv", run=0)


def traj(tid, domain, actions, observations, volatile=None):
    turns = [Turn(index=i + 1, action=a, observation=o, provenance=REAL, volatile=(volatile or {}).get(i + 1, []))
             for i, (a, o) in enumerate(zip(actions, observations))]
    return Trajectory(id=tid, domain=domain, system_prompt=f"You simulate {domain}.", turns=turns)


def eval_run(tmp: Path, trajectories, models=("baseline:trivial", "baseline:repeat-last")) -> list[Path]:
    """Real `lwm eval` runs of the reference predictors on rows written from ``trajectories``."""
    data = tmp / "data"
    by_domain = {}
    for t in trajectories:
        by_domain.setdefault(t.domain, []).extend(rows_from_trajectory(t))
    for domain, rows in by_domain.items():
        write_rows(data / f"{domain}_test.jsonl", rows)
    runs = []
    for m in models:
        out = tmp / m.split(":")[1]
        job = evaluate(EvalConfig(out=out, data=data), load_predictor(m), show_progress=False)
        with ThreadPoolExecutor(1) as pool:  # a thread of its own: Playwright's sync API runs a loop in this one
            pool.submit(asyncio.run, job).result()
        runs.append(out)
    return runs


def predictions(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    table = "a\n-\n1"
    return eval_run(tmp, [
        traj("db/<b>hostile</b>/run0", "db", ["SELECT 1 AS a;", "SELECT '<script>';", "SELECT 1 AS a;"],
             [table, HOSTILE, table]),
        traj("db/huge/run0", "db", ["SELECT * FROM big;", "SELECT 1 AS a;"], [HUGE, table]),
        traj("code/volatile/run0", "code",
             ["import os", "print('\U0001f642 pid', os.getpid(), 'ok')", "x = 1", "print(b'\\xed\\xa0\\x80')"],
             ["", "\U0001f642 pid 4121 ok", "", "lone \ud800 surrogate"], volatile={2: [(6, 10)]}),
    ])


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=list(EXTRA_FLAGS))
        yield b
        b.close()


def open_report(browser, path: Path, fragment: str = "", ready: str = ".item"):
    """The page and the console errors and warnings it logs (a script it refused to run included)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.goto(path.as_uri() + fragment)
    page.wait_for_selector(ready)
    return page, errors


def key_of(run: Path, tid: str, turn: int) -> str:
    return next(p["key"] for p in predictions(run) if p["id"] == tid and p["turn_idx"] == turn)


def count(page, which="row") -> int:
    return int(page.inner_text(f"#{which}-count").split(" of ")[0].replace(",", ""))


@needs_browser
def test_summary_filters_and_row_viewer(runs, browser, tmp_path):
    trivial, repeat = runs
    out = write_html_report(runs, tmp_path / "r.html", title="two references")
    page, errors = open_report(browser, out)
    preds = predictions(trivial)
    assert page.title() == "two references"
    assert page.inner_text("#row-count") == f"{len(preds)} of {len(preds)} rows"
    # the first screen: the headline in a sentence per run, a small table ×100, charts; the rest folded
    summary = json.loads((trivial / "summary.json").read_text())
    sentences = page.locator("#section-eval p.headline").all_inner_texts()
    assert sentences[0].startswith("Line F1 (the headline score, ×100, mean of 2 domains): ")
    assert "for trivial (baseline:trivial), the trivial reference itself" in sentences[0]
    assert "for the trivial reference (baseline:trivial) on the same" in sentences[1]
    main = page.locator("#section-eval table.main").inner_text()
    assert "line F1 ×100\ttrivial reference: line F1 ×100\texact ×100\tedit similarity ×100" in main
    assert f"all (mean of domains)\ttrivial\t{len(preds)}\t{summary['macro']['line_f1']:.1f}" in main
    assert page.locator("#section-eval figure.scale svg").count() == 3
    wide = page.locator("details.all table").first
    assert not wide.is_visible()
    page.click("details.all > summary")
    head = wide.inner_text()
    assert "baseline:trivial" in head and "baseline:repeat-last" in head and f"{summary['macro']['exact']:g}" in head
    assert page.locator("#section-eval figure svg").count() == 6 and page.locator("svg script").count() == 0

    page.select_option("#f-domain", "code")
    assert count(page) == sum(p["domain"] == "code" for p in preds) == 4
    page.select_option("#f-domain", "")
    page.select_option("#f-depth", "2")
    assert count(page) == sum(p["turn_idx"] == 2 for p in preds) == 3
    page.select_option("#f-depth", "")
    page.fill("#f-max", "0")  # exact of the trivial guess at most 0: its wrong rows
    assert count(page) == sum(p["fidelity"]["exact"] == 0 for p in preds) > 0
    page.fill("#f-max", "")
    page.select_option("#f-metric", "edit_similarity")
    page.select_option("#f-sort", "worst")
    worst = min(p["fidelity"]["edit_similarity"] for p in preds)
    first = page.locator("#row-list .item .chip").first.inner_text()
    assert first == f"trivial: edit_similarity {round(100 * worst, 1):g}"

    # a row opened: its action, the real observation, both predictions, a line diff
    page.select_option("#f-sort", "input")
    page.fill("#f-search", "getpid")
    expect(page.locator("#row-count")).to_have_text(re.compile("^1 of"))  # the search waits 200 ms for typing
    page.click("#row-list .item .item-head")
    detail = page.locator("#row-list .item .detail")
    pres = detail.locator("pre")
    assert pres.nth(0).inner_text() == "print('\U0001f642 pid', os.getpid(), 'ok')"
    assert pres.nth(1).inner_text() == "\U0001f642 pid 4121 ok"
    assert detail.locator("mark.vol").inner_text() == "4121"  # the volatile span, shaded at the right place
    assert "Prediction: trivial" in detail.inner_text() and "Prediction: repeat-last" in detail.inner_text()
    assert detail.locator(".diff .d").first.inner_text() == "- \U0001f642 pid 4121 ok"
    assert page.evaluate("location.hash") == "#row%3D" + key_of(trivial, "code/volatile/run0", 2)
    assert errors == []


@needs_browser
def test_hostile_content_stays_text(runs, browser, tmp_path):
    out = write_html_report(runs, tmp_path / "r.html")
    html = out.read_text()
    assert "<script>window.__pwned" not in html and "<img src=x" not in html and "<b>hostile" not in html
    shown = observation_text(HOSTILE).replace("\x1b", "\u241b")  # ANSI escapes shown as ␛
    assert "<script>window.__pwned = 1</script>" in shown and "␛[31mred␛[0m done" in shown
    page, errors = open_report(browser, out, "#row=" + key_of(runs[0], "db/<b>hostile</b>/run0", 2))  # a permalink
    assert page.locator(".item.open .detail pre").nth(1).inner_text() == shown  # the real observation
    # repeat-last predicts it again on the next turn: the hostile text as a prediction (and in the diff)
    key = key_of(runs[0], "db/<b>hostile</b>/run0", 3)
    page.goto(out.as_uri() + "#row=" + key)  # the same page: a hash change
    detail = page.locator(".item.open", has_text=key).locator(".detail")
    assert detail.locator(".col").nth(2).locator("pre").inner_text() == shown
    assert "+ ␛[31mred␛[0m done" in detail.locator(".diff").nth(1).inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main img, main b, main textarea").count() == 0
    assert "db/<b>hostile</b>/run0" in page.inner_text("#row-list")
    assert errors == []


@needs_browser
def test_huge_observation_is_cut_with_the_rest_one_click_away(runs, browser, tmp_path):
    out = write_html_report(runs, tmp_path / "r.html")
    page, errors = open_report(browser, out, "#row=" + key_of(runs[0], "db/huge/run0", 1))
    real = page.locator(".item.open .detail pre").nth(1)
    full = observation_text(format_response(HUGE))
    button = real.locator("button.cut")
    assert button.inner_text() == f"✂ cut here: 20,000 of {len(full):,} characters shown. Show all"
    assert real.inner_text().startswith(full[:20_000]) and len(real.inner_text()) < 20_100
    button.click()
    assert real.inner_text().rstrip("\n") == full.rstrip("\n") and real.locator("button").count() == 0
    assert errors == []


@needs_browser
def test_comparison_shows_the_rows_that_differ(runs, browser, tmp_path):
    trivial, repeat = (predictions(r) for r in runs)
    out = write_html_report(runs, tmp_path / "r.html")
    page, errors = open_report(browser, out)
    exact_differs = [a["key"] for a, b in zip(trivial, repeat) if a["fidelity"]["exact"] != b["fidelity"]["exact"]]
    text_differs = [a["key"] for a, b in zip(trivial, repeat) if a["observation"] != b["observation"]]
    assert 0 < len(exact_differs) < len(text_differs) < len(trivial)
    page.select_option("#f-compare", "exact")
    assert page.locator("#row-list .item .key").all_inner_texts() == exact_differs
    page.select_option("#f-compare", "text")
    assert page.locator("#row-list .item .key").all_inner_texts() == text_differs
    assert errors == []


@needs_browser
def test_long_lists_render_as_the_user_scrolls(browser, tmp_path):
    trajs = [traj(f"db/t{i}/run0", "db", ["SELECT 1 AS a;"] * 5, ["a\n-\n1"] * 5) for i in range(50)]
    (run,) = eval_run(tmp_path, trajs, models=("baseline:trivial",))
    page, errors = open_report(browser, write_html_report([run], tmp_path / "r.html"))
    assert page.locator("#row-list .item").count() == 100 and count(page) == 250
    for _ in range(10):
        page.mouse.wheel(0, 20_000)
        page.wait_for_timeout(100)
    assert page.locator("#row-list .item").count() == 250
    assert errors == []


def rollout_and_wm2real(tmp: Path) -> tuple[Path, Path]:
    """A simulated rollout (rewards from the reward model) and its wm2real replay, as those commands write them."""
    sim = Provenance(kind="simulated", source="SmolLM2-135M+warmup", sampling={"temperature": 0.0},
                     controls=["error:disk full"])
    trajs = [Trajectory(id=f"db/notes/ep{i}", domain="db", task="Create a notes table.", system_prompt="SYS",
                        initial_observation="sqlite> ", reward=float(i),
                        turns=[Turn(index=1, action="CREATE TABLE notes (id INTEGER);", observation="", provenance=sim),
                               Turn(index=2, action=".tables", observation=f"notes{i}", provenance=sim)],
                        metadata={"episode": "notes", "reward_rationale": f"rationale {i}: the table is there"})
             for i in (0, 1)]
    rollout = tmp / "rollout"
    write_trajectories(rollout / "trajectories.jsonl", trajs)
    (rollout / "manifest.json").write_text(json.dumps({"domain": "db", "backend": "sim", "episodes_done": 2,
                                                       "mean_reward": 0.5, "failed": {"db/notes/ep2": "boom"}}))
    (rollout / "rollout.json").write_text(json.dumps({"domain": "db", "backend": "sim"}))  # what lwm rollout records
    wm2real = tmp / "wm2real"
    wm2real.mkdir()
    records = [{"id": t.id, "domain": "db", "task": "notes", "sim_reward": t.reward, "real_reward": 0.0,
                "agree": t.reward < 0.5, "false_success": t.reward >= 0.5,
                "steps": [{"turn": 1, "exact": 1.0, "edit_similarity": 1.0, "line_f1": 1.0, "kind": "simulated"},
                          {"turn": 2, "exact": 0.0, "edit_similarity": 0.8, "line_f1": 0.0, "kind": "simulated"}]}
               for t in trajs]
    (wm2real / "wm2real.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (wm2real / "summary.json").write_text(json.dumps({"trajectories": 2, "failed": {}}))
    return rollout, wm2real


@needs_browser
def test_episode_viewer_with_provenance_rewards_and_the_real_replay(browser, tmp_path):
    rollout, wm2real = rollout_and_wm2real(tmp_path)
    page, errors = open_report(browser, write_html_report([rollout, wm2real], tmp_path / "r.html"))
    assert count(page, "ep") == 4
    confusion = page.locator("#section-wm2real table", has_text="simulated: achieved").inner_text()
    assert "simulated: achieved\t0\t1" in confusion and "simulated: not achieved\t0\t1" in confusion
    assert "Failed episodes" in page.inner_text("#section-rollout") and "boom" in page.inner_text("#section-rollout")
    page.click("#ep-list .item:nth-child(2) .item-head")  # the rollout's second episode
    detail = page.locator("#ep-list .item.open .detail").inner_text()
    assert "reward 1" in detail and "reward model: rationale 1: the table is there" in detail
    assert 'simulated · SmolLM2-135M+warmup · {"temperature": 0.0} · controls: error:disk full' in detail
    page.select_option("#e-run", "1")
    page.click("#ep-list .item:nth-child(2) .item-head")  # its replay in the real environment
    detail = page.locator("#ep-list .item.open .detail").inner_text()
    assert "false success: true" in detail and "notes1" in detail and ".tables" in detail
    assert "against the real environment: exact 0 edit similarity 80 line F1 0" in detail
    assert errors == []


@needs_browser
def test_training_curves_against_step(browser, tmp_path):
    run = tmp_path / "sft"
    (run / "checkpoint-2").mkdir(parents=True)
    (run / "checkpoint-4").mkdir()
    (run / "lwm_train.json").write_text(json.dumps({"settings": {"lr": 2e-4}, "config": {"lr": 2e-4, "lora_r": 16}}))
    (run / "metrics.json").write_text(json.dumps({"steps": 4, "train_loss": 1.7, "eval_loss": 1.4}))
    # Hugging Face TrainerState.log_history; a GRPO run adds reward columns
    history = [{"epoch": 0.25, "grad_norm": 3.1, "learning_rate": 2e-4, "loss": 2.5, "reward": 0.1, "step": 1},
               {"epoch": 0.5, "eval_loss": 1.9, "eval_runtime": 1.2, "eval_samples_per_second": 8.0, "step": 2},
               {"epoch": 1.0, "grad_norm": 2.0, "learning_rate": 1e-4, "loss": 1.1, "reward": 0.6, "step": 4},
               {"epoch": 1.0, "eval_loss": 1.4, "eval_runtime": 1.1, "step": 4},
               {"epoch": 1.0, "step": 4, "total_flos": 1e12, "train_loss": 1.7, "train_runtime": 30.0}]
    (run / "checkpoint-2" / "trainer_state.json").write_text(json.dumps({"log_history": history[:2]}))
    (run / "checkpoint-4" / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    out = write_html_report([run], tmp_path / "r.html")
    page, errors = open_report(browser, out, ready="#section-train")
    section = page.locator("#section-train")
    assert "checkpoint-4/trainer_state.json" in section.inner_text() and "1.7" in section.inner_text()
    titles = section.locator("svg .plot_title").all_text_contents()
    assert titles == ["loss against step", "reward against step", "grad_norm against step",
                      "learning_rate against step"]
    loss = section.locator("figure").first
    assert loss.locator(".legend text").all_text_contents() == ["loss", "eval_loss", "train_loss"]
    assert errors == []


def test_missing_or_corrupt_run_directories_are_named(runs, tmp_path):
    with pytest.raises(DataNotFoundError, match=f"{tmp_path / 'nope'}: no such run directory"):
        write_html_report([tmp_path / "nope"], tmp_path / "r.html")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataNotFoundError, match="is not a run directory lwm knows: expected predictions.jsonl"):
        write_html_report([tmp_path / "empty"], tmp_path / "r.html")
    (tmp_path / "empty" / "predictions.partial.jsonl").write_text("")
    with pytest.raises(DataNotFoundError, match="an unfinished run; finish it by re-running its command"):
        write_html_report([tmp_path / "empty"], tmp_path / "r.html")
    broken = tmp_path / "broken"
    shutil.copytree(runs[0], broken)
    with open(broken / "predictions.jsonl", "a") as f:
        f.write('{"key": "000099-x", "domain": \n')
    lines = len((runs[0] / "predictions.jsonl").read_text().splitlines())
    with pytest.raises(RowFormatError, match=f"{broken / 'predictions.jsonl'}:{lines + 1}:"):
        write_html_report([runs[1], broken], tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()
    with pytest.raises(DataNotFoundError, match="no run directory given"):
        write_html_report([], tmp_path / "r.html")


def test_a_run_whose_data_moved_says_so(runs, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(runs[0], moved)
    summary = json.loads((moved / "summary.json").read_text())
    summary["run"]["data"] = str(tmp_path / "gone")
    (moved / "summary.json").write_text(json.dumps(summary))
    html = write_html_report([moved], tmp_path / "r.html").read_text()
    assert f"{moved}: the data this run read is not found (recorded: {tmp_path / 'gone'})" in html


@needs_browser
@needs_sandbox
def test_cli_report_of_real_runs(browser, tmp_path):
    """The real terminal suite collected, evaluated by both references and reported through the CLI (also the
    README's screenshot: LWM_UPDATE_SCREENSHOT=1 writes it to docs/img/report.png)."""
    def lwm(*args):
        return subprocess.run([sys.executable, "-m", "lwm.cli", *map(str, args)], capture_output=True, text=True,
                              timeout=300)

    r = lwm("collect", "--domain", "terminal", "--episodes", "2", "--out", tmp_path / "data", "--no-progress")
    assert r.returncode == 0, r.stderr
    for m in ("trivial", "repeat-last"):
        r = lwm("eval", "--data", tmp_path / "data", "--out", tmp_path / m, "--model", f"baseline:{m}", "--no-progress")
        assert r.returncode == 0, r.stderr
    r = lwm("report", tmp_path / "trivial", tmp_path / "repeat-last", "--out", tmp_path / "report.html")
    assert r.returncode == 0 and f"wrote {tmp_path / 'report.html'}" in r.stderr, r.stderr
    trivial, repeat = predictions(tmp_path / "trivial"), predictions(tmp_path / "repeat-last")
    page, errors = open_report(browser, tmp_path / "report.html")
    assert count(page) == len(trivial) > 0
    page.select_option("#f-compare", "exact")
    assert count(page) == sum(a["fidelity"]["exact"] != b["fidelity"]["exact"] for a, b in zip(trivial, repeat))
    # a row both got wrong, opened by its permalink
    key = next(a["key"] for a, b in zip(trivial, repeat) if a["fidelity"]["exact"] == b["fidelity"]["exact"] == 0)
    page.goto((tmp_path / "report.html").as_uri() + "#row=" + key)
    detail = page.locator(".item.open", has_text=key).locator(".detail")
    assert detail.locator(".diff").count() == 2 and detail.locator(".diff .d").count() >= 1
    assert errors == []
    shot = tmp_path / "report.png"
    page.screenshot(path=shot)
    assert shot.read_bytes()[:4] == b"\x89PNG"
    if os.environ.get("LWM_UPDATE_SCREENSHOT"):
        shutil.copy(shot, Path(__file__).parents[2] / "docs" / "img" / "report.png")

    r = lwm("report", tmp_path / "missing", "--out", tmp_path / "x.html")
    assert r.returncode == 2 and f"error: {tmp_path / 'missing'}: no such run directory" in r.stderr


def test_damaged_runs_are_named_and_run_files_never_overwritten(tmp_path):
    from lwm.errors import RowFormatError

    run = tmp_path / "run"
    run.mkdir()
    (run / "predictions.jsonl").write_text(json.dumps({"key": 5, "domain": "db"}) + "\n")
    with pytest.raises(RowFormatError, match="run/?:0: an eval run whose files lwm did not write this way"):
        write_html_report([run], tmp_path / "r.html")
    agent = tmp_path / "agent"
    agent.mkdir()
    for name, text in (("agent_eval.json", "{}"), ("episodes.jsonl", ""), ("summary.json", '{"domains": 5}')):
        (agent / name).write_text(text + "\n")
    with pytest.raises(RowFormatError, match="agent:0: an agent eval run whose files lwm did not write this way"):
        write_html_report([agent], tmp_path / "r.html")
    with pytest.raises(FileExistsError, match="not an HTML file"):
        write_html_report([run], run / "predictions.jsonl")


def hand_run(tmp: Path, name: str, exact: list[float], trivial: bool = True, domain: str = "db") -> Path:
    """An eval run directory as `lwm eval` writes it, with chosen scores (its data gone)."""
    run = tmp / name
    run.mkdir()
    recs = [{"key": f"{i:06d}-{i:012x}", "domain": domain, "id": f"{domain}/t/run0", "turn_idx": 1, "observation": "x",
             "error": None, "parse_issues": [], "fidelity": {"exact": e, "edit_similarity": e, "line_f1": e}}
            | ({"trivial_fidelity": {"exact": 0.0, "edit_similarity": 0.5, "line_f1": 0.5}} if trivial else {})
            for i, e in enumerate(exact)]
    (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (run / "summary.json").write_text(json.dumps({"run": {"model": "hf:some/model", "data": str(tmp / "moved-away")}}))
    return run


def bars(html: str, title: str) -> tuple[float, list[tuple[float, float]]]:
    """The axis width and the (value, width) of the bars of the first screen's chart titled ``title``."""
    svg = next(s for s in re.findall(r'<svg[^>]*class="scale-chart".*?</svg>', html, re.S)
               if f'aria-label="{title}"' in s)
    axis = float(re.search(r'<rect class="plot"[^>]* width="([\d.]+)"', svg).group(1))
    return axis, [(float(v), float(w)) for w, v in
                  re.findall(r'<rect class="bar"[^>]* width="([\d.]+)"[^>]* data-value="([\d.]+)"', svg)]


def test_first_screen_charts_are_on_a_fixed_scale(tmp_path):
    """One exact row of 81 is 1.23 ×100: a bar 1.23 % of the axis, not the whole chart."""
    run = hand_run(tmp_path, "one-of-81", [1.0] + [0.0] * 80)
    html = write_html_report([run], tmp_path / "r.html").read_text()
    axis, drawn = bars(html, "exact ×100 by domain")
    ((value, width),) = drawn
    assert value == 1.23 and width / axis == pytest.approx(0.0123, abs=1e-4)
    axis, drawn = bars(html, "line F1 ×100 by domain")  # the run, then the trivial reference (grey) beside it
    assert [v for v, _ in drawn] == [1.23, 50.0] and drawn[1][1] / axis == pytest.approx(0.5, abs=1e-4)
    assert 'fill="#b4b9be"' in html and "trivial reference (baseline:trivial)</text>" in html
    # the headline in a sentence against the trivial reference, the numbers ×100
    assert ("Line F1 (the headline score, ×100, domain db): <strong>1.2</strong> for one-of-81 (hf:some/model) "
            "against <strong>50.0</strong> for the trivial reference (baseline:trivial) on the same 81 rows.") in html
    # the wide table and every chart of pygal behind the fold, those on a fixed scale too
    fold = html[html.index('<details class="all">'):]
    fold = fold[:fold.index("</details>")]
    assert "<h3>Summary</h3>" in fold and "<h3>By turn depth</h3>" in fold and "macro trivial line f1" in fold
    assert "<h3>Summary</h3>" not in html.replace(fold, "")
    depth_chart = next(svg for svg in fold.split("</svg>") if ">exact by turn depth<" in svg)
    assert ">100<" in depth_chart  # its axis reaches 100, not 1.23


def test_scale_chart_widens_only_for_a_value_above_the_top():
    from lwm.eval.html_report import scale_chart

    def ratio(svg):
        axis = float(re.search(r'class="plot"[^>]* width="([\d.]+)"', svg).group(1))
        return [round(float(w) / axis, 3) for w in re.findall(r'class="bar"[^>]* width="([\d.]+)"', svg)]

    assert ratio(scale_chart("t", ["a", "b"], {"run": [25.0, None]})) == [0.25]
    assert "no value" in scale_chart("t", ["a", "b"], {"run": [25.0, None]})
    assert ratio(scale_chart("t", ["a"], {"run": [0.5], "ref": [2.0]}, top=1, references=("ref",))) == [0.25, 1.0]
    assert "&lt;b&gt;" in scale_chart("<b>", ["<b>"], {"<b>": [1.0]})  # names stay text


def test_the_trivial_reference_is_scored_when_the_run_did_not_record_it(runs, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(runs[1], old)  # repeat-last
    recs = predictions(old)
    (old / "predictions.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "trivial_fidelity"})
                                                   + "\n" for r in recs))
    summary = json.loads((runs[1] / "summary.json").read_text())
    html = write_html_report([old], tmp_path / "r.html").read_text()
    assert (f"against <strong>{summary['macro']['trivial_line_f1']:.1f}</strong> for the trivial reference "
            f"(baseline:trivial) (scored by this report: the run did not record it) on the same {len(recs)} rows") in html
    # without its data, nothing to score it on: said so
    gone = hand_run(tmp_path, "gone", [1.0, 0.0], trivial=False)
    html = write_html_report([gone], tmp_path / "r2.html").read_text()
    assert "the trivial reference (baseline:trivial) is not available: the data this run read is not found." in html
