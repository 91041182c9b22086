"""The annotation server: project state, routes for annotators and admins, start-up.

``make_server(cfg, host, port)`` builds a ready ThreadingHTTPServer (port 0 picks a free one);
``serve_forever`` is what ``potato start`` runs. Other parts (training) add their routes with
``App.route``.
"""

from __future__ import annotations

import hmac
import logging
import os
import re
import secrets
import signal
import ssl
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import Callable, Optional
from urllib.parse import unquote

from potato.annotations import LabelError, check_label, item_record
from potato.config import Config
from potato.data import DataError, data_files_signature, load_items
from potato.server import pages
from potato.server.http import Handler, HTTPError
from potato.store import Store

log = logging.getLogger("potato.server")

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
SESSION_TTL_S = 30 * 86400
ADMIN_SESSION_TTL_S = 12 * 3600
USERNAME = re.compile(r"^[A-Za-z0-9_.@+-]{1,64}$")
SYNC_INTERVAL_S = 5.0


class App:
    """What every request needs: the config, the store, the routes."""

    def __init__(self, cfg: Config, store: Store, tls: bool = False, access_log=None):
        self.config = cfg
        self.store = store
        self.tls = tls
        self.routes = []
        self.max_body_bytes = int(cfg.server.max_body_mb * 1024 * 1024)
        self._access_log = access_log
        self._data_sig = data_files_signature(cfg)
        self._stop = threading.Event()
        self._sync_thread: Optional[threading.Thread] = None
        _add_core_routes(self)

    def route(self, method: str, pattern: str, access: str = "public"):
        """Decorator: register ``func(handler, **groups)`` for ``method`` and a path regex."""

        def register(func: Callable) -> Callable:
            self.routes.append((method, re.compile(pattern), func, access))
            return func

        return register

    def access_log(self, line: str) -> None:
        if self._access_log is not None:
            self._access_log(line)
        else:
            sys.stderr.write(line + "\n")

    # -- keeping items in sync with the data files ---------------------------------------------
    def sync_items(self) -> dict:
        counts = self.store.sync_items(load_items(self.config))
        self._data_sig = data_files_signature(self.config)
        return counts

    def _watch_data_files(self) -> None:
        while not self._stop.wait(SYNC_INTERVAL_S):
            if data_files_signature(self.config) == self._data_sig:
                continue
            try:
                counts = self.sync_items()
                log.warning("data files changed: %(added)d item(s) added, %(updated)d updated, "
                            "%(deactivated)d no longer in the files (kept with their labels)",
                            counts)
            except DataError as e:
                self._data_sig = data_files_signature(self.config)
                log.error("data files changed but cannot be loaded, keeping the items as they "
                          "were: %s", e)

    def start_background(self) -> None:
        self._sync_thread = threading.Thread(target=self._watch_data_files, daemon=True,
                                             name="potato-data-sync")
        self._sync_thread.start()

    def stop_background(self) -> None:
        self._stop.set()
        if self._sync_thread is not None:
            self._sync_thread.join(timeout=SYNC_INTERVAL_S + 1)


def _safe_next(url: str, default: str) -> str:
    """Only same-site paths: never redirect to another host after a login."""
    if url.startswith("/") and not url.startswith("//") and "\\" not in url:
        return url
    return default


