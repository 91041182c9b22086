"""Aggregating several annotators' labels into one per item and scheme (server side).

``model_training.aggregation`` chooses how, for every place that needs one label per item: the
bundle a run trains on, the admin's export and the label counts.

- ``majority`` (the default): the most frequent label; a tie leaves the item out of that scheme.
- ``consensus``: Dawid–Skene for choice and Likert schemes — a confusion matrix per annotator
  and the class priors estimated by EM (Dawid & Skene 1979), started from the majority vote's
  label shares. Each item gets its most probable class. When EM does not converge within
  ``DS_MAX_ITER`` iterations, or the data has a single annotator, the majority vote is used and
  the note says so. Multi-label (multiselect) schemes always use the majority vote.

Whatever the method, spans keep a span when at least half of the item's annotators marked the
same span (same start, end and label), and of agreed spans that overlap keep the one more
annotators marked (ties: the longer, then the earlier); numbers (slider, number) take the median.

Votes are ``{item_id: {annotator: label}}``; results are ``{item_id: label}``, with ``TIE`` for
an item whose annotators do not settle on a label.
"""

import math
from typing import Any, Dict, Hashable, List, Optional, Tuple

from potato.schemes import KINDS
from potato.training.remote.bundle import majority

METHODS = ("majority", "consensus")
TIE = None  # the aggregate of an item whose labels tie
DS_MAX_ITER = 100
DS_TOL = 1e-5
_EPS = 1e-10


Votes = Dict[str, Dict[str, Any]]


class Result:
    """Per item, the aggregated label (``TIE`` when there is none), and a note for the run log
    when the method chosen was not the one used."""

    def __init__(self, labels: Dict[str, Any], method: str, note: str = ""):
        self.labels = labels
        self.method = method
        self.note = note


def aggregate(annotation_type: str, votes: Votes, method: str = "majority") -> Result:
    """Aggregate one scheme's votes with ``method`` (see the module docstring)."""
    kind = KINDS.get(annotation_type)
    shape = kind.aggregate_as if kind is not None else "choice"  # each kind says how
    if shape == "spans":
        return Result({i: agreed_spans(list(v.values())) for i, v in votes.items()}, "spans")
    if shape == "number":
        return Result({i: median(list(v.values())) for i, v in votes.items()}, "median")
    if shape == "text":
        return Result({i: TIE for i in votes}, "none",
                      "free text is not aggregated" if votes else "")
    plain = {i: majority(list(v.values())) for i, v in votes.items()}
    if method != "consensus":
        return Result(plain, "majority")
    if shape == "multi":
        return Result(plain, "majority", "consensus does not apply to multi-label schemes; "
                                         "the majority vote was used")
    annotators = {a for v in votes.values() for a in v}
    if len(annotators) < 2:
        return Result(plain, "majority", "consensus needs at least two annotators; the "
                                         "majority vote was used")
    fit = dawid_skene(votes)
    if not fit.converged:
        return Result(plain, "majority", "Dawid-Skene did not converge in %d iterations; the "
                                         "majority vote was used" % DS_MAX_ITER)
    return Result(fit.labels, "consensus")


# -- spans and numbers ---------------------------------------------------------------------------

def _span_key(span: Dict[str, Any]) -> Tuple[int, int, str]:
    return int(span["start"]), int(span["end"]), str(span["label"])


def agreed_spans(annotations: List[Any]) -> List[Dict[str, Any]]:
    """The spans at least half of the annotators marked identically, in text order (with the
    covered text where the annotations carry it); of agreed spans that overlap, the one more
    annotators marked wins (ties: the longer, then the earlier)."""
    n = len(annotations)
    counts: Dict[Tuple[int, int, str], int] = {}
    covered: Dict[Tuple[int, int, str], str] = {}  # the covered text, where the spans carry it
    for spans in annotations:
        mine = [s for s in (spans or []) if isinstance(s, dict)]
        for s in mine:
            if isinstance(s.get("text"), str):
                covered.setdefault(_span_key(s), s["text"])
        for key in {_span_key(s) for s in mine}:
            counts[key] = counts.get(key, 0) + 1
    kept: List[Tuple[int, int, str]] = []
    # agreed spans may overlap (two annotators: each span has half); keep the higher count,
    # then the longer span, then the earlier one, so the result is a valid span list
    for key in sorted((k for k, c in counts.items() if 2 * c >= n),
                      key=lambda k: (-counts[k], k[0] - k[1], k[0], k[1], k[2])):
        if all(key[1] <= o[0] or o[1] <= key[0] for o in kept):
            kept.append(key)
    out = []
    for s, e, lab in sorted(kept):
        span = {"start": s, "end": e, "label": lab}
        if (s, e, lab) in covered:
            span["text"] = covered[(s, e, lab)]
        out.append(span)
    return out


