"""From trajectories to training data: ``lwm data build``.

Every turn of every (first-run) episode becomes one next-observation example in one
template across all domains:

* ``prompt``: the chat messages exactly as :func:`lwm.prediction.request` lays them out
  for that turn's AgentWorldBench row in the build's prediction mode (system prompt,
  history of earlier turns with their real observations, the current action), so training
  and evaluation see the same input;
* ``completion``: one assistant message, ``<think>\\n{reasoning}\\n</think>\\n`` (only when
  the example has reasoning, e.g. after ``lwm data annotate``) then
  ``<predicted_observation>\\n{observation}\\n</predicted_observation>`` (in mode
  ``change``: what the action changed, :func:`lwm.prediction.observed_change`).

This is TRL's conversational *prompt-completion* format (loss on the completion only).

Each example is fitted to a token budget measured with the model's own tokenizer on the
rendered chat template (prompt + completion, template overhead included): the oldest
history turns are dropped first and their turn numbers recorded in ``dropped_turns``; an
example that does not fit even without history is skipped and counted. Examples are
deduplicated by the SHA-256 of ``(prompt, completion)``.

**Split.** Whole task families go to one split: families that share an episode are
merged into one group first, then, within each domain, groups are taken in the order of
a seeded hash of their name and held out while that brings the domain's held-out share
of examples closer to ``val_fraction`` (see :func:`assign_splits`). The unit of the
split is the family, so no family and no episode can be on both sides: leakage is
impossible by construction. Every domain with two or more families has held-out
families, so evaluation on held-out episodes covers every domain.

Output directory::

    train.parquet, validation.parquet        Hugging Face ``datasets`` Parquet files
    train.jsonl, validation.jsonl            the same examples as JSON Lines
    README.md                                dataset card (``datasets.load_dataset(out)`` works)
    manifest.json                            settings, counts, which families/episodes went where
    heldout/{domain}_test.jsonl              the validation examples as AgentWorldBench rows
                                             (``lwm eval --data <out>/heldout``)

Every file is written atomically (temporary file, then rename); the manifest last.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lwm import domains
from lwm.errors import DataNotFoundError, ModelUnavailableError, RowFormatError
from lwm.jsonl import atomic_path, dumps, iter_jsonl, read_json, write_atomic, write_jsonl
from lwm.models.base import Message
from lwm.parse import OBS_CLOSE, OBS_OPEN, THINK_CLOSE, THINK_OPEN, observation_text, parse_output
from lwm.prediction import Prediction, check_prediction, observed_change, request, row_prediction
from lwm.progress import library_progress, progress_bar
from lwm.prompts import UNSEEN_PHRASING, rephrase
from lwm.retrieval import RUN_SUFFIX, episode_of, qualified
from lwm.schema import BenchRow, _fence, parse_row, parse_trajectory, rows_from_trajectory, write_rows

SPLITS = ("train", "validation")
HELDOUT_DIR = "heldout"
UNSEEN_DIR = "heldout-unseen-phrasing"
_FILE_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
MANIFEST_KIND = "lwm-dataset"


# --------------------------------------------------------------------------- tokenizer


class ChatTokenizer:
    """A Hugging Face tokenizer with its chat template, used to measure examples.

    Args:
        tokenizer: a ``transformers`` tokenizer that has a chat template.
        spec: how it was asked for (``"embedded"`` or a directory), recorded in manifests.
    """

    def __init__(self, tokenizer: Any, spec: str) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ModelUnavailableError(f"the tokenizer {spec!r} has no chat template")
        self.tokenizer, self.spec = tokenizer, spec

    def count(self, text: str) -> int:
        """Tokens in plain ``text`` (no special tokens added)."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_chat(self, messages: Sequence[Message]) -> int:
        """Tokens of ``messages`` rendered by the chat template (what training sees),
        template markers and any default system prompt the template inserts included."""
        text = self.tokenizer.apply_chat_template(list(messages), tokenize=False)
        return self.count(text)


