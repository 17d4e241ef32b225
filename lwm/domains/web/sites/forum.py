"""``http://forum.test/``: a discussion forum with threads, replies, search and login."""

from __future__ import annotations

from dataclasses import dataclass, field

from lwm.domains.web.sites import Form, Response, Site, esc, first, redirect

#: username -> password (the demo accounts)
ACCOUNTS = {"alice": "wonderland", "bob": "builder"}
CATEGORIES = ("General", "Help", "Announcements")


def _initial_posts() -> list[dict]:
    return [
        {"title": "Welcome to the forum", "author": "admin", "category": "Announcements",
         "body": "Please be kind and stay on topic.", "replies": [("bob", "Thanks, glad to be here!")]},
        {"title": "How do I reset my password?", "author": "bob", "category": "Help",
         "body": "I forgot my password and the reset link does not arrive.", "replies": []},
        {"title": "Favourite tea?", "author": "alice", "category": "General",
         "body": "Mine is sencha. What about you?", "replies": [("bob", "Earl Grey, always.")]},
    ]


@dataclass
class ForumSite(Site):
    """The forum's state: posts (title, author, category, body, replies) and who is logged in."""

    host: str = "forum.test"
    name: str = "Forum"
    nav: tuple[tuple[str, str], ...] = (("/", "Threads"), ("/new", "New thread"), ("/login", "Log in"))
    posts: list[dict] = field(default_factory=_initial_posts)
    user: str = ""
    failed_logins: int = 0

    def handle(self, method: str, path: str, query: Form, form: Form) -> Response:
        parts = [p for p in path.split("/") if p]
        post_id = int(parts[1]) if len(parts) >= 2 and parts[0] == "post" and parts[1].isdigit() else 0
        if post_id and not 0 < post_id <= len(self.posts):
            return self.not_found(path)
        if method == "POST":
            if path == "/login":
                return self._login(form)
            if path == "/logout":
                self.user = ""
                self.flash = "You have been logged out."
                return redirect("/")
            if path == "/new":
                return self._new(form)
            if post_id and parts[2:] == ["reply"]:
                return self._reply(post_id, form)
        elif not parts:
            return self._threads()
        elif parts == ["login"]:
            return self._login_form()
        elif parts == ["new"]:
            return self._new_form()
        elif parts == ["search"]:
            q = first(query, "q")
            hits = [i for i, p in enumerate(self.posts, 1)
                    if q and (q.lower() in p["title"].lower() or q.lower() in p["body"].lower())]
            return self._list(f"Search results for “{q}”", hits, q)
        elif post_id and len(parts) == 2:
            return self._post(post_id)
        return self.not_found(path)

    def _who(self) -> str:
        if self.user:
            return (f'<p>Logged in as {esc(self.user)}</p><form action="/logout" method="post">'
                    f'<button type="submit">Log out</button></form>')
        return '<p>You are not logged in. <a href="/login">Log in</a></p>'

    def _list(self, title: str, ids: list[int], q: str = "") -> Response:
        search = (f'<form role="search" action="/search" method="get"><label>Search threads '
                  f'<input type="search" name="q" value="{esc(q)}"></label>'
                  '<button type="submit">Search</button></form>')
        rows = "".join(f'<tr><td><a href="/post/{i}">{esc(self.posts[i - 1]["title"])}</a></td>'
                       f'<td>{esc(self.posts[i - 1]["author"])}</td><td>{esc(self.posts[i - 1]["category"])}</td>'
                       f'<td>{len(self.posts[i - 1]["replies"])}</td></tr>' for i in ids)
        table = (f"<table><tr><th>Thread</th><th>Author</th><th>Category</th><th>Replies</th></tr>{rows}</table>"
                 if ids else "<p>No threads found.</p>")
        return self.page(title, self._who() + search + table)

    def _threads(self) -> Response:
        return self._list("Threads", list(range(1, len(self.posts) + 1)))

    def _post(self, i: int) -> Response:
        p = self.posts[i - 1]
        replies = "".join(f"<li><p>{esc(a)} wrote:</p><p>{esc(t)}</p></li>" for a, t in p["replies"])
        form = (f'<form action="/post/{i}/reply" method="post"><label>Your reply <textarea name="text">'
                f'</textarea></label><button type="submit">Post reply</button></form>' if self.user
                else '<p><a href="/login">Log in</a> to reply.</p>')
        body = (f'<p>Posted by {esc(p["author"])} in {esc(p["category"])}</p><article><p>{esc(p["body"])}</p>'
                f'</article><h2>Replies ({len(p["replies"])})</h2>'
                f'{"<ul>" + replies + "</ul>" if replies else "<p>No replies yet.</p>"}{form}')
        return self.page(p["title"], body)

    def _login_form(self) -> Response:
        if self.user:
            return self.page("Log in", self._who())
        body = ('<form action="/login" method="post"><label>Username <input type="text" name="username"></label>'
                '<label>Password <input type="password" name="password"></label>'
                '<label><input type="checkbox" name="remember" value="1"> Remember me</label>'
                '<button type="submit">Log in</button></form>')
        return self.page("Log in", body)

    def _login(self, form: Form) -> Response:
        user, password = first(form, "username"), first(form, "password")
        if ACCOUNTS.get(user) == password and user:
            self.user = user
            self.flash = f"Welcome back, {user}!"
            return redirect("/")
        self.failed_logins += 1
        self.flash_error = "Invalid username or password."
        return redirect("/login")

    def _new_form(self) -> Response:
        if not self.user:
            self.flash_error = "You must log in to start a thread."
            return redirect("/login")
        cats = "".join(f"<option>{c}</option>" for c in CATEGORIES)
        body = ('<form action="/new" method="post"><label>Title <input type="text" name="title"></label>'
                f'<label>Category <select name="category">{cats}</select></label>'
                '<label>Message <textarea name="body"></textarea></label>'
                '<button type="submit">Create thread</button></form>')
        return self.page("New thread", body)

    def _new(self, form: Form) -> Response:
        if not self.user:
            self.flash_error = "You must log in to start a thread."
            return redirect("/login")
        title, body, cat = first(form, "title"), first(form, "body"), first(form, "category")
        if not title or not body or cat not in CATEGORIES:
            self.flash_error = "A thread needs a title and a message."
            return redirect("/new")
        self.posts.append({"title": title[:120], "author": self.user, "category": cat, "body": body[:2000],
                           "replies": []})
        self.flash = "Thread created."
        return redirect(f"/post/{len(self.posts)}")

    def _reply(self, i: int, form: Form) -> Response:
        if not self.user:
            self.flash_error = "You must log in to reply."
            return redirect("/login")
        text = first(form, "text")
        if not text:
            self.flash_error = "A reply cannot be empty."
        else:
            self.posts[i - 1]["replies"].append((self.user, text[:2000]))
            self.flash = "Reply posted."
        return redirect(f"/post/{i}")
