"""Waiting for a remote agent's result: the loop the ssh, slurm and agent backends share.

It returns when the agent reports a result, or with an Outcome when the agent goes silent for
``heartbeat_timeout_s``, a cancel is not confirmed within the grace period, the wall clock runs
out, ``gone()`` says the agent's transport has ended (an ssh session that exited), or the server
is stopping (``SHUTDOWN``: the caller decides what that means for its run).
"""

import os
import time
from typing import Callable, Optional

from potato.training.backends.base import Outcome, RemoteState, RunContext
from potato.training.backends import errors


SHUTDOWN = "the server is stopping"
WALL_CLOCK = ("The run took longer than max_wall_seconds (%g s) and was stopped. Raise "
              "model_training.max_wall_seconds or train on fewer items or epochs.")


def wait_for_agent(ctx: RunContext, remote: RemoteState, backend: str, where: str,
                   heartbeat_s: float, gone: Optional[Callable[[], Optional[Outcome]]] = None,
                   tick: float = 0.5, started: Optional[float] = None) -> Optional[Outcome]:
    """None once ``remote.result`` is there; otherwise the Outcome that ended the wait.
    ``started`` (monotonic) is when the run started, for max_wall_seconds; default the
    context's start (``ctx.started``), so the time a backend spent setting up counts."""
    started = ctx.started if started is None else started
    waiting_since = time.monotonic()  # the agent's heartbeat_timeout_s counts from here
    cancel_at = None
    wall = ctx.max_wall_seconds
    while True:
        if remote.result_ready.wait(tick):
            return None
        if ctx.shutdown.is_set():
            return Outcome("error", SHUTDOWN, ran_on=backend)
        now = time.monotonic()
        if gone is not None:
            outcome = gone()
            if outcome is not None:
                return None if remote.result_ready.wait(2) else outcome
        if ctx.cancel.is_set():
            if cancel_at is None:
                cancel_at = now
                ctx.set_step("cancelling on %s" % where)
            elif now - cancel_at >= ctx.grace_seconds:
                # The tutorial's promise: after grace_seconds the run ends cancelled here, and
                # the backend closes the agent's session (the agent then stops what is left).
                # A worker that ignores SIGTERM is normal (a training step may not stop
                # mid-way): said as what happens, not as a failure.
                ctx.log("cancelled: grace_seconds (%g s) have passed, so the run ends here; the "
                        "agent on %s stops what is left of the worker (SIGKILL)"
                        % (ctx.grace_seconds, where))
                return Outcome("cancelled", "cancelled", ran_on=backend)
        if remote.uploading:
            pass  # a model file is arriving: its own stall timer (COPY_STALL_S) decides
        elif now - (remote.last_seen or waiting_since) > heartbeat_s:
            # predictions that arrived are kept, unless the admin cancelled the run
            keep = remote.predictions_in and not ctx.cancel.is_set()
            if remote.copy_error:  # the copy stalled, then the agent went silent
                return Outcome("error", "%s The predictions are saved; only model files are "
                                        "missing from artifacts/." % remote.copy_error,
                               ran_on=backend, ingest=keep)
            return Outcome("error", errors.silent_agent(
                backend, heartbeat_s, os.path.exists(ctx.paths.agent_log)), ran_on=backend,
                ingest=keep)
        if wall is not None and now - started > wall:
            return Outcome("error", WALL_CLOCK % wall, ran_on=backend)


def outcome_of(ctx: RunContext, remote: RemoteState, backend: str, uri: Optional[str]) -> Outcome:
    """The Outcome of an agent's reported result."""
    result = remote.result or {}
    status = result.get("status", "error")
    if ctx.cancel.is_set() and status != "success":
        return Outcome("cancelled", "cancelled", ran_on=backend)
    if status == "success" and remote.copy_error:
        return Outcome("error", "%s The predictions are saved; only model files are missing from "
                                "artifacts/ (they stay in %s)." % (remote.copy_error, uri),
                       ran_on=backend, artifact_uri=uri, ingest=True)
    return Outcome(status, result.get("error") if status != "success" else None,
                   ran_on=backend, artifact_uri=uri)
