"""Import your own traces: (history, action, observation) transitions and whole episodes of
any domain, from JSON or JSON Lines (``lwm import --format transitions --domain D``).

Files. ``src`` is one file (any name) or a directory searched recursively for ``*.json``
and ``*.jsonl`` (files inside the output directory are never read). Each file is tried as
ONE JSON document first: an object is one record, a list is one record per element. If
it is not one document, it is JSON Lines: one record per non-blank line.

Records. Each record is a JSON object of one of two kinds:

* an **episode**: ``turns`` (or ``steps``), a list of turns in order. Every turn is one
  row of the output.
* a **transition**, the (history, action, observation) triple that terminal benchmarks
  and trace tools write: ``action`` and ``observation`` (the action and what the
  environment answered to it), optional ``history`` (the earlier turns, in order). It
  becomes a trajectory whose last turn is this action; only that turn is a row, so the
  triples of one episode (each with a longer history) give one row each, not repeats.

A turn is an object ``{"action": …, "observation": …}`` (``command`` is read for
``action``; ``output`` and ``next_observation`` for ``observation``; the first of these
keys present is used) or a two-item list ``[action, observation]``. An action that is a
string is kept verbatim; an object or a list is stored as one-line JSON text. An
observation must be a string (``""`` is fine); trailing newlines are dropped, as raw
command output ends with one.

Optional fields of both kinds: ``id`` (a string or an integer: the trajectory id; default
``<file>-<line>``, or ``<file>-item<N>`` for the N-th object of a list, where ``<file>``
is the path relative to ``src`` without its extension), ``task`` or ``instruction`` (the
agent's instruction), ``system_prompt``, ``initial_observation`` (what the agent saw
before its first action), ``reward`` (a number in [0, 1] or a boolean: the episode's
verdict) and ``domain`` (when given, the domain imported into). Other fields are ignored.

The system prompt of a trajectory is the one given to :func:`import_transitions` (``lwm
import --system-prompt``), else the record's ``system_prompt``, else the domain's default
(``domains.get(domain).system_prompt()``; empty for domains whose prompt needs settings,
such as the tool list of ``fs`` and ``mcp``: give one then). Actions are fenced with the
domain's ``action_lang`` when its ``parse_action`` accepts every action of the
trajectory, else as ``text`` (a terminal trace of plain command lines, for instance).

Bad input is never silently dropped: a record that does not fit (a missing observation,
a number where text belongs, a line that is not JSON, a repeated id …) is skipped and
listed in ``manifest.json`` (``skipped``: episode, file, line, reason; line 1 for a
record of a one-document file, whose reason then starts ``item N`` for the N-th element
of a list; line 0 for a file that cannot be read), or with ``strict=True`` raises
:class:`~lwm.errors.RowFormatError` naming the file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lwm import domains
from lwm.data import importers
from lwm.data.importers import ImportResult, _Ctx, _inside, _json_type, _read_records
from lwm.domains import Domain
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.jsonl import dumps, write_atomic
from lwm.schema import Provenance, Trajectory, Turn, rows_from_trajectory, write_rows, write_trajectories

#: The ``--format`` name and the provenance label (``import/transitions:<file>``).
FORMAT = "transitions"
#: Keys read for a turn's action and observation, in order of preference.
ACTION_KEYS = ("action", "command")
OBSERVATION_KEYS = ("observation", "output", "next_observation")
_TURNS_KEYS = ("turns", "steps")


def import_transitions(src: str | Path, out: str | Path, *, domain: str, system_prompt: str | None = None,
                       strict: bool = False) -> ImportResult:
    """Import episodes and (history, action, observation) transitions of ``domain`` from
    JSON or JSON Lines files (the accepted shapes: this module's documentation).

    Writes (each file atomically) ``trajectories.jsonl`` (one trajectory per record;
    provenance ``real``, source ``import/transitions:<file>``), ``{domain}_test.jsonl``
    (AgentWorldBench rows: one per turn of an episode, one per transition) and
    ``manifest.json`` (``format``, ``domain``, counts, ``skipped`` records with reasons,
    ``real_environment``: whether the domain has a real environment here).

    Args:
        src: a JSON / JSONL file, or a directory of them (searched recursively).
        out: the output directory (created).
        domain: the domain the traces come from (``terminal``, ``db`` …; ``lwm.domains.names()``).
        system_prompt: the world-model system prompt of every trajectory (default: each
            record's ``system_prompt``, else the domain's default).
        strict: raise on the first record that does not fit instead of skipping it.

    Returns:
        what was written (``domain`` is ``domain``; ``dropped_turns`` is always empty).

    Raises:
        UnknownDomainError: no domain of that name.
        DataNotFoundError: ``src`` does not exist or holds no ``*.json`` / ``*.jsonl`` file.
        RowFormatError: with ``strict``, a record that does not fit (names file and line).
    """
    spec = domains.get(domain)
    src, out = Path(src), Path(out)
    if not src.exists():
        raise DataNotFoundError(f"{src}: no such file or directory")
    if src.is_file():
        files = [src]
    else:
        files = sorted(p for p in src.rglob("*") if p.suffix in (".json", ".jsonl") and p.is_file()
                       and not _inside(p, out))  # never re-import our output
    if not files:
        raise DataNotFoundError(f"{src}: no *.json or *.jsonl files found (recursively) outside the output "
                                f"directory {out}")
    ctx = _Ctx(FORMAT, src, strict)
    default_prompt = _default_system_prompt(spec)
    trajs: list[Trajectory] = []
    transition: dict[str, bool] = {}
    seen: dict[str, str] = {}
    found = 0
    for path in files:
        records = _read_records(path)
        stem = ctx.rel(path.with_suffix(""))
        if not records:
            ctx.fail(stem, RowFormatError(path, 0, "no records (the file is empty, or an empty list)"))
        for line, item, obj in records:
            found += 1
            name = _record_id(obj) or (f"{stem}-item{item}" if item else f"{stem}-{line}")
            try:
                if isinstance(obj, RowFormatError):
                    raise obj
                try:
                    traj, is_transition = _build(obj, spec, name, system_prompt, default_prompt,
                                                 f"import/{FORMAT}:{ctx.rel(path)}")
                except ValueError as e:
                    raise RowFormatError(path, line, f"item {item}: {e}" if item else str(e)) from None
                if traj.id in seen:
                    raise RowFormatError(path, line, f"{f'item {item}: ' if item else ''}duplicate trajectory id "
                                         f"{traj.id!r} (first at {seen[traj.id]})")
            except RowFormatError as e:
                ctx.fail(name, e)
                continue
            traj.metadata.update({"format": FORMAT, "file": ctx.rel(path), "line": line,
                                  **({"item": item} if item else {})})
            seen[traj.id] = f"{ctx.rel(path)}:{line}" + (f" item {item}" if item else "")
            transition[traj.id] = is_transition
            trajs.append(traj)

    rows = [r for t in trajs for r in rows_from_trajectory(t, action_lang=_action_lang(spec, t),
                                                           last_only=transition[t.id])]
    out.mkdir(parents=True, exist_ok=True)
    result = ImportResult(out, domain, len(trajs), len(rows), sum(len(t.turns) for t in trajs), ctx.skipped, [])
    write_trajectories(result.trajectories_path, trajs)
    write_rows(result.rows_path, rows)
    real = spec.import_only is None
    manifest = {
        "domain": domain,
        "format": FORMAT,
        "source": str(src),
        "real_environment": real,
        **({} if real else {"notice": f"no real environment for {domain} here ({spec.import_only})"}),
        "system_prompt": "given" if system_prompt is not None else "per record, else the domain's default",
        "files": len(files),
        "records_found": found,
        "episode_records": sum(1 for t in trajs if not transition[t.id]),
        "transition_records": sum(1 for t in trajs if transition[t.id]),
        "trajectories": len(trajs),
        "rows": len(rows),
        "turns": result.turns,
        "empty_system_prompts": sum(1 for t in trajs if not t.system_prompt),
        "verified_episodes": sum(1 for t in trajs if t.reward is not None),
        "achieved_episodes": sum(1 for t in trajs if t.reward == 1.0),
        "skipped_records": len(ctx.skipped),
        "skipped": ctx.skipped,
    }
    write_atomic(result.manifest_path, dumps(manifest) + "\n")
    return result


def _default_system_prompt(spec: Domain) -> str:
    try:
        return spec.system_prompt()
    except Exception:  # the prompt needs settings (fs, mcp: the tool list) or is broken
        return ""


def _record_id(obj: Any) -> str | None:
    if isinstance(obj, dict):
        value = obj.get("id")
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def _build(obj: dict, spec: Domain, name: str, system_prompt: str | None, default_prompt: str,
           source: str) -> tuple[Trajectory, bool]:
    """The trajectory of one record, and whether it is a transition (raises ``ValueError``
    saying what does not fit)."""
    turns_key = next((k for k in _TURNS_KEYS if k in obj), None)
    action_key = next((k for k in ACTION_KEYS if k in obj), None)
    if turns_key is not None and action_key is not None:
        raise ValueError(f"both '{turns_key}' and '{action_key}': an episode has turns, a transition an action "
                         "and an observation, not both")
    if turns_key is None and action_key is None and not any(k in obj for k in OBSERVATION_KEYS + ("history",)):
        keys = ", ".join(repr(k) for k in list(obj)[:8]) or "none"
        raise ValueError(f"neither an episode ('turns' or 'steps') nor a transition ('action' and 'observation'); "
                         f"keys: {keys}")
    if "id" in obj and obj["id"] is not None and _record_id(obj) is None:
        raise ValueError(f"'id' must be a non-empty string or an integer, got {_json_type(obj['id'])}")
    if obj.get("domain") is not None and obj["domain"] != spec.name:
        raise ValueError(f"the record's domain is {obj['domain']!r}, but this import is of {spec.name!r}")
    prov = Provenance(kind="real", source=source)
    if turns_key is not None:
        steps = _turn_list(obj[turns_key], turns_key, "turn")
        if not steps:
            raise ValueError(f"'{turns_key}' is empty: an episode needs at least one turn")
    else:
        steps = _turn_list(obj["history"], "history", "history turn") if obj.get("history") is not None else []
        steps.append(_turn(obj, ""))
    turns = [Turn(index=i, action=a, observation=o, provenance=prov) for i, (a, o) in enumerate(steps, start=1)]
    task = _text(obj, ("task", "instruction"))
    initial = _text(obj, ("initial_observation",))
    prompt = system_prompt if system_prompt is not None else _text(obj, ("system_prompt",), None)
    traj = Trajectory(id=name, domain=spec.name, task=task or "",
                      system_prompt=prompt if prompt is not None else default_prompt,
                      initial_observation=(initial or "").rstrip("\n"), turns=turns, reward=_reward(obj.get("reward")),
                      metadata={"record": "episode" if turns_key else "transition"})
    return traj, turns_key is None


def _turn_list(value: Any, key: str, label: str) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        raise ValueError(f"'{key}' must be a list of turns, got {_json_type(value)}")
    return [_turn(t, f"{label} {i}") for i, t in enumerate(value, start=1)]


def _turn(value: Any, where: str) -> tuple[str, str]:
    """``(action, observation)`` of one turn (``where`` names it; ``""``: the record itself)."""
    pre = f"{where}: " if where else ""
    if isinstance(value, list):
        if len(value) != 2:
            raise ValueError(f"{pre}a turn as a list is [action, observation], got {len(value)} items")
        return _action(value[0], f"{pre}the action"), _observation(value[1], f"{pre}the observation")
    if not isinstance(value, dict):
        raise ValueError(f"{pre}a turn is an object {{action, observation}} or a list [action, observation], "
                         f"got {_json_type(value)}")
    subject = where or "the record"
    action_key = next((k for k in ACTION_KEYS if k in value), None)
    if action_key is None:
        raise ValueError(f"{subject} has no action (expected one of {', '.join(ACTION_KEYS)})")
    obs_key = next((k for k in OBSERVATION_KEYS if k in value), None)
    if obs_key is None:
        raise ValueError(f"{subject} has no observation (expected one of {', '.join(OBSERVATION_KEYS)})")
    return _action(value[action_key], f"{pre}'{action_key}'"), _observation(value[obs_key], f"{pre}'{obs_key}'")


def _action(value: Any, what: str) -> str:
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"{what} is empty")
        return value
    if isinstance(value, (dict, list)):
        return dumps(value)
    raise ValueError(f"{what} must be a string, an object or a list, got {_json_type(value)}")


def _observation(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string (the environment's text), got {_json_type(value)}")
    return value.rstrip("\n")


def _text(obj: dict, keys: tuple[str, ...], default: str | None = "") -> str | None:
    for key in keys:
        if obj.get(key) is not None:
            if not isinstance(obj[key], str):
                raise ValueError(f"'{key}' must be a string, got {_json_type(obj[key])}")
            return obj[key]
    return default


def _reward(value: Any) -> float | None:
    reward = importers._reward(value)
    if reward is None and value is not None:   # the logs' importers drop it; a user's own trace is refused
        raise ValueError(f"'reward' must be a number in [0, 1] or a boolean, got {value!r}")
    return reward


def _action_lang(spec: Domain, traj: Trajectory) -> str:
    """The domain's fence language when its parser takes every action of ``traj``, else ``text``."""
    for turn in traj.turns:
        try:
            spec.parse_action(turn.action)
        except Exception:  # any refusal (a domain's parser may raise its own errors)
            return "text"
    return spec.action_lang
