"""The Training page's live card: the current run, drawn on the server, updated in place.

The card is one server-rendered fragment with named parts (``data-part``: the head, the status
line, the progress bar, the error, the chart, the cancel button). Without JavaScript it is a
plain part of the page (reload to see more). With ``static/training.js`` the page asks
``GET /admin/training/api/fragments?run=ID&log_from=N`` every second and, for the same run,
replaces only the parts whose HTML changed and *appends* to the log the bytes written after
offset ``N`` (``data-log-end``): a selection in the log survives an update, the log keeps its
scroll position (it follows the tail only when it was scrolled to the bottom), and only the
status line is ``aria-live`` (a screen reader hears the status change, not every log line).

A run's page (``/admin/training/runs/ID``) is the same live view of one run: while the run is
queued or running, its parts (``run_parts``: status, step, progress bar, started, ran on, chart,
cancel) carry ``data-part`` and its log ``data-log-end``; ``static/training.js`` asks
``GET /admin/training/api/fragments/runs/ID?log_from=N`` every second, patches the parts and
appends to the log as above, and reloads the page once the run has ended (the held-out report,
write-back and Run again appear). Without JavaScript the page is complete as it was rendered.
"""

import os
from typing import Any, Dict, Optional, Tuple

from potato.markup import Safe, render
from potato.training.web.chart import chart_svg
from potato.training.web.pages import cancel_button, clock, number, status_badge
from potato.training.core.runs import TERMINAL
from potato.training.core.view import RunView

TAIL_LINES = 15  # what the card shows of the log when it is drawn afresh
MORE_MAX = 64 << 10  # what one update appends at most (more: the card starts the log again)


