"""Reasoning re-annotation: ``lwm data annotate``.

A teacher LLM (any OpenAI-compatible endpoint) is shown an example of a built dataset —
the environment's system prompt, the history window, the current action — **and** the
real next observation, and asked to write the reasoning that leads from the input to
that observation: how the environment processes the action, which earlier state matters,
what the output must look like. The trace becomes the example's ``<think>`` block.

**Flow.** ``annotate`` reads a directory written by ``lwm data build`` and writes a new
one in the same layout (same splits, same families) whose accepted examples have
``reasoning`` filled and a completion ``<think>…</think>`` +
``<predicted_observation>…</predicted_observation>``, re-fitted to the build's token
budget with the build's tokenizer (more of the oldest history is dropped if needed). The
output trains directly (``lwm train sft``). Examples without an accepted trace stay as
they were (no ``<think>``), unless ``drop_rejected``.

**Leak guard.** A trace must not hand over the answer. :func:`leak_score` is the share of
the observation's *novel* characters — those not already visible, verbatim, in the input
— that the trace reproduces verbatim; texts are compared with whitespace runs collapsed,
and a character counts as reproduced when it lies in a window of ``min_run`` (12)
characters of the observation that occurs in the trace. A trace above
``leak_threshold`` (0.6) is rejected (reason ``leak``). Quoting the action or earlier
screens is not a leak; restating most of a new output is.

**Verification** (optional): the teacher, given the world-model messages plus its own
trace but not the answer, predicts the observation; the trace is kept only if that
prediction's edit similarity (:func:`lwm.metrics.fidelity`, volatile spans masked)
reaches ``verify_threshold``.

**Resumable and budgeted.** Every finished example is appended to ``annotations.jsonl``
in the output directory at once; a re-run skips what is there (requests that failed are
not recorded and are retried). ``max_examples`` caps the examples sent to the teacher,
``max_total_tokens`` the teacher tokens (prompt + completion, all calls, all runs); in-flight
requests finish, so the token cap may be passed by at most ``concurrency`` examples.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lwm.data.build import (
    MANIFEST_KIND,
    SPLITS,
    ChatTokenizer,
    fit_messages,
    format_target,
    load_tokenizer,
    read_built,
    split_summary,
    write_dataset,
)
from lwm.errors import ModelUnavailableError
from lwm.jobs import JobReport, arun_jobs, load_journal
from lwm.jsonl import check_run_settings
from lwm.metrics import fidelity
from lwm.models import load_model, served_model
from lwm.models.base import ChatModel, Generation, Message, SamplingParams, approx_tokens
from lwm.parse import DEFAULT_STOP, OBS_OPEN, parse_output, split_reasoning
from lwm.schema import _fence

#: Reasons a trace is rejected, as counted in the manifest.
REJECT_REASONS = (
    "error",  # the teacher request failed (not recorded: retried on resume)
    "empty",  # no reasoning text came back
    "truncated",  # the trace hit the token limit before it ended
    "answer_tag",  # the trace wrote a <predicted_observation> block itself
    "leak",  # the trace reproduces the observation above the threshold
    "verify_failed",  # the teacher's own prediction from its trace scored below the threshold
    "over_budget",  # with the trace, the example no longer fits the build's token budget
)

TEACHER_SYSTEM = """\
You explain the behaviour of software environments so that a simulator can learn to \
reproduce it. You will see how an environment was described to the simulator, the \
interaction so far, the agent's latest action, and the output the real environment \
actually returned for that action.

Write the reasoning a careful simulator would do BEFORE seeing that output, so that it \
arrives at it on its own:
- how the environment handles this kind of action (its rules and internal logic);
- which earlier state matters here (files, variables, tables, working directory, \
previous outputs, what is still on screen) and how the action changes it;
- what the output must look like (layout, prompts, headers, error wording, ordering).

Reason forward from the action. Do not copy the real output and do not write the final \
output itself: say what it must contain and why. Plain prose, no tags, at most about \
{words} words."""

VERIFY_INSTRUCTION = """\
Reasoning about this action:
{reasoning}

Using this reasoning, write the environment's next observation inside \
<predicted_observation></predicted_observation>."""


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _covered(text: str, other: str, k: int) -> list[bool]:
    # Characters of `text` inside some k-character window that also occurs in `other`.
    grams = {other[i : i + k] for i in range(len(other) - k + 1)}
    mask = [False] * len(text)
    for i in range(len(text) - k + 1):
        if text[i : i + k] in grams:
            for j in range(i, i + k):
                mask[j] = True
    return mask


