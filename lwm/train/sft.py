"""Warm-up supervised fine-tuning of a world model: TRL's ``SFTTrainer`` with PEFT LoRA.

The model learns to write the next observation (the assistant target) given the
world-model prompt (system prompt, history window, current action) built by
``lwm.prompts.build_messages``. The loss is on the completion only.

Input contract (docs/training.md): a dataset directory with a ``train`` split and an
optional ``validation`` split, each a set of rows in TRL's *conversational
prompt-completion* format::

    {"prompt": [{"role": "system", "content": …}, {"role": "user", "content": …}, …],
     "completion": [{"role": "assistant", "content": "<predicted_observation>…</predicted_observation>"}]}

Rows with a ``messages`` list whose last message is the assistant target, or with
``messages`` plus a ``completion`` (string or one-message list), are accepted too and
converted. Other columns (provenance, ids) are ignored. Splits are read from
``DIR/{split}.parquet``, ``DIR/{split}/*.parquet``, ``DIR/data/{split}-*.parquet``,
``DIR/{split}.jsonl`` or a ``datasets.save_to_disk`` folder (``dataset_dict.json``).

Run it as ``lwm train sft …`` or, for many GPUs, ``accelerate launch --config_file
configs/accelerate/deepspeed_zero2.yaml -m lwm.train.sft …`` (same flags).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lwm.errors import DataNotFoundError, ModelUnavailableError, RowFormatError
from lwm.jsonl import compare_settings, read_json, write_atomic
from lwm.progress import library_progress
from lwm.train.records import ADAPTER_META, METRICS_FILE, RUN_FILE, adapter_base, check_lr

#: PEFT target modules by default: every linear projection of a Llama/Qwen-style block.
DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

_ROLES = ("system", "user", "assistant")
#: ``TrainConfig.order`` → transformers' ``train_sampling_strategy``.
ORDERS = {"random": "random", "file": "sequential"}
_SPLITS = {"train": ("train",), "validation": ("validation", "valid", "val")}
# Settings that must not change when a run is resumed (epochs/steps/eval/save may).
_IDENTITY = ("data", "model", "lora", "lora_r", "lora_alpha", "lora_dropout", "target_modules", "lr",
             "batch_size", "grad_accum", "max_length", "seed", "init_adapter", "order")
# What a run recorded before a setting existed had.
_RECORDED_BEFORE = {"order": "random"}


@dataclass
class TrainConfig:
    """Settings of one warm-up SFT run (the CLI flags of ``lwm train sft``).

    Attributes:
        data: a dataset directory of ``lwm data build`` (train and validation splits, Parquet
            or JSONL, conversational prompt/completion rows; docs/training.md).
        out: run directory: checkpoints ``checkpoint-N/``, the final ``adapter/`` (LoRA) or
            ``model/`` (full fine-tuning), ``lwm_train.json`` and ``metrics.json``.
        model: ``"embedded"`` (SmolLM2-135M-Instruct, dequantized from the bundled GGUF
            to float32) or a local Hugging Face model directory.
        lora: train a LoRA adapter on the model (else all its weights).
        lora_r: LoRA rank.
        lora_alpha: LoRA alpha (default ``2 * lora_r``); the update is scaled by alpha / r.
        lora_dropout: dropout on the LoRA input.
        target_modules: module names LoRA wraps.
        epochs: passes over the training split (ignored when ``max_steps`` is set).
        max_steps: optimizer steps in all (overrides ``epochs``); on resume, the total
            including the steps already done.
        lr: peak learning rate (default 2e-4 with LoRA, 2e-5 for full fine-tuning); linear decay.
        batch_size: examples per device per forward pass.
        grad_accum: forward passes per optimizer step.
        max_length: longest example in tokens (prompt + completion, chat template
            included); longer examples are dropped and counted, never truncated.
        eval_steps: evaluate on the validation split every N steps (default: ``save_steps``).
        save_steps: save a checkpoint every N steps (and always at the last step).
        save_total_limit: checkpoints kept (oldest deleted first).
        logging_steps: log loss every N steps.
        warmup: linear learning-rate warm-up: a share of the steps when below 1 (0.05 =
            the first 5 %), else a number of steps.
        seed: seed of data order, LoRA initialization and dropout.
        order: ``random`` (the training split shuffled every epoch) or ``file`` (in the
            file's order, as ``lwm data verdicts --order by-task`` writes it: a task's
            success beside its failures in the same optimizer step).
        resume: continue from the last checkpoint in ``out`` (start fresh if there is none).
        eval_on_start: also evaluate before the first step (the loss of the base model).
        bf16: bfloat16 mixed precision (default: on when a CUDA GPU supports it; off on CPU).
        gradient_checkpointing: trade compute for memory (default: on with CUDA, off on CPU).
        init_adapter: start the LoRA adapter from this one instead of from zero: ``warmup``
            (the shipped warm-up adapter), a GGUF adapter (``lwm train export``'s) or a PEFT
            adapter folder. Its rank and target modules replace ``lora_r`` and
            ``target_modules``. Continuing the shipped adapter on new data keeps one small
            adapter to ship.
    """

    data: Path
    out: Path
    model: str = "embedded"
    lora: bool = True
    lora_r: int = 16
    lora_alpha: float | None = None
    lora_dropout: float = 0.05
    target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES
    epochs: float = 1.0
    max_steps: int | None = None
    lr: float | None = None
    batch_size: int = 4
    grad_accum: int = 1
    max_length: int = 1024
    eval_steps: int | None = None
    save_steps: int = 50
    save_total_limit: int = 2
    logging_steps: int = 5
    warmup: float = 0.0
    seed: int = 0
    order: str = "random"
    resume: bool = False
    eval_on_start: bool = False
    bf16: bool | None = None
    gradient_checkpointing: bool | None = None
    init_adapter: str | None = None

    def __post_init__(self) -> None:
        self.data, self.out = Path(self.data), Path(self.out)
        self.target_modules = tuple(self.target_modules)
        if self.lora_alpha is None:
            self.lora_alpha = float(2 * self.lora_r)
        if self.lr is None:
            self.lr = 2e-4 if self.lora else 2e-5
        check_lr(self.lr)
        for name in ("lora_r", "batch_size", "grad_accum", "max_length", "save_steps", "logging_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps}")
        if self.eval_steps is not None and self.eval_steps < 1:
            raise ValueError(f"eval_steps must be at least 1, got {self.eval_steps}")
        if not self.epochs > 0:
            raise ValueError(f"epochs must be positive, got {self.epochs}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.init_adapter is not None and not self.lora:
            raise ValueError("init_adapter starts a LoRA adapter: it cannot be used with full fine-tuning")
        if not isinstance(self.order, str) or self.order not in ORDERS:
            raise ValueError(f"unknown order {self.order!r} (one of {', '.join(ORDERS)})")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")

    def identity(self) -> dict[str, Any]:
        """The settings a resumed run must share with the run it continues (JSON-ready)."""
        d = {k: getattr(self, k) for k in _IDENTITY}
        d["data"] = str(self.data.resolve())
        d["target_modules"] = list(self.target_modules)
        return d


@dataclass
class TrainResult:
    """What one ``train_sft`` call did.

    Attributes:
        out: the run directory.
        output_dir: the final adapter (``out/adapter``) or full model (``out/model``).
        steps: optimizer steps done in all (including those of a resumed run).
        resumed_from: the checkpoint this call continued from, or None.
        train_examples / eval_examples: examples used (after dropping long ones).
        dropped_too_long: ``{split: count}`` of examples longer than ``max_length``.
        train_loss: mean training loss of this call's steps.
        eval_loss: validation loss at the end (None without a validation split).
        eval_loss_start: validation loss before the first step (with ``eval_on_start``).
        train_tokens: tokens processed by this call (prompt and completion, no padding),
            summed over devices.
        seconds: wall time of ``trainer.train`` (evaluations during training included).
        tokens_per_second: ``train_tokens / seconds``.
        log_history: the trainer's log entries (loss, eval_loss, learning_rate… by step).
    """

    out: Path
    output_dir: Path
    steps: int
    resumed_from: Path | None
    train_examples: int
    eval_examples: int
    dropped_too_long: dict[str, int]
    train_loss: float
    eval_loss: float | None
    eval_loss_start: float | None
    train_tokens: int
    seconds: float
    tokens_per_second: float
    log_history: list[dict] = field(default_factory=list)

    @property
    def adapter_dir(self) -> Path:
        """Alias of ``output_dir`` (the adapter directory of a LoRA run)."""
        return self.output_dir


# ----------------------------------------------------------------------------- data


def _message(m: Any, where: str) -> dict[str, str]:
    if not isinstance(m, dict):
        raise ValueError(f"{where}: expected a message object {{role, content}}, got {type(m).__name__}")
    role, content = m.get("role"), m.get("content")
    if role not in _ROLES:
        raise ValueError(f"{where}: role must be one of {', '.join(_ROLES)}, got {role!r}")
    if not isinstance(content, str):
        raise ValueError(f"{where}: content must be a string, got {type(content).__name__}")
    return {"role": role, "content": content}


def _messages(ms: Any, field_name: str) -> list[dict[str, str]]:
    if hasattr(ms, "tolist"):  # numpy arrays from pandas-written Parquet
        ms = ms.tolist()
    if not isinstance(ms, list) or not ms:
        raise ValueError(f"'{field_name}' must be a non-empty list of messages, got {ms!r:.80}")
    return [_message(m, f"'{field_name}'[{i}]") for i, m in enumerate(ms)]


def to_prompt_completion(row: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    """Convert one dataset row to TRL's conversational prompt-completion form.

    Args:
        row: ``{"prompt": [messages], "completion": [assistant message] | str}``, or
            ``{"messages": [..., assistant message]}``, or ``{"messages": [...],
            "completion": str | [assistant message]}``. Extra keys are ignored.

    Returns:
        ``{"prompt": [messages ending with a user message], "completion": [one assistant
        message]}``, each message reduced to ``{"role", "content"}``.

    Raises:
        ValueError: the row does not follow any accepted form (the message says which
            field is wrong and what was expected).

    Example:
        >>> to_prompt_completion({"messages": [{"role": "user", "content": "ls"},
        ...                                    {"role": "assistant", "content": "a.txt"}]})
        {'prompt': [{'role': 'user', 'content': 'ls'}], 'completion': [{'role': 'assistant', 'content': 'a.txt'}]}
    """
    if not isinstance(row, dict):
        raise ValueError(f"expected an object, got {type(row).__name__}")
    if "prompt" in row and row["prompt"] is not None:
        if isinstance(row["prompt"], str):
            raise ValueError("'prompt' is a string: the conversational format needs a list of messages "
                             "[{role, content}, …] so that the model's chat template is applied")
        prompt, completion = _messages(row["prompt"], "prompt"), row.get("completion")
    elif "messages" in row and row["messages"] is not None:
        prompt, completion = _messages(row["messages"], "messages"), row.get("completion")
        if completion is None:
            if prompt[-1]["role"] != "assistant":
                raise ValueError("'messages' must end with the assistant target (or give a 'completion' field); "
                                 f"the last message has role {prompt[-1]['role']!r}")
            prompt, completion = prompt[:-1], [prompt[-1]]
            if not prompt:
                raise ValueError("'messages' holds only the assistant target: the prompt is empty")
    else:
        raise ValueError(f"expected a 'prompt' + 'completion' or a 'messages' field; found fields {sorted(row)}")
    if completion is None:
        raise ValueError("missing 'completion': the assistant target")
    if isinstance(completion, str):
        completion = [{"role": "assistant", "content": completion}]
    else:
        completion = _messages(completion, "completion")
    if len(completion) != 1 or completion[0]["role"] != "assistant":
        raise ValueError("'completion' must be exactly one assistant message, got roles "
                         f"{[m['role'] for m in completion]}")
    if prompt[-1]["role"] != "user":
        raise ValueError(f"the prompt must end with a user message (the current action), not {prompt[-1]['role']!r}")
    return {"prompt": prompt, "completion": completion}


def _split_files(data: Path, split: str) -> list[Path]:
    for name in _SPLITS[split]:
        for pattern in (f"{name}.parquet", f"{name}/*.parquet", f"data/{name}-*.parquet", f"{name}-*.parquet",
                        f"{name}.jsonl"):
            found = sorted(data.glob(pattern))
            if found:
                return found
    return []


def _read_rows(path: Path) -> list[tuple[int, dict]]:
    if path.suffix == ".jsonl":
        from lwm.jsonl import iter_jsonl

        return list(iter_jsonl(path))
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises ArrowInvalid, OSError… for a damaged file
        raise RowFormatError(path, 0, f"cannot read as Parquet: {e}") from None
    return list(enumerate(table.to_pylist(), start=1))


def load_sft_dataset(data: str | Path) -> Any:
    """Read and check a dataset directory; return a ``datasets.DatasetDict``.

    Args:
        data: the dataset directory.

    Returns:
        A ``DatasetDict`` with a ``train`` split and, when present, a ``validation``
        split; columns ``prompt`` and ``completion`` (see ``to_prompt_completion``).

    Raises:
        DataNotFoundError: the directory does not exist or has no (or an empty) train split.
        RowFormatError: a row is malformed; names the file and the 1-based row (line).
    """
    from datasets import Dataset, DatasetDict

    data = Path(data)
    if not data.is_dir():
        raise DataNotFoundError(f"no dataset directory at {data} (build one with `lwm data build`)")
    splits: dict[str, list[dict]] = {}
    if (data / "dataset_dict.json").exists():  # written by DatasetDict.save_to_disk
        from datasets import load_from_disk

        saved = load_from_disk(str(data))
        for split, names in _SPLITS.items():
            name = next((n for n in names if n in saved), None)
            if name is not None:
                splits[split] = _convert(((i, r) for i, r in enumerate(saved[name], start=1)),
                                         data / name)
    else:
        for split in _SPLITS:
            rows: list[dict] = []
            for path in _split_files(data, split):
                rows += _convert(_read_rows(path), path)
            if rows or _split_files(data, split):
                splits[split] = rows
    if not splits.get("train"):
        found = sorted(p.name for p in data.iterdir())
        what = "an empty train split" if "train" in splits else "no train split"
        raise DataNotFoundError(f"{data} has {what}: expected train.parquet, train/*.parquet, "
                                f"data/train-*.parquet or train.jsonl (found: {', '.join(found) or 'nothing'})")
    return DatasetDict({k: Dataset.from_list(v) for k, v in splits.items() if v})


def _convert(rows, path: Path) -> list[dict]:
    out = []
    for line, row in rows:
        try:
            out.append(to_prompt_completion(row))
        except ValueError as e:
            raise RowFormatError(path, line, str(e)) from None
    return out


def _example_length(tokenizer: Any, example: dict) -> int:
    text = tokenizer.apply_chat_template(example["prompt"] + example["completion"], tokenize=False)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


# ----------------------------------------------------------------------------- model


def embedded_hf_dir() -> Path:
    """A Hugging Face folder of the embedded model (float32), converted once and cached.

    Dequantizing the bundled GGUF in transformers takes about 40 s on 2 cores (minutes on
    a busy machine); loading the saved folder takes about 1 s. The folder (about 540 MB)
    lives in ``$LWM_HOME/models/`` (see ``lwm.paths.lwm_home``) and is written
    atomically, so concurrent processes (several GPUs) never see half a folder.

    Raises:
        ModelUnavailableError: transformers, gguf or the embedded weights are missing.
    """
    return _model_dir("embedded")


def _hf_dir(gguf: Path) -> Path:
    # A GGUF file dequantized once into a Hugging Face folder under $LWM_HOME/models.
    from lwm.models.embedded import EMBEDDED_NAME, embedded_gguf_path
    from lwm.paths import lwm_home

    stem = EMBEDDED_NAME if gguf == embedded_gguf_path() else gguf.stem  # the bundled model's cache keeps its name
    target = lwm_home() / "models" / f"{stem}-hf-fp32"
    if (target / "config.json").exists():
        return target
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
    except ImportError as e:
        raise ModelUnavailableError("training needs `pip install lwm[hf]` (torch, transformers, gguf)") from e
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                     quantization_config=GgufConfig(dequantize=True))
        model.config.architectures = ["LlamaForCausalLM"]
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "lwm_source.json").write_text(json.dumps({"gguf": str(gguf), "bytes": gguf.stat().st_size}))
        try:
            os.rename(tmp, target)
        except OSError:  # another process finished first: keep its copy
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _model_dir(model: str) -> Path:
    # a named embedded model (embedded-warmup: the policy that starts from the world-model
    # warm-up), its shipped adapter merged in; else a transformers directory
    from lwm.models.embedded import named_gguf

    if (gguf := named_gguf(model)) is not None:
        return _hf_dir(gguf)
    path = Path(model)
    if not (path / "config.json").is_file():
        raise ModelUnavailableError(f"no Hugging Face model directory (with config.json) at {model}; "
                                    "use --model embedded or a local folder (model hubs are not contacted)")
    return path


def _load_base(model: str) -> tuple[Any, Any]:
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise ModelUnavailableError("training needs `pip install lwm[hf]` (torch, transformers, trl, peft)") from e
    path = _model_dir(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), tokenizer


def load_trained_model(path: str | Path) -> tuple[Any, Any]:
    """Load what ``train_sft`` saved (an adapter, a full model or a checkpoint) for generation.

    Args:
        path: ``out/adapter``, ``out/model`` or ``out/checkpoint-N``.

    Returns:
        ``(model, tokenizer)``: the model in eval mode on the CPU (a ``PeftModel`` for an
        adapter), float32.

    Raises:
        ModelUnavailableError: the folder holds no adapter or model, or its base is missing.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if (path / "adapter_config.json").is_file():
        from peft import PeftModel

        base = adapter_base(path)
        model, tokenizer = _load_base(base)
        model = PeftModel.from_pretrained(model, path)
        if (path / "tokenizer_config.json").is_file():
            tokenizer = AutoTokenizer.from_pretrained(path)
    elif (path / "config.json").is_file():
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(path)
    else:
        raise ModelUnavailableError(f"{path} holds neither a LoRA adapter (adapter_config.json) nor a model "
                                    "(config.json)")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.eval()
    return model, tokenizer


# ----------------------------------------------------------------------------- training


def _init_adapter_source(config: TrainConfig) -> Path:
    """The file or folder ``config.init_adapter`` names, checked before the model is loaded.

    Raises:
        ModelUnavailableError: neither ``warmup``, a GGUF adapter nor a PEFT adapter folder
            with its weights.
    """
    if config.init_adapter == "warmup":
        from lwm.models.embedded import warmup_adapter_path

        return warmup_adapter_path()
    path = Path(config.init_adapter)
    if path.is_file():
        from lwm.models.embedded import check_adapter

        return check_adapter(path)
    missing = [f for f in ("adapter_config.json", "adapter_model.safetensors") if not (path / f).is_file()]
    if missing:
        raise ModelUnavailableError(f"--init-adapter {config.init_adapter}: neither 'warmup', a GGUF adapter file "
                                    f"nor a PEFT adapter folder (no {' or '.join(missing)} there)")
    return path


def _with_init_adapter(model: Any, source: Path, config: TrainConfig) -> Any:
    """``model`` wrapped in the trainable LoRA adapter at ``source`` (a GGUF adapter is
    converted into ``out/init-adapter`` first, anew each time)."""
    from peft import PeftModel

    if source.is_file():
        from lwm.train.export import import_lora_gguf

        folder = config.out / "init-adapter"
        shutil.rmtree(folder, ignore_errors=True)  # never a leftover of another adapter
        source = import_lora_gguf(source, folder, base=config.model)
    return PeftModel.from_pretrained(model, str(source), is_trainable=True)


def _is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _prepare_out(config: TrainConfig) -> Path | None:
    """Check --out against --resume; return the checkpoint to continue from."""
    from transformers.trainer_utils import get_last_checkpoint

    out = config.out
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out} is a file, not a directory")
    last = get_last_checkpoint(str(out)) if out.is_dir() else None
    run_file = out / RUN_FILE
    if last and not config.resume:
        raise FileExistsError(f"{out} already holds checkpoints (last: {Path(last).name}); pass --resume to "
                              "continue that run, or choose a new --out")
    if last and run_file.is_file():
        compare_settings(read_json(run_file).get("settings", {}), config.identity(), out, _RECORDED_BEFORE)
    return Path(last) if last else None


