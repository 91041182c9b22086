"""What the server and the code it ships agree on (standard library, Python 3.8): the version,
the worker's events, the run settings the server sends an agent, and every reserved exit code.

The worker's event protocol: one JSON object per line on stdout.

Every event has ``type`` and ``t`` (Unix time). Types and their fields:

- ``status``   ``message``: what the worker is doing ("loading the model")
- ``progress`` ``current``, ``total``, ``unit`` ("step"), optional ``eta_s``, ``epoch``
- ``metric``   ``name``, ``value``, optional ``epoch``, ``step``, ``split``
- ``log``      ``level`` (info, warning, error), ``message``
- ``artifact`` ``path`` (relative to the artifacts directory), ``bytes``
- ``result``   ``metrics`` (a mapping): the run succeeded; required for success
- ``error``    ``message``, optional ``kind`` (bad_spec, missing_dependency, cancelled,
               out_of_memory, other)
- ``where``    where the worker runs: optional ``host``, ``gpus`` (CUDA_VISIBLE_DEVICES),
               ``slurm_job``, ``slurm_node``, ``device`` (what the trainer trains on)

The same lines travel unchanged from the worker to the server on every backend: read from the
local child's stdout, relayed by the agent over HTTP, or read by the agent from a SLURM job's
``events.jsonl``. Reserved exit codes below let a supervisor explain a worker that died before
it could say why.
"""

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional

VERSION = "2.14.0"  # potato.__version__ and the package's version are this one

# -- exit codes: every layer's, with the sentence each means -----------------------------------
# The worker (python -m potato.training.worker)
# An agent that cannot reach the server this long cancels its run; a shorter outage (a server
# restart) it waits out, and the restarted server picks the run up again (agent backends).
LOST_CONTACT_S = 300

EXIT_OK = 0
EXIT_OTHER = 1
EXIT_BAD_SPEC = 64
EXIT_MISSING_DEPENDENCY = 65
EXIT_CANCELLED = 66
EXIT_OUT_OF_MEMORY = 67

# The agent (python -m potato.training.agent, potato training agent)
AGENT_USAGE = 2
AGENT_REJECTED = 3
AGENT_LOST = 4
# The remote shell scripts the ssh and slurm backends run (probe, agent start)
REMOTE_ENV_FAILED = 95
REMOTE_NO_CODE = 96
REMOTE_NO_PYTHON = 97
REMOTE_OLD_PYTHON = 98

EXIT_MEANINGS = {
    EXIT_OK: "finished",
    EXIT_OTHER: "the training process failed",
    EXIT_BAD_SPEC: "the run's spec or bundle could not be read",
    EXIT_MISSING_DEPENDENCY: "a package the trainer needs is missing",
    EXIT_CANCELLED: "the run was cancelled",
    EXIT_OUT_OF_MEMORY: "the training process ran out of memory",
}
AGENT_MEANINGS = {
    AGENT_USAGE: "the agent was started without its run token on standard input",
    AGENT_REJECTED: "the agent could not reach the server, or the server refused it",
    AGENT_LOST: "the agent lost its session (standard input closed, or a hangup) and stopped "
                "the run",
    REMOTE_ENV_FAILED: "the backend's env could not be exported on the host (a bad variable "
                       "name or value)",
    REMOTE_NO_CODE: "Potato's copied code was missing from remote_dir on the host",
    REMOTE_NO_PYTHON: "the backend's python was not found on the host",
    REMOTE_OLD_PYTHON: "the backend's python on the host is older than 3.8",
}


def exit_sentence(code: Optional[int], meanings: Optional[Dict[int, str]] = None) -> str:
    """What an exit status means, from the tables above (a signal for negative codes)."""
    if code is None:
        return "it did not exit"
    if code < 0:
        return "it was killed by signal %d" % -code
    table = dict(EXIT_MEANINGS)
    table.update(AGENT_MEANINGS if meanings is None else meanings)
    return table.get(code, "it stopped with exit status %d" % code)


# -- the settings of one remote run ----------------------------------------------------------------

def read_fields(out, data: Optional[Dict[str, Any]]):
    """``out`` (a dataclass instance of defaults) with the known keys of ``data`` set, each
    converted to its field's type; unknown keys (a newer server may send more) are ignored and
    wrong types keep the default."""
    for f in fields(out):
        if not data or data.get(f.name) is None or f.name == "scheduler":
            continue
        value = data[f.name]
        try:
            if f.name == "env":
                value = {str(k): str(v) for k, v in dict(value).items()}
            elif f.name == "prelude":
                value = [str(v) for v in value]
            elif f.type in (bool, "bool"):
                value = bool(value)
            elif f.type in (float, "float"):
                value = float(value)
            elif f.name == "num_threads":
                value = int(value)
            else:
                value = str(value)
        except (TypeError, ValueError):
            continue
        setattr(out, f.name, value)
    return out