def leak_score(reasoning: str, observation: str, context: str = "", *, min_run: int = 12) -> float:
    """How much of the observation's new content the reasoning spells out, in [0, 1].

    Args:
        reasoning: the trace.
        observation: the real next observation.
        context: the input the model sees (system prompt, history, action); parts of the
            observation that already appear there verbatim are not counted.
        min_run: shortest verbatim run, in characters, that counts as reproduced.

    Returns:
        (novel observation characters covered by a ``min_run``-window found in the
        reasoning) / (novel observation characters), all on whitespace-collapsed text;
        0.0 when fewer than ``min_run`` novel characters exist.

    >>> leak_score("the output will be: total 48 drwxr-xr-x 2 root root", "total 48\\ndrwxr-xr-x 2 root root")
    1.0
    >>> leak_score("ls lists the directory in long format", "total 48\\ndrwxr-xr-x 2 root root")
    0.0
    """
    obs, rea = _collapse(observation), _collapse(reasoning)
    if len(obs) < min_run:
        return 0.0
    known = _covered(obs, _collapse(context), min_run) if context else [False] * len(obs)
    novel = [i for i, k in enumerate(known) if not k]
    if len(novel) < min_run:
        return 0.0
    shown = _covered(obs, rea, min_run)
    return round(sum(shown[i] for i in novel) / len(novel), 6)


def render_input(prompt: list[Message]) -> str:
    """The world-model messages of an example as one text for the teacher."""
    parts = []
    for m in prompt:
        if m["role"] == "system":
            parts.append(f"## How the environment was described to the simulator\n\n{m['content']}")
        else:
            parts.append(m["content"])
    if len(parts) >= 2 or (parts and prompt[0]["role"] != "system"):
        i = 1 if prompt[0]["role"] == "system" else 0
        parts.insert(i, "## Interaction so far (the last item is the agent's latest action)")
    return "\n\n".join(parts)


def teacher_messages(example: dict, words: int) -> list[Message]:
    """Messages asking the teacher for the reasoning of ``example``."""
    user = (f"{render_input(example['prompt'])}\n\n## The output the real environment returned\n\n"
            f"{_fence(example['observation'])}\n\nNow write the reasoning.")
    return [{"role": "system", "content": TEACHER_SYSTEM.format(words=words)}, {"role": "user", "content": user}]


def verify_messages(example: dict, reasoning: str) -> list[Message]:
    """The world-model messages of ``example`` with the trace appended to the last user
    message, asking for the observation (the answer is not shown)."""
    msgs = [dict(m) for m in example["prompt"]]
    msgs[-1]["content"] += "\n\n" + VERIFY_INSTRUCTION.format(reasoning=reasoning)
    return msgs


def clean_trace(gen: Generation) -> str:
    """The trace in a teacher's answer: the content without ``<think>`` blocks, or, when
    that is empty, the reasoning the server or the ``<think>`` blocks carried."""
    answer, inline, _ = split_reasoning(gen.text or "")
    return answer.strip() or inline.strip() or (gen.reasoning or "").strip()


@dataclass
class AnnotateConfig:
    """Settings of ``lwm data annotate``.

    Attributes:
        data: a directory written by ``lwm data build``.
        out: output directory (a new dataset directory; re-run to resume).
        base_url: the teacher's OpenAI-compatible endpoint.
        model: the served model name (default: the first one ``/v1/models`` lists).
        api_key: bearer token for the endpoint.
        max_examples: examples sent to the teacher at most (all runs together).
        max_total_tokens: teacher tokens (prompt + completion, all calls) at most.
        trace_tokens: generated tokens per trace at most.
        concurrency: teacher requests in flight.
        leak_threshold: reject traces whose :func:`leak_score` is above this.
        verify: check traces by letting the teacher predict from them.
        verify_threshold: minimum edit similarity of that prediction.
        splits: which splits to annotate.
        drop_rejected: leave examples without an accepted trace out of the output.
        temperature: teacher sampling temperature.
    """

    data: Path
    out: Path
    base_url: str
    model: str | None = None
    api_key: str = "EMPTY"
    max_examples: int | None = None
    max_total_tokens: int | None = None
    trace_tokens: int = 512
    concurrency: int = 8
    leak_threshold: float = 0.6
    verify: bool = False
    verify_threshold: float = 0.5
    splits: tuple[str, ...] = SPLITS
    drop_rejected: bool = False
    temperature: float = 0.0

    def recorded(self) -> dict[str, Any]:
        """The settings that must not change when a run is resumed."""
        d = asdict(self)
        keep = ("data", "base_url", "model", "trace_tokens", "leak_threshold", "verify", "verify_threshold",
                "splits", "temperature")
        return {k: (str(d[k]) if isinstance(d[k], Path) else list(d[k]) if isinstance(d[k], tuple) else d[k])
                for k in keep}


