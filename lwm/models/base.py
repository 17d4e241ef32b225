"""What every world-model backend offers: chat messages in, one generation out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from lwm.schema import Message


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings, recorded with every prediction.

    Attributes:
        temperature: 0 is greedy.
        top_p: nucleus sampling mass.
        max_tokens: generated tokens at most.
        seed: sampling seed where the backend supports one.
        stop: stop strings.
        extra_body: passed through to OpenAI-compatible servers unchanged (e.g.
            ``{"chat_template_kwargs": {"enable_thinking": false}}`` as JSON for vLLM/SGLang).
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    extra_body: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


@dataclass
class Generation:
    """One model answer.

    Attributes:
        text: the message content (may contain inline ``<think>`` reasoning).
        reasoning: reasoning the server returned separately (``reasoning_content``), if any.
        finish_reason: ``stop``, ``length`` …
        prompt_tokens: tokens in the prompt, if reported.
        completion_tokens: tokens generated, if reported.
    """

    text: str
    reasoning: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@runtime_checkable
class ChatModel(Protocol):
    """A world-model backend.

    Attributes:
        name: the model name recorded in provenance.
        context_window: tokens the model can attend to, if known.
    """

    name: str
    context_window: int | None

    async def generate(self, messages: list[Message], sampling: SamplingParams) -> Generation:
        """Generate one answer. Raises on failure (callers count failures)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` (exact for local models, an estimate for remote ones)."""
        ...

    async def aclose(self) -> None:
        """Release connections or weights."""
        ...


class FunctionChatModel:
    """A backend that answers from a Python function: the designed seam for unit tests
    and scripted policies (not a world model).

    Args:
        fn: ``fn(messages) -> str``.
        name: recorded as the model name.
    """

    context_window = None

    def __init__(self, fn, name: str = "function") -> None:
        self.fn, self.name = fn, name

    async def generate(self, messages: list[Message], sampling: SamplingParams) -> Generation:
        return Generation(text=self.fn(messages), finish_reason="stop")

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    async def aclose(self) -> None:
        pass


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 3.5 characters per token for English and code)."""
    return int(len(text) / 3.5) + 1


def encodable(text: str) -> str:
    """``text`` with lone surrogates (from ``\\ud800`` escapes in data, which UTF-8 cannot
    encode) replaced by U+FFFD, so that a request can be sent at all.

    >>> encodable("a\\ud800b") == "a\\ufffdb"
    True
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
