"""Diversity for active learning's order (queue_order.py): farthest-first picks among the
items that need labels, by the model's own vectors or, where the trainer sends none, the
stated fallback (the item's words hashed into ``FALLBACK_DIM`` dimensions).

Bounded: it compares the vectors of at most ``CANDIDATES`` items (a random sample; for hybrid,
the most uncertain) with at most ``REFERENCE`` labelled ones and picks at most
``DIVERSE_PICKS``; the rest follows by uncertainty (hybrid) or at random (diversity). Only the
compared vectors are read from the store.
"""

from __future__ import annotations

import array
import hashlib
import math
import operator
import random
import re
from typing import Dict, List, Optional, Sequence, Tuple

CANDIDATES = 800    # diversity: items whose vectors are compared
REFERENCE = 100     # diversity: labelled items they are compared with
DIVERSE_PICKS = 150  # diversity: places chosen by farthest-first (then the next reorder's)
FALLBACK_DIM = 32

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
    w_div * distance`` (cosine distance to the nearest labelled or already picked item)."""
    mul = operator.mul
    near = {}
    for c in cands:
        v = vec[c]
        near[c] = max([sum(map(mul, v, r)) for r in ref], default=0.0)
    left = set(cands)
    out = []
    while left and len(out) < picks:
        best = max(left, key=lambda c: (w_base * base.get(c, 0.0) + w_div * (1 - near[c]), c))
        score = w_base * base.get(best, 0.0) + w_div * (1 - near[best])
        out.append((best, score))
        left.discard(best)
        v = vec[best]
        for c in left:
            s = sum(map(mul, vec[c], v))
            if s > near[c]:
                near[c] = s
    return out


def rank(store, cfg, ids, score, labelled, vectors, runs, how):
    """Diversity (or hybrid's share of it): farthest-first over a bounded candidate set;
    ``vectors``: item -> the scheme whose run (``runs``) sent its vector; ``how``:
    (diversity's weight, the other strategies' total weight, seed, run words). Returns the
    ranked rows (item id, score, why), every item of ``ids`` once."""
    w_div, total, seed, run_words = how
    db = store.conn()
    # the model's own vectors where it sent them (compared with the labelled items it sent
    # them for: the val and test splits); else the fallback for every item: its words hashed
    fallback = not vectors
    pool = ids if fallback else [i for i in ids if i in vectors]
    if total > 0:  # hybrid: the most uncertain candidates
        cands = sorted(pool, key=lambda i: -score[i])[:CANDIDATES]
    else:
        cands = random.Random(seed + ":cands").sample(pool, min(CANDIDATES, len(pool)))
    known = labelled if fallback else [i for i in labelled if i in vectors]
    ref_ids = fixed_order(list(known), seed + ":ref")[:REFERENCE]
    vec = {}
    if fallback:
        need = cands + ref_ids
        texts = {}
        for start in range(0, len(need), 500):
            part = need[start:start + 500]
            texts.update(db.execute("SELECT id, text FROM items WHERE id IN (%s)"
                                    % ",".join("?" * len(part)), part).fetchall())
        for i in set(need):
            v = unpack(pack(text_vector(texts.get(i, ""))))
            if v:
                vec[i] = v
    else:  # only the blobs compared are read
        for i in set(cands) | set(ref_ids):
            s = vectors[i]
            row = db.execute("SELECT vector FROM rank_scores WHERE run_id=? AND scheme=? AND "
                             "item_id=?", (runs[s], s, i)).fetchone()
            if row is not None and row[0]:  # gone: the run was pruned meanwhile (forget)
                vec[i] = unpack(row[0])
    cands = [c for c in cands if c in vec]
    ref = [vec[i] for i in ref_ids if i in vec]
    w_base = 0.0 if total == 0 else 1.0
    norm = w_div + (w_base if total else 0.0)
    picks = _farthest_first(cands, vec, ref, score if total else {}, w_div / norm,
                            w_base / norm if total else 0.0, DIVERSE_PICKS)
    label = cfg.active_learning.strategy + (" (words of the item: the model sent no vector)"
                                            if fallback else "")
    rows = [(i, s, "%s %.3f (%s)" % (label, s, run_words)) for i, s in picks]
    chosen = {i for i, _ in picks}
    rest = [i for i in ids if i not in chosen]
    if total > 0:
        rest.sort(key=lambda i: -score[i])
        words = "uncertainty part of hybrid {score} (%s)" % run_words
        rows += [(i, score[i], words) for i in rest]
    else:
        rows += [(i, None, "diversity: after the %d diverse picks, random" % len(picks))
                 for i in random_order(rest, seed + ":rest")]
    return rows
