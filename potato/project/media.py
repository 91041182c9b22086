"""An item's media: the image, audio or video file an item names, where the server finds it.

An item names its media in the field that ``item_properties.image_key`` (or ``audio_key``,
``video_key``; upstream's image, audio and video display fields set them) gives: a path relative to ``media_directory`` (``task_dir`` by default; upstream's
``/media/<path>`` is the same path) or an http(s) URL.
``item_media`` reads that field from the item's record (as read from its data file) and says
what it is; it never touches the disk. ``local_path`` resolves a relative path to a file
inside the media directory, refusing every way out of it (``..``, absolute paths, symlinks
that lead outside), so the server, ``potato validate`` and the bundle builder all apply the
same rule.

``open_media`` goes one step further for a local file: it opens it once (never following a
symlink at the last step, never blocking on a FIFO), then checks the opened file itself, so a
folder swapped for a symlink between the check and the open is caught: it must be a regular
file (``fstat``) whose real path (``/proc/self/fd``, or where there is no /proc a walk from the
media folder that opens each folder with ``O_NOFOLLOW``) is inside the media folder. It reads
the file's first bytes from that descriptor and says which content type it is (``sniff``),
never trusting the extension, so the server sends a type the browser will honour with
``nosniff`` (and the body from the same descriptor), and ``potato validate`` reports a file no
browser could show. SVG is refused: an SVG is a document that can carry scripts. ``probe`` is
``open_media`` for those who only need the answer.

``shown`` is how messages show a media name: control characters escaped, at most
``NAME_CAP`` characters.
"""

from __future__ import annotations

import errno
import os
import re
import unicodedata
import stat
from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Tuple
from urllib.parse import urlsplit

from potato.config.settings import Config

KINDS = ("image", "audio", "video")
# Containers that hold sound or moving pictures alike: their first bytes say which container,
# not which; an item that names the file as its video is served it as video.
VIDEO_OF = {"audio/mp4": "video/mp4", "audio/webm": "video/webm", "audio/ogg": "video/ogg"}
_OTHER_URL = re.compile(r"^([a-z][a-z0-9+.-]*://|(data|javascript|file|blob|vbscript):)")
NAME_CAP = 120  # characters of a media name a message shows
PROC_FD = "/proc/self/fd"  # where an open descriptor's path is read (Linux)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# One open of a media file: no symlink as its last part, no wait on a FIFO or device.
OPEN_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC


def shown(name: str, cap: int = NAME_CAP) -> str:
    """``name`` as a message shows it: every character that is not printable (terminal
    escapes, NUL, newlines, bidi controls) written as ``\\xNN`` / ``\\uNNNN``, and at most
    ``cap`` characters (then an ellipsis)."""
    out = "".join(c if c.isprintable() else
                  ("\\x%02x" % ord(c) if ord(c) < 0x100 else
                   "\\u%04x" % ord(c) if ord(c) < 0x10000 else "\\U%08x" % ord(c))
                  for c in name[:cap + 1])
    return out if len(out) <= cap and len(name) <= cap else out[:cap] + "…"


def quoted(name: str, cap: int = NAME_CAP) -> str:
    """``shown(name)`` in quotes."""
    return "'" + shown(name, cap) + "'"


class MediaError(Exception):
    """A media reference that cannot be used; the message says which and why."""


class MediaRefused(MediaError):
    """A path that would leave the media folder (``..``, absolute, a symlink out, NUL)."""


class MediaMissing(MediaError):
    """No such file in the media folder."""


class MediaNotAFile(MediaMissing):
    """A folder, FIFO, device or socket where the item names a file; ``what`` says which."""

    def __init__(self, message: str, what: str):
        super().__init__(message)
        self.what = what


class MediaChanged(MediaMissing):
    """The file (or a folder on its way) was replaced while it was being looked up, say by a
    symlink: nothing is served, and the next request sees what is there then."""


class MediaUnsupported(MediaError):
    """A file whose bytes are no image or audio type a browser shows (or an SVG)."""


