"""Rank 0's side of a data-parallel group: start the child ranks, meet them, and stop them
(standard library at import time; torch.distributed is imported by the functions).

On one node the rendezvous is a FileStore in the run's directory (private to the account: 0700),
not a TCPStore: a TCP store has no authentication, so any local user could read, set or delete
its keys (gloo's addresses among them). Across the nodes of a SLURM job it is a TCPStore, and
the other nodes' ranks are started by one srun step (launch_nodes.py). Each child sets ``ready/<rank>`` once it has imported its
trainer;
rank 0 polls for those keys, checking between polls for cancellation and for a child that has
already died, so a rank that cannot even start fails the run at once with its own message.
"""

import json
import os
import platform
import signal
import subprocess
import sys
import time

from potato.training.remote import proc
from potato.training.remote import protocol
from potato.training.remote.trainers import launch_nodes, rank_io
from potato.training.remote.trainers.rank_io import (  # noqa: F401 (this module's API too)
    CODE_ROOT, RANK_TRACEBACK, error_file, rank_argv)

FAILED_RANK_WAIT_S = 3.0  # after an error on rank 0: how long a failing child has to exit
FAILED_STEP_WAIT_S = 10.0  # the same across nodes: srun ends its step, and says why
HARD_EXIT_AFTER_S = 20.0  # a child failed and rank 0 is stuck: exit (watch)
SUCCESS_EXIT_WAIT_S = 30.0  # after a successful run: how long the children have to exit
STORE_FILE = "ddp.store"
STEP_STOP_S = 5.0  # srun passes a TERM on to its ranks; then it is killed



def rank_env(base, rank, world, per_node=None):
    """A child rank's environment: the worker's (through the one worker_env) and the variables
    torch.distributed code expects of a launcher (the rendezvous itself is the store)."""
    env = protocol.worker_env(base, CODE_ROOT)
    env.update(RANK=str(rank), LOCAL_RANK=str(rank % (per_node or world)),
               WORLD_SIZE=str(world))
    return env


def start_ranks(group):
    """Rank 0: host the store, start the other ranks, wait until they are ready, join."""
    import torch.distributed as dist

    ctx = group.ctx
    spec_path = getattr(ctx, "spec_path", None)
    if not spec_path:
        raise ctx.RunFailure("a data-parallel run needs the worker's spec file; run it through "
                             "python -m potato.training.worker, or set processes to 1")
    base = os.path.dirname(os.path.abspath(spec_path))
    lay = group.layout
    for rank in range(1, group.world):
        if os.path.exists(error_file(base, rank)):
            os.remove(error_file(base, rank))
    if lay is None:
        group.store_path = os.path.join(base, STORE_FILE)
        if os.path.exists(group.store_path):  # a crashed run's: its keys must not be read
            os.remove(group.store_path)
        group.store = dist.FileStore(group.store_path, group.world)
        store_arg, local = group.store_path, group.world
    else:
        store_arg, local = launch_nodes.tcp_store(group, lay), lay.per_node
    for rank in range(1, local):
        child = proc.spawn(rank_argv(sys.executable, spec_path, rank, group.world,
                                     group.backend, store_arg, os.getpid(),
                                     error_file(base, rank), lay and lay.per_node),
                           new_session=False, env=rank_env(os.environ, rank, group.world, local),
                           stdin=subprocess.DEVNULL, stdout=2)  # stray prints: not events
        group.children.append((rank, child, error_file(base, rank)))
    ctx.log("data-parallel: %d processes (%s backend); this worker is rank 0%s" % (
        group.world, group.backend, ", ranks 1 on are pids %s" % ", ".join(
            str(c.pid) for _, c, _ in group.children) if group.children else ""))
    if lay is not None:
        launch_nodes.start_step(group, lay, sys.executable, spec_path, store_arg, base)
    if getattr(ctx, "owns_process", False):
        group.watcher = watch(group)
    started = time.monotonic()
    _rendezvous(group)
    dist.init_process_group(group.backend, store=group.store, rank=0, world_size=group.world,
                            timeout=rank_io.timedelta(group))
    if lay is not None:
        launch_nodes.report_nodes(group, lay)
        ctx.log("all %d ranks met after %.1f s (the other nodes' ranks started, imported torch "
                "and loaded the trainer)" % (group.world, time.monotonic() - started))


