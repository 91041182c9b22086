"""Connection caps and request deadlines (potato/server/connections.py) as clients and the request
handler see them; also the tests tools/mutation.py runs against the module (docs/testing.md).

A real BoundedServer on a loopback port (127.0.0.1, or ::1) serves real client sockets, some
bound to other loopback addresses (127.0.0.2 ...) to stand for other clients. The test turns
its accept loop by hand (``accept`` is one ``handle_request``; ``service_actions`` is called as
``serve_forever`` calls it between requests), and each connection's thread runs a handler that
calls the server's hooks as potato's request handler does, one line at a time as its client
asks ("busy", "deadline 10 body", ...). What a test looks at is what a caller sees: which
clients are closed (their reads end) or answered with the 503, the reply's text,
``open_connections()``, and what each handler saw when its reads ended. The module's clock
(``connections.time``) is a fake one the test moves, so that no test waits out a deadline or
depends on the machine's speed; every real wait polls with a generous limit."""

import http.client
import select
import socket
import socketserver
import ssl
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from potato.server import connections as cn
from tests.helpers import self_signed

DOCS = Path(__file__).resolve().parents[2] / "docs"
LIMIT = 5.0  # seconds a real wait may take before the test fails (loopback: milliseconds)


# -- the rig -----------------------------------------------------------------------------------

class Clock:
    """The server's clock, as ``connections.time``: it moves only when the test says."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        return self.now


def wait_for(cond, what):
    deadline = time.monotonic() + LIMIT
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("waited %d s for %s" % (LIMIT, what))
        time.sleep(0.005)


class Closing(Exception):
    pass


class Handler(socketserver.StreamRequestHandler):
    """A connection's thread: each line its client sends is a hook to call with this
    connection's socket (as potato's handler calls them), answered with one line. When its
    reads end it notes ``connection_cut`` and says "ended" if it still can; one that the server
    closed or cut off returns once the test lets it (``server.hold``)."""

    rbufsize = 0  # never read past the line asked for: what the client sends next stays unread
    timeout = 30  # a handler that a failed test left waiting ends by itself

    def handle(self):
        s, sock, key = self.server, self.request, self.client_address[:2]
        s.sockets[key] = sock
        s.threads.append(threading.current_thread())
        while True:
            try:
                line = self.rfile.readline()
            except OSError:
                line = b""
            if not line.endswith(b"\n"):
                break
            words = line.decode().split()
            try:
                self.wfile.write(self.call(s, sock, words).encode() + b"\n")
            except OSError:  # shut while it worked: its reads end too
                break
            except Closing:
                self.rfile.close()
                sock.close()
                s.hold.wait(30)
                return
            if words == ["bye"]:
                return
        s.ends[key] = cut = s.connection_cut(sock)
        try:
            sock.sendall(b"ended\n")
            closed = False
        except OSError:  # the server shut it: its writes fail at once
            closed = True
        if closed or cut:
            s.hold.wait(30)

    @staticmethod
    def call(s, sock, words):
        if words and words[0] in ("busy", "idle", "trusted", "untrusted"):
            getattr(s, "connection_" + words[0])(sock)
        elif words and words[0] == "deadline":  # deadline SECONDS|none PHASE|- [FLOOR]
            seconds = None if words[1] == "none" else float(words[1])
            phase = "" if len(words) < 3 or words[2] == "-" else words[2]
            if len(words) > 3:
                s.connection_deadline(sock, seconds, phase, floor=float(words[3]))
            elif len(words) > 2:
                s.connection_deadline(sock, seconds, phase)
            else:
                s.connection_deadline(sock, seconds)
        elif words and words[0] == "progress":
            s.body_progress(sock, int(words[1]))
        elif words and words[0] == "watch":  # the check says what the test put in reasons
            name = words[1]

            def check():
                if name == "fails":
                    raise RuntimeError("a watch that fails")
                return s.reasons.get(name)
            s.connection_watch(sock, check)
        elif words == ["pause"]:  # answer, then read nothing until the test resumes
            sock.sendall(b"ok\n")
            s.resume.wait(30)
            return "resumed"
        elif words == ["closed"]:
            return str(s.connection_closed(sock))
        elif words == ["close"]:  # the thread closes its socket; it ends once the test lets it
            raise Closing()
        elif words == ["raise"]:  # a handler that fails (socketserver calls handle_error)
            raise RuntimeError("the handler failed")
        return "ok"


class Server(cn.BoundedServer):
    timeout = LIMIT  # one turn of the accept loop (handle_request) waits this long for a client

    def __init__(self, address, family=socket.AF_INET, app=None, **kw):
        self.address_family = family
        if app is not None:
            self.app = app
        super().__init__(address, Handler, **kw)
        self.sockets = {}  # client (address, port) -> the socket its handler was given
        self.ends = {}  # client (address, port) -> connection_cut when its reads ended
        self.reasons = {}  # watch name -> why its run ended (absent: it goes on)
        self.threads = []
        self.errors = []
        self.hold = threading.Event()  # until set, a closed connection's thread lingers
        self.resume = threading.Event()  # a paused handler reads again once set

    def handle_error(self, request, client_address):  # a handler's exception fails the test
        self.errors.append(sys.exc_info()[1])


class Client:
    """One client connection: ``do`` sends a line and returns the handler's answer."""

    def __init__(self, sock):
        self.raw = self.sock = sock
        sock.settimeout(LIMIT)
        self.file = sock.makefile("rb")
        self.key = sock.getsockname()[:2]

    def tls(self):
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        self.file.close()
        self.sock = ctx.wrap_socket(self.raw, server_hostname="localhost")
        self.file = self.sock.makefile("rb")
        return self

    def send(self, data: bytes):
        self.sock.sendall(data)

    def do(self, *words) -> str:
        self.send((" ".join(words) + "\n").encode())
        return self.file.readline().decode().strip()

    def alive(self) -> bool:
        return self.do("ping") == "ok"

    def rest(self) -> bytes:
        """All the server sends until its end (fails after LIMIT if it never ends)."""
        return self.file.read()

    def reply(self):
        """The HTTP response the server sent (a refusal), read as a client library reads it."""
        r = http.client.HTTPResponse(self.raw)
        r.begin()
        body = r.read()
        return r, body

    def closed_soon(self, within: float) -> bool:
        """Whether the server's end arrives within ``within`` seconds (a short look, used only
        where the right answer is that it does not)."""
        self.sock.settimeout(within)
        try:
            return self.file.read(1) == b""
        except (socket.timeout, TimeoutError):
            return False
        finally:
            self.sock.settimeout(LIMIT)

    def close(self):
        self.file.close()
        self.sock.close()
        self.raw.close()