def _tokenizer_cache_dir(gguf: Path) -> Path:
    from lwm.paths import lwm_home

    st = gguf.stat()
    return lwm_home() / "tokenizers" / f"{gguf.stem}-{st.st_size}"


def load_tokenizer(spec: str = "embedded") -> ChatTokenizer:
    """Load the tokenizer that examples are measured with.

    Args:
        spec: ``"embedded"`` for the tokenizer inside the embedded SmolLM2 GGUF (read by
            ``transformers`` with ``gguf_file=``; converted once, then cached as a
            Hugging Face folder under ``$LWM_HOME/tokenizers`` because the conversion
            takes tens of seconds), or a local Hugging Face model/tokenizer directory.

    Raises:
        ModelUnavailableError: transformers, the GGUF or the directory is missing.
    """
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        raise ModelUnavailableError("measuring examples needs transformers: `pip install lwm[hf]`") from e
    if spec in ("embedded", "hf:embedded"):
        from lwm.models.embedded import embedded_gguf_path

        gguf = embedded_gguf_path()
        cache = _tokenizer_cache_dir(gguf)
        if (cache / "tokenizer_config.json").exists():
            return ChatTokenizer(AutoTokenizer.from_pretrained(cache), "embedded")
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        try:  # save to a temporary folder, then rename: a crash never leaves half a cache
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=cache.parent, prefix=f".{cache.name}."))
            tok.save_pretrained(tmp)
            os.replace(tmp, cache)
        except OSError:
            pass  # a cache we cannot write only costs time
        return ChatTokenizer(tok, "embedded")
    from lwm.models.registry import resolve

    path = Path(resolve(spec).path or spec)  # hf:<dir> or a directory
    if not path.is_dir():  # local directories only: never a hub download
        raise ModelUnavailableError(f"--tokenizer must be 'embedded' or a Hugging Face directory; no directory {path}")
    try:
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise ModelUnavailableError(f"cannot load a tokenizer from {path}: {e}") from None
    return ChatTokenizer(tok, str(path))


# --------------------------------------------------------------------------- examples


def format_target(observation: str, reasoning: str = "") -> str:
    """The assistant target: optional ``<think>`` reasoning, then the observation in tags.

    The observation is fenced only when the plain form would not parse back to itself
    (an observation that is itself one fenced block), so :func:`lwm.parse.parse_output`
    always returns exactly ``observation``.

    >>> format_target("hi", "echo prints its argument")
    '<think>\\necho prints its argument\\n</think>\\n<predicted_observation>\\nhi\\n</predicted_observation>'
    """
    think = f"{THINK_OPEN}\n{reasoning.strip()}\n{THINK_CLOSE}\n" if reasoning.strip() else ""
    body = observation
    if parse_output(f"{OBS_OPEN}\n{body}\n{OBS_CLOSE}").observation != observation:
        body = _fence(observation)
    return f"{think}{OBS_OPEN}\n{body}\n{OBS_CLOSE}"


def content_hash(prompt: Sequence[Message], completion: str) -> str:
    """SHA-256 (first 16 hex digits) of the canonical JSON of ``(prompt, completion)``."""
    return hashlib.sha256(dumps([list(prompt), completion]).encode("utf-8")).hexdigest()[:16]


