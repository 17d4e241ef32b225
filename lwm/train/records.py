"""What a training run writes beside its outputs, and reading it back; the setting checks
every trainer shares.

Shared by SFT (:mod:`lwm.train.sft`), RL (:mod:`lwm.train.rl`) and the adapter converters
(:mod:`lwm.train.export`).
"""

from __future__ import annotations

import math
from pathlib import Path

from lwm.errors import ModelUnavailableError
from lwm.jsonl import read_json

#: The run's settings, written in --out when training starts; checked on --resume.
RUN_FILE = "lwm_train.json"
#: Written beside a saved adapter: what base model it belongs to (read by load/export).
ADAPTER_META = "lwm_adapter.json"
#: Written in --out when training ends.
METRICS_FILE = "metrics.json"


def check_lr(lr: float) -> None:
    """Refuse a learning rate that is not a number in (0, 1] (an infinite or huge one trains
    an adapter of NaN weights; 0 trains nothing; LoRA fine-tuning uses about 1e-5 to 1e-3).

    Raises:
        ValueError: saying which value arrived.
    """
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and 0 < lr <= 1):
        raise ValueError(f"lr must be a number in (0, 1], got {lr}")


def adapter_base(path: Path) -> str:
    """The base model of an adapter folder: ``"embedded"`` or a model directory.

    Raises:
        ModelUnavailableError: the folder records no base model.
    """
    # The adapter's own record, else (a checkpoint-N folder) the run's settings.
    for meta, keys in ((path / ADAPTER_META, ("model",)), (path.parent / RUN_FILE, ("settings", "model"))):
        if meta.is_file():
            value = read_json(meta)
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            if isinstance(value, str) and value:
                return value
    base = read_json(path / "adapter_config.json").get("base_model_name_or_path")
    if not base:
        raise ModelUnavailableError(f"{path}: cannot tell the adapter's base model (no {ADAPTER_META})")
    return base
