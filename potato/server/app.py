"""The annotation server: project state, routes for annotators and admins, start-up.

``make_server(cfg, host, port)`` builds a ready ThreadingHTTPServer (port 0 picks a free one);
``serve_forever`` is what ``potato start`` runs. Other parts (training) add their routes with
``App.route``.
"""

from __future__ import annotations

import hashlib
import logging
import re
import os
import signal
import ssl
import sys
import threading
from typing import Callable, Optional

from potato.config import Config
from potato.data import DataError, data_files_signature, load_items
from potato.server import diskfull, routes, safety
from potato.server.connections import BoundedServer
from potato.server.http import Handler
from potato.store import Store

log = logging.getLogger("potato.server")

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
        self.allowed_hosts = cfg.allowed_hosts or safety.default_allowed_hosts(
            cfg.server.host, cfg.server_url)
        key = (cfg.admin_api_key or "").encode("utf-8")
        self.admin_session_name = "admin:" + hashlib.sha256(b"potato-admin\0" + key).hexdigest()[:32]
        self.login_limiter = safety.LoginLimiter()
        self.disk = diskfull.DiskWatch(cfg.output_dir)  # 507s, their log line, the banner
        routes.add_core_routes(self)

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


class Server(BoundedServer):
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
    if host and not cfg.allowed_hosts:  # potato start --host: answer to that name too
        app.allowed_hosts = safety.default_allowed_hosts(host, cfg.server_url)
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
        server.ssl_context = ctx  # each connection's handshake runs in its own thread
    return server


def server_url(server: Server) -> str:
    host, port = server.server_address[:2]
    scheme = "https" if server.app.tls else "http"
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}/"


def serve_forever(cfg: Config, host: Optional[str] = None, port: Optional[int] = None) -> int:
    """``potato start``: serve until SIGINT/SIGTERM. Exit code 0, or 1 when it cannot start."""
    os.umask(0o077)  # everything the server writes (store, runs, logs) is this account's only
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
    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)  # before anyone can learn that we serve
    app.manager.start()
    if cfg.debug:
        log.warning("debug: true: every request from loopback has admin rights. Do not use debug "
                    "on a shared machine.")
    app.start_background()
    url = server_url(server)
    write_server_file(cfg, url)
    print(f"Potato is serving {cfg.annotation_task_name!r} at {url} "
          f"({app.store.item_count()} items). Admin pages: {url}admin", flush=True)

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
