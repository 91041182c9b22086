"""A full disk, said clearly and once: requests that cannot be stored get a 507 at once, the
server log says so at most once a minute (the log is likely on the same full disk), and admin
pages carry a banner while it lasts.

``is_full(e)`` knows the errors a full disk raises: ``ENOSPC``/``EDQUOT`` from the file system,
and SQLite's "database or disk is full".
"""

import errno
import logging
import os
import sqlite3
import threading
import time
from typing import Optional

log = logging.getLogger("potato.server")

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
LOG_EVERY_S = 60.0
BANNER_S = 300.0  # a disk found full is shown on admin pages this long after the last refusal
MIN_FREE_BYTES = 1 << 20  # below this, an upload is refused before a byte is written


def is_full(e: BaseException) -> bool:
    if isinstance(e, OSError) and e.errno in FULL_ERRNOS:
        return True
    return isinstance(e, sqlite3.OperationalError) and "disk is full" in str(e)


def mount_point(path: str) -> str:
    """The mount point of the file system that holds ``path`` (or the nearest existing parent)."""
    path = os.path.realpath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


class DiskWatch:
    """The state of the disk under ``output_annotation_dir``, shared by all requests."""

    def __init__(self, output_dir: str):
        self.output_dir = output_dir
        self._lock = threading.Lock()
        self._last_refusal = 0.0  # monotonic
        self._last_log = -LOG_EVERY_S
        self._unlogged = 0

    def message(self) -> str:
        return ("the server's disk is full (output_annotation_dir on %s): nothing more can be "
                "stored until space is freed there" % mount_point(self.output_dir))

    def full(self, where: str, error: BaseException) -> str:
        """Note a refusal at ``where`` (a path); log it if a minute has passed since the last
        line. Returns the message for the client."""
        now = time.monotonic()
        with self._lock:
            self._last_refusal = now
            self._unlogged += 1
            if now - self._last_log < LOG_EVERY_S:
                return self.message()
            self._last_log, count, self._unlogged = now, self._unlogged, 0
        log.warning("%s (%s; %d request(s) refused with 507 since the last such line, the "
                    "latest %s)", self.message(), error, count, where)
        return self.message()

    def free_bytes(self) -> Optional[int]:
        try:
            st = os.statvfs(self.output_dir)
        except OSError:
            return None
        return st.f_bavail * st.f_frsize

    def has_room(self, n: int) -> bool:
        """Whether ``n`` more bytes fit, with MIN_FREE_BYTES to spare for labels and logs."""
        free = self.free_bytes()
        return free is None or free >= n + MIN_FREE_BYTES

    def banner(self) -> Optional[str]:
        """A sentence for admin pages while the disk is (or was lately found) full."""
        recent = time.monotonic() - self._last_refusal < BANNER_S and self._last_refusal
        free = self.free_bytes()
        if not recent and (free is None or free >= MIN_FREE_BYTES):
            return None
        return ("The server's disk is full (output_annotation_dir on %s): annotations, "
                "uploads and run results are refused with 507 until space is freed there."
                % mount_point(self.output_dir))
