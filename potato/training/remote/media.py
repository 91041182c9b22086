"""Where the worker finds an item's media file (standard library only: runs on every host).

A bundle item may carry ``"media"``, one of::

    {"kind": "image"|"audio", "path": "/abs/path"}          the file in place (local backend)
    {"kind": ..., "sha256": "<hex>", "size": N, "name": "x.png"}
                                                            a file in the host's media cache
    {"kind": ..., "url": "https://..."}                      fetched by the worker's host

Trainers call ``path_for(item["media"], spec)`` and open the file it returns; MediaMissing
says why there is none (a trainer skips that item and counts it).

URL media are fetched by the worker's host itself (``fetch_urls``, called by the worker before
the trainer starts; data-parallel ranks above 0 find the same files with ``fetched_only``): standard library urllib, a timeout and a size cap per file, into the run
directory. Each failed URL is reported in a sentence and its items are left out of the run
(``left_out``); more than MAX_FAILED_SHARE of them (or more than MAX_FAILED) fails the run,
naming a few (the host's network, not the items, is then the likely cause).
"""

import hashlib
import http.client
import os
import re
import urllib.error
import urllib.parse
import urllib.request

URL_TIMEOUT_S = 30
URL_MAX_BYTES = 200 << 20
MAX_FAILED = 20
MAX_FAILED_SHARE = 0.05
URL_DIR = "media-urls"  # in the run's directory (the spec's): where URL media are fetched


class MediaMissing(Exception):
    """An item's media file is not on this host."""


def cache_path(cache_dir, sha256):
    """The content-addressed place of a file in a media cache (MediaMissing for a value that
    is not a sha256: a bundle's hash never names a path)."""
    if not (isinstance(sha256, str) and re.fullmatch(r"[0-9a-f]{64}", sha256)):
        raise MediaMissing("item media hash %s is not a sha256" % ascii(str(sha256)[:80]))
    return os.path.join(cache_dir, sha256[:2], sha256)


def path_for(media, spec):
    """A local path to the media file ``media`` describes. ``spec``: the run's spec dict
    (its ``media_cache`` names the host's cache directory)."""
    if media.get("error"):
        raise MediaMissing(media["error"])
    if media.get("path"):
        path = media["path"]
    elif media.get("sha256"):
        cache = (spec or {}).get("media_cache")
        if not cache:
            raise MediaMissing("item media %s has no media cache on this host"
                               % media.get("name", media["sha256"][:12]))
        path = cache_path(cache, media["sha256"])
    else:
        raise MediaMissing("item media %r: URL media are not fetched by this worker"
                           % media.get("url"))
    if not os.path.isfile(path):
        raise MediaMissing("item media %s is missing on this host (%s)"
                           % (media.get("name") or media.get("path"), path))
    return path


def left_out(items):
    """(kept, left): ``items`` whose media could not be had (a URL that failed or that the
    server refused) are left out of a run that reads media, each with its reason."""
    kept, left = [], []
    for item in items:
        media = item.get("media")
        (left if isinstance(media, dict) and media.get("error") else kept).append(item)
    return kept, left


class TooManyFailed(Exception):
    """More URL media failed than a run allows; the message names a few."""


def shown_url(url):
    """A URL for a message: as it is when it is short printable ASCII, else escaped (no
    control, bidi or other hidden character reaches a log or a page) and cut at 200."""
    if len(url) <= 200 and all(0x20 < ord(c) < 0x7f for c in url):
        return url
    return ascii(url[:200]) + ("..." if len(url) > 200 else "")


def wire_url(url):
    """``url`` as it goes on the wire: characters outside ASCII (a Korean file name) and
    blanks percent-encoded as UTF-8, what is already encoded and the delimiters kept."""
    return urllib.parse.quote(url, safe=":/?#[]@!$&'()*+,;=%~")


def fetch_url(url, dest, timeout=URL_TIMEOUT_S, max_bytes=URL_MAX_BYTES):
    """Download ``url`` to ``dest`` (0600); an error sentence, or None when it arrived."""
    tmp = dest + ".part"
    try:
        req = urllib.request.Request(wire_url(url), headers={"User-Agent": "potato-training"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            length = resp.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > max_bytes:
                return "%s is %d bytes, over the %d MB limit" % (shown_url(url), int(length),
                                                                 max_bytes >> 20)
            got = 0
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                while True:
                    block = resp.read(1 << 20)
                    if not block:
                        break
                    got += len(block)
                    if got > max_bytes:
                        raise ValueError("over the %d MB limit" % (max_bytes >> 20))
                    f.write(block)
        os.replace(tmp, dest)
        return None
    except urllib.error.HTTPError as e:
        why = "the server answered %d %s" % (e.code, e.reason)
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
        # HTTPException: InvalidURL (a tab or a space in it), a bad status line, a body cut
        # short; each fails this item only
        why = str(getattr(e, "reason", None) or e) or type(e).__name__
    try:
        os.unlink(tmp)
    except OSError:
        pass
    return "%s could not be fetched: %s" % (shown_url(url), why)


def fetched_only(url, dest):
    """The ``fetch`` of a data-parallel rank above 0: it downloads nothing and finds what the
    worker (rank 0) fetched before the ranks started, so every rank trains on the same items."""
    return ("%s was not fetched on this host: the worker (rank 0) found no file for it in %s"
            % (shown_url(url), os.path.dirname(dest)))


def fetch_urls(items, dest_dir, on_status=None, on_error=None, fetch=fetch_url):
    """Fetch every URL media of ``items`` (bundle items) into ``dest_dir``; each item's media
    gets its ``path``, or its ``error`` when the fetch failed. Returns (fetched, failed);
    TooManyFailed when failures pass the run's limit."""
    urls = {}
    for item in items:
        media = item.get("media")
        if isinstance(media, dict) and media.get("url") and not media.get("path") and \
                not media.get("error"):  # an address the server already refused: not fetched
            urls.setdefault(media["url"], []).append(media)
    if not urls:
        return 0, 0
    os.makedirs(dest_dir, mode=0o700, exist_ok=True)
    failed = []
    for n, (url, medias) in enumerate(sorted(urls.items())):
        if on_status is not None and n % 50 == 0:
            on_status("fetching media URLs: %d of %d" % (n, len(urls)))
        dest = os.path.join(dest_dir, hashlib.sha256(url.encode("utf-8")).hexdigest())
        error = None if os.path.isfile(dest) else fetch(url, dest)
        for media in medias:
            if error:
                media["error"] = error
            else:
                media["path"] = dest
        if error:
            failed.append(error)
            if on_error is not None:
                on_error(error)
    limit = max(1, min(MAX_FAILED, int(len(urls) * MAX_FAILED_SHARE)))
    if len(failed) > limit:
        raise TooManyFailed(
            "%d of %d media URLs could not be fetched on this host (a run allows %d): %s. Check "
            "the URLs and this host's network access, or use files instead of URLs."
            % (len(failed), len(urls), limit, "; ".join(failed[:3])))
    return len(urls) - len(failed), len(failed)
