"""The web domain: Chromium on local websites; BrowserGym-style actions, AXTree observations.

Action format: :data:`ACTION_FORMAT`.

Observation format (after BrowserGym's flattened accessibility tree)::

    URL: http://shop.test/cart
    Title: Your cart - Shop
    Error: <the last action's error, one line; only when it failed>

    RootWebArea 'Your cart - Shop', focused
    \t[3] link 'Shop'
    \t[4] navigation 'Main'
    \t\t[5] list ''
    …

One node per line, indented by tabs for depth: ``[bid] role 'name'`` followed by its
states and values (``focused``, ``required``, ``disabled``, ``checked='true'``,
``selected``, ``value='…'``, ``url='…'``). Nodes without an element id (text) show no
brackets. Ignored nodes, nameless generic containers and text repeating its parent's
name are left out, their children moved up.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from lwm.errors import ActionFormatError

#: The action format, for people and prompts (the agent's tool description is shorter).
ACTION_FORMAT = """\
Action format (after BrowserGym's high-level action set, ``browsergym.core.action.highlevel``):
exactly one Python-style function call, parsed with :mod:`ast` (never evaluated); arguments
are literals (strings, numbers, lists of strings), positional or by keyword:

====================================  ================================================
``click(bid)``                        click the element
``fill(bid, value)``                  clear a text field and type ``value``
``select_option(bid, options)``       choose option(s) of a ``<select>`` by value or label
``check(bid)`` / ``uncheck(bid)``     tick / untick a checkbox
``clear(bid)``, ``hover(bid)``        clear a field, move the mouse over
``focus(bid)``, ``dblclick(bid)``     focus, double-click
``press(bid, key_comb)``              press keys on the element (``Enter``, ``Control+a``)
``goto(url)``                         open a URL (``http://`` or ``https://`` only)
``scroll(delta_x, delta_y)``          scroll the page by pixels
``go_back()`` / ``go_forward()``      browser history
``noop(wait_ms=1000)``                wait (capped at 3000 ms)
``send_msg_to_user(text)``            answer the user; ends the episode
====================================  ================================================

``bid`` is the element id shown in brackets in the observation (``[12]``), given as a
string or an integer.
"""
NAME = "web"
ACTION_LANG = "python"  # BrowserGym actions are Python calls; the fence of actions in rows
MAX_ACTION_CHARS = 4096
MAX_TEXT_CHARS = 2000

#: function -> parameter names (in order) and how many are required.
SIGNATURES: dict[str, tuple[tuple[str, ...], int]] = {
    "click": (("bid", "button"), 1),
    "dblclick": (("bid",), 1),
    "fill": (("bid", "value"), 2),
    "select_option": (("bid", "options"), 2),
    "check": (("bid",), 1),
    "uncheck": (("bid",), 1),
    "clear": (("bid",), 1),
    "hover": (("bid",), 1),
    "focus": (("bid",), 1),
    "press": (("bid", "key_comb"), 2),
    "goto": (("url",), 1),
    "scroll": (("delta_x", "delta_y"), 2),
    "go_back": ((), 0),
    "go_forward": ((), 0),
    "noop": (("wait_ms",), 0),
    "send_msg_to_user": (("text",), 1),
}

SYSTEM_PROMPT = """\
You are a Web World Model: you simulate a Chromium browser exactly.

Environment: a headless Chromium browser (viewport 1280x720) showing small websites: \
http://shop.test/ (a shop: products, search, cart, checkout, orders), http://forum.test/ \
(threads, replies, log in), http://admin.test/ (users and settings forms). Pages are plain \
HTML without scripts. No other site is reachable: any other host fails to load and the \
browser shows its error page (net::ERR_NAME_NOT_RESOLVED for names, \
net::ERR_CONNECTION_REFUSED for IP addresses); goto with a scheme other than http(s) is \
refused with an error. Unknown paths on the sites show their 404 page.

Each turn you receive the agent's action: one function call, one of
  click(bid) | fill(bid, value) | select_option(bid, options) | check(bid) | uncheck(bid)
  clear(bid) | hover(bid) | focus(bid) | dblclick(bid) | press(bid, key_comb) | goto(url)
  scroll(delta_x, delta_y) | go_back() | go_forward() | noop(wait_ms=1000) | send_msg_to_user(text)
where bid is an element id shown in brackets in the page's accessibility tree.

Predict the observation after the action, in exactly this format:
URL: <current URL>
Title: <page title>
Error: <one-line error of the action>      (this line only when the action failed)
<blank line>
<the page's accessibility tree: one node per line, indented with tabs by depth, \
`[bid] role 'name'` then properties such as focused, required, checked='true', \
value='...', url='...'; text nodes as StaticText 'text' without a bid>

Element ids are given in document order and change when the page changes. A failed action \
(unknown bid, malformed call) leaves the page as it was and adds the Error line. Keep the \
sites' state (cart, orders, posts, login, users, settings) consistent across turns.

Write brief reasoning, then the observation inside <predicted_observation></predicted_observation>.\
"""


@dataclass(frozen=True)
class WebAction:
    """A parsed action: the function name and its arguments by parameter name."""

    name: str
    args: dict

    def arg(self, key: str, default=None):
        return self.args.get(key, default)


def _literal(node: ast.expr, text: str):
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ActionFormatError(NAME, text, "arguments must be literals (strings, numbers, lists)") from None
    return value


def parse_action(text: str) -> WebAction:
    """Parse one web action (see the module docstring for the format).

    Raises:
        ActionFormatError: not a single call of a known function with valid literal
            arguments, or longer than :data:`MAX_ACTION_CHARS`.
    """
    if not isinstance(text, str):
        raise ActionFormatError(NAME, repr(text), "the action must be text")
    if len(text) > MAX_ACTION_CHARS:
        raise ActionFormatError(NAME, text, f"longer than {MAX_ACTION_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        raise ActionFormatError(NAME, text, f"not a function call ({getattr(e, 'msg', e)})") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ActionFormatError(NAME, text, "expected one call such as click('12')")
    name = call.func.id
    if name not in SIGNATURES:
        raise ActionFormatError(NAME, text, f"unknown action {name!r}; expected one of {', '.join(SIGNATURES)}")
    params, required = SIGNATURES[name]
    if len(call.args) > len(params):
        raise ActionFormatError(NAME, text, f"{name}() takes at most {len(params)} arguments")
    args = {p: _literal(a, text) for p, a in zip(params, call.args)}
    for kw in call.keywords:
        if kw.arg is None or kw.arg not in params or kw.arg in args:
            raise ActionFormatError(NAME, text, f"{name}() got an unexpected or repeated argument {kw.arg!r}")
        args[kw.arg] = _literal(kw.value, text)
    missing = [p for p in params[:required] if p not in args]
    if missing:
        raise ActionFormatError(NAME, text, f"{name}() missing argument {missing[0]!r}")
    _check_types(name, args, text)
    return WebAction(name, args)


def _check_types(name: str, args: dict, text: str) -> None:
    if "bid" in args:
        bid = args["bid"]
        if isinstance(bid, bool) or not isinstance(bid, (str, int)) or not str(bid).strip():
            raise ActionFormatError(NAME, text, "bid must be a non-empty string or integer")
        args["bid"] = str(bid).strip()
        if len(args["bid"]) > 32 or not args["bid"].isalnum():
            raise ActionFormatError(NAME, text, "bid must be alphanumeric (as shown in brackets)")
    for key in ("value", "key_comb", "url", "text", "button"):
        if key in args:
            if not isinstance(args[key], str):
                raise ActionFormatError(NAME, text, f"{key} must be a string")
            if len(args[key]) > MAX_TEXT_CHARS:
                raise ActionFormatError(NAME, text, f"{key} longer than {MAX_TEXT_CHARS} characters")
    if "options" in args:
        opts = args["options"]
        if isinstance(opts, str):
            args["options"] = [opts]
        elif not (isinstance(opts, (list, tuple)) and opts and all(isinstance(o, str) for o in opts)):
            raise ActionFormatError(NAME, text, "options must be a string or a list of strings")
        else:
            args["options"] = list(opts)
    for key in ("delta_x", "delta_y", "wait_ms"):
        if key in args and (isinstance(args[key], bool) or not isinstance(args[key], (int, float))
                            or abs(args[key]) > 100_000):
            raise ActionFormatError(NAME, text, f"{key} must be a number (at most 100000 in size)")


def invalid_answer(reason: str, previous: str) -> str:
    """The browser's answer to an action :func:`parse_action` refuses: the page as it was
    (``previous``), its head's ``Error:`` line saying why.

    >>> invalid_answer("not a function call", "URL: http://a/\\nTitle: A\\n\\n[1] button 'Go'")
    "URL: http://a/\\nTitle: A\\nError: invalid action: not a function call\\n\\n[1] button 'Go'"
    """
    head, sep, tree = previous.partition("\n\n")
    lines = [line for line in head.splitlines() if line and not line.startswith("Error: ")]
    return "\n".join([*lines, f"Error: invalid action: {reason}"]) + (sep or "\n\n") + tree


def ends_episode(action: str) -> bool:
    """Whether the action ends the episode: ``send_msg_to_user(text)``, the answer to the user."""
    try:
        return parse_action(action).name == "send_msg_to_user"
    except ActionFormatError:
        return False


def canonical(observation: str) -> str:
    """Normal form for the deterministic comparator: trailing spaces of lines and trailing
    blank lines removed (the tree itself is already deterministic)."""
    return "\n".join(line.rstrip() for line in observation.strip("\n").split("\n"))


def system_prompt() -> str:
    """The world-model system prompt of the web domain."""
    return SYSTEM_PROMPT


# --- Mode ``change`` (lwm.prediction): the header, then only the nodes the action changed.

#: What a world model predicting changes (``lwm.prediction``, mode ``change``) is told.
CHANGE_INSTRUCTION = """\
Write only what the action changed. Always write the URL and Title lines (and the Error line \
when the action failed). When the action opens a new page, write its whole accessibility tree \
below the blank line, from the RootWebArea line. When the page stays the same page (the same \
elements with the same ids), write below the blank line only the nodes that changed: each \
node's [bid] line with its indentation, followed by the text lines below it up to the next \
[bid] line; every other node is drawn for you from the previous page. Nothing below the header \
means the page did not change. Earlier turns in this conversation are shown the same way.\
"""

_HEADER = re.compile(r"(url|title|error):", re.IGNORECASE)
_BID_LINE = re.compile(r"\s*\[(\w+)\]\s")


def _header_and_tree(observation: str) -> tuple[dict[str, str], list[str]]:
    """``({"URL": line, "Title": line, "Error": line}, tree lines)``: the header is the
    ``URL:``/``Title:``/``Error:`` lines at the top (any case; blank lines among them and
    the blank line after them are optional), the tree every non-blank line after them."""
    lines = [line for line in observation.replace("\r\n", "\n").split("\n") if line.strip()]
    header: dict[str, str] = {}
    for line in lines:
        m = _HEADER.match(line)
        key = m and {"url": "URL", "title": "Title", "error": "Error"}[m.group(1).lower()]
        if not key or key in header:
            break
        header[key] = line
    return header, lines[len(header):]


def _bid(line: str) -> str | None:
    m = _BID_LINE.match(line)
    return m.group(1) if m else None


def _nodes(tree: list[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """``(top, nodes)``: the lines before the first ``[bid]`` line (the RootWebArea line and
    its leading text), then each ``[bid]`` line with the text lines that follow it up to the
    next ``[bid]`` line, as ``(bid, lines)`` in document order."""
    top: list[str] = []
    nodes: list[tuple[str, list[str]]] = []
    for line in tree:
        bid = _bid(line)
        if bid is not None:
            nodes.append((bid, [line]))
        elif nodes:
            nodes[-1][1].append(line)
        else:
            top.append(line)
    return top, nodes


def _is_whole_tree(tree: list[str]) -> bool:
    """A RootWebArea line before the first node: the page written whole."""
    return any(line.lstrip().startswith("RootWebArea") for line in _nodes(tree)[0])


def _observation(header: dict[str, str], tree: list[str]) -> str:
    lines = [header[key] for key in ("URL", "Title", "Error") if key in header]
    return "\n".join(lines + ([""] if lines and tree else []) + tree)


def render_change(change: str, previous: str, action: str = "", system: str = "") -> str:
    """The full observation from a predicted change (mode ``change`` of
    :mod:`lwm.prediction`; what to write is :data:`CHANGE_INSTRUCTION`).

    The change's header lines (URL, Title, Error; any case, the blank line after them
    optional) replace the previous page's; a URL or Title line it leaves out is kept, an
    Error line is not. Below it, a tree with a ``RootWebArea`` line before its first node
    is the new page, whole; otherwise each ``[bid]`` line (indented with tabs or spaces),
    with the text lines that follow it, replaces the node of that id and its text lines in
    the previous tree (the last one wins where an id is written twice). A node whose id the
    previous page does not have is added at the end (what the model wrote is kept, not
    dropped), and text before the first ``[bid]`` line of a partial tree is ignored (no
    node to place it under). Nothing below the header: the previous tree unchanged. Windows
    line ends and blank lines are dropped. The action and the system prompt are not needed.

    >>> page = "URL: http://a.test/\\nTitle: A\\n\\nRootWebArea 'A'\\n\\t[3] checkbox 'x'"
    >>> render_change("URL: http://a.test/\\nTitle: A\\n\\n\\t[3] checkbox 'x', checked='true'", page)
    "URL: http://a.test/\\nTitle: A\\n\\nRootWebArea 'A'\\n\\t[3] checkbox 'x', checked='true'"
    """
    header, tree = _header_and_tree(change)
    previous_header, previous_tree = _header_and_tree(previous)
    header = {**{k: v for k, v in previous_header.items() if k != "Error"}, **header}
    if not _is_whole_tree(tree):
        top, nodes = _nodes(previous_tree)
        changed = dict(_nodes(tree)[1])
        merged = [changed.pop(bid) if bid in changed else lines for bid, lines in nodes]
        tree = top + [line for lines in merged + list(changed.values()) for line in lines]
    return _observation(header, tree)


def observed_change(previous: str, action: str, observation: str, system: str = "") -> str | None:
    """The change :func:`render_change` turns back into ``observation``: the header and
    the changed nodes when the page keeps the previous page's nodes (the same ids in the
    same order, the same lines above the first id), else the whole observation; ``None``
    when not even that renders back (an observation that is itself partial, such as a tree
    without its RootWebArea line under another page).

    >>> page = "URL: http://a.test/\\nTitle: A\\n\\nRootWebArea 'A'\\n\\t[3] checkbox 'x'"
    >>> observed_change(page, "check('3')", page + ", checked='true'")
    "URL: http://a.test/\\nTitle: A\\n\\n\\t[3] checkbox 'x', checked='true'"
    """
    header, tree = _header_and_tree(observation)
    target = _observation(header, tree)
    previous_top, previous_nodes = _nodes(_header_and_tree(previous)[1])
    top, nodes = _nodes(tree)
    if header and top == previous_top and [bid for bid, _ in nodes] == [bid for bid, _ in previous_nodes]:
        changed = [line for (_, lines), (_, before) in zip(nodes, previous_nodes) if lines != before for line in lines]
        change = _observation(header, changed)
        if render_change(change, previous) == target:
            return change
    return observation if render_change(observation, previous) == target else None
