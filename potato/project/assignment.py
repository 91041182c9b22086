"""Which items an annotator gets, and in what order.

Without limits (the default) every annotator walks every item in data-file order. With
upstream Potato's ``num_annotators_per_item`` / ``max_annotations_per_item`` (at most N
annotators per item) or ``max_annotations_per_user`` (at most N items per annotator), each
annotator gets items one at a time, the first item in data-file order that fewer than N
annotators have been given; what was given stays theirs (table ``assignments``, in the
project's store). With ``assignment_strategy: least_annotated`` the next item is instead the
one the fewest annotators have labelled or been given (data-file order among equals), so a new
annotator of a project whose first items are labelled starts where labels are needed. With
upstream's diversity ordering (``assignment_strategy: diversity_clustering`` or
``diversity_ordering.enabled``) the next item is the first open one of potato/project/clusters.py's
order, the clusters of the items taken in turn. Handing out an item is one write transaction,
so two annotators arriving at once never push an item past its limit.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Dict, List, Optional, Tuple

from potato.project import clusters, queue_order
from potato.project.store import Store

TABLE = """CREATE TABLE IF NOT EXISTS assignments (
    annotator TEXT NOT NULL,
    item_id TEXT NOT NULL,
    seq INTEGER NOT NULL,          -- the order in which this annotator got it
    assigned_at REAL NOT NULL,
    why TEXT,                      -- how it was chosen (strategy, score, run), for the export
    PRIMARY KEY (annotator, item_id)
);
CREATE INDEX IF NOT EXISTS assignments_item ON assignments(item_id);"""


class AllItems:
    """Every annotator gets every active item, in order."""

    limited = False

    def __init__(self, store: Store):
        self.store = store

    def total(self, user: str) -> int:
        return self.store.item_count()

    def item_at(self, user: str, position: int):
        return self.store.item_at(position) if 0 <= position < self.total(user) else None

    def first_unlabelled(self, user: str) -> int:
        return self.store.first_unlabelled(user)

    def position_of(self, user: str, item_id: str) -> Optional[int]:
        """Where an item is in this annotator's walk (None: not an active item)."""
        return self.store.position_of(item_id)

    def reachable(self, user: str) -> int:
        """How many items the annotator can open by number now: every item."""
        return self.total(user)

    def may_label(self, user: str, item_id: str) -> bool:
        return True


