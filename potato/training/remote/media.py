"""Where the worker finds an item's media file (standard library only: runs on every host).

A bundle item may carry ``"media"``, one of::

    {"kind": "image"|"audio", "path": "/abs/path"}          the file in place (local backend)
    {"kind": ..., "sha256": "<hex>", "size": N, "name": "x.png"}
                                                            a file in the host's media cache
    {"kind": ..., "url": "https://..."}                      fetched by the worker's host

Trainers call ``path_for(item["media"], spec)`` and open the file it returns.
"""

import os


class MediaMissing(Exception):
    """An item's media file is not on this host."""


def cache_path(cache_dir, sha256):
    """The content-addressed place of a file in a media cache."""
    return os.path.join(cache_dir, sha256[:2], sha256)


def path_for(media, spec):
    """A local path to the media file ``media`` describes. ``spec``: the run's spec dict
    (its ``media_cache`` names the host's cache directory)."""
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
