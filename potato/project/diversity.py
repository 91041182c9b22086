"""Diversity for active learning's order (queue_order.py): farthest-first picks among the
items that need labels, by the model's own vectors or, where the trainer sends none, the
stated fallback (the item's words hashed into ``FALLBACK_DIM`` dimensions).

Bounded: it compares the vectors of at most ``CANDIDATES`` items (a random sample; for hybrid,
the most uncertain) with at most ``REFERENCE`` labelled ones and picks at most
``DIVERSE_PICKS``; the rest follows by uncertainty (hybrid) or at random (diversity). Only the
compared vectors are read from the store (the candidates' in the order they are preferred,
until ``CANDIDATES`` have one; the labelled items' until ``REFERENCE`` have one).
"""

from __future__ import annotations

import array
import hashlib
import itertools
import math
import random
import re
from typing import Dict, List, Optional, Sequence, Tuple

CANDIDATES = 800    # diversity: items whose vectors are compared
REFERENCE = 100     # diversity: labelled items they are compared with
DIVERSE_PICKS = 150  # diversity: places chosen by farthest-first (then the next reorder's)
FALLBACK_DIM = 32
SQRT2 = math.sqrt(2.0)  # the distance of two orthogonal unit vectors

def pack(vector: Optional[Sequence[float]]) -> Optional[bytes]:
    """A vector scaled to unit length as float32 bytes (None: no vector, or all zero)."""
    if not vector:
        return None
    norm = math.sqrt(sum(x * x for x in vector))
    return array.array("f", (x / norm for x in vector)).tobytes() if norm > 0 else None


def unpack(blob: Optional[bytes]) -> Optional[List[float]]:
    return list(array.array("f", blob)) if blob else None


def fixed_order(ids: List[str], seed: str) -> List[str]:
    """A fixed random order of ``ids`` (the same for the same seed), in which each id keeps
    its place relative to the others whatever else the list holds."""
    return sorted(ids, key=lambda i: hashlib.sha256(("%s:%s" % (seed, i)).encode()).digest())


def random_order(ids: List[str], seed: str) -> List[str]:
    """A seeded random order (cheaper than ``fixed_order``, which keeps each id's place
    whatever else is in the list: the test split's order needs that, diversity's rest not)."""
    out = list(ids)
    random.Random(seed).shuffle(out)
    return out


_WORD = re.compile(r"\w+", re.UNICODE)


def text_vector(text: str) -> List[float]:
    """The fallback vector of an item: its lower-cased words hashed into FALLBACK_DIM counts."""
    v = [0.0] * FALLBACK_DIM
    for w in _WORD.findall((text or "").lower()):
        h = hashlib.blake2b(w.encode("utf-8"), digest_size=2).digest()
        v[int.from_bytes(h, "big") % FALLBACK_DIM] += 1.0
    return v


def _farthest_first(cands: List[str], vec: Dict[str, List[float]], ref: List[List[float]],
                    base: Dict[str, float], w_div: float, w_base: float, picks: int
                    ) -> List[Tuple[str, float]]:
    """Greedy picks: each time the candidate with the highest ``w_base * base +
    w_div * (1 - similarity)``, the cosine similarity to the nearest labelled or already
    picked item (ties: the greatest id). The vectors are unit length, so 1 - similarity is
    half the squared distance, which ``math.dist`` computes in C: no per-number Python."""
    cands = sorted(cands, reverse=True)  # max() keeps the first of equals: the greatest id
    rows = [vec[c] for c in cands]
    dist = math.dist
    # the distance to the nearest reference; none: that of orthogonal vectors (similarity 0)
    near = [min(map(dist, itertools.repeat(v, len(ref)), ref), default=SQRT2) for v in rows]
    gain = [w_base * base.get(c, 0.0) for c in cands]
    half = w_div / 2.0
    out = []
    for _ in range(min(picks, len(cands))):
        total = list(map(lambda g, d: g + half * d * d, gain, near))
        k = max(range(len(cands)), key=total.__getitem__)
        out.append((cands[k], total[k]))
        gain[k] = -math.inf  # picked: never again
        near = list(map(min, near, map(dist, rows, itertools.repeat(rows[k]))))
    return out