def median(values: List[Any]) -> Optional[float]:
    nums = sorted(float(v) for v in values
                  if isinstance(v, (int, float)) and not isinstance(v, bool)
                  and math.isfinite(v))
    if not nums:
        return TIE
    mid = len(nums) // 2
    return nums[mid] if len(nums) % 2 else (nums[mid - 1] + nums[mid]) / 2


# -- Dawid-Skene ---------------------------------------------------------------------------------

class DawidSkeneFit:
    def __init__(self, labels, posteriors, priors, errors, converged, iterations):
        self.labels = labels  # {item: class}
        self.posteriors = posteriors  # {item: {class: p}}
        self.priors = priors  # {class: p}
        self.errors = errors  # {annotator: {(observed, true): p}}
        self.converged = converged
        self.iterations = iterations


def _majority_shares(votes: Votes, classes: List[Hashable]) -> Dict[str, Dict[Hashable, float]]:
    out = {}
    for item, v in votes.items():
        counts = dict((c, 0.0) for c in classes)
        for label in v.values():
            counts[label] += 1
        total = sum(counts.values()) or 1.0
        out[item] = dict((c, n / total) for c, n in counts.items())
    return out


def _m_step(votes: Votes, post, classes):
    """Each annotator's confusion: P(says ``observed`` | the truth is ``true``), over the
    labels that annotator gave (floored at a tiny epsilon)."""
    sums: Dict[str, Dict[Tuple[Hashable, Hashable], float]] = {}
    for item, v in votes.items():
        for annotator, observed in v.items():
            row = sums.setdefault(annotator, {})
            for true in classes:
                row[(observed, true)] = row.get((observed, true), 0.0) + post[item][true]
    errors = {}
    for annotator, row in sums.items():
        row = dict((k, max(p, _EPS)) for k, p in row.items())
        totals: Dict[Hashable, float] = {}
        for (observed, true), p in row.items():
            totals[true] = totals.get(true, 0.0) + p
        errors[annotator] = dict((k, p / totals[k[1]]) for k, p in row.items())
    return errors


def _e_step(votes: Votes, priors, errors, classes):
    post = {}
    for item, v in votes.items():
        logs = {}
        for true in classes:
            total = math.log(max(priors[true], _EPS))
            for annotator, observed in v.items():
                total += math.log(errors[annotator][(observed, true)])
            logs[true] = total
        top = max(logs.values())
        scaled = dict((c, math.exp(x - top)) for c, x in logs.items())
        norm = sum(scaled.values())
        post[item] = dict((c, x / norm) for c, x in scaled.items())
    return post


def _lower_bound(votes: Votes, post, priors, errors, classes) -> float:
    """The evidence lower bound per vote, the quantity whose gain decides convergence."""
    total, n = 0.0, 0
    for item, v in votes.items():
        for true in classes:
            q = post[item][true]
            joint = math.log(max(priors[true], _EPS))
            joint += sum(math.log(errors[a][(obs, true)]) for a, obs in v.items())
            total += q * joint - q * math.log(max(q, _EPS))
        n += len(v)
    return total / max(n, 1)


def dawid_skene(votes: Votes, max_iter: int = DS_MAX_ITER, tol: float = DS_TOL) -> DawidSkeneFit:
    """Dawid-Skene by EM over ``votes`` ({item: {annotator: hashable label}})."""
    votes = dict((i, v) for i, v in votes.items() if v)
    classes = sorted({label for v in votes.values() for label in v.values()}, key=repr)
    post = _majority_shares(votes, classes)

    def priors_of(p):
        return dict((c, sum(p[i][c] for i in p) / max(len(p), 1)) for c in classes)

    priors = priors_of(post)
    errors = _m_step(votes, post, classes)
    bound, converged, iterations = -math.inf, False, 0
    for iterations in range(1, max_iter + 1):
        post = _e_step(votes, priors, errors, classes)
        priors = priors_of(post)
        errors = _m_step(votes, post, classes)
        new = _lower_bound(votes, post, priors, errors, classes)
        if new - bound < tol:
            converged = True
            break
        bound = new
    labels = {}
    for item, p in post.items():
        best = max(p.values())
        top = [c for c in classes if p[c] == best]
        labels[item] = top[0] if len(top) == 1 else TIE
    return DawidSkeneFit(labels, post, priors, errors, converged, iterations)
