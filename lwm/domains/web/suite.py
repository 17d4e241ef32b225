"""The bundled web suite: scripted browser episodes on the local sites, plus random ones.

Families (one per site area):

``shop-browse``     links, history (go_back / go_forward), scrolling
``shop-cart``       adding to and updating the cart (select, number fields)
``shop-checkout``   the checkout form: text, textarea, select, checkbox, required fields
``shop-search``     search forms, empty results, unicode queries
``navigation``      404 pages, blocked hosts, refused schemes, ``file://``
``forum-login``     logging in (right and wrong password), logging out
``forum-post``      replies and new threads (logged in and not)
``admin-users``     the user table and the user forms (select, checkbox, validation)
``admin-settings``  the settings form
``odd-input``       malformed calls, unknown bids, actions on the wrong kind of element
``random``          a seeded random policy (:func:`random_scripts`)

Element ids (``bid``) are the numbers the environment gives elements in document order;
the scripted episodes use the ids the real pages show (the navigation links are 10, 12
and 14 on every site). Verified episodes carry a probe: a ``goto`` to the page that shows
the state (orders, the thread, the user table …) and the text it must contain; five of
them are meant to fail (a wrong password, a blocked submit, an invalid form …).
"""

from __future__ import annotations

import random

from lwm.envs.base import Check, Task
from lwm.envs.episode import Script

SHOP, FORUM, ADMIN = "http://shop.test/", "http://forum.test/", "http://admin.test/"
_LOGIN_ALICE = (f"goto('{FORUM}login')", "fill('19', 'alice')", "fill('21', 'wonderland')", "click('24')")


def _ep(name: str, family: str, instruction: str, start: str, *actions: str, tags: tuple[str, ...] = (),
        check: Check | None = None, setup: tuple[str, ...] = ()) -> Script:
    task = Task(name=name, family=family, instruction=instruction, setup=tuple(setup), check=check,
                options={"start_url": start})
    return Script(task=task, actions=tuple(actions), tags=(family, *tags))


