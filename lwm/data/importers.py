"""Import public agent logs as trajectories: the ``os`` and ``android`` domains.

os and android have no real environment here; these trajectories are imported logs. A
desktop needs a VM and a phone needs an emulator, neither of which runs on this machine,
so their ground truth comes from logs that agents left behind in real environments
elsewhere (:data:`NO_REAL_ENVIRONMENT` is the sentence the CLI prints).

Formats (field names as the public tools write them; docs/domains/os-android.md):

``os`` — OSWorld result directories. Every ``traj.jsonl`` under ``src`` is one episode
(or ``src`` is a single JSONL file). Each line is one executed action: ``step_num``,
``action`` (pyautogui code string, or a ``computer_13`` / computer-use object; an object
with a string ``command`` is stored as that code), ``response``, ``reward``, ``done``,
``info``, ``action_timestamp``, ``screenshot_file`` (screenshots are not used). OSWorld
itself does not write the accessibility tree into ``traj.jsonl``; the observation after
the action is taken from ``a11y_tree`` / ``accessibility_tree`` /
``linearized_accessibility_tree`` / ``obs.accessibility_tree`` (text, or raw AT-SPI XML
which is linearized like OSWorld does), or from the file named by ``a11y_tree_file`` /
``accessibility_tree_file``. A line with ``step_num`` 0 gives the initial state, as do
the files ``initial_a11y_tree.txt`` / ``initial_a11y_tree.xml`` beside ``traj.jsonl``.
The instruction comes from an ``instruction`` field or from ``task.json`` /
``config.json`` / ``<example id>.json`` beside it; the reward from OSWorld's
``result.txt``. A JSONL file whose lines carry a ``steps`` list holds one episode per
line (``id``, ``instruction``, ``initial_a11y_tree``, ``reward``, ``steps``).

``android`` — AndroidWorld episodes as JSON (``*.json``: one episode or a list;
``*.jsonl``: one per line): ``goal``, ``task_template``, ``instance_id``,
``is_successful``, ``seed``, and ``episode_data`` with per-step parallel lists
(``before_element_list``, ``after_element_list``, ``action_output``,
``action_output_json`` …) or a ``steps`` list of per-step objects. The action is
``action`` / ``action_output_json`` (a ``JSONAction`` object such as ``{"action_type":
"click", "index": 3}``) or the JSON after the last ``Action:`` in ``action_output``. UI
element lists are rendered by :func:`lwm.domains.android.render_ui_elements`; a string
observation (``a11y_tree``) is kept verbatim. The observation of step *i* is its
``after_element_list``, else the next step's ``before_element_list``; a last step with
neither (typically the final ``status`` action) has no observation and is dropped,
counted in the manifest.

A JSON Lines file may also hold ONE JSON document (an object, or a list of objects,
pretty-printed or not): its objects are read as lines would be, all at line 1 (episodes
without an id are named ``<file>/<N>`` by their place in the list). Your own traces of
any domain: :mod:`lwm.data.transitions`.

Bad input is never silently dropped: a malformed episode is skipped and listed in
``manifest.json`` (``skipped``: episode, file, line, reason), or with ``strict=True``
raises :class:`~lwm.errors.RowFormatError` naming the file and line.
"""

from __future__ import annotations

import json
import math
import os
import stat
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lwm.domains.android import spec as android_domain
from lwm.domains.os import spec as os_domain
from lwm.errors import DataNotFoundError, RowFormatError
from lwm.jsonl import dumps, write_atomic
from lwm.schema import (
    Provenance,
    Trajectory,
    Turn,
    rows_from_trajectory,
    write_rows,
    write_trajectories,
)

NO_REAL_ENVIRONMENT = os_domain.NO_REAL_ENVIRONMENT
FORMATS = ("os", "android")
#: How each format is named in provenance sources (``import/<label>:<file>``).
FORMAT_LABELS = {"os": "osworld", "android": "androidworld"}

_OS_TREE_FIELDS = ("a11y_tree", "accessibility_tree", "linearized_accessibility_tree")
_OS_TREE_FILE_FIELDS = ("a11y_tree_file", "accessibility_tree_file")
_OS_TASK_FILES = ("task.json", "config.json", "example.json")
_ANDROID_BEFORE = ("before_element_list", "before_ui_elements", "ui_elements", "before_a11y_tree", "a11y_tree")
_ANDROID_AFTER = ("after_element_list", "after_ui_elements", "after_a11y_tree")


