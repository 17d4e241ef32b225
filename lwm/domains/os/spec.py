"""The os domain: a desktop (Ubuntu, OSWorld style) seen through its accessibility tree.

There is no real desktop environment on this machine (it needs a VM), so os trajectories
are *imported* from public agent logs (see :mod:`lwm.data.importers`).

Observation format: OSWorld's linearized accessibility tree, a tab-separated table whose
first line is the header :data:`A11Y_HEADER`::

    tag\\tname\\ttext\\tclass\\tdescription\\tposition (top-left x&y)\\tsize (w&h)

one line per visible, enabled element with a name or text (what OSWorld's
``linearize_accessibility_tree`` prints; :func:`linearize_a11y_xml` turns the raw
AT-SPI XML that OSWorld's ``DesktopEnv`` returns into this table).

Action format: :data:`ACTION_FORMAT`.
"""

from __future__ import annotations

import ast
import json
import re
import xml.etree.ElementTree as ET
from typing import Any

from lwm.errors import ActionFormatError

#: The action format, for people and prompts (the agent's tool description is shorter).
ACTION_FORMAT = """\
Action formats (the action text is stored exactly as the agent issued it):

* ``pyautogui`` action space: Python code using ``pyautogui`` (``pyautogui.click(960,
  540)``, ``pyautogui.typewrite('hi')``, ``pyautogui.hotkey('ctrl', 's')`` …), or one of
  the special words ``WAIT``, ``DONE``, ``FAIL``.
* ``computer_13`` action space: a JSON object ``{"action_type": "CLICK", "x": 960,
  "y": 540, ...}`` (``MOVE_TO``, ``CLICK``, ``MOUSE_DOWN``, ``MOUSE_UP``, ``RIGHT_CLICK``,
  ``DOUBLE_CLICK``, ``DRAG_TO``, ``SCROLL``, ``TYPING``, ``PRESS``, ``KEY_DOWN``,
  ``KEY_UP``, ``HOTKEY``, ``WAIT``, ``FAIL``, ``DONE``).
* computer-use agents: a JSON object (e.g. ``{"action": "left_click", "coordinate":
  [960, 540]}``); agents whose log carries the executed pyautogui ``command`` are stored
  as that code.
"""
NAME = "os"
NO_REAL_ENVIRONMENT = "os and android have no real environment here; these trajectories are imported logs"

SPECIAL_ACTIONS = ("WAIT", "DONE", "FAIL")
MAX_ACTION_CHARS = 65536
A11Y_HEADER = "tag\tname\ttext\tclass\tdescription\tposition (top-left x&y)\tsize (w&h)"

SYSTEM_PROMPT = """\
You are a Desktop World Model: you simulate an {os_name} desktop computer exactly, as seen \
through its accessibility tree.

Environment: a {width}x{height} screen running {os_name} with the usual desktop \
applications (file manager, terminal, Chrome, LibreOffice Writer/Calc/Impress, GIMP, VS Code, \
Thunderbird, VLC). An agent controls mouse and keyboard.

Observation: the accessibility tree of the whole screen, linearized as a tab-separated \
table. The first line is the header
{header}
followed by one line per visible, enabled element that has a name or text: its role tag \
(push-button, menu-item, text, entry, label, ...), accessible name, text content (quoted \
with "" when it contains a double quote; "" when empty), toolkit class, description, \
screen position of its top-left corner as (x, y) and size as (w, h) in pixels.

Each turn you receive the agent's action, one of:
- Python code using pyautogui (pyautogui.click(x, y), pyautogui.doubleClick(x, y), \
pyautogui.typewrite('text'), pyautogui.press('enter'), pyautogui.hotkey('ctrl', 's'), \
pyautogui.scroll(-5), time.sleep(1) ...), executed on the machine; or the words WAIT \
(nothing is done), DONE or FAIL (the agent ends the episode; the screen does not change);
- a JSON action object, e.g. {{"action_type": "CLICK", "x": 960, "y": 540}} or \
{{"action": "left_click", "coordinate": [960, 540]}}, with the same meaning.

Predict the accessibility tree exactly as it is after the action: windows that opened or \
closed, focus, text typed into fields, menus shown, scroll positions, with realistic \
names, classes and coordinates. Keep the state of the machine (open applications, files, \
documents, settings) consistent across turns.

Write brief reasoning, then the linearized accessibility tree inside \
<predicted_observation></predicted_observation>.\
"""


def system_prompt(width: int = 1920, height: int = 1080, os_name: str = "Ubuntu 22.04") -> str:
    """The world-model system prompt for a desktop of this size."""
    return SYSTEM_PROMPT.format(width=width, height=height, os_name=os_name, header=A11Y_HEADER)


