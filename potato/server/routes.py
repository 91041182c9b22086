"""The annotation server's own routes: login, annotation, and the admin pages.

Training adds its routes (``potato.training.web.api``, ``potato.training.web.agent_routes``) with
``App.route`` the same way.
"""

import hmac
import os
import re
import secrets
import shutil
import tempfile
from urllib.parse import unquote

from potato.labels.annotations import LabelError, check_label, item_record
from potato.schemes import KEEP
from potato.schemes import logic as display_logic
from potato.labels import agreement, export, upstream_output
from potato.project import display
from potato.server import crowd_route, media_route, pages, safety
from potato.server.errors import HTTPError

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
SESSION_TTL_S = 30 * 86400
ADMIN_SESSION_TTL_S = 12 * 3600
USERNAME = re.compile(r"^[A-Za-z0-9_.@+-]{1,64}$")


def add_core_routes(app) -> None:
    _login_routes(app)
    _annotate_routes(app)
    _annotation_api_routes(app)
    _admin_routes(app)
    _export_routes(app)
    media_route.add_media_routes(app)


def _login_routes(app) -> None:
    cfg = app.config

    @app.route("GET", r"/")
    def index(h):  # a crowd worker arrives here by their platform's link (crowd_route)
        if cfg.upstream.crowd is not None and crowd_route.arrive(h, app, start_session):
            return
        h.redirect("/annotate" if h.annotator() else "/login")

    @app.route("POST", r"/")
    def index_confirmed(h):  # "Continue as ..." on crowd_route's question (same origin only)
        if cfg.upstream.crowd is None or not crowd_route.arrive(h, app, start_session,
                                                                 h.form()):
            raise HTTPError(400, "Nothing to do here: open your study link again.")

    @app.route("GET", r"/static/(?P<name>[A-Za-z0-9_.-]+)")
    def static(h, name):
        path = os.path.join(STATIC_DIR, name)
        ext = os.path.splitext(name)[1]
        if ext not in STATIC_TYPES or not os.path.isfile(path):
            raise HTTPError(404, f"No static file {name}.")
        with open(path, "rb") as f:
            h.send(200, f.read(), STATIC_TYPES[ext])

    @app.route("GET", r"/login")
    def login_form(h):
        h.send_html(crowd_route.login_page(cfg) if cfg.upstream.crowd is not None
                    else pages.login_page(cfg))

    @app.route("POST", r"/login")
    def login(h):
        if cfg.upstream.crowd is not None:
            raise crowd_route.refuse_name_login(cfg)
        if "json" in (h.headers.get("Content-Type") or ""):
            username = str(h.json_object().get("username") or "").strip()
            nxt = "/annotate"
        else:
            form = h.form()
            username = (form.get("username") or [""])[0].strip()
            nxt = safety.safe_next((form.get("next") or ["/annotate"])[0], "/annotate")
        if not USERNAME.match(username):
            msg = ("Choose a username of 1 to 64 letters, digits or _ . @ + - characters.")
            if h.wants_json() or "json" in (h.headers.get("Content-Type") or ""):
                raise HTTPError(400, msg)
            h.send_html(pages.login_page(cfg, msg), 400)
            return
        start_session(h, app, username)
        if "json" in (h.headers.get("Content-Type") or ""):
            h.send_json({"ok": True, "username": username})
        else:
            h.redirect(nxt)

    @app.route("POST", r"/logout")
    def logout(h):
        token = h.cookie(app.session_cookie)
        if token:
            app.store.drop_session(token)
        h.set_cookie(app.session_cookie, "", 0, same_site="Lax")
        h.redirect("/login")


def start_session(h, app, username: str) -> None:
    """Log ``username`` (a checked name) in as an annotator: a session cookie, and their
    place at the first item they have not labelled. A new name counts against its client's
    hourly allowance (429)."""
    _count_new_name(h, app, username)
    app.store.ensure_annotator(username)
    # A returning annotator resumes at the first item they have not labelled.
    app.store.set_position(username, app.assignment.first_unlabelled(username))
    token = secrets.token_urlsafe(32)
    app.store.add_session(token, "annotator", username, SESSION_TTL_S)
    h.set_cookie(app.session_cookie, token, SESSION_TTL_S, same_site="Lax")


