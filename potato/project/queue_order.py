"""Active learning's order: the model in use ranks the items that still need labels.

A finished run's predictions (checked at the trust boundary) leave, per item, three numbers a
query strategy ranks by — least confidence, margin and entropy, each 0 (sure) to 1 (unsure) —
and, where the trainer gives one, the item's vector (``keep_scores``, table ``rank_scores``).
When a run becomes the model in use for an active-learning scheme, ``reorder`` ranks the items
that need labels by the configured strategy and replaces the order atomically (table
``queue_places``, one generation at a time: the new rows are written in small transactions, then
one write switches to them, so no save waits for a reorder). potato/project/assignment.py hands
items out in this order (``next_place``).

What keeps the order honest and bounded:
- the held-out test split is never chosen by the model: its items (the bundle's own split of
  each item id) are interleaved at their share of the splits, in a random order;
- ``random_sample_percent`` of the ranked places go to items drawn at random;
- ``max_instances_to_reorder`` bounds the ranked head; after it, the cold-start order;
- diversity (and hybrid's share of it) is bounded: potato/project/diversity.py.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import math
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from potato.project import diversity, order_mix
from potato.project.store import Store

TABLES = """CREATE TABLE IF NOT EXISTS rank_scores (
    run_id TEXT NOT NULL,
    scheme TEXT NOT NULL,
    item_id TEXT NOT NULL,
    least REAL NOT NULL,           -- 1 - the top probability (least confidence)
    margin REAL NOT NULL,          -- 1 - (top probability - second)
    entropy REAL NOT NULL,         -- normalised to 0..1
    vector BLOB,                   -- float32, unit length; NULL: the model sent none
    PRIMARY KEY (run_id, scheme, item_id)
);
-- a reorder reads a run's numbers from the index alone (not 100,000 rows with their vectors)
CREATE INDEX IF NOT EXISTS rank_scores_numbers ON rank_scores(run_id, scheme, item_id, least,
                                                              margin, entropy);
CREATE TABLE IF NOT EXISTS queue_places (
    place INTEGER PRIMARY KEY,     -- a generation's places are consecutive, from meta
                                   -- queue_order.first; the order in use: queue_order.gen
    gen INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    score REAL,                    -- the strategy's score (None: not ranked by the model)
    why INTEGER NOT NULL           -- queue_whys.code: how the place was chosen
);
CREATE TABLE IF NOT EXISTS queue_whys (  -- a generation's few distinct reasons
    gen INTEGER NOT NULL,
    code INTEGER NOT NULL,
    why TEXT NOT NULL,             -- {score}: the place's score (why_of)
    PRIMARY KEY (gen, code)
) WITHOUT ROWID;"""

# A store from before queue_places kept each place's reason as its own text, and its rank
# beside a rowid and an index (table queue_order): its order in use moves over once, whole.
# (Without window functions: a system SQLite older than 3.25 runs it too. What the new tables
# hold then is from a newer version run earlier, and the old table is the one in use.)
MIGRATE = """DELETE FROM queue_places;
DELETE FROM queue_whys;
INSERT INTO queue_whys(gen, code, why)
    SELECT x.gen, (SELECT COUNT(*) FROM (SELECT DISTINCT gen, why FROM queue_order) y
                   WHERE y.gen=x.gen AND y.why<=x.why), x.why
    FROM (SELECT DISTINCT gen, why FROM queue_order) x;
INSERT INTO queue_places(gen, item_id, score, why)
    SELECT o.gen, o.item_id, o.score, w.code FROM queue_order o
    JOIN queue_whys w ON w.gen=o.gen AND w.why=o.why ORDER BY o.gen, o.rank;
INSERT OR REPLACE INTO meta(key, value) SELECT 'queue_order.first', COALESCE(MIN(place), 0)
    FROM queue_places WHERE gen=(SELECT CAST(value AS INTEGER) FROM meta
                                 WHERE key='queue_order.gen');
INSERT OR REPLACE INTO meta(key, value) SELECT 'queue_order.next', MAX(
    COALESCE((SELECT MAX(gen) FROM queue_order), 0),
    COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key='queue_order.next'), 0));
