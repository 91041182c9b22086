"""What a run's log and status say, in words: the held-out score and write-back as one
sentence (their JSON goes to the run's events file, for tools), and how a cancelled run
ended."""

import json
import time
from typing import Any, Dict, Optional

from potato.training.reports import heldout
from potato.training.reports.writeback import WriteBack

# A cancelled run's step and error: what happened, not the status said twice.
CANCELLED_QUEUED = "never started: it was cancelled while queued"
CANCELLED_RUNNING = "stopped while it ran, as asked"


def said(status: str, error: Optional[str]) -> Optional[str]:
    """A run's error as it is recorded: a cancelled run's reads as what happened (the
    backends and the worker say only "cancelled")."""
    return CANCELLED_RUNNING if status == "cancelled" and error in (None, "cancelled") else error


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def answer_words(value: Any) -> str:
    """An answer as words: a label, or a label set as "acting, plot" (not a Python list)."""
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "no label"
    return str(value)


def above(diff: float) -> str:
    """How far a model's figure is from the baseline's, in words ("0.100 higher")."""
    if diff == 0:
        return "the same"
    return "%.3f %s" % (abs(diff), "higher" if diff > 0 else "lower")


def _score(name: str, r: Dict[str, Any]) -> str:
    """One scheme's held-out result in words."""
    n = int(_num(r.get("n")) or 0)
    name = name + ": " if name else ""
    items = "on %d test item%s" % (n, "" if n == 1 else "s")
    shape = heldout.HeldOut.from_dict(r).shape
    if shape == heldout.ENTITIES:
        return "%sentity micro-F1 %.3f %s" % (name, _num(r.get("micro_f1")) or 0.0, items)
    if shape == heldout.NUMBERS:
        mae = _num(r.get("mae"))
        return "%s%s%s" % (name, "MAE %.3f " % mae if mae is not None else "", items)
    kappa = _num(r.get("qwk"))
    text = "%s%saccuracy %.3f, macro-F1 %.3f %s" % (
        name, "quadratic-weighted kappa %.3f, " % kappa if kappa is not None else "",
        _num(r["accuracy"]), _num(r.get("macro_f1")) or 0.0, items)
    base = r.get("baseline") if isinstance(r.get("baseline"), dict) else {}
    if _num(base.get("accuracy")) is not None:
        text += " (always answering %s scores accuracy %.3f)" % (
            answer_words(base.get("label")), _num(base["accuracy"]))
    return text


def scored_sentence(holdout: Optional[Dict[str, Any]], wb: WriteBack) -> str:
    """The held-out score and the write-back as one line of the run log."""
    if not isinstance(holdout, dict):
        held = "held-out: no score (no labelled item fell in the test split)"
    else:
        per = holdout.get("per_scheme") if isinstance(holdout.get("per_scheme"), dict) else {
            "": holdout}
        held = "held-out: " + "; ".join(_score(str(k), v) for k, v in per.items()
                                        if isinstance(v, dict))
    schemes = ", ".join(wb.schemes)
    if not schemes:
        return held + ". Write-back: none (no scheme of this run is in writeback.schemas)."
    text = "%s. Write-back: %s" % (held, wb.kept_words())
    if wb.below_min_confidence:
        text += ", %d below min_confidence %s not written" % (wb.below_min_confidence,
                                                             wb.min_confidence)
    if wb.unlabeled_skipped:
        text += ", %d unlabelled items skipped (include_unlabeled: false)" % wb.unlabeled_skipped
    return text + "."


def record_scored(events_path: str, holdout: Any, wb: WriteBack) -> None:
    """The held-out report and write-back as JSON, one ``scored`` line in the events file."""
    with open(events_path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"type": "scored", "t": round(time.time(), 3), "holdout": holdout,
                            "writeback": wb.as_dict()}) + "\n")


def worker_error_line(event: Dict[str, Any]) -> str:
    """A worker's error event as a log line; a cancel is what was asked for, not an error."""
    if event.get("kind") == "cancelled":
        return "the worker stopped, as the cancel asked"
    return "%s: %s" % (event.get("level", "error"), event["message"])


def left_out_sentence(name: str, short, minimum: int) -> str:
    """The run's warning for the classes it leaves out (``short``: class -> its train items,
    a mapping or (class, count) pairs)."""
    short = dict(short)
    return ("%s: the model will not predict %s: %s in the train split, fewer than "
            "model_training.min_labels_per_class (%d). Label items that deserve %s if any do"
            % (name, " or ".join(str(x) for x in short),
               "; ".join("%s has %s" % (x, "no labelled item" if not n else
                                         "%d labelled item%s" % (n, "" if n == 1 else "s"))
                         for x, n in short.items()),
               minimum, "it" if len(short) == 1 else "them"))


def params_words(params: Any) -> str:
    """A run's params for its log: ``alpha 0.5, model "distilbert-base-uncased"`` (strings
    quoted, lists and mappings as short JSON), "none" without any."""
    if not isinstance(params, dict) or not params:
        return "none"
    out = []
    for key, value in params.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (int, float)) or value is None:
            text = "none" if value is None else "%g" % value
        else:
            text = json.dumps(value, ensure_ascii=False)
            text = text if len(text) <= 120 else text[:117] + "..."
        out.append("%s %s" % (key, text))
    return ", ".join(out)
