"""The run's chart: training loss and accuracy as a server-rendered SVG (no chart library).

Loss (left axis, from 0) and accuracy-like values (right axis, 0 to 1) have their own y-axes;
the x-axis is the training step when the trainer reports steps (a loss point every few steps,
val accuracy at each epoch's last step; an epoch's mean of a series drawn by step is left out),
else the epoch. Axes have ticks and labels, series a
legend. The live card is redrawn every second, so the chart stays live.

A series keeps its colour for good: the colour comes from the series' name (``colour_of``), so
a new series appearing mid-run never recolours the others, and ``loss (train)`` has the same
colour on every run. A series with one point (naive Bayes reports one val accuracy) is no line:
it is shown as a number under the chart (``one_point``), and alone it needs no chart at all.
"""

import math
import zlib
from typing import Any, Dict, List, Optional, Tuple

from potato.markup import Safe, join, render

WIDTH, PLOT_H = 760, 220
LEFT, RIGHT, TOP = 58, 58, 14  # room for the axes' ticks and labels
BOTTOM = TOP + PLOT_H  # the x-axis; its ticks, its name and the legend go below it
COLOURS = ("#7a4b1f", "#1e6fb3", "#1e7b34", "#8a2be2", "#b3261e", "#5f6368", "#c26a00",
           "#00838f", "#ad1457", "#3949ab")
# The series the trainers report, each with a colour of its own (the rest hash into COLOURS).
KNOWN_COLOURS = {"loss (train)": COLOURS[0], "accuracy (val)": COLOURS[1],
                 "loss (val)": COLOURS[4], "entity_f1 (val)": COLOURS[2],
                 "mae (val)": COLOURS[3], "val_accuracy": COLOURS[1]}


def colour_of(name: str) -> str:
    """A series' colour, from its name alone: stable across updates, pages and runs."""
    known = KNOWN_COLOURS.get(name)
    return known or COLOURS[zlib.crc32(name.encode("utf-8")) % len(COLOURS)]


def _num(value: Any) -> Optional[float]:
    """A drawable number: finite, within ±1e9; a magnitude below 1e-9 is drawn as 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or abs(value) > 1e9:
        return None
    return 0.0 if abs(value) < 1e-9 else float(value)


def series(history: Any) -> Tuple[str, Dict[str, List[Tuple[float, float]]]]:
    """(x-axis name, {series name: [(x, value)]}) from the stored metric events. Anything that
    is not a finite number is left out: old records may predate the boundary's checks."""
    events = [e for e in (history if isinstance(history, list) else []) if isinstance(e, dict)]
    by_step = any(_num(e.get("step")) is not None for e in events)
    axis = "step" if by_step else "epoch"
    # On a step axis, a point known only by its epoch goes at that epoch's last step.
    epoch_end: Dict[float, float] = {}
    for e in events:
        step, epoch = _num(e.get("step")), _num(e.get("epoch"))
        if step is not None and epoch is not None:
            epoch_end[epoch] = max(step, epoch_end.get(epoch, step))
    stepped = {_name(e) for e in events if _num(e.get("step")) is not None}
    out: Dict[str, List[Tuple[float, float]]] = {}
    for e in events:
        x, value, name = _num(e.get(axis)), _num(e.get("value")), _name(e)
        if x is None and by_step:
            if name in stepped:
                continue  # an epoch's summary of a series drawn step by step
            x = epoch_end.get(_num(e.get("epoch")))  # type: ignore[arg-type]
        if x is None or value is None:
            continue
        out.setdefault(name, []).append((x, value))
    return axis, {k: sorted(v) for k, v in out.items()}


def _name(e: Dict[str, Any]) -> str:
    """A series' name: the metric, with its split, else its scheme (naive Bayes reports one
    val accuracy per scheme: one series each, not one series with two points at epoch 1)."""
    name = str(e.get("name", ""))[:100]
    if e.get("split"):
        return "%s (%s)" % (name, str(e["split"])[:40])
    return "%s (%s)" % (name, str(e["scheme"])[:40]) if e.get("scheme") else name