@dataclass(frozen=True)
class MediaRef:
    kind: str                  # one of KINDS
    source: str                # the value as the item gives it
    url: Optional[str] = None  # set for http(s) media: fetched by whoever needs the bytes

    @property
    def is_url(self) -> bool:
        return self.url is not None


def keys(cfg: Config) -> List[Tuple[str, str]]:
    """(kind, item field) of each kind of media the project's items may name."""
    ip = cfg.item_properties
    return [(k, getattr(ip, k + "_key")) for k in KINDS if getattr(ip, k + "_key")]


def item_media(cfg: Config, record: Dict[str, Any],
               kinds: Tuple[str, ...] = KINDS) -> Optional[MediaRef]:
    """The media an item names (its image_key field first, then audio_key, video_key), or
    None. ``kinds``: only these (the page shows an item's image, audio and video each)."""
    for kind, key in keys(cfg):
        if kind not in kinds:
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
            raise MediaError(f"the item's {key!r} field is {quoted(value)}: only http(s) "
                             f"addresses and paths in the media folder are shown")
        return MediaRef(kind, value)
    return None


# Upstream Potato serves media_directory at /media/, and its examples name files that way
# ("/media/street.jpg"): the file street.jpg in the media folder, as any relative path.
UPSTREAM_ROUTE = "/media/"


def local_path(cfg: Config, ref: MediaRef) -> str:
    """The file a relative media reference names, inside ``cfg.media_directory``, by its name
    (to read it, use ``open_media``: it checks the file it opened).

    Raises MediaRefused for an absolute path, a path that leaves the folder (also through a
    symlink), MediaMissing for no such file, MediaNotAFile for a folder, FIFO and the like."""
    if ref.is_url:
        raise MediaError(f"{quoted(ref.source)} is a URL, not a file in the media folder")
    root = os.path.realpath(cfg.media_directory or cfg.task_dir)
    name = quoted(ref.source)
    rel = ref.source.replace("\\", "/")
    if rel.startswith(UPSTREAM_ROUTE):  # upstream's URL of a file in its media_directory
        rel = rel[len(UPSTREAM_ROUTE):]
    if "\x00" in rel or os.path.isabs(rel) or rel.startswith("/"):
        raise MediaRefused(f"{name} is not a path relative to the media folder {root}")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise MediaRefused(f"{name} leaves the media folder {root}")
    try:  # realpath reads each link it meets: one swapped meanwhile is an OSError (EINVAL)
        path = os.path.realpath(os.path.join(root, *parts))
    except (OSError, ValueError) as e:
        raise MediaChanged(f"{name} changed while it was looked up in the media folder {root} "
                           f"({getattr(e, 'strerror', None) or e})")
    if not _inside(root, path):
        raise MediaRefused(f"{name} leads outside the media folder {root} (a symlink)")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise MediaMissing(f"{name}: no such file in the media folder {root}")
    _regular(ref, mode, root)
    return path


def _inside(root: str, path: str) -> bool:
    return os.path.isabs(path) and os.path.commonpath([root, path]) == root


def _regular(ref: MediaRef, mode: int, root: str) -> None:
    """Raises MediaNotAFile unless ``mode`` is a regular file's."""
    if stat.S_ISREG(mode):
        return
    what = "a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode) \
        else "a socket" if stat.S_ISSOCK(mode) else "a device"
    raise MediaNotAFile(f"{quoted(ref.source)} is {what}, not a file, in the media folder "
                        f"{root}", what)


class Opened(NamedTuple):
    fd: int       # open for reading; the caller closes it
    path: str     # the file's real path, inside the media folder
    ctype: str    # its content type, from its first bytes


