"""``python -m potato.training.worker --spec spec.json``: trains one run where it executes.

An entry point only (shipped with ``potato.training.remote``); the worker itself is
``potato.training.remote.worker``.
"""

import sys

from potato.training.remote.worker import main

if __name__ == "__main__":
    sys.exit(main())