@dataclass
class AnnotateResult:
    """What an annotation run produced.

    Attributes:
        out: the output dataset directory.
        attempted: examples sent to the teacher (all runs).
        accepted: traces kept.
        rejected: ``{reason: count}`` (reasons from :data:`REJECT_REASONS`).
        tokens: teacher tokens used (all runs).
        seconds: wall-clock time of this run.
    """

    out: Path
    attempted: int
    accepted: int
    rejected: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    seconds: float = 0.0


def _tokens(gen: Generation, messages: list[Message], model: ChatModel) -> int:
    prompt = gen.prompt_tokens if gen.prompt_tokens is not None else sum(
        model.count_tokens(m["content"]) for m in messages)
    completion = gen.completion_tokens if gen.completion_tokens is not None else model.count_tokens(gen.text or "")
    return prompt + completion


async def annotate_one(model: ChatModel, example: dict, config: AnnotateConfig) -> dict[str, Any]:
    """Ask for, check and (optionally) verify one trace.

    Returns:
        the log record: ``id``, ``status`` (``accepted``/``rejected``), ``reason``,
        ``reasoning``, ``leak``, ``verify_score``, ``tokens``.

    Raises:
        Exception: whatever the backend raised (the caller counts it as ``error``).
    """
    rec: dict[str, Any] = {"id": example["id"], "status": "rejected", "reason": None, "reasoning": "",
                           "leak": None, "verify_score": None, "tokens": 0}
    msgs = teacher_messages(example, words=max(20, int(config.trace_tokens * 0.6)))
    sampling = SamplingParams(temperature=config.temperature, max_tokens=config.trace_tokens, seed=0)
    gen = await model.generate(msgs, sampling)
    rec["tokens"] += _tokens(gen, msgs, model)
    trace = clean_trace(gen)
    rec["reasoning"] = trace
    context = "\n".join(m["content"] for m in example["prompt"])
    if trace:
        rec["leak"] = leak_score(trace, example["observation"], context)
    if not trace:
        rec["reason"] = "empty"
    elif gen.finish_reason == "length":
        rec["reason"] = "truncated"
    elif OBS_OPEN in trace.lower():
        rec["reason"] = "answer_tag"
    elif rec["leak"] > config.leak_threshold:
        rec["reason"] = "leak"
    if rec["reason"] is None and config.verify:
        vmsgs = verify_messages(example, trace)
        vtokens = approx_tokens(example["observation"]) * 2 + 64
        vgen = await model.generate(vmsgs, SamplingParams(temperature=0.0, max_tokens=vtokens, seed=0,
                                                          stop=DEFAULT_STOP))
        rec["tokens"] += _tokens(vgen, vmsgs, model)
        predicted = parse_output(vgen.text, vgen.reasoning, stopped_at=DEFAULT_STOP).observation
        spans = [tuple(s) for s in example.get("volatile") or []]
        rec["verify_score"] = round(fidelity(predicted, example["observation"], spans).edit_similarity, 6)
        if rec["verify_score"] < config.verify_threshold:
            rec["reason"] = "verify_failed"
    if rec["reason"] is None:
        rec["status"] = "accepted"
    return rec