class Rig:
    """A server (its caps ``cap`` and ``per``; an app for ``proxies`` and the store's release
    unless ``release`` is false), the clients the test made, and the fake clock."""

    def __init__(self, clock, cap=64, per=64, proxies=None, release=True, family=socket.AF_INET,
                 host="127.0.0.1", context=None):
        self.clock = clock
        self.released = []
        app = None
        if proxies is not None or release:
            app = SimpleNamespace(
                config=SimpleNamespace(server=SimpleNamespace(trusted_proxies=proxies or [])),
                store=SimpleNamespace(release=lambda: self.released.append(
                    threading.current_thread())))
        self.server = Server((host, 0), family, app)
        self.server.max_connections, self.server.max_per_address = cap, per
        if context is not None:
            self.server.ssl_context = context
        self.clients = []

    def tick(self, seconds):
        self.clock.now += seconds

    def accept(self, addr=None) -> Client:
        """A client connects (from ``addr``, a loopback address) and the accept loop turns."""
        s = socket.socket(self.server.address_family, socket.SOCK_STREAM)
        if addr is not None:
            s.bind((addr, 0))
        s.connect(self.server.server_address[:2])
        c = Client(s)
        self.clients.append(c)
        self.server.handle_request()
        return c

    def busy(self, addr=None) -> Client:
        c = self.accept(addr)
        assert c.do("busy") == "ok"
        return c

    def open(self) -> int:
        return self.server.open_connections()

    def probe(self, addr):
        """Whether a newcomer from ``addr`` is let in (then it leaves again), else its reply."""
        before = self.open()
        c = self.accept(addr)
        if self.open() == before:
            return c.rest()
        c.close()
        wait_for(lambda: self.open() == before, "the probe's thread to end")
        return "let in"

    def sock_of(self, client):
        """The socket the server gave ``client``'s handler."""
        wait_for(lambda: client.key in self.server.sockets, "the handler to start")
        return self.server.sockets[client.key]

    def end_of(self, client):
        """``connection_cut`` as ``client``'s handler saw it when its reads ended."""
        wait_for(lambda: client.key in self.server.ends, "the handler's reads to end")
        return self.server.ends[client.key]

    def closed(self, client) -> bool:
        """``connection_closed`` of ``client``'s connection (while its thread runs)."""
        return self.server.connection_closed(self.sock_of(client))

    def dropped(self, client) -> bool:
        """Whether the server closed ``client``'s connection: the server says so at once (the
        test's own turn of the accept loop or of service_actions closed it), and the client
        reads its end."""
        return self.closed(client) and client.rest() == b""

    def reading(self, client) -> bool:
        """Whether ``client``'s handler can still read: its socket has not reached an end.
        (The client has sent nothing since its last line, so a socket that polls readable
        was cut off; a look that does not depend on where the handler's thread is.)"""
        poller = select.poll()
        poller.register(self.sock_of(client), select.POLLIN)
        return not poller.poll(0)

    def refusal(self, addr=None) -> bytes:
        """What a newcomer from ``addr`` is answered; it must not have been let in."""
        before = self.open()
        c = self.accept(addr)
        assert self.open() == before, "let in"
        return c.rest()

    def service_actions(self):
        self.server.service_actions()

    def close(self):
        self.server.hold.set()
        self.server.resume.set()
        for c in self.clients:
            c.close()
        wait_for(lambda: self.open() == 0, "every connection's thread to end")
        for t in self.server.threads:
            t.join(LIMIT)
        self.server.server_close()
        assert self.server.errors == []


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(cn, "time", c)
    return c


@pytest.fixture
def rig(clock, monkeypatch):
    """Makes Rigs; at the end every connection's thread has ended, none with an exception."""
    made, broken = [], []
    monkeypatch.setattr(threading, "excepthook", lambda args: broken.append(args.exc_value))

    def make(**kw):
        r = Rig(clock, **kw)
        made.append(r)
        return r

    try:
        yield make
        failed = []
        for r in made:
            try:
                r.close()
            except AssertionError as e:
                failed.append(e)
        assert failed == []
    finally:
        for r in made:
            r.server.hold.set()
            r.server.resume.set()
            r.server.server_close()
    assert broken == []


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return self_signed(tmp_path_factory.mktemp("tls"))


