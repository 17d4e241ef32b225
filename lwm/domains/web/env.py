"""A real web browser: Chromium (inside the bubblewrap sandbox) on lwm's local websites.

Playwright drives a Chromium that runs inside a :class:`~lwm.envs.sandbox.Sandbox`
(see :mod:`lwm.domains.web.browser`): no network, no host files, limits, killed on close. The
sandbox has no network, so the websites are served by request interception: every
request the browser makes comes back to the host as a Playwright route, and is answered
from this episode's site objects (:mod:`lwm.domains.web.sites`) or refused. Only bounded
data crosses: HTML going in, DevTools JSON coming out.

Element ids follow BrowserGym: after every load and action a script numbers all elements
in document order (attribute ``data-bid``), so the same page always gets the same ids.
The observation is the accessibility tree with those ids (format in :mod:`lwm.domains.web.spec`).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lwm.domains.web import browser
from lwm.domains.web import spec as domain
from lwm.domains.web.sites import Site, make_sites
from lwm.envs.base import EnvironmentBase, StepResult, Task
from lwm.envs.sandbox import Sandbox, SandboxLimits
from lwm.errors import ActionFormatError, EnvironmentClosedError, SandboxError

DEFAULT_START_URL = "http://shop.test/"
MAX_POST_BYTES = 64 << 10
#: Roles shown only through their children when they have no name (BrowserGym skips them too).
_TRANSPARENT = {"generic", "none", "presentation", "LineBreak", "InlineTextBox", "ListMarker"}
_VALUE_ROLES = {"textbox", "searchbox", "combobox", "spinbutton", "slider"}
_BOOL_PROPS = ("focused", "required", "disabled", "readonly", "selected", "multiselectable")

# Number every element in document order (BrowserGym's "bid"); returns how many.
_MARK_JS = """() => { let i = 0;
  for (const el of document.querySelectorAll('*')) el.setAttribute('data-bid', String(i++));
  return i; }"""
# Form field values by bid, and their restoration (snapshots).
_FIELDS_JS = """() => Array.from(document.querySelectorAll('input, textarea, select')).map(el =>
  [el.getAttribute('data-bid'), el.type === 'checkbox' || el.type === 'radio' ? !!el.checked :
   el.tagName === 'SELECT' ? el.selectedIndex : el.value])"""
# Whether a <select> has all the options (by value or label); null for other elements.
_HAS_OPTION_JS = """(el, wanted) => el.tagName !== 'SELECT' ? null : wanted.every(w =>
  Array.from(el.options).some(o => o.value === w || o.label === w))"""
_RESTORE_FIELDS_JS = """(fields) => { for (const [bid, v] of fields) {
  const el = document.querySelector(`[data-bid="${bid}"]`); if (!el) continue;
  if (typeof v === 'boolean') el.checked = v; else if (el.tagName === 'SELECT') el.selectedIndex = v;
  else el.value = v; } }"""


class WebEnv(EnvironmentBase):
    """A real browser environment on the local sites (shop, forum, admin).

    Args:
        start_url: page opened by :meth:`reset` (a task's ``options["start_url"]`` wins).
        action_timeout_ms: Playwright's limit for one element action (click, fill …).
        navigation_timeout_ms: limit for a page load.
        max_tree_chars: the tree is cut to this many characters (a ``… (truncated)`` line says so).
        viewport: browser window size in pixels ``(width, height)``.
        limits: the browser sandbox's limits.

    Example:
        >>> env = WebEnv()  # doctest: +SKIP
        >>> print(env.reset(Task("demo")).splitlines()[0])  # doctest: +SKIP
        URL: http://shop.test/
    """

    domain = domain.NAME

    def __init__(self, *, start_url: str = DEFAULT_START_URL, action_timeout_ms: int = 5000,
                 navigation_timeout_ms: int = 10_000, max_tree_chars: int = 24_000,
                 viewport: tuple[int, int] = (1280, 720), limits: SandboxLimits | None = None) -> None:
        self.start_url = start_url
        self.action_timeout_ms = action_timeout_ms
        self.navigation_timeout_ms = navigation_timeout_ms
        self.max_tree_chars = max_tree_chars
        self.viewport = viewport
        self.limits = limits or browser.BROWSER_LIMITS
        self.sites: dict[str, Site] = {}
        self.task: Task | None = None
        self._sandbox: Sandbox | None = None
        self._pw = self._browser = self._context = self._page = self._cdp = None

    def system_prompt(self) -> str:
        return domain.system_prompt()

    # -- lifecycle -------------------------------------------------------------------
    def reset(self, task: Task | None = None) -> str:
        """Start a fresh browser in a fresh sandbox with fresh sites; run the task's setup
        actions (not recorded); open the start page and return its observation.

        Task options: ``start_url``. ``task.setup``: web actions played first.

        Raises:
            SandboxError: the browser could not start, or a setup action failed.
        """
        from playwright.sync_api import Error as PlaywrightError

        task = task or Task("empty")
        self.close()
        self.task = task
        self.sites = make_sites()
        try:
            self._sandbox, launcher = browser.prepare(self.limits)
            self._pw = _acquire_playwright()
            self._browser = self._pw.chromium.launch(executable_path=str(launcher), headless=True, timeout=60_000)
            w, h = self.viewport
            self._context = self._browser.new_context(viewport={"width": w, "height": h}, service_workers="block",
                                                      locale="en-US", timezone_id="UTC")
            self._context.route("**/*", self._serve)
            self._page = self._context.new_page()
            self._page.set_default_timeout(self.action_timeout_ms)
            self._page.set_default_navigation_timeout(self.navigation_timeout_ms)
            self._cdp = self._context.new_cdp_session(self._page)
            self._page.goto(str(task.options.get("start_url", self.start_url)))
        except PlaywrightError as e:
            self.close()
            raise SandboxError(f"the browser failed to start: {_first_line(e)}") from None
        for action in task.setup:
            result = self.step(action)
            if "action_error" in result.info:
                raise SandboxError(f"setup action {action!r} failed: {result.info['action_error']}")
        return self._observe()

    def step(self, action: str) -> StepResult:
        """Apply one BrowserGym-style action and return the page's observation.

        A malformed action or a failed one (unknown bid, timeout, blocked URL) leaves the
        page as it is and the observation carries an ``Error:`` line (``info["action_error"]``).
        ``send_msg_to_user`` ends the episode (``terminated=True``, ``info["message"]``).

        Raises:
            EnvironmentClosedError: no episode is running.
            SandboxError: the browser died.
        """
        if self._page is None:
            raise EnvironmentClosedError("call reset() before step()")
        t0 = time.monotonic()
        info: dict[str, Any] = {}
        try:
            act = domain.parse_action(action)
        except ActionFormatError as e:
            info["action_error"] = f"invalid action: {e.reason}"
            return StepResult(self._observe(info["action_error"]), info=info)
        error = self._execute(act)
        if error:
            info["action_error"] = error
        done = act.name == "send_msg_to_user"
        if done:
            info["message"] = act.arg("text")
        obs = self._observe(error)
        info["seconds"] = round(time.monotonic() - t0, 3)
        return StepResult(obs, terminated=done, info=info)

    def close(self) -> None:
        """Close the browser and kill everything left in its sandbox; delete the sandbox.
        Safe to call twice."""
        for obj in (self._context, self._browser):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001 - a dead browser must not stop the cleanup
                    pass
        if self._pw is not None:
            _release_playwright()
        self._pw = self._browser = self._context = self._page = self._cdp = None
        if self._sandbox is not None:
            browser.kill_uid(self._sandbox.uid)
            self._sandbox.close()
            self._sandbox = None

    # -- snapshots -----------------------------------------------------------------------
    def snapshot(self) -> dict:
        """The sites' state (a deep copy), the current URL and the form fields' values."""
        if self._page is None:
            raise EnvironmentClosedError("call reset() before snapshot()")
        self._page.evaluate(_MARK_JS)
        return {"sites": copy.deepcopy(self.sites), "url": self._page.url,
                "fields": self._page.evaluate(_FIELDS_JS)}

    def restore(self, snapshot: dict) -> None:
        """Put the sites back, reload the snapshot's URL (a GET) and refill the form fields.
        The browser's history is not restored."""
        if self._page is None:
            raise EnvironmentClosedError("call reset() before restore()")
        self.sites = copy.deepcopy(snapshot["sites"])
        self._page.goto(snapshot["url"])
        self._page.evaluate(_MARK_JS)
        self._page.evaluate(_RESTORE_FIELDS_JS, snapshot["fields"])

    # -- serving the sites -------------------------------------------------------------------
    def _serve(self, route, request) -> None:
        """Answer one browser request from the sites, or refuse it like an offline network."""
        url = urlsplit(request.url)
        host = (url.hostname or "").lower()
        site = self.sites.get(host) if url.scheme in ("http", "https") and url.port in (None, 80, 443) else None
        if site is None:
            route.abort("connectionrefused" if _is_address(host) or host == "localhost" or host in self.sites
                        else "namenotresolved")
            return
        form: dict[str, list[str]] = {}
        if request.method == "POST":
            body = (request.post_data_buffer or b"")[:MAX_POST_BYTES]
            form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        elif request.method != "GET":
            route.fulfill(status=405, content_type="text/plain", body="Method Not Allowed")
            return
        resp = site.handle(request.method, url.path or "/", parse_qs(url.query, keep_blank_values=True), form)
        if resp.location:
            # Chromium does not send the request of a fulfilled redirect back to the route
            # (microsoft/playwright#33882) and the sandbox has no network: the redirect is
            # followed here, and the page's address replaced with the target's (as after a
            # real 303), by a one-line script.
            target = urlsplit(resp.location)
            resp = site.handle("GET", target.path or "/", parse_qs(target.query, keep_blank_values=True), {})
            script = f"<script>history.replaceState(null, '', {json.dumps(target.path or '/')});</script>"
            resp.body = resp.body.replace("</body>", script + "</body>", 1)
        route.fulfill(status=resp.status, content_type="text/html; charset=utf-8", body=resp.body)

    # -- actions ------------------------------------------------------------------------------
    def _execute(self, act: domain.WebAction) -> str:
        """Run ``act`` on the page; return its error (one line) or ``""``."""
        from playwright.sync_api import Error as PlaywrightError

        page = self._page
        try:
            if act.name == "goto":
                url = act.arg("url")
                if urlsplit(url).scheme.lower() not in ("http", "https"):
                    return f"navigation to {url!r} is not allowed: only http:// and https:// URLs"
                page.goto(url)
            elif act.name == "go_back":
                page.go_back()
            elif act.name == "go_forward":
                page.go_forward()
            elif act.name == "scroll":
                page.mouse.wheel(act.arg("delta_x"), act.arg("delta_y"))
            elif act.name == "noop":
                page.wait_for_timeout(max(0.0, min(float(act.arg("wait_ms", 1000)), 3000.0)))
            elif act.name == "send_msg_to_user":
                pass
            else:
                bid = act.arg("bid")
                el = page.locator(f'[data-bid="{bid}"]')
                if el.count() == 0:
                    return f'Could not find element with bid "{bid}"'
                # Fail fast (and the same way under any load) where Playwright would wait
                # for the whole timeout: hidden elements, options a <select> does not have.
                if act.name not in ("focus", "press") and not el.is_visible():
                    return f'Element with bid "{bid}" is not visible'
                if act.name == "select_option" and el.evaluate(_HAS_OPTION_JS, act.arg("options")) is False:
                    return f'Could not find option {act.arg("options")!r} in element with bid "{bid}"'
                if act.name == "click":
                    button = act.arg("button", "left")
                    if button not in ("left", "middle", "right"):
                        return f"invalid button {button!r}: expected left, middle or right"
                    el.click(button=button)
                elif act.name == "dblclick":
                    el.dblclick()
                elif act.name == "fill":
                    el.fill(act.arg("value"))
                elif act.name == "select_option":
                    el.select_option(act.arg("options"))
                elif act.name in ("check", "uncheck", "clear", "hover", "focus"):
                    getattr(el, act.name)()
                elif act.name == "press":
                    el.press(act.arg("key_comb"))
            page.wait_for_load_state("load", timeout=self.navigation_timeout_ms)
        except PlaywrightError as e:
            if not self._browser or not self._browser.is_connected():
                raise SandboxError("the browser has died") from None
            return _first_line(e)
        return ""

    # -- observations ---------------------------------------------------------------------------
    def _observe(self, error: str = "") -> str:
        """The observation: URL, title, error line, blank line, accessibility tree."""
        from playwright.sync_api import Error as PlaywrightError

        page = self._page
        for attempt in range(8):  # a navigation (e.g. to an error page) may still be settling
            try:
                page.wait_for_load_state("load", timeout=self.navigation_timeout_ms)
                marked = page.evaluate(_MARK_JS)
                title = page.title()
                snap = self._cdp.send("DOMSnapshot.captureSnapshot", {"computedStyles": []})
                ax = self._cdp.send("Accessibility.getFullAXTree")
                bids = _bids(snap)
                # The marks must be on the document the tree shows (not one just replaced).
                nodes = ax.get("nodes") or [{}]
                docs = snap.get("documents") or [{}]
                doc_id = (docs[0].get("nodes", {}).get("backendNodeId") or [None])[0]
                if len(bids) == marked and nodes[0].get("backendDOMNodeId") == doc_id:
                    break
            except PlaywrightError as e:
                if attempt == 7 or not self._browser.is_connected():
                    raise SandboxError(f"the browser did not answer: {_first_line(e)}") from None
            page.wait_for_timeout(100)
        tree = render_tree(ax.get("nodes", []), bids)
        if len(tree) > self.max_tree_chars:
            tree = tree[: self.max_tree_chars].rsplit("\n", 1)[0] + "\n… (truncated)"
        head = [f"URL: {page.url}", f"Title: {title}"]
        if error:
            head.append(f"Error: {error}")
        return "\n".join(head) + "\n\n" + tree


# Playwright's sync API allows one driver per thread: the environments of a thread share
# it, and the last one to close stops it. An environment is used from one thread only.
_local = threading.local()


def _acquire_playwright():
    from playwright.sync_api import sync_playwright

    if getattr(_local, "driver", None) is None:
        _local.driver, _local.users = sync_playwright().start(), 0
    _local.users += 1
    return _local.driver


def _release_playwright() -> None:
    _local.users -= 1
    if _local.users <= 0 and _local.driver is not None:
        driver, _local.driver = _local.driver, None
        try:
            driver.stop()
        except Exception:  # noqa: BLE001 - already gone
            pass


def _first_line(e: Exception) -> str:
    msg = getattr(e, "message", None) or str(e)
    line = msg.strip().split("\n", 1)[0]
    return line[:300]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _bids(snapshot: dict) -> dict[int, str]:
    """``{backend DOM node id: data-bid}`` from a ``DOMSnapshot.captureSnapshot`` result."""
    strings = snapshot.get("strings", [])
    out: dict[int, str] = {}
    for doc in snapshot.get("documents", [])[:1]:
        nodes = doc.get("nodes", {})
        for backend, attrs in zip(nodes.get("backendNodeId", []), nodes.get("attributes", [])):
            for k, v in zip(attrs[::2], attrs[1::2]):
                if strings[k] == "data-bid":
                    out[backend] = strings[v]
    return out


def render_tree(nodes: list[dict], bids: dict[int, str]) -> str:
    """Flatten a CDP ``Accessibility.getFullAXTree`` node list into BrowserGym-style text.

    One line per shown node, tab-indented by depth: ``[bid] role 'name'`` then its
    properties. Ignored nodes, nameless generic containers, inline text boxes and text
    repeating its parent's name are not shown (their children are).
    """
    by_id = {n["nodeId"]: n for n in nodes}
    lines: list[str] = []

    def value(n: dict, key: str) -> Any:
        return (n.get(key) or {}).get("value", "")

    def visit(node_id: str, depth: int, parent_name: str) -> None:
        n = by_id.get(node_id)
        if n is None:
            return
        role, name = str(value(n, "role")), str(value(n, "name")).strip()
        shown = not n.get("ignored") and not (role in _TRANSPARENT and not name) and role not in (
            "InlineTextBox", "ListMarker") and not (role == "StaticText" and (not name or name == parent_name))
        if shown:
            text = f"{role} {_quote(name)}"
            bid = bids.get(n.get("backendDOMNodeId", -1))
            if bid is not None and role != "StaticText":
                text = f"[{bid}] {text}"
            props = []
            if role in _VALUE_ROLES and value(n, "value") not in ("", None):
                props.append(f"value={_quote(str(value(n, 'value')))}")
            for p in n.get("properties", []):
                pname, pval = p.get("name"), (p.get("value") or {}).get("value")
                if pname in _BOOL_PROPS and pval is True:
                    props.append(pname)
                elif pname in ("checked", "pressed") and pval not in (None, "false", False):
                    props.append(f"{pname}={_quote(str(pval).lower())}")
                elif pname == "expanded":
                    props.append(f"expanded={pval}")
                elif pname == "url" and role == "link" and pval:
                    props.append(f"url={_quote(str(pval))}")
            lines.append("\t" * depth + ", ".join([text, *props]))
        for child in n.get("childIds", []):
            visit(child, depth + 1 if shown else depth, name if shown else parent_name)

    if nodes:
        visit(nodes[0]["nodeId"], 0, "")
    return "\n".join(lines)


def _quote(text: str) -> str:
    # Python's repr of a str, as BrowserGym prints names and values.
    return repr(text)
