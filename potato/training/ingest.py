"""What the server does with a finished run's predictions, whatever backend produced them:
read them (checked by ``boundary``), keep them, and put them in use (write-back: predictions
become the items' model suggestions). The held-out report is ``report.holdout_report``."""

import json
import os
from typing import Any, Dict, List, Optional

from potato.config import Config
from potato.store import Store
from potato.training import boundary, report


class PredictionsError(Exception):
    pass


def read_predictions(path: str, bundle) -> List[Dict[str, Any]]:
    """The run's predictions, every row checked against its bundle (boundary.predictions):
    known ids, each item's own split, labels within the scheme, confidences in [0, 1]."""
    if not os.path.exists(path):
        raise PredictionsError("the worker wrote no predictions.jsonl")
    splits = {it["id"]: it["split"] for it in bundle.items}
    texts = {it["id"]: it["text"] for it in bundle.items}
    with open(path, encoding="utf-8", errors="replace") as f:
        rows, problem = boundary.predictions(f, splits, bundle.schemas, texts)
    if problem:
        raise PredictionsError(problem)
    return rows


def write_back(store: Store, cfg: Config, run_id: str, predictions,
               holdout: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Keep this run's predictions for the write-back schemes, and put them in use where the
    policy says so (``writeback.policy``: ``best`` or ``newest``).

    Human labels are never touched; train-split items never get a prediction. A run's kept
    predictions can be put in use later (``use``), instantly: no retraining, no re-upload."""
    wb = cfg.model_training.writeback
    counts: Dict[str, Any] = {"written": 0, "below_min_confidence": 0, "unlabeled_skipped": 0,
                              "schemes": [], "min_confidence": wb.min_confidence,
                              "by_label": {}, "in_use": [], "kept_in_use": {}, "took_over": {}}
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
        value, below = _confident(p, wb.min_confidence)
        counts["below_min_confidence"] += below
        if value is None:
            continue
        label = json.dumps(value)
        rows.append((run_id, p["id"], p["scheme"], label, p["confidence"]))
        for key in _count_keys(p["label"], value):
            counts["by_label"][key] = counts["by_label"].get(key, 0) + 1
    with store.tx() as db:
        db.executemany("INSERT OR REPLACE INTO run_predictions(run_id, item_id, scheme, label, "
                       "confidence) VALUES (?,?,?,?,?)", rows)
    counts["written"] = len(rows)
    counts["schemes"] = schemes
    for scheme in schemes:
        take, reason = takes_over(store, cfg, run_id, scheme, holdout)
        if not any(r[2] == scheme for r in rows):  # nothing kept: nothing to show annotators
            take, reason = False, ("run %s kept no predictions for %s, so it is not put in use"
                                   % (run_id, scheme))
        if take:
            use(store, scheme, run_id)
            counts["in_use"].append(scheme)
            if reason:
                counts["took_over"][scheme] = reason
        else:
            counts["kept_in_use"][scheme] = reason
    return counts


def _is_spans(label: Any) -> bool:
    return isinstance(label, list) and bool(label) and isinstance(label[0], dict)


def _confident(p: Dict[str, Any], min_confidence: float):
    """(the value to write or None, how many predictions fell below min_confidence): a label
    is below or not as a whole; spans one by one (an item keeps its confident spans)."""
    if _is_spans(p["label"]):
        kept = [s for s in p["label"] if s["confidence"] >= min_confidence]
        return kept, len(p["label"]) - len(kept)
    if p["confidence"] < min_confidence:
        return None, 1
    return p["label"], 0


def _count_keys(predicted: Any, label: Any) -> List[str]:
    """How a written prediction (``label``, what was kept of ``predicted``) is counted by
    label: a label, labels joined, or (spans) one count per kept span's label."""
    if _is_spans(predicted):
        return [str(s.get("label")) for s in label]
    return [", ".join(label) if isinstance(label, list) else label]


def _scheme_holdout(holdout: Optional[Dict[str, Any]], scheme: str) -> Dict[str, Any]:
    if not isinstance(holdout, dict):
        return {}
    per = holdout.get("per_scheme")
    h = per.get(scheme) if isinstance(per, dict) else holdout
    return h if isinstance(h, dict) else {}


def _f1(holdout: Optional[Dict[str, Any]], scheme: str) -> Optional[float]:
    """The comparable held-out score: the report's ``score`` (spans: entity micro-F1), else
    its macro-F1."""
    h = _scheme_holdout(holdout, scheme)
    value = h.get("score", h.get("macro_f1"))
    return float(value) if isinstance(value, (int, float)) else None


def _score_name(holdout: Optional[Dict[str, Any]], scheme: str) -> str:
    name = _scheme_holdout(holdout, scheme).get("score_name")
    return name if isinstance(name, str) else "macro-F1"


def in_use(store: Store, scheme: str) -> Optional[str]:
    """The run whose predictions annotators see for ``scheme`` (None: no model yet)."""
    row = store.conn().execute("SELECT run_id FROM in_use WHERE scheme=?", (scheme,)).fetchone()
    if row is None:  # a store from before in_use existed: the run its predictions came from
        row = store.conn().execute("SELECT run_id FROM predictions WHERE scheme=? LIMIT 1",
                                   (scheme,)).fetchone()
    return row[0] if row else None


def takes_over(store: Store, cfg: Config, run_id: str, scheme: str, holdout) -> tuple:
    """(whether ``run_id`` should become the run in use for ``scheme``, why or why not; the
    sentence is "" when no other run was in use). A pinned run in use is never replaced."""
    wb = cfg.model_training.writeback
    current = in_use(store, scheme)
    if current is None or current == run_id:
        return True, ""
    row = store.conn().execute("SELECT holdout, pinned FROM runs WHERE run_id=?",
                               (current,)).fetchone()
    if row is not None and row[1]:
        return False, ("run %s is pinned: it stays in use for %s until the admin changes it "
                       "(Use this model on another run, or Unpin on %s's page)"
                       % (current, scheme, current))
    if wb.policy == "newest":
        return True, "run %s replaces %s in use (writeback.policy: newest)" % (run_id, current)
    old_holdout = json.loads(row[0]) if row and row[0] else None
    old, new = _f1(old_holdout, scheme), _f1(holdout, scheme)
    score = _score_name(holdout if new is not None else old_holdout, scheme)
    if new is None:
        if old is None:
            return True, "run %s replaces %s in use (neither has a held-out score)" % (
                run_id, current)
        return False, ("run %s has no held-out score; %s (%s %.3f) stays in use"
                       % (run_id, current, score, old))
    if old is None:
        return True, "run %s replaces %s in use (%s has no held-out score)" % (
            run_id, current, current)
    if new >= old:
        return True, ("run %s's held-out %s %.3f is not below %s's %.3f: it replaces "
                      "%s in use (writeback.policy: best)" % (run_id, score, new, current, old,
                                                              current))
    if new >= old - wb.tolerance:
        return True, ("run %s's held-out %s %.3f is below %s's %.3f but within "
                      "writeback.tolerance (%g): it replaces %s in use (writeback.policy: best; "
                      "pin a run to keep it in use)" % (run_id, score, new, current, old,
                                                        wb.tolerance, current))
    return False, ("run %s's held-out %s %.3f is below %s's %.3f by more than "
                   "writeback.tolerance (%g): %s stays in use (writeback.policy: best)"
                   % (run_id, score, new, current, old, wb.tolerance, current))


def use(store: Store, scheme: str, run_id: str) -> int:
    """Make ``run_id``'s kept predictions the ones annotators see for ``scheme``; their count."""
    with store.tx() as db:
        db.execute("DELETE FROM predictions WHERE scheme=?", (scheme,))
        n = db.execute("INSERT INTO predictions(item_id, scheme, label, confidence, run_id) "
                       "SELECT item_id, scheme, label, confidence, run_id FROM run_predictions "
                       "WHERE run_id=? AND scheme=?", (run_id, scheme)).rowcount
        db.execute("INSERT OR REPLACE INTO in_use(scheme, run_id) VALUES (?, ?)",
                   (scheme, run_id))
    return n


def warnings(cfg, run: Dict[str, Any], wb: Dict[str, Any],
             holdout: Optional[Dict[str, Any]] = None) -> List[str]:
    """What makes a successful run's held-out score or write-back worth a second look, in
    sentences."""
    out = []
    schemes = cfg.model_training.writeback.schemas
    if not any(s in schemes for s in run["schemas"]):
        out.append("no predictions were written: none of this run's schemes (%s) is listed in "
                   "model_training.writeback.schemas, so annotators see no suggestions from it"
                   % ", ".join(run["schemas"]))
    elif wb.get("schemes") and not wb.get("written") and wb.get("below_min_confidence"):
        out.append("no predictions were written: all %d were below writeback.min_confidence "
                   "(%s)" % (wb["below_min_confidence"], wb.get("min_confidence")))
    if isinstance(holdout, dict):
        per = holdout.get("per_scheme") if isinstance(holdout.get("per_scheme"), dict) \
            else {"": holdout}
        out.extend(w for w in (report.learned_nothing(k, v) for k, v in per.items()) if w)
    return out
