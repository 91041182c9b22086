"""Plain-text lines that sum up a finished run, for the CLI and logs."""

from typing import Any, Dict, List, Optional

from potato.training.reports import ratings as report_ratings
from potato.training.reports.writeback import WriteBack
from potato.training.web.run_actions import again_command


def summary_lines(run: Dict[str, Any], config_path: Optional[str] = None) -> List[str]:
    """The run in a few lines; with ``config_path``, the last one is the command that runs it
    again."""
    lines = []
    took = " in %.1f s" % run["duration_s"] if run.get("duration_s") is not None else ""
    status = run["status"] + (" (with warnings)" if run.get("warnings") and
                              run["status"] == "success" else "")
    head = "Run %s %s%s on %s" % (run["run_id"], status, took,
                                  run.get("ran_on") or run.get("backend"))
    if run["status"] == "error" and run.get("error"):
        head += ": " + run["error"]
    lines.append(head)
    h = run.get("holdout")
    if h:
        lines.append("Held-out score (test split, n=%d)%s" % (h["n"], (
            ": accuracy %.3f, macro-F1 %.3f" % (h["accuracy"], h["macro_f1"]))
            if "accuracy" in h else ""))
        for name, r in (h.get("per_scheme") or {"": h}).items():
            rating = report_ratings.summary_line(name, r)
            if rating:
                lines.append(rating)
            if "accuracy_ci95" not in r:
                if r.get("note") and rating:
                    lines.append("  " + r["note"])
                continue
            lines.append("  %s95%% interval %.2f to %.2f; majority-class baseline (%s) %.3f, "
                         "the model %+.3f" % (name + ": " if name else "",
                                              r["accuracy_ci95"][0], r["accuracy_ci95"][1],
                                              r["baseline"]["label"],
                                              r["baseline"]["accuracy"], r["above_baseline"]))
            if r.get("note"):
                lines.append("  " + r["note"])
    elif run["status"] == "success":
        lines.append("Held-out score: none (no labelled items fell in the test split)")
    if run.get("writeback"):
        wb = WriteBack.from_dict(run["writeback"])
        extra = []
        if wb.below_min_confidence:
            extra.append("%d below min_confidence %s" % (wb.below_min_confidence,
                                                         wb.min_confidence))
        if wb.unlabeled_skipped:
            extra.append("%d unlabeled not written (include_unlabeled is false)"
                         % wb.unlabeled_skipped)
        if wb.schemes:
            lines.append("Predictions written: %d for %s%s" % (
                wb.written, ", ".join(wb.schemes),
                " (%s)" % "; ".join(extra) if extra else ""))
        else:
            lines.append("Predictions written: none (no scheme of this run is in "
                         "model_training.writeback.schemas)")
    if run["status"] == "success":
        lines.extend(_in_use_lines(run))
    warnings = run.get("warnings") or []
    if warnings:
        lines.append("%d warning%s:" % (len(warnings), "" if len(warnings) == 1 else "s"))
        lines.extend("  " + str(w) for w in warnings)
    if run.get("artifact_uri") and run["status"] == "success":
        lines.append("Model files: %s" % run["artifact_uri"])
    if config_path:
        lines.append("Run it again: %s" % again_command(config_path, run))
    return lines


def _in_use_lines(run: Dict[str, Any]) -> List[str]:
    """Whether the run is now the model in use (its predictions are what annotators see)."""
    why = WriteBack.from_dict(run.get("writeback")).why
    if run.get("in_use"):
        lines = ["In use: yes, for %s (annotators see its predictions as suggestions)"
                 % ", ".join(run["in_use"])]
    else:
        lines = ["In use: no (annotators see another run's predictions, or none)"]
    lines.extend("  %s: %s" % (scheme, text) for scheme, text in sorted(why.items()))
    return lines
