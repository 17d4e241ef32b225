"""Warm-up SFT (TRL + PEFT LoRA) on the embedded SmolLM2-135M, resume, and export to llama.cpp.

The training tests share one short real run (8 examples, 6 steps, about 40 s on 2 cores;
the first run on a machine also converts the embedded GGUF to a cached float32 folder,
about 40 s more). The task: a terminal world model predicting the screen after
``echo WORD``, judged on words never seen in training.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("datasets")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from typer.testing import CliRunner  # noqa: E402

from lwm.cli.train import train_app  # noqa: E402
from lwm.errors import DataNotFoundError, RowFormatError, RunMismatchError  # noqa: E402
from lwm.jsonl import _umask  # noqa: E402
from lwm.train.sft import TrainConfig, load_sft_dataset, to_prompt_completion  # noqa: E402

SYSTEM = "You are a bash terminal."
TRAIN_WORDS = "apple river stone cloud maple tiger piano lemon".split()


def example(word: str) -> dict:
    return {
        "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"$ echo {word}"}],
        "completion": [{"role": "assistant",
                        "content": f"<predicted_observation>\n{word}\n$\n</predicted_observation>"}],
        "provenance": "real",  # extra columns are ignored
    }


def prompt(word: str) -> list[dict]:
    return example(word)["prompt"]


def write_dataset(path: Path, train: list[dict], validation: list[dict] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(train), path / "train.parquet")
    if validation:
        pq.write_table(pa.Table.from_pylist(validation), path / "validation.parquet")
    return path


# ----------------------------------------------------------------------------- input checks (no model)


def test_row_forms_are_converted_to_prompt_completion():
    target = {"role": "assistant", "content": "hi"}
    user = {"role": "user", "content": "$ echo hi", "name": None}
    want = {"prompt": [{"role": "user", "content": "$ echo hi"}], "completion": [target]}
    assert to_prompt_completion({"messages": [user, target]}) == want
    assert to_prompt_completion({"messages": [user], "completion": "hi"}) == want
    assert to_prompt_completion({"prompt": [user], "completion": [target], "id": 3}) == want


def test_bad_input_gives_clear_errors(tmp_path):
    with pytest.raises(DataNotFoundError, match="no dataset directory"):
        load_sft_dataset(tmp_path / "missing")

    only_val = write_dataset(tmp_path / "noval", [example("a")])
    (only_val / "train.parquet").rename(only_val / "validation.parquet")
    with pytest.raises(DataNotFoundError, match="no train split.*found: validation.parquet"):
        load_sft_dataset(only_val)

    rows = [example(w) for w in ("a", "b", "c")]
    rows[2]["completion"] = [{"role": "user", "content": "c"}]
    with pytest.raises(RowFormatError, match=r"train\.parquet:3: 'completion' must be exactly one assistant"):
        load_sft_dataset(write_dataset(tmp_path / "badrole", rows))

    jsonl = tmp_path / "jsonl"
    jsonl.mkdir()
    lines = [example("a"), {"prompt": "$ echo b", "completion": "b"}]
    (jsonl / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    with pytest.raises(RowFormatError, match=r"train\.jsonl:2: 'prompt' is a string"):
        load_sft_dataset(jsonl)

    ok = load_sft_dataset(write_dataset(tmp_path / "ok", [example("a"), example("b")], [example("c")]))
    assert ok["train"].column_names == ["prompt", "completion"] and len(ok["validation"]) == 1

    # The CLI: one error line, exit code 2, before any model is loaded.
    res = CliRunner().invoke(train_app, ["sft", "--data", str(tmp_path / "badrole"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "train.parquet:3" in res.output
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        TrainConfig(data=tmp_path, out=tmp_path, batch_size=0)
    with pytest.raises(ValueError, match="unknown order 'sorted' \\(one of random, file\\)"):
        TrainConfig(data=tmp_path, out=tmp_path, order="sorted")
    with pytest.raises(ValueError, match="unknown order \\['file'\\]"):
        TrainConfig(data=tmp_path, out=tmp_path, order=["file"])


# ----------------------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    from lwm.train.sft import train_sft

    root = tmp_path_factory.mktemp("sft")
    data = write_dataset(root / "data", [example(w) for w in TRAIN_WORDS], [example("orange"), example("candle")])
    config = TrainConfig(data=data, out=root / "run", max_steps=6, batch_size=8, lr=2e-3, lora_dropout=0.0,
                         save_steps=3, logging_steps=1, eval_on_start=True)
    return config, train_sft(config, show_progress=False)


@pytest.fixture(scope="module")
def tuned(run):
    """The trained adapter loaded on its base model (transformers + PEFT), and its greedy
    answer to the held-out ``$ echo banana``."""
    from lwm.train.sft import load_trained_model

    model, tokenizer = load_trained_model(run[1].adapter_dir)
    return model, tokenizer, greedy(model, tokenizer, prompt("banana"))


def greedy(model, tokenizer, messages: list[dict], max_new_tokens: int = 24) -> str:
    import torch

    enc = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


@pytest.mark.slow
def test_training_lowers_the_loss_and_the_adapter_reloads_and_generates(run, tuned):
    config, res = run
    assert res.steps == 6 and res.resumed_from is None and res.train_examples == 8 and res.eval_examples == 2
    losses = [h["loss"] for h in res.log_history if "loss" in h]
    assert len(losses) == 6 and losses[-1] < losses[0] / 4
    assert res.eval_loss_start > 2.0 and res.eval_loss < res.eval_loss_start / 4  # held-out words
    assert res.train_tokens > 0 and res.tokens_per_second > 0
    assert {p.name for p in config.out.glob("checkpoint-*")} == {"checkpoint-3", "checkpoint-6"}
    metrics = json.loads((config.out / "metrics.json").read_text())
    assert metrics["steps"] == 6 and metrics["eval_loss"] == pytest.approx(res.eval_loss)

    model, tokenizer, answer = tuned
    with model.disable_adapter():
        base = greedy(model, tokenizer, prompt("banana"))
    assert answer == "<predicted_observation>\nbanana\n$\n</predicted_observation>"
    assert base != answer and "<predicted_observation>" not in base


@pytest.mark.slow
def test_resume_continues_the_step_count(run, tmp_path):
    from lwm.train.sft import train_sft

    config, _ = run
    out = tmp_path / "run"
    shutil.copytree(config.out, out)
    again = TrainConfig(**{**config.__dict__, "out": out, "max_steps": 7, "eval_on_start": False})
    with pytest.raises(FileExistsError, match="pass --resume"):
        train_sft(again, show_progress=False)
    with pytest.raises(RunMismatchError, match="lr: started with 0.002, now 0.001"):
        train_sft(TrainConfig(**{**again.__dict__, "resume": True, "lr": 1e-3}), show_progress=False)
    with pytest.raises(RunMismatchError, match="order"):   # another order would skip other examples
        train_sft(TrainConfig(**{**again.__dict__, "resume": True, "order": "file"}), show_progress=False)

    res = train_sft(TrainConfig(**{**again.__dict__, "resume": True}), show_progress=False)
    assert res.resumed_from.name == "checkpoint-6" and res.steps == 7
    assert [h["step"] for h in res.log_history if "loss" in h] == [1, 2, 3, 4, 5, 6, 7]  # history carried over
    first_step = next(h for h in res.log_history if "loss" in h)  # every step is the same batch of 8
    assert res.train_tokens == first_step["num_tokens"]  # this call trained one step only
    assert (out / "checkpoint-7").is_dir() and (out / "adapter" / "adapter_model.safetensors").is_file()
    # a checkpoint exports too: its base model comes from the run's settings
    cli = CliRunner().invoke(train_app, ["export", "--adapter", str(out / "checkpoint-7"),
                                         "--out", str(tmp_path / "ck.gguf")])
    assert cli.exit_code == 0, cli.output
    assert (tmp_path / "ck.gguf").stat().st_mode & 0o777 == 0o666 & ~_umask()


@pytest.mark.slow
def test_export_loads_in_llama_cpp_and_matches_peft(run, tuned, tmp_path):
    llama_cpp = pytest.importorskip("llama_cpp")
    import numpy as np
    import torch

    from lwm.models.embedded import embedded_gguf_path

    _, res = run
    out = tmp_path / "adapter.gguf"
    cli = CliRunner().invoke(train_app, ["export", "--adapter", str(res.adapter_dir), "--out", str(out)])
    assert cli.exit_code == 0, cli.output
    assert "420 tensors" in cli.output and 9e6 < out.stat().st_size < 11e6  # r=16 on 7 projections × 30 blocks, f16
    said = " ".join(cli.output.split())
    assert "prediction full" in said and "has no lwm data build manifest.json" in said  # these parquet files have none

    model, tokenizer, hf_answer = tuned
    messages = prompt("banana")
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True)["input_ids"]
    with torch.inference_mode():
        hf_tuned = model(ids).logits[0, -1].numpy()
        with model.disable_adapter():
            hf_base = model(ids).logits[0, -1].numpy()

    def llama(lora: Path | None):
        return llama_cpp.Llama(model_path=str(embedded_gguf_path()), lora_path=str(lora) if lora else None,
                               n_ctx=512, n_threads=2, logits_all=True, verbose=False)

    def answer(llm) -> str:
        out = llm.create_chat_completion(messages=messages, temperature=0, max_tokens=24, repeat_penalty=1.0)
        return out["choices"][0]["message"]["content"]

    def last_logits(llm) -> np.ndarray:
        llm.reset()
        llm.eval(ids[0].tolist())
        return np.array(llm.scores[llm.n_tokens - 1])

    base_llm, tuned_llm = llama(None), llama(out)
    assert answer(tuned_llm) == hf_answer == \
        "<predicted_observation>\nbanana\n$\n</predicted_observation>"
    assert answer(base_llm) != answer(tuned_llm)
    # The adapter shifts llama.cpp's next-token logits as it shifts transformers' (the q/k
    # row permutation matters here: without it the correlation falls far below).
    shift_cpp = last_logits(tuned_llm) - last_logits(base_llm)
    assert np.corrcoef(hf_tuned - hf_base, shift_cpp)[0, 1] > 0.95


def test_export_rejects_what_llama_cpp_cannot_apply(tmp_path):
    from lwm.train.export import AdapterExportError, export_lora_gguf

    with pytest.raises(DataNotFoundError, match="adapter_config.json"):
        export_lora_gguf(tmp_path, tmp_path / "a.gguf")
    np = pytest.importorskip("numpy")
    from safetensors.numpy import save_file

    cfg = {"peft_type": "LORA", "r": 2, "lora_alpha": 4, "use_dora": True}
    (tmp_path / "adapter_config.json").write_text(json.dumps(cfg))
    (tmp_path / "lwm_adapter.json").write_text(json.dumps({"model": "embedded"}))
    save_file({"base_model.model.lm_head.lora_A.weight": np.zeros((2, 576), np.float32)},
              str(tmp_path / "adapter_model.safetensors"))
    with pytest.raises(AdapterExportError, match="use_dora"):
        export_lora_gguf(tmp_path, tmp_path / "a.gguf")
    cfg["use_dora"] = False
    (tmp_path / "adapter_config.json").write_text(json.dumps(cfg))
    with pytest.raises(AdapterExportError, match="lm_head.*cannot apply"):
        export_lora_gguf(tmp_path, tmp_path / "a.gguf", base=tmp_path)  # checked before the base is needed
    # broken files are named in the error, not a parser's traceback
    (tmp_path / "adapter_config.json").write_text('{"peft_type": "LORA",\n "r": 2')
    with pytest.raises(RowFormatError, match=r"adapter_config\.json:2: not valid JSON"):
        export_lora_gguf(tmp_path, tmp_path / "a.gguf")
    (tmp_path / "adapter_config.json").write_text(json.dumps(cfg))
    (tmp_path / "adapter_model.safetensors").write_bytes(b"\x00" * 3)
    with pytest.raises(AdapterExportError, match="adapter_model.safetensors: not a readable safetensors file"):
        export_lora_gguf(tmp_path, tmp_path / "a.gguf")
    assert not (tmp_path / "a.gguf").exists()


def test_export_refuses_a_diverged_adapter(tmp_path):
    np = pytest.importorskip("numpy")
    from safetensors.numpy import save_file

    from lwm.train.export import AdapterExportError, export_lora_gguf

    (tmp_path / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": 4}))
    (tmp_path / "lwm_adapter.json").write_text(json.dumps({"model": "embedded"}))
    key = "base_model.model.model.layers.0.self_attn.v_proj.lora_{}.weight"
    for a, dtype in ((np.full((2, 576), np.nan, np.float32), "f32"), (np.full((2, 576), 1e6, np.float32), "f16")):
        save_file({key.format("A"): a, key.format("B"): np.ones((192, 2), np.float32)},
                  str(tmp_path / "adapter_model.safetensors"))
        with pytest.raises(AdapterExportError, match="NaN or infinite values in " + dtype):
            export_lora_gguf(tmp_path, tmp_path / "a.gguf", dtype=dtype)   # 1e6 is past f16's range
    assert not (tmp_path / "a.gguf").exists()


@pytest.mark.slow
def test_training_continues_from_an_exported_adapter(run, tmp_path, capfd):
    """--init-adapter: the GGUF adapter read back into PEFT (q/k rows restored) is where a new
    run starts: its first validation loss is the finished run's, not the base model's. Without
    progress, the libraries draw no bars of their own either (datasets' map, loading weights)."""
    import numpy as np
    from safetensors.numpy import load_file

    from lwm.train.export import export_lora_gguf, import_lora_gguf
    from lwm.train.sft import train_sft

    config, res = run
    gguf = tmp_path / "a.gguf"
    export_lora_gguf(res.adapter_dir, gguf, dtype="f32")
    back = load_file(str(import_lora_gguf(gguf, tmp_path / "peft") / "adapter_model.safetensors"))
    trained = load_file(str(res.adapter_dir / "adapter_model.safetensors"))
    for key, value in trained.items():
        np.testing.assert_allclose(back[key.replace(".default", "")], value, rtol=0, atol=1e-6)
    again = train_sft(TrainConfig(data=config.data, out=tmp_path / "more", max_steps=1, batch_size=8, lr=1e-9,
                                  save_steps=1, eval_on_start=True, init_adapter=str(gguf), order="file"),
                      show_progress=False)
    drawn = capfd.readouterr().err
    assert "it/s]" not in drawn and "examples/s]" not in drawn, drawn[-500:]
    assert again.eval_loss_start == pytest.approx(res.eval_loss, rel=0.02)
    assert again.eval_loss_start < res.eval_loss_start / 2
    with pytest.raises(ValueError, match="full fine-tuning"):
        TrainConfig(data=config.data, out=tmp_path / "x", lora=False, init_adapter="warmup")
    with pytest.raises(Exception, match="neither 'warmup'"):
        train_sft(TrainConfig(data=config.data, out=tmp_path / "y", max_steps=1, init_adapter=str(tmp_path)),
                  show_progress=False)


def test_an_exported_adapter_records_how_its_model_is_asked(tmp_path):
    from lwm.train.export import _read_request, training_manifest, training_request

    data, run = tmp_path / "ds", tmp_path / "run"
    (run / "checkpoint-3").mkdir(parents=True)
    data.mkdir()
    default = {"prediction": "full", "compact_tools": False}
    assert training_request(run / "checkpoint-3") == default  # no run record
    assert training_manifest(run / "checkpoint-3") is None
    (run / "lwm_train.json").write_text(json.dumps({"settings": {"data": str(data)}}))
    assert training_request(run / "checkpoint-3") == default  # no dataset manifest (lwm export says so)
    assert training_manifest(run / "checkpoint-3") is None
    for settings in ([], {"prediction": "bogus", "compact_tools": "yes"}):
        (data / "manifest.json").write_text(json.dumps({"settings": settings}))
        assert training_request(run / "checkpoint-3") == default
        assert _read_request(run / "checkpoint-3") == (default, None)  # unusable: export says defaults
    (data / "manifest.json").write_text(json.dumps({"settings": {"prediction": "change", "compact_tools": True}}))
    assert training_request(run / "checkpoint-3") == {"prediction": "change", "compact_tools": True}
    assert training_manifest(run / "checkpoint-3") == data / "manifest.json"
    assert _read_request(run / "checkpoint-3")[1] == data / "manifest.json"
    (run / "lwm_train.json").write_text(json.dumps({"settings": {"data": "x" * 5000}}))  # a name too long
    assert training_manifest(run / "checkpoint-3") is None and training_request(run / "checkpoint-3") == default
    assert training_request(run) == default and training_request(tmp_path / "missing") == default


def test_an_exported_adapter_records_what_it_trained_on(tmp_path):
    from lwm.models.embedded import WARMUP_ADAPTER, adapter_record, heldout_families
    from lwm.train.export import training_lineage

    data, first, second = tmp_path / "ds", tmp_path / "first", tmp_path / "second"
    for d in (data, first / "adapter", second / "adapter"):
        d.mkdir(parents=True)
    splits = {"train": {"families": ["terminal/git"]}, "validation": {"families": ["terminal/files", "terminal/pipes"]}}
    (data / "manifest.json").write_text(json.dumps({"settings": {}, "splits": splits}))
    assert training_lineage(first / "adapter") == {}  # no run record
    (first / "lwm_train.json").write_text(json.dumps({"settings": {"data": str(data), "init_adapter": "warmup"}}))
    lineage = training_lineage(first / "adapter")
    assert lineage["data"] == {"splits": splits}
    assert lineage["previous"]["init_adapter"] == "warmup"
    assert lineage["previous"]["sha256"] == adapter_record(WARMUP_ADAPTER)["sha256"]
    # held out: what some stage held out (its own validation families, the shipped adapter's) and
    # no stage trained on
    shipped = heldout_families(adapter_record(WARMUP_ADAPTER))
    assert "terminal/git" not in shipped and "db/joins" in shipped
    assert heldout_families(lineage) == shipped | {"terminal/files", "terminal/pipes"}
    # a run that continued the first (a PEFT adapter folder): its lineage nests the first's
    (first / "adapter" / "adapter_config.json").write_text("{}")
    (second / "lwm_train.json").write_text(json.dumps({"settings": {"data": str(tmp_path / "no-such"),
                                                                    "init_adapter": str(first / "adapter")}}))
    lineage = training_lineage(second / "adapter")
    assert "data" not in lineage and lineage["previous"]["data"] == {"splits": splits}
    assert heldout_families(lineage) is None  # its own dataset names no validation families
    # an adapter file with no record: what it trained on is unknown, so nothing is held out
    (tmp_path / "x.gguf").write_bytes(b"GGUF")
    (second / "lwm_train.json").write_text(json.dumps({"settings": {"data": str(data),
                                                                    "init_adapter": str(tmp_path / "x.gguf")}}))
    lineage = training_lineage(second / "adapter")
    assert lineage["previous"] == {"init_adapter": str(tmp_path / "x.gguf")} and heldout_families(lineage) is None
    # an init adapter named oddly: unknown, never the lineage of whatever folder it resolves to
    for odd in (7, ["a"], "adapter", str(tmp_path / "missing")):
        (second / "lwm_train.json").write_text(json.dumps({"settings": {"data": str(data), "init_adapter": odd}}))
        lineage = training_lineage(second / "adapter")
        assert lineage["previous"] == {"init_adapter": str(odd)} and heldout_families(lineage) is None


def test_a_bad_init_adapter_is_named_before_the_model_loads(tmp_path):
    from lwm.errors import ModelUnavailableError
    from lwm.train.sft import train_sft

    data = write_dataset(tmp_path / "data", [example("a")])
    half = tmp_path / "half"
    half.mkdir()
    (half / "adapter_config.json").write_text("{}")
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_text("no")
    for source, message in ((tmp_path / "missing", "no adapter_config.json or adapter_model.safetensors"),
                            (half, "no adapter_model.safetensors"), (not_gguf, "not a GGUF file")):
        with pytest.raises(ModelUnavailableError, match=message):
            train_sft(TrainConfig(data=data, out=tmp_path / "run", max_steps=1, init_adapter=str(source)),
                      show_progress=False)
        assert not (tmp_path / "run").exists()


def test_an_adapter_interpolated_is_the_same_adapter_at_part_strength(run, tmp_path):
    """WiSE-FT on a real run: the adapter at weight 0.5 changes every adapted weight by half of
    what the trained one changes it by (PEFT's own merge arithmetic), its GGUF says alpha × 0.5,
    and a second call with the same settings returns it as it is."""
    import torch

    from lwm.train.export import import_lora_gguf
    from lwm.train.interpolate import interpolate_run
    from lwm.train.sft import load_trained_model

    _, res = run
    (tmp_path / "half.partial").mkdir()   # a folder named like a build folder is someone's data: left alone
    (tmp_path / "half.partial" / "keep.txt").write_text("mine")
    gguf = interpolate_run(res.adapter_dir.parent, tmp_path / "half", 0.5)
    assert gguf == tmp_path / "half" / "adapter.gguf" and (tmp_path / "half.partial" / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["half", "half.partial"]   # no build folder left
    record = json.loads((tmp_path / "half" / "lwm_train.json").read_text())
    assert record["interpolated"] == {"from": str(res.adapter_dir.parent.resolve()), "weight": 0.5}
    assert record["settings"]["lora_alpha"] == json.loads((res.adapter_dir.parent / "lwm_train.json").read_text())[
        "settings"]["lora_alpha"] / 2
    full_alpha = json.loads((res.adapter_dir / "adapter_config.json").read_text())["lora_alpha"]
    back = json.loads((import_lora_gguf(gguf, tmp_path / "back") / "adapter_config.json").read_text())
    assert back["lora_alpha"] == pytest.approx(full_alpha / 2)
    deltas = []
    for path in (res.adapter_dir, tmp_path / "half" / "adapter"):
        model, _ = load_trained_model(path)
        layer = next(m for m in model.modules() if hasattr(m, "lora_A") and "default" in m.lora_A)
        deltas.append(layer.get_delta_weight("default"))
    assert deltas[0].abs().max() > 0
    torch.testing.assert_close(deltas[1], deltas[0] / 2)
    mtime = gguf.stat().st_mtime_ns
    assert interpolate_run(res.adapter_dir.parent, tmp_path / "half", 0.5) == gguf and gguf.stat().st_mtime_ns == mtime


def test_interpolating_refuses_bad_input(tmp_path):
    from lwm.errors import DataNotFoundError
    from lwm.train.interpolate import interpolate_run

    run = tmp_path / "run"
    (run / "adapter").mkdir(parents=True)
    with pytest.raises(DataNotFoundError, match="adapter_config.json, lwm_train.json"):
        interpolate_run(run, tmp_path / "out", 0.5)
    (run / "adapter" / "adapter_config.json").write_text(json.dumps({"r": 4}))
    (run / "lwm_train.json").write_text(json.dumps({"settings": {"model": "embedded"}}))
    for weight in (0, -0.5, 1.5, float("nan"), 1e-300):   # 1e-300: an alpha float32 rounds to 0 (full strength)
        with pytest.raises(ValueError, match=r"weight must be a number in \[1e-06, 1\]"):
            interpolate_run(run, tmp_path / "out", weight)
    for out in (run, run / "adapter" / "half", tmp_path):   # the run, inside it, around it
        with pytest.raises(ValueError, match="inside it or around it"):
            interpolate_run(run, out, 0.5)
    for alpha in (None, True, -8, "8"):
        (run / "adapter" / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": alpha}))
        with pytest.raises(ValueError, match="'lora_alpha' is not a positive number"):
            interpolate_run(run, tmp_path / "out", 0.5)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))
    (run / "adapter" / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": 8}))
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="is a symbolic link"):
        interpolate_run(run, tmp_path / "link", 0.5)

    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="already holds something else"):
        interpolate_run(run, tmp_path / "busy", 0.5)
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    cli = CliRunner().invoke(train_app, ["interpolate", str(run), "--out", str(tmp_path / "o"), "--weight", "2"])
    assert cli.exit_code == 2 and "weight must be a number in [1e-06, 1], got 2.0" in cli.output
