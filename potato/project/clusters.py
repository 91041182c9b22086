"""Upstream's diversity ordering (``assignment_strategy: diversity_clustering``, or
``diversity_ordering: {enabled: true}``): the items are clustered and handed out one cluster
after another, so an annotator meets varied items rather than runs of near-identical ones.

Upstream embeds the items with a sentence-transformer; the server here holds no model, so an
item's vector is its words, weighted by how rare they are among the items and hashed
(``vectors``): items that share telling words cluster together. Clustering is k-means
(k-means++ start, seeded by the project's split seed, so the order is the same at every
start), on at most ``FIT_SAMPLE`` items and ``MAX_ROUNDS`` rounds; every item then joins its
nearest centre. The number of clusters is upstream's: ``num_clusters`` (at most the items),
or with ``auto_clusters`` the items over ``items_per_cluster`` (at least 2, at most half the
items), and never more than ``MAX_CLUSTERS``. Bounded: the first ``MAX_ITEMS`` items are
clustered (the rest follow in data-file order), each vector an array of ``DIM`` doubles.

The order takes the clusters in turn (largest first), each in data-file order, and is kept in
table ``cluster_order`` with a fingerprint of the items and settings (``meta``): a start with
the same items reuses it, other items make it again. Assignment (potato/project/assignment.py)
hands out the open items in this order; an item already given stays where it was.
"""

from __future__ import annotations

import array
import hashlib
import itertools
import math
import random
import re
from typing import Dict, List, Sequence, Tuple

from potato.config import diversity_order
from potato.project.store import Store

MAX_CLUSTERS = diversity_order.MAX_CLUSTERS
MAX_ITEMS = 10000   # the first this many open items are clustered; the rest follow in order
DIM = 128           # hashed word dimensions
_WORD = re.compile(r"\w+", re.UNICODE)
FIT_SAMPLE = 2000
MAX_ROUNDS = 8
TABLE = """CREATE TABLE IF NOT EXISTS cluster_order (
    item_id TEXT PRIMARY KEY,
    place INTEGER NOT NULL,
    cluster INTEGER NOT NULL
) WITHOUT ROWID"""


def cluster_count(n: int, settings) -> int:
    """How many clusters ``n`` items get (upstream's rule, bounded by MAX_CLUSTERS)."""
    if n < 2:
        return n
    if settings.auto_clusters:
        k = max(2, min(n // settings.items_per_cluster, n // 2))
    else:
        k = min(settings.num_clusters, n)
    return min(k, MAX_CLUSTERS)


def _nearest(v: Sequence[float], centres: List[Sequence[float]]) -> int:
    d = list(map(math.dist, itertools.repeat(v, len(centres)), centres))
    return d.index(min(d))


def _start(vectors: List[Sequence[float]], k: int, rng: random.Random
           ) -> List[Sequence[float]]:
    """k-means++: each next centre drawn with probability by its squared distance to the
    nearest centre so far."""
    centres = [vectors[rng.randrange(len(vectors))]]
    near = [math.dist(v, centres[0]) ** 2 for v in vectors]
    while len(centres) < k:
        total = sum(near)
        if total <= 0:
            break  # every item sits on a centre: fewer distinct vectors than k
        pick, acc = rng.random() * total, 0.0
        for i, d in enumerate(near):
            acc += d
            if acc >= pick:
                break
        centres.append(vectors[i])
        near = [min(a, math.dist(v, vectors[i]) ** 2) for a, v in zip(near, vectors)]
    return centres


def _fit(vectors: List[Sequence[float]], k: int, seed: str) -> List[Sequence[float]]:
    rng = random.Random(seed)
    sample = vectors if len(vectors) <= FIT_SAMPLE else rng.sample(vectors, FIT_SAMPLE)
    centres = [list(c) for c in _start(sample, k, rng)]
    for _ in range(MAX_ROUNDS):
        groups: List[List[Sequence[float]]] = [[] for _ in centres]
        for v in sample:
            groups[_nearest(v, centres)].append(v)
        moved = [[sum(col) / len(g) for col in zip(*g)] if g else c
                 for g, c in zip(groups, centres)]
        if moved == centres:
            break
        centres = moved
    return centres


def vectors(texts: List[str]) -> List[Sequence[float]]:
    """Each text's words, weighted by how rare they are among the texts (tf-idf; a word in
    more than half of them, or in one only, counts for nothing), hashed into ``DIM``
    dimensions and scaled to unit length (all zero: no word that counts)."""
    words = [_WORD.findall(t.lower()) for t in texts]
    df: Dict[str, int] = {}
    for ws in words:
        for w in set(ws):
            df[w] = df.get(w, 0) + 1
    n = len(texts)
    weight = {w: math.log(n / c) for w, c in df.items() if 1 < c <= n / 2}
    slot = {w: int.from_bytes(hashlib.blake2b(w.encode("utf-8"), digest_size=4).digest(),
                              "big") % DIM for w in weight}
    out = []
    for ws in words:
        v = array.array("d", bytes(8 * DIM))  # 1 KB an item, not a list of float objects
        for w in ws:
            if w in weight:
                v[slot[w]] += weight[w]
        norm = math.sqrt(sum(x * x for x in v))
        if norm > 0:
            v = array.array("d", (x / norm for x in v))
        out.append(v)
    return out


def order(items: List[Tuple[str, str]], settings, seed: str) -> List[Tuple[str, int]]:
    """(item id, cluster) for ``items`` ((id, text) in data-file order): the clusters of the
    first ``MAX_ITEMS`` taken in turn, largest first, each in data-file order; then the rest
    in data-file order (cluster -1)."""
    rest = [(i, -1) for i, _ in items[MAX_ITEMS:]]
    items = items[:MAX_ITEMS]
    k = cluster_count(len(items), settings)
    if k <= 1:
        return [(i, 0) for i, _ in items] + rest
    vecs = vectors([t for _, t in items])
    centres = _fit(vecs, k, seed)
    members: Dict[int, List[str]] = {}
    for (item, _), v in zip(items, vecs):
        members.setdefault(_nearest(v, centres), []).append(item)
    clusters = sorted(members.values(), key=lambda m: -len(m))  # stable: ties keep c order
    out: List[Tuple[str, int]] = []
    for turn in range(max(len(m) for m in clusters)):
        out += [(m[turn], c) for c, m in enumerate(clusters) if turn < len(m)]
    return out + rest


def prepare(store: Store, settings, seed: str) -> int:
    """Make (or keep) the order for the store's active items; returns the clusters."""
    db = store.conn()
    db.execute(TABLE)
    items = [(r[0], r[1] or "") for r in db.execute(
        "SELECT id, text FROM items WHERE active=1 ORDER BY position")]
    k = cluster_count(len(items), settings)
    digest = hashlib.sha256(repr((seed, k, MAX_ROUNDS, FIT_SAMPLE)).encode())
    for i, t in items:
        digest.update(b"\0%s\0%s" % (i.encode(), t.encode()))
    mark = digest.hexdigest()
    if store.meta_get("cluster_order.items") == mark:
        return k
    rows = [(i, place, c) for place, (i, c) in enumerate(order(items, settings, seed))]
    with store.tx() as tx:
        tx.execute("DELETE FROM cluster_order")
        tx.executemany("INSERT INTO cluster_order(item_id, place, cluster) VALUES (?,?,?)",
                       rows)
        tx.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('cluster_order.items', ?)",
                   (mark,))
    return k
