"""The held-out report of a span scheme: entity-level precision, recall and F1 (a predicted span
counts only when a human's span has exactly its start, end and label, as CoNLL and seqeval
score), micro over every entity and per label with its support, the macro average over the
labels that occur, and a sentence when the test split holds too few entities to say much.

``score`` is the entity micro-F1: what ``writeback.policy: best`` compares between runs
(``ingest.takes_over``) and what the runs table shows.
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple

from potato.training.remote import spans

MIN_ENTITIES = 50  # fewer human entities than this in the test split: the figures say little
MIN_PER_LABEL = 10  # a label with fewer: its own row says little
SCORE_NAME = "entity micro-F1"


def _prf(tp: int, fp: int, fn: int) -> Dict[str, Any]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "support": tp + fn, "predicted": tp + fp}


def scheme_report(pairs: Sequence[Tuple[Any, Any]], labels: List[str]) -> Dict[str, Any]:
    """The report of one span scheme from (predicted spans, human spans) pairs, one per
    test-split item."""
    counts = spans.entity_counts(pairs, labels)
    tp, fp, fn = (sum(c[k] for c in counts.values()) for k in range(3))
    micro = _prf(tp, fp, fn)
    per_label = dict((label, _prf(*counts[label])) for label in counts)
    scored = [v["f1"] for v in per_label.values() if v["support"] or v["predicted"]]
    out = {"kind": "span", "n": len(pairs), "entities": tp + fn, "predicted": tp + fp,
           "precision": micro["precision"], "recall": micro["recall"], "micro_f1": micro["f1"],
           "macro_f1": round(sum(scored) / len(scored), 4) if scored else 0.0,
           "per_label": per_label, "score": micro["f1"], "score_name": SCORE_NAME}
    out["note"] = _note(out)
    return out


def _note(r: Dict[str, Any]) -> Optional[str]:
    """A sentence when the numbers cannot carry a conclusion, else None."""
    if r["entities"] == 0:
        return ("The %d test items hold no human span: there is nothing to score the model's "
                "spans against. Mark spans on more items, or raise splits.test." % r["n"])
    if r["entities"] < MIN_ENTITIES:
        return ("Only %d human spans in %d test items: too few to say much (one span more or "
                "less found moves recall by %.2f). Mark spans on more items, or raise "
                "splits.test." % (r["entities"], r["n"], 1.0 / r["entities"]))
    thin = [label for label, v in r["per_label"].items() if 0 < v["support"] < MIN_PER_LABEL]
    if thin:
        return ("Fewer than %d human spans of %s in the test split: those labels' own figures "
                "say little; the micro figures above count every span."
                % (MIN_PER_LABEL, ", ".join(thin)))
    return None