def _write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, default=str) + "\n")


def _save_final(trainer: Any, tokenizer: Any, config: TrainConfig) -> Path:
    """Save the adapter (or full model) to out/adapter (out/model), replacing it atomically.

    Called on every process: ``trainer.save_model`` gathers sharded weights (DeepSpeed
    ZeRO-3, FSDP) collectively and writes on the main process only.
    """
    final = config.out / ("adapter" if config.lora else "model")
    tmp, old = config.out / f".{final.name}-new", config.out / f".{final.name}-old"
    main = trainer.is_world_process_zero()
    if main:
        shutil.rmtree(tmp, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    trainer.save_model(str(tmp))
    if main:
        tokenizer.save_pretrained(tmp)
        (tmp / "training_args.bin").unlink(missing_ok=True)
        _write_json(tmp / ADAPTER_META, {"model": config.model, "lora": config.lora,
                                         "lora_r": config.lora_r, "lora_alpha": config.lora_alpha})
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    return final


def train_sft(config: TrainConfig, *, show_progress: bool = True) -> TrainResult:
    """Fine-tune a world model on a dataset directory; save checkpoints and the result.

    Loss is on the completion only (``SFTConfig(completion_only_loss=True)`` on
    prompt-completion rows: the prompt tokens are masked). With a validation split,
    the validation loss is computed every ``eval_steps`` and at the end. A checkpoint is
    written every ``save_steps`` and at the last step, so a finished run can be
    extended with ``resume=True`` and a larger ``max_steps``.

    Args:
        config: the run's settings.
        show_progress: draw the trainer's progress bar (stderr) and print its logs.

    Returns:
        A ``TrainResult``; the same figures are written to ``out/metrics.json``.

    Raises:
        DataNotFoundError: missing dataset directory or train split.
        RowFormatError: a malformed row (file and row named).
        FileExistsError: ``out`` holds checkpoints and ``resume`` is False.
        RunMismatchError: resuming with settings other than the run's (``lwm_train.json``).
        ModelUnavailableError: the base model or the training libraries are missing.
        ValueError: every example is longer than ``max_length``.
    """
    with library_progress(show_progress):
        return _train_sft(config, show_progress)


def _train_sft(config: TrainConfig, show_progress: bool) -> TrainResult:
    data = load_sft_dataset(config.data)
    init = _init_adapter_source(config) if config.init_adapter is not None else None
    last = _prepare_out(config)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # model hubs are never contacted
    try:
        import torch
        from peft import LoraConfig
        from transformers import TrainerCallback
        from trl import SFTConfig, SFTTrainer
    except ImportError as e:
        raise ModelUnavailableError("training needs `pip install lwm[hf]` (torch, transformers, trl, peft, "
                                    "datasets)") from e

    model, tokenizer = _load_base(config.model)
    dropped: dict[str, int] = {}
    for split in list(data):
        keep = [i for i, ex in enumerate(data[split]) if _example_length(tokenizer, ex) <= config.max_length]
        dropped[split] = len(data[split]) - len(keep)
        data[split] = data[split].select(keep)
    if len(data["train"]) == 0:
        raise ValueError(f"all {dropped['train']} training examples are longer than max_length={config.max_length} "
                         "tokens: raise --max-length or build the dataset with a smaller token budget")
    has_eval = "validation" in data and len(data["validation"]) > 0

    cuda = torch.cuda.is_available()
    bf16 = config.bf16 if config.bf16 is not None else bool(cuda and torch.cuda.is_bf16_supported())
    checkpointing = config.gradient_checkpointing if config.gradient_checkpointing is not None else cuda
    args = SFTConfig(
        output_dir=str(config.out),
        num_train_epochs=config.epochs,
        max_steps=config.max_steps or -1,
        learning_rate=config.lr,
        lr_scheduler_type="linear",
        warmup_steps=config.warmup if config.warmup < 1 else int(config.warmup),
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum,
        max_length=config.max_length,
        completion_only_loss=True,
        eval_strategy="steps" if has_eval else "no",
        eval_steps=config.eval_steps or config.save_steps,
        eval_on_start=config.eval_on_start and has_eval,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        logging_steps=config.logging_steps,
        logging_first_step=True,
        seed=config.seed,
        data_seed=config.seed,
        train_sampling_strategy=ORDERS[config.order],
        bf16=bf16,
        fp16=False,
        gradient_checkpointing=checkpointing,  # TRL's name; transformers 5 calls it activation_checkpointing
        activation_checkpointing=checkpointing,
        dataloader_pin_memory=cuda,
        report_to="none",
        disable_tqdm=not show_progress,
        dataloader_num_workers=0,
    )
    peft_config = None
    if init is not None:
        model = _with_init_adapter(model, init, config)
    elif config.lora:
        peft_config = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                                 target_modules=list(config.target_modules), bias="none", task_type="CAUSAL_LM")

    class _SaveAtEnd(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN003
            if state.global_step >= state.max_steps:
                control.should_save = True
            return control

    trainer = SFTTrainer(model=model, args=args, train_dataset=data["train"],
                         eval_dataset=data["validation"] if has_eval else None, processing_class=tokenizer,
                         peft_config=peft_config, callbacks=[_SaveAtEnd()])
    if _is_main_process():
        config.out.mkdir(parents=True, exist_ok=True)
        _write_json(config.out / RUN_FILE, {"settings": config.identity(), "config": asdict(config)})
    start = time.monotonic()
    output = trainer.train(resume_from_checkpoint=str(last) if last else None)
    seconds = time.monotonic() - start
    train_tokens = int(getattr(trainer, "_total_train_tokens", 0))

    history = list(trainer.state.log_history)
    eval_losses = [(h["step"], h["eval_loss"]) for h in history if "eval_loss" in h]
    if has_eval and (not eval_losses or eval_losses[-1][0] != trainer.state.global_step):
        eval_losses.append((trainer.state.global_step, trainer.evaluate()["eval_loss"]))
        history = list(trainer.state.log_history)
    start_loss = next((loss for step, loss in eval_losses if step == 0), None)

    final = _save_final(trainer, tokenizer, config)
    result = TrainResult(
        out=config.out, output_dir=final, steps=trainer.state.global_step, resumed_from=last,
        train_examples=len(data["train"]), eval_examples=len(data["validation"]) if has_eval else 0,
        dropped_too_long=dropped, train_loss=float(output.training_loss),
        eval_loss=eval_losses[-1][1] if eval_losses else None, eval_loss_start=start_loss,
        train_tokens=train_tokens, seconds=seconds,
        tokens_per_second=train_tokens / seconds if seconds > 0 else math.nan, log_history=history,
    )
    if trainer.is_world_process_zero():
        _write_json(config.out / METRICS_FILE, {k: v for k, v in asdict(result).items() if k != "log_history"})
    return result
