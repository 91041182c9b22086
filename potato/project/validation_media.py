"""``potato validate``'s media rules: every image, audio and video file the items name is
looked at.

For a project whose items name media (``item_properties.image_key`` / ``audio_key`` /
``video_key``, or upstream's image, audio and video display fields) the data files are read and
each item's media is resolved the way the server will (``media.probe``): a path that leaves the
media folder is an error (the server never serves it); a missing file is a warning (the
annotate page shows a placeholder), an error when none of the files is there (media_directory
is wrong); a file of a type no browser shows (or an SVG), and a folder or FIFO where a file
should be, are warnings. Each message counts the items and names the first few, each escaped
and shortened (``media.shown``: no terminal escapes reach the terminal). URLs are not fetched:
a note counts them and names their hosts. Nothing here blocks on a FIFO (``media.open_media``).
"""

from __future__ import annotations

import os
from collections import defaultdict
from types import SimpleNamespace
from typing import Dict, List

from potato.project import media
from potato.config.settings import Config, Problem, dotted
from potato.project.data import DataError, load_items

FEW = 5  # files named in a message
LONG = 3 * media.NAME_CAP  # an entry that is a name and why (its name already shortened)
FORMATS = {"image": "PNG, JPEG, GIF or WebP", "audio": "WAV, MP3, OGG, FLAC or M4A",
           "video": "MP4, WebM or Ogg"}


def few(names: List[str], sep: str = ", ", cap: int = media.NAME_CAP) -> str:
    """The first FEW names (escaped, at most ``cap`` characters each), then an ellipsis when
    there are more."""
    return sep.join(media.shown(n, cap) for n in names[:FEW]) + \
        (sep + "…" if len(names) > FEW else "")


def data_errors(cfg: Config) -> List[str]:
    """The errors ``potato validate`` (and so ``potato start``) finds in the items of the data
    files as they are now: what the running server's data-file watcher refuses too (an item
    whose image lies outside the media folder, every file missing, a broken file)."""
    errors: List[str] = []
    media_rules(cfg, SimpleNamespace(notes=[]),
                lambda key, message, backend=None: errors.append(message), lambda *a, **k: None)
    return errors


def media_rules(cfg: Config, report, err, warn) -> None:
    kinds = [k for k, _ in media.keys(cfg)]
    if not kinds:
        return
    root = cfg.media_directory or cfg.task_dir
    if not os.path.isdir(root):
        err(("media_directory",), f"media_directory is {root}, which is not a folder. Give the "
                                  f"folder the items' media paths are relative to "
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
            item_id = str(record.get(cfg.item_properties.id_key))
            found["refused"].append(f"{media.shown(item_id)} ({e})")
            continue
        if ref is None:
            continue
        if ref.is_url:
            origin = media.url_origin(ref.url)
            if origin:
                found["url"].append(origin)
            else:  # which item, and its address as it is (a tab shows as \t)
                found["bad-url"].append("item %s (%s)" % (
                    media.shown(str(record.get(cfg.item_properties.id_key))),
                    ascii(ref.source[:200])))
            continue
        local += 1
        try:
            path, _ = media.probe(cfg, ref)
            size = media.image_size(path) if kind == "image" else None
            if size and size[0] * size[1] > media.MAX_PIXELS:
                found["huge"].append(f"{media.quoted(ref.source)} ({size[0]:,}×{size[1]:,})")
        except media.MediaRefused:
            found["refused"].append(media.shown(ref.source))
        except media.MediaNotAFile as e:
            found["not-file"].append(f"{media.quoted(ref.source)} ({e.what})")
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
                 f"which is never served: {few(found['refused'], cap=LONG)}. Give paths "
                 f"relative to media_directory.")
    missing = found["missing"]
    if missing and len(missing) == local:
        err(key, f"none of the {len(missing):,} {kind} files the items name is in {root}: "
                 f"{few(missing)}; fix media_directory (relative to task_dir) or the paths.")
    elif missing:
        warn(key, f"{len(missing):,} of {total:,} items name {an} {kind} that is not in "
                  f"{root}: {few(missing)}; fix the paths or media_directory.")
    if found["unsupported"]:
        warn(key, f"{len(found['unsupported']):,} of {total:,} items' {kind} files cannot be "
                  f"shown by a browser: {few(found['unsupported'], '; ', LONG)}. Convert them to "
                  f"{FORMATS[kind]}.")
    if found["huge"]:
        warn(key, f"{len(found['huge']):,} of {total:,} items' images are over "
                  f"{media.MAX_PIXELS // 1_000_000} megapixels: {few(found['huge'], '; ', LONG)}. "
                  f"A browser needs 4 bytes a pixel to show one (400 MB at 100 megapixels), so "
                  f"the annotate page may freeze or fail on a laptop: scale them down.")
    if found["not-file"]:
        warn(key, f"{len(found['not-file']):,} of {total:,} items name {an} {kind} that is not a "
                  f"file: {few(found['not-file'], cap=LONG)}; name the {kind} file itself.")
    if found["bad-url"]:
        warn(key, f"{len(found['bad-url']):,} of {total:,} items name {an} {kind} address the "
                  f"annotate page will not load and no run fetches (only plain http:// and "
                  f"https:// addresses, without spaces, tabs or user info): "
                  f"{few(found['bad-url'], '; ')}. Those items are left out of runs whose model "
                  f"reads the {kind}s.")
    if found["url"]:
        hosts = sorted(set(found["url"]))
        report.notes.append(_note(cfg, key, f"the {kind} of {len(found['url']):,} item(s) "
                                            f"are web addresses, not checked here (validate fetches "
                                            f"nothing): the annotators' browsers load them from "
                                            f"{few(hosts)}."))


def _note(cfg: Config, key, message: str) -> Problem:
    return Problem(message, dotted(key), cfg.line_of(key), cfg.path)
