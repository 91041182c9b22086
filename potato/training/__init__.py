"""Backend-neutral training engine, and the code that runs on remote hosts.

Modules that travel to remote hosts (agent, worker, events, bundle reading, trainers' registry,
GPU and SLURM helpers) import only the standard library of Python 3.8 at module level.
"""
