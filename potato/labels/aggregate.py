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
annotators marked (ties: the longer, then the earlier); numbers (slider, number) take the median;
a fixed-length list of numbers (a range's two ends) takes the median of each place; a list
of marks, one per place (a trace's step rewards), takes the majority of each place; shares of a
total (``{label: number}``) take the mean per label, which still sums to the total;
orders (rankings) are ordered by each label's mean place (a Borda count; equal means tie);
regions on an image keep each object at least half the annotators drew, matched by IoU
(potato/labels/geometry.py); a list of entries (links between spans) keeps each entry at least
half the annotators gave.

Votes are ``{item_id: {annotator: label}}``; results are ``{item_id: label}``, with ``TIE`` for
an item whose annotators do not settle on a label.
"""

import json
import math
from typing import Any, Dict, List, Optional, Tuple

from potato.labels import geometry
from potato.schemes import kind_class
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


def aggregate(annotation_type: Optional[str], votes: Votes, method: str = "majority") -> Result:
    """Aggregate one scheme's votes with ``method`` (see the module docstring); each kind says
    how (``Kind.aggregate_as``); an unknown type (None: a scheme no longer in the config) is
    aggregated as a choice."""
    shape = kind_class(annotation_type).aggregate_as
    if shape == "spans":
        return Result({i: agreed_spans(list(v.values())) for i, v in votes.items()}, "spans")
    if shape == "agreed_entries":
        return Result({i: agreed_entries(list(v.values())) for i, v in votes.items()},
                      "agreed entries")
    if shape == "regions":
        return Result({i: geometry.agreed(v) for i, v in votes.items()}, "regions")
    if shape == "median":
        return Result({i: median(list(v.values())) for i, v in votes.items()}, "median")
    if shape == "median_each":
        return Result({i: median_each(list(v.values())) for i, v in votes.items()},
                      "median_each")
    if shape == "majority_each":
        return Result({i: majority_each(list(v.values())) for i, v in votes.items()},
                      "majority_each", "consensus does not apply to step lists; the majority "
                      "of each place was used" if method == "consensus" and votes else "")
    if shape == "mean_per_label":
        return Result({i: mean_per_label(list(v.values())) for i, v in votes.items()},
                      "mean_per_label")
    if shape == "order":
        return Result({i: mean_rank(list(v.values())) for i, v in votes.items()}, "mean rank",
                      "consensus does not apply to orders; the mean rank was used"
                      if method == "consensus" and votes else "")
    if shape == "whole":  # each annotator's value whole: the one most gave, ties none
        return Result({i: majority(list(v.values())) for i, v in votes.items()}, "majority",
                      "consensus does not apply to whole answers; the majority vote was used"
                      if method == "consensus" and votes else "")
    if shape == "none":
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


def agreed_entries(annotations: List[Any]) -> List[Any]:
    """The list entries (links ...) at least half of the annotators gave identically, in the
    order they first appear; an annotator's repeats count once."""
    n = len(annotations)
    counts: Dict[str, int] = {}
    entries: Dict[str, Any] = {}
    for value in annotations:
        mine = {}
        for entry in value if isinstance(value, list) else []:
            mine[json.dumps(entry, sort_keys=True, ensure_ascii=False)] = entry
        for key, entry in mine.items():
            counts[key] = counts.get(key, 0) + 1
            entries.setdefault(key, entry)
    return [entries[k] for k in counts if 2 * counts[k] >= n]


def median(values: List[Any]) -> Optional[float]:
    nums = sorted(float(v) for v in values
                  if isinstance(v, (int, float)) and not isinstance(v, bool)
                  and math.isfinite(v))
    if not nums:
        return TIE
    mid = len(nums) // 2
    return nums[mid] if len(nums) % 2 else (nums[mid - 1] + nums[mid]) / 2


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def median_each(values: List[Any]) -> Optional[List[float]]:
    """Each place's median over the lists of numbers of the most common length (a range's
    low ends, then its high ends); TIE when there is none. Medians of the ends keep low <=
    high."""
    lists = [v for v in values if isinstance(v, list) and v and all(_finite(x) for x in v)]
    if not lists:
        return TIE
    width = majority([len(v) for v in lists])
    lists = [v for v in lists if len(v) == width] if width else []
    return [median([v[k] for v in lists]) for k in range(width)] if lists else TIE


def majority_each(values: List[Any]) -> Optional[List[Any]]:
    """Lists of marks, one per place (a trace's step rewards, None unmarked): the lists of the
    length most annotators gave (ties: the longer), and at each place the mark most of those
    who marked it gave (None where none did or they tie); None when no list has a mark."""
    lists = [v for v in values if isinstance(v, list) and v]
    if not lists:
        return None
    counts: Dict[int, int] = {}
    for v in lists:
        counts[len(v)] = counts.get(len(v), 0) + 1
    n = max(counts, key=lambda k: (counts[k], k))
    out = [majority([v[i] for v in lists if len(v) == n and v[i] is not None])
           for i in range(n)]
    return None if all(x is None for x in out) else out


def mean_per_label(values: List[Any]) -> Optional[Dict[str, float]]:
    """Each label's mean share over the annotators' ``{label: number}`` (a label an annotator
    left out counts as 0), labels in first-seen order; TIE when no annotator gave shares."""
    shares = [v for v in values if isinstance(v, dict) and v
              and all(_finite(x) for x in v.values())]
    if not shares:
        return TIE
    labels = list(dict.fromkeys(k for v in shares for k in v))
    return {k: round(sum(v.get(k, 0) for v in shares) / len(shares), 10) for k in labels}


def mean_rank(orders: List[Any]) -> Any:
    """The order of the labels by their mean place over the annotators' orders (lists, best
    first; tied labels a list inside, each at the mean of the places they share), best first;
    labels with the same mean are tied (a list inside, in first-seen order). ``TIE`` when no
    order is given. A label only some orders hold is placed by those."""
    places: Dict[str, List[float]] = {}
    for order in orders:
        if not isinstance(order, list):
            continue
        at = 1
        for place in order:
            group = [x for x in (place if isinstance(place, list) else [place])
                     if isinstance(x, str)]
            for label in group:
                places.setdefault(label, []).append(at + (len(group) - 1) / 2)
            at += len(group)
    if not places:
        return TIE
    means: Dict[float, List[str]] = {}
    for label, got in places.items():
        means.setdefault(round(sum(got) / len(got), 9), []).append(label)
    return [group if len(group) > 1 else group[0] for _, group in sorted(means.items())]


# -- Dawid-Skene ---------------------------------------------------------------------------------

class DawidSkeneFit:
    def __init__(self, labels, posteriors, priors, errors, converged, iterations):
        self.labels = labels  # {item: class}
        self.posteriors = posteriors  # {item: {class: p}}
        self.priors = priors  # {class: p}
        self.errors = errors  # {annotator: {(observed, true): p}}
        self.converged = converged
        self.iterations = iterations


def _m_step(obs, post, seen, n_ann: int, k: int):
    """Each annotator's confusion, as logs: log P(says ``observed`` | the truth is ``true``)
    in ``[annotator][observed][true]``, over the labels that annotator gave (floored at a tiny
    epsilon; None for a label the annotator never gave)."""
    sums = [[[0.0] * k if seen[a][o] else None for o in range(k)] for a in range(n_ann)]
    for i, pairs in enumerate(obs):
        p = post[i]
        for a, o in pairs:
            row = sums[a][o]
            for t in range(k):
                row[t] += p[t]
    for rows in sums:
        rows[:] = [None if r is None else [max(x, _EPS) for x in r] for r in rows]
        totals = [sum(r[t] for r in rows if r is not None) for t in range(k)]
        rows[:] = [None if r is None else [math.log(r[t] / totals[t]) for t in range(k)]
                   for r in rows]
    return sums


def _joint(pairs, log_priors, log_err, k: int) -> List[float]:
    """log P(truth = t) + sum of log P(vote | t), per class t, for one item's votes."""
    out = list(log_priors)
    for a, o in pairs:
        row = log_err[a][o]
        for t in range(k):
            out[t] += row[t]
    return out


def _e_step(obs, priors, log_err, k: int):
    log_priors = [math.log(max(p, _EPS)) for p in priors]
    post = []
    for pairs in obs:
        logs = _joint(pairs, log_priors, log_err, k)
        top = max(logs)
        scaled = [math.exp(x - top) for x in logs]
        norm = sum(scaled)
        post.append([x / norm for x in scaled])
    return post


def _lower_bound(obs, post, priors, log_err, k: int) -> float:
    """The evidence lower bound per vote, the quantity whose gain decides convergence."""
    log_priors = [math.log(max(p, _EPS)) for p in priors]
    total, n = 0.0, 0
    for pairs, q in zip(obs, post):
        joint = _joint(pairs, log_priors, log_err, k)
        total += sum(q[t] * joint[t] - q[t] * math.log(max(q[t], _EPS)) for t in range(k))
        n += len(pairs)
    return total / max(n, 1)


def dawid_skene(votes: Votes, max_iter: int = DS_MAX_ITER, tol: float = DS_TOL) -> DawidSkeneFit:
    """Dawid-Skene by EM over ``votes`` ({item: {annotator: hashable label}}). Items,
    annotators and classes are indexed once; the loops run over lists of numbers."""
    votes = dict((i, v) for i, v in votes.items() if v)
    classes = sorted({label for v in votes.values() for label in v.values()}, key=repr)
    annotators = sorted({a for v in votes.values() for a in v})
    k, c_at, a_at = len(classes), {c: n for n, c in enumerate(classes)}, \
        {a: n for n, a in enumerate(annotators)}
    obs = [[(a_at[a], c_at[label]) for a, label in v.items()] for v in votes.values()]
    seen = [[False] * k for _ in annotators]
    for pairs in obs:
        for a, o in pairs:
            seen[a][o] = True
    post = []  # started from the majority vote's label shares
    for pairs in obs:
        counts = [0.0] * k
        for _, o in pairs:
            counts[o] += 1
        post.append([x / len(pairs) for x in counts])

    def priors_of(p):
        return [sum(row[t] for row in p) / max(len(p), 1) for t in range(k)]

    priors = priors_of(post)
    log_err = _m_step(obs, post, seen, len(annotators), k)
    bound, converged, iterations = -math.inf, False, 0
    for iterations in range(1, max_iter + 1):
        post = _e_step(obs, priors, log_err, k)
        priors = priors_of(post)
        log_err = _m_step(obs, post, seen, len(annotators), k)
        new = _lower_bound(obs, post, priors, log_err, k)
        if new - bound < tol:
            converged = True
            break
        bound = new
    labels, posteriors = {}, {}
    for item, p in zip(votes, post):
        posteriors[item] = dict(zip(classes, p))
        best = max(p)
        top = [c for c, x in zip(classes, p) if x == best]
        labels[item] = top[0] if len(top) == 1 else TIE
    errors = {a: {(classes[o], classes[t]): math.exp(row[t]) for o, row in
                  enumerate(log_err[n]) if row is not None for t in range(k)}
              for n, a in enumerate(annotators)}
    return DawidSkeneFit(labels, posteriors, dict(zip(classes, priors)), errors, converged,
                         iterations)
