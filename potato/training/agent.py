"""``python -m potato.training.agent``: the command the ssh and slurm backends start on a host.

An entry point only (shipped with ``potato.training.remote``); the agent itself is
``potato.training.remote.run``.
"""

import sys

from potato.training.remote.run import main

if __name__ == "__main__":
    sys.exit(main())
