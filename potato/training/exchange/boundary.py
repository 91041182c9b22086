"""The trust boundary of training: everything a run sends back — the worker's events, an agent's
report and result, the predictions file — is checked here, once, against a declared shape.

A GPU host, a login node, a machine behind NAT and any trainer's code may compute for us, but
may not write markup into the admin's browser, store a label outside the scheme, or make a page
fail. Each check returns typed, bounded values (strings capped, numbers finite) or a clear
reason; stores and pages take only what comes out of here.
"""

import json
import math
import re
import unicodedata
from typing import Any, Dict, List, Optional, Tuple

from potato.schemes import kind_class
from potato.training.remote.protocol import TYPES

TEXT_MAX = 2000  # a message, an error
NAME_MAX = 100  # a metric name, a unit, a kind
PATH_MAX = 500
TAIL_MAX = 4000
BIG = 10 ** 12  # counts and sizes beyond this are not believable
LEVELS = ("info", "warning", "error")
STATUSES = ("success", "error", "cancelled")
MAX_SPANS = 1000  # span predictions per item and scheme (as many as an annotator may store)


class Invalid(ValueError):
    """Input outside its declared shape; ``str(e)`` says which field and why."""


# -- field checks ----------------------------------------------------------------------------

# Bidi controls (embeddings, overrides, isolates, marks) make a text read as what it is not
# ("exe.txt" shown for "txt.exe"): no text a host sends keeps them.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def text(value: Any, field: str, limit: int = TEXT_MAX, required: bool = False) -> Optional[str]:
    """A string without bidi controls, capped at ``limit`` characters (longer ones are cut,
    marked with …)."""
    if value is None:
        if required:
            raise Invalid("%s is missing" % field)
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise Invalid("%s must be text, not %s" % (field, type(value).__name__))
    s = str(value)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "replace").decode("utf-8")
    s = _BIDI.sub("", s)
    return s if len(s) <= limit else s[:limit - 1] + "…"


def number(value: Any, field: str, lo: float = -BIG, hi: float = BIG, integer: bool = False,
           required: bool = False) -> Optional[float]:
    """A finite number in [lo, hi] (an int when ``integer``); never NaN or infinite."""
    if value is None:
        if required:
            raise Invalid("%s is missing" % field)
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid("%s must be a number, not %s" % (field, type(value).__name__))
    if isinstance(value, float) and not math.isfinite(value):
        raise Invalid("%s must be a finite number" % field)
    if not lo <= value <= hi:
        raise Invalid("%s is %s, outside %g..%g" % (field, value, lo, hi))
    if integer:
        if value != int(value):
            raise Invalid("%s must be a whole number" % field)
        return int(value)
    return float(value)


# -- events ----------------------------------------------------------------------------------

def event(raw: Any) -> Dict[str, Any]:
    """A worker event (docs/agent-protocol.md) as its declared shape, or Invalid."""
    if not isinstance(raw, dict):
        raise Invalid("an event must be an object")
    kind = raw.get("type")
    if kind not in TYPES:
        raise Invalid("event type %r is not one of %s" % (str(kind)[:40], ", ".join(TYPES)))
    out: Dict[str, Any] = {"type": kind, "t": number(raw.get("t"), "t", 0, 1e11)}
    build = _EVENTS[kind]
    out.update(build(raw))
    return {k: v for k, v in out.items() if v is not None}


def _status(raw):
    return {"message": text(raw.get("message"), "message", required=True)}


def _progress(raw):
    total = number(raw.get("total"), "total", 0, BIG, integer=True)
    current = number(raw.get("current"), "current", 0, BIG, integer=True, required=True)
    if total is not None and current > total:
        raise Invalid("current (%d) is more than total (%d)" % (current, total))
    return {"current": current, "total": total,
            "unit": text(raw.get("unit"), "unit", NAME_MAX),
            "eta_s": number(raw.get("eta_s"), "eta_s", 0, 1e9),
            "epoch": number(raw.get("epoch"), "epoch", 0, 1e6, integer=True)}


def _metric(raw):
    return {"name": text(raw.get("name"), "name", NAME_MAX, required=True),
            "value": number(raw.get("value"), "value", required=True),
            "epoch": number(raw.get("epoch"), "epoch", 0, 1e6, integer=True),
            "step": number(raw.get("step"), "step", 0, BIG, integer=True),
            "split": text(raw.get("split"), "split", NAME_MAX),
            "scheme": text(raw.get("scheme"), "scheme", NAME_MAX)}


