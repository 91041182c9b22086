"""Upstream Potato's output layout, for a lab's analysis scripts: one folder per annotator
holding ``annotated_instances.jsonl``, one line per item that annotator labelled::

    {"id": "r1", "displayed_text": "...",
     "label_annotations": {"sentiment": {"positive": "true"}, "fluency": {"scale_4": "4"}},
     "span_annotations": [{"schema": "ner", "annotation": "PER", "start": 0, "end": 3,
                           "span": "Ana"}],
     "behavioral_data": {}}

``potato annotations export --format upstream -o DIR`` writes it (the admin page offers it as a
zip); ``potato annotations import --format upstream DIR`` reads it back, all or nothing, every
value checked by its scheme (``check_label``) as any import is. Each kind writes its value as a
``label_annotations`` entry and reads it back (``Kind.upstream_cell``, ``from_upstream_cell``);
a kind with ``upstream_spans`` puts its spans in ``span_annotations`` (its empty answer: an
empty entry).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import sys
import zipfile
from typing import Any, Dict, Iterator, List, Optional, Tuple
from urllib.parse import quote, unquote

from potato.labels.annotations import LabelError, check_label, open_store_or_say
from potato.config.settings import Config
from potato.project.data import jsonl_lines

FILE = "annotated_instances.jsonl"
MAX_FOLDER = 200  # characters of an annotator's folder name
SAFE_NAME = re.compile(r"^[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]{0,63}$")


def folder_name(annotator: str) -> str:
    """A folder name for an annotator that can never leave the export folder; a long name is
    cut and ends with a hash of the whole name, so two long names never share a folder."""
    if SAFE_NAME.match(annotator) and annotator not in (".", ".."):
        return annotator
    name = quote(annotator, safe="").replace(".", "%2E")
    if len(name) > MAX_FOLDER:
        name = name[:MAX_FOLDER - 17] + "~" + hashlib.sha256(annotator.encode()).hexdigest()[:16]
    return name or "%00"


class FolderClash(Exception):
    """Two annotators whose export folders would be the same."""


def _folders(annotators: List[str]) -> Dict[str, str]:
    """{annotator: folder}; FolderClash when two would share one, on any file system (folders
    that differ in case only are one folder on macOS and Windows)."""
    out: Dict[str, str] = {}
    taken: Dict[str, str] = {}  # folder, case folded -> annotator
    for name in annotators:
        folder = folder_name(name)
        other = taken.setdefault(folder.casefold(), name)
        if other != name:
            raise FolderClash(f"the annotators {other!r} and {name!r} would both be exported to "
                              f"the folder {folder!r}; rename one (potato annotations import "
                              f"--annotator) before exporting upstream's layout.")
        out[name] = folder
    return out


def user_files(cfg: Config, store) -> Iterator[Tuple[str, bytes]]:
    """(annotator's folder, the contents of their annotated_instances.jsonl), per annotator;
    FolderClash (before any) when two annotators would share a folder."""
    texts = {r["id"]: r["text"] for r in store.conn().execute("SELECT id, text FROM items")}
    rows = store.conn().execute("SELECT annotator, item_id, scheme, label FROM annotations "
                                "ORDER BY annotator, item_id, scheme").fetchall()
    by_user: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for r in rows:
        by_user.setdefault(r["annotator"], {}).setdefault(r["item_id"], {})[r["scheme"]] = \
            json.loads(r["label"])
    folders = _folders(list(by_user))
    for annotator, items in by_user.items():
        lines = []
        for item_id, labels in items.items():
            rec = {"id": item_id, "displayed_text": texts.get(item_id, ""),
                   "label_annotations": {}, "span_annotations": [], "behavioral_data": {}}
            for name, value in labels.items():
                s = cfg.scheme(name)
                if s is None or s.kind is None:
                    continue  # a scheme no longer in the config
                if s.kind.upstream_spans and value:
                    rec["span_annotations"] += [
                        {"schema": name, "annotation": sp["label"], "start": sp["start"],
                         "end": sp["end"], "span": sp.get("text", "")} for sp in value]
                else:  # a span scheme's: submitted, nothing marked
                    rec["label_annotations"][name] = s.kind.upstream_cell(value)
            lines.append(json.dumps(rec, ensure_ascii=False) + "\n")
        yield folders[annotator], "".join(lines).encode("utf-8")


def zip_bytes(cfg: Config, store) -> bytes:
    """The whole layout as a zip (the admin page's download)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for folder, body in user_files(cfg, store):
            z.writestr(f"annotation_output/{folder}/{FILE}", body)
    return buf.getvalue()


def export_upstream(cfg: Config, output: Optional[str]) -> int:
    if not output:
        print("error: --format upstream writes one folder per annotator: give the folder with "
              "-o DIR.", file=sys.stderr)
        return 1
    store = open_store_or_say(cfg)
    if store is None:
        return 1
    try:
        n = 0
        for name, body in user_files(cfg, store):
            folder = os.path.join(output, name)
            os.makedirs(folder, exist_ok=True)
            tmp = os.path.join(folder, FILE + ".tmp")
            with open(tmp, "wb") as f:
                f.write(body)
            os.replace(tmp, os.path.join(folder, FILE))
            n += 1
        print(f"Exported {n} annotator folder(s) to {output} (upstream Potato's layout).",
              file=sys.stderr)
        return 0
    except FolderClash as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {output}: cannot be written ({e.strerror or e}).", file=sys.stderr)
        return 1
    finally:
        store.close()


def _files(path: str) -> List[Tuple[str, str]]:
    """(annotator, file) pairs: ``path`` is an output folder, a user folder or one file."""
    if os.path.isfile(path):
        return [(os.path.basename(os.path.dirname(os.path.abspath(path))), path)]
    if os.path.isfile(os.path.join(path, FILE)):
        return [(os.path.basename(os.path.abspath(path)), os.path.join(path, FILE))]
    return [(name, os.path.join(path, name, FILE)) for name in sorted(os.listdir(path))
            if os.path.isfile(os.path.join(path, name, FILE))]


def _record_values(cfg: Config, rec: Dict[str, Any], where: str
                   ) -> Tuple[Dict[str, Any], List[str]]:
    """({scheme: value to check}, problems) of one record's label_annotations and
    span_annotations, their shapes checked. A span scheme's empty ``label_annotations`` entry
    (``{}``, as the export writes it) says the annotator marked nothing."""
    values: Dict[str, Any] = {}
    problems: List[str] = []
    cells = rec.get("label_annotations") or {}
    spans = rec.get("span_annotations") or []
    if not isinstance(cells, dict):
        problems.append(f"{where}: label_annotations must be a mapping of scheme names, not "
                        f"{type(cells).__name__}.")
        cells = {}
    if not isinstance(spans, list):
        problems.append(f"{where}: span_annotations must be a list, not "
                        f"{type(spans).__name__}.")
        spans = []
    span_schemes = [s.name for s in cfg.schemes if s.kind is not None and s.kind.upstream_spans]
    for name, cell in cells.items():
        s = cfg.scheme(name)
        if s is None or s.kind is None or not isinstance(cell, dict):
            problems.append(f"{where}: {name!r} is not a scheme of this config (or its "
                            f"value is not a mapping).")
        elif s.kind.upstream_spans and cell:
            problems.append(f"{where}: {name!r} is a span scheme: its spans belong in "
                            f"span_annotations.")
        else:  # a span scheme's empty entry: submitted, nothing marked
            values[name] = s.kind.from_upstream_cell(cell)
    for sp in spans:
        name = sp.get("schema", span_schemes[0] if len(span_schemes) == 1 else None) \
            if isinstance(sp, dict) else None
        if not isinstance(sp, dict):
            problems.append(f"{where}: a span annotation must be a mapping.")
        elif name not in span_schemes:
            problems.append(f"{where}: a span annotation's schema {name!r} is not a span "
                            f"scheme of this config (span schemes: "
                            f"{', '.join(span_schemes) or 'none'}).")
        else:
            values.setdefault(name, []).append(
                {"start": sp.get("start"), "end": sp.get("end"),
                 "label": sp.get("annotation"), "text": sp.get("span")})
    return values, problems


def parse_file(cfg: Config, path: str, texts: Dict[str, str]
               ) -> Tuple[List[Tuple[str, str, Any]], List[str]]:
    """(rows, problems) of one annotated_instances.jsonl; rows are (item, scheme, value)."""
    rows, problems = [], []
    with open(path, encoding="utf-8") as f:
        lines = jsonl_lines(f.read())
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"{path}:{n}: not a JSON object ({e.msg}).")
            continue
        except (ValueError, RecursionError):  # a 5,000-digit number, nesting too deep
            problems.append(f"{path}:{n}: a value on this line cannot be read (a number too "
                            f"long, or nesting too deep).")
            continue
        item_id = str(rec.get("id")) if isinstance(rec, dict) and "id" in rec else None
        if item_id is None or item_id not in texts:
            problems.append(f"{path}:{n}: no id of an item in the data files "
                            f"({item_id!r}).")
            continue
        values, bad = _record_values(cfg, rec, f"{path}:{n}")
        if bad:
            problems += bad
            continue
        for name, value in values.items():
            s = cfg.scheme(name)
            if s is None:
                problems.append(f"{path}:{n}: {name!r} is not a scheme of this config.")
                continue
            try:
                value = check_label(s, value, texts[item_id])
            except LabelError as e:
                problems.append(f"{path}:{n}: {e}")
                continue
            if value is not None:
                rows.append((item_id, name, value))
    return rows, problems


def import_upstream(cfg: Config, path: str) -> int:
    """``potato annotations import --format upstream``: every file or nothing."""
    try:
        files = _files(path)
    except OSError as e:
        print(f"error: {path}: cannot be read ({e.strerror or e}).", file=sys.stderr)
        return 1
    if not files:
        print(f"error: {path}: no {FILE} in it or in its folders. Give upstream Potato's "
              f"output folder (annotation_output).", file=sys.stderr)
        return 1
    store = open_store_or_say(cfg)
    if store is None:
        return 1
    try:
        texts = {r["id"]: r["text"] for r in store.conn().execute(
            "SELECT id, text FROM items WHERE active=1")}
        parsed, problems = [], []
        for annotator, file in files:
            try:
                rows, found = parse_file(cfg, file, texts)
            except (OSError, UnicodeDecodeError) as e:
                rows, found = [], [f"{file}: cannot be read ({e})."]
            parsed.append((annotator, rows))
            problems += found
        if problems:
            for p in problems[:50]:
                print(f"error: {p}", file=sys.stderr)
            print(f"{path}: nothing imported: {len(problems)} problem(s). Fix them and run the "
                  f"import again.", file=sys.stderr)
            return 1
        for annotator, rows in parsed:
            store.import_labels(unquote(annotator), rows)
        print(f"Imported {sum(len(r) for _, r in parsed)} label(s) from {len(parsed)} "
              f"annotator(s) in {path}.")
        return 0
    finally:
        store.close()