class Limited(AllItems):
    """At most ``per_item`` annotators per item and ``per_user`` items per annotator."""

    limited = True

    def __init__(self, store: Store, per_item: Optional[int], per_user: Optional[int],
                 strategy: str = "fixed_order"):
        super().__init__(store)
        self.per_item, self.per_user = per_item, per_user
        self.strategy = strategy
        store.conn().executescript(TABLE)
        columns = [r[1] for r in store.conn().execute("PRAGMA table_info(assignments)")]
        if "why" not in columns:  # a store from before the reasons were kept
            with store.tx() as db:
                db.execute("ALTER TABLE assignments ADD COLUMN why TEXT")
        self.cold_start = "fixed_order"
        if strategy == "active_learning":
            queue_order.ensure(store)

    def assigned(self, user: str) -> List[str]:
        return [r[0] for r in self.store.conn().execute(
            "SELECT a.item_id FROM assignments a JOIN items i ON i.id=a.item_id WHERE "
            "a.annotator=? AND i.active=1 ORDER BY a.seq", (user,))]

    def _open_where(self) -> str:
        """The condition on an item ``i`` open to annotator ``?``: active, not theirs yet,
        given to fewer than per_item annotators."""
        cap = "" if self.per_item is None else (
            " AND (SELECT COUNT(*) FROM assignments b WHERE b.item_id=i.id) < %d" % self.per_item)
        if self.strategy == "active_learning" and self.per_item is not None:
            # labels count too (imported, or given before active learning was on): an item
            # with per_item annotators needs no more, whoever labelled it
            cap = (" AND (SELECT COUNT(*) FROM (SELECT annotator FROM annotations WHERE "
                   "item_id=i.id UNION SELECT annotator FROM assignments WHERE "
                   "item_id=i.id)) < %d" % self.per_item)
        return ("i.active=1 AND NOT EXISTS (SELECT 1 FROM assignments a "
                "WHERE a.item_id=i.id AND a.annotator=?)" + cap)

    def _open_sql(self) -> str:
        return "FROM items i WHERE " + self._open_where()

    def _cold_why(self) -> str:
        if self.strategy == "diversity_clustering":
            return "diversity_clustering: clusters of the items' words, taken in turn"
        if self.strategy != "active_learning":
            return self.strategy
        return ("cold start: %s (no model in use ranks this item yet)"
                % ("random order" if self.cold_start == "random" else "data-file order"))

    def total(self, user: str) -> int:
        mine = len(self.assigned(user))
        more = self.store.conn().execute("SELECT COUNT(*) " + self._open_sql(),
                                         (user,)).fetchone()[0]
        room = more if self.per_user is None else max(0, min(more, self.per_user - mine))
        return mine + room

    def item_at(self, user: str, position: int):
        ids = self.assigned(user)
        if 0 <= position < len(ids):
            return self.store.item(ids[position])
        if position != len(ids) or self.per_user is not None and len(ids) >= self.per_user:
            return None
        with self.store.tx() as db:
            # again inside the write lock: the same user's concurrent request may have taken
            # an item since ``ids`` was read (the per-user cap would be beaten otherwise)
            ids = [r[0] for r in db.execute(
                "SELECT a.item_id FROM assignments a JOIN items i ON i.id=a.item_id WHERE "
                "a.annotator=? AND i.active=1 ORDER BY a.seq", (user,))]
            if position < len(ids):
                return self.store.item(ids[position])
            if position != len(ids) or self.per_user is not None and len(ids) >= self.per_user:
                return None
            row, why = None, self._cold_why()
            if self.strategy == "active_learning":  # the model's order, then the cold start
                found = queue_order.next_place(db, self._open_where(), (user,))
                if found is not None:
                    row, why = (found[0],), found[1]
            if self.strategy == "least_annotated":  # first, cheaply, an item nobody has yet
                # (index lookups in data-file order; the count below reads every open item)
                row = db.execute(
                    "SELECT i.id " + self._open_sql() + " AND NOT EXISTS (SELECT 1 FROM "
                    "annotations n WHERE n.item_id=i.id) AND NOT EXISTS (SELECT 1 FROM "
                    "assignments g WHERE g.item_id=i.id) ORDER BY i.position LIMIT 1",
                    (user,)).fetchone()
            if row is None:
                row = db.execute("SELECT i.id " + self._open_sql() + " ORDER BY "
                                 + self._order() + " LIMIT 1", (user,)).fetchone()
            if row is None:
                return None
            seq = db.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM assignments WHERE "
                             "annotator=?", (user,)).fetchone()[0]
            db.execute("INSERT INTO assignments(annotator, item_id, seq, assigned_at, why) "
                       "VALUES (?, ?, ?, ?, ?)", (user, row[0], seq, time.time(), why))
        return self.store.item(row[0])

    def _order(self) -> str:
        if self.strategy == "least_annotated":  # fewest annotators (labelled or given) first
            return ("(SELECT COUNT(*) FROM (SELECT annotator FROM annotations WHERE "
                    "item_id=i.id UNION SELECT annotator FROM assignments WHERE "
                    "item_id=i.id)), i.position")
        if self.strategy == "diversity_clustering":  # clusters.py's order; a newer item last
            return ("COALESCE((SELECT c.place FROM cluster_order c WHERE c.item_id=i.id), "
                    "1 << 62), i.position")
        if self.strategy == "random" or (self.strategy == "active_learning"
                                         and self.cold_start == "random"):
            # one shuffled order: a fixed permutation of positions
            return "(i.position * 2654435761 + 40503) % 4294967291, i.position"
        return "i.position"

    def first_unlabelled(self, user: str) -> int:
        ids = self.assigned(user)
        done = {r[0] for r in self.store.conn().execute(
            "SELECT DISTINCT item_id FROM annotations WHERE annotator=?", (user,))}
        return next((n for n, i in enumerate(ids) if i not in done), len(ids))

    def position_of(self, user: str, item_id: str) -> Optional[int]:
        """Where an item is among those given to this annotator (None: not given to them)."""
        ids = self.assigned(user)
        return ids.index(item_id) if item_id in ids else None

    def reachable(self, user: str) -> int:
        """The items given so far, and the next one (given when it is opened)."""
        return min(len(self.assigned(user)) + 1, self.total(user))

    def may_label(self, user: str, item_id: str) -> bool:
        return item_id in self.assigned(user)


def for_config(cfg, store: Store) -> AllItems:
    up = cfg.upstream
    al = cfg.active_learning
    if al.enabled:  # one annotator per item unless the limits ask for more
        limited = Limited(store, up.per_item or 1, up.per_user, "active_learning")
        limited.cold_start = al.cold_start
        return limited
    if cfg.diversity_order.enabled:
        clusters.prepare(store, cfg.diversity_order, str(cfg.model_training.split_seed))
        return Limited(store, up.per_item, up.per_user, "diversity_clustering")
    if up.per_item is None and up.per_user is None and up.strategy == "fixed_order":
        return AllItems(store)
    return Limited(store, up.per_item, up.per_user, up.strategy)


def reasons(store: Store) -> Dict[Tuple[str, str], str]:
    """(annotator, item id) -> how the item was chosen for them, where recorded."""
    try:
        return {(r[0], r[1]): r[2] for r in store.conn().execute(
            "SELECT annotator, item_id, why FROM assignments WHERE why IS NOT NULL")}
    except sqlite3.OperationalError:  # no assignments table: every annotator walks every item
        return {}