def _log(raw):
    level = raw.get("level", "info")
    if level not in LEVELS:
        raise Invalid("level must be one of %s" % ", ".join(LEVELS))
    return {"level": level, "message": text(raw.get("message"), "message", required=True)}


def _artifact(raw):
    return {"path": plain(text(raw.get("path"), "path", PATH_MAX, required=True)),
            "bytes": number(raw.get("bytes"), "bytes", 0, BIG, integer=True)}


def _result(raw):
    return {"metrics": metrics(raw.get("metrics"))}


def _error(raw):
    return {"message": text(raw.get("message"), "message", required=True),
            "kind": text(raw.get("kind"), "kind", NAME_MAX)}


def plain(value: Optional[str]) -> Optional[str]:
    """Text without control or format characters (newlines, escapes, bidi overrides): a
    name shown in a table must read as what it is."""
    if value is None:
        return None
    return "".join(ch for ch in value if unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))


_HIDDEN = ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp")
_BLANKS = frozenset("\u115f\u1160\u3164\uffa0\u2800")  # Hangul fillers, blank braille


def has_hidden(value: str) -> bool:
    """Whether ``value`` holds a control or format character (escapes, bidi overrides, zero
    widths), a private-use, unassigned or surrogate code point, a line/paragraph separator or
    a blank that prints nothing (Hangul fillers, the blank braille pattern), or starts (or
    has a path part that starts) with a combining mark: a name that would not read as what it
    is."""
    for i, ch in enumerate(value):
        if unicodedata.category(ch) in _HIDDEN or ch in _BLANKS:
            return True
        if unicodedata.category(ch).startswith("M") and (i == 0 or value[i - 1] in "/\\"):
            return True
    return False


def _where(raw):
    out = dict((k, plain(text(raw.get(k), k, NAME_MAX)))
               for k in ("host", "gpus", "slurm_job", "slurm_node", "device"))
    out["nodes"] = plain(text(raw.get("nodes"), "nodes", 400))  # a multi-node run's hosts
    return out


_EVENTS = {"where": _where, "status": _status, "progress": _progress, "metric": _metric, "log": _log,
           "artifact": _artifact, "result": _result, "error": _error}