@dataclass
class ImportResult:
    """What an import produced.

    Attributes:
        out: the output directory.
        domain: the domain imported into: ``os`` or ``android`` (:func:`import_logs`), or
            any registered domain (:func:`lwm.data.transitions.import_transitions`).
        trajectories: trajectories written.
        rows: AgentWorldBench rows written.
        turns: turns over all trajectories.
        skipped: one ``{episode, file, line, reason}`` per malformed episode or record
            (line 0: the whole file).
        dropped_turns: one ``{episode, turn, action, reason}`` per last step without a
            recorded next observation.
    """

    out: Path
    domain: str
    trajectories: int
    rows: int
    turns: int
    skipped: list[dict[str, Any]] = field(default_factory=list)
    dropped_turns: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rows_path(self) -> Path:
        return self.out / f"{self.domain}_test.jsonl"

    @property
    def trajectories_path(self) -> Path:
        return self.out / "trajectories.jsonl"

    @property
    def manifest_path(self) -> Path:
        return self.out / "manifest.json"


class _Ctx:
    """Per-import state: the source root, relative names, skips and drops."""

    def __init__(self, fmt: str, src: Path, strict: bool) -> None:
        self.fmt, self.src, self.strict = fmt, src, strict
        self.skipped: list[dict[str, Any]] = []
        self.dropped: list[dict[str, Any]] = []

    def rel(self, path: Path) -> str:
        root = self.src if self.src.is_dir() else self.src.parent
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            return path.as_posix()

    def source(self, path: Path) -> str:
        return f"import/{FORMAT_LABELS[self.fmt]}:{self.rel(path)}"

    def fail(self, episode: str, err: RowFormatError) -> None:
        if self.strict:
            raise err
        self.skipped.append({"episode": episode, "file": self.rel(err.path), "line": err.line, "reason": err.reason})


