"""The agent's side of a run's media (standard library, Python 3.8; shipped to hosts).

After the bundle, the agent lists the run's media files (by sha256 and size, from
``items.jsonl``), pins them in the host's cache (remote/media_cache.py), and downloads from the
server only the ones the cache lacks: ``GET /agent/v1/runs/<run>/media/<sha256>`` on one kept-
alive connection, resuming a cut download with a Range request, verifying each file's sha256
before it takes its place. On ssh and slurm hosts the server has already sent them (one tar
stream), so nothing is left to download; an agent machine downloads what it lacks.
"""

import hashlib
import http.client
import json
import os
import platform
import tempfile
import threading
import time

from potato.training.remote import media_cache, media_store
from potato.training.remote.client import ServerError, log

TRIES = 6  # per file: the first try and five resumes (or 503s)
PARALLEL = 4  # connections at once
BATCH_FILE_MAX = 4 << 20  # larger files come one a request (resumable with Range)
BATCH_FILES = 500  # small files per request (the server takes up to 2,000)
BATCH_BYTES = 32 << 20
BATCH_TAIL_MAX = 1 << 20  # a batch answer longer than its files by more fails
PROGRESS_S = 1.0


def wanted(items_path):
    """{sha: (size, name)} of the cache-form media in a bundle's items.jsonl."""
    out = {}
    with open(items_path, encoding="utf-8") as f:
        for line in f:
            media = json.loads(line).get("media")
            if not isinstance(media, dict) or not media.get("sha256"):
                continue
            sha, size = media["sha256"], media.get("size")
            if not media_cache.valid_hash(sha) or not isinstance(size, int) or size < 0:
                raise media_cache.CacheError("an item's media entry is not {sha256, size}: %r"
                                             % (str(media)[:200],))
            out[sha] = (size, str(media.get("name") or sha[:12]))
    return out


def words(host, files, of_files, nbytes, of_bytes):
    def mb(n):
        return "{:,}".format(int(round(n / (1 << 20)))) if n >= (1 << 20) or n == 0 else \
            "%.1f" % (n / (1 << 20))

    return "copying media to %s: {:,} of {:,} files, %s of %s MB".format(files, of_files) % (
        host, mb(nbytes), mb(of_bytes))


class Busy(OSError):
    """The server answered 503 (busy: the run's request slots are taken for a moment, or it
    is restarting): tried again after a pause, like a cut connection."""


def _refusal(resp):
    """The ServerError (or Busy, for a 503) of an answer that is not the file."""
    data = resp.read()
    try:
        message = json.loads(data.decode("utf-8")).get("error")
    except (ValueError, AttributeError):
        message = None
    if resp.status == 503:
        return Busy(message or "HTTP 503")
    return ServerError(resp.status, message or "HTTP %d" % resp.status)