def metrics(raw: Any) -> Dict[str, Any]:
    """A run's metrics: short names to finite numbers, short texts, booleans or nulls."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise Invalid("metrics must be an object")
    if len(raw) > 500:
        raise Invalid("metrics has %d entries; at most 500" % len(raw))
    out = {}
    for k, v in raw.items():
        key = text(k, "a metric's name", NAME_MAX)
        if v is None or isinstance(v, bool):
            out[key] = v
        elif isinstance(v, (int, float)):
            out[key] = number(v, "metric %s" % key)
        else:
            out[key] = text(v, "metric %s" % key, 200)
    return out


# -- an agent's result -------------------------------------------------------------------------

def result(raw: Any) -> Dict[str, Any]:
    """The body of POST .../result, as its declared shape, or Invalid."""
    if not isinstance(raw, dict):
        raise Invalid("the result must be an object")
    if raw.get("status") not in STATUSES:
        raise Invalid("status must be success, error or cancelled")
    artifacts = raw.get("artifacts") or []
    if not isinstance(artifacts, list) or len(artifacts) > 100000:
        raise Invalid("artifacts must be a list (of at most 100000 files)")
    clean = []
    for i, a in enumerate(artifacts):
        if not isinstance(a, dict):
            raise Invalid("artifacts[%d] must be an object" % i)
        raw_path = a.get("path")
        path = text(raw_path, "artifacts[%d].path" % i, PATH_MAX, True)
        if has_hidden(path) or isinstance(raw_path, str) and has_hidden(raw_path):
            # a file name is refused, not cleaned: it must be the host's own name
            raise Invalid("artifacts[%d].path holds control or format characters" % i)
        clean.append({"path": path,
                      "bytes": number(a.get("bytes"), "artifacts[%d].bytes" % i, 0, BIG, True),
                      "fetched": bool(a.get("fetched"))})
    out = {"status": raw["status"], "error": text(raw.get("error"), "error"),
           "exit_code": number(raw.get("exit_code"), "exit_code", -255, 255, integer=True),
           "stderr_tail": text(raw.get("stderr_tail"), "stderr_tail", TAIL_MAX),
           "artifacts": clean, "workdir": text(raw.get("workdir"), "workdir", PATH_MAX),
           "host": plain(text(raw.get("host"), "host", 255)),
           "python": plain(text(raw.get("python"), "python", 40))}
    return out


# -- predictions -------------------------------------------------------------------------------

def prediction(raw: Any, splits: Dict[str, str], schemas: Dict[str, Dict[str, Any]],
               texts: Optional[Dict[str, str]] = None):
    """One predictions.jsonl row checked against the run's bundle and schemes, or Invalid.
    ``texts`` (item id to text) is what span predictions are checked against."""
    if not isinstance(raw, dict):
        raise Invalid("a prediction must be an object")
    item = raw.get("id")
    if not isinstance(item, str) or item not in splits:
        raise Invalid("id %s is not an item of the run's bundle" % json.dumps(item)[:80])
    split = raw.get("split")
    if split != splits[item]:
        raise Invalid("split %s is not item %s's split (%s)" % (json.dumps(split)[:40], item,
                                                                 splits[item]))
    scheme = raw.get("scheme")
    if scheme not in schemas:
        raise Invalid("scheme %s is not a scheme of the run" % json.dumps(scheme)[:80])
    info = schemas[scheme]
    label = _LABELS[kind_class(info["type"]).predicts](raw.get("label"), scheme, info,
                                                       (texts or {}).get(item))
    confidence = number(raw.get("confidence"), "confidence", 0, 1, required=True)
    row = {"id": item, "split": split, "scheme": scheme, "label": label,
           "confidence": confidence}
    ranks_by = kind_class(info["type"]).ranks_by
    if raw.get("probabilities") is not None:
        row["probabilities"] = probabilities(raw["probabilities"], scheme, info, ranks_by)
    if raw.get("vector") is not None:
        row["vector"] = vector(raw["vector"])
    if raw.get("uncertainty") is not None:
        if ranks_by != "confidence":
            raise Invalid("uncertainty is for span schemes; %s's rows give probabilities"
                          % scheme)
        row["uncertainty"] = number(raw["uncertainty"], "uncertainty", 0, 1, required=True)
    return row


MAX_VECTOR = 64  # the dimension of an item's vector (active learning's diversity)
SUM_TOLERANCE = 0.01  # how far a label distribution's probabilities may sum from 1


def probabilities(raw: Any, scheme: str, info: Dict[str, Any], ranks_by: Optional[str]):
    """Each label's probability: the run's labels of the scheme only (a Likert point as its
    number written as text), each in [0, 1]; a distribution ("distribution") sums to 1 within
    SUM_TOLERANCE, a multi-label scheme's ("each") are independent yes/no probabilities."""
    if ranks_by not in ("distribution", "each"):
        raise Invalid("probabilities are for choice and Likert schemes, not %s" % scheme)
    labels = [str(x) for x in info["labels"]]
    if not isinstance(raw, dict) or not raw:
        raise Invalid("probabilities must be an object of %s's labels" % scheme)
    out = {}
    for key, value in raw.items():
        if key not in labels:
            raise Invalid("probabilities: %s is not one of %s's labels (%s)" % (
                json.dumps(key)[:80], scheme, ", ".join(labels)[:200]))
        out[key] = number(value, "probability of %s" % key[:80], 0, 1, required=True)
    if ranks_by == "distribution" and abs(sum(out.values()) - 1) > SUM_TOLERANCE:
        raise Invalid("probabilities of %s sum to %.4f, not 1" % (scheme, sum(out.values())))
    return out


def vector(raw: Any) -> List[float]:
    """An item's vector from the model (diversity): at most MAX_VECTOR finite numbers."""
    if not isinstance(raw, list) or not raw or len(raw) > MAX_VECTOR:
        raise Invalid("vector must be a list of 1 to %d numbers" % MAX_VECTOR)
    return [number(x, "vector value", -1e6, 1e6, required=True) for x in raw]


