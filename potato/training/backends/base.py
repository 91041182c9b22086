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

from potato.config.settings import Backend as BackendConfig, Config
from potato.training.remote.paths import RunPaths
from potato.training.remote.protocol import RunSettings
from potato.training.core.runs import Run


class Outcome:
    def __init__(self, status: str, error: Optional[str] = None, ran_on: str = "",
                 artifact_uri: Optional[str] = None, ingest: bool = False):
        self.status = status
        self.error = error
        self.ran_on = ran_on
        self.artifact_uri = artifact_uri
        # ingest predictions even though the run failed after they arrived (e.g. model copy)
        self.ingest = ingest or status == "success"


class Claim:
    """An agent's claim on the next run of its backend (``Manager.claim``), until the run
    executes: the run token it will be given, what the agent said of itself, and an event set
    once the server has prepared the run (or the run ended before it could start)."""

    def __init__(self, token: str, agent: Dict[str, Any]):
        self.token = token
        self.agent = agent
        self.ready = threading.Event()


class RunContext:
    """What a backend gets for one run. All of it is given here, once; a remote backend adds
    the run's ``remote`` state (and the bundle archive's digest) when its agent starts."""

    def __init__(self, run: Run, paths: RunPaths, cfg: Config,
                 on_event: Callable[[dict], None], set_step: Callable[[str], None],
                 log: Callable[[str], None], claim: Optional[Claim] = None):
        self.run = run
        self.run_id = run.run_id
        self.paths = paths
        self.cfg = cfg
        self.on_event = on_event
        self.set_step = set_step
        self.log = log
        self.cancel = threading.Event()
        self.claim = claim  # for backends polled by agents: the claim that started the run
        self.remote: Optional["RemoteState"] = None  # while a remote agent runs this run
        self.bundle_sha256: Optional[str] = None
        self.media_index: Optional[Dict[str, Any]] = None  # media.json, read when first asked
        # The server is stopping: end what waits now. A shutdown is not a cancel: what it does
        # to the run is the backend's business (survives_restart, restart_error).
        self.shutdown = threading.Event()
        self.save: Callable[..., Any] = lambda **fields: None  # fields onto the run's record
        # When the run started (monotonic): max_wall_seconds counts from here, set-up included.
        self.started = time.monotonic()

    @property
    def grace_seconds(self) -> float:
        return self.cfg.model_training.grace_seconds

    @property
    def max_wall_seconds(self) -> Optional[float]:
        return self.cfg.model_training.max_wall_seconds


def placement_words(head: str, where: Optional[Dict[str, Any]], show_host: bool) -> str:
    """``head`` and where a run executed, as the worker reported it: the host (``show_host``),
    the GPUs, the SLURM job and node, the device (``gpu-box (ssh): host gpu01, GPUs 0,1``)."""
    where = where or {}
    parts = []
    if where.get("slurm_job") and where.get("nodes"):  # a multi-node run: hosts, their GPUs
        parts.append("SLURM job %s on nodes %s" % (where["slurm_job"], where["nodes"]))
    elif where.get("slurm_job"):
        parts.append("SLURM job %s%s" % (where["slurm_job"], " on node %s" % where["slurm_node"]
                                         if where.get("slurm_node") else ""))
    elif where.get("host") and show_host:
        parts.append("host %s" % where["host"])
    if where.get("gpus") and not where.get("nodes"):
        parts.append("GPU%s %s" % ("s" if "," in where["gpus"] else "", where["gpus"]))
    if where.get("device"):
        parts.append("device %s" % where["device"])
    return head + (": " + ", ".join(parts) if parts else "")


