"""Reading a YAML config with the line of every key, and checking values at key paths.

``read_yaml`` parses once and keeps the line of every key (and the source text of scalars);
``Reader`` walks the raw data for ``config.load`` and records each problem as a ``Problem``
with its file, line and dotted key path. PyYAML is imported only when a file is read.
"""

from __future__ import annotations

import difflib
import math
import os
import stat
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

Path = Tuple[Any, ...]  # a key path: ("model_training", "backends", "gpu", "python")


class ConfigError(Exception):
    """The config cannot be read at all: missing or unreadable file, YAML syntax error."""


@dataclass
class Problem:
    """One finding about a config: an error or a warning, with where it is."""

    message: str
    key: str = ""
    line: Optional[int] = None
    file: str = ""
    backend: Optional[str] = None  # the backend a finding belongs to, for acknowledgements

    def format(self) -> str:
        where = self.file
        if self.line:
            where = f"{where}:{self.line}"
        return f"{where}: {self.message}" if where else self.message

    def as_dict(self) -> Dict[str, Any]:
        return {"message": self.message, "key": self.key, "line": self.line, "file": self.file,
                "backend": self.backend}


# ---------------------------------------------------------------------------------------------
# Key paths and values


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def suggest(key: str, valid) -> str:
    """`` Did you mean X?`` for the closest valid key, or an empty string."""
    close = difflib.get_close_matches(str(key), list(valid), n=1, cutoff=0.6)
    return f" Did you mean {close[0]}?" if close else ""