DROP TABLE queue_order;"""

CHUNK = 10000       # rows per write transaction
WHY_TEST = "test split: random order (the model never chooses held-out items)"


def ensure(store: Store) -> None:
    db = store.conn()
    db.executescript(TABLES)
    if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='queue_order'"
                  ).fetchone():
        with store.tx() as tx:
            if tx.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND "
                          "name='queue_order'").fetchone():  # not moved meanwhile
                for statement in MIGRATE.split(";"):
                    if statement.strip():
                        tx.execute(statement)


def _rows(db, sql: str, args=()) -> List[tuple]:
    """A query's rows as plain tuples (the store's connections make sqlite3.Row objects,
    which cost more than the query itself at 100,000 rows)."""
    cur = db.cursor()
    cur.row_factory = None
    return cur.execute(sql, args).fetchall()


# -- scores from a run's predictions ---------------------------------------------------------

def scores_of(row: Dict[str, Any], labels: Sequence[Any], ranks_by: Optional[str]
              ) -> Optional[Tuple[float, float, float]]:
    """(least confidence, margin, entropy) of one checked prediction row, each 0..1 (1: the
    model is least sure), or None for a kind no strategy fits. Without probabilities a
    distribution is filled as upstream does: the confidence on the predicted label, the rest
    shared by the others."""
    if ranks_by is None:
        return None
    if ranks_by == "confidence" or (ranks_by == "each" and "probabilities" not in row):
        u = row.get("uncertainty", 1.0 - row["confidence"])
        return u, u, u
    probs = row.get("probabilities")
    if ranks_by == "each":  # independent yes/no decisions: the least sure one, and the mean
        ps = [probs.get(str(label), 0.0) for label in labels] or [0.5]
        least = 1 - min(max(p, 1 - p) for p in ps)
        margin = 1 - min(abs(2 * p - 1) for p in ps)
        entropy = sum(_binary_entropy(p) for p in ps) / len(ps)
        return least, margin, entropy
    k = max(2, len(labels))
    if probs is None:
        c = row["confidence"]
        rest = (1 - c) / (k - 1)
        ps = [c] + [rest] * (k - 1)
    else:
        ps = [probs.get(str(label), 0.0) for label in labels]
        ps += [0.0] * (k - len(ps))
    ps.sort(reverse=True)
    entropy = -sum(p * math.log(p) for p in ps if p > 0) / math.log(k)
    return 1 - ps[0], 1 - (ps[0] - ps[1]), min(1.0, max(0.0, entropy))


def _binary_entropy(p: float) -> float:
    return -sum(q * math.log2(q) for q in (p, 1 - p) if q > 0)


def keep_scores(store: Store, run_id: str, rows) -> int:
    """Keep a run's ranking numbers: ``rows`` of (scheme, item id, (least, margin, entropy),
    vector or None). Returns how many."""
    ensure(store)
    batch = [(run_id, scheme, item, s[0], s[1], s[2], diversity.pack(vec))
             for scheme, item, s, vec in rows]
    for start in range(0, len(batch), CHUNK):
        with store.tx() as db:
            db.executemany("INSERT OR REPLACE INTO rank_scores(run_id, scheme, item_id, least, "
                           "margin, entropy, vector) VALUES (?,?,?,?,?,?,?)",
                           batch[start:start + CHUNK])
    return len(batch)


def forget(store: Store, run_ids: Sequence[str]) -> None:
    """A pruned run's numbers go with it (the run in use is never pruned)."""
    ensure(store)
    with store.tx() as db:
        db.executemany("DELETE FROM rank_scores WHERE run_id=?", [(r,) for r in run_ids])


# -- the order -------------------------------------------------------------------------------

def why_of(why: str, score: Optional[float]) -> str:
    """The sentence a place's ``why`` stands for: ``{score}`` (kept as is in the table: no
    100,000 formatted numbers a reorder) is the place's score to 3 decimals."""
    return why.replace("{score}", "%.3f" % score) if score is not None else why


