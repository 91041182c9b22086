"""What the admin sees of active learning: the strategy, the run ordering the queue and when it
reordered, labels since the last retrain and when the next run queues, and the learning curve
(each successful run's held-out headline figure against the labelled items it had).

``status`` is the API's JSON (``GET /admin/training/api/active_learning``); ``card`` draws it
on the training page (a server-rendered SVG, as the run chart is).
"""

import time
from typing import Any, Dict, List, Optional

from potato.markup import Safe, join, render
from potato.project import queue_order
from potato.training.exchange import ingest
from potato.training.reports.heldout import HeldOut
from potato.training.web.chart import ticks

CURVE_RUNS = 200  # the runs the curve draws (the latest ones)


def curve(manager, scheme: str) -> List[Dict[str, Any]]:
    """The learning curve of ``scheme``: per successful run that scored it, in order, the
    labelled items its bundle had and its held-out headline figure."""
    in_use = ingest.in_use(manager.store, scheme)
    out = []
    for run in reversed(manager.runs.list(CURVE_RUNS)):
        if run.status != "success" or run.labelled is None or scheme not in run.schemas:
            continue
        report = ingest.scheme_report(run.holdout, scheme)
        if report is None:
            continue
        head = HeldOut.from_dict(report).headline
        if head.value is None:
            continue
        out.append({"run_id": run.run_id, "labelled": run.labelled, "figure": head.name,
                    "value": round(head.value, 4), "higher_is_better": head.higher_is_better,
                    "in_use": run.run_id == in_use, "trainer": run.trainer,
                    "auto": run.auto})
    return out


def status(manager) -> Dict[str, Any]:
    """Active learning as the API gives it (``{"enabled": false}`` when it is off)."""
    al = manager.cfg.active_learning
    if not al.enabled:
        return {"enabled": False,
                "reason": "assignment_strategy is not active_learning (the queue is %s)"
                          % manager.cfg.upstream.strategy}
    auto = dict(manager.auto_status)
    return {"enabled": True, "strategy": al.strategy,
            "hybrid_weights": al.weights if al.strategy == "hybrid" else None,
            "schemes": list(al.schemes), "cold_start": al.cold_start,
            "min_instances_for_training": al.min_instances,
            "update_frequency": al.update_frequency,
            "max_instances_to_reorder": al.max_reorder,
            "random_sample_percent": round(al.random_percent * 100, 4),
            "order": queue_order.status(manager.store),
            "retraining": {k: auto.get(k) for k in ("labels", "new_labels", "next_at",
                                                     "reason")},
            "curves": {s: curve(manager, s) for s in al.schemes}}


