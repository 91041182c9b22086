"""Data-parallel training for the torch trainers: one process per GPU (or ``processes`` on the
CPU), launched by the worker itself, not torchrun (standard library at import time; torch is
imported when a group opens).

Rank 0 is the worker process: it alone reports events, saves, and predicts once training is
over. Ranks 1..N-1 are children (``python -m potato.training.remote.rank``, rank.py) that
run the same trainer on their shard of each batch; their stdout goes to the worker's stderr, so
nothing they print can pass for an event. They stay in the worker's process group (a cancel or
a SIGKILL from the supervisor reaches them all), and each watches its parent: a worker killed on
its own takes its ranks with it within a second.

A trainer uses it as::

    world, backend = parallel.choose_world(ctx, p["processes"])
    with parallel.join(ctx, world, backend) as group:   # rank 0 starts the others here
        device = group.device(lambda: <the device for one process>)
        ddp = group.wrap(model, device)                 # DistributedDataParallel when N > 1
        for batch in group.batches(lengths, batch_size, seed, epoch):   # this rank's share
            ctx.check_cancelled(); group.step(step)     # group.step: the tests' fault hook
            ...
        loss, n = group.all_sum([loss_sum, seen], device)   # one sync, every rank
    if group.is_main: <save>

Whatever ends the group on rank 0 (success, an error, cancellation) stops every child; a child
that failed turns into that rank's error message, one that stopped answering into a timeout
message, so a rank that crashed, hung or was killed never hangs the run.
"""

import os
import random
import signal
import threading
import time

from potato.training.remote import nodes
from potato.training.remote.trainers import launch

TIMEOUT_ENV = "POTATO_DDP_TIMEOUT_S"  # how long a rank waits for the others (default 600 s)
FAULT_ENV = "POTATO_TEST_RANK_FAULT"  # tests only: "RANK:STEP:raise|kill|hang[,...]"
DEFAULT_TIMEOUT_S = 600.0
MEGA_BATCH = 50  # batches sorted by length together (as transformers' group_by_length)


class ParallelError(Exception):
    pass


def plan(processes, device_request, cuda_count):
    """(ranks, backend) for a ``processes`` param (0: one per visible GPU) -- pure.

    Raises ParallelError with what to change when the request cannot be met."""
    on_cuda = device_request in ("auto", "cuda") and cuda_count > 0
    if processes == 0:
        return (cuda_count, "nccl") if on_cuda and cuda_count > 1 else (1, None)
    if processes == 1:
        return 1, None
    if device_request.startswith("cuda:"):
        raise ParallelError("processes is %d but device %s pins one GPU: set device to auto (or "
                            "processes to 1)" % (processes, device_request))
    if on_cuda:
        if processes > cuda_count:
            raise ParallelError(
                "processes is %d but only %d GPU(s) are visible here (CUDA_VISIBLE_DEVICES=%s): "
                "pin more GPUs in the backend's gpus, or lower processes"
                % (processes, cuda_count, os.environ.get("CUDA_VISIBLE_DEVICES", "unset")))
        return processes, "nccl"
    if device_request == "mps":
        raise ParallelError("processes > 1 needs CUDA GPUs or the CPU, not Apple Metal (mps)")
    return processes, "gloo"


def choose_world(ctx, processes):
    """(ranks, backend) for this run: the child ranks are told theirs by the worker."""
    if getattr(ctx, "dist", None):
        return ctx.dist["world"], ctx.dist["backend"]
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    try:
        world, backend = plan(processes or 0, ctx.device_request, count)
    except ParallelError as e:
        raise ctx.RunFailure(str(e))
    if nodes.requested() == 1:
        return world, backend
    # A SLURM job over several nodes (job.sh says how many): this node's ranks on each node.
    try:
        ctx.layout = nodes.layout(world)
    except nodes.NodesError as e:
        raise ctx.RunFailure(str(e))
    on_cuda = ctx.device_request in ("auto", "cuda") and count > 0
    return ctx.layout.world, backend or ("nccl" if on_cuda else "gloo")


