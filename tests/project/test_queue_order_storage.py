"""How the order in use is kept (potato/project/queue_order.py, diversity.py), as a reorder's
callers see it: a store from before the present layout keeps its order, a write that fails
half-way leaves the order in use whole and nothing behind it, the places of one generation
at a time, the cycle collector on again after a reorder, and diversity's picks spread over
what the model's vectors say is far apart."""

import gc
import math
import random

import pytest

from potato.config.settings import load
from potato.project import queue_order
from potato.project.store import Store
from potato.training.remote.bundle import split_of

from tests.helpers import make_project
from tests.project.test_queue_order_attack import model_vectors

AL = """assignment_strategy: active_learning
active_learning:
  query_strategy: %s
  random_sample_percent: 0
"""


def places(store):
    """How many places the store holds, over every generation."""
    return store.conn().execute("SELECT COUNT(*) FROM queue_places").fetchone()[0]


def test_a_store_from_before_keeps_its_order_in_use(tmp_path):
    """Up to 2026-12-07 each place kept its reason as text in table queue_order. Such a
    store's order in use comes over whole, reasons and scores included, once; also where a
    newer version had run before (review 27: its places collided with the moved ones)."""
    cfg, store = model_vectors(tmp_path, "uncertainty")
    try:
        open_items = [r[0] for r in store.conn().execute(
            "SELECT id FROM items WHERE id NOT IN (SELECT item_id FROM annotations) "
            "ORDER BY id DESC")][:30]
        # a newer version ran here once (its order in queue_places), then the old one again
        assert queue_order.reorder(store, cfg, lambda st, scheme: "r1") == 1
        db = store.conn()
        db.executescript("CREATE TABLE queue_order (gen INTEGER NOT NULL, rank INTEGER NOT "
                         "NULL, item_id TEXT NOT NULL, score REAL, why TEXT NOT NULL, PRIMARY "
                         "KEY (gen, rank));")
        for gen in (3, 4):  # an older generation the old code had not removed yet, and 4
            db.executemany("INSERT INTO queue_order VALUES (?,?,?,?,?)",
                           [(gen, k, i, 0.5 + k / 100.0, "uncertainty {score} (run r%d)" % gen)
                            for k, i in enumerate(open_items)])
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('queue_order.gen', '4')")
        store.close()
        store = Store(cfg.db_path)
        st = queue_order.status(store, 5)
        assert st["ordered"]
        assert [x["item_id"] for x in st["next"]] == open_items[:5]
        assert [x["why"] for x in st["next"][:2]] == ["uncertainty 0.500 (run r4)",
                                                      "uncertainty 0.510 (run r4)"]
        assert store.conn().execute("SELECT COUNT(*) FROM sqlite_master WHERE "
                                    "name='queue_order'").fetchone()[0] == 0
        # the next reorder replaces it, and leaves one generation
        assert queue_order.reorder(store, cfg, lambda st, scheme: "r1") == 5
        assert places(store) == queue_order.status(store)["size"]
    finally:
        store.close()


def test_a_write_that_fails_half_way_leaves_the_order_in_use_and_nothing_behind(tmp_path):
    store = Store(str(tmp_path / "potato.db"))
    try:
        queue_order.ensure(store)
        good = queue_order.Plan([("a%05d" % k, 0.5, "one") for k in range(12000)], {"s": "r1"})
        gen = queue_order.write(store, good, "uncertainty")
        broken = queue_order.Plan([("b%05d" % k, 0.5, "two") for k in range(15000)]
                                  + [(None, 0.5, "two")], {"s": "r2"})  # no item id: refused
        with pytest.raises(Exception):
            queue_order.write(store, broken, "uncertainty")
        assert int(store.meta_get("queue_order.gen")) == gen
        assert int(store.meta_get("queue_order.size")) == 12000
        assert places(store) > 12000  # the broken one's first rows were committed
        assert gc.isenabled()
        again = queue_order.write(store, good, "uncertainty")
        assert again > gen + 1  # the broken generation's number is not reused
        assert places(store) == 12000  # only the order in use is left
        for _ in range(5):  # and reorder after reorder, one generation at a time
            queue_order.write(store, good, "uncertainty")
            assert places(store) == 12000
    finally:
        store.close()


def test_the_cycle_collector_is_on_again_after_a_reorder(tmp_path):
    cfg, store = model_vectors(tmp_path, "hybrid")
    try:
        assert gc.isenabled()
        assert queue_order.reorder(store, cfg, lambda st, scheme: "r1") is not None
        assert gc.isenabled()
        gc.disable()  # a server that runs without it keeps running without it
        try:
            queue_order.reorder(store, cfg, lambda st, scheme: "r1")
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        store.close()


