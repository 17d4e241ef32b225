"""A small stateful ticket-tracker MCP server, written with the MCP SDK's ``MCPServer``
(formerly FastMCP); runs inside the sandbox over stdio with its state in one SQLite file.

Usage (inside the sandbox): ``python3 tickets.py --db /app/tickets.db``.

Tools: ``create_ticket``, ``get_ticket``, ``list_tickets`` (paginated), ``update_ticket``,
``add_comment``, ``close_ticket``, ``search_tickets``. Results are JSON text; invalid
input (unknown ticket, empty title, bad page, closing a closed ticket …) is a tool error
with a one-line message. Times are a logical clock (``seq``), so runs are deterministic.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

Priority = Literal["low", "normal", "high", "urgent"]
Status = Literal["open", "in_progress", "closed"]
_SCHEMA = """
CREATE TABLE IF NOT EXISTS tickets (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL,
  description TEXT NOT NULL, priority TEXT NOT NULL, status TEXT NOT NULL, assignee TEXT,
  tags TEXT NOT NULL, resolution TEXT, created_seq INTEGER NOT NULL, updated_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS comments (id INTEGER PRIMARY KEY AUTOINCREMENT, ticket_id INTEGER NOT NULL,
  author TEXT NOT NULL, body TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS clock (seq INTEGER NOT NULL);
"""

server = MCPServer("tickets", instructions="A ticket tracker: create, list, update, comment on and close tickets.")
DB = "/app/tickets.db"


def _db() -> sqlite3.Connection:
    con = sqlite3.connect(DB)
    con.row_factory = sqlite3.Row
    con.executescript(_SCHEMA)
    if con.execute("SELECT COUNT(*) FROM clock").fetchone()[0] == 0:
        con.execute("INSERT INTO clock VALUES (0)")
    return con


def _tick(con: sqlite3.Connection) -> int:
    con.execute("UPDATE clock SET seq = seq + 1")
    return con.execute("SELECT seq FROM clock").fetchone()[0]


def _row(con: sqlite3.Connection, ticket_id: int) -> sqlite3.Row:
    row = con.execute("SELECT * FROM tickets WHERE id = ?", (ticket_id,)).fetchone()
    if row is None:
        raise ToolError(f"Ticket {ticket_id} not found")
    return row


def _ticket(con: sqlite3.Connection, row: sqlite3.Row, comments: bool = True) -> dict:
    out = {k: row[k] for k in ("id", "title", "description", "priority", "status", "assignee")}
    out["tags"] = json.loads(row["tags"])
    if row["status"] == "closed":
        out["resolution"] = row["resolution"]
    out["created_seq"], out["updated_seq"] = row["created_seq"], row["updated_seq"]
    if comments:
        out["comments"] = [{"author": c["author"], "body": c["body"], "seq": c["seq"]} for c in con.execute(
            "SELECT * FROM comments WHERE ticket_id = ? ORDER BY id", (row["id"],))]
    return out


def _dump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2)


def _title(title: str) -> str:
    title = title.strip()
    if not title:
        raise ToolError("title must not be empty")
    if len(title) > 200:
        raise ToolError(f"title is {len(title)} characters long; at most 200")
    return title


@server.tool(structured_output=False)
def create_ticket(title: str, description: str = "", priority: Priority = "normal",
                  assignee: str | None = None, tags: list[str] | None = None) -> str:
    """Create a ticket (status "open"); returns it as JSON."""
    with _db() as con:
        seq = _tick(con)
        cur = con.execute(
            "INSERT INTO tickets (title, description, priority, status, assignee, tags, created_seq, updated_seq)"
            " VALUES (?, ?, ?, 'open', ?, ?, ?, ?)",
            (_title(title), description, priority, assignee, json.dumps(sorted(set(tags or []))), seq, seq))
        return _dump(_ticket(con, _row(con, cur.lastrowid)))


@server.tool(structured_output=False)
def get_ticket(ticket_id: int) -> str:
    """One ticket with its comments, as JSON."""
    with _db() as con:
        return _dump(_ticket(con, _row(con, ticket_id)))


@server.tool(structured_output=False)
def list_tickets(status: Status | None = None, assignee: str | None = None, priority: Priority | None = None,
                 page: int = 1, page_size: int = 5) -> str:
    """Tickets matching the filters, oldest first, one page at a time (JSON with
    ``tickets``, ``page``, ``page_size``, ``total`` and ``next_page``, null on the last)."""
    if page < 1:
        raise ToolError("page must be >= 1")
    if not 1 <= page_size <= 50:
        raise ToolError("page_size must be between 1 and 50")
    where, args = [], []
    for column, value in (("status", status), ("assignee", assignee), ("priority", priority)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    clause = (" WHERE " + " AND ".join(where)) if where else ""
    with _db() as con:
        total = con.execute(f"SELECT COUNT(*) FROM tickets{clause}", args).fetchone()[0]
        rows = con.execute(f"SELECT * FROM tickets{clause} ORDER BY id LIMIT ? OFFSET ?",
                           [*args, page_size, (page - 1) * page_size]).fetchall()
        items = [{k: r[k] for k in ("id", "title", "priority", "status", "assignee")} for r in rows]
    nxt = page + 1 if page * page_size < total else None
    return _dump({"tickets": items, "page": page, "page_size": page_size, "total": total, "next_page": nxt})


@server.tool(structured_output=False)
def update_ticket(ticket_id: int, title: str | None = None, priority: Priority | None = None,
                  assignee: str | None = None, status: Literal["open", "in_progress"] | None = None) -> str:
    """Change fields of an open ticket (closed tickets cannot change); returns it."""
    with _db() as con:
        row = _row(con, ticket_id)
        if row["status"] == "closed":
            raise ToolError(f"Ticket {ticket_id} is closed and cannot be updated")
        changes = {k: v for k, v in (("title", title and _title(title)), ("priority", priority),
                                     ("assignee", assignee), ("status", status)) if v is not None}
        if not changes:
            raise ToolError("nothing to update: give at least one of title, priority, assignee, status")
        seq = _tick(con)
        sets = ", ".join(f"{k} = ?" for k in changes)
        con.execute(f"UPDATE tickets SET {sets}, updated_seq = ? WHERE id = ?", (*changes.values(), seq, ticket_id))
        return _dump(_ticket(con, _row(con, ticket_id)))


@server.tool(structured_output=False)
def add_comment(ticket_id: int, author: str, body: str) -> str:
    """Add a comment to a ticket; returns the ticket."""
    if not body.strip():
        raise ToolError("comment body must not be empty")
    with _db() as con:
        _row(con, ticket_id)
        seq = _tick(con)
        con.execute("INSERT INTO comments (ticket_id, author, body, seq) VALUES (?, ?, ?, ?)",
                    (ticket_id, author, body, seq))
        con.execute("UPDATE tickets SET updated_seq = ? WHERE id = ?", (seq, ticket_id))
        return _dump(_ticket(con, _row(con, ticket_id)))


@server.tool(structured_output=False)
def close_ticket(ticket_id: int, resolution: str) -> str:
    """Close a ticket with a resolution text; returns it."""
    if not resolution.strip():
        raise ToolError("resolution must not be empty")
    with _db() as con:
        if _row(con, ticket_id)["status"] == "closed":
            raise ToolError(f"Ticket {ticket_id} is already closed")
        seq = _tick(con)
        con.execute("UPDATE tickets SET status = 'closed', resolution = ?, updated_seq = ? WHERE id = ?",
                    (resolution, seq, ticket_id))
        return _dump(_ticket(con, _row(con, ticket_id)))


@server.tool(structured_output=False)
def search_tickets(query: str, limit: int = 10) -> str:
    """Tickets whose title, description or comments contain ``query`` (case-insensitive)."""
    if not query.strip():
        raise ToolError("query must not be empty")
    if not 1 <= limit <= 50:
        raise ToolError("limit must be between 1 and 50")
    like = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    with _db() as con:
        rows = con.execute(
            "SELECT * FROM tickets t WHERE t.title LIKE ?1 ESCAPE '\\' OR t.description LIKE ?1 ESCAPE '\\'"
            " OR EXISTS (SELECT 1 FROM comments c WHERE c.ticket_id = t.id AND c.body LIKE ?1 ESCAPE '\\')"
            " ORDER BY t.id LIMIT ?2", (like, limit)).fetchall()
        items = [{k: r[k] for k in ("id", "title", "status")} for r in rows]
    return _dump({"query": query, "results": items, "count": len(items)})


def main() -> None:
    global DB
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=DB)
    DB = parser.parse_args().db
    _db().close()
    server.run("stdio")


if __name__ == "__main__":
    main()
