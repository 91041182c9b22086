"""Run the worker as a child process and watch it: events, cancel, wall clock, memory.

Used by the local backend on the server and by the agent on remote hosts, so it uses only the
standard library (Python 3.8). The child runs in its own process group; stopping it sends
SIGTERM to the group, then SIGKILL after the grace period. Limits are checked by this process's
own clock every ``tick`` seconds, whether or not the child prints anything.
"""

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from potato.training.remote import proc as procs
from potato.training.remote import protocol as events


def _never() -> bool:
    return False


@dataclass
class Supervision:
    """How ``run_worker`` watches a worker: when to stop it and what to call while it runs.
    ``should_cancel()`` true: stop it (SIGTERM to its group, SIGKILL ``grace_seconds``
    later; half a second while ``hurry()`` is true, the server is stopping). Past
    ``max_wall_seconds`` or ``max_rss_mb`` (None: no limit) it is stopped as well, and
    ``explain`` quotes that limit. ``on_tick()`` runs every ``tick`` seconds."""

    should_cancel: Callable[[], bool] = _never
    max_wall_seconds: Optional[float] = None
    grace_seconds: float = 20.0
    max_rss_mb: Optional[float] = None
    tick: float = 0.5
    on_tick: Optional[Callable[[], None]] = None
    hurry: Callable[[], bool] = _never


class WorkerExit:
    def __init__(self):
        self.returncode = None
        self.result = None      # the ``result`` event, if any
        self.error = None       # the last ``error`` event, if any
        self.stopped = None     # why we stopped it: cancelled, wall_clock, memory, lost
        self.stderr_tail = ""
        self.peak_rss_mb = 0.0

    @property
    def ok(self):
        return self.returncode == 0 and self.result is not None and self.stopped is None

    def note(self, event):
        """Remember the events that decide how the worker ended."""
        if event["type"] == "result":
            self.result = event
        elif event["type"] == "error":
            self.error = event


