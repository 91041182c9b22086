"""Backends in the config, the generic part: reading ``model_training.backends`` entries by
their ``type``, with each kind's keys, rules, hints and traits declared by the kind itself
(part of ``potato.config.settings``; see its docstring).

A kind of backend is its class in ``potato/training/backends/`` (a layer above this one), found
in ``KINDS``: the backends registry (``potato.training.backends.TYPES``) is this very mapping,
filled when that package is imported, so one registry line makes a kind known to the config and
to the server alike, and nothing here names a kind. What this module reads of a kind's class:

- ``type``: the kind's name; ``article``: ``a`` or ``an`` before it in messages;
- ``Options``: the kind's own keys, a dataclass whose fields are declared with ``key(...)``
  (name, type, default and reader in one place), with ``hints`` (a ClassVar: sentences for keys
  that belong to another kind) and ``rules(b, bpath, err, warn)`` (its cross-key checks, run by
  ``potato validate`` and at start-up); None when the kind takes no keys of its own;
- ``implicit``: a backend of this kind is always configured, under the kind's name, which no
  other backend may take (the local backend);
- ``polled_by_agents`` and ``arrives_as_loopback``: traits ``project/validation.py`` asks about.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, Dict, List, Optional

from potato.config.reader import Path, Reader, dotted, suggest

# The registry of backend kinds: kind name -> its class (potato.training.backends fills it).
KINDS: Dict[str, Any] = {}

GENERIC_KEYS = ("type", "description")  # keys every kind takes

NO_KINDS = ("No backend kind is registered: import potato.training.backends (which registers "
            "the built-in kinds) before loading a config.")


def kinds() -> Dict[str, Any]:
    """The registered kinds; a config read before any is registered would refuse every
    backend, so that is a programming error, said as one."""
    if not KINDS:
        raise RuntimeError(NO_KINDS)
    return KINDS


@dataclass
class Backend:
    """One place a run can execute: the keys every kind has, and the kind's own ``options``
    (its options dataclass, None for a kind without keys of its own)."""

    name: str
    type: str
    description: str = ""
    options: Any = None


# -- declaring a kind's keys --------------------------------------------------------------------

@dataclass
class KeyContext:
    """What a key's reader gets: the reader (for errors with lines), the backend's checked
    mapping, its key path, its name, and ``resolve`` (a path relative to the config's folder)."""

    r: Reader
    m: Dict[str, Any]
    path: Path
    name: str
    resolve: Callable[[Optional[str]], Optional[str]]

    @property
    def where(self) -> str:
        return dotted(self.path)


Read = Callable[[KeyContext, str, Any], Any]  # (context, key, default) -> value


def key(read: Read, default: Any = None, default_factory: Any = MISSING):
    """A config key on a kind's options dataclass: its field name is the key, its annotation
    the type, ``default`` the value when the key is absent, ``read`` its parser."""
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata={"read": read})
    return field(default=default, metadata={"read": read})


def text(ctx: KeyContext, name: str, default):
    return ctx.r.text(ctx.m, name, ctx.path, default, ctx.name)


def boolean(ctx: KeyContext, name: str, default):
    return ctx.r.boolean(ctx.m, name, ctx.path, default, ctx.name)


def text_list(ctx: KeyContext, name: str, default):
    return ctx.r.text_list(ctx.m, name, ctx.path, ctx.name)


def file_path(ctx: KeyContext, name: str, default):
    """A path on this machine, relative to the config's folder."""
    return ctx.resolve(ctx.r.text(ctx.m, name, ctx.path, default, ctx.name))


def number(**limits) -> Read:
    """A number key; ``limits`` as ``Reader.number`` takes them (minimum, maximum, integer,
    positive)."""
    def read(ctx: KeyContext, name: str, default):
        return ctx.r.number(ctx.m, name, ctx.path, default, backend=ctx.name, **limits)
    return read


def option_keys(options) -> List[str]:
    """The keys an options dataclass declares, in order."""
    return [f.name for f in fields(options) if "read" in f.metadata] if options else []


def read_options(options, ctx: KeyContext):
    """An options dataclass read from the backend's mapping, each key by its own reader."""
    values = {}
    for f in fields(options):
        if "read" not in f.metadata:
            continue
        default = f.default if f.default is not MISSING else f.default_factory()
        values[f.name] = f.metadata["read"](ctx, f.name, default)
    return options(**values)


# -- keys several kinds share -------------------------------------------------------------------

# Variables a POSIX shell (bash as /bin/sh included) keeps read-only or needs to run the remote
# commands; exporting them from a backend's env would break every command on the host.
SHELL_OWNED = ("UID", "EUID", "PPID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO", "BASHPID",
               "GROUPS", "IFS", "OPTIND", "PS4")


