"""Read the project's items from its data files: JSON (a list of objects), JSON Lines (also
inside a ``.json`` file, as upstream Potato allows), CSV and TSV (a header row naming the
columns, ``id_key`` and ``text_key`` among them; ``text_key`` may be left out when items
name an image, audio or video file), each in its ``data_files`` encoding.

Every problem is a ``DataError`` that names the file and the line (JSON Lines, CSV, TSV) or the
position in the list (a JSON array), so ``potato start`` can say exactly what to fix.
"""

from __future__ import annotations

import csv
import json
import io
import os
from typing import Any, Dict, List, Tuple

from potato.project import media
from potato.config.settings import Config

Item = Tuple[str, str, Dict[str, Any]]  # (id, text, the whole record)


class DataError(Exception):
    """A data file cannot be used as it is."""


def jsonl_lines(text: str) -> List[str]:
    """The lines of a JSON Lines text: split at "\\n" alone (a trailing "\\r" dropped), never
    at the other characters ``str.splitlines`` breaks on (U+2028, U+0085, \\x0b, \\x0c,
    \\x1c-\\x1e), which JSON writes raw inside strings."""
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def _records(path: str, encoding: str = "utf-8", keys: Tuple[str, ...] = ()):
    """(where, record) pairs: where is ``file:line`` for JSON Lines, CSV and TSV, ``file: item
    N`` for a JSON list. ``keys``: the columns a CSV or TSV file must have."""
    try:
        with open(path, encoding=encoding, newline="") as f:
            text = f.read()
    except FileNotFoundError:
        raise DataError(f"{path}: data file not found. Fix data_files in the config.")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not {encoding} text (byte {e.start}: {e.reason}). Give the "
                        f"file's encoding: data_files: [{{path: ..., encoding: latin-1}}].")
    except (LookupError, UnicodeError) as e:  # "undefined", or a codec that is not for text
        raise DataError(f"{path}: the encoding {encoding!r} cannot read text ({e}). Give a text "
                        f"encoding such as utf-8 or latin-1 in data_files.")
    except OSError as e:
        raise DataError(f"{path}: cannot be read ({e.strerror or e}).")
    text = text.lstrip("\ufeff")  # a byte order mark, as spreadsheet programs write
    ext = os.path.splitext(path)[1].lower()
    if ext in (".csv", ".tsv"):
        yield from _table(path, text, "\t" if ext == ".tsv" else ",", keys)
        return
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg}).")
        except (ValueError, RecursionError) as e:  # a 5,000-digit number, nesting too deep
            raise DataError(f"{path}: a value cannot be read ({_why(e)}). Fix the file.")
        for n, row in enumerate(rows):
            yield f"{path}: item {n + 1} of the list", row
        return
    for n, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{n}: not a JSON object ({e.msg}). Each line of a JSON Lines "
                            f"file must hold one item.")
        except (ValueError, RecursionError) as e:  # a 5,000-digit number, nesting too deep
            raise DataError(f"{path}:{n}: a value on this line cannot be read ({_why(e)}). Fix "
                            f"the line.")
        yield f"{path}:{n}", row


def _why(e: BaseException) -> str:
    if isinstance(e, RecursionError):
        return "it is nested too deeply"
    return str(e).split(";")[0][:200] or type(e).__name__


def _table(path: str, text: str, delimiter: str, keys: Tuple[str, ...]):
    """Rows of a CSV or TSV file with a header row, as {column: text}."""
    what = "TSV" if delimiter == "\t" else "CSV"
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(f"{path}: the file is empty: it has no header row and no items. "
                            f"Add a header row naming the columns, then one row per item.")
        twice = [c for n, c in enumerate(header) if c in header[:n]]
        if twice:
            raise DataError(f"{path}:1: the header row names the column {twice[0]!r} twice; "
                            f"each column needs its own name.")
        missing = [k for k in keys if k not in header]
        if missing:
            raise DataError(f"{path}:1: the header row has no column {missing[0]!r} (columns: "
                            f"{', '.join(header)}). Name the column in item_properties "
                            f"(id_key, text_key) or add it to the file.")
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise DataError(f"{path}:{line}: this row has {len(row)} cells and the header "
                                f"{len(header)}. Quote cells that hold the {what} separator "
                                f"or a line break.")
            yield f"{path}:{line}", dict(zip(header, row))
    except csv.Error as e:
        raise DataError(f"{path}:{reader.line_num}: not valid {what} ({e}).")