def import_logs(fmt: str, src: str | Path, out: str | Path, *, strict: bool = False) -> ImportResult:
    """Import public agent logs of one format into ``out``.

    os and android have no real environment here; these trajectories are imported logs.

    Writes (each file atomically) ``trajectories.jsonl`` (provenance ``real``, source
    ``import/<format>:<file>``), ``{domain}_test.jsonl`` (AgentWorldBench rows) and
    ``manifest.json`` (counts, skipped episodes with reasons, dropped turns).

    Args:
        fmt: ``os`` (OSWorld ``traj.jsonl`` logs) or ``android`` (AndroidWorld JSON).
        src: a directory of episodes or a single file.
        out: the output directory (created).
        strict: raise on the first malformed episode instead of skipping it.

    Raises:
        ValueError: unknown ``fmt``.
        DataNotFoundError: ``src`` does not exist or holds no log file.
        RowFormatError: with ``strict``, a malformed line or file (names file and line).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown import format {fmt!r}; expected one of {', '.join(FORMATS)}")
    src, out = Path(src), Path(out)
    if not src.exists():
        raise DataNotFoundError(f"{src}: no such file or directory")
    ctx = _Ctx(fmt, src, strict)
    files = [f for f in _discover(fmt, src) if not _inside(f, out)]  # never re-import our output
    if not files:
        raise DataNotFoundError(f"{src}: no {fmt} logs found outside the output directory {out}")
    episodes = 0
    trajs: list[Trajectory] = []
    seen: dict[str, str] = {}
    for path in files:
        for name, line, build in (_os_episodes if fmt == "os" else _android_episodes)(ctx, path):
            episodes += 1
            try:
                traj = build()
                if traj.id in seen:
                    raise RowFormatError(path, line,
                                         f"duplicate trajectory id {traj.id!r} (first from {seen[traj.id]})")
            except RowFormatError as e:
                ctx.fail(name, e)
                continue
            except (OSError, UnicodeDecodeError) as e:  # a side file (tree, task) unreadable
                ctx.fail(name, RowFormatError(path, line, f"cannot read a file of this episode: {e}"))
                continue
            seen[traj.id] = ctx.rel(path)
            trajs.append(traj)

    rows = [r for t in trajs for r in rows_from_trajectory(t, action_lang=_action_lang(fmt, t))]
    out.mkdir(parents=True, exist_ok=True)
    result = ImportResult(out, fmt, len(trajs), len(rows), sum(len(t.turns) for t in trajs), ctx.skipped, ctx.dropped)
    write_trajectories(result.trajectories_path, trajs)
    write_rows(result.rows_path, rows)
    manifest = {
        "domain": fmt,
        "format": FORMAT_LABELS[fmt],
        "source": str(src),
        "real_environment": False,
        "notice": NO_REAL_ENVIRONMENT,
        "files": len(files),
        "episodes_found": episodes,
        "trajectories": len(trajs),
        "rows": len(rows),
        "turns": result.turns,
        "verified_episodes": sum(1 for t in trajs if t.reward is not None),
        "achieved_episodes": sum(1 for t in trajs if t.reward == 1.0),
        "skipped_episodes": len(ctx.skipped),
        "skipped": ctx.skipped,
        "dropped_turns": ctx.dropped,
    }
    write_atomic(result.manifest_path, dumps(manifest) + "\n")
    return result


def _discover(fmt: str, src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    if fmt == "os":
        files = sorted(src.rglob("traj.jsonl")) or sorted(src.rglob("*.jsonl"))
        wanted = "traj.jsonl or *.jsonl"
    else:
        files = sorted(p for p in src.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
        wanted = "*.json or *.jsonl"
    if not files:
        raise DataNotFoundError(f"{src}: no {fmt} logs found (looked for {wanted}, recursively)")
    return files


#: Largest log or side file read (logs come from elsewhere: a file may be anything).
MAX_LOG_BYTES = 256 << 20


def _read_file(f: Path, directory: Path | None = None) -> bytes:
    """The bytes of a log or side file: a regular file (not a link, a device or a FIFO)
    of at most :data:`MAX_LOG_BYTES`, inside ``directory`` when one is given.

    Raises:
        OSError: any of these is not the case (the message says which).
    """
    if directory is not None and not _inside(f, directory):
        raise OSError(f"{f.name!r} is outside the episode directory")
    st = os.lstat(f)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise OSError("not a regular file (links and special files are refused)")
    if st.st_size > MAX_LOG_BYTES:
        raise OSError(f"larger than {MAX_LOG_BYTES >> 20} MB")
    return f.read_bytes()


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


def _action_lang(fmt: str, traj: Trajectory) -> str:
    if fmt == "android":
        return "json"
    return "json" if all(_json_object(t.action) is not None for t in traj.turns) else "python"


def _json_object(text: str) -> dict | None:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type (``object``, ``list``, ``string``, ``number`` …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "list", str: "string", int: "number", float: "number"}.get(type(value), "value")


def _json_document(data: bytes, path: Path) -> list[tuple[int, int | None, Any]] | None:
    """The file as ONE JSON document: ``[(1, None, value)]`` for an object (or any value),
    ``(1, n, element)`` for each element of a list (``n`` 1-based); ``None`` when the file
    is JSON Lines instead (or not UTF-8, or nested too deeply: read it line by line).

    JSON Lines is recognised by its first document ending on the line it starts on (the
    one-line file is both). A first document that spans several lines and is broken, or
    is followed by more, gives ``[(line, None, RowFormatError)]`` at the line where that is.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    start = len(text) - len(text.lstrip(" \t\r\n"))
    try:
        doc, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as e:
        if "\n" not in text[start : e.pos]:  # broken inside its first line: per line says which
            return None
        return [(e.lineno, None, RowFormatError(path, e.lineno, f"not valid JSON ({e.msg} at column {e.colno})"))]
    except RecursionError:
        return None
    rest = len(text) - len(text[end:].lstrip(" \t\r\n"))
    if rest < len(text):
        if "\n" not in text[start:end]:
            return None  # JSON Lines
        line = text.count("\n", 0, rest) + 1
        return [(line, None, RowFormatError(path, line, "a second JSON document after the first, which spans "
                                            "several lines (give one document, or one object per line)"))]
    if isinstance(doc, list):
        return [(1, n, item) for n, item in enumerate(doc, start=1)]
    return [(1, None, doc)]


