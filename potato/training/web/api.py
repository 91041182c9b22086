"""The admin training API (JSON, ``X-API-Key`` or an admin session), added to the server."""

import os
import time
from typing import Optional
from urllib.parse import unquote

from potato.markup import join, render
from potato.server.errors import HTTPError
from potato.training.core import fit, runlog
from potato.training.web import compare, history, learning, pages, run_actions
from potato.training.hub import model_files
from potato.training.hub import routes as publish_api
from potato.training.web import live as live_card
from potato.training.lifecycle import in_use, reload, retention
from potato.training.remote import trainers
from potato.training.backends import check_backend
from potato.training.lifecycle.queue import Manager, RequestError
from potato.training.core.runs import Run
from potato.training.core.view import RunView

PREFIX = "/admin/training/api"
LIVE_LOG_LINES, LIVE_LOG_BYTES = 100000, 256 << 10  # what a live run page shows of its log


def backend_list(manager: Manager, for_page: bool = False):
    """The backends as the API lists them; ``for_page`` adds what the Training page needs to
    know of each kind (whether it runs on this server)."""
    default = manager.cfg.model_training.backend
    out = []
    for name, b in manager.backends.items():
        row = {"name": name, "type": b.type, "host": b.host, "label": b.label,
               "description": b.bcfg.description, "default": name == default}
        if for_page:
            row["on_server"] = b.on_server
        out.append(row)
    return out


def trainer_list_data(manager: Manager):
    """Trainers with their params, the packages each lacks in the server's Python, and why
    it does not fit the project (``unfit``: "" when it fits, fit.py)."""
    out = []
    unfit = fit.reasons(manager.cfg, manager.store)
    for name, info in trainers.all_trainers().items():
        d = info.as_dict()
        d["missing_packages"] = info.missing_packages()
        d["unfit"] = unfit.get(name, "")
        out.append(d)
    return out


def annotate_only_schemes(cfg):
    """The config's schemes no trainer takes (free text), each with the sentence why."""
    return [{"scheme": s.name, "type": s.annotation_type,
             "reason": trainers.annotate_only(s.annotation_type)}
            for s in cfg.schemes if trainers.annotate_only(s.annotation_type)]


def read_log(manager: Manager, run_id: str, last: int = 0) -> str:
    """The run log's tail for a page (``last`` lines, or its last 256 KB)."""
    return runlog.read(manager.paths(run_id).log, last)


def live_run(manager: Manager):
    """The run the live view shows: the running one, else the next queued, else the latest."""
    for status in ("running", "queued"):
        runs = manager.runs.with_status(status)
        if runs:
            return runs[0]
    latest = manager.runs.list(limit=1)
    return latest[0] if latest else None


def model_location(run: Run) -> str:
    if run.pruned_at:  # said for a failed run's partial files too
        return "deleted on %s: %s" % (time.strftime("%Y-%m-%d %H:%M", time.localtime(
            run.pruned_at)), run.pruned_reason or "")
    if run.status != "success":
        return "none yet" if run.status in ("queued", "running") else "none (the run failed)"
    return run.artifact_uri or "not kept"


def add_routes(app, manager: Manager, on_disk=None) -> None:
    """The admin API and pages; ``on_disk`` (a reload.ConfigOnDisk): the config file's notice
    and Reload config."""
    def get_run(run_id: str) -> Run:
        run = manager.runs.get(run_id)
        if run is None:
            raise HTTPError(404, "No run %s." % run_id)
        return run

    _api_routes(app, manager, get_run)
    pages_of = {}  # the run page, for the publish form's refusals
    publisher = publish_api.add_routes(app, manager, PREFIX, get_run,
                                       lambda *a, **k: pages_of["run"](*a, **k))
    _page_routes(app, manager, get_run, on_disk)
    if on_disk is not None:
        reload.add_routes(app, on_disk, PREFIX)
    history.add_routes(app, manager)
    compare.add_routes(app, manager)
    pages_of["run"] = _run_page_routes(app, manager, get_run, publisher)


