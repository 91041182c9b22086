"""An item's media: the image or audio file an item names, where the server finds it.

An item names its media in the field that ``item_properties.image_key`` (or ``audio_key``)
gives: a path relative to ``media_directory`` (``task_dir`` by default) or an http(s) URL.
``item_media`` reads that field from the item's record (as read from its data file) and says
what it is; it never touches the disk. ``local_path`` resolves a relative path to a file
inside the media directory, refusing every way out of it (``..``, absolute paths, symlinks
that lead outside), so the server, ``potato validate`` and the bundle builder all apply the
same rule.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Optional

from potato.config import Config

KINDS = ("image", "audio")


class MediaError(Exception):
    """A media reference that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class MediaRef:
    kind: str                  # "image" or "audio"
    source: str                # the value as the item gives it
    url: Optional[str] = None  # set for http(s) media: fetched by whoever needs the bytes

    @property
    def is_url(self) -> bool:
        return self.url is not None


def item_media(cfg: Config, record: Dict[str, Any]) -> Optional[MediaRef]:
    """The media an item names (its image_key field first, then audio_key), or None."""
    ip = cfg.item_properties
    for kind, key in (("image", ip.image_key), ("audio", ip.audio_key)):
        if not key:
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
        raise MediaError(f"{ref.source!r} is not a path relative to the media folder {root}")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise MediaError(f"{ref.source!r} leaves the media folder {root}")
    path = os.path.realpath(os.path.join(root, *parts))
    if os.path.commonpath([root, path]) != root:
        raise MediaError(f"{ref.source!r} leads outside the media folder {root} (a symlink)")
    if not os.path.isfile(path):
        raise MediaError(f"{ref.source!r}: no such file in the media folder {root}")
    return path
