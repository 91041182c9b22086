"""The admin training API (JSON, ``X-API-Key`` or an admin session), added to the server."""

import time
from typing import Any, Dict

from potato.server.http import HTTPError
from potato.training import trainers
from potato.training.manager import Manager, RequestError
from potato.training.runstore import TERMINAL

PREFIX = "/admin/training/api"
RUN_FIELDS = ("run_id", "trainer", "schemas", "backend", "ran_on", "status", "step", "error",
              "metrics", "holdout", "writeback", "created_at", "started_at", "finished_at",
              "artifact_uri", "params", "progress", "history", "auto")


def run_view(run: Dict[str, Any]) -> Dict[str, Any]:
    out = {k: run.get(k) for k in RUN_FIELDS}
    if run.get("started_at"):
        end = run.get("finished_at") or time.time()
        out["duration_s"] = round(end - run["started_at"], 1)
    else:
        out["duration_s"] = None
    out["terminal"] = run["status"] in TERMINAL
    return out


def backend_list(manager: Manager):
    default = manager.cfg.model_training.backend
    return [{"name": name, "type": b.type, "host": b.host, "label": b.label,
             "description": b.bcfg.description, "default": name == default}
            for name, b in manager.backends.items()]


def add_routes(app, manager: Manager) -> None:
    def get_run(run_id):
        run = manager.runs.get(run_id)
        if run is None:
            raise HTTPError(404, "No run %s." % run_id)
        return run

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
        h.send_json({"run_id": run["run_id"], "status": run["status"]}, 202)

    @app.route("GET", PREFIX + r"/runs", "admin")
    def list_runs(h):
        h.send_json({"runs": [run_view(r) for r in manager.runs.list()]})

    @app.route("GET", PREFIX + r"/runs/(?P<run_id>[A-Za-z0-9_-]+)", "admin")
    def one(h, run_id):
        h.send_json(run_view(get_run(run_id)))

    @app.route("GET", PREFIX + r"/runs/(?P<run_id>[A-Za-z0-9_-]+)/log", "admin")
    def run_log(h, run_id):
        get_run(run_id)
        try:
            with open(manager.paths(run_id).log, "rb") as f:
                data = f.read()
        except OSError:
            data = b""
        h.send(200, data, "text/plain; charset=utf-8")

    @app.route("POST", PREFIX + r"/runs/(?P<run_id>[A-Za-z0-9_-]+)/cancel", "admin")
    def cancel(h, run_id):
        get_run(run_id)
        h.send_json(run_view(manager.cancel(run_id)))

    @app.route("GET", PREFIX + r"/backends", "admin")
    def backends(h):
        h.send_json({"backends": backend_list(manager)})

    @app.route("POST", PREFIX + r"/backends/(?P<name>[^/]+)/check", "admin")
    def check(h, name):
        backend = manager.backends.get(name)
        if backend is None:
            raise HTTPError(404, "No backend %s. Configured: %s." % (
                name, ", ".join(manager.backends)))
        h.send_json(backend.check())

    @app.route("GET", PREFIX + r"/trainers", "admin")
    def trainer_list(h):
        h.send_json({"trainers": [info.as_dict() for info in trainers.all_trainers().values()]})

    @app.route("GET", PREFIX + r"/auto_retrain", "admin")
    def auto(h):
        h.send_json(manager.auto_status)
