"""``python -m potato.training.remote.rank``: one child rank of a data-parallel run, started by
the worker (trainers/launch.py), never by hand (standard library at import time).

It reads the worker's spec and bundle into the worker's own Context, marked with its rank
(``ctx.dist``), and runs the same trainer, whose ``parallel.join`` makes it that rank of the
group. Its stdout goes to the worker's stderr, so nothing it prints can pass for an event
(its emitter writes nowhere); a failure is one sentence in ``--error-file``, which rank 0
reports. It watches its parent as the worker does, and exits at once when the worker is gone.
"""

import argparse
import json
import os
import signal
import sys
import threading
import traceback

from potato.training.remote import media, protocol
from potato.training.remote import trainers
from potato.training.remote.bundle import read
from potato.training.remote.paths import write_atomic
from potato.training.remote.worker import Cancelled, Context, watch_parent

PARENT_POLL_S = 0.5


class _Null:
    def write(self, text):
        return len(text)

    def flush(self):
        pass


def run_rank(args):
    """Train one child rank; its exit code. Failures are written to ``args.error_file``."""
    # A child rank dies with the worker: it cannot be left training on, unseen.
    watch_parent(lambda: os._exit(protocol.EXIT_CANCELLED), threading.Event(),
                 parent=args.parent, interval=PARENT_POLL_S, name="rank-parent-watch")
    emitter = protocol.Emitter(_Null())
    try:
        with open(args.spec, encoding="utf-8") as f:
            spec = json.load(f)
        ctx = Context(spec, os.path.dirname(os.path.abspath(args.spec)), emitter)
        ctx.dist = {"rank": args.rank, "world": args.world, "backend": args.backend,
                    "store": args.store, "parent": args.parent}

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
    except Exception as e:  # the rank's choke point: rank 0 reports the message
        traceback.print_exc()
        first = str(e).splitlines()[0][:300] if str(e) else ""
        message = "%s: %s" % (type(e).__name__, first) if first else type(e).__name__
        write_atomic(args.error_file, json.dumps({"message": message}))
        return protocol.EXIT_OTHER


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m potato.training.remote.rank",
                                description="One child rank of a data-parallel run (started "
                                            "by the worker, not by hand).")
    for name in ("--rank", "--world", "--parent"):
        p.add_argument(name, type=int, required=True)
    for name in ("--spec", "--backend", "--store", "--error-file"):
        p.add_argument(name, required=True)
    proc_exit = run_rank(p.parse_args(argv))
    sys.stdout.flush()
    return proc_exit


if __name__ == "__main__":
    sys.exit(main())