class Reader:
    """Walks the raw YAML data and records problems with their lines."""

    def __init__(self, file: str, lines: Dict[Path, int], scalars: Dict[Path, str]):
        self.file = file
        self.lines = lines
        self.scalars = scalars  # the source text of each plain scalar, for SLURM times
        self.errors: List[Problem] = []
        self.warnings: List[Problem] = []

    def line(self, path: Path) -> Optional[int]:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def problem(self, path: Path, message: str, backend: Optional[str] = None) -> Problem:
        return Problem(message, dotted(path), self.line(path), self.file, backend)

    def error(self, path: Path, message: str, backend: Optional[str] = None) -> None:
        self.errors.append(self.problem(path, message, backend))

    def warn(self, path: Path, message: str, backend: Optional[str] = None) -> None:
        self.warnings.append(self.problem(path, message, backend))

    # -- shapes ------------------------------------------------------------------------------
    def mapping(self, value: Any, path: Path, valid, what: str, backend=None,
                hints: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """The mapping at ``path`` with unknown keys reported (and dropped)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(path, f"{dotted(path) or 'The config'} must be a mapping of keys to values, "
                             f"not {_kind(value)}.", backend)
            return {}
        out = {}
        for key, item in value.items():
            if key in valid:
                out[key] = item
                continue
            hint = (hints or {}).get(key)
            extra = f" {hint}" if hint else suggest(key, valid)
            self.error(path + (key,), f"{dotted(path + (key,))} is not a key {what} accepts."
                                      f"{extra} Valid keys: {', '.join(valid)}.", backend)
        return out

    def text(self, m: Dict, key: str, path: Path, default=None, backend=None, numbers_ok=True):
        if key not in m or m[key] is None:
            return default
        value = m[key]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or (
                not numbers_ok and not isinstance(value, str)):
            self.error(path + (key,), f"{dotted(path + (key,))} must be a string, not "
                                      f"{_kind(value)}.", backend)
            return default
        return str(value)

    def number(self, m: Dict, key: str, path: Path, default=None, minimum=None, maximum=None,
               integer=False, backend=None, positive=False):
        if key not in m or m[key] is None:
            return default
        value = m[key]
        where = dotted(path + (key,))
        ok_type = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_type):
            kind = "a whole number" if integer else "a number"
            self.error(path + (key,), f"{where} must be {kind}, not {_kind(value)} "
                                      f"({value!r}).", backend)
            return default
        if not math.isfinite(value):  # YAML's .nan and .inf: no limit, count or size is either
            self.error(path + (key,), f"{where} must be a finite number, not {value}.", backend)
            return default
        if positive and value <= 0:
            self.error(path + (key,), f"{where} must be more than 0, not {value}.", backend)
            return default
        if minimum is not None and value < minimum or maximum is not None and value > maximum:
            rng = (f"between {minimum} and {maximum}" if minimum is not None and maximum is not None
                   else f"at least {minimum}" if minimum is not None else f"at most {maximum}")
            self.error(path + (key,), f"{where} must be {rng}, not {value}.", backend)
            return default
        return value

    def boolean(self, m: Dict, key: str, path: Path, default: bool, backend=None) -> bool:
        if key not in m or m[key] is None:
            return default
        if not isinstance(m[key], bool):
            self.error(path + (key,), f"{dotted(path + (key,))} must be true or false, not "
                                      f"{m[key]!r}.", backend)
            return default
        return m[key]

    def text_list(self, m: Dict, key: str, path: Path, backend=None) -> List[str]:
        if key not in m or m[key] is None:
            return []
        value = m[key]
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(
                isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
            self.error(path + (key,), f"{dotted(path + (key,))} must be a list of strings.",
                       backend)
            return []
        return [str(v) for v in value]


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    return {bool: "true/false", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


def _walk(node, path: Path, lines: Dict[Path, int], scalars: Dict[Path, str],
          duplicates: List[Tuple[Path, int]]) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = getattr(key_node, "value", None)
            sub = path + (key,)
            if sub in lines:
                duplicates.append((sub, key_node.start_mark.line + 1))
            lines[sub] = key_node.start_mark.line + 1
            if isinstance(value_node, yaml.ScalarNode):
                scalars[sub] = value_node.value
            _walk(value_node, sub, lines, scalars, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            if isinstance(item, yaml.ScalarNode):
                scalars[path + (i,)] = item.value
            _walk(item, path + (i,), lines, scalars, duplicates)


CONFIG_MAX = 1 << 20  # a config is a few KB; a bigger file is not one


def _read_text(path: str) -> str:
    """The file's text. Opened without blocking and checked before it is read: a FIFO, device
    or socket (which would hang the reader, the Training page's look at the file included) or
    a file over CONFIG_MAX is an OSError with the reason, never read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "it is %s, not a regular file" % (
                "a named pipe" if stat.S_ISFIFO(st.st_mode) else "a device or socket"))
        data = f.read(CONFIG_MAX + 1)
    if len(data) > CONFIG_MAX:
        raise OSError(0, "it is over %d MB, too big for a config file" % (CONFIG_MAX >> 20))
    return data.decode("utf-8")


# How much a config may hold, counted as the reader composes it. An alias (*name) counts as
# everything it repeats, so a file of a few hundred bytes cannot expand into millions of values
# (a "billion laughs" file): the reader, and every walk over the data after it, stays linear in
# these bounds. A real config holds a few hundred values, a few levels deep.
MAX_VALUES = 100_000  # keys, values and list entries, with every alias expanded
MAX_DEPTH = 64        # levels of nesting, with every alias expanded
MAX_CHARS = 2 << 20   # characters of text (keys and values), with every alias expanded


class _Bounds:
    """Mixed into PyYAML's SafeLoader (``_bounded_loader``): refuses, with a ConfigError naming
    the file and line, YAML that holds more than MAX_VALUES values or MAX_DEPTH levels once its
    aliases are expanded, and an alias inside the block it names (a structure that would
    repeat itself forever)."""

    file = ""

    def __init__(self, text):
        super().__init__(text)
        self._count = 0
        self._chars = 0
        self._depth = 0
        self._open: set = set()  # anchors whose block is being read
        self._sizes: Dict[int, Tuple[int, int, int]] = {}  # id(node): (values, depth, chars)

    def _refuse(self, mark, problem: str, fix: str) -> None:
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{self.file}{line}: {problem} {fix}")

    def _measure(self, node) -> Tuple[int, int, int]:
        """(values, depth, characters) of a finished node with its aliases expanded; each node
        is measured once (a shared node is looked up), so this is linear in the file."""
        import yaml

        known = self._sizes.get(id(node))
        if known is not None:
            return known
        stack = [(node, False)]
        while stack:
            n, done = stack.pop()
            if id(n) in self._sizes:
                continue
            kids = ([c for pair in n.value for c in pair] if isinstance(n, yaml.MappingNode)
                    else list(n.value) if isinstance(n, yaml.SequenceNode) else [])
            if not done:
                stack.append((n, True))
                stack.extend((c, False) for c in kids if id(c) not in self._sizes)
                continue
            values = 1 + sum(self._sizes[id(c)][0] for c in kids)
            depth = 1 + max((self._sizes[id(c)][1] for c in kids), default=0)
            chars = sum(self._sizes[id(c)][2] for c in kids) + (
                len(n.value) if isinstance(n, yaml.ScalarNode) else 0)
            self._sizes[id(n)] = (min(values, MAX_VALUES + 1), depth, min(chars, MAX_CHARS + 1))
        return self._sizes[id(node)]

    def compose_node(self, parent, index):
        import yaml

        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open:
                self._refuse(event.start_mark, f"the alias *{event.anchor} is inside the block "
                             f"it names (&{event.anchor}), so it would repeat itself without "
                             f"end.", "Remove the alias or move it out of that block.")
            target = self.anchors.get(event.anchor)
            if target is not None:
                values, depth, chars = self._measure(target)
                self._add(values, depth, event.start_mark, event.anchor, chars)
            return super().compose_node(parent, index)
        self._add(1, 1, event.start_mark, None,
                  len(event.value) if isinstance(event, yaml.ScalarEvent) else 0)
        anchor = getattr(event, "anchor", None)
        opened = anchor is not None and anchor not in self._open
        if opened:
            self._open.add(anchor)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if opened:
                self._open.discard(anchor)

    def _add(self, values: int, depth: int, mark, alias: Optional[str], chars: int = 0) -> None:
        self._count += values
        self._chars += chars
        held = f"{values:,}" if values <= MAX_VALUES else f"over {MAX_VALUES:,}"
        via = (f" once the alias *{alias} here is expanded (it repeats a block that holds "
               f"{held} values)" if alias else "")
        if self._count > MAX_VALUES:
            self._refuse(mark, f"the YAML holds more than {MAX_VALUES:,} values{via}; a config "
                         f"holds a few hundred.", "Remove the aliases that repeat large blocks "
                         "(or the repetition itself)." if alias else
                         "Keep data in data_files, not in the config.")
        if self._chars > MAX_CHARS:
            repeated = f"{chars:,} characters" if chars <= MAX_CHARS else "over 2 MB"
            what = (f" once the alias *{alias} here is expanded (it repeats {repeated})"
                    if alias else "")
            self._refuse(mark, f"the YAML holds more than {MAX_CHARS >> 20} MB of text{what}; a "
                         f"config holds a few KB.", "Remove the aliases that repeat long texts."
                         if alias else "Keep long texts out of the config.")
        if self._depth + depth > MAX_DEPTH:
            self._refuse(mark, f"the YAML is nested more than {MAX_DEPTH} levels deep{via}; a "
                         f"config is a few levels deep.", "Flatten the structure at that line.")


def _bounded_loader(yaml):
    """PyYAML's SafeLoader with the bounds of ``_Bounds`` (PyYAML is imported only when a file
    is read, so the class is made then)."""
    return type("BoundedLoader", (_Bounds, yaml.SafeLoader), {})


def _short_error(e: BaseException) -> str:
    if isinstance(e, AttributeError):  # PyYAML's own, on a tagged value of the wrong form
        return "a tagged value of the wrong form"
    text = ("%r is not a value of its type" % e.args[0]) if isinstance(e, KeyError) and e.args \
        else str(e)
    text = " ".join(text.split(";")[0].split())
    return (text[:150] + "...") if len(text) > 150 else text or type(e).__name__


def read_yaml(path: str):
    """(data, lines, scalars, duplicates) for a YAML file; ConfigError with one clear line."""
    import yaml

    try:
        text = _read_text(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file. Give the path to the project's YAML config.")
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a YAML config file.")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e}).")
    loader = _bounded_loader(yaml)(text)
    loader.file = path
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = f":{mark.line + 1}" if mark else ""
        what = " ".join(x for x in (e.context, e.problem) if x)
        raise ConfigError(f"{path}{line}: YAML syntax error: {what}. Fix the YAML at that line.")
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: YAML syntax error: {e}".rstrip())
    except (ValueError, KeyError, TypeError, OverflowError, AttributeError) as e:
        # a value PyYAML reads but cannot build: a date like 2001-02-30, a 5,000-digit
        # number, "!!bool maybe"
        raise ConfigError(f"{path}: a value cannot be read as YAML ({_short_error(e)}). Quote "
                          f"it (\"...\") to keep it as text, or fix it.")
    except RecursionError:  # the bounds above stop far earlier; this is the last guard
        raise ConfigError(f"{path}: the YAML is nested too deeply to read (at most "
                          f"{MAX_DEPTH} levels). A config is a few levels deep: fix the file.")
    finally:
        loader.dispose()
    lines: Dict[Path, int] = {}
    scalars: Dict[Path, str] = {}
    duplicates: List[Tuple[Path, int]] = []
    if node is not None:
        _walk(node, (), lines, scalars, duplicates)
    return data, lines, scalars, duplicates
