"""How active learning's order mixes what the model ranks with what it must not choose
(queue_order.plan): the held-out test split, told from the item ids and kept in one random
order for every model, interleaved at its share of the places; ``random_sample_percent`` of
the ranked places drawn at random. Pure functions of their arguments and a seed, with two
caches bounded by the pool."""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any, Dict, List, Sequence, Tuple

WHY_RANDOM = "random sample (random_sample_percent)"


def interleave(main: List[Any], other: List[Any], share: float) -> List[Any]:
    """``main`` with ``other``'s entries placed at ``share`` of the places, in their order
    (the rest of ``other`` at the end, once ``main`` runs out)."""
    if share <= 0 or not other:
        return main + other
    out: List[Any] = []
    a = 0
    for k, entry in zip(slots(len(other), share), other):
        take = k - len(out)
        if take > 0:
            out.extend(main[a:a + take])
            a += take
        out.append(entry)
    out.extend(main[a:])
    return out


_TEST_SPLIT: Dict[Any, Tuple[set, set]] = {}  # (seed, cut): (ids seen, those in test)


def in_test(ids: Sequence[str], seed: Any, fractions: Tuple[float, float, float]) -> set:
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


_HELD_OUT_ORDER: Dict[str, Dict[str, bytes]] = {}  # seed: {test item: its place's key}


def held_out_order(test: set, seed: str) -> List[str]:
    """``diversity.fixed_order`` of the test split, its keys kept for the ids still in it
    (the same for every reorder of a seed; bounded by the pool)."""
    known = _HELD_OUT_ORDER.get(seed, {})
    keys = {i: known.get(i) or hashlib.sha256(("%s:%s" % (seed, i)).encode()).digest()
            for i in test}
    _HELD_OUT_ORDER.clear()
    _HELD_OUT_ORDER[seed] = keys
    return sorted(keys, key=keys.__getitem__)


def slots(count: int, share: float) -> List[int]:
    """The places (0-based) of the ``count`` entries that come at ``share`` of the places:
    the j-th at the first place k where floor((k + 1) * share) reaches j."""
    return [max(0, math.ceil(j / share - 1e-9) - 1) for j in range(1, count + 1)]


def with_random(ranked, share, seed):
    """``share`` of the ranked places go to ranked items drawn at random (seeded): the j-th
    drawn at the j-th of ``slots``, the others in their ranked order around them."""
    ranked = list(ranked)
    n = len(ranked)
    count = int(math.floor(n * share + 1e-9))
    picked = random.Random(seed + ":sample").sample(range(n), count)
    out: List[Any] = [None] * n
    for slot, k in zip(slots(count, share), picked):  # every slot < n, each once
        out[slot] = (ranked[k][0], ranked[k][1], WHY_RANDOM)
        ranked[k] = None
    rest = iter([r for r in ranked if r is not None])
    return [r if r is not None else next(rest) for r in out]