def _read_records(path: Path) -> list[tuple[int, int | None, dict | RowFormatError]]:
    """The JSON objects of a file as ``(line, item, object)``, or the error in place of
    the object (not raised). The whole file is tried as one JSON document first
    (:func:`_json_document`: an object, or a list of objects numbered by ``item``);
    otherwise every non-blank line is one object (JSON Lines; ``item`` is ``None``).
    Line 0: the file cannot be read at all."""
    try:
        data = _read_file(path)
    except OSError as e:
        return [(0, None, RowFormatError(path, 0, f"cannot read: {e.strerror or e}"))]
    doc = _json_document(data, path)
    if doc is not None:
        return [(ln, n, obj if isinstance(obj, (dict, RowFormatError)) else RowFormatError(
            path, ln, f"{f'item {n}: ' if n else ''}expected a JSON object, got {_json_type(obj)}"))
            for ln, n, obj in doc]
    out: list[tuple[int, int | None, dict | RowFormatError]] = []
    for i, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            out.append((i, None, RowFormatError(path, i, "not valid UTF-8")))
        except json.JSONDecodeError as e:
            out.append((i, None, RowFormatError(path, i, f"not valid JSON ({e.msg} at column {e.colno})")))
        except RecursionError:
            out.append((i, None, RowFormatError(path, i, "nested too deeply")))
        else:
            out.append((i, None, obj if isinstance(obj, dict) else
                        RowFormatError(path, i, f"expected a JSON object, got {_json_type(obj)}")))
    return out


Episode = tuple[str, int, Callable[[], Trajectory]]


# ----------------------------------------------------------------------------------- os


def _os_episodes(ctx: _Ctx, path: Path) -> list[Episode]:
    records = _read_records(path)
    lines = [(ln, obj) for ln, _, obj in records]
    first = next((obj for _, obj in lines if isinstance(obj, dict)), None)
    if first is not None and isinstance(first.get("steps"), list):  # one episode per line (or list item)
        stem = ctx.rel(path.with_suffix(""))
        eps: list[Episode] = []
        for line_no, item, obj in records:
            default = f"{stem}/{item or line_no}"
            name = str(obj.get("id") or obj.get("example_id") or obj.get("task_id") or default) \
                if isinstance(obj, dict) else default
            eps.append((name, line_no, lambda o=obj, n=name, ln=line_no: _os_from_object(ctx, path, ln, n, o)))
        return eps
    if path.name == "traj.jsonl":
        name = ctx.rel(path.parent) if path.parent != ctx.src else path.parent.name
        if name == ".":
            name = path.parent.resolve().name
    else:
        name = ctx.rel(path.with_suffix(""))
    return [(name, 0, lambda: _os_from_traj(ctx, path, name, lines))]