def fit_messages(
    messages: Sequence[Message], target: str, tokenizer: ChatTokenizer, max_tokens: int, first_turn: int = 1
) -> tuple[list[Message], list[int], int] | str:
    """Drop the oldest history turns until prompt + target fit in ``max_tokens``.

    ``messages`` must be laid out as :func:`lwm.prompts.build_messages` does: an optional
    system message, then (user, assistant) pairs of history turns, then the current user
    message. Pairs are removed oldest first, exactly as ``build_messages`` would with a
    smaller budget.

    Args:
        messages: the prompt messages.
        target: the assistant completion text.
        tokenizer: measures the rendered chat (template overhead counted).
        max_tokens: budget for prompt + completion, in tokens.
        first_turn: turn number of the first history pair in ``messages`` (1 unless
            earlier turns were already dropped).

    Returns:
        ``(messages, newly_dropped_turn_numbers, total_tokens)``, or the reason the
        example cannot fit: ``"target_over_budget"`` (the target alone is too long) or
        ``"prompt_over_budget"`` (too long even with no history).
    """
    completion = {"role": "assistant", "content": target}
    if tokenizer.count(target) >= max_tokens:
        return "target_over_budget"
    msgs = list(messages)
    head = 1 if msgs and msgs[0]["role"] == "system" else 0
    n_pairs = (len(msgs) - head - 1) // 2
    total = tokenizer.count_chat(msgs + [completion])
    drop = 0
    if total > max_tokens and n_pairs:
        # Estimate first (content tokens only: an underestimate, so never too many) …
        costs = [tokenizer.count(msgs[head + 2 * i]["content"]) + tokenizer.count(msgs[head + 2 * i + 1]["content"])
                 for i in range(n_pairs)]
        excess = total - max_tokens
        while drop < n_pairs and excess > 0:
            excess -= costs[drop]
            drop += 1
        # … then exactly, one more pair at a time.
        while True:
            trial = msgs[:head] + msgs[head + 2 * drop:]
            total = tokenizer.count_chat(trial + [completion])
            if total <= max_tokens or drop == n_pairs:
                break
            drop += 1
        msgs = trial
    if total > max_tokens:
        return "prompt_over_budget"
    return msgs, list(range(first_turn, first_turn + drop)), total


@dataclass
class Candidate:
    """One turn to turn into an example, before fitting (internal to the builder).

    Attributes:
        row: the AgentWorldBench row of the turn.
        trajectory_id, turn, domain, episode, family: where it comes from (episode and
            family are domain-qualified: ``db/joins``).
        provenance_kind, provenance_source: of the target observation.
        source: ``file:line`` of the input record.
        run: the real run number (0 for the first run).
        reasoning: reasoning carried by the input, if any.
    """

    row: BenchRow
    trajectory_id: str
    turn: int
    domain: str
    episode: str
    family: str
    provenance_kind: str
    provenance_source: str
    source: str
    run: int
    reasoning: str = ""


def _run_of(traj_id: str, metadata_run: Any = None) -> int:
    if isinstance(metadata_run, int):
        return metadata_run
    m = RUN_SUFFIX.search(traj_id)
    return int(m.group(1)) if m else 0


def _file_kind(path: Path) -> str | None:
    for line, obj in iter_jsonl(path):
        if "turns" in obj and "system_prompt" in obj:
            return "trajectories"
        if "turn_idx" in obj:
            return "rows"
        if "prompt" in obj and "completion" in obj:
            raise RowFormatError(path, line, "this is a dataset written by `lwm data build`; pass the trajectories "
                                 "or AgentWorldBench rows it was built from")
        raise RowFormatError(path, line, "neither a trajectory (fields turns, system_prompt) nor an "
                             f"AgentWorldBench row (field turn_idx); keys: {sorted(obj)[:8]}")
    return None  # empty file


def source_files(sources: Iterable[str | Path]) -> list[Path]:
    """The input files of ``sources``: a file is taken as is; a directory gives its
    ``trajectories.jsonl`` (what ``lwm collect`` writes) when it has one, else all its
    ``*.jsonl`` files except partial ones.

    Raises:
        DataNotFoundError: a source does not exist or holds no JSONL file.
    """
    files: list[Path] = []
    for src in sources:
        p = Path(src)
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            if (p / "trajectories.jsonl").is_file():
                files.append(p / "trajectories.jsonl")
                continue
            found = sorted(f for f in p.glob("*.jsonl") if not f.name.endswith(".partial.jsonl"))
            if not found:
                raise DataNotFoundError(f"{p} holds no trajectories.jsonl and no *.jsonl rows file")
            files += found
        else:
            raise DataNotFoundError(f"no such file or directory: {p}")
    return files