def clustered(tmp_path, strategy):
    """The example's items with 6-number vectors near one of 4 orthogonal directions (their
    cluster): every labelled item in cluster 0, the others in 1 to 3 at random, all as
    uncertain as each other."""
    path = make_project(tmp_path, top=AL % strategy)
    cfg, errors, _ = load(path)
    assert errors == []
    store = Store(cfg.db_path)
    labelled = {r[0] for r in store.conn().execute("SELECT DISTINCT item_id FROM annotations")}
    rng = random.Random(3)
    cluster, rows = {}, []
    for (item,) in store.conn().execute("SELECT id FROM items"):
        if item in labelled and split_of(item, 13, (0.70, 0.15, 0.15)) == "train":
            continue  # the model predicts val, test and unlabelled items
        c = 0 if item in labelled else rng.randrange(1, 4)
        cluster[item] = c
        v = [rng.gauss(0, 0.05) for _ in range(6)]
        v[c] += 1.0
        rows.append(("sentiment", item, (0.5, 0.5, 0.5), v))
    queue_order.keep_scores(store, "r1", rows)
    return cfg, store, cluster


@pytest.mark.parametrize("strategy", ["diversity", "hybrid"])
def test_diversity_picks_what_is_far_from_the_labels_and_from_each_other(tmp_path, strategy):
    """The labels all lie in one region of the model's space: the first three picks are one
    from each other region, the fourth (near one of them) scores far lower, and each is said
    to be chosen by the strategy, with its score."""
    cfg, store, cluster = clustered(tmp_path, strategy)
    try:
        assert queue_order.reorder(store, cfg, lambda st, scheme: "r1") is not None
        picks = [x for x in queue_order.status(store, 40)["next"]
                 if not x["why"].startswith("test split")][:4]
        assert sorted(cluster[x["item_id"]] for x in picks[:3]) == [1, 2, 3], picks
        assert all(x["why"].startswith(strategy + " ") for x in picks)
        assert all(math.isfinite(x["score"]) for x in picks)
        assert picks[3]["score"] < picks[2]["score"] - 0.1, picks  # hybrid: diversity 0.23 of it
    finally:
        store.close()


def test_schemes_whose_runs_send_vectors_of_other_sizes_still_reorder(tmp_path):
    """Review 27: the boundary holds each run to one size per scheme; two active-learning
    schemes may still send 8 and 16 numbers. A reorder compares one size, and finishes."""
    cfg, store = model_vectors(tmp_path, "diversity")
    try:
        rng = random.Random(5)
        items = [r[0] for r in store.conn().execute("SELECT id FROM items")]
        queue_order.keep_scores(store, "r1", [("topic", i, (0.4, 0.4, 0.4),
                                               [rng.gauss(0, 1) for _ in range(16)])
                                              for i in items[::2]])
        cfg.active_learning.schemes = ["sentiment", "topic"]
        for strategy in ("diversity", "hybrid"):
            cfg.active_learning.strategy = strategy
            assert queue_order.reorder(store, cfg, lambda st, scheme: "r1") is not None
            picks = [x for x in queue_order.status(store, 20)["next"]
                     if not x["why"].startswith("test split")]
            assert picks and picks[0]["why"].startswith(strategy)
    finally:
        store.close()


def test_after_a_failed_write_the_used_up_order_hands_out_nothing_of_it(tmp_path):
    """A write that failed half-way leaves its first rows behind until the next write; once
    every place of the order in use is taken, assignment falls back to the cold start, never
    to those rows. The connection commits as every write does again."""
    store = Store(str(tmp_path / "potato.db"))
    try:
        queue_order.ensure(store)
        store.sync_items([("a%d" % k, "text %d" % k, {}) for k in range(3)]
                         + [("b%05d" % k, "b", {}) for k in range(12000)])
        queue_order.write(store, queue_order.Plan([("a%d" % k, 0.5, "one") for k in range(3)],
                                                  {"s": "r1"}), "uncertainty")
        broken = queue_order.Plan([("b%05d" % k, 0.5, "two") for k in range(11000)]
                                  + [(None, 0.5, "two")], {"s": "r2"})
        with pytest.raises(Exception):
            queue_order.write(store, broken, "uncertainty")
        assert store.conn().execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert not store.conn().in_transaction
        db = store.conn()
        db.execute("BEGIN")
        try:
            first = queue_order.next_place(db, "i.active=1", ())
            assert first == ("a0", "one")
            taken = queue_order.next_place(db, "i.id NOT IN ('a0', 'a1', 'a2')", ())
            assert taken is None  # not b00000: the broken generation is not in use
        finally:
            db.execute("COMMIT")
    finally:
        store.close()
