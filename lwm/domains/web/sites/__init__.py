"""The local websites of the web environment, served from host-side Python objects.

Each site is a small, stateful web application (plain HTML: forms, links, tables; no
JavaScript) that answers one request at a time: :meth:`Site.handle` takes a method, a
path, the query and the form fields and returns a :class:`Response`. The browser never
reaches a server: the environment intercepts every request Chromium makes and answers it
from these objects (see :mod:`lwm.domains.web.env`), so an episode's whole server state is a
plain Python object that can be deep-copied for snapshots.

Sites: ``http://shop.test/`` (catalogue, cart, checkout, orders), ``http://forum.test/``
(threads, replies, login), ``http://admin.test/`` (users, settings). Unknown paths answer
a 404 page.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

Form = dict[str, list[str]]


@dataclass
class Response:
    """An HTTP answer: ``status``, HTML ``body``, and ``location`` for redirects (303)."""

    status: int = 200
    body: str = ""
    location: str = ""


def esc(text: object) -> str:
    """HTML-escape ``text`` (quotes included)."""
    return html.escape(str(text), quote=True)


def first(form: Form, name: str, default: str = "") -> str:
    """The first value of field ``name`` (stripped), or ``default``."""
    values = form.get(name) or [default]
    return values[0].strip()


def redirect(location: str) -> Response:
    """A 303 See Other to ``location`` (after a POST, so reloading does not re-post)."""
    return Response(303, "", location)


@dataclass
class Site:
    """Base of the sites: a host name, a title, navigation links and a flash message."""

    host: str = ""
    name: str = ""
    nav: tuple[tuple[str, str], ...] = ()
    flash: str = ""
    flash_error: str = ""

    def handle(self, method: str, path: str, query: Form, form: Form) -> Response:
        """Answer one request (``method`` is ``GET`` or ``POST``)."""
        raise NotImplementedError

    def page(self, title: str, body: str, status: int = 200) -> Response:
        """A full HTML page with the site's header, navigation and one-shot messages."""
        nav = "".join(f'<li><a href="{esc(h)}">{esc(t)}</a></li>' for h, t in self.nav)
        msgs = ""
        if self.flash:
            msgs += f'<p role="status">{esc(self.flash)}</p>'
        if self.flash_error:
            msgs += f'<p role="alert">{esc(self.flash_error)}</p>'
        self.flash = self.flash_error = ""
        doc = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)} - '
               f'{esc(self.name)}</title></head><body><header><a href="/">{esc(self.name)}</a>'
               f'<nav aria-label="Main"><ul>{nav}</ul></nav></header><main><h1>{esc(title)}</h1>'
               f'{msgs}{body}</main><footer><p>{esc(self.name)} demo site</p></footer></body></html>')
        return Response(status, doc)

    def not_found(self, path: str) -> Response:
        """The site's 404 page."""
        return self.page("Page not found",
                         f'<p>The page {esc(path)} does not exist.</p><p><a href="/">Back to home</a></p>', 404)


def make_sites() -> dict[str, Site]:
    """Fresh sites, ``{host: site}``, in their initial state."""
    from lwm.domains.web.sites.admin import AdminSite
    from lwm.domains.web.sites.forum import ForumSite
    from lwm.domains.web.sites.shop import ShopSite

    sites: list[Site] = [ShopSite(), ForumSite(), AdminSite()]
    return {s.host: s for s in sites}
