"""Active learning's order: the model in use ranks the items that still need labels.

A finished run's predictions (checked at the trust boundary) leave, per item, three numbers a
query strategy ranks by — least confidence, margin and entropy, each 0 (sure) to 1 (unsure) —
and, where the trainer gives one, the item's vector (``keep_scores``, table ``rank_scores``).
When a run becomes the model in use for an active-learning scheme, ``reorder`` ranks the items
that need labels by the configured strategy and replaces the order atomically (table
``queue_order``, one generation at a time: the new rows are written in small transactions, then
one write switches to them, so no save waits for a reorder). potato/project/assignment.py hands
items out in this order.

What keeps the order honest and bounded:
- the held-out test split is never chosen by the model: its items (the bundle's own split of
  each item id) are interleaved at their share of the splits, in a random order;
- ``random_sample_percent`` of the ranked places go to items drawn at random;
- ``max_instances_to_reorder`` bounds the ranked head; after it, the cold-start order;
- diversity (and hybrid's share of it) is bounded: potato/project/diversity.py.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from potato.project import diversity
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
CREATE TABLE IF NOT EXISTS queue_order (
    gen INTEGER NOT NULL,          -- the order in use is meta queue_order.gen
    rank INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    score REAL,                    -- the strategy's score (None: not ranked by the model)
    why TEXT NOT NULL,             -- how the place was chosen; {score}: the score (why_of)
    PRIMARY KEY (gen, rank)
);"""

CHUNK = 5000        # rows per write transaction
WHY_TEST = "test split: random order (the model never chooses held-out items)"
WHY_RANDOM = "random sample (random_sample_percent)"


def ensure(store: Store) -> None:
    store.conn().executescript(TABLES)


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

def _interleave(main: List[Any], other: List[Any], share: float) -> List[Any]:
    """``main`` with ``other``'s entries placed at ``share`` of the places, in their order
    (the rest of ``other`` at the end, once ``main`` runs out)."""
    if share <= 0 or not other:
        return main + other
    out: List[Any] = []
    a = 0
    for k, entry in zip(_slots(len(other), share), other):
        take = k - len(out)
        if take > 0:
            out.extend(main[a:a + take])
            a += take
        out.append(entry)
    out.extend(main[a:])
    return out


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


_TEST_SPLIT: Dict[Any, Tuple[set, set]] = {}  # (seed, cut): (ids seen, those in test)


def _in_test(ids: Sequence[str], seed: Any, fractions: Tuple[float, float, float]) -> set:
    """The ids in the bundle's test split (``bundle.split_of``, inlined: 100,000 ids a reorder).
    An id's split never changes for a seed and cut, so what the last reorder hashed is kept
    (for one seed and cut, and only the ids still asked about: bounded by the pool)."""
    prefix = ("%s:" % (seed,)).encode("utf-8")
    cut = fractions[0] + fractions[1]
    key = (str(seed), cut)
    seen, test = _TEST_SPLIT.get(key, (set(), set()))
    sha, top = hashlib.sha256, 2.0 ** 64
    now = set(ids)
    new = now - seen
    test = (test & now) | {i for i in new if int.from_bytes(
        sha(prefix + i.encode("utf-8")).digest()[:8], "big") / top >= cut}
    _TEST_SPLIT.clear()
    _TEST_SPLIT[key] = (now, test)
    return set(test)


def _scores(db, schemes: List[str], runs: Dict[str, str], weights: Dict[str, float]):
    """{item: the mean over schemes of the weighted strategies' score}."""
    total = sum(weights.values())
    expr = " + ".join("%r * %s" % (w / total, _COLUMN[m]) for m, w in weights.items())
    if len(schemes) == 1:
        s = schemes[0]
        return dict(db.execute("SELECT item_id, %s FROM rank_scores WHERE run_id=? AND "
                               "scheme=?" % expr, (runs[s], s)))
    score: Dict[str, float] = {}
    counts: Dict[str, int] = {}
    for s in schemes:
        for item, value in db.execute("SELECT item_id, %s FROM rank_scores WHERE run_id=? AND "
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


def plan(store: Store, cfg, runs: Dict[str, str]) -> Plan:
    """The order for the items that need labels, ranked by ``runs`` (scheme: the run in use)
    with ``cfg.active_learning``'s strategy. Pure reads; ``write`` stores it."""
    ensure(store)
    al = cfg.active_learning
    mt = cfg.model_training
    db = store.conn()
    schemes = [s for s in al.schemes if s in runs]
    # items that have as many annotators as they need (one unless num_annotators_per_item)
    full = {r[0] for r in db.execute(
        "SELECT item_id FROM annotations GROUP BY item_id HAVING COUNT(DISTINCT annotator) "
        ">= ?", (cfg.upstream.per_item or 1,))}
    position = dict(db.execute("SELECT id, position FROM items WHERE active=1 ORDER BY "
                               "position"))
    for i in full:
        position.pop(i, None)
    test = _in_test(list(position), mt.split_seed, (mt.splits.train, mt.splits.val,
                                                    mt.splits.test))
    others = [i for i in position if i not in test]
    weights = dict(al.weights) if al.strategy == "hybrid" else {al.strategy: 1.0}
    w_div = weights.pop("diversity", 0.0)
    total = sum(weights.values())
    score = _scores(db, schemes, runs, weights) if total > 0 else {}
    seed = "%s:%s" % (mt.split_seed, ",".join("%s=%s" % kv for kv in sorted(runs.items())))
    run_words = ", ".join("run %s" % r for r in sorted(set(runs[s] for s in schemes)))
    if w_div:
        vectors = {}  # item: the scheme whose run sent its vector (the first such scheme)
        for s in schemes:
            for (item,) in db.execute("SELECT item_id FROM rank_scores WHERE run_id=? AND "
                                      "scheme=? AND vector IS NOT NULL", (runs[s], s)):
                vectors.setdefault(item, s)
        labelled = {r[0] for r in db.execute("SELECT DISTINCT item_id FROM annotations")}
        ranked_ids = others if total == 0 else [i for i in others if i in score]
        ranked = diversity.rank(store, cfg, ranked_ids, score, labelled, vectors, runs,
                          (w_div, total, seed, run_words))
    else:
        ranked_ids = sorted((i for i in others if i in score), key=score.__getitem__,
                            reverse=True)
        words = "%s {score} (%s)" % (al.strategy, run_words)
        ranked = list(zip(ranked_ids, map(score.__getitem__, ranked_ids),
                          itertools.repeat(words)))
    in_ranked = {r[0] for r in ranked}
    unranked = [i for i in others if i not in in_ranked]
    head = al.max_reorder if al.max_reorder is not None else len(ranked)
    tail = [r[0] for r in ranked[head:]] + unranked
    ranked = ranked[:head]
    if al.random_percent > 0 and ranked:
        ranked = _with_random(ranked, al.random_percent, seed)
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
                 for i in diversity.fixed_order(list(test), "%s:test" % mt.split_seed)]
    return Plan(_interleave(ranked + tail_rows, test_rows, mt.splits.test),
                {s: runs[s] for s in schemes})


