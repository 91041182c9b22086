"""The worker's event protocol: one JSON object per line on stdout (standard library, 3.8).

Every event has ``type`` and ``t`` (Unix time). Types and their fields:

- ``status``   ``message``: what the worker is doing ("loading the model")
- ``progress`` ``current``, ``total``, ``unit`` ("step"), optional ``eta_s``, ``epoch``
- ``metric``   ``name``, ``value``, optional ``epoch``, ``step``, ``split``
- ``log``      ``level`` (info, warning, error), ``message``
- ``artifact`` ``path`` (relative to the artifacts directory), ``bytes``
- ``result``   ``metrics`` (a mapping): the run succeeded; required for success
- ``error``    ``message``, optional ``kind`` (bad_spec, missing_dependency, cancelled,
               out_of_memory, other)

The same lines travel unchanged from the worker to the server on every backend: read from the
local child's stdout, relayed by the agent over HTTP, or read by the agent from a SLURM job's
``events.jsonl``. Reserved exit codes below let a supervisor explain a worker that died before
it could say why.
"""

import json
import sys
import time

EXIT_OK = 0
EXIT_OTHER = 1
EXIT_BAD_SPEC = 64
EXIT_MISSING_DEPENDENCY = 65
EXIT_CANCELLED = 66
EXIT_OUT_OF_MEMORY = 67

EXIT_MEANINGS = {
    EXIT_OK: "finished",
    EXIT_OTHER: "the training process failed",
    EXIT_BAD_SPEC: "the run's spec or bundle could not be read",
    EXIT_MISSING_DEPENDENCY: "a package the trainer needs is missing",
    EXIT_CANCELLED: "the run was cancelled",
    EXIT_OUT_OF_MEMORY: "the training process ran out of memory",
}

TYPES = ("status", "progress", "metric", "log", "artifact", "result", "error")


def make(event_type, **fields):
    """An event dict (``event_type`` must be one of TYPES)."""
    if event_type not in TYPES:
        raise ValueError("unknown event type %r" % (event_type,))
    event = {"type": event_type, "t": round(time.time(), 3)}
    event.update(fields)
    return event


def dumps(event):
    return json.dumps(event, separators=(",", ":"), sort_keys=True)


def parse(line):
    """The event on one line, or None for a line that is not an event (stray output)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except ValueError:
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