def _os_from_traj(ctx: _Ctx, path: Path, name: str, lines: list) -> Trajectory:
    for _, obj in lines:
        if isinstance(obj, RowFormatError):
            raise obj
    if not lines:
        raise RowFormatError(path, 0, "no steps (the file is empty)")
    records = [(ln, obj) for ln, obj in lines]
    task = next((r["instruction"] for _, r in records if isinstance(r.get("instruction"), str)), None)
    if task is None:
        task = _os_task_from_dir(path)
    initial = ""
    for stem_ext in ("initial_a11y_tree.txt", "initial_a11y_tree.xml"):
        f = path.parent / stem_ext
        if f.is_file() or f.is_symlink():
            try:
                text = _read_file(f, path.parent).decode("utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise RowFormatError(path, 0, f"cannot read {f.name}: {getattr(e, 'strerror', None) or e}") from None
            initial = _os_tree_text(text, path, 0, f"file {f.name}")
            break
    reward, result_raw = _os_result(path.parent)
    meta = {"format": FORMAT_LABELS["os"], "file": ctx.rel(path), "episode": name}
    if result_raw is not None:
        meta["result_txt"] = result_raw
    return _os_build(ctx, path, name, task, initial, records, reward, meta)


def _os_from_object(ctx: _Ctx, path: Path, line: int, name: str, obj: dict | RowFormatError) -> Trajectory:
    if isinstance(obj, RowFormatError):
        raise obj
    steps = obj.get("steps")
    if not isinstance(steps, list):
        raise RowFormatError(path, line, "'steps' must be a list of step records")
    if not all(isinstance(s, dict) for s in steps):
        raise RowFormatError(path, line, "every item of 'steps' must be an object")
    task = obj.get("instruction", obj.get("task", ""))
    if not isinstance(task, str):
        raise RowFormatError(path, line, "'instruction' must be a string")
    initial = obj.get("initial_a11y_tree", obj.get("initial_observation", ""))
    if not isinstance(initial, str):
        raise RowFormatError(path, line, "'initial_a11y_tree' must be a string")
    initial = _os_tree_text(initial, path, line, "initial_a11y_tree") if initial else ""
    reward = _reward(obj.get("reward", obj.get("result")))
    meta = {"format": FORMAT_LABELS["os"], "file": ctx.rel(path), "line": line, "episode": name}
    return _os_build(ctx, path, name, task, initial, [(line, s) for s in steps], reward, meta,
                     per_line=True)


def _os_build(ctx: _Ctx, path: Path, name: str, task: str, initial: str,
              records: list[tuple[int, dict]], reward: float | None, meta: dict,
              per_line: bool = False) -> Trajectory:
    prov = Provenance(kind="real", source=ctx.source(path))
    turns: list[Turn] = []
    step_nums = []
    for k, (line, rec) in enumerate(records, start=1):
        # One episode per line: name the step; traj.jsonl: the line number already does.
        where = f"steps[{k - 1}]" if per_line else f"step_num {rec.get('step_num', '?')}"
        if rec.get("step_num") == 0 and not isinstance(rec["step_num"], bool):  # state before the first action
            if turns:
                raise RowFormatError(path, line, "step_num 0 (the initial state) after other steps")
            initial = _os_observation(rec, path, line, where)
            continue
        if "action" not in rec:
            raise RowFormatError(path, line, f"{where}: missing field 'action'")
        action = _os_action(rec["action"], path, line, where)
        obs = _os_observation(rec, path, line, where)
        turns.append(Turn(index=len(turns) + 1, action=action, observation=obs, provenance=prov))
        step_nums.append(rec.get("step_num"))
    if not turns:
        raise RowFormatError(path, records[0][0] if records else 0, "no steps with an action")
    meta["step_nums"] = step_nums
    return Trajectory(id=f"os/{name}", domain="os", task=task, system_prompt=os_domain.system_prompt(),
                      initial_observation=initial, turns=turns, reward=reward, metadata=meta)


def _os_action(action: Any, path: Path, line: int, where: str) -> str:
    if isinstance(action, str):
        if not action.strip():
            raise RowFormatError(path, line, f"{where}: 'action' is empty")
        return action
    if isinstance(action, dict):
        if isinstance(action.get("command"), str) and action["command"].strip():
            return action["command"]  # agents that log the pyautogui code they executed
        shown = {k: v for k, v in action.items() if k not in ("raw_response", "pending_checks")}
        if not shown:
            raise RowFormatError(path, line, f"{where}: 'action' is an empty object")
        return json.dumps(shown, ensure_ascii=False)
    raise RowFormatError(path, line, f"{where}: 'action' must be a string or an object, "
                         f"got {type(action).__name__}")


def _os_observation(rec: dict, path: Path, line: int, where: str) -> str:
    for key in _OS_TREE_FIELDS:
        if rec.get(key) is not None:
            return _os_tree_value(rec[key], path, line, f"{where}: '{key}'")
    for key in ("obs", "observation"):
        sub = rec.get(key)
        if isinstance(sub, dict):
            for inner in _OS_TREE_FIELDS:
                if sub.get(inner) is not None:
                    return _os_tree_value(sub[inner], path, line, f"{where}: '{key}.{inner}'")
    for key in _OS_TREE_FILE_FIELDS:
        if rec.get(key) is not None:
            name = rec[key]
            if not isinstance(name, str):
                raise RowFormatError(path, line, f"{where}: '{key}' must be a file name")
            f = path.parent / name
            try:
                text = _read_file(f, path.parent).decode("utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise RowFormatError(path, line, f"{where}: cannot read {key} {name!r}: "
                                     f"{getattr(e, 'strerror', None) or e}") from None
            return _os_tree_text(text, path, line, f"{where}: file {name!r}")
    looked = ", ".join(_OS_TREE_FIELDS + ("obs.accessibility_tree",) + _OS_TREE_FILE_FIELDS)
    raise RowFormatError(path, line, f"{where}: no accessibility tree (looked for {looked}); "
                         "OSWorld's own traj.jsonl has none, see docs/domains/os-android.md")


def _os_tree_value(value: Any, path: Path, line: int, where: str) -> str:
    if not isinstance(value, str):
        raise RowFormatError(path, line, f"{where} must be a string, got {type(value).__name__}")
    return _os_tree_text(value, path, line, where)


def _os_tree_text(text: str, path: Path, line: int, where: str) -> str:
    if os_domain.is_a11y_xml(text):
        try:
            return os_domain.linearize_a11y_xml(text)
        except ET.ParseError as e:
            raise RowFormatError(path, line, f"{where}: accessibility tree is not well-formed XML ({e})") from None
    return text.rstrip("\n")


def _os_task_from_dir(path: Path) -> str:
    for name in _OS_TASK_FILES + (f"{path.parent.name}.json",):
        f = path.parent / name
        if f.is_file() or f.is_symlink():
            try:
                obj = json.loads(_read_file(f, path.parent).decode("utf-8"))
            except OSError as e:
                raise RowFormatError(f, 0, f"cannot read the task file: {e}") from None
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise RowFormatError(f, getattr(e, "lineno", 0), f"task file is not valid JSON ({e})") from None
            if isinstance(obj, dict) and isinstance(obj.get("instruction"), str):
                return obj["instruction"]
    return ""


def _os_result(directory: Path) -> tuple[float | None, str | None]:
    f = directory / "result.txt"
    if not (f.is_file() or f.is_symlink()):
        return None, None
    try:
        raw = _read_file(f, directory).decode("utf-8", errors="replace").strip()
    except OSError as e:
        raise RowFormatError(f, 0, f"cannot read: {e}") from None
    try:
        return _reward(float(raw)), raw
    except ValueError:
        return None, raw


def _reward(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= 1:
        return float(value)
    return None


# ------------------------------------------------------------------------------ android


def _android_episodes(ctx: _Ctx, path: Path) -> list[Episode]:
    stem = ctx.rel(path.with_suffix(""))
    if path.suffix == ".jsonl":
        return [
            (_android_name(obj, f"{stem}/{n or ln}"), ln,
             lambda o=obj, ln=ln, n=n: _android_build(ctx, path, ln, _android_name(o, f"{stem}/{n or ln}"), o,
                                                      f"item {n}" if n else ""))
            for ln, n, obj in _read_records(path)
        ]
    try:
        data = json.loads(_read_file(path).decode("utf-8"))
    except OSError as e:
        err = RowFormatError(path, 0, f"cannot read: {e}")
    except UnicodeDecodeError:
        err = RowFormatError(path, 0, "not valid UTF-8")
    except json.JSONDecodeError as e:
        err = RowFormatError(path, e.lineno, f"not valid JSON ({e.msg} at column {e.colno})")
    except RecursionError:
        err = RowFormatError(path, 0, "nested too deeply")
    else:
        if isinstance(data, list):
            return [
                (_android_name(ep, f"{stem}/{i}"), 0,
                 lambda ep=ep, i=i: _android_build(ctx, path, 0, _android_name(ep, f"{stem}/{i}"), ep, f"episode {i}"))
                for i, ep in enumerate(data)
            ]
        return [(_android_name(data, stem), 0, lambda: _android_build(ctx, path, 0, _android_name(data, stem), data))]

    def fail() -> Trajectory:
        raise err

    return [(stem, err.line, fail)]


def _android_name(obj: Any, default: str) -> str:
    if isinstance(obj, dict):
        for key in ("id", "episode_id"):
            if isinstance(obj.get(key), (str, int)) and not isinstance(obj.get(key), bool) and str(obj[key]):
                return str(obj[key])
    return default


def _android_build(ctx: _Ctx, path: Path, line: int, name: str, ep: Any, label: str = "") -> Trajectory:
    pre = f"{label}: " if label else ""
    if isinstance(ep, RowFormatError):
        raise ep
    if not isinstance(ep, dict):
        raise RowFormatError(path, line, f"{pre}an episode must be a JSON object, got {type(ep).__name__}")
    goal = ep.get("goal")
    if not isinstance(goal, str) or not goal.strip():
        raise RowFormatError(path, line, f"{pre}field 'goal' (the task instruction) is missing or empty")
    steps = _android_steps(ep, path, line, pre)
    if not steps:
        raise RowFormatError(path, line, f"{pre}no steps")
    befores = [_android_obs(s, _ANDROID_BEFORE, path, line, f"{pre}step {i}") for i, s in enumerate(steps)]
    afters = [_android_obs(s, _ANDROID_AFTER, path, line, f"{pre}step {i}") for i, s in enumerate(steps)]
    prov = Provenance(kind="real", source=ctx.source(path))
    turns: list[Turn] = []
    for i, step in enumerate(steps):
        action = _android_action(step, path, line, f"{pre}step {i}")
        obs = afters[i] if afters[i] is not None else (befores[i + 1] if i + 1 < len(steps) else None)
        if obs is None:
            if i + 1 < len(steps):
                raise RowFormatError(path, line, f"{pre}step {i}: no observation after the action (neither "
                                     f"its after_element_list nor step {i + 1}'s before_element_list)")
            ctx.dropped.append({"episode": f"android/{name}", "turn": i + 1, "action": action,
                                "reason": "last step has no recorded next observation"})
            continue
        turns.append(Turn(index=i + 1, action=action, observation=obs, provenance=prov))
    if not turns:
        raise RowFormatError(path, line, f"{pre}no step has a recorded next observation")
    meta: dict[str, Any] = {"format": FORMAT_LABELS["android"], "file": ctx.rel(path), "episode": name}
    if line:
        meta["line"] = line
    for key in ("task_template", "instance_id", "seed", "is_successful", "exception_info"):
        if ep.get(key) is not None:
            meta[key] = ep[key]
    return Trajectory(id=f"android/{name}", domain="android", task=goal, system_prompt=android_domain.system_prompt(),
                      initial_observation=befores[0] or "", turns=turns, reward=_reward(ep.get("is_successful")),
                      metadata=meta)


def _android_steps(ep: dict, path: Path, line: int, pre: str) -> list[dict]:
    data = ep.get("episode_data", ep)
    if not isinstance(data, dict):
        raise RowFormatError(path, line, f"{pre}'episode_data' must be an object")
    if isinstance(data.get("steps"), list):
        steps = data["steps"]
        for i, s in enumerate(steps):
            if not isinstance(s, dict):
                raise RowFormatError(path, line, f"{pre}step {i} must be an object")
        return steps
    if data is ep:
        raise RowFormatError(path, line, f"{pre}missing field 'episode_data' (or 'steps')")
    lists = {k: v for k, v in data.items() if isinstance(v, list)}
    if not lists:
        raise RowFormatError(path, line, f"{pre}'episode_data' has no per-step lists")
    n = max(len(v) for v in lists.values())
    return [{k: (v[i] if i < len(v) else None) for k, v in lists.items()} for i in range(n)]


def _android_action(step: dict, path: Path, line: int, where: str) -> str:
    raw = None
    for key in ("action", "action_output_json"):
        if step.get(key) is not None:
            raw = step[key]
            break
    if raw is None and isinstance(step.get("action_output"), str):
        raw = _action_from_output(step["action_output"])
        if raw is None:
            raise RowFormatError(path, line, f"{where}: no JSON action after 'Action:' in action_output")
    if raw is None:
        raise RowFormatError(path, line, f"{where}: missing field 'action' (or action_output_json / action_output)")
    if isinstance(raw, str):
        obj = _json_object(raw)
        if obj is None:
            raise RowFormatError(path, line, f"{where}: action {raw[:80]!r} is not a JSON object")
        raw = obj
    if not isinstance(raw, dict):
        raise RowFormatError(path, line, f"{where}: action must be an object, got {type(raw).__name__}")
    if not isinstance(raw.get("action_type"), str) or not raw["action_type"]:
        raise RowFormatError(path, line, f"{where}: action has no 'action_type'")
    return android_domain.format_action(raw)


def _action_from_output(text: str) -> dict | None:
    # M3A/T3A write "Reason: ...\nAction: {...}"; take the JSON object after the last "Action:".
    at = text.rfind("Action:")
    if at < 0:
        return None
    brace = text.find("{", at)
    if brace < 0:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(text, brace)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _android_obs(step: dict, keys: tuple[str, ...], path: Path, line: int, where: str) -> str | None:
    for key in keys:
        value = step.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            return value.rstrip("\n")
        if isinstance(value, list):
            try:
                return android_domain.render_ui_elements(value)
            except (TypeError, ValueError) as e:
                raise RowFormatError(path, line, f"{where}: '{key}': {e}") from None
        raise RowFormatError(path, line, f"{where}: '{key}' must be a list of UI elements or a string, "
                             f"got {type(value).__name__}")
    return None
