"""What the server does with a finished run's predictions, whatever backend produced them:
read them (checked by ``boundary``), keep them, and put them in use (write-back: predictions
become the items' model suggestions). The held-out report is ``report.holdout_report``."""

import json
import os
import threading
import time
from typing import Any, Dict, List, Optional

from potato.config.settings import Config
from potato.project import queue_order
from potato.project.store import Store
from potato.training.exchange import boundary
from potato.training.reports import heldout, report, run_texts, spans as span_report
from potato.training.reports.writeback import WriteBack
from potato.training.core.runs import Run


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


# Held while the run in use changes: write-back's take-over (decision and switch) and the
# admin's use, pin and unpin (choice.py), so that neither acts on what the other is changing.
CHOICE = threading.RLock()


def write_back(store: Store, cfg: Config, run_id: str, predictions,
               holdout: Optional[Dict[str, Any]] = None) -> WriteBack:
    """Keep this run's predictions for the write-back schemes, and put them in use where the
    policy says so (``writeback.policy``: ``best`` or ``newest``).

    Human labels are never touched; train-split items never get a prediction. A run's kept
    predictions can be put in use later (``use``), instantly: no retraining, no re-upload."""
    wb = cfg.model_training.writeback
    out = WriteBack(min_confidence=wb.min_confidence)
    # active learning's schemes have a model in use too: the one that orders the queue
    wanted = list(wb.schemas) + [s for s in cfg.active_learning.schemes
                                 if cfg.active_learning.enabled and s not in wb.schemas]
    schemes = [s for s in wanted if any(p["scheme"] == s for p in predictions)]
    if not schemes:
        return out
    numbers = {s for s in schemes if cfg.scheme(s) is not None and cfg.scheme(s).kind is not None
               and cfg.scheme(s).kind.quantity}
    rows = []
    for p in predictions:
        if p["scheme"] not in schemes or p["split"] == "train":
            continue
        if p["split"] == "unlabeled" and not wb.include_unlabeled:
            out.unlabeled_skipped += 1
            continue
        value, below = _confident(p, wb.min_confidence)
        out.below_min_confidence += below
        if value is None:
            continue
        label = json.dumps(value)
        rows.append((run_id, p["id"], p["scheme"], label, p["confidence"]))
        if p["scheme"] in numbers:  # a slider's or number scheme's value: not counted by label
            continue
        for key in _count_keys(p["label"], value):
            out.by_label[key] = out.by_label.get(key, 0) + 1
    with store.tx() as db:
        db.executemany("INSERT OR REPLACE INTO run_predictions(run_id, item_id, scheme, label, "
                       "confidence) VALUES (?,?,?,?,?)", rows)
    out.written = len(rows)
    out.schemes = schemes
    with CHOICE:  # the decision and the switch, with no use/pin/unpin in between
        for scheme in schemes:
            take, reason = takes_over(store, cfg, run_id, scheme, holdout)
            if not any(r[2] == scheme for r in rows):  # nothing kept: nothing to show
                take, reason = False, ("run %s kept no predictions for %s, so it is not put "
                                       "in use" % (run_id, scheme))
            if take:
                use(store, scheme, run_id, scheme in wb.schemas)
                out.in_use.append(scheme)
                if reason:
                    out.took_over[scheme] = reason
            else:
                out.kept_in_use[scheme] = reason
    return out


def keep_ranking(store: Store, cfg: Config, run_id: str, predictions,
                 schemas: Dict[str, Dict[str, Any]]) -> int:
    """Keep what active learning ranks items by, from a run's checked predictions for the
    active-learning schemes (every split but train: the items that may need labels, and the
    labelled val and test items diversity compares with). Returns how many rows."""
    al = cfg.active_learning
    if not al.enabled:
        return 0
    rows = []
    for p in predictions:
        if p["scheme"] not in al.schemes or p["split"] == "train":
            continue
        info = schemas.get(p["scheme"], {})
        kind = cfg.scheme(p["scheme"]).kind if cfg.scheme(p["scheme"]) else None
        scores = queue_order.scores_of(p, info.get("labels", []),
                                       kind.ranks_by if kind is not None else None)
        if scores is not None:
            rows.append((p["scheme"], p["id"], scores, p.get("vector")))
    return queue_order.keep_scores(store, run_id, rows) if rows else 0


