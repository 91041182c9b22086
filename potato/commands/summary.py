"""Plain-text lines that sum up a finished run, for the CLI and logs."""

from typing import List, Optional

from potato.training.core.view import RunView
from potato.training.reports import heldout, ratings as report_ratings, run_texts
from potato.training.web.run_actions import again_command


def summary_lines(view: RunView, config_path: Optional[str] = None) -> List[str]:
    """The run in a few lines; with ``config_path``, the last one is the command that runs it
    again."""
    lines = []
    took = " in %.1f s" % view.duration_s if view.duration_s is not None else ""
    status = view.status + (" (with warnings)" if view.warnings and
                            view.status == "success" else "")
    head = "Run %s %s%s on %s" % (view.run_id, status, took, view.ran_on or view.backend)
    if view.status == "error" and view.error:
        head += ": " + view.error
    lines.append(head)
    h = view.holdout.as_dict() if view.holdout is not None else None
    if h:
        lines.append("Held-out score (test split, n=%d)%s" % (h["n"], (
            ": accuracy %.3f, macro-F1 %.3f" % (h["accuracy"], h["macro_f1"]))
            if "accuracy" in h else ""))
        for name, r in (h.get("per_scheme") or {"": h}).items():
            versus = heldout.HeldOut.from_dict(r).versus
            if versus is not None:
                lines.append("  %s%s" % (name + ": " if name else "", versus.sentence()))
            rating = report_ratings.summary_line(name, r)
            if rating:
                lines.append(rating)
            if "accuracy_ci95" not in r:
                if r.get("note") and rating:
                    lines.append("  " + r["note"])
                continue
            lines.append("  %saccuracy's 95%% interval %.2f to %.2f; always answering %s "
                         "(the majority-class baseline) scores accuracy %.3f; the model's is %s"
                         % (name + ": " if name else "", r["accuracy_ci95"][0],
                            r["accuracy_ci95"][1], run_texts.answer_words(r["baseline"]["label"]),
                            r["baseline"]["accuracy"], run_texts.above(r["above_baseline"])))
            if r.get("note"):
                lines.append("  " + r["note"])
    elif view.status == "success":
        lines.append("Held-out score: none (no labelled items fell in the test split)")
    if view.writeback is not None:
        wb = view.writeback
        extra = []
        if wb.below_min_confidence:
            extra.append("%d below min_confidence %s" % (wb.below_min_confidence,
                                                         wb.min_confidence))
        if wb.unlabeled_skipped:
            extra.append("%d unlabeled not written (include_unlabeled is false)"
                         % wb.unlabeled_skipped)
        if wb.schemes:
            hidden = [s for s in wb.schemes if s not in view.in_use]
            if hidden:  # a run not in use: its predictions are kept, annotators do not see them
                extra.insert(0, "not in use for %s" % ", ".join(hidden))
            lines.append("Predictions %s: %d for %s%s" % (
                "kept, not shown" if len(hidden) == len(wb.schemes) else "written",
                wb.written, ", ".join(wb.schemes), " (%s)" % "; ".join(extra) if extra else ""))
        else:
            lines.append("Predictions written: none (no scheme of this run is in "
                         "model_training.writeback.schemas)")
    if view.status == "success":
        lines.extend(_in_use_lines(view))
    warnings = view.warnings
    if warnings:
        lines.append("%d warning%s:" % (len(warnings), "" if len(warnings) == 1 else "s"))
        lines.extend("  " + str(w) for w in warnings)
    if view.artifact_uri and view.status == "success":
        lines.append("Model files: %s" % view.artifact_uri)
    if config_path:
        lines.append("Run it again: %s" % again_command(config_path, view))
    return lines


def _in_use_lines(view: RunView) -> List[str]:
    """Whether the run is now the model in use (its predictions are what annotators see)."""
    why = view.writeback.why if view.writeback is not None else {}
    if view.in_use:
        lines = ["In use: yes, for %s (annotators see its predictions as suggestions)"
                 % ", ".join(view.in_use)]
    else:
        lines = ["In use: no (annotators see another run's predictions, or none)"]
    lines.extend("  %s: %s" % (scheme, text) for scheme, text in sorted(why.items()))
    return lines
