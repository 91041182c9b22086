"""The parts of a run's pages that show rating schemes' held-out figures (report_ratings.py):
a Likert scheme's error and weighted kappa under its choice report, a slider's or number
scheme's report, and the runs table's cell for a run scored as numbers. Every value comes from
a stored record, so each is checked to be a finite number before it is shown."""

import math
from typing import Any, Dict

from potato.markup import Safe, render


def _num(value: Any):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        return None
    return float(value)


def _fig(value: Any) -> str:
    v = _num(value)
    return "undefined" if v is None else "%.3f" % v


def ordinal_line(r: Dict[str, Any]) -> Safe:
    """A Likert report's extra sentence (nothing for other reports)."""
    if "qwk" not in r:
        return Safe("")
    return render('<p class="report-ordinal">Mean absolute error <b>{mae}</b> points; '
                  'quadratic-weighted kappa <b>{qwk}</b> (1: full agreement, 0: chance; a near '
                  'miss costs less than a far one).</p>', mae=_fig(r.get("mae")),
                  qwk=_fig(r.get("qwk")))


def number_report(name: str, r: Dict[str, Any]) -> Safe:
    """A slider's or number scheme's held-out report (nothing for other reports)."""
    if _num(r.get("mae")) is None or "accuracy" in r:
        return Safe("")
    base = r.get("baseline") if isinstance(r.get("baseline"), dict) else {}
    note = (render('<p class="warning report-note" role="note">{n}</p>', n=str(r["note"]))
            if r.get("note") else Safe(""))
    return render('<h3>{name}</h3><p class="report-summary report-number">Mean absolute error '
                  '<b>{mae}</b>, RMSE <b>{rmse}</b>, Spearman correlation <b>{rho}</b>, on {n} '
                  'held-out (test split) items. Always answering the train median ({bv}) would '
                  'have a mean absolute error of {bmae}.</p>{note}', name=name,
                  mae=_fig(r.get("mae")), rmse=_fig(r.get("rmse")), rho=_fig(r.get("spearman")),
                  n=str(int(_num(r.get("n")) or 0)), bv=_fig(base.get("value")),
                  bmae=_fig(base.get("mae")), note=note)


def holdout_cell(h: Dict[str, Any]) -> Safe:
    """The runs table's held-out cell for a run scored as numbers only."""
    if _num(h.get("mae")) is None:
        return Safe("")
    return render('MAE {mae} <span class="hint">(n={n})</span>', mae=_fig(h.get("mae")),
                  n=str(int(_num(h.get("n")) or 0)))