def reorder(store: Store, cfg: Config) -> Optional[str]:
    """Order the queue by the runs now in use for the active-learning schemes; a sentence
    for the run's log, or None when nothing is ordered (no run in use has kept scores)."""
    started = time.time()
    gen = queue_order.reorder(store, cfg, in_use)
    if gen is None:
        return None
    st = queue_order.status(store)
    return ("active learning: %d items that need labels reordered by %s (%s) in %.2f s"
            % (st["size"], ", ".join("run %s for %s" % (r, s) for s, r in st["runs"].items()),
               cfg.active_learning.strategy, time.time() - started))


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
    return [", ".join(label) if isinstance(label, list) else str(label)]


# The held-out figure ``writeback.policy: best`` compares, per scheme: the first of these its
# report has (key, name, higher is better). Spans: the entity micro-F1 (span_report.py); Likert:
# the quadratic-weighted kappa (a near miss counts, unlike in macro-F1); slider and number: the
# mean absolute error, in the scheme's own units (so is writeback.tolerance for them); choices:
# macro-F1.
SCORES = (("micro_f1", span_report.SCORE_NAME, True), ("qwk", "quadratic-weighted kappa", True),
          ("mae", "MAE", False), ("macro_f1", "macro-F1", True))


def scheme_report(holdout: Optional[Dict[str, Any]], scheme: str) -> Optional[Dict[str, Any]]:
    """The scheme's part of a run's held-out report (None when the scheme was not scored)."""
    if not isinstance(holdout, dict):
        return None
    per = holdout.get("per_scheme")
    if isinstance(per, dict):
        h = per.get(scheme)
    elif holdout.get("scheme", scheme) == scheme:  # one scheme scored: the top level, named
        h = holdout
    else:
        h = None
    return h if isinstance(h, dict) else None


def _f1(holdout: Optional[Dict[str, Any]], scheme: str, key: str):
    h = scheme_report(holdout, scheme)
    value = h.get(key) if h is not None else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def earns_its_place(run_id: str, scheme: str, holdout) -> str:
    """"" when the run's model beats both the baseline and chance on the held-out items
    (report.py, versus.py); else why not, as a sentence's start. Only such a run takes over
    automatically; the admin may still put any successful run in use."""
    h = scheme_report(holdout, scheme)
    v = heldout.Versus.from_dict(h.get("versus_baseline")) if h is not None else None
    if v is None:
        return ("run %s has no held-out score for %s (no labelled test item was scored), so "
                "nothing shows that it beats the baseline" % (run_id, scheme))
    if v.beats:
        return ""
    return "run %s's held-out %s (%.3f) %s" % (run_id, v.figure, v.model, v.shortfall())


