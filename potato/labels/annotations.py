"""Labels in and out: checking a value against its scheme, import and export.

``check_label`` is the one place that decides whether a value is valid for a scheme (each
kind's ``check`` in ``potato.schemes``); the annotate page, the JSON API and ``potato
annotations import`` all go through it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

from potato.labels import export
from potato.config.settings import Config, Scheme
from potato.project.data import DataError, jsonl_lines, load_items
from potato.schemes import LabelError
from potato.project.store import Store

__all__ = ["LabelError", "check_label", "open_store", "open_store_or_say", "item_record", "parse_import",
           "import_file", "export_file"]


def check_label(scheme: Scheme, value: Any, text: Optional[str] = None) -> Any:
    """The normalised value (str for radio, sorted list for multiselect, ... see
    ``potato.schemes``) or LabelError naming the scheme and the problem. ``text`` is the item's
    text, which span offsets are checked against.

    ``None`` (or an empty list or string) means "no value" and is returned as None, except that
    a span scheme keeps an empty list: the annotator marked nothing.
    """
    return scheme.kind.check(value, text)


def open_store(cfg: Config) -> Store:
    """The project's store with its items synced from the data files (raises DataError)."""
    items = load_items(cfg)
    store = Store(cfg.db_path)
    store.sync_items(items)
    return store


def open_store_or_say(cfg: Config) -> Optional[Store]:
    """For CLI commands: the store (``open_store``), or None once the reason is printed."""
    try:
        return open_store(cfg)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return None


def item_record(store: Store, item_id: str) -> Optional[Dict[str, Any]]:
    """``{id, text, labels: {scheme: [{annotator, label}]}, predictions: {scheme: {...}}}``."""
    row = store.item(item_id)
    if row is None:
        return None
    return {"id": row["id"], "text": row["text"], "labels": store.item_labels(item_id),
            "predictions": store.item_predictions(item_id)}


def parse_import(cfg: Config, lines: List[str], texts: Dict[str, str]
                 ) -> Tuple[List[Tuple[str, str, Any]], List[str]]:
    """(rows, problems) for an import file's lines; rows are (item_id, scheme, label).
    ``texts``: each known item's text, by id (span offsets are checked against it)."""
    schemes = {s.name: s for s in cfg.schemes}
    rows, problems = [], []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"line {n}: not a JSON object ({e.msg}).")
            continue
        except (ValueError, RecursionError):  # a 5,000-digit number, nesting too deep
            problems.append(f"line {n}: a value on this line cannot be read (a number too "
                            f"long, or nesting too deep).")
            continue
        if not isinstance(obj, dict):
            problems.append(f"line {n}: must be a JSON object like "
                            f'{{"id": ..., "{cfg.schemes[0].name}": label}}.')
            continue
        item_id = obj.get("id")
        if item_id is None:
            problems.append(f"line {n}: has no \"id\".")
            continue
        item_id = str(item_id)
        if item_id not in texts:
            problems.append(f"line {n}: unknown item id {item_id!r} (not in the data files).")
            continue
        given = [k for k in obj if k != "id"]
        if not given:
            problems.append(f"line {n}: names no scheme; add \"{cfg.schemes[0].name}\": label.")
        for key in given:
            scheme = schemes.get(key)
            if scheme is None:
                problems.append(f"line {n}: {key!r} is not an annotation scheme (schemes: "
                                f"{', '.join(schemes)}).")
                continue
            try:
                label = check_label(scheme, obj[key], texts[item_id])
            except LabelError as e:
                problems.append(f"line {n}: {e}")
                continue
            if label is not None:
                rows.append((item_id, key, label))
    return rows, problems


def import_file(cfg: Config, path: str, annotator: str) -> int:
    """``potato annotations import``: all lines or nothing. Exit code 0 or 1."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = jsonl_lines(f.read())
    except OSError as e:
        print(f"error: {path}: cannot be read ({e.strerror}).", file=sys.stderr)
        return 1
    if not annotator.strip():
        print("error: --annotator must name who made these labels.", file=sys.stderr)
        return 1
    store = open_store_or_say(cfg)
    if store is None:
        return 1
    try:
        texts = {r["id"]: r["text"] for r in store.conn().execute(
            "SELECT id, text FROM items WHERE active=1")}
        rows, problems = parse_import(cfg, lines, texts)
        if problems:
            for p in problems[:50]:
                print(f"error: {path}: {p}", file=sys.stderr)
            more = f" (and {len(problems) - 50} more)" if len(problems) > 50 else ""
            print(f"{path}: nothing imported: {len(problems)} problem(s){more}. Fix them and run "
                  f"the import again.", file=sys.stderr)
            return 1
        store.import_labels(annotator, rows)
        items = len({r[0] for r in rows})
        print(f"Imported {len(rows)} label(s) on {items} item(s) as annotator {annotator!r} "
              f"from {path}.")
        return 0
    finally:
        store.close()


def export_file(cfg: Config, output: Optional[str], rows: str = "item",
                fmt: str = "jsonl") -> int:
    """``potato annotations export``: the admin page's export (``potato.labels.export.build``, the
    same bytes), to stdout, to ``output``, or into ``output`` when it is a directory, under the
    page's file name (project and time)."""
    store = open_store_or_say(cfg)
    if store is None:
        return 1
    if output and os.path.isdir(output):
        output = os.path.join(output, export.filename(cfg, rows, fmt))
    try:
        if not output:  # written row by row, never held whole in memory
            export.write(sys.stdout, store, cfg, rows, fmt)
            sys.stdout.flush()
            return 0
        with open(output, "w+b") as out:
            export.to_file(out, store, cfg, rows, fmt)
            out.seek(0)
            n = sum(block.count(b"\n") for block in iter(lambda: out.read(1 << 20), b""))
    except OSError as e:
        print(f"error: {output or 'standard output'}: cannot be written ({e.strerror}).",
              file=sys.stderr)
        return 1
    finally:
        store.close()
    print(f"Exported {n - (1 if fmt == 'csv' else 0)} {rows}(s) to {output}.", file=sys.stderr)
    return 0
