"""Annotation kinds: one class per ``annotation_type``, found by the registry ``KINDS``.

Each kind (``potato/schemes/<module>.py``) owns its config keys, its value check, its inputs on
the annotate page, how a posted form holds its value, its export cell and upstream output cell,
and says (``Kind``'s class attributes) how its values are aggregated, agreed on, suggested,
predicted and scored. Adding a kind means a class and a line in ``KINDS``; nothing else
compares annotation types (tests/test_layout.py checks it). The keys are upstream Potato's, so
an upstream scheme block works unchanged.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Dict, List, Optional

from potato.config.reader import Path, Reader, dotted, suggest
from potato.schemes.allocation import ConstantSum, SoftLabel
from potato.schemes.base import KEEP, Kind, LabelError, Scheme, short
from potato.schemes.choice import Multiselect, Radio, Select
from potato.schemes.edit import TextEdit
from potato.schemes import logic
from potato.schemes.expand import expand
from potato.schemes.link import SpanLink
from potato.schemes.note import PureDisplay
from potato.schemes.pairwise import Pairwise
from potato.schemes.qa import ExtractiveQA
from potato.schemes.ranges import RangeSlider
from potato.schemes.ranking import Ranking
from potato.schemes.rating import Likert, Number, Slider
from potato.schemes.regions import Regions
from potato.schemes.variants import VARIANT_TYPES
from potato.schemes.span import Span
from potato.schemes.steps import ProcessReward
from potato.schemes.taxonomy import HierarchicalMultiselect
from potato.schemes.text import Text
from potato.config.upstream_keys import LOOKS_KEYS, SCHEME_HINTS

__all__ = ["KEEP", "KINDS", "Kind", "LabelError", "Scheme", "check_text_fields", "drawn_on", "kind_class",
           "make_scheme", "parse_schemes", "save_bytes"]

KINDS: Dict[str, type] = {k.type_name: k for k in (
    Radio, Multiselect, Select, Likert, Slider, Number, Text, Span, Pairwise, Regions,
    ConstantSum, SoftLabel, RangeSlider, HierarchicalMultiselect, Ranking, TextEdit,
    ExtractiveQA, PureDisplay, ProcessReward, SpanLink)}


def kind_class(annotation_type: Optional[str]) -> type:
    """The class of an annotation type named in stored data (a run's bundle schemas, an
    export's scheme no longer in the config): its class attributes say what the server does
    with its values. An unknown or missing type is the base ``Kind``: one of the labels."""
    if not isinstance(annotation_type, str):
        return Kind
    return KINDS.get(annotation_type) or next(
        (f for k in KINDS.values() for f in k.forms if f.type_name == annotation_type), Kind)

def drawn_on(schemes: List[Scheme]) -> Optional[str]:
    """The item field the first scheme drawn on an image names (``Kind.image_field``; "" for
    the project's image), or None when no scheme is drawn on one."""
    return next((f for f in (s.kind.image_field() for s in schemes if s.kind is not None)
                 if f is not None), None)


def check_text_fields(r: Reader, schemes: List[Scheme], text_key: str) -> None:
    """Spans are marked in the item's text: a scheme whose config names another field for
    them (``Kind.text_field``: extractive_qa's passage_field) is an error saying what to set."""
    for s in schemes:
        field = s.kind.text_field() if s.kind is not None else None
        if field is not None and field != text_key:
            r.error(("annotation_schemes",), f"scheme {s.name!r} marks its answer in the item "
                                             f"field {field!r}, and what is marked is the "
                                             f"item's text, item_properties.text_key "
                                             f"({text_key!r}); set text_key: {field} (or "
                                             f"point the scheme at {text_key}).")


COMMON_KEYS = ("annotation_type", "name", "description", "labels", "label_requirement",
               "sequential_key_binding", "display_logic")
# Upstream's codebook: true (labels from a living codebook seeded with them): the labels are
# the listed ones here, with a warning that annotators cannot add codes.
CODEBOOK_KEY = "codebook"


# What every save may hold besides long answers: the item id, the position, each scheme's
# field names, and choices, ratings and spans (a long text's spans included).
SAVE_ALLOWANCE = 64 << 10


def save_bytes(schemes: List[Scheme], longest_text: int = 0) -> int:
    """The most bytes one annotator's save of an item may take with these schemes (the
    annotate form or the JSON API), with items of at most ``longest_text`` characters: the
    server caps an annotator's request body there, and ``potato validate`` refuses a config
    whose saves ``server.max_body_mb`` could not take."""
    return SAVE_ALLOWANCE + sum(s.kind.answer_bytes(longest_text) for s in schemes
                                if s.kind is not None)


def make_scheme(name: str, annotation_type: str, labels: List[str], description: str = "",
                required: bool = False, **options: Any) -> Scheme:
    """A scheme built in code (tests, tools): options are the kind's attributes."""
    scheme = Scheme(name, annotation_type, list(labels), description, required,
                    [str(i + 1) if i < 9 else "" for i in range(len(labels))])
    scheme.kind = KINDS[annotation_type](scheme)
    for key, value in options.items():
        setattr(scheme.kind, key, value)
    return scheme


def parse_schemes(r: Reader, raw: Any, blockers: Optional[Dict[str, int]] = None
                  ) -> List[Scheme]:
    """The schemes; each type not here is one error, and counted in ``blockers``."""
    path: Path = ("annotation_schemes",)
    if raw is None:
        return []
    if not isinstance(raw, list):
        r.error(path, "annotation_schemes must be a list of schemes (each with annotation_type, "
                      "name and, for choices and spans, labels).")
        return []
    out, seen = [], set()
    places: Dict[str, Any] = {}  # scheme name: its index in the config's list
    skipped: List[str] = []  # names of schemes of a type not here
    for i, item in expand(r, raw):  # multirate and many-box text: one scheme per question
        p = path + (i,)
        kind_name = item.get("annotation_type") if isinstance(item, dict) else None
        cls = KINDS.get(kind_name) if isinstance(kind_name, str) else None
        cls = cls.form(item) if cls is not None else None  # a kind's mode may pick its form
        if cls is None and isinstance(kind_name, str) and kind_name.strip():
            if blockers is not None:
                what = "annotation_type %s" % kind_name
                blockers[what] = blockers.get(what, 0) + 1
            if isinstance(item.get("name"), str):
                skipped.append(item["name"])
            # a type this Potato does not have: one error naming it; its keys are that type's
            # vocabulary, not judged (nor matched against other types' keys)
            r.error(p + ("annotation_type",),
                    f"{dotted(p + ('annotation_type',))} is {kind_name!r}, which this Potato "
                    f"does not have (its other keys were not checked); Potato supports "
                    f"{', '.join(KINDS)}, and upstream's multirate, "
                    f"{', '.join(VARIANT_TYPES)}.{suggest(kind_name, KINDS)}")
            continue
        valid = COMMON_KEYS + LOOKS_KEYS + (CODEBOOK_KEY,) + (
            cls.keys if cls else tuple(k for c in KINDS.values() for k in c.keys))
        m = r.mapping(item, p, tuple(dict.fromkeys(valid)),
                      ("an" if kind_name[:1] in "aeiou" else "a") + f" {kind_name} scheme" if cls
                      else "an annotation scheme",
                      hints=SCHEME_HINTS)
        _tally(blockers, ["scheme key %s" % k for k in item  # upstream's, not here
                          if k not in valid and k in SCHEME_HINTS])
        if not m:
            continue
        name = r.text(m, "name", p)
        kind = r.text(m, "annotation_type", p)
        if not name:
            r.error(p, f"{dotted(p)} has no name. Give each scheme a name.")
            continue
        if _control(name):
            r.error(p + ("name",), f"{dotted(p)}: the scheme name {name!r} has a control "
                                   f"character (a line break, tab ...), which a form or export "
                                   f"cannot keep; remove it from the name (or from the "
                                   f"criterion, pair, option or label it is made of).")
        if name in seen:
            r.error(p + ("name",), f"{dotted(p)}: the scheme name {name!r} is used twice.")
        seen.add(name)
        places.setdefault(name, i)
        if cls is None:
            r.error(p + ("annotation_type",),
                    f"{dotted(p + ('annotation_type',))} is {kind!r}; Potato supports "
                    f"{', '.join(KINDS)}, and upstream's multirate, "
                    f"{', '.join(VARIANT_TYPES)}.{suggest(kind or '', KINDS)}")
        scheme = Scheme(name, cls.type_name if cls else kind or "", [],
                        r.text(m, "description", p, "") or "")
        scheme.labels, scheme.label_keys = _labels(r, m, p, name, cls)
        scheme.required = _required(r, m, p)
        scheme.display_logic = logic.parse(r, m.get("display_logic"), p)
        r.boolean(m, "sequential_key_binding", p, True)
        _codebook(r, m, p, name)
        if cls is not None:
            scheme.kind = cls(scheme)
            scheme.kind.parse(r, m, p)
        out.append(scheme)
    for scheme in out:
        if scheme.kind is not None:
            scheme.kind.settle(r, out, path + (places[scheme.name],))
    logic.check_names(r, out, places, skipped)
    return out


def _codebook(r: Reader, m: Dict[str, Any], p: Path, name: str) -> None:
    if r.boolean(m, CODEBOOK_KEY, p, False):
        r.warn(p + (CODEBOOK_KEY,), f"{dotted(p + (CODEBOOK_KEY,))}: true is upstream's "
                                    f"living codebook; here {name}'s labels are the ones "
                                    f"listed, and annotators cannot add, rename or merge "
                                    f"codes. Add a code to labels to offer it (or remove "
                                    f"codebook).")


def _tally(blockers: Optional[Dict[str, int]], whats: List[str]) -> None:
    """Count what blocks an upstream config (the migration report's blocking list)."""
    for what in whats if blockers is not None else []:
        blockers[what] = blockers.get(what, 0) + 1


def _control(name: str) -> bool:
    """Whether a name holds a control character or a line or paragraph separator."""
    return any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in name)


def _required(r: Reader, m: Dict[str, Any], p: Path) -> bool:
    req = r.mapping(m.get("label_requirement"), p + ("label_requirement",), ("required",),
                    "label_requirement")
    return r.boolean(req, "required", p + ("label_requirement",), False)


def _labels(r: Reader, m: Dict[str, Any], p: Path, name: str, cls):
    """(labels, keys): the scheme's label names and each one's key ("" for none)."""
    rule = cls.label_rule if cls else "required"
    raw = m.get("labels")
    if rule == "none":
        if raw is not None:
            r.error(p + ("labels",), f"{dotted(p)} ({name}) is a {cls.type_name} scheme, which "
                                     f"takes no labels; remove labels.")
        return [], []
    if raw is None and rule in ("optional-one", "optional"):
        return [], []
    if not isinstance(raw, list) or not raw:
        r.error(p + ("labels",), f"{dotted(p)} ({name}) needs a non-empty list of labels.")
        return [], []
    if rule == "optional-one" and len(raw) > 1:
        r.error(p + ("labels",), f"{dotted(p)} ({name}) is a {cls.type_name} scheme with "
                                 f"{len(raw)} labels; each label becomes its own box only "
                                 f"when the labels are distinct names.")
    labels, keys = [], []
    seen_labels, first_key = set(), {}  # sets: a long label list is checked in linear time
    for j, lab in enumerate(raw):
        key = str(len(labels) + 1) if len(labels) < 9 else ""
        if isinstance(lab, dict) and isinstance(lab.get("name"), str):
            key = _key_value(r, lab, p + ("labels", j), key)
            lab = lab["name"]
        if not isinstance(lab, (str, int, float)) or isinstance(lab, bool):
            r.error(p + ("labels", j), f"{dotted(p + ('labels', j))} must be a label "
                                       f"name (a string, or a mapping with name).")
            continue
        if str(lab) in seen_labels:
            r.error(p + ("labels", j), f"{dotted(p)} ({name}) lists the label "
                                       f"{short(str(lab))} twice.")
        seen_labels.add(str(lab))
        labels.append(str(lab))
        keys.append(key)
    for j, key in enumerate(keys):
        if not key:
            continue
        if key in first_key:
            r.error(p + ("labels", j), f"{dotted(p)} ({name}): the key {key!r} is given to "
                                       f"{short(labels[first_key[key]])} and "
                                       f"{short(labels[j])}.")
        else:
            first_key[key] = j
    return labels, keys


def _key_value(r: Reader, lab: Dict[str, Any], p: Path, default: str) -> str:
    """A label's own key (upstream's ``key_value``); other keys of a label mapping (tooltip
    ...) are about looks and are ignored, as they always were."""
    if lab.get("key_value") is None:
        return default
    value = r.text(lab, "key_value", p, default) or ""
    if len(value) != 1 or not value.isprintable() or value.isspace():
        r.error(p + ("key_value",), f"{dotted(p + ('key_value',))} must be one printable "
                                    f"character (the key that gives this label), not {value!r}.")
        return default
    return value
