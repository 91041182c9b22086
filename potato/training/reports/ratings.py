"""The held-out figures of rating schemes (server side, standard library only).

- Likert (classes over the points 1..size): besides the choice report (accuracy, per-point
  F1, confusion), the mean absolute error in points and the quadratic-weighted kappa, which
  credits a near miss (4 for 5) more than a far one (1 for 5) and is 0 for chance agreement.
- Slider and number (a regression): mean absolute error, root mean squared error and
  Spearman's rank correlation, against the baseline of always answering the train split's
  median.

A figure that the data cannot define (a kappa or a correlation when every gold value, or
every prediction, is the same) is None, and the report's note says so.
"""

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

MIN_N = 30


def mae(pairs: Sequence[Tuple[float, float]]) -> float:
    return sum(abs(p - g) for p, g in pairs) / len(pairs) if pairs else 0.0


def rmse(pairs: Sequence[Tuple[float, float]]) -> float:
    return math.sqrt(sum((p - g) ** 2 for p, g in pairs) / len(pairs)) if pairs else 0.0


def qwk(pairs: Sequence[Tuple[int, int]], points: Sequence[int]) -> Optional[float]:
    """Cohen's kappa with quadratic weights over the scale ``points`` ((predicted, gold)
    pairs), as sklearn's cohen_kappa_score(weights="quadratic", labels=points); None when
    chance agreement leaves nothing to measure (one value only, in gold and predictions)."""
    index = {p: i for i, p in enumerate(points)}
    k, n = len(points), len(pairs)
    if n == 0 or k < 2:
        return None
    observed = [[0] * k for _ in range(k)]
    for pred, gold in pairs:
        observed[index[gold]][index[pred]] += 1
    gold_hist = [sum(row) for row in observed]
    pred_hist = [sum(observed[i][j] for i in range(k)) for j in range(k)]
    num = den = 0.0
    for i in range(k):
        for j in range(k):
            w = (i - j) ** 2
            num += w * observed[i][j]
            den += w * gold_hist[i] * pred_hist[j] / n
    return None if den == 0 else 1 - num / den


def _ranks(values: Sequence[float]) -> List[float]:
    """Ranks from 1, ties sharing their average rank (as scipy.stats.rankdata)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(pairs: Sequence[Tuple[float, float]]) -> Optional[float]:
    """Spearman's rho of (predicted, gold) pairs (Pearson's r of their ranks); None when
    either side is constant."""
    if len(pairs) < 2:
        return None
    x, y = _ranks([p for p, _ in pairs]), _ranks([g for _, g in pairs])
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def _r(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 4)


def ordinal(pairs, points: Sequence[int]) -> Dict[str, Any]:
    """What a Likert report adds to the choice report: MAE in points and the weighted kappa."""
    pairs = [(p, g) for p, g in pairs if p in points and g in points]
    return {"mae": _r(mae(pairs)), "qwk": _r(qwk(pairs, points))}


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def number_report(pairs, train_values: Sequence[float] = ()) -> Dict[str, Any]:
    """The report of a slider or number scheme from (predicted, gold) pairs on the test split."""
    n = len(pairs)
    out = {"n": n, "mae": _r(mae(pairs)), "rmse": _r(rmse(pairs)),
           "spearman": _r(spearman(pairs))}
    source = list(train_values) or [g for _, g in pairs]
    value = median(source) if source else 0
    base = [(value, g) for _, g in pairs]
    out["baseline"] = {"value": value, "mae": _r(mae(base)), "rmse": _r(rmse(base))}
    out["mae_below_baseline"] = round(out["baseline"]["mae"] - out["mae"], 4)
    out["note"] = number_note(out)
    return out


def number_note(r: Dict[str, Any]) -> Optional[str]:
    """A sentence when a number report's figures cannot carry a conclusion, else None."""
    if r["n"] < MIN_N:
        return ("Only %d test items: too few to say much about the error. Label more items, or "
                "raise splits.test." % r["n"])
    if r["spearman"] is None:
        return ("Spearman's correlation is undefined: every prediction (or every gold value) "
                "on the test split is the same.")
    return None


def learned_nothing(name: str, r: Dict[str, Any]) -> Optional[str]:
    """A run warning when a number scheme's held-out MAE is not below always answering the
    train split's median."""
    base = r.get("baseline") if isinstance(r.get("baseline"), dict) else {}
    err, base_err = r.get("mae"), base.get("mae")
    if not isinstance(err, (int, float)) or not isinstance(base_err, (int, float)) or \
            not r.get("n") or err < base_err:
        return None
    return ("%sthe held-out mean absolute error (%.3f) is not below the median baseline's "
            "(%.3f, always answering %s): the model learned nothing the train values do not "
            "tell. Check the training loss, label more items, or change the params"
            % (name + ": " if name else "", err, base_err, base.get("value")))


def _fmt(value: Any) -> str:
    return "undefined" if not isinstance(value, (int, float)) else "%.3f" % value


def summary_line(name: str, r: Dict[str, Any]) -> Optional[str]:
    """One plain-text line of a rating scheme's figures (CLI and logs), or None for others."""
    who = name + ": " if name else ""
    if "qwk" in r:
        return "  %smean absolute error %s points, quadratic-weighted kappa %s" % (
            who, _fmt(r.get("mae")), _fmt(r.get("qwk")))
    if "accuracy" in r or "mae" not in r:
        return None
    base = r.get("baseline") if isinstance(r.get("baseline"), dict) else {}
    return ("  %sn=%s: mean absolute error %s, RMSE %s, Spearman %s; always answering the "
            "median (%s) %s" % (who, r.get("n"), _fmt(r.get("mae")), _fmt(r.get("rmse")),
                                _fmt(r.get("spearman")),
                                "%.4g" % base["value"] if isinstance(base.get("value"), float)
                                else base.get("value"), _fmt(base.get("mae"))))
