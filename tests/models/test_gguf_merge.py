"""Merging a GGUF LoRA adapter into its model: exact on float tensors, close on
the embedded model's quantized ones (stored as Q8_0), cached by content, clear errors for
files that do not fit."""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from lwm.errors import ModelUnavailableError  # noqa: E402
from lwm.models.gguf_merge import KEEP_MERGED, merge_lora, merged_model, prune_merged  # noqa: E402

RNG = np.random.default_rng(0)
W = RNG.normal(size=(4, 8)).astype(np.float32)  # out × in
A = RNG.normal(size=(2, 8)).astype(np.float32)  # r × in
B = RNG.normal(size=(4, 2)).astype(np.float32)  # out × r


def _model(path, w=W):
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_tensor("blk.0.attn_q.weight", w)
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(8, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _adapter(path, alpha=8.0, a=A, b=B, target="blk.0.attn_q.weight", arch="llama"):
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_type("adapter")
    writer.add_string("adapter.type", "lora")
    if alpha is not None:
        writer.add_float32("adapter.lora.alpha", alpha)
    writer.add_tensor(f"{target}.lora_a", a)
    writer.add_tensor(f"{target}.lora_b", b)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _tensors(path):
    return {t.name: np.array(t.data) for t in gguf.GGUFReader(path).tensors}


@pytest.mark.parametrize(("alpha", "scale"), [(8.0, 4.0), (None, 1.0)])
def test_merge_adds_scaled_product_on_float_tensors(tmp_path, alpha, scale):
    out = merge_lora(_model(tmp_path / "m.gguf"), _adapter(tmp_path / "a.gguf", alpha), tmp_path / "out.gguf")
    merged = _tensors(out)
    np.testing.assert_allclose(merged["blk.0.attn_q.weight"], W + scale * B @ A, rtol=1e-6)
    np.testing.assert_array_equal(merged["blk.0.attn_norm.weight"], np.ones(8))  # not adapted: copied
    fields = gguf.GGUFReader(out).fields
    assert fields["general.name"].contents() == "tiny"  # metadata copied
    assert "general.type" not in fields  # a model, not an adapter
    assert not list(tmp_path.glob(".out.gguf.*"))  # no temporary file left


def test_adapter_that_does_not_fit_is_refused(tmp_path):
    model = _model(tmp_path / "m.gguf")
    wide = _adapter(tmp_path / "wide.gguf", a=RNG.normal(size=(2, 16)).astype(np.float32))
    with pytest.raises(ModelUnavailableError, match="does not fit"):
        merge_lora(model, wide, tmp_path / "out.gguf")
    other = _adapter(tmp_path / "other.gguf", target="blk.7.ffn_up.weight")
    with pytest.raises(ModelUnavailableError, match="does not have"):
        merge_lora(model, other, tmp_path / "out.gguf")
    half = gguf.GGUFWriter(str(tmp_path / "half.gguf"), "llama")
    half.add_type("adapter")
    half.add_string("adapter.type", "lora")
    half.add_tensor("blk.0.attn_q.weight.lora_a", A)
    half.write_header_to_file()
    half.write_kv_data_to_file()
    half.write_tensors_to_file()
    half.close()
    with pytest.raises(ModelUnavailableError, match="are not lora_a/lora_b pairs"):
        merge_lora(model, tmp_path / "half.gguf", tmp_path / "out.gguf")
    for bad, message in ((_adapter(tmp_path / "nan.gguf", alpha=float("nan")), "NaN or infinite"),
                         (_adapter(tmp_path / "inf.gguf", a=np.full((2, 8), np.inf, np.float32)), "NaN or infinite"),
                         (_adapter(tmp_path / "rank0.gguf", a=np.zeros((0, 8), np.float32),
                                   b=np.zeros((4, 0), np.float32)), "rank > 0"),
                         (_adapter(tmp_path / "qwen.gguf", arch="qwen2"), "architecture 'qwen2'")):
        with pytest.raises(ModelUnavailableError, match=message):
            merge_lora(model, bad, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_merged_model_is_cached_by_content(tmp_path):
    model, adapter = _model(tmp_path / "m.gguf"), _adapter(tmp_path / "a.gguf")
    first = merged_model(model, adapter, tmp_path / "cache")
    stamp = first.stat().st_mtime_ns
    assert merged_model(model, adapter, tmp_path / "cache") == first
    assert first.stat().st_mtime_ns == stamp  # not merged again
    _adapter(adapter, alpha=2.0)  # a retrained adapter under the same name
    second = merged_model(model, adapter, tmp_path / "cache")
    assert second != first
    np.testing.assert_allclose(_tensors(second)["blk.0.attn_q.weight"], W + B @ A, rtol=1e-6)


def test_the_cache_keeps_the_recently_used_copies_only(tmp_path, monkeypatch):
    """Every new adapter makes a copy: before one is made, copies beyond the most recently used
    few are deleted — never one used in the last day, nor other files; using a copy again
    (a cache hit) marks it used."""
    import os
    import time

    from lwm.models import gguf_merge

    cache = tmp_path / "cache"
    cache.mkdir()
    old = time.time() - 3 * 86400
    stale = []
    for i in range(KEEP_MERGED + 3):
        path = cache / f"m+a{i}-{i:016x}.gguf"
        path.write_bytes(b"x")
        os.utime(path, (old + i, old))  # used days ago, copy i later than copy i - 1
        stale.append(path)
    other = cache / "notes.gguf"
    other.write_bytes(b"x")
    os.utime(other, (old, old))
    model, adapter = _model(tmp_path / "m.gguf"), _adapter(tmp_path / "a.gguf")
    made = merged_model(model, adapter, cache)
    assert set(cache.iterdir()) == {made, other, *stale[-KEEP_MERGED:]}

    monkeypatch.setattr(gguf_merge, "KEEP_MERGED", 1)
    recent = cache / f"m+recent-{99:016x}.gguf"
    recent.write_bytes(b"x")  # used just now (by another process, say)
    os.utime(made, (old, old))
    assert merged_model(model, adapter, cache) == made  # a hit: marked used, nothing merged or deleted
    assert time.time() - made.stat().st_atime < 60 and made.stat().st_mtime == old
    assert set(prune_merged(cache)) == set(stale[-KEEP_MERGED:])  # the two used within a day stay
    assert set(cache.iterdir()) == {made, recent, other}
    assert prune_merged(tmp_path / "nowhere") == []

    os.utime(made, (old, old))  # a copy as the base of another merge is used, so not pruned by it
    again = merged_model(made, adapter, cache)
    assert again != made and made.exists() and time.time() - made.stat().st_atime < 60


def lora_targets(lora):
    return [n.removesuffix(".lora_a") for n in lora if n.endswith(".lora_a")]


def test_shipped_adapter_merges_into_embedded_model(tmp_path):
    from gguf.quants import dequantize

    from lwm.models.embedded import embedded_gguf_path, warmup_adapter_path

    base_path = embedded_gguf_path()
    out = merge_lora(base_path, warmup_adapter_path(), tmp_path / "merged.gguf")
    base = {t.name: t for t in gguf.GGUFReader(base_path).tensors}
    lora = {t.name: np.array(t.data, np.float32) for t in gguf.GGUFReader(warmup_adapter_path()).tensors}
    merged = {t.name: t for t in gguf.GGUFReader(out).tensors}
    assert merged.keys() == base.keys()
    assert {merged[n].tensor_type for n in lora_targets(lora)} == {gguf.GGMLQuantizationType.Q8_0}
    file_type = gguf.GGUFReader(out).fields["general.file_type"].contents()
    assert file_type == gguf.LlamaFileType.MOSTLY_Q8_0  # was MOSTLY_Q4_1
    for name in lora_targets(lora):
        w = dequantize(base[name].data, base[name].tensor_type)
        a, b = lora[name + ".lora_a"], lora[name + ".lora_b"]
        change = 32.0 / a.shape[0] * b @ a  # the shipped adapter: alpha 32, r 16
        got = dequantize(merged[name].data, merged[name].tensor_type) - w
        # Rounding to Q8_0 adds noise about as large as the adapter's change, but spread over
        # all 576+ input directions; in the adapter's 16 (the row space of A) the change must
        # survive. (Measured worst tensor: 0.37 of its norm; rounding back to Q4_1: 0.96.)
        within = got @ np.linalg.pinv(a) @ a
        assert np.linalg.norm(within - change) < 0.5 * np.linalg.norm(change), name
    assert np.array_equal(np.array(merged["token_embd.weight"].data), np.array(base["token_embd.weight"].data))


@pytest.mark.parametrize("content", [b"GGUF" + b"\0" * 10, b"not a model at all"])
def test_unreadable_model_is_named(tmp_path, content):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(content)
    with pytest.raises(ModelUnavailableError, match="junk.gguf is not a readable GGUF file"):
        merge_lora(junk, _adapter(tmp_path / "a.gguf"), tmp_path / "out.gguf")
