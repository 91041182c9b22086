"""The local backend: a child process on the annotation server."""

import os
import sys
from typing import Any, Dict, Optional, Tuple

from potato.training.core import devices
from potato.training.backends.base import Outcome, RunContext, TrainingBackend
from potato.training.backends.ship import SOURCE_ROOT
from potato.training.remote import model_source, proc, protocol, supervise


class LocalBackend(TrainingBackend):
    """A child process on the annotation server."""

    type = "local"
    implicit = True  # every config has it, under this name
    on_server = True
    python_fix = "or start the server with a Python that has them (the local worker runs in it)"

    def restart_error(self) -> str:
        return ("The run was interrupted by a server restart: its training process on the "
                "server stopped with the server. Start the run again.")

    def worker_env(self) -> Dict[str, str]:
        return protocol.worker_env(os.environ, SOURCE_ROOT, self.cfg.model_training.num_threads)

    def execute(self, ctx: RunContext) -> Outcome:
        mt = self.cfg.model_training
        ctx.set_step("starting the worker")
        argv = protocol.worker_argv(sys.executable, ctx.paths.spec)
        ctx.log("local: %s" % " ".join(argv))
        how = supervise.Supervision(
            should_cancel=lambda: ctx.cancel.is_set() or ctx.shutdown.is_set(),
            max_wall_seconds=mt.max_wall_seconds, grace_seconds=mt.grace_seconds,
            max_rss_mb=mt.max_ram_mb, hurry=ctx.shutdown.is_set)
        result = supervise.run_worker(argv, self.worker_env(), ctx.paths.stderr, ctx.on_event,
                                      how, cwd=ctx.paths.root)
        status, error = supervise.explain(result, how)
        if result.stderr_tail and status == "error":
            ctx.log("worker stderr (last lines):\n" + result.stderr_tail)
        return Outcome(status, error, ran_on="local", artifact_uri=ctx.paths.artifacts)

    @property
    def label(self) -> str:
        return "%s (this machine)" % self.name

    def check(self) -> Dict[str, Any]:
        return self.report(**devices.local_report(self.cfg))

    def check_model(self, model: str) -> Optional[Tuple[bool, str]]:
        return model_source.resolve(model, env=proc.child_env(None))  # the worker's env


