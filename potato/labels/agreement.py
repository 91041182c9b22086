"""How far annotators agree, for the admin page: per scheme whose values are one label each
(radio, select, likert), the items labelled, unlabelled and tied, Cohen's kappa for each pair
of annotators over the items that exactly those two labelled, and Fleiss' kappa over the items
that three or more labelled (those with the most common number of annotators: Fleiss' kappa
needs the same number on every item). For regions on images: the mean F1 of two annotators'
matched regions (``region_agreement``).

Standard library only; tests check both against scikit-learn and a textbook example.
"""

import json
from collections import Counter
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

from potato.config.settings import Config
from potato.labels import geometry
from potato.project.store import Store

MAX_PAIRS = 10  # pairs of annotators shown per scheme, the most items first


def cohen_kappa(pairs: Sequence[Tuple[Hashable, Hashable]]) -> Optional[float]:
    """Cohen's kappa of two raters, ``pairs`` their labels item by item; None when it is not
    defined (no items, or both raters gave one and the same label throughout)."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(1 for a, b in pairs if a == b) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[k] * second[k] for k in first) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def fleiss_kappa(table: Sequence[Sequence[int]]) -> Optional[float]:
    """Fleiss' kappa of a subjects x categories table of counts, each row summing to the same
    number of raters (at least two); None when it is not defined."""
    if not table:
        return None
    raters = sum(table[0])
    if raters < 2 or any(sum(row) != raters for row in table):
        return None
    n = len(table)
    per_item = [(sum(c * c for c in row) - raters) / (raters * (raters - 1)) for row in table]
    totals = [sum(row[j] for row in table) for j in range(len(table[0]))]
    shares = [t / (n * raters) for t in totals]
    expected = sum(p * p for p in shares)
    if expected >= 1.0:
        return None
    return (sum(per_item) / n - expected) / (1.0 - expected)


def _key(value: Any) -> Hashable:
    return json.dumps(value, sort_keys=True)


def scheme_agreement(votes: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """``votes``: item -> annotator -> value (one scheme). Ties among the items with two or
    more annotators (no single most frequent value), Cohen's kappa per pair, Fleiss' kappa."""
    ties = 0
    by_pair: Dict[Tuple[str, str], List[Tuple[Hashable, Hashable]]] = {}
    by_count: Dict[int, List[Dict[str, Any]]] = {}
    for by_annotator in votes.values():
        values = [_key(v) for v in by_annotator.values()]
        counts = Counter(values).most_common()
        if len(counts) > 1 and counts[0][1] == counts[1][1]:
            ties += 1
        if len(by_annotator) == 2:
            (a, va), (b, vb) = sorted(by_annotator.items())
            by_pair.setdefault((a, b), []).append((_key(va), _key(vb)))
        elif len(by_annotator) >= 3:
            by_count.setdefault(len(by_annotator), []).append(by_annotator)
    cohen = [{"annotators": list(pair), "items": len(pairs), "kappa": cohen_kappa(pairs)}
             for pair, pairs in sorted(by_pair.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    fleiss = None
    if by_count:
        k = max(by_count, key=lambda c: (len(by_count[c]), c))
        items = by_count[k]
        categories = sorted({_key(v) for item in items for v in item.values()})
        table = [[Counter(_key(v) for v in item.values())[c] for c in categories]
                 for item in items]
        fleiss = {"annotators_per_item": k, "items": len(items), "kappa": fleiss_kappa(table)}
    return {"ties": ties, "cohen": cohen[:MAX_PAIRS], "more_pairs": max(0, len(cohen) - MAX_PAIRS),
            "fleiss": fleiss}


def region_agreement(votes: Dict[str, Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Regions on images: the mean, over every pair of annotators of every item both drew on,
    of the F1 of their matched regions (the same label and tool, IoU at least 0.5;
    potato/labels/geometry.py); None when no item has two annotators."""
    scores = []
    for by_annotator in votes.values():
        drawn = [v for _, v in sorted(by_annotator.items()) if isinstance(v, list)]
        m = geometry.Measure()  # one image's budget
        for i in range(len(drawn)):
            for j in range(i + 1, len(drawn)):
                scores.append(geometry.pair_f1(drawn[i], drawn[j], m))
    if not scores:
        return None
    return {"f1": sum(scores) / len(scores), "pairs": len(scores)}


def summary(cfg: Config, store: Store) -> Dict[str, Dict[str, Any]]:
    """Per scheme: ``items`` (active), ``labelled``, ``unlabelled``, ``ties``, and for schemes
    whose value is one label, ``cohen`` and ``fleiss`` (see ``scheme_agreement``)."""
    active = {r[0] for r in store.conn().execute("SELECT id FROM items WHERE active=1")}
    votes: Dict[str, Dict[str, Dict[str, Any]]] = {s.name: {} for s in cfg.schemes}
    for r in store.conn().execute("SELECT item_id, scheme, annotator, label FROM annotations"):
        if r["scheme"] in votes:
            votes[r["scheme"]].setdefault(r["item_id"], {})[r["annotator"]] = \
                json.loads(r["label"])
    out = {}
    for s in cfg.schemes:
        mine = votes[s.name]
        found = scheme_agreement(mine) if s.kind is not None and s.kind.one_label else {
            "ties": None, "cohen": [], "more_pairs": 0, "fleiss": None}
        if s.kind is not None and s.kind.aggregate_as == "regions":
            found["regions"] = region_agreement(mine)
        out[s.name] = dict(found, items=len(active), labelled=len(active & set(mine)),
                           unlabelled=len(active - set(mine)))
    return out