def _vectors(db, ids, runs: Dict[str, str], want: int) -> Dict[str, List[float]]:
    """The vectors of the first ``want`` of ``ids`` (in their order) that have one, each from
    the first scheme (of ``runs``) whose run sent it; only those blobs are read."""
    out: Dict[str, List[float]] = {}
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        found: Dict[str, bytes] = {}
        for scheme, run in runs.items():
            for item, blob in db.execute(
                    "SELECT item_id, vector FROM rank_scores WHERE run_id=? AND scheme=? AND "
                    "vector IS NOT NULL AND item_id IN (%s)" % ",".join("?" * len(part)),
                    [run, scheme] + part):
                found.setdefault(item, blob)
        for i in part:
            if i in found and len(out) < want:
                out[i] = unpack(found[i])
        if len(out) >= want:
            break
    return out


def _word_vectors(db, ids) -> Dict[str, List[float]]:
    """The fallback's vectors of ``ids``: each item's words hashed."""
    texts: Dict[str, str] = {}
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        texts.update(db.execute("SELECT id, text FROM items WHERE id IN (%s)"
                                % ",".join("?" * len(part)), part).fetchall())
    out = {}
    for i in ids:
        v = unpack(pack(text_vector(texts.get(i, ""))))
        if v:
            out[i] = v
    return out


def rank(store, cfg, ids, score, labelled, runs, how):
    """Diversity (or hybrid's share of it): farthest-first over a bounded candidate set;
    ``labelled``: the labelled items, the reference; ``runs``: scheme -> the run whose
    vectors are compared (the first scheme's where several sent one); ``how``: (diversity's
    weight, the other strategies' total weight, seed, run words). Returns the ranked rows
    (item id, score, why), every item of ``ids`` once."""
    w_div, total, seed, run_words = how
    db = store.conn()
    # the model's own vectors where it sent them (compared with the labelled items it sent
    # them for: the val and test splits); else the fallback for every item: its words hashed
    fallback = not any(db.execute("SELECT 1 FROM rank_scores WHERE run_id=? AND scheme=? AND "
                                  "vector IS NOT NULL LIMIT 1", (run, s)).fetchone()
                       for s, run in runs.items())
    if total > 0:  # hybrid: the most uncertain candidates first (and the rest by uncertainty)
        by_score = sorted(ids, key=score.__getitem__, reverse=True)
        prefer = by_score
    else:  # a seeded random sample; the whole pool shuffled only if it holds too few vectors
        rng = random.Random(seed + ":cands")
        prefer = rng.sample(ids, min(len(ids), 4 * CANDIDATES))
    ref_order = fixed_order(list(labelled), seed + ":ref")
    if fallback:
        vec = _word_vectors(db, prefer[:CANDIDATES] + ref_order[:REFERENCE])
        cands = [c for c in prefer[:CANDIDATES] if c in vec]
        ref = [vec[i] for i in ref_order[:REFERENCE] if i in vec]
    else:  # only the compared blobs are read (an item pruned meanwhile is simply left out)
        vec = _vectors(db, prefer, runs, CANDIDATES)
        if len(vec) < CANDIDATES and total == 0 and len(prefer) < len(ids):
            taken = set(prefer)
            more = [i for i in ids if i not in taken]
            rng.shuffle(more)
            vec.update(_vectors(db, more, runs, CANDIDATES - len(vec)))
            prefer = prefer + more
        ref = list(_vectors(db, ref_order, runs, REFERENCE).values())
        # one space: schemes' runs may send vectors of other sizes (each run one size per
        # scheme, checked at the boundary); the most preferred candidate's size is compared
        width = next((len(vec[c]) for c in prefer if c in vec), 0)
        vec = {i: v for i, v in vec.items() if len(v) == width}
        ref = [v for v in ref if len(v) == width]
        cands = [c for c in prefer if c in vec][:CANDIDATES]
    norm = w_div + (1.0 if total else 0.0)
    picks = _farthest_first(cands, vec, ref, score if total else {}, w_div / norm,
                            1.0 / norm if total else 0.0, DIVERSE_PICKS)
    label = cfg.active_learning.strategy + (" (words of the item: the model sent no vector)"
                                            if fallback else "")
    rows = [(i, s, "%s %.3f (%s)" % (label, s, run_words)) for i, s in picks]
    chosen = {i for i, _ in picks}
    if total > 0:
        words = "uncertainty part of hybrid {score} (%s)" % run_words
        rows += [(i, score[i], words) for i in by_score if i not in chosen]
    else:
        rest = [i for i in ids if i not in chosen]
        rows += [(i, None, "diversity: after the %d diverse picks, random" % len(picks))
                 for i in random_order(rest, seed + ":rest")]
    return rows
