"""`lwm data build`: template, token budget, dedup, first run only, leakage-free splits."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lwm import domains
from lwm.cli.data import data_app
from lwm.data.build import (
    SPLITS,
    BuildConfig,
    assign_splits,
    build,
    fit_messages,
    format_target,
    load_built,
    load_tokenizer,
    read_built,
)
from lwm.data.collect import CollectConfig, collect
from lwm.errors import RowFormatError
from lwm.eval.runner import load_rows
from lwm.jsonl import iter_jsonl
from lwm.parse import observation_text, parse_output
from lwm.prompts import build_messages
from lwm.schema import (
    Provenance,
    Trajectory,
    Turn,
    read_trajectories,
    rows_from_trajectory,
    write_rows,
    write_trajectories,
)


@pytest.fixture(scope="session")
def tok():
    return load_tokenizer("embedded")


@pytest.fixture(scope="session")
def real_db(tmp_path_factory):
    """Real SQLite transitions: the first 4 episodes of the db suite, played twice."""
    out = tmp_path_factory.mktemp("collect-db")
    res = collect(CollectConfig(out=out, domain="db", episodes=4, runs=2, workers=4), show_progress=False)
    assert not res.failed
    return out


def make_traj(episode: str, family: str, *, domain: str = "terminal", run: int = 0, turns: int = 3,
              obs=None, kind: str = "real") -> Trajectory:
    prov = Provenance(kind=kind, source=f"{domain}/test", run=run)
    obs = obs or (lambda i: f"{episode} step {i} done\nroot@sandbox:/app#")
    return Trajectory(
        id=f"{domain}/{episode}/run{run}", domain=domain, task=f"do {episode}",
        system_prompt=f"You simulate a {domain}.", initial_observation="root@sandbox:/app#",
        turns=[Turn(index=i, action=f"run {episode} {i}", observation=obs(i), provenance=prov)
               for i in range(1, turns + 1)],
        metadata={"episode": episode, "family": family, "run": run})


def check_no_leak(out: Path) -> dict[str, list[dict]]:
    examples, manifest = read_built(out)
    fams = {s: {r["family"] for r in examples[s]} for s in SPLITS}
    eps = {s: {r["episode"] for r in examples[s]} for s in SPLITS}
    tids = {s: {r["trajectory_id"] for r in examples[s]} for s in SPLITS}
    assert not fams["train"] & fams["validation"]
    assert not eps["train"] & eps["validation"]
    assert not tids["train"] & tids["validation"]
    for s in SPLITS:
        assert manifest["splits"][s]["families"] == sorted(fams[s])
        assert all(manifest["families"][f]["split"] == s for f in fams[s])
    return examples


def test_split_assignment_never_leaks_property():
    rng = random.Random(1234)
    for trial in range(300):
        examples, unmerged = [], {}
        for d in range(rng.randint(1, 3)):
            domain = f"d{d}"
            fams = [f"{domain}/fam{f}" for f in range(rng.randint(1, 6))]
            unmerged[domain] = True
            for e in range(rng.randint(1, 12)):
                # usually one family per episode; sometimes an episode spans two (they merge)
                spans = 2 if len(fams) > 1 and rng.random() < 0.15 else 1
                unmerged[domain] &= spans == 1
                for fam in rng.sample(fams, spans):
                    examples += [(domain, fam, f"{domain}/ep{e}")] * rng.randint(1, 5)
        vf, seed = rng.choice([0.0, 1.0, rng.random()]), rng.randint(0, 10**6)
        split = assign_splits(examples, vf, seed)
        assert set(split) == {f for _, f, _ in examples} and set(split.values()) <= set(SPLITS)
        by_episode: dict[str, set] = {}
        for _, fam, ep in examples:
            by_episode.setdefault(ep, set()).add(split[fam])
        assert all(len(s) == 1 for s in by_episode.values()), trial  # no episode on both sides
        shuffled = examples[:]
        random.Random(trial).shuffle(shuffled)
        assert assign_splits(shuffled, vf, seed) == split  # a function of the data, not of its order
        if vf in (0.0, 1.0):
            assert set(split.values()) == {"train" if vf == 0.0 else "validation"}
        else:  # every domain with two or more independent families has both splits
            for domain, independent in unmerged.items():
                fams = {f for d, f, _ in examples if d == domain}
                if independent and len(fams) >= 2:
                    assert {split[f] for f in fams} == set(SPLITS), trial


def test_build_synthetic_random_families_is_leak_free(tok, tmp_path):
    rng = random.Random(7)
    trajs = []
    for e in range(24):
        fam = f"fam{rng.randint(0, 7)}"
        trajs += [make_traj(f"ep{e}", fam, run=r, turns=rng.randint(1, 4)) for r in range(2)]
    # ep0 also appears under another family (other content): the two families must merge
    trajs.append(make_traj("ep0", "fam-other", turns=2, obs=lambda i: f"other {i}"))
    src = tmp_path / "t.jsonl"
    write_trajectories(src, trajs)
    for seed in range(3):
        out = tmp_path / f"out{seed}"
        res = build(BuildConfig([src], out, max_tokens=512, val_fraction=0.3, seed=seed), tokenizer=tok,
                    show_progress=False)
        examples = check_no_leak(out)
        assert res.counts["train"] and res.counts["validation"]
        assert res.manifest["counts"]["later_run_trajectories"] == 24
        assert all(r["trajectory_id"].endswith("/run0") for s in SPLITS for r in examples[s])
        assert res.manifest["families"]["terminal/fam-other"]["split"] == \
            res.manifest["families"][next(r["family"] for s in SPLITS for r in examples[s]
                                          if r["episode"] == "terminal/ep0" and r["family"] != "terminal/fam-other")
                                     ]["split"]


def test_real_db_examples_template_budget_first_run(real_db, tok, tmp_path):
    budget = 740  # the system prompt (about 600 tokens) and the current turn are never cut
    out = tmp_path / "ds"
    res = build(BuildConfig([real_db], out, max_tokens=budget, val_fraction=0.25), tokenizer=tok, show_progress=False)
    examples = check_no_leak(out)
    trajs = {t.id: t for t in read_trajectories(real_db / "trajectories.jsonl")}
    assert res.manifest["counts"]["later_run_trajectories"] == 4
    all_ex = examples["train"] + examples["validation"]
    assert len(all_ex) == sum(len(t.turns) for t in trajs.values() if t.id.endswith("/run0")) - \
        sum(res.manifest["counts"]["skipped"].values())
    dropped_seen = 0
    for r in all_ex:
        assert r["trajectory_id"].endswith("/run0") and r["provenance_kind"] == "real"
        # the budget holds, measured with the real tokenizer on the rendered chat template
        full = r["prompt"] + r["completion"]
        assert r["num_tokens"] == tok.count_chat(full) <= budget
        # the prompt is build_messages' layout for the row of that turn, oldest turns dropped
        traj = trajs[r["trajectory_id"]]
        row = rows_from_trajectory(traj, action_lang=domains.get(traj.domain).action_lang)[r["turn"] - 1]
        expected, _ = build_messages(row)
        k = len(r["dropped_turns"])
        assert r["dropped_turns"] == list(range(1, k + 1))
        assert r["prompt"] == expected[:1] + expected[1 + 2 * k:]
        dropped_seen += bool(k)
        # the target parses back to exactly the real observation; no reasoning → no <think>
        parsed = parse_output(r["completion"][0]["content"])
        assert parsed.observation == r["observation"]
        assert parsed.issues == ([] if r["observation"] else ["empty"])  # a statement with no output
        assert "<think>" not in r["completion"][0]["content"]
        assert r["source"].startswith(str(real_db / "trajectories.jsonl") + ":")
    assert dropped_seen > 0  # the budget was tight enough to matter
    # the held-out rows are exactly the validation examples' turns, ready for `lwm eval --data`
    heldout = load_rows(out / "heldout")
    assert [(str(r.id), r.turn_idx) for r in heldout] == \
        [(r["trajectory_id"], r["turn"]) for r in examples["validation"]]
    assert all(observation_text(r.ground_truth) == e["observation"] for r, e in zip(heldout, examples["validation"]))
    assert [r.model_extra["family"] for r in heldout] == [e["family"] for e in examples["validation"]]
    # the held-out rows build again, families kept
    again = build(BuildConfig([out / "heldout"], tmp_path / "again", max_tokens=budget, val_fraction=1.0),
                  tokenizer=tok, show_progress=False)
    assert sorted(again.manifest["families"]) == res.manifest["splits"]["validation"]["families"]
    assert res.manifest["counts"]["examples_with_dropped_turns"] == dropped_seen
    # Parquet holds the same records, loadable with `datasets`
    ds = load_built(out)
    for s in SPLITS:
        assert ds[s].num_rows == len(examples[s])
        assert ds[s].to_list() == examples[s]
    import datasets

    loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))
    assert loaded["train"].num_rows == len(examples["train"])


def test_target_over_budget_and_simulated_are_skipped_and_counted(tok, tmp_path):
    huge = " ".join(f"word{i}" for i in range(600))
    trajs = [make_traj("big", "f1", obs=lambda i: huge if i == 2 else f"line {i}"),
             make_traj("sim", "f2", kind="simulated"), make_traj("ok", "f3")]
    src = tmp_path / "t.jsonl"
    write_trajectories(src, trajs)
    res = build(BuildConfig([src], tmp_path / "out", max_tokens=400), tokenizer=tok, show_progress=False)
    c = res.manifest["counts"]
    assert c["skipped"]["target_over_budget"] == 1
    assert c["simulated_turns"] == 3
    assert c["train"] + c["validation"] == 2 + 3
    # the budget also applies to a single example on its own
    assert fit_messages([{"role": "user", "content": "x"}], format_target(huge), tok, 400) == "target_over_budget"


def test_dedup_across_files_and_formats(tok, tmp_path):
    trajs = [make_traj(f"e{i}", f"f{i % 3}") for i in range(6)]
    a, b = tmp_path / "a" / "trajectories.jsonl", tmp_path / "b.jsonl"
    write_trajectories(a, trajs)
    write_trajectories(b, trajs)
    rows = tmp_path / "terminal_test.jsonl"
    write_rows(rows, [row for t in trajs for row in rows_from_trajectory(t)])
    res = build(BuildConfig([a.parent, b, rows], tmp_path / "out", max_tokens=1024), tokenizer=tok,
                show_progress=False)
    c = res.manifest["counts"]
    assert c["train"] + c["validation"] == 18
    assert c["duplicates"] == 36  # the same turns from the second file and from the rows file
    ids = [r["id"] for s in SPLITS for r in read_built(tmp_path / "out")[0][s]]
    assert len(ids) == len(set(ids))


def test_malformed_input_names_file_and_line(tok, tmp_path):
    good = make_traj("e", "f").model_dump_json()
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text(f"{good}\n{good}\n{{not json\n")
    with pytest.raises(RowFormatError, match=rf"{bad_json}:3: not valid JSON"):
        build(BuildConfig([bad_json], tmp_path / "o"), tokenizer=tok, show_progress=False)
    missing = tmp_path / "missing.jsonl"
    obj = json.loads(good)
    del obj["system_prompt"]
    missing.write_text(f"{good}\n{json.dumps(obj)}\n")
    with pytest.raises(RowFormatError, match=rf"{missing}:2: system_prompt"):
        build(BuildConfig([missing], tmp_path / "o"), tokenizer=tok, show_progress=False)
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n')
    result = CliRunner().invoke(data_app, ["build", "--from", str(other), "--out", str(tmp_path / "o"),
                                           "--no-progress"])
    assert result.exit_code == 2
    assert f"{other}:1" in result.output and "neither a trajectory" in result.output
    assert not (tmp_path / "o").exists()


def test_cli_build(tok, tmp_path):
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    write_trajectories(d1 / "trajectories.jsonl", [make_traj(f"a{i}", f"fa{i}") for i in range(4)])
    write_trajectories(d2 / "trajectories.jsonl", [make_traj(f"b{i}", f"fb{i}", domain="db") for i in range(4)])
    out = tmp_path / "out"
    result = CliRunner().invoke(data_app, ["build", "--from", str(d1), str(d2), "--out", str(out),
                                           "--max-tokens", "512", "--val-fraction", "0.25", "--no-progress"])
    assert result.exit_code == 0, result.output
    examples = check_no_leak(out)
    domains = {s: {r["domain"] for r in examples[s]} for s in SPLITS}
    assert domains["train"] == domains["validation"] == {"terminal", "db"}  # every domain is held out in part
    assert sum(1 for _ in iter_jsonl(out / "train.jsonl")) == len(examples["train"])


def screens_traj(episode: str, family: str, commands: list[tuple[str, str]]) -> Trajectory:
    """A terminal episode whose screens grow as a real one's do (``clear`` empties it)."""
    prov = Provenance(kind="real", source="terminal/test", run=0)
    prompt, lines, turns = "root@sandbox:/app#", ["root@sandbox:/app#"], []
    for i, (cmd, out) in enumerate(commands, start=1):
        lines = [prompt] if cmd == "clear" else lines[:-1] + [f"{prompt} {cmd}", *out.split("\n"), prompt]
        turns.append(Turn(index=i, action=json.dumps([{"keystrokes": cmd + "\n", "duration": 0.3}]),
                          observation="\n".join(lines), provenance=prov))
    return Trajectory(id=f"terminal/{episode}/run0", domain="terminal", system_prompt=domains.get("terminal").system_prompt(),
                      initial_observation=prompt, turns=turns, metadata={"episode": episode, "family": family})


