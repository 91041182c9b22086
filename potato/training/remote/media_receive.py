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
        BLOCK, MARK, _private_dir, evict, keep_pin, need, put, read_pin, store,
        valid_hash)
    from potato.training.remote.media_tar import (
        TAR_BLOCK, TAR_END, CacheError, _padding, _skip, tar_header)

PIN_TOUCH_S = 60  # a stream being received keeps its pin fresh this often
WRITERS = 4  # threads that write small arriving files
SMALL_FILE = 4 << 20  # larger files are written as they are read
WRITE_AHEAD = 64 << 20  # bytes read from the stream but not yet written, at most
BATCH = 256 << 10  # small files go to a writer thread in batches of about this many bytes


def receive(cache, name, stream, limit_bytes, writers=WRITERS):
    """Unpack a tar stream of media files (members named by their sha256, each in the pin
    ``name``) into the cache, verifying each; then evict to ``limit_bytes``. The stream is
    read by this code, not by tar: only a regular file named by a hash of the pin, of the
    pinned size and not seen before is kept (links, folders, devices, other names and sizes
    are skipped over and counted as bad); nothing is written under any name from the stream.
    Small files go in batches (BATCH bytes) to ``writers`` threads, which hash and write them
    while the stream is read on (creating many small files is bound by the file system's
    latency, not by the bytes), at most WRITE_AHEAD bytes ahead; a large file is written as it
    is read. The pin is touched every PIN_TOUCH_S meanwhile (a stream may outlast PIN_STALE_S)."""
    wanted = read_pin(cache, name)
    done, bad, seen, failed = [0, 0], [], set(), []
    batches = queue.Queue(maxsize=max(1, WRITE_AHEAD // BATCH))
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

    def write():
        for batch in iter(batches.get, None):
            for sha, data in batch:
                try:
                    if not failed:  # after a disk error the rest is only drained
                        put(cache, sha, data)
                        kept(len(data))
                except CacheError as e:
                    kept(0, e)
                except BaseException as e:  # noqa: B902 (raised again below, in the reader)
                    failed.append(e)

    threads = [threading.Thread(target=write, daemon=True) for _ in range(max(1, writers))]
    for t in threads:
        t.start()
    try:
        _read_stream(read, stream, wanted, seen, bad, batches, failed,
                     lambda sha, size: store(cache, sha, size, read), kept)
    finally:
        for _ in threads:
            batches.put(None)
        for t in threads:
            t.join()
    if failed:
        raise failed[0]
    while stream.read(BLOCK):  # what follows the end (tar pads to a record): the sender
        pass  # writes it all before it reads the answer
    keep_pin(cache, name, wanted)
    removed, freed, held = evict(cache, limit_bytes, keep=wanted)
    return {"received": done[0], "bytes": done[1], "bad": bad[:20],
            "bad_count": len(bad), "evicted": removed, "evicted_bytes": freed,
            "held_bytes": held}


def _read_stream(read, stream, wanted, seen, bad, batches, failed, store_large, kept):
    """The reader's side of ``receive``: headers checked, small files batched to the writers,
    large ones stored as they are read."""
    batch, size_of_batch = [], 0
    try:
        while not failed:
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
                batches.put(batch)
                batch, size_of_batch = [], 0
    finally:  # what was read whole before the stream ended or broke is kept
        if batch:
            batches.put(batch)


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
    except (CacheError, OSError, ValueError, RecursionError) as e:  # JSON nested too deep
        sys.exit("media cache %s: %s" % (cache, e))
    print(MARK + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