def _add_core_routes(app: App) -> None:
    cfg = app.config

    @app.route("GET", r"/")
    def index(h):
        h.redirect("/annotate" if h.annotator() else "/login")

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
        h.send_html(pages.login_page(cfg))

    @app.route("POST", r"/login")
    def login(h):
        if "json" in (h.headers.get("Content-Type") or ""):
            username = str(h.json_object().get("username") or "").strip()
            nxt = "/annotate"
        else:
            form = h.form()
            username = (form.get("username") or [""])[0].strip()
            nxt = _safe_next((form.get("next") or ["/annotate"])[0], "/annotate")
        if not USERNAME.match(username):
            msg = ("Choose a username of 1 to 64 letters, digits or _ . @ + - characters.")
            if h.wants_json() or "json" in (h.headers.get("Content-Type") or ""):
                raise HTTPError(400, msg)
            h.send_html(pages.login_page(cfg, msg), 400)
            return
        app.store.ensure_annotator(username)
        token = secrets.token_urlsafe(32)
        app.store.add_session(token, "annotator", username, SESSION_TTL_S)
        h.set_cookie("potato_session", token, SESSION_TTL_S, same_site="Lax")
        if "json" in (h.headers.get("Content-Type") or ""):
            h.send_json({"ok": True, "username": username})
        else:
            h.redirect(nxt)

    @app.route("POST", r"/logout")
    def logout(h):
        token = h.cookie("potato_session")
        if token:
            app.store.drop_session(token)
        h.set_cookie("potato_session", "", 0, same_site="Lax")
        h.redirect("/login")

    def _position(h, user: str) -> int:
        row = app.store.ensure_annotator(user)
        return row["position"]

    @app.route("GET", r"/annotate", "annotator")
    def annotate(h):
        user = h.annotator()
        total = app.store.item_count()
        position = max(0, min(_position(h, user), total))
        item = app.store.item_at(position) if position < total else None
        labels = app.store.labels_of(user, item["id"]) if item else {}
        preds = app.store.item_predictions(item["id"]) if item else {}
        h.send_html(pages.annotate_page(cfg, user, item, position, total,
                                        app.store.labelled_count(user), labels, preds,
                                        h.is_admin()))

    @app.route("POST", r"/annotate", "annotator")
    def annotate_post(h):
        user = h.annotator()
        form = h.form()
        total = app.store.item_count()
        try:
            position = int((form.get("position") or ["0"])[0])
        except ValueError:
            raise HTTPError(400, "position must be a number.")
        action = (form.get("action") or ["next"])[0]
        item_id = (form.get("item_id") or [""])[0]
        labels = {}
        if item_id:
            if app.store.item(item_id) is None:
                raise HTTPError(400, f"Unknown item {item_id!r}.")
            for scheme in cfg.schemes:
                values = form.get(f"label:{scheme.name}") or []
                if not values and not form.get(f"present:{scheme.name}"):
                    continue
                if scheme.annotation_type == "radio":
                    if not values:
                        continue  # a radio group cannot be cleared from the page
                    value = values[-1]
                else:
                    value = values
                try:
                    labels[scheme.name] = check_label(scheme, value)
                except LabelError as e:
                    raise HTTPError(400, str(e))
        new_position = position - 1 if action == "prev" else position + 1
        new_position = max(0, min(new_position, total))
        if item_id:
            app.store.save_labels(user, item_id, labels, new_position)
        else:
            app.store.set_position(user, new_position)
        h.redirect("/annotate")

    @app.route("POST", r"/api/annotations", "annotator")
    def api_annotate(h):
        user = h.annotator()
        data = h.json_object()
        item_id = data.get("item_id")
        labels = data.get("labels")
        if not isinstance(item_id, str) or app.store.item(item_id) is None:
            raise HTTPError(400, f"item_id {item_id!r} is not an item of this project.")
        if not isinstance(labels, dict) or not labels:
            raise HTTPError(400, 'labels must be an object like {"<scheme>": "<label>"}.')
        clean = {}
        for name, value in labels.items():
            scheme = cfg.scheme(name)
            if scheme is None:
                raise HTTPError(400, f"{name!r} is not an annotation scheme (schemes: "
                                     f"{', '.join(s.name for s in cfg.schemes)}).")
            try:
                clean[name] = check_label(scheme, value)
            except LabelError as e:
                raise HTTPError(400, str(e))
        app.store.save_labels(user, item_id, clean)
        h.send_json({"ok": True, "item_id": item_id, "labels": app.store.labels_of(user, item_id)})

    @app.route("GET", r"/api/annotations/(?P<item_id>[^/]+)", "annotator")
    def api_my_labels(h, item_id):
        item_id = unquote(item_id)
        if app.store.item(item_id) is None:
            raise HTTPError(404, f"No item {item_id!r}.")
        h.send_json({"item_id": item_id, "labels": app.store.labels_of(h.annotator(), item_id)})

    # -- admin ---------------------------------------------------------------------------------
    @app.route("GET", r"/admin/login")
    def admin_login_form(h):
        nxt = _safe_next((h.query.get("next") or ["/admin"])[0], "/admin")
        h.send_html(pages.admin_login_page(cfg, next_url=nxt))

    @app.route("POST", r"/admin/login")
    def admin_login(h):
        form = h.form()
        key = (form.get("key") or [""])[0]
        nxt = _safe_next((form.get("next") or ["/admin"])[0], "/admin")
        if not cfg.admin_api_key:
            h.send_html(pages.admin_login_page(cfg, "This project has no admin_api_key; set one "
                                                    "in the config and restart the server.", nxt),
                        401)
            return
        if not hmac.compare_digest(key.encode(), cfg.admin_api_key.encode()):
            h.send_html(pages.admin_login_page(cfg, "That is not the admin key.", nxt), 401)
            return
        token = secrets.token_urlsafe(32)
        app.store.add_session(token, "admin", "admin", ADMIN_SESSION_TTL_S)
        h.set_cookie("potato_admin", token, ADMIN_SESSION_TTL_S, same_site="Strict")
        h.redirect(nxt)

    @app.route("POST", r"/admin/logout")
    def admin_logout(h):
        token = h.cookie("potato_admin")
        if token:
            app.store.drop_session(token)
        h.set_cookie("potato_admin", "", 0)
        h.redirect("/admin/login")

    def _stats():
        return {"items": app.store.item_count(), "annotations": app.store.annotation_count(),
                "annotators": [{"name": r["name"], "items": r["items"]}
                               for r in app.store.annotator_stats()]}

    @app.route("GET", r"/admin", "admin")
    def admin_home(h):
        note = ("Debug mode: requests from this machine have admin rights."
                if cfg.debug else "")
        h.send_html(pages.admin_page(cfg, _stats(), note))

    @app.route("GET", r"/admin/api/stats", "admin")
    def admin_stats(h):
        h.send_json(_stats())

    @app.route("GET", r"/admin/api/items/(?P<item_id>[^/]+)", "admin")
    def admin_item(h, item_id):
        rec = item_record(app.store, unquote(item_id))
        if rec is None:
            raise HTTPError(404, f"No item {unquote(item_id)!r} in this project.")
        h.send_json(rec)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # socketserver's default of 5 resets connections under a burst

    def __init__(self, address, app: App):
        self.app = app
        super().__init__(address, Handler)

    def handle_error(self, request, client_address):  # keep tracebacks in the log, briefly
        log.warning("connection from %s ended with an error: %s", client_address,
                    sys.exc_info()[1])


