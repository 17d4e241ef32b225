"""The android domain: an Android phone (AndroidWorld style) seen as a list of UI elements.

There is no emulator on this machine, so android trajectories are *imported* from public
agent logs (see :mod:`lwm.data.importers`).

Action format: :data:`ACTION_FORMAT`.

Observation format (:func:`render_ui_elements`), deterministic::

    UI elements (3):
    [0] TextView text="Alarm" desc="Alarm" id=com.google.android.deskclock:id/tab_menu_alarm clickable selected bounds=[0,2206][270,2337]
    [1] ImageButton desc="Add alarm" clickable bounds=[474,1917][606,2049]
    [2] EditText hint="Label" clickable editable focused bounds=[0,300][1080,400]

One line per element in the log's order, numbered from 0 (so ``index`` in actions refers
to the line with that number). Fields, each only when present and non-empty, in this
order: the class name after its last dot; ``text``, ``desc`` (content description),
``hint``, ``tooltip`` as JSON strings; ``id=`` the resource name; flags in the fixed order
``clickable long-clickable editable scrollable checkable checked selected focused
disabled invisible`` (``disabled``/``invisible`` when ``is_enabled``/``is_visible`` is
false); ``bounds=[left,top][right,bottom]`` in pixels.
"""

from __future__ import annotations

import json
from typing import Any

from lwm.errors import ActionFormatError

#: The action format, for people and prompts (the agent's tool description is shorter).
ACTION_FORMAT = """\
Action format (AndroidWorld's ``JSONAction``): a JSON object with ``action_type`` and its
arguments; ``index`` refers to the numbered UI element of the current screen::

{"action_type": "click", "index": 3}            also with "x", "y" instead of "index"
    {"action_type": "double_tap", "index": 3}
    {"action_type": "long_press", "index": 3}
    {"action_type": "input_text", "text": "hello", "index": 5}   types into element 5
    {"action_type": "keyboard_enter"}
    {"action_type": "scroll", "direction": "down"}   optional "index": scroll inside it
    {"action_type": "swipe", "direction": "left"}
    {"action_type": "navigate_home"}  /  {"action_type": "navigate_back"}
    {"action_type": "open_app", "app_name": "Clock"}
    {"action_type": "wait"}
    {"action_type": "answer", "text": "..."}          answers the user; screen unchanged
    {"action_type": "status", "goal_status": "complete"}   or "infeasible"; ends the episode

The canonical action text (:func:`format_action`) is compact JSON with ``action_type``
first, the other keys in the order given, ``null`` values dropped.
"""
NAME = "android"
NO_REAL_ENVIRONMENT = "os and android have no real environment here; these trajectories are imported logs"

ACTION_TYPES = (
    "click", "double_tap", "long_press", "input_text", "keyboard_enter", "scroll", "swipe",
    "navigate_home", "navigate_back", "open_app", "wait", "answer", "status", "unknown",
)

SYSTEM_PROMPT = """\
You are an Android World Model: you simulate an Android phone exactly, as seen through \
the list of UI elements on its screen.

Environment: {device}, screen {width}x{height} pixels, Android {version}, with the usual \
apps (Settings, Clock, Contacts, Messages, Chrome, Files, Calendar, Camera, Markor, \
Simple Gallery, Audio Recorder, Expense and recipe apps ...). An agent operates the phone.

Observation: the UI elements of the current screen, one per line, numbered from 0:
[index] Class text="..." desc="..." hint="..." tooltip="..." id=resource-name flags \
bounds=[left,top][right,bottom]
Fields are shown only when present; flags are among clickable, long-clickable, editable, \
scrollable, checkable, checked, selected, focused, disabled, invisible. The first line is \
"UI elements (N):".

Each turn you receive the agent's action, a JSON object with "action_type":
click / double_tap / long_press {{"index": i}} (or "x", "y"); input_text {{"text", "index"}} \
(focuses element i and types the text); keyboard_enter; scroll {{"direction": up|down|left|right, \
optional "index"}} (moves the content, so "down" reveals what is below); swipe {{"direction"}}; \
navigate_home; navigate_back; open_app {{"app_name"}}; wait; answer {{"text"}} (the screen \
does not change); status {{"goal_status"}} (the agent ends the episode).

Predict the UI element list exactly as it is after the action: the screen that opens, \
dialogs, keyboard focus, typed text in fields, toggled switches, scrolled lists, with \
realistic classes, resource ids and bounds, numbered again from 0. Keep the phone's state \
(apps, data, settings) consistent across turns.

Write brief reasoning, then the UI element list inside \
<predicted_observation></predicted_observation>.\
"""


