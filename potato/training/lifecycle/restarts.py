"""What a server restart does to the runs in flight.

A shutdown is never a cancel. Queued runs stay queued. A run that was running is its backend's
business (``TrainingBackend.survives_restart``): an agent-backend run is left running with its
agent when the server stops (the agent waits out the outage) and is re-attached when the server
starts again, before it serves, so the agent's next report finds it; it then ends as any run
does, or with "No word from the agent" if no report comes within ``heartbeat_timeout_s``. Any
other run ends with its backend's ``restart_error()``: when the server stops (SIGTERM), or, after
a kill, when it starts again (a local run: interrupted; ssh and slurm: the session closed, and
the agent there stopped the worker or cancelled the job).
"""

import json
import os
from typing import List

from potato.training.backends.base import RunContext
from potato.training.core.runs import Run

GONE = ("Backend %s is no longer in %s; the run was not started. Start it again on a "
        "configured backend.")
RESTARTED = ("The run was ended by a server restart, and its backend is no longer in the config. "
             "Start the run again.")
STEP_ENDED = "ended by a server restart"


def recover(manager) -> List[RunContext]:
    """End or re-attach every run the previous server left ``running``; the re-attached runs'
    contexts (their agents' reports are accepted from now on), for the manager to follow."""
    resumed = []
    for run in manager.runs.with_status("running"):
        run_id = run.run_id
        backend = manager.backends.get(run.backend)
        if backend is not None and backend.polled_by_agents and not run.remote_token:
            _queue_again(manager, run)  # its agent never got the run: nothing ran
            continue
        if backend is not None and backend.survives_restart and not manager.reattach:
            manager._log(run_id, "left running with its agent: this queue owner is not potato "
                                 "start, whose URL the agent reports to; potato start picks "
                                 "the run up again")
            continue
        if backend is not None and backend.survives_restart:
            ctx = manager.context(run)
            if backend.reattach(ctx, run):
                _continue_events(ctx, run)
                if run.cancel_requested:
                    ctx.cancel.set()  # the agent hears it in the reply to its next report
                if ctx.remote.result is not None:
                    ctx.set_step("the server restarted after the agent's result: finishing "
                                 "the run")
                else:
                    ctx.on_event.resume_step = last_status(ctx.paths.events) or run.step or \
                        "running on %s" % (run.remote_host or "its machine")
                    ctx.set_step("the server restarted: waiting for the agent on %s to report "
                                 "again (up to %g s)" % (run.remote_host or "its machine",
                                                         backend.options.heartbeat_timeout_s))
                resumed.append(ctx)
                continue
        message = backend.restart_error() if backend is not None else RESTARTED
        if manager.runs.finish(run_id, "error", message, step=STEP_ENDED):
            manager._log(run_id, "error: " + message)
    _end_orphans(manager)
    return resumed


def last_status(events_path: str, tail: int = 64 << 10):
    """The message of the last ``status`` event in a run's events.jsonl (its last ``tail``
    bytes), or None: the step a re-attached run goes back to when its agent reports."""
    try:
        with open(events_path, "rb") as f:
            f.seek(max(0, os.path.getsize(events_path) - tail))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the first line of the tail may be cut
        if isinstance(event, dict) and event.get("type") == "status" and \
                isinstance(event.get("message"), str):
            return event["message"]
    return None


def _queue_again(manager, run: Run) -> None:
    if manager.runs.transition(run.run_id, "running", "queued", started_at=None, ran_on=None,
                               remote_host=None, step="waiting for its turn"):
        manager._log(run.run_id, "the server stopped before the agent%s received the run: "
                                 "it is queued again" % (" on " + run.remote_host
                                                         if run.remote_host else ""))


def _end_orphans(manager) -> None:
    """Queued runs whose backend the config no longer has (or this Potato cannot run) end
    with a sentence that names it: nothing could ever start them, and they would hold up the
    queue."""
    for run in manager.runs.with_status("queued"):
        if manager.backends.get(run.backend) is None:
            message = GONE % (run.backend, manager.cfg.path or "the config")
            if manager.runs.finish(run.run_id, "error", message, step="not started"):
                manager._log(run.run_id, "error: " + message)


def _continue_events(ctx: RunContext, run: Run) -> None:
    """The run's events go on where the previous server left them: the placement it recorded
    and the size of events.jsonl (which stays bounded across restarts)."""
    events = ctx.on_event
    events.placement.update(run.placement or {})
    try:
        events.written = os.path.getsize(ctx.paths.events)
    except OSError:
        pass
