"""The project's training-queue lock: one server (or ``potato training run``) runs a project's
queue at a time. A file lock, freed by the kernel if its owner dies; the file names the owner
and the port its server listens on."""

import fcntl
import os
from typing import Optional


class QueueLock:
    """An exclusive lock on a project's training queue (a file lock; freed if the owner dies)."""

    def __init__(self, output_dir: str):
        os.makedirs(os.path.join(output_dir, "training"), exist_ok=True)
        self.path = os.path.join(output_dir, "training", "queue.lock")
        self.fd = None

    def acquire(self, owner: str) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, ("%s pid %d\n" % (owner, os.getpid())).encode())
        self.fd = fd
        return True

    def holder(self) -> str:
        try:
            with open(self.path) as f:
                return f.readline().strip() or "another Potato process"
        except OSError:
            return "another Potato process"

    def note_port(self, port: int) -> None:
        """Write the port the holder's server listens on (``potato training register`` prints
        the URL agents use from it)."""
        if self.fd is not None:
            os.write(self.fd, ("port %d\n" % port).encode())

    def running_port(self) -> Optional[int]:
        """The port of the server that holds this lock now; None when no server holds it (or
        it named no port)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return None  # nobody holds it: no server runs
            except OSError:
                pass
            text = os.read(fd, 4096).decode("utf-8", "replace")
        finally:
            os.close(fd)
        for line in text.splitlines():
            if line.startswith("port ") and line[5:].strip().isdigit():
                return int(line[5:].strip())
        return None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
