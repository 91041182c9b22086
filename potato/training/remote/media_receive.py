"""A host's side of the media stream (standard library, Python 3.8; shipped): ``receive``
unpacks the tar stream that backends/media_push.py sends into the media cache
(remote/media_cache.py), verifying each file, and ``main`` is the program that the ssh backend
runs on a host as ``python -c <media_tar.py + media_cache.py + this file> need|receive|sync DIR
PIN LIMIT_MB``.
"""

import json
import os
import queue
import sys
import threading
import time

if "need" not in globals():  # run as ``python -c`` (media_push), media_cache.py is above
    from potato.training.remote.media_cache import (
        BLOCK, MARK, evict, keep_pin, need, open_cache, read_pin, reserve, valid_hash)
    from potato.training.remote.media_store import put, store
    from potato.training.remote.media_tar import (
        TAR_BLOCK, TAR_END, CacheError, _padding, _skip, tar_header)

PIN_TOUCH_S = 60  # a stream being received keeps its pin fresh this often
WRITERS = 4  # threads that write small arriving files, once writing them is slow
SLOW_WRITE_S = 0.0003  # a small file took longer than this to write, on average: threads
SLOW_AFTER = 64  # ... over at least this many files
SMALL_FILE = 4 << 20  # larger files are written as they are read
WRITE_AHEAD = 64 << 20  # bytes read from the stream but not yet written, at most
BATCH = 256 << 10  # small files are written in batches of about this many bytes


