"""The web environment: Chromium in the sandbox on the local sites."""

import json
import os
import socket
import subprocess
import threading
import time

import pytest
from conftest import needs_sandbox

from lwm import domains
from lwm.domains.web import spec as domain
from lwm.domains.web.env import WebEnv, render_tree
from lwm.domains.web.sites import make_sites
from lwm.envs.base import Task
from lwm.errors import ActionFormatError, EnvironmentClosedError

needs_browser = pytest.mark.skipif(not os.path.exists("/usr/lib/chromium/chromium"),
                                   reason="Debian's chromium is required")


# -- no browser -----------------------------------------------------------------------------
def test_parse_action_accepts_browsergym_calls():
    assert domain.parse_action("click('12')") == domain.WebAction("click", {"bid": "12"})
    assert domain.parse_action("click(12)").args == {"bid": "12"}
    a = domain.parse_action("fill(bid='3', value='Zoë 🚀')")
    assert a.name == "fill" and a.args == {"bid": "3", "value": "Zoë 🚀"}
    assert domain.parse_action("select_option('7', 'Help')").args["options"] == ["Help"]
    assert domain.parse_action("  go_back()  ").name == "go_back"
    assert domain.parse_action("scroll(0, -200.5)").args == {"delta_x": 0, "delta_y": -200.5}


@pytest.mark.parametrize("bad", [
    "", "click(", "clik('1')", "click()", "click('1', 'left', 3)", "fill('1')", "goto(42)",
    "click(bid='1', bid='2')", "fill('1', value=open('x'))", "__import__('os').system('id')",
    "click('1'); click('2')", "click('a b')", "scroll('a', 0)", "select_option('1', [])",
    "fill('1', '" + "x" * 5000 + "')", "noop(True)", "x.click('1')",
])
def test_parse_action_rejects_malformed_input(bad):
    with pytest.raises(ActionFormatError):
        domain.parse_action(bad)


def test_canonical_strips_trailing_space():
    assert domain.canonical("URL: x  \nTitle: y\n\n") == "URL: x\nTitle: y"


def test_render_tree_follows_browsergym_style():
    nodes = [
        {"nodeId": "1", "role": {"value": "RootWebArea"}, "name": {"value": "T"}, "childIds": ["2"],
         "properties": [{"name": "focused", "value": {"value": True}}], "backendDOMNodeId": 1},
        {"nodeId": "2", "role": {"value": "generic"}, "name": {"value": ""}, "childIds": ["3", "4"],
         "backendDOMNodeId": 2},
        {"nodeId": "3", "role": {"value": "textbox"}, "name": {"value": "Email"}, "value": {"value": "a@b"},
         "properties": [{"name": "required", "value": {"value": True}}], "childIds": [], "backendDOMNodeId": 3},
        {"nodeId": "4", "role": {"value": "checkbox"}, "name": {"value": "Active"}, "childIds": ["5"],
         "properties": [{"name": "checked", "value": {"value": "true"}}], "backendDOMNodeId": 4},
        {"nodeId": "5", "role": {"value": "StaticText"}, "name": {"value": "Active"}, "childIds": []},
    ]
    assert render_tree(nodes, {1: "0", 2: "1", 3: "7", 4: "8"}) == (
        "[0] RootWebArea 'T', focused\n\t[7] textbox 'Email', value='a@b', required\n"
        "\t[8] checkbox 'Active', checked='true'")


def test_sites_keep_state_without_a_browser():
    shop = make_sites()["shop.test"]
    assert shop.handle("POST", "/cart/add", {}, {"product": ["2"], "quantity": ["3"]}).location == "/cart"
    assert shop.cart == {2: 3}
    resp = shop.handle("POST", "/checkout", {}, {"name": ["A"], "address": ["B"], "shipping": ["express"]})
    assert resp.location == "/orders/1" and shop.orders[0]["total"] == 3 * 899 + 999 and not shop.cart
    assert shop.handle("GET", "/nope", {}, {}).status == 404
    forum = make_sites()["forum.test"]
    forum.handle("POST", "/login", {}, {"username": ["alice"], "password": ["bad"]})
    assert forum.user == "" and forum.failed_logins == 1