def _api_routes(app, manager: Manager, get_run) -> None:
    @app.route("POST", PREFIX + r"/runs", "admin")
    def create(h):
        body = h.json_object()
        unknown = sorted(set(body) - {"trainer", "schemas", "backend", "params"})
        if unknown:
            raise HTTPError(400, "Unknown field(s) %s; a run request has trainer, schemas, "
                                 "backend and params." % ", ".join(unknown))
        try:
            run = manager.submit(body.get("trainer"), body.get("schemas"), body.get("backend"),
                                 body.get("params"))
        except RequestError as e:
            raise HTTPError(e.status, e.message)
        h.send_json({"run_id": run.run_id, "status": run.status}, 202)

    @app.route("GET", PREFIX + r"/runs", "admin")
    def list_runs(h):
        h.send_json({"runs": [RunView.from_run(r).as_dict() for r in manager.runs.list()]})

    @app.route("GET", PREFIX + r"/runs/(?P<run_id>[A-Za-z0-9_-]+)", "admin")
    def one(h, run_id):
        h.send_json(RunView.from_run(get_run(run_id)).as_dict())

    @app.route("GET", PREFIX + r"/runs/(?P<run_id>[A-Za-z0-9_-]+)/log", "admin")
    def run_log(h, run_id):
        get_run(run_id)
        path = manager.paths(run_id).log
        size = os.path.getsize(path) if os.path.exists(path) else 0
        h.send_file(path, 0, size, "text/plain; charset=utf-8") if size else h.send(
            200, b"", "text/plain; charset=utf-8")

    @app.route("POST", PREFIX + r"/runs/(?P<run_id>[A-Za-z0-9_-]+)/cancel", "admin")
    def cancel(h, run_id):
        get_run(run_id)
        h.send_json(RunView.from_run(manager.cancel(run_id)).as_dict())

    @app.route("POST", PREFIX + r"/runs/(?P<run_id>[A-Za-z0-9_-]+)/use", "admin")
    def use(h, run_id):
        get_run(run_id)
        try:
            switched = manager.use(run_id)
        except RequestError as e:
            raise HTTPError(e.status, e.message)
        h.send_json(dict(RunView.from_run(get_run(run_id)).as_dict(), switched=switched))

    @app.route("POST", PREFIX + r"/runs/(?P<run_id>[A-Za-z0-9_-]+)/(?P<action>pin|unpin)",
               "admin")
    def pin(h, run_id, action):
        get_run(run_id)
        try:
            run = (in_use.pin if action == "pin" else in_use.unpin)(manager, run_id)
        except RequestError as e:
            raise HTTPError(e.status, e.message)
        h.send_json(RunView.from_run(run).as_dict())

    @app.route("GET", PREFIX + r"/backends", "admin")
    def backends(h):
        h.send_json({"backends": backend_list(manager)})

    @app.route("POST", PREFIX + r"/backends/(?P<name>[^/]+)/check", "admin")
    def check(h, name):
        name = unquote(name)
        backend = manager.backends.get(name)
        if backend is None:
            raise HTTPError(404, "No backend %s. Configured: %s." % (
                name, ", ".join(manager.backends)))
        body = h.json_object() if h.headers.get("Content-Length", "0") != "0" else {}
        unknown = sorted(set(body) - {"trainer", "params"})
        trainer, params = body.get("trainer"), body.get("params")
        if unknown or not isinstance(trainer, (str, type(None))) or not isinstance(
                params, (dict, type(None))):
            raise HTTPError(400, "A check takes an optional JSON object {trainer, params} (a "
                                 "trainer name and its params), to resolve the trainer's model "
                                 "where runs execute.")
        h.send_json(check_backend(backend, trainer, params, manager.store))

    @app.route("GET", PREFIX + r"/trainers", "admin")
    def trainer_list(h):
        h.send_json({"trainers": trainer_list_data(manager),
                     "annotate_only": annotate_only_schemes(manager.cfg)})



