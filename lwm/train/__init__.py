"""Training: warm-up supervised fine-tuning of a world model (TRL + PEFT) and export to llama.cpp.

Importing this package is light; the heavy libraries (torch, transformers, trl, peft,
datasets) are imported inside the functions that use them.

    from lwm.train import TrainConfig, train_sft, export_lora_gguf
    result = train_sft(TrainConfig(data="runs/ds", out="runs/sft", max_steps=60))
    export_lora_gguf(result.adapter_dir, "runs/sft/adapter.gguf")
"""

from lwm.train.export import ExportResult, export_lora_gguf
from lwm.train.sft import (
    TrainConfig,
    TrainResult,
    embedded_hf_dir,
    load_sft_dataset,
    load_trained_model,
    to_prompt_completion,
    train_sft,
)

__all__ = ["ExportResult", "TrainConfig", "TrainResult", "embedded_hf_dir", "export_lora_gguf", "load_sft_dataset",
           "load_trained_model", "to_prompt_completion", "train_sft"]