class Plan:
    """A reorder's result before it is written: ``rows`` (item id, score, why) in order;
    ``why`` may hold ``{score}`` (``why_of``)."""

    def __init__(self, rows: List[Tuple[str, Optional[float], str]], runs: Dict[str, str]):
        self.rows = rows
        self.runs = runs


@contextlib.contextmanager
def _no_collector():
    """The cycle collector paused (``plan`` and ``write``): a reorder makes some 500,000
    short-lived tuples and no cycles, and the collector's passes over them (and over all the
    server holds) took a fifth of its time. On again when it is done, whatever happened."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _scores(db, schemes: List[str], runs: Dict[str, str], weights: Dict[str, float]):
    """{item: the mean over schemes of the weighted strategies' score}."""
    total = sum(weights.values())
    expr = " + ".join("%r * %s" % (w / total, _COLUMN[m]) for m, w in weights.items())
    if len(schemes) == 1:
        s = schemes[0]
        return dict(_rows(db, "SELECT item_id, %s FROM rank_scores WHERE run_id=? AND "
                              "scheme=?" % expr, (runs[s], s)))
    score: Dict[str, float] = {}
    counts: Dict[str, int] = {}
    for s in schemes:
        for item, value in _rows(db, "SELECT item_id, %s FROM rank_scores WHERE run_id=? AND "
                                     "scheme=?" % expr, (runs[s], s)):
            if item in score:
                score[item] += value
                counts[item] += 1
            else:
                score[item], counts[item] = value, 1
    for item, n in counts.items():
            score[item] /= n
    return score


_COLUMN = {"uncertainty": "least", "margin": "margin", "entropy": "entropy"}


@_no_collector()
def plan(store: Store, cfg, runs: Dict[str, str]) -> Plan:
    """The order for the items that need labels, ranked by ``runs`` (scheme: the run in use)
    with ``cfg.active_learning``'s strategy. Pure reads; ``write`` stores it."""
    ensure(store)
    al = cfg.active_learning
    mt = cfg.model_training
    db = store.conn()
    schemes = [s for s in al.schemes if s in runs]
    # items that have as many annotators as they need (one unless num_annotators_per_item)
    full = {r[0] for r in _rows(
        db, "SELECT item_id FROM annotations GROUP BY item_id HAVING COUNT(DISTINCT annotator) "
        ">= ?", (cfg.upstream.per_item or 1,))}
    position = dict(_rows(db, "SELECT id, position FROM items WHERE active=1 ORDER BY "
                              "position"))
    for i in full:
        position.pop(i, None)
    test = order_mix.in_test(list(position), mt.split_seed,
                             (mt.splits.train, mt.splits.val, mt.splits.test))
    others = [i for i in position if i not in test]
    weights = dict(al.weights) if al.strategy == "hybrid" else {al.strategy: 1.0}
    w_div = weights.pop("diversity", 0.0)
    total = sum(weights.values())
    score = _scores(db, schemes, runs, weights) if total > 0 else {}
    seed = "%s:%s" % (mt.split_seed, ",".join("%s=%s" % kv for kv in sorted(runs.items())))
    run_words = ", ".join("run %s" % r for r in sorted(set(runs[s] for s in schemes)))
    if w_div:
        labelled = [r[0] for r in _rows(db, "SELECT DISTINCT item_id FROM annotations")]
        ranked_ids = others if total == 0 else [i for i in others if i in score]
        ranked = diversity.rank(store, cfg, ranked_ids, score, labelled,
                                {s: runs[s] for s in schemes},
                                (w_div, total, seed, run_words))
    else:
        ranked_ids = sorted([i for i in others if i in score], key=score.__getitem__,
                            reverse=True)
        words = "%s {score} (%s)" % (al.strategy, run_words)
        ranked = list(zip(ranked_ids, map(score.__getitem__, ranked_ids),
                          itertools.repeat(words)))
    # what no model ranks: items without a score (diversity alone ranks every item)
    unranked = [] if w_div and not total else [i for i in others if i not in score]
    head = al.max_reorder if al.max_reorder is not None else len(ranked)
    tail = [r[0] for r in ranked[head:]] + unranked
    ranked = ranked[:head]
    if al.random_percent > 0 and ranked:
        ranked = order_mix.with_random(ranked, al.random_percent, seed)
    if al.cold_start == "random":  # the cold start's own permutation (assignment.py)
        tail.sort(key=lambda i: ((position[i] * 2654435761 + 40503) % 4294967291,
                                 position[i]))
    else:
        tail.sort(key=position.__getitem__)
    no_score = set(unranked)
    tail_rows = [(i, None, "no prediction from the model in use" if i in no_score
                  else "after the ranked head (max_instances_to_reorder)") for i in tail]
    # one random order of the test split for every model: the held-out sample never depends
    # on what a model thought
    test_rows = [(i, None, WHY_TEST)
                 for i in order_mix.held_out_order(test, "%s:test" % mt.split_seed)]
    return Plan(order_mix.interleave(ranked + tail_rows, test_rows, mt.splits.test),
                {s: runs[s] for s in schemes})


_WRITING = threading.Lock()  # one reorder at a time (a run's ingest, the admin's Use)


def write(store: Store, p: Plan, strategy: str) -> int:
    """Store ``p`` as the order in use: the new generation in small transactions, then one
    write that switches to it, then the older ones removed. Returns the new generation.

    The generation's rows are committed without waiting for the disk (``synchronous=NORMAL``,
    this connection only, for those transactions): until the switch they are not in use,
    and the switch, committed as every write is (``FULL``), puts them on disk with it.
    One writer at a time (``_WRITING`` here; one server per project: the queue lock)."""
    ensure(store)
    with _WRITING, _no_collector():
        return _write(store, p, strategy)


def _write(store: Store, p: Plan, strategy: str) -> int:
    codes: Dict[str, int] = {}
    with store.tx() as db:  # a crashed reorder's generation and places are never reused
        row = db.execute("SELECT value FROM meta WHERE key='queue_order.next'").fetchone()
        gen = max(int(row[0]) if row else 0,
                  int(store.meta_get("queue_order.gen", "0"))) + 1
        # after every place there is or is reserved: this generation's are consecutive
        reserved = db.execute("SELECT value FROM meta WHERE key='queue_order.next_place'"
                              ).fetchone()
        first = max((db.execute("SELECT MAX(place) FROM queue_places").fetchone()[0] or 0) + 1,
                    int(reserved[0]) if reserved else 0)
        db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                       [("queue_order.next", str(gen)),
                        ("queue_order.next_place", str(first + len(p.rows)))])
    items, scores, whys = zip(*p.rows) if p.rows else ((), (), ())
    for why in dict.fromkeys(whys):
        codes[why] = len(codes) + 1
    rows = list(zip(itertools.count(first), itertools.repeat(gen), items, scores,
                    map(codes.__getitem__, whys)))
    with _unhurried(store):
        with store.tx() as db:
            db.executemany("INSERT INTO queue_whys(gen, code, why) VALUES (?,?,?)",
                           [(gen, c, why) for why, c in codes.items()])
        for start in range(0, len(rows), CHUNK):
            with store.tx() as db:
                db.executemany("INSERT INTO queue_places(place, gen, item_id, score, why) "
                               "VALUES (?,?,?,?,?)", rows[start:start + CHUNK])
    with store.tx() as db:
        for key, value in (("queue_order.gen", str(gen)),
                           ("queue_order.first", str(first)),
                           ("queue_order.at", repr(time.time())),
                           ("queue_order.runs", json.dumps(p.runs, sort_keys=True)),
                           ("queue_order.strategy", strategy),
                           ("queue_order.size", str(len(rows)))):
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                       (key, value))
    with _unhurried(store):  # the places before it (older or unfinished generations),
        while True:        # a range at a time
            with store.tx() as db:
                low = db.execute("SELECT MIN(place) FROM queue_places").fetchone()[0]
                if low is None or low >= first:
                    db.execute("DELETE FROM queue_whys WHERE gen<?", (gen,))
                    break
                db.execute("DELETE FROM queue_places WHERE place<?",
                           (min(first, low + CHUNK),))
    return gen


