"""Tokens of agent backends: one per backend, stored as a sha256 only, shown once."""

import hashlib
import hmac
import secrets
import time
from typing import Any, Dict, Optional

from potato.store import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_tokens (
    backend TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    issued_at REAL NOT NULL,
    last_seen REAL,
    agent_host TEXT,
    agent_version TEXT
);
"""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class AgentTokens:
    def __init__(self, store: Store):
        self.store = store
        store.conn().executescript(SCHEMA)

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

    def seen(self, backend: str, host: Optional[str], version: Optional[str]) -> None:
        with self.store.tx() as db:
            db.execute("UPDATE agent_tokens SET last_seen=?, agent_host=?, agent_version=? "
                       "WHERE backend=?", (time.time(), host, version, backend))

    def record(self, backend: str) -> Optional[Dict[str, Any]]:
        row = self.store.conn().execute("SELECT * FROM agent_tokens WHERE backend=?",
                                        (backend,)).fetchone()
        return dict(row) if row else None
