"""The held-out report: what a run's test-split predictions say, and how much they can say.

For each scheme: n; accuracy with its 95 % Wilson interval; macro-F1; precision, recall, F1 and
support per label; the confusion matrix (radio and Likert schemes); the majority-class baseline
(always answering the train split's most common label) and how far above it the model is; and a
sentence when the test split is too small to tell the model from the baseline. Likert schemes
add the mean absolute error and the quadratic-weighted kappa; slider and number schemes have a
report of their own (report_ratings.py: MAE, RMSE, Spearman, the median baseline); span schemes
get entity-level figures instead (span_report.py). Which report, and which of its parts, each
scheme's kind says (``Kind.report_as``, ``multi_label``, ``ordinal``, ``confusion``).
"""

import math
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple

from potato.schemes import kind_class
from potato.training.reports import heldout, ratings as report_ratings, spans as span_report
from potato.training.reports import run_texts, versus

Z95 = 1.959964
MIN_N = 30


def wilson(k: int, n: int, z: float = Z95) -> Tuple[float, float]:
    """The Wilson score interval of a proportion k/n (95 % by default)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _key(label):
    return tuple(sorted(label)) if isinstance(label, list) else label


def _prf(tp: int, fp: int, fn: int) -> Dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "support": tp + fn}


def _per_label(pairs, labels: List[str], multi: bool):
    """(precision, recall, F1 and support per label, macro-F1) of (predicted, gold) pairs;
    ``multi``: each value is a set of labels."""
    per_label, scored = {}, []
    for label in labels:
        if multi:
            tp = sum(1 for p, g in pairs if label in p and label in g)
            fp = sum(1 for p, g in pairs if label in p and label not in g)
            fn = sum(1 for p, g in pairs if label not in p and label in g)
        else:
            tp = sum(1 for p, g in pairs if p == label and g == label)
            fp = sum(1 for p, g in pairs if p == label and g != label)
            fn = sum(1 for p, g in pairs if p != label and g == label)
        per_label[label] = _prf(tp, fp, fn)
        if tp + fp + fn:  # a label neither predicted nor present says nothing
            scored.append(per_label[label]["f1"])
    return per_label, round(sum(scored) / len(scored), 4) if scored else 0.0


def scheme_report(pairs: Sequence[Tuple[Any, Any]], labels: List[str], annotation_type: str,
                  train_labels: Sequence[Any] = ()) -> Dict[str, Any]:
    """The report of one scheme scored as classes from (predicted, gold) pairs on the test
    split; its kind says which parts it has."""
    kind = kind_class(annotation_type)
    n = len(pairs)
    correct = sum(1 for pred, gold in pairs if _key(pred) == _key(gold))
    lo, hi = wilson(correct, n)
    per_label, macro_f1 = _per_label(pairs, labels, kind.multi_label)
    out = {"n": n, "accuracy": round(correct / n, 4) if n else 0.0,
           "accuracy_ci95": [round(lo, 4), round(hi, 4)],
           "macro_f1": macro_f1, "per_label": per_label}
    if kind.ordinal:
        out.update(report_ratings.ordinal(pairs, labels))
    if kind.confusion:
        index = {label: i for i, label in enumerate(labels)}
        matrix = [[0] * len(labels) for _ in labels]
        for pred, gold in pairs:
            if gold in index and pred in index:
                matrix[index[gold]][index[pred]] += 1
        out["confusion"] = {"labels": list(labels), "rows": "gold", "columns": "predicted",
                            "matrix": matrix}
    out["baseline"] = _baseline(pairs, train_labels, labels, kind.multi_label)
    out["above_baseline"] = round(out["accuracy"] - out["baseline"]["accuracy"], 4)
    out["note"] = _note(out)
    return out


def _baseline(pairs, train_labels, labels: List[str], multi: bool) -> Dict[str, Any]:
    """Always answering the most common train label (the test split's, without train labels):
    its accuracy and its macro-F1 on the same items."""
    source = [_key(g) for g in train_labels] or [_key(g) for _, g in pairs]
    if not source:
        return {"label": None, "accuracy": 0.0, "macro_f1": 0.0}
    label, _ = Counter(source).most_common(1)[0]
    label = list(label) if isinstance(label, tuple) else label
    hits = sum(1 for _, g in pairs if _key(g) == _key(label))
    return {"label": label, "accuracy": round(hits / len(pairs), 4) if pairs else 0.0,
            "macro_f1": _per_label([(label, g) for _, g in pairs], labels, multi)[1]}


def _short(value: Any) -> str:
    return "%.4g" % value if isinstance(value, float) else str(value)


def learned_nothing(name: str, r: Dict[str, Any]) -> Optional[str]:
    """A run warning when a scheme's held-out macro-F1 is not above the majority-class
    baseline's: the model did no better than always answering the most common label (or,
    when the baseline is perfect, that the test split cannot tell them apart)."""
    verdict = heldout.Versus.from_dict(r.get("versus_baseline"))
    if verdict is not None and "qwk" in r:  # a Likert scale is judged by its kappa, as its
        # verdict is (its macro-F1 would say "learned nothing" of a run that is in use)
        return None if verdict.beats else "%s%s" % (name + ": " if name else "",
                                                     verdict.sentence())
    if "accuracy" not in r and "mae" in r:  # a number scheme's report
        return report_ratings.learned_nothing(name, r)
    base = r.get("baseline") if isinstance(r.get("baseline"), dict) else {}
    f1, base_f1 = r.get("macro_f1"), base.get("macro_f1")
    if not isinstance(f1, (int, float)) or not isinstance(base_f1, (int, float)) or \
            not r.get("n") or f1 > base_f1:
        return None
    if base_f1 >= 1.0:  # one gold class, the baseline's: no model can score above it
        return ("%sthe test split cannot tell the model from the majority-class baseline: its "
                "%d items all have the gold label %s, which always answering %s gets right. "
                "Label items of the other classes, or raise splits.test"
                % (name + ": " if name else "", r["n"], run_texts.answer_words(base.get("label")),
                   run_texts.answer_words(base.get("label"))))
    return ("%sthe held-out macro-F1 (%.3f) is not above the majority-class baseline's (%.3f, "
            "always answering %s): the model learned nothing the label counts do not tell. "
            "Check the training loss, label more items, or change the params"
            % (name + ": " if name else "", f1, base_f1, run_texts.answer_words(base.get("label"))))


def _note(r: Dict[str, Any]) -> Optional[str]:
    """A sentence when the numbers cannot carry a conclusion, else None."""
    lo, hi = r["accuracy_ci95"]
    base = r["baseline"]["accuracy"]
    if r["n"] < MIN_N:
        return ("Only %d test items: too few to say much (the 95%% interval of the accuracy is "
                "%.2f to %.2f). Label more items, or raise splits.test." % (r["n"], lo, hi))
    if lo <= base:
        return ("The 95%% interval of the accuracy (%.2f to %.2f) includes the majority-class "
                "baseline (%.2f): this test split cannot tell the model from always answering "
                "%s." % (lo, hi, base, run_texts.answer_words(r["baseline"]["label"])))
    return None


def holdout_report(predictions, items, schemas: Dict[str, Dict[str, Any]]):
    """The report over a run's test-split predictions; None without labelled test items.

    ``items`` are the bundle's items (id, split, labels). With one scheme, its report is the
    top level; with several, the top level averages n, accuracy and macro-F1 and ``per_scheme``
    holds each report."""
    gold = {it["id"]: it["labels"] for it in items if it["split"] == "test"}
    text_of = {it["id"]: it.get("text") or "" for it in items if it["split"] == "test"}
    per = {}
    for scheme, info in schemas.items():
        if isinstance(info.get("all_labels"), list):  # a run that left labels out is scored
            info = dict(info, labels=info["all_labels"])  # on all of them (prepare.py)
        pairs = [(p["label"], gold[p["id"]][scheme]) for p in predictions
                 if p["scheme"] == scheme and p["split"] == "test"
                 and scheme in gold.get(p["id"], {})]
        if not pairs:
            continue
        train = [it["labels"][scheme] for it in items
                 if it["split"] == "train" and scheme in it["labels"]]
        shape = kind_class(info["type"]).report_as
        per[scheme] = SCORERS[shape](pairs, info, train)
        texts = [text_of.get(p["id"], "") for p in predictions
                 if p["scheme"] == scheme and p["split"] == "test"
                 and scheme in gold.get(p["id"], {})]
        against = VERSUS[shape](pairs, info, per[scheme], texts)
        if against is not None:
            per[scheme]["versus_baseline"] = against
    if not per:
        return None
    if len(per) == 1:  # the report of the one scheme scored, which it names
        name, only = next(iter(per.items()))
        return dict(only, scheme=name)
    out = {"n": sum(v["n"] for v in per.values())}
    for key in ("accuracy", "macro_f1"):  # over the schemes that have it (numbers do not)
        values = [v[key] for v in per.values() if key in v]
        if values:
            out[key] = round(sum(values) / len(values), 4)
    out["per_scheme"] = per
    return out


# How a scheme is scored, by its kind's ``report_as``: from the (predicted, gold) pairs, the
# scheme's bundle schema and the train split's gold values.
SCORERS = {
    heldout.CLASSES: lambda pairs, info, train: scheme_report(pairs, info["labels"], info["type"],
                                                        train),
    heldout.NUMBERS: lambda pairs, info, train: report_ratings.number_report(pairs, train),
    heldout.ENTITIES: lambda pairs, info, train: span_report.scheme_report(pairs, info["labels"]),
}


# The model against its baseline and against chance, by the report's shape (versus.py): the
# headline figure, the report's own baseline (the train split's most common label, its median,
# or marking nothing) and the model's answers shuffled across the items.
def _versus_classes(pairs, info, r, texts=()):
    kind = kind_class(info["type"])
    labels = list(info["labels"])
    base = r["baseline"]["label"]
    index = {_key(label): i for i, label in enumerate(labels)}
    if base is None:
        return None
    if kind.multi_label:
        def mask(value):
            return sum(1 << index[x] for x in set(value) if x in index) \
                if isinstance(value, list) else 0
        answers, golds = [mask(p) for p, _ in pairs], [mask(g) for _, g in pairs]
        figure = versus.macro_f1_sets(len(labels), versus.counts(golds, len(labels), True),
                                      versus.counts(answers, len(labels), True))
        return versus.compare("macro-F1", True, answers, golds, figure,
                              r["baseline"]["macro_f1"], "always answering %s, the "
                              "majority-class baseline" % run_texts.answer_words(base))
    kept = [(index[_key(p)], index[_key(g)]) for p, g in pairs
            if _key(p) in index and _key(g) in index]
    answers, golds = [p for p, _ in kept], [g for _, g in kept]
    if kind.ordinal:  # Likert: the kappa, which any constant answer scores 0 on
        return versus.compare("quadratic-weighted kappa", True, answers, golds,
                              versus.qwk(len(labels)), 0.0,
                              "always answering %s, the majority-class baseline" % (base,))
    figure = versus.macro_f1(len(labels), versus.counts(golds, len(labels)),
                             versus.counts(answers, len(labels)))
    return versus.compare("macro-F1", True, answers, golds, figure, r["baseline"]["macro_f1"],
                          "always answering %s, the majority-class baseline" % (base,))


def _versus_numbers(pairs, info, r, texts=()):
    return versus.compare("MAE", False, [p for p, _ in pairs], [g for _, g in pairs],
                          versus.mae, r["baseline"]["mae"],
                          "always answering the median, %s" % _short(r["baseline"]["value"]))


def _versus_entities(pairs, info, r, texts=()):
    answers = [versus.spans(p) for p, _ in pairs]
    return versus.compare(span_report.SCORE_NAME, True, answers,
                          [versus.spans(g) for _, g in pairs], versus.entity_micro_f1, 0.0,
                          "marking nothing",
                          versus.span_chance(answers, list(texts) or [""] * len(answers)))


VERSUS = {heldout.CLASSES: _versus_classes, heldout.NUMBERS: _versus_numbers,
          heldout.ENTITIES: _versus_entities}
