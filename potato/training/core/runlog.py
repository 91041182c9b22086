"""A run's log (``run.log``): appended by the server, bounded, private.

Whatever a run sends ends up here, so the file is capped: past ``MAX_BYTES`` it keeps its head
(how the run started) and its tail (how it is going), with a line saying how much was cut in
between. Files are created 0600. Pages read only the tail they show.
"""

import os
import threading
import time

MAX_BYTES = 4 << 20
HEAD_BYTES = 512 << 10
TAIL_BYTES = 2 << 20
_lock = threading.Lock()


def append(path: str, message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    text = "".join("%s %s\n" % (stamp, line) for line in str(message).splitlines() or [""])
    data = text.encode("utf-8", "replace")
    with _lock:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, data)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > MAX_BYTES:
            _cut(path, size)


def _cut(path: str, size: int) -> None:
    """Keep the head and the tail; one line in between says what went."""
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
        head = head[:head.rfind(b"\n") + 1] or head
        f.seek(size - TAIL_BYTES)
        tail = f.read()
        tail = tail[tail.find(b"\n") + 1:]
    cut = size - len(head) - len(tail)
    marker = ("%s [... %d bytes of this log were cut to keep it under %d MB ...]\n" % (
        time.strftime("%Y-%m-%d %H:%M:%S"), cut, MAX_BYTES >> 20)).encode()
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(head + marker + tail)
    os.replace(tmp, path)


def read(path: str, last_lines: int = 0, max_bytes: int = 256 << 10) -> str:
    """The log's last ``max_bytes`` (a page never reads a whole big file), or its last lines."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - max_bytes)
            f.seek(start)
            data = f.read()
    except OSError:
        return ""
    if start:
        data = data[data.find(b"\n") + 1:]
    text = data.decode("utf-8", "replace")
    if last_lines:
        return "\n".join(text.splitlines()[-last_lines:])
    if start:
        return "[the first %d bytes are not shown here; GET .../log has all of it]\n%s" % (
            start, text)
    return text