def read_candidates(files: Sequence[Path], counts: Counter) -> list[Candidate]:
    """Every turn of every input record, in input order.

    Trajectory files give one candidate per turn (simulated observations are skipped and
    counted as ``simulated_turns``); rows files give one per row. Family: the
    trajectory's ``metadata.family`` (or a row's ``family`` field), else its episode.

    Raises:
        RowFormatError: a malformed line (the message names file and line).
    """
    out: list[Candidate] = []
    for path in files:
        kind = _file_kind(path)
        for line, obj in iter_jsonl(path) if kind else ():
            where = f"{path}:{line}"
            if kind == "trajectories":
                traj = parse_trajectory(obj, path, line)
                episode = qualified(traj.domain, str(traj.metadata.get("episode") or episode_of(traj.id)))
                family = qualified(traj.domain, str(traj.metadata.get("family") or episode))
                run = _run_of(traj.id, traj.metadata.get("run"))
                spec = domains.find(traj.domain)
                rows = rows_from_trajectory(traj, action_lang=spec.action_lang if spec else "json")
                for row, turn in zip(rows, traj.turns, strict=True):
                    if turn.provenance.kind == "simulated":
                        counts["simulated_turns"] += 1
                        continue
                    out.append(Candidate(row, traj.id, turn.index, traj.domain, episode, family,
                                         turn.provenance.kind, turn.provenance.source, where, run))
            else:
                row = parse_row(obj, path, line)
                tid = str(row.id)
                extra = row.model_extra or {}
                episode = qualified(row.domain, episode_of(tid))
                family = qualified(row.domain, str(extra.get("family") or episode))
                out.append(Candidate(row, tid, row.turn_idx, row.domain, episode, family,
                                     str(extra.get("provenance_kind") or "unknown"),
                                     str(extra.get("provenance_source") or path.name), where, _run_of(tid),
                                     str(extra.get("reasoning") or "")))
    return out


def first_runs_only(candidates: list[Candidate], counts: Counter) -> list[Candidate]:
    """Keep, per episode, only the lowest run present (later real runs repeat run 0);
    the trajectories left out are counted as ``later_run_trajectories``."""
    first: dict[str, int] = {}
    for c in candidates:
        first[c.episode] = min(first.get(c.episode, c.run), c.run)
    later = {c.trajectory_id for c in candidates if c.run != first[c.episode]}
    counts["later_run_trajectories"] += len(later)
    return [c for c in candidates if c.run == first[c.episode]]


# --------------------------------------------------------------------------- split


