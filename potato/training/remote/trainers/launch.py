"""Rank 0's side of a data-parallel group: start the child ranks, meet them, and stop them
(standard library at import time; torch.distributed is imported by the functions).

The rendezvous is a FileStore in the run's directory (private to the account: 0700), not a
TCPStore: a TCP store has no authentication, so any local user could read, set or delete its
keys (gloo's addresses among them). Each child sets ``ready/<rank>`` once it has imported its
trainer;
rank 0 polls for those keys, checking between polls for cancellation and for a child that has
already died, so a rank that cannot even start fails the run at once with its own message.
"""

import datetime
import json
import os
import signal
import subprocess
import time

from potato.training.remote import proc
from potato.training.remote import protocol

CODE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))
FAILED_RANK_WAIT_S = 3.0  # after an error on rank 0: how long a failing child has to exit
HARD_EXIT_AFTER_S = 20.0  # a child failed and rank 0 is stuck: exit (watch)
RANK_TRACEBACK = "; its traceback is in the run's stderr"
SUCCESS_EXIT_WAIT_S = 30.0  # after a successful run: how long the children have to exit
STORE_FILE = "ddp.store"


def rank_argv(python, spec_path, rank, world, backend, store_path, parent, error_file):
    """The command line of child rank ``rank`` (pure)."""
    return [python, "-m", "potato.training.remote.rank", "--spec", spec_path,
            "--rank", str(rank), "--world", str(world), "--backend", backend, "--store",
            store_path, "--parent", str(parent), "--error-file", error_file]


def rank_env(base, rank, world):
    """A child rank's environment: the worker's (through the one worker_env) and the variables
    torch.distributed code expects of a launcher (the rendezvous itself is the store file)."""
    env = protocol.worker_env(base, CODE_ROOT)
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    return env


def _timedelta(group):
    return datetime.timedelta(seconds=group.timeout)


def start_ranks(group):
    """Rank 0: host the store, start ranks 1..N-1, wait until they are ready, join."""
    import sys

    import torch.distributed as dist

    ctx = group.ctx
    spec_path = getattr(ctx, "spec_path", None)
    if not spec_path:
        raise ctx.RunFailure("a data-parallel run needs the worker's spec file; run it through "
                             "python -m potato.training.worker, or set processes to 1")
    base = os.path.dirname(os.path.abspath(spec_path))
    group.store_path = os.path.join(base, STORE_FILE)
    if os.path.exists(group.store_path):  # a crashed run's: its keys must not be read
        os.remove(group.store_path)
    group.store = dist.FileStore(group.store_path, group.world)
    for rank in range(1, group.world):
        error_file = os.path.join(base, "rank%d.error.json" % rank)
        if os.path.exists(error_file):
            os.remove(error_file)
        child = proc.spawn(rank_argv(sys.executable, spec_path, rank, group.world,
                                     group.backend, group.store_path, os.getpid(), error_file),
                           new_session=False, env=rank_env(os.environ, rank, group.world),
                           stdin=subprocess.DEVNULL, stdout=2)  # stray prints: not events
        group.children.append((rank, child, error_file))
    ctx.log("data-parallel: %d processes (%s backend); this worker is rank 0, ranks 1 on "
            "are pids %s" % (group.world, group.backend,
                             ", ".join(str(c.pid) for _, c, _ in group.children)))
    if getattr(ctx, "owns_process", False):
        group.watcher = watch(group)
    _rendezvous(group)
    dist.init_process_group(group.backend, store=group.store, rank=0, world_size=group.world,
                            timeout=_timedelta(group))


def _rendezvous(group):
    ctx = group.ctx
    keys = ["ready/%d" % rank for rank, _, _ in group.children]
    deadline = time.monotonic() + group.timeout
    while not group.store.check(keys):
        ctx.check_cancelled()
        failures = _failures(group)
        if failures:
            raise ctx.RunFailure(failures[0] + " (before training started)")
        if time.monotonic() > deadline:
            raise ctx.RunFailure(
                "the other ranks of this data-parallel run did not start within %g s (%s); see "
                "the run's stderr" % (group.timeout, "POTATO_DDP_TIMEOUT_S"))
        time.sleep(0.2)


def join_ranks(group):
    """A child rank: say it is ready, then join the process group rank 0 hosts."""
    import torch.distributed as dist

    store = dist.FileStore(group.ctx.dist["store"], group.world)
    store.set("ready/%d" % group.rank, "1")
    dist.init_process_group(group.backend, store=store, rank=group.rank,
                            world_size=group.world, timeout=_timedelta(group))


