"""World-model messages for an AgentWorldBench row, fitted to a token budget.

The message layout follows the reference evaluation (QwenLM/Qwen-AgentWorld
``eval/eval.py``): the row's ``system_str`` as the system message, earlier turns as
alternating user (action prompt) and assistant (real observation) messages, then the
current turn's prompt. Teacher forcing: the history always holds the real observations.
"""

from __future__ import annotations

from collections.abc import Callable

from lwm.schema import BenchRow, Message

_PER_MESSAGE = 4  # chat-template tokens around each message (role markers, separators)


def build_messages(
    row: BenchRow, count_tokens: Callable[[str], int] | None = None, max_prompt_tokens: int | None = None
) -> tuple[list[Message], list[int]]:
    """The chat messages that ask for the row's current observation.

    Args:
        row: the row.
        count_tokens: the model's token counter (needed with ``max_prompt_tokens``).
        max_prompt_tokens: budget for the history and the current turn; the oldest history
            turns are dropped until they fit. The system prompt is sent whole and not
            counted (it can be long: tool definitions), so a domain with a long system
            prompt keeps a history window as long as any other's.

    Returns:
        ``(messages, dropped)``: the messages and the 1-based numbers of the history
        turns that were dropped (empty when everything fit).
    """
    k = row.turn_idx - 1
    history = [(row.prompt[j], row.response[j]) for j in range(k)]
    current = row.current_prompt or row.prompt[k]
    head = [{"role": "system", "content": row.system_str}] if row.system_str else []
    dropped: list[int] = []
    if max_prompt_tokens is not None and count_tokens is not None:
        cost = lambda text: count_tokens(text) + _PER_MESSAGE  # noqa: E731
        fixed = cost(current)
        pair_costs = [cost(p) + cost(r) for p, r in history]
        total = fixed + sum(pair_costs)
        while history and total > max_prompt_tokens:
            total -= pair_costs.pop(0)
            history.pop(0)
            dropped.append(len(dropped) + 1)
    messages = list(head)
    for p, r in history:
        messages += [{"role": "user", "content": p}, {"role": "assistant", "content": r}]
    messages.append({"role": "user", "content": current})
    return messages, dropped
