"""The Training page (``/admin/training``) and a run's page, rendered on the server.

The live parts (the current run and the runs table) are HTML fragments the server renders too;
``static/training.js`` fetches them every second and swaps them in, so there is one renderer
and the runs table reads fine without JavaScript.
"""

import json
import math
import time
from typing import Any, Dict, List, Optional

from potato.server.pages import Safe, esc, join, json_script, layout, render
from potato.training.runs import TERMINAL

STATUS_TEXT = {"queued": "queued", "running": "running", "success": "success",
               "error": "error", "cancelled": "cancelled"}


def _duration(run: Dict[str, Any]) -> str:
    d = run.get("duration_s")
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


def _holdout(run: Dict[str, Any]) -> Safe:
    h = run.get("holdout")
    if not isinstance(h, dict) or _num(h.get("accuracy")) is None:
        return Safe("")
    return render('{acc:.3f} <span class="hint">(F1 {f1:.3f}, n={n})</span>',
                  acc=_num(h.get("accuracy")), f1=_num(h.get("macro_f1")) or 0.0,
                  n=_num(h.get("n"), True) or 0)


def _written(run: Dict[str, Any]) -> Safe:
    wb = run.get("writeback")
    n = _num(wb.get("written"), True) if isinstance(wb, dict) else None
    return render("{n}", n=n) if n is not None else Safe("")


def runs_rows(runs: List[Dict[str, Any]]) -> Safe:
    if not runs:
        return Safe('<tr><td colspan="9">No runs yet.</td></tr>')
    return join(render(
        '<tr data-run="{id}"><td><a href="/admin/training/runs/{id}">{id}</a></td>'
        '<td>{trainer}</td><td>{schemas}</td><td class="ran-on">{ran_on}</td>'
        '<td><span class="status status-{status}">{status_text}</span></td>'
        '<td class="holdout">{holdout}</td><td class="written">{written}</td>'
        '<td>{duration}</td><td class="in-use">{in_use}</td></tr>',
        id=r["run_id"], trainer=r["trainer"], schemas=", ".join(map(str, r["schemas"])),
        ran_on=r.get("ran_on") or r["backend"], status=r["status"],
        status_text=STATUS_TEXT.get(r["status"], r["status"]), holdout=_holdout(r),
        written=_written(r), duration=_duration(r),
        in_use=render('<span class="badge in-use-badge" title="its predictions are the '
                      'suggestions annotators see">in use: {s}</span>',
                      s=", ".join(map(str, r["in_use"]))) if r.get("in_use") else "")
        for r in runs)


def _series(history) -> Dict[str, List]:
    """{series name: [(epoch, value)]} from the stored metric events; anything that is not a
    finite number is left out (the boundary checks events, but old records may predate it)."""
    series: Dict[str, List] = {}
    for e in history if isinstance(history, list) else []:
        if not isinstance(e, dict):
            continue
        epoch, value = _num(e.get("epoch")), _num(e.get("value"))
        if epoch is None or value is None or abs(epoch) > 1e6 or abs(value) > 1e9:
            continue  # not a point a chart can draw (the boundary refuses these now)
        name = str(e.get("name", ""))[:100]
        if e.get("split"):
            name = "%s (%s)" % (name, str(e["split"])[:40])
        series.setdefault(name, []).append((epoch, value))
    return series


def chart_svg(history: List[Dict[str, Any]], width: int = 360, height: int = 140,
              pending: bool = True) -> Safe:
    """Loss and accuracy per epoch as a small inline SVG (no chart library). Without points:
    a note while one can still come (``pending``), else a plain statement."""
    series = _series(history)
    if not series:
        if pending:
            return Safe('<p class="hint chart-empty">The chart appears after the first '
                        'epoch.</p>')
        return Safe('<p class="hint chart-empty">No chart: the run reported no epochs.</p>')
    pad = 28
    epochs = sorted({x for pts in series.values() for x, _ in pts})
    lo_x, hi_x = min(epochs), max(epochs)
    top = max(1.0, max(v for pts in series.values() for _, v in pts))
    colours = ["#7a4b1f", "#1e6fb3", "#1e7b34", "#8a2be2"]

    def px(x):
        return pad + (0 if hi_x == lo_x else (x - lo_x) / (hi_x - lo_x) * (width - 2 * pad))

    def py(v):
        return height - pad - v / top * (height - 2 * pad)

    parts = [render('<svg class="chart" role="img" viewBox="0 0 {w} {h}" width="100%" '
                    'aria-label="Loss and accuracy per epoch">'
                    '<line x1="{p}" y1="{hp}" x2="{wp}" y2="{hp}" stroke="#999"/>'
                    '<line x1="{p}" y1="{p}" x2="{p}" y2="{hp}" stroke="#999"/>'
                    '<text x="{ex}" y="{ey}" font-size="10">epoch</text>'
                    '<text x="2" y="{ty}" font-size="10">{top:.1f}</text>'
                    '<text x="2" y="{hp}" font-size="10">0</text>',
                    w=width, h=height, p=pad, hp=height - pad, wp=width - pad,
                    ex=width - pad - 24, ey=height - 8, ty=pad + 4, top=top)]
    for k, (name, pts) in enumerate(sorted(series.items())):
        colour = colours[k % len(colours)]
        pts = sorted(pts)
        parts.append(render('<polyline fill="none" stroke="{c}" stroke-width="2" '
                            'points="{pts}"/>', c=colour,
                            pts=" ".join("%.1f,%.1f" % (px(x), py(v)) for x, v in pts)))
        parts.extend(render('<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{c}"><title>{name} '
                            'epoch {epoch:g}: {v:.4f}</title></circle>', x=px(x), y=py(v),
                            c=colour, name=name, epoch=x, v=v) for x, v in pts)
        parts.append(render('<text x="{x}" y="12" font-size="10" fill="{c}">{name}</text>',
                            x=pad + 6 + 110 * k, c=colour, name=name))
    parts.append(Safe("</svg>"))
    return join(parts)


