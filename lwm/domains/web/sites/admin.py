"""``http://admin.test/``: an admin panel with a user table, user forms and settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from lwm.domains.web.sites import Form, Response, Site, esc, first, redirect

ROLES = ("viewer", "editor", "admin")
TIMEZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo")


def _initial_users() -> list[dict]:
    return [
        {"name": "Ada Lovelace", "email": "ada@example.com", "role": "admin", "active": True},
        {"name": "Grace Hopper", "email": "grace@example.com", "role": "editor", "active": True},
        {"name": "Linus Example", "email": "linus@example.com", "role": "viewer", "active": False},
    ]


@dataclass
class AdminSite(Site):
    """The panel's state: users (name, email, role, active) and the site settings."""

    host: str = "admin.test"
    name: str = "Admin"
    nav: tuple[tuple[str, str], ...] = (("/", "Dashboard"), ("/users", "Users"), ("/settings", "Settings"))
    users: list[dict | None] = field(default_factory=_initial_users)  # None: deleted (ids stay stable)
    settings: dict = field(default_factory=lambda: {"title": "My Site", "timezone": "UTC",
                                                    "maintenance": False, "signups": True})

    def handle(self, method: str, path: str, query: Form, form: Form) -> Response:
        parts = [p for p in path.split("/") if p]
        uid = int(parts[1]) if len(parts) >= 2 and parts[0] == "users" and parts[1].isdigit() else 0
        if uid and not (0 < uid <= len(self.users) and self.users[uid - 1] is not None):
            return self.not_found(path)
        if method == "POST":
            if path == "/users/new":
                return self._save(0, form)
            if uid and parts[2:] == ["edit"]:
                return self._save(uid, form)
            if uid and parts[2:] == ["delete"]:
                self.flash = f"Deleted user {self.users[uid - 1]['name']}."
                self.users[uid - 1] = None
                return redirect("/users")
            if path == "/settings":
                return self._save_settings(form)
        elif not parts:
            active = sum(1 for u in self.users if u and u["active"])
            body = (f"<p>{active} active users.</p><p>Maintenance mode: "
                    f"{'on' if self.settings['maintenance'] else 'off'}</p>"
                    '<ul><li><a href="/users">Manage users</a></li><li><a href="/users/new">Add a user</a></li>'
                    '<li><a href="/settings">Site settings</a></li></ul>')
            return self.page("Dashboard", body)
        elif parts == ["users"]:
            return self._users()
        elif parts == ["users", "new"]:
            return self._form(0)
        elif uid and parts[2:] == ["edit"]:
            return self._form(uid)
        elif parts == ["settings"]:
            return self._settings()
        return self.not_found(path)

    def _users(self) -> Response:
        rows = "".join(f'<tr><td>{esc(u["name"])}</td><td>{esc(u["email"])}</td><td>{u["role"]}</td>'
                       f'<td>{"active" if u["active"] else "inactive"}</td>'
                       f'<td><a href="/users/{i}/edit">Edit {esc(u["name"])}</a></td></tr>'
                       for i, u in enumerate(self.users, 1) if u)
        body = (f'<p><a href="/users/new">Add a user</a></p><table><tr><th>Name</th><th>Email</th><th>Role</th>'
                f"<th>Status</th><th>Actions</th></tr>{rows}</table>")
        return self.page("Users", body)

    def _form(self, uid: int) -> Response:
        u = self.users[uid - 1] if uid else {"name": "", "email": "", "role": "viewer", "active": True}
        roles = "".join(f'<option value="{r}"{" selected" if r == u["role"] else ""}>{r.title()}</option>'
                        for r in ROLES)
        action = f"/users/{uid}/edit" if uid else "/users/new"
        body = (f'<form action="{action}" method="post"><label>Name <input type="text" name="name" '
                f'value="{esc(u["name"])}"></label><label>Email <input type="email" name="email" '
                f'value="{esc(u["email"])}"></label><label>Role <select name="role">{roles}</select></label>'
                f'<label><input type="checkbox" name="active" value="1"{" checked" if u["active"] else ""}> Active'
                f'</label><button type="submit">Save user</button></form>')
        if uid:
            body += (f'<form action="/users/{uid}/delete" method="post"><button type="submit">Delete user</button>'
                     "</form>")
        return self.page(f"Edit {u['name']}" if uid else "New user", body)

    def _save(self, uid: int, form: Form) -> Response:
        name, email, role = first(form, "name"), first(form, "email"), first(form, "role", "viewer")
        where = f"/users/{uid}/edit" if uid else "/users/new"
        if not name:
            self.flash_error = "Name is required."
            return redirect(where)
        if "@" not in email or email.startswith("@") or email.endswith("@"):
            self.flash_error = "Please enter a valid email address."
            return redirect(where)
        if role not in ROLES:
            self.flash_error = "Unknown role."
            return redirect(where)
        user = {"name": name[:80], "email": email[:120], "role": role, "active": first(form, "active") == "1"}
        if uid:
            self.users[uid - 1] = user
            self.flash = f"Saved {user['name']}."
        else:
            self.users.append(user)
            self.flash = f"Created {user['name']}."
        return redirect("/users")

    def _settings(self) -> Response:
        s = self.settings
        tz = "".join(f'<option{" selected" if t == s["timezone"] else ""}>{t}</option>' for t in TIMEZONES)
        body = (f'<form action="/settings" method="post"><label>Site title <input type="text" name="title" '
                f'value="{esc(s["title"])}"></label><label>Time zone <select name="timezone">{tz}</select></label>'
                f'<fieldset><legend>Options</legend><label><input type="checkbox" name="maintenance" value="1"'
                f'{" checked" if s["maintenance"] else ""}> Maintenance mode</label><label><input type="checkbox" '
                f'name="signups" value="1"{" checked" if s["signups"] else ""}> Allow sign-ups</label></fieldset>'
                f'<button type="submit">Save settings</button></form>')
        return self.page("Settings", body)

    def _save_settings(self, form: Form) -> Response:
        title, tz = first(form, "title"), first(form, "timezone")
        if not title or tz not in TIMEZONES:
            self.flash_error = "The site title cannot be empty."
            return redirect("/settings")
        self.settings = {"title": title[:80], "timezone": tz, "maintenance": first(form, "maintenance") == "1",
                         "signups": first(form, "signups") == "1"}
        self.flash = "Settings saved."
        return redirect("/settings")