def duration_text(seconds: float) -> str:
    s = int(round(seconds))
    if s >= 3600:
        return "%dh %02dm" % (s // 3600, s % 3600 // 60)
    return "%dm %02ds" % (s // 60, s % 60) if s >= 60 else "%ds" % s


def progress_bar(view: RunView) -> Safe:
    """The bar, ``current/total unit`` and the ETA of the phase (training steps, then
    predictions), smoothed by the server (``eta.py``)."""
    progress = view.progress if isinstance(view.progress, dict) else {}
    total = number(progress.get("total"), True)
    current = number(progress.get("current"), True) or 0
    if not total or view.status != "running":
        return Safe("")
    eta = number(progress.get("eta_s"))
    unit = str(progress.get("unit") or "")[:40]
    return render('<p><progress max="{total}" value="{cur}" aria-label="Run progress"></progress>'
                  ' {cur}/{total} {unit}{eta}</p>', total=total, cur=min(current, total),
                  unit=unit, eta=" · ETA %s%s" % (duration_text(eta), " (predictions)" if
                                                  unit == "prediction" else "")
                  if eta is not None else "")


def live_fragment(view: Optional[RunView], log_tail: str, log_end: int = 0) -> Safe:
    """The card: ``log_tail`` is the log's last lines, ``log_end`` the byte offset they end at
    (the page asks for what comes after it)."""
    if view is None:
        return Safe('<p class="hint">No run yet. Start one above.</p>')
    error = (render('<p class="error">{e}</p>', e=view.error)
             if view.status == "error" and view.error else Safe(""))
    warnings = [str(w) for w in view.warnings]
    warned = render(' <span class="status status-warning" title="{t}">({n} warning{s})</span>',
                    t="\n".join(warnings), n=len(warnings),
                    s="" if len(warnings) == 1 else "s") if warnings else ""
    return render("""<div class="live" data-run="{id}" data-status="{status}">
<p data-part="head"><a href="/admin/training/runs/{id}"><b>{id}</b></a> · {trainer} on {schemas} ·
 runs on <b class="ran-on">{ran_on}</b></p>
<p data-part="status" id="live-status-line" role="status" aria-live="polite">Status: <span
 class="status status-{status}" id="live-status">{status}</span>{warned}
 · <span id="live-step">{step}</span></p>
<div data-part="bar">{bar}</div><div data-part="error">{error}</div>
<div class="chart-box" data-part="chart">{chart}</div>
<details open><summary>Run log (last lines)</summary><pre class="log" id="live-log"
 data-log-end="{end}">{log}</pre></details>
<noscript><p class="hint">This card does not update without JavaScript: reload the page to
 see the run's progress.</p></noscript>
<div data-part="cancel">{cancel}</div>
</div>""", id=view.run_id, trainer=view.trainer,
                  schemas=", ".join(map(str, view.schemas)),
                  ran_on=view.ran_on or view.backend, status=view.status,
                  step=view.step or "", bar=progress_bar(view), error=error,
                  warned=warned, end=log_end,
                  chart=chart_svg(view.history, pending=view.status not in TERMINAL),
                  log=log_tail, cancel=cancel_button(view))


def log_tail(path: str, lines: int = TAIL_LINES, max_bytes: int = 64 << 10) -> Tuple[str, int]:
    """(the log's last ``lines`` whole lines, each ending in a newline; the offset they end at)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - max_bytes)
            f.seek(start)
            data = f.read(size - start)
    except OSError:
        return "", 0
    data = data[:data.rfind(b"\n") + 1]  # a line being written comes with the next update
    end = start + len(data)
    if start:
        data = data[data.find(b"\n") + 1:]
    text = data.decode("utf-8", "replace").splitlines(True)[-lines:]
    return "".join(text), end


def log_since(path: str, offset: int) -> Dict[str, Any]:
    """What the log gained after ``offset``: ``{"text", "end"}``, with ``"reset": True`` when
    the card must start its log again (the log was cut and rewritten, or too much came at
    once: then ``text`` is the tail)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if offset <= size and size - offset <= MORE_MAX:
                f.seek(offset)
                data = f.read(size - offset)
                data = data[:data.rfind(b"\n") + 1]
                return {"text": data.decode("utf-8", "replace"), "end": offset + len(data)}
    except OSError:
        return {"text": "", "end": 0, "reset": True}
    text, end = log_tail(path)
    return {"text": text, "end": end, "reset": True}


def fragments(live_view: Optional[RunView], log_path: Optional[str], query) -> Dict:
    """The live card's update for ``GET .../fragments``: the card, and the log's new part when
    the page shows the same run (``?run=ID&log_from=N``), else the log's tail."""
    out: Dict[str, Any] = {"active": bool(live_view and not live_view.terminal)}
    if live_view is None or log_path is None:
        out["live"] = live_fragment(None, "")
        return out
    tail, end = log_tail(log_path)
    out["live"] = live_fragment(live_view, tail, end)
    shown = (query.get("run") or [""])[0]
    offset = log_offset(query)
    if shown == live_view.run_id and offset is not None:
        out["log"] = log_since(log_path, offset)
    return out


def run_parts(view: RunView) -> Dict[str, Safe]:
    """The parts of a run's page that change while it runs (one renderer for the page and its
    updates)."""
    return {"status": status_badge(view), "step": render("{s}", s=view.step or ""),
            "bar": progress_bar(view), "started": render("{t}", t=clock(view.started_at)),
            "ran_on": render("{r}", r=view.ran_on or view.backend),
            "chart": chart_svg(view.history, pending=view.status not in TERMINAL),
            "cancel": cancel_button(view)}


def run_fragments(view: RunView, log_path: str, query) -> Dict[str, Any]:
    """A run page's update for ``GET .../fragments/runs/ID``: its parts, whether it has ended
    (the page then reloads), and with ``?log_from=N`` what its log gained after byte N."""
    out: Dict[str, Any] = {"run_id": view.run_id, "status": view.status,
                           "terminal": view.status in TERMINAL, "parts": run_parts(view)}
    offset = log_offset(query)
    if offset is not None:
        out["log"] = log_since(log_path, offset)
    return out


def log_offset(query) -> Optional[int]:
    """``?log_from=N`` as a byte offset (None when absent or empty); ValueError with the
    sentence for anything but 1 to 15 ASCII digits (``str.isdigit`` takes "²", which ``int``
    refuses)."""
    raw = (query.get("log_from") or [""])[0]
    if raw == "":
        return None
    if len(raw) > 15 or not all("0" <= ch <= "9" for ch in raw):
        raise ValueError("log_from must be a byte offset in the run's log (a whole number of "
                         "at most 15 digits), not %r; leave it out for the log's tail."
                         % raw[:20])
    return int(raw)