def _progress_bar(run: Dict[str, Any]) -> Safe:
    progress = run.get("progress") if isinstance(run.get("progress"), dict) else {}
    total = _num(progress.get("total"), True)
    current = _num(progress.get("current"), True) or 0
    if not total or run["status"] != "running":
        return Safe("")
    eta = _num(progress.get("eta_s"))
    return render('<p><progress max="{total}" value="{cur}" aria-label="Run progress"></progress>'
                  ' {cur}/{total} {unit}{eta}</p>', total=total, cur=min(current, total),
                  unit=str(progress.get("unit") or "")[:40],
                  eta=" · ETA %ds" % eta if eta is not None else "")


def live_fragment(run: Optional[Dict[str, Any]], log_tail: str) -> Safe:
    if run is None:
        return Safe('<p class="hint">No run yet. Start one above.</p>')
    error = (render('<p class="error" role="alert">{e}</p>', e=run["error"])
             if run["status"] == "error" and run.get("error") else Safe(""))
    cancel = _cancel_button(run)
    return render("""<div class="live" data-run="{id}" data-status="{status}">
<p><a href="/admin/training/runs/{id}"><b>{id}</b></a> · {trainer} on {schemas} ·
 runs on <b class="ran-on">{ran_on}</b></p>
<p>Status: <span class="status status-{status}" id="live-status">{status}</span>
 · <span id="live-step">{step}</span></p>
{bar}{error}
<div class="chart-box">{chart}</div>
<details open><summary>Run log (last lines)</summary><pre class="log" id="live-log">{log}</pre>
</details>
{cancel}
</div>""", id=run["run_id"], trainer=run["trainer"],
                  schemas=", ".join(map(str, run["schemas"])),
                  ran_on=run.get("ran_on") or run["backend"], status=run["status"],
                  step=run.get("step") or "", bar=_progress_bar(run), error=error,
                  chart=chart_svg(run.get("history"), pending=run["status"] not in TERMINAL),
                  log=log_tail, cancel=cancel)


def _cancel_button(run: Dict[str, Any]) -> Safe:
    """Cancel run (the page asks first); disabled once a cancel is on its way."""
    if run["status"] in TERMINAL:
        return Safe("")
    if run.get("step") == "cancelling":
        return render('<button type="button" class="danger" data-cancel="{id}" disabled>'
                      'Cancelling…</button>', id=run["run_id"])
    return render('<button type="button" class="danger" data-cancel="{id}">Cancel run</button>',
                  id=run["run_id"])


def _trainer_options(trainers: List[Dict[str, Any]], backend_type: str, first) -> str:
    out = []
    for t in trainers:
        reason = unavailable_reason(t, backend_type)
        out.append('<option value="%s"%s%s>%s%s</option>' % (
            esc(t["name"]), " disabled" if reason else "", " selected" if t is first else "",
            esc(t["name"]), " (unavailable: %s)" % esc(reason) if reason else ""))
    return "".join(out)


def unavailable_reason(trainer: Dict[str, Any], backend_type: str) -> str:
    if trainer.get("local_only") and backend_type != "local":
        return "it reads the server's store, so it runs only on local"
    if backend_type == "local" and trainer.get("missing_packages"):
        return "needs %s here" % ", ".join(trainer["missing_packages"])
    return ""