def test_change_mode_targets_changes_and_counts_what_no_change_renders(tok, tmp_path):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [screens_traj(f"e{i}", f"f{i}", [("ls", f"a{i}.txt"), (f"cat a{i}.txt", "hi"),
                                                             ("clear", ""), ("pwd", "/app")]) for i in range(4)])
    res = build(BuildConfig([src], tmp_path / "out", max_tokens=1024, prediction="change", prompt_variety=True),
                tokenizer=tok, show_progress=False)
    c = res.manifest["counts"]
    assert c["skipped"]["change_unrenderable"] == 4 and c["train"] + c["validation"] == 12
    assert res.manifest["settings"]["prediction"] == "change"
    examples = [r for s in SPLITS for r in read_built(tmp_path / "out")[0][s]]
    cat = next(r for r in examples if r["turn"] == 2)
    written = parse_output(cat["completion"][0]["content"]).observation
    assert written == f"root@sandbox:/app# cat {cat['episode'].split('/')[1].replace('e', 'a')}.txt\nhi\nroot@sandbox:/app#"
    assert cat["observation"].startswith("root@sandbox:/app# ls\n")  # the full observation is kept beside it
    assert domains.get("terminal").change_instruction in cat["prompt"][0]["content"]
    pwd = next(r for r in examples if r["turn"] == 4 and r["episode"] == cat["episode"])
    history = [m["content"] for m in pwd["prompt"] if m["role"] == "assistant"]
    assert "cat a" in history[1] and "# ls" not in history[1]  # turn 2 shown as its change
    phrasings = {r["prompt"][0]["content"].split("\n")[0] for r in examples}
    assert len(phrasings) > 1  # several phrasings of the same system prompt
    unseen = load_rows(tmp_path / "out" / "heldout-unseen-phrasing")
    seen = load_rows(tmp_path / "out" / "heldout")
    assert len(unseen) == len(seen) and unseen[0].system_str != seen[0].system_str
    assert unseen[0].system_str.startswith("You will play the part of")


def test_a_build_without_prompt_variety_leaves_no_earlier_unseen_phrasing_rows(tok, tmp_path):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [make_traj(f"e{i}", f"f{i}") for i in range(4)])
    out = tmp_path / "out"
    build(BuildConfig([src], out, prompt_variety=True), tokenizer=tok, show_progress=False)
    assert (out / "heldout-unseen-phrasing").is_dir()
    build(BuildConfig([src], out), tokenizer=tok, show_progress=False)
    assert not (out / "heldout-unseen-phrasing").exists()
