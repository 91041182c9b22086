"""The one export, the same bytes from the admin page and ``potato annotations export``: one row
per label (item, scheme, annotator, label, when, the item's aggregated label, text) or one row
per item (its labels by annotator, aggregated labels and the model's predictions with their
confidences), as JSON Lines or CSV, under a file name that carries the project and the time;
and the per-label counts the admin page shows. docs/annotation-server.md documents the columns.

CSV cells that a spreadsheet would run as a formula (starting with =, +, -, @, TAB or CR) get a
leading apostrophe: item texts and labels come from data files and annotators, not from the
admin.
"""

import csv
import io
import json
import re
import time
from collections import Counter
from typing import Any, BinaryIO, Dict, Iterator, Optional, TextIO

from potato.config.settings import Config, Scheme
from potato.project import assignment
from potato.project.store import Store
from potato.labels.aggregate import aggregate
from potato.training.remote.bundle import label_names

COLUMNS = ("item_id", "scheme", "annotator", "label", "labelled_at", "aggregated_label", "text",
           "assigned_because")  # the last: how the item was chosen for the annotator, where
#                                recorded (assignment limits, active learning's strategy, score
#                                and run); "" where every annotator walks every item
ROW_MODES = ("label", "item")  # one row per label, one row per item
FORMATS = ("jsonl", "csv")
ITEM_COLUMNS = ("labels", "aggregated_label", "prediction", "confidence")  # per scheme
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _label_text(label: Any) -> str:
    """A value whose scheme is no longer in the config (so no kind writes it): a list of labels
    joined by ";", other lists and mappings (spans, a removed span scheme's) as JSON."""
    if isinstance(label, list) and all(isinstance(x, str) for x in label):
        return ";".join(label)
    if isinstance(label, (list, dict)):
        return json.dumps(label, ensure_ascii=False)
    return "" if label is None else str(label)


def aggregated(cfg: Optional[Config], records, method: Optional[str] = None
               ) -> Dict[str, Dict[str, Any]]:
    """``{scheme: {item_id: aggregated label}}`` of annotation rows, by ``method`` or else the
    config's ``model_training.aggregation`` (the majority vote without a config, or for a
    scheme no longer in it)."""
    votes: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for r in records:
        votes.setdefault(r["scheme"], {}).setdefault(r["item_id"], {})[r["annotator"]] = \
            json.loads(r["label"])
    method = method or (cfg.model_training.aggregation if cfg is not None else "majority")
    out = {}
    for scheme, by_item in votes.items():
        s = cfg.scheme(scheme) if cfg is not None else None
        out[scheme] = aggregate(s.annotation_type if s else None, by_item,
                                method if s else "majority").labels
    return out


def rows(store: Store, cfg: Optional[Config] = None) -> Iterator[Dict[str, Any]]:
    texts = {r["id"]: r["text"] for r in store.conn().execute("SELECT id, text FROM items")}
    records = store.conn().execute("SELECT item_id, scheme, annotator, label, updated_at FROM "
                                   "annotations ORDER BY item_id, scheme, annotator").fetchall()
    decided = aggregated(cfg, records)
    why = assignment.reasons(store)
    for r in records:
        yield {"item_id": r["item_id"], "scheme": r["scheme"], "annotator": r["annotator"],
               "label": json.loads(r["label"]),
               "labelled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r["updated_at"])),
               "aggregated_label": decided[r["scheme"]].get(r["item_id"]),
               "text": texts.get(r["item_id"], ""),
               "assigned_because": why.get((r["annotator"], r["item_id"]), "")}


def jsonl(store: Store, cfg: Optional[Config] = None) -> bytes:
    return build(store, cfg, "label", "jsonl")


def _lines(out: TextIO, records) -> None:
    for r in records:
        out.write(json.dumps(r, ensure_ascii=False) + "\n")


def _label_jsonl(out: TextIO, store: Store, cfg: Optional[Config]) -> None:
    _lines(out, rows(store, cfg))


def _cell(value: Any, scheme: Optional[Scheme] = None) -> str:
    if isinstance(value, str):
        text = value
    elif scheme is not None and scheme.kind is not None:
        text = scheme.kind.cell(value)  # each kind writes its own value (spans as JSON)
    else:
        text = _label_text(value)
    return "'" + text if text.startswith(FORMULA) else text


def _label_csv(out: TextIO, store: Store, cfg: Optional[Config]) -> None:
    w = csv.writer(out)
    w.writerow(COLUMNS)
    for r in rows(store, cfg):
        scheme = cfg.scheme(r["scheme"]) if cfg is not None else None
        w.writerow([_cell(r[c], scheme if c in ("label", "aggregated_label") else None)
                    for c in COLUMNS])