def param_inputs(trainer: Dict[str, Any], shown: bool) -> str:
    """One trainer's param inputs; hidden (and disabled, so not submitted) unless ``shown``."""
    off = "" if shown else " disabled"
    out = ['<div class="param-set" data-trainer="%s"%s>' % (esc(trainer["name"]),
                                                           "" if shown else " hidden")]
    for p in trainer["params"]:
        pid = "param-%s-%s" % (trainer["name"], p["name"])
        default = "" if p["default"] is None else p["default"]
        if p["type"] == "bool":
            out.append('<label for="%s">%s</label><select id="%s" name="param:%s"%s>'
                       '<option value="true"%s>true</option><option value="false"%s>false'
                       '</option></select>' % (pid, esc(p["name"]), pid, esc(p["name"]), off,
                                               " selected" if default is True else "",
                                               " selected" if default is False else ""))
        else:
            out.append('<label for="%s">%s</label><input id="%s" name="param:%s" value="%s" '
                       'placeholder="default"%s>' % (pid, esc(p["name"]), pid, esc(p["name"]),
                                                     esc(default), off))
        out.append('<p class="hint">%s</p>' % esc(p["help"]))
    if not trainer["params"]:
        out.append('<p class="hint">This trainer has no params.</p>')
    return "".join(out) + "</div>"


def training_page(cfg, backends: List[Dict[str, Any]], trainers: List[Dict[str, Any]],
                  runs: List[Dict[str, Any]], live: str, message: str = "") -> str:
    default = next((b for b in backends if b["default"]), backends[0])
    backend_opts = "".join('<option value="%s" data-type="%s" title="%s"%s>%s</option>' % (
        esc(b["name"]), esc(b["type"]), esc(b.get("description") or ""),
        " selected" if b is default else "", esc(b["label"])) for b in backends)
    schemes = "".join(
        '<label class="option"><input type="checkbox" name="schemas" value="%s"%s> %s '
        '<span class="hint">(%s)</span></label>' % (esc(s.name), " checked" if i == 0 else "",
                                                    esc(s.name), esc(s.annotation_type))
        for i, s in enumerate(cfg.schemes))
    first = next((t for t in trainers if not unavailable_reason(t, default["type"])),
                 trainers[0])
    msg = '<p class="error">%s</p>' % esc(message) if message else ""
    disabled = form_hidden = ""
    if not cfg.model_training.enabled:
        disabled = ('<p class="notice" id="training-disabled">Training is disabled '
                    '(model_training.enabled: false). Annotation works as usual; set '
                    '<code>enabled: true</code> under <code>model_training</code> in %s and '
                    'restart the server to train models.</p>' % esc(cfg.path))
        form_hidden = " hidden"
    data = {"unavailable": {b["name"]: {t["name"]: unavailable_reason(t, b["type"])
                                        for t in trainers} for b in backends},
            "descriptions": {b["name"]: b.get("description") or "" for b in backends},
            "trainers": {t["name"]: {"schema_types": t["schema_types"],
                                     "max_schemas": t["max_schemas"]} for t in trainers}}
    body = """<h1>Training</h1>
<section class="card" aria-labelledby="start-h"><h2 id="start-h">Start a run</h2>{disabled}
<div id="message" role="alert" aria-live="assertive">{msg}</div>
<form id="run-form" method="post" action="/admin/training/start"{form_hidden}>
  <div class="row">
    <div><label for="backend">Runs on</label>
    <select id="backend" name="backend">{backend_opts}</select></div>
    <button type="button" id="check" class="secondary">Check</button>
  </div>
  <p class="hint" id="backend-description">{description}</p>
  <div id="check-report" aria-live="polite"></div>
  <label for="trainer">Trainer</label>
  <select id="trainer" name="trainer">{trainer_opts}</select>
  <fieldset><legend>Schemes</legend>{schemes}</fieldset>
  <fieldset id="params"><legend>Params</legend>{params}</fieldset>
  <button type="submit" id="start-run" class="primary">Start run</button>
</form></section>
<section class="card" aria-labelledby="live-h"><h2 id="live-h">Current run</h2>
<div id="live-run" aria-live="polite">{live}</div></section>
<section class="card" aria-labelledby="runs-h"><h2 id="runs-h">Runs</h2>
<div class="table-wrap"><table id="runs-table"><thead><tr><th scope="col">Run</th>
<th scope="col">Trainer</th><th scope="col">Schemes</th><th scope="col">Ran on</th>
<th scope="col">Status</th><th scope="col">Held-out score</th>
<th scope="col">Predictions written</th><th scope="col">Duration</th>
<th scope="col">In use</th></tr></thead>
<tbody id="runs-body">{rows}</tbody></table></div></section>
<script type="application/json" id="training-data">{data}</script>""".format(
        msg=msg, backend_opts=backend_opts, disabled=disabled, form_hidden=form_hidden,
        description=esc(default.get("description") or ""),
        trainer_opts=_trainer_options(trainers, default["type"], first), schemes=schemes,
        params="".join(param_inputs(t, t is first) for t in trainers), live=live, rows=runs_rows(runs), data=json_script(data))
    return layout("Training", body, cfg, admin=True,
                  scripts='<script src="/static/training.js"></script>')


