"""Where ``lwm`` keeps its files.

``$LWM_HOME`` holds what ``lwm setup`` installs (npm MCP servers, the sandbox's Python
packages, the search index, the PostgreSQL template), cached models (dequantized or
merged copies of the embedded model; of the merged ones only the most recently used are
kept, :data:`lwm.models.gguf_merge.KEEP_MERGED`) and tokenizers. Run directories are the user's
(``--out``, default ``runs/<timestamp>``).
"""

from __future__ import annotations

import os
import stat
from datetime import datetime
from pathlib import Path

from lwm.errors import UnsafePathError


def lwm_home() -> Path:
    """Where ``lwm`` installs tools and caches models: ``$LWM_HOME``; else ``~/.cache/lwm``
    when every directory above it lets others in, else ``/var/tmp/lwm-<uid>``
    (:func:`own_directory`: created safely, refused when someone else could have prepared it).

    The sandboxes run as other, unprivileged users: they must be able to reach the
    tools, and a home directory of mode 0700 (root's, Debian 12's default) keeps them out.

    Raises:
        UnsafePathError: the ``/var/tmp`` fallback is unsafe to use.
    """
    if os.environ.get("LWM_HOME"):
        return Path(os.environ["LWM_HOME"])
    cache = Path.home() / ".cache" / "lwm"
    if all(os.stat(p).st_mode & 0o001 for p in cache.parents if p.exists()):
        return cache
    return own_directory(Path(f"/var/tmp/lwm-{os.getuid()}"))


def own_directory(path: Path) -> Path:
    """``path``, created (mode 0755) when missing, in a shared directory such as
    ``/var/tmp`` where anyone may have created it first. What lwm keeps there (the tools the
    sandboxes run, the models it loads) must be this user's alone.

    Raises:
        UnsafePathError: ``path`` is a symbolic link, not a directory, another user's, or
            writable by its group or by others (the message says how to fix it).
    """
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        problem = "a symbolic link"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "not a directory"
    elif st.st_uid != os.getuid():
        problem = f"owned by another user (uid {st.st_uid})"
    elif st.st_mode & 0o022:
        problem = f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    else:
        return path
    raise UnsafePathError(f"{path} is {problem}: lwm will not keep its tools and models there. Set LWM_HOME to a "
                          f"directory of your own (e.g. export LWM_HOME=$HOME/lwm-home), or remove {path} if you "
                          "did not create it")


def run_dir(kind: str = "") -> Path:
    """A fresh default run directory: ``runs/<timestamp>`` (``/<kind>`` below it when given)."""
    base = Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    return base / kind if kind else base