def is_loss(name: str) -> bool:
    """Loss-like series go on the left axis (from 0 up); the rest on the right (0 to 1)."""
    return "loss" in name.lower()


def tick_step(lo: float, hi: float, count: int = 5, whole: bool = False) -> float:
    """A round distance between ticks (1, 2, 2.5 or 5 times a power of ten) that splits
    [lo, hi] into about ``count - 1`` parts; at least 1 when ticks must be ``whole``."""
    raw = (hi - lo) / max(count - 1, 1)
    if not raw > 1e-12 or not math.isfinite(raw):
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return max(step, 1.0) if whole else step


def ticks(lo: float, hi: float, count: int = 5, whole: bool = False) -> List[float]:
    """Round tick values within [lo, hi] (about ``count`` of them)."""
    if hi <= lo:
        return [lo]
    step = tick_step(lo, hi, count, whole)
    first = math.ceil(lo / step - 1e-9) * step
    out, v = [], first
    while v <= hi + step * 1e-6 and len(out) < 50:
        out.append(round(v, 10))
        v += step
    return out


def _label(v: float) -> str:
    return ("%d" % v) if float(v).is_integer() else ("%.3g" % v)


def _axis_range(values: List[float], lo: float, hi: float) -> Tuple[float, float]:
    """An axis from ``lo`` to ``hi`` widened to hold ``values``, its ends on round ticks."""
    lo, hi = min([lo] + values), max([hi] + values)
    if hi <= lo:
        hi = lo + 1.0
    step = tick_step(lo, hi)
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step


def chart_svg(history: Any, pending: bool = True) -> Safe:
    """The chart, or a note: while points can still come (``pending``), else a statement.
    Whatever a run reported, a chart that cannot be drawn never takes its page down."""
    try:
        return _chart(history, pending)
    except (ArithmeticError, ValueError, StopIteration):
        return Safe('<p class="hint chart-empty">The chart cannot be drawn from the values '
                    'this run reported.</p>')


def one_point(axis: str, single: Dict[str, Tuple[float, float]], colour=colour_of) -> Safe:
    """Series with one point, as numbers (a lone dot on empty axes says less)."""
    if not single:
        return Safe("")
    return render('<ul class="chart-numbers">{items}</ul>', items=join(
        render('<li data-series="{name}"><svg class="swatch" width="12" height="12" aria-hidden="true">'
               '<rect width="12" height="12" fill="{c}"/></svg> '
               '{name}: <b>{v}</b> <span class="hint">({axis} {at})</span></li>', name=name,
               c=colour(name), v="%.4g" % v, axis=axis, at=_label(x))
        for name, (x, v) in sorted(single.items())))


def run_colour(position: int) -> str:
    """The colour of the run at ``position`` on the compare page (its chart and its column)."""
    return COLOURS[position % len(COLOURS)]


def overlay_svg(runs: List[Tuple[str, Any]]) -> Safe:
    """The compare page's chart: every run's series (``runs``: (run id, history)) on one
    chart, a colour per run (``run_colour`` by position), loss solid on the left axis, the
    rest dashed on the right, each named ``r3 · loss (train)``. Runs whose history is by
    another axis (epoch where the first drawn is by step) are named in a note, not drawn."""
    try:
        return _overlay(runs)
    except (ArithmeticError, ValueError, StopIteration):
        return Safe('<p class="hint chart-empty">The chart cannot be drawn from the values '
                    'these runs reported.</p>')


