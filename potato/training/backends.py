"""Where runs execute: a small interface over one run lifecycle, and the local backend.

The manager owns the lifecycle (queue, bundle, spec, ingesting predictions, final state). A
backend only moves a prepared run directory to where it executes, runs the worker there,
relays its events and returns an ``Outcome``. Remote backends (ssh, slurm, agent) implement
the same two methods, ``execute`` and ``check``.
"""

import os
import sys
import threading
from typing import Any, Callable, Dict, Optional

import potato
from potato.config import Backend as BackendConfig, Config
from potato.training import supervise
from potato.training.paths import RunPaths

SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(potato.__file__)))


class Outcome:
    def __init__(self, status: str, error: Optional[str] = None, ran_on: str = "",
                 artifact_uri: Optional[str] = None, ingest: bool = False):
        self.status = status
        self.error = error
        self.ran_on = ran_on
        self.artifact_uri = artifact_uri
        # ingest predictions even though the run failed after they arrived (e.g. model copy)
        self.ingest = ingest or status == "success"


class RunContext:
    """What a backend gets for one run."""

    def __init__(self, run: Dict[str, Any], paths: RunPaths, cfg: Config,
                 on_event: Callable[[dict], None], set_step: Callable[[str], None],
                 log: Callable[[str], None]):
        self.run = run
        self.run_id = run["run_id"]
        self.paths = paths
        self.cfg = cfg
        self.on_event = on_event
        self.set_step = set_step
        self.log = log
        self.cancel = threading.Event()
        self.remote = None  # agent_api.RemoteState while a remote agent runs this run
        self.claim = None  # for agent backends: {token, agent, ready} from Manager.claim
        self.bundle_sha256 = None

    @property
    def grace_seconds(self) -> float:
        return self.cfg.model_training.grace_seconds

    @property
    def max_wall_seconds(self) -> Optional[float]:
        return self.cfg.model_training.max_wall_seconds


class TrainingBackend:
    type = "base"

    def __init__(self, bcfg: BackendConfig, cfg: Config):
        self.name = bcfg.name
        self.bcfg = bcfg
        self.cfg = cfg

    @property
    def label(self) -> str:
        return self.bcfg.label

    @property
    def host(self) -> Optional[str]:
        return self.bcfg.host

    def execute(self, ctx: RunContext) -> Outcome:
        raise NotImplementedError

    def check(self) -> Dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the backend holds between runs (called when the server stops)."""


def thread_env(n: Optional[int], base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ if base is None else base)
    if n:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(n)
    return env


class LocalBackend(TrainingBackend):
    """A child process on the annotation server."""

    type = "local"

    def worker_env(self) -> Dict[str, str]:
        env = thread_env(self.cfg.model_training.num_threads)
        env["PYTHONPATH"] = SOURCE_ROOT + (os.pathsep + env["PYTHONPATH"]
                                           if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def execute(self, ctx: RunContext) -> Outcome:
        mt = self.cfg.model_training
        ctx.set_step("starting the worker")
        argv = [sys.executable, "-m", "potato.training.worker", "--spec", ctx.paths.spec]
        ctx.log("local: %s" % " ".join(argv))
        result = supervise.run_worker(
            argv, self.worker_env(), ctx.paths.stderr, ctx.on_event,
            should_cancel=ctx.cancel.is_set, max_wall_seconds=mt.max_wall_seconds,
            grace_seconds=mt.grace_seconds, max_rss_mb=mt.max_ram_mb, cwd=ctx.paths.root)
        status, error = supervise.explain(result, mt.max_wall_seconds, mt.grace_seconds,
                                          mt.max_ram_mb)
        if result.stderr_tail and status == "error":
            ctx.log("worker stderr (last lines):\n" + result.stderr_tail)
        return Outcome(status, error, ran_on="local", artifact_uri=ctx.paths.artifacts)

    def check(self) -> Dict[str, Any]:
        from potato.training.devices import local_report

        return local_report(self.cfg)


def check_backend(backend: TrainingBackend) -> Dict[str, Any]:
    """The report of ``potato training check`` and of the Check button (one code path)."""
    report = backend.check()
    description = backend.bcfg.description
    report["description"] = description
    if description:
        report["lines"] = [description] + list(report.get("lines") or [])
    return report


def make_backends(cfg: Config, tokens=None) -> Dict[str, TrainingBackend]:
    """Every configured backend; agent backends see ``tokens`` (an AgentTokens) for check."""
    out: Dict[str, TrainingBackend] = {}
    for name, b in cfg.model_training.backends.items():
        if b.type == "local":
            out[name] = LocalBackend(b, cfg)
        elif b.type == "ssh":
            from potato.training.remote.ssh import SshBackend

            out[name] = SshBackend(b, cfg)
        elif b.type == "slurm":
            from potato.training.remote.slurm_backend import SlurmBackend

            out[name] = SlurmBackend(b, cfg)
        else:
            from potato.training.remote.agent_backend import AgentBackend

            out[name] = AgentBackend(b, cfg)
            out[name].tokens = tokens
    return out