def load_items(cfg: Config) -> List[Item]:
    """All items of the project's data files, in order. Raises DataError.

    An item that names an image, audio or video file (``image_key`` / ``audio_key`` /
    ``video_key``) may have no text: its text is then "" (every other item needs its
    ``text_key``). An item whose
    ``text_key`` is a list a scheme reads (``Kind.item_fields``: pairwise's responses) has
    them as its text, lettered "A. ", "B. " ..., one paragraph each, as upstream's
    list_as_text shows them (exports carry it). Each scheme checks the fields it reads
    (``Kind.check_item``)."""
    id_key, text_key = cfg.item_properties.id_key, cfg.item_properties.text_key
    with_media = bool(media.keys(cfg))
    kinds = [s.kind for s in cfg.schemes if s.kind is not None]
    # a field a scheme reads (pairwise's list of responses) may be the text_key: no text then
    read = {f for k in kinds for f in k.item_fields()}
    items: List[Item] = []
    seen: Dict[str, str] = {}
    for path in cfg.data_files:
        if not os.path.exists(path):
            raise DataError(f"{path}: data file not found. Fix data_files in the config.")
        encoding = cfg.data_encodings.get(path, "utf-8")
        columns = (id_key,) if with_media else (id_key, text_key)
        for where, row in _records(path, encoding, columns):
            if not isinstance(row, dict):
                raise DataError(f"{where}: an item must be a JSON object, not {type(row).__name__}.")
            item_id = row.get(id_key)
            if item_id is None or item_id == "":
                raise DataError(f"{where}: the item has no {id_key!r} (item_properties.id_key).")
            if isinstance(item_id, (dict, list, bool)):
                raise DataError(f"{where}: the item's {id_key!r} must be a string or a number.")
            item_id = str(item_id)
            for kind in kinds:
                problem = kind.check_item(row)
                if problem:
                    raise DataError(f"{where}: item {item_id!r} {problem}")
            text = row.get(text_key)
            if text_key in read and isinstance(text, list):  # checked by the scheme above
                text = "\n\n".join(f"{chr(65 + j)}. {t}" for j, t in enumerate(text))
            if text is None or not isinstance(text, (str, int, float)):
                if not (with_media and _has_media(cfg, row, where, item_id)):
                    if text is not None:  # there, but not text (a list no scheme reads)
                        raise DataError(f"{where}: item {item_id!r}'s {text_key!r} "
                                        f"(item_properties.text_key) is a "
                                        f"{type(text).__name__}, not text. Point text_key at "
                                        f"a field that holds the item's text.")
                    raise DataError(f"{where}: item {item_id!r} has no {text_key!r} text "
                                    f"(item_properties.text_key)"
                                    + (" and no image, audio or video." if with_media else "."))
                text = ""
            if item_id in seen:
                raise DataError(f"{where}: duplicate id {item_id!r}; it was first seen at "
                                f"{seen[item_id]}. Ids must be unique across all data files.")
            seen[item_id] = where
            items.append((item_id, str(text), row))
    return items


def _has_media(cfg: Config, row: Dict[str, Any], where: str, item_id: str) -> bool:
    try:
        return media.item_media(cfg, row) is not None
    except media.MediaError as e:
        raise DataError(f"{where}: item {item_id!r}: {e}.")


def data_files_signature(cfg: Config) -> Tuple:
    """Changes when any data file changes (mtime and size), to know when to sync again."""
    sig = []
    for path in cfg.data_files:
        try:
            st = os.stat(path)
            sig.append((path, st.st_mtime_ns, st.st_size))
        except OSError:
            sig.append((path, None, None))
    return tuple(sig)
