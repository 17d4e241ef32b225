"""Training: warm-up supervised fine-tuning of a world model (TRL + PEFT) and export to llama.cpp.

Names are loaded on first use (PEP 562), so importing this package is instant and
``python -m lwm.train.sft`` runs without a second copy of the module; heavy imports
(torch, transformers, trl, peft, datasets) happen inside the functions.

    from lwm.train import TrainConfig, train_sft, export_lora_gguf
    result = train_sft(TrainConfig(data="runs/ds", out="runs/sft", max_steps=60))
    export_lora_gguf(result.adapter_dir, "runs/sft/adapter.gguf")
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "AdapterExportError": "lwm.train.export",
    "ExportResult": "lwm.train.export",
    "export_lora_gguf": "lwm.train.export",
    "TrainConfig": "lwm.train.sft",
    "TrainResult": "lwm.train.sft",
    "embedded_hf_dir": "lwm.train.sft",
    "load_sft_dataset": "lwm.train.sft",
    "load_trained_model": "lwm.train.sft",
    "to_prompt_completion": "lwm.train.sft",
    "train_sft": "lwm.train.sft",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'lwm.train' has no attribute {name!r}")
