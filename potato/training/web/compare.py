"""The compare page (``/admin/training/compare?runs=r1&runs=r2``): two or more runs side by
side, their params (the ones that differ highlighted) and their scores and metrics, and their
loss and metric curves overlaid on one chart, a colour per run (``chart.overlay_svg``).

The run ids come from the query and are checked here once: known runs, 2 to MAX_RUNS."""

import json
import re
from typing import Any, Dict, List

from potato.markup import Safe, join, render
from potato.server.errors import HTTPError
from potato.server.pages import layout
from potato.training.web import chart, pages
from potato.training.web.run_cells import metric_name, metric_text
from potato.training.core.runs import RequestError
from potato.training.core.view import RunView

MAX_RUNS = 12
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")
MISSING = "—"


def parse_ids(query: Dict[str, List[str]]) -> List[str]:
    """The run ids to compare, in the order given, once each (``runs=r1&runs=r2`` or
    ``runs=r1,r2``); RequestError(400) with what to do when they do not fit."""
    ids = []
    for value in query.get("runs") or []:
        for rid in value.split(","):
            rid = rid.strip()
            if not rid:
                continue
            if not RUN_ID.fullmatch(rid):
                raise RequestError(400, "%r is not a run id (like r12)." % rid[:60])
            if rid not in ids:
                ids.append(rid)
    if len(ids) < 2:
        raise RequestError(400, "Pick at least two runs to compare: tick them in the runs "
                                "table, then press Compare.")
    if len(ids) > MAX_RUNS:
        raise RequestError(400, "%d runs picked; at most %d compare side by side. Untick "
                                "some." % (len(ids), MAX_RUNS))
    return ids


