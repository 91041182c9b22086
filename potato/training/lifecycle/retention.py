"""Retention (``model_training.retain_runs``): which finished runs keep their model files.

Every run's record, held-out report, params and log stay for good: they are small, and a lab
compares runs for months. Model files (the run directory's ``artifacts/``) are deleted, with
the run's kept predictions and ranking numbers (a whole pool's at every retraining: they would
grow for as long as the server runs), only for a finished run that ``retain_runs`` newer
successful runs have superseded; never those of a run in use, of a pinned run, or of a run
whose files are being read (a publish to the Hub, a model.tar download: ``Holds``). Failed and
cancelled runs never count toward ``retain_runs``. The run log and the run's page say when
model files were deleted and why.
"""

import collections
import contextlib
import os
import shutil
import threading
from typing import Callable, List, Optional


class Holds:
    """Runs whose model files are being read (a publish, a model.tar download). Retention
    deletes a run's files only under ``lock`` and only when no one holds the run, so a reader
    that takes its hold before looking at the files finds them whole until it lets go."""

    def __init__(self):
        self.lock = threading.Lock()
        self._count = collections.Counter()  # type: collections.Counter

    def acquire(self, run_id: str) -> None:
        with self.lock:
            self._count[run_id] += 1

    def release(self, run_id: str) -> None:
        with self.lock:
            self._count[run_id] -= 1
            if self._count[run_id] <= 0:
                del self._count[run_id]

    def held(self, run_id: str) -> bool:
        return self._count[run_id] > 0 if run_id in self._count else False

    @contextlib.contextmanager
    def hold(self, run_id: str):
        self.acquire(run_id)
        try:
            yield
        finally:
            self.release(run_id)


def reason(keep: int, newer: List[str]) -> str:
    """Why a run's model files were deleted, in one sentence."""
    return ("model_training.retain_runs: %d keeps the model files of the %d newest successful "
            "run%s (%s), of the runs in use and of pinned runs; the run's kept predictions "
            "went with them, and its record, report, params and log are kept. Pin a run to "
            "keep its model files."
            % (keep, keep, "" if keep == 1 else "s", ", ".join(newer[:keep])))


def _has_files(directory: str) -> bool:
    try:
        return bool(os.listdir(directory))
    except OSError:
        return False


def prune(runs, paths_of: Callable, keep: int, log: Callable[[str, str], None],
          holds: Optional[Holds] = None) -> List[str]:
    """Delete the model files that ``retain_runs`` no longer keeps; the runs pruned.

    ``runs`` is the RunStore, ``paths_of(run_id)`` a run's RunPaths, ``log(run_id, line)``
    writes to that run's log; a run in ``holds`` is left for the next time."""
    holds = holds or Holds()
    in_use = runs.runs_in_use()
    newer: List[str] = []  # successful runs newer than the one looked at, newest first
    pruned = []
    for run_id, status, pinned, pruned_at in runs.finished_newest_first():
        if len(newer) >= keep and not pinned and pruned_at is None and run_id not in in_use:
            if _delete(runs, run_id, paths_of(run_id).artifacts, reason(keep, newer), log,
                       holds):
                pruned.append(run_id)
        if status == "success":
            newer.append(run_id)
    return pruned


def superseded(runs, keep: int) -> List[str]:
    """The finished runs ``retain_runs: keep`` no longer keeps (not in use, not pinned, with
    ``keep`` newer successful runs), whether or not their model files are on this server (a
    run whose files stayed on its GPU host has none here): their kept predictions go."""
    in_use = runs.runs_in_use()
    newer, out = 0, []
    for run_id, status, pinned, _ in runs.finished_newest_first():
        if newer >= keep and not pinned and run_id not in in_use:
            out.append(run_id)
        newer += status == "success"
    return out


def would_prune(runs, paths_of: Callable, keep: int) -> List[str]:
    """The runs whose model files ``prune`` would delete with ``retain_runs: keep`` (the runs
    being read aside): what a reload that lowers retain_runs warns of, before it happens."""
    in_use = runs.runs_in_use()
    newer, out = 0, []
    for run_id, status, pinned, pruned_at in runs.finished_newest_first():
        if newer >= keep and not pinned and pruned_at is None and run_id not in in_use and \
                _has_files(paths_of(run_id).artifacts):
            out.append(run_id)
        newer += status == "success"
    return out


def goes_next(runs, paths_of: Callable, keep: int) -> List[str]:
    """The runs whose model files go when the next successful run finishes (their page says
    so before it happens)."""
    now = set(would_prune(runs, paths_of, keep))
    return [r for r in would_prune(runs, paths_of, keep - 1) if r not in now]


def next_sentence(keep: int) -> str:
    """What a run's page says when its model files go at the next successful run."""
    return ("These model files (and the run's kept predictions) are deleted when the next "
            "successful run finishes "
            "(model_training.retain_runs: %d keeps those of the %d newest successful run%s, of "
            "runs in use and of pinned runs). Pin the run to keep them." % (
                keep, keep, "" if keep == 1 else "s"))


def named_words(runs, run_ids: List[str]) -> List[str]:
    """The named or annotated runs among ``run_ids``, as words ("r3 (baseline)"): the ones an
    admin meant to keep, so the ones a warning names."""
    out = []
    for run_id in run_ids:
        run = runs.get(run_id)
        if run is not None and (run.name or run.note):
            out.append("%s (%s)" % (run_id, run.name or "noted: " + run.note[:60]))
    return out


def _delete(runs, run_id: str, artifacts: str, why: str, log, holds: Holds) -> bool:
    with holds.lock:
        if holds.held(run_id) or not _has_files(artifacts):
            return False
        try:
            shutil.rmtree(artifacts)
        except OSError as e:
            log(run_id, "could not delete the model files in %s (%s): %s" % (artifacts, why, e))
            return False
    runs.mark_pruned(run_id, why)
    log(run_id, "model files deleted: " + why)
    return True
