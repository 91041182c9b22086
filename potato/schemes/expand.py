"""Upstream scheme blocks that are several questions at once, made into one scheme per question
before the schemes are read, so that each is stored, exported, aggregated and trained like any
other scheme:

- ``multirate``: ``options`` (the statements) each rated on the same ``labels`` becomes one
  ``radio`` scheme per option, named ``NAME[OPTION]`` with those labels;
- ``text`` with more than one label (upstream shows one box per label) becomes one ``text``
  scheme per label, named ``NAME[LABEL]``;
- ``rubric_eval``, ``semantic_differential``, ``confidence`` and ``vas`` become the likert or
  slider schemes they are forms of (``potato.schemes.variants``);
- a ``radio`` or ``multiselect`` with upstream's ``has_free_response`` becomes the choice and a
  one-line ``text`` scheme ``NAME[free_response]`` for what annotators type beside it.

A multirate option is a statement, or upstream's ``{name, label}``: the part is
``NAME[name]``, and its question shows ``label``.

``label_requirement``, ``sequential_key_binding`` and ``display_logic`` carry over to every
part;
``display_config`` and ``option_randomization`` (looks, and an order the page keeps fixed) are
accepted and have no effect. docs/configuration.md describes both.
"""

from __future__ import annotations

from typing import Any, Dict, List

from potato.config.reader import Path, Reader, dotted
from potato.config.upstream_keys import LOOKS_KEYS, SCHEME_HINTS
from potato.schemes.variants import VARIANT_TYPES, check_targets, rewrite
from potato.schemes.variants import _written as written

MULTIRATE_KEYS = ("annotation_type", "name", "description", "labels", "label_requirement",
                  "sequential_key_binding", "options", "display_config",
                  "option_randomization", "annotation_id", "tooltip", "horizontal",
                  "display_logic")
CARRIED = ("label_requirement", "sequential_key_binding", "display_logic")


def part_name(name: str, part: str) -> str:
    return f"{name}[{part}]"


def expand(r: Reader, raw: Any) -> List[Any]:
    """``annotation_schemes`` with each multirate block and each text block with several
    labels replaced by its parts (every part keeps the block's index for error paths: the
    list returned holds (index, block) pairs)."""
    if not isinstance(raw, list):
        return raw
    out: List[Any] = []
    targets: List[Any] = []  # confidence's target_schema, checked against the made names
    for i, item in enumerate(raw):
        p: Path = ("annotation_schemes", i)
        kind = item.get("annotation_type") if isinstance(item, dict) else None
        if kind == "multirate":
            out.extend((i, part) for part in _multirate(r, item, p))
        elif kind in VARIANT_TYPES:
            out.extend((i, part) for part in rewrite(r, item, p, targets))
        elif kind == "text" and isinstance(item.get("labels"), list) and \
                len(item["labels"]) > 1 and isinstance(item.get("name"), str):
            out.extend((i, part) for part in _text_boxes(item))
        elif kind in ("radio", "multiselect") and "has_free_response" in item:
            out.extend((i, part) for part in _free_response(r, item, p))
        else:
            out.append((i, item))
    check_targets(r, targets, [part.get("name") for _, part in out if isinstance(part, dict)])
    return out


def _multirate(r: Reader, item: Dict[str, Any], p: Path) -> List[Dict[str, Any]]:
    m = r.mapping(item, p, tuple(dict.fromkeys(MULTIRATE_KEYS + LOOKS_KEYS)),
                  "a multirate scheme", hints=SCHEME_HINTS)
    name, options = m.get("name"), m.get("options")
    base = {k: m[k] for k in ("name", "description", "labels") + CARRIED if k in m}
    base["annotation_type"] = "radio"
    if "description" in m:  # a string from here on (each part's question is made of it)
        base["description"] = r.text(m, "description", p, "") or ""
    if not isinstance(name, str) or not name:
        return [base]  # the schemes' reader says what is missing
    if isinstance(options, list):  # a bare On or Yes (YAML 1.1's true) as written
        options = [_as_written(r, o, p + ("options", j)) for j, o in enumerate(options)]
    if not isinstance(options, list) or not options or not all(
            _option(o) for o in options):
        r.error(p + ("options",), f"{dotted(p)} ({name}) is a multirate scheme: give options, "
                                  f"a non-empty list of the statements to rate (strings, or "
                                  f"{{name, label}} mappings of strings).")
        return []
    options = [_option(o) for o in options]
    if len({o for o, _ in options}) != len(options):
        r.error(p + ("options",), f"{dotted(p)} ({name}) lists an option twice; each option "
                                  f"becomes its own question ({part_name(name, 'OPTION')}).")
        return []
    desc = base.get("description") or name
    return [dict(base, name=part_name(name, o), description=f"{desc} {shown}")
            for o, shown in options]


def _as_written(r: Reader, o: Any, path: Path) -> Any:
    """An option with each scalar as written (``written``: YAML 1.1 reads On as true)."""
    if isinstance(o, dict):
        return {k: written(r, v, path + (k,)) for k, v in o.items()}
    return written(r, o, path)


def _option(o: Any):
    """(name, text shown) of a multirate option: a statement, or {name, label} (label
    optional); None when it is neither."""
    if isinstance(o, str):
        return (o, o) if o.strip() else None
    if isinstance(o, dict) and set(o) <= {"name", "label"} and isinstance(o.get("name"), str) \
            and o["name"].strip() and isinstance(o.get("label", ""), str):
        return o["name"], o.get("label") or o["name"]
    return None


def _free_response(r: Reader, item: Dict[str, Any], p: Path) -> List[Dict[str, Any]]:
    """A radio or multiselect block with upstream's ``has_free_response`` (true, or
    ``{instruction}``): the choice, then a one-line ``text`` scheme ``NAME[free_response]``
    asking the instruction (upstream's default "Other (please specify)"); false or null: the
    choice alone."""
    raw = item["has_free_response"]
    choice = {k: v for k, v in item.items() if k != "has_free_response"}
    if not raw or not isinstance(item.get("name"), str):
        return [choice]
    if not isinstance(raw, (bool, dict)):
        r.error(p + ("has_free_response",), f"{dotted(p + ('has_free_response',))} must be "
                                            f"true, false or {{instruction: TEXT}}.")
        return [choice]
    ask = raw.get("instruction") if isinstance(raw, dict) else None
    ask = ask.strip() if isinstance(ask, str) and ask.strip() else "Other (please specify)"
    box = {"annotation_type": "text", "name": part_name(item["name"], "free_response"),
           "description": ask}
    box.update({k: item[k] for k in ("display_logic",) if k in item})
    return [choice, box]


def _text_boxes(item: Dict[str, Any]) -> List[Dict[str, Any]]:
    names = [lab.get("name") if isinstance(lab, dict) else lab for lab in item["labels"]]
    if len(set(map(str, names))) != len(names):
        return [item]  # the schemes' reader names the repeated label
    parts = []
    for label in item["labels"]:
        text = label.get("name") if isinstance(label, dict) else label
        if not isinstance(text, (str, int, float)) or isinstance(text, bool):
            return [item]  # the schemes' reader names the bad label
        part = dict(item, name=part_name(item["name"], str(text)), labels=[str(text)])
        part["description"] = f"{item.get('description') or item['name']} {text}"
        parts.append(part)
    return parts