def _score_kind(holdout: Optional[Dict[str, Any]], scheme: str):
    """(key, name, higher is better) of the figure this scheme's runs are compared by."""
    for score in SCORES:
        if _f1(holdout, scheme, score[0]) is not None:
            return score
    return SCORES[-1]


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
    if current == run_id:
        return True, ""
    row = store.conn().execute("SELECT holdout, pinned FROM runs WHERE run_id=?",
                               (current,)).fetchone() if current is not None else None
    if row is not None and row[1]:
        return False, ("run %s is pinned: it stays in use for %s until the admin changes it "
                       "(Use this model on another run, or Unpin on %s's page)"
                       % (current, scheme, current))
    short = earns_its_place(run_id, scheme, holdout)
    if short:
        return False, ("%s: it is trained, not in use, and annotators see no suggestions from "
                       "it%s. Label more items, or put it in use knowingly with Use this model "
                       "on its page" % (short, "; %s stays in use" % current if current else ""))
    if current is None:
        return True, ""
    if wb.policy == "newest":
        return True, "run %s replaces %s in use (writeback.policy: newest)" % (run_id, current)
    old_holdout = json.loads(row[0]) if row and row[0] else None
    key, name, higher = _score_kind(holdout, scheme)
    if _f1(holdout, scheme, key) is None:  # no score: name the old run's
        key, name, higher = _score_kind(old_holdout, scheme)
    old = _f1(old_holdout, scheme, key)
    new = _f1(holdout, scheme, key)
    if new is None:
        if old is None:
            return True, "run %s replaces %s in use (neither has a held-out score)" % (
                run_id, current)
        return False, ("run %s has no held-out score; %s (%s %.3f) stays in use"
                       % (run_id, current, name, old))
    if old is None:
        return True, "run %s replaces %s in use (%s has no held-out score)" % (
            run_id, current, current)
    sign = 1 if higher else -1  # compare as "higher is better"
    worse = "below" if higher else "above"
    if sign * new >= sign * old:
        return True, ("run %s's held-out %s %.3f is not %s %s's %.3f: it replaces "
                      "%s in use (writeback.policy: best)" % (run_id, name, new, worse, current,
                                                              old, current))
    if sign * new >= sign * old - wb.tolerance:
        return True, ("run %s's held-out %s %.3f is %s %s's %.3f but within "
                      "writeback.tolerance (%g): it replaces %s in use (writeback.policy: best; "
                      "pin a run to keep it in use)" % (run_id, name, new, worse, current, old,
                                                        wb.tolerance, current))
    return False, ("run %s's held-out %s %.3f is %s %s's %.3f by more than "
                   "writeback.tolerance (%g): %s stays in use (writeback.policy: best)"
                   % (run_id, name, new, worse, current, old, wb.tolerance, current))


def use(store: Store, scheme: str, run_id: str, shown: bool = True) -> int:
    """Make ``run_id`` the run in use for ``scheme``: its kept predictions are the ones
    annotators see (not ``shown``: a scheme only active learning names, whose model orders
    the queue and suggests nothing); the count shown."""
    with store.tx() as db:
        db.execute("DELETE FROM predictions WHERE scheme=?", (scheme,))
        n = 0 if not shown else db.execute(
            "INSERT INTO predictions(item_id, scheme, label, confidence, run_id) "
            "SELECT item_id, scheme, label, confidence, run_id FROM run_predictions "
            "WHERE run_id=? AND scheme=?", (run_id, scheme)).rowcount
        db.execute("INSERT OR REPLACE INTO in_use(scheme, run_id) VALUES (?, ?)",
                   (scheme, run_id))
    return n


def warnings(cfg, run: Run, wb: WriteBack, holdout: Optional[Dict[str, Any]] = None,
             schemas: Optional[Dict[str, Any]] = None) -> List[str]:
    """What makes a successful run's held-out score or write-back worth a second look, in
    sentences (``schemas``: the bundle's, which name the labels the run left out)."""
    out = []
    for name, info in (schemas or {}).items():
        short = info.get("left_out") if isinstance(info, dict) else None
        if isinstance(short, list) and short:
            out.append(run_texts.left_out_sentence(
                name, [tuple(x) for x in short if isinstance(x, list) and len(x) == 2],
                cfg.model_training.min_labels_per_class))
    schemes = cfg.model_training.writeback.schemas
    if not any(s in schemes for s in run.schemas):
        out.append("no predictions were written: none of this run's schemes (%s) is listed in "
                   "model_training.writeback.schemas, so annotators see no suggestions from it"
                   % ", ".join(run.schemas))
    elif wb.schemes and wb.all_below:
        out.append("no predictions were written: all %d were below writeback.min_confidence "
                   "(%s)" % (wb.below_min_confidence, wb.min_confidence))
    if isinstance(holdout, dict):
        per = holdout.get("per_scheme") if isinstance(holdout.get("per_scheme"), dict) \
            else {"": holdout}
        out.extend(w for w in (report.learned_nothing(k, v) for k, v in per.items()) if w)
    return out


def with_heldout(items, path: str):
    """The bundle's items with the test labels a remote run was not given, back in place."""
    held = {row.get("id"): row.get("labels") or {} for row in read_lines(path)}
    if not held:
        return items
    return [dict(it, labels=held.get(it["id"], it["labels"])) if it["split"] == "test" else it
            for it in items]


def read_lines(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue
    except OSError:
        return
