"""Cells of a run's page: the model in use (in use or why not, "Use this model", and the pin,
see ``choice``), span reports and the metrics table. Buttons appear only where the action can
work; otherwise the reason is said in place."""

import math
from typing import Any, Dict

from potato.markup import Safe, join, render
from potato.training.core.view import RunView

PIN_HINT = ("a pinned run stays in use until you change it, whatever writeback.policy says, "
            "and retain_runs never deletes its model files")


def in_use_cell(view: RunView, refusal: str = "") -> Safe:
    """In use (for which schemes), else the Use button, else why it cannot be used.
    ``refusal`` is in_use.use_refusal's sentence ("" when the run can be used)."""
    if view.in_use:
        return render('<b class="in-use-badge">in use for {s}</b> (its predictions are the '
                      'suggestions annotators see)', s=", ".join(map(str, view.in_use)))
    if refusal or view.status != "success":
        return render('no <span class="hint" id="use-refusal">{r}</span>', r=refusal or "")
    return render('<form method="post" action="/admin/training/runs/{id}/use" class="inline">'
                  '<button type="submit" class="secondary" id="use-run">Use this model'
                  '</button></form> <span class="hint">its predictions become the suggestions '
                  'annotators see</span>', id=view.run_id)


def pin_cell(view: RunView, refusal: str = "") -> Safe:
    """Pinned or not, with the button that changes it (successful runs only); ``refusal``:
    why the run cannot be put in use, as for ``in_use_cell``."""
    if view.status != "success":
        return Safe("")
    if view.pinned:
        return render('<b class="pinned-badge">pinned</b> <form method="post" '
                      'action="/admin/training/runs/{id}/unpin" class="inline"><button '
                      'type="submit" class="secondary" id="unpin-run">Unpin</button></form> '
                      '<span class="hint">{hint}</span>', id=view.run_id, hint=PIN_HINT)
    what = "Pin" if view.in_use or refusal else "Use and pin"
    return render('not pinned <form method="post" action="/admin/training/runs/{id}/pin" '
                  'class="inline"><button type="submit" class="secondary" id="pin-run">{what}'
                  '</button></form> <span class="hint">{hint}</span>', id=view.run_id,
                  what=what, hint=PIN_HINT)


def message_box(message: str, ok: bool) -> Safe:
    """The page's message line: what the admin's last action did, or why it could not."""
    if not message:
        return Safe('<div id="message" role="alert"></div>')
    return render('<div id="message" role="alert" class="{kind}">{m}</div>',
                  kind="ok" if ok else "error", m=message)


def runs_table_marks(view: RunView) -> Safe:
    """The runs table's In use cell."""
    parts = []
    if view.in_use:
        parts.append(render('<span class="badge in-use-badge" title="its predictions are the '
                            'suggestions annotators see">in use: {s}</span>',
                            s=", ".join(map(str, view.in_use))))
    if view.pinned:
        parts.append(render(' <span class="badge pinned-badge" title="{t}">pinned</span>',
                            t=PIN_HINT))
    return join(parts)


def span_report(name: str, r: Dict[str, Any]) -> Safe:
    """A span scheme's held-out report (span_report.py): entity-level precision, recall and
    F1, micro and per label with support, and the note when there are too few entities."""
    def num(v: Any) -> float:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0

    head = render('<h3>{name}</h3><p class="report-summary">Entity-level (exact span and label) '
                  'micro precision <b>{p:.3f}</b>, recall <b>{rc:.3f}</b>, F1 <b>{f:.3f}</b> '
                  '(macro-F1 over labels {mf:.3f}), on {e} human spans in {n} held-out (test '
                  'split) items; the model marked {pr}.</p>', name=name,
                  p=num(r.get("precision")), rc=num(r.get("recall")), f=num(r.get("micro_f1")),
                  mf=num(r.get("macro_f1")), e=int(num(r.get("entities"))),
                  n=int(num(r.get("n"))), pr=int(num(r.get("predicted"))))
    note = (render('<p class="warning report-note" role="note">{n}</p>', n=r["note"])
            if r.get("note") else Safe(""))
    per = r.get("per_label") if isinstance(r.get("per_label"), dict) else {}
    rows = join(render('<tr><th scope="row">{label}</th><td>{p:.3f}</td><td>{r:.3f}</td>'
                       '<td>{f:.3f}</td><td>{s}</td><td>{pr}</td></tr>', label=label,
                       p=num(v.get("precision")), r=num(v.get("recall")), f=num(v.get("f1")),
                       s=int(num(v.get("support"))), pr=int(num(v.get("predicted"))))
                for label, v in per.items() if isinstance(v, dict))
    table = render('<table class="report-labels report-spans"><thead><tr><th scope="col">Label'
                   '</th><th scope="col">Precision</th><th scope="col">Recall</th>'
                   '<th scope="col">F1</th><th scope="col">Support</th><th scope="col">'
                   'Predicted</th></tr></thead><tbody>{rows}</tbody></table>', rows=rows)
    return join([head, note, table])


def span_holdout_cell(h: Dict[str, Any]) -> Safe:
    """The runs table's held-out cell for a span scheme: its entity micro-F1 first."""
    f1 = h.get("micro_f1") if isinstance(h.get("micro_f1"), (int, float)) else 0.0
    n = h.get("n") if isinstance(h.get("n"), int) else 0
    return render('entity micro-F1 {f1:.3f} <span class="hint">(n={n})</span>', f1=float(f1),
                  n=n)


METRIC_NAMES = (("val_accuracy", "validation accuracy (val split, seen while training)"),
                ("train_loss", "training loss (last epoch)"),
                ("train_seconds", "training time, seconds"),
                ("train_items", "items trained on (train split)"),
                ("val_items", "validation items (val split)"),
                ("predictions", "predictions made"))


def metric_name(key: str) -> str:
    """A metric's key in words (``sentiment.val_accuracy``: "sentiment: validation ...";
    an unknown ``sentiment.best_epoch``: "sentiment: best epoch")."""
    for suffix, words in METRIC_NAMES:
        if key == suffix or key.endswith("." + suffix):
            return "%s%s" % (key[:-len(suffix) - 1] + ": " if key != suffix else "", words)
    scheme, dot, name = key.rpartition(".")
    return "%s%s" % (scheme + ": " if dot else "", name.replace("_", " "))


def metric_text(v: Any) -> str:
    return "%.4g" % v if isinstance(v, float) and math.isfinite(v) else str(v)


def metrics_table(view: RunView) -> Safe:
    metrics = view.metrics if isinstance(view.metrics, dict) else {}
    if not metrics:
        return Safe("")
    return render('<table class="metrics">{rows}</table>', rows=join(
        render('<tr><th scope="row">{k}</th><td>{v}</td></tr>', k=metric_name(str(k)),
               v=metric_text(v)) for k, v in sorted(metrics.items())))
