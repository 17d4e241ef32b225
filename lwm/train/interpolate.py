"""A trained adapter at part strength: the weights between the model it was trained from and the
fine-tuned one (``lwm train interpolate``).

WiSE-FT (Wortsman et al., "Robust fine-tuning of zero-shot models", CVPR 2022,
arXiv:2109.01903) ensembles a model's weights before and after fine-tuning,
``θ(w) = (1 − w)·θ₀ + w·θ₁``, and reports that part of the fine-tuned gain is kept on the
fine-tuning distribution while much of what fine-tuning cost elsewhere comes back. A LoRA
adapter is ``θ₁ = θ₀ + (lora_alpha / r)·B·A``, so ``θ(w)`` is the same adapter with
``lora_alpha · w``: one number changes, the tensors are copied as they are. ``θ₀`` is the
model the adapter applies to — the run's recorded ``model`` — and a chain of rounds
(``lwm train rft --policy <earlier run>``) trains one adapter further, so for its last round
``θ₀`` is the first round's starting model, not the round before.

Output directory, a finished run that ``lwm agent eval --policy OUT`` plays and
``lwm train rft --policy OUT`` trains further::

    adapter/          the run's adapter, its lora_alpha times the weight
    adapter.gguf      its llama.cpp form
    lwm_train.json    the run's record (its lora_alpha times the weight), plus ``interpolated``:
                      ``{"from": RUN (resolved), "weight": w}`` (a run interpolated twice: its
                      lora_alpha says the product of the weights)
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

from lwm.errors import DataNotFoundError
from lwm.jsonl import read_json, write_atomic
from lwm.train.records import ADAPTER_META, RUN_FILE

#: The smallest weight: below it the adapter's alpha, stored as float32 in the GGUF, can round to 0,
#: which llama.cpp reads as "no alpha" (full strength); the model is the base one in effect anyway.
MIN_WEIGHT = 1e-6


def interpolate_run(run: str | Path, out: str | Path, weight: float = 0.5) -> Path:
    """Write ``run``'s adapter at ``weight`` of its strength to ``out`` (see the module).

    Args:
        run: a finished training run's directory (``adapter/adapter_config.json``,
            ``lwm_train.json``): ``lwm train sft``, ``rl`` or ``rft``.
        out: the directory to write (new, or empty); built in a hidden folder beside it and
            renamed when whole. Run again with the same ``run`` and ``weight`` and it is
            returned as it is.
        weight: the share of the fine-tuned change kept, in [:data:`MIN_WEIGHT`, 1]: 1 is
            ``run`` itself, 0.5 the midpoint (WiSE-FT's middle setting).

    Returns:
        the adapter for llama.cpp, ``out/adapter.gguf``.

    Raises:
        ValueError: ``weight`` out of range; ``out`` is ``run``, inside it or around it, a
            symbolic link, or holds something else; the adapter's ``lora_alpha`` is not a
            positive number.
        DataNotFoundError: ``run`` is not a finished run (the missing file named).
        RowFormatError: a JSON file of ``run`` is damaged (file and line).
        AdapterExportError, ModelUnavailableError: the GGUF export failed.
    """
    from lwm.train.rl import export_adapter, trained_model

    if not (isinstance(weight, (int, float)) and math.isfinite(weight) and MIN_WEIGHT <= weight <= 1):
        raise ValueError(f"weight must be a number in [{MIN_WEIGHT:g}, 1], got {weight}")
    run, out = Path(run), Path(out)
    missing = [f for f in ("adapter/adapter_config.json", RUN_FILE) if not (run / f).is_file()]
    if missing:
        raise DataNotFoundError(f"{run} is not a finished training run (no {', '.join(missing)})")
    here, there = run.resolve(), out.resolve()
    if there == here or here in there.parents or there in here.parents:
        raise ValueError(f"--out {out} is the run {run}, inside it or around it: choose a directory beside it")
    if out.is_symlink():
        raise ValueError(f"--out {out} is a symbolic link: choose a directory")
    cfg, record = read_json(run / "adapter" / "adapter_config.json"), read_json(run / RUN_FILE)
    alpha = cfg.get("lora_alpha")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"{run / 'adapter/adapter_config.json'}: 'lora_alpha' is not a positive number "
                         f"({alpha!r}): not a LoRA adapter this can scale")
    mark = {"from": str(here), "weight": weight}
    if out.exists():
        done = out / RUN_FILE
        if done.is_file() and read_json(done).get("interpolated") == mark and (out / "adapter.gguf").is_file():
            return out / "adapter.gguf"
        if not out.is_dir() or any(out.iterdir()):
            held = read_json(done).get("interpolated") if done.is_file() else None
            why = f" (the interpolation {held})" if held else ""
            raise ValueError(f"{out} already holds something else{why}: choose a new --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    # its own folder: two calls at once never write into the same one (the second's rename is refused)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.interpolating-", dir=out.parent))
    try:
        shutil.copytree(run / "adapter", tmp / "adapter")
        write_atomic(tmp / "adapter" / "adapter_config.json", json.dumps(_scaled(cfg, weight), indent=2) + "\n")
        # the trainers' copies of the setting, kept in step with the adapter's
        meta = tmp / "adapter" / ADAPTER_META
        if meta.is_file():
            write_atomic(meta, json.dumps(_scaled(read_json(meta), weight), indent=2) + "\n")
        record.update({k: _scaled(record[k], weight) for k in ("settings", "config")
                       if isinstance(record.get(k), dict)})
        export_adapter(tmp / "adapter", trained_model(run))
        write_atomic(tmp / RUN_FILE, json.dumps({**record, "interpolated": mark}, indent=2) + "\n")
        if out.exists():
            out.rmdir()   # empty, checked above
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)   # gone already when renamed
    return out / "adapter.gguf"


def _scaled(settings: dict, weight: float) -> dict:
    """``settings`` with its ``lora_alpha`` (where it is a number) times ``weight``."""
    alpha = settings.get("lora_alpha")
    return {**settings, "lora_alpha": alpha * weight} if isinstance(alpha, (int, float)) else settings


__all__ = ["MIN_WEIGHT", "interpolate_run"]
