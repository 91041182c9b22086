"""The media route: an item's image, audio or video file, served from the media folder only.

``GET /media/<kind>/<item_id>`` (kind: image, audio or video) answers with the file the item names
(``potato.project.media``): only to a logged-in annotator the item is given to, or an admin. The path
comes from the item's record, never from the request, and is resolved inside the media folder
(``media.local_path``: no ``..``, no absolute path, no symlink out) and opened once
(``media.open_media``: the opened file itself is checked, so a folder swapped for a symlink
meanwhile is refused, and a FIFO never blocks); its type is read from its bytes, never from
its name, and the body is sent from that same descriptor, with ``nosniff`` and a
Content-Security-Policy that lets the response run nothing. Caching: an ETag from the file's
inode, mtime, ctime and size, ``Cache-Control: private, no-cache`` (the browser keeps it and
asks again, answered 304 when unchanged). One byte range (``Range: bytes=a-b``, ``a-``, ``-n``) is
answered 206 (audio and video seeking), a range past the end 416; several ranges are answered with the
whole file (RFC 9110 lets a server ignore Range). The file is sent in ``CHUNK`` pieces.

A file that is missing (or a folder, FIFO ...), refused or of a type no browser shows is a
404, 403 or 415 whose message says which and what to do (names escaped and shortened,
``media.quoted``); the annotate page shows a placeholder for it instead of
an image that does not load (``potato.project.display``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from email.utils import formatdate
from typing import Dict, Optional, Tuple
from urllib.parse import unquote

from potato.project import media
from potato.server.errors import HTTPError
from potato.server.http import SECURITY_HEADERS

log = logging.getLogger("potato.server")

CHUNK = 64 * 1024
CACHE_CONTROL = "private, no-cache"
# A raw image, audio or video response: nothing in it may run or load anything (an image opened in
# its own tab is shown by the browser's own viewer, which needs only inline styles).
MEDIA_CSP = ("default-src 'none'; img-src 'self'; media-src 'self'; style-src 'unsafe-inline'; "
             "sandbox; frame-ancestors 'none'")
_RANGE = re.compile(r"\s*bytes\s*=\s*(\d{0,19})\s*-\s*(\d{0,19})\s*")


class RangeNotSatisfiable(Exception):
    """A byte range that lies wholly past the end of the file."""


def parse_range(header: Optional[str], size: int) -> Optional[Tuple[int, int]]:
    """(first, last) byte, inclusive, of the one range ``header`` asks for; None for the
    whole file (no header, several ranges, another unit or a malformed one: all ignored).
    Raises RangeNotSatisfiable for a range that starts past the end (or ``-0``)."""
    m = _RANGE.fullmatch(header or "")
    if m is None or not (m.group(1) or m.group(2)):
        return None
    first, last = m.group(1), m.group(2)
    if not first:  # the last N bytes
        n = int(last)
        if n == 0 or size == 0:
            raise RangeNotSatisfiable()
        return max(0, size - n), size - 1
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None  # invalid: ignored
    if start >= size:
        raise RangeNotSatisfiable()
    return start, min(end, size - 1)


def etag_of(st: os.stat_result) -> str:
    """Changes when the file is replaced, even by one of the same size and mtime (the inode
    and the change time differ)."""
    return '"%x-%x-%x-%x"' % (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def etag_matches(header: Optional[str], etag: str) -> bool:
    """If-None-Match: "*" or a list of tags, compared weakly (a W/ prefix is ignored)."""
    if not header:
        return False
    tags = [t.strip() for t in header.split(",")]
    return "*" in tags or etag in [t[2:] if t.startswith("W/") else t for t in tags]


def page_headers(cfg, record: Dict) -> Dict[str, str]:
    """The annotate page's own Content-Security-Policy when its item shows http(s) media: the
    page's usual policy, with each media URL's origin allowed for images, or audio and video,
    alone."""
    origins: Dict[str, list] = {kind: [] for kind in media.KINDS}
    for kind in media.KINDS:
        try:
            ref = media.item_media(cfg, record, (kind,))
        except media.MediaError:
            continue
        origin = media.url_origin(ref.url) if ref is not None and ref.is_url else None
        if origin:
            origins[kind].append(origin)
    if not any(origins.values()):
        return {}
    played = list(dict.fromkeys(o for kind in media.KINDS if kind != "image"
                                for o in origins[kind]))
    csp = SECURITY_HEADERS["Content-Security-Policy"]
    csp = csp.replace("img-src 'self' data:", " ".join(["img-src 'self' data:"]
                                                        + origins["image"]))
    csp += "; media-src " + " ".join(["'self'"] + played)
    return {"Content-Security-Policy": csp}


def add_media_routes(app) -> None:
    cfg = app.config

    @app.route("GET", r"/media/(?P<kind>%s)/(?P<item_id>[^/]+)" % "|".join(media.KINDS))
    def media_file(h, kind, item_id):
        item_id = unquote(item_id)
        item = _item_for(app, h, item_id)
        it = media.quoted(item_id)
        try:
            record = json.loads(item["data"]) if item["data"] else {}
            ref = media.item_media(cfg, record if isinstance(record, dict) else {}, (kind,))
        except (ValueError, media.MediaError) as e:
            raise HTTPError(404, f"Item {it} names no usable {kind} ({e}).")
        if ref is None:
            raise HTTPError(404, f"Item {it} has no {kind}.")
        if ref.is_url:
            raise HTTPError(404, f"Item {it}'s {kind} is the address {media.shown(ref.url)}: the "
                                 f"browser loads it from there, this server does not.")
        name = media.quoted(ref.source)
        try:
            opened = media.open_media(cfg, ref)
        except media.MediaRefused:
            raise HTTPError(403, f"Item {it}'s {kind} {name} is not inside the "
                                 f"media folder, so it is not served. Give a path relative to "
                                 f"media_directory in the data file (potato validate lists "
                                 f"such items).")
        except media.MediaChanged as e:
            log.warning("media request for item %s: %s", it, e)
            raise HTTPError(404, f"Item {it}'s {kind} {name} changed while it was read; try "
                                 f"again.")
        except media.MediaNotAFile as e:
            raise HTTPError(404, f"Item {it}'s {kind} {name} is {e.what}, not a file. Name an "
                                 f"{kind} file in the media folder (potato validate lists "
                                 f"such items).")
        except media.MediaMissing:
            raise HTTPError(404, f"Item {it}'s {kind} {name} is not in the media "
                                 f"folder. Add the file or fix the path (potato validate lists "
                                 f"missing files).")
        except media.MediaUnsupported as e:
            raise HTTPError(415, f"Item {it}'s {kind} cannot be shown: {e}. Convert it "
                                 f"to a format browsers show (PNG, JPEG, WebP; WAV, MP3, OGG; MP4, "
                                 f"WebM).")
        with os.fdopen(opened.fd, "rb") as f:
            _send(h, f, opened.ctype)


def _item_for(app, h, item_id: str):
    """The item, for an annotator it is given to (any item, for an admin)."""
    admin = h.is_admin()
    user = None if admin else h.annotator()
    if not admin and user is None:
        raise HTTPError(401, "Log in to see an item's media (/login).")
    item = app.store.item(item_id)
    if item is None or (not admin and not item["active"]):
        raise HTTPError(404, f"No item {media.quoted(item_id)} in this project.")
    if not admin and not app.assignment.may_label(user, item_id):
        raise HTTPError(403, f"Item {media.quoted(item_id)} is not one of yours: its media are "
                             f"shown to the annotators it is given to.")
    return item


def _send(h, f, ctype: str) -> None:
    """The open file ``f`` (or one range of it, or 304), streamed in CHUNK pieces."""
    st = os.fstat(f.fileno())
    size, etag = st.st_size, etag_of(st)
    headers = {"Cache-Control": CACHE_CONTROL, "Content-Security-Policy": MEDIA_CSP,
               "ETag": etag, "Last-Modified": formatdate(st.st_mtime, usegmt=True),
               "Accept-Ranges": "bytes"}
    if etag_matches(h.headers.get("If-None-Match"), etag):
        h.start_response(304, ctype, size, headers)  # no body; the length a 200 would have
        return
    if_range = h.headers.get("If-Range")
    try:
        wanted = parse_range(h.headers.get("Range"), size) \
            if not if_range or if_range.strip() == etag else None
    except RangeNotSatisfiable:
        raise HTTPError(416, f"The range {media.quoted(h.headers.get('Range'))} lies past the "
                             f"end of the file ({size} bytes).",
                        {"Content-Range": f"bytes */{size}"})
    first, last = wanted if wanted is not None else (0, size - 1)
    if wanted is not None:
        headers["Content-Range"] = f"bytes {first}-{last}/{size}"
    h.start_response(206 if wanted is not None else 200, ctype, last - first + 1, headers)
    if h.command == "HEAD":
        return
    f.seek(first)
    left = last - first + 1
    while left > 0:
        block = f.read(min(left, CHUNK))
        if not block:  # the file shrank under us: the promised length cannot be kept
            h.close_connection = True
            return
        h.wfile.write(block)
        left -= len(block)
