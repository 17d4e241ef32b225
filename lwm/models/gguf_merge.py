"""Merge a GGUF LoRA adapter into a copy of its GGUF base model.

llama.cpp applies a LoRA adapter at run time as two extra matrix products per projection;
for SmolLM2-135M on 2 cores that costs about a quarter of the generation speed
(docs/benchmarks.md). A merged copy is faster, so an adapter given to
:class:`~lwm.models.embedded.LlamaCppChatModel` is merged once into a cached copy.

The merge follows llama.cpp's definition of a LoRA adapter (``llama-adapter.cpp``): for
each adapted tensor ``W`` (out × in), ``W' = W + s · B A`` with ``A = <name>.lora_a``
(r × in), ``B = <name>.lora_b`` (out × r) and ``s = alpha / r`` (``s = 1`` when the
adapter records no alpha). Every other tensor and all metadata are copied unchanged.

Merged tensors of a quantized model are stored as Q8_0 (float models keep their type).
Rounding the sum back to the model's 4-bit type adds noise as large as the adapter's
change and erased it (the shipped warm-up adapter merged into Q4_1: held-out terminal line
F1 30.7 instead of 74.1). Q8_0 keeps it and is the fastest layout that does; its
predictions differ from the run-time adapter's as greedy decoding does under any change of
arithmetic (held-out macro line F1 26.9 against 27.7; an F16 merge, the same sum in more
precision, 27.4). Measurements: docs/benchmarks.md.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from pathlib import Path

from lwm.errors import ModelUnavailableError
from lwm.jsonl import atomic_path

log = logging.getLogger(__name__)

#: Part of the cache key: bump when the merge's output for the same inputs changes.
MERGE_VERSION = 2
#: Merged copies the cache keeps (the most recently used) when it makes a new one. Each
#: copy of the embedded model is about 145 MB, and every adapter trained or evaluated
#: makes one (a helper found 100 copies, 14 GB, left by test runs before there was a limit).
KEEP_MERGED = 6
#: A copy used this recently (seconds) is never deleted: a process may still hold its path
#: (a training run reloads its policy from it).
KEEP_RECENT_S = 86400.0
_MERGED_NAME = re.compile(r".+\+.+-[0-9a-f]{16}\.gguf")


def merge_lora(model: str | Path, adapter: str | Path, out: str | Path) -> Path:
    """Write ``model`` with ``adapter`` merged into its weights to ``out`` (atomically).

    Args:
        model: a GGUF model file.
        adapter: a GGUF LoRA adapter for that model (``lwm train export``).
        out: the merged GGUF file to write.

    Returns:
        ``out``.

    Raises:
        ModelUnavailableError: ``gguf`` is missing, a file is not a readable GGUF file, or
            the adapter does not fit the model (a tensor it adapts is absent or has other
            dimensions).
    """
    try:
        import numpy as np
        from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType
        from gguf.quants import dequantize, quantize
    except ImportError as e:
        raise ModelUnavailableError("merging an adapter needs the gguf package: pip install 'gguf>=0.10'") from e

    floats = (GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16)
    base, lora = _read(GGUFReader, model), _read(GGUFReader, adapter)
    alpha_field = lora.get_field("adapter.lora.alpha")
    alpha = float(alpha_field.contents()) if alpha_field else 0.0
    pairs = {t.name: t for t in lora.tensors}
    # what llama.cpp checks before it applies an adapter (llama-adapter.cpp)
    adapter_type = lora.get_field("adapter.type")
    if adapter_type is None or adapter_type.contents() != "lora":
        raise ModelUnavailableError(f"{adapter} is not a LoRA adapter (adapter.type is not 'lora')")
    odd = sorted(n for n in pairs if not n.endswith((".lora_a", ".lora_b")))
    targets = {n.rsplit(".", 1)[0] for n in pairs}
    unpaired = sorted(t for t in targets if not {f"{t}.lora_a", f"{t}.lora_b"} <= pairs.keys())
    if odd or unpaired:
        raise ModelUnavailableError(f"{adapter} is not a LoRA adapter: tensors {(odd or unpaired)[:3]} "
                                    "are not lora_a/lora_b pairs")
    if not targets:
        raise ModelUnavailableError(f"{adapter} is not a LoRA adapter: it has no lora_a/lora_b tensors")
    arch = base.get_field("general.architecture")
    lora_arch = lora.get_field("general.architecture")
    if arch is None or (lora_arch is not None and lora_arch.contents() != arch.contents()):
        raise ModelUnavailableError(f"{adapter} is for architecture {lora_arch and lora_arch.contents()!r}, "
                                    f"{model} is {arch and arch.contents()!r}")
    missing = targets - {t.name for t in base.tensors}
    if missing:
        raise ModelUnavailableError(f"{adapter} adapts tensors {model} does not have: {sorted(missing)[:3]}")

    writer = GGUFWriter(None, arch=arch.contents(), endianess=base.endianess)
    if base.get_field("general.alignment"):
        writer.data_alignment = int(base.get_field("general.alignment").contents())
    # adapted tensors of a quantized model become Q8_0: general.file_type says so
    requantized = any(t.tensor_type not in floats for t in base.tensors if t.name in targets)
    for field in base.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue  # written by GGUFWriter itself
        vtype, value = field.types[0], field.contents()
        if field.name == "general.file_type" and requantized:
            value = int(LlamaFileType.MOSTLY_Q8_0)
        writer.add_key_value(field.name, value, vtype,
                             sub_type=field.types[-1] if vtype == GGUFValueType.ARRAY else None)
    for t in base.tensors:
        if t.name not in targets:
            writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
            continue
        w = dequantize(t.data, t.tensor_type).astype(np.float32)
        a, b = (pairs[f"{t.name}.lora_{x}"] for x in "ab")
        a, b = (dequantize(x.data, x.tensor_type).astype(np.float32) for x in (a, b))
        if not (w.ndim == a.ndim == b.ndim == 2 and a.shape[0] > 0):
            raise ModelUnavailableError(f"{adapter} does not fit {model}: {t.name} and its lora_a/lora_b must be "
                                        f"matrices of rank > 0 (shapes {w.shape}, {a.shape}, {b.shape})")
        if not (np.isfinite(a).all() and np.isfinite(b).all() and np.isfinite(alpha)):
            raise ModelUnavailableError(f"{adapter} holds NaN or infinite values ({t.name} or its alpha)")
        if a.shape[1] != w.shape[1] or b.shape[0] != w.shape[0] or b.shape[1] != a.shape[0]:
            raise ModelUnavailableError(
                f"{adapter} does not fit {model}: {t.name} is {w.shape[0]}×{w.shape[1]}, "
                f"the adapter's B·A is {b.shape[0]}×{b.shape[1]} · {a.shape[0]}×{a.shape[1]}"
            )
        w += (alpha / a.shape[0] if alpha else 1.0) * (b @ a)
        kind = t.tensor_type if t.tensor_type in floats else GGMLQuantizationType.Q8_0
        data = quantize(w, kind)
        writer.add_tensor(t.name, data, raw_shape=data.shape, raw_dtype=kind)

    with atomic_path(out) as tmp:
        writer.write_header_to_file(path=tmp)
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        with open(tmp, "rb") as f:  # on disk before the rename: a crash must not leave a torn cached model
            os.fsync(f.fileno())
    return Path(out)


def _read(reader, path):
    try:
        return reader(path)
    except (OSError, ValueError) as e:  # gguf-py's errors for a missing, truncated or foreign file
        raise ModelUnavailableError(f"{path} is not a readable GGUF file: {e}") from None


def merged_model(model: str | Path, adapter: str | Path, cache_dir: str | Path) -> Path:
    """The cached merge of ``adapter`` into ``model`` (see :func:`merge_lora`), made on first use.

    The file is ``<cache_dir>/<model stem>+<adapter stem>-<key>.gguf``; the key hashes the
    adapter's bytes, the model file's path, size and modification time, and
    :data:`MERGE_VERSION`, so a changed adapter or model gets a new copy. Before a new copy
    is made, old ones are deleted but for the :data:`KEEP_MERGED` most recently used and any
    used in the last :data:`KEEP_RECENT_S` seconds (:func:`prune_merged`).

    Raises:
        ModelUnavailableError: as :func:`merge_lora`.
    """
    model, adapter = Path(model), Path(adapter)
    st = model.stat()
    key = hashlib.sha256(adapter.read_bytes())
    key.update(f"{model.resolve()}|{st.st_size}|{st.st_mtime_ns}|{MERGE_VERSION}".encode())
    out = Path(cache_dir) / f"{model.stem}+{adapter.stem}-{key.hexdigest()[:16]}.gguf"
    if model.parent.resolve() == out.parent.resolve():  # a merged copy as the base of another merge
        _mark_used(model)
    _mark_used(out)  # before it is looked for: a pruning process then keeps it
    if not out.is_file():
        prune_merged(out.parent)  # first: the new copy may need the space
        t = time.monotonic()
        merge_lora(model, adapter, out)
        log.info("merged %s into %s in %.1f s: %s", adapter, model, time.monotonic() - t, out)
    return out


def _mark_used(path: Path) -> None:
    # The access time says when a copy was last used (set here: mounts may not update it).
    try:
        os.utime(path, ns=(time.time_ns(), path.stat().st_mtime_ns))
    except OSError:
        pass


def prune_merged(cache_dir: str | Path) -> list[Path]:
    """Delete the merged copies in ``cache_dir`` beyond the :data:`KEEP_MERGED` most recently
    used, except any used in the last :data:`KEEP_RECENT_S` seconds. Files not named as
    :func:`merged_model` names its copies are left alone.

    Returns:
        The files deleted.
    """
    used: list[tuple[float, Path]] = []
    for path in Path(cache_dir).glob("*.gguf"):
        try:
            if _MERGED_NAME.fullmatch(path.name) and path.is_file():
                used.append((path.stat().st_atime, path))
        except OSError:  # deleted meanwhile by another process
            continue
    used.sort(reverse=True)
    now, deleted = time.time(), []
    for atime, path in used[KEEP_MERGED:]:
        if now - atime < KEEP_RECENT_S:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        deleted.append(path)
    if deleted:
        log.info("deleted %d merged copies not used lately from %s", len(deleted), cache_dir)
    return deleted
