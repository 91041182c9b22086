"""Upstream's diversity ordering: ``assignment_strategy: diversity_clustering`` and the
``diversity_ordering:`` block (either one turns it on, as upstream does). The order itself is
potato/project/clusters.py: the items clustered by their words (the server holds no
sentence-transformer), handed out one cluster after another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from potato.config.reader import Path, Reader, dotted

MAX_CLUSTERS = 64  # potato/project/clusters.py makes at most this many
KEYS = ("enabled", "model_name", "num_clusters", "items_per_cluster", "auto_clusters",
        "prefill_count", "batch_size", "recluster_threshold", "preserve_visited",
        "trigger_ai_prefetch", "cache_dir")
# Upstream's keys for its embedding model and caches: nothing here computes embeddings.
NO_EFFECT = ("prefill_count", "batch_size", "trigger_ai_prefetch", "cache_dir")


@dataclass
class DiversityOrder:
    enabled: bool = False
    num_clusters: int = 10
    items_per_cluster: int = 20
    auto_clusters: bool = True


def parse(r: Reader, raw: Any, strategy: str) -> DiversityOrder:
    path: Path = ("diversity_ordering",)
    m = r.mapping(raw, path, KEYS, "diversity_ordering")
    d = DiversityOrder()
    switched = r.boolean(m, "enabled", path, False)  # read (and checked) either way
    d.enabled = strategy == "diversity_clustering" or switched
    d.num_clusters = r.number(m, "num_clusters", path, d.num_clusters, 1, 100000, integer=True)
    d.items_per_cluster = r.number(m, "items_per_cluster", path, d.items_per_cluster, 1,
                                   10 ** 9, integer=True)
    d.auto_clusters = r.boolean(m, "auto_clusters", path, "num_clusters" not in m)
    r.number(m, "recluster_threshold", path, None, 0)
    r.boolean(m, "preserve_visited", path, True)
    model = r.text(m, "model_name", path, "all-MiniLM-L6-v2")
    if d.enabled and strategy == "active_learning":
        r.error(path + ("enabled",), f"{dotted(path + ('enabled',))} is true and "
                                     f"assignment_strategy is active_learning: both would "
                                     f"order the items. Keep one (diversity_ordering.enabled: "
                                     f"false, or another assignment_strategy).")
        d.enabled = False
    if not d.enabled:
        return d
    if strategy == "diversity_clustering" and "enabled" in m and not switched:
        r.warn(path + ("enabled",), f"{dotted(path + ('enabled',))} is false, and "
                                    f"assignment_strategy is diversity_clustering, which turns "
                                    f"it on (as upstream does).")
    elif strategy not in ("diversity_clustering", "fixed_order"):
        r.warn(path + ("enabled",), f"{dotted(path + ('enabled',))} is true: items are handed "
                                    f"out by diversity ordering, not by assignment_strategy "
                                    f"{strategy} (as upstream does). Remove one of them.")
    if not d.auto_clusters and d.num_clusters > MAX_CLUSTERS:
        r.warn(path + ("num_clusters",), f"{dotted(path + ('num_clusters',))} is "
                                         f"{d.num_clusters}: at most {MAX_CLUSTERS} clusters "
                                         f"are made here.")
    unused = [k for k in NO_EFFECT if k in m]
    r.warn(path, f"diversity ordering: items are clustered by their words here (hashed word "
                 f"counts), not embedded with {model}: the server holds no model. Items that "
                 f"share words are handed out apart. The order is made once at start, not "
                 f"again as annotators work (recluster_threshold has no effect)"
                 + (f"; {', '.join(unused)} (upstream's embedding settings) change nothing"
                    if unused else "") + ".")
    return d