def span_label(raw: Any, text: Optional[str], scheme: str, labels: List[str]):
    """A span prediction: at most MAX_SPANS ``{start, end, label, confidence}`` inside the item's
    text, on labels of the scheme, not overlapping; returned sorted, each with the ``text`` it
    covers (taken from the item, never from the row)."""
    if text is None:
        raise Invalid("span predictions for %s need the item's text" % scheme)
    if not isinstance(raw, list):
        raise Invalid("label %s is not a list of spans of %s" % (json.dumps(raw)[:80], scheme))
    if len(raw) > MAX_SPANS:
        raise Invalid("%d spans for one item of %s; at most %d" % (len(raw), scheme, MAX_SPANS))
    out = []
    for i, s in enumerate(raw):
        where = "span %d" % (i + 1)
        if not isinstance(s, dict) or set(s) - {"start", "end", "label", "confidence", "text"}:
            raise Invalid("%s must be an object of start, end, label and confidence" % where)
        start = number(s.get("start"), where + " start", 0, len(text), True, True)
        end = number(s.get("end"), where + " end", 0, len(text), True, True)
        if start >= end:
            raise Invalid("%s: start %d is not before end %d" % (where, start, end))
        if s.get("label") not in labels:
            raise Invalid("%s: label %s is not one of %s's labels (%s)" % (
                where, json.dumps(s.get("label"))[:80], scheme, ", ".join(labels)))
        out.append({"start": start, "end": end, "label": s["label"], "text": text[start:end],
                    "confidence": number(s.get("confidence"), where + " confidence", 0, 1,
                                         required=True)})
    out.sort(key=lambda s: (s["start"], s["end"]))
    for a, b in zip(out, out[1:]):
        if b["start"] < a["end"]:
            raise Invalid("spans %d..%d and %d..%d overlap" % (a["start"], a["end"], b["start"],
                                                               b["end"]))
    return out


def _one_label(label, scheme, info, item_text=None):
    if not isinstance(label, str) or label not in info["labels"]:
        raise Invalid("label %s is not one of %s's labels (%s)" % (
            json.dumps(label)[:80], scheme, ", ".join(info["labels"])))
    return label


def _label_set(label, scheme, info, item_text=None):
    if (not isinstance(label, list) or not all(isinstance(x, str) for x in label)
            or len(set(label)) != len(label) or not set(label) <= set(info["labels"])):
        raise Invalid("label %s is not a set of %s's labels (%s)" % (
            json.dumps(label)[:80], scheme, ", ".join(info["labels"])))
    return label


def _point(label, scheme, info, item_text=None):
    """A Likert point: one of the scale's integers (the store's values), never "3" or 3.5."""
    points = info["labels"]
    if isinstance(label, float) and label.is_integer():
        label = int(label)
    if isinstance(label, bool) or not isinstance(label, int) or label not in points:
        raise Invalid("label %s is not a point of %s's scale (%s to %s)" % (
            json.dumps(label)[:80], scheme, points[0], points[-1]))
    return label


def _value(label, scheme, info, item_text=None):
    """A slider's or number scheme's value: finite, within the scheme's bounds."""
    lo, hi = info.get("min_value"), info.get("max_value")
    value = number(label, "label", -1e15 if lo is None else lo, 1e15 if hi is None else hi,
                   required=True)
    return int(value) if value.is_integer() and abs(value) < 2 ** 53 else value


def _spans(label, scheme, info, item_text=None):
    return span_label(label, item_text, scheme, info["labels"])


# How a predicted value is checked, by what its scheme's kind predicts (``Kind.predicts``);
# each takes the value, the scheme's name and info, and the item's text (which only spans need).
_LABELS = {"label": _one_label, "labels": _label_set, "point": _point, "value": _value,
           "spans": _spans}


def predictions(lines, splits: Dict[str, str], schemas: Dict[str, Dict[str, Any]],
                texts: Optional[Dict[str, str]] = None
                ) -> Tuple[List[Dict[str, Any]], Optional[str]]:
    """(valid rows, None) or ([], the reason): the first bad line and how many are bad. One bad
    row rejects the file: a run whose output is partly wrong writes back nothing."""
    rows, bad, first, seen, width = [], 0, None, set(), {}
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = prediction(_json_line(line), splits, schemas, texts)
            if (row["id"], row["scheme"]) in seen:
                raise Invalid("item %s has a second prediction for %s" % (row["id"],
                                                                          row["scheme"]))
            if "vector" in row:  # one run, one space: every vector of a scheme one size
                size = width.setdefault(row["scheme"], len(row["vector"]))
                if len(row["vector"]) != size:
                    raise Invalid("vector has %d numbers; the run's other vectors for %s have "
                                  "%d" % (len(row["vector"]), row["scheme"], size))
            seen.add((row["id"], row["scheme"]))
            rows.append(row)
        except Invalid as e:
            bad += 1
            if first is None:
                first = "line %d: %s" % (n, e)
    if bad:
        return [], ("predictions.jsonl %s (%d of %d lines are invalid); nothing was written back"
                    % (first, bad, bad + len(rows)))
    return rows, None


def _json_line(line: str) -> Any:
    def no_constant(name):
        raise Invalid("%s is not a number JSON allows" % name)

    try:
        return json.loads(line, parse_constant=no_constant)
    except (ValueError, RecursionError) as e:
        raise Invalid("not JSON (%s)" % str(e)[:100])
