"""Fast unit tests for the worker's supervisor (potato/training/remote/supervise.py): events,
cancel, wall clock, memory, grace, the SLURM guard and the error sentences. Also the tests
tools/mutation.py runs against supervise.py (docs/testing.md, "Mutation testing"); the children
are tiny Python scripts, limits are small, and no test asserts on timings."""

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from potato.training.remote import supervise as sv

PY = sys.executable


def test_worker_exit():
    w = sv.WorkerExit()
    assert (w.returncode, w.result, w.error, w.stopped, w.stderr_tail, w.peak_rss_mb) == \
        (None, None, None, None, "", 0.0)
    assert w.ok is False
    w.returncode = 0
    assert w.ok is False
    w.note({"type": "status", "message": "x"})
    w.note({"type": "error", "message": "e1"})
    w.note({"type": "error", "message": "e2"})
    assert w.result is None and w.error == {"type": "error", "message": "e2"}
    w.note({"type": "result", "metrics": {}})
    assert w.result == {"type": "result", "metrics": {}} and w.ok is True
    w.stopped = "cancelled"
    assert w.ok is False
    w.stopped, w.returncode = None, 1
    assert w.ok is False


def _vmrss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0


def test_rss_mb():
    p = subprocess.Popen([PY, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"up\n"
        for _ in range(50):  # the child's memory settles once it waits on its stdin
            before = _vmrss(p.pid)
            got = sv.rss_mb(p.pid)
            if got == before == _vmrss(p.pid):
                break
        assert got == before and got > 1
    finally:
        p.communicate(b"")
        p.stdout.close()
    assert sv.rss_mb(p.pid) == 0.0  # gone
    assert sv.rss_mb(2 ** 22 + 7) == 0.0


def test_tail(tmp_path):
    p = tmp_path / "err"
    p.write_text("".join("line %d\n" % n for n in range(1, 31)))
    assert sv.tail(str(p)) == "\n".join("line %d" % n for n in range(11, 31))
    assert sv.tail(str(p), lines=2) == "line 29\nline 30"
    assert sv.tail(str(p), lines=40).startswith("line 1\n")
    p.write_bytes(b"ab\xffc\nlast")
    assert sv.tail(str(p)) == "ab\ufffdc\nlast"
    p.write_bytes(b"x" * 20000 + b"\nend")
    assert sv.tail(str(p)) == "x" * (16384 - 4) + "\nend"
    assert sv.tail(str(p), max_bytes=6) == "xx\nend"
    assert sv.tail(str(tmp_path / "missing")) == ""


def _script(tmp_path, body, name="w.py"):
    path = tmp_path / name
    path.write_text("import json, os, sys, time, signal\n"
                    "def ev(**e):\n"
                    "    sys.stdout.write(json.dumps(e) + '\\n'); sys.stdout.flush()\n" + body)
    return [PY, str(path)]


def _run(tmp_path, body, **kw):
    seen = []
    kw.setdefault("tick", 0.05)
    if kw.get("should_cancel") == "after_up":  # once the child has said it is up
        kw["should_cancel"] = lambda: bool(seen)
    err = str(tmp_path / "stderr.log")
    out = sv.run_worker(_script(tmp_path, body), dict(os.environ), err, seen.append,
                        sv.Supervision(**kw))
    return out, seen


def test_run_worker_reads_events_to_the_end(tmp_path):
    (tmp_path / "stderr.log").write_text("earlier\n")
    ticks = []
    body = ("print('stray output', flush=True)\n"
            "ev(type='status', message=os.getcwd())\n"
            "ev(type='log', level='info', message=os.environ.get('PM_Y', '-'))\n"
            "ev(type='log', level='info', message=repr(sys.stdin.read()))\n"
            "ev(type='bogus')\n"
            "sys.stderr.write('oops\\n')\n"
            "ev(type='error', message='e')\n"
            "ev(type='result', metrics={'f1': 1})\n")
    seen = []
    env = dict(os.environ, PM_Y="yes")
    out = sv.run_worker(_script(tmp_path, body), env, str(tmp_path / "stderr.log"),
                        seen.append, sv.Supervision(tick=0.05, on_tick=lambda: ticks.append(1)),
                        cwd=str(tmp_path))
    assert [(e["type"], e.get("message")) for e in seen] == [
        ("status", str(tmp_path)), ("log", "yes"), ("log", "''"), ("error", "e"),
        ("result", None)]
    assert out.returncode == 0 and out.stopped is None and out.ok
    assert out.result["metrics"] == {"f1": 1} and out.error["message"] == "e"
    assert out.stderr_tail == "earlier\noops"
    assert out.peak_rss_mb == 0.0
    assert ticks


def test_run_worker_many_lines_and_a_late_exit(tmp_path):
    # stdout closed long before the process ends: every line is read, and the exit waited for
    body = ("for n in range(3000):\n"
            "    ev(type='progress', current=n, total=3000, unit='step')\n"
            "sys.stdout.close(); os.close(1)\n"
            "time.sleep(0.5)\n"
            "sys.exit(3)\n")
    out, seen = _run(tmp_path, body)
    assert [e["current"] for e in seen] == list(range(3000))
    assert out.returncode == 3 and not out.ok and out.stopped is None


def test_run_worker_cancel_sends_sigterm(tmp_path):
    body = "ev(type='status', message='up')\ntime.sleep(30)\n"
    out, seen = _run(tmp_path, body, should_cancel="after_up")
    assert out.stopped == "cancelled" and out.returncode == -signal.SIGTERM
    assert seen[0]["message"] == "up"


IGNORE_TERM = ("signal.signal(signal.SIGTERM, lambda *a: ev(type='log', level='info', "
               "message='term'))\n"
               "ev(type='status', message='up')\n"
               "for _ in range(600):\n"
               "    time.sleep(0.05)\n")


def test_run_worker_kills_after_the_grace(tmp_path):
    out, seen = _run(tmp_path, IGNORE_TERM, should_cancel="after_up", grace_seconds=0.3)
    assert out.stopped == "cancelled" and out.returncode == -signal.SIGKILL
    assert [e.get("message") for e in seen].count("term") == 1  # SIGTERM sent once


def test_run_worker_hurry_shortens_the_grace(tmp_path):
    out, seen = _run(tmp_path, IGNORE_TERM, should_cancel="after_up", grace_seconds=1000,
                     hurry=lambda: True)
    assert out.returncode == -signal.SIGKILL
    assert "term" in [e.get("message") for e in seen]


def test_run_worker_wall_clock(tmp_path):
    out, _ = _run(tmp_path, "time.sleep(30)\n", max_wall_seconds=0.2)
    assert out.stopped == "wall_clock" and out.returncode == -signal.SIGTERM
    out, _ = _run(tmp_path, "time.sleep(0.3)\n", max_wall_seconds=1000, grace_seconds=0)
    assert out.stopped is None and out.returncode == 0


def test_run_worker_wall_clock_keeps_a_cancel(tmp_path):
    out, _ = _run(tmp_path, "time.sleep(30)\n", should_cancel=lambda: True,
                  max_wall_seconds=0)
    assert out.stopped == "cancelled"


def test_run_worker_memory(tmp_path):
    out, _ = _run(tmp_path, "time.sleep(30)\n", max_rss_mb=0.5)
    assert out.stopped == "memory" and out.returncode == -signal.SIGKILL
    assert out.peak_rss_mb > 0.5
    out, _ = _run(tmp_path, "time.sleep(0.2)\n", max_rss_mb=100000)
    assert out.stopped is None and out.returncode == 0 and out.peak_rss_mb > 1


def test_run_worker_memory_after_a_cancel_keeps_the_cancel(tmp_path):
    out, _ = _run(tmp_path, IGNORE_TERM, should_cancel=lambda: True, max_rss_mb=0.5)
    assert out.stopped == "cancelled" and out.returncode < 0


def test_run_worker_a_failing_callback_still_ends_the_worker(tmp_path, monkeypatch):
    """A callback that fails while the worker floods its stdout and the line queue is full:
    the worker's whole group is killed, the reader stuck on the full queue is freed and ends,
    and the failure reaches the caller."""
    queues = []
    real_queue = queue.Queue

    class Queue(real_queue):
        def __init__(self, maxsize=0):
            real_queue.__init__(self, maxsize)
            queues.append(self)

    monkeypatch.setattr(sv.queue, "Queue", Queue)
    pids = []

    def boom(event):
        pids.append(int(event["message"]))
        for _ in range(600):  # until the reader waits on a full queue
            if queues[0].full():
                break
            time.sleep(0.05)
        raise RuntimeError("callback failed")

    body = ("child = os.fork()\n"
            "if child == 0:\n"
            "    time.sleep(30)\n"
            "    os._exit(0)\n"
            "ev(type='status', message=str(child))\n"
            "for n in range(30000):\n"
            "    ev(type='log', level='info', message=str(n))\n"
            "time.sleep(30)\n")
    with pytest.raises(RuntimeError, match="callback failed"):
        sv.run_worker(_script(tmp_path, body), dict(os.environ), str(tmp_path / "e.log"),
                      boom, sv.Supervision(tick=0.05))
    assert not [t for t in threading.enumerate() if t.name == "worker-stdout"]
    _wait_gone(pids[0])  # the worker's own child, in its group: killed with it


def _wait_gone(pid):
    for _ in range(200):
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.05)
    raise AssertionError("process %d still runs" % pid)


def test_run_worker_cannot_start(tmp_path):
    from potato.training.remote import proc
    with pytest.raises(proc.SpawnError):
        sv.run_worker(["/nonexistent/w"], dict(os.environ), str(tmp_path / "e.log"),
                      lambda e: None)


@pytest.fixture
def own_signals():
    saved = {s: signal.getsignal(s) for s in sv.GUARD_SIGNALS}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def test_guard_signals():
    assert sv.GUARD_SIGNALS == (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_guard_passes_a_signal_on(own_signals, tmp_path, sig):
    ready = tmp_path / "ready"
    code = ("import signal, sys, time, pathlib\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
            "pathlib.Path(%r).write_text('x')\n"
            "time.sleep(30)\n" % str(ready))
    timer = threading.Thread(target=_signal_when, args=(ready, sig), daemon=True)
    timer.start()
    assert sv.guard([PY, "-c", code], 30, tick=0.05) == 7
    timer.join()


def _signal_when(path, sig):
    import time
    for _ in range(600):
        if path.exists():
            break
        time.sleep(0.05)
    os.kill(os.getpid(), sig)
    os.kill(os.getpid(), sig)  # a second signal sends nothing more


def test_guard_kills_a_worker_that_ignores_sigterm(own_signals, tmp_path):
    ready = tmp_path / "ready"
    code = ("import signal, time, pathlib\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "pathlib.Path(%r).write_text('x')\n"
            "time.sleep(30)\n" % str(ready))
    timer = threading.Thread(target=_signal_when, args=(ready, signal.SIGTERM), daemon=True)
    timer.start()
    assert sv.guard([PY, "-c", code], 0.2, tick=0.05) == 128 + signal.SIGKILL
    timer.join()


def test_guard_kills_what_the_worker_left(own_signals, tmp_path):
    pidfile = tmp_path / "pid"
    code = ("import subprocess, sys, pathlib\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
            "pathlib.Path(%r).write_text(str(p.pid))\n" % str(pidfile))
    assert sv.guard([PY, "-c", code], 5, tick=0.05) == 0
    pid = int(pidfile.read_text())
    for _ in range(200):
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state in ("Z", "X"):
            break
        import time
        time.sleep(0.05)
    else:
        raise AssertionError("the worker's leftover process %d still runs" % pid)


def test_supervised_status_of_a_killed_worker(own_signals):
    assert sv.guard([sys.executable, "-c", "import sys; sys.exit(5)"], 5) == 5
    assert sv.guard([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"], 5) == 137
    assert sv.guard([sys.executable, "-c", "import os; os.kill(os.getpid(), 15)"], 5) \
        == 143
    assert sv.guard(["/nonexistent/worker"], 5) == 127


def test_guard_exit_statuses(own_signals):
    assert sv.guard([PY, "-c", "pass"], 5, tick=0.05) == 0
    assert sv.guard([PY, "-c", "import sys; sys.exit(3)"], 5, tick=0.05) == 3


def test_main_usage(own_signals, capsys):
    for argv in ([], ["--grace", "1", "--"], ["--grace", "1", "x", PY],
                 ["-g", "1", "--", PY]):
        assert sv.main(argv) == 2
        assert "usage: python -m potato.training.remote.supervise" in capsys.readouterr().err
    assert sv.main(["--grace", "1", "--", PY, "-c", "import sys; sys.exit(4)"]) == 4
    saved = sys.argv
    sys.argv = ["supervise", "--grace", "2", "--", PY, "-c", "import sys; sys.exit(6)"]
    try:
        assert sv.main() == 6
    finally:
        sys.argv = saved


def _exit(returncode=1, result=None, error=None, stopped=None, stderr_tail=""):
    w = sv.WorkerExit()
    w.returncode, w.result, w.error, w.stopped, w.stderr_tail = (
        returncode, result, error, stopped, stderr_tail)
    return w


def test_explain():
    ok = _exit(0, result={"type": "result"})
    assert sv.explain(ok) == ("success", None)
    assert sv.explain(_exit(stopped="cancelled")) == ("cancelled", "cancelled")
    status, msg = sv.explain(_exit(-15, stopped="wall_clock"),
                             sv.Supervision(max_wall_seconds=2.5))
    assert status == "error" and "max_wall_seconds (2.5 s)" in msg
    status, msg = sv.explain(_exit(-9, stopped="memory"), sv.Supervision(max_rss_mb=300))
    assert status == "error" and "max_ram_mb (300 MB)" in msg
    assert sv.explain(_exit(66, error={"kind": "cancelled", "message": "c"})) == \
        ("cancelled", "cancelled")
    assert sv.explain(_exit(-9)) == \
        ("error", "the training process was killed (probably out of memory)")
    assert sv.explain(_exit(-9, error={"kind": "other", "message": "m"})) == \
        ("error", "the training process was killed (probably out of memory)")
    assert sv.explain(_exit(1, error={"message": "bad thing"})) == ("error", "bad thing")
    assert sv.explain(_exit(1, error={"message": ""})) == \
        ("error", "the worker reported an error")
    assert sv.explain(_exit(1, error={"kind": "other", "message": "m"},
                            stderr_tail="a\n Trace: x  \n\n")) == ("error", "m (stderr:  Trace: x)")
    assert sv.explain(_exit(1, error={"kind": "other", "message": "m Trace: x"},
                            stderr_tail="Trace: x")) == ("error", "m Trace: x")
    assert sv.explain(_exit(1, error={"kind": "bad_spec", "message": "m"},
                            stderr_tail="t")) == ("error", "m")
    # a worker's whole sentence (a RunFailure) gets nothing from stderr: its last line may be
    # anything the run printed (another node's srun noise, a library's warning)
    assert sv.explain(_exit(1, error={"kind": "other", "message": "m", "complete": True},
                            stderr_tail="srun: Force Terminated")) == ("error", "m")
    assert sv.explain(_exit(1, error={"kind": "other", "message": "m"}, stderr_tail="  \n")) \
        == ("error", "m")
    assert sv.explain(_exit(1, error={"kind": "other", "message": "m"},
                            stderr_tail="y" * 400)) == ("error", "m (stderr: %s)" % ("y" * 300))
    assert sv.explain(_exit(0)) == ("error", "the worker exited without reporting a result")
    assert sv.explain(_exit(0, result={"type": "result"}, stopped="lost")) == \
        ("error", "the worker exited without reporting a result")
    assert sv.explain(_exit(65)) == ("error", "a package the trainer needs is missing")
    assert sv.explain(_exit(65, stderr_tail="x\nModuleNotFoundError: torch\n")) == \
        ("error", "a package the trainer needs is missing: ModuleNotFoundError: torch")
    assert sv.explain(_exit(2, stderr_tail="z" * 400)) == \
        ("error", "the training process exited with status 2: " + "z" * 300)
    assert sv.explain(_exit(2, stderr_tail=" \n ")) == \
        ("error", "the training process exited with status 2")
    assert sv.explain(_exit(None)) == \
        ("error", "the training process did not report how it ended")


def test_run_worker_ends_within_bounded_waits(monkeypatch):
    """However the run ends (here an ``on_tick`` that fails), with a reader that never ends and a
    child that never exits: SIGKILL to the group, then at most 5 s of emptying the queue (0.1 s
    a wait) while the reader lives, a 1 s join and a 5 s wait; a stuck reader or child cannot
    hang the supervisor."""
    calls = []
    now = [0.0]
    ending = []
    stuck = threading.Event()
    monkeypatch.setattr(sv.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(sv.os, "killpg", lambda pid, sig: calls.append(("signal", pid, sig)))
    real_queue, real_thread = queue.Queue, threading.Thread

    class Queue(real_queue):
        def get(self, block=True, timeout=None):
            if ending:
                calls.append(("get", timeout))
                now[0] += 1.0
            return real_queue.get(self, block, timeout)

    class Thread(real_thread):
        def join(self, timeout=None):
            calls.append(("join", timeout))
            real_thread.join(self, timeout)

    class Stdout:
        def readline(self, limit=-1):
            stuck.wait(10)
            return b""

        def close(self):
            pass

    class Proc:
        pid = 4242
        returncode = None
        stdout = Stdout()

        def poll(self):
            return None

        def wait(self, timeout=None):
            if ending:
                calls.append(("wait", timeout))
            raise subprocess.TimeoutExpired("w", timeout)

    def on_tick():
        ending.append(1)
        raise RuntimeError("tick failed")

    monkeypatch.setattr(sv.queue, "Queue", Queue)
    monkeypatch.setattr(sv.threading, "Thread", Thread)
    monkeypatch.setattr(sv.procs, "spawn", lambda *a, **k: Proc())
    try:
        with pytest.raises(RuntimeError, match="tick failed"):
            sv.run_worker(["w"], {}, os.devnull, lambda e: None,
                          sv.Supervision(tick=0.01, on_tick=on_tick))
    finally:
        stuck.set()
    assert calls == [("signal", 4242, signal.SIGKILL)] + [("get", 0.1)] * 5 + \
        [("join", 1), ("wait", 5)]
    for t in threading.enumerate():
        if t.name == "worker-stdout":
            t.join(5)


def test_run_worker_gives_the_child_no_stdin(tmp_path):
    """The worker's stdin is /dev/null, never the caller's (an agent's stdin is its session)."""
    saved = os.dup(0)
    r, w = os.pipe()
    os.dup2(r, 0)
    try:
        out, seen = _run(tmp_path, "ev(type='log', level='info', "
                                   "message=os.readlink('/proc/self/fd/0'))\n")
    finally:
        os.dup2(saved, 0)
        for fd in (saved, r, w):
            os.close(fd)
    assert seen[0]["message"] == "/dev/null" and out.returncode == 0


def test_run_worker_queue_reader_and_line_limit(tmp_path, monkeypatch):
    """Bounded memory: at most 10000 lines wait in the queue, a line is read MAX_LINE + 2 bytes
    at a time, by one daemon thread named worker-stdout (it cannot keep the process alive)."""
    from potato.training.remote import protocol
    sizes, limits, threads = [], [], []

    real_queue = queue.Queue

    class Queue(real_queue):
        def __init__(self, maxsize=0):
            sizes.append(maxsize)
            real_queue.__init__(self, maxsize)

    real_spawn = sv.procs.spawn

    class Recording:
        def __init__(self, f):
            self.f = f

        def readline(self, limit=-1):
            limits.append(limit)
            return self.f.readline(limit)

        def close(self):
            self.f.close()

    def spawn(*a, **k):
        p = real_spawn(*a, **k)
        p.stdout = Recording(p.stdout)
        return p

    monkeypatch.setattr(sv.queue, "Queue", Queue)
    monkeypatch.setattr(sv.procs, "spawn", spawn)

    def on_event(event):
        threads.extend((t.name, t.daemon) for t in threading.enumerate()
                       if t is not threading.current_thread() and t.name.startswith("worker"))

    sv.run_worker(_script(tmp_path, "ev(type='status', message='a')\n"), dict(os.environ),
                  str(tmp_path / "e.log"), on_event, sv.Supervision(tick=0.05))
    assert sizes == [10000]
    assert limits and set(limits) == {protocol.MAX_LINE + 2}
    assert threads == [("worker-stdout", True)]


def test_run_worker_replaces_bad_utf8(tmp_path):
    body = ("sys.stdout.buffer.write(b'stray \\xff\\n'\n"
            "                       b'{\"type\":\"log\",\"message\":\"a\\xffb\"}\\n')\n"
            "sys.stdout.flush()\n"
            "ev(type='status', message='after')\n")
    out, seen = _run(tmp_path, body)
    assert [e["message"] for e in seen] == ["a\ufffdb", "after"]


def test_run_worker_reads_what_a_grandchild_writes_after_the_worker_exits(tmp_path):
    """The worker has exited but something it started still holds stdout: its lines count."""
    body = ("if os.fork() == 0:\n"
            "    time.sleep(0.3)\n"
            "    ev(type='status', message='late')\n"
            "    os._exit(0)\n"
            "os._exit(0)\n")
    out, seen = _run(tmp_path, body)
    assert [e["message"] for e in seen] == ["late"] and out.returncode == 0


def _spawn_recording(monkeypatch, waits, seen, fail_after=None):
    """procs.spawn, with the child's wait() recorded (timeout, events seen by then) and, with
    ``fail_after``, a stdout whose readline raises after that many lines (a broken reader)."""
    real_spawn = sv.procs.spawn

    class Stdout:
        def __init__(self, f):
            self.f, self.n = f, 0

        def readline(self, limit=-1):
            self.n += 1
            if fail_after is not None and self.n > fail_after:
                raise OSError(5, "input/output error")
            return self.f.readline(limit)

        def close(self):
            self.f.close()

    def spawn(*a, **k):
        p = real_spawn(*a, **k)
        real_wait = p.wait

        def wait(timeout=None):
            waits.append((timeout, len(seen)))
            return real_wait(timeout=timeout)

        p.wait = wait
        p.stdout = Stdout(p.stdout)
        return p

    monkeypatch.setattr(sv.procs, "spawn", spawn)


def test_run_worker_waits_for_the_child_only_after_eof(tmp_path, monkeypatch):
    """While stdout is open the loop waits on the lines; once stdout is closed and the child
    lives on, it waits on the child (``tick`` at a time), not in a busy loop."""
    waits, seen = [], []
    _spawn_recording(monkeypatch, waits, seen)
    body = ("ev(type='status', message='a')\n"
            "time.sleep(0.4)\n"
            "ev(type='status', message='b')\n"
            "sys.stdout.close(); os.close(1)\n"
            "time.sleep(0.4)\n")
    out = sv.run_worker(_script(tmp_path, body), dict(os.environ), str(tmp_path / "e.log"),
                        seen.append, sv.Supervision(tick=0.05))
    assert [e["message"] for e in seen] == ["a", "b"] and out.returncode == 0
    ticks = [w for w in waits if w[0] != 5]  # the final wait(timeout=5) aside
    assert ticks and set(ticks) == {(0.05, 2)}


def test_run_worker_ends_when_its_reader_fails(tmp_path, monkeypatch):
    """A reader thread that died (a broken pipe) does not keep the supervisor waiting for an
    end of file that never comes: the worker's exit ends the run."""
    waits, seen = [], []
    _spawn_recording(monkeypatch, waits, seen, fail_after=1)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)
    body = "ev(type='status', message='a')\ntime.sleep(0.3)\n"
    out = sv.run_worker(_script(tmp_path, body), dict(os.environ), str(tmp_path / "e.log"),
                        seen.append, sv.Supervision(tick=0.05))
    assert [e["message"] for e in seen] == ["a"] and out.returncode == 0


def test_run_worker_wall_clock_is_strict(tmp_path, monkeypatch):
    """max_wall_seconds is a limit reached only when passed: with a clock that stands still, a
    limit of 0 never stops the worker."""
    monkeypatch.setattr(sv.time, "monotonic", lambda: 100.0)
    out, seen = _run(tmp_path, "ev(type='status', message='a')\n", max_wall_seconds=0)
    assert out.stopped is None and out.returncode == 0


def test_run_worker_memory_limit_is_strict(tmp_path, monkeypatch):
    """max_rss_mb is reached only when passed: a worker using exactly the limit runs on."""
    monkeypatch.setattr(sv, "rss_mb", lambda pid: 50.0)
    out, seen = _run(tmp_path, "ev(type='status', message='a')\ntime.sleep(0.2)\n",
                     max_rss_mb=50.0)
    assert out.stopped is None and out.returncode == 0 and out.peak_rss_mb == 50.0


def test_run_worker_grace_is_strict(tmp_path, monkeypatch):
    """SIGKILL comes only once the grace has passed: with a clock that stands still, a grace of
    0 leaves a worker its SIGTERM handler."""
    monkeypatch.setattr(sv.time, "monotonic", lambda: 100.0)
    body = ("signal.signal(signal.SIGTERM, lambda *a: sys.exit(5))\n"
            "ev(type='status', message='up')\n"
            "time.sleep(30)\n")
    out, seen = _run(tmp_path, body, should_cancel="after_up", grace_seconds=0)
    assert out.stopped == "cancelled" and out.returncode == 5


@pytest.mark.parametrize("grace,hurry,low,high", [(2.0, False, 2.0, 2.75),
                                                  (1000.0, True, 0.5, 1.25),
                                                  (0.2, True, 0.2, 0.95)])
def test_run_worker_grace_and_hurry(tmp_path, monkeypatch, grace, hurry, low, high):
    """SIGKILL follows SIGTERM once the grace has passed, by the supervisor's clock (a fake one
    here, 0.25 s a reading): the whole grace, or at most half a second while hurried."""
    now = [0.0]

    def clock():
        now[0] += 0.25
        return now[0]

    sent = []
    real = os.killpg
    monkeypatch.setattr(sv.time, "monotonic", clock)
    monkeypatch.setattr(sv.os, "killpg", lambda pid, sig: (sent.append((sig, now[0])),
                                                           real(pid, sig)))
    out, seen = _run(tmp_path, IGNORE_TERM, should_cancel="after_up", grace_seconds=grace,
                     hurry=lambda: hurry)
    assert out.returncode == -signal.SIGKILL
    (term, t0), (kill, t1) = sent[:2]
    assert (term, kill) == (signal.SIGTERM, signal.SIGKILL)
    assert low < t1 - t0 <= high


def test_run_worker_reads_the_lines_left_when_the_reader_ended_first(tmp_path, monkeypatch):
    """The worker exits and the reader queues its last lines just before the loop sees it:
    those lines are still handled (the final drain), in order, to the end of file."""
    real_spawn = sv.procs.spawn

    def spawn(*a, **k):
        p = real_spawn(*a, **k)
        real_poll = p.poll

        def poll():
            # the first look finds the worker gone and its reader finished, the lines queued
            p.wait()
            for t in threading.enumerate():
                if t.name == "worker-stdout":
                    t.join()
            return real_poll()

        p.poll = poll
        return p

    monkeypatch.setattr(sv.procs, "spawn", spawn)
    body = "time.sleep(0.3)\nfor n in range(5):\n    ev(type='status', message=str(n))\n"
    out, seen = _run(tmp_path, body)
    assert [e["message"] for e in seen] == ["0", "1", "2", "3", "4"] and out.returncode == 0


def test_guard_passes_on_a_signal_that_came_before_the_worker(own_signals, monkeypatch):
    """A SIGTERM between setting the handlers and starting the worker is not lost: the worker
    gets it as soon as it starts."""
    real_spawn = sv.procs.spawn

    def spawn(argv):
        os.kill(os.getpid(), signal.SIGTERM)  # handled here, before the worker exists
        return real_spawn(argv)

    monkeypatch.setattr(sv.procs, "spawn", spawn)
    assert sv.guard([PY, "-c", "import time; time.sleep(30)"], 1.0, tick=0.05) == \
        128 + signal.SIGTERM


def test_main_shortest_command_and_its_grace(own_signals, tmp_path):
    assert sv.main(["--grace", "1", "--", "/bin/true"]) == 0
    ready = tmp_path / "ready"
    code = ("import signal, time, pathlib\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "pathlib.Path(%r).write_text('x')\n"
            "time.sleep(30)\n" % str(ready))
    timer = threading.Thread(target=_signal_when, args=(ready, signal.SIGTERM), daemon=True)
    timer.start()
    assert sv.main(["--grace", "0.2", "--", PY, "-c", code]) == 128 + signal.SIGKILL
    timer.join()


def test_guard_grace_is_strict(own_signals, tmp_path, monkeypatch):
    """With a clock that stands still, a grace of 0 is never passed: the worker's own SIGTERM
    handler decides how it ends."""
    monkeypatch.setattr(sv.time, "monotonic", lambda: 100.0)
    ready = tmp_path / "ready"
    code = ("import signal, sys, time, pathlib\n"
            "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.3), sys.exit(7)))\n"
            "pathlib.Path(%r).write_text('x')\n"
            "time.sleep(30)\n" % str(ready))
    timer = threading.Thread(target=_signal_when, args=(ready, signal.SIGTERM), daemon=True)
    timer.start()
    assert sv.guard([PY, "-c", code], 0, tick=0.05) == 7
    timer.join()


def test_explain_without_a_stderr_tail():
    assert sv.explain(_exit(2, stderr_tail=None)) == \
        ("error", "the training process exited with status 2")


def test_defaults():
    import inspect
    assert inspect.signature(sv.guard).parameters["tick"].default == 0.2
    params = inspect.signature(sv.run_worker).parameters
    assert (params["supervision"].default, params["cwd"].default) == (None, None)
    w = sv.Supervision()
    assert (w.max_wall_seconds, w.grace_seconds, w.max_rss_mb, w.tick, w.on_tick) == (
        None, 20.0, None, 0.5, None)
    assert w.should_cancel() is False and w.hurry() is False


def test_module_main_exits_with_the_status(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(sv.__file__)))))
    r = subprocess.run([PY, "-m", "potato.training.remote.supervise", "--grace", "1", "--", PY,
                        "-c", "import sys; sys.exit(3)"], env=dict(os.environ, PYTHONPATH=root),
                       capture_output=True, timeout=60)
    assert r.returncode == 3
