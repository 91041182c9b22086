"""The server's own wheel, for agent machines: ``pip install "potato-annotation[train-text] @
<server_url>/agent/v1/<wheel>"`` installs exactly the Potato the server runs.

The package index's ``potato-annotation`` is an older release without ``potato training
agent``, so the documented install would give a training machine the wrong program. The wheel
is built once per version and source (the standard build backend, setuptools' ``build_meta``,
in a child process, from a copy of the checkout so the checkout gets no build files) and kept
under the project's output directory.
"""

import hashlib
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Optional

import potato
from potato.training.remote import proc

SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(potato.__file__)))
NAME = "potato_annotation-%s-py3-none-any.whl" % potato.__version__
URL_PATH = "/agent/v1/" + NAME
PROJECT_FILES = ("pyproject.toml", "setup.cfg", "README.md")
_lock = threading.Lock()
_failures = {}  # folder -> (when, why) of the last failed build
RETRY_AFTER_FAILURE_S = 60
DIGEST_EVERY_S = 10.0  # the source is hashed at most this often (~12 ms: not per request)
_digests = {}  # SOURCE_ROOT -> (when, digest): the last hash of that source
_digest_lock = threading.Lock()


class WheelError(Exception):
    """The wheel cannot be built here; ``str(e)`` says why and what to do instead."""


def install_line(server_url: str) -> str:
    return 'pip install "potato-annotation[train-text] @ %s%s"' % (server_url.rstrip("/"),
                                                                   URL_PATH)


def checkout_hint(for_admin: bool = True) -> str:
    """How to install without the server's wheel. Paths of the server only for its admin (the
    wheel route is public)."""
    where = (" (this server's is %s)" % SOURCE_ROOT) if for_admin and is_checkout() else ""
    return ("Install Potato %s from a checkout of that version instead: copy the checkout%s to "
            "the training machine and run pip install '<that folder>[train-text]' there."
            % (potato.__version__, where))


def is_checkout() -> bool:
    return os.path.isfile(os.path.join(SOURCE_ROOT, "pyproject.toml"))


def _source_digest() -> str:
    h = hashlib.sha256(potato.__version__.encode())
    for name in PROJECT_FILES:
        path = os.path.join(SOURCE_ROOT, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    for root, dirs, files in os.walk(os.path.join(SOURCE_ROOT, "potato")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                h.update(os.path.relpath(path, SOURCE_ROOT).encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


def _current_digest() -> str:
    """The source's digest, hashed again at most every DIGEST_EVERY_S; while one thread
    hashes, the others take the last digest rather than wait."""
    last = _digests.get(SOURCE_ROOT)
    if last is not None and time.monotonic() - last[0] < DIGEST_EVERY_S:
        return last[1]
    hashing = _digest_lock.acquire(blocking=False)
    if not hashing and last is not None:
        return last[1]
    try:
        digest = _source_digest()
        _digests[SOURCE_ROOT] = (time.monotonic(), digest)
        return digest
    finally:
        if hashing:
            _digest_lock.release()


def wheel_path(output_dir: str, timeout: float = 300, wait: bool = True) -> str:
    """The wheel's path, building it when this version and source has none yet. A wheel
    already built is found without any lock; with ``wait`` False (the public route), a build
    under way elsewhere is a WheelError at once rather than a wait.

    Raises WheelError when this install is not a checkout or setuptools is missing."""
    if not is_checkout():
        raise WheelError("This server runs an installed Potato, not a checkout, so it has no "
                         "source to build its wheel from.")
    folder = os.path.join(output_dir, "training", "wheel")
    path = os.path.join(folder, NAME)
    stamp = path + ".source"
    failed = _failures.get(folder)
    if failed and time.monotonic() - failed[0] < RETRY_AFTER_FAILURE_S:
        raise WheelError(failed[1])  # a public route must not rebuild on every request
    if os.path.isfile(path) and _read(stamp) == _current_digest():
        return path
    if not _lock.acquire(blocking=wait):
        raise WheelError("The server is building its wheel right now; try again in a minute.")
    try:
        failed = _failures.get(folder)
        if failed and time.monotonic() - failed[0] < RETRY_AFTER_FAILURE_S:
            raise WheelError(failed[1])
        digest = _current_digest()
        if os.path.isfile(path) and _read(stamp) == digest:
            return path
        os.makedirs(folder, mode=0o700, exist_ok=True)
        try:
            _build(folder, timeout)
        except WheelError as e:
            _failures[folder] = (time.monotonic(), str(e))
            raise
        if not os.path.isfile(path):
            raise WheelError("The build made no %s." % NAME)
        with open(stamp, "w") as f:
            f.write(digest)
        return path
    finally:
        _lock.release()


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


BUILD_PY = ("import sys, setuptools.build_meta as b; "
            "print(b.build_wheel(sys.argv[1]))")


def _build(folder: str, timeout: float) -> None:
    work = tempfile.mkdtemp(prefix="potato-wheel-")
    try:
        for name in PROJECT_FILES:
            if os.path.isfile(os.path.join(SOURCE_ROOT, name)):
                shutil.copy(os.path.join(SOURCE_ROOT, name), work)
        shutil.copytree(os.path.join(SOURCE_ROOT, "potato"), os.path.join(work, "potato"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        out = os.path.join(work, "dist")
        os.makedirs(out)
        r = proc.run([sys.executable, "-c", BUILD_PY, out], cwd=work, timeout=timeout)
        if r.timed_out:
            raise WheelError("Building the wheel took more than %d s." % timeout)
        if r.returncode != 0:
            missing = "No module named 'setuptools" in r.stderr
            raise WheelError(
                "The standard build backend (setuptools) is not installed for this server's "
                "Python, so it cannot build its wheel (pip install setuptools adds it)."
                if missing else "Building the wheel failed: %s." % r.stderr.strip()[-300:])
        built = os.path.join(out, r.stdout.strip().splitlines()[-1])
        fd, tmp = tempfile.mkstemp(prefix=".%s." % NAME, dir=folder)  # unique: builds may race
        os.close(fd)
        shutil.copy(built, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(folder, NAME))
    finally:
        shutil.rmtree(work, ignore_errors=True)
