"""What a model name means (lwm.models.registry), the one place names are read, and lwm models."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

from lwm.cli import app, serve_app
from lwm.eval.baselines import RowBaseline, load_predictor
from lwm.models import NAMED, WORLD_MODEL, load_model, resolve
from lwm.models.embedded import VERDICT_ADAPTER, WARMUP_ADAPTER
from lwm.models.registry import shipped_adapter_file


def test_every_kind_of_name_resolves_to_one_meaning():
    assert resolve("embedded") == NAMED["embedded"] and resolve("embedded").takes_adapter
    warmup = resolve(WORLD_MODEL)
    assert (warmup.kind, warmup.adapter, warmup.takes_adapter) == ("embedded", "smollm2-135m-warmup.gguf", False)
    assert shipped_adapter_file(warmup) == WARMUP_ADAPTER and shipped_adapter_file(NAMED["embedded-verdict"]) == \
        VERDICT_ADAPTER and WARMUP_ADAPTER.is_file()
    assert (resolve("m.gguf").kind, resolve("m.gguf").path, resolve("m.gguf").takes_adapter) == ("gguf", "m.gguf", True)
    assert (resolve("hf:/models/x").kind, resolve("hf:/models/x").path) == ("hf", "/models/x")
    served = resolve("embedded-warmup", base_url="http://127.0.0.1:8000/v1")   # a server's name is its own
    assert served.kind == "served" and not served.takes_adapter
    assert resolve("baseline:trivial").is_reference and resolve("baseline:repeat-last").kind == "reference"


def test_every_shipped_adapter_is_the_file_its_record_describes():
    shipped = [ref for ref in NAMED.values() if ref.adapter]
    assert {ref.name for ref in shipped} == {"embedded-warmup", "embedded-verdict", "embedded-agent"}
    for ref in shipped:
        path = shipped_adapter_file(ref)
        record = json.loads(path.with_suffix(".json").read_text())
        assert record["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest(), ref.name
        assert path.stat().st_size <= 20 * 2**20 and record["commands"], ref.name   # issue 22: 20 MB at most


def test_bad_names_are_refused_with_what_is_known():
    with pytest.raises(ValueError, match="unknown baseline 'best'; expected one of repeat-last, trivial"):
        resolve("baseline:best")
    with pytest.raises(ValueError, match="takes no endpoint"):
        resolve("baseline:trivial", base_url="http://127.0.0.1:8000/v1")
    with pytest.raises(ValueError, match="empty"):
        resolve("  ")
    with pytest.raises(ValueError, match="already has its adapter"):
        load_model(WORLD_MODEL, adapter="other.gguf")
    with pytest.raises(ValueError, match="applies to a local llama.cpp model"):
        load_model("hf:/models/x", adapter="other.gguf")
    with pytest.raises(ValueError, match="reference predictor of lwm eval"):
        load_model("baseline:trivial")
    assert isinstance(load_predictor("baseline:trivial"), RowBaseline)


def test_lwm_models_lists_the_named_models_and_references_and_serve_model_still_serves():
    result = CliRunner().invoke(app, ["models"])
    assert result.exit_code == 0
    for name in [*NAMED, "baseline:trivial", "baseline:repeat-last"]:
        assert name in result.output
    assert f"{WORLD_MODEL} (default)" in result.output
    commands = {c.name: c.callback.__name__ for c in serve_app.registered_commands}
    assert commands == {"env": "serve_env", "mcp": "serve_mcp", "model": "serve_model"}
