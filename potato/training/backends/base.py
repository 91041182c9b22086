"""Where runs execute: the interface every backend implements over one run lifecycle.

The manager owns the lifecycle (queue, bundle, spec, ingesting predictions, final state). A
backend only moves a prepared run directory to where it executes, runs the worker there,
relays its events and returns an ``Outcome``. Remote backends (ssh, slurm, agent) implement
the same two methods, ``execute`` and ``check``.
"""

import hashlib
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

from potato.config import Backend as BackendConfig, Config
from potato.training.remote.paths import RunPaths
from potato.training.remote.protocol import RunSettings


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

    def check_model(self, model: str) -> Optional[Tuple[bool, str]]:
        """(found, sentence) for a trainer's ``model`` param where this backend's runs execute
        (model_source.resolve there); None when the server cannot look there before a run."""
        return None

    def queued_step(self, busy: bool) -> Optional[str]:
        """The step a queued run of this backend shows while it waits (None: the queue's
        own); ``busy``: another run is active. Agent backends say what they wait for."""
        return None

    def close(self) -> None:
        """Release what the backend holds between runs (called when the server stops)."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class RemoteState:
    """What the server knows of a run's agent while the run is active."""

    def __init__(self, token: str, settings: RunSettings):
        self.token_hash = token_hash(token)
        self.settings = settings  # backend settings the agent needs (gpus, env, ...)
        self.last_seen: Optional[float] = None  # monotonic
        self.reports = 0
        self.result: Optional[Dict[str, Any]] = None
        self.result_ready = threading.Event()
        self.copy_error: Optional[str] = None
        self.host = settings.host

    def seen(self) -> None:
        self.last_seen = time.monotonic()
        self.reports += 1
