"""The agent's side of a run's media (standard library, Python 3.8; shipped to hosts).

After the bundle, the agent lists the run's media files (by sha256 and size, from
``items.jsonl``), pins them in the host's cache (remote/media_cache.py), and downloads from the
server only the ones the cache lacks: ``GET /agent/v1/runs/<run>/media/<sha256>`` on one kept-
alive connection, resuming a cut download with a Range request, verifying each file's sha256
before it takes its place. On ssh and slurm hosts the server has already sent them (one tar
stream), so nothing is left to download; an agent machine downloads what it lacks.
"""

import http.client
import json
import os
import platform
import time

from potato.training.remote import media_cache
from potato.training.remote.client import ServerError, log

TRIES = 4  # per file: the first try and three resumes
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
            data = resp.read()
            try:
                message = json.loads(data.decode("utf-8")).get("error")
            except (ValueError, AttributeError):
                message = None
            raise ServerError(resp.status, message or "HTTP %d" % resp.status)
        return resp

    def fetch(self, sha, size):
        """Download one file into ``.incoming``, resuming; verify it; move it into place."""
        incoming = os.path.join(self.cache, ".incoming")
        os.makedirs(incoming, mode=0o700, exist_ok=True)
        part = os.path.join(incoming, sha + ".part")
        last = None
        for attempt in range(TRIES):
            have = os.path.getsize(part) if os.path.exists(part) else 0
            if have >= size:
                break
            try:
                resp = self._get(sha, have)
                with open(part, "ab" if resp.status == 206 else "wb") as f:
                    os.chmod(part, 0o600)
                    while True:
                        block = resp.read1(media_cache.BLOCK)
                        if not block:
                            break
                        f.write(block)
            except (OSError, http.client.HTTPException) as e:
                last = e
                self.close()
                time.sleep(min(0.2 * 2 ** attempt, 3))
        with open(part, "rb") as f:
            try:
                media_cache.store(self.cache, sha, size, f.read)
            except media_cache.CacheError as e:
                raise media_cache.CacheError("%s%s" % (e, " (%s)" % last if last else ""))
            finally:
                os.unlink(part)


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


def _sync(client, run_id, cache, pin, items_path, limit_mb, host, on_status):
    files = wanted(items_path)
    if not files:
        return 0
    missing = media_cache.need(cache, pin, [(sha, v[0]) for sha, v in sorted(files.items())])
    if not missing:
        log("media: all %d files already in %s; 0 downloaded" % (len(files), cache))
        on_status("media on %s: all {:,} files already there, 0 sent".format(len(files)) % host)
        return 0
    nbytes = sum(size for _, size in missing)
    log("media: %d of %d files (%d bytes) are not in %s; downloading them"
        % (len(missing), len(files), nbytes, cache))
    down = Downloader(client, run_id, cache)
    done = got = 0
    last = 0.0
    try:
        for sha, size in missing:
            now = time.monotonic()
            if now - last >= PROGRESS_S:
                last = now
                on_status(words(host, done, len(missing), got, nbytes))
            down.fetch(sha, size)
            done += 1
            got += size
    finally:
        down.close()
    on_status(words(host, done, len(missing), got, nbytes))
    removed, freed, held = media_cache.evict(cache, limit_mb * (1 << 20))
    if removed:
        log("media: %d least recently used files (%d bytes) left the cache (its limit is %g MB)"
            % (removed, freed, limit_mb))
    return done

