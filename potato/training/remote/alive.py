"""A running agent's sign of life on its host (standard library, Python 3.8).

The job directory's ``.alive`` is touched every ALIVE_S while its agent runs: a directory
whose ``.alive`` went stale (its agent was killed) is removed by the next probe of the host
(backends/sshcmd.py), or on an agent machine by the polling agent (``sweep``). A directory kept
on purpose has no ``.alive``. The run's media pin (remote/media_cache.py) is kept fresh the same
way.
"""

import os
import shutil
import threading
import time

ALIVE_S = 2.0
# A job directory whose .alive nobody touched for this long is a killed agent's: its labels go.
STALE_S = 300.0


class Alive:
    """Touches ``path`` every ALIVE_S until stopped (made here, 0600, in a 0700 directory),
    and ``pin`` (the run's media pin) when it exists, so neither goes stale while we run."""

    def __init__(self, path, pin=None):
        self.path = path
        self.pin = pin
        self.done = threading.Event()
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "a"):
            pass
        self.thread = threading.Thread(target=self._touch, daemon=True, name="agent-alive")
        self.thread.start()

    def _touch(self):
        while not self.done.wait(ALIVE_S):
            for path in ([self.pin] if self.pin else []):
                try:
                    os.utime(path)
                except OSError:  # not written yet, or the run has no media
                    pass
            try:
                os.utime(self.path)
            except OSError:  # removed with its directory, or kept on purpose
                return

    def stop(self):
        self.done.set()
        self.thread.join(timeout=5)


def sweep(jobs_dir, stale_s=STALE_S, now=None):
    """Remove the job directories under ``jobs_dir`` whose ``.alive`` is older than
    ``stale_s`` (their agent was killed: kill -9, a reboot); the names removed. A directory
    without ``.alive`` (kept on purpose, or one being made) and a link are left alone."""
    now = time.time() if now is None else now
    try:
        names = sorted(os.listdir(jobs_dir))
    except OSError:
        return []
    swept = []
    for name in names:
        path = os.path.join(jobs_dir, name)
        try:
            if os.path.islink(path) or not os.path.isdir(path):
                continue
            if now - os.stat(os.path.join(path, ".alive")).st_mtime <= stale_s:
                continue
            shutil.rmtree(path)
            swept.append(name)
        except OSError:
            continue
    return swept
