"""A host's media cache: content-addressed, shared, bounded (standard library, Python 3.8).

Layout of ``remote_dir/media/`` (``<workdir>/media/`` for an agent machine)::

    <sha[:2]>/<sha>      a media file, named by the sha256 of its bytes (0600, folders 0700)
    .pins/<job>          the hashes a running run needs, one "sha size" a line
    <sha[:2]>/.<sha>...  a file on its way in (verified, then renamed into place)
    .incoming/           an agent's large downloads on their way in (a partial file each)
    .lock                need() holds it shared, evict() alone (flock)

Every run of every project on the host shares it. A file is touched (its mtime) each time a
run needs it; when the cache is over its limit the least recently used files go first, never
a file listed in a fresh pin. A run's agent keeps its pin fresh while it runs and removes it
at the end; a pin not touched for PIN_STALE_S (its agent was killed) no longer counts.

The file and remote/media_tar.py (the tar reader) are self-contained (no other Potato import),
so the ssh backend can run both on a host with ``python -c <media_tar.py + this file>
need|receive|sync DIR PIN LIMIT_MB`` (see ``main`` and backends/media_push.py).
"""

import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HASH_RE = re.compile(r"[0-9a-f]{64}")
PIN_RE = re.compile(r"[A-Za-z0-9_.-]{1,120}")
PIN_STALE_S = 900  # a pin its agent has not touched for this long no longer holds files
PIN_TOUCH_S = 60  # a stream being received keeps its pin fresh this often
INCOMING_STALE_S = 3600
MARK = "POTATO-MEDIA "
BLOCK = 1 << 20
WRITERS = 4  # threads that write small arriving files
SMALL_FILE = 4 << 20  # larger files are written as they are read
WRITE_AHEAD = 64 << 20  # bytes read from the stream but not yet written, at most


if "tar_header" not in globals():  # run as ``python -c`` (media_push), media_tar.py is above
    from potato.training.remote.media_tar import (  # noqa: F401 (CacheError: this module's too)
        TAR_BLOCK, TAR_END, CacheError, _padding, _skip, tar_header)


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