def parse_action(text: str) -> str | dict[str, Any]:
    """Check an os action.

    Returns:
        the JSON object for a ``computer_13`` / computer-use action, else the text itself
        (pyautogui code, or ``WAIT`` / ``DONE`` / ``FAIL``).

    Raises:
        ActionFormatError: empty, too long, a JSON value that is not an object, or code
            that is not valid Python.
    """
    if not isinstance(text, str) or not text.strip():
        raise ActionFormatError(NAME, str(text), "empty action")
    if len(text) > MAX_ACTION_CHARS:
        raise ActionFormatError(NAME, text, f"longer than {MAX_ACTION_CHARS} characters")
    stripped = text.strip()
    if stripped in SPECIAL_ACTIONS:
        return stripped
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as e:
            raise ActionFormatError(NAME, text, f"not valid JSON ({e.msg})") from None
        if not isinstance(obj, dict) or not obj:
            raise ActionFormatError(NAME, text, "expected a non-empty JSON object")
        return obj
    try:
        ast.parse(text)
    except (SyntaxError, ValueError) as e:
        raise ActionFormatError(NAME, text, f"not valid Python ({getattr(e, 'msg', e)})") from None
    return text


def ends_episode(action: str) -> bool:
    """Whether the action ends the episode: ``DONE`` or ``FAIL`` (either action space)."""
    try:
        parsed = parse_action(action)
    except ActionFormatError:
        return False
    if isinstance(parsed, dict):
        parsed = str(parsed.get("action_type", ""))
    return parsed in ("DONE", "FAIL")


def canonical(observation: str) -> str:
    """Normal form for the deterministic comparator: trailing spaces of lines and trailing
    blank lines removed (tabs are kept: they separate empty columns; the table's row order
    is the tree's document order)."""
    return "\n".join(line.rstrip(" \r") for line in observation.strip("\n").split("\n"))


# -- raw AT-SPI XML → linearized table (after OSWorld's filter_nodes / linearize) ---------

_KEEP_TAGS = {
    "alert", "canvas", "check-box", "combo-box", "entry", "icon", "image", "paragraph",
    "scroll-bar", "section", "slider", "static", "table-cell", "terminal", "text",
    "netuiribbontab", "start", "trayclockwclass", "traydummysearchcontrol", "uiimage",
    "uiproperty", "uiribboncommandbar",
}
_KEEP_SUFFIXES = ("item", "button", "heading", "label", "scrollbar", "searchbox", "textbox",
                  "link", "tabelement", "textfield", "textarea", "menu")
_PAIR = re.compile(r"^\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)$")


def _ns_attr(node: ET.Element, kind: str, name: str) -> str | None:
    # OSWorld puts attributes in namespaces like https://accessibility.ubuntu.example.org/ns/state
    # (and the windows variant); match on the namespace's last path part and the local name.
    suffix = f"/ns/{kind}}}{name}"
    for key, value in node.attrib.items():
        if key.endswith(suffix):
            return value
    return None


def _pair(text: str | None) -> tuple[float, float] | None:
    m = _PAIR.match(text.strip()) if text else None
    return (float(m.group(1)), float(m.group(2))) if m else None


def _keep(node: ET.Element) -> bool:
    tag = node.tag.rsplit("}", 1)[-1]
    if not (tag.startswith("document") or tag.endswith(_KEEP_SUFFIXES) or tag in _KEEP_TAGS):
        return False
    if _ns_attr(node, "state", "showing") != "true" or _ns_attr(node, "state", "visible") != "true":
        return False
    if not any(_ns_attr(node, "state", s) == "true" for s in ("enabled", "editable", "expandable", "checkable")):
        return False
    if not (node.get("name") or _text(node)):
        return False
    pos, size = _pair(_ns_attr(node, "component", "screencoord")), _pair(_ns_attr(node, "component", "size"))
    return bool(pos and size and pos[0] >= 0 and pos[1] >= 0 and size[0] > 0 and size[1] > 0)


def _text(node: ET.Element) -> str:
    # Whitespace between child elements (pretty-printed XML) is not the node's text.
    return node.text if node.text and node.text.strip() else ""


def _quote(text: str) -> str:
    return text if '"' not in text else '"{}"'.format(text.replace('"', '""'))


def linearize_a11y_xml(xml_text: str) -> str:
    """OSWorld's linearized accessibility table from the raw AT-SPI XML.

    Keeps the nodes OSWorld's ``filter_nodes`` keeps on Ubuntu (interactive or textual
    roles; showing and visible; enabled, editable, expandable or checkable; with a name or
    text; on screen with a positive size), in document order, and prints them under
    :data:`A11Y_HEADER` as ``linearize_accessibility_tree`` does.

    Raises:
        xml.etree.ElementTree.ParseError: the text is not well-formed XML.
    """
    root = ET.fromstring(xml_text)
    lines = [A11Y_HEADER]
    for node in root.iter():
        if not _keep(node):
            continue
        value = _ns_attr(node, "value", "value")
        cls = _ns_attr(node, "attributes", "class") or _ns_attr(node, "class", "class") or ""
        if _text(node):
            text = _quote(node.text)
        elif cls.endswith("EditWrapper") and value:
            text = _quote(value)
        else:
            text = '""'
        lines.append("\t".join([
            node.tag.rsplit("}", 1)[-1],
            node.get("name", ""),
            text,
            cls,
            _ns_attr(node, "attributes", "description") or "",
            _ns_attr(node, "component", "screencoord") or "",
            _ns_attr(node, "component", "size") or "",
        ]))
    return "\n".join(lines)


def is_a11y_xml(text: str) -> bool:
    """Whether an observation string is raw XML (to linearize) rather than a table."""
    return text.lstrip().startswith("<")
