"""Automatic retraining: a run after every ``update_frequency`` new labels (server side).

``decide`` reads the store and the runs and returns a ``Decision``; the manager carries it out
(queues the run, records the label count) and keeps its status for the API. Nothing here
writes into the manager.
"""

import time
from typing import Any, Dict, Optional


class Decision:
    """What auto-retraining concluded: ``start`` (queue an automatic run now, remembering
    ``labels``), and the status the API shows (``reason`` filled in by the manager when it
    starts a run)."""

    def __init__(self, status: Dict[str, Any], start: bool = False, labels: int = 0):
        self.status = status
        self.start = start
        self.labels = labels


def enabled(cfg) -> bool:
    """Automatic runs are on: auto_retrain.enabled, or active learning (whose queue follows
    each new model)."""
    return cfg.model_training.enabled and (cfg.model_training.auto_retrain.enabled
                                           or cfg.active_learning.enabled)


def schemes(cfg):
    """The schemes of an automatic run: auto_retrain.schemas, else active learning's."""
    ar = cfg.model_training.auto_retrain
    if ar.schemas or not cfg.active_learning.enabled:
        return ar.schemas
    return cfg.active_learning.schemes


def decide(cfg, store, runs) -> Optional[Decision]:
    """None when auto-retraining is off; otherwise whether to queue a run now, and why.
    With active learning the first run waits for ``min_instances_for_training`` labels and
    the next ones for ``update_frequency`` (its own) new labels each."""
    ar = cfg.model_training.auto_retrain
    al = cfg.active_learning
    if not enabled(cfg):
        return None
    count = store.annotation_count()
    every = al.update_frequency if al.enabled else ar.update_frequency
    # labels in the store when the last automatic run was queued (persisted across restarts)
    last = store.meta_get("auto_retrain.labels")
    first = al.enabled and last is None
    new = count - int(last or "0")
    status = {"enabled": True, "labels": count, "new_labels": new,
              "update_frequency": every}
    if first:
        status["min_instances_for_training"] = al.min_instances
    pending = [r for r in runs.with_status("queued", "running") if r.auto]
    last_auto = runs.last_auto_created()  # every run's record is kept: no full scan
    since = time.time() - last_auto if last_auto is not None else None
    if pending:
        status["reason"] = "automatic run %s is %s" % (pending[0].run_id,
                                                       pending[0].status)
    elif first and count < al.min_instances:
        status["reason"] = ("%d label(s) so far; the first run that orders the queue starts at "
                            "%d (active_learning.min_instances_for_training)"
                            % (count, al.min_instances))
    elif not first and new < every:
        status["reason"] = "%d new label(s) since the last automatic run; waiting for %d" % (
            new, every)
    elif since is not None and since < ar.min_interval_s:
        status["reason"] = "the last automatic run started %d s ago; min_interval_s is %g" % (
            since, ar.min_interval_s)
    else:
        return Decision(status, start=True, labels=count)
    status["next_at"] = count + max(0, (al.min_instances - count) if first else every - new)
    return Decision(status)
