"""What differs between two loaded configs, and which of it a running server can take live.

``changes(old, new)`` compares the typed configs (not the YAML text: a comment, a reordered key
or a default written out changes nothing) and names each difference by its config key, e.g.
``server.port``, ``annotation_schemes``, ``model_training.retain_runs``, and one entry per
backend that was added, removed or changed: ``model_training.backends.gpu2``.

What a reload may apply while the server runs (``live``), is exactly:

- every key under ``model_training`` (``backend``, ``backends``, ``retain_runs``, limits,
  ``device``, ``splits``, ``split_seed``, ``aggregation``, ``writeback``, ``auto_retrain``,
  ``publish.license`` and ``publish.timeout_s``, ...), except ``model_training.enabled`` and
  ``model_training.publish.token_env``;
- ``validation.acknowledge`` (it changes only what ``potato validate`` reports).

Everything else (``server.*``, ``annotation_schemes``, ``data_files``, ``item_properties``,
``output_annotation_dir``, ``admin_api_key``, ``server_url``, ``allowed_hosts``, ``debug``,
``task_dir``, the project's name, upstream Potato keys, and the two keys above) is read when the
server starts: a change to it needs a restart.
"""

import dataclasses
from typing import Any, Dict, List

# Config attributes under their YAML names (the rest are spelled alike).
YAML_NAMES = {"schemes": "annotation_schemes", "output_dir": "output_annotation_dir",
              "acknowledge": "validation.acknowledge", "data_encodings": "data_files.encoding",
              "upstream": "upstream Potato keys"}
IGNORED = ("path", "key_lines")  # the file's own name, and the lines its keys are on
RESTART_IN_TRAINING = ("model_training.enabled", "model_training.publish.token_env")
BACKENDS = "model_training.backends."


def _plain(value: Any) -> Any:
    """A value as plain data, comparable with ``==``: dataclasses and dicts by field, lists
    item by item, other objects (a scheme's kind) by their class."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return type(value).__qualname__


def _flat(value: Any, prefix: str, out: Dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flat(v, prefix + "." + k if prefix else k, out)
    else:
        out[prefix] = value


def _keys(cfg) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        if f.name in IGNORED:
            continue
        name = YAML_NAMES.get(f.name, f.name)
        value = _plain(getattr(cfg, f.name))
        if f.name in ("server", "model_training", "item_properties"):
            _flat(value, name, out)
        else:
            out[name] = value  # a list or a value, compared whole
    return out


def changes(old, new) -> List[str]:
    """The config keys whose value differs, sorted; a backend counts once, by its name."""
    a, b = _keys(old), _keys(new)
    out = set()
    for key in set(a) | set(b):
        if a.get(key, KeyError) != b.get(key, KeyError):
            if key.startswith(BACKENDS):
                key = BACKENDS + key[len(BACKENDS):].split(".", 1)[0]
            out.add(key)
    # an empty mapping that gained keys: name the keys, not the mapping as well
    return sorted(k for k in out if not any(o.startswith(k + ".") for o in out))


def backend_change(old, new, name: str) -> str:
    """``added``, ``removed`` or ``changed``: what happened to backend ``name``."""
    if name not in old.model_training.backends:
        return "added"
    return "removed" if name not in new.model_training.backends else "changed"


def live(key: str) -> bool:
    """Whether a reload may apply a change of ``key`` while the server runs (see above)."""
    if key == "validation.acknowledge":
        return True
    if any(key == k or key.startswith(k + ".") for k in RESTART_IN_TRAINING):
        return False
    return key.startswith("model_training.")


def restart_sentence(keys: List[str]) -> str:
    """One sentence for the keys only a restart applies: ``server.port changed: restart the
    server to apply it``."""
    shown = keys[:3] + (["%d more" % (len(keys) - 3)] if len(keys) > 3 else [])
    names = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    return "%s changed: restart the server to apply %s" % (
        names, "it" if len(keys) == 1 else "them")
