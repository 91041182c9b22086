"""A run's bundle: the items, their aggregated labels and splits, and a manifest.

Built on the server (``build``) from plain data the manager reads out of the store, and read
by the worker (``read``) wherever it runs, so this module uses only the standard library.

Layout of ``bundle/``::

    manifest.json   {version, schemas: {name: {type, labels}}, counts, split_seed, splits,
                     digest (sha256 of items.jsonl), ties_skipped: {scheme: n}}
    items.jsonl     {"id", "text", "split", "labels": {scheme: label}} per line; split is one
                    of train, val, test, unlabeled; an item with an image or audio file
                    also has "media" (remote/media.py says its forms)

Labels are aggregated per scheme (by majority vote over annotators, or as the server's
``agree`` says: potato/labels/aggregate.py); an item whose labels do not settle is left out of that
scheme and counted in ``ties_skipped``. Splits come from a seeded hash
of the item id, so an item stays in the same split from run to run.
"""

import hashlib
import json
import os
import tarfile
from collections import Counter

from potato.training.remote.paths import write_json

BUNDLE_VERSION = 1
SPLITS = ("train", "val", "test", "unlabeled")


def split_of(item_id, seed, fractions):
    """'train', 'val' or 'test' for an item id: stable for a given seed and fractions."""
    digest = hashlib.sha256(("%s:%s" % (seed, item_id)).encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0 ** 64
    train, val = fractions[0], fractions[1]
    if u < train:
        return "train"
    if u < train + val:
        return "val"
    return "test"


def majority(labels):
    """The value most annotators gave (a label, a list of labels, a number, a list of spans),
    or None on a tie. Values are compared whole, by their JSON form, so unhashable ones (span
    lists) count like the rest."""
    if not labels:
        return None
    first = {}
    keyed = []
    for v in labels:
        key = json.dumps(v, sort_keys=True)
        first.setdefault(key, v)
        keyed.append(key)
    counts = Counter(keyed).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return first[counts[0][0]]


def label_names(value):
    """The label names in a value: a label, a list of labels, or a list of spans' labels;
    none for a number or a text."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v if isinstance(v, str) else v.get("label") for v in value
                if isinstance(v, str) or isinstance(v, dict) and isinstance(v.get("label"), str)]
    return []


def _count_key(value):
    """How an aggregated value is counted in the manifest's label_counts."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "+".join(value)
    if isinstance(value, list):  # spans: by their labels
        return "+".join(sorted(set(label_names(value))))
    return value if isinstance(value, str) else json.dumps(value)


def build(dest, items, labels, schemas, fractions=(0.7, 0.15, 0.15), seed=0,
          include_unlabeled=False, heldout=None, agree=None):
    """Write a bundle into ``dest``; returns its manifest.

    ``items``: iterable of (id, text) or (id, text, media) where media is a dict for the
    item's "media" (remote/media.py) or None; ``labels``: {item_id: {scheme: [label, ...]}} (one entry
    per annotator); ``schemas``: {name: {"type": ..., "labels": [...]}}. With ``heldout`` (a
    path), the test split's labels go there instead of into the bundle: a machine that runs the
    trainer never sees the answers it is scored against. ``agree(item_id, scheme, votes)``
    gives an item's aggregated label (None on a tie); by default the majority vote.
    """
    agree = agree or (lambda item_id, scheme, votes: majority(votes))
    held = open(heldout, "w", encoding="utf-8") if heldout else None
    os.makedirs(dest, exist_ok=True)
    names = list(schemas)
    counts = dict((s, 0) for s in SPLITS)
    ties = dict((s, 0) for s in names)
    per_label = dict((s, Counter()) for s in names)
    sha = hashlib.sha256()
    path = os.path.join(dest, "items.jsonl")
    with open(path, "w", encoding="utf-8") as out:
        for item in items:
            item_id, text = item[0], item[1]
            media = item[2] if len(item) > 2 else None
            votes = labels.get(item_id)
            agreed = {}
            had_votes = False
            if votes:
                for s in names:
                    v = votes.get(s)
                    if not v:
                        continue
                    had_votes = True
                    top = agree(item_id, s, v)
                    if top is None:
                        ties[s] += 1
                    else:
                        agreed[s] = top
                        per_label[s][_count_key(top)] += 1
            if agreed:
                split = split_of(item_id, seed, fractions)
            elif had_votes:
                continue  # labelled, but every scheme tied: neither training data nor unlabeled
            elif include_unlabeled:
                split = "unlabeled"
            else:
                continue
            counts[split] += 1
            if held is not None and split == "test":
                held.write(json.dumps({"id": item_id, "labels": agreed}) + "\n")
                agreed = {}
            record = {"id": item_id, "text": text, "split": split, "labels": agreed}
            if media:
                record["media"] = media
            line = json.dumps(record) + "\n"  # ASCII: no line breaks but "\n"
            data = line.encode("utf-8")
            sha.update(data)
            out.write(line)
    if held is not None:
        held.close()
    manifest = {
        "version": BUNDLE_VERSION,
        "schemas": schemas,
        "counts": counts,
        "label_counts": dict((s, dict(c)) for s, c in per_label.items()),
        "ties_skipped": ties,
        "split_seed": seed,
        "splits": {"train": fractions[0], "val": fractions[1], "test": fractions[2]},
        "digest": "sha256:" + sha.hexdigest(),
    }
    write_json(os.path.join(dest, "manifest.json"), manifest)
    return manifest


class BundleError(Exception):
    """A bundle that is missing, damaged or does not match its manifest."""


class Bundle:
    def __init__(self, manifest, items):
        self.manifest = manifest
        self.items = items  # list of dicts: id, text, split, labels

    @property
    def schemas(self):
        return self.manifest["schemas"]

    def labelled(self, split, scheme):
        """(text, label) pairs of a split that have a label for ``scheme``."""
        return [(it["text"], it["labels"][scheme]) for it in self.items
                if it["split"] == split and scheme in it["labels"]]


def read(directory, verify=True):
    """Load a bundle directory; with ``verify``, check the items against the manifest digest."""
    try:
        with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        with open(os.path.join(directory, "items.jsonl"), "rb") as f:
            raw = f.read()
    except (OSError, ValueError) as e:
        raise BundleError("the bundle in %s cannot be read: %s" % (directory, e))
    if manifest.get("version") != BUNDLE_VERSION:
        raise BundleError("the bundle in %s has version %r; this worker reads version %d"
                          % (directory, manifest.get("version"), BUNDLE_VERSION))
    if verify and "sha256:" + hashlib.sha256(raw).hexdigest() != manifest.get("digest"):
        raise BundleError("the bundle in %s does not match its manifest's digest (a damaged or "
                          "partial copy)" % directory)
    # "\n" alone ends a line: str.splitlines() would also break inside a text at U+2028,
    # U+0085 and the like, which bundles written with ensure_ascii=False hold raw
    items = [json.loads(line) for line in raw.decode("utf-8").split("\n") if line.strip()]
    return Bundle(manifest, items)


def pack(directory, archive):
    """Pack a bundle directory into one tar.gz (for transport); returns its sha256."""
    tmp = archive + ".part"
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))  # private from the start
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        for name in sorted(os.listdir(directory)):
            tar.add(os.path.join(directory, name), arcname=name)
    os.replace(tmp, archive)
    return file_sha256(archive)


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def safe_extract(archive, dest):
    """Extract a bundle archive, refusing absolute paths, ``..`` and links or devices."""
    dest_abs = os.path.realpath(dest)
    os.makedirs(dest_abs, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
        for m in members:
            target = os.path.realpath(os.path.join(dest_abs, m.name))
            if (os.path.isabs(m.name) or ".." in m.name.replace("\\", "/").split("/")
                    or not (target == dest_abs or target.startswith(dest_abs + os.sep))):
                raise BundleError("the bundle archive has a member outside its directory: %r; "
                                  "refusing to extract it" % m.name)
            if not (m.isfile() or m.isdir()):
                raise BundleError("the bundle archive has a link or special file: %r; refusing "
                                  "to extract it" % m.name)
        for m in members:
            if m.isdir():
                os.makedirs(os.path.join(dest_abs, m.name), exist_ok=True)
                continue
            src = tar.extractfile(m)
            out_path = os.path.join(dest_abs, m.name)
            os.makedirs(os.path.dirname(out_path), exist_ok=True)
            with open(out_path, "wb") as out:
                while True:
                    block = src.read(1 << 20)
                    if not block:
                        break
                    out.write(block)
