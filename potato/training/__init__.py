"""Training: the server side (queue, run states, the trust boundary, backends, pages, API) and,
in ``potato.training.remote``, the code that travels to where runs execute.

This file and the entry points ``agent.py`` and ``worker.py`` are shipped with ``remote/``:
they import only the standard library of Python 3.8 and ``potato.training.remote``.
"""
