"""What travels to GPU hosts and login nodes, and its hash.

Only the shipped files — the package ``__init__``s on the way, the two entry points and
``potato/training/remote/`` — are hashed and copied: an edit to the server (a page, a route, the
CSS) copies nothing. The copy lives on a host as ``remote_dir/code/<hash>/potato/...``.
"""

import hashlib
import io
import os
import tarfile
from typing import Iterator, Tuple

import potato

SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(potato.__file__)))
SHIPPED_FILES = ("potato/__init__.py", "potato/training/__init__.py",
                 "potato/training/agent.py", "potato/training/worker.py")
SHIPPED_TREE = "potato/training/remote"
_hashes = {}


def shipped_files(root: str = SOURCE_ROOT) -> Iterator[Tuple[str, str]]:
    """(path relative to ``root``, absolute path) of every shipped file, in a stable order."""
    for rel in SHIPPED_FILES:
        yield rel, os.path.join(root, rel)
    base = os.path.join(root, SHIPPED_TREE)
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(folder, name)
            yield os.path.relpath(path, root), path


def code_hash(root: str = SOURCE_ROOT) -> str:
    """A hash of the shipped files: the name of their copy on remote hosts."""
    if root not in _hashes:
        h = hashlib.sha256()
        for rel, path in shipped_files(root):
            h.update(rel.encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
        _hashes[root] = h.hexdigest()[:16]
    return _hashes[root]


def source_archive(root: str = SOURCE_ROOT) -> bytes:
    """A tar.gz of the shipped files, as the host's install script unpacks it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for rel, path in shipped_files(root):
            tar.add(path, arcname=rel)
    return buf.getvalue()
