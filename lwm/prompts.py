"""World-model messages for an AgentWorldBench row, fitted to a token budget.

The message layout follows the reference evaluation (QwenLM/Qwen-AgentWorld
``eval/eval.py``): the row's ``system_str`` as the system message, earlier turns as
alternating user (action prompt) and assistant (real observation) messages, then the
current turn's prompt. Teacher forcing: the history always holds the real observations.
"""

from __future__ import annotations

import json
import re
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
    # exactly as the row writes it, the benchmark's closing instruction included
    # (``current_prompt`` is the same turn without it)
    current = row.prompt[k]
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


def _signature(tool: object) -> str | None:
    """The one-line signature of a tool definition, ``None`` for anything else."""
    if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        tool = tool["function"]  # OpenAI's wrapper
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return None
    schema = tool.get("inputSchema", tool.get("parameters"))
    if not isinstance(schema, dict) or not ({"type", "properties"} & schema.keys()):
        return None
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    args = ", ".join(f"{k}{'' if k in required else '?'}: {v.get('type', 'any') if isinstance(v, dict) else 'any'}"
                     for k, v in props.items())
    description = tool.get("description") if isinstance(tool.get("description"), str) else ""
    first = " ".join(description.split()).split(". ")[0].rstrip(".")
    return f"- {tool['name']}({args}): {first}" if first else f"- {tool['name']}({args})"


def compact_tools(system_prompt: str) -> str:
    """``system_prompt`` with each tool definition written as one JSON object per line
    (MCP's ``tools/list``, OpenAI-style function definitions) replaced by a one-line
    signature, ``- name(arg: type, optional?: type): first sentence of the description``,
    and the ``[`` / ``]`` lines around a list of them dropped. The embedded model's budget
    does not hold the filesystem server's system prompt (3,691 SmolLM2 tokens with its tool
    list, 748 with signatures); the signatures keep what a world model needs to predict
    results (names, arguments, what each does). Other text is unchanged."""
    lines = system_prompt.split("\n")
    compact: list[str | None] = []
    for line in lines:
        text = line.strip().rstrip(",")
        try:
            tool = json.loads(text) if text.startswith("{") and text.endswith("}") else None
        except ValueError:
            tool = None
        compact.append(_signature(tool))
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i + 1  # a "[" line, rewritten definitions, a "]" line: the brackets go
        while j < len(lines) and compact[j] is not None:
            j += 1
        if lines[i].strip() == "[" and j > i + 1 and j < len(lines) and lines[j].strip() == "]":
            out += compact[i + 1 : j]
            i = j + 1
            continue
        out.append(compact[i] if compact[i] is not None else lines[i])
        i += 1
    return "\n".join(out)


#: Phrasings of a world-model system prompt: ``(role line, closing instruction)`` templates.
#: 0 is ``lwm``'s own (the prompt unchanged); the others say the same in other words, after
#: the style of other world-model benchmarks (a role stated differently, the answer tag asked
#: for in other terms). ``lwm data build --prompt-variety`` trains on 0-2 and writes the
#: held-out rows in :data:`UNSEEN_PHRASING` as well, which no example is trained on.
PHRASINGS: tuple[tuple[str, str], ...] = (
    ("", ""),
    ("You are the environment of an AI agent: simulate {rest}",
     "Think briefly about what the action does, then give the resulting {thing} between <predicted_observation> and "
     "</predicted_observation>."),
    ("Role: world model. Simulate {rest}",
     "First reason in a few sentences. Then output the next {thing} enclosed in <predicted_observation>"
     "</predicted_observation> tags, exactly as the environment would display it."),
    ("You will play the part of {what} and reproduce {rest}",
     "Respond with a short analysis followed by the environment's response ({thing}) wrapped in "
     "<predicted_observation> … </predicted_observation>."),
)
UNSEEN_PHRASING = 3
_ROLE = re.compile(r"\AYou are (?P<article>an?) (?P<what>[^:\n]+?) World Model: you simulate,? (?P<rest>[^\n]*)")
_CLOSING = re.compile(r"Write brief reasoning, then the (?P<thing>[^<]+?) inside\s*"
                      r"<predicted_observation></predicted_observation>\.")


def rephrase(system_prompt: str, phrasing: int) -> str:
    """``system_prompt`` in phrasing ``phrasing`` of :data:`PHRASINGS`: its role line and its
    closing instruction reworded (parts not in ``lwm``'s own wording are left as they are).

    Raises:
        IndexError: no such phrasing.
    """
    if isinstance(phrasing, bool) or not isinstance(phrasing, int) or not 0 <= phrasing < len(PHRASINGS):
        raise IndexError(f"no phrasing {phrasing!r}: there are {len(PHRASINGS)} (0-{len(PHRASINGS) - 1})")
    role, closing = PHRASINGS[phrasing]
    if not role:
        return system_prompt
    text = _ROLE.sub(lambda m: role.format(what=f"{m['article']} {m['what']} World Model", rest=m["rest"]),
                     system_prompt, count=1)
    return _CLOSING.sub(lambda m: closing.format(thing=" ".join(m["thing"].split())), text, count=1)
