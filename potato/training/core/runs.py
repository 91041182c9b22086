"""Training runs in the project's SQLite store: the persisted queue and every run's record."""

import json
import sqlite3
import time
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional

from potato.project.store import Store
from potato.training.reports.writeback import WriteBack

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT UNIQUE NOT NULL,
    trainer TEXT NOT NULL,
    schemas TEXT NOT NULL,         -- JSON list
    backend TEXT NOT NULL,
    params TEXT NOT NULL,          -- JSON object, every declared param resolved
    status TEXT NOT NULL,          -- queued, running, success, error, cancelled
    step TEXT NOT NULL DEFAULT '',
    error TEXT,
    metrics TEXT,                  -- JSON
    holdout TEXT,                  -- JSON {n, accuracy, macro_f1}
    writeback TEXT,                -- JSON {written, below_min_confidence, ...}
    progress TEXT,                 -- JSON of the latest progress event
    history TEXT NOT NULL DEFAULT '[]',  -- JSON list of metric events, for the chart
    ran_on TEXT,                   -- where it executed, in words (intake.ran_on)
    placement TEXT,                -- JSON: the worker's where event (host, gpus, SLURM job)
    warnings TEXT,                 -- JSON list: warnings the run reported
    artifact_uri TEXT,
    pinned INTEGER NOT NULL DEFAULT 0,  -- stays in use whatever the policy; files kept
    pruned_at REAL,                -- when retain_runs deleted its model files
    pruned_reason TEXT,            -- why, in a sentence
    auto INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    heartbeat_at REAL,
    remote_token TEXT,             -- sha256 of an agent-backend run's token (re-attach on restart)
    remote_host TEXT,              -- where that agent said it runs
    name TEXT,                     -- the admin's name for the run (boundary: run_label)
    note TEXT,                     -- the admin's note on it
    labelled INTEGER               -- labelled items in its bundle (the learning curve's x)
);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status, seq);
"""

TERMINAL = ("success", "error", "cancelled")
JSON_FIELDS = ("schemas", "params", "metrics", "holdout", "writeback", "progress", "history",
               "placement", "warnings")
ADDED_COLUMNS = (("placement", "TEXT"), ("warnings", "TEXT"),  # stores made before 2.14
                 ("pinned", "INTEGER NOT NULL DEFAULT 0"), ("pruned_at", "REAL"),
                 ("pruned_reason", "TEXT"),  # stores made before pinning and pruning
                 ("remote_token", "TEXT"), ("remote_host", "TEXT"),  # and re-attaching
                 ("name", "TEXT"), ("note", "TEXT"),  # and names and notes
                 ("labelled", "INTEGER"))  # and the learning curve


@dataclass
class Run:
    """One run's record, as read from the store: a field per column of ``runs`` (JSON columns
    decoded, flags as booleans) and ``in_use``, the schemes it is in use for. Code below the
    store reads these attributes; ``view.RunView.from_run`` alone turns a Run into what
    the API returns and the pages show."""

    seq: int
    run_id: str
    trainer: str
    schemas: List[str]
    backend: str
    params: Dict[str, Any]
    status: str
    step: str = ""
    error: Optional[str] = None
    metrics: Optional[Dict[str, Any]] = None
    holdout: Optional[Dict[str, Any]] = None
    writeback: Optional[WriteBack] = None
    progress: Optional[Dict[str, Any]] = None
    history: List[Dict[str, Any]] = field(default_factory=list)
    ran_on: Optional[str] = None
    placement: Optional[Dict[str, Any]] = None
    warnings: Optional[List[str]] = None
    artifact_uri: Optional[str] = None
    pinned: bool = False
    pruned_at: Optional[float] = None
    pruned_reason: Optional[str] = None
    auto: bool = False
    cancel_requested: bool = False
    created_at: float = 0.0
    started_at: Optional[float] = None
    finished_at: Optional[float] = None
    heartbeat_at: Optional[float] = None
    remote_token: Optional[str] = None
    remote_host: Optional[str] = None
    name: Optional[str] = None
    note: Optional[str] = None
    labelled: Optional[int] = None
    in_use: List[str] = field(default_factory=list)


COLUMNS = tuple(f.name for f in fields(Run) if f.name != "in_use")


def _column(k: str, v: Any) -> Any:
    """A field's value as its column holds it: JSON for the JSON fields (a typed record by its
    ``as_dict``)."""
    if k not in JSON_FIELDS or v is None:
        return v
    return json.dumps(v.as_dict() if hasattr(v, "as_dict") else v)


def _row(r, in_use: Dict[str, List[str]]) -> Optional[Run]:
    """A row of ``runs`` as a Run (None for no row); ``in_use``: in_use_schemes()."""
    if r is None:
        return None
    d = {k: r[k] for k in COLUMNS}
    for k in JSON_FIELDS:
        if d[k] is not None:
            d[k] = json.loads(d[k])
    if d["writeback"] is not None:
        d["writeback"] = WriteBack.from_dict(d["writeback"])
    for k in ("cancel_requested", "auto", "pinned"):
        d[k] = bool(d[k])
    return Run(in_use=list(in_use.get(d["run_id"], [])), **d)


class RunStore:
    def __init__(self, store: Store):
        self.store = store
        db = store.conn()
        db.executescript(SCHEMA)
        have = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
        for name, kind in ADDED_COLUMNS:
            if name not in have:
                try:
                    with store.tx() as tx:
                        tx.execute("ALTER TABLE runs ADD COLUMN %s %s" % (name, kind))
                except sqlite3.OperationalError as e:
                    if "duplicate column" not in str(e):  # another process added it first
                        raise

    def create(self, trainer, schemas, backend, params, auto=False) -> Run:
        with self.store.tx() as db:
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM runs").fetchone()[0]
            run_id = "r%d" % seq
            db.execute("INSERT INTO runs(seq, run_id, trainer, schemas, backend, params, status, "
                       "step, created_at, auto) VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (seq, run_id, trainer, json.dumps(schemas), backend, json.dumps(params),
                        "queued", "waiting for its turn", time.time(), int(auto)))
        return self.get(run_id)

    def get(self, run_id) -> Optional[Run]:
        return _row(self.store.conn().execute("SELECT * FROM runs WHERE run_id=?",
                                              (run_id,)).fetchone(), self.in_use_schemes())

    def list(self, limit=200) -> List[Run]:
        in_use = self.in_use_schemes()
        return [_row(r, in_use) for r in self.store.conn().execute(
            "SELECT * FROM runs ORDER BY seq DESC LIMIT ?", (limit,))]

    def find(self, limit=1000, since=None, until=None, **equal) -> List[Run]:
        """The newest ``limit`` runs whose columns in ``equal`` (status, trainer, backend) have
        those values and that were queued in [since, until), newest first."""
        where, values = [], []
        for column in ("status", "trainer", "backend"):
            if equal.get(column):
                where.append("%s=?" % column)
                values.append(equal[column])
        for op, t in ((">=", since), ("<", until)):
            if t is not None:
                where.append("created_at %s ?" % op)
                values.append(t)
        in_use = self.in_use_schemes()
        return [_row(r, in_use) for r in self.store.conn().execute(
            "SELECT * FROM runs%s ORDER BY seq DESC LIMIT ?" % (
                " WHERE " + " AND ".join(where) if where else ""), values + [limit])]

    def distinct(self, column) -> List[str]:
        """The trainers or backends runs used (the runs page's filter choices)."""
        if column not in ("trainer", "backend"):
            raise ValueError(column)
        return [r[0] for r in self.store.conn().execute(
            "SELECT DISTINCT %s FROM runs ORDER BY %s" % (column, column))]

    def with_status(self, *statuses) -> List[Run]:
        marks = ",".join("?" * len(statuses))
        rows = self.store.conn().execute(
            "SELECT * FROM runs WHERE status IN (%s) ORDER BY seq" % marks, statuses).fetchall()
        in_use = self.in_use_schemes() if rows else {}
        return [_row(r, in_use) for r in rows]

    def update(self, run_id, **fields):
        """Change a live (queued or running) run's fields; never its status (``transition``
        and ``finish`` own that) and never a finished run's. Returns whether it changed."""
        if "status" in fields:
            raise ValueError("status changes go through transition() or finish()")
        if not fields:
            return False
        sets, values = [], []
        for k, v in fields.items():
            sets.append("%s=?" % k)
            values.append(_column(k, v))
        values.append(run_id)
        with self.store.tx() as db:
            cur = db.execute("UPDATE runs SET %s WHERE run_id=? AND status IN ('queued', "
                             "'running')" % ", ".join(sets), values)
            return cur.rowcount == 1

    def transition(self, run_id, from_status, to_status, **fields):
        """Compare-and-set: move the run from ``from_status`` to ``to_status`` (with
        ``fields``) only if it is still in ``from_status``; returns whether it moved."""
        fields["status"] = to_status
        sets = ", ".join("%s=?" % k for k in fields)
        values = [_column(k, v) for k, v in fields.items()]
        with self.store.tx() as db:
            cur = db.execute("UPDATE runs SET %s WHERE run_id=? AND status=?" % sets,
                             values + [run_id, from_status])
            return cur.rowcount == 1

    def finish(self, run_id, status, error=None, **fields):
        """Move a run to a terminal state once; returns False when it already was terminal.
        An agent's run token (its hash) is forgotten: nothing may report for the run now."""
        fields.update(status=status, error=error, finished_at=time.time(), remote_token=None)
        sets = ", ".join("%s=?" % k for k in fields)
        values = [_column(k, v) for k, v in fields.items()]
        with self.store.tx() as db:
            cur = db.execute("UPDATE runs SET %s WHERE run_id=? AND status NOT IN "
                             "('success','error','cancelled')" % sets, values + [run_id])
            return cur.rowcount == 1

    def append_history(self, run_id, *events):
        """Add metric events to a run's chart (the newest 500 are kept), in one transaction."""
        with self.store.tx() as db:
            row = db.execute("SELECT history FROM runs WHERE run_id=?", (run_id,)).fetchone()
            history = json.loads(row[0]) if row else []
            history.extend(events)
            db.execute("UPDATE runs SET history=? WHERE run_id=?", (json.dumps(history[-500:]),
                                                                    run_id))

    def set_label(self, run_id, name, note):
        """Name a run and note on it (checked values: ``run_label.parse``), any status."""
        with self.store.tx() as db:
            db.execute("UPDATE runs SET name=?, note=? WHERE run_id=?", (name or None,
                                                                        note or None, run_id))

    def last_by_trainer(self, trainer) -> Optional[Run]:
        """The newest run of ``trainer`` an admin asked for (automatic runs are left out):
        the Training form's memory of that trainer's params."""
        r = self.store.conn().execute("SELECT * FROM runs WHERE trainer=? AND auto=0 ORDER BY "
                                      "seq DESC LIMIT 1", (trainer,)).fetchone()
        return _row(r, {})

    def last_asked(self) -> Optional[Run]:
        """The newest run an admin asked for (automatic runs are left out): the Training
        form's memory of the backend and trainer last used."""
        r = self.store.conn().execute("SELECT * FROM runs WHERE auto=0 ORDER BY seq DESC "
                                      "LIMIT 1").fetchone()
        return _row(r, {})

    def finished_newest_first(self):
        """(run_id, status, pinned, pruned_at) of every finished run, newest first: what
        retention needs, without the runs' JSON."""
        return [tuple(r) for r in self.store.conn().execute(
            "SELECT run_id, status, pinned, pruned_at FROM runs WHERE status IN "
            "('success','error','cancelled') ORDER BY seq DESC")]

    def last_auto_created(self):
        """When the newest automatic run was queued (None: never)."""
        row = self.store.conn().execute("SELECT created_at FROM runs WHERE auto=1 ORDER BY seq "
                                        "DESC LIMIT 1").fetchone()
        return row[0] if row else None

    def mark_pruned(self, run_id, reason):
        """Record that a finished run's model files were deleted, and why (once)."""
        with self.store.tx() as db:
            db.execute("UPDATE runs SET pruned_at=?, pruned_reason=? WHERE run_id=? AND "
                       "pruned_at IS NULL", (time.time(), reason, run_id))

    def forget_predictions(self, run_ids):
        """Delete the kept predictions of ``run_ids`` (runs retain_runs no longer keeps:
        retention.superseded), never those of a run in use: with them, run_predictions would
        grow by a whole pool's predictions at every retraining, for as long as the server
        runs. Rows deleted."""
        with self.store.tx() as db:
            in_use = {r for (r,) in db.execute("SELECT run_id FROM in_use")}
            return sum(db.execute("DELETE FROM run_predictions WHERE run_id=?", (r,)).rowcount
                       for r in run_ids if r not in in_use)

    def set_pinned(self, run_id, pinned):
        """Pin or unpin a successful run; returns whether the run exists and succeeded."""
        with self.store.tx() as db:
            return db.execute("UPDATE runs SET pinned=? WHERE run_id=? AND status='success'",
                              (int(pinned), run_id)).rowcount == 1

    def pinned(self, run_id):
        row = self.store.conn().execute("SELECT pinned FROM runs WHERE run_id=?",
                                        (run_id,)).fetchone()
        return bool(row and row[0])

    def runs_in_use(self):
        """Runs whose predictions are the items' current model predictions."""
        db = self.store.conn()
        return ({r[0] for r in db.execute("SELECT DISTINCT run_id FROM predictions")}
                | {r[0] for r in db.execute("SELECT run_id FROM in_use")})

    def in_use_schemes(self):
        """{run_id: [schemes it is in use for]}."""
        out = {}
        for scheme, run_id in self.store.conn().execute("SELECT scheme, run_id FROM in_use"):
            out.setdefault(run_id, []).append(scheme)
        return out

    def kept_predictions(self, run_id, scheme):
        return self.store.conn().execute("SELECT COUNT(*) FROM run_predictions WHERE run_id=? "
                                         "AND scheme=?", (run_id, scheme)).fetchone()[0]

    def latest_success(self, scheme, exclude_trainers=()) -> Optional[Run]:
        in_use = self.in_use_schemes()
        for r in self.store.conn().execute("SELECT * FROM runs WHERE status='success' "
                                           "ORDER BY seq DESC"):
            run = _row(r, in_use)
            if scheme in run.schemas and run.trainer not in exclude_trainers:
                return run
        return None


class RequestError(Exception):
    """A run request that cannot be queued; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message