def _rendezvous(group):
    ctx = group.ctx
    keys = ["ready/%d" % rank for rank in range(1, group.world)]
    deadline = time.monotonic() + group.timeout
    while not group.store.check(keys):
        ctx.check_cancelled()
        failures = _failures(group)
        if failures:
            raise ctx.RunFailure(failures[0] + " (before training started)")
        if time.monotonic() > deadline:
            raise ctx.RunFailure(
                "the other ranks of this data-parallel run did not start within %g s (%s); see "
                "the run's stderr%s" % (group.timeout, "POTATO_DDP_TIMEOUT_S",
                                        " and %s (the other nodes')" % launch_nodes.STEP_OUT
                                        if group.srun is not None else ""))
        time.sleep(0.2)


def join_ranks(group):
    """A child rank: say it is ready, then join the process group rank 0 hosts."""
    import torch.distributed as dist

    where = group.ctx.dist["store"]
    if where.startswith("tcp://"):  # a multi-node run: rank 0's node holds the store
        host, port = where[len("tcp://"):].rsplit(":", 1)
        if group.rank >= group.per_node:  # the first node's ranks have rank 0's interface
            try:
                launch_nodes.nodes.choose_interface(launch_nodes.nodes.Layout([host], group.per_node, "", int(port)),
                                       group.rank)
            except launch_nodes.nodes.NodesError as e:
                raise group.ctx.RunFailure(str(e))
        store = dist.TCPStore(host, int(port), group.world, False, timeout=rank_io.timedelta(group))
        theirs, mine = store.get("env/0").decode(), launch_nodes.fingerprint()
        if theirs != mine:
            raise group.ctx.RunFailure(launch_nodes.mismatch_message(platform.node(), mine, host, theirs))
    else:
        store = dist.FileStore(where, group.world)
    store.set("where/%d" % group.rank, json.dumps(
        [platform.node(), os.environ.get("CUDA_VISIBLE_DEVICES", "")]))
    store.set("ready/%d" % group.rank, "1")
    dist.init_process_group(group.backend, store=store, rank=group.rank,
                            world_size=group.world, timeout=rank_io.timedelta(group))


def describe(group, rank, child, written):
    """A sentence for a child that ended badly, or None while it runs or after it succeeded
    (the same sentence every time: the child's error file is read once). The srun step of a
    multi-node run is the child listed with its first rank and the run's directory."""
    code = child.poll()
    if code is None or code == 0:
        return None
    return _described(group, rank, child, code, written)[0]


def _described(group, rank, child, code, written):
    """(sentence, secondary) for a child that ended badly, read once: secondary when all it
    says is that a peer went away (another rank's failure is the cause)."""
    with group.lock:
        if rank not in group.messages:
            if child is group.srun:
                group.messages[rank] = launch_nodes.step_sentence(group, child, code, written)
            else:
                group.messages[rank] = _sentence(group, rank, child, code, written)
        return group.messages[rank]


def _sentence(group, rank, child, code, path):
    who = "rank %d of %d (pid %d)" % (rank, group.world, child.pid)
    data = rank_io.read_error(path)
    if data:
        return ("%s failed: %s%s" % (who, data["message"], RANK_TRACEBACK),
                rank_io.is_secondary(data))
    if code == -signal.SIGKILL:
        return "%s was killed (SIGKILL; out of memory, or stopped by hand)" % who, False
    return "%s ended: %s" % (who, protocol.describe_exit(code)), False


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
    """The sentences of the children that ended badly, causes first (a rank that only saw a
    peer go away comes after the one that went)."""
    out = []
    for rank, child, written in group.children:
        code = child.poll()
        if code is not None and code != 0:
            out.append(_described(group, rank, child, code, written))
    return [text for text, _ in sorted(out, key=lambda f: f[1])]


def _causes(group):
    """Whether a child failed of its own accord (not only because a peer went away)."""
    return any(not _described(group, r, c, c.poll(), w)[1] for r, c, w in group.children
               if c.poll() not in (None, 0))


def _wait(group, seconds):
    """Wait up to ``seconds`` for every child to exit, or for one to fail; its failures."""
    deadline = time.monotonic() + seconds
    while True:
        failures = _failures(group)
        running = [c for _, c, _ in group.children if c.poll() is None]
        # a rank that only lost its peer: the one that failed may still be ending
        if (failures and (_causes(group) or not running)) or not running or \
                time.monotonic() > deadline:
            return failures, running
        time.sleep(0.1)


def _stop(group):
    step = group.srun
    if step is not None and step.poll() is None:  # srun passes TERM on to every node's ranks
        step.terminate()
        try:
            step.wait(timeout=STEP_STOP_S)
        except subprocess.TimeoutExpired:
            pass
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
                0 if cancelled else FAILED_RANK_WAIT_S if group.srun is None
                else FAILED_STEP_WAIT_S)
            failures, running = _wait(group, seconds)
            if exc is not None or failures:
                launch_nodes.dump_output(group)  # the other nodes' last words, on a failure
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
