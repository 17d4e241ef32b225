"""A content-addressed cache of observations, for the ``replay`` and ``hybrid`` backends.

The key is a SHA-256 of everything the observation depends on: domain, system prompt,
the history of (action, observation) pairs, the current action, and the source (``real``
or the model's name with its sampling settings). A hit replays the same observation for
the same situation; any difference (another model, temperature, one history character)
is a miss. Stored in SQLite (WAL), safe to share between threads and processes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from lwm.errors import LwmError

REAL_SOURCE = "real"


def cache_key(domain: str, system_prompt: str, history: list[tuple[str, str]], action: str,
              source: str = REAL_SOURCE, sampling: dict[str, Any] | None = None) -> str:
    """The hex SHA-256 key of one situation (see the module docstring).

    Args:
        domain: e.g. ``db``.
        system_prompt: the episode's world-model system prompt.
        history: earlier ``(action, observation)`` pairs, the initial observation first as
            ``("", initial_observation)``.
        action: the current action.
        source: ``real``, or the world model's name.
        sampling: the world model's decoding settings (``None`` for real observations).
    """
    payload = json.dumps([domain, system_prompt, history, action, source, sampling],
                         sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


class ReplayCache:
    """Observations by :func:`cache_key`, in a SQLite file.

    Args:
        path: the database file (created with its directory).

    Raises:
        LwmError: the file exists and is not a replay cache.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS observations (key TEXT PRIMARY KEY, "
                             "observation TEXT NOT NULL, provenance TEXT NOT NULL, created REAL NOT NULL)")
            self._db.commit()
        except sqlite3.DatabaseError as e:
            raise LwmError(f"{self.path}: not a replay cache ({e})") from None

    def get(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """``(observation, provenance)`` for ``key``, or ``None``."""
        with self._lock:
            row = self._db.execute("SELECT observation, provenance FROM observations WHERE key = ?", (key,)).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def put(self, key: str, observation: str, provenance: dict[str, Any]) -> None:
        """Store an observation (the first one stored for a key wins)."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO observations VALUES (?, ?, ?, ?)",
                             (key, observation, json.dumps(provenance, sort_keys=True), time.time()))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM observations").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
