"""The Training page (``/admin/training``) and a run's page, rendered on the server.

The live parts (the current run, ``live.py``, and the runs table) are HTML fragments the server
renders too; ``static/training.js`` fetches them every second and updates the page in place,
so there is one renderer and the page reads fine without JavaScript.
"""

import json
import math
import time
from typing import Any, Dict, List, Optional, Tuple

from potato.markup import Safe, esc, join, render
from potato.server.pages import json_script, layout
from potato.training.reports import heldout, run_texts
from potato.training.web import rating_cells, run_actions
from potato.training.web.form_cells import (param_inputs, remembered_choice, trainer_options,
                                            unavailable_reason)
from potato.training.web.chart import chart_svg
from potato.training.web.run_cells import (in_use_cell, message_box, metrics_table, pin_cell,
                                       runs_table_marks, span_holdout_cell, span_report)
from potato.training.remote import trainers as trainers_mod
from potato.training.core.runs import TERMINAL
from potato.training.core.view import RunView

STATUS_TEXT = {"queued": "queued", "running": "running", "success": "success",
               "error": "error", "cancelled": "cancelled"}


def _duration(view: RunView) -> str:
    d = view.duration_s
    if d is None:
        return ""
    d = int(round(d))
    return "%dm %02ds" % (d // 60, d % 60) if d >= 60 else "%ds" % d


def _num(value: Any, integer: bool = False) -> Optional[float]:
    """A finite number from stored data, else None: old or odd records never break a page."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value):
        return None
    return int(value) if integer else float(value)


number = _num  # for the live card (live.py)


def _holdout(view: RunView) -> Safe:
    """The held-out headline, named (what ``writeback.policy: best`` compares: macro-F1, the
    kappa of an ordinal scale, entity micro-F1, MAE), then accuracy and n."""
    if view.holdout is None:
        return Safe("")
    h, shape = view.holdout.as_dict(), view.holdout.shape
    if shape == heldout.ENTITIES:
        return span_holdout_cell(h)
    if shape == heldout.NUMBERS:
        return rating_cells.holdout_cell(h)  # a run scored as numbers (slider, number)
    headline = view.holdout.headline
    if headline.name == heldout.KAPPA:  # an ordinal scale: its kappa, as runs are compared
        return render('κ {k:.3f} <span class="hint">(quadratic-weighted kappa; macro-F1 {f1:.3f}, '
                      'n={n})</span>', k=headline.value or 0.0,
                      f1=_num(h.get("macro_f1")) or 0.0, n=_num(h.get("n"), True) or 0)
    return render('macro-F1 {f1:.3f} <span class="hint">(accuracy {acc:.3f}, n={n})</span>',
                  acc=_num(h.get("accuracy")), f1=_num(h.get("macro_f1")) or 0.0,
                  n=_num(h.get("n"), True) or 0)


def _written(view: RunView) -> Safe:
    if view.writeback is None:  # not finished, or nothing to write
        return Safe("")
    if view.in_use or not view.writeback.written:
        return render("{n}", n=view.writeback.written)
    if view.pruned_at:
        return render('{n} <span class="hint">deleted with the model files</span>',
                      n=view.writeback.written)
    return render('{n} <span class="hint">kept, not shown</span>', n=view.writeback.written)


def _when(t: Any) -> str:
    t = _num(t)
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else ""


def clock(t: Any) -> str:
    """A time on a run's page, to the second (local time); "" for none."""
    t = _num(t)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else ""


def _params(view: RunView) -> Safe:
    """The params that differ from the defaults; a long one is cut with an ellipsis and shows
    in full on hover."""
    changed = view.params_changed
    if not changed:
        return Safe('<span class="hint">defaults</span>')
    return join(_param(k, json.dumps(v, default=str)) for k, v in sorted(changed.items()))


def _param(k: str, v: str, cut: int = 60) -> Safe:
    if len(v) <= cut:
        return render("<code>{k}={v}</code> ", k=k, v=v)
    return render('<code class="cut" title="{k}={v}">{k}={short}…</code> ', k=k, v=v,
                  short=v[:cut - 1])


def status_badge(view: RunView) -> Safe:
    """The run's status; a success that reported warnings is shown as such, not as plain
    success (the warnings are in the tooltip and on the run's page)."""
    warnings = [str(w) for w in view.warnings]
    if view.status == "success" and warnings:
        return render('<span class="status status-warning" title="{tip}">success, {n} '
                      'warning{s}</span>', tip="\n".join(warnings), n=len(warnings),
                      s="" if len(warnings) == 1 else "s")
    return render('<span class="status status-{status}">{text}</span>', status=view.status,
                  text=STATUS_TEXT.get(view.status, view.status))


RUNS_HEAD = ("Run", "Started", "Duration", "Trainer", "Params (not default)", "Schemes",
             "Ran on", "Status", "Held-out score", "Predictions written", "In use")


def runs_rows(runs: List[RunView], pick: bool = False) -> Safe:
    """The runs table's rows; ``pick``: first a checkbox that picks the run to compare."""
    if not runs:
        return render('<tr><td colspan="{n}">No runs yet.</td></tr>', n=len(RUNS_HEAD))
    return join(render(
        '<tr data-run="{id}">{pick}<td><a href="/admin/training/runs/{id}">{id}</a>{name}</td>'
        '<td class="started">{started}</td><td>{duration}</td><td>{trainer}</td>'
        '<td class="params">{params}</td><td>{schemas}</td><td class="ran-on">{ran_on}</td>'
        '<td>{status}</td><td class="holdout">{holdout}</td><td class="written">{written}</td>'
        '<td class="in-use">{in_use}</td></tr>',
        id=r.run_id, started=_when(r.started_at), trainer=r.trainer,
        params=_params(r), schemas=", ".join(map(str, r.schemas)),
        ran_on=r.ran_on or r.backend, status=status_badge(r), holdout=_holdout(r),
        written=_written(r), duration=_duration(r), in_use=runs_table_marks(r),
        name=render(' <span class="run-name">{n}</span>', n=r.name) if r.name else "",
        pick=render('<td><input type="checkbox" name="runs" value="{id}" form="compare-form" '
                    'aria-label="Compare {id}"></td>', id=r.run_id) if pick else "")
        for r in runs)


def cancel_button(view: RunView) -> Safe:
    """Cancel run (the page asks first); disabled once a cancel is on its way."""
    if view.status in TERMINAL:
        return Safe("")
    if view.step == "cancelling":
        return render('<button type="button" class="danger" data-cancel="{id}" disabled>'
                      'Cancelling…</button>', id=view.run_id)
    return render('<button type="button" class="danger" data-cancel="{id}">Cancel run</button>',
                  id=view.run_id)


def _prefill(backends, trainers, form: Dict[str, Any]):
    """(backend, trainer) the form starts with: ``form``'s (a run to run again) when they
    exist and can run, else the default backend and the first trainer that fits the project
    and can run there (else the first that fits)."""
    default = next((b for b in backends if b["name"] == form.get("backend")),
                   next((b for b in backends if b["default"]), backends[0]))
    usable = [t for t in trainers if not unavailable_reason(t, default["on_server"])]
    fitting = [t for t in trainers if not t.get("unfit")] or trainers
    first = next((t for t in usable if t["name"] == form.get("trainer")),
                 usable[0] if usable else fitting[0])
    return default, first


def training_page(cfg, backends: List[Dict[str, Any]], trainers: List[Dict[str, Any]],
                  runs: List[RunView], live: str, message: str = "",
                  notice: str = "", form: Optional[Dict[str, Any]] = None,
                  learning: str = "") -> str:
    """``form``: what the Run form starts with: ``remembered`` {trainer: (run_id, values)},
    and for a run to run again its ``trainer``, ``backend``, ``schemas`` and ``notice``;
    ``learning``: the Active learning card (web/learning.py), or ""."""
    form = form or {}
    default, first = _prefill(backends, trainers, form)
    backend_opts = "".join('<option value="%s" data-type="%s" title="%s"%s>%s</option>' % (
        esc(b["name"]), esc(b["type"]), esc(b.get("description") or ""),
        " selected" if b is default else "", esc(b["label"])) for b in backends)
    only = {s.name: trainers_mod.annotate_only(s.annotation_type) for s in cfg.schemes}
    trainable = [s for s in cfg.schemes if not only[s.name]]  # the first the trainer takes
    checked = form.get("schemas") or [next((s.name for s in trainable if s.annotation_type in
                                            first["schema_types"]),
                                           trainable[0].name if trainable else None)]
    schemes = "".join(  # an annotate-only scheme (free text) is shown, disabled, with why
        '<label class="option"><input type="checkbox" name="schemas" value="%s"%s> %s '
        '<span class="hint">(%s%s)</span></label>' % (
            esc(s.name), " disabled" if only[s.name] else " checked" if s.name in checked
            else "", esc(s.name), esc(s.annotation_type), ": " + esc(only[s.name]) if
            only[s.name] else "") for s in cfg.schemes)
    msg = '<p class="error">%s</p>' % esc(message) if message else ""
    again = '<p class="ok" id="again-notice">%s</p>' % esc(form["notice"]) \
        if form.get("notice") else ""
    disabled = form_hidden = ""
    if not cfg.model_training.enabled:
        disabled = ('<p class="notice" id="training-disabled">Training is disabled '
                    '(model_training.enabled: false). Annotation works as usual; set '
                    '<code>enabled: true</code> under <code>model_training</code> in %s and '
                    'restart the server to train models.</p>' % esc(cfg.path))
        form_hidden = " hidden"
    data = {"unavailable": {b["name"]: {t["name"]: unavailable_reason(t, b["on_server"])
                                        for t in trainers} for b in backends},
            "descriptions": {b["name"]: b.get("description") or "" for b in backends},
            "trainers": {t["name"]: {"schema_types": t["schema_types"],
                                     "max_schemas": t["max_schemas"]} for t in trainers}}
    body = """<h1>Training</h1>{notice}
<section class="card" aria-labelledby="start-h"><h2 id="start-h">Start a run</h2>{disabled}
{again}{top_msg}
<form id="run-form" method="post" action="/admin/training/start"{form_hidden}>
  <div class="row">
    <div><label for="backend">Runs on</label>
    <select id="backend" name="backend">{backend_opts}</select></div>
    <button type="button" id="check" class="secondary">Check</button>
  </div>
  <p class="hint" id="backend-description">{description}</p>
  <div id="check-report" aria-live="polite"></div>
  <label for="trainer">Trainer</label>
  <select id="trainer" name="trainer">{trainer_opts}</select>{chosen}
  <fieldset><legend>Schemes</legend>{schemes}</fieldset>
  <fieldset id="params"><legend>Params</legend>{params}</fieldset>
  <button type="submit" id="start-run" class="primary">Start run</button>
</form>{bottom_msg}</section>
<section class="card" aria-labelledby="live-h" id="live-card" tabindex="-1"><h2 id="live-h">
Current run</h2><div id="live-run">{live}</div></section>{learning}
<section class="card" aria-labelledby="runs-h"><h2 id="runs-h">Runs</h2>
<p><a href="/admin/training/runs" id="all-runs">All runs: sort, filter, name and compare them
</a></p>
<div class="table-wrap"><table id="runs-table"><thead><tr>{runs_head}</tr></thead>
<tbody id="runs-body">{rows}</tbody></table></div></section>
<script type="application/json" id="training-data">{data}</script>""".format(
        # A refusal of the form sent without JavaScript is said at the top, where the page
        # opens; the script's messages go under Start run, beside the live card.
        top_msg='<div id="message" role="alert" aria-live="assertive">%s</div>' % msg
        if message else "", bottom_msg="" if message else
        '<div id="message" role="alert" aria-live="assertive"></div>',
        again=again, chosen=remembered_choice(form, default, first),
        notice=notice, backend_opts=backend_opts, disabled=disabled, learning=learning,
        form_hidden=form_hidden,
        description=esc(default.get("description") or ""),
        trainer_opts=trainer_options(trainers, default["on_server"], first), schemes=schemes,
        params="".join(param_inputs(t, t is first, form.get("remembered", {}).get(t["name"]))
                       for t in trainers), live=live, rows=runs_rows(runs), data=json_script(data),
        runs_head="".join('<th scope="col">%s</th>' % esc(h) for h in RUNS_HEAD))
    return layout("Training", body, cfg, admin=True,
                  scripts='<script src="/static/training.js"></script>')


def _scheme_report(name: str, r: Dict[str, Any]) -> Safe:
    """One scheme's held-out report: a sentence, the per-label table, the confusion matrix."""
    held = heldout.HeldOut.from_dict(r)
    versus = (render('<p class="versus{cls}">{s}</p>', s=held.versus.sentence(),
                     cls="" if held.versus.beats else " warning")
              if held.versus is not None else Safe(""))
    if held.shape == heldout.ENTITIES:
        return join([span_report(name, r), versus])
    if held.shape == heldout.NUMBERS:
        return join([rating_cells.number_report(name, r), versus])
    ci = r.get("accuracy_ci95") or [0, 1]
    base = r.get("baseline") or {}
    head = render('<h3>{name}</h3><p class="report-summary">Accuracy <b>{acc:.3f}</b> (95% '
                  'interval {lo:.2f} to {hi:.2f}), macro-F1 <b>{f1:.3f}</b>, on {n} held-out '
                  '(test split) items. Always answering <q>{bl}</q> scores accuracy {ba:.3f}; '
                  'the model\'s is {diff}.</p>', name=name, acc=_num(r["accuracy"]),
                  lo=_num(ci[0]) or 0.0, hi=_num(ci[1]) or 0.0, f1=_num(r.get("macro_f1")) or 0.0,
                  n=_num(r.get("n"), True) or 0, bl=run_texts.answer_words(base.get("label")),
                  ba=_num(base.get("accuracy")) or 0.0,
                  diff=run_texts.above(_num(r.get("above_baseline")) or 0.0))
    note = (render('<p class="warning report-note" role="note">{n}</p>', n=r["note"])
            if r.get("note") else Safe(""))
    rows = join(render('<tr><th scope="row">{label}</th><td>{p:.3f}</td><td>{r:.3f}</td>'
                       '<td>{f:.3f}</td><td>{s}</td></tr>', label=label,
                       p=_num(v.get("precision")) or 0.0, r=_num(v.get("recall")) or 0.0,
                       f=_num(v.get("f1")) or 0.0, s=_num(v.get("support"), True) or 0)
                for label, v in (r.get("per_label") or {}).items())
    table = render('<table class="report-labels"><thead><tr><th scope="col">Label</th>'
                   '<th scope="col">Precision</th><th scope="col">Recall</th>'
                   '<th scope="col">F1</th><th scope="col">Support</th></tr></thead>'
                   '<tbody>{rows}</tbody></table>', rows=rows)
    return join([head, rating_cells.ordinal_line(r), versus, note, table,
                 _confusion(r.get("confusion"))])


def _confusion(c: Optional[Dict[str, Any]]) -> Safe:
    if not isinstance(c, dict) or not c.get("labels"):
        return Safe("")
    labels = [str(x) for x in c["labels"]]
    head = join(render('<th scope="col">{l}</th>', l=label) for label in labels)
    body = join(render('<tr><th scope="row">{l}</th>{cells}</tr>', l=label, cells=join(
        render("<td>{v}</td>", v=_num(v, True) or 0) for v in row))
                for label, row in zip(labels, c.get("matrix") or []))
    return render('<table class="confusion"><caption>Confusion matrix: rows are the human '
                  'label, columns the model\'s</caption><thead><tr><td></td>{head}</tr></thead>'
                  '<tbody>{body}</tbody></table>', head=head, body=body)


def holdout_section(view: RunView) -> Safe:
    if view.holdout is None:
        return Safe("")
    h = view.holdout.as_dict()
    per = h.get("per_scheme") if isinstance(h.get("per_scheme"), dict) else {
        ", ".join(map(str, view.schemas)): h}
    return render('<section class="card" id="holdout-report"><h2>Held-out report</h2>'
                  '{parts}</section>', parts=join(_scheme_report(str(k), v)
                                                 for k, v in per.items() if isinstance(v, dict)))


def writeback_section(view: RunView) -> Safe:
    """Write-back as a sentence and a table by label, not raw JSON."""
    wb = view.writeback
    if wb is None:
        return Safe("")
    written, below, skipped = wb.written, wb.below_min_confidence, wb.unlabeled_skipped
    schemes = ", ".join(wb.schemes) or "no scheme"
    sentence = render('<p class="writeback-summary">{kept}; '
                      '{b} below <code>min_confidence</code> ({mc}) were not written{sk}.</p>',
                      kept=(render("{w} prediction{s} made for {schemes}, deleted with the "
                                   "model files (retain_runs)", w=written,
                                   s="" if written == 1 else "s", schemes=schemes)
                            if view.pruned_at and not view.in_use else
                            wb.kept_words(list(view.in_use))) if wb.schemes else
                      render("{w} prediction{s} written for {schemes}", w=written,
                             s="" if written == 1 else "s", schemes=schemes), b=below,
                      mc=float(wb.min_confidence or 0.0),
                      sk=render("; {n} unlabelled items skipped (include_unlabeled: false)",
                                n=skipped) if skipped else "")
    notes = join(render('<p class="hint">{scheme}: {why}</p>', scheme=k, why=v)
                 for k, v in wb.why.items())
    if not wb.by_label:
        return join([sentence, notes])
    rows = join(render('<tr><th scope="row">{label}</th><td>{n}</td></tr>', label=k, n=v)
                for k, v in sorted(wb.by_label.items()))
    return join([sentence, notes, render(
        '<table class="writeback-labels"><thead><tr><th scope="col">Predicted label</th>'
        '<th scope="col">Written</th></tr></thead><tbody>{rows}</tbody></table>', rows=rows)])


def _warnings(view: RunView) -> Safe:
    warnings = [str(w) for w in view.warnings]
    if not warnings:
        return Safe("")
    return render('<ul class="warning run-warnings">{items}</ul>',
                  items=join(render("<li>{w}</li>", w=w) for w in warnings))


def run_page(cfg, view: RunView, log: str, where: Any, message: str = "",
             ok: bool = True, publish: Safe = Safe(""), use_refusal: str = "",
             live: Optional[Tuple[Dict[str, Safe], int]] = None) -> str:
    """``use_refusal``: why the run cannot be put in use ("" when it can: in_use.use_refusal).
    ``live``: for a run not finished, (its parts (live.run_parts), the byte offset ``log``
    ends at): the page follows the run (static/training.js)."""
    parts, log_end = live or ({}, 0)

    def row(k, v, part=""):
        if part:  # a part the live page patches
            return render('<tr><th scope="row">{k}</th><td data-part="{p}">{v}</td></tr>',
                          k=k, v=parts.get(part, v), p=part)
        return render('<tr><th scope="row">{k}</th><td>{v}</td></tr>', k=k, v=v)

    when = clock

    def code(value):
        return render("<code>{v}</code>", v=json.dumps(value, default=str)) if value else ""

    follow = render('<p class="hint" id="run-follows" data-follow-run="{id}">This page follows '
                    'the run: it updates every second and shows the report when the run ends.'
                    '</p><noscript><p class="hint">Without JavaScript this page does not '
                    'update: reload it to see the run\'s progress.</p></noscript>',
                    id=view.run_id) if live else Safe("")
    rows = [row("Status", status_badge(view), "status"), row("Warnings", _warnings(view))
            if view.warnings else "",
            row("Step", view.step or "", "step"),
            row("Progress", "", "bar") if live else "",
            row("Error", render('<span class="error">{e}</span>', e=view.error))
            if view.error and view.status == "error" else "",
            row("Trainer", view.trainer), row("Schemes", ", ".join(map(str, view.schemas))),
            row("Params", join([_params(view), render(
                '<details><summary>all</summary>{all}</details>',
                all=code(view.params or {}))])),
            row("Ran on", view.ran_on or view.backend, "ran_on" if live else ""),
            row("Created", when(view.created_at)),
            row("Started", when(view.started_at), "started" if live else ""),
            row("Finished", when(view.finished_at)), row("Duration", _duration(view)),
            row("Held-out score", _holdout(view)),
            row("Write-back", writeback_section(view)) if view.writeback is not None else "",
            row("Metrics", metrics_table(view)) if view.metrics else "",
            row("Model files", where), row("In use", in_use_cell(view, use_refusal)),
            row("Pinned", pin_cell(view, use_refusal)) if view.status == "success" else "",
            row("Name and note", run_actions.label_cell(view))]
    cancel = render('<div data-part="cancel">{c}</div>', c=parts["cancel"]) if live else \
        cancel_button(view)
    body = render("""<p><a href="/admin/training">&larr; Training</a></p>
<h1>Run {id}{name}</h1>{message}{follow}
<div class="table-wrap"><table class="details">{rows}</table></div>{cancel}{again}
{report}{publish}
<section class="card"><h2>Loss and accuracy</h2><div class="chart-box"{chart_part}>{chart}</div>
</section>
<section class="card"><h2>Run log</h2><pre class="log" id="run-log"{end}>{log}</pre></section>""",
                  id=view.run_id, rows=join(r for r in rows if r), cancel=cancel or Safe(""),
                  follow=follow, chart_part=Safe(' data-part="chart"') if live else "",
                  end=render(' data-log-end="{e}"', e=log_end) if live else "",
                  again=run_actions.again_cell(view, cfg.path),
                  chart=parts.get("chart") or chart_svg(view.history,
                                                        pending=view.status not in TERMINAL),
                  log=log, report=holdout_section(view), message=message_box(message, ok),
                  publish=publish, name=render(' · <span id="run-name-head">{n}</span>',
                                               n=view.name) if view.name else "")
    return layout("Run %s" % view.run_id, body, cfg, admin=True,
                  scripts='<script src="/static/training.js"></script>')
