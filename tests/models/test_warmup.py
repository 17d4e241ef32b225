"""The shipped warm-up adapter: small, loadable in both llama.cpp paths, the default world
model, and better than the base model on real held-out rows."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lwm.cli import app
from lwm.errors import ModelUnavailableError
from lwm.eval.runner import EvalConfig, evaluate, load_rows
from lwm.models import WORLD_MODEL, load_model
from lwm.models.base import SamplingParams
from lwm.models.embedded import VERDICT_ADAPTER, WARMUP_ADAPTER, embedded_gguf_path
from lwm.parse import DEFAULT_STOP

llama_cpp = pytest.importorskip("llama_cpp")

# Nine real turns from task families the shipped adapter never trained on (docs/results.md):
# the first three of a terminal `files` and a db `joins` episode, and the first turn of three
# code `upper-variable` agent episodes (a policy's real attempts).
SAMPLE = Path(__file__).parents[1] / "fixtures" / "warmup"


def test_the_adapter_is_small_and_documented():
    from gguf import GGUFReader

    assert WARMUP_ADAPTER.stat().st_size <= 20 * 2**20
    fields = GGUFReader(WARMUP_ADAPTER).fields
    assert bytes(fields["general.type"].parts[-1]).decode() == "adapter"
    assert bytes(fields["general.architecture"].parts[-1]).decode() == "llama"
    meta = json.loads(WARMUP_ADAPTER.with_suffix(".json").read_text())
    assert meta["training"]["steps"] > 0 and meta["data"]["counts"]["train"] > 0
    import hashlib

    assert meta["sha256"] == hashlib.sha256(WARMUP_ADAPTER.read_bytes()).hexdigest()


async def test_default_world_model_is_the_warm_up():
    wm = load_model()
    try:
        assert WORLD_MODEL == "embedded-warmup" and wm.name == "SmolLM2-135M-Instruct-Q4_1+smollm2-135m-warmup"
    finally:
        await wm.aclose()
    with pytest.raises(ValueError, match="already has its adapter"):
        load_model(WORLD_MODEL, adapter=str(WARMUP_ADAPTER))


def test_bad_adapters_are_refused_before_llama_cpp_sees_them(tmp_path):
    from lwm.models.embedded import embedded_gguf_path

    junk = tmp_path / "junk.gguf"
    junk.write_text("not a model")
    for path, message in ((tmp_path / "missing.gguf", "no adapter file"), (junk, "not a GGUF file"),
                          (embedded_gguf_path(), "not a LoRA adapter")):
        with pytest.raises(ModelUnavailableError, match=message):
            load_model("embedded", adapter=str(path))
    r = subprocess.run([sys.executable, "-m", "lwm.cli", "eval", "--adapter", str(junk), "--data", str(SAMPLE),
                        "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "not a GGUF file" in r.stderr and not (tmp_path / "run" / "run.json").exists()


def test_served_with_the_adapter(tmp_path):
    from lwm.models.server import create_app, served_files

    assert create_app(adapter="warmup", prompt_cache_bytes=0).state.lwm_model_name == \
        create_app(model="embedded-warmup", prompt_cache_bytes=0).state.lwm_model_name == \
        "SmolLM2-135M-Instruct-Q4_1+smollm2-135m-warmup"
    assert served_files("embedded-verdict") == (embedded_gguf_path(), VERDICT_ADAPTER)   # a registry name
    assert served_files(str(embedded_gguf_path())) == (embedded_gguf_path(), None)        # a GGUF file
    with pytest.raises(ModelUnavailableError, match="no adapter file"):
        create_app(adapter=str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelUnavailableError, match="no model file"):
        served_files(str(tmp_path / "missing.gguf"))
    with pytest.raises(ValueError, match="already has its adapter"):
        served_files("embedded-verdict", adapter="warmup")
    for name in ("hf:/models/x", "baseline:trivial"):
        r = CliRunner().invoke(app, ["serve-model", "--model", name])
        assert r.exit_code == 2 and "serves a llama.cpp model" in r.output, r.output


@pytest.mark.slow
async def test_warm_up_beats_the_base_model_on_held_out_rows(tmp_path):
    rows = load_rows(SAMPLE)
    assert len(rows) == 9
    sampling = SamplingParams(temperature=0.0, max_tokens=320, stop=DEFAULT_STOP)
    f1 = {}
    for spec in ("embedded", WORLD_MODEL):
        model = load_model(spec)
        try:
            summary = await evaluate(EvalConfig(out=tmp_path / spec, sampling=sampling), model, rows=rows,
                                     show_progress=False)
        finally:
            await model.aclose()
        assert summary["failed"] == 0
        f1[spec] = summary["macro"]["line_f1"]
    assert f1[WORLD_MODEL] >= f1["embedded"] + 20, f1


async def test_adapter_applied_at_run_time_when_the_merged_copy_cannot_be_cached(tmp_path, monkeypatch, caplog):
    from lwm.models.embedded import LlamaCppChatModel, embedded_gguf_path, merged_gguf

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("LWM_HOME", str(blocker / "home"))
    assert merged_gguf(embedded_gguf_path(), WARMUP_ADAPTER) is None
    assert "applying" in caplog.text and "at run time" in caplog.text
    wm = LlamaCppChatModel(lora_path=WARMUP_ADAPTER)
    try:
        out = await wm.generate([{"role": "user", "content": "$ echo hi"}], SamplingParams(max_tokens=8))
        assert out.completion_tokens > 0
    finally:
        await wm.aclose()


def test_an_adapter_record_says_how_the_model_is_asked(tmp_path):
    from lwm.models.embedded import adapter_request

    assert adapter_request(None) == ("full", False)
    assert adapter_request(tmp_path / "none.gguf") == ("full", False)  # no record beside it
    record = tmp_path / "a.json"
    for text, expected in (('{"prediction": "change", "compact_tools": true}', ("change", True)),
                           ('{"prediction": "diff", "compact_tools": "yes"}', ("full", False)),
                           ("[1, 2]", ("full", False)), ("{not json", ("full", False))):
        record.write_text(text)
        assert adapter_request(tmp_path / "a.gguf") == expected, text
    shipped = json.loads(WARMUP_ADAPTER.with_suffix(".json").read_text())
    assert adapter_request(WARMUP_ADAPTER) == (shipped.get("prediction", "full"), shipped.get("compact_tools") is True)


def test_an_adapter_record_says_which_families_it_never_trained_on():
    from lwm.models.embedded import adapter_record, heldout_families

    def stage(train, validation=None, previous=None):
        splits = {"train": {"families": train}} | ({"validation": {"families": validation}} if validation else {})
        return {"data": {"splits": splits}} | ({"previous": previous} if previous is not None else {})

    assert heldout_families({}) is None and heldout_families({"data": {"splits": "x"}}) is None
    assert heldout_families(stage(["t/a"], ["t/b", "t/c"])) == {"t/b", "t/c"}
    # an earlier stage trained on t/c: only t/b was never seen
    assert heldout_families(stage(["t/a"], ["t/b", "t/c"], stage(["t/c"], ["t/b"]))) == {"t/b"}
    assert heldout_families(stage(["t/a"], ["t/b"], stage(["t/c"], ["t/b"], stage(["t/d"])))) == {"t/b"}
    # a continuation on new data alone (no validation families) keeps what earlier stages held out,
    # unless it trains on it
    assert heldout_families(stage(["t/x"], None, stage(["t/a"], ["t/b"]))) == {"t/b"}
    assert heldout_families(stage(["t/b"], None, stage(["t/a"], ["t/b"]))) == frozenset()
    assert heldout_families(stage(["t/x"], None, stage(["t/a"]))) is None  # no stage held anything out
    # a training list with anything but names in it records nothing: unknown, not "trained on nothing"
    assert heldout_families(stage([{"name": "t/b"}], ["t/b"])) is None
    assert heldout_families(stage([""], ["t/b"])) is None
    # an earlier stage whose training data no record names: nothing is known to be held out
    assert heldout_families(stage(["t/a"], ["t/b"], {"init_adapter": "x"})) is None
    assert heldout_families(stage(["t/a"], ["t/b"], "bogus")) is None
    # the shipped adapter held terminal/long-running out of its last two stages, not its first
    shipped = heldout_families(adapter_record(WARMUP_ADAPTER))
    assert {"terminal/files", "terminal/pipes"} <= shipped and "terminal/long-running" not in shipped
    assert "terminal/long-running" in adapter_record(WARMUP_ADAPTER)["data"]["splits"]["validation"]["families"]
    assert load_model(WORLD_MODEL).heldout_families == shipped
    assert load_model("embedded").heldout_families is None