class _Writers:
    """Where a batch of small files is written: in the reader's own thread while that is
    quick (a local disk: a thread's hand-off would cost more than the write), and on ``count``
    threads once SLOW_AFTER files have taken over SLOW_WRITE_S each on average (large files,
    whose hashing threads share out, or a network file system or a busy disk, where creating
    files one at a time is bound by latency, not by the bytes). The threads write each file
    whole before it takes its name (see media_store.put) and stay at most WRITE_AHEAD bytes
    behind the reader (a batch holds at most BATCH + SMALL_FILE bytes). ``failed`` holds a
    disk error: the rest is then only drained."""

    def __init__(self, cache, count, kept):
        self.cache, self.count, self.kept = cache, max(1, count), kept
        self.failed, self.threads = [], []
        self.batches = queue.Queue(maxsize=max(1, WRITE_AHEAD // (BATCH + SMALL_FILE)))
        self.files, self.secs = 0, 0.0

    def write(self, batch):
        if self.threads:
            self.batches.put(batch)
            return
        started = time.monotonic()
        self._write(batch)
        self.files += len(batch)
        self.secs += time.monotonic() - started
        if self.count > 1 and self.files >= SLOW_AFTER and self.secs > SLOW_WRITE_S * self.files:
            self._start()

    def _start(self):
        """The writer threads, as many as can be started (a host that limits its processes
        may refuse some, or all: the reader then goes on writing itself)."""
        for _ in range(self.count):
            t = threading.Thread(target=self._thread, daemon=True)
            try:
                t.start()
            except RuntimeError:  # "can't start new thread"
                break
            self.threads.append(t)

    def _thread(self):
        for batch in iter(self.batches.get, None):
            self._write(batch, whole_first=True)

    def _write(self, batch, whole_first=False):
        for sha, data in batch:
            try:
                if not self.failed:
                    put(self.cache, sha, data, whole_first)
                    self.kept(len(data))
            except CacheError as e:
                self.kept(0, e)
            except BaseException as e:  # noqa: B902 (raised again by receive, in the reader)
                self.failed.append(e)

    def close(self):
        for _ in self.threads:
            self.batches.put(None)
        for t in self.threads:
            t.join()


def receive(cache, name, stream, limit_bytes, writers=WRITERS, wanted=None, reserved=None):
    """Unpack a tar stream of media files (members named by their sha256, each in the pin
    ``name``) into the cache, verifying each; then evict to ``limit_bytes``. The stream is
    read by this code, not by tar: only a regular file named by a hash of the pin, of the
    pinned size and not seen before is kept (links, folders, devices, other names and sizes
    are skipped over and counted as bad); nothing is written under any name from the stream.
    Small files are hashed and written in batches (BATCH bytes; on up to ``writers`` threads
    when writing them is slow, see _Writers); a large file is written as it is read. The pin
    is touched every PIN_TOUCH_S meanwhile (a stream may outlast PIN_STALE_S). ``wanted``
    ({sha: size}) is the pin's, when the caller has just written it; ``reserved`` the time
    its bytes were reserved (media_cache.reserve), for the trim."""
    wanted = read_pin(cache, name) if wanted is None else wanted
    done, bad, seen = [0, 0], [], set()
    touched = [time.monotonic()]

    def read(n):  # the stream's bytes; a long stream keeps its pin fresh
        if time.monotonic() - touched[0] >= PIN_TOUCH_S:
            keep_pin(cache, name, wanted)
            touched[0] = time.monotonic()
        return stream.read(n)

    lock = threading.Lock()

    def kept(size, error=None):  # from the reader and the writers
        with lock:
            if error is None:
                done[0] += 1
                done[1] += size
            else:
                bad.append(str(error))

    out = _Writers(cache, writers, kept)
    try:
        _read_stream(read, stream, wanted, seen, bad, out,
                     lambda sha, size: store(cache, sha, size, read), kept)
    finally:
        out.close()
    if out.failed:
        raise out.failed[0]
    while stream.read(BLOCK):  # what follows the end (tar pads to a record): the sender
        pass  # writes it all before it reads the answer
    keep_pin(cache, name, wanted)
    removed, freed, held = evict(cache, limit_bytes, keep=wanted, recorded=reserved)
    return {"received": done[0], "bytes": done[1], "bad": bad[:20],
            "bad_count": len(bad), "evicted": removed, "evicted_bytes": freed,
            "held_bytes": held}


def _read_stream(read, stream, wanted, seen, bad, out, store_large, kept):
    """The reader's side of ``receive``: headers checked, small files batched to ``out``
    (_Writers), large ones stored as they are read."""
    batch, size_of_batch = [], 0
    try:
        while not out.failed:
            block = read(TAR_BLOCK)
            if len(block) < TAR_BLOCK or block == TAR_END:
                if block != TAR_END:
                    bad.append("the stream ended before its end (%d files read)" % len(seen))
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
                    store_large(sha, size)
                    kept(size)
                except CacheError as e:
                    kept(0, e)
                    if "another sha256" not in str(e):
                        break  # the stream ended inside it
                _skip(stream, _padding(size))
                continue
            data = stream.read(size + _padding(size))[:size]
            if len(data) < size:
                bad.append("media file %s arrived with %d of %d bytes (the stream ended)"
                           % (sha[:12], len(data), size))
                break
            batch.append((sha, data))
            size_of_batch += size + TAR_BLOCK
            if size_of_batch >= BATCH:
                batch, whole = [], batch
                size_of_batch = 0
                out.write(whole)
    finally:  # what was read whole before the stream ended or broke is kept
        if batch:
            out.write(batch)


PIPE_BYTES = 1 << 20  # a pipe of the stream holds this much (the default is 64 KB)


def wide_pipe(fd):
    """Let the pipe ``fd`` hold PIPE_BYTES (Linux's F_SETPIPE_SZ; elsewhere, or where it is
    not a pipe or the system allows less, nothing changes): while the reader writes a batch
    of files, the stream goes on arriving instead of stopping the sender."""
    try:
        import fcntl
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):
        pass


def _wanted(line):
    """[[sha, size], ...] (JSON) as (sha, size) pairs; CacheError when it is not that."""
    wanted = json.loads(line)
    if not isinstance(wanted, list) or not all(
            isinstance(w, list) and len(w) == 2 and valid_hash(w[0])
            and isinstance(w[1], int) and not isinstance(w[1], bool) and w[1] >= 0
            for w in wanted):
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
    if command != "need":  # (a wide pipe counts against the user's allowance of pipe pages)
        wide_pipe(sys.stdin.fileno())
    stdin = open(sys.stdin.fileno(), "rb", buffering=BLOCK, closefd=False)
    try:
        open_cache(cache)
        if command == "need":
            missing = need(cache, name, _wanted(stdin.read()))
            reserve(cache, missing)
            out = {"missing": missing}
        elif command == "sync":
            wanted = _wanted(stdin.readline())
            missing = need(cache, name, wanted)
            reserved = reserve(cache, missing)
            print(MARK + json.dumps({"missing": missing}), flush=True)
            out = receive(cache, name, stdin, float(limit) * (1 << 20), wanted=dict(wanted),
                          reserved=reserved) if missing else {}
        else:
            out = receive(cache, name, stdin, float(limit) * (1 << 20))
    except (CacheError, OSError, ValueError, RecursionError) as e:  # JSON nested too deep
        sys.exit("media cache %s: %s" % (cache, e))
    print(MARK + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
