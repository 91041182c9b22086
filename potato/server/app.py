"""The annotation server's state: the config, the store, the routes, the data-file watcher.

Nothing here builds or starts a server: ``potato.service`` (the composition root) does, and
adds training's routes with ``App.route``. This package imports nothing of ``potato.training``.
"""

from __future__ import annotations

import hashlib
import os
import logging
import re
import sys
import threading
from typing import Callable, Optional

from potato.project import assignment
from potato.config.settings import Config
from potato.schemes import save_bytes
from potato.project.data import DataError, data_files_signature, load_items
from potato.server import diskfull, routes, safety
from potato.server.connections import BoundedServer
from potato.project.validation_media import data_errors
from potato.server.http import Handler
from potato.project.store import Store

log = logging.getLogger("potato.server")

SYNC_INTERVAL_S = 5.0


class App:
    """What every request needs: the config, the store, the routes."""

    def __init__(self, cfg: Config, store: Store, tls: bool = False, access_log=None,
                 core_routes: bool = True):
        self.config = cfg
        self.store = store
        self.tls = tls
        self.routes = []
        self.max_body_bytes = int(cfg.server.max_body_mb * 1024 * 1024)
        self.annotator_body_bytes = self._annotator_cap()
        self._access_log = access_log
        self._data_sig = data_files_signature(cfg)
        self._stop = threading.Event()
        self._sync_thread: Optional[threading.Thread] = None
        self.allowed_hosts = cfg.allowed_hosts or safety.default_allowed_hosts(
            cfg.server.host, cfg.server_url)
        key = (cfg.admin_api_key or "").encode("utf-8")
        self.admin_session_name = "admin:" + hashlib.sha256(b"potato-admin\0" + key).hexdigest()[:32]
        # Cookies are per host, not per port: each project's names its own (its store's path),
        # so two projects on one host do not log each other out.
        project = hashlib.sha256(os.path.abspath(cfg.db_path).encode("utf-8", "replace"))
        self.session_cookie = "potato_session_" + project.hexdigest()[:10]
        self.admin_cookie = "potato_admin_" + project.hexdigest()[:10]
        self.login_limiter = safety.LoginLimiter()
        # New annotator names per client (each makes a row and a session): a class behind one
        # NAT address fits, a script making thousands does not (server.new_names_per_hour).
        self.new_name_limiter = safety.LoginLimiter(limit=cfg.server.new_names_per_hour,
                                                    window_s=3600.0)
        self.disk = diskfull.DiskWatch(cfg.output_dir)  # 507s, their log line, the banner
        self.assignment = assignment.for_config(cfg, store)  # who gets which items
        if core_routes:  # the annotation pages and admin UI (not for potato training run)
            routes.add_core_routes(self)

    def _annotator_cap(self) -> int:
        """An annotator's save: as long as the project's schemes allow with its items (8,000
        Korean characters in a text box fit; so do the spans of the longest item), never more
        than max_body_mb. Made again when the data files bring other items."""
        longest = self.store.conn().execute(
            "SELECT COALESCE(MAX(LENGTH(text)), 0) FROM items").fetchone()[0]
        return min(save_bytes(self.config.schemes, int(longest or 0)), self.max_body_bytes)

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
        self.annotator_body_bytes = self._annotator_cap()
        return counts

    def _watch_data_files(self) -> None:
        while not self._stop.wait(SYNC_INTERVAL_S):
            if data_files_signature(self.config) == self._data_sig:
                continue
            try:
                refused = data_errors(self.config)  # what potato start would refuse
                if refused:
                    raise DataError("%s%s (potato start refuses the same; fix the data files)" % (
                        refused[0], " (and %d more)" % (len(refused) - 1)
                        if len(refused) > 1 else ""))
                counts = self.sync_items()
                log.warning("data files changed: %(added)d item(s) added, %(updated)d updated, "
                            "%(deactivated)d no longer in the files (kept with their labels)",
                            counts)
            except DataError as e:
                self._data_sig = data_files_signature(self.config)
                log.error("data files changed but cannot be loaded, keeping the items as they "
                          "were: %s", e)
            except Exception as e:  # the watcher outlives any file: one line, then on it goes
                self._data_sig = data_files_signature(self.config)
                log.error("data files changed but reading them failed (%s: %s), keeping the "
                          "items as they were; potato validate says where", type(e).__name__, e)

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
