"""What a test leaves behind, scoped to its own process tree (as mitogen's tests do).

Never a machine-wide ``ps`` grep: another suite on the same machine (or a leftover of one) would
make it fail or hide a leak. Processes are found through /proc by parent pid, starting from a
root this test owns: the test process itself, or the sshd daemon its fixture started.
"""

import os
import threading
import time
from typing import Dict, List


def _parents() -> Dict[int, int]:
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses; split after the last ')'
        rest = stat[stat.rfind(b")") + 2:].split()
        if len(rest) >= 2 and rest[0] != b"Z":  # zombies are already gone
            out[int(name)] = int(rest[1])
    return out


def cmdline(pid: int) -> str:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def descendants(root: int = None) -> List[int]:
    """Live descendants of ``root`` (default: this process)."""
    root = os.getpid() if root is None else root
    parents = _parents()
    children: Dict[int, List[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(out)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:].split()[0] != b"Z"


def processes(pattern: str, root: int = None) -> List[str]:
    """``"pid cmdline"`` of ``root``'s descendants whose command line contains ``pattern``."""
    return ["%d %s" % (pid, cmdline(pid)) for pid in descendants(root)
            if pattern in cmdline(pid)]


def wait_gone(pattern: str, timeout: float = 30, root: int = None) -> List[str]:
    deadline = time.time() + timeout
    while processes(pattern, root) and time.time() < deadline:
        time.sleep(0.2)
    return processes(pattern, root)


def open_fds() -> List[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append("%s -> %s" % (fd, os.readlink("/proc/self/fd/%s" % fd)))
        except OSError:
            pass
    return out


class Snapshot:
    """Child processes, threads and descriptors before a test, to compare with after it."""

    def __init__(self):
        self.children = set(descendants())
        self.threads = set(threading.enumerate())
        self.fds = len(os.listdir("/proc/self/fd"))

    def leftovers(self, timeout: float = 15.0):
        """(new processes, new threads, descriptor growth) once they had ``timeout`` to end."""
        deadline = time.time() + timeout
        while True:
            procs = [p for p in descendants() if p not in self.children]
            threads = [t for t in threading.enumerate()
                       if t not in self.threads and t.is_alive()]
            fds = len(os.listdir("/proc/self/fd")) - self.fds
            if (not procs and not threads and fds <= 0) or time.time() > deadline:
                return (["%d %s" % (p, cmdline(p)) for p in procs],
                        [t.name for t in threads], fds)
            time.sleep(0.1)
