"""Convert a PEFT LoRA adapter to a GGUF adapter that llama.cpp loads (``Llama(lora_path=…)``).

Our own writer of the layout llama.cpp's ``convert_lora_to_gguf.py`` produces (that
script needs llama.cpp's source tree and a base model config from the hub; this one
needs neither):

* metadata: ``general.architecture`` (the base model's, e.g. ``llama``),
  ``general.type = "adapter"``, ``adapter.type = "lora"``, ``adapter.lora.alpha``;
* per adapted weight two tensors, named after the base tensor:
  ``blk.{N}.attn_q.weight.lora_a`` with numpy shape ``(r, in_features)`` and
  ``blk.{N}.attn_q.weight.lora_b`` with shape ``(out_features, r)``, the PEFT
  ``lora_A`` / ``lora_B`` matrices as they are. llama.cpp adds
  ``alpha / r · B (A x)`` to the base projection, where r is read from the tensor shape.

Llama-family GGUFs store the rows of the query and key projections in a different
order than Hugging Face checkpoints (rotary halves interleaved per head; see
``LlamaModel.permute`` in llama.cpp's ``convert_hf_to_gguf.py``); the same permutation
is applied to the rows of ``lora_b`` of ``q_proj`` / ``k_proj``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lwm.errors import AdapterExportError, ModelUnavailableError
from lwm.jsonl import atomic_path, read_json, write_atomic

# Hugging Face module path inside a decoder block → GGUF tensor name inside ``blk.N``.
_MODULES = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_KEY = re.compile(r"^(?:base_model\.model\.)?model\.layers\.(\d+)\.(" + "|".join(map(re.escape, _MODULES))
                  + r")\.lora_([AB])(?:\.default)?\.weight$")
# Hugging Face architecture → (GGUF architecture, q/k rows permuted by the converter).
_ARCHS = {
    "LlamaForCausalLM": ("llama", True), "MistralForCausalLM": ("llama", True),
    "Qwen2ForCausalLM": ("qwen2", False), "Qwen3ForCausalLM": ("qwen3", False),
}
_GGUF_PERMUTED = {"llama"}


@dataclass
class ExportResult:
    """What ``export_lora_gguf`` wrote.

    Attributes:
        path: the GGUF file.
        architecture: the GGUF architecture written (must equal the base model's).
        tensors: tensors written (two per adapted weight).
        rank: LoRA rank.
        alpha: ``adapter.lora.alpha`` written (PEFT's alpha; scaled for rsLoRA).
        bytes: file size.
        request: how the model expects to be asked (:func:`training_request`), also written
            into the record beside the adapter, ``<out stem>.json``.
        request_from: the dataset manifest ``request`` was read from; ``None`` when none was
            found or it could not be read (the request then holds defaults: correct the record
            if the model, a world model, was trained otherwise).
    """

    path: Path
    architecture: str
    tensors: int
    rank: int
    alpha: float
    bytes: int
    request: dict[str, Any] = field(default_factory=dict)
    request_from: Path | None = None


@dataclass
class _Base:
    arch: str
    n_head: int
    n_head_kv: int
    permute_qk: bool
    shapes: dict[str, tuple[int, ...]] | None  # GGUF tensor name → numpy shape (out, in), when known


def _base_from_gguf(path: Path) -> _Base:
    from gguf import GGUFReader

    reader = GGUFReader(str(path))

    def value(key: str) -> Any:
        f = reader.get_field(key)
        if f is None:
            raise AdapterExportError(f"{path}: no {key} in the GGUF metadata")
        return f.contents()

    arch = value("general.architecture")
    shapes = {t.name: tuple(int(n) for n in reversed(t.shape.tolist())) for t in reader.tensors}
    n_head = int(value(f"{arch}.attention.head_count"))
    kv = reader.get_field(f"{arch}.attention.head_count_kv")
    return _Base(arch, n_head, int(kv.contents()) if kv else n_head, arch in _GGUF_PERMUTED, shapes)


def _base_from_hf(path: Path) -> _Base:
    cfg = read_json(path / "config.json")
    name = (cfg.get("architectures") or ["?"])[0]
    if name not in _ARCHS:
        raise AdapterExportError(f"{path}: architecture {name} is not supported by the exporter "
                                 f"(supported: {', '.join(_ARCHS)})")
    arch, permute = _ARCHS[name]
    n_head = int(cfg["num_attention_heads"])
    return _Base(arch, n_head, int(cfg.get("num_key_value_heads") or n_head), permute, None)


def _resolve_base(adapter: Path, base: str | Path | None) -> _Base:
    if base is None:
        from lwm.train.records import adapter_base

        base = adapter_base(adapter)
    from lwm.models.embedded import named_gguf

    if isinstance(base, str) and (named := named_gguf(base)) is not None:  # a model lwm ships, by name
        return _base_from_gguf(named)
    base = Path(base)
    if base.is_file() and base.suffix == ".gguf":
        return _base_from_gguf(base)
    if (base / "config.json").is_file():
        return _base_from_hf(base)
    raise ModelUnavailableError(f"base model {base} is neither a .gguf file nor a Hugging Face folder; "
                                "name the base model (--base on the CLI)")


def _permute_rows(b: Any, n_head: int) -> Any:
    """Reorder rows (out_features) as llama.cpp's converter does for q/k weights."""
    out, r = b.shape
    return b.reshape(n_head, 2, out // n_head // 2, r).swapaxes(1, 2).reshape(out, r)


def export_lora_gguf(adapter: str | Path, out: str | Path, *, base: str | Path | None = None,
                     dtype: str = "f16") -> ExportResult:
    """Write a PEFT LoRA adapter folder as a GGUF LoRA adapter for llama.cpp.

    Args:
        adapter: a folder with ``adapter_config.json`` and ``adapter_model.safetensors``
            (``out/adapter`` or ``out/checkpoint-N`` of ``lwm train sft``).
        out: the ``.gguf`` file to write (atomically).
        base: the base model: ``"embedded"``, a ``.gguf`` file (its tensor shapes are then
            checked) or a Hugging Face folder (default: the base recorded at training).
        dtype: ``"f16"`` (half the size) or ``"f32"`` for the LoRA matrices.

    Returns:
        An ``ExportResult``.

    Raises:
        DataNotFoundError / ModelUnavailableError: missing adapter files or base model.
        AdapterExportError: an adapter llama.cpp cannot apply (DoRA, per-module ranks or
            alphas, trained embeddings or other modules saved in full, unknown module
            names, shapes that do not fit the base model), or one whose weights are NaN or
            infinite in ``dtype`` (a diverged training).
    """
    import numpy as np
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    from lwm.errors import DataNotFoundError

    adapter, out = Path(adapter), Path(out)
    if dtype not in ("f16", "f32"):
        raise ValueError(f"dtype must be f16 or f32, not {dtype!r}")
    config_path, weights_path = adapter / "adapter_config.json", adapter / "adapter_model.safetensors"
    for p in (config_path, weights_path):
        if not p.is_file():
            raise DataNotFoundError(f"no {p.name} in {adapter}: not a PEFT LoRA adapter folder")
    cfg = read_json(config_path)
    if cfg.get("peft_type", "LORA") != "LORA":
        raise AdapterExportError(f"{adapter}: peft_type {cfg.get('peft_type')} is not LoRA")
    for key in ("use_dora", "modules_to_save", "rank_pattern", "alpha_pattern"):
        if cfg.get(key):
            raise AdapterExportError(f"{adapter}: {key}={cfg[key]!r} cannot be expressed as a llama.cpp LoRA")
    rank, alpha = cfg.get("r"), cfg.get("lora_alpha")
    if not (isinstance(rank, int) and rank > 0 and isinstance(alpha, (int, float))):
        raise AdapterExportError(f"{config_path}: needs a positive integer 'r' and a number 'lora_alpha'")
    if cfg.get("use_rslora"):  # PEFT scales by alpha/sqrt(r); llama.cpp by alpha/r
        alpha = alpha * math.sqrt(rank)

    try:
        weights = load_file(str(weights_path))
    except (SafetensorError, OSError, TypeError) as e:  # TypeError: bf16, which numpy lacks
        raise AdapterExportError(f"{weights_path}: not a readable safetensors file ({e})") from None
    pairs: dict[str, dict[str, Any]] = {}
    for key, tensor in weights.items():
        m = _KEY.match(key)
        if not m:
            raise AdapterExportError(f"{adapter}: tensor {key} is not a LoRA matrix of an attention or MLP "
                                     f"projection ({', '.join(_MODULES)}); llama.cpp cannot apply it")
        layer, module, ab = m.groups()
        pairs.setdefault(f"blk.{layer}.{_MODULES[module]}.weight", {})[ab] = (module, tensor)
    if not pairs:
        raise AdapterExportError(f"{adapter}: no LoRA tensors found")
    info = _resolve_base(adapter, base)

    np_dtype = np.float16 if dtype == "f16" else np.float32
    tensors: list[tuple[str, Any]] = []
    for name in sorted(pairs, key=_natural):
        if set(pairs[name]) != {"A", "B"}:
            raise AdapterExportError(f"{adapter}: {name} has lora_{next(iter(pairs[name]))} without its pair")
        module, a = pairs[name]["A"]
        _, b = pairs[name]["B"]
        a, b = a.astype(np.float32), b.astype(np.float32)
        if info.permute_qk and module == "self_attn.q_proj":
            b = _permute_rows(b, info.n_head)
        elif info.permute_qk and module == "self_attn.k_proj":
            b = _permute_rows(b, info.n_head_kv)
        if info.shapes is not None:
            want = info.shapes.get(name)
            if want is None or want != (b.shape[0], a.shape[1]):
                raise AdapterExportError(f"{adapter}: {name} is {(b.shape[0], a.shape[1])} in the adapter but "
                                         f"{want or 'absent'} in the base model: wrong --base?")
        a, b = np.ascontiguousarray(a, dtype=np_dtype), np.ascontiguousarray(b, dtype=np_dtype)
        if not (np.isfinite(a).all() and np.isfinite(b).all()):  # f16 also overflows past 65,504
            raise AdapterExportError(f"{adapter}: {name} holds NaN or infinite values in {dtype}: the training "
                                     "diverged (lower the learning rate) and the adapter is unusable")
        tensors += [(name + ".lora_a", a), (name + ".lora_b", b)]

    _write_gguf(out, info.arch, alpha, tensors, name=adapter.resolve().name)
    request, source = _read_request(adapter)
    _record_request(out.with_suffix(".json"), request | training_lineage(adapter))
    return ExportResult(path=out, architecture=info.arch, tensors=len(tensors), rank=rank, alpha=alpha,
                        bytes=out.stat().st_size, request=request, request_from=source)


def training_request(adapter: Path) -> dict[str, Any]:
    """How the model trained in ``adapter`` expects to be asked, read from its training data:
    ``{"prediction": …, "compact_tools": …}`` from the manifest of the ``lwm data build``
    dataset the run (``lwm_train.json`` in the adapter's run folder) trained on; the
    defaults (full observations, tool lists as they are) when any of those is missing."""
    return _read_request(adapter)[0]


def training_lineage(adapter: Path, _depth: int = 0) -> dict[str, Any]:
    """What ``adapter`` was trained on, for its record (where
    :func:`lwm.models.embedded.heldout_families` reads which task families it never saw):
    ``{"data": {"splits": …}}``, the train and validation splits of its dataset's manifest,
    and ``{"previous": …}``, the same of the adapter its run started from (``--init-adapter``:
    the shipped adapter's record, a GGUF adapter's record, or an earlier run's lineage;
    ``{"init_adapter": …}`` alone when nothing says what that one trained on). ``{}`` when
    the run's settings cannot be read."""
    from lwm.models.embedded import adapter_record, warmup_adapter_path
    from lwm.train.records import RUN_FILE

    try:
        settings = read_json(Path(adapter).parent / RUN_FILE)["settings"]
    except (KeyError, TypeError, OSError, ValueError):
        return {}
    out: dict[str, Any] = {}
    manifest = training_manifest(adapter)
    try:
        splits = read_json(manifest)["splits"] if manifest else None
    except (KeyError, TypeError, OSError, ValueError):
        splits = None
    if isinstance(splits, dict):
        out["data"] = {"splits": {k: v for k, v in splits.items() if k in ("train", "validation")}}
    init = settings.get("init_adapter") if isinstance(settings, dict) else None
    if init:
        path = warmup_adapter_path() if init == "warmup" else Path(str(init))
        previous: dict[str, Any] = {}
        if path.is_file():
            previous = {k: v for k, v in adapter_record(path).items() if k in ("sha256", "data", "previous")}
        elif (path / "adapter_config.json").is_file() and _depth < 8:  # a PEFT folder of an earlier run
            previous = training_lineage(path, _depth + 1)
        out["previous"] = {"init_adapter": str(init)} | previous
    return out


def training_manifest(adapter: Path) -> Path | None:
    """The ``manifest.json`` of the ``lwm data build`` dataset the run that trained ``adapter``
    read (named in ``lwm_train.json`` of its run folder), or ``None`` when there is none or
    it cannot be reached."""
    from lwm.train.records import RUN_FILE

    run_file = Path(adapter).parent / RUN_FILE  # out/adapter and out/checkpoint-N of lwm train sft
    try:
        manifest = Path(read_json(run_file)["settings"]["data"]) / "manifest.json"
        return manifest if manifest.is_file() else None
    except (KeyError, TypeError, OSError, ValueError):
        return None


def _read_request(adapter: Path) -> tuple[dict[str, Any], Path | None]:
    """:func:`training_request` and the manifest it was read from (``None``: the defaults)."""
    from lwm.prediction import PREDICTIONS

    defaults = {"prediction": "full", "compact_tools": False}
    manifest = training_manifest(adapter)
    if manifest is None:
        return defaults, None
    try:
        settings = read_json(manifest)["settings"]
        prediction, compact = settings.get("prediction", "full"), settings.get("compact_tools") is True
    except (KeyError, TypeError, AttributeError, OSError, ValueError):
        return defaults, None
    if prediction not in PREDICTIONS:
        return {"prediction": "full", "compact_tools": compact}, None
    return {"prediction": prediction, "compact_tools": compact}, manifest


def _record_request(path: Path, request: dict[str, Any]) -> None:
    """Write ``request`` (how the adapter is asked, what it trained on) into the JSON record
    beside an adapter (where :func:`lwm.models.embedded.adapter_request` reads it), keeping the
    record's other keys."""
    try:
        record = read_json(path) if path.is_file() else {}
    except Exception:  # noqa: BLE001 - an unreadable record is replaced
        record = {}
    record = record if isinstance(record, dict) else {}
    write_atomic(path, json.dumps({**record, **request}, indent=2, ensure_ascii=False) + "\n")


def _unpermute_rows(b: Any, n_head: int) -> Any:
    """The inverse of :func:`_permute_rows`."""
    out, r = b.shape
    return b.reshape(n_head, out // n_head // 2, 2, r).swapaxes(1, 2).reshape(out, r)


_GGUF_KEY = re.compile(r"^blk\.(\d+)\.(" + "|".join(_MODULES.values()) + r")\.weight\.lora_([ab])$")


def import_lora_gguf(adapter: str | Path, out: str | Path, *, base: str = "embedded") -> Path:
    """Write a GGUF LoRA adapter (``lwm train export``'s layout, e.g. the shipped warm-up
    adapter) back as a PEFT adapter folder, so that training can continue from it
    (``lwm train sft --init-adapter``): the inverse of :func:`export_lora_gguf`, in float32.

    Args:
        adapter: the ``.gguf`` adapter.
        out: the folder to write (``adapter_config.json``, ``adapter_model.safetensors``).
        base: the base model recorded in the folder (``"embedded"`` or a model directory;
            its GGUF or config gives the head counts for the query/key row order).

    Returns:
        ``out``.

    Raises:
        ModelUnavailableError / AdapterExportError: an unreadable file, tensors that are not
            LoRA matrices of the seven projections, ranks that differ between tensors.
    """
    import numpy as np
    from gguf import GGUFReader
    from safetensors.numpy import save_file

    from lwm.models.embedded import check_adapter

    adapter, out = check_adapter(adapter), Path(out)
    reader = GGUFReader(str(adapter))
    field = reader.get_field("adapter.lora.alpha")
    if field is None:
        raise AdapterExportError(f"{adapter}: no adapter.lora.alpha in the GGUF metadata")
    alpha = float(field.contents())
    info = _resolve_base(adapter, base)
    hf_module = {v: k for k, v in _MODULES.items()}
    weights, ranks, modules = {}, set(), set()
    for t in reader.tensors:
        m = _GGUF_KEY.match(t.name)
        if not m:
            raise AdapterExportError(f"{adapter}: tensor {t.name} is not a LoRA matrix of a projection")
        layer, module, ab = m.groups()
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))
        x = np.asarray(t.data, dtype=np.float32).reshape(shape)
        if info.permute_qk and ab == "b" and module in ("attn_q", "attn_k"):
            x = _unpermute_rows(x, info.n_head if module == "attn_q" else info.n_head_kv)
        ranks.add(x.shape[0] if ab == "a" else x.shape[1])
        modules.add(hf_module[module].split(".")[-1])
        weights[f"base_model.model.model.layers.{layer}.{hf_module[module]}.lora_{ab.upper()}.weight"] = (
            np.ascontiguousarray(x))
    if len(ranks) != 1:
        raise AdapterExportError(f"{adapter}: LoRA ranks {sorted(ranks)} differ between tensors")
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "adapter_model.safetensors"))
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": ranks.pop(), "lora_alpha": alpha,
              "lora_dropout": 0.05, "target_modules": sorted(modules), "bias": "none",
              "base_model_name_or_path": base}
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return out


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def _write_gguf(out: Path, arch: str, alpha: float, tensors: list[tuple[str, Any]], name: str) -> None:
    import gguf

    with atomic_path(out) as tmp:
        writer = gguf.GGUFWriter(str(tmp), arch)
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
        writer.add_name(name)
        for tensor_name, array in tensors:
            writer.add_tensor(tensor_name, array)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
