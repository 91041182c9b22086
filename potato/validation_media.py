"""``potato validate``'s media rules: every image and audio file the items name is looked at.

For a project whose items name media (``item_properties.image_key`` / ``audio_key``, or
upstream's image and audio display fields) the data files are read and each item's media is
resolved the way the server will (``media.probe``): a path that leaves the media folder is an
error (the server never serves it); a missing file is a warning (the annotate page shows a
placeholder), an error when none of the files is there (media_directory is wrong); a file of a
type no browser shows (or an SVG) is a warning. Each message counts the items and names the
first few. URLs are not fetched: a note counts them and names their hosts.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Dict, List

from potato import media
from potato.config import Config, Problem, dotted
from potato.data import DataError, load_items

FEW = 5  # files named in a message
FORMATS = {"image": "PNG, JPEG, GIF or WebP", "audio": "WAV, MP3, OGG, FLAC or M4A"}


def few(names: List[str], sep: str = ", ") -> str:
    """The first FEW names, then an ellipsis when there are more."""
    return sep.join(names[:FEW]) + (sep + "…" if len(names) > FEW else "")


def media_rules(cfg: Config, report, err, warn) -> None:
    ip = cfg.item_properties
    kinds = [k for k, key in (("image", ip.image_key), ("audio", ip.audio_key)) if key]
    if not kinds:
        return
    root = cfg.media_directory or cfg.task_dir
    if not os.path.isdir(root):
        err(("media_directory",), f"media_directory is {root}, which is not a folder. Give the "
                                  f"folder the items' image and audio paths are relative to "
                                  f"(relative to task_dir, {cfg.task_dir}).")
        return
    if not cfg.data_files or not all(os.path.isfile(f) for f in cfg.data_files):
        return  # the data_files rule says what is wrong; nothing to look at yet
    try:
        items = load_items(cfg)
    except DataError as e:
        err(("data_files",), str(e))
        return
    for kind in kinds:
        _one_kind(cfg, report, err, warn, kind, items, os.path.realpath(root))


def _one_kind(cfg: Config, report, err, warn, kind: str, items, root: str) -> None:
    found: Dict[str, List[str]] = defaultdict(list)
    local = 0
    for _, _, record in items:
        try:
            ref = media.item_media(cfg, record, (kind,))
        except media.MediaError as e:
            found["refused"].append(f"{record.get(cfg.item_properties.id_key)} ({e})")
            continue
        if ref is None:
            continue
        if ref.is_url:
            origin = media.url_origin(ref.url)
            found["url" if origin else "bad-url"].append(origin or ref.source)
            continue
        local += 1
        try:
            media.probe(cfg, ref)
        except media.MediaRefused:
            found["refused"].append(ref.source)
        except media.MediaMissing:
            found["missing"].append(ref.source)
        except media.MediaUnsupported as e:
            found["unsupported"].append(str(e))
    key = ("item_properties", f"{kind}_key")
    total = len(items)
    an = "an" if kind[0] in "aeiou" else "a"
    if found["refused"]:
        err(key, f"{len(found['refused']):,} of {total:,} items name {an} {kind} outside the "
                 f"media folder {root} (an absolute path, '..', a symlink out, or not a path), "
                 f"which is never served: {few(found['refused'])}. Give paths relative to "
                 f"media_directory.")
    missing = found["missing"]
    if missing and len(missing) == local:
        err(key, f"none of the {len(missing):,} {kind} files the items name is in {root}: "
                 f"{few(missing)}; fix media_directory (relative to task_dir) or the paths.")
    elif missing:
        warn(key, f"{len(missing):,} of {total:,} items name {an} {kind} that is not in "
                  f"{root}: {few(missing)}; fix the paths or media_directory.")
    if found["unsupported"]:
        warn(key, f"{len(found['unsupported']):,} of {total:,} items' {kind} files cannot be "
                  f"shown by a browser: {few(found['unsupported'], '; ')}. Convert them to "
                  f"{FORMATS[kind]}.")
    if found["bad-url"]:
        warn(key, f"{len(found['bad-url']):,} of {total:,} items name {an} {kind} address the "
                  f"annotate page will not load (only plain http:// and https:// addresses): "
                  f"{few(found['bad-url'])}.")
    if found["url"]:
        hosts = sorted(set(found["url"]))
        report.notes.append(_note(cfg, key, f"the {kind} of {len(found['url']):,} item(s) "
                                            f"are web addresses, not checked here (validate fetches "
                                            f"nothing): the annotators' browsers load them from "
                                            f"{few(hosts)}."))


def _note(cfg: Config, key, message: str) -> Problem:
    return Problem(message, dotted(key), cfg.line_of(key), cfg.path)