def describe(group, rank, child, error_file):
    """A sentence for a child that ended badly, or None while it runs or after it succeeded
    (the same sentence every time: the child's error file is read once)."""
    code = child.poll()
    if code is None or code == 0:
        return None
    with group.lock:
        if rank not in group.messages:
            group.messages[rank] = _sentence(group, rank, child, code, error_file)
        return group.messages[rank]


def _sentence(group, rank, child, code, error_file):
    who = "rank %d of %d (pid %d)" % (rank, group.world, child.pid)
    try:
        with open(error_file, encoding="utf-8") as f:
            message = json.load(f).get("message")
        os.remove(error_file)
    except (OSError, ValueError, AttributeError):
        message = None
    if message:
        text = "%s failed: %s%s" % (who, message, RANK_TRACEBACK)
    elif code == -signal.SIGKILL:
        text = "%s was killed (SIGKILL; out of memory, or stopped by hand)" % who
    else:
        text = "%s ended: %s" % (who, protocol.describe_exit(code))
    return text


def watch(group):
    """Rank 0's last resort, in a worker that owns its process: a collective that waits on a
    dead rank may never return (NCCL waits for its timeout), so when a child has failed and
    rank 0 is still inside the group ``HARD_EXIT_AFTER_S`` later (or the collective timeout, if
    shorter), report that child's error,
    stop the others and exit. Gloo (the CPU) raises at once and never gets here."""
    import threading

    ctx = group.ctx

    def run():
        while not group.closed.wait(0.5):
            failures = _failures(group)
            if failures and not group.closed.wait(min(HARD_EXIT_AFTER_S, group.timeout)):
                ctx.emitter.emit("error", message=failures[0], kind="other")
                _stop(group)
                os._exit(protocol.EXIT_OTHER)

    t = threading.Thread(target=run, daemon=True, name="rank-watch")
    t.start()
    return t


def _failures(group):
    out = []
    for rank, child, error_file in group.children:
        text = describe(group, rank, child, error_file)
        if text:
            out.append(text)
    return out


def _wait(group, seconds):
    """Wait up to ``seconds`` for every child to exit, or for one to fail; its failures."""
    deadline = time.monotonic() + seconds
    while True:
        failures = _failures(group)
        running = [c for _, c, _ in group.children if c.poll() is None]
        if failures or not running or time.monotonic() > deadline:
            return failures, running
        time.sleep(0.1)


def _stop(group):
    for _, child, _ in group.children:
        if child.poll() is None:
            child.kill()
    for _, child, _ in group.children:
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:  # unkillable (D state): nothing more to do here
            pass


def _is_timeout(exc):
    return exc is not None and "timed out" in str(exc).lower()


def finish(group, exc):
    """End the group; the exception the run should end with (None: ``exc`` stands)."""
    import torch.distributed as dist

    ctx = group.ctx
    failures, running = [], []
    group.closed.set()
    if group.watcher is not None:
        group.watcher.join(5)
    try:
        if group.is_main and group.children:
            cancelled = ctx.cancelled or isinstance(exc, ctx.Cancelled)
            seconds = min(group.timeout, SUCCESS_EXIT_WAIT_S) if exc is None else (
                0 if cancelled else FAILED_RANK_WAIT_S)
            failures, running = _wait(group, seconds)
            if exc is None and running:
                ctx.log("rank(s) %s did not exit after training; stopped" % ", ".join(
                    str(r) for r, c, _ in group.children if c in running), "warning")
            _stop(group)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        group.store = None
        path = getattr(group, "store_path", None)
        if group.is_main and path and os.path.exists(path):
            os.remove(path)
    if isinstance(exc, ctx.Cancelled):
        return None
    if ctx.cancelled:
        return ctx.Cancelled()
    if isinstance(exc, ctx.RunFailure):
        return None  # rank 0's own sentence (a child that hit the same check says it too)
    if failures:
        return ctx.RunFailure(failures[0])
    if exc is not None and running and _is_timeout(exc):
        rank = [r for r, c, _ in group.children if c in running][0]
        return ctx.RunFailure(
            "rank %d of %d stopped answering: rank 0 waited %g s for it in a collective "
            "operation and stopped the run (a hung rank, or one much slower than the others; "
            "%s sets the wait)" % (rank, group.world, group.timeout, "POTATO_DDP_TIMEOUT_S"))
    return None
