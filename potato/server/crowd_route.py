"""Crowd workers' arrival: upstream's ``login: {type: url_direct}`` (config/crowd.py).

A platform sends each worker to ``/?<id_param>=<their id>&...``; the id is checked here, once
(a user name as /login takes it; for invites, a token the config maps to a user name), the
ids the platform adds are checked and kept, and the worker is logged in as /login would. The
name form is closed in such a project: workers are who their platform's link says.
"""

from __future__ import annotations

import re
from typing import Callable
from urllib.parse import parse_qsl, urlencode

from potato.config.crowd import NAME, VALUE
from potato.markup import join, render
from potato.server import pages
from potato.server.errors import HTTPError


def arrive(h, app, start_session: Callable, query=None) -> bool:
    """Log in the worker the request's link names and go to /annotate; False when the link
    carries no id (the caller goes on as usual). A browser already working as another
    annotator is asked first (``confirm``): a page on another site could otherwise send it
    to a link with someone else's id and credit its work to them. ``query``: the link's
    parameters, given when the annotator confirmed (a same-origin POST)."""
    crowd = app.config.upstream.crowd
    if h.command != "GET" and query is None:
        return False  # a HEAD (a link preview, a scanner) logs no one in
    confirmed = query is not None
    query = h.query if query is None else query
    given = query.get(crowd.id_param)
    if not given:
        return False
    again = f"Open the study again from {crowd.label}; if this happens again, tell the researcher."
    if len(given) > 1:
        raise HTTPError(400, f"This link carries {crowd.id_param} {len(given)} times, and "
                             f"names no single worker. {again}")
    if not NAME.fullmatch(given[0]):
        raise HTTPError(400, f"This link's {crowd.id_param} is not an id this project takes "
                             f"(1 to 64 letters, digits or _ . @ + -). {again}")
    user = crowd.worker(given[0])
    if user is None:
        raise HTTPError(403, f"This link's {crowd.id_param} is not an invitation to this "
                             f"project. Ask whoever invited you for your own link.")
    ids = {}
    for param, name in crowd.capture.items():
        values = query.get(param)
        if not values:
            continue
        if len(values) > 1 or not VALUE.fullmatch(values[0]):
            raise HTTPError(400, f"This link's {param} is not a value this project keeps "
                                 f"(once, at most 200 printable characters, no spaces). {again}")
        ids[name] = values[0]
    current = h.annotator()
    if current is not None and current != user and not confirmed:
        h.send_html(_confirm(app.config, current, user, query))
        return True
    start_session(h, app, user)
    old = h.cookie(app.session_cookie)
    if old:  # a browser shared by two workers: the link says who this is now
        app.store.drop_session(old)
    app.store.set_crowd_ids(user, ids)
    h.redirect("/annotate")
    return True


def _confirm(cfg, current: str, user: str, query) -> str:
    """The question a browser working as ``current`` gets for a link naming ``user``."""
    shown = user if cfg.upstream.crowd.provider != "expert" else "the invited annotator"
    fields = join(render('<input type="hidden" name="{k}" value="{v}">', k=k, v=v)
                  for k, values in query.items() for v in values[:1])
    return pages.layout("Switch worker?", render(
        '<h1>Switch worker?</h1><div class="card" id="crowd-switch"><p>This browser is '
        'working as <b>{cur}</b>, and the link it was sent to is for <b>{new}</b>.</p>'
        '<form method="post" action="/">{f}<button type="submit">Continue as {new}</button> '
        '<a href="/annotate">Stay as {cur}</a></form></div>', cur=current, new=shown, f=fields),
        cfg)


def login_page(cfg) -> str:
    """/login in a crowd project: no name form, but how to get in."""
    crowd = cfg.upstream.crowd
    how = ("the invitation link you were sent" if crowd.provider == "expert" else
           f"the link {crowd.label} gives you (it carries your id as {crowd.id_param})")
    return pages.layout("Log in", render(
        '<h1>{task}</h1><p class="card" id="crowd-login">This study is open to its '
        'participants by {how}. Open that link to start, or to come back to your items.</p>',
        task=cfg.annotation_task_name, how=how), cfg)


def refuse_name_login(cfg) -> HTTPError:
    crowd = cfg.upstream.crowd
    return HTTPError(403, f"This project's annotators log in by their {crowd.label} link "
                          f"(/?{crowd.id_param}=...), not by a user name. Open that link.")


def unlogged(cfg, line: str) -> str:
    """A log line with invite tokens hidden (a token lets its holder in): every query in it
    is read as the server reads it (names percent-decoded: ``?%69nvite=`` is ``invite``), and
    one that carries the id parameter is written again with its value hidden."""
    crowd = cfg.upstream.crowd
    if crowd is None or crowd.provider != "expert":
        return line

    def hide(m):
        pairs = parse_qsl(m.group(2), keep_blank_values=True)
        if not any(k == crowd.id_param for k, _ in pairs):
            return m.group(0)
        return m.group(1) + urlencode([(k, "(hidden)" if k == crowd.id_param else v)
                                       for k, v in pairs])
    return re.sub(r"(\?)([^\s\"]*)", hide, line)
