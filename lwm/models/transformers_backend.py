"""The alternative local runtime: any Hugging Face causal LM through ``transformers``.

Requests that arrive together are generated as one left-padded batch, which is where
this runtime is strongest on a CPU (docs/benchmarks.md). It also loads the embedded
GGUF, dequantized (slow to load: about 40 s on 2 cores).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lwm.errors import ModelUnavailableError
from lwm.models.base import Generation, Message, SamplingParams


class TransformersChatModel:
    """A chat model run by ``transformers`` on the CPU, with request batching.

    Args:
        model: a Hugging Face model directory, or ``"embedded"`` for the bundled GGUF.
        max_batch: requests generated together at most.
        name: model name recorded in provenance.

    Attributes:
        scores_whole_answers: ``True``: :meth:`answer_logprobs` scores every token of an
            answer (what :mod:`lwm.candidates` needs).

    Raises:
        ModelUnavailableError: torch/transformers or the weights are missing.
    """

    scores_whole_answers = True

    def __init__(self, model: str = "embedded", *, max_batch: int = 16, name: str | None = None) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
        except ImportError as e:
            raise ModelUnavailableError("transformers runtime needs `pip install lwm[hf]`") from e
        from lwm.models.embedded import named_gguf

        if (gguf := named_gguf(model)) is not None:  # a named embedded model, its shipped adapter merged in
            kwargs = dict(gguf_file=gguf.name, quantization_config=GgufConfig(dequantize=True))
            self.tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            self.model = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **kwargs)
            from lwm.models.embedded import EMBEDDED_NAME

            self.name = name or (EMBEDDED_NAME + "-hf" if model == "embedded" else f"{model}-hf")
        else:
            if not Path(model).is_dir():  # local directories only: never a hub download
                raise ModelUnavailableError(f"no Hugging Face model directory at {model}")
            self.tokenizer = AutoTokenizer.from_pretrained(model)
            self.model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
            self.name = name or Path(model).name
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model.eval()
        self.context_window = getattr(self.model.config, "max_position_embeddings", None)
        self.max_batch = max_batch
        self._pending: list[tuple[list[Message], SamplingParams, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None

    async def generate(self, messages: list[Message], sampling: SamplingParams) -> Generation:
        fut = asyncio.get_running_loop().create_future()
        self._pending.append((messages, sampling, fut))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(0)  # let requests submitted together join the batch
            # One batch shares decoding settings: take the first request's and those equal to it.
            first = self._pending[0][1]
            batch = [p for p in self._pending if p[1] == first][: self.max_batch]
            for p in batch:
                self._pending.remove(p)
            try:
                gens = await asyncio.to_thread(self._generate_batch, [m for m, _, _ in batch], first)
            except Exception as e:  # every request of the batch fails the same way
                for _, _, fut in batch:
                    fut.set_exception(e)
            else:
                for (_, _, fut), gen in zip(batch, gens, strict=True):
                    fut.set_result(gen)

    def _generate_batch(self, conversations: list[list[Message]], sampling: SamplingParams) -> list[Generation]:
        import torch

        texts = [self.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
                 for c in conversations]
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        greedy = sampling.temperature <= 0
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        with torch.inference_mode():
            out = self.model.generate(
                **enc, max_new_tokens=sampling.max_tokens, do_sample=not greedy,
                temperature=None if greedy else sampling.temperature, top_p=None if greedy else sampling.top_p,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        gens = []
        prompt_len = enc["input_ids"].shape[1]
        for i, seq in enumerate(out[:, prompt_len:]):
            ids = [t for t in seq.tolist() if t != self.tokenizer.pad_token_id]
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            for stop in sampling.stop:
                text = text.split(stop)[0]
            hit_eos = self.tokenizer.eos_token_id in seq.tolist()
            gens.append(Generation(
                text=text, finish_reason="stop" if hit_eos else "length",
                prompt_tokens=int(enc["attention_mask"][i].sum()), completion_tokens=len(ids),
            ))
        return gens

    async def answer_logprobs(self, messages: list[Message], answers: list[str]) -> list[float]:
        """Log-probability of each of ``answers`` as the whole assistant reply after
        ``messages`` (the sum over its tokens; one forward pass per answer)."""
        return await asyncio.to_thread(self._answer_logprobs, messages, answers)

    def _answer_logprobs(self, messages: list[Message], answers: list[str]) -> list[float]:
        import torch

        prompt = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        base = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        out = []
        for answer in answers:
            ids = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
            with torch.inference_mode():
                logits = self.model(torch.tensor([base + ids])).logits[0, len(base) - 1:-1]
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            out.append(float(logprobs[torch.arange(len(ids)), torch.tensor(ids)].sum()))
        return out

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    async def aclose(self) -> None:
        pass