def form_memory(manager: Manager, trainer_names, again: Optional[Run] = None):
    """What the Training form starts with: each trainer's params from its newest run an admin
    asked for, and the backend and trainer of the newest such run (``last``: its id); with
    ``again``, that run's trainer, backend, schemes and params."""
    remembered = {}
    for name in trainer_names:
        last = manager.runs.last_by_trainer(name)
        if last is not None:
            remembered[name] = (last.run_id, run_actions.form_values(last))
    if again is None:  # the backend and trainer of the last run an admin started
        last = manager.runs.last_asked()
        if last is None:
            return {"remembered": remembered}
        return {"remembered": remembered, "trainer": last.trainer, "backend": last.backend,
                "last": last.run_id}
    remembered[again.trainer] = (again.run_id, run_actions.form_values(again))
    return {"remembered": remembered, "trainer": again.trainer, "backend": again.backend,
            "schemas": list(again.schemas),
            "notice": "Filled in from run %s: press Start run to run it again, or change "
                      "something first." % again.run_id}


def _page_routes(app, manager: Manager, get_run, on_disk) -> None:
    def page(h, message="", status=200, again=None):
        runs = [RunView.from_run(r) for r in manager.runs.list()]
        live = live_run(manager)
        tail, end = live_card.log_tail(manager.paths(live.run_id).log) if live else ("", 0)
        trainers_data = trainer_list_data(manager)
        h.send_html(pages.training_page(
            manager.cfg, backend_list(manager, for_page=True), trainers_data, runs,
            live_card.live_fragment(RunView.from_run(live) if live else None, tail, end),
            message, reload.page_notice(on_disk, h.query),
            form_memory(manager, [t["name"] for t in trainers_data], again),
            str(learning.card(learning.status(manager)))), status)

    @app.route("GET", r"/admin/training", "admin")
    def training_page(h):
        again = (h.query.get("again") or [""])[0]
        page(h, again=get_run(again) if again else None)

    @app.route("POST", r"/admin/training/start", "admin")
    def start_form(h):
        form = h.form()
        params = {k[len("param:"):]: v[-1] for k, v in form.items()
                  if k.startswith("param:") and v and v[-1].strip() != ""}
        try:
            run = manager.submit((form.get("trainer") or [None])[0], form.get("schemas") or [],
                                 (form.get("backend") or [None])[0], params)
        except RequestError as e:
            page(h, e.message, e.status)
            return
        h.redirect("/admin/training/runs/%s" % run.run_id)


    @app.route("GET", r"/admin/training/runs/(?P<run_id>[A-Za-z0-9_-]+)/model\.tar", "admin")
    def model_archive(h, run_id):
        run = get_run(run_id)
        with manager.holds.hold(run_id):  # retention leaves the files until it is sent
            archive = model_files.Archive(manager.paths(run_id).artifacts, "%s-model" % run_id) \
                if run.status == "success" else None
            if archive is None or not archive.members:
                raise HTTPError(404, "Run %s has no model files on this server (%s)." % (
                    run_id, model_location(run)))
            h.send_stream("application/x-tar", model_files.archive_name(run_id),
                          model_files.writer(archive, run_id, h), archive.size)

    @app.route("GET", PREFIX + r"/fragments", "admin")
    def fragments(h):
        try:
            live_card.log_offset(h.query)  # checked here, before anything is read
        except ValueError as e:
            raise HTTPError(400, str(e))
        live = live_run(manager)
        out = live_card.fragments(RunView.from_run(live) if live else None,
                                  manager.paths(live.run_id).log if live else None, h.query)
        out["runs"] = pages.runs_rows([RunView.from_run(r) for r in manager.runs.list()])
        out["config"] = on_disk.notice() if on_disk is not None else ""
        h.send_json(out)

    @app.route("GET", PREFIX + r"/fragments/runs/(?P<run_id>[A-Za-z0-9_-]+)", "admin")
    def run_fragments(h, run_id):
        try:
            live_card.log_offset(h.query)
        except ValueError as e:
            raise HTTPError(400, str(e))
        h.send_json(live_card.run_fragments(RunView.from_run(get_run(run_id)),
                                            manager.paths(run_id).log, h.query))

    @app.route("GET", PREFIX + r"/auto_retrain", "admin")
    def auto(h):
        h.send_json(manager.auto_status)

    @app.route("GET", PREFIX + r"/active_learning", "admin")
    def active_learning(h):
        h.send_json(learning.status(manager))


