"""In-sandbox query controller of the search environment (run by the sandbox's /usr/bin/python3).

Opens the prebuilt index read-only (``/opt/search/index.sqlite``, see ``index.py``)
and answers JSON-lines requests on stdin, one JSON reply per line on stdout. Standard
library only. Requests::

    {"op": "search", "queries": [str, ...], "k": int, "max_terms": int}
        -> {"ok": true, "results": [[{"title", "url", "date", "snippet"}, ...], ...]}
    {"op": "extract", "url": str, "goal": str, "max_chars": int}
        -> {"ok": true, "page": {"title", "url", "date", "text", "omitted_before",
                                 "omitted_after", "total"}}   (or "page": null if unknown)
    -> {"ok": false, "error": str} on a bad request

Agent text never reaches SQL as syntax: a query becomes a list of quoted FTS5 terms and
phrases (double quotes doubled), and a URL is only a key looked up in ``pages``.
"""

import json
import re
import sqlite3
import sys

INDEX = "/opt/search/index.sqlite"
_WORD = re.compile(r"\w+")
_PHRASE = re.compile(r'"([^"]*)"')
_HEADING = re.compile(r"^#{1,6} ", re.MULTILINE)
_HOSTS = ("docs.python.org",)
#: Words too common to say anything about a goal (used to pick a page's relevant section).
_STOP = frozenset(
    "a an and are as at be by can do does for from how i in is it of on or the this to use "
    "used using what when where which who why with".split()
)


def fts_terms(query, max_terms):
    """The query's terms as FTS5 strings: ``"quoted phrases"`` stay phrases, other words
    become single quoted terms (double quotes cannot occur inside: ``\\w+`` words only).
    Only the first ``max_terms`` words count. Returns (terms, content_terms): the latter
    without very common words (all terms when nothing else is left)."""
    terms, content, count, pos = [], [], 0, 0
    for m in [*_PHRASE.finditer(query), None]:
        end = m.start() if m else len(query)
        for w in _WORD.findall(query[pos:end]):
            if count < max_terms:
                terms.append('"' + w + '"')
                if w.lower() not in _STOP:
                    content.append(terms[-1])
                count += 1
        if m:
            words = _WORD.findall(m.group(1))[: max(0, max_terms - count)]
            if words:
                terms.append('"' + " ".join(words) + '"')
                content.append(terms[-1])
                count += len(words)
            pos = m.end()
    return terms, content or terms


_SQL = ("SELECT p.id, p.title, p.url, p.date, snippet(pages_fts, 1, '', '', '…', 32) "
        "FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid "
        "WHERE pages_fts MATCH ? ORDER BY bm25(pages_fts, 10.0, 1.0), p.id LIMIT ?")


def search(db, query, k, max_terms):
    """Up to ``k`` pages: first those containing every content term (AND), ranked by bm25
    (title weighted 10× the body); then, to fill up, pages with any term (OR)."""
    terms, content = fts_terms(query, max_terms)
    if not terms:
        return []
    rows = db.execute(_SQL, (" AND ".join(content), k)).fetchall()
    if len(rows) < k:
        seen = {r[0] for r in rows}
        rows += [r for r in db.execute(_SQL, (" OR ".join(terms), k + len(rows))).fetchall()
                 if r[0] not in seen][: k - len(rows)]
    return [{"title": t, "url": u, "date": d, "snippet": s} for _, t, u, d, s in rows]


def page_path(url):
    """The corpus path of a docs.python.org URL, or None for any other URL.

    Accepts http/https, the ``/3/`` and ``/3.11/`` version prefixes, a directory (→ its
    index.html) and ignores ``?query`` and ``#fragment``."""
    m = re.match(r"^(?:https?://)?([^/?#]+)(/[^?#]*)?", url.strip(), re.IGNORECASE)
    if not m or m.group(1).lower() not in _HOSTS:
        return None
    path = (m.group(2) or "/").lstrip("/")
    for prefix in ("3.11/", "3/"):
        if path.startswith(prefix) or path + "/" == prefix:
            path = path[len(prefix):]
            break
    else:
        return None
    if path == "" or path.endswith("/"):
        path += "index.html"
    return path


def select(markdown, goal, max_chars):
    """The part of a page shown: all of it when it fits, else ``max_chars`` characters
    from a start chosen by the goal: find the first line holding the most distinct goal
    words (common words ignored, Markdown backslash escapes ignored); start at the heading
    above it when that heading is at most ``max_chars // 4`` characters above, else at the
    start of its paragraph. No goal word anywhere: the top of the page. The end is moved
    back to a line boundary when one lies in the last fifth.

    Returns (text, omitted_before, omitted_after) in characters."""
    if len(markdown) <= max_chars:
        return markdown, 0, 0
    start = 0
    words = {w for w in _WORD.findall(goal.lower()) if w not in _STOP}
    if words:
        best, best_pos, pos = 0, None, 0
        for line in markdown.splitlines(keepends=True):
            score = len(words.intersection(_WORD.findall(line.replace("\\", "").lower())))
            if score > best:
                best, best_pos = score, pos
            pos += len(line)
        if best_pos is not None:
            heading = max([0] + [m.start() for m in _HEADING.finditer(markdown, 0, best_pos + 1)])
            if best_pos - heading <= max_chars // 4:
                start = heading
            else:
                para = markdown.rfind("\n\n", 0, best_pos)
                start = para + 2 if para >= 0 else 0
    end = min(len(markdown), start + max_chars)
    if end < len(markdown):
        cut = markdown.rfind("\n", start, end)
        if cut > start + max_chars * 4 // 5:  # end on a line boundary when one is near
            end = cut
    return markdown[start:end], start, len(markdown) - end


def extract(db, url, goal, max_chars):
    path = page_path(url)
    if path is None:
        return None
    row = db.execute("SELECT title, url, date, markdown FROM pages WHERE path = ?", (path,)).fetchone()
    if row is None:
        return None
    title, canonical, date, markdown = row
    text, before, after = select(markdown, goal, max_chars)
    return {"title": title, "url": canonical, "date": date, "text": text,
            "omitted_before": before, "omitted_after": after, "total": len(markdown)}


def answer(db, req):
    op = req.get("op")
    if op == "search":
        k, max_terms = int(req.get("k", 5)), int(req.get("max_terms", 32))
        return {"ok": True, "results": [search(db, str(q), k, max_terms) for q in req["queries"]]}
    if op == "extract":
        page = extract(db, str(req["url"]), str(req.get("goal", "")), int(req.get("max_chars", 8000)))
        return {"ok": True, "page": page}
    return {"ok": False, "error": f"unknown op {op!r}"}


def main():
    db = sqlite3.connect(f"file:{INDEX}?mode=ro&immutable=1", uri=True)
    out = sys.stdout
    out.write(json.dumps({"ok": True, "ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            reply = answer(db, json.loads(line))
        except (ValueError, KeyError, TypeError, sqlite3.Error) as e:
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(reply, ensure_ascii=False) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
