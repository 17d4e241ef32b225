"""The data `lwm` moves around: turns, trajectories, transitions, AgentWorldBench rows.

An *episode* played in an environment becomes a :class:`Trajectory`: a system prompt,
an initial observation and a list of :class:`Turn` (action → observation). Every
observation carries its :class:`Provenance`. A trajectory of T turns yields T
:class:`Transition` objects and T :class:`BenchRow` objects, one per turn, in the
AgentWorldBench format (Qwen-AgentWorld, arXiv 2606.24597; fields as documented in the
QwenLM/Qwen-AgentWorld README and read by its ``eval/eval.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lwm.errors import RowFormatError
from lwm.jsonl import iter_jsonl, write_jsonl
from lwm.parse import OBSERVATION_MARKER, observation_text

TRAILING_INSTRUCTION = (
    "Predict the environment's next observation after this action. Think first, then write "
    "the observation inside <predicted_observation></predicted_observation>."
)

Span = tuple[int, int]
#: A chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = dict[str, str]


class Provenance(BaseModel):
    """Where an observation came from.

    Attributes:
        kind: ``real`` (played in a real environment), ``replayed`` (read from a cache)
            or ``simulated`` (written by a world model).
        source: the environment (e.g. ``terminal/bwrap+tmux``) or the model name.
        sampling: decoding settings for simulated observations.
        run: which of the repeated real runs this is (0-based), for real observations.
        controls: the simulation controls in force (see :mod:`lwm.sim.controls`), as labels.
    """

    model_config = ConfigDict(extra="forbid")
    kind: Literal["real", "replayed", "simulated"]
    source: str = ""
    sampling: dict[str, Any] | None = None
    run: int | None = None
    controls: list[str] | None = None


class Turn(BaseModel):
    """One step of an episode: the agent's action and the environment's answer.

    Attributes:
        index: 1-based turn number.
        action: the action exactly as the agent issued it (domain format, as text).
        observation: the next observation (for the terminal: the visible screen).
        provenance: where ``observation`` came from.
        volatile: ``[start, end)`` character spans of ``observation`` that differed
            between repeated real runs (timestamps, PIDs, random names); deterministic
            metrics mask them.
    """

    model_config = ConfigDict(extra="forbid")
    index: int = Field(ge=1)
    action: str
    observation: str
    provenance: Provenance
    volatile: list[Span] = Field(default_factory=list)


class Trajectory(BaseModel):
    """A whole episode.

    Attributes:
        id: stable episode id (``<domain>/<episode name>/run<k>`` for real runs).
        domain: e.g. ``terminal``.
        task: the instruction the agent was given (may be empty for scripted probes).
        system_prompt: the world-model system prompt for this episode.
        initial_observation: what the agent saw before its first action.
        turns: the turns in order.
        reward: the task's verdict from a real verifier run on the final state (1.0
            achieved, 0.0 not), or a reward model's score; ``None`` when unverified.
        metadata: free-form (episode family, tags, timings).
    """

    model_config = ConfigDict(extra="forbid")
    id: str
    domain: str
    task: str = ""
    system_prompt: str
    initial_observation: str = ""
    turns: list[Turn] = Field(default_factory=list)
    reward: float | None = Field(default=None, ge=0.0, le=1.0)
    metadata: dict[str, Any] = Field(default_factory=dict)

    def transitions(self) -> Iterator[Transition]:
        """Yield one :class:`Transition` per turn (history = all earlier turns)."""
        for i, turn in enumerate(self.turns):
            yield Transition(
                trajectory_id=self.id,
                domain=self.domain,
                task=self.task,
                system_prompt=self.system_prompt,
                initial_observation=self.initial_observation,
                history=self.turns[:i],
                action=turn.action,
                observation=turn.observation,
                volatile=turn.volatile,
            )


class Transition(BaseModel):
    """(state, action, next observation): the unit a world model learns and is scored on.

    The state is the system prompt, the initial observation and the ``history`` of
    earlier turns.
    """

    trajectory_id: str
    domain: str
    task: str
    system_prompt: str
    initial_observation: str
    history: list[Turn]
    action: str
    observation: str
    volatile: list[Span] = Field(default_factory=list)


class BenchRow(BaseModel):
    """One AgentWorldBench row: predict turn ``turn_idx`` of trajectory ``id``.

    ``prompt`` and ``response`` are parallel lists for turns ``1..turn_idx``; the last
    ``response`` is the ground truth. Unknown fields are kept (``extra="allow"``), so a
    row read and written again is unchanged. ``lwm`` adds ``volatile_spans`` (character
    spans of the ground-truth observation text, see :func:`lwm.parse.observation_text`).
    """

    model_config = ConfigDict(extra="allow")
    task: str
    id: Any
    turn_idx: int = Field(ge=1, strict=True)
    total_turns: int = Field(ge=1, strict=True)
    system_str: str = ""
    prompt: list[str]
    response: list[str]
    current_prompt: str = ""
    volatile_spans: list[tuple[int, int]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _spans_inside_the_observation(self) -> BenchRow:
        if self.volatile_spans and self.turn_idx <= len(self.response):
            n = len(observation_text(self.ground_truth))
            for s, e in self.volatile_spans:
                if not 0 <= s < e <= n:
                    raise ValueError(f"volatile span [{s}, {e}) is not inside the observation (0..{n})")
        return self

    @property
    def domain(self) -> str:
        """The domain: the part of ``task`` after the last ``/``."""
        return self.task.rsplit("/", 1)[-1]

    @property
    def ground_truth(self) -> str:
        """The raw ground-truth response of the current turn."""
        return self.response[self.turn_idx - 1]

    @property
    def volatile(self) -> list[Span]:
        return list(self.volatile_spans)


def _fence(text: str, info: str = "") -> str:
    # A fence longer than any backtick run inside, so the block cannot close early.
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def format_prompt_item(
    turn: int, action: str, *, action_lang: str = "", task: str = "", state: str | None = None
) -> str:
    """The user-side text of one turn, AgentWorldBench style (without the trailing instruction)."""
    parts = [f"### Turn {turn}"]
    if task:
        parts.append(f"**Task Instruction:**\n{task}")
    if state is not None:
        parts.append(f"**Current State:**\n{_fence(state)}")
    parts.append(f"**Action:**\n{_fence(action, action_lang)}")
    return "\n\n".join(parts)


def _fenced_after(lines: list[str], start: int, label: str) -> tuple[str, int] | None:
    # The fenced block that follows the first line equal to ``label`` at or after line
    # ``start`` (blank lines may come between): ``(content, index of its closing fence)``.
    # As in Markdown, a closing fence is a run of at least as many of the same characters.
    at = next((i for i in range(start, len(lines)) if lines[i].strip() == label), None)
    if at is None:
        return None
    i = at + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    opening = lines[i].strip() if i < len(lines) else ""
    char = opening[:1]
    fence = opening[: len(opening) - len(opening.lstrip(char))] if char in ("`", "~") else ""
    if len(fence) < 3:
        return None
    for end in range(i + 1, len(lines)):
        closing = lines[end].strip()
        if len(closing) >= len(fence) and closing == char * len(closing):
            return "\n".join(lines[i + 1 : end]), end
    return None


def parse_prompt_item(item: str) -> tuple[str | None, str | None]:
    """``(action, state)`` of one turn's user-side text, the inverse of
    :func:`format_prompt_item`: the fenced blocks after the ``**Current State:**`` and
    ``**Action:**`` labels (the action is looked for after the state block, so a label
    quoted inside the state is not taken for it). ``None`` for a block that is missing:
    rows written by other tools may lay turns out differently."""
    lines = item.replace("\r\n", "\n").split("\n")
    state = _fenced_after(lines, 0, "**Current State:**")
    action = _fenced_after(lines, state[1] + 1 if state else 0, "**Action:**")
    return (action[0] if action else None), (state[0] if state else None)


def format_response(observation: str) -> str:
    """The ground-truth response text of one turn."""
    return f"{OBSERVATION_MARKER}\n{_fence(observation)}"


def rows_from_trajectory(traj: Trajectory, *, action_lang: str = "json", last_only: bool = False) -> list[BenchRow]:
    """One AgentWorldBench row per turn of ``traj`` (exact field semantics of DESIGN.md §4);
    with ``last_only``, the row of the last turn alone (what a simulator asks about: one
    row instead of all, per step).

    ``action_lang`` labels the fence around each action: the domain's
    (``lwm.domains.get(traj.domain).action_lang``: ``sql``, ``python`` …; ``json`` for most)."""
    items = [
        format_prompt_item(
            t.index,
            t.action,
            action_lang=action_lang,
            task=traj.task if t.index == 1 else "",
            state=traj.initial_observation if t.index == 1 and traj.initial_observation else None,
        )
        for t in traj.turns
    ]
    responses = [format_response(t.observation) for t in traj.turns]
    rows = []
    for k, turn in enumerate(traj.turns, start=1):
        if last_only and k < len(traj.turns):
            continue
        prompts = items[:k]
        prompts = prompts[:-1] + [prompts[-1] + "\n\n" + TRAILING_INSTRUCTION]
        rows.append(
            BenchRow(
                task=traj.domain,
                id=traj.id,
                turn_idx=k,
                total_turns=len(traj.turns),
                system_str=traj.system_prompt,
                prompt=prompts,
                response=responses[:k],
                current_prompt=items[k - 1],
                volatile_spans=list(turn.volatile),
            )
        )
    return rows


def parse_row(obj: dict, path: str | Path, line: int) -> BenchRow:
    """One AgentWorldBench row from its decoded JSON (line ``line`` of ``path``).

    Raises:
        RowFormatError: a field is missing or wrong, ``prompt``/``response`` are shorter
            than ``turn_idx``, or ``task`` names no domain (the message names the file and
            the line).
    """
    for key in ("prompt", "response"):  # the reference script also accepts a bare string
        if isinstance(obj.get(key), str):
            obj[key] = [obj[key]]
    try:
        row = BenchRow.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "row"
        raise RowFormatError(path, line, f"{where}: {err['msg']}") from None
    if len(row.response) < row.turn_idx or len(row.prompt) < row.turn_idx:
        raise RowFormatError(path, line, f"turn_idx={row.turn_idx} but prompt has {len(row.prompt)} and response "
                             f"{len(row.response)} items")
    if not row.domain.strip():  # it would be scored, and tabled, as a domain without a name
        raise RowFormatError(path, line, f"task {row.task!r} names no domain (e.g. 'terminal' or 'x/terminal')")
    return row


def read_rows(path: str | Path) -> Iterator[BenchRow]:
    """Read AgentWorldBench rows from a JSONL file.

    Raises:
        RowFormatError: as :func:`parse_row`, or a line is not JSON.
    """
    for line_no, obj in iter_jsonl(path):
        yield parse_row(obj, path, line_no)


def write_rows(path: str | Path, rows: list[BenchRow]) -> None:
    """Write rows as JSONL, atomically."""
    write_jsonl(path, (r.model_dump(mode="json") for r in rows))


def parse_trajectory(obj: dict, path: str | Path, line: int) -> Trajectory:
    """One trajectory from its decoded JSON (line ``line`` of ``path``).

    Raises:
        RowFormatError: not a valid trajectory (names the field, the file and the line).
    """
    try:
        return Trajectory.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        raise RowFormatError(path, line, f"{'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def episode_problem(record: dict, check: Callable[[Trajectory], object] | None = None) -> str | None:
    """What is wrong with a journal line that should hold an episode (hand-edited, another
    tool's), or ``None``: the ``check`` of :func:`lwm.jobs.run_jobs` for jobs whose records
    are trajectories. ``check`` may test the trajectory further (raising ``ValueError`` or
    ``TypeError``)."""
    try:
        traj = Trajectory.model_validate(record)
        if check is not None:
            check(traj)
    except (ValueError, TypeError) as e:
        return f"not an episode record ({str(e).splitlines()[0]}…); delete the line to play it again"
    return None


def read_trajectories(path: str | Path, *, skip_truncated_tail: bool = False) -> Iterator[Trajectory]:
    """Read trajectories (one JSON object per line); ``skip_truncated_tail`` as in
    :func:`lwm.jsonl.iter_jsonl` (for the partial files of resumable jobs).

    Raises:
        RowFormatError: a line is not a valid trajectory.
    """
    for line_no, obj in iter_jsonl(path, skip_truncated_tail=skip_truncated_tail):
        yield parse_trajectory(obj, path, line_no)


def write_trajectories(path: str | Path, trajectories: list[Trajectory]) -> None:
    """Write trajectories as JSONL, atomically."""
    write_jsonl(path, (t.model_dump(mode="json") for t in trajectories))
