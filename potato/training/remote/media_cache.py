"""A host's media cache: content-addressed, shared, bounded (standard library, Python 3.8).

Layout of ``remote_dir/media/`` (``<workdir>/media/`` for an agent machine)::

    <sha[:2]>/<sha>      a media file, named by the sha256 of its bytes (0600, folders 0700)
    .pins/<job>          the hashes a running run needs, one "sha size" a line
    <sha[:2]>/.<sha>...  a file on its way in (verified, then renamed into place)
    .incoming/           an agent's downloads cut short, resumed from there

Every run of every project on the host shares it. A file is touched (its mtime) each time a
run needs it; when the cache is over its limit the least recently used files go first, never
a file listed in a fresh pin. A run's agent keeps its pin fresh while it runs and removes it
at the end; a pin not touched for PIN_STALE_S (its agent was killed) no longer counts.

The file is self-contained (no other Potato import), so the ssh backend can run it on a host
with ``python -c <this file> need|receive DIR PIN LIMIT_MB`` (see ``main``).
"""

import hashlib
import io
import json
import os
import re
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HASH_RE = re.compile(r"[0-9a-f]{64}")
PIN_RE = re.compile(r"[A-Za-z0-9_.-]{1,120}")
PIN_STALE_S = 900  # a pin its agent has not touched for this long no longer holds files
INCOMING_STALE_S = 3600
MARK = "POTATO-MEDIA "
BLOCK = 1 << 20
WRITERS = 4  # threads that write small arriving files
SMALL_FILE = 4 << 20  # larger files are written as they are read
WRITE_AHEAD = 64 << 20  # bytes read from the stream but not yet written, at most


class CacheError(Exception):
    """A cache operation that cannot be done; the message says why."""


def valid_hash(value):
    return isinstance(value, str) and HASH_RE.fullmatch(value) is not None


def valid_pin(value):
    return isinstance(value, str) and PIN_RE.fullmatch(value) is not None and \
        value not in (".", "..")


def file_path(cache, sha):
    """Where the file with this sha256 lives in ``cache`` (the hash is checked first)."""
    if not valid_hash(sha):
        raise CacheError("%r is not a sha256 in hex" % (sha[:80] if isinstance(sha, str) else sha,))
    return os.path.join(cache, sha[:2], sha)


def _private_dir(path):
    os.makedirs(path, mode=0o700, exist_ok=True)
    try:
        os.chmod(path, 0o700)
    except OSError:
        pass


def have(cache, sha, size):
    """Whether the cache holds this file (by size: the hash was verified on arrival)."""
    try:
        return os.path.getsize(file_path(cache, sha)) == size
    except OSError:
        return False


def touch(cache, sha):
    try:
        os.utime(file_path(cache, sha))
    except OSError:
        pass


def pin(cache, name, wanted):
    """Write the pin ``name``: the (sha, size) pairs its run needs."""
    if not valid_pin(name):
        raise CacheError("%r is not a pin name" % (name[:80],))
    d = os.path.join(cache, ".pins")
    _private_dir(cache)
    _private_dir(d)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    with os.fdopen(fd, "w") as f:
        f.write("".join("%s %d\n" % (sha, size) for sha, size in wanted))
    os.replace(tmp, os.path.join(d, name))


def pin_path(cache, name):
    if not valid_pin(name):
        raise CacheError("%r is not a pin name" % (name[:80],))
    return os.path.join(cache, ".pins", name)


def read_pin(cache, name):
    """{sha: size} of the pin ``name`` ({} when there is none)."""
    out = {}
    try:
        with open(pin_path(cache, name)) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and valid_hash(parts[0]) and parts[1].isdigit():
                    out[parts[0]] = int(parts[1])
    except OSError:
        pass
    return out


def unpin(cache, name):
    try:
        os.unlink(pin_path(cache, name))
    except (OSError, CacheError):
        pass


def pinned(cache, now=None):
    """Every hash a fresh pin holds; stale pins are removed on the way."""
    now = time.time() if now is None else now
    out = set()
    d = os.path.join(cache, ".pins")
    for name in (os.listdir(d) if os.path.isdir(d) else ()):
        path = os.path.join(d, name)
        try:
            if now - os.stat(path).st_mtime > PIN_STALE_S:
                os.unlink(path)
                continue
        except OSError:
            continue
        out.update(read_pin(cache, name) if valid_pin(name) else ())
    return out


def need(cache, name, wanted):
    """Pin ``wanted`` ((sha, size) pairs) for run ``name``, touch what is here; the pairs the
    cache lacks."""
    pin(cache, name, wanted)
    missing = []
    for sha, size in wanted:
        if have(cache, sha, size):
            touch(cache, sha)
        else:
            missing.append((sha, size))
    return missing