def test_suite_meets_its_spec():
    core, full = domains.get("web").scripts(), domains.get("web").scripts(extended=True)
    assert len(core) >= 20 and sum(len(e.actions) for e in core) >= 100
    assert len({e.task.name for e in full}) == len(full) > len(core)
    assert sum(1 for e in core if e.task.check) >= 10
    assert all(e.task.family for e in full) and {e.task.family for e in core} >= {"random", "odd-input"}
    for ep in full:  # scripted actions parse (except the deliberately malformed ones)
        if ep.task.family not in ("random", "odd-input"):
            for a in (*ep.actions, *ep.task.setup):
                domain.parse_action(a)
    from lwm.domains.web.suite import random_scripts
    assert random_scripts(3, 2) == random_scripts(3, 2) != random_scripts(4, 2)


# -- a real browser --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def env():
    e = WebEnv()
    yield e
    e.close()


def _sandbox_pids(uid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=,stat=", "-u", str(uid)], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if line.strip() and not line.split()[1].startswith("Z")]


@needs_sandbox
@needs_browser
def test_real_shop_transitions(env):
    first = env.reset(Task("t", options={"start_url": "http://shop.test/product/1"}))
    assert first.startswith("URL: http://shop.test/product/1\nTitle: Blue Mug - Shop\n\nRootWebArea 'Blue Mug - Shop'")
    assert "[23] combobox 'Quantity', value='1'" in first and "[29] button 'Add to cart'" in first
    assert "value='2'" in env.step("select_option('23', '2')").observation
    cart = env.step("click('29')").observation
    assert cart.startswith("URL: http://shop.test/cart\nTitle: Your cart - Shop")
    assert "StaticText 'Added 2 × Blue Mug to your cart.'" in cart and "StaticText 'Total: $25.00'" in cart
    assert env.sites["shop.test"].cart == {1: 2}
    bad = env.step("click('999')")
    assert bad.info["action_error"] == 'Could not find element with bid "999"'
    assert bad.observation.split("\n")[2] == 'Error: Could not find element with bid "999"'
    assert bad.observation.split("\n", 4)[4] == cart.split("\n", 3)[3]  # page unchanged
    malformed = env.step("click(")
    assert malformed.info["action_error"].startswith("invalid action: not a function call")
    assert "Page not found" in env.step("goto('http://shop.test/nope')").observation
    assert env.step("go_back()").observation.startswith("URL: http://shop.test/cart")
    done = env.step("send_msg_to_user('ok')")
    assert done.done and done.info["message"] == "ok"


@needs_sandbox
@needs_browser
def test_snapshot_and_restore(env):
    env.reset(Task("snap", options={"start_url": "http://admin.test/users/new"}))
    env.step("fill('19', 'Zoë')")
    snap = env.snapshot()
    env.step("fill('21', 'zoe@example.com')")
    assert "Created Zoë" in env.step("click('29')").observation
    assert len(env.sites["admin.test"].users) == 4
    env.restore(snap)
    assert len(env.sites["admin.test"].users) == 3
    obs = env.step("noop(0)").observation
    assert obs.startswith("URL: http://admin.test/users/new") and "[19] textbox 'Name', value='Zoë'" in obs
    assert "[21] textbox 'Email'\n" in obs  # the later change is gone


@needs_sandbox
@needs_browser
def test_hostile_urls_and_pages_are_contained(env):
    env.reset(Task("hostile"))
    page = env._page
    for url in ("file:///etc/passwd", "javascript:alert(1)", "chrome://version"):
        r = env.step(f"goto({url!r})")
        assert "is not allowed" in r.info["action_error"] and r.observation.startswith("URL: http://shop.test/")
    r = env.step("goto('http://127.0.0.1:22')")
    assert "ERR_CONNECTION_REFUSED" in r.info["action_error"] and "This site can’t be reached" in r.observation
    assert "ERR_NAME_NOT_RESOLVED" in env.step("goto('http://evil.example/')").info["action_error"]
    # Bypassing the action checks, the router still refuses file:// …
    from playwright.sync_api import Error as PlaywrightError

    with pytest.raises(PlaywrightError, match="ERR_"):
        page.goto("file:///etc/hostname")
    # … and without the router, the browser sees the sandbox's files, not the host's …
    env._context.unroute("**/*")
    page.goto("file:///etc/hostname")
    assert page.inner_text("body").strip() == "browser"
    # … and a page's own connections (a WebSocket is not routed through the host) reach no
    # host service: the browser has its own network namespace.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(3)
    port = server.getsockname()[1]
    hits = []
    threading.Thread(target=lambda: hits.append(_accept(server)), daemon=True).start()
    page.evaluate(f"() => {{ try {{ new WebSocket('ws://127.0.0.1:{port}/'); }} catch (e) {{}} }}")
    state = page.evaluate(f"""() => fetch('http://127.0.0.1:{port}/').then(() => 'ok', e => 'blocked')""")
    time.sleep(1)
    server.close()
    assert state == "blocked" and hits in ([], [None])
    # The browser's processes run as the sandbox's uid, in their own network namespace.
    uid = env._sandbox.uid
    pids = _sandbox_pids(uid)
    assert pids and os.readlink(f"/proc/{pids[-1]}/ns/net") != os.readlink("/proc/self/ns/net")


def _accept(server):
    try:
        return server.accept()
    except OSError:
        return None


@needs_sandbox
@needs_browser
def test_close_leaves_no_process():
    e = WebEnv()
    e.reset(Task("close"))
    uid = e._sandbox.uid
    assert len(_sandbox_pids(uid)) >= 3  # bwrap, chromium and its helpers
    e.close()
    e.close()  # idempotent
    time.sleep(0.3)
    assert _sandbox_pids(uid) == []
    ps = subprocess.run(["ps", "-eo", "user=,comm="], capture_output=True, text=True).stdout
    assert not [line for line in ps.splitlines() if line.split()[0] == str(uid)]
    with pytest.raises(EnvironmentClosedError):
        e.step("noop(0)")


@needs_sandbox
@needs_browser
def test_collect_plays_the_suite(tmp_path):
    from lwm.data import collect as C
    from lwm.schema import read_rows

    res = C.collect(C.CollectConfig(domain="web", out=tmp_path, episodes=2, workers=2), show_progress=False)
    eps = domains.get("web").scripts()[:2]
    rows = list(read_rows(res.rows_path))
    assert res.trajectories == 4 and not res.failed
    assert len(rows) == sum(len(e.actions) for e in eps)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["turns_with_volatile_spans"] == 0  # the sites are deterministic
    trajs = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    rewards = {t["metadata"]["episode"]: t["reward"] for t in trajs}
    assert rewards == {"shop-browse-history": None, "shop-checkout": 1.0}
    assert rows[0].response[-1].startswith("**Environment Observation:**")


@needs_sandbox
@needs_browser
def test_changes_of_real_pages_render_back(env):
    """Mode ``change`` on a real browser: a field filled or a failed action is written as the
    header and the changed nodes, a new page whole; each renders back into the real page."""
    previous = env.reset(Task("change", options={"start_url": "http://admin.test/users/new"}))
    written = []
    for action in ("fill('19', 'Zoë')", "click('999')", "goto('http://shop.test/')"):
        observation = env.step(action).observation
        change = domain.observed_change(previous, action, observation)
        assert domain.render_change(change, previous, action) == observation
        written.append(change)
        previous = observation
    filled, failed, new_page = written
    assert filled.split("\n")[:2] == ["URL: http://admin.test/users/new", "Title: New user - Admin"]
    assert "value='Zoë'" in filled and "RootWebArea" not in filled and len(filled) < len(previous) / 3
    assert failed.split("\n")[2] == 'Error: Could not find element with bid "999"' and failed.count("\n") == 2
    assert new_page == previous and new_page.startswith("URL: http://shop.test/\n")