class Context(ssl.SSLContext):
    """The server's TLS context; ``wrapping`` is set once a connection's thread begins its
    handshake (the test waits for it instead of for time)."""

    def wrap_socket(self, *args, **kwargs):
        self.wrapping.set()
        return super().wrap_socket(*args, **kwargs)


@pytest.fixture
def context(certificate):
    ctx = Context(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*certificate)
    ctx.wrapping = threading.Event()
    return ctx


# -- the arithmetic and the documented limits ----------------------------------------------------

def test_the_limits_are_the_documented_ones():
    # docs/security.md, "Resources over a long uptime", and docs/configuration.md
    security = " ".join((DOCS / "security.md").read_text().split())
    for sentence in (
            "at most %d at once, each waiting at most %d s for a read" % (
                cn.MAX_CONNECTIONS, cn.IDLE_TIMEOUT_S),
            "TLS handshakes happen in each connection's own thread with a %d s deadline"
            % cn.HANDSHAKE_TIMEOUT_S,
            "Up to %d new connections that arrive at once wait in the listen queue"
            % cn.BoundedServer.request_queue_size,
            "a request's line and headers must arrive within %d s of its first byte"
            % cn.HEADER_DEADLINE_S,
            "after its first %d s it must always have sent at least %d KB per second of its age "
            "beyond those %d s" % (cn.BODY_FLOOR_S, cn.BODY_MIN_RATE // 1024, cn.BODY_FLOOR_S),
            "should the request's own thread not get to answer, the server cuts the body off %d "
            "s later" % cn.BODY_GRACE_S,
            "within %d s plus one second per %d KB" % (cn.WRITE_FLOOR_S,
                                                       cn.WRITE_MIN_RATE // 1024),
            "once half of the %d connections are open, a client address that holds %d gets no "
            "more" % (cn.MAX_CONNECTIONS, cn.MAX_PER_ADDRESS)):
        assert sentence in security
    assert cn.BODY_MIN_RATE % 1024 == 0 and cn.WRITE_MIN_RATE % 1024 == 0
    configuration = " ".join((DOCS / "configuration.md").read_text().split())
    assert "(%d per address once the server is half full)" % cn.MAX_PER_ADDRESS in configuration


def test_a_server_has_the_documented_caps_and_no_tls_unless_given():
    s = cn.BoundedServer(("127.0.0.1", 0), socketserver.BaseRequestHandler)
    try:
        assert (s.max_connections, s.max_per_address, s.ssl_context) == (
            cn.MAX_CONNECTIONS, cn.MAX_PER_ADDRESS, None)
    finally:
        s.server_close()


def test_keyword_arguments_reach_the_socket_server():
    s = cn.BoundedServer(("127.0.0.1", 0), socketserver.BaseRequestHandler,
                         bind_and_activate=False)
    try:
        assert s.server_address == ("127.0.0.1", 0)  # not bound: the keyword was kept
    finally:
        s.server_close()


def test_body_too_slow():
    assert not cn.body_too_slow(0, 10.0)
    assert cn.body_too_slow(0, 10.5)
    assert not cn.body_too_slow(16384, 11.0) and cn.body_too_slow(16383, 11.0)
    assert not cn.body_too_slow(0, 5.0, floor=5.0) and cn.body_too_slow(0, 5.5, floor=5.0)
    assert cn.body_too_slow(0, 0.5, floor=0) and not cn.body_too_slow(0, 0.5)
    assert not cn.body_too_slow(10 ** 6, 20.0, floor=0)


def test_body_cut_at_and_write_deadline():
    assert cn.body_cut_at(100.0, 0) == 110.0
    assert cn.body_cut_at(100.0, 32768) == 112.0
    assert cn.body_cut_at(100.0, 16384, floor=0) == 101.0
    assert cn.body_cut_at(100.0, 16384, floor=30.0) == 131.0
    assert cn.write_deadline_s(0) == 10.0 and cn.write_deadline_s(16384 * 3) == 13.0


@pytest.mark.parametrize("addr,key", [
    ("10.1.2.3", "10.1.2.3"), ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
    ("::ffff:10.0.0.1", "10.0.0.1"), ("fe80::1%eth0", "fe80::/64"), ("not an ip", "not an ip"),
    ("", ""), ("::1", "::/64"), ("10.0.0.1%eth0", "10.0.0.1")])
def test_address_key(addr, key):
    assert cn.address_key(addr) == key


# -- the 503s -------------------------------------------------------------------------------------

def test_a_full_server_of_busy_connections_answers_503_and_closes(rig):
    r = rig(cap=2)
    one, two = r.busy("127.0.0.1"), r.busy("127.0.0.2")
    s = socket.create_connection(r.server.server_address)
    s.sendall(b"GET /login HTTP/1.1\r\nHost: x\r\n\r\n")  # its request arrived before the 503
    late = Client(s)
    r.clients.append(late)
    r.server.handle_request()
    reply, body = late.reply()
    assert (reply.status, reply.reason) == (503, "Service Unavailable")
    assert reply.getheader("Retry-After") == "2" and reply.getheader("Connection") == "close"
    assert reply.getheader("Content-Type") == "text/plain; charset=utf-8"
    assert body == cn.BUSY_BODY and late.rest() == b""
    assert r.open() == 2 and late.key not in r.server.sockets  # no thread for it
    assert one.alive() and two.alive()


def test_an_address_over_its_share_is_told_so(rig):
    r = rig(cap=4, per=2)
    r.busy(), r.busy()
    late = r.accept()
    reply, body = late.reply()  # Content-Length is the body's: the library reads it whole
    assert reply.status == 503 and reply.getheader("Retry-After") == "2"
    assert body.startswith(b"This address has %d or more connections open"
                           % cn.MAX_PER_ADDRESS)
    assert r.open() == 2


# -- one connection's marks -----------------------------------------------------------------------

def test_a_socket_the_server_did_not_accept_changes_nothing(rig):
    r = rig(cap=1)
    mine = r.accept()
    a, b = socket.socketpair()
    try:
        for hook in (r.server.connection_idle, r.server.connection_busy,
                     r.server.connection_trusted, r.server.connection_untrusted):
            hook(a)
        r.server.connection_deadline(a, -1.0, "headers")
        r.server.connection_watch(a, lambda: "x")
        r.server.body_progress(a, 5)
        r.service_actions()
        assert r.server.connection_cut(a) is None and r.server.connection_closed(a) is False
        r.server.shutdown_request(a)  # not one of ours: closed as socketserver closes any
        assert a.fileno() == -1
    finally:
        a.close()
        b.close()
    assert r.open() == 1 and mine.alive()


def test_at_the_cap_the_connection_idle_longest_is_closed(rig):
    r = rig(cap=2)
    a = r.accept("127.0.0.1")
    r.tick(1)
    b = r.accept("127.0.0.2")
    r.tick(1)
    c = r.accept("127.0.0.3")
    assert r.dropped(a) and r.end_of(a) is None
    assert b.alive() and c.alive() and r.closed(b) is False
    assert r.open() == 3  # a's slot is given back only when its thread ends
    d = r.accept("127.0.0.4")  # the closed one holds no slot: b makes room
    assert r.dropped(b) and d.alive() and c.alive() and r.open() == 4
    r.server.hold.set()
    wait_for(lambda: r.open() == 2, "the closed connections' threads to end")


def test_a_connection_already_closed_is_not_what_makes_room(rig):
    r = rig(cap=2)
    old = r.accept("127.0.0.1")  # closed by its deadline; its thread lingers
    assert old.do("deadline", "-1", "headers") == "ok"
    r.service_actions()
    assert r.dropped(old)
    r.tick(1)
    idle, busy = r.accept("127.0.0.1"), r.busy("127.0.0.2")
    r.tick(1)
    new = r.accept("127.0.0.3")
    assert r.dropped(idle) and new.alive() and busy.alive()


def test_a_connection_whose_thread_closed_its_socket_is_the_one_that_makes_room(rig):
    r = rig(cap=2)
    a = r.accept()
    r.tick(1)
    b = r.accept()
    r.tick(1)
    a.send(b"close\n")
    assert a.rest() == b""  # closed by its own thread, which has not ended yet
    assert r.open() == 2
    c = r.accept()
    assert b.alive() and c.alive()


def test_an_idle_mark_on_an_idle_connection_keeps_its_place(rig):
    r = rig(cap=2)
    a = r.accept()
    r.tick(1)
    b = r.accept()
    r.tick(1)
    assert a.do("idle") == "ok"  # already idle: it has waited since it was accepted
    r.tick(1)
    r.accept()
    assert r.dropped(a) and b.alive()


def test_a_connection_waits_from_its_last_response(rig):
    r = rig(cap=2)
    a = r.accept()
    r.tick(1)
    b = r.accept()
    r.tick(1)
    assert a.do("busy") == "ok" and a.do("idle") == "ok"
    r.tick(1)
    r.accept()
    assert r.dropped(b) and a.alive()


def test_one_that_waited_exactly_the_minimum_may_be_closed(rig):
    r = rig(cap=1)
    a = r.accept()  # at 0.0
    r.clock.now = cn.MIN_IDLE_TO_EVICT_S
    c = r.accept()
    assert r.dropped(a) and c.alive()


def test_of_two_that_just_came_the_older_is_closed(rig):
    r = rig(cap=2)
    a = r.accept()
    r.tick(cn.MIN_IDLE_TO_EVICT_S / 4)
    b = r.accept()
    r.tick(cn.MIN_IDLE_TO_EVICT_S / 4)
    r.accept()
    assert r.dropped(a) and b.alive()


def test_a_request_in_its_headers_may_be_closed_even_with_bytes_waiting(rig):
    for marks in (("busy", "deadline 10 headers"), ("deadline 10 headers",)):
        r = rig(cap=1)
        a = r.accept()
        for m in marks:
            assert a.do(m) == "ok"
        assert a.do("pause") == "ok"
        a.send(b"ping\n")  # more of its request, unread
        c = r.accept()
        assert r.dropped(a) and c.alive()


def test_an_idle_connection_whose_next_request_is_arriving_is_kept(rig):
    r = rig(cap=2)
    a = r.accept()
    assert a.do("busy") == "ok" and a.do("idle") == "ok"  # answered, waiting for the next
    r.tick(1)
    b = r.accept()
    r.tick(1)
    assert a.do("pause") == "ok"
    a.send(b"ping\n")  # its next request, not read yet
    r.tick(1)
    r.accept()
    assert r.dropped(b)  # the younger one made room
    r.server.resume.set()
    assert a.file.readline() == b"resumed\n" and a.file.readline() == b"ok\n"


@pytest.mark.parametrize("marks", [(), ("busy", "idle"), ("deadline 60",)],
                         ids=["new", "after a request", "a deadline without a phase"])
def test_with_only_a_connection_whose_request_is_arriving_a_newcomer_waits(rig, marks):
    r = rig(cap=1)
    only = r.accept()
    for m in marks:
        assert only.do(*m.split()) == "ok"
    only.send(b"pause\nping\n")  # its handler reads the first line only
    assert only.file.readline() == b"ok\n"
    r.tick(1)
    assert r.refusal() == cn.BUSY  # nothing else to close
    r.server.resume.set()
    assert only.file.readline() == b"resumed\n" and only.file.readline() == b"ok\n"


@pytest.mark.parametrize("phase", ["body", "write"])
def test_a_body_or_response_may_be_closed_unless_its_request_showed_credentials(rig, phase):
    r = rig(cap=1)
    a = r.busy()
    assert a.do("deadline", "60", phase) == "ok"
    r.tick(1)
    c = r.accept()
    assert r.dropped(a) and c.alive()
    r2 = rig(cap=1)
    t = r2.busy()
    assert t.do("deadline", "60", phase) == "ok" and t.do("trusted") == "ok"
    assert r2.refusal() == cn.BUSY and t.alive()
    assert t.do("busy") == "ok"  # still at work: its phase ends, its credentials stay
    assert t.do("deadline", "60", phase) == "ok"
    assert r2.refusal() == cn.BUSY
    assert t.do("untrusted") == "ok"  # answered: the rest of it may be closed like any other
    c = r2.accept()
    assert r2.dropped(t) and c.alive()


def test_credentials_do_not_outlive_their_request(rig):
    r = rig(cap=1)
    a = r.busy()
    assert a.do("trusted") == "ok" and a.do("idle") == "ok"
    assert a.do("busy") == "ok" and a.do("deadline", "60", "body") == "ok"
    c = r.accept()
    assert r.dropped(a) and c.alive()


def test_a_busy_connection_between_phases_is_not_closed(rig):
    r = rig(cap=1)
    a = r.busy()
    assert a.do("deadline", "60", "other") == "ok"
    assert r.refusal() == cn.BUSY and a.alive()


# -- one address's share --------------------------------------------------------------------------

def test_one_address_gets_its_share_once_half_full(rig):
    r = rig(cap=8, per=2)
    mine = [r.busy() for _ in range(4)]  # under half, one address may hold more
    assert r.open() == 4
    assert mine[0].do("deadline", "10", "body") == "ok"  # at work: not closed for its own
    assert r.probe("127.0.0.1").startswith(b"HTTP/1.1 503")
    assert mine[1].do("idle") == "ok"
    r.tick(1)
    new = r.accept()  # its own idle one made room
    assert r.dropped(mine[1]) and new.alive()
    assert r.open() == 5
    assert r.probe("127.0.0.2") == "let in"  # another address is not held back


def test_the_share_counts_open_connections_only(rig):
    r = rig(cap=4, per=2)

    def close(c):  # at its deadline: its thread lingers, and it holds no share
        assert c.do("deadline", "-1", "headers") == "ok"
        r.service_actions()
        assert r.dropped(c)

    a1 = r.busy("127.0.0.1")
    assert r.probe("127.0.0.1") == "let in"  # under half full
    b1 = r.busy("127.0.0.2")
    assert r.probe("127.0.0.1") == "let in"  # half full, one of its two
    a2 = r.busy("127.0.0.1")
    assert r.probe("127.0.0.1").startswith(b"HTTP/1.1 503")
    assert r.probe("127.0.0.2") == "let in"
    close(a2)
    assert r.probe("127.0.0.1") == "let in"  # half full, one of its own open
    a3 = r.busy("127.0.0.1")
    close(b1)
    assert r.open() == 4  # two open, two lingering
    assert r.probe("127.0.0.1").startswith(b"HTTP/1.1 503")  # two open, both its own
    close(a1)
    assert r.probe("127.0.0.1") == "let in"  # one open: under half full
    assert a3.alive()


def test_the_share_begins_at_half_the_cap(rig):
    r = rig(cap=4, per=1)
    r.busy("127.0.0.1")
    assert r.probe("127.0.0.1") == "let in"  # one open, under half of four
    r.busy("127.0.0.2")
    assert r.probe("127.0.0.1").startswith(b"HTTP/1.1 503")
    r5 = rig(cap=5, per=2)  # half of five is two
    r5.busy("127.0.0.1"), r5.busy("127.0.0.1")
    assert r5.probe("127.0.0.1").startswith(b"HTTP/1.1 503")


def test_a_trusted_proxy_has_no_share(rig):
    r = rig(cap=5, per=1, proxies=["127.0.9.0/24"])
    assert r.server.unlimited_address("127.0.9.1")
    assert not r.server.unlimited_address("127.0.8.1")
    for _ in range(3):
        r.busy("127.0.9.1")
    assert r.open() == 3  # past half the cap, three from one address
    r.busy("127.0.8.1")
    assert b"This address has" in r.probe("127.0.8.1")  # an address like any other
    assert r.probe("127.0.9.2") == "let in"
    assert not rig(release=False).server.unlimited_address("127.0.9.1")  # no app: no proxies


# -- the biggest address gives way ----------------------------------------------------------------

def test_the_biggest_address_gives_way_and_proxies_last(rig):
    r = rig(cap=9, proxies=["127.0.9.0/24"])
    big = [r.accept("127.0.0.1")]
    r.tick(1)
    big += [r.accept("127.0.0.1"), r.accept("127.0.0.1")]
    small = r.accept("127.0.0.2")
    proxy = [r.accept("127.0.9.1") for _ in range(5)]
    r.tick(1)
    assert big[0].do("busy") == "ok" and big[0].do("idle") == "ok"  # waits from now
    r.tick(1)
    r.busy("127.0.0.3")  # all nine taken: the oldest of the address that holds the most
    assert r.dropped(big[1]) and big[0].alive() and big[2].alive()
    for c in (big[0], big[2]):
        assert c.do("busy") == "ok"
    r.busy("127.0.0.4")  # its others are at work: the next address
    assert r.dropped(small) and big[0].alive()
    r.busy("127.0.0.5")  # every limited one at work: a proxy's
    assert r.dropped(proxy[0])
    for c in proxy[1:]:
        assert c.do("busy") == "ok"
    assert r.refusal("127.0.0.6") == cn.BUSY


def test_closed_connections_do_not_make_an_address_the_biggest(rig):
    r = rig(cap=3)
    three = [r.accept("127.0.0.2") for _ in range(3)]
    for c in three[:2]:
        assert c.do("deadline", "-1", "headers") == "ok"
    r.service_actions()
    assert all(r.dropped(c) for c in three[:2])
    r.tick(1)
    two = [r.accept("127.0.0.1") for _ in range(2)]
    r.tick(1)
    new = r.accept("127.0.0.3")  # 127.0.0.1 holds two open, 127.0.0.2 one: one of the two
    assert r.dropped(two[0]) and three[2].alive() and new.alive()


def test_the_address_that_holds_the_most_gives_way_whatever_came_first(rig):
    r = rig(cap=4)
    first = r.accept("127.0.0.1")
    r.tick(1)
    many = [r.accept("127.0.0.2") for _ in range(3)]
    r.tick(1)
    r.accept("127.0.0.3")
    assert r.dropped(many[0]) and first.alive()


def test_an_address_whose_connections_are_all_closed_is_passed_over(rig):
    r = rig(cap=2)
    gone = r.accept("127.0.0.9")
    assert gone.do("deadline", "-1", "headers") == "ok"
    r.service_actions()
    assert r.dropped(gone)
    one = r.accept("127.0.0.1")
    two = r.busy("127.0.0.2")
    r.tick(1)
    new = r.accept("127.0.0.3")
    assert r.dropped(one) and two.alive() and new.alive()


def test_closed_connections_whose_threads_linger_hold_newcomers_back(rig):
    r = rig(cap=2)
    # three closed, their threads still running: fewer than twice the cap
    for n in range(3):
        c = r.accept("127.0.0.%d" % (n + 1))
        assert c.do("deadline", "-1", "headers") == "ok"
        r.service_actions()
        assert r.dropped(c)
    assert r.open() == 3
    fourth = r.accept("127.0.0.8")
    assert fourth.alive() and r.open() == 4
    assert fourth.do("deadline", "-1", "headers") == "ok"
    r.service_actions()
    assert r.dropped(fourth)
    assert r.refusal("127.0.0.9") == cn.BUSY  # four lingering: twice the cap
    r.server.hold.set()
    wait_for(lambda: r.open() == 0, "the closed connections' threads to end")
    assert r.accept("127.0.0.9").alive()


# -- deadlines, bodies and watches ----------------------------------------------------------------

def test_late_headers_and_an_untaken_response_are_closed_at_their_deadline(rig):
    r = rig()
    idle = r.accept()  # no deadline: passed over, the others are still looked at
    headers, write, none, plain = r.accept(), r.accept(), r.accept(), r.accept()
    assert headers.do("deadline", "5", "headers") == "ok"
    assert write.do("busy") == "ok" and write.do("deadline", "8", "write") == "ok"
    assert none.do("deadline", "none", "headers") == "ok"
    assert plain.do("deadline", "5") == "ok"
    r.tick(5)
    r.service_actions()  # due now, not yet late
    assert headers.alive() and plain.alive()
    r.tick(0.5)
    r.service_actions()
    assert r.dropped(headers) and r.dropped(plain)  # closed outright
    assert write.alive()
    r.tick(3)
    r.service_actions()
    assert r.dropped(write)
    r.tick(1000)
    r.service_actions()
    assert idle.alive() and none.alive()


def test_a_busy_or_idle_mark_ends_the_deadline(rig):
    r = rig()
    a, b = r.accept(), r.accept()
    assert a.do("deadline", "1", "headers") == "ok" and a.do("busy") == "ok"
    assert b.do("busy") == "ok" and b.do("deadline", "1", "write") == "ok"
    assert b.do("idle") == "ok"
    r.tick(5)
    r.service_actions()
    assert a.alive() and b.alive()


def test_a_body_is_judged_by_its_progress_and_only_its_reads_end(rig):
    r = rig()
    a = r.busy()
    r.tick(100)
    assert a.do("deadline", "1", "body", "0") == "ok"
    r.tick(cn.BODY_GRACE_S + 1)  # a second past the grace: it owes 16 KB
    assert a.do("progress", str(cn.BODY_MIN_RATE + 1)) == "ok"
    r.service_actions()
    assert r.reading(a) and a.alive()
    assert a.do("progress", str(cn.BODY_MIN_RATE - 1)) == "ok"
    r.service_actions()
    assert a.rest() == b"ended\n"  # its thread may still answer (a 408)
    assert r.end_of(a) is None


def test_a_new_deadline_starts_the_body_over(rig):
    r = rig()
    a = r.busy()
    assert a.do("deadline", "1", "body", "0") == "ok"
    r.tick(5)
    assert a.do("progress", str(cn.BODY_MIN_RATE * 10)) == "ok"
    assert a.do("deadline", "1", "body", "0") == "ok"  # a new body: from now, nothing yet
    r.tick(cn.BODY_GRACE_S)
    r.service_actions()
    assert r.reading(a)
    r.tick(1 / cn.BODY_MIN_RATE)  # it owes its first byte
    r.service_actions()
    assert a.rest() == b"ended\n"


def test_a_body_has_the_default_floor_unless_given_one(rig):
    r = rig()
    plain, own = r.busy(), r.busy()
    assert plain.do("deadline", "1", "body") == "ok"
    assert own.do("deadline", "1", "body", "30") == "ok"
    r.tick(cn.BODY_FLOOR_S + cn.BODY_GRACE_S)
    r.service_actions()
    assert r.reading(plain) and r.reading(own)
    r.tick(0.5)
    r.service_actions()
    assert plain.rest() == b"ended\n" and r.reading(own)
    assert own.do("deadline", "1", "body") == "ok"  # its next body has the default again
    r.tick(cn.BODY_FLOOR_S + cn.BODY_GRACE_S + 0.5)
    r.service_actions()
    assert own.rest() == b"ended\n"


def test_a_watch_cuts_the_body_off_with_its_reason(rig):
    r = rig()
    a = r.busy()
    assert a.do("deadline", "60", "body") == "ok" and a.do("watch", "run1") == "ok"
    r.service_actions()
    assert r.reading(a) and r.server.connection_cut(r.sock_of(a)) is None
    r.server.reasons["run1"] = "the run ended"
    r.service_actions()
    assert a.file.readline() == b"ended\n"  # its reads end; it answers with the reason
    assert r.end_of(a) == "the run ended" and r.closed(a) is False
    r.server.reasons["run1"] = "again"
    r.service_actions()
    assert r.server.connection_cut(r.sock_of(a)) == "the run ended"  # asked until it said
    r.server.connection_idle(r.sock_of(a))  # the request is over: so is its cut
    assert r.server.connection_cut(r.sock_of(a)) is None


def test_a_watch_needs_no_deadline_and_one_that_fails_cuts_nothing(rig):
    r = rig()
    a, b = r.busy(), r.busy()
    assert a.do("watch", "run2") == "ok" and b.do("watch", "fails") == "ok"
    r.server.reasons["run2"] = "cancelled"
    r.service_actions()
    assert a.file.readline() == b"ended\n" and r.end_of(a) == "cancelled"
    assert r.reading(b) and r.server.connection_cut(r.sock_of(b)) is None


def test_a_watch_ends_with_its_request(rig):
    r = rig()
    a = r.busy()
    assert a.do("watch", "run3") == "ok" and a.do("idle") == "ok"
    r.server.reasons["run3"] = "failed"
    r.service_actions()
    assert r.reading(a) and r.server.connection_cut(r.sock_of(a)) is None


def test_a_closed_connection_is_not_asked_about_its_watch(rig):
    r = rig()
    a = r.busy()
    assert a.do("watch", "run4") == "ok" and a.do("deadline", "-1", "headers") == "ok"
    r.service_actions()
    assert r.dropped(a)
    r.server.reasons["run4"] = "ended"
    r.service_actions()
    assert r.server.connection_cut(r.sock_of(a)) is None
    assert r.end_of(a) is None and r.closed(a)


# -- the end of a connection ----------------------------------------------------------------------

def test_a_connection_gives_its_slot_back_when_its_thread_ends(rig):
    r = rig()
    a = r.accept()
    assert a.alive() and r.open() == 1
    a.close()
    wait_for(lambda: r.open() == 0, "its thread to end")
    assert r.released == [r.server.threads[0]]  # the store's connection, in its thread
    b = r.accept()
    assert b.do("bye") == "ok" and b.rest() == b""  # the handler returned: the server closes
    wait_for(lambda: r.open() == 0, "its thread to end")
    assert len(r.released) == 2
    plain = rig(release=False)  # a server with no app: nothing to release
    c = plain.accept()
    assert c.do("bye") == "ok" and c.rest() == b""
    wait_for(lambda: plain.open() == 0, "its thread to end")


def test_a_connection_whose_handler_fails_gives_its_slot_back(rig):
    r = rig()
    a = r.accept()
    a.send(b"raise\n")
    assert a.rest() == b""
    wait_for(lambda: r.open() == 0, "its thread to end")
    assert [str(e) for e in r.server.errors] == ["the handler failed"]
    assert r.released == r.server.threads
    r.server.errors.clear()


def test_a_client_without_an_address_is_served(rig):
    r = rig(cap=1)
    a, b = socket.socketpair()  # a Unix socket's peer has no address
    client = Client(b)
    r.clients.append(client)
    r.server.process_request(a, "")
    assert r.open() == 1 and client.alive()
    r.server.hold.set()  # its "ended" fails on a Unix socket, as if the server had closed it
    client.close()
    wait_for(lambda: r.open() == 0, "its thread to end")
    a.close()


def test_closing_the_server_does_not_wait_for_connection_threads(rig):
    r = rig()
    a = r.accept()
    assert a.alive()
    thread = r.server.threads[0]
    r.server.server_close()  # a connection still open: its thread is not waited for
    assert thread.daemon and thread.is_alive()


def test_a_restarted_server_binds_its_port_at_once(rig):
    r = rig(cap=1)
    r.busy()
    refused = r.accept()  # the server closes first: its side of the connection waits out TIME_WAIT
    assert refused.rest() == cn.BUSY
    r.close()
    again = cn.BoundedServer(r.server.server_address, socketserver.BaseRequestHandler)
    again.server_close()


def test_a_burst_of_connections_waits_in_the_queue(rig):
    r = rig()
    burst = []
    try:
        for _ in range(r.server.request_queue_size):  # all at once, from one address
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(r.server.server_address)
            burst.append(s)
        pending, deadline = list(burst), time.monotonic() + LIMIT
        while pending and time.monotonic() < deadline:  # each connects, none accepted yet
            _, done, _ = select.select([], pending, [], 0.1)
            pending = [s for s in pending if s not in done]
        assert pending == []
        assert [s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) for s in burst] == \
            [0] * len(burst)
    finally:
        for s in burst:
            s.close()


# -- TLS ------------------------------------------------------------------------------------------

def test_over_tls_the_wrapped_socket_is_closed_to_make_room(rig, context):
    r = rig(cap=1, context=context)
    a = r.accept().tls()
    assert a.alive()
    r.tick(1)
    r.accept()  # a plain newcomer: its handshake never starts
    assert r.dropped(a)


def test_over_tls_the_connections_marks_hold(rig, context):
    r = rig(cap=2, context=context)
    a = r.accept().tls()
    first = r.accept().tls()
    assert first.do("bye") == "ok"  # one that ended: the other's marks still count
    wait_for(lambda: r.open() == 1, "its thread to end")
    assert a.do("busy") == "ok"
    b = r.accept().tls()
    assert b.do("busy") == "ok"
    assert r.refusal() == cn.BUSY  # the 503 goes out before any handshake
    assert a.do("closed") == "False" and a.do("idle") == "ok"
    r.tick(1)
    r.accept()
    assert r.dropped(a) and b.alive()


def test_the_wrapped_socket_is_closed_when_its_thread_ends(rig, context):
    r = rig(context=context)
    a = r.accept().tls()
    assert a.do("bye") == "ok"
    assert a.rest() == b""
    wait_for(lambda: r.open() == 0, "its thread to end")
    assert r.sock_of(a).fileno() == -1


def test_a_handshake_has_a_deadline(rig, context):
    r = rig(context=context)
    a = r.accept()  # says nothing yet
    assert context.wrapping.wait(LIMIT)
    r.tick(cn.HANDSHAKE_TIMEOUT_S)
    r.service_actions()
    assert not a.closed_soon(0.2)
    a.tls()  # it was not closed: the handshake goes through
    assert a.alive()
    r.tick(0.5)  # the deadline of its start still runs (potato's handler sets its own)
    r.service_actions()
    assert r.dropped(a)


def test_a_connection_in_its_handshake_is_closed_to_make_room(rig, context, monkeypatch):
    monkeypatch.setattr(cn, "HANDSHAKE_TIMEOUT_S", 60.0)  # only the cap can close it here
    r = rig(cap=1, context=context)
    a = r.accept()  # a silent client: its thread waits in the handshake
    assert context.wrapping.wait(LIMIT)
    r.tick(1)
    r.accept()
    assert a.rest() == b""


def test_a_silent_tls_client_is_dropped_by_its_own_thread(rig, context, monkeypatch):
    monkeypatch.setattr(cn, "HANDSHAKE_TIMEOUT_S", 0.3)
    r = rig(context=context)
    a = r.accept()  # never starts its handshake; nobody calls service_actions
    assert a.rest() == b""
    wait_for(lambda: r.open() == 0, "its thread to end")


def test_a_client_that_does_not_speak_tls_gets_nothing(rig, context):
    r = rig(context=context)
    a = r.accept()
    a.send(b"GET / HTTP/1.1\r\n\r\n")
    try:
        assert a.rest() == b""
    except ConnectionResetError:  # closed with the request unread
        pass
    wait_for(lambda: r.open() == 0, "its thread to end")
    assert r.server.sockets == {}  # never handled


# -- IPv6 -----------------------------------------------------------------------------------------

def test_an_ipv6_client_is_capped_and_closed_like_any_other(rig):
    try:
        r = rig(cap=2, per=1, family=socket.AF_INET6, host="::1")
    except OSError as e:
        pytest.skip("no IPv6 loopback here: %s" % e)
    a = r.busy()
    assert b"This address has" in r.probe(None)  # ::1's /64 holds its share, one of two
    r.server.max_per_address = 2
    r.tick(1)
    b = r.accept()
    r.tick(1)
    assert a.do("idle") == "ok"
    r.tick(1)
    c = r.accept()  # its own that waited longest makes room
    assert r.dropped(b) and a.alive() and c.alive()