class Downloader:
    """Media files from the server into the cache, on one kept-alive connection."""

    def __init__(self, client, run_id, cache):
        self.client = client
        self.run_id = run_id
        self.cache = cache
        self.conn = None
        self.prefix = ""

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _get(self, sha, offset):
        if self.conn is None:
            self.conn, self.prefix = self.client._conn()
        headers = {"Authorization": "Bearer " + self.client.token, "X-Potato-Agent": "v1"}
        if offset:
            headers["Range"] = "bytes=%d-" % offset
        self.conn.request("GET", "%s/agent/v1/runs/%s/media/%s" % (self.prefix, self.run_id,
                                                                   sha), headers=headers)
        resp = self.conn.getresponse()
        if resp.status not in (200, 206):
            raise _refusal(resp)
        return resp

    def fetch(self, sha, size):
        """Download one file into a partial file of this downloader's own in ``.incoming``
        (hashed as it arrives, resumed with Range after a cut from where it stopped), verify
        the bytes on disk, move it into place. Another run on the host may fetch the same file
        at once: each writes its own partial file, and a file that took its place meanwhile
        is used as it is."""
        if media_cache.have(self.cache, sha, size):
            return
        fd, part = tempfile.mkstemp(prefix="%s.%d." % (sha[:16], os.getpid()), suffix=".part",
                                    dir=media_store.incoming_dir(self.cache))
        try:
            with os.fdopen(fd, "w+b") as f:
                h, have, last = self._download(f, sha, size)
                f.flush()
                on_disk = os.fstat(f.fileno()).st_size
            if have != size or on_disk != size or h.hexdigest() != sha:
                if media_cache.have(self.cache, sha, size):  # another run's copy arrived
                    return
                raise media_cache.CacheError("media file %s arrived with %d of %d bytes%s%s" % (
                    sha[:12], on_disk, size, "" if on_disk != size else " and another sha256",
                    " (%s)" % last if last else ""))
            try:
                media_store.place(self.cache, sha, part)
            except OSError as e:
                if not media_cache.have(self.cache, sha, size):
                    raise media_cache.CacheError("media file %s could not take its place in "
                                                 "%s: %s" % (sha[:12], self.cache, e))
        finally:
            try:
                os.unlink(part)
            except OSError:  # placed: it is the cache's file now
                pass

    def _download(self, f, sha, size):
        """Write the file's bytes to ``f`` (TRIES tries, each resuming where the last one was
        cut); (sha256 so far, bytes written, the last error or None)."""
        h, have, last = hashlib.sha256(), 0, None
        for attempt in range(TRIES):
            if have >= size:
                break
            try:
                resp = self._get(sha, have)
                if resp.status == 200 and have:  # the whole file again
                    f.seek(0)
                    f.truncate(0)
                    h, have = hashlib.sha256(), 0
                while True:
                    block = resp.read(media_cache.BLOCK)  # at the end: closed, reusable
                    if not block:
                        break
                    f.write(block)
                    h.update(block)
                    have += len(block)
                    if have > size:  # not the listed file: no more of it
                        self.close()
                        return h, have, "the server sent more than the %d bytes listed" % size
            except (OSError, http.client.HTTPException) as e:
                last = e
                self.close()  # a kept-alive connection the server closed: a fresh one now
                time.sleep(min(0.2 * 2 ** attempt, 3) if attempt else
                           0.5 if isinstance(e, Busy) else 0)
        return h, have, last

    def fetch_batch(self, files, done):
        """Small files in one request (``POST .../media``), each verified as its bytes end;
        ``done(size)`` after each. A cut stream leaves the rest to ``fetch`` (Range)."""
        body = json.dumps({"hashes": [sha for sha, _ in files]}).encode()
        left = list(files)
        try:
            if self.conn is None:
                self.conn, self.prefix = self.client._conn()
            self.conn.request("POST", "%s/agent/v1/runs/%s/media" % (self.prefix, self.run_id),
                              body=body, headers={
                                  "Authorization": "Bearer " + self.client.token,
                                  "X-Potato-Agent": "v1", "Content-Type": "application/json"})
            resp = self.conn.getresponse()
            if resp.status != 200:
                raise _refusal(resp)  # a Busy one: the files come one by one below
            for sha, size in files:
                if size > BATCH_FILE_MAX:  # not from this code: stream it
                    media_store.store(self.cache, sha, size, resp.read)
                else:  # in memory, hashed, then written once (no temp file of its own)
                    data = resp.read(size)
                    if len(data) < size:
                        raise http.client.IncompleteRead(data, size - len(data))
                    media_store.put(self.cache, sha, data)
                left.pop(0)
                done(size)
            extra = 0
            while extra <= BATCH_TAIL_MAX:  # the end: the connection is free for the next one
                block = resp.read(media_cache.BLOCK)
                if not block:
                    break
                extra += len(block)
            else:
                self.close()
                raise ServerError(resp.status, "the answer to a batch of %d media files ran on "
                                  "more than %d bytes past their listed sizes; is the server "
                                  "this version of Potato?" % (len(files), BATCH_TAIL_MAX))
        except (OSError, http.client.HTTPException, media_cache.CacheError) as e:
            self.close()
            if isinstance(e, media_cache.CacheError) and "another sha256" in str(e):
                raise
        for sha, size in left:  # after a cut: one by one, resuming
            self.fetch(sha, size)
            done(size)


