"""Tokens of agent backends: one per backend, stored as a sha256 only, shown once."""

import hashlib
import hmac
import secrets
import sqlite3
import time
from typing import Any, Dict, Optional

from potato.project.store import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_tokens (
    backend TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    issued_at REAL NOT NULL,
    last_seen REAL,
    agent_host TEXT,
    agent_version TEXT,
    poll_interval_s REAL           -- how often the agent said it polls (agents from 2.15)
);
"""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class AgentTokens:
    def __init__(self, store: Store):
        self.store = store
        db = store.conn()
        db.executescript(SCHEMA)
        if "poll_interval_s" not in {r[1] for r in db.execute("PRAGMA table_info(agent_tokens)")}:
            try:  # a store from before agents said their poll interval
                with store.tx() as tx:
                    tx.execute("ALTER TABLE agent_tokens ADD COLUMN poll_interval_s REAL")
            except sqlite3.OperationalError as e:
                if "duplicate column" not in str(e):  # another process added it first
                    raise

    def issue(self, backend: str) -> str:
        """A new token for ``backend``; the previous one stops working at once."""
        token = secrets.token_urlsafe(32)
        with self.store.tx() as db:
            db.execute("INSERT OR REPLACE INTO agent_tokens(backend, token_hash, issued_at) "
                       "VALUES (?, ?, ?)", (backend, _hash(token), time.time()))
        return token

    def verify(self, backend: str, token: str) -> bool:
        row = self.store.conn().execute("SELECT token_hash FROM agent_tokens WHERE backend=?",
                                        (backend,)).fetchone()
        return bool(row) and hmac.compare_digest(row[0], _hash(token))

    def seen(self, backend: str, host: Optional[str], version: Optional[str],
             poll_interval_s: Optional[float] = None) -> None:
        with self.store.tx() as db:
            db.execute("UPDATE agent_tokens SET last_seen=?, agent_host=?, agent_version=?, "
                       "poll_interval_s=? WHERE backend=?",
                       (time.time(), host, version, poll_interval_s, backend))

    def record(self, backend: str) -> Optional[Dict[str, Any]]:
        row = self.store.conn().execute("SELECT * FROM agent_tokens WHERE backend=?",
                                        (backend,)).fetchone()
        return dict(row) if row else None
