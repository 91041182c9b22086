"""``potato training run`` and ``potato training check``.

``run`` queues through the project's running server when there is one (so a project never has
two queue owners); otherwise it owns the queue itself for the length of the run.
"""

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from typing import Callable, Dict, List, Optional

from potato.project.data import DataError
from potato.project.paths import running_server
from potato.service import LockHeld, Service
from potato.project.store import Store
from potato.training.core.view import RunView
from potato.training.backends import (
    backend_class, check_backend, make_backends, polled_by_agents)
from potato.training.lifecycle.queue import DISABLED, RequestError
from potato.training.remote import trainers
from potato.commands.summary import summary_lines
from potato.training.core.tokens import AgentTokens

TERMINAL = ("success", "error", "cancelled")


def parse_params(pairs: List[str]) -> Dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError("--param %r must look like KEY=VALUE (for example epochs=3)" % pair)
        out[key.strip()] = value
    return out


class Follower:
    """Shows a run's progress: a redrawn bar on a terminal, plain lines otherwise."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty()
        self.last_step = None
        self.drawn = False

    def update(self, view: RunView) -> None:
        step = "%s: %s" % (view.status, view.step or "")
        progress = view.progress if isinstance(view.progress, dict) else {}
        if self.tty and progress.get("total"):
            cur, total = progress.get("current", 0), progress["total"]
            width = 30
            filled = int(width * cur / total) if total else 0
            eta = progress.get("eta_s")
            eta_text = " ETA %ds" % eta if eta is not None else ""
            line = "\r[%s%s] %d/%d %s%s  %s" % ("#" * filled, "." * (width - filled), cur, total,
                                               progress.get("unit", ""), eta_text, view.step)
            self.stream.write(line[:120].ljust(120))
            self.stream.flush()
            self.drawn = True
        elif step != self.last_step:
            if self.drawn:
                self.stream.write("\n")
                self.drawn = False
            self.stream.write("%s %s\n" % (view.run_id, step))
            self.stream.flush()
        self.last_step = step

    def done(self) -> None:
        if self.drawn:
            self.stream.write("\n")


def _follow(get: Callable[[], RunView], cancel: Callable[[], None],
            interval: float = 0.5) -> RunView:
    follower = Follower()
    cancelling = False
    while True:
        try:
            view = get()
            follower.update(view)
            if view.status in TERMINAL:
                follower.done()
                return view
            time.sleep(interval)
        except KeyboardInterrupt:
            if cancelling:
                raise
            cancelling = True
            follower.done()
            print("\nCancelling the run (Ctrl-C again to stop waiting) ...", file=sys.stderr)
            cancel()


def _api(url: str, key: Optional[str], method: str, path: str, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("X-API-Key", key)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"null")
        except ValueError:
            return e.code, {"error": "HTTP %d from %s" % (e.code, url)}


def run_command(cfg, args) -> int:
    if not cfg.model_training.enabled:
        print("error: %s. Set it to true in %s to train models." % (DISABLED, cfg.path),
              file=sys.stderr)
        return 1
    try:
        params = parse_params(args.param)
    except ValueError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    schemas = [s.strip() for s in args.schemas.split(",") if s.strip()]
    url = running_server(cfg)
    if url:
        return _run_via_server(cfg, url, args, schemas, params)
    backend = cfg.model_training.backends.get(args.backend or cfg.model_training.backend)
    if backend is not None and polled_by_agents(backend.type):
        print("error: runs on agent backend %s wait for an agent to poll the server, and no "
              "server of this project is running. Start it (potato start %s) where agents can "
              "reach it, then run this command again: it queues through the server."
              % (backend.name, cfg.path), file=sys.stderr)
        return 1
    return _run_in_process(cfg, args, schemas, params)


def _finish(view: RunView, config_path: str) -> int:
    for line in summary_lines(view, config_path):
        print(line)
    return 0 if view.status == "success" else 1


def _run_via_server(cfg, url, args, schemas, params) -> int:
    key = cfg.admin_api_key
    print("Queueing through the running server at %s" % url)
    try:
        status, body = _api(url, key, "POST", "/admin/training/api/runs",
                            {"trainer": args.trainer, "schemas": schemas,
                             "backend": args.backend, "params": params})
    except (OSError, urllib.error.URLError) as e:
        print("error: the server at %s did not answer (%s). Is it still running?" % (url, e),
              file=sys.stderr)
        return 1
    if status not in (200, 201, 202):
        print("error: %s" % (body or {}).get("error", "HTTP %d" % status), file=sys.stderr)
        return 1
    run_id = body["run_id"]

    def get():
        code, run = _api(url, key, "GET", "/admin/training/api/runs/%s" % run_id)
        if code != 200:
            raise RuntimeError("the server answered %d for run %s" % (code, run_id))
        return RunView.from_dict(run)

    view = _follow(get, lambda: _api(url, key, "POST",
                                     "/admin/training/api/runs/%s/cancel" % run_id))
    return _finish(view, cfg.path)


def _run_in_process(cfg, args, schemas, params) -> int:
    """No server runs: own the queue, with only the agent endpoints on loopback (remote agents
    report there), through the composition root."""
    os.umask(0o077)  # this process owns the queue: what it writes is private, as the server's
    service = Service(cfg, "127.0.0.1", 0, access_log=lambda line: None, ui=False,
                      owner="potato training run", reattach=False)
    try:
        service.open()
    except LockHeld as e:
        print("error: this project's training queue is owned by %s. Wait for it, or start the "
              "server and queue runs there." % e, file=sys.stderr)
        return 1
    except DataError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    except ssl.SSLError as e:
        print("error: server.tls_cert/tls_key cannot be used: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("error: cannot open the project's files or a loopback port (%s): %s. Check "
              "output_annotation_dir in %s." % (e.filename or cfg.output_dir, e.strerror,
                                                cfg.path), file=sys.stderr)
        return 1
    with service:
        manager = service.manager
        try:
            run_id = manager.submit(args.trainer, schemas, args.backend, params).run_id
        except RequestError as e:
            print("error: %s" % e.message, file=sys.stderr)
            return 1
        service.start(training=True)
        view = _follow(lambda: RunView.from_run(manager.runs.get(run_id)),
                       lambda: manager.cancel(run_id))
    return _finish(view, cfg.path)


def check_command(cfg, name: str, as_json: bool, trainer: Optional[str] = None,
                  param_pairs: Optional[List[str]] = None) -> int:
    bcfg = cfg.model_training.backends.get(name)
    if bcfg is None:
        print("error: no backend %r in %s. Configured: %s.%s" % (
            name, cfg.path, ", ".join(cfg.model_training.backends),
            trainers.did_you_mean(name, cfg.model_training.backends)), file=sys.stderr)
        return 1
    try:
        params = parse_params(param_pairs or [])
    except ValueError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    if backend_class(bcfg.type) is None:
        print("error: backend %s is of type %s, which this version of Potato cannot run yet; "
              "use another backend." % (name, bcfg.type), file=sys.stderr)
        return 1
    agents = polled_by_agents(bcfg.type)
    # the store also says whether a media project's items have text (which trainers fit)
    store = Store(cfg.db_path) if agents or os.path.exists(cfg.db_path) else None
    try:
        backend = make_backends(cfg, AgentTokens(store) if agents else None)[name]
        try:
            report = check_backend(backend, trainer, params, store)
        finally:
            backend.close()
    finally:
        if store is not None:
            store.close()
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        for line in report.get("lines", []):
            print(line)
        print("%s: %s" % (backend.label, "can start a run" if report["ok"]
                          else "cannot start a run"))
    return 0 if report["ok"] else 1
