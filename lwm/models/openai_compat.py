"""Any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp server, Ollama, hosted APIs)."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from typing import Any

from lwm.errors import ModelUnavailableError
from lwm.models.base import Generation, Message, SamplingParams, approx_tokens, encodable


class OpenAIChatModel:
    """A world model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Uses the ``openai`` SDK's async client, whose retries back off exponentially on
    transient errors (connection errors, 408, 409, 429, 5xx). An answer without a
    completion (an HTTP 200 whose body is an error object, ``{"error": {"message": …}}``
    or vLLM's ``{"object": "error", "message": …}``, or an event stream ending in an
    error event) raises :class:`~lwm.errors.ModelUnavailableError` with the server's
    own message; the SDK alone would fail on it with a ``TypeError``.

    Args:
        model: the served model name.
        base_url: e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as a bearer token (``"EMPTY"`` for local servers).
        concurrency: requests in flight at most.
        timeout: seconds per request.
        max_retries: retries per request on transient errors.
        context_window: the server's context length, if known (for history windows).
    """

    SHARD = 64  # connections per HTTP client at most

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "EMPTY",
        *,
        concurrency: int = 16,
        timeout: float = 600.0,
        max_retries: int = 4,
        context_window: int | None = None,
    ) -> None:
        import httpx
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        self.name, self.base_url, self.context_window = model, base_url, context_window
        # As many connections as requests in flight, in pools of at most SHARD: httpcore
        # scans its whole pool for each request, which at 1,024 in flight cost a quarter
        # of a simulated step's CPU time (bench/sim_parallel.py).
        shards = math.ceil(max(concurrency, 1) / self.SHARD)
        size = math.ceil(max(concurrency, 1) / shards)
        pool = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        self._clients = [AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
                                     http_client=DefaultAsyncHttpxClient(limits=pool, timeout=timeout))
                         for _ in range(shards)]
        self._next_client = itertools.cycle(self._clients)
        self._slots = asyncio.Semaphore(concurrency)

    async def generate(self, messages: list[Message], sampling: SamplingParams) -> Generation:
        """One chat completion.

        Returns:
            the :class:`Generation` with ``finish_reason``, ``prompt_tokens`` and
            ``completion_tokens`` as the server reported them (``None`` where it did not).

        Raises:
            ModelUnavailableError: the server answered without a completion (its message
                is quoted), with a body that is not JSON, or with content that is not text.
            openai.APIError: the request failed after the SDK's retries (connection,
                timeout, HTTP error status).
        """
        kwargs: dict[str, Any] = dict(
            model=self.name,
            messages=[{**m, "content": encodable(m["content"])} for m in messages],
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
        )
        if sampling.seed is not None:
            kwargs["seed"] = sampling.seed
        if sampling.stop:
            kwargs["stop"] = list(sampling.stop)
        if sampling.extra_body:
            kwargs["extra_body"] = sampling.extra_body
        async with self._slots:
            raw = await next(self._next_client).chat.completions.with_raw_response.create(**kwargs)
        try:
            resp = raw.parse()
        except ValueError:  # JSON content type, body not JSON (or not UTF-8)
            body = raw.http_response.content[:300]
            raise ModelUnavailableError(f"{self.base_url}: the server's answer is not valid JSON: {body!r}") from None
        # The SDK does not validate answers: the body may be any JSON ([1, 2, 3], null, 42)
        # or a completion whose choices or usage are not what the protocol says.
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices or getattr(choices[0], "message", None) is None:
            raise ModelUnavailableError(f"{self.base_url}: {_no_completion(raw.http_response.text)}")
        choice = choices[0]
        msg = choice.message
        # vLLM/SGLang put parsed reasoning in `reasoning_content` (newer vLLM: `reasoning`).
        extra = getattr(msg, "model_extra", None) or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        usage = getattr(resp, "usage", None)
        return Generation(
            text=self._text(getattr(msg, "content", None)),
            reasoning=reasoning if isinstance(reasoning, str) else None,
            finish_reason=getattr(choice, "finish_reason", None),
            prompt_tokens=_count(getattr(usage, "prompt_tokens", None)),
            completion_tokens=_count(getattr(usage, "completion_tokens", None)),
        )

    async def answer_logprobs(self, messages: list[Message], answers: list[str]) -> list[float]:
        """Log-probabilities of ``answers`` as the assistant's reply, read from the server's
        top-20 log-probabilities of the first generated token (one request, one token): a
        token counts for the one answer that starts with it (case and surrounding spaces
        aside); an answer no listed token starts gets ``-inf``. The answers must differ in
        their first words for this to tell them apart.

        Raises:
            ModelUnavailableError: the server returned no log-probabilities.
            openai.APIError: as :meth:`generate`.
        """
        kwargs: dict[str, Any] = dict(model=self.name, messages=[{**m, "content": encodable(m["content"])}
                                                                 for m in messages],
                                      temperature=0.0, max_tokens=1, logprobs=True, top_logprobs=20)
        async with self._slots:
            raw = await next(self._next_client).chat.completions.with_raw_response.create(**kwargs)
        try:
            top = raw.parse().choices[0].logprobs.content[0].top_logprobs
            entries = [(e.token, e.logprob) for e in top]
            if not all(isinstance(t, str) and isinstance(p, (int, float)) and not isinstance(p, bool)
                       for t, p in entries):
                raise TypeError
        except ValueError:  # JSON content type, body not JSON
            raise ModelUnavailableError(f"{self.base_url}: the server's answer is not valid JSON: "
                                        f"{raw.http_response.content[:300]!r}") from None
        except (AttributeError, IndexError, TypeError):
            raise ModelUnavailableError(f"{self.base_url}: the server returned no log-probabilities (it must support "
                                        f"logprobs/top_logprobs): {raw.http_response.text[:300]!r}") from None
        out = [-math.inf] * len(answers)
        for token, logprob in entries:
            piece = token.strip().lower()
            owners = [i for i, a in enumerate(answers) if piece and a.lower().startswith(piece)]
            if len(owners) == 1:  # a token both answers start with tells them apart no more
                i = owners[0]
                a, b = out[i], logprob
                out[i] = b if a == -math.inf else max(a, b) + math.log1p(math.exp(-abs(a - b)))
        return out

    def _text(self, content: Any) -> str:
        # The SDK does not validate answers: content may arrive as a list of parts or a number.
        if content is None or isinstance(content, str):
            return content or ""
        if isinstance(content, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in content):
            return "".join(p["text"] for p in content)  # OpenAI's content parts [{"type": "text", "text": …}]
        raise ModelUnavailableError(f"{self.base_url}: the server's message content is not text: {content!r:.200}")

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.close()


def _count(value: Any) -> int | None:
    """A token count as the server reported it, or ``None`` where it is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _no_completion(body: str) -> str:
    """Why ``body`` (a 200 answer without a completion) holds none, in the server's words
    when it gave any: the message of its error object, or of the last error event of an
    event stream (``data: {...}`` lines, as OpenAI-compatible servers stream)."""
    events = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
    for chunk in reversed(events or [body]):
        try:
            obj = json.loads(chunk)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        error = obj.get("error")
        if isinstance(error, dict) and error.get("message"):
            return f"the server answered with an error: {error['message']}"
        if isinstance(error, str) and error:
            return f"the server answered with an error: {error}"
        if obj.get("object") == "error" and obj.get("message"):
            return f"the server answered with an error: {obj['message']}"
    if events:
        return "the server answered with an event stream, which was not requested"
    return f"the server answered without a completion (no choices with a message): {body[:300]!r}"

