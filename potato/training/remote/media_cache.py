"""A host's media cache: content-addressed, shared, bounded (standard library, Python 3.8).

Layout of ``remote_dir/media/`` (``<workdir>/media/`` for an agent machine)::

    <sha[:2]>/<sha>      a media file, named by the sha256 of its bytes (0600, folders 0700):
                         whole when its size is the listed one (see put)
    .pins/<job>          the hashes a running run needs, one "sha size" a line
    <sha[:2]>/.<sha>...  a file on its way in under a hidden name (a large one, or one written
                         on the slow path; verified, then put in place)
    .incoming/           an agent's large downloads on their way in (a partial file each)
    .lock                need() holds it shared, evict() alone (flock)
    .usage               bytes held at the last full count plus those reserved since, and when
                         it was counted (see evict)

Every run of every project on the host shares it. A file is touched (its mtime) each time a
run needs it; when the cache is over its limit the least recently used files go first, never
a file listed in a fresh pin. A run's agent keeps its pin fresh while it runs and removes it
at the end; a pin not touched for PIN_STALE_S (its agent was killed) no longer counts.

The file, remote/media_tar.py (the tar reader), remote/media_store.py (how a file is written
into the cache) and remote/media_receive.py (the stream's reader and the host's program) are
self-contained (no other Potato import), so the ssh backend runs the four on a host as one
``python -S -c`` program (see media_receive.py's ``main`` and backends/media_push.py).
"""

import contextlib
import itertools
import os
import re
import stat
import tempfile
import time

HASH_RE = re.compile(r"[0-9a-f]{64}")
PIN_RE = re.compile(r"[A-Za-z0-9_.-]{1,120}")
PIN_STALE_S = 900  # a pin its agent has not touched for this long no longer holds files
INCOMING_STALE_S = 3600
USAGE_STALE_S = 3600  # a trim trusts the cache's recorded size this long, then counts
MARK = "POTATO-MEDIA "
BLOCK = 1 << 20


if "tar_header" not in globals():  # run as ``python -c`` (media_push), media_tar.py is above
    from potato.training.remote.media_tar import CacheError  # noqa: F401 (this module's too)


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
    """Whether the cache holds this file: a regular file (not a link) of its size (the hash
    was verified before it was written)."""
    try:
        st = os.lstat(file_path(cache, sha))
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == size


def touch(cache, sha):
    try:
        os.utime(file_path(cache, sha))
    except OSError:
        pass