def open_media(cfg: Config, ref: MediaRef) -> Opened:
    """The media file opened once and checked as opened: a regular file inside the media
    folder, of a type a browser shows as the item's ``ref.kind``. Raises what ``local_path``
    and ``probe`` raise; MediaRefused too when a folder on the way became a symlink out."""
    path = local_path(cfg, ref)
    root = os.path.realpath(cfg.media_directory or cfg.task_dir)
    try:
        fd = _open_inside(root, path)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
            raise MediaRefused(f"{quoted(ref.source)} leads outside the media folder {root} "
                               f"(it changed into a symlink)")
        if e.errno == errno.ENOENT:
            raise MediaMissing(f"{quoted(ref.source)}: no such file in the media folder {root}")
        raise MediaMissing(f"{quoted(ref.source)} cannot be read ({e.strerror or e})")
    try:
        _regular(ref, os.fstat(fd).st_mode, root)
        return Opened(fd, path, content_type(ref, os.pread(fd, SNIFF_BYTES, 0)))
    except OSError as e:
        os.close(fd)
        raise MediaMissing(f"{quoted(ref.source)} cannot be read ({e.strerror or e})")
    except BaseException:
        os.close(fd)
        raise


def _open_inside(root: str, path: str) -> int:
    """A descriptor of ``path`` (a real path inside ``root``) that surely is a file inside
    ``root``, whatever was renamed meanwhile: its path as opened is read back from /proc;
    without /proc each folder from ``root`` down is opened with O_NOFOLLOW. OSError (EXDEV)
    for a file that turned out to lie outside."""
    if not os.path.isdir(PROC_FD):
        return _walk_open(root, path)
    fd = os.open(path, OPEN_FLAGS)
    try:
        real = os.readlink(os.path.join(PROC_FD, str(fd)))
    except OSError:
        os.close(fd)
        return _walk_open(root, path)
    if not _inside(root, real):
        os.close(fd)
        raise OSError(errno.EXDEV, "the file opened lies outside the media folder")
    return fd


def _walk_open(root: str, path: str) -> int:
    """``path`` opened from ``root`` one folder at a time, none of them through a symlink."""
    parts = os.path.relpath(path, root).split(os.sep)
    dfd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            nfd = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=dfd)
            os.close(dfd)
            dfd = nfd
        return os.open(parts[-1], OPEN_FLAGS, dir_fd=dfd)
    finally:
        os.close(dfd)


SNIFF_BYTES = 32  # enough for every signature below


def sniff(head: bytes) -> Optional[Tuple[str, str]]:
    """(kind, content type) of a file from its first ``SNIFF_BYTES`` bytes, or None when it is
    none of the image and audio formats browsers show (PNG, JPEG, GIF, WebP, BMP, AVIF; WAV,
    MP3, AAC, Ogg, FLAC, MP4/M4A, WebM). SVG is None too (see ``is_svg``). MP4, WebM and Ogg
    are said to be audio: they hold video as well (``VIDEO_OF``, ``content_type``)."""
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

    Raises MediaRefused, MediaMissing (``local_path``, ``open_media``) or MediaUnsupported
    (``content_type``). Never blocks on a FIFO or device."""
    opened = open_media(cfg, ref)
    os.close(opened.fd)
    return opened.path, opened.ctype


# An image beyond this many pixels takes 4 bytes a pixel in the annotator's browser (400 MB
# at 100 megapixels): potato validate warns, as a page that shows it may freeze or fail.
MAX_PIXELS = 100_000_000
SIZE_BYTES = 256 << 10  # how far into a JPEG its frame header is looked for (EXIF comes first)


JPEG_SEGMENTS = 1000  # segments skipped (by seeking) before a JPEG's frame header


def image_size(path: str) -> Optional[Tuple[int, int]]:
    """(width, height) of a PNG, GIF, BMP, WebP or JPEG image from its header, or None when
    the file does not say (another format, a damaged header). Reads at most SIZE_BYTES, and
    in a JPEG skips segments by seeking (a large EXIF or ICC block may come first)."""
    try:
        with open(path, "rb") as f:
            head = f.read(SIZE_BYTES)
            if head.startswith(b"\xff\xd8"):
                return _jpeg_size(f)
    except OSError:
        return None
    return _size_of(head)


def _jpeg_size(f) -> Optional[Tuple[int, int]]:
    """A JPEG's size from its frame header, its segments skipped by seeking."""
    pos = 2
    for _ in range(JPEG_SEGMENTS):
        f.seek(pos)
        head = f.read(9)
        if len(head) < 4 or head[0] != 0xFF:
            return None
        marker = head[1]
        if marker == 0xFF:  # fill bytes
            pos += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            pos += 2
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a frame header
            if len(head) < 9:
                return None
            return int.from_bytes(head[7:9], "big"), int.from_bytes(head[5:7], "big")
        length = int.from_bytes(head[2:4], "big")
        if length < 2:
            return None
        pos += 2 + length
    return None


