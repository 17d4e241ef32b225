"""Build the search environment's index: the Python 3.11 documentation as a SQLite FTS5 database.

The corpus is Debian's ``python3-doc`` package (``/usr/share/doc/python3-doc/html``, a
Sphinx build of the CPython 3.11 docs). It is trusted input, so the index is built once on
the host (``lwm setup`` calls :func:`build_index`); the agent's queries only ever read it,
inside the sandbox (``controller.py``).

Layout of ``index.sqlite`` (schema version :data:`INDEX_FORMAT`)::

    meta(key TEXT PRIMARY KEY, value TEXT)        corpus, package version, built_at, pages
    pages(id INTEGER PRIMARY KEY, path TEXT UNIQUE,   path relative to html/, e.g. library/json.html
          url TEXT UNIQUE, title TEXT, date TEXT,     url: https://docs.python.org/3.11/<path>
          markdown TEXT)                              date: ISO YYYY-MM-DD; markdown: the page body
    pages_fts USING fts5(title, body)             rowid = pages.id; body = plain text of the page;
                                                  tokenizer: porter unicode61 remove_diacritics 2

Pages are converted HTML → Markdown with ``markdownify`` (BeautifulSoup underneath); links
become absolute ``https://docs.python.org/3.11/…`` URLs. Index pages of no use to a reader
(the general index, search page, module index, table of contents) are left out.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sqlite3
import subprocess
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from urllib.parse import urljoin

from lwm.errors import AssetMissingError
from lwm.paths import lwm_home

#: Where Debian's python3-doc package installs the HTML documentation.
CORPUS_DIR = Path("/usr/share/doc/python3-doc/html")
#: The Debian package that really holds the files (python3-doc depends on it).
CORPUS_PACKAGE = "python3.11-doc"
#: The public URL the pages are published under (docs.python.org's own scheme).
BASE_URL = "https://docs.python.org/3.11/"
#: Bumped whenever the schema or the conversion changes (part of the index's directory name).
INDEX_FORMAT = 1
#: Pages not indexed: generated indexes and navigation pages.
_SKIP = re.compile(r"^(genindex.*|search|py-modindex|contents|download)\.html$")
_UPDATED = re.compile(r"Last updated on ([A-Z][a-z]+ \d{1,2}, \d{4})")
_BLANKS = re.compile(r"\n{3,}")


def corpus_version() -> str:
    """The installed documentation package's version (``dpkg-query``), e.g. ``3.11.2-6+deb12u9``.

    Raises:
        AssetMissingError: the package is not installed.
    """
    if not CORPUS_DIR.is_dir():
        raise AssetMissingError(
            f"{CORPUS_DIR} not found: install the Debian package 'python3-doc' (make system-deps)")
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", CORPUS_PACKAGE],
                             capture_output=True, text=True, timeout=30)
        version = out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    return re.sub(r"[^A-Za-z0-9.+~-]", "_", version) or "unknown"


def index_dir() -> Path:
    """``$LWM_HOME/search/<corpus-version>-v<INDEX_FORMAT>``."""
    return lwm_home() / "search" / f"python3-doc-{corpus_version()}-v{INDEX_FORMAT}"


def index_path() -> Path:
    """The built index.

    Raises:
        AssetMissingError: not built yet (the message gives the command that builds it).
    """
    path = index_dir() / "index.sqlite"
    if not path.exists():
        raise AssetMissingError(
            f"the search index is not built ({path}): run `lwm setup` "
            "(or `python -m lwm.domains.search.index`)")
    return path


def build_index(force: bool = False) -> Path:
    """Build the index (once; ``force`` rebuilds) and return its path.

    Written to a temporary file beside the target and renamed into place, so a crashed or
    concurrent build never leaves a half-written index. Takes about a minute on 2 cores.

    Raises:
        AssetMissingError: the corpus package is not installed, or ``markdownify`` is missing.
    """
    target = index_dir() / "index.sqlite"
    if target.exists() and not force:
        return target
    try:
        from bs4 import BeautifulSoup  # noqa: F401  (markdownify's parser)
        from markdownify import MarkdownConverter  # noqa: F401
    except ImportError:
        raise AssetMissingError("building the search index needs markdownify: pip install markdownify") from None
    root = CORPUS_DIR.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    for p in (lwm_home(), lwm_home() / "search", target.parent):
        p.chmod(0o755)  # the sandboxes' unprivileged users read it
    t0 = time.monotonic()
    fd, tmp = tempfile.mkstemp(prefix=".index-", suffix=".sqlite", dir=target.parent)
    os.close(fd)
    try:
        db = sqlite3.connect(tmp)
        db.executescript(
            """
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
            CREATE TABLE pages(id INTEGER PRIMARY KEY, path TEXT UNIQUE, url TEXT UNIQUE,
                               title TEXT, date TEXT, markdown TEXT);
            CREATE VIRTUAL TABLE pages_fts USING fts5(
                title, body, tokenize = 'porter unicode61 remove_diacritics 2');
            """
        )
        files = sorted(p for p in root.rglob("*.html")
                       if not p.relative_to(root).parts[0].startswith("_") and not _SKIP.match(p.name))
        rels = [p.relative_to(root).as_posix() for p in files]
        # Conversion (BeautifulSoup + markdownify) is the slow part: one process per core.
        with ProcessPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
            pages = pool.map(_convert_file, [str(root)] * len(rels), rels, chunksize=8)
            n = 0
            for rel, page in zip(rels, pages):
                if page is None:
                    continue
                title, date, markdown, text = page
                n += 1
                db.execute("INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?)",
                           (n, rel, BASE_URL + rel, title, date, markdown))
                db.execute("INSERT INTO pages_fts(rowid, title, body) VALUES (?, ?, ?)", (n, title, text))
        meta = {"corpus": "python3-doc", "package": CORPUS_PACKAGE, "version": corpus_version(),
                "base_url": BASE_URL, "pages": str(n), "format": str(INDEX_FORMAT),
                "build_seconds": f"{time.monotonic() - t0:.1f}"}
        db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
        db.execute("INSERT INTO pages_fts(pages_fts) VALUES ('optimize')")
        db.commit()
        db.execute("VACUUM")
        db.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _convert_file(root: str, rel: str) -> tuple[str, str, str, str] | None:
    path = Path(root) / rel
    mtime = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc).date().isoformat()
    return convert_page(path.read_text(encoding="utf-8", errors="replace"), rel, mtime)


def convert_page(html: str, rel: str, fallback_date: str) -> tuple[str, str, str, str] | None:
    """One Sphinx page → ``(title, ISO date, Markdown body, plain text)``; None if it has no body.

    The date is the page's "Last updated on …" footer, else ``fallback_date``.
    """
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    body = soup.select_one('div.body[role="main"]') or soup.select_one("div.body")
    if body is None:
        return None
    title = soup.title.get_text(" ", strip=True) if soup.title else rel
    m = _UPDATED.search(soup.get_text(" "))
    date = dt.datetime.strptime(m.group(1), "%B %d, %Y").date().isoformat() if m else fallback_date
    # Permalink pilcrows, line numbers and images say nothing in text.
    for tag in body.select("a.headerlink, span.linenos, img, script, style"):
        tag.decompose()
    page_url = BASE_URL + rel
    for a in body.find_all("a", href=True):
        a["href"] = urljoin(page_url, a["href"])
        a.attrs.pop("title", None)
    markdown = MarkdownConverter(heading_style="ATX", bullets="-", code_language="", strip=["img"]).convert_soup(body)
    markdown = "\n".join(line.rstrip() for line in markdown.splitlines())
    markdown = _BLANKS.sub("\n\n", markdown).strip() + "\n"
    # Code and signatures are split into highlighting spans: glue them back for the text.
    for tag in body.find_all(["pre", "code", "dt"]):
        tag.string = tag.get_text("")
    # One line of text for snippets: inline tags add spaces before punctuation; drop them.
    text = re.sub(r"\s+", " ", body.get_text(" ")).strip()
    text = re.sub(r" ([,.;:!?)\]])", r"\1", re.sub(r"([(\[]) ", r"\1", text))
    return title, date, markdown, text


if __name__ == "__main__":  # python -m lwm.domains.search.index [--force]
    import sys

    t = time.monotonic()
    p = build_index(force="--force" in sys.argv)
    print(f"{p} ({p.stat().st_size / 1e6:.1f} MB, {time.monotonic() - t:.1f} s)")