def _text(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _same(value: Any) -> Any:
    """What two values must share to be the same (1 and 1.0 are)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return _text(value)


def differing(views: List[RunView]) -> List[str]:
    """The params whose values are not the same in every run (a param one run lacks counts)."""
    keys = sorted(set().union(*[set(v.params or {}) for v in views]))
    return [k for k in keys
            if len({_same((v.params or {}).get(k)) for v in views}) > 1]


def _row(label: str, cells: List[Any], differs: bool = False) -> Safe:
    return render('<tr{cls}><th scope="row">{mark}{label}</th>{cells}</tr>',
                  cls=Safe(' class="differs"') if differs else "",
                  mark=Safe('<span class="differs-mark" title="differs">≠ </span>')
                  if differs else "", label=label,
                  cells=join(c if isinstance(c, Safe) else render("<td>{c}</td>", c=c)
                             for c in cells))


def _params_rows(views: List[RunView]) -> Safe:
    keys = sorted(set().union(*[set(v.params or {}) for v in views]))
    diff = set(differing(views))
    return join(_row(k, [render("<td><code>{v}</code></td>", v=_text(
        (v.params or {}).get(k))) for v in views], k in diff) for k in keys)


def _score_rows(views: List[RunView]) -> Safe:
    """Held-out scores (the best macro-F1 in bold) and predictions written."""
    def h(v, key):
        x = v.holdout.as_dict().get(key) if v.holdout is not None else None
        return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None

    rows = []
    for key, words in (("macro_f1", "held-out macro-F1"), ("accuracy", "held-out accuracy"),
                       ("qwk", "held-out quadratic-weighted kappa (Likert)"),
                       ("micro_f1", "held-out entity micro-F1 (spans)"), ("mae", "held-out MAE"),
                       ("n", "held-out items (test split)")):
        values = [h(v, key) for v in views]
        if all(x is None for x in values):
            continue
        best = max((x for x in values if x is not None), default=None) \
            if key in ("macro_f1", "accuracy", "qwk", "micro_f1") else None
        shown = [MISSING if x is None else "%d" % x if key == "n" else "%.3f" % x
                 for x in values]
        rows.append(_row(words, [render("<td>{b}</td>", b=render(
            '<b class="best">{x}</b>', x=text) if x == best and len(views) > 1 else text)
            for x, text in zip(values, shown)], len(set(values)) > 1))
    written = [v.writeback.written if v.writeback is not None else None for v in views]
    rows.append(_row("predictions written", [MISSING if w is None else w for w in written]))
    return join(rows)


def _metric_rows(views: List[RunView]) -> Safe:
    metrics = [v.metrics if isinstance(v.metrics, dict) else {} for v in views]
    keys = sorted(set().union(*[set(m) for m in metrics]))
    return join(_row(metric_name(str(k)), [metric_text(m[k]) if k in m else MISSING
                                           for m in metrics],
                     len({_same(m.get(k)) for m in metrics}) > 1) for k in keys)


def _swatch(position: int) -> Safe:
    """The run's colour in the overlaid chart, beside its id."""
    return render('<svg class="swatch" width="12" height="12" aria-hidden="true"><rect '
                  'width="12" height="12" fill="{c}"/></svg> ', c=chart.run_colour(position))


def compare_page(cfg, views: List[RunView]) -> str:
    head = join(render('<th scope="col">{swatch}<a href="/admin/training/runs/{id}">{id}</a>'
                       '{name}</th>', id=v.run_id, swatch=_swatch(k),
                       name=render('<br><span class="run-name">{n}</span>',
                                   n=v.name) if v.name else "")
                for k, v in enumerate(views))
    diff = differing(views)
    said = render("{n} param{s} differ: {names}. They are highlighted.", n=len(diff),
                  s="" if len(diff) == 1 else "s", names=", ".join(diff)) if diff else \
        "Every param is the same in these runs."
    about = join([
        _row("Trainer", [v.trainer for v in views], len({v.trainer for v in views}) > 1),
        _row("Schemes", [", ".join(map(str, v.schemas)) for v in views]),
        _row("Ran on", [v.ran_on or v.backend for v in views]),
        _row("Status", [render("<td>{b}</td>", b=pages.status_badge(v)) for v in views]),
        _row("Note", [v.note or "" for v in views])])
    body = render(
        '<p><a href="/admin/training/runs">&larr; Runs</a></p><h1>Compare {n} runs</h1>'
        '<div class="table-wrap"><table id="compare" class="compare"><thead><tr><td></td>{head}'
        '</tr></thead><tbody>{about}'
        '<tr><th colspan="{cols}" scope="rowgroup" class="group">Scores</th></tr>{scores}'
        '<tr><th colspan="{cols}" scope="rowgroup" class="group">Params</th></tr>'
        '<tr><td colspan="{cols}" class="hint" id="params-differ">{said}</td></tr>{params}'
        '<tr><th colspan="{cols}" scope="rowgroup" class="group">Metrics the runs reported</th>'
        '</tr>{metrics}</tbody></table></div>'
        '<section class="card" id="compare-chart" aria-labelledby="compare-chart-h">'
        '<h2 id="compare-chart-h">Loss and metrics, a colour per run</h2>{chart}</section>',
        chart=chart.overlay_svg([(v.run_id, v.history) for v in views]),
        n=len(views), head=head, about=about, cols=len(views) + 1, scores=_score_rows(views),
        said=said, params=_params_rows(views), metrics=_metric_rows(views))
    return layout("Compare runs", body, cfg, admin=True)


def add_routes(app, manager) -> None:
    @app.route("GET", r"/admin/training/compare", "admin")
    def compare(h):
        try:
            ids = parse_ids(h.query)
        except RequestError as e:
            raise HTTPError(e.status, e.message)
        runs = [manager.runs.get(rid) for rid in ids]
        missing = [rid for rid, r in zip(ids, runs) if r is None]
        if missing:
            raise HTTPError(404, "No run %s; pick runs from the runs table." % ", ".join(missing))
        h.send_html(compare_page(manager.cfg, [RunView.from_run(r) for r in runs]))