def annotate(
    config: AnnotateConfig,
    *,
    model: ChatModel | None = None,
    tokenizer: ChatTokenizer | None = None,
    show_progress: bool = True,
) -> AnnotateResult:
    """Annotate a built dataset with teacher reasoning and write the new dataset.

    Args:
        config: the settings.
        model: an already built teacher backend (default: :func:`lwm.models.load_model`
            on ``config.base_url``).
        tokenizer: the build's tokenizer, already loaded (default: loaded from the spec
            recorded in the build's manifest, only if some trace is accepted).
        show_progress: draw a progress bar on stderr.

    Raises:
        DataNotFoundError: ``config.data`` is not a built dataset.
        RunMismatchError: ``config.out`` holds a run with other settings.
        ModelUnavailableError: the teacher cannot be reached (or every one of the first
            requests failed).
        ValueError: ``out`` is the input directory, or a setting is out of range.
    """
    t0 = time.monotonic()
    data, out = Path(config.data), Path(config.out)
    if out.resolve() == data.resolve():
        raise ValueError("--out must differ from --data (annotate writes a new dataset directory)")
    for name in ("leak_threshold", "verify_threshold"):
        if not 0 <= getattr(config, name) <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {getattr(config, name)}")
    unknown = set(config.splits) - set(SPLITS)
    if unknown:
        raise ValueError(f"unknown split(s) {sorted(unknown)}; choose from {list(SPLITS)}")
    examples, build_manifest = read_built(data)
    out.mkdir(parents=True, exist_ok=True)
    check_run_settings(out / "annotate.settings.json", config.recorded())
    log_path = out / "annotations.jsonl"
    done = load_journal(log_path)
    todo = [ex for split in config.splits for ex in examples[split]
            if ex["id"] not in done and not ex.get("reasoning")]
    if config.max_examples is not None:
        todo = todo[: max(0, config.max_examples - len(done))]
    failures: dict[str, str] = {}
    if todo:
        own_model = model is None
        if own_model:
            name = config.model or served_model(config.base_url, config.api_key)
            model = load_model(name, base_url=config.base_url, api_key=config.api_key,
                               concurrency=config.concurrency)

        def spent(report: JobReport) -> bool:
            used = sum(r.get("tokens", 0) for r in report.records.values())
            return config.max_total_tokens is not None and used >= config.max_total_tokens

        def dead_teacher(report: JobReport) -> BaseException | None:
            if report.finished == 0 and len(report.failures) >= 3:
                last = next(reversed(report.failures.values()))
                return ModelUnavailableError(f"the teacher at {config.base_url} failed its first "
                                             f"{len(report.failures)} requests ({last})")
            return None

        async def session() -> JobReport:
            try:
                return await arun_jobs([(ex["id"], ex) for ex in todo], lambda ex: annotate_one(model, ex, config),
                                       journal=log_path, concurrency=config.concurrency, description="annotate",
                                       progress=show_progress, stop=spent, abort=dead_teacher)
            finally:
                if own_model:
                    await model.aclose()

        report = asyncio.run(session())
        done, failures = report.records, report.failures
    tokens_used = sum(r.get("tokens", 0) for r in done.values())
    rejected: Counter = Counter(r["reason"] for r in done.values() if r["status"] == "rejected")
    rejected["error"] += len(failures)
    accepted_ids = {i for i, r in done.items() if r["status"] == "accepted"}

    tok = tokenizer
    max_tokens = int(build_manifest["settings"]["max_tokens"])
    new: dict[str, list[dict]] = {s: [] for s in SPLITS}
    for split in SPLITS:
        for ex in examples[split]:
            if ex["id"] in accepted_ids and not ex.get("reasoning"):
                tok = tok or load_tokenizer(build_manifest["settings"]["tokenizer"])
                refit = _with_reasoning(ex, done[ex["id"]]["reasoning"], tok, max_tokens)
                if refit is None:
                    rejected["over_budget"] += 1
                    accepted_ids.discard(ex["id"])
                else:
                    new[split].append(refit)
                    continue
            if config.drop_rejected and not ex.get("reasoning"):
                continue
            new[split].append(ex)
    attempted = len(done) + len(failures)
    manifest = dict(build_manifest)
    manifest["command"] = "lwm data annotate"
    manifest["counts"] = dict(build_manifest["counts"])
    manifest["counts"].update({s: len(new[s]) for s in SPLITS})
    manifest["counts"]["tokens"] = {s: sum(r["num_tokens"] for r in new[s]) for s in SPLITS}
    manifest["splits"] = split_summary(new)
    manifest["annotation"] = {
        "source": str(data),
        "settings": config.recorded() | {"max_examples": config.max_examples,
                                         "max_total_tokens": config.max_total_tokens,
                                         "concurrency": config.concurrency, "drop_rejected": config.drop_rejected},
        "attempted": attempted,
        "accepted": len(accepted_ids),
        "not_attempted": sum(1 for split in config.splits for ex in examples[split]
                             if ex["id"] not in done and not ex.get("reasoning")),
        "rejected": {r: rejected[r] for r in REJECT_REASONS if rejected[r]},
        "with_reasoning": {s: sum(1 for r in new[s] if r["reasoning"]) for s in SPLITS},
        "teacher_tokens": tokens_used,
        "seconds": round(time.monotonic() - t0, 2),
    }
    assert manifest["kind"] == MANIFEST_KIND
    write_dataset(out, new, manifest, command="data annotate")
    return AnnotateResult(out, attempted, len(accepted_ids), dict(manifest["annotation"]["rejected"]),
                          tokens_used, time.monotonic() - t0)


def _with_reasoning(ex: dict, reasoning: str, tok: ChatTokenizer, max_tokens: int) -> dict | None:
    """The example with ``reasoning`` in its target, re-fitted; None if it cannot fit."""
    target = format_target(ex["observation"], reasoning)
    fitted = fit_messages(ex["prompt"], target, tok, max_tokens, first_turn=len(ex["dropped_turns"]) + 1)
    if isinstance(fitted, str):
        return None
    msgs, dropped, n = fitted
    return ex | {"prompt": msgs, "completion": [{"role": "assistant", "content": target}], "reasoning": reasoning,
                 "dropped_turns": ex["dropped_turns"] + dropped, "num_tokens": n}


__all__ = ["AnnotateConfig", "AnnotateResult", "REJECT_REASONS", "annotate", "annotate_one", "leak_score"]