def env_mapping(ctx: KeyContext, name: str, default) -> Dict[str, str]:
    """A backend's env: variable names to one-line values, none the remote shell owns."""
    r, path, where, value = ctx.r, ctx.path, ctx.where, ctx.m.get(name)
    if value is None:
        return {}
    bad_names = [k for k in value if not (isinstance(k, str) and re.match(
        r"^[A-Za-z_][A-Za-z0-9_]*$", k))] if isinstance(value, dict) else []
    if not isinstance(value, dict) or bad_names:
        named = (" (%s is not one)" % ", ".join(repr(k)[:40] for k in bad_names[:3])
                 if bad_names else "")
        r.error(path + (name,), f"{where}.{name} must map variable names (letters, digits, _) "
                                f"to values{named}.", ctx.name)
    elif any(isinstance(v, (dict, list)) for v in value.values()):
        bad = sorted(k for k, v in value.items() if isinstance(v, (dict, list)))
        r.error(path + (name,), f"{where}.{name}: {', '.join(bad[:3])} must be one text, number "
                                f"or true/false, not a list or mapping.", ctx.name)
    elif any(isinstance(v, str) and any(c in v for c in "\n\r\0") for v in value.values()):
        r.error(path + (name,), f"{where}.{name} has a value with a line break or a NUL; each "
                                f"variable must fit on one line.", ctx.name)
    elif any(k in SHELL_OWNED for k in value):
        bad = sorted(k for k in value if k in SHELL_OWNED)
        r.error(path + (name,), f"{where}.{name} sets {', '.join(bad)}, which the remote shell "
                                f"owns (read-only or used to run every command); remove "
                                f"it.", ctx.name)
    else:
        return {k: "" if v is None else str(v) for k, v in value.items()}
    return {}


# How long the server waits without a word from a run's agent before it calls the run lost.
heartbeat_timeout = number(positive=True)


# -- reading an entry ----------------------------------------------------------------------------

def implicit_backends() -> Dict[str, Backend]:
    """The backends every config has (a kind marked ``implicit``, under its own name)."""
    out = {}
    for k in kinds().values():
        if getattr(k, "implicit", False):
            options = getattr(k, "Options", None)
            out[k.type] = Backend(k.type, k.type, options=options() if options else None)
    return out


def parse_backend(r: Reader, name: str, raw, path: Path, resolve) -> Optional[Backend]:
    where = dotted(path)
    registry = kinds()
    names = tuple(registry)
    if not isinstance(raw, dict):
        r.error(path, f"{where} must be a mapping with at least a type ({', '.join(names)}).",
                name)
        return None
    btype = raw.get("type")
    if btype is None:
        r.error(path, f"{where} has no type. Set type to one of: {', '.join(names)}.", name)
        return None
    if not isinstance(btype, str):
        r.error(path + ("type",), f"{where}.type must be one word, one of: {', '.join(names)} "
                                  f"(it is a {type(btype).__name__}).", name)
        return None
    if btype not in registry:
        r.error(path + ("type",), f"{where}.type is {btype!r}, which is not a backend type."
                                  f"{suggest(btype, names)} Valid types: "
                                  f"{', '.join(names)}.", name)
        return None
    if name in implicit_backends() and btype != name:
        r.error(path, f"{where}: the name {name} is reserved for this machine; give the {btype} "
                      f"backend another name.", name)
        return None
    kind = registry[btype]
    options = getattr(kind, "Options", None)
    hints = getattr(options, "hints", None) or {}
    m = r.mapping(raw, path, GENERIC_KEYS + tuple(option_keys(options)),
                  f"{getattr(kind, 'article', 'a')} {btype} backend", name, hints)
    b = Backend(name, btype)
    b.description = r.text(m, "description", path, "", name) or ""
    if options is not None:
        b.options = read_options(options, KeyContext(r, m, path, name, resolve))
    return b


# -- what validation.py asks of a configured backend ---------------------------------------------

def _kind(b: Backend):
    return kinds().get(b.type)


def kind_rules(b: Backend):
    """The kind's own checks of its keys: ``rule(b, bpath, err, warn)``."""
    rules = getattr(b.options, "rules", None)
    return (rules,) if rules is not None else ()


def arrives_as_loopback(b: Backend) -> bool:
    """Its agent reaches the server through an ssh reverse-forwarded socket (so arrives as
    loopback, which debug: true trusts)."""
    return bool(getattr(_kind(b), "arrives_as_loopback", False))


def polled_by_agents(b: Backend) -> bool:
    """Its runs wait for an agent that polls the server."""
    return bool(getattr(_kind(b), "polled_by_agents", False))


def host_of(b: Backend) -> Optional[str]:
    """The host a backend logs into, for messages (None for kinds without one)."""
    return getattr(b.options, "host", None)
