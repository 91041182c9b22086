"""The project's SQLite store: items, annotators, labels, sessions and model predictions.

One file (``<output_annotation_dir>/potato.db``) in WAL mode with ``synchronous=FULL``: a write
is on disk when its transaction commits, so a label acknowledged to the browser survives a crash
or ``kill -9`` of the server. Each thread gets its own connection; SQLite serialises writers and
``busy_timeout`` makes them wait their turn instead of failing.

Labels are stored as JSON, each the value its scheme's kind checked (``potato.schemes``): a
string for ``radio``, a list of strings for ``multiselect``, a list of span objects for ``span``,
a number for ``likert``, ``slider`` and ``number``, a string for ``text``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    data TEXT NOT NULL,            -- the item's JSON record as read from its data file
    position INTEGER NOT NULL,     -- order in which annotators see it
    active INTEGER NOT NULL DEFAULT 1  -- 0: gone from the data files (kept: it has labels)
);
DROP INDEX IF EXISTS items_position;  -- (active, position): items_order covers it
CREATE INDEX IF NOT EXISTS items_order ON items(active, position, id);
CREATE TABLE IF NOT EXISTS annotators (
    name TEXT PRIMARY KEY,
    position INTEGER NOT NULL DEFAULT 0,   -- where they resume
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS annotations (
    item_id TEXT NOT NULL,
    annotator TEXT NOT NULL,
    scheme TEXT NOT NULL,
    label TEXT NOT NULL,           -- JSON: "positive" or ["a", "b"]
    updated_at REAL NOT NULL,
    PRIMARY KEY (item_id, annotator, scheme)
);
CREATE INDEX IF NOT EXISTS annotations_annotator ON annotations(annotator);
CREATE TABLE IF NOT EXISTS predictions (
    item_id TEXT NOT NULL,
    scheme TEXT NOT NULL,
    label TEXT NOT NULL,           -- JSON, like annotations.label
    confidence REAL NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (item_id, scheme)
);
CREATE TABLE IF NOT EXISTS run_predictions (   -- every successful run's, while the run is kept
    run_id TEXT NOT NULL,
    item_id TEXT NOT NULL,
    scheme TEXT NOT NULL,
    label TEXT NOT NULL,
    confidence REAL NOT NULL,
    PRIMARY KEY (run_id, scheme, item_id)
);
CREATE TABLE IF NOT EXISTS in_use (scheme TEXT PRIMARY KEY, run_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    token_hash TEXT PRIMARY KEY,   -- sha256 of the cookie value; the value itself is not stored
    kind TEXT NOT NULL,            -- 'annotator' or 'admin'
    name TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS crowd_ids (   -- what a crowd worker's link carried (config/crowd.py)
    annotator TEXT NOT NULL,
    name TEXT NOT NULL,            -- session_id, study_id or a captured parameter's name
    value TEXT NOT NULL,           -- checked at arrival: printable ASCII, at most 200
    updated_at REAL NOT NULL,
    PRIMARY KEY (annotator, name)
);
"""