def _slots(count: int, share: float) -> List[int]:
    """The places (0-based) of the ``count`` entries that come at ``share`` of the places:
    the j-th at the first place k where floor((k + 1) * share) reaches j."""
    return [max(0, math.ceil(j / share - 1e-9) - 1) for j in range(1, count + 1)]


def _with_random(ranked, share, seed):
    """``share`` of the ranked places go to ranked items drawn at random (seeded)."""
    n = len(ranked)
    count = int(math.floor(n * share + 1e-9))
    picked = random.Random(seed + ":sample").sample(range(n), count)
    chosen = set(picked)
    rest = [r for k, r in enumerate(ranked) if k not in chosen]
    out: List[Any] = []
    taken = 0
    for slot, k in zip(_slots(count, share), picked):  # the slots rise: fill up to each
        more = slot - len(out)
        out.extend(rest[taken:taken + more])
        taken += more
        out.append((ranked[k][0], ranked[k][1], WHY_RANDOM))
    out.extend(rest[taken:])
    return out


_WRITING = threading.Lock()  # one reorder at a time (a run's ingest, the admin's Use)


def write(store: Store, p: Plan, strategy: str) -> int:
    """Store ``p`` as the order in use: the new generation in small transactions, then one
    write that switches to it, then the older ones removed. Returns the new generation."""
    ensure(store)
    with _WRITING:
        with store.tx() as db:  # a crashed reorder's generation is never reused
            row = db.execute("SELECT value FROM meta WHERE key='queue_order.next'").fetchone()
            gen = max(int(row[0]) if row else 0,
                      int(store.meta_get("queue_order.gen", "0"))) + 1
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('queue_order.next', ?)",
                       (str(gen),))
        rows = [(gen, k, item, s, why) for k, (item, s, why) in enumerate(p.rows)]
        for start in range(0, len(rows), CHUNK):
            with store.tx() as db:
                db.executemany("INSERT INTO queue_order(gen, rank, item_id, score, why) VALUES "
                               "(?,?,?,?,?)", rows[start:start + CHUNK])
        with store.tx() as db:
            for key, value in (("queue_order.gen", str(gen)),
                               ("queue_order.at", repr(time.time())),
                               ("queue_order.runs", json.dumps(p.runs, sort_keys=True)),
                               ("queue_order.strategy", strategy),
                               ("queue_order.size", str(len(rows)))):
                db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                           (key, value))
        while True:  # the older generations, a chunk at a time
            with store.tx() as db:
                n = db.execute("DELETE FROM queue_order WHERE rowid IN (SELECT rowid FROM "
                               "queue_order WHERE gen<? LIMIT ?)", (gen, CHUNK)).rowcount
            if n < CHUNK:
                break
    return gen


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
    gen = int(store.meta_get("queue_order.gen", "0"))
    if not gen:
        return {"ordered": False}
    at = store.meta_get("queue_order.at")
    rows = store.conn().execute(
        "SELECT o.item_id, o.score, o.why FROM queue_order o JOIN items i ON i.id=o.item_id "
        "WHERE o.gen=? AND i.active=1 AND NOT EXISTS (SELECT 1 FROM annotations a WHERE "
        "a.item_id=o.item_id) ORDER BY o.rank LIMIT ?", (gen, head)).fetchall()
    return {"ordered": True, "runs": json.loads(store.meta_get("queue_order.runs", "{}")),
            "at": float(at) if at else None, "strategy": store.meta_get("queue_order.strategy"),
            "size": int(store.meta_get("queue_order.size", "0")),
            "next": [{"item_id": r[0], "score": None if r[1] is None else round(r[1], 4),
                      "why": why_of(r[2], r[1])} for r in rows]}
