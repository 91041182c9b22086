"""The admin's export: one row per label (item, scheme, annotator, label, when) with the item's
aggregated (majority) label, as JSON Lines or CSV; and the per-label counts the admin page shows.

CSV cells that a spreadsheet would run as a formula (starting with =, +, -, @, TAB or CR) get a
leading apostrophe: item texts and labels come from data files and annotators, not from the
admin.
"""

import csv
import io
import json
import time
from collections import Counter
from typing import Any, Dict, Iterator, List, Optional

from potato.config import Config, Scheme
from potato.store import Store
from potato.training.remote.bundle import label_names, majority

COLUMNS = ("item_id", "scheme", "annotator", "label", "labelled_at", "aggregated_label", "text")
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _label_text(label: Any) -> str:
    return ";".join(label) if isinstance(label, list) else ("" if label is None else str(label))


def rows(store: Store) -> Iterator[Dict[str, Any]]:
    texts = {r["id"]: r["text"] for r in store.conn().execute("SELECT id, text FROM items")}
    votes: Dict[tuple, List[Any]] = {}
    records = store.conn().execute("SELECT item_id, scheme, annotator, label, updated_at FROM "
                                   "annotations ORDER BY item_id, scheme, annotator").fetchall()
    for r in records:
        votes.setdefault((r["item_id"], r["scheme"]), []).append(json.loads(r["label"]))
    for r in records:
        yield {"item_id": r["item_id"], "scheme": r["scheme"], "annotator": r["annotator"],
               "label": json.loads(r["label"]),
               "labelled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r["updated_at"])),
               "aggregated_label": majority(votes[(r["item_id"], r["scheme"])]),
               "text": texts.get(r["item_id"], "")}


def jsonl(store: Store) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows(store)).encode("utf-8")


def _cell(value: Any, scheme: Optional[Scheme] = None) -> str:
    if isinstance(value, str):
        text = value
    elif scheme is not None and scheme.kind is not None:
        text = scheme.kind.cell(value)  # each kind writes its own value (spans as JSON)
    else:
        text = _label_text(value)
    return "'" + text if text.startswith(FORMULA) else text


def csv_bytes(store: Store, cfg: Config) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    for r in rows(store):
        scheme = cfg.scheme(r["scheme"])
        w.writerow([_cell(r[c], scheme if c in ("label", "aggregated_label") else None)
                    for c in COLUMNS])
    return buf.getvalue().encode("utf-8")


def label_counts(cfg: Config, store: Store) -> Dict[str, Dict[str, int]]:
    """Per scheme whose values are labels (choices, spans): how many items have each label in
    their aggregated value (ties and unlabelled left out)."""
    votes: Dict[tuple, List[Any]] = {}
    for item_id, scheme, label in store.conn().execute(
            "SELECT item_id, scheme, label FROM annotations"):
        votes.setdefault((item_id, scheme), []).append(json.loads(label))
    out = {s.name: Counter({label: 0 for label in s.labels}) for s in cfg.schemes
           if s.kind is not None and s.kind.label_values}
    for (_, scheme), labels in votes.items():
        top = majority(labels)
        if scheme in out and top is not None:
            for one in dict.fromkeys(label_names(top)):  # an item counts once per label
                if one in out[scheme]:
                    out[scheme][one] += 1
    return {k: dict(v) for k, v in out.items()}
