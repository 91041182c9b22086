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
arrive within ``HEADER_DEADLINE_S`` of its first byte, so a client trickling one byte every few
seconds cannot hold a connection for long. A body must keep up ``BODY_MIN_RATE`` after a
``BODY_FLOOR_S`` grace (progress, not a total: a client that sends six bytes of a 16 MB body
is cut off after seconds, not minutes), and a response must be taken by the client within
``write_deadline_s`` of its start. The accept loop closes connections past their deadline
(``service_actions``). Once half the connections are open, one client address (an IPv6 /64)
may hold at most ``MAX_PER_ADDRESS`` of them (addresses in ``server.trusted_proxies``
excepted: a proxy speaks for many clients); with every slot taken, a newcomer is let in by
closing the oldest connection of the address that holds the most and has one that is not yet
authenticated (idle, in its headers, in a body or a response sent before an admin key or a
run token was shown). Over TLS the wrapped socket is the one closed; a connection's slot is
given back only when its thread ends. A request may ask to be watched (``connection_watch``):
the accept loop cuts its body off once the watch gives a reason (an agent's run has ended).
How many run-token requests may be under way is the training side's business
(training/agent_limits.py).
"""

import ipaddress
import select
import socket
import ssl
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Dict, List, Optional

from potato.config.netaddr import in_networks

MAX_CONNECTIONS = 128
IDLE_TIMEOUT_S = 60.0
HANDSHAKE_TIMEOUT_S = 10.0
MIN_IDLE_TO_EVICT_S = 0.2
MAX_PER_ADDRESS = 32  # open connections of one client address, once half of all are open
HEADER_DEADLINE_S = 10.0  # request line and headers, from their first byte
BODY_FLOOR_S = 10.0  # a body may take this long, plus one second per BODY_MIN_RATE bytes
BODY_MIN_RATE = 16 << 10  # bytes per second
BODY_GRACE_S = 2.0  # past the floor, the server cuts a body whose thread has not answered


WRITE_FLOOR_S = 10.0  # a response may take this long to be taken, plus one second per 16 KB
WRITE_MIN_RATE = 16 << 10


def body_too_slow(got: int, elapsed: float, floor: Optional[float] = None) -> bool:
    """Whether a body that has sent ``got`` bytes in ``elapsed`` seconds is behind the floor
    (``floor`` s of grace, BODY_FLOOR_S unless given; an agent's model file has more)."""
    return got < BODY_MIN_RATE * (elapsed - (BODY_FLOOR_S if floor is None else floor))


def body_cut_at(began: float, got: int, floor: Optional[float] = None) -> float:
    """When a body that began at ``began`` and has sent ``got`` bytes falls behind the floor."""
    return began + (BODY_FLOOR_S if floor is None else floor) + got / BODY_MIN_RATE


def write_deadline_s(n: int) -> float:
    """Seconds a client may take to receive a response of ``n`` bytes."""
    return WRITE_FLOOR_S + n / WRITE_MIN_RATE


def address_key(addr: str) -> str:
    """The unit a share is counted in: an IPv4 address, or an IPv6 /64 (one host's)."""
    try:
        ip = ipaddress.ip_address(addr.split("%")[0])
    except ValueError:
        return addr
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network("%s/64" % ip, strict=False))
    return str(ip)


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
    __slots__ = ("sock", "live", "since", "busy", "addr", "deadline", "phase", "trusted", "got",
                 "started", "closed", "limited", "floor", "watch", "cut")

    def __init__(self, sock, addr: str = "", limited: bool = True):
        self.sock = sock  # the accepted socket: the key in BoundedServer._conns
        self.live = sock  # the socket in use: over TLS the wrapped one (``sock`` is detached)
        self.since = time.monotonic()
        self.busy = False
        self.addr = addr  # address_key() of the client
        self.limited = limited  # not a trusted proxy
        self.deadline: Optional[float] = None  # monotonic; past it the connection is closed
        self.phase = ""  # "headers", "body" or "write" while a deadline runs
        self.trusted = False  # this request showed an admin key or session, or a run token
        self.got = 0  # body bytes received so far (phase "body")
        self.started = 0.0  # when the body began
        self.closed = False  # shut down by the server; the slot is free once its thread ends
        self.floor: Optional[float] = None  # the body's grace (body_too_slow), None: default
        self.watch = None  # () -> str or None: while it says why, the request is cut off
        self.cut: Optional[str] = None  # why the server cut this request's body off

    def evictable(self, at_work: bool = True) -> bool:
        """Idle or in its headers; with ``at_work``, also in a body or a response of a request
        that showed no admin key or run token (an annotator's own session is no credential:
        anyone may make one)."""
        if self.closed:
            return False
        if not self.busy or self.phase == "headers":
            return True
        return at_work and self.phase in ("body", "write") and not self.trusted

    def shut(self, how: int = socket.SHUT_RDWR) -> None:
        """Shut the connection from another thread: the base socket's method, so that a TLS
        socket's state is not touched under its own thread."""
        try:
            socket.socket.shutdown(self.live, how)
        except (OSError, ValueError):
            pass
        if how == socket.SHUT_RDWR:
            self.closed = True


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
        self._conns: Dict[int, _Conn] = {}  # by id() of the accepted socket, until its thread ends
        super().__init__(*args, **kwargs)

    # -- the handler says when a connection works and when it waits ---------------------------
    def connection_idle(self, sock) -> None:
        self._mark(sock, False)

    def connection_busy(self, sock) -> None:
        self._mark(sock, True)

    def _find(self, sock) -> Optional[_Conn]:
        return self._conns.get(id(sock)) or self._aliases.get(id(sock))

    def _mark(self, sock, busy: bool) -> None:
        with self._conn_lock:
            conn = self._find(sock)
            if conn is not None and conn.busy != busy:  # waiting counts from accept or the
                conn.busy = busy                          # last response, not from our look
                conn.since = time.monotonic()
            if conn is not None:
                conn.deadline, conn.phase = None, ""
                if not busy:
                    conn.trusted = False  # each request shows its own credentials
                    conn.watch = conn.cut = None

    def connection_trusted(self, sock) -> None:
        """This request showed an admin key or session, or a run token: it is not closed to
        make room while its body or response is under way."""
        with self._conn_lock:
            conn = self._find(sock)
            if conn is not None:
                conn.trusted = True

    def connection_untrusted(self, sock) -> None:
        """The request that showed credentials has been answered: what is left of its response
        in flight, and the next request, may be closed to make room like any other."""
        with self._conn_lock:
            conn = self._find(sock)
            if conn is not None:
                conn.trusted = False

    def connection_deadline(self, sock, seconds: Optional[float], phase: str = "",
                            floor: Optional[float] = None) -> None:
        """From now, ``sock`` has ``seconds`` to finish its ``phase`` ("headers", "write") or
        it is closed (None: no deadline). Phase "body" has no fixed end: it must keep up the
        rate that ``body_progress`` reports against (``body_too_slow``, with ``floor``)."""
        with self._conn_lock:
            conn = self._find(sock)
            if conn is not None:
                now = time.monotonic()
                conn.deadline = None if seconds is None else now + seconds
                conn.phase = phase
                conn.got, conn.started = 0, now
                if phase == "body":
                    conn.floor = floor

    def connection_watch(self, sock, check) -> None:
        """For this request: ``check()`` is asked by the accept loop; once it returns a reason
        (a run that ended), the body is cut off (its reads end) and ``connection_cut`` says
        why. Ends with the request."""
        with self._conn_lock:
            conn = self._find(sock)
            if conn is not None:
                conn.watch, conn.cut = check, None

    def connection_cut(self, sock) -> Optional[str]:
        conn = self._find(sock)
        return conn.cut if conn is not None else None

    def body_progress(self, sock, got: int) -> None:
        conn = self._find(sock)
        if conn is not None:
            conn.got = got  # one attribute: read by service_actions without the lock

    def service_actions(self) -> None:
        """Called by the accept loop between requests: close connections past their deadline.
        A body that falls behind is only cut off from reading (its thread answers 408); late
        headers or a response the client does not take are closed outright."""
        super().service_actions()
        now = time.monotonic()
        with self._conn_lock:
            for conn in self._conns.values():
                if conn.watch is not None and not conn.closed and conn.cut is None:
                    conn.cut = _ask(conn.watch)
                    if conn.cut is not None:  # its thread answers with the reason
                        conn.deadline = None
                        conn.shut(socket.SHUT_RD)
                if conn.closed or conn.deadline is None:
                    continue
                if conn.phase == "body":  # its thread answers 408 at the floor; this is
                    if body_too_slow(conn.got, now - conn.started - BODY_GRACE_S,  # a backstop
                                     conn.floor):
                        conn.deadline = None
                        conn.shut(socket.SHUT_RD)
                elif conn.deadline < now:
                    conn.deadline = None
                    conn.shut()

    def connection_closed(self, sock) -> bool:
        conn = self._find(sock)
        return conn is not None and conn.closed

    def open_connections(self) -> int:
        with self._conn_lock:
            return len(self._conns)

    # -- socketserver hooks ---------------------------------------------------------------------
    def process_request(self, request, client_address):
        addr = address_key(str(client_address[0]) if client_address else "")
        limited = not self.unlimited_address(str(client_address[0]) if client_address else "")
        with self._conn_lock:
            refusal = None
            if limited and self._over_share(addr):
                self._evict(self._oldest([c for c in self._conns.values() if c.addr == addr],
                                         at_work=False))  # its own, not at work
                if self._over_share(addr):
                    refusal = TOO_MANY
            if refusal is None and self._open() >= self.max_connections:
                self._evict(self._from_the_biggest())
                if self._open() >= self.max_connections:
                    refusal = BUSY
            if refusal is None and len(self._conns) >= 2 * self.max_connections:
                refusal = BUSY  # closed ones whose threads linger: every newcomer waits
            if refusal is None:
                self._conns[id(request)] = _Conn(request, addr, limited)
        if refusal is not None:  # every connection is at work: say so, briefly, and close
            _refuse(request, refusal)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def unlimited_address(self, addr: str) -> bool:
        """A trusted proxy (``server.trusted_proxies``) is one address for many clients."""
        app = getattr(self, "app", None)
        return app is not None and in_networks(addr, app.config.server.trusted_proxies)

    def _open(self) -> int:
        """Connections that hold a slot: not yet closed by the server."""
        return sum(1 for c in self._conns.values() if not c.closed)

    def _over_share(self, addr: str) -> bool:
        """Whether ``addr`` has its share: MAX_PER_ADDRESS connections once the server is half
        full. Below that an address may open more (a lab behind one NAT address, a test)."""
        if self._open() < self.max_connections // 2:
            return False
        return sum(1 for c in self._conns.values()
                   if c.addr == addr and not c.closed) >= self.max_per_address

    def _from_the_biggest(self) -> Optional[_Conn]:
        """The connection to close for a newcomer when all slots are taken: the oldest that
        may be closed, of the address that holds the most (trusted proxies last)."""
        counts: Dict[str, int] = {}
        for c in self._conns.values():
            if not c.closed:
                counts[c.addr] = counts.get(c.addr, 0) + 1
        by_addr: Dict[str, List[_Conn]] = {}
        for c in self._conns.values():
            by_addr.setdefault(c.addr, []).append(c)
        for addr in sorted(by_addr, key=lambda a: (by_addr[a][0].limited, counts.get(a, 0)),
                           reverse=True):
            conn = self._oldest(by_addr[addr])
            if conn is not None:
                return conn
        return None

    @staticmethod
    def _oldest(conns: List[_Conn], at_work: bool = True) -> Optional[_Conn]:
        """Of ``conns``, the one that has waited longest and may be closed (``_Conn.evictable``);
        never an idle one whose next request is already arriving (it has bytes to read)."""
        now = time.monotonic()
        waiting = sorted((c for c in conns if c.evictable(at_work)), key=lambda c: c.since)
        # Those that waited a while first; under a flood, any that is not mid-request.
        waiting = ([c for c in waiting if now - c.since >= MIN_IDLE_TO_EVICT_S]
                   + [c for c in waiting if now - c.since < MIN_IDLE_TO_EVICT_S])
        for conn in waiting:
            if not conn.busy and conn.phase == "":
                if _readable(conn.live):
                    continue
            return conn
        return None

    @staticmethod
    def _evict(conn: Optional[_Conn]) -> None:
        """Close ``conn``: its thread's read or write returns and it ends (and then gives back
        its slot; until then it holds no share)."""
        if conn is not None:
            conn.shut()
            conn.closed = True

    def finish_request(self, request, client_address):
        if self.ssl_context is not None:  # the handshake here, in this connection's thread
            request.settimeout(HANDSHAKE_TIMEOUT_S)
            with self._conn_lock:
                conn = self._conns.get(id(request))
                if conn is not None:  # a handshake is closed like late headers
                    conn.deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
                    conn.phase = "headers"
            try:
                wrapped = self.ssl_context.wrap_socket(request, server_side=True,
                                                       do_handshake_on_connect=False)
                with self._conn_lock:  # from here ``request`` is detached: shut ``wrapped``
                    if conn is not None:
                        conn.live = wrapped
                        self._aliases[id(wrapped)] = conn
                        if conn.closed:
                            conn.shut()
                wrapped.do_handshake()
            except (OSError, ssl.SSLError):
                return  # not TLS, or too slow to start: nothing to answer
            request = wrapped
        super().finish_request(request, client_address)

    def shutdown_request(self, request):
        with self._conn_lock:
            conn = self._conns.get(id(request))
        if conn is not None and conn.live is not request:  # TLS: close the wrapped socket
            try:
                conn.live.close()
            except OSError:
                pass
        super().shutdown_request(request)

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


def _ask(check) -> Optional[str]:
    try:
        return check() or None
    except Exception:  # a watch that fails cuts nothing
        return None


def _readable(sock) -> bool:
    """Whether ``sock`` has bytes (or an end) to read now: poll, not select, which fails for
    a descriptor of 1024 or more."""
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return False


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
