"""Upstream annotation types that are forms of a kind this Potato has, rewritten into that kind
before the schemes are read (as ``expand`` does for multirate), so each is stored, checked,
exported, aggregated and trained like the kind it is:

- ``rubric_eval``: each of ``criteria`` (``{name, description}`` or a name) scored on
  ``scale_points`` (default 5) with ``scale_labels`` becomes one ``likert`` scheme
  ``NAME[CRITERION]``; ``show_overall: true`` adds ``NAME[overall]``;
- ``semantic_differential``: each of ``pairs`` (``[left, right]``) becomes one ``likert``
  scheme ``NAME[LEFT__RIGHT]`` (upstream's label for the pair) of ``scale_points`` (default 7)
  from ``left`` to ``right``;
- ``confidence``: ``scale_type: likert`` (default) is one ``likert`` scheme of
  ``scale_points`` (default 5) whose points are named by ``labels``; ``scale_type: slider`` is
  a ``slider`` from ``min_value`` to ``max_value`` (0 to 100) between ``left_label`` and
  ``right_label``; ``target_schema`` must name another scheme;
- ``vas`` (visual analogue scale): a ``slider`` from ``min_value`` to ``max_value`` (0 to 100)
  in steps of 10^-``precision`` (precision 1: 0.1), its ends named ``left_label`` and
  ``right_label``;
- ``triage``: a ``radio`` scheme whose answers are upstream's stored values ``accept``,
  ``reject`` and ``skip`` (keys ``accept_key`` ... , default 1, 2, 3), the question naming what
  each means (``accept_label`` ..., default Keep, Discard, Unsure).

Every key is checked here, at the boundary, with an error that names it; ``label_requirement``,
``sequential_key_binding`` and ``display_logic`` carry over to every part, and looks keys
(``show_value``, ``layout`` ...) are accepted with no effect. docs/configuration.md lists them.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from potato.config.reader import Path, Reader, dotted
from potato.schemes.base import number_key
from potato.schemes.rating import MAX_STEPS
from potato.config.upstream_keys import LOOKS_KEYS, SCHEME_HINTS

CARRIED = ("label_requirement", "sequential_key_binding", "display_logic")
LOOKS = LOOKS_KEYS  # as every scheme's
COMMON = ("annotation_type", "name", "description") + CARRIED + LOOKS
MAX_POINTS = 20  # as likert's size
DEFAULT_RUBRIC_LABELS = ["Poor", "Below Average", "Average", "Good", "Excellent"]
DEFAULT_CONFIDENCE_LABELS = ["Guessing", "Somewhat confident", "Fairly confident", "Confident",
                             "Certain"]
VARIANT_TYPES = ("rubric_eval", "semantic_differential", "confidence", "vas", "triage")
TRIAGE = (("accept", "Keep", "1"), ("reject", "Discard", "2"), ("skip", "Unsure", "3"))


def rewrite(r: Reader, item: Dict[str, Any], p: Path, names: List[Any]) -> List[Dict[str, Any]]:
    """The schemes one upstream block of a VARIANT_TYPES type stands for ([] after an error).
    ``names``: a confidence's target_schema is added to it as (path, name, target), for
    ``check_targets`` once every block is made into its schemes."""
    kind = item["annotation_type"]
    keys = COMMON + _KEYS[kind]
    m = r.mapping(item, p, keys, f"a {kind} scheme", hints=SCHEME_HINTS)
    name = m.get("name")
    if isinstance(name, (int, float)) and not isinstance(name, bool):
        name = m["name"] = str(name)  # as any scheme's name: 5 is "5"
    if not isinstance(name, str) or not name:
        return [_base(m, "likert")]  # the schemes' reader says the name is missing
    before = len(r.errors)
    if "description" in m:  # a string from here on (the question text each part is made of)
        m["description"] = r.text(m, "description", p, "") or ""
    out = _REWRITE[kind](r, m, p, name, names)
    return out if len(r.errors) == before else []


def _base(m: Dict[str, Any], kind: str) -> Dict[str, Any]:
    base = {k: m[k] for k in ("name", "description") + CARRIED if k in m}
    base["annotation_type"] = kind
    return base


def _written(r: Reader, value: Any, path: Path) -> Any:
    """A scalar as written: YAML 1.1 reads a bare No, Yes, On or Off as false or true."""
    if isinstance(value, bool) and path in r.scalars:
        return r.scalars[path]
    return value


def _points(r: Reader, m, p: Path, name: str, default: int) -> int:
    return r.number(m, "scale_points", p, default, 2, MAX_POINTS, integer=True)


def _names(r: Reader, m, key: str, p: Path, name: str, what: str) -> Optional[List[str]]:
    """A list of non-empty strings (a label list), or None after an error naming it."""
    raw = m.get(key)
    if raw is None:
        return None
    if isinstance(raw, list):
        raw = [_written(r, x, p + (key, j)) for j, x in enumerate(raw)]
    if not isinstance(raw, list) or not raw or not all(
            isinstance(x, (str, int, float)) and not isinstance(x, bool) and str(x).strip()
            for x in raw):
        r.error(p + (key,), f"{dotted(p)} ({name}): {key} must be a non-empty list of {what} "
                            f"(strings).")
        return None
    return [str(x) for x in raw]


def _note(labels: List[str]) -> str:
    """' (1 = Poor, 2 = Fair, 3 = Good)': every point's name, for the scheme's description."""
    return " (" + ", ".join(f"{i} = {lab}" for i, lab in enumerate(labels, 1)) + ")"


def _likert(m, name: str, part: str, desc: str, size: int, labels: List[str]) -> Dict:
    scheme = dict(_base(m, "likert"), name=f"{name}[{part}]", description=desc, size=size)
    if labels:
        scheme["min_label"], scheme["max_label"] = labels[0], labels[-1]
    return scheme


def _rubric(r: Reader, m, p: Path, name: str, names) -> List[Dict[str, Any]]:
    size = _points(r, m, p, name, 5)
    labels = _names(r, m, "scale_labels", p, name, "point names")
    if labels is not None and len(labels) > size:
        r.error(p + ("scale_labels",), f"{dotted(p)} ({name}) names {len(labels)} points for "
                                       f"a scale of {size} (scale_points); give at most "
                                       f"{size}, or raise scale_points.")
        return []
    if labels is not None and len(labels) < size:
        r.warn(p + ("scale_labels",), f"{dotted(p)} ({name}) names {len(labels)} of its {size} "
                                      f"points (scale_points): the first and last name the "
                                      f"scale's ends, and the question lists no point names; "
                                      f"give {size} names to list them all.")
    labels = labels if labels is not None else DEFAULT_RUBRIC_LABELS[:size]
    note = _note(labels) if len(labels) == size else ""
    ends = labels if len(labels) > 1 else []  # a scale's two ends, always named when given
    raw = m.get("criteria")
    if not isinstance(raw, list) or not raw:
        r.error(p + ("criteria",), f"{dotted(p)} ({name}) is a rubric_eval scheme: give "
                                   f"criteria, a non-empty list of {{name, description}}.")
        return []
    criteria = []
    for j, c in enumerate(raw):
        at = p + ("criteria", j)
        cname = _written(r, c.get("name"), at + ("name",)) if isinstance(c, dict) else \
            _written(r, c, at)
        cdesc = _written(r, c.get("description"), at + ("description",)) \
            if isinstance(c, dict) else None
        if isinstance(c, dict):
            r.mapping(c, p + ("criteria", j), ("name", "description"), "a rubric criterion")
        if not isinstance(cname, str) or not cname.strip() or \
                cdesc is not None and not isinstance(cdesc, str):
            r.error(p + ("criteria", j), f"{dotted(p + ('criteria', j))} must be a criterion "
                                         f"name, or {{name, description}} (strings).")
            continue
        criteria.append((cname, cdesc or ""))
    if r.boolean(m, "show_overall", p, False):
        criteria.append(("overall", "Overall quality"))
    if len({c for c, _ in criteria}) != len(criteria):
        r.error(p + ("criteria",), f"{dotted(p)} ({name}) lists a criterion twice; each "
                                   f"becomes its own question ({name}[CRITERION]).")
        return []
    desc = m.get("description") or name
    return [_likert(m, name, c, f"{desc} {c}" + (f": {d}" if d else "") + note, size, ends)
            for c, d in criteria]


def _differential(r: Reader, m, p: Path, name: str, names) -> List[Dict[str, Any]]:
    size = _points(r, m, p, name, 7)
    raw = m.get("pairs")
    if not isinstance(raw, list) or not raw:
        r.error(p + ("pairs",), f"{dotted(p)} ({name}) is a semantic_differential scheme: give "
                                f"pairs, a non-empty list of [left, right] word pairs.")
        return []
    out, seen = [], set()
    for j, pair in enumerate(raw):
        if isinstance(pair, list):
            pair = [_written(r, w, p + ("pairs", j, k)) for k, w in enumerate(pair)]
        if not isinstance(pair, list) or len(pair) != 2 or not all(
                isinstance(w, str) and w.strip() for w in pair):
            r.error(p + ("pairs", j), f"{dotted(p + ('pairs', j))} must be a pair of words, "
                                      f"[left, right], such as [Good, Bad].")
            continue
        part = f"{pair[0]}__{pair[1]}"
        if part in seen:
            r.error(p + ("pairs", j), f"{dotted(p)} ({name}) lists the pair {pair} twice.")
        seen.add(part)
        desc = f"{m.get('description') or name} {pair[0]} – {pair[1]}"
        out.append(_likert(m, name, part, desc, size, list(pair)))
    return out


def _confidence(r: Reader, m, p: Path, name: str, names) -> List[Dict[str, Any]]:
    target = r.text(m, "target_schema", p, None, numbers_ok=False)
    if target is not None:
        names.append((p, name, target))
    kind = r.text(m, "scale_type", p, "likert")
    if kind == "slider":
        if m.get("labels") is not None or m.get("scale_points") is not None:
            r.error(p + ("scale_type",), f"{dotted(p)} ({name}) is a slider confidence: "
                                         f"labels and scale_points are for scale_type: likert; "
                                         f"remove them, or use left_label and right_label.")
        return [_slider(r, m, p, 0, "Not confident", "Very confident")]
    if kind != "likert":
        r.error(p + ("scale_type",), f"{dotted(p + ('scale_type',))} is {kind!r}; give likert "
                                     f"or slider.")
        return []
    for key in ("min_value", "max_value", "step", "left_label", "right_label"):
        if key in m:
            r.error(p + (key,), f"{dotted(p + (key,))} is for scale_type: slider; remove it.")
    size = _points(r, m, p, name, 5)
    labels = _names(r, m, "labels", p, name, "point names")
    if labels is not None and len(labels) > size:
        r.error(p + ("labels",), f"{dotted(p)} ({name}) names {len(labels)} points for a "
                                 f"scale of {size} (scale_points); give at most {size}.")
        return []
    labels = list(labels if labels is not None else DEFAULT_CONFIDENCE_LABELS[:size])
    labels += [f"Level {i}" for i in range(len(labels) + 1, size + 1)]  # as upstream pads
    scheme = dict(_base(m, "likert"), size=size, min_label=labels[0], max_label=labels[-1])
    scheme["description"] = (m.get("description") or name) + _note(labels)
    return [scheme]


def check_targets(r: Reader, targets: List[Any], names: List[Any]) -> None:
    """Each confidence's target_schema (``rewrite``) names another scheme as the config's
    blocks are made into schemes (``names``: a multirate ``dims`` is ``dims[a]`` ...)."""
    for p, name, target in targets:
        if target != name and target in names:
            continue
        parts = [n for n in names if isinstance(n, str) and n.startswith(target + "[")]
        made = f" ({target} is made into {', '.join(parts)}: name one of them)" if parts else ""
        r.error(p + ("target_schema",), f"{dotted(p + ('target_schema',))} is {target!r}, "
                                        f"which is not another scheme of this config{made}; "
                                        f"name the scheme this confidence is about, or remove "
                                        f"it.")


def _vas(r: Reader, m, p: Path, name: str, names) -> List[Dict[str, Any]]:
    precision = r.number(m, "precision", p, 1, 0, 6, integer=True)
    r.boolean(m, "show_value", p, False)
    return [_slider(r, m, p, precision, "", "")]


def _slider(r: Reader, m, p: Path, precision: int, left: str, right: str) -> Dict[str, Any]:
    lo = number_key(r, m, "min_value", p, 0)  # finite and bounded before any arithmetic
    hi = number_key(r, m, "max_value", p, 100)
    if lo >= hi:
        r.error(p + ("max_value",), f"{dotted(p)}: max_value ({hi}) must be more than "
                                    f"min_value ({lo}).")
        hi = lo + 1
    default = 10 ** -precision if precision else 1
    step = number_key(r, m, "step", p, default)
    if step <= 0:
        r.error(p + ("step",), f"{dotted(p + ('step',))} must be more than 0, not {step}.")
        step = default
    steps = (hi - lo) / step
    if not steps <= MAX_STEPS:
        key = "step" if "step" in m else "precision"  # vas: the step is 10^-precision
        r.error(p + (key,), f"{dotted(p)}: a step of {step} is too small for the range {lo} "
                            f"to {hi} (a slider has at most {MAX_STEPS:g} steps); give a "
                            f"larger {'step' if key == 'step' else 'step (a lower precision)'} "
                            f"or a narrower range.")
        steps = 0
    scheme = dict(_base(m, "slider"), min_value=lo, max_value=hi, step=step,
                  starting_value=lo + round(steps / 2) * step)
    for key, end, default in (("left_label", "min_label", left),
                              ("right_label", "max_label", right)):
        m = dict(m, **{key: _written(r, m.get(key), p + (key,))})
        scheme[end] = r.text(m, key, p, default) or ""
    scheme["starting_value"] = round(scheme["starting_value"], 10)
    return scheme


def _triage(r: Reader, m, p: Path, name: str, names) -> List[Dict[str, Any]]:
    r.boolean(m, "auto_advance", p, True)   # looks: the page moves on with Save and next
    r.boolean(m, "show_progress", p, True)  # looks: the page shows the item's position
    labels, shown = [], []
    for value, default, key in TRIAGE:
        key_path = p + (f"{value}_label",)  # a bare Yes or No is the text as written
        shown_m = {f"{value}_label": _written(r, m.get(f"{value}_label"), key_path)}
        text = r.text(shown_m, f"{value}_label", p, default, numbers_ok=False) or default
        given = _written(r, m.get(f"{value}_key"), p + (f"{value}_key",))
        given = key if given is None else str(given)
        if len(given) != 1 or not given.isprintable() or given.isspace() or \
                given in [lab["key_value"] for lab in labels]:
            r.error(p + (f"{value}_key",), f"{dotted(p + (f'{value}_key',))} is {given!r}: give "
                                           f"one printable character, not the key of another "
                                           f"answer.")
            return []
        labels.append({"name": value, "key_value": given})
        shown.append(f"{value} = {text}")
    return [dict(_base(m, "radio"), labels=labels,
                 description=f"{m.get('description') or name} ({', '.join(shown)})")]


_KEYS = {"rubric_eval": ("criteria", "scale_points", "scale_labels", "show_overall"),
         "semantic_differential": ("pairs", "scale_points"),
         "confidence": ("target_schema", "scale_type", "scale_points", "labels", "min_value",
                        "max_value", "step", "left_label", "right_label"),
         "vas": ("min_value", "max_value", "left_label", "right_label", "show_value",
                 "precision"),
         "triage": ("accept_label", "reject_label", "skip_label", "accept_key", "reject_key",
                    "skip_key", "auto_advance", "show_progress")}
_REWRITE = {"rubric_eval": _rubric, "semantic_differential": _differential,
            "confidence": _confidence, "vas": _vas, "triage": _triage}
