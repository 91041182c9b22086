"""An item's media: the image or audio file an item names, where the server finds it.

An item names its media in the field that ``item_properties.image_key`` (or ``audio_key``)
gives: a path relative to ``media_directory`` (``task_dir`` by default) or an http(s) URL.
``item_media`` reads that field from the item's record (as read from its data file) and says
what it is; it never touches the disk. ``local_path`` resolves a relative path to a file
inside the media directory, refusing every way out of it (``..``, absolute paths, symlinks
that lead outside), so the server, ``potato validate`` and the bundle builder all apply the
same rule.

``probe`` goes one step further for a local file: it reads the file's first bytes and says
which content type it is (``sniff``), never trusting the extension, so the server sends a
type the browser will honour with ``nosniff``, and ``potato validate`` reports a file no
browser could show. SVG is refused: an SVG is a document that can carry scripts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlsplit

from potato.config import Config

KINDS = ("image", "audio")
_OTHER_URL = re.compile(r"^([a-z][a-z0-9+.-]*://|(data|javascript|file|blob|vbscript):)")


class MediaError(Exception):
    """A media reference that cannot be used; the message says which and why."""


class MediaRefused(MediaError):
    """A path that would leave the media folder (``..``, absolute, a symlink out, NUL)."""


class MediaMissing(MediaError):
    """No such file in the media folder."""


class MediaUnsupported(MediaError):
    """A file whose bytes are no image or audio type a browser shows (or an SVG)."""


@dataclass(frozen=True)
class MediaRef:
    kind: str                  # "image" or "audio"
    source: str                # the value as the item gives it
    url: Optional[str] = None  # set for http(s) media: fetched by whoever needs the bytes

    @property
    def is_url(self) -> bool:
        return self.url is not None


def item_media(cfg: Config, record: Dict[str, Any],
               kinds: Tuple[str, ...] = KINDS) -> Optional[MediaRef]:
    """The media an item names (its image_key field first, then audio_key), or None.
    ``kinds``: only these (the page shows an item's image and its audio each)."""
    ip = cfg.item_properties
    for kind, key in (("image", ip.image_key), ("audio", ip.audio_key)):
        if not key or kind not in kinds:
            continue
        value = record.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise MediaError(f"the item's {key!r} field must be a path or URL, not "
                             f"{type(value).__name__}")
        low = value.strip().lower()
        if low.startswith(("http://", "https://")):
            return MediaRef(kind, value, url=value.strip())
        if _OTHER_URL.match(low):
            raise MediaError(f"the item's {key!r} field is {value[:200]!r}: only http(s) "
                             f"addresses and paths in the media folder are shown")
        return MediaRef(kind, value)
    return None


def local_path(cfg: Config, ref: MediaRef) -> str:
    """The file a relative media reference names, inside ``cfg.media_directory``.

    Raises MediaError for an absolute path, a path that leaves the folder (also through a
    symlink), or one that is not a regular file."""
    if ref.is_url:
        raise MediaError(f"{ref.source!r} is a URL, not a file in the media folder")
    root = os.path.realpath(cfg.media_directory or cfg.task_dir)
    rel = ref.source.replace("\\", "/")
    if "\x00" in rel or os.path.isabs(rel) or rel.startswith("/"):
        raise MediaRefused(f"{ref.source!r} is not a path relative to the media folder {root}")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise MediaRefused(f"{ref.source!r} leaves the media folder {root}")
    path = os.path.realpath(os.path.join(root, *parts))
    if os.path.commonpath([root, path]) != root:
        raise MediaRefused(f"{ref.source!r} leads outside the media folder {root} (a symlink)")
    if not os.path.isfile(path):
        raise MediaMissing(f"{ref.source!r}: no such file in the media folder {root}")
    return path


SNIFF_BYTES = 32  # enough for every signature below


def sniff(head: bytes) -> Optional[Tuple[str, str]]:
    """(kind, content type) of a file from its first ``SNIFF_BYTES`` bytes, or None when it is
    none of the image and audio formats browsers show (PNG, JPEG, GIF, WebP, BMP, AVIF; WAV,
    MP3, AAC, Ogg, FLAC, MP4/M4A, WebM). SVG is None too (see ``is_svg``)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image", "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image", "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image", "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image", "image/webp"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio", "audio/wav"
    if head[:2] == b"BM" and len(head) >= 26 and head[6:10] == b"\0\0\0\0":
        return "image", "image/bmp"
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"avif", b"avis"):
            return "image", "image/avif"
        if brand[:3] in (b"hei", b"hev", b"mif"):  # HEIC: most browsers cannot show it
            return None
        return "audio", "audio/mp4"
    if head[:4] == b"OggS":
        return "audio", "audio/ogg"
    if head[:4] == b"fLaC":
        return "audio", "audio/flac"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "audio", "audio/webm"
    if head[:3] == b"ID3":
        return "audio", "audio/mpeg"
    if len(head) >= 2 and head[0] == 0xFF:
        if head[1] & 0xE6 == 0xE2:  # MPEG frame sync, layer III
            return "audio", "audio/mpeg"
        if head[1] & 0xF6 == 0xF0:  # ADTS frame sync: AAC
            return "audio", "audio/aac"
    return None


def is_svg(head: bytes) -> bool:
    """Whether a file's first bytes look like SVG (or other XML, which is refused alike)."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return text.startswith((b"<?xml", b"<svg", b"<!doctype svg"))


def probe(cfg: Config, ref: MediaRef) -> Tuple[str, str]:
    """(path, content type) of a local media reference, read from the file's first bytes.

    Raises MediaRefused, MediaMissing (``local_path``) or MediaUnsupported: not an image or
    audio file of a type a browser shows, an SVG, or an image where the item names audio (or
    the other way round)."""
    path = local_path(cfg, ref)
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as e:
        raise MediaMissing(f"{ref.source!r} cannot be read ({e.strerror or e})")
    found = sniff(head)
    if found is None:
        what = "an SVG (not served: it can carry scripts; convert it to PNG)" if is_svg(head) \
            else "not an image or audio format a browser shows"
        raise MediaUnsupported(f"{ref.source!r} is {what}")
    if found[0] != ref.kind:
        raise MediaUnsupported(f"{ref.source!r} is {found[0]} ({found[1]}), and the item names "
                               f"it as its {ref.kind}")
    return path, found[1]


_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*"
                   r"[A-Za-z0-9])?)*$")


def url_origin(url: str) -> Optional[str]:
    """``scheme://host[:port]`` of an http(s) media URL, for the page's Content-Security-
    Policy; None for a URL the page will not load (another scheme, user info, a host that is
    not a plain name or IPv4 address, control characters)."""
    if any(ord(c) < 0x21 or c in "\\\"'<>" for c in url):
        return None
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError:
        return None
    host = u.hostname or ""
    if u.scheme not in ("http", "https") or "@" in u.netloc or not _HOST.match(host):
        return None
    return f"{u.scheme}://{host}" + (f":{port}" if port is not None else "")