def family_hash(family: str, seed: int) -> float:
    """A family's seeded position in [0, 1): SHA-256 of ``"{seed}:{family}"``."""
    digest = hashlib.sha256(f"lwm-split:{seed}:{family}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def assign_splits(
    examples: Iterable[tuple[str, str, str]], val_fraction: float, seed: int
) -> dict[str, str]:
    """Assign every task family to ``train`` or ``validation``, whole.

    Args:
        examples: ``(domain, family, episode)`` of every example (family and episode
            names domain-qualified); the number of times a family appears is its size.
        val_fraction: share of each domain's examples to hold out, in [0, 1].
        seed: changes which families are held out.

    Returns:
        ``{family: split}``. Families linked through a shared episode first form one
        group, so no episode and no family can ever be on both sides. Within each
        domain, groups are taken in the order of their seeded hash
        (:func:`family_hash` of the group's smallest family name) and held out while
        that brings the held-out share closer to ``val_fraction``; a domain with two or
        more groups and ``0 < val_fraction < 1`` always gets at least one group on each side.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    episode_family: dict[str, str] = {}
    size: Counter = Counter()
    domain_of: dict[str, str] = {}
    for domain, fam, ep in examples:
        parent.setdefault(fam, fam)
        domain_of.setdefault(fam, domain)
        size[fam] += 1
        if ep in episode_family:
            ra, rb = find(fam), find(episode_family[ep])
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
        else:
            episode_family[ep] = fam
    groups: dict[str, list[str]] = defaultdict(list)
    for fam in parent:
        groups[find(fam)].append(fam)
    by_domain: dict[str, list[str]] = defaultdict(list)
    for root, members in groups.items():
        by_domain[domain_of[min(members)]].append(root)
    split: dict[str, str] = {}
    for roots in by_domain.values():
        roots.sort(key=lambda r: (family_hash(min(groups[r]), seed), r))
        sizes = {r: sum(size[f] for f in groups[r]) for r in roots}
        target = val_fraction * sum(sizes.values())
        held = 0.0
        for r in roots:
            closer = abs(held + sizes[r] - target) < abs(held - target)
            split[r] = "validation" if closer else "train"
            held += sizes[r] if closer else 0
        if len(roots) >= 2:
            if 0 < val_fraction and "validation" not in (split[r] for r in roots):
                split[roots[0]] = "validation"
            if val_fraction < 1 and "train" not in (split[r] for r in roots):
                split[roots[-1]] = "train"
    return {fam: split[root] for root, members in groups.items() for fam in members}


# --------------------------------------------------------------------------- output


def dataset_features():
    """The ``datasets.Features`` of an example (see :func:`example_record`)."""
    from datasets import Features, List, Value

    message = {"role": Value("string"), "content": Value("string")}
    return Features({
        "id": Value("string"),
        "prompt": List(message),
        "completion": List(message),
        "observation": Value("string"),
        "reasoning": Value("string"),
        "domain": Value("string"),
        "family": Value("string"),
        "episode": Value("string"),
        "trajectory_id": Value("string"),
        "turn": Value("int32"),
        "provenance_kind": Value("string"),
        "provenance_source": Value("string"),
        "source": Value("string"),
        "dropped_turns": List(Value("int32")),
        "num_tokens": Value("int32"),
        "volatile": List(List(Value("int32"))),
    })


_CARD = """---
configs:
- config_name: default
  data_files:
{files}
---
# lwm world-model dataset

Next-observation examples written by `lwm {command}` (conversational prompt-completion
format: `prompt` is the world-model chat, `completion` the assistant target). See
`manifest.json` for settings, counts and which task families are in which split;
`heldout/` (from `lwm data build`), the validation examples as AgentWorldBench rows for
`lwm eval --data`.