MAX_SESSIONS_PER_NAME = 20


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class Store:
    """Thread-safe access to the project database: one connection per thread, which a request
    thread gives back with ``release()`` when its request is done (no connection outlives it).

    The database and its -wal/-shm files are created 0600 (SQLite gives the journal files the
    database's own mode), in a directory of mode 0700."""

    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
        if not os.path.exists(path):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        self._local = threading.local()
        self._all: List[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.conn().executescript(SCHEMA)

    # -- connections ---------------------------------------------------------------------------
    def conn(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                 check_same_thread=False)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA busy_timeout=30000")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
            with self._lock:
                self._all.append(db)
        return db

    def release(self) -> None:
        """Close this thread's connection (a request thread, when its request is done)."""
        db = getattr(self._local, "db", None)
        if db is None:
            return
        self._local.db = None
        with self._lock:
            if db in self._all:
                self._all.remove(db)
        db.close()

    def open_connections(self) -> int:
        with self._lock:
            return len(self._all)

    def tx(self):
        """A write transaction: ``with store.tx() as db: ...`` commits on success."""
        return _Tx(self.conn())

    def close(self) -> None:
        with self._lock:
            for db in self._all:
                try:
                    db.close()
                except sqlite3.Error:
                    pass  # closing a connection of a thread that already ended
            self._all.clear()
        self._local = threading.local()

    # -- items ---------------------------------------------------------------------------------
    def sync_items(self, items: Iterable[Tuple[str, str, Dict[str, Any]]]) -> Dict[str, int]:
        """Make the active items exactly those given, in that order, in one transaction.

        New items are added, changed texts updated; items that left the data files become
        inactive (never deleted, so no label is ever lost).
        """
        counts = {"added": 0, "updated": 0, "deactivated": 0, "total": 0}
        with self.tx() as db:
            existing = {r["id"]: (r["text"], r["data"], r["position"], r["active"])
                        for r in db.execute("SELECT id, text, data, position, active FROM items")}
            seen = set()
            for pos, (item_id, text, record) in enumerate(items):
                seen.add(item_id)
                data = json.dumps(record, ensure_ascii=False, sort_keys=True)
                old = existing.get(item_id)
                if old is None:
                    db.execute("INSERT INTO items(id, text, data, position, active) "
                               "VALUES (?, ?, ?, ?, 1)", (item_id, text, data, pos))
                    counts["added"] += 1
                elif old != (text, data, pos, 1):
                    db.execute("UPDATE items SET text=?, data=?, position=?, active=1 WHERE id=?",
                               (text, data, pos, item_id))
                    counts["updated"] += old[:2] != (text, data)
            for item_id, old in existing.items():
                if item_id not in seen and old[3]:
                    db.execute("UPDATE items SET active=0 WHERE id=?", (item_id,))
                    counts["deactivated"] += 1
            counts["total"] = len(seen)
        return counts

    def item_count(self) -> int:
        return self.conn().execute("SELECT COUNT(*) FROM items WHERE active=1").fetchone()[0]

    def item_at(self, index: int) -> Optional[sqlite3.Row]:
        return self.conn().execute(
            "SELECT id, text, data FROM items WHERE active=1 ORDER BY position LIMIT 1 OFFSET ?",
            (index,)).fetchone()

    def position_of(self, item_id: str) -> Optional[int]:
        """An active item's place in data-file order, from 0 (None: no such active item)."""
        row = self.conn().execute("SELECT position FROM items WHERE id=? AND active=1",
                                  (item_id,)).fetchone()
        if row is None:
            return None
        return self.conn().execute("SELECT COUNT(*) FROM items WHERE active=1 AND position < ?",
                                   (row[0],)).fetchone()[0]

    def item(self, item_id: str) -> Optional[sqlite3.Row]:
        return self.conn().execute("SELECT id, text, data, active FROM items WHERE id=?",
                                   (item_id,)).fetchone()

    def item_ids(self) -> List[str]:
        return [r[0] for r in self.conn().execute(
            "SELECT id FROM items WHERE active=1 ORDER BY position")]

    def all_items(self) -> List[sqlite3.Row]:
        """Every item, active ones first in order, then inactive ones that still hold labels."""
        return self.conn().execute(
            "SELECT id, text, data, active FROM items ORDER BY active DESC, position").fetchall()

    # -- annotators and labels -----------------------------------------------------------------
    def ensure_annotator(self, name: str) -> sqlite3.Row:
        with self.tx() as db:
            db.execute("INSERT OR IGNORE INTO annotators(name, position, created_at) "
                       "VALUES (?, 0, ?)", (name, time.time()))
        return self.conn().execute("SELECT * FROM annotators WHERE name=?", (name,)).fetchone()

    def set_crowd_ids(self, name: str, ids: Dict[str, str]) -> None:
        """A crowd worker's platform ids, as their latest arrival gave them (a name the new
        link does not carry keeps its earlier value)."""
        now = time.time()
        with self.tx() as db:
            for key, value in ids.items():
                db.execute("INSERT OR REPLACE INTO crowd_ids(annotator, name, value, "
                           "updated_at) VALUES (?, ?, ?, ?)", (name, key, value, now))

    def crowd_ids(self, name: str) -> Dict[str, str]:
        return {r[0]: r[1] for r in self.conn().execute(
            "SELECT name, value FROM crowd_ids WHERE annotator=? ORDER BY name", (name,))}

    def all_crowd_ids(self) -> Dict[str, Dict[str, str]]:
        """Every crowd worker's platform ids: {annotator: {name: value}}."""
        out: Dict[str, Dict[str, str]] = {}
        for r in self.conn().execute("SELECT annotator, name, value FROM crowd_ids "
                                     "ORDER BY annotator, name"):
            out.setdefault(r[0], {})[r[1]] = r[2]
        return out

    def has_annotator(self, name: str) -> bool:
        return self.conn().execute("SELECT 1 FROM annotators WHERE name=?",
                                   (name,)).fetchone() is not None

    def set_position(self, name: str, position: int) -> None:
        with self.tx() as db:
            db.execute("UPDATE annotators SET position=? WHERE name=?", (position, name))

    def save_labels(self, annotator: str, item_id: str, labels: Dict[str, Any],
                    position: Optional[int] = None) -> None:
        """Store one annotator's labels for one item (and where they now are), atomically."""
        now = time.time()
        with self.tx() as db:
            db.execute("INSERT OR IGNORE INTO annotators(name, position, created_at) "
                       "VALUES (?, 0, ?)", (annotator, now))
            for scheme, label in labels.items():
                if label is None:  # [] is kept: a span scheme where nothing was marked
                    db.execute("DELETE FROM annotations WHERE item_id=? AND annotator=? AND "
                               "scheme=?", (item_id, annotator, scheme))
                else:
                    db.execute("INSERT OR REPLACE INTO annotations(item_id, annotator, scheme, "
                               "label, updated_at) VALUES (?, ?, ?, ?, ?)",
                               (item_id, annotator, scheme, json.dumps(label), now))
            if position is not None:
                db.execute("UPDATE annotators SET position=? WHERE name=?", (position, annotator))

    def import_labels(self, annotator: str, rows: List[Tuple[str, str, Any]]) -> None:
        """Import (item_id, scheme, label) rows for one annotator: all of them or none."""
        now = time.time()
        with self.tx() as db:
            db.execute("INSERT OR IGNORE INTO annotators(name, position, created_at) "
                       "VALUES (?, 0, ?)", (annotator, now))
            db.executemany("INSERT OR REPLACE INTO annotations(item_id, annotator, scheme, label, "
                           "updated_at) VALUES (?, ?, ?, ?, ?)",
                           [(i, annotator, s, json.dumps(lab), now) for i, s, lab in rows])

    def first_unlabelled(self, annotator: str) -> int:
        """The position of the first active item ``annotator`` has not labelled (the item
        count when every item is labelled)."""
        row = self.conn().execute(
            "SELECT COUNT(*) FROM items WHERE active=1 AND position < COALESCE((SELECT MIN("
            "i.position) FROM items i WHERE i.active=1 AND NOT EXISTS (SELECT 1 FROM "
            "annotations a WHERE a.item_id=i.id AND a.annotator=?)), 1e18)",
            (annotator,)).fetchone()
        return row[0]

    def labels_of(self, annotator: str, item_id: str) -> Dict[str, Any]:
        return {r["scheme"]: json.loads(r["label"]) for r in self.conn().execute(
            "SELECT scheme, label FROM annotations WHERE annotator=? AND item_id=?",
            (annotator, item_id))}

    def labelled_count(self, annotator: str) -> int:
        return self.conn().execute(
            "SELECT COUNT(DISTINCT a.item_id) FROM annotations a JOIN items i ON i.id=a.item_id "
            "WHERE a.annotator=? AND i.active=1", (annotator,)).fetchone()[0]

    def item_labels(self, item_id: str) -> Dict[str, List[Dict[str, Any]]]:
        out: Dict[str, List[Dict[str, Any]]] = {}
        for r in self.conn().execute("SELECT scheme, annotator, label FROM annotations "
                                     "WHERE item_id=? ORDER BY scheme, annotator", (item_id,)):
            out.setdefault(r["scheme"], []).append(
                {"annotator": r["annotator"], "label": json.loads(r["label"])})
        return out

    def all_labels(self) -> Dict[str, Dict[str, List[Dict[str, Any]]]]:
        """item id -> scheme -> [{annotator, label}], for exports and bundles."""
        out: Dict[str, Dict[str, List[Dict[str, Any]]]] = {}
        for r in self.conn().execute("SELECT item_id, scheme, annotator, label FROM annotations "
                                     "ORDER BY item_id, scheme, annotator"):
            out.setdefault(r["item_id"], {}).setdefault(r["scheme"], []).append(
                {"annotator": r["annotator"], "label": json.loads(r["label"])})
        return out

    def annotation_count(self) -> int:
        return self.conn().execute("SELECT COUNT(*) FROM annotations").fetchone()[0]

    def annotator_stats(self) -> List[sqlite3.Row]:
        return self.conn().execute(
            "SELECT n.name, COUNT(DISTINCT a.item_id) AS items FROM annotators n "
            "LEFT JOIN annotations a ON a.annotator=n.name GROUP BY n.name ORDER BY n.name"
        ).fetchall()

    # -- predictions ---------------------------------------------------------------------------
    def item_predictions(self, item_id: str) -> Dict[str, Dict[str, Any]]:
        return {r["scheme"]: {"label": json.loads(r["label"]), "confidence": r["confidence"],
                              "run_id": r["run_id"]}
                for r in self.conn().execute("SELECT scheme, label, confidence, run_id FROM "
                                             "predictions WHERE item_id=?", (item_id,))}

    def all_predictions(self) -> Dict[str, Dict[str, Dict[str, Any]]]:
        out: Dict[str, Dict[str, Dict[str, Any]]] = {}
        for r in self.conn().execute("SELECT item_id, scheme, label, confidence, run_id "
                                     "FROM predictions"):
            out.setdefault(r["item_id"], {})[r["scheme"]] = {
                "label": json.loads(r["label"]), "confidence": r["confidence"],
                "run_id": r["run_id"]}
        return out

    # -- small settings ------------------------------------------------------------------------
    def meta_get(self, key: str, default: Optional[str] = None) -> Optional[str]:
        row = self.conn().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def meta_set(self, key: str, value: str) -> None:
        with self.tx() as db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # -- sessions ------------------------------------------------------------------------------
    def add_session(self, token: str, kind: str, name: str, ttl_s: float) -> None:
        now = time.time()
        with self.tx() as db:
            db.execute("DELETE FROM sessions WHERE expires_at < ?", (now,))
            db.execute("INSERT INTO sessions(token_hash, kind, name, expires_at) VALUES (?,?,?,?)",
                       (token_hash(token), kind, name, now + ttl_s))
            # at most MAX_SESSIONS_PER_NAME per name: logging in again and again grows nothing
            db.execute("DELETE FROM sessions WHERE kind=? AND name=? AND token_hash NOT IN "
                       "(SELECT token_hash FROM sessions WHERE kind=? AND name=? ORDER BY "
                       "expires_at DESC LIMIT ?)", (kind, name, kind, name,
                                                    MAX_SESSIONS_PER_NAME))

    def session(self, token: str, kind: str) -> Optional[str]:
        row = self.conn().execute(
            "SELECT name FROM sessions WHERE token_hash=? AND kind=? AND expires_at > ?",
            (token_hash(token), kind, time.time())).fetchone()
        return row["name"] if row else None

    def drop_session(self, token: str) -> None:
        with self.tx() as db:
            db.execute("DELETE FROM sessions WHERE token_hash=?", (token_hash(token),))


class _Tx:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.db.execute("COMMIT")
        else:
            self.db.execute("ROLLBACK")
