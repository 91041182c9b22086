"""A remote run's media, server side: each file listed in the bundle by sha256, size and name.

The local backend's worker reads the project's files in place (``{"kind", "path"}``); a run
that executes elsewhere gets ``{"kind", "sha256", "size", "name"}`` instead, and the files
travel once per host into its media cache (remote/media_cache.py). Hashing 5,000 files at each
run would be slow: the hashes are kept in ``training/media-hashes.json`` in the output folder,
by (path, mtime, size), so a file is hashed again only when it changes.

The run directory's ``media.json`` ({sha: {"path", "size", "name"}}) says which files a run
may fetch (the agent endpoint serves only those) and where they are on the server.
"""

import hashlib
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from potato.config.settings import Config
from potato.training.remote.paths import read_json, write_json

HASHES_FILE = "media-hashes.json"


def hashes_path(cfg: Config) -> str:
    return os.path.join(cfg.output_dir, "training", HASHES_FILE)


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                return h.hexdigest()
            h.update(block)


class HashCache:
    """sha256 of files by (path, mtime_ns, size), saved between runs."""

    def __init__(self, path: str):
        self.path = path
        self.hashed = 0  # files hashed (not found in the cache) since loading
        try:
            data = read_json(path)
            self.old = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            self.old = {}
        self.new: Dict[str, List[Any]] = {}

    def sha256(self, path: str) -> Tuple[str, int]:
        st = os.stat(path)
        key = [st.st_mtime_ns, st.st_size]
        entry = self.new.get(path) or self.old.get(path)
        if isinstance(entry, list) and len(entry) == 3 and entry[:2] == key:
            sha = entry[2]
        else:
            sha = file_sha256(path)
            self.hashed += 1
        self.new[path] = key + [sha]
        return sha, st.st_size

    def save(self) -> None:
        """Keep the entries of this run's files (the project's media now): bounded."""
        if self.new != self.old:
            write_json(self.path, self.new)


def to_cache_form(cfg: Config, items: List[tuple], index_path: str,
                  log=lambda m: None) -> List[tuple]:
    """``items`` ((id, text, media) from prepare) with each in-place file turned into its
    cache form; writes the run's media index to ``index_path``."""
    cache = HashCache(hashes_path(cfg))
    index: Dict[str, Dict[str, Any]] = {}
    out = []
    for item in items:
        media: Optional[Dict[str, Any]] = item[2]
        if media and media.get("path"):
            try:
                sha, size = cache.sha256(media["path"])
            except OSError as e:
                log("media of item %s cannot be read (%s); the item travels without it"
                    % (item[0], e.strerror or e))
                out.append((item[0], item[1], None))
                continue
            name = os.path.basename(media["path"])
            index.setdefault(sha, {"path": media["path"], "size": size, "name": name})
            media = {"kind": media["kind"], "sha256": sha, "size": size, "name": name}
        out.append((item[0], item[1], media))
    if index or os.path.exists(index_path):
        write_json(index_path, index)
    if cache.new:
        try:
            cache.save()
        except OSError as e:
            log("could not save the media hashes in %s (%s); the next run hashes again"
                % (cache.path, e.strerror or e))
        total = sum(v["size"] for v in index.values())
        log("media: %d file%s (%s MB) listed by sha256; %d hashed now, the rest known"
            % (len(index), "" if len(index) == 1 else "s", mb(total), cache.hashed))
    return out


def mb(n: int) -> str:
    return "{:,}".format(int(round(n / (1 << 20)))) if n >= (1 << 20) or n == 0 else "%.1f" % (
        n / (1 << 20))


def load_index(path: str) -> Dict[str, Dict[str, Any]]:
    """A run's media index ({} when it has none or it cannot be read)."""
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def dumps_wanted(index: Dict[str, Dict[str, Any]]) -> bytes:
    return json.dumps([[sha, v["size"]] for sha, v in sorted(index.items())]).encode()
