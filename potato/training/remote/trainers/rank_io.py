"""What rank 0 and the other ranks of a data-parallel run exchange, besides the process group:
a rank's command line and how a failed rank tells rank 0 why (its error file in the run's
directory, and a marked line on its stderr for when that file cannot be written). Standard
library; launch.py, launch_nodes.py and rank.py share it."""

import datetime
import json
import os
import re

CODE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))
RANK_TRACEBACK = "; its traceback is in the run's stderr"
# What a rank says when another rank went away (its failure is a consequence, not the cause)
PEER_GONE = re.compile(r"Connection (reset|closed) by peer|Broken pipe|pair\.cc|"
                       r"NCCL communicator was aborted|ProcessGroupNCCL.*(aborted|watchdog)",
                       re.IGNORECASE)
ERROR_MARK = "POTATO-RANK-ERROR "  # a rank's failure on stderr (its error file may be unwritable)


def rank_argv(python, spec_path, rank, world, backend, store_path, parent, error_file,
              per_node=None):
    """The command line of child rank ``rank`` (pure); ``per_node``: the ranks on each node of
    a multi-node run."""
    argv = [python, "-m", "potato.training.remote.rank", "--spec", spec_path,
            "--rank", str(rank), "--world", str(world), "--backend", backend, "--store",
            store_path, "--parent", str(parent), "--error-file", error_file]
    return argv + (["--per-node", str(per_node)] if per_node else [])


def error_file(base, rank):
    """Where rank ``rank`` writes why it failed (in the run's directory)."""
    return os.path.join(base, "rank%d.error.json" % rank)


def timedelta(group):
    """The collective timeout of ``group`` (POTATO_DDP_TIMEOUT_S), as torch takes it."""
    return datetime.timedelta(seconds=group.timeout)


def read_error(path):
    """What a failed rank wrote to ``path`` ({"message", ...}; the file is removed), or None."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        os.remove(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("message") else None


def is_secondary(data):
    """Whether a failed rank's report (``read_error``'s dict) only says that a peer went away."""
    return bool(PEER_GONE.search(str(data.get("message") or "")))
