"""What travels to GPU hosts, SLURM login nodes and agent machines: standard library only,
Python 3.8, importing nothing of Potato outside this package (docs/layout.md; checked by
tests/test_layout.py). The server imports from here too; nothing here imports the server."""