def system_prompt(
    width: int = 1080, height: int = 2400, device: str = "a Pixel 6 emulator", version: str = "13"
) -> str:
    """The world-model system prompt for a phone of this size."""
    return SYSTEM_PROMPT.format(width=width, height=height, device=device, version=version)


DIRECTIONS = ("up", "down", "left", "right")
_NEEDS = {
    "input_text": ("text", str),
    "open_app": ("app_name", str),
    "answer": ("text", str),
    "status": ("goal_status", str),
    "swipe": ("direction", str),
    "scroll": ("direction", str),
}


def parse_action(text: str | dict) -> dict[str, Any]:
    """Parse and check an android action (AndroidWorld ``JSONAction``).

    Raises:
        ActionFormatError: not a JSON object, unknown ``action_type``, a missing or
            mistyped argument, a negative or non-integer ``index``, a bad ``direction``.
    """
    shown = text if isinstance(text, str) else json.dumps(text)
    if isinstance(text, str):
        try:
            text = json.loads(text)
        except json.JSONDecodeError as e:
            raise ActionFormatError(NAME, shown, f"not JSON ({e.msg})") from None
    if not isinstance(text, dict):
        raise ActionFormatError(NAME, shown, "expected a JSON object with 'action_type'")
    kind = text.get("action_type")
    if kind not in ACTION_TYPES:
        raise ActionFormatError(NAME, shown, f"unknown action_type {kind!r}; one of {', '.join(ACTION_TYPES)}")
    if kind in _NEEDS:
        key, typ = _NEEDS[kind]
        if not isinstance(text.get(key), typ):
            raise ActionFormatError(NAME, shown, f"{kind} needs a string {key!r}")
    if kind in ("scroll", "swipe") and text["direction"] not in DIRECTIONS:
        raise ActionFormatError(NAME, shown, f"direction must be one of {', '.join(DIRECTIONS)}")
    index = text.get("index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        raise ActionFormatError(NAME, shown, "'index' must be an integer >= 0")
    if kind in ("click", "double_tap", "long_press") and index is None and not (
        isinstance(text.get("x"), (int, float)) and isinstance(text.get("y"), (int, float))
    ):
        raise ActionFormatError(NAME, shown, f"{kind} needs 'index' or 'x' and 'y'")
    return {k: v for k, v in text.items() if v is not None}


def ends_episode(action: str) -> bool:
    """Whether the action ends the episode: a ``status`` action (``complete`` or ``infeasible``)."""
    try:
        return parse_action(action)["action_type"] == "status"
    except ActionFormatError:
        return False


def canonical(observation: str) -> str:
    """Normal form for the deterministic comparator: trailing spaces of lines and trailing
    blank lines removed (the element list is already deterministic)."""
    return "\n".join(line.rstrip() for line in observation.strip("\n").split("\n"))


def format_action(action: dict[str, Any]) -> str:
    """Canonical action text: compact JSON, ``action_type`` first, ``null`` values dropped."""
    items = {"action_type": action.get("action_type")}
    items.update((k, v) for k, v in action.items() if k != "action_type" and v is not None)
    return json.dumps(items, ensure_ascii=False, separators=(", ", ": "))


# Field aliases: AndroidWorld's UIElement (dataclasses.asdict) first, then uiautomator
# dump / accessibility-node spellings.
_ALIASES = {
    "text": ("text",),
    "desc": ("content_description", "content-desc", "contentDescription"),
    "hint": ("hint_text", "hint", "hintText"),
    "tooltip": ("tooltip", "tooltip_text", "tooltipText"),
    "class": ("class_name", "class", "className"),
    "id": ("resource_name", "resource-id", "resource_id", "viewIdResourceName"),
    "bounds": ("bbox_pixels", "bounds", "bbox", "boundsInScreen"),
}
_FLAGS = (
    ("clickable", ("is_clickable", "clickable")),
    ("long-clickable", ("is_long_clickable", "long-clickable", "long_clickable", "longClickable")),
    ("editable", ("is_editable", "editable")),
    ("scrollable", ("is_scrollable", "scrollable")),
    ("checkable", ("is_checkable", "checkable")),
    ("checked", ("is_checked", "checked")),
    ("selected", ("is_selected", "selected")),
    ("focused", ("is_focused", "focused")),
)
_NEGATIVE_FLAGS = (
    ("disabled", ("is_enabled", "enabled")),
    ("invisible", ("is_visible", "visible", "displayed")),
)


def _get(el: dict, names: tuple[str, ...]) -> Any:
    for n in names:
        if n in el and el[n] is not None:
            return el[n]
    return None


def _truth(value: Any) -> bool | None:
    if value is None:
        return None
    if isinstance(value, str):
        return {"true": True, "false": False}.get(value.strip().lower())
    return bool(value)


def _num(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v)


def _bounds(b: Any) -> str | None:
    if b is None or b == "":
        return None
    if isinstance(b, str):
        return b.strip() or None
    if isinstance(b, dict):
        keys = ("x_min", "y_min", "x_max", "y_max")
        if all(k in b for k in keys):
            x1, y1, x2, y2 = (b[k] for k in keys)
        elif all(k in b for k in ("left", "top", "right", "bottom")):
            x1, y1, x2, y2 = b["left"], b["top"], b["right"], b["bottom"]
        else:
            raise ValueError(f"unknown bounds object {json.dumps(b)[:80]}")
    elif isinstance(b, (list, tuple)) and len(b) == 4:
        x1, y1, x2, y2 = b
    else:
        raise ValueError(f"unknown bounds {json.dumps(b)[:80]}")
    return f"[{_num(x1)},{_num(y1)}][{_num(x2)},{_num(y2)}]"


def render_ui_element(el: dict[str, Any], index: int) -> str:
    """One line of :func:`render_ui_elements`.

    Raises:
        TypeError: the element is not an object.
        ValueError: its bounds cannot be read.
    """
    if not isinstance(el, dict):
        raise TypeError(f"UI element {index} is {type(el).__name__}, not an object")
    parts = [f"[{index}]"]
    cls = _get(el, _ALIASES["class"])
    if cls:
        parts.append(str(cls).rsplit(".", 1)[-1])
    for label in ("text", "desc", "hint", "tooltip"):
        value = _get(el, _ALIASES[label])
        if value not in (None, ""):
            parts.append(f"{label}={json.dumps(str(value), ensure_ascii=False)}")
    rid = _get(el, _ALIASES["id"])
    if rid:
        parts.append(f"id={rid}")
    parts += [flag for flag, names in _FLAGS if _truth(_get(el, names))]
    parts += [flag for flag, names in _NEGATIVE_FLAGS if _truth(_get(el, names)) is False]
    bounds = _bounds(_get(el, _ALIASES["bounds"]))
    if bounds:
        parts.append(f"bounds={bounds}")
    return " ".join(parts)


def render_ui_elements(elements: list[dict[str, Any]]) -> str:
    """The deterministic text observation of a screen (format in the module docstring).

    Raises:
        TypeError: an element is not an object.
        ValueError: an element has unreadable bounds.
    """
    lines = [f"UI elements ({len(elements)}):"]
    lines += [render_ui_element(el, i) for i, el in enumerate(elements)]
    return "\n".join(lines)