def rss_mb(pid):
    """Resident memory of a process in MB (Linux /proc), or 0 where unknown."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def tail(path, lines=20, max_bytes=16384):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _signal_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _drain(lines, handle, tick):
    """Handle the lines that arrive within ``tick`` and all already waiting; True at EOF."""
    try:
        line = lines.get(timeout=tick)
    except queue.Empty:
        return False
    while line is not None:
        handle(line)
        try:
            line = lines.get_nowait()
        except queue.Empty:
            return False
    return True


def _end(proc, lines, reader):
    """Whatever happened (a bad line, a failing callback), the worker and whatever it started
    do not outlive the supervision, and the reader does not wait on a full queue."""
    _signal_group(proc, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while reader.is_alive() and time.monotonic() < deadline:
        try:
            lines.get(timeout=0.1)
        except queue.Empty:
            pass
    reader.join(timeout=1)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def run_worker(argv, env, stderr_path, on_event, supervision=None, cwd=None):
    """Run ``argv`` (in ``cwd``, its stderr appended to ``stderr_path``) to the end, watched
    as ``supervision`` says (None: the defaults); returns a WorkerExit. ``on_event(event)``
    sees every event."""
    w = supervision if supervision is not None else Supervision()
    tick = w.tick
    out = WorkerExit()
    with open(stderr_path, "ab") as err:
        proc = procs.spawn(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=err)
    lines = queue.Queue(maxsize=10000)  # a flood of output waits for us: bounded memory

    def reader():
        for raw in iter(lambda: proc.stdout.readline(events.MAX_LINE + 2), b""):
            lines.put(raw.decode("utf-8", "replace"))
        lines.put(None)

    t = threading.Thread(target=reader, daemon=True, name="worker-stdout")
    t.start()
    started = time.monotonic()
    term_sent = None
    eof = False

    def stop(reason):
        nonlocal term_sent
        if out.stopped is None:
            out.stopped = reason
        if term_sent is None:
            _signal_group(proc, signal.SIGTERM)
            term_sent = time.monotonic()

    def handle(line):
        event = events.parse(line)
        if event is None:
            return
        out.note(event)
        on_event(event)

    try:
        while True:
            eof = _drain(lines, handle, tick) or eof
            now = time.monotonic()
            if proc.poll() is not None and (eof or not t.is_alive()):
                break
            if eof and proc.poll() is None:
                # stdout closed but the child lives on: wait for it without busy-looping
                try:
                    proc.wait(timeout=tick)
                except subprocess.TimeoutExpired:
                    pass
            if w.should_cancel():
                stop("cancelled")
            if w.max_wall_seconds is not None and now - started > w.max_wall_seconds:
                stop("wall_clock")
            if w.max_rss_mb is not None:
                used = rss_mb(proc.pid)
                out.peak_rss_mb = max(out.peak_rss_mb, used)
                if used > w.max_rss_mb:
                    out.stopped = out.stopped or "memory"
                    _signal_group(proc, signal.SIGKILL)
            if term_sent is not None and now - term_sent > (
                    min(w.grace_seconds, 0.5) if w.hurry() else w.grace_seconds):
                _signal_group(proc, signal.SIGKILL)
            if w.on_tick is not None:
                w.on_tick()
        while not eof and (t.is_alive() or not lines.empty()):  # the last lines, then EOF
            eof = _drain(lines, handle, tick)
    finally:
        _end(proc, lines, t)
    proc.stdout.close()
    out.returncode = proc.returncode
    out.stderr_tail = tail(stderr_path)
    return out


GUARD_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def guard(argv, grace_seconds, tick=0.2):
    """Run ``argv`` in its own process group and return its exit status (128+N for signal N)
    only once nothing of that group is left.

    A SLURM job runs the worker under this guard: a SIGTERM, SIGINT or SIGHUP (``scancel
    --signal=TERM``, a time limit) is passed on to the worker's whole group, and a worker that
    is still running ``grace_seconds`` later is killed with its group. Whatever the worker
    started and left behind is killed when it exits. So a job never ends before its worker,
    and a worker that ignores SIGTERM cannot outlive its job (linuxproc loses track of a
    process once its parent has exited).
    """
    term_at = []
    running = []

    def on_signal(signum, frame):
        if not term_at:
            term_at.append(time.monotonic())
            for p in running:
                _signal_group(p, signal.SIGTERM)

    for sig in GUARD_SIGNALS:  # before the worker starts: no signal is lost in between
        signal.signal(sig, on_signal)
    try:
        proc = procs.spawn(argv)
    except procs.SpawnError as e:
        sys.stderr.write("%s\n" % e)
        return 127
    running.append(proc)
    if term_at:
        _signal_group(proc, signal.SIGTERM)
    while True:
        try:
            proc.wait(timeout=tick)
            break
        except subprocess.TimeoutExpired:
            pass
        if term_at and time.monotonic() - term_at[0] > grace_seconds:
            _signal_group(proc, signal.SIGKILL)
    _signal_group(proc, signal.SIGKILL)
    return 128 - proc.returncode if proc.returncode < 0 else proc.returncode


def main(argv=None):
    """``python -m potato.training.remote.supervise --grace S -- ARGV...`` (job.sh uses it)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 4 or argv[0] != "--grace" or argv[2] != "--":
        sys.stderr.write("usage: python -m potato.training.remote.supervise --grace SECONDS -- "
                         "COMMAND...\n")
        return 2
    return guard(argv[3:], float(argv[1]))


def explain(result, supervision=None):
    """(status, one-line error) for a finished WorkerExit; ``supervision``: the one it ran
    under (the limit a stopped run passed is quoted from it)."""
    w = supervision if supervision is not None else Supervision()
    if result.ok:
        return "success", None
    if result.stopped == "cancelled":
        return "cancelled", "cancelled"
    if result.stopped == "wall_clock":
        return "error", ("The run took longer than max_wall_seconds (%g s) and was stopped. Raise "
                         "model_training.max_wall_seconds or train on fewer items or epochs."
                         % w.max_wall_seconds)
    if result.stopped == "memory":
        return "error", ("The training process used more than max_ram_mb (%g MB) and was killed. "
                         "Lower batch_size or max_length, or raise model_training.max_ram_mb."
                         % w.max_rss_mb)
    if result.error is not None and result.error.get("kind") == "cancelled":
        return "cancelled", "cancelled"
    if result.returncode == -signal.SIGKILL:
        return "error", "the training process was killed (probably out of memory)"
    if result.error is not None:
        message = result.error.get("message") or "the worker reported an error"
        if result.error.get("kind") == "other" and result.stderr_tail and \
                not result.error.get("complete"):  # a RunFailure's sentence is whole
            last = result.stderr_tail.strip().splitlines()[-1:]
            if last and last[0] not in message:
                message += " (stderr: %s)" % last[0][:300]
        return "error", message
    if result.returncode == 0:
        return "error", "the worker exited without reporting a result"
    message = events.describe_exit(result.returncode)
    last = result.stderr_tail.strip().splitlines()[-1:] if result.stderr_tail else []
    if last:
        message += ": " + last[0][:300]
    return "error", message


if __name__ == "__main__":
    sys.exit(main())
