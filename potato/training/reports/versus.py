"""Does a run's model beat the baseline by more than chance? A paired bootstrap over the test
split's items.

The held-out report's headline figure (macro-F1, the quadratic-weighted kappa, the mean
absolute error or the entity micro-F1, as the scheme's kind says) is computed for the model and
for the baseline on ``RESAMPLES`` resamples of the same test items, drawn with replacement
(seeded, so a run's verdict never changes when it is read again). The model *beats* the
baseline when the lower end of the 95 % interval of the difference (model minus baseline, with
"better" counted positive) is above zero: a gap the test split supports, not one a few lucky
items made. A model in use must beat it (``writeback``: docs/training.md, "Which run is in
use").

Each item contributes a small tuple of counts (``stats``); a figure is a function of their sum.
Items with the same counts are drawn as one group, so a resample costs the number of distinct
tuples, not the number of items.
"""

import random
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

RESAMPLES = 1000
SEED = 33_35  # fixed: the verdict is a property of the run's predictions, not of the clock
MAX_DRAWS = 2_000_000  # items drawn in all; a larger test split gets fewer resamples (>= 200)
LEVEL = 0.95

Stats = Tuple[float, ...]


def _add(total: List[float], stats: Stats, times: int) -> None:
    for i, v in enumerate(stats):
        total[i] += v * times


def compare(name: str, higher_is_better: bool, model: Sequence[Stats],
            baseline: Sequence[Stats], figure: Callable[[Sequence[float]], float],
            baseline_name: str) -> Optional[Dict[str, Any]]:
    """The model's figure against the baseline's on the same items (``model[i]`` and
    ``baseline[i]`` are item i's counts), with the 95 % bootstrap interval of the difference;
    None without items."""
    n = len(model)
    if n == 0 or len(baseline) != n:
        return None
    width = len(model[0])
    groups = Counter(zip(model, baseline))
    keys = list(groups)
    weights = [groups[k] for k in keys]

    def figures(counts) -> Tuple[float, float]:
        m, b = [0.0] * width, [0.0] * len(baseline[0])
        for (ms, bs), times in counts:
            _add(m, ms, times)
            _add(b, bs, times)
        return figure(m), figure(b)

    point_model, point_base = figures(zip(keys, weights))
    sign = 1.0 if higher_is_better else -1.0
    resamples = max(200, min(RESAMPLES, MAX_DRAWS // n))
    rng = random.Random(SEED)
    diffs = []
    index = range(len(keys))
    for _ in range(resamples):
        drawn = Counter(rng.choices(index, weights, k=n))
        m, b = figures((keys[i], c) for i, c in drawn.items())
        diffs.append(sign * (m - b))
    diffs.sort()
    tail = (1 - LEVEL) / 2
    lo = diffs[int(tail * resamples)]
    hi = diffs[min(resamples - 1, int((1 - tail) * resamples))]
    return {"figure": name, "higher_is_better": higher_is_better,
            "model": round(point_model, 4), "baseline": round(point_base, 4),
            "baseline_is": baseline_name, "n": n, "resamples": resamples,
            "difference": round(sign * (point_model - point_base), 4),
            "ci95": [round(lo, 4), round(hi, 4)], "beats": lo > 0}


# -- figures from summed counts ----------------------------------------------------------------

def macro_f1_of(labels: int) -> Callable[[Sequence[float]], float]:
    """Macro-F1 from counts laid out as (tp, fp, fn) per label; a label with none of them says
    nothing and is left out, as the report does."""
    def figure(c: Sequence[float]) -> float:
        scored = []
        for i in range(labels):
            tp, fp, fn = c[3 * i], c[3 * i + 1], c[3 * i + 2]
            if tp + fp + fn:
                scored.append(2 * tp / (2 * tp + fp + fn))
        return sum(scored) / len(scored) if scored else 0.0
    return figure


def class_stats(pred: Any, gold: Any, labels: Sequence[str], multi: bool) -> Stats:
    """One item's (tp, fp, fn) per label; ``multi``: values are sets of labels."""
    out: List[float] = []
    for label in labels:
        p = (label in pred) if multi else pred == label
        g = (label in gold) if multi else gold == label
        out += [float(p and g), float(p and not g), float(g and not p)]
    return tuple(out)


def qwk_of(points: int) -> Callable[[Sequence[float]], float]:
    """The quadratic-weighted kappa from a confusion matrix laid out row by row (gold rows,
    predicted columns); 0 where chance agreement leaves nothing to measure (a constant answer
    agrees no better than chance)."""
    def figure(c: Sequence[float]) -> float:
        n = sum(c)
        if not n:
            return 0.0
        gold = [sum(c[i * points:(i + 1) * points]) for i in range(points)]
        pred = [sum(c[i * points + j] for i in range(points)) for j in range(points)]
        num = den = 0.0
        for i in range(points):
            for j in range(points):
                w = (i - j) ** 2
                num += w * c[i * points + j]
                den += w * gold[i] * pred[j] / n
        return 0.0 if den == 0 else 1 - num / den
    return figure


def cell_stats(pred: Any, gold: Any, points: Sequence[Any]) -> Optional[Stats]:
    """One item's cell of the confusion matrix; None when a value is off the scale."""
    if pred not in points or gold not in points:
        return None
    k = len(points)
    out = [0.0] * (k * k)
    out[points.index(gold) * k + points.index(pred)] = 1.0
    return tuple(out)


def mae(c: Sequence[float]) -> float:
    """The mean absolute error from (sum of absolute errors, items)."""
    return c[0] / c[1] if c[1] else 0.0


def micro_f1(c: Sequence[float]) -> float:
    """The entity micro-F1 from (tp, fp, fn)."""
    tp, fp, fn = c
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def entity_stats(pred: Any, gold: Any) -> Stats:
    """One item's (tp, fp, fn) entities: a predicted span counts when a gold span has its start,
    end and label."""
    p = set((s["start"], s["end"], s["label"]) for s in pred or [])
    g = set((s["start"], s["end"], s["label"]) for s in gold or [])
    return (float(len(p & g)), float(len(p - g)), float(len(g - p)))