@contextlib.contextmanager
def _locked(cache, exclusive):
    """The cache's ``.lock`` held (flock): shared by need(), alone by evict(), so a file a run
    was just told is there is never removed from an older listing. Where the file system has
    no locks, nothing is held (as before)."""
    try:
        import fcntl
        fd = os.open(os.path.join(cache, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except (ImportError, OSError):
        fd = None
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            except OSError:
                pass
        yield
    finally:
        if fd is not None:
            os.close(fd)


def need(cache, name, wanted):
    """Pin ``wanted`` ((sha, size) pairs) for run ``name``, touch what is here; the pairs the
    cache lacks."""
    _private_dir(cache)
    missing = []
    with _locked(cache, exclusive=False):
        pin(cache, name, wanted)
        for sha, size in wanted:
            if have(cache, sha, size):
                touch(cache, sha)
            else:
                missing.append((sha, size))
    return missing


def keep_pin(cache, name, wanted):
    """Touch the pin ``name`` (written again from ``wanted``, {sha: size}, if it went)."""
    try:
        os.utime(pin_path(cache, name))
    except OSError:
        pin(cache, name, sorted(wanted.items()))


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


def evict(cache, limit_bytes, now=None, keep=()):
    """Remove least recently used files until the cache holds at most ``limit_bytes``, never
    one a fresh pin holds nor one in ``keep``; returns (files removed, bytes removed, bytes
    still held). The cache's lock is held alone meanwhile (see ``_locked``)."""
    if not os.path.isdir(cache):
        return 0, 0, 0
    with _locked(cache, exclusive=True):
        return _evict(cache, limit_bytes, time.time() if now is None else now, set(keep))


def _evict(cache, limit_bytes, now, keep):
    incoming = os.path.join(cache, ".incoming")
    for name in (os.listdir(incoming) if os.path.isdir(incoming) else ()):
        _drop_if_stale(os.path.join(incoming, name))
    files = sorted(entries(cache))
    total = sum(size for _, size, _ in files)
    if total <= limit_bytes:
        return 0, 0, total
    keep |= pinned(cache, now)
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


def put(cache, sha, data):
    """Write ``data`` (bytes in memory) into the cache as ``sha`` once its sha256 is checked:
    CacheError, and nothing written, when it does not match. As ``store``, through a hidden
    name beside its place."""
    if hashlib.sha256(data).hexdigest() != sha:
        raise CacheError("media file %s arrived with %d of %d bytes and another sha256"
                         % (sha[:12], len(data), len(data)))
    folder = os.path.dirname(file_path(cache, sha))
    if not os.path.isdir(folder):
        _private_dir(cache)
        _private_dir(folder)
    # a name of its own (hosts on one network file system may share a pid): cheaper than mkstemp
    tmp = os.path.join(folder, ".%s.%d.%s" % (sha, os.getpid(), os.urandom(6).hex()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0),
                 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(folder, sha))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def receive(cache, name, stream, limit_bytes, writers=WRITERS):
    """Unpack a tar stream of media files (members named by their sha256, each in the pin
    ``name``) into the cache, verifying each; then evict to ``limit_bytes``. The stream is
    read by this code, not by tar: only a regular file named by a hash of the pin, of the
    pinned size and not seen before is kept (links, folders, devices, other names and sizes
    are skipped over and counted as bad); nothing is written under any name from the stream.
    Small files are hashed in memory and written by ``writers`` threads while the stream is
    read on (creating many small files is bound by the file system's latency, not by the
    bytes), at most WRITE_AHEAD bytes ahead; a large file is written as it is read. The pin
    is touched every PIN_TOUCH_S meanwhile (a stream may take longer than PIN_STALE_S)."""
    wanted = read_pin(cache, name)
    done = {"received": 0, "bytes": 0}
    bad, seen, pending = [], set(), []
    ahead = [0]

    def settle(future, size):
        ahead[0] -= size
        try:
            future.result()
            done["received"] += 1
            done["bytes"] += size
        except CacheError as e:
            bad.append(str(e))

    touched = [time.monotonic()]

    def read(n):  # the stream's bytes; a long stream keeps its pin fresh
        if time.monotonic() - touched[0] >= PIN_TOUCH_S:
            keep_pin(cache, name, wanted)
            touched[0] = time.monotonic()
        return stream.read(n)

    with ThreadPoolExecutor(max_workers=writers) as pool:
        while True:
            block = read(TAR_BLOCK)
            if len(block) < TAR_BLOCK or block == TAR_END:
                if block != TAR_END:
                    bad.append("the stream ended before its end (%d files kept)"
                               % (done["received"] + len(pending)))
                break
            sha, kind, size = tar_header(block)
            if kind not in (b"0", b"\0") or wanted.get(sha) != size or sha in seen:
                bad.append("%s (not a file this run needs)" % ascii(sha[:80]))
                if not _skip(stream, size + _padding(size)):
                    break
                continue
            seen.add(sha)
            if size > SMALL_FILE:
                try:
                    pool.submit(store, cache, sha, size, read).result()
                    done["received"] += 1
                    done["bytes"] += size
                except CacheError as e:
                    bad.append(str(e))
                    if "another sha256" not in str(e):
                        break  # the stream ended inside it
                _skip(stream, _padding(size))
                continue
            data = stream.read(size + _padding(size))[:size]
            if len(data) < size:
                bad.append("media file %s arrived with %d of %d bytes (the stream ended)"
                           % (sha[:12], len(data), size))
                break
            pending.append((pool.submit(put, cache, sha, data), size))
            ahead[0] += size
            while ahead[0] > WRITE_AHEAD or len(pending) > 256:
                settle(*pending.pop(0))
        for future, size in pending:
            settle(future, size)
    while stream.read(BLOCK):  # what follows the end (tar pads to a record): the sender
        pass  # writes it all before it reads the answer
    keep_pin(cache, name, wanted)
    removed, freed, held = evict(cache, limit_bytes, keep=wanted)
    return {"received": done["received"], "bytes": done["bytes"], "bad": bad[:20],
            "bad_count": len(bad), "evicted": removed, "evicted_bytes": freed,
            "held_bytes": held}


def _wanted(line):
    """[[sha, size], ...] (JSON) as (sha, size) pairs; CacheError when it is not that."""
    wanted = json.loads(line)
    if not isinstance(wanted, list) or not all(
            isinstance(w, list) and len(w) == 2 and valid_hash(w[0])
            and isinstance(w[1], int) and w[1] >= 0 for w in wanted):
        raise CacheError("the list of media files is not [[sha256, size], ...]")
    return [tuple(w) for w in wanted]


def main(argv):
    """``need|receive|sync DIR PIN LIMIT_MB`` on a host: ``need`` reads [[sha, size], ...]
    (JSON) on stdin and prints the missing pairs; ``receive`` reads a tar stream; ``sync``
    does both in one session: the list (one line), the missing pairs printed at once, then the
    stream of those (none when nothing is missing) and what arrived."""
    os.umask(0o077)
    if len(argv) != 4 or argv[0] not in ("need", "receive", "sync"):
        sys.exit("usage: need|receive|sync DIR PIN LIMIT_MB")
    command, remote_dir, name, limit = argv
    cache = os.path.join(os.path.expanduser(remote_dir), "media")
    stdin = open(sys.stdin.fileno(), "rb", buffering=BLOCK, closefd=False)
    try:
        _private_dir(cache)
        if command == "need":
            out = {"missing": need(cache, name, _wanted(stdin.read()))}
        elif command == "sync":
            missing = need(cache, name, _wanted(stdin.readline()))
            print(MARK + json.dumps({"missing": missing}), flush=True)
            out = receive(cache, name, stdin, float(limit) * (1 << 20)) if missing else {}
        else:
            out = receive(cache, name, stdin, float(limit) * (1 << 20))
    except (CacheError, OSError, ValueError) as e:
        sys.exit("media cache %s: %s" % (cache, e))
    print(MARK + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
