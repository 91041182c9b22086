"""Bounded connections for a server that runs for weeks.

Each connection has a thread (``ThreadingHTTPServer``), so connections are capped
(``MAX_CONNECTIONS``) and each idles at most ``IDLE_TIMEOUT_S`` between requests. When the cap is
reached, the connection that has been idle longest (waiting for a request that has not come) is
closed to make room: a crowd of sockets that send nothing cannot keep annotators out. The
project database connection of a request thread is released when its request is done.
"""

import socket
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Dict

MAX_CONNECTIONS = 128
IDLE_TIMEOUT_S = 60.0


class BoundedServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # socketserver's default of 5 resets connections under a burst
    max_connections = MAX_CONNECTIONS

    def __init__(self, *args, **kwargs):
        self._conn_lock = threading.Lock()
        self._conns: Dict[socket.socket, float] = {}  # socket -> idle since (None: busy)
        super().__init__(*args, **kwargs)

    # -- the handler tells us when a connection waits and when it works ----------------------
    def connection_idle(self, sock) -> None:
        with self._conn_lock:
            if sock in self._conns:
                self._conns[sock] = time.monotonic()

    def connection_busy(self, sock) -> None:
        with self._conn_lock:
            if sock in self._conns:
                self._conns[sock] = None

    def open_connections(self) -> int:
        with self._conn_lock:
            return len(self._conns)

    # -- socketserver hooks ---------------------------------------------------------------------
    def process_request(self, request, client_address):
        with self._conn_lock:
            if len(self._conns) >= self.max_connections:
                self._evict_idle()
            full = len(self._conns) >= self.max_connections
            if not full:
                self._conns[request] = time.monotonic()
        if full:  # every connection is busy with a request: say so, briefly
            try:
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\n"
                                b"Content-Type: text/plain\r\nConnection: close\r\n"
                                b"Content-Length: 38\r\n\r\nThe server is busy; try again soon.\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def _evict_idle(self) -> None:
        idle = [(since, s) for s, since in self._conns.items() if since is not None]
        if not idle:
            return
        _, oldest = min(idle, key=lambda pair: pair[0])
        try:
            oldest.shutdown(socket.SHUT_RDWR)  # its thread's read returns; it ends
        except OSError:
            pass
        self._conns.pop(oldest, None)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self._conns.pop(request, None)
            app = getattr(self, "app", None)
            if app is not None:
                app.store.release()
