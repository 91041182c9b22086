"""Retention (``model_training.retain_runs``): which finished runs keep their model files.

Every run's record, held-out report, params, kept predictions and log stay for good: they are
small, and a lab compares runs for months. Only model files (the run directory's
``artifacts/``) are deleted, and only those of a finished run that ``retain_runs`` newer
successful runs have superseded; never those of a run in use or of a pinned run. Failed and
cancelled runs never count toward ``retain_runs``. The run log and the run's page say when
model files were deleted and why.
"""

import os
import shutil
from typing import Callable, List


def reason(keep: int, newer: List[str]) -> str:
    """Why a run's model files were deleted, in one sentence."""
    return ("model_training.retain_runs: %d keeps the model files of the %d newest successful "
            "run%s (%s), of the runs in use and of pinned runs; the run's record, report, "
            "params, predictions and log are kept. Pin a run to keep its model files."
            % (keep, keep, "" if keep == 1 else "s", ", ".join(newer[:keep])))


def _has_files(directory: str) -> bool:
    try:
        return bool(os.listdir(directory))
    except OSError:
        return False


def prune(runs, paths_of: Callable, keep: int, log: Callable[[str, str], None]) -> List[str]:
    """Delete the model files that ``retain_runs`` no longer keeps; the runs pruned.

    ``runs`` is the RunStore, ``paths_of(run_id)`` a run's RunPaths, ``log(run_id, line)``
    writes to that run's log."""
    in_use = runs.runs_in_use()
    newer: List[str] = []  # successful runs newer than the one looked at, newest first
    pruned = []
    for run_id, status, pinned, pruned_at in runs.finished_newest_first():
        if len(newer) >= keep and not pinned and pruned_at is None and run_id not in in_use:
            artifacts = paths_of(run_id).artifacts
            if _has_files(artifacts):
                why = reason(keep, newer)
                try:
                    shutil.rmtree(artifacts)
                except OSError as e:
                    log(run_id, "could not delete the model files in %s (%s): %s"
                        % (artifacts, why, e))
                else:
                    runs.mark_pruned(run_id, why)
                    log(run_id, "model files deleted: " + why)
                    pruned.append(run_id)
        if status == "success":
            newer.append(run_id)
    return pruned
