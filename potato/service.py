"""The composition root: the one place that builds and tears down a running Potato.

A ``Service`` owns, in this order, the project's queue lock, the store, the HTTP app, the
training manager (and its backends), the HTTP server and the background threads, and stops them
in the reverse order.
``potato start`` (``serve``), ``potato training run`` (``Service(..., ui=False)``: the store,
the manager and the agent endpoints on loopback, no annotation pages or admin UI) and the
tests' server fixture all go through it, so start-up and shutdown are written once.

The HTTP layer (``potato.server``) knows nothing of training: training adds its routes to the
app here, through ``potato.training.web.api.add_routes`` and ``agent_routes.add_routes``.
"""

from __future__ import annotations

import logging
import os
import signal
import ssl
import sys
import threading
from typing import Callable, Optional

from potato.config.settings import Config
from potato.project.data import DataError, load_items
from potato.config.netaddr import is_loopback
from potato.project.paths import remove_server_file, write_server_file
from potato.server import safety
from potato.server.app import App, Server
from potato.project.store import Store
from potato.training.web import agent_routes, api
from potato.training.lifecycle import reload
from potato.training.lifecycle.queue import Manager
from potato.training.lifecycle.queue_lock import QueueLock

log = logging.getLogger("potato.server")


class LockHeld(Exception):
    """Another process owns this project's training queue (its holder is the message)."""


class CannotListen(OSError):
    """The server's address could not be bound (in use, not ours, not an address here)."""


class Service:
    """A project's running parts. ``open()`` builds them (nothing is served yet), ``start()``
    serves and starts the queue, ``close()`` stops everything, in reverse order, once.

    ``owner``: take the project's queue lock under that name (None: no lock, for tests that
    run two servers of one project side by side). ``ui``: the annotation pages and admin UI
    (False for ``potato training run``, which needs only the agent endpoints). ``reattach``:
    re-attach the agent runs a stopped server left running (False for ``potato training run``:
    its agents know only the server's URL, not its loopback port)."""

    def __init__(self, cfg: Config, host: Optional[str] = None, port: Optional[int] = None,
                 access_log: Optional[Callable[[str], None]] = None, ui: bool = True,
                 owner: Optional[str] = "potato start", reattach: bool = True):
        self.cfg = cfg
        self.host = host or cfg.server.host
        self.port = cfg.server.port if port is None else port
        self.access_log = access_log
        self.ui = ui
        self.owner = owner
        self.reattach = reattach  # pick up agent runs a killed server left (potato start)
        self.lock: Optional[QueueLock] = None
        self.store: Optional[Store] = None
        self.app: Optional[App] = None
        self.http: Optional[Server] = None
        self.manager: Optional[Manager] = None
        self.on_disk: Optional[reload.ConfigOnDisk] = None
        self._serving: Optional[threading.Thread] = None
        self._training = False
        self._closed = False

    # -- building ------------------------------------------------------------------------------
    def open(self) -> "Service":
        """Build the parts. Raises LockHeld, DataError (unusable data files), OSError (cannot
        listen) or ssl.SSLError; whatever was built before the failure is closed again."""
        cfg = self.cfg
        try:
            if self.owner is not None:
                self.lock = QueueLock(cfg.output_dir)
                if not self.lock.acquire(self.owner):
                    holder = self.lock.holder()
                    self.lock = None
                    raise LockHeld(holder)
            items = load_items(cfg)
            self.store = Store(cfg.db_path)
            self.store.sync_items(items)
            tls = bool(cfg.server.tls_cert)
            self.app = App(cfg, self.store, tls=tls, access_log=self.access_log,
                           core_routes=self.ui)
            if self.host and not cfg.allowed_hosts:  # --host: answer to that name too
                self.app.allowed_hosts = safety.default_allowed_hosts(self.host, cfg.server_url)
            self.manager = Manager(cfg, self.store, reattach=self.reattach)
            if self.ui:  # the Training page says when the config file on disk differs
                self.on_disk = reload.ConfigOnDisk(self.manager, self.apply_config)
                api.add_routes(self.app, self.manager, self.on_disk)
            agent_routes.add_routes(self.app, self.manager)
            try:
                self.http = Server((self.host, self.port), self.app)
            except OSError as e:
                raise CannotListen(e.errno, e.strerror) from e
            self.manager.listening_on(self.http.server_address[1])
            if self.lock is not None:
                self.lock.note_port(self.http.server_address[1])
            if tls:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.load_cert_chain(cfg.server.tls_cert, cfg.server.tls_key)
                self.http.ssl_context = ctx  # each connection's handshake runs in its own thread
        except BaseException:
            self.close()
            raise
        return self

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        scheme = "https" if self.app.tls else "http"
        shown = f"[{host}]" if ":" in host else host
        return f"{scheme}://{shown}:{port}/"

    def apply_config(self, cfg: Config) -> list:
        """Run with ``cfg`` from now on (Reload config, after ``reload`` has checked that only
        keys it may apply live changed and no running run's backend is touched): the manager
        and its backends, then the app. Returns the backends that left, to be closed."""
        gone = reload.apply_to_manager(self.manager, cfg,
                                       self.http.server_address[1] if self.http else None)
        self.cfg = self.app.config = cfg
        return gone

    # -- running -------------------------------------------------------------------------------
    def start(self, training: bool = True, data_sync: bool = False,
              poll_interval: float = 0.2) -> "Service":
        """Serve in a thread; start the training queue (``training``) and the data-file
        watcher (``data_sync``). The queue starts first: runs that survive a restart are
        re-attached before an agent's report can arrive (the socket already listens, and
        connections wait in its backlog)."""
        if training:
            self.start_training()
        self._serving = threading.Thread(target=self.http.serve_forever,
                                         kwargs={"poll_interval": poll_interval},
                                         daemon=True, name="potato-http")
        self._serving.start()
        if data_sync:
            self.app.start_background()
        return self

    def start_training(self) -> None:
        self._training = True
        self.manager.start()

    def close(self) -> None:
        """Stop in reverse order of building: the queue (it may still talk to agents through
        the server), the server, the background threads, the store, the lock. Idempotent."""
        if self._closed:
            return
        self._closed = True
        steps = [self._stop_training, self._stop_http,
                 lambda: self.app is not None and self.app.stop_background(),
                 lambda: self.store is not None and self.store.close(),
                 lambda: self.lock is not None and self.lock.release()]
        failed = None
        for step in steps:  # every step runs, whatever an earlier one raised
            try:
                step()
            except Exception as e:  # noqa: BLE001 - logged, and the first one re-raised
                log.exception("stopping the server: %s", e)
                failed = failed or e
        if failed is not None:
            raise failed

    def _stop_training(self) -> None:
        if self.manager is not None and self._training:
            self.manager.stop()
        elif self.manager is not None:
            self.manager.close_backends()

    def _stop_http(self) -> None:
        if self.http is not None:
            if self._serving is not None:
                self.http.shutdown()
                self._serving.join(timeout=5)
            self.http.server_close()

    def __enter__(self) -> "Service":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def warn_debug(cfg: Config, host: str) -> None:
    """At startup with ``debug: true``: who gets admin rights, and the proxy that would give
    them to everyone."""
    if not cfg.debug:
        return
    log.warning("debug: true: every request from loopback has admin rights. Do not use "
                "debug on a shared machine.")
    if is_loopback(host):
        log.warning("debug: true and the server listens on %s: a reverse proxy on this machine "
                    "that adds no X-Forwarded-For header passes every client on as loopback, "
                    "so every client is admin. Behind a proxy turn debug off in %s.",
                    host, cfg.path)