SCRIPTED: list[Script] = [
    # -- shop ------------------------------------------------------------------------------
    _ep("shop-browse-history", "shop-browse", "Find the price of the desk lamp.", SHOP,
        "click('23')", "go_back()", "click('29')", "go_back()", "go_forward()", "scroll(0, 300)",
        "send_msg_to_user('The desk lamp costs $39.99.')", tags=("history", "scroll")),
    _ep("shop-checkout", "shop-checkout", "Buy two blue mugs, express shipping, gift wrapped, for Ada Lovelace.",
        f"{SHOP}product/1",
        "select_option('23', '2')", "click('29')", "click('36')", "fill('31', 'Ada Lovelace')",
        "fill('33', '12 Analytical Way, London')", "select_option('35', 'Express (1 day)')", "check('39')",
        "click('40')",
        check=Check(f"goto('{SHOP}orders')", "for Ada Lovelace: $34.99"), tags=("form", "select", "checkbox")),
    _ep("shop-checkout-incomplete", "shop-checkout", "Order a notebook for Bob.", f"{SHOP}product/3",
        "click('29')", "click('36')", "fill('31', 'Bob')", "click('40')", "goto('http://shop.test/orders')",
        check=Check(f"goto('{SHOP}orders')", "Order #1"), tags=("required-field", "fails")),
    _ep("shop-cart-update", "shop-cart", "Put only the coffee beans in the cart.", f"{SHOP}product/2",
        "click('29')", f"goto('{SHOP}product/5')", "select_option('23', '3')", "click('29')",
        "fill('37', '0')", "click('38')", "goto('http://shop.test/cart')",
        check=Check(f"goto('{SHOP}cart')",
                    r"\A(?![\s\S]*Green Tea)[\s\S]*Café Crème Beans \(1 kg\)'\n\t+\[\d+\] cell '3'", "regex"),
        tags=("number-field",)),
    _ep("shop-search", "shop-search", "Search the shop for tea, then for café.", SHOP,
        "fill('19', 'tea')", "press('19', 'Enter')", "fill('19', 'zzz')", "click('20')", "fill('19', 'Café')",
        "press('19', 'Enter')", "click('23')", tags=("unicode", "empty-result")),
    _ep("shop-empty-pages", "shop-cart", "Look at the cart and the orders before buying anything.", SHOP,
        "click('12')", "click('18')", "click('14')", f"goto('{SHOP}checkout')", "go_back()", "go_back()",
        "go_forward()", tags=("empty-result", "history")),
    _ep("navigation-errors", "navigation", "Try some addresses.", SHOP,
        f"goto('{SHOP}does-not-exist')", "click('19')", "goto('http://example.com/')", "go_back()",
        "goto('file:///etc/passwd')", "goto('http://127.0.0.1:8080/admin')", f"goto('{SHOP}orders/99')",
        "goto('javascript:alert(1)')", tags=("404", "blocked")),
    # -- forum -------------------------------------------------------------------------------
    _ep("forum-login-wrong-password", "forum-login", "Log in as alice.", FORUM,
        "click('18')", "fill('19', 'alice')", "fill('21', 'hunter2')", "click('24')", "fill('20', 'alice')",
        check=Check(f"goto('{FORUM}')", "Logged in as alice"), tags=("login", "fails")),
    _ep("forum-login-reply", "forum-post", "Log in as alice and reply 'Green tea for me too!' to the tea thread.",
        FORUM, "click('14')", "fill('19', 'alice')", "fill('21', 'wonderland')", "check('23')", "click('24')",
        "click('46')", "fill('27', 'Green tea for me too!')", "click('28')",
        check=Check(f"goto('{FORUM}post/3')", "Green tea for me too!"), tags=("login", "form")),
    _ep("forum-new-thread", "forum-post", "Start a Help thread titled 'Printer on fire'.", FORUM,
        "click('12')", "fill('19', 'Printer on fire')", "select_option('21', 'Help')",
        "fill('26', 'It says lp0 on fire. Should I worry?')", "click('27')", "click('10')",
        check=Check(f"goto('{FORUM}')", "link 'Printer on fire'"), setup=_LOGIN_ALICE, tags=("select", "textarea")),
    _ep("forum-logged-out", "forum-post", "Try to post without logging in.", f"{FORUM}post/2",
        "click('21')", "goto('http://forum.test/new')", "goto('http://forum.test/post/9')",
        "goto('http://forum.test/post/2/reply')", tags=("404", "login")),
    _ep("forum-search", "forum-post", "Find the thread about passwords.", FORUM,
        "fill('21', 'thé')", "click('22')", "fill('21', 'PASSWORD')", "press('21', 'Enter')", "click('31')",
        tags=("unicode", "empty-result")),
    _ep("forum-empty-reply", "forum-post", "Answer bob's password question.", f"{FORUM}post/2",
        "click('22')", "click('25')", "fill('25', '   ')", "click('26')",
        check=Check(f"goto('{FORUM}post/2')", "alice wrote:"),
        setup=(*_LOGIN_ALICE, f"goto('{FORUM}post/2')"), tags=("validation", "fails")),
    _ep("forum-logout", "forum-login", "Log out.", FORUM, "click('20')", "click('14')",
        check=Check(f"goto('{FORUM}')", "You are not logged in."), setup=_LOGIN_ALICE, tags=("login",)),
    # -- admin --------------------------------------------------------------------------------
    _ep("admin-add-user", "admin-users", "Add Dave Null (dave@example.com) as an inactive editor.",
        f"{ADMIN}users/new",
        "fill('19', 'Dave Null')", "fill('21', 'dave@example.com')", "select_option('23', 'Editor')",
        "uncheck('28')", "click('29')",
        check=Check(f"goto('{ADMIN}users')",
                    r"cell 'dave@example\.com'\n\t+\[\d+\] cell 'editor'\n\t+\[\d+\] cell 'inactive'", "regex"),
        tags=("select", "checkbox")),
    _ep("admin-invalid-email", "admin-users", "Add a user named Eve.", f"{ADMIN}users/new",
        "fill('19', 'Eve')", "fill('21', 'eve-at-example')", "click('29')", "fill('21', '@example.com')",
        "press('21', 'Enter')", "click('12')",
        check=Check(f"goto('{ADMIN}users')", "cell 'Eve'"), tags=("validation", "fails")),
    _ep("admin-edit-role", "admin-users", "Make Grace Hopper an admin.", ADMIN,
        "click('21')", "click('40')", "select_option('23', 'admin')", "click('29')",
        check=Check(f"goto('{ADMIN}users')", r"cell 'grace@example\.com'\n\t+\[\d+\] cell 'admin'", "regex"),
        tags=("select",)),
    _ep("admin-settings", "admin-settings", "Turn on maintenance mode, Tokyo time, no sign-ups, title 'Lwm ✓'.",
        f"{ADMIN}settings",
        "fill('19', 'Lwm ✓')", "select_option('21', 'Asia/Tokyo')", "check('29')", "uncheck('31')", "click('32')",
        "click('10')",
        check=Check(f"goto('{ADMIN}')", "Maintenance mode: on"), tags=("checkbox", "unicode")),
    _ep("admin-delete-user", "admin-users", "Delete the inactive user.", f"{ADMIN}users",
        "click('47')", "click('31')", "scroll(0, -100)",
        check=Check(f"goto('{ADMIN}users')", r"\A(?![\s\S]*Linus)", "regex"), tags=("delete",)),
    _ep("admin-settings-empty-title", "admin-settings", "Rename the site to 'Ops'.", f"{ADMIN}settings",
        "clear('19')", "click('32')", "fill('20', 'Ops')",
        check=Check(f"goto('{ADMIN}settings')", "value='Ops'"), tags=("validation", "fails")),
    # -- odd input ------------------------------------------------------------------------------
    _ep("odd-calls", "odd-input", "", f"{ADMIN}users/new",
        "click(", "clik('19')", "fill('19')", "fill(bid='19', value='Zoë 🚀')", "select_option('19', 'Admin')",
        "select_option('23', 'Superuser')", "check('19')", "click('999')", "goto(42)", "noop(0)",
        "click('19', button='sideways')", "__import__('os').system('id')", "hover('29')", "focus('21')",
        "press('21', 'Shift+Tab')", tags=("malformed", "unicode")),
]