def _count_new_name(h, app, username: str) -> None:
    """A name never seen before counts against its client's hourly allowance (429): the
    client is the right-most X-Forwarded-For entry behind a trusted proxy, else the socket's
    address (an IPv6 /64 as one)."""
    if not app.new_name_limiter.limit or app.store.has_annotator(username):
        return
    client = h.client_key()
    wait = app.new_name_limiter.retry_after(client)
    if wait:
        raise HTTPError(429, "Too many new annotator names from this address in the last hour "
                             "(%d); log in with a name already used here, or try again in %d "
                             "min." % (app.new_name_limiter.limit, (wait + 59) // 60),
                        {"Retry-After": str(wait)})
    app.new_name_limiter.failed(client)


def _annotate_routes(app) -> None:
    cfg = app.config

    def _position(h, user: str) -> int:
        row = app.store.ensure_annotator(user)
        return row["position"]

    @app.route("GET", r"/annotate", "annotator")
    def annotate(h):
        user = h.annotator()
        queue = app.assignment  # every item, or upstream's per-item / per-user limits
        if h.query.get("resume") == ["1"]:  # "go to the first item I have not labelled"
            app.store.set_position(user, queue.first_unlabelled(user))
            h.redirect("/annotate")
            return
        if h.query.get("item") and cfg.upstream.no_jump:
            raise HTTPError(403, "This project turns off going to an item by its id or number "
                                 "(jumping_to_id_disabled). Move with Previous and Save and "
                                 "next.")
        if h.query.get("item"):  # the jump box: an item's id, or its number
            app.store.set_position(user, _jump(queue, user, h.query["item"][-1]))
            h.redirect("/annotate")
            return
        position = max(0, min(_position(h, user), queue.total(user)))
        item = queue.item_at(user, position)
        total = queue.total(user)
        labels = app.store.labels_of(user, item["id"]) if item else {}
        preds = app.store.item_predictions(item["id"]) if item else {}
        first_open = queue.first_unlabelled(user)
        crowd = cfg.upstream.crowd  # every item of theirs labelled: the platform's code
        finished = crowd.completion(user, app.store.crowd_ids(user)) \
            if crowd is not None and item is None and first_open >= total and total else None
        now = pages.Annotating(user, item, position, total, done=app.store.labelled_count(user),
                               labels=labels, predictions=preds, admin=h.is_admin(),
                               first_unlabelled=first_open, completion=finished)
        h.send_html(pages.annotate_page(cfg, now, max_body=app.annotator_body_bytes),
                    headers=media_route.page_headers(cfg, display.record(item)) if item else None)

    @app.route("POST", r"/annotate", "annotator")
    def annotate_post(h):
        user = h.annotator()
        form = h.form()
        total = app.assignment.total(user)
        try:
            position = int((form.get("position") or ["0"])[0])
        except ValueError:
            raise HTTPError(400, "position must be a number.")
        action = (form.get("action") or ["next"])[0]
        item_id = (form.get("item_id") or [""])[0]
        labels = {}
        if item_id:
            item = app.store.item(item_id)
            if item is None:
                raise HTTPError(400, f"Unknown item {item_id!r}.")
            _assigned(app, user, item_id)
            stored = app.store.labels_of(user, item_id)
            labels = _form_labels(cfg, form, item["text"], back=action == "prev")
            labels = _fitting(cfg, labels, display.record(item), {**stored, **labels})
            labels = _not_prefilled_hidden(cfg, labels, {**stored, **labels},
                                           display.record(item))
            if action != "prev":
                _require(cfg, {**stored, **labels})
            else:  # paging back past an item is not an answer of "nothing marked"
                labels = {k: v for k, v in labels.items() if v != [] or k in stored}
        new_position = position - 1 if action == "prev" else position + 1
        if cfg.upstream.no_jump:  # one step from where the annotator is, never a jump
            here = _position(h, user)
            new_position = max(here - 1, min(new_position, here + 1))
        new_position = max(0, min(new_position, total))
        if item_id:
            app.store.save_labels(user, item_id, labels, new_position)
        else:
            app.store.set_position(user, new_position)
        h.redirect("/annotate")


def _jump(queue, user: str, wanted: str) -> int:
    """The position of the item an annotator asked for in the jump box (an id, or a number
    counted from 1), or an HTTPError that says why there is none."""
    wanted = wanted.strip()[:200]
    reach = queue.reachable(user)
    position = queue.position_of(user, wanted)
    if position is not None:
        return position
    try:
        number = int(wanted) if wanted.isdecimal() else None
    except ValueError:
        number = None
    if number is not None and 1 <= number <= reach:
        return number - 1
    raise HTTPError(404, "There is no item %r among the %d items you can open now: give an "
                         "item's id (as shown above its text) or its number, 1 to %d."
                    % (wanted, reach, reach))


def _form_labels(cfg, form, text: str, back: bool = False) -> dict:
    """The annotate form's values, checked: {scheme: value or None}; schemes the form says
    nothing about are left out (each kind reads its own fields: ``Kind.from_form``), and so,
    paging ``back``, is an empty list the scheme refuses (image_annotation's min_annotations:
    nothing marked is no answer then, and must not keep the annotator on the item)."""
    labels = {}
    for scheme in cfg.schemes:
        values = form.get(f"label:{scheme.name}") or []
        if not values and not form.get(f"present:{scheme.name}"):
            continue
        value = scheme.kind.from_form(values)
        if value is KEEP:
            continue
        if back and value == []:
            try:  # kept where it replaces what was marked (the caller drops it otherwise)
                labels[scheme.name] = check_label(scheme, value, text)
            except LabelError:
                pass
            continue
        try:
            labels[scheme.name] = check_label(scheme, value, text)
        except LabelError as e:
            raise HTTPError(400, str(e))
    return labels


def _fitting(cfg, labels: dict, record: dict, answers: dict) -> dict:
    """``labels`` (checked), or 400 when one does not fit the item's record or the answers it
    will sit beside (``Kind.fits``: process_reward's rewards, one per step of the item's
    trace; span_link's links, between spans that are marked)."""
    for name, value in labels.items():
        scheme = cfg.scheme(name)
        try:
            labels[name] = scheme.kind.fits(value, record, answers) if scheme is not None \
                else value
        except LabelError as e:
            raise HTTPError(400, str(e))
    return labels


def _assigned(app, user: str, item_id: str) -> None:
    """403 for an item this annotator was not given (per-item or per-user limits)."""
    if not app.assignment.may_label(user, item_id):
        raise HTTPError(403, f"item {item_id!r} is not one of yours: this project gives each "
                             f"item to a limited number of annotators (num_annotators_per_item, "
                             f"max_annotations_per_user). Label the items /annotate shows you.")


def _not_prefilled_hidden(cfg, labels: dict, answers: dict, record: dict) -> dict:
    """``labels`` without the values of schemes that display_logic hides (for ``answers``)
    and that only hold what their inputs start with (``Kind.initial``: text_edit's text to
    edit): a hidden box is posted as it was filled, which is no answer."""
    out = {}
    for name, value in labels.items():
        scheme = cfg.scheme(name)
        start = scheme.kind.initial(record) if scheme is not None else None
        if start is None or value != start or display_logic.shown(scheme, answers):
            out[name] = value
    return out


def _require(cfg, labels: dict) -> None:
    """400 when a required scheme (label_requirement: {required: true}) has no value; a scheme
    that display_logic hides for these answers is not required."""
    for scheme in cfg.schemes:
        if scheme.required and labels.get(scheme.name) in (None, []) and \
                display_logic.shown(scheme, labels):
            raise HTTPError(400, f"scheme {scheme.name!r} needs an answer before you move on "
                                 f"(label_requirement: required). Go back and give one.")


def _annotation_api_routes(app) -> None:
    cfg = app.config

    @app.route("POST", r"/api/annotations", "annotator")
    def api_annotate(h):
        user = h.annotator()
        data = h.json_object()
        item_id = data.get("item_id")
        labels = data.get("labels")
        item = app.store.item(item_id) if isinstance(item_id, str) else None
        if item is None:
            raise HTTPError(400, f"item_id {item_id!r} is not an item of this project.")
        if not isinstance(labels, dict) or not labels:
            raise HTTPError(400, 'labels must be an object like {"<scheme>": "<label>"}.')
        _assigned(app, user, item_id)
        clean = {}
        for name, value in labels.items():
            scheme = cfg.scheme(name)
            if scheme is None:
                raise HTTPError(400, f"{name!r} is not an annotation scheme (schemes: "
                                     f"{', '.join(s.name for s in cfg.schemes)}).")
            try:
                clean[name] = check_label(scheme, value, item["text"])
            except LabelError as e:
                raise HTTPError(400, str(e))
        clean = _fitting(cfg, clean, display.record(item),
                         {**app.store.labels_of(user, item_id), **clean})
        app.store.save_labels(user, item_id, clean)
        h.send_json({"ok": True, "item_id": item_id, "labels": app.store.labels_of(user, item_id)})

    @app.route("GET", r"/api/annotations/(?P<item_id>[^/]+)", "annotator")
    def api_my_labels(h, item_id):
        item_id = unquote(item_id)
        if app.store.item(item_id) is None:
            raise HTTPError(404, f"No item {item_id!r}.")
        h.send_json({"item_id": item_id, "labels": app.store.labels_of(h.annotator(), item_id)})


def _upstream_zip(cfg, store) -> bytes:
    """The upstream layout as a zip; 409 when two annotators would share a folder."""
    try:
        return upstream_output.zip_bytes(cfg, store)
    except upstream_output.FolderClash as e:
        raise HTTPError(409, str(e))


def _export_routes(app) -> None:
    """The admin's downloads: the one export (potato.labels.export) and upstream Potato's layout."""
    cfg = app.config

    @app.route("GET", r"/admin/export\.(?P<kind>jsonl|csv)", "admin")
    def admin_export(h, kind):
        rows = (h.query.get("rows") or ["item"])[0]  # as the CLI's default
        if rows not in export.ROW_MODES:
            raise HTTPError(400, "rows must be label (one row per label) or item (one row per "
                                 "item, with the model's predictions), not %s." % ascii(rows[:40]))
        ctype = "application/x-ndjson" if kind == "jsonl" else "text/csv; charset=utf-8"
        # written to a file with no name in the output folder (gone when closed, even if the
        # server is killed), then sent from it: memory stays flat whatever the export's size
        with tempfile.TemporaryFile(dir=cfg.output_dir, prefix=".export-") as f:
            size = export.to_file(f, app.store, cfg, rows, kind)
            f.seek(0)
            h.start_response(200, ctype, size, {
                "Content-Disposition": 'attachment; filename="%s"' % export.filename(
                    cfg, rows, kind)})
            if h.command != "HEAD":
                shutil.copyfileobj(f, h.wfile, 1 << 20)

    @app.route("GET", r"/admin/export-upstream\.zip", "admin")
    def admin_export_upstream(h):
        h.send(200, _upstream_zip(cfg, app.store), "application/zip", {
            "Content-Disposition": 'attachment; filename="%s"'
                                   % export.filename(cfg, "upstream", "zip")})


def _admin_routes(app) -> None:
    cfg = app.config

    @app.route("GET", r"/admin/login")
    def admin_login_form(h):
        nxt = safety.safe_next((h.query.get("next") or ["/admin"])[0], "/admin")
        h.send_html(pages.admin_login_page(cfg, next_url=nxt))

    @app.route("POST", r"/admin/login")
    def admin_login(h):
        form = h.form()
        key = (form.get("key") or [""])[0]
        nxt = safety.safe_next((form.get("next") or ["/admin"])[0], "/admin")
        if not cfg.admin_api_key:
            h.send_html(pages.admin_login_page(cfg, "This project has no admin_api_key; set one "
                                                    "in the config and restart the server.", nxt),
                        401)
            return
        client = h.client_key()  # behind a trusted proxy, its client; an IPv6 /64 as one
        wait = app.login_limiter.retry_after(client)
        if wait:
            raise HTTPError(429, "Too many wrong admin keys from this address; try again in %d "
                                 "s." % wait, {"Retry-After": str(wait)})
        if not hmac.compare_digest(key.encode(), cfg.admin_api_key.encode()):
            app.login_limiter.failed(client)
            h.send_html(pages.admin_login_page(cfg, "That is not the admin key.", nxt), 401)
            return
        app.login_limiter.succeeded(client)
        token = secrets.token_urlsafe(32)
        # The session names the key it was made under: a new admin_api_key ends old sessions.
        app.store.add_session(token, "admin", app.admin_session_name, ADMIN_SESSION_TTL_S)
        h.set_cookie(app.admin_cookie, token, ADMIN_SESSION_TTL_S, same_site="Strict")
        h.redirect(nxt)

    @app.route("POST", r"/admin/logout")
    def admin_logout(h):
        token = h.cookie(app.admin_cookie)
        if token:
            app.store.drop_session(token)
        h.set_cookie(app.admin_cookie, "", 0)
        h.redirect("/admin/login")

    def _stats():
        annotators = [{"name": r["name"], "items": r["items"]}
                      for r in app.store.annotator_stats()]
        if cfg.upstream.crowd is not None:  # what each worker's link carried (crowd_route)
            ids = app.store.all_crowd_ids()
            for a in annotators:
                a["crowd_ids"] = ids.get(a["name"], {})
        return {"items": app.store.item_count(), "annotations": app.store.annotation_count(),
                "annotators": annotators}

    @app.route("GET", r"/admin", "admin")
    def admin_home(h):
        note = ("Debug mode: requests from this machine have admin rights."
                if cfg.debug else "")
        h.send_html(pages.admin_page(cfg, _stats(), note,
                                     export.label_counts(cfg, app.store),
                                     agreement.summary(cfg, app.store)))

    @app.route("GET", r"/admin/api/stats", "admin")
    def admin_stats(h):
        h.send_json(_stats())

    @app.route("GET", r"/admin/api/items/(?P<item_id>[^/]+)", "admin")
    def admin_item(h, item_id):
        rec = item_record(app.store, unquote(item_id))
        if rec is None:
            raise HTTPError(404, f"No item {unquote(item_id)!r} in this project.")
        h.send_json(rec)