def _size_of(h: bytes) -> Optional[Tuple[int, int]]:
    """The size of a PNG, GIF, BMP or WebP image from its first bytes (JPEG: ``_jpeg_size``)."""
    if h.startswith(b"\x89PNG\r\n\x1a\n") and h[12:16] == b"IHDR" and len(h) >= 24:
        return int.from_bytes(h[16:20], "big"), int.from_bytes(h[20:24], "big")
    if h[:6] in (b"GIF87a", b"GIF89a") and len(h) >= 10:
        return int.from_bytes(h[6:8], "little"), int.from_bytes(h[8:10], "little")
    if h[:2] == b"BM" and len(h) >= 26:
        if int.from_bytes(h[14:18], "little") == 12:  # an OS/2 1.x header: 16-bit sizes
            return int.from_bytes(h[18:20], "little"), int.from_bytes(h[20:22], "little")
        return (abs(int.from_bytes(h[18:22], "little", signed=True)),
                abs(int.from_bytes(h[22:26], "little", signed=True)))
    if h[:4] == b"RIFF" and h[8:12] == b"WEBP" and len(h) >= 30:
        chunk = h[12:16]
        if chunk == b"VP8X":
            return 1 + int.from_bytes(h[24:27], "little"), 1 + int.from_bytes(h[27:30], "little")
        if chunk == b"VP8 ":
            return (int.from_bytes(h[26:28], "little") & 0x3FFF,
                    int.from_bytes(h[28:30], "little") & 0x3FFF)
        if chunk == b"VP8L" and len(h) >= 25:
            bits = int.from_bytes(h[21:25], "little")
            return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
        return None
    return None


def content_type(ref: MediaRef, head: bytes) -> str:
    """The content type of a file of the item's ``ref`` from its first bytes; raises
    MediaUnsupported: not an image, audio or video file of a type a browser shows, an SVG, or
    an image where the item names audio or video (or the other way round)."""
    found = sniff(head)
    name = quoted(ref.source)
    if found is None:
        what = "an SVG (not served: it can carry scripts; convert it to PNG)" if is_svg(head) \
            else "not an image, audio or video format a browser shows"
        raise MediaUnsupported(f"{name} is {what}")
    if ref.kind == "video" and found[1] in VIDEO_OF:
        return VIDEO_OF[found[1]]
    if found[0] != ref.kind:
        raise MediaUnsupported(f"{name} is {found[0]} ({found[1]}), and the item names it as "
                               f"its {ref.kind}")
    return found[1]


URL_MAX = 2000  # a longer media address is no address a browser or a host should load

_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*"
                   r"[A-Za-z0-9])?)*$")


def url_origin(url: str) -> Optional[str]:
    """``scheme://host[:port]`` of an http(s) media URL, for the page's Content-Security-
    Policy; None for a URL the page will not load (another scheme, user info, a host that is
    not a plain name or IPv4 address, control characters)."""
    if len(url) > URL_MAX or any(ord(c) < 0x21 or c in "\\\"'<>" or
                                 unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Zs")
                                 for c in url):
        return None  # (a bidi override would make the address read as another)
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError:
        return None
    host = u.hostname or ""
    if u.scheme not in ("http", "https") or "@" in u.netloc or not _HOST.match(host):
        return None
    return f"{u.scheme}://{host}" + (f":{port}" if port is not None else "")
