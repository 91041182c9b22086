"""Automatic retraining: a run after every ``update_frequency`` new labels (server side)."""

import time

from potato.training.runs import RequestError


def tick(manager) -> None:
    """Queue an automatic run when enough new labels arrived; ``manager.auto_status`` says why
    one did or did not start."""
    ar = manager.cfg.model_training.auto_retrain
    if not ar.enabled or not manager.cfg.model_training.enabled:
        return
    count = manager.store.annotation_count()
    # labels in the store when the last automatic run was queued (persisted across restarts)
    new = count - int(manager.store.meta_get("auto_retrain.labels", "0"))
    status = {"enabled": True, "labels": count, "new_labels": new,
              "update_frequency": ar.update_frequency}
    pending = [r for r in manager.runs.with_status("queued", "running") if r["auto"]]
    last_auto = manager.runs.last_auto_created()  # every run's record is kept: no full scan
    since = time.time() - last_auto if last_auto is not None else None
    if pending:
        status["reason"] = "automatic run %s is %s" % (pending[0]["run_id"],
                                                       pending[0]["status"])
    elif new < ar.update_frequency:
        status["reason"] = "%d new label(s) since the last automatic run; waiting for %d" % (
            new, ar.update_frequency)
    elif since is not None and since < ar.min_interval_s:
        status["reason"] = "the last automatic run started %d s ago; min_interval_s is %g" % (
            since, ar.min_interval_s)
    else:
        try:
            run = manager.submit(ar.trainer, ar.schemas, ar.backend, ar.params, auto=True)
            manager.store.meta_set("auto_retrain.labels", str(count))
            status["reason"] = "started automatic run %s" % run["run_id"]
        except RequestError as e:
            status["reason"] = "cannot start an automatic run: %s" % e.message
    manager.auto_status = status