class MediaFailed(Exception):
    """The run's media could not be put in the host's cache; the message says why."""


def sync(client, run_id, cache, workdir, items_path, settings, on_status):
    """Pin the run's media (as its job directory's name), download what the cache lacks,
    evict to the settings' max_media_cache_mb; returns the number of files downloaded.
    ``on_status(message)`` gets the progress line. MediaFailed says what went wrong."""
    host = settings.host
    if host == type(settings).host:  # an agent machine: its own name
        host = platform.node()
    try:
        return _sync(client, run_id, cache, os.path.basename(workdir), items_path,
                     settings.max_media_cache_mb, host, on_status)
    except (media_cache.CacheError, ServerError, OSError, http.client.HTTPException,
            ValueError) as e:
        raise MediaFailed("the run's media could not be copied to %s (cache %s): %s"
                          % (host, cache, e))


def tasks(files):
    """``files`` as download tasks: small files in batches (one request each), a large file
    alone (its own request, resumed with Range after a cut)."""
    out, batch, nbytes = [], [], 0
    for sha, size in files:
        if size > BATCH_FILE_MAX:
            out.append([(sha, size)])
            continue
        if batch and (len(batch) >= BATCH_FILES or nbytes + size > BATCH_BYTES):
            out.append(batch)
            batch, nbytes = [], 0
        batch.append((sha, size))
        nbytes += size
    return out + ([batch] if batch else [])


def download(client, run_id, cache, files, progress, parallel=PARALLEL):
    """Fetch ``files`` ((sha, size) pairs) on ``parallel`` kept-alive connections (small files
    are bound by round trips, not bandwidth); ``progress(files, bytes)`` at most every
    PROGRESS_S. Returns (files, bytes); the first failure is raised once all have stopped."""
    todo = list(reversed(tasks(files)))
    lock = threading.Lock()
    state = {"files": 0, "bytes": 0, "error": None, "last": 0.0}

    def done(size):
        with lock:
            state["files"] += 1
            state["bytes"] += size

    def worker():
        down = Downloader(client, run_id, cache)
        try:
            while True:
                with lock:
                    if not todo or state["error"] is not None:
                        return
                    task = todo.pop()
                if len(task) == 1 and task[0][1] > BATCH_FILE_MAX:
                    down.fetch(*task[0])
                    done(task[0][1])
                else:
                    down.fetch_batch(task, done)
        except Exception as e:  # handed to the caller below
            with lock:
                state["error"] = state["error"] or e
        finally:
            down.close()

    threads = [threading.Thread(target=worker, name="media-download", daemon=True)
               for _ in range(max(1, min(parallel, len(files))))]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        threads[0].join(0.1) if threads[0].is_alive() else time.sleep(0.1)
        now = time.monotonic()
        if now - state["last"] >= PROGRESS_S:
            state["last"] = now
            progress(state["files"], state["bytes"])
    for t in threads:
        t.join()
    if state["error"] is not None:
        raise state["error"]
    return state["files"], state["bytes"]


def _sync(client, run_id, cache, pin, items_path, limit_mb, host, on_status):
    files = wanted(items_path)
    if not files:
        return 0
    missing = media_cache.need(cache, pin, [(sha, v[0]) for sha, v in sorted(files.items())])
    reserved = media_cache.reserve(cache, missing)
    if not missing:
        log("media: all %d files already in %s; 0 downloaded" % (len(files), cache))
        on_status("media on %s: all {:,} files already there, 0 sent".format(len(files)) % host)
        return 0
    nbytes = sum(size for _, size in missing)
    log("media: %d of %d files (%d bytes) are not in %s; downloading them"
        % (len(missing), len(files), nbytes, cache))
    done, got = download(client, run_id, cache, missing,
                         lambda n, b: on_status(words(host, n, len(missing), b, nbytes)))
    on_status(words(host, done, len(missing), got, nbytes))
    removed, freed, held = media_cache.evict(cache, limit_mb * (1 << 20), recorded=reserved)
    if removed:
        log("media: %d least recently used files (%d bytes) left the cache (its limit is %g MB)"
            % (removed, freed, limit_mb))
    return done

