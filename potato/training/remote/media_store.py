"""How a file is written into a host's media cache (remote/media_cache.py; standard library,
Python 3.8, shipped): verified first, then in place whole. Part of the host's program, after
media_cache.py (see media_receive.py's ``main``).
"""

import hashlib
import os
import tempfile

if "have" not in globals():  # imported, not run as ``python -c`` (media_cache.py is above)
    from potato.training.remote.media_cache import (
        BLOCK, CacheError, _discard, _private_dir, _unique, file_path, have)

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def place(cache, sha, tmp):
    """Move a verified file into its place in the cache (its folder made 0700 if new)."""
    final = file_path(cache, sha)
    folder = os.path.dirname(final)
    if not os.path.isdir(folder):
        _private_dir(folder)
    os.replace(tmp, final)


def incoming_dir(cache):
    incoming = os.path.join(cache, ".incoming")
    if not os.path.isdir(incoming):
        _private_dir(cache)
        _private_dir(incoming)
    return incoming


def store(cache, sha, size, read):
    """Copy ``size`` bytes from ``read(n)`` into the cache as ``sha``, verifying size and hash
    before the file takes its place (0600); CacheError when they do not match. The bytes go
    to a hidden name beside their place first (one folder: the cheapest rename there is)."""
    final = file_path(cache, sha)  # a valid hash, before anything is written
    folder = os.path.dirname(final)
    if not os.path.isdir(folder):
        _private_dir(cache)
        _private_dir(folder)
    fd, tmp = tempfile.mkstemp(prefix="." + sha[:16], dir=folder)
    h = hashlib.sha256()
    got = 0
    try:
        with os.fdopen(fd, "wb") as f:
            while got < size:
                block = read(min(BLOCK, size - got))
                if not block:
                    break
                h.update(block)
                f.write(block)
                got += len(block)
        if got != size or h.hexdigest() != sha:
            raise CacheError("media file %s arrived with %d of %d bytes%s" % (
                sha[:12], got, size, "" if got != size else " and another sha256"))
        os.replace(tmp, final)
    except BaseException:
        _discard(tmp)
        raise


def put(cache, sha, data, whole_first=False):
    """Write ``data`` (bytes in memory) into the cache as ``sha`` once its sha256 is checked:
    CacheError, and nothing written, when it does not match. Verified before a byte is
    written, the file is created straight under its name (O_EXCL: never over another file)
    in one write, so a file whose size is the listed one is whole (``have``); one that is not
    (its writer was killed, or the disk filled) is replaced whole, through a hidden name,
    never removed first (a run may be reading it). ``whole_first`` (the slow path, likely a
    network file system, which may write a file's parts out of order: a host that crashed
    then could leave one of the right size with holes) writes under a hidden name first and
    links it into place."""
    if hashlib.sha256(data).hexdigest() != sha:
        raise CacheError("media file %s arrived with %d of %d bytes and another sha256"
                         % (sha[:12], len(data), len(data)))
    final = file_path(cache, sha)
    if whole_first:
        _replace(final, sha, data, over=False)
        return
    try:
        fd = _create(final)
    except FileExistsError:
        if not have(cache, sha, len(data)):
            _replace(final, sha, data)
        return
    try:
        _write(fd, data)  # (a write cut short leaves a short file: missing, replaced next time)
    finally:
        os.close(fd)


def _create(path):
    """A new file at ``path`` (0600), its folder made first if it is the first of it."""
    try:
        return os.open(path, _CREATE, 0o600)
    except FileNotFoundError:  # the first file of its folder (an existing one is not looked at)
        _private_dir(os.path.dirname(os.path.dirname(path)))
        _private_dir(os.path.dirname(path))
        return os.open(path, _CREATE, 0o600)


def _write(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _replace(final, sha, data, over=True):
    """Put ``data`` at ``final`` in one step: written under a hidden name of its own beside
    it, then renamed over a file of the wrong size there (``over``), or else linked into
    place unless a whole file is there already (renamed where links cannot be made)."""
    # a name of its own (hosts on one network file system may share a pid): cheaper than mkstemp
    tmp = os.path.join(os.path.dirname(final), ".%s.%s" % (sha, _unique()))
    fd = _create(tmp)
    try:
        try:
            _write(fd, data)
        finally:
            os.close(fd)
        if not over:
            try:
                os.link(tmp, final)
                return
            except FileExistsError:
                if have(os.path.dirname(os.path.dirname(final)), sha, len(data)):
                    return
            except OSError:  # no hard links on this file system
                pass
        os.replace(tmp, final)
    finally:
        _discard(tmp)