# Pages the random policy may open (sites, their 404s, refused hosts and schemes).
_RANDOM_URLS = (SHOP, f"{SHOP}product/4", f"{SHOP}cart", f"{SHOP}checkout", f"{SHOP}nope", FORUM, f"{FORUM}login",
                f"{FORUM}post/1", f"{FORUM}post/7", ADMIN, f"{ADMIN}users", f"{ADMIN}settings", f"{ADMIN}users/2/edit",
                "http://localhost:9000/", "https://example.org/", "file:///etc/shadow", "ftp://shop.test/")
_TEXTS = ("hello", "", "Zoë", "42", "a@b.c", "🚀 launch", "x" * 300, "<script>alert(1)</script>", "'; DROP TABLE--")
_MALFORMED = ("click()", "click('1', '2', '3')", "fill(19, 'x', extra=1)", "goto()", "scroll('a', 'b')",
              "not an action", "", "click('../../')", "press('20')", "select_option('23', [])", "open('/etc/passwd')")


def random_scripts(seed: int, n: int, length: int = 6) -> list[Script]:
    """``n`` open-loop episodes of a seeded random policy: random actions on random bids
    (many missing or not interactive), random pages and odd or malformed calls.

    The same ``(seed, n, length)`` always gives the same episodes.
    """
    rng = random.Random(seed)
    starts = (SHOP, f"{SHOP}product/1", FORUM, f"{FORUM}login", ADMIN, f"{ADMIN}users/new", f"{ADMIN}settings")
    out = []
    for i in range(n):
        actions = []
        for _ in range(length):
            bid = str(rng.randint(5, 35))
            kind = rng.random()
            if kind < 0.30:
                actions.append(f"click({bid!r})")
            elif kind < 0.45:
                actions.append(f"fill({bid!r}, {rng.choice(_TEXTS)!r})")
            elif kind < 0.52:
                actions.append(f"select_option({bid!r}, {rng.choice(['2', 'Help', 'Admin', 'UTC', 'nope'])!r})")
            elif kind < 0.57:
                actions.append(f"{rng.choice(['check', 'uncheck'])}({bid!r})")
            elif kind < 0.70:
                actions.append(f"goto({rng.choice(_RANDOM_URLS)!r})")
            elif kind < 0.78:
                actions.append(rng.choice(["go_back()", "go_forward()", f"scroll(0, {rng.randint(-500, 500)})"]))
            elif kind < 0.84:
                actions.append(f"press({bid!r}, {rng.choice(['Enter', 'Tab', 'ArrowDown', 'Control+a'])!r})")
            else:
                actions.append(rng.choice(_MALFORMED))
        task = Task(name=f"random-{seed}-{i}", family="random", instruction="",
                    options={"start_url": rng.choice(starts)})
        out.append(Script(task=task, actions=tuple(actions), tags=("random", f"seed-{seed}")))
    return out


SCRIPTS: list[Script] = SCRIPTED + random_scripts(7, 6) + random_scripts(8, 8)
#: Episodes beyond the core suite: the second random batch.
EXTENDED: set[str] = {e.task.name for e in random_scripts(8, 8)}
