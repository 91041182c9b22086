"""What one run's agent may hold of the server at once (see docs/security.md).

A run token is a credential, but one the agent's host holds: whoever has it must not be able to
keep annotators out or fill the disk. So the requests of one run are few at a time
(``MAX_REQUESTS_PER_RUN``; the agent needs up to six, while it downloads media), all runs' requests together take at
most a quarter of the server's connections (``MAX_AGENT_REQUESTS``), and a run's model files
are counted as they are written: bytes are reserved before a body is read, one upload at a
time per file, and the number of files and folders and their depth are capped. While a model
file arrives, each block is a sign of life and the run's step shows the copy
(``copy_progress``).
"""

import os
import threading
import time
from typing import Dict, Optional, Set, Tuple

from potato.server.connections import MAX_CONNECTIONS
from potato.server.errors import HTTPError
from potato.training.exchange import boundary

# one run's agent requests under way at once: the media download's connections
# (media_fetch.PARALLEL, 4), the progress reports and an upload fit, with one to spare
MAX_REQUESTS_PER_RUN = 7
# one agent backend's claims under way at once (an agent claims one at a time; a second
# agent on the same token, or a retry after a cut connection, fits)
MAX_CLAIMS_PER_BACKEND = 2
MAX_AGENT_REQUESTS = MAX_CONNECTIONS // 4  # every run's together: annotators keep the rest
MAX_ARTIFACT_ENTRIES = 10000  # files and folders under one run's artifacts/
MAX_ARTIFACT_DEPTH = 8  # levels of a model file's path
_LEDGER_LOCK = threading.Lock()


class RunSlots:
    """Counts the agent requests under way, per run and in all."""

    def __init__(self, per_run: int = MAX_REQUESTS_PER_RUN, total: int = MAX_AGENT_REQUESTS):
        self.per_run, self.total = per_run, total
        self._lock = threading.Lock()
        self._by_run: Dict[str, int] = {}

    def take(self, run_id: str, backend: str = "") -> None:
        """One more request of ``run_id`` (or, with ``backend``, one more claim of that agent
        backend), or a 503 (the agent tries again) that says why."""
        key = "backend " + backend if backend else run_id
        with self._lock:
            mine = self._by_run.get(key, 0)
            if backend and mine >= MAX_CLAIMS_PER_BACKEND:
                raise HTTPError(503, "Backend %s already has %d claims under way, the most its "
                                     "agents may have at once; try again shortly."
                                % (backend, mine), {"Retry-After": "5"})
            if mine >= self.per_run:
                raise HTTPError(503, "Run %s already has %d requests under way, the most one "
                                     "run's agent may have at once; try again when one has "
                                     "ended." % (run_id, mine), {"Retry-After": "5"})
            if sum(self._by_run.values()) >= self.total:
                raise HTTPError(503, "Agents have %d requests under way, the most the server "
                                     "gives them at once (the rest is kept for annotators); "
                                     "try again shortly." % self.total, {"Retry-After": "5"})
            self._by_run[key] = mine + 1

    def give(self, run_id: str, backend: str = "") -> None:
        key = "backend " + backend if backend else run_id
        with self._lock:
            left = self._by_run.get(key, 0) - 1
            if left > 0:
                self._by_run[key] = left
            else:
                self._by_run.pop(key, None)


class ArtifactLedger:
    """One run's model files: bytes stored and reserved, files and folders, files being
    written. Made once per active run (one walk of artifacts/, for a re-attached run)."""

    def __init__(self, root: str):
        self.root = root
        self.lock = threading.Lock()
        self.size, self.entries = _walk(root)
        self.reserved = 0
        self.writing: Set[str] = set()

    def begin(self, dest: str, rel: str, offset: int, n: Optional[int], per_file: int,
              total: int) -> Tuple[int, int, int]:
        """Before an upload of ``n`` bytes to ``dest`` from ``offset``: (how many bytes it may
        have, bytes reserved, the file's size now). 409 while another upload writes ``dest``
        or when ``offset`` is not its size; 413 past the run's files and folders."""
        with self.lock:
            if dest in self.writing:
                raise HTTPError(409, "%s is being uploaded by another request right now; wait "
                                     "until that one ends, then resume from the size the "
                                     "server names." % rel)
            have = os.path.getsize(dest) if os.path.isfile(dest) else 0
            if offset != have:
                raise HTTPError(409, "%s has %d bytes here, not %d: resume from %d."
                                % (rel, have, offset, have))
            new = _missing(self.root, dest)
            if new and self.entries + new > MAX_ARTIFACT_ENTRIES:
                raise HTTPError(413, "Run artifacts hold %d files and folders, the most a run "
                                     "may store (%d); %s is not stored." % (
                                         self.entries, MAX_ARTIFACT_ENTRIES, rel))
            limit = max(0, min(per_file - offset, total - self.size - self.reserved))
            reserve = n if n is not None and n <= limit else 0
            self.reserved += reserve
            self.entries += new
            self.writing.add(dest)
            return limit, reserve, have

    def end(self, dest: str, reserve: int, have: int) -> None:
        """After the upload (done or not): what it wrote counts, the reservation is freed."""
        try:
            now = os.path.getsize(dest) if os.path.isfile(dest) else have
        except OSError:
            now = have
        with self.lock:
            self.reserved -= reserve
            self.size += now - have
            self.writing.discard(dest)


def ledger(remote, root: str) -> ArtifactLedger:
    """The run's ledger, kept with its RemoteState (so it ends with the run)."""
    with _LEDGER_LOCK:
        got = getattr(remote, "artifact_ledger", None)
        if got is None:
            got = remote.artifact_ledger = ArtifactLedger(root)
        return got


def _walk(root: str) -> Tuple[int, int]:
    size = entries = 0
    for folder, dirs, files in os.walk(root):
        entries += len(dirs) + len(files)
        for name in files:
            try:
                size += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass
    return size, entries


def _missing(root: str, dest: str) -> int:
    """How many of the folders and the file on the way from ``root`` to ``dest`` are new."""
    missing, path = 0, dest
    while path != root and len(path) > len(root):
        if os.path.lexists(path):
            break
        missing += 1
        path = os.path.dirname(path)
    return missing


STEP_EVERY_S = 1.0  # how often a model-file upload updates the run's step


def copy_progress(ctx, remote, rel: str, offset: int, size: Optional[int]):
    """``on_progress(got)`` of a model-file upload: each block is a sign of life, and the
    run's step says, at most once a second, how much of the file is here and at what rate
    ("copying the model back: model.bin, 11.9 of 20.0 MB, 0.10 MB/s")."""
    started = last = time.monotonic()

    def progress(got: int) -> None:
        nonlocal last
        remote.seen()
        now = time.monotonic()
        if now - last < STEP_EVERY_S:
            return
        last = now
        rate = got / max(now - started, 1e-6) / 1048576.0
        ctx.set_step("copying the model back: %s, %.1f%s MB, %.2f MB/s" % (
            boundary.plain(rel)[:120], (offset + got) / 1048576.0,
            " of %.1f" % (size / 1048576.0) if size else "", rate))

    return progress
