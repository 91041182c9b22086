"""Review of the reorder's speed-up (800c5c8): diversity reads each compared vector with its
own query, after the query that found which items have one. Those are separate statements on
an autocommit connection, so another thread's write can land between them."""

from potato.project import queue_order
from potato.project.store import Store

from tests.project.test_queue_order_attack import model_vectors


def test_a_prune_landing_while_diversity_reads_vectors_does_not_break_the_reorder(tmp_path):
    """A run's ranking rows go when it is pruned (``forget``, on the training thread after a
    run ends), and a reorder is not under that thread's control (the admin's Use, another
    run's ingest). Before the speed-up the blobs came with the ids in one statement, so a
    prune between statements left at worst a stale order; now the per-item read finds no row
    and the reorder raises TypeError ('NoneType' object is not subscriptable), which the
    caller (a request, a run's ingest) gets.

    The prune is made to land deterministically: when the reorder's connection starts the
    first read of rank_scores after the one that found which items have vectors, a second
    connection (as the training thread has) forgets the run. (A reorder that reads the
    vectors in the same statement as before has no such window, and passes.)"""
    cfg, store = model_vectors(tmp_path)
    other = Store(cfg.db_path)
    seen, pruned = [], []

    def prune_now(sql):
        if "rank_scores" not in sql or pruned:
            return
        if seen:
            pruned.append(sql)
            queue_order.forget(other, ["r1"])
        elif "vector IS NOT NULL" in sql:
            seen.append(sql)

    try:
        store.conn().set_trace_callback(prune_now)
        try:
            queue_order.reorder(store, cfg, lambda st, scheme: "r1")
        finally:
            store.conn().set_trace_callback(None)
        assert seen, "the reorder no longer looks for vectors: the test is out of date"
        if pruned:  # the window was there, and the run's rows went in it
            assert other.conn().execute("SELECT COUNT(*) FROM rank_scores").fetchone()[0] == 0
    finally:
        other.close()
        store.close()