def length_grouped_batches(lengths, batch_size, seed, epoch, mega=MEGA_BATCH):
    """Global batches (lists of indices) for one epoch, the same on every rank: a shuffle by
    (seed, epoch), items sorted by length within mega-batches of ``mega`` batches (little
    padding), then the batches shuffled."""
    rng = random.Random("%s/%s" % (seed, epoch))
    order = list(range(len(lengths)))
    rng.shuffle(order)
    span = batch_size * mega
    batches = []
    for start in range(0, len(order), span):
        chunk = sorted(order[start:start + span], key=lambda i: -lengths[i])
        batches.extend(chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def shard(batch, rank, world):
    """This rank's part of a global batch: every ``world``-th item (the batch is sorted by
    length, so the parts pad alike). A batch with fewer items than ranks repeats items, as
    DistributedSampler does, so that no rank is left without one."""
    if world == 1:
        return batch
    if len(batch) < world:
        batch = (batch * world)[:world]
    return batch[rank::world]


def accuracy(predict, pairs, group=None, device=None):
    """The share of (text, gold) ``pairs`` whose predicted label (``predict(texts)`` gives
    (label, confidence) per text) is the gold one. With a group, each rank predicts its share
    and the counts are summed over the ranks."""
    mine = pairs if group is None else pairs[group.rank::group.world]
    predicted = predict([t for t, _ in mine]) if mine else []
    hits = sum(1 for (label, _), (_, gold) in zip(predicted, mine) if label == gold)
    n = len(mine)
    if group is not None:
        hits, n = group.all_sum([hits, n], device)
    return hits / max(n, 1)


def _timeout_s():
    """POTATO_DDP_TIMEOUT_S, within 1 s .. 1 day; anything else (not a number, inf, nan) is
    the default."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    if value != value or value in (float("inf"), float("-inf")):
        return DEFAULT_TIMEOUT_S
    return min(max(1.0, value), 86400.0)


def _faults():
    """{(rank, step): mode} from $POTATO_TEST_RANK_FAULT ("RANK:STEP:MODE", comma-separated):
    tests inject failures; anything else there is ignored."""
    out = {}
    for text in os.environ.get(FAULT_ENV, "").split(","):
        parts = text.strip().split(":")
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            out[int(parts[0]), int(parts[1])] = parts[2]
    return out


class Group:
    """One rank's view of the run: rank, world, device, and the few collectives trainers use.
    With one rank it is a plain object and torch.distributed is never touched."""

    def __init__(self, ctx, rank, world, backend):
        self.ctx = ctx
        self.rank = rank
        self.world = world
        self.backend = backend
        self.is_main = rank == 0
        dist = getattr(ctx, "dist", None) or {}
        # a multi-node run: rank 0's nodes.Layout; every rank knows the ranks per node
        self.layout = getattr(ctx, "layout", None) if self.is_main else None
        self.per_node = (self.layout.per_node if self.layout is not None
                         else dist.get("per_node") or world)
        self.local_rank = dist.get("local_rank", rank % self.per_node)
        self.srun = None  # rank 0 of a multi-node run: the srun step of the other nodes
        self.srun_base, self.srun_dumped = None, False  # its directory; its output shown
        self.chosen_ifname = []  # rank 0: the interface variables it set (launch_nodes.py)
        self.timeout = _timeout_s()
        self.children = []  # rank 0: [(rank, Popen, error file)]
        self.store = None  # rank 0: the FileStore of the rendezvous
        self.store_path = None
        self.messages = {}  # rank 0: {rank: the sentence for its failure}
        self.closed = threading.Event()  # rank 0: set when the group ends (stops the watch)
        self.lock = threading.Lock()  # rank 0: the watch and the main thread read failures
        self.watcher = None
        self.faults = _faults()
        self._threads = None

    # -- what trainers call -----------------------------------------------------------------
    def device(self, single):
        """The torch device of this rank; ``single()`` chooses it when there is one rank."""
        import torch

        if self.world == 1:
            return single()
        if self.backend == "nccl":
            torch.cuda.set_device(self.local_rank)
            return torch.device("cuda:%d" % self.local_rank)
        return torch.device("cpu")

    def wrap(self, model, device):
        if self.world == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index]
                                       if device.type == "cuda" else None)

    def batches(self, lengths, batch_size, seed, epoch):
        """This rank's part of each global batch of ``batch_size`` items (the optimizer step
        sees the same items however many ranks share it)."""
        return [shard(b, self.rank, self.world)
                for b in length_grouped_batches(lengths, batch_size, seed, epoch)]

    def all_sum(self, values, device):
        """``values`` (numbers or 0-d tensors) summed over the ranks, as floats (one sync)."""
        if self.world == 1:  # float() reads a tensor on any device (mps has no float64)
            return [float(v) for v in values]
        import torch
        import torch.distributed as dist

        t = torch.stack([torch.as_tensor(v, dtype=torch.float64, device=device)
                         for v in values])
        dist.all_reduce(t)
        return t.tolist()

    def step(self, step):
        """Called once per training step: the tests' fault injection (POTATO_TEST_RANK_FAULT)."""
        mode = self.faults.get((self.rank, step))
        if mode is None:
            return
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "hang":
            time.sleep(3600)
        raise RuntimeError("injected fault in rank %d at step %d (%s)" % (self.rank, step,
                                                                          FAULT_ENV))

    # -- the process group ------------------------------------------------------------------
    def open(self):
        if self.world == 1:
            return self
        import torch

        self._threads = torch.get_num_threads()
        if self.backend == "gloo":  # the CPU's cores are shared by the ranks
            torch.set_num_threads(max(1, self._threads // self.world))
        try:
            if self.is_main:
                launch.start_ranks(self)
            else:
                launch.join_ranks(self)
        except BaseException as e:  # __exit__ will not run: stop what started here
            replacement = self.close(e)
            if replacement is not None and replacement is not e:
                raise replacement from e
            raise
        return self

    def close(self, exc):
        """Stop what this group started; the exception that says how the run ended (None:
        keep the one raised, or none)."""
        if self.world == 1:
            return None
        import gc
        import traceback

        import torch

        if exc is not None and exc.__traceback__ is not None:
            # The failed frames hold the DDP model, which holds the process group and its
            # sockets: drop their locals so the group really closes (tracebacks keep lines).
            traceback.clear_frames(exc.__traceback__)
        try:
            return launch.finish(self, exc)
        finally:
            torch.set_num_threads(self._threads)
            gc.collect()

    def __enter__(self):
        return self.open()

    def __exit__(self, kind, exc, tb):
        replacement = self.close(exc)
        if replacement is not None and replacement is not exc:
            raise replacement from exc
        return False


def train(trainer):
    """An hf trainer's ``train()``: on one process, or data-parallel on several, with the
    trainer's ``_train(group)`` on every rank and ``_save()`` on rank 0 (the worker predicts
    after this returns, on rank 0 only). An empty train split fails before any rank starts."""
    ctx = trainer.ctx
    if not ctx.bundle.labelled("train", trainer.scheme):
        raise ctx.RunFailure("scheme %s has no labelled items in the train split"
                             % trainer.scheme)
    world, backend = choose_world(ctx, trainer.p.get("processes", 0))
    with join(ctx, world, backend) as group:
        metrics = trainer._train(group)
    if group.is_main:
        trainer._save()
    return metrics


def join(ctx, world, backend):
    """The group of this process: rank 0 in the worker, the rank it was started as in a child."""
    dist = getattr(ctx, "dist", None)
    if dist:
        return Group(ctx, dist["rank"], dist["world"], dist["backend"])
    return Group(ctx, 0, world, backend)
