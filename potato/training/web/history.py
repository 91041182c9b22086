"""The runs page (``/admin/training/runs``): every run, filtered and sorted by query params
(so it works without JavaScript), each with a checkbox that picks it for the compare page.

The query is checked once, here (``parse_query``): a value that does not fit is a 400 that
names the param, what it got and what it takes."""

import datetime
import time
import unicodedata
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional
from urllib.parse import urlencode

from potato.markup import Safe, join, render
from potato.server.errors import HTTPError
from potato.server.pages import layout
from potato.training.web import pages
from potato.training.core.runs import RequestError
from potato.training.core.view import RunView

STATUSES = ("queued", "running", "success", "error", "cancelled")
# what runs sort by, in words
SORTS = {"created": "date queued", "duration": "duration", "score": "held-out score",
         "trainer": "trainer", "status": "status", "backend": "backend", "name": "name"}
LIMIT = 1000
TEXT_MAX = 100


@dataclass
class RunQuery:
    status: str = ""
    trainer: str = ""
    backend: str = ""
    since: str = ""         # YYYY-MM-DD, queued on or after that day (local time)
    until: str = ""         # YYYY-MM-DD, queued on or before that day
    min_score: Optional[float] = None
    sort: str = "created"
    order: str = "desc"


def _day(name: str, value: str) -> float:
    try:
        return time.mktime(datetime.datetime.strptime(value, "%Y-%m-%d").timetuple())
    except ValueError:
        raise RequestError(400, "%s=%s is not a date; give it as YYYY-MM-DD, for example "
                                "2026-03-01." % (name, value[:TEXT_MAX]))


def parse_query(query: Dict[str, List[str]]) -> RunQuery:
    """The runs page's query params as a RunQuery; RequestError(400) for one that does not
    fit. Unknown params are ignored (a bookmarked URL keeps working)."""
    def one(name):
        value = (query.get(name) or [""])[-1].strip()
        if len(value) > TEXT_MAX:
            raise RequestError(400, "%s is %d characters long; at most %d fit." % (
                name, len(value), TEXT_MAX))
        hidden = [c for c in value if unicodedata.category(c) in ("Cc", "Cf")]
        if hidden:  # never echoed into the page: said by code point
            raise RequestError(400, "%s holds a control or format character (U+%04X); remove "
                                    "it, or use the filter form." % (name, ord(hidden[0])))
        return value

    q = RunQuery(status=one("status"), trainer=one("trainer"), backend=one("backend"),
                 since=one("since"), until=one("until"), sort=one("sort") or "created",
                 order=one("order") or "desc")
    if q.status and q.status not in STATUSES:
        raise RequestError(400, "status=%s is not a run status; it takes %s." % (
            q.status, ", ".join(STATUSES)))
    if q.sort not in SORTS:
        raise RequestError(400, "sort=%s is not something runs sort by; it takes %s." % (
            q.sort, ", ".join(SORTS)))
    if q.order not in ("asc", "desc"):
        raise RequestError(400, "order=%s: it takes asc or desc." % q.order)
    for name in ("since", "until"):
        if getattr(q, name):
            _day(name, getattr(q, name))
    score = one("min_score")
    if score:
        try:
            q.min_score = float(score)
        except ValueError:
            q.min_score = -1.0
        if not 0.0 <= q.min_score <= 1.0:
            raise RequestError(400, "min_score=%s: it takes a number from 0 to 1 (the held-out "
                                    "macro-F1 a run must reach)." % score)
    return q


def score(view: RunView) -> Optional[float]:
    """A run's held-out score for sorting and filtering: macro-F1 (entity micro-F1 for spans);
    None for a run without one (numbers-only schemes are scored by MAE, not compared here)."""
    return view.holdout.f1 if view.holdout is not None else None


def select_runs(manager, q: RunQuery) -> List[RunView]:
    """The runs that match ``q`` as views, in its order (at most LIMIT)."""
    since = _day("since", q.since) if q.since else None
    until = _day("until", q.until) + 86400 if q.until else None
    views = [RunView.from_run(r) for r in manager.runs.find(
        LIMIT, since, until, status=q.status, trainer=q.trainer, backend=q.backend)]
    if q.min_score is not None:
        views = [v for v in views if (score(v) or 0.0) >= q.min_score]
    key = {"created": lambda v: v.created_at or 0.0,
           "duration": lambda v: v.duration_s if v.duration_s is not None else -1.0,
           "score": lambda v: score(v) if score(v) is not None else -1.0,
           "name": lambda v: (v.name or "").lower(),
           "trainer": lambda v: str(v.trainer), "status": lambda v: str(v.status),
           "backend": lambda v: str(v.backend)}[q.sort]
    return sorted(views, key=key, reverse=q.order == "desc")


def _options(name: str, label: str, choices: List[str], chosen: str) -> Safe:
    opts = join(render('<option value="{v}"{sel}>{v}</option>', v=c,
                       sel=Safe(" selected") if c == chosen else "") for c in choices)
    return render('<div><label for="f-{name}">{label}</label><select id="f-{name}" '
                  'name="{name}"><option value="">any</option>{opts}</select></div>',
                  name=name, label=label, opts=opts)