@contextlib.contextmanager
def _unhurried(store: Store):
    """This connection's commits do not wait for the disk meanwhile: for rows not in use (a
    generation before its switch, or after it is replaced). A crash loses at most those
    rows, never the order in use; the next write to commit as usual puts them on disk."""
    db = store.conn()
    wal = db.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    if wal:  # (in another journal mode NORMAL could lose more than these rows)
        db.execute("PRAGMA synchronous=NORMAL")
    try:
        yield
    finally:
        if db.in_transaction:  # a commit that failed: the setting cannot change inside one
            db.execute("ROLLBACK")
        if wal:
            db.execute("PRAGMA synchronous=FULL")


def next_place(db, where: str, args: Sequence[Any]) -> Optional[Tuple[str, str]]:
    """The first place of the order in use whose item ``i`` meets ``where`` (assignment's
    condition on an open item, with ``args``): (item id, why), or None (no order, or every
    place taken). Call it inside a transaction (assignment's write transaction): the
    generation in use and its places are then read from one snapshot."""
    gen, first = _in_use(db)
    if not gen:
        return None
    found = db.execute("SELECT o.item_id, o.why, o.score FROM queue_places o JOIN items i ON "
                       "i.id=o.item_id WHERE o.place>=? AND o.gen=? AND " + where
                       + " ORDER BY o.place LIMIT 1", (first, gen) + tuple(args)).fetchone()
    if found is None:
        return None
    why = db.execute("SELECT why FROM queue_whys WHERE gen=? AND code=?",
                     (gen, found[1])).fetchone()
    return found[0], why_of(why[0] if why else "", found[2])