def item_rows(store: Store, cfg: Optional[Config] = None) -> Iterator[Dict[str, Any]]:
    """One row per item that is active or holds labels: ``{id, text, labels: {scheme:
    [{annotator, label}]}, aggregated_label: {scheme: value or None}, predictions: {scheme:
    {label, confidence, run_id}}}``."""
    labels = store.all_labels()
    preds = store.all_predictions()
    records = store.conn().execute("SELECT item_id, scheme, annotator, label FROM annotations "
                                   "ORDER BY item_id, scheme, annotator").fetchall()
    decided = aggregated(cfg, records)
    for row in store.all_items():
        if not row["active"] and row["id"] not in labels:
            continue
        mine = labels.get(row["id"], {})
        yield {"id": row["id"], "text": row["text"], "labels": mine,
               "aggregated_label": {s: decided.get(s, {}).get(row["id"]) for s in mine},
               "predictions": preds.get(row["id"], {})}


def _item_csv(out: TextIO, store: Store, cfg: Optional[Config]) -> None:
    names = [s.name for s in cfg.schemes] if cfg is not None else sorted(
        {r[0] for r in store.conn().execute("SELECT DISTINCT scheme FROM annotations")})
    w = csv.writer(out)
    w.writerow(["id"] + ["%s:%s" % (n, c) for n in names for c in ITEM_COLUMNS] + ["text"])
    for r in item_rows(store, cfg):
        cells = [_cell(r["id"])]
        for n in names:
            scheme = cfg.scheme(n) if cfg is not None else None
            votes = {v["annotator"]: v["label"] for v in r["labels"].get(n, [])}
            pred = r["predictions"].get(n) or {}
            cells += [json.dumps(votes, ensure_ascii=False, sort_keys=True) if votes else "",
                      _cell(r["aggregated_label"].get(n), scheme),
                      _cell(pred.get("label"), scheme),
                      "" if pred.get("confidence") is None else repr(pred["confidence"])]
        w.writerow(cells + [_cell(r["text"])])


def write(out: TextIO, store: Store, cfg: Optional[Config], rows: str = "label",
          fmt: str = "jsonl") -> None:
    """Write the export, row by row, to the text stream ``out`` (opened with ``newline=""``:
    CSV rows end in CRLF, JSON lines in LF, as written): ``rows`` one of ROW_MODES, ``fmt``
    one of FORMATS. A file the size of the labels is never held in memory."""
    if rows == "item":
        if fmt == "csv":
            _item_csv(out, store, cfg)
        else:
            _lines(out, item_rows(store, cfg))
    elif fmt == "csv":
        _label_csv(out, store, cfg)
    else:
        _label_jsonl(out, store, cfg)


def build(store: Store, cfg: Optional[Config], rows: str = "label", fmt: str = "jsonl") -> bytes:
    """The export's bytes (``write`` to memory: for small exports and tests)."""
    buf = io.StringIO(newline="")
    write(buf, store, cfg, rows, fmt)
    return buf.getvalue().encode("utf-8")


def to_file(f: BinaryIO, store: Store, cfg: Optional[Config], rows: str = "label",
            fmt: str = "jsonl") -> int:
    """``write`` into the binary file ``f`` (UTF-8); returns its size in bytes."""
    text = io.TextIOWrapper(f, encoding="utf-8", newline="", write_through=False)
    try:
        write(text, store, cfg, rows, fmt)
        text.flush()
    finally:
        text.detach()
    return f.tell()


def filename(cfg: Config, rows: str, fmt: str, now: Optional[float] = None) -> str:
    """``<project>-labels|items|upstream-<UTC time>.<fmt>``: the project's name as letters, digits, - and
    _ only (so it is safe in a header and on any file system)."""
    slug = re.sub(r"[^A-Za-z0-9_]+", "-", cfg.annotation_task_name or "").strip("-")[:60]
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    word = {"label": "labels", "item": "items"}.get(rows, rows)
    return "%s-%s-%s.%s" % (slug.lower() or "potato", word, stamp, fmt)


def label_counts(cfg: Config, store: Store) -> Dict[str, Dict[str, int]]:
    """Per scheme whose values are classes (choices, spans, a Likert scale's points): how many
    items have each in their majority value (ties and unlabelled left out). Always the majority
    vote: the admin page counts on every load, and Dawid-Skene over many items takes seconds."""
    records = store.conn().execute(
        "SELECT item_id, scheme, annotator, label FROM annotations").fetchall()
    out = {s.name: Counter({str(c): 0 for c in s.kind.training_schema().get("labels") or []})
           for s in cfg.schemes if s.kind is not None}
    out = {k: v for k, v in out.items() if v}  # numbers and free text have no classes
    for scheme, by_item in aggregated(cfg, records, "majority").items():
        for top in by_item.values():
            if scheme in out and top is not None:
                points = [top] if isinstance(top, int) and not isinstance(top, bool) else []
                for one in dict.fromkeys(label_names(top) or points):  # once per label
                    if str(one) in out[scheme]:
                        out[scheme][str(one)] += 1
    return {k: dict(v) for k, v in out.items()}