def serve(cfg: Config, host: Optional[str] = None, port: Optional[int] = None) -> int:
    """``potato start``: serve until SIGINT/SIGTERM. Exit code 0, or 1 when it cannot start."""
    os.umask(0o077)  # everything the server writes (store, runs, logs) is this account's only
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    service = Service(cfg, host, port)
    try:
        service.open()
    except LockHeld as e:
        print(f"error: this project's training queue is owned by {e}. Only one process may run "
              f"a project's training; stop that one first.", file=sys.stderr)
        return 1
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except CannotListen as e:
        print(f"error: cannot listen on {service.host}:{service.port}: {e.strerror}. Pick "
              f"another --port, or stop what is using it.", file=sys.stderr)
        return 1
    except ssl.SSLError as e:  # before OSError, which it is a kind of
        print(f"error: server.tls_cert/tls_key cannot be used: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: cannot open the project's files ({e.filename or cfg.output_dir}): "
              f"{e.strerror}. Check output_annotation_dir in {cfg.path}.", file=sys.stderr)
        return 1
    done = threading.Event()

    def stop(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, stop)  # before anyone can learn that we serve
    signal.signal(signal.SIGINT, stop)
    try:
        service.start(training=True, data_sync=True)
        warn_debug(cfg, service.http.server_address[0])
        url = service.url
        write_server_file(cfg, url)
        print(f"Potato is serving {cfg.annotation_task_name!r} at {url} "
              f"({service.store.item_count()} items). Admin pages: {url}admin", flush=True)
        while not done.wait(0.5):
            pass
    finally:
        remove_server_file(cfg)
        service.close()
    print("Potato stopped.", flush=True)
    return 0
