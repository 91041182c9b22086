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


def decide(cfg, store, runs) -> Optional[Decision]:
    """None when auto-retraining is off; otherwise whether to queue a run now, and why."""
    ar = cfg.model_training.auto_retrain
    if not ar.enabled or not cfg.model_training.enabled:
        return None
    count = store.annotation_count()
    # labels in the store when the last automatic run was queued (persisted across restarts)
    new = count - int(store.meta_get("auto_retrain.labels", "0"))
    status = {"enabled": True, "labels": count, "new_labels": new,
              "update_frequency": ar.update_frequency}
    pending = [r for r in runs.with_status("queued", "running") if r.auto]
    last_auto = runs.last_auto_created()  # every run's record is kept: no full scan
    since = time.time() - last_auto if last_auto is not None else None
    if pending:
        status["reason"] = "automatic run %s is %s" % (pending[0].run_id,
                                                       pending[0].status)
    elif new < ar.update_frequency:
        status["reason"] = "%d new label(s) since the last automatic run; waiting for %d" % (
            new, ar.update_frequency)
    elif since is not None and since < ar.min_interval_s:
        status["reason"] = "the last automatic run started %d s ago; min_interval_s is %g" % (
            since, ar.min_interval_s)
    else:
        return Decision(status, start=True, labels=count)
    return Decision(status)