def _overlay(runs: List[Tuple[str, Any]]) -> Safe:
    drawn = [(rid, k) + series(history) for k, (rid, history) in enumerate(runs)]
    drawn = [d for d in drawn if d[3]]
    if not drawn:
        return Safe('<p class="hint chart-empty">No chart: none of these runs reported a loss '
                    'or accuracy.</p>')
    axis = drawn[0][2]
    data, colours = {}, {}
    for rid, k, run_axis, run_data in drawn:
        if run_axis != axis:
            continue
        for name, pts in run_data.items():
            data["%s · %s" % (rid, name)] = pts
            colours["%s · %s" % (rid, name)] = run_colour(k)
    other = [rid for rid, _, run_axis, _ in drawn if run_axis != axis]
    note = render('<p class="hint chart-other-axis">Not drawn: {ids} report by {a}, the '
                  'others by {b}.</p>', ids=", ".join(other), a="epoch" if axis == "step"
                  else "step", b=axis) if other else Safe("")
    label = "Loss and metrics of runs %s by %s" % (", ".join(r[0] for r in drawn), axis)
    return join([_draw(axis, data, True, colours.__getitem__, label), note])


def _chart(history: Any, pending: bool) -> Safe:
    axis, data = series(history)
    return _draw(axis, data, pending, colour_of, "Training loss and accuracy by %s" % axis)


