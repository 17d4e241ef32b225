"""Where ``lwm`` keeps its files.

``$LWM_HOME`` holds what ``lwm setup`` installs (npm MCP servers, the sandbox's Python
packages, the search index, the PostgreSQL template), cached models (dequantized or
merged copies of the embedded model) and tokenizers. Run directories are the user's
(``--out``, default ``runs/<timestamp>``).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path


def lwm_home() -> Path:
    """Where ``lwm`` installs tools and caches models: ``$LWM_HOME``; else ``~/.cache/lwm``
    when every directory above it lets others in, else ``/var/tmp/lwm-<uid>``.

    The sandboxes run as other, unprivileged users: they must be able to reach the
    tools, and a home directory of mode 0700 (root's, Debian 12's default) keeps them out.
    """
    if os.environ.get("LWM_HOME"):
        return Path(os.environ["LWM_HOME"])
    cache = Path.home() / ".cache" / "lwm"
    if all(os.stat(p).st_mode & 0o001 for p in cache.parents if p.exists()):
        return cache
    return Path(f"/var/tmp/lwm-{os.getuid()}")


def run_dir(kind: str = "") -> Path:
    """A fresh default run directory: ``runs/<timestamp>`` (``/<kind>`` below it when given)."""
    base = Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    return base / kind if kind else base