def entries(cache):
    """(mtime, size, sha) of every file in the cache."""
    out = []
    for sub in (os.listdir(cache) if os.path.isdir(cache) else ()):
        folder = os.path.join(cache, sub)
        if len(sub) != 2 or not os.path.isdir(folder):
            continue
        for sha in os.listdir(folder):
            if sha.startswith("."):  # a file on its way in (see store)
                _drop_if_stale(os.path.join(folder, sha))
            elif valid_hash(sha) and sha[:2] == sub:
                try:
                    st = os.stat(os.path.join(folder, sha))
                except OSError:
                    continue
                out.append((st.st_mtime, st.st_size, sha))
    return out


def _drop_if_stale(path):
    try:
        if time.time() - os.stat(path).st_mtime > INCOMING_STALE_S:
            os.unlink(path)
    except OSError:
        pass


def evict(cache, limit_bytes, now=None):
    """Remove least recently used files until the cache holds at most ``limit_bytes``, never
    one a fresh pin holds; returns (files removed, bytes removed, bytes still held)."""
    now = time.time() if now is None else now
    incoming = os.path.join(cache, ".incoming")
    for name in (os.listdir(incoming) if os.path.isdir(incoming) else ()):
        _drop_if_stale(os.path.join(incoming, name))
    files = sorted(entries(cache))
    total = sum(size for _, size, _ in files)
    if total <= limit_bytes:
        return 0, 0, total
    keep = pinned(cache, now)
    removed = freed = 0
    for _, size, sha in files:
        if total <= limit_bytes:
            break
        if sha in keep:
            continue
        try:
            os.unlink(file_path(cache, sha))
        except OSError:
            continue
        removed += 1
        freed += size
        total -= size
    return removed, freed, total


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
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def receive(cache, name, stream, limit_bytes, writers=WRITERS):
    """Unpack a tar stream of media files (members named by their sha256, each in the pin
    ``name``) into the cache, verifying each; then evict to ``limit_bytes``. Small files are
    written by ``writers`` threads while the stream is read on (creating many small files is
    bound by the file system's latency, not by the bytes), at most WRITE_AHEAD bytes ahead."""
    wanted = read_pin(cache, name)
    done = {"received": 0, "bytes": 0}
    bad = []
    pending = []

    def settle(future, size):
        try:
            future.result()
            done["received"] += 1
            done["bytes"] += size
        except CacheError as e:
            bad.append(str(e))

    with ThreadPoolExecutor(max_workers=writers) as pool, \
            tarfile.open(fileobj=stream, mode="r|", bufsize=64 << 10) as tar:
        for m in tar:
            if not (m.isfile() and m.name in wanted and m.size == wanted[m.name]):
                bad.append("%s (not a file this run needs)" % ascii(m.name[:80]))
                continue
            f = tar.extractfile(m)
            if m.size > SMALL_FILE:
                future = pool.submit(store, cache, m.name, m.size, f.read)
                settle(future, m.size)  # read from the stream: done before the next member
                continue
            data = f.read(m.size)
            pending.append((pool.submit(store, cache, m.name, m.size, io.BytesIO(data).read),
                            m.size))
            while sum(size for _, size in pending) > WRITE_AHEAD or len(pending) > 256:
                settle(*pending.pop(0))
        for future, size in pending:
            settle(future, size)
    removed, freed, held = evict(cache, limit_bytes)
    return {"received": done["received"], "bytes": done["bytes"], "bad": bad[:20],
            "bad_count": len(bad), "evicted": removed, "evicted_bytes": freed,
            "held_bytes": held}


def main(argv):
    """``need|receive DIR PIN LIMIT_MB`` on a host: ``need`` reads [[sha, size], ...] (JSON)
    on stdin and prints the missing pairs; ``receive`` reads a tar stream."""
    os.umask(0o077)
    if len(argv) != 4 or argv[0] not in ("need", "receive"):
        sys.exit("usage: need|receive DIR PIN LIMIT_MB")
    command, remote_dir, name, limit = argv
    cache = os.path.join(os.path.expanduser(remote_dir), "media")
    try:
        _private_dir(cache)
        if command == "need":
            wanted = json.loads(sys.stdin.read())
            if not isinstance(wanted, list) or not all(
                    isinstance(w, list) and len(w) == 2 and valid_hash(w[0])
                    and isinstance(w[1], int) and w[1] >= 0 for w in wanted):
                sys.exit("the list of media files is not [[sha256, size], ...]")
            out = {"missing": need(cache, name, [tuple(w) for w in wanted])}
        else:
            out = receive(cache, name, sys.stdin.buffer, float(limit) * (1 << 20))
    except (CacheError, OSError, tarfile.TarError, ValueError) as e:
        sys.exit("media cache %s: %s" % (cache, e))
    print(MARK + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
