"""``potato`` whose training queue takes long to finish a run, for tests that kill the server
while it ingests the predictions: ``SLOW_INGEST`` is ``before`` or ``after`` (the write-back),
where the queue writes ``SLOW_INGEST_MARKER`` and then waits a minute."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from potato.commands.cli import main  # noqa: E402
from potato.training.lifecycle import queue  # noqa: E402

WHEN = os.environ["SLOW_INGEST"]
MARKER = os.environ["SLOW_INGEST_MARKER"]
_ingest = queue.Manager._ingest


def _wait_here():
    with open(MARKER, "w") as f:
        f.write(WHEN)
    time.sleep(60)


def slow_ingest(self, run, paths):
    if WHEN == "before":
        _wait_here()
    out = _ingest(self, run, paths)
    if WHEN == "after":
        _wait_here()
    return out


queue.Manager._ingest = slow_ingest
sys.exit(main(sys.argv[1:]))