@dataclass
class RunSettings:
    """How an agent runs one run: sent by the server with the run (``to_dict``), read once by
    the agent (``from_dict``); code below reads attributes, never raw keys. A run handed to a
    scheduler carries the scheduler's own part in ``scheduler`` (an object with a ``name``,
    ``to_dict()`` and ``run(job)``, such as ``slurm_job.SlurmSettings``); without one the agent
    runs the worker itself."""

    host: str = "the agent's machine"
    remote_dir: Optional[str] = None
    gpus: str = "auto"
    min_free_gpu_mb: float = 2000.0
    env: Dict[str, str] = field(default_factory=dict)
    num_threads: Optional[int] = None
    fetch_artifacts: bool = True
    keep_remote: bool = False
    max_artifact_mb: float = 2048.0
    max_media_cache_mb: float = 10240.0  # the host's media cache (remote_dir/media)
    scheduler: Any = None

    def to_dict(self) -> Dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "scheduler"}
        out["env"] = dict(self.env)
        out["scheduler"] = self.scheduler.to_dict() if self.scheduler is not None else None
        return out

    @classmethod
    def from_dict(cls, data: Optional[Dict[str, Any]],
                  schedulers: Optional[Dict[str, Any]] = None) -> "RunSettings":
        """``schedulers``: name -> settings class (with ``from_dict``) of the schedulers this
        agent can hand a run to; a ``scheduler`` it does not know is left out."""
        out = read_fields(cls(), data)
        part = (data or {}).get("scheduler")
        if isinstance(part, dict) and part.get("name") in (schedulers or {}):
            out.scheduler = schedulers[part["name"]].from_dict(part)
        return out


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
SECRETS = ("POTATO_TRAINING_TOKEN",)


def worker_env(base: Dict[str, str], code_dir: str, num_threads: Optional[int] = None,
               env: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The one place a worker's environment is made: ``base`` plus the backend's ``env``, the
    thread count (which overrides a login shell's OMP_NUM_THREADS=1), Potato's code first on
    PYTHONPATH, and unbuffered output (events must not wait in a buffer)."""
    out = dict(base)
    out.update(env or {})
    for secret in SECRETS:  # the agent's token is for the agent, never for trainer code
        out.pop(secret, None)
    if num_threads:
        for var in THREAD_VARS:
            out[var] = str(num_threads)
    out["PYTHONPATH"] = code_dir + (os.pathsep + out["PYTHONPATH"] if out.get("PYTHONPATH")
                                    else "")
    out["PYTHONUNBUFFERED"] = "1"
    return out


WORKER_MODULE = "potato.training.worker"


def worker_argv(python: str, spec_path: str) -> List[str]:
    """The one place the worker's command line is made (pure), the same on every backend:
    ``python -m potato.training.worker --spec SPEC`` (job.sh writes it shell-quoted)."""
    return [python, "-m", WORKER_MODULE, "--spec", spec_path]

TYPES = ("status", "progress", "metric", "log", "artifact", "result", "error", "where")


def here(environ=None):
    """The ``where`` event's fields for this process: host name, visible GPUs, SLURM job."""
    import socket

    env = os.environ if environ is None else environ
    out = {"host": socket.gethostname()}
    for key, var in (("gpus", "CUDA_VISIBLE_DEVICES"), ("slurm_job", "SLURM_JOB_ID"),
                     ("slurm_node", "SLURMD_NODENAME")):
        if env.get(var):
            out[key] = env[var]
    return out


def make(event_type, **fields):
    """An event dict (``event_type`` must be one of TYPES)."""
    if event_type not in TYPES:
        raise ValueError("unknown event type %r" % (event_type,))
    event = {"type": event_type, "t": round(time.time(), 3)}
    event.update(fields)
    return event


def dumps(event):
    return json.dumps(event, separators=(",", ":"), sort_keys=True)


MAX_LINE = 1 << 20  # an event line longer than this is not an event


def parse(line):
    """The event on one line, or None for a line that is not an event (stray output)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    if len(line) > MAX_LINE:
        return None
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):  # garbage, or nesting deep enough to overflow
        return None
    if not isinstance(event, dict) or event.get("type") not in TYPES:
        return None
    return event


class Emitter:
    """Writes events to a stream (stdout by default), one flushed line each."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stdout

    def emit(self, event_type, **fields):
        event = make(event_type, **fields)
        self.stream.write(dumps(event) + "\n")
        self.stream.flush()
        return event

    def status(self, message):
        return self.emit("status", message=message)

    def log(self, message, level="info"):
        return self.emit("log", level=level, message=message)

    def progress(self, current, total, unit="step", eta_s=None, epoch=None):
        fields = {"current": current, "total": total, "unit": unit}
        if eta_s is not None:
            fields["eta_s"] = round(eta_s, 1)
        if epoch is not None:
            fields["epoch"] = epoch
        return self.emit("progress", **fields)

    def metric(self, name, value, **where):
        return self.emit("metric", name=name, value=value, **where)


def describe_exit(code):
    """A sentence for a worker's exit status (negative: killed by that signal)."""
    if code is None:
        return "the training process did not report how it ended"
    if code == -9:
        return "the training process was killed (probably out of memory)"
    if code < 0:
        return "the training process was stopped by signal %d" % -code
    return EXIT_MEANINGS.get(code, "the training process exited with status %d" % code)