class TrainingBackend:
    """One configured backend. What the queue, the claim, registration and the pages need to
    know about a kind of backend is an attribute or method here, overridden by each kind:
    no code outside ``backends/`` compares a backend's type string.

    The config reads a kind's keys from its class too (``potato/config/backends.py``):
    ``Options`` (a dataclass of ``key(...)`` fields, with ``hints`` and ``rules``), ``article``,
    ``implicit``, ``arrives_as_loopback`` and ``polled_by_agents``."""

    type = "base"
    Options: Any = None  # the kind's own config keys (None: only type and description)
    article = "a"  # "a local backend", "an ssh backend" (the config's messages)
    implicit = False  # always configured, under the kind's name (local)
    arrives_as_loopback = False  # its agent reaches the server through an ssh-forwarded socket
    on_server = False  # the worker runs on the annotation server itself
    polled_by_agents = False  # runs start only when an agent polling the server claims them
    builds_venv = False  # ``packages`` become a virtual environment on the host
    # How to give the worker's Python a trainer's missing packages, after "install them into
    # that Python": the end of "Trainer X could not be imported" (the worker's own words).
    python_fix = "or point the backend's python at one that has them"

    def __init__(self, bcfg: BackendConfig, cfg: Config, tokens=None):
        self.name = bcfg.name
        self.bcfg = bcfg
        self.options = bcfg.options  # an instance of the kind's Options (None without keys)
        self.cfg = cfg
        self.tokens = tokens  # AgentTokens on the project's store, for kinds that use tokens

    # -- what the queue and the pages ask ------------------------------------------------------
    @property
    def heldout_on_server(self) -> bool:
        """The test split's labels stay on the server: a machine that runs the trainer never
        sees the answers it is scored against (the local worker reads them from the store)."""
        return not self.on_server

    @property
    def queue_timeout_s(self) -> Optional[float]:
        """How long a run may wait in the queue for this backend (None: until cancelled)."""
        return None

    def refusal(self) -> Optional[str]:
        """Why no run can be queued for this backend now (None: it can)."""
        return None

    queue_timeout_step = "waited too long in the queue"  # the step of a run that timed out

    def step_worth_logging(self, old: str, new: str) -> bool:
        """Whether a queued run's new step goes into its log (steps that tick, like a silence
        counter, log only when their meaning changes)."""
        return old != new

    def queue_timeout_message(self, limit: float) -> str:
        return "The run waited in the queue for backend %s longer than %g s." % (self.name, limit)

    def ran_on(self, where: Optional[Dict[str, Any]]) -> str:
        """Where a run executed, in words, for the runs table and the run page."""
        head = self.name if self.name == self.type else "%s (%s)" % (self.name, self.type)
        return placement_words(head, where, show_host=not self.on_server)

    def report(self, **fields: Any) -> Dict[str, Any]:
        """The skeleton of a check report: not ok until the kind's check says so."""
        out = {"backend": self.name, "type": self.type, "label": self.label}
        out.update(fields)
        out.setdefault("ok", False)
        out.setdefault("lines", [])
        return out

    @property
    def label(self) -> str:
        """How menus and reports name this backend, e.g. ``gpu-server (ssh to gpu.example.org)``."""
        return "%s (%s)" % (self.name, self.type)

    @property
    def host(self) -> Optional[str]:
        """The machine the backend logs into, for the API's backend list (None: none)."""
        return None

    # What a server restart does to a run of this backend. A backend whose runs survive one
    # leaves them running when the server stops (``execute`` returns Outcome("detached")) and
    # picks them up at the next start with ``reattach`` and ``resume``; any other run ends,
    # when the server stops or (after a kill) when it starts again, with ``restart_error()``.
    survives_restart = False

    def restart_error(self) -> str:
        return ("The run was ended by a server restart (the annotation server stopped during "
                "the run). Start the run again.")

    def reattach(self, ctx: RunContext, run: Run) -> bool:
        """Prepare ``ctx`` for a run left running by the previous server; False when it cannot
        be picked up (it then ends with ``restart_error``). Called before the server serves."""
        return False

    def resume(self, ctx: RunContext) -> Outcome:
        """Follow a re-attached run to its end, as ``execute`` would have."""
        raise NotImplementedError

    def execute(self, ctx: RunContext) -> Outcome:
        raise NotImplementedError

    def check(self) -> Dict[str, Any]:
        raise NotImplementedError

    def listening_on(self, port: int) -> None:
        """The annotation server listens on ``port`` (loopback): remote backends forward their
        agents to it."""

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

    def __init__(self, token: str, settings: RunSettings, hashed: bool = False):
        self.token_hash = token if hashed else token_hash(token)
        self.settings = settings  # backend settings the agent needs (gpus, env, ...)
        self.last_seen: Optional[float] = None  # monotonic
        self.reports = 0
        self.result: Optional[Dict[str, Any]] = None
        self.result_ready = threading.Event()
        self.copy_error: Optional[str] = None
        self.copy_error_path: Optional[str] = None  # the model file whose copy stalled
        self.host = settings.host
        self.predictions_in = False  # the predictions upload completed: ingest them, whatever
        self._uploads = 0  # model-file uploads under way (their bytes are signs of life)
        self._uploads_lock = threading.Lock()

    @property
    def uploading(self) -> bool:
        """A model-file upload is under way: its own stall timer (COPY_STALL_S of no bytes)
        decides whether the copy failed; the heartbeat waits for it."""
        return self._uploads > 0

    def upload_started(self) -> None:
        with self._uploads_lock:
            self._uploads += 1

    def upload_ended(self) -> None:
        with self._uploads_lock:
            self._uploads -= 1

    def seen(self) -> None:
        self.last_seen = time.monotonic()
        self.reports += 1