def _discard(path):
    """Remove a temporary file of a write that failed (it may already be gone)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def pin(cache, name, wanted):
    """Write the pin ``name``: the (sha, size) pairs its run needs."""
    if not valid_pin(name):
        raise CacheError("%r is not a pin name" % (name[:80],))
    d = os.path.join(cache, ".pins")
    _private_dir(cache)
    _private_dir(d)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)  # a hidden name: pinned() skips it
    try:
        with os.fdopen(fd, "w") as f:
            f.write("".join("%s %d\n" % (sha, size) for sha, size in wanted))
        os.replace(tmp, os.path.join(d, name))
    except BaseException:
        _discard(tmp)
        raise


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
        if valid_pin(name) and not name.startswith("."):  # not a pin being written (pin)
            out.update(read_pin(cache, name))
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


def open_cache(cache):
    """Make the cache's folder (0700) if there is none; a new one is recorded as holding
    nothing (``.usage``, see evict), so that its first trim need not list it."""
    if os.path.isdir(cache):
        return
    _private_dir(cache)
    try:
        fd = os.open(os.path.join(cache, ".usage"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return  # another process made it first, or no record: the first trim counts
    try:
        os.write(fd, b"0 %.6f\n" % time.time())
    finally:
        os.close(fd)


def need(cache, name, wanted):
    """Pin ``wanted`` ((sha, size) pairs) for run ``name``, touch what is here; the pairs the
    cache lacks."""
    open_cache(cache)
    missing, folders = [], {}
    with _locked(cache, exclusive=False):
        pin(cache, name, wanted)
        for sha, size in wanted:
            path = file_path(cache, sha)  # the hash checked
            if folders.get(sha[:2]) is None:  # a folder that is not there holds nothing
                folders[sha[:2]] = os.path.isdir(os.path.dirname(path))
            if folders[sha[:2]] and have(cache, sha, size):
                touch(cache, sha)
            else:
                missing.append((sha, size))
    return missing


def reserve(cache, missing):
    """Add to the cache's recorded size the bytes of ``missing`` ((sha, size) pairs: what a
    copy is about to bring), before any of them is written; the time of the reservation, for
    the copy's trim (see evict), or None when there was no record to add to (an older cache,
    or nothing missing). A copy that fails half-way has still counted its bytes; a full count
    after the reservation replaces the record (it may have missed bytes still on their way),
    which the copy's trim then sees by the count's later time."""
    nbytes = sum(size for _, size in missing)
    if not nbytes or _usage(cache, time.time())[0] is None:
        return None
    with _locked(cache, exclusive=True):
        at = time.time()
        held, counted = _usage(cache, at)
        if held is None:
            return None
        _record_usage(cache, held + nbytes, counted)
        return at


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
        if sub.startswith(".usage."):  # a record being written when its writer was killed
            _drop_if_stale(folder)
        if len(sub) != 2 or os.path.islink(folder) or not os.path.isdir(folder):
            continue  # (a linked folder is not the cache's: nothing in it is removed)
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


def evict(cache, limit_bytes, now=None, keep=(), recorded=None):
    """Remove least recently used files until the cache holds at most ``limit_bytes``, never
    one a fresh pin holds nor one in ``keep``; returns (files removed, bytes removed, bytes
    still held). The cache's lock is held alone meanwhile (see ``_locked``). Each full count
    is recorded (``.usage``, with the time it began), and reserve() adds to that record the
    bytes a copy is about to bring. ``recorded``, after a copy, is the time of its reservation:
    a record at most USAGE_STALE_S old, within the limit, and counted before that time (so it
    holds the copy's bytes) is trusted, and nothing is listed (a cache of many files is not
    listed after every run). Files put in by hand are seen at the next full count."""
    if not os.path.isdir(cache):
        return 0, 0, 0
    now = time.time() if now is None else now
    with _locked(cache, exclusive=True):
        counted_at = time.time()  # with the lock: no reservation comes between
        if recorded is not None:
            held, counted = _usage(cache, now)
            if held is not None and held <= limit_bytes and counted <= recorded:
                return 0, 0, held
        out = _evict(cache, limit_bytes, now, set(keep))
        _record_usage(cache, out[2], counted_at)
        return out


def _usage(cache, now):
    """(bytes, when counted) from ``.usage``; (None, None) when there is none, or it is not
    two numbers, or it was counted over USAGE_STALE_S ago (or over a second in the future: a
    clock set back)."""
    try:  # not a link, nor a FIFO that would hold the lock for good
        fd = os.open(os.path.join(cache, ".usage"),
                     os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None, None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, None
        held, counted = os.read(fd, 100).split()
        held, counted = int(held), float(counted)
    except (OSError, ValueError):
        return None, None
    finally:
        os.close(fd)
    if held < 0 or not -1 <= now - counted <= USAGE_STALE_S:  # (its time is rounded to ms)
        return None, None
    return held, counted


def _record_usage(cache, held, counted):
    tmp = os.path.join(cache, ".usage.%s" % _unique())
    try:
        with open(tmp, "w") as f:
            f.write("%d %.6f\n" % (held, counted))
        os.replace(tmp, os.path.join(cache, ".usage"))
    except OSError:
        _discard(tmp)  # no record: the next trim counts the files


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


_COUNT = itertools.count()
_TOKEN = [None, ""]  # (pid, random hex) of this process: a forked child makes its own


def _unique():
    """A part of a hidden name that no other writer uses: pid, random, a counter."""
    if _TOKEN[0] != os.getpid():
        _TOKEN[:] = [os.getpid(), "%d.%s" % (os.getpid(), os.urandom(6).hex())]
    return "%s.%d" % (_TOKEN[1], next(_COUNT))