def _ago(t: Optional[float]) -> str:
    if t is None:
        return "never"
    s = max(0, int(time.time() - t))
    return ("%d s ago" % s if s < 120 else "%d min ago" % (s // 60) if s < 7200
            else "%d h ago" % (s // 3600))


def card(st: Dict[str, Any]) -> Safe:
    """The training page's Active learning card (nothing when it is off)."""
    if not st.get("enabled"):
        return Safe("")
    order = st["order"]
    if order.get("ordered"):
        runs = ", ".join("%s (%s)" % (r, s) for s, r in sorted(order["runs"].items()))
        ordering = render("The queue is ordered by run {r}, {st}; reordered {ago}; {n} items "
                          "ranked.", r=runs, st=order.get("strategy") or "",
                          ago=_ago(order.get("at")), n=order.get("size", 0))
    else:
        ordering = render("No model orders the queue yet: annotators get items in {o} until "
                          "a run that beats its baseline is in use.",
                          o="a random order" if st["cold_start"] == "random"
                          else "data-file order")
    rt = st["retraining"]
    retrain = render("{n} label(s) since the last automatic run; the next run queues at {at} "
                     "labels ({why}).", n=rt.get("new_labels") if rt.get("new_labels")
                     is not None else 0, at=rt.get("next_at") if rt.get("next_at") is not None
                     else "now", why=rt.get("reason") or "")
    curves = join([_curve_svg(s, pts) for s, pts in sorted(st["curves"].items())])
    return render("""<section class="card" aria-labelledby="al-h" id="active-learning">
<h2 id="al-h">Active learning</h2>
<p id="al-strategy">Strategy: <strong>{strategy}</strong> on {schemes}; {pct} % of the ranked
places drawn at random; the held-out test split is never chosen by the model.</p>
<p id="al-order">{ordering}</p><p id="al-retrain">{retrain}</p>{curves}</section>""",
                  strategy=st["strategy"], schemes=", ".join(st["schemes"]),
                  pct="%g" % st["random_sample_percent"], ordering=ordering, retrain=retrain,
                  curves=curves)


W, H, LEFT, BOTTOM, TOP, RIGHT = 520, 200, 52, 170, 12, 16


def _curve_svg(scheme: str, pts: List[Dict[str, Any]]) -> Safe:
    """One scheme's learning curve: held-out figure (y) against labelled items (x)."""
    if not pts:
        return render('<p class="hint" id="al-curve-{s}">Learning curve of {s}: no scored run '
                      'yet.</p>', s=scheme)
    xs = [p["labelled"] for p in pts]
    ys = [p["value"] for p in pts]
    x0, x1 = 0, max(xs) or 1
    higher = pts[-1]["higher_is_better"]
    y0, y1 = (0.0, 1.0) if higher and max(ys) <= 1 and min(ys) >= 0 else (
        min(0.0, min(ys)), max(ys) or 1.0)

    def px(x):
        return LEFT + (W - LEFT - RIGHT) * (x - x0) / float(x1 - x0)

    def py(y):
        return BOTTOM - (BOTTOM - TOP) * (y - y0) / float((y1 - y0) or 1)

    path = " ".join("%s%.1f,%.1f" % ("M" if k == 0 else "L", px(x), py(y))
                    for k, (x, y) in enumerate(zip(xs, ys)))
    dots = join([render('<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{c}"><title>{t}'
                        '</title></circle>', x=px(p["labelled"]), y=py(p["value"]),
                        r=5 if p["in_use"] else 3, c="#1e7b34" if p["in_use"] else "#1e6fb3",
                        t="%s: %s %.3f with %d labelled items%s" % (
                            p["run_id"], p["figure"], p["value"], p["labelled"],
                            " (in use)" if p["in_use"] else "")) for p in pts])
    grid = join([render('<line x1="{a}" x2="{b}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                        '<text x="{t}" y="{ty:.1f}" font-size="11" text-anchor="end">{v}</text>',
                        a=LEFT, b=W - RIGHT, y=py(v), t=LEFT - 6, ty=py(v) + 4, v="%g" % v)
                 for v in ticks(y0, y1)])
    xt = join([render('<text x="{x:.1f}" y="{y}" font-size="11" text-anchor="middle">{v}'
                      '</text>', x=px(v), y=BOTTOM + 14, v="%g" % v)
               for v in ticks(x0, x1, whole=True)])
    return render('<figure id="al-curve-{s}"><svg viewBox="0 0 {w} {h}" width="{w}" '
                  'role="img" aria-label="{label}">{grid}{xt}<path d="{path}" fill="none" '
                  'stroke="#1e6fb3" stroke-width="2"/>{dots}<text x="{cx}" y="{ly}" '
                  'font-size="11" text-anchor="middle">labelled items</text></svg>'
                  '<figcaption>Learning curve of {s}: held-out {fig} of each run against the '
                  'labelled items it had</figcaption></figure>',
                  s=scheme, w=W, h=H + 14, grid=grid, xt=xt, path=path, dots=dots,
                  cx=(LEFT + W - RIGHT) / 2, ly=BOTTOM + 28, fig=pts[-1]["figure"],
                  label="learning curve of %s" % scheme)