def make_server(cfg: Config, host: Optional[str] = None, port: Optional[int] = None,
                access_log=None) -> Server:
    """A ready server with its items synced. Raises DataError for unusable data files."""
    items = load_items(cfg)
    store = Store(cfg.db_path)
    store.sync_items(items)
    tls = bool(cfg.server.tls_cert)
    app = App(cfg, store, tls=tls, access_log=access_log)
    from potato.training import api
    from potato.training import agent_routes as agent_api
    from potato.training.queue import Manager

    app.manager = Manager(cfg, store)
    api.add_routes(app, app.manager)
    agent_api.add_routes(app, app.manager)
    server = Server((host or cfg.server.host, cfg.server.port if port is None else port), app)
    for backend in app.manager.backends.values():
        if hasattr(backend, "server_port"):  # remote backends forward agents to this port
            backend.server_port = server.server_address[1]
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cfg.server.tls_cert, cfg.server.tls_key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    return server


def server_url(server: Server) -> str:
    host, port = server.server_address[:2]
    scheme = "https" if server.app.tls else "http"
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}/"


def serve_forever(cfg: Config, host: Optional[str] = None, port: Optional[int] = None) -> int:
    """``potato start``: serve until SIGINT/SIGTERM. Exit code 0, or 1 when it cannot start."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        server = make_server(cfg, host, port)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        where = f"{host or cfg.server.host}:{cfg.server.port if port is None else port}"
        print(f"error: cannot listen on {where}: {e.strerror}. Pick another --port, or stop "
              f"what is using it.", file=sys.stderr)
        return 1
    except ssl.SSLError as e:
        print(f"error: server.tls_cert/tls_key cannot be used: {e}", file=sys.stderr)
        return 1
    app = server.app
    from potato.training.queue import QueueLock
    from potato.paths_server import remove_server_file, write_server_file

    lock = QueueLock(cfg.output_dir)
    if not lock.acquire("potato start"):
        print(f"error: this project's training queue is owned by {lock.holder()}. Only one "
              f"process may run a project's training; stop that one first.", file=sys.stderr)
        server.server_close()
        app.store.close()
        return 1
    app.manager.start()
    if cfg.debug:
        log.warning("debug: true: every request from loopback has admin rights. Do not use debug "
                    "on a shared machine.")
    app.start_background()
    url = server_url(server)
    write_server_file(cfg, url)
    print(f"Potato is serving {cfg.annotation_task_name!r} at {url} "
          f"({app.store.item_count()} items). Admin pages: {url}admin", flush=True)

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        app.stop_background()
        app.manager.stop()
        remove_server_file(cfg)
        lock.release()
        server.server_close()
        app.store.close()
    print("Potato stopped.", flush=True)
    return 0
