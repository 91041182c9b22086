"""Crowd workers' arrival: upstream's ``login: {type: url_direct}`` (config/crowd.py).

A platform sends each worker to ``/?<id_param>=<their id>&...``; the id is checked here, once
(a user name as /login takes it; for invites, a token the config maps to a user name), the
ids the platform adds are checked and kept, and the worker is logged in as /login would. The
name form is closed in such a project: workers are who their platform's link says.
"""

from __future__ import annotations

import re
from typing import Callable

from potato.config.crowd import NAME, VALUE
from potato.markup import render
from potato.server import pages
from potato.server.errors import HTTPError


def arrive(h, app, start_session: Callable) -> bool:
    """Log in the worker the request's link names and go to /annotate; False when the link
    carries no id (the caller goes on as usual)."""
    crowd = app.config.upstream.crowd
    query = h.query
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
    start_session(h, app, user)
    old = h.cookie(app.session_cookie)
    if old:  # a browser shared by two workers: the link says who this is now
        app.store.drop_session(old)
    app.store.set_crowd_ids(user, ids)
    h.redirect("/annotate")
    return True


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
    """An access-log line with invite tokens hidden (a token lets its holder in)."""
    crowd = cfg.upstream.crowd
    if crowd is None or crowd.provider != "expert":
        return line
    return re.sub(r"([?&]%s=)[^&\s]*" % re.escape(crowd.id_param), r"\1(hidden)", line)