def _run_page_routes(app, manager: Manager, get_run, publisher):
    """A run's page, and its Use, Pin and Unpin buttons (form posts)."""

    def show_run(h, run_id, message="", ok=True, status=200, typed=None):
        run = get_run(run_id)
        view = RunView.from_run(run)
        here = model_files.files(manager.paths(run_id).artifacts) \
            if run.status == "success" else []
        if view.terminal:
            log, live, end = read_log(manager, run_id), None, 0
        else:  # the page follows the run: its log in whole lines, and where they end
            log, end = live_card.log_tail(manager.paths(run_id).log, LIVE_LOG_LINES,
                                          LIVE_LOG_BYTES)
            live = live_card.run_parts(view)
        where = model_files.model_files_cell(view, model_location(run), here,
                                             model_files.load_code(run))
        keep = manager.cfg.model_training.retain_runs
        if here and run_id in retention.goes_next(manager.runs, manager.paths, keep):
            where = join([where, render('<p class="warning" id="files-go-next">{s}</p>',
                                        s=retention.next_sentence(keep))])
        h.send_html(pages.run_page(manager.cfg, view, log, where,
                                   message, ok, publish_api.page_card(publisher, view, typed),
                                   in_use.use_refusal(manager, run),
                                   (live, end) if live else None),
                    status)

    @app.route("GET", r"/admin/training/runs/(?P<run_id>[A-Za-z0-9_-]+)", "admin")
    def run_page(h, run_id):
        done = (h.query.get("done") or [""])[0]
        message = in_use.switched_message(get_run(run_id), done) \
            if done in ("use", "pin", "unpin") else ""
        if done == "label":
            message = "Saved the run's name and note."
        show_run(h, run_id, message)

    _action_routes(app, manager, get_run, show_run)

    @app.route("POST", r"/admin/training/runs/(?P<run_id>[A-Za-z0-9_-]+)/(?P<action>use|pin|"
                       r"unpin)", "admin")
    def choice_form(h, run_id, action):
        """Back to the run's page, which says what changed, or (still inside the admin
        pages) why nothing could."""
        get_run(run_id)
        act = {"use": manager.use, "pin": lambda r: in_use.pin(manager, r),
               "unpin": lambda r: in_use.unpin(manager, r)}[action]
        try:
            act(run_id)
        except RequestError as e:
            show_run(h, run_id, e.message, ok=False, status=e.status)
            return
        h.redirect("/admin/training/runs/%s?done=%s" % (run_id, action))

    return show_run


def _action_routes(app, manager: Manager, get_run, show_run) -> None:
    """A run page's forms: name and note, and Run again (the POST is the confirm); and the
    API's name and note."""

    @app.route("POST", PREFIX + r"/runs/(?P<run_id>[A-Za-z0-9_-]+)/label", "admin")
    def label(h, run_id):
        get_run(run_id)
        body = h.json_object()
        unknown = sorted(set(body) - {"name", "note"})
        try:
            if unknown:
                raise RequestError(400, "Unknown field(s) %s; a run's label has name and note."
                                   % ", ".join(unknown))
            name, note = run_actions.parse_label(body.get("name"), body.get("note"))
        except RequestError as e:
            raise HTTPError(e.status, e.message)
        manager.runs.set_label(run_id, name, note)
        h.send_json(RunView.from_run(get_run(run_id)).as_dict())

    @app.route("POST", r"/admin/training/runs/(?P<run_id>[A-Za-z0-9_-]+)/label", "admin")
    def label_form(h, run_id):
        get_run(run_id)
        form = h.form()
        try:
            name, note = run_actions.parse_label((form.get("name") or [""])[-1],
                                                 (form.get("note") or [""])[-1])
        except RequestError as e:
            show_run(h, run_id, e.message, ok=False, status=e.status)
            return
        manager.runs.set_label(run_id, name, note)
        h.redirect("/admin/training/runs/%s?done=label" % run_id)

    @app.route("POST", r"/admin/training/runs/(?P<run_id>[A-Za-z0-9_-]+)/again", "admin")
    def again_form(h, run_id):
        run = get_run(run_id)
        try:
            new = manager.submit(*run_actions.again_request(run))
        except RequestError as e:
            show_run(h, run_id, "Cannot run it again: %s" % e.message, ok=False,
                     status=e.status)
            return
        h.redirect("/admin/training/runs/%s" % new.run_id)
