"""What the server does with a finished run's predictions, whatever backend produced them:
the held-out score (test split against the human labels in the run's bundle) and write-back
(predictions become the items' model suggestions)."""

import json
import os
from typing import Any, Dict, List

from potato.config import Config
from potato.store import Store
from potato.training import boundary


class PredictionsError(Exception):
    pass


def read_predictions(path: str, bundle) -> List[Dict[str, Any]]:
    """The run's predictions, every row checked against its bundle (boundary.predictions):
    known ids, each item's own split, labels within the scheme, confidences in [0, 1]."""
    if not os.path.exists(path):
        raise PredictionsError("the worker wrote no predictions.jsonl")
    splits = {it["id"]: it["split"] for it in bundle.items}
    with open(path, encoding="utf-8", errors="replace") as f:
        rows, problem = boundary.predictions(f, splits, bundle.schemas)
    if problem:
        raise PredictionsError(problem)
    return rows


def _key(label):
    return tuple(label) if isinstance(label, list) else label


def score(predictions, gold: Dict[str, Dict[str, Any]], schemas: Dict[str, Dict[str, Any]]):
    """{n, accuracy, macro_f1} over test-split predictions that have a human label.

    With several schemes, the top-level figures average the schemes and ``per_scheme`` holds
    each one. Multiselect accuracy is exact match; its F1 is per label (present/absent).
    """
    per = {}
    for scheme, info in schemas.items():
        pairs = [(p["label"], gold[p["id"]][scheme]) for p in predictions
                 if p["scheme"] == scheme and p["split"] == "test"
                 and scheme in gold.get(p["id"], {})]
        if not pairs:
            continue
        acc = sum(1 for pred, g in pairs if _key(pred) == _key(g)) / len(pairs)
        f1s = []
        for label in info["labels"]:
            if info["type"] == "multiselect":
                tp = sum(1 for pr, g in pairs if label in pr and label in g)
                fp = sum(1 for pr, g in pairs if label in pr and label not in g)
                fn = sum(1 for pr, g in pairs if label not in pr and label in g)
            else:
                tp = sum(1 for pr, g in pairs if pr == label and g == label)
                fp = sum(1 for pr, g in pairs if pr == label and g != label)
                fn = sum(1 for pr, g in pairs if pr != label and g == label)
            if tp + fp + fn:
                f1s.append(2 * tp / (2 * tp + fp + fn))
        per[scheme] = {"n": len(pairs), "accuracy": round(acc, 4),
                       "macro_f1": round(sum(f1s) / len(f1s), 4) if f1s else 0.0}
    if not per:
        return None
    if len(per) == 1:
        return dict(next(iter(per.values())))
    return {"n": sum(v["n"] for v in per.values()),
            "accuracy": round(sum(v["accuracy"] for v in per.values()) / len(per), 4),
            "macro_f1": round(sum(v["macro_f1"] for v in per.values()) / len(per), 4),
            "per_scheme": per}


def write_back(store: Store, cfg: Config, run_id: str, predictions) -> Dict[str, int]:
    """Make this run's predictions the current ones for the write-back schemes.

    The newest successful run wins: a scheme's earlier predictions are replaced as a whole.
    Human labels are never touched; train-split items never get a prediction.
    """
    wb = cfg.model_training.writeback
    counts = {"written": 0, "below_min_confidence": 0, "unlabeled_skipped": 0,
              "schemes": [], "min_confidence": wb.min_confidence}
    schemes = [s for s in wb.schemas if any(p["scheme"] == s for p in predictions)]
    if not schemes:
        return counts
    rows = []
    for p in predictions:
        if p["scheme"] not in schemes or p["split"] == "train":
            continue
        if p["split"] == "unlabeled" and not wb.include_unlabeled:
            counts["unlabeled_skipped"] += 1
            continue
        if p["confidence"] < wb.min_confidence:
            counts["below_min_confidence"] += 1
            continue
        rows.append((p["id"], p["scheme"], json.dumps(p["label"]), p["confidence"], run_id))
    with store.tx() as db:
        for s in schemes:
            db.execute("DELETE FROM predictions WHERE scheme=?", (s,))
        db.executemany("INSERT OR REPLACE INTO predictions(item_id, scheme, label, confidence, "
                       "run_id) VALUES (?,?,?,?,?)", rows)
    counts["written"] = len(rows)
    counts["schemes"] = schemes
    return counts