def _in_use(db) -> Tuple[int, int]:
    """The generation in use (0: none) and its first place."""
    meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('queue_order.gen', "
                           "'queue_order.first')").fetchall())
    return int(meta.get("queue_order.gen", 0)), int(meta.get("queue_order.first", 0))


def reorder(store: Store, cfg, in_use) -> Optional[int]:
    """Rank by the runs in use for the active-learning schemes (``in_use(store, scheme)``);
    None (and the order unchanged) when no scheme has a run in use with kept scores."""
    al = cfg.active_learning
    if not al.enabled:
        return None
    ensure(store)
    runs = {}
    for s in al.schemes:
        run = in_use(store, s)
        if run and store.conn().execute("SELECT 1 FROM rank_scores WHERE run_id=? AND scheme=? "
                                        "LIMIT 1", (run, s)).fetchone():
            runs[s] = run
    if not runs:
        return None
    return write(store, plan(store, cfg, runs), al.strategy)


def status(store: Store, head: int = 10) -> Dict[str, Any]:
    """What the admin page shows of the order in use: the runs that ranked it, when, its size
    and its first ``head`` places still open (item, score, why)."""
    ensure(store)
    db = store.conn()
    mine = not db.in_transaction
    if mine:  # one snapshot: the meta and the rows of one generation (a write may land)
        db.execute("BEGIN")
    try:
        return _status(store, head)
    finally:
        if mine:
            db.execute("COMMIT")


def _status(store: Store, head: int) -> Dict[str, Any]:
    gen, first = _in_use(store.conn())
    if not gen:
        return {"ordered": False}
    at = store.meta_get("queue_order.at")
    rows = store.conn().execute(
        "SELECT o.item_id, o.score, w.why FROM queue_places o JOIN items i ON i.id=o.item_id "
        "JOIN queue_whys w ON w.gen=o.gen AND w.code=o.why "
        "WHERE o.place>=? AND o.gen=? AND i.active=1 AND NOT EXISTS (SELECT 1 FROM annotations "
        "a WHERE a.item_id=o.item_id) ORDER BY o.place LIMIT ?", (first, gen, head)).fetchall()
    return {"ordered": True, "runs": json.loads(store.meta_get("queue_order.runs", "{}")),
            "at": float(at) if at else None, "strategy": store.meta_get("queue_order.strategy"),
            "size": int(store.meta_get("queue_order.size", "0")),
            "next": [{"item_id": r[0], "score": None if r[1] is None else round(r[1], 4),
                      "why": why_of(r[2], r[1])} for r in rows]}