def _scheme_report(name: str, r: Dict[str, Any]) -> Safe:
    """One scheme's held-out report: a sentence, the per-label table, the confusion matrix."""
    if _num(r.get("accuracy")) is None:
        return Safe("")
    ci = r.get("accuracy_ci95") or [0, 1]
    base = r.get("baseline") or {}
    head = render('<h3>{name}</h3><p class="report-summary">Accuracy <b>{acc:.3f}</b> (95% '
                  'interval {lo:.2f} to {hi:.2f}), macro-F1 <b>{f1:.3f}</b>, on {n} held-out '
                  '(test split) items. Always answering <q>{bl}</q> would score {ba:.3f}: the '
                  'model is {diff:+.3f} above that.</p>', name=name, acc=_num(r["accuracy"]),
                  lo=_num(ci[0]) or 0.0, hi=_num(ci[1]) or 0.0, f1=_num(r.get("macro_f1")) or 0.0,
                  n=_num(r.get("n"), True) or 0, bl=str(base.get("label")),
                  ba=_num(base.get("accuracy")) or 0.0,
                  diff=_num(r.get("above_baseline")) or 0.0)
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
    return join([head, note, table, _confusion(r.get("confusion"))])


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


def holdout_section(run: Dict[str, Any]) -> Safe:
    h = run.get("holdout")
    if not isinstance(h, dict):
        return Safe("")
    per = h.get("per_scheme") if isinstance(h.get("per_scheme"), dict) else {
        ", ".join(map(str, run["schemas"])): h}
    return render('<section class="card" id="holdout-report"><h2>Held-out report</h2>'
                  '{parts}</section>', parts=join(_scheme_report(str(k), v)
                                                 for k, v in per.items() if isinstance(v, dict)))


def _use_button(run: Dict[str, Any]) -> Safe:
    if run["status"] != "success":
        return Safe("no")
    return render('<form method="post" action="/admin/training/runs/{id}/use" class="inline">'
                  '<button type="submit" class="secondary" id="use-run">Use this model'
                  '</button></form> <span class="hint">its predictions become the suggestions '
                  'annotators see</span>', id=run["run_id"])


def run_page(cfg, run: Dict[str, Any], log: str, where: str) -> str:
    def row(k, v):
        return render('<tr><th scope="row">{k}</th><td>{v}</td></tr>', k=k, v=v)

    def when(t):
        t = _num(t)
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else ""

    def code(value):
        return render("<code>{v}</code>", v=json.dumps(value, default=str)) if value else ""

    rows = [row("Status", render('<span class="status status-{s}">{s}</span>', s=run["status"])),
            row("Step", run.get("step") or ""),
            row("Error", render('<span class="error">{e}</span>', e=run["error"]))
            if run.get("error") and run["status"] == "error" else "",
            row("Trainer", run["trainer"]), row("Schemes", ", ".join(map(str, run["schemas"]))),
            row("Params", code(run.get("params") or {})), row("Backend", run["backend"]),
            row("Ran on", run.get("ran_on") or ""), row("Created", when(run.get("created_at"))),
            row("Started", when(run.get("started_at"))),
            row("Finished", when(run.get("finished_at"))), row("Duration", _duration(run)),
            row("Held-out score", _holdout(run)), row("Write-back", code(run.get("writeback"))),
            row("Metrics", code(run.get("metrics"))), row("Model files", where),
            row("In use", render('<b class="in-use-badge">in use for {s}</b> (its predictions '
                                 'are the suggestions annotators see)',
                                 s=", ".join(map(str, run["in_use"])))
                if run.get("in_use") else _use_button(run))]
    cancel = _cancel_button(run)
    body = render("""<p><a href="/admin/training">&larr; Training</a></p>
<h1>Run {id}</h1><div id="message" role="alert"></div>
<div class="table-wrap"><table class="details">{rows}</table></div>{cancel}
{report}
<section class="card"><h2>Loss and accuracy</h2>{chart}</section>
<section class="card"><h2>Run log</h2><pre class="log">{log}</pre></section>""",
                  id=run["run_id"], rows=join(r for r in rows if r), cancel=cancel or Safe(""),
                  chart=chart_svg(run.get("history"), pending=run["status"] not in TERMINAL),
                  log=log, report=holdout_section(run))
    return layout("Run %s" % run["run_id"], body, cfg, admin=True,
                  scripts='<script src="/static/training.js"></script>')
