"""The admin's choices about the model in use: put a run in use, pin it, unpin it.

A run is *in use* for a scheme when its kept predictions are the suggestions annotators see.
After each successful run ``writeback.policy`` decides whether the new run takes over
(``ingest.takes_over``); the admin can override it at any time. A *pinned* run stays in use
until the admin changes it, whatever the policy, and its model files are never pruned by
``retain_runs`` (``retention``).
"""

from typing import List, Optional

from potato.training.exchange import ingest
from potato.training.lifecycle import retention
from potato.training.core.runs import RequestError, Run
from potato.training.reports.writeback import WriteBack


def usable_schemes(manager, run: Run) -> List[str]:
    """The run's write-back schemes for which it kept predictions (what "use" would switch)."""
    al = manager.cfg.active_learning
    schemes = list(manager.cfg.model_training.writeback.schemas) + (
        list(al.schemes) if al.enabled else [])
    return [s for s in run.schemas if s in schemes and manager.runs.kept_predictions(
        run.run_id, s)]


def not_finished(run: Run) -> str:
    """The sentence for a queued or running run; "" for a finished one."""
    if run.status in ("queued", "running"):
        return ("Run %s is %s: only a successful run can be used or pinned; wait for it to "
                "finish." % (run.run_id, run.status))
    return ""


def use_refusal(manager, run: Run) -> str:
    """Why the run cannot be put in use, in one sentence; "" when it can."""
    run_id = run.run_id
    if run.status != "success":
        return not_finished(run) or "Run %s did not succeed, so it has no model to use." % run_id
    if usable_schemes(manager, run):
        return ""
    wb_schemes = manager.cfg.model_training.writeback.schemas
    wb = run.writeback or WriteBack()
    if not any(s in wb_schemes for s in run.schemas):
        why = ("none of its schemes (%s) is in model_training.writeback.schemas (%s)"
               % (", ".join(run.schemas), ", ".join(wb_schemes) or "none"))
    elif gone(manager, run):
        why = let_go(manager)
    elif wb.all_below:
        why = ("all %d of its predictions were below writeback.min_confidence (%s)"
               % (wb.below_min_confidence, wb.min_confidence))
    else:
        why = ("it kept no predictions for a scheme in model_training.writeback.schemas (%s)"
               % ", ".join(wb_schemes))
    return "Run %s cannot be put in use: %s, so annotators would see nothing from it." % (
        run_id, why)


def gone(manager, run: Run) -> bool:
    """Whether retain_runs let the run go: its model files and kept predictions deleted."""
    return run.pruned_at is not None or run.run_id in retention.superseded(
        manager.runs, manager.cfg.model_training.retain_runs)


def let_go(manager) -> str:
    """Why a run retain_runs let go can no longer be used or pinned."""
    keep = manager.cfg.model_training.retain_runs
    return ("its model files and kept predictions were deleted (model_training.retain_runs "
            "keeps those of the %s; pin a run to keep them)"
            % ("newest successful run" if keep == 1 else "%d newest successful runs" % keep))


def use(manager, run_id: str) -> List[str]:
    """Put a successful run's predictions in use for its write-back schemes (the admin's
    choice, whatever writeback.policy says); the schemes switched. RequestError when the run
    has nothing to put in use."""
    with ingest.CHOICE:
        run = manager.runs.get(run_id)
        if run is None:
            raise RequestError(404, "No run %s." % run_id)
        refusal = use_refusal(manager, run)
        if refusal:
            raise RequestError(409, refusal)
        switched = usable_schemes(manager, run)
        before = {ingest.in_use(manager.store, scheme) for scheme in switched} - {run_id, None}
        for scheme in switched:
            ingest.use(manager.store, scheme, run_id,
                       scheme in manager.cfg.model_training.writeback.schemas)
        manager.run_log(run_id, "put in use for %s by the admin" % ", ".join(switched))
        _move_pin(manager, run_id, [r for r in before if manager.runs.pinned(r)], switched)
        if set(switched) & set(manager.cfg.active_learning.schemes):
            ordered = ingest.reorder(manager.store, manager.cfg)
            manager.run_log(run_id, ordered or (
                "active learning: run %s kept no ranking numbers (it ran before active "
                "learning was on, or its model files were pruned), so the queue keeps its "
                "order" % run_id))
        return switched


def _move_pin(manager, run_id: str, pinned: List[str], switched: List[str]) -> None:
    """Use on another run moves the pin of the runs it replaced: the new run is pinned (the
    policy does not replace the admin's choice), and a replaced run in use for nothing now
    is unpinned (a pin on a run not in use would keep nothing in use)."""
    if not pinned:
        return
    still = manager.runs.runs_in_use()
    for old in pinned:
        if old not in still:
            manager.runs.set_pinned(old, False)
            manager.run_log(old, "unpinned by the admin: run %s was put in use for %s instead, "
                                 "and the pin moved to it" % (run_id, ", ".join(switched)))
    if not manager.runs.pinned(run_id):
        manager.runs.set_pinned(run_id, True)
        manager.run_log(run_id, "pinned by the admin: the pin of %s moved to this run, which "
                                "replaced it in use" % ", ".join(pinned))


def pin(manager, run_id: str) -> Run:
    """Pin a successful run: it is put in use where it can be and is not yet, stays in use
    until the admin changes it, and keeps its model files. Returns the run."""
    with ingest.CHOICE:
        run = manager.runs.get(run_id)
        if run is None:
            raise RequestError(404, "No run %s." % run_id)
        if run.status != "success":
            raise RequestError(409, not_finished(run) or "Run %s did not succeed: only a "
                               "successful run can be pinned." % run_id)
        if not run.in_use and not run.pinned and gone(manager, run):
            raise RequestError(409, "Run %s cannot be pinned: %s." % (run_id, let_go(manager)))
        if not run.in_use and not use_refusal(manager, run):
            use(manager, run_id)
        manager.runs.set_pinned(run_id, True)
        run = manager.runs.get(run_id)
    manager.run_log(run_id, "pinned by the admin: %s; its model files are never pruned" % (
        "it stays in use for %s until the admin changes it, whatever writeback.policy says"
        % ", ".join(run.in_use) if run.in_use else "it is in use for no scheme"))
    return run


def unpin(manager, run_id: str) -> Optional[Run]:
    """Unpin a run: writeback.policy decides again from the next successful run."""
    with ingest.CHOICE:
        run = manager.runs.get(run_id)
        if run is None:
            raise RequestError(404, "No run %s." % run_id)
        if run.pinned:
            manager.runs.set_pinned(run_id, False)
            manager.run_log(run_id, "unpinned by the admin: writeback.policy decides again "
                                     "from the next successful run")
        return manager.runs.get(run_id)


def switched_message(run: Run, action: str) -> str:
    """What the run page says after the admin's action (``use``, ``pin`` or ``unpin``)."""
    schemes = ", ".join(map(str, run.in_use or []))
    run_id = run.run_id
    if action == "use":
        return ("Run %s is now in use for %s: annotators see its predictions as suggestions."
                % (run_id, schemes) if schemes else "Run %s is in use for no scheme." % run_id)
    if action == "pin":
        return ("Run %s is pinned%s: no later run replaces it until you change it, and its "
                "model files are kept." % (run_id, " and in use for %s" % schemes
                                           if schemes else ""))
    if action == "unpin":
        return ("Run %s is no longer pinned: writeback.policy decides again from the next "
                "successful run." % run_id)
    return ""