```python
from lwm.data.build import load_built
ds = load_built("{name}")        # or: datasets.load_dataset("{name}")
```
"""


def write_dataset(
    out: str | Path, examples: dict[str, list[dict]], manifest: dict, command: str = "data build"
) -> None:
    """Write examples as Parquet + JSONL + a dataset card, then the manifest.

    Args:
        out: the output directory (created if needed).
        examples: ``{split: [example record, …]}`` for the splits in :data:`SPLITS`.
        manifest: written to ``manifest.json`` last.
        command: named in the dataset card.
    """
    import datasets

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    features = dataset_features()
    files = []
    with library_progress(False):  # a bar per Parquet file says nothing
        for split in SPLITS:
            recs = examples.get(split, [])
            cols = {k: [r[k] for r in recs] for k in features}
            ds = datasets.Dataset.from_dict(cols, features=features)
            with atomic_path(out / f"{split}.parquet") as tmp:
                ds.to_parquet(str(tmp))
            write_jsonl(out / f"{split}.jsonl", recs)
            if recs:  # `datasets.load_dataset` refuses a split with no rows
                files.append(f"  - split: {split}\n    path: {split}.parquet")
    write_atomic(out / "README.md", _CARD.format(files="\n".join(files), command=command, name=out))
    write_atomic(out / "manifest.json", dumps(manifest) + "\n")


def write_heldout_rows(directory: Path, rows: Sequence[BenchRow]) -> None:
    """Write the validation examples' AgentWorldBench rows as ``{domain}_test.jsonl`` (what
    ``lwm eval --data`` reads), replacing the files of an earlier build. Only the turns
    that became examples are there (those that fit the token budget)."""
    by_domain: dict[str, list[BenchRow]] = defaultdict(list)
    for row in rows:
        by_domain[row.domain].append(row)
    bad = [d for d in by_domain if not _FILE_SAFE.fullmatch(d)]
    if bad:  # checked before anything is written or removed
        raise ValueError(f"domain names {bad!r} cannot name a {{domain}}_test.jsonl file (letters, digits, _ - .)")
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*_test.jsonl"):
        if stale.name.removesuffix("_test.jsonl") not in by_domain:
            stale.unlink()
    for domain, domain_rows in by_domain.items():
        write_rows(directory / f"{domain}_test.jsonl", domain_rows)


def read_built(path: str | Path) -> tuple[dict[str, list[dict]], dict]:
    """Read a dataset directory written by :func:`write_dataset` (its JSONL files).

    Returns:
        ``({split: [record, …]}, manifest)``.

    Raises:
        DataNotFoundError: not a dataset directory.
        RowFormatError: a malformed line.
    """
    path = Path(path)
    mf = path / "manifest.json"
    if not mf.is_file():
        raise DataNotFoundError(f"{path} is not a dataset built by `lwm data build` (no manifest.json)")
    manifest = read_json(mf)
    if manifest.get("kind") != MANIFEST_KIND:
        raise DataNotFoundError(f"{mf} is not the manifest of an lwm dataset (kind={manifest.get('kind')!r})")
    examples: dict[str, list[dict]] = {}
    for split in SPLITS:
        f = path / f"{split}.jsonl"
        examples[split] = [obj for _, obj in iter_jsonl(f)] if f.is_file() else []
        for line, obj in enumerate(examples[split], start=1):
            if "prompt" not in obj or "observation" not in obj:
                raise RowFormatError(f, line, "not an example record (fields prompt, observation)")
    return examples, manifest


def load_built(path: str | Path):
    """The dataset directory as a ``datasets.DatasetDict`` (read from its Parquet files,
    in memory; empty splits included)."""
    import datasets
    import pyarrow.parquet as pq

    path = Path(path)
    out = {}
    for split in SPLITS:
        f = path / f"{split}.parquet"
        if not f.is_file():
            raise DataNotFoundError(f"{f} is missing: not a dataset built by `lwm data build`")
        out[split] = datasets.Dataset(pq.read_table(f))
    return datasets.DatasetDict(out)


def split_summary(examples: dict[str, list[dict]]) -> dict[str, Any]:
    """Per split: example count, by domain, and the sorted families and episodes."""
    summary = {}
    for split in SPLITS:
        recs = examples.get(split, [])
        summary[split] = {
            "examples": len(recs),
            "by_domain": dict(sorted(Counter(r["domain"] for r in recs).items())),
            "families": sorted({r["family"] for r in recs}),
            "episodes": sorted({r["episode"] for r in recs}),
        }
    return summary


# --------------------------------------------------------------------------- build


@dataclass
class BuildConfig:
    """Settings of ``lwm data build``.

    Attributes:
        sources: where the trajectories are: directories written by ``lwm collect`` (their
            ``trajectories.jsonl``), trajectory files, or AgentWorldBench rows files.
        out: output directory.
        max_tokens: budget per example (prompt + completion, chat template included).
        tokenizer: ``"embedded"`` or a Hugging Face tokenizer directory.
        val_fraction: share of each domain's examples held out for validation, as whole task families, in [0, 1].
        seed: seed of the family hash.
        prediction: what the completions hold (:mod:`lwm.prediction`): ``full``, the whole
            observation, or ``change``, what the action changed (turns whose change no
            renderer reproduces are skipped and counted as ``change_unrenderable``).
        compact_tools: write tool lists in system prompts as one-line signatures
            (:func:`lwm.prompts.compact_tools`; the filesystem server's system prompt is 3,691
            SmolLM2 tokens with its tool list as JSON, 748 with signatures).
        prompt_variety: render each training example's system prompt in one of the
            phrasings 0-2 of :data:`lwm.prompts.PHRASINGS` (seeded by the example), and
            write the held-out rows also in the phrasing no example has
            (``heldout-unseen-phrasing/``).
    """

    sources: list[Path]
    out: Path
    max_tokens: int = 2048
    tokenizer: str = "embedded"
    val_fraction: float = 0.2
    seed: int = 0
    prediction: Prediction = "full"
    compact_tools: bool = False
    prompt_variety: bool = False


@dataclass
class BuildResult:
    """What a build produced.

    Attributes:
        out: the output directory.
        counts: ``{"train": n, "validation": n}``.
        manifest: the manifest written.
        seconds: wall-clock time.
    """

    out: Path
    counts: dict[str, int]
    manifest: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def example_record(c: Candidate, messages: list[Message], target: str, observation: str, reasoning: str,
                   dropped: list[int], num_tokens: int) -> dict[str, Any]:
    """One output example (the fields of :func:`dataset_features`)."""
    return {
        "id": content_hash(messages, target),
        "prompt": messages,
        "completion": [{"role": "assistant", "content": target}],
        "observation": observation,
        "reasoning": reasoning,
        "domain": c.domain,
        "family": c.family,
        "episode": c.episode,
        "trajectory_id": c.trajectory_id,
        "turn": c.turn,
        "provenance_kind": c.provenance_kind,
        "provenance_source": c.provenance_source,
        "source": c.source,
        "dropped_turns": dropped,
        "num_tokens": num_tokens,
        "volatile": [list(s) for s in c.row.volatile_spans],
    }


def build(config: BuildConfig, *, tokenizer: ChatTokenizer | None = None, show_progress: bool = True) -> BuildResult:
    """Build the dataset (see the module docstring for the layout and the rules).

    Args:
        config: the settings.
        tokenizer: an already loaded tokenizer (default: :func:`load_tokenizer` of
            ``config.tokenizer``).
        show_progress: draw a progress bar on stderr.

    Raises:
        DataNotFoundError: a source is missing, or no example came out of the sources.
        RowFormatError: a malformed input line (names file and line).
        ModelUnavailableError: the tokenizer cannot be loaded.
        ValueError: a setting out of range.
    """
    t0 = time.monotonic()
    if not 0 <= config.val_fraction <= 1:
        raise ValueError(f"val_fraction must be in [0, 1], got {config.val_fraction}")
    check_prediction(config.prediction)
    if config.max_tokens < 16:
        raise ValueError(f"max_tokens must be at least 16, got {config.max_tokens}")
    files = source_files(config.sources)
    counts: Counter = Counter()
    candidates = first_runs_only(read_candidates(files, counts), counts)
    if not candidates:
        raise DataNotFoundError(f"no turns found in {', '.join(map(str, files))}")
    tok = tokenizer or load_tokenizer(config.tokenizer)

    records: list[dict] = []
    rows: dict[str, BenchRow] = {}  # example id -> its AgentWorldBench row (for held-out rows)
    seen: set[str] = set()
    with progress_bar("build examples", total=len(candidates), enabled=show_progress) as advance:
        for c in candidates:
            advance()
            row = c.row
            if config.prompt_variety:
                phrasing = int(hashlib.sha256(f"{config.seed}:{c.trajectory_id}:{c.turn}".encode()).hexdigest(), 16)
                row = row.model_copy(update={"system_str": rephrase(row.system_str, phrasing % UNSEEN_PHRASING)})
            messages, _ = request(row, config.prediction, compact=config.compact_tools)
            observation = observation_text(c.row.ground_truth)
            written = observed_change(c.row) if row_prediction(c.row, config.prediction) == "change" else observation
            if written is None:
                counts["change_unrenderable"] += 1
                continue
            target = format_target(written, c.reasoning)
            fitted = fit_messages(messages, target, tok, config.max_tokens)
            if isinstance(fitted, str):
                counts[fitted] += 1
                continue
            msgs, dropped, n = fitted
            rec = example_record(c, msgs, target, observation, c.reasoning, dropped, n)
            if rec["id"] in seen:
                counts["duplicates"] += 1
                continue
            seen.add(rec["id"])
            rows[rec["id"]] = c.row
            counts["examples_with_dropped_turns"] += bool(dropped)
            counts["dropped_turns"] += len(dropped)
            records.append(rec)
    if not records:
        raise DataNotFoundError(f"every turn was skipped ({dict(counts)}); raise --max-tokens")

    split_of = assign_splits(((r["domain"], r["family"], r["episode"]) for r in records),
                             config.val_fraction, config.seed)
    examples: dict[str, list[dict]] = {s: [] for s in SPLITS}
    for r in records:
        examples[split_of[r["family"]]].append(r)
    summary = split_summary(examples)
    families = {}
    for r in records:
        f = families.setdefault(r["family"], {"split": split_of[r["family"]], "episodes": set(), "examples": 0})
        f["episodes"].add(r["episode"])
        f["examples"] += 1
    manifest = {
        "kind": MANIFEST_KIND,
        "version": 1,
        "command": "lwm data build",
        "settings": {
            "sources": [str(p) for p in config.sources],
            "files": [str(f) for f in files],
            "max_tokens": config.max_tokens,
            "tokenizer": tok.spec,
            "val_fraction": config.val_fraction,
            "seed": config.seed,
            "prediction": config.prediction,
            "compact_tools": config.compact_tools,
            "prompt_variety": config.prompt_variety,
        },
        "counts": {
            "candidates": len(candidates),
            "train": len(examples["train"]),
            "validation": len(examples["validation"]),
            "duplicates": counts["duplicates"],
            "skipped": {k: counts[k] for k in ("target_over_budget", "prompt_over_budget", "change_unrenderable")},
            "simulated_turns": counts["simulated_turns"],
            "later_run_trajectories": counts["later_run_trajectories"],
            "examples_with_dropped_turns": counts["examples_with_dropped_turns"],
            "dropped_turns": counts["dropped_turns"],
            "tokens": {s: sum(r["num_tokens"] for r in examples[s]) for s in SPLITS},
        },
        "splits": summary,
        "families": {k: {"split": v["split"], "episodes": sorted(v["episodes"]), "examples": v["examples"]}
                     for k, v in sorted(families.items())},
    }
    # With its family, so a build from these rows keeps the families together.
    heldout = [BenchRow(**{**rows[r["id"]].model_dump(), "family": r["family"]}) for r in examples["validation"]]
    write_heldout_rows(Path(config.out) / HELDOUT_DIR, heldout)
    if config.prompt_variety:
        write_heldout_rows(Path(config.out) / UNSEEN_DIR, [
            r.model_copy(update={"system_str": rephrase(r.system_str, UNSEEN_PHRASING)}) for r in heldout])
    else:  # an earlier build's rows would pass for this one's
        shutil.rmtree(Path(config.out) / UNSEEN_DIR, ignore_errors=True)
    write_dataset(config.out, examples, manifest)
    return BuildResult(Path(config.out), {s: len(examples[s]) for s in SPLITS}, manifest, time.monotonic() - t0)


__all__ = [
    "BuildConfig", "BuildResult", "ChatTokenizer", "SPLITS", "assign_splits", "build", "content_hash",
    "fit_messages", "format_target", "load_built", "load_tokenizer", "read_built", "write_dataset",
]
