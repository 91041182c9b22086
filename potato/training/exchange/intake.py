"""The one door for what a run reports, from any backend (the local worker's stdout, an agent's
reports over HTTP, a SLURM job's events.jsonl): every event is checked (``boundary.event``), then
recorded — the step, progress, metrics for the chart, the run log, and events.jsonl (bounded)."""

import json
import time
from typing import Any, Callable, Dict, List, Optional, Set

from potato.training.exchange import boundary
from potato.training.reports import run_texts
from potato.training.core.eta import Eta
from potato.training.remote.paths import RunPaths

EVENTS_MAX_BYTES = 8 << 20
RESULT_ROOM = 1 << 20  # past the cap, a result event still fits once
WARNINGS_MAX = 20


class RunEvents:
    """The one door for what a run reports, from any backend: each event is checked
    (boundary.event), then recorded: the step, progress, metrics, the log, events.jsonl."""

    def __init__(self, runs, log: Callable[[str], None], run_id: str, paths: RunPaths,
                 set_step: Callable[[str], None],
                 ran_on: Optional[Callable[[Dict[str, Any]], str]] = None):
        """``runs``: the RunStore it records into; ``log``: appends to the run's log;
        ``ran_on``: where the run executed in words, from the worker's ``where`` event."""
        self.runs, self._log, self.run_id, self.paths = runs, log, run_id, paths
        self.set_step = set_step
        self.ran_on = ran_on
        self.placement: Dict[str, Any] = {}
        self.warnings: List[str] = []
        self.server_warnings: List[str] = []
        self.warnings_dropped = 0
        self.last_warning_write = 0.0
        self.last_progress = 0.0
        self.eta = Eta()  # the ETA shown is the server's, smoothed (eta.py)
        self.dropped = 0
        self.written = 0
        self._logs = None  # while a batch is handled: its log lines and metrics, written once
        self._metrics = None
        # a re-attached run's step before the restart: the first event after it puts it back
        # (its step said "waiting for the agent ... to report again" meanwhile)
        self.resume_step: Optional[str] = None
        self.errors_said: Set[str] = set()  # the worker's errors already in the run log

    def many(self, batch) -> None:
        """A report's events: each checked and recorded, with one log write and one history
        transaction for the whole report (an agent may send thousands at once)."""
        self._logs, self._metrics = [], []
        try:
            for raw in batch:
                self(raw)
        finally:
            logs, metrics = self._logs, self._metrics
            self._logs = self._metrics = None
            if metrics:
                self.runs.append_history(self.run_id, *metrics)
            if logs:
                self._log("\n".join(logs))

    def __call__(self, raw: Dict[str, Any]) -> None:
        try:
            event = boundary.event(raw)
        except boundary.Invalid as e:
            self.dropped += 1
            if self.dropped <= 20:
                self.log("warning: dropped an event that does not fit the protocol: %s%s" % (
                    e, " (further ones are dropped silently)" if self.dropped == 20 else ""))
            return
        kind = event["type"]
        line = json.dumps(event) + "\n"
        room = EVENTS_MAX_BYTES + (RESULT_ROOM if kind == "result" else 0)
        if kind != "progress" and self.written + len(line) <= room:
            self.written += len(line)  # events.jsonl stays bounded; a result has extra room
            with open(self.paths.events, "a", encoding="utf-8") as f:
                f.write(line)
        self.record(event)

    def warn(self, message: str, server: bool = False) -> None:
        """A warning the run's status shows, cut to 300 characters. The run's own warnings
        are kept up to WARNINGS_MAX (then counted); the server's always, and listed first."""
        message = message if len(message) <= 300 else message[:299] + "…"
        if server:
            self.server_warnings.append(message)
        elif len(self.warnings) < WARNINGS_MAX:
            self.warnings.append(message)
        else:
            self.warnings_dropped += 1
            now = time.monotonic()
            if now - self.last_warning_write < 1.0:  # a flood costs one write a second
                return  # (flush_warnings writes the final count)
            self.last_warning_write = now
        self.flush_warnings()

    def flush_warnings(self) -> None:
        """Store the warnings as they stand (the queue calls it before a run finishes)."""
        if not (self.server_warnings or self.warnings):
            return
        shown = self.server_warnings + self.warnings
        if self.warnings_dropped:
            shown.append("… and %d more warning(s) in the run log" % self.warnings_dropped)
        self.runs.update(self.run_id, warnings=shown)

    def log(self, message: str) -> None:
        if self._logs is not None:
            self._logs.append(message)
        else:
            self._log(message)

    def record(self, event: Dict[str, Any]) -> None:
        kind, now, runs = event["type"], time.time(), self.runs
        if self.resume_step is not None:  # the agent reports again after a restart
            step, self.resume_step = self.resume_step, None
            if kind != "status":
                self.set_step(step)
        if kind == "status":
            self.set_step(event["message"])
        elif kind == "progress":
            event = dict((k, v) for k, v in event.items() if k != "eta_s")
            left = self.eta.update(event["current"], event.get("total"), event.get("unit"),
                                   event.get("t", now))
            if left is not None:
                event["eta_s"] = round(left, 1)
            if now - self.last_progress >= 0.25 or event["current"] == event.get("total"):
                self.last_progress = now
                runs.update(self.run_id, progress=event, heartbeat_at=now)
        elif kind == "metric":
            if self._metrics is not None:
                self._metrics.append(event)
            else:
                runs.append_history(self.run_id, event)
            if not ("step" in event and event.get("split") == "train"):
                # a training step's figure goes to the chart and the events file; the log
                # keeps one line per epoch (and each validation figure)
                self.log("metric %s = %s%s" % (event["name"], event["value"], " (epoch %s)"
                                                % event["epoch"] if "epoch" in event else ""))
        elif kind == "where":
            before = dict(self.placement)
            if "host" in event:  # a worker (re)starting: an earlier attempt's nodes are gone
                self.placement.pop("nodes", None)
            self.placement.update((k, v) for k, v in event.items() if k not in ("type", "t"))
            if self.placement != before:
                fields = {"placement": self.placement}
                if self.ran_on is not None:
                    fields["ran_on"] = self.ran_on(self.placement)
                runs.update(self.run_id, **fields)
        elif kind in ("log", "error"):
            if kind == "log" and event["level"] == "warning":
                self.warn(event["message"])
            if kind == "error":
                self.errors_said.add(event["message"])
            self.log(run_texts.worker_error_line(event) if kind == "error" else "%s: %s" % (
                event.get("level", "info"), event["message"]))
        elif kind == "artifact":
            self.log("artifact %s (%s bytes)" % (event["path"], event.get("bytes")))
