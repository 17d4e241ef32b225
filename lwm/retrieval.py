"""Real transitions near the one being predicted: an index of real (previous observation,
action, observation) triples per domain, searched by the action's text.

Peers ground small simulators in real experience this way (DreamGym's experience model
retrieves similar real transitions; world-model-harness does the same for frontier models).
In ``lwm`` the neighbours' observations become candidates of :mod:`lwm.candidates`, which
the world model scores by its own likelihood: the neighbour of ``cat notes.txt`` in another
episode often printed what this one prints.

The index is a JSON Lines file, one transition per line (``lwm data index``)::

    {"domain": "terminal", "episode": "terminal/files-backup", "family": "…",
     "previous": "…", "action": "…", "observation": "…"}

Only real turns go in (provenance ``real``). ``lwm eval --index`` never takes one of the
episode being predicted (its other runs included); families can be left out of the index
(``--leave-out-family``: the held-out families, when it serves a measurement on held-out
rows).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from lwm.envs.episode import broke_sandbox
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.jsonl import iter_jsonl, write_jsonl
from lwm.parse import json_strings
from lwm.schema import Trajectory, read_trajectories

#: The ``/runN`` ending of the id of an episode's N-th run (``lwm collect``).
RUN_SUFFIX = re.compile(r"/run(\d+)$")
#: The fields of an index line.
FIELDS = frozenset(("domain", "episode", "family", "previous", "action", "observation"))


@dataclass(frozen=True)
class IndexEntry:
    """One real transition in the index, abridged: the observation before the action
    stands for the state (:class:`lwm.schema.Transition` keeps the whole history).

    Attributes:
        domain: the domain.
        episode: the episode it belongs to (:func:`episode_of` its trajectory's id: its
            runs share it).
        family: the task family with its domain (``terminal/files``), ``""`` when unknown.
        previous: the observation before the action.
        action: the action, as the agent wrote it.
        observation: the real observation after it.
    """

    domain: str
    episode: str
    family: str
    previous: str
    action: str
    observation: str


def episode_of(trajectory_id: object) -> str:
    """The episode a trajectory (or a row, by its ``id``) is a run of: the id without a
    trailing ``/runN`` (``lwm collect`` plays each episode several times).

    >>> episode_of("terminal/files-backup/run1"), episode_of("terminal/notes/real")
    ('terminal/files-backup', 'terminal/notes/real')
    """
    return RUN_SUFFIX.sub("", str(trajectory_id))


def qualified(domain: str, family: str) -> str:
    """A family's name with its domain: ``files`` and ``terminal/files`` are both
    ``terminal/files`` in the domain ``terminal``."""
    return family if family.startswith(domain + "/") else f"{domain}/{family}"


def index_entries(trajectory: Trajectory) -> list[IndexEntry]:
    """The real turns of ``trajectory`` as index entries (simulated or replayed turns, and an
    action that broke its sandbox, are left out)."""
    episode = episode_of(trajectory.id)
    family = trajectory.metadata.get("family")
    family = qualified(trajectory.domain, family) if isinstance(family, str) and family else ""
    out, previous = [], trajectory.initial_observation
    for turn in trajectory.turns:
        if turn.provenance.kind == "real" and not broke_sandbox(turn):
            out.append(IndexEntry(trajectory.domain, episode, family, previous, turn.action, turn.observation))
        previous = turn.observation
    return out


def action_text(action: str) -> str:
    """What an action says, for comparing actions: the string values of a JSON action, in
    order (a terminal action's keystrokes, a tool call's name and arguments; keys and
    numbers such as durations left out), else the action as written (SQL, Python).

    >>> action_text('[{"keystrokes": "ls -la\\n", "duration": 0.3}]')
    'ls -la'
    """
    try:
        value = json.loads(action, strict=False)  # a newline typed raw inside a JSON string, too
    except ValueError:
        return action.strip()
    out = [v.strip() for v in json_strings(value)]
    return " ".join(out) if out else action.strip()


def trajectory_files(paths: Sequence[str | Path]) -> list[Path]:
    """The trajectory files of ``paths``: a file as it is; in a directory (searched, links
    followed), every ``trajectories.jsonl`` (``lwm collect``) and ``episodes.jsonl`` (``lwm
    agent eval``) whose first record is a trajectory (``lwm train rl`` writes a log of the
    same name, which is skipped).

    Raises:
        DataNotFoundError: a path does not exist or holds no trajectory file.
    """
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            files.append(p)
            continue
        found = sorted(f for name in ("trajectories.jsonl", "episodes.jsonl") for f in p.glob(f"**/{name}")
                       if _holds_trajectories(f)) if p.is_dir() else []
        if not found:
            raise DataNotFoundError(f"{p}: no such file, or no trajectories.jsonl or episodes.jsonl of "
                                    "trajectories under it")
        files += found
    return files


def _holds_trajectories(path: Path) -> bool:
    with path.open(encoding="utf-8", errors="replace") as f:
        first = next((line for line in f if line.strip()), "")
    try:
        obj = json.loads(first)
    except ValueError:
        return True  # read, so that the malformed line is named
    return isinstance(obj, dict) and "turns" in obj


class TransitionIndex:
    """Real transitions by domain, searched by the similarity of what their actions say
    (:func:`action_text`; ``rapidfuzz``'s normalized Indel similarity, 0-100).

    Args:
        items: the transitions.
    """

    def __init__(self, items: Iterable[IndexEntry]) -> None:
        self.by_domain: dict[str, list[IndexEntry]] = {}
        self._texts: dict[str, list[str]] = {}
        seen = set()
        for t in items:
            if t not in seen:  # the runs of an episode repeat it
                seen.add(t)
                self.by_domain.setdefault(t.domain, []).append(t)

    def __len__(self) -> int:
        return sum(map(len, self.by_domain.values()))

    @classmethod
    def load(cls, path: str | Path) -> TransitionIndex:
        """An index written by :meth:`save`.

        Raises:
            DataNotFoundError: no such file, or an empty one.
            RowFormatError: a line that is not a transition (file and line number named).
        """
        path = Path(path)
        if not path.is_file():
            raise DataNotFoundError(f"no transition index at {path} (make one with lwm data index)")
        items = []
        for line_no, obj in iter_jsonl(path):
            if set(obj) != FIELDS:
                raise RowFormatError(path, line_no, f"not a transition of an index (lwm data index): expected the "
                                     f"fields {', '.join(sorted(FIELDS))}; found {', '.join(sorted(obj)) or 'none'}")
            items.append(IndexEntry(**obj))
            if not all(isinstance(v, str) for v in asdict(items[-1]).values()):
                raise RowFormatError(path, line_no, "every field of a transition is a string")
            if items[-1].family:  # an index written by hand may name a family without its domain
                items[-1] = replace(items[-1], family=qualified(items[-1].domain, items[-1].family))
        if not items:
            raise DataNotFoundError(f"{path} holds no transition (make an index with lwm data index)")
        return cls(items)

    def save(self, path: str | Path) -> None:
        """Write the index as JSON Lines, atomically."""
        write_jsonl(path, [asdict(t) for ts in self.by_domain.values() for t in ts])

    def nearest(self, domain: str, action: str, k: int = 2, *, exclude_episode: str | None = None,
                exclude_families: Iterable[str] = (), min_similarity: float = 60.0) -> list[IndexEntry]:
        """The ``k`` transitions of ``domain`` whose actions are most like ``action`` (at
        least ``min_similarity``, 0-100), best first; none of ``exclude_episode`` or of a
        family in ``exclude_families`` (with or without the domain); one per distinct
        observation; none when ``k`` < 1."""
        from rapidfuzz import fuzz, process

        if k < 1:
            return []
        left_out = {qualified(domain, name) for name in exclude_families}
        pool = self.by_domain.get(domain, [])
        if domain not in self._texts:  # what each action says, once per domain
            self._texts[domain] = [action_text(t.action) for t in pool]
        out, seen = [], set()
        for _, _, i in process.extract(action_text(action), self._texts[domain], scorer=fuzz.ratio,
                                       score_cutoff=min_similarity, limit=None):
            t = pool[i]
            if t.episode != exclude_episode and t.family not in left_out and t.observation not in seen:
                seen.add(t.observation)
                out.append(t)
                if len(out) == k:
                    break
        return out


def build_index(sources: Sequence[str | Path], out: str | Path, leave_out_families: Sequence[str] = (),
                ) -> TransitionIndex:
    """What ``lwm data index`` does: the real transitions of ``sources``, less those of
    ``leave_out_families``, written to ``out``.

    Args:
        sources: trajectory files, or directories searched for them
            (:func:`trajectory_files`).
        out: the index file (JSON Lines).
        leave_out_families: task families to leave out, with or without their domain
            (the held-out families, when the index serves a measurement on held-out rows).

    Raises:
        DataNotFoundError: a source holds no trajectory file, or no real transition is left.
        RowFormatError: a malformed line (file and line number named).
        ValueError: ``out`` is a trajectory file (or named like one), or a family to leave
            out has no transition in the sources (a misspelt name would leave nothing out).
    """
    files = trajectory_files(sources)
    target = Path(out).resolve()
    if any(target == f.resolve() for f in files) or target.name in ("trajectories.jsonl", "episodes.jsonl"):
        raise ValueError(f"--out {out} would replace a trajectory file (or be read as one next time): "
                         "write the index elsewhere, e.g. index.jsonl")
    entries = [t for f in files for traj in read_trajectories(f) for t in index_entries(traj)]
    left_out = {name: {qualified(t.domain, name) for t in entries} for name in leave_out_families}
    unknown = [name for name, forms in left_out.items() if not any(t.family in forms for t in entries)]
    if unknown:
        known = sorted({t.family for t in entries if t.family})
        raise ValueError(f"no transition of the families {', '.join(map(repr, unknown))} to leave out; the "
                         f"sources' families: {', '.join(known[:30]) or 'none'}{' …' if len(known) > 30 else ''}")
    dropped = set().union(*left_out.values()) if left_out else set()
    index = TransitionIndex(t for t in entries if t.family not in dropped)
    if not len(index):
        raise DataNotFoundError(f"no real transition in {', '.join(map(str, sources))}"
                                + (" outside the families left out" if dropped else ""))
    index.save(out)
    return index


__all__ = ["FIELDS", "RUN_SUFFIX", "IndexEntry", "TransitionIndex", "action_text", "build_index", "episode_of",
           "index_entries", "qualified", "trajectory_files"]
