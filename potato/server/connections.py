"""Bounded connections for a server that runs for weeks.

Each connection has a thread (``ThreadingHTTPServer``), so connections are capped
(``MAX_CONNECTIONS``) and each waits at most ``IDLE_TIMEOUT_S`` for a read. A connection counts
as *busy* only from the moment its request's headers are complete until its response is sent;
before that (idle between requests, or a client still dribbling its request line and headers)
it may be closed to make room: when the cap is reached, the connection that has waited longest
without sending anything new is closed. So a crowd of silent or slow sockets cannot keep
annotators out. TLS handshakes happen in the connection's own thread, with a deadline, never in
the accept loop. The project database connection of a request thread is released when its
connection ends.

A request as a whole is bounded too, not only each read: its request line and headers must
arrive within ``HEADER_DEADLINE_S`` of its first byte, and its body within ``body_deadline_s``
(a floor plus a minimum rate), so a client trickling one byte every few seconds cannot hold a
connection for long. The accept loop closes connections past their deadline
(``service_actions``). Once half the connections are open, one client address may hold at
most ``MAX_PER_ADDRESS`` of them (addresses in ``server.trusted_proxies`` excepted: a proxy
speaks for many clients).
"""

import select
import socket
import ssl
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Dict, List, Optional

from potato.netaddr import in_networks

MAX_CONNECTIONS = 128
IDLE_TIMEOUT_S = 60.0
HANDSHAKE_TIMEOUT_S = 10.0
MIN_IDLE_TO_EVICT_S = 0.2
MAX_PER_ADDRESS = 32  # open connections of one client address, once half of all are open
HEADER_DEADLINE_S = 10.0  # request line and headers, from their first byte
BODY_FLOOR_S = 10.0  # a body may take this long, plus one second per BODY_MIN_RATE bytes
BODY_MIN_RATE = 16 << 10  # bytes per second


def body_deadline_s(n: int) -> float:
    """Seconds a body of ``n`` bytes may take to arrive."""
    return BODY_FLOOR_S + n / BODY_MIN_RATE


def _busy_reply(text: bytes) -> bytes:
    return (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nContent-Type: text/plain; "
            b"charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(text)
            + text)


BUSY_BODY = b"The server is busy; try again soon.\r\n"
BUSY = _busy_reply(BUSY_BODY)
TOO_MANY = _busy_reply(b"This address has %d or more connections open to the server, the most "
                       b"it allows one address while the server is busy; close some and try "
                       b"again.\r\n" % MAX_PER_ADDRESS)


class _Conn:
    __slots__ = ("sock", "since", "busy", "addr", "deadline", "phase")

    def __init__(self, sock, addr: str = ""):
        self.sock = sock
        self.since = time.monotonic()
        self.busy = False
        self.addr = addr
        self.deadline: Optional[float] = None  # monotonic; past it the connection is closed
        self.phase = ""  # "headers" or "body" while a deadline runs


class BoundedServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # socketserver's default of 5 resets connections under a burst
    max_connections = MAX_CONNECTIONS
    max_per_address = MAX_PER_ADDRESS
    ssl_context: Optional[ssl.SSLContext] = None

    def __init__(self, *args, **kwargs):
        self._conn_lock = threading.Lock()
        self._aliases: Dict[int, _Conn] = {}  # id() of a TLS-wrapped socket -> its connection
        self._conns: Dict[int, _Conn] = {}  # by id() of the accepted socket
        super().__init__(*args, **kwargs)

    # -- the handler says when a connection works and when it waits ---------------------------
    def connection_idle(self, sock) -> None:
        self._mark(sock, False)

    def connection_busy(self, sock) -> None:
        self._mark(sock, True)

    def _mark(self, sock, busy: bool) -> None:
        with self._conn_lock:
            conn = self._conns.get(id(sock)) or self._aliases.get(id(sock))
            if conn is not None and conn.busy != busy:  # waiting counts from accept or the
                conn.busy = busy                          # last response, not from our look
                conn.since = time.monotonic()
            if conn is not None:
                conn.deadline, conn.phase = None, ""

    def connection_deadline(self, sock, seconds: Optional[float], phase: str = "") -> None:
        """From now, ``sock`` has ``seconds`` to finish its ``phase`` ("headers", "body") or
        it is closed (None: no deadline)."""
        with self._conn_lock:
            conn = self._conns.get(id(sock)) or self._aliases.get(id(sock))
            if conn is not None:
                conn.deadline = None if seconds is None else time.monotonic() + seconds
                conn.phase = phase

    def service_actions(self) -> None:
        """Called by the accept loop between requests: close connections past their deadline.
        A late body is only cut off from reading (its thread answers 408); a late request line
        or header is closed outright."""
        super().service_actions()
        now = time.monotonic()
        with self._conn_lock:
            late = [c for c in self._conns.values() if c.deadline is not None and c.deadline < now]
            for conn in late:
                conn.deadline = None
                try:
                    conn.sock.shutdown(socket.SHUT_RD if conn.phase == "body"
                                       else socket.SHUT_RDWR)
                except OSError:
                    pass

    def open_connections(self) -> int:
        with self._conn_lock:
            return len(self._conns)

    # -- socketserver hooks ---------------------------------------------------------------------
    def process_request(self, request, client_address):
        addr = str(client_address[0]) if client_address else ""
        limited = not self.unlimited_address(addr)
        with self._conn_lock:
            refusal = None
            if limited and self._over_share(addr):
                self._evict_one(addr)
                if self._over_share(addr):
                    refusal = TOO_MANY
            if refusal is None and len(self._conns) >= self.max_connections:
                self._evict_one()
                if len(self._conns) >= self.max_connections:
                    refusal = BUSY
            if refusal is None:
                self._conns[id(request)] = _Conn(request, addr)
        if refusal is not None:  # every connection is at work: say so, briefly, and close
            _refuse(request, refusal)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def unlimited_address(self, addr: str) -> bool:
        """A trusted proxy (``server.trusted_proxies``) is one address for many clients."""
        app = getattr(self, "app", None)
        return app is not None and in_networks(addr, app.config.server.trusted_proxies)

    def _over_share(self, addr: str) -> bool:
        """Whether ``addr`` has its share: MAX_PER_ADDRESS connections once the server is half
        full. Below that an address may open more (a lab behind one NAT address, a test)."""
        if len(self._conns) < self.max_connections // 2:
            return False
        return sum(1 for c in self._conns.values() if c.addr == addr) >= self.max_per_address

    def _evict_one(self, addr: Optional[str] = None) -> None:
        """Close the connection (of ``addr``, if given) that has waited longest without a
        request under way; never one whose next request is already arriving (it has bytes to
        read)."""
        now = time.monotonic()
        waiting: List[_Conn] = sorted((c for c in self._conns.values() if not c.busy
                                       and (addr is None or c.addr == addr)),
                                      key=lambda c: c.since)
        # Those that waited a while first; under a flood, any that is not mid-request.
        waiting = ([c for c in waiting if now - c.since >= MIN_IDLE_TO_EVICT_S]
                   + [c for c in waiting if now - c.since < MIN_IDLE_TO_EVICT_S])
        for conn in waiting:
            if _fd(conn.sock) < 0:  # closed already: its slot is free
                self._conns.pop(id(conn.sock), None)
                return
            try:
                readable, _, _ = select.select([conn.sock], [], [], 0)
            except (OSError, ValueError):
                readable = []
            if readable:
                continue
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)  # its thread's read returns; it ends
            except OSError:
                pass
            self._conns.pop(id(conn.sock), None)
            return

    def finish_request(self, request, client_address):
        if self.ssl_context is not None:  # the handshake here, in this connection's thread
            request.settimeout(HANDSHAKE_TIMEOUT_S)
            try:
                wrapped = self.ssl_context.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                return  # not TLS, or too slow to start: nothing to answer
            with self._conn_lock:
                conn = self._conns.get(id(request))
                if conn is not None:
                    self._aliases[id(wrapped)] = conn
            request = wrapped
        super().finish_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                conn = self._conns.pop(id(request), None)
                for key in [k for k, c in self._aliases.items() if c is conn]:
                    del self._aliases[key]
            app = getattr(self, "app", None)
            if app is not None:
                app.store.release()


def _fd(sock) -> int:
    try:
        return sock.fileno()
    except (OSError, ValueError):
        return -1


def _refuse(sock, reply: bytes = BUSY) -> None:
    """The 503, from the accept loop: nothing here may wait on the client."""
    try:
        sock.setblocking(False)
        sock.send(reply)
        try:
            sock.recv(65536)  # whatever request already arrived: closing then sends no reset
        except OSError:
            pass
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