def _draw(axis: str, data: Dict[str, List[Tuple[float, float]]], pending: bool, colour,
          label: str) -> Safe:
    numbers = one_point(axis, {k: pts[0] for k, pts in data.items() if len(pts) == 1}, colour)
    data = {k: pts for k, pts in data.items() if len(pts) > 1}
    if not data and numbers:
        return numbers
    if not data:
        if pending:
            return Safe('<p class="hint chart-empty">The chart appears when the run reports '
                        'its first loss or accuracy.</p>')
        return Safe('<p class="hint chart-empty">No chart: the run reported no loss or '
                    'accuracy.</p>')
    xs = [x for pts in data.values() for x, _ in pts]
    lo_x, hi_x = min(xs), max(xs)
    if axis == "epoch":
        lo_x = min(lo_x, 0.0 if lo_x >= 1 else lo_x)
    loss_vals = [v for k, pts in data.items() if is_loss(k) for _, v in pts]
    other_vals = [v for k, pts in data.items() if not is_loss(k) for _, v in pts]
    loss_lo, loss_hi = _axis_range(loss_vals, 0.0, 0.0)  # from 0 (or below) to the top
    acc_lo, acc_hi = _axis_range(other_vals, 0.0, 1.0)
    x_ticks = ticks(lo_x, hi_x if hi_x > lo_x else lo_x + 1, 6, whole=True)
    hi_x = max(hi_x, x_ticks[-1]) if hi_x > lo_x else lo_x + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, PLOT_H
    height = BOTTOM + 58 + 16 * ((len(data) - 1) // 3)

    def px(x):
        return LEFT + (x - lo_x) / (hi_x - lo_x) * plot_w

    def py(v, left):
        lo, hi = (loss_lo, loss_hi) if left else (acc_lo, acc_hi)
        return TOP + plot_h - (v - lo) / ((hi - lo) or 1) * plot_h

    parts = [render('<svg class="chart" role="img" viewBox="0 0 {w} {h}" width="100%" '
                    'preserveAspectRatio="xMidYMid meet" aria-label="{label}"><rect x="{l}" '
                    'y="{t}" width="{pw}" height="{ph}" fill="#fff" stroke="#999"/>', w=WIDTH,
                    label=label, l=LEFT,
                    t=TOP, pw=plot_w, ph=plot_h, h=height)]
    right = [k for k in data if not is_loss(k)]
    parts.append(_axes(axis, x_ticks, px, py, loss_vals, (loss_lo, loss_hi), other_vals,
                       (acc_lo, acc_hi), "accuracy" if all("acc" in k.lower() for k in right)
                       else "value"))
    for k, (name, pts) in enumerate(sorted(data.items())):
        parts.append(_series(name, pts, colour(name), k, px, py, axis))
    parts.append(Safe("</svg>"))
    return join(parts + [numbers])


def _axes(axis, x_ticks, px, py, loss_vals, loss_range, other_vals, acc_range,
          right_title="accuracy") -> Safe:
    bottom = BOTTOM
    out = []
    for x in x_ticks:
        out.append(render('<line x1="{x:.1f}" y1="{b}" x2="{x:.1f}" y2="{b5}" stroke="#999"/>'
                          '<text class="tick-x" x="{x:.1f}" y="{ty}" font-size="11" '
                          'text-anchor="middle">{v}</text>', x=px(x), b=bottom, b5=bottom + 5,
                          ty=bottom + 17, v=_label(x)))
    out.append(render('<text x="{x}" y="{y}" font-size="12" text-anchor="middle">{axis}'
                      '</text>', x=LEFT + (WIDTH - LEFT - RIGHT) // 2, y=bottom + 32,
                      axis=axis))
    if loss_vals:
        for v in ticks(*loss_range):
            y = py(v, True)
            out.append(render('<line x1="{l5}" y1="{y:.1f}" x2="{r}" y2="{y:.1f}" '
                              'stroke="#eee"/><text class="tick-loss" x="{tx}" y="{ty:.1f}" '
                              'font-size="11" text-anchor="end">{v}</text>', l5=LEFT,
                              r=WIDTH - RIGHT, y=y, tx=LEFT - 6, ty=y + 4, v=_label(v)))
        out.append(render('<text x="14" y="{y}" font-size="12" text-anchor="middle" '
                          'transform="rotate(-90 14 {y})">loss</text>', y=TOP + (bottom - TOP)
                          // 2))
    if other_vals:
        for v in ticks(*acc_range):
            y = py(v, False)
            out.append(render('<line x1="{r}" y1="{y:.1f}" x2="{r5}" y2="{y:.1f}" '
                              'stroke="#999"/><text class="tick-acc" x="{tx}" y="{ty:.1f}" '
                              'font-size="11">{v}</text>', r=WIDTH - RIGHT,
                              r5=WIDTH - RIGHT + 5, y=y, tx=WIDTH - RIGHT + 8, ty=y + 4,
                              v=_label(v)))
        x = WIDTH - 12
        out.append(render('<text x="{x}" y="{y}" font-size="12" text-anchor="middle" '
                          'transform="rotate(90 {x} {y})">{title}</text>', x=x,
                          y=TOP + (bottom - TOP) // 2, title=right_title))
    return join(out)


def _series(name, pts, colour, k, px, py, axis) -> Safe:
    left = is_loss(name)
    out = [render('<polyline class="series" data-series="{name}" fill="none" stroke="{c}" '
                  'stroke-width="2"{dash} points="{pts}"/>', name=name, c=colour,
                  dash=Safe("") if left else Safe(' stroke-dasharray="6 3"'),
                  pts=" ".join("%.1f,%.1f" % (px(x), py(v, left)) for x, v in pts))]
    if len(pts) <= 60:  # dots (with their values on hover) where they stay readable
        out.extend(render('<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{c}"><title>{name}, '
                          '{axis} {at}: {v:.4f}</title></circle>', x=px(x), y=py(v, left),
                          c=colour, name=name, axis=axis, at=_label(x), v=v) for x, v in pts)
    lx, ly = LEFT + 220 * (k % 3), BOTTOM + 54 + 16 * (k // 3)
    short = name if len(name) <= 22 else name[:21] + "…"  # a legend cell is 220 px wide
    out.append(render('<g class="legend"><title>{name}</title><line x1="{x}" y1="{y}" '
                      'x2="{x2}" y2="{y}" stroke="{c}" stroke-width="3"{dash}/><text x="{tx}" '
                      'y="{ty}" font-size="12">{short} ({side} axis)</text></g>', x=lx, y=ly - 4,
                      x2=lx + 22, c=colour, tx=lx + 28, ty=ly, name=name, short=short,
                      side="left" if left else "right",
                      dash=Safe("") if left else Safe(' stroke-dasharray="6 3"')))
    return join(out)
