"""``python -m potato.training.remote.rank``: one child rank of a data-parallel run, started by
the worker (trainers/launch.py), or on the other nodes of a multi-node SLURM job by the srun
step the worker starts (``--rank-offset``: its rank is that plus SLURM_PROCID), never by hand
(standard library at import time).

It reads the worker's spec and bundle into the worker's own Context, marked with its rank
(``ctx.dist``), and runs the same trainer, whose ``parallel.join`` makes it that rank of the
group. Its stdout goes to the worker's stderr, so nothing it prints can pass for an event
(its emitter writes nowhere); a failure is one sentence in ``--error-file``, which rank 0
reports. It watches its parent as the worker does, and exits at once when the worker is gone.
"""

import argparse
import json
import os
import platform
import signal
import sys
import threading
import traceback

from potato.training.remote import media, protocol
from potato.training.remote import trainers
from potato.training.remote.bundle import read
from potato.training.remote.paths import write_atomic
from potato.training.remote.trainers.rank_io import ERROR_MARK
from potato.training.remote.worker import Cancelled, Context, RunFailure, watch_parent

PARENT_POLL_S = 0.5


class _Null:
    def write(self, text):
        return len(text)

    def flush(self):
        pass


def run_rank(args):
    """Train one child rank; its exit code. Failures are written to ``args.error_file``."""
    if args.parent:
        # A child rank dies with the worker: it cannot be left training on, unseen. (Ranks an
        # srun step started on other nodes end with the step, which SLURM ends.)
        watch_parent(lambda: os._exit(protocol.EXIT_CANCELLED), threading.Event(),
                     parent=args.parent, interval=PARENT_POLL_S, name="rank-parent-watch")
    emitter = protocol.Emitter(_Null())
    try:
        if not os.path.exists(args.spec):
            return _fail(args, "node %s does not see the run's directory %s: remote_dir must "
                               "be on storage that every compute node shares" % (
                                   platform.node(), os.path.dirname(args.spec)),
                         with_traceback=False)
        with open(args.spec, encoding="utf-8") as f:
            spec = json.load(f)
        ctx = Context(spec, os.path.dirname(os.path.abspath(args.spec)), emitter)
        ctx.dist = {"rank": args.rank, "world": args.world, "backend": args.backend,
                    "store": args.store, "parent": args.parent,
                    "per_node": getattr(args, "per_node", None) or args.world,
                    "local_rank": getattr(args, "local_rank", args.rank)}

        def on_term(signum, frame):
            ctx.cancelled = True

        signal.signal(signal.SIGTERM, on_term)
        ctx.bundle = read(ctx.bundle_dir)
        info = trainers.get(spec["trainer"])
        if info.media:  # the items the worker kept, with what it fetched
            media.fetch_urls(ctx.bundle.items, os.path.join(os.path.dirname(os.path.abspath(
                args.spec)), media.URL_DIR), fetch=media.fetched_only)
            ctx.bundle.items = media.left_out(ctx.bundle.items)[0]
        trainer_cls = trainers.load(info)
        trainer_cls(ctx).train()
        return protocol.EXIT_OK
    except Cancelled:
        return protocol.EXIT_CANCELLED
    except RunFailure as e:  # a check of this rank's own (its sentence says all)
        return _fail(args, str(e)[:400], with_traceback=False)
    except Exception as e:  # the rank's choke point: rank 0 reports the message
        traceback.print_exc()
        first = str(e).splitlines()[0][:300] if str(e) else ""
        message = "%s: %s" % (type(e).__name__, first) if first else type(e).__name__
        return _fail(args, message)


def _fail(args, message, with_traceback=True):
    """Write a rank's failure where rank 0 reads it: the error file, and a marked line on
    stderr (which srun relays to rank 0's node when the error file cannot be written)."""
    said = json.dumps({"message": message, "host": platform.node(), "rank": args.rank,
                       "traceback": with_traceback})
    sys.stderr.write("%s%s\n" % (ERROR_MARK, said))
    sys.stderr.flush()
    try:
        write_atomic(args.error_file, said)
    except OSError:
        pass
    return protocol.EXIT_OTHER


def _place(args, environ=None):
    """Fill in the rank of a rank an srun step started (``--rank-offset`` plus SLURM_PROCID),
    its local rank, and its error file; the variables torch.distributed code reads."""
    env = os.environ if environ is None else environ
    if args.rank is None:
        args.rank = args.rank_offset + int(env.get("SLURM_PROCID", "0"))
        args.local_rank = int(env.get("SLURM_LOCALID", "0"))
    else:
        args.local_rank = args.rank % (args.per_node or args.world)
    args.per_node = args.per_node or args.world
    args.error_file = args.error_file.replace("{rank}", str(args.rank))
    env.update(RANK=str(args.rank), LOCAL_RANK=str(args.local_rank),
               WORLD_SIZE=str(args.world))
    return args


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m potato.training.remote.rank",
                                description="One child rank of a data-parallel run (started "
                                            "by the worker, not by hand).")
    for name in ("--world", "--parent"):
        p.add_argument(name, type=int, required=True)
    place = p.add_mutually_exclusive_group(required=True)
    place.add_argument("--rank", type=int)
    place.add_argument("--rank-offset", type=int, help="started by srun: the rank is this "
                                                       "plus SLURM_PROCID")
    p.add_argument("--per-node", type=int, default=0)
    for name in ("--spec", "--backend", "--store", "--error-file"):
        p.add_argument(name, required=True)
    proc_exit = run_rank(_place(p.parse_args(argv)))
    sys.stdout.flush()
    return proc_exit


if __name__ == "__main__":
    sys.exit(main())