def filter_form(q: RunQuery, trainers: List[str], backends: List[str]) -> Safe:
    """The filter and sort form: a GET to this page, so it works without JavaScript."""
    sorts = join(render('<option value="{k}"{sel}>{w}</option>', k=k, w=w,
                        sel=Safe(" selected") if k == q.sort else "") for k, w in SORTS.items())
    return render(
        '<form method="get" action="/admin/training/runs" id="runs-filter" class="row">'
        '{status}{trainer}{backend}'
        '<div><label for="f-since">Queued from</label><input type="date" id="f-since" '
        'name="since" value="{since}"></div>'
        '<div><label for="f-until">to</label><input type="date" id="f-until" name="until" '
        'value="{until}"></div>'
        '<div><label for="f-min-score">Held-out score at least</label><input id="f-min-score" '
        'name="min_score" inputmode="decimal" size="5" value="{score}"></div>'
        '<div><label for="f-sort">Sort by</label><select id="f-sort" name="sort">{sorts}'
        '</select></div><div><label for="f-order">Order</label><select id="f-order" '
        'name="order"><option value="desc"{desc}>largest / newest first</option>'
        '<option value="asc"{asc}>smallest / oldest first</option></select></div>'
        '<button type="submit" class="secondary" id="apply-filter">Show</button> '
        '<a href="/admin/training/runs">clear</a></form>',
        status=_options("status", "Status", list(STATUSES), q.status),
        trainer=_options("trainer", "Trainer", trainers, q.trainer),
        backend=_options("backend", "Backend", backends, q.backend), since=q.since,
        until=q.until, score="" if q.min_score is None else "%g" % q.min_score, sorts=sorts,
        desc=Safe(" selected") if q.order == "desc" else "",
        asc=Safe(" selected") if q.order == "asc" else "")


def query_string(q: RunQuery) -> str:
    """``q`` as the runs page's query string (the values that differ from the defaults): what
    the page's live updates ask for, so they show the rows the page shows."""
    plain = RunQuery()
    return urlencode([(k, "%g" % v if isinstance(v, float) else v)
                      for k, v in asdict(q).items() if v != getattr(plain, k)])


def list_rows(views: List[RunView]) -> Safe:
    """The runs page's rows (one renderer for the page and its live updates)."""
    return pages.runs_rows(views, pick=True) if views else render(
        '<tr><td colspan="{n}">No run matches these filters.</td></tr>',
        n=len(pages.RUNS_HEAD) + 1)


def heading(views: List[RunView]) -> str:
    return "%d run%s" % (len(views), "" if len(views) == 1 else "s")


def runs_page(cfg, q: RunQuery, views: List[RunView], trainers: List[str],
              backends: List[str], message: str = "") -> str:
    head = join(render('<th scope="col">{h}</th>', h=h) for h in ("Compare",) + pages.RUNS_HEAD)
    rows = list_rows(views)
    more = render('<p class="hint">Showing the newest {n} runs that match; narrow the filters '
                  'to see older ones.</p>', n=LIMIT) if len(views) >= LIMIT else Safe("")
    error = render('<p class="error" role="alert" id="message">{m}</p>', m=message) \
        if message else Safe("")
    body = render(
        '<p><a href="/admin/training">&larr; Training</a></p><h1>Runs</h1>{error}'
        '<section class="card" aria-labelledby="filter-h"><h2 id="filter-h">Filter and sort'
        '</h2>{form}</section>'
        '<section class="card" aria-labelledby="list-h"><h2 id="list-h">{heading}</h2>'
        '<form method="get" action="/admin/training/compare" id="compare-form">'
        '<p class="hint">Tick two or more runs, then compare their params and scores side by '
        'side.</p><button type="submit" class="primary" id="compare-runs">Compare the ticked '
        'runs</button></form>{more}'
        '<div class="table-wrap"><table id="runs-table"><thead><tr>{head}</tr></thead>'
        '<tbody data-query="{query}" id="runs-list">{rows}</tbody></table></div></section>'
        '<noscript><p class="hint">Without JavaScript this list does not update: reload the '
        'page to see new runs.</p></noscript>',
        error=error, form=filter_form(q, trainers, backends), heading=heading(views),
        more=more, head=head, rows=rows, query=query_string(q))
    return layout("Runs", body, cfg, admin=True,
                  scripts='<script src="/static/training.js"></script>')


def add_routes(app, manager) -> None:
    @app.route("GET", r"/admin/training/runs", "admin")
    def runs_list(h):
        trainers, backends = manager.runs.distinct("trainer"), manager.runs.distinct("backend")
        try:
            q = parse_query(h.query)
        except RequestError as e:  # said above the table of every run
            h.send_html(runs_page(manager.cfg, RunQuery(), select_runs(
                manager, RunQuery()), trainers, backends, e.message), e.status)
            return
        h.send_html(runs_page(manager.cfg, q, select_runs(manager, q), trainers,
                              backends))

    @app.route("GET", r"/admin/training/api/fragments/runs", "admin")
    def runs_fragment(h):
        """The runs page's live update: its rows and heading for the same query."""
        try:
            q = parse_query(h.query)
        except RequestError as e:
            raise HTTPError(e.status, e.message)
        views = select_runs(manager, q)
        h.send_json({"rows": list_rows(views), "heading": heading(views)})
