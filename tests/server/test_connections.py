"""Request deadlines and connection caps (potato/server/connections.py), unit by unit; also the
tests tools/mutation.py runs against the module (issue 26). A BoundedServer bound to a loopback port that never serves: its
hooks are called directly with socket pairs standing in for accepted connections, and
socketserver's thread start is recorded instead of run."""

import socket
import socketserver
import time
from types import SimpleNamespace

import pytest

from potato.server import connections as cn


# -- the arithmetic ------------------------------------------------------------------------------

def test_constants_are_the_documented_ones():
    assert (cn.MAX_CONNECTIONS, cn.MAX_PER_ADDRESS, cn.IDLE_TIMEOUT_S) == (128, 32, 60.0)
    assert (cn.HEADER_DEADLINE_S, cn.BODY_FLOOR_S, cn.BODY_GRACE_S) == (10.0, 10.0, 2.0)
    assert (cn.BODY_MIN_RATE, cn.WRITE_MIN_RATE, cn.WRITE_FLOOR_S) == (16384, 16384, 10.0)
    assert (cn.HANDSHAKE_TIMEOUT_S, cn.MIN_IDLE_TO_EVICT_S) == (10.0, 0.2)
    assert cn.BoundedServer.request_queue_size == 128
    assert cn.BoundedServer.daemon_threads is True and cn.BoundedServer.allow_reuse_address


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
    ("", ""), ("::1", "::/64")])
def test_address_key(addr, key):
    assert cn.address_key(addr) == key


def test_the_busy_replies():
    assert cn.BUSY == (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nContent-Type: "
                       b"text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 37"
                       b"\r\n\r\nThe server is busy; try again soon.\r\n")
    assert cn.TOO_MANY.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"\r\n\r\nThis address has 32 or more connections open" in cn.TOO_MANY
    head, body = cn.TOO_MANY.split(b"\r\n\r\n", 1)
    assert b"Content-Length: %d" % len(body) in head


# -- one connection ----------------------------------------------------------------------------------

@pytest.fixture
def pairs():
    made = []

    def pair():
        a, b = socket.socketpair()
        made.extend((a, b))
        return a, b

    yield pair
    for s in made:
        s.close()


def test_a_new_connection(pairs):
    a, _ = pairs()
    before = time.monotonic()
    c = cn._Conn(a, "1.2.3.4")
    assert c.sock is a and c.live is a and c.addr == "1.2.3.4" and c.limited is True
    assert before <= c.since <= time.monotonic()
    assert (c.busy, c.deadline, c.phase, c.trusted, c.got, c.started, c.closed) == (
        False, None, "", False, 0, 0.0, False)
    assert (c.floor, c.watch, c.cut) == (None, None, None)
    assert cn._Conn(a).addr == "" and cn._Conn(a, limited=False).limited is False


def test_which_connections_may_be_closed(pairs):
    a, _ = pairs()
    c = cn._Conn(a)
    assert c.evictable() and c.evictable(False)  # idle
    c.busy = True
    assert not c.evictable() and not c.evictable(False)  # at work, between phases
    c.phase = "headers"
    assert c.evictable() and c.evictable(False)
    for phase in ("body", "write"):
        c.phase = phase
        assert c.evictable() and not c.evictable(False)
        c.trusted = True
        assert not c.evictable()
        c.trusted = False
    c.phase = "other"
    assert not c.evictable()
    c.busy, c.phase = False, ""
    c.closed = True
    assert not c.evictable() and not c.evictable(False)


def test_shut(pairs):
    a, b = pairs()
    c = cn._Conn(a)
    c.shut(socket.SHUT_RD)
    assert c.closed is False
    c.shut()
    assert c.closed is True
    assert b.recv(10) == b""  # the peer sees the end
    a.close()
    c.shut()  # a closed socket: nothing raised
    assert c.closed


# -- the server's bookkeeping ------------------------------------------------------------------------

class Server(cn.BoundedServer):
    def __init__(self, cap=64, per=64, app=None):
        super().__init__(("127.0.0.1", 0), socketserver.BaseRequestHandler)
        self.max_connections, self.max_per_address = cap, per
        if app is not None:
            self.app = app


@pytest.fixture
def server(monkeypatch):
    started = []
    monkeypatch.setattr(socketserver.ThreadingMixIn, "process_request",
                        lambda self, request, addr: started.append((request, addr)))
    made = []

    def make(**kw):
        s = Server(**kw)
        s.started = started
        made.append(s)
        return s

    yield make
    for s in made:
        s.server_close()


def accept(s, pairs, addr="10.0.0.1"):
    a, b = pairs()
    s.process_request(a, (addr, 5000))
    return a, b


def test_connections_are_counted_and_marked(server, pairs):
    s = server()
    a, _ = accept(s, pairs)
    assert s.started == [(a, ("10.0.0.1", 5000))] and s.open_connections() == 1
    c = s._conns[id(a)]
    assert c.addr == "10.0.0.1" and c.limited
    assert s.connection_cut(a) is None and s.connection_closed(a) is False
    since = c.since
    time.sleep(0.01)
    s.connection_idle(a)  # already idle: when it began waiting stays
    assert c.since == since
    s.connection_busy(a)
    assert c.busy and c.since > since
    s.connection_trusted(a)
    s.connection_deadline(a, 5.0, "body", floor=3.0)
    s.body_progress(a, 77)
    assert c.trusted and c.phase == "body" and c.floor == 3.0 and c.got == 77
    s.connection_busy(a)  # still busy: the phase and deadline end, the credentials stay
    assert c.busy and c.phase == "" and c.deadline is None and c.trusted
    s.connection_untrusted(a)
    assert not c.trusted
    s.connection_trusted(a)
    s.connection_watch(a, lambda: None)
    c.cut = "x"
    s.connection_idle(a)
    assert not c.busy and not c.trusted and c.watch is None and c.cut is None
    # an unknown socket: nothing happens
    other, _ = pairs()
    for hook in (s.connection_idle, s.connection_busy, s.connection_trusted,
                 s.connection_untrusted):
        hook(other)
    s.connection_deadline(other, 1.0, "write")
    s.connection_watch(other, lambda: "x")
    s.body_progress(other, 5)
    assert s.connection_cut(other) is None and s.connection_closed(other) is False


def test_deadlines_and_phases(server, pairs):
    s = server()
    a, _ = accept(s, pairs)
    c = s._conns[id(a)]
    c.got = 9
    before = time.monotonic()
    s.connection_deadline(a, 5.0, "write")
    assert before + 5.0 <= c.deadline <= time.monotonic() + 5.0
    assert c.phase == "write" and c.got == 0 and before <= c.started <= time.monotonic()
    assert c.floor is None
    s.connection_deadline(a, 5.0, "body", floor=8.0)
    assert c.floor == 8.0
    s.connection_deadline(a, 5.0, "write", floor=99.0)
    assert c.floor == 8.0  # only a body has a floor
    s.connection_deadline(a, None)
    assert c.deadline is None and c.phase == ""
    s.connection_deadline(a, 1.0)
    assert c.phase == ""


def test_service_actions_close_what_is_late(server, pairs):
    s = server()
    a, pa = accept(s, pairs)
    b, pb = accept(s, pairs)
    d, pd = accept(s, pairs)
    ca, cb, cd = (s._conns[id(x)] for x in (a, b, d))
    s.connection_deadline(a, -1.0, "headers")  # late headers: closed outright
    s.connection_deadline(b, 60.0, "write")  # not late
    s.connection_deadline(d, 1.0, "body")  # a body: judged by its progress
    cd.started = time.monotonic() - (cn.BODY_FLOOR_S + cn.BODY_GRACE_S + 5)
    s.service_actions()
    assert ca.closed and ca.deadline is None and s.connection_closed(a)
    assert not cb.closed and cb.deadline is not None and not s.connection_closed(b)
    assert not cd.closed and cd.deadline is None  # cut off from reading only
    assert d.recv(10) == b""  # its reads end, its writes do not
    d.sendall(b"408")
    assert pd.recv(10) == b"408"
    assert pa.recv(10) == b""


def test_a_body_that_keeps_up_is_left_alone(server, pairs):
    s = server()
    a, _ = accept(s, pairs)
    c = s._conns[id(a)]
    s.connection_deadline(a, 1.0, "body", floor=0.0)
    c.started = time.monotonic() - 3.0  # 1 s past the grace: needs 16 KB
    s.body_progress(a, 20000)
    s.service_actions()
    assert c.deadline is not None
    s.body_progress(a, 10000)
    s.service_actions()
    assert c.deadline is None and not c.closed
    b, _ = accept(s, pairs)
    cb = s._conns[id(b)]
    s.connection_deadline(b, 1.0, "body")  # default floor: 10 s
    cb.started = time.monotonic() - 11.0
    s.service_actions()
    assert cb.deadline is not None


def test_a_watch_cuts_the_body_off(server, pairs):
    s = server()
    a, pa = accept(s, pairs)
    c = s._conns[id(a)]
    reason = []
    s.connection_deadline(a, 60.0, "body")
    s.connection_watch(a, lambda: reason[0] if reason else "")
    s.service_actions()
    assert c.cut is None and c.deadline is not None
    reason.append("the run ended")
    s.service_actions()
    assert s.connection_cut(a) == "the run ended" and c.deadline is None and not c.closed
    reason[0] = "again"
    s.service_actions()
    assert c.cut == "the run ended"  # asked once it has said
    b, _ = accept(s, pairs)
    s.connection_watch(b, lambda: 1 / 0)
    s.service_actions()
    assert s.connection_cut(b) is None
    d, _ = accept(s, pairs)
    s.connection_watch(d, lambda: "why")
    s._conns[id(d)].closed = True
    s.service_actions()
    assert s.connection_cut(d) is None  # a closed one is not asked


def test_ask():
    assert cn._ask(lambda: "r") == "r"
    assert cn._ask(lambda: "") is None and cn._ask(lambda: 0) is None
    assert cn._ask(lambda: 1 / 0) is None


# -- caps --------------------------------------------------------------------------------------------

def test_the_cap_closes_the_longest_idle(server, pairs):
    s = server(cap=2, per=10)
    a, pa = accept(s, pairs)
    b, _ = accept(s, pairs, "10.0.0.2")
    s._conns[id(a)].since -= 5
    s._conns[id(b)].since -= 1
    c, _ = accept(s, pairs, "10.0.0.3")
    assert s._conns[id(a)].closed and not s._conns[id(b)].closed
    assert id(c) in s._conns and pa.recv(10) == b""
    assert s.open_connections() == 3 and s._open() == 2


def test_a_full_server_of_busy_connections_says_busy(server, pairs):
    s = server(cap=2, per=10)
    for addr in ("10.0.0.1", "10.0.0.2"):
        x, _ = accept(s, pairs, addr)
        s.connection_busy(x)
    c, pc = accept(s, pairs, "10.0.0.3")
    assert id(c) not in s._conns and len(s.started) == 2
    assert pc.recv(1000) == cn.BUSY


def test_closed_connections_whose_threads_linger_hold_newcomers_back(server, pairs):
    s = server(cap=1, per=10)
    for n in range(2):
        x, _ = accept(s, pairs, "10.0.0.%d" % n)
        s._conns[id(x)].closed = True
    c, pc = accept(s, pairs, "10.0.0.9")
    assert id(c) not in s._conns and pc.recv(1000) == cn.BUSY
    s2 = server(cap=2, per=10)
    for n in range(3):
        x, _ = accept(s2, pairs, "10.0.0.%d" % n)
        s2._conns[id(x)].closed = True
    c, _ = accept(s2, pairs, "10.0.0.9")
    assert id(c) in s2._conns  # 3 lingering < 2 * cap


def test_one_address_gets_its_share_once_half_full(server, pairs):
    s = server(cap=8, per=2)
    mine = [accept(s, pairs, "10.0.0.1")[0] for _ in range(4)]  # under half: no share yet
    assert all(id(x) in s._conns for x in mine)
    for x in mine:
        s.connection_busy(x)
    s.connection_deadline(mine[0], 10.0, "body")  # at work, but not closed for its own
    c, pc = accept(s, pairs, "10.0.0.1")
    assert id(c) not in s._conns and pc.recv(1000) == cn.TOO_MANY
    s.connection_idle(mine[1])
    s._conns[id(mine[1])].since -= 5
    c, _ = accept(s, pairs, "10.0.0.1")
    assert id(c) in s._conns and s._conns[id(mine[1])].closed  # its own idle one made room
    other, _ = accept(s, pairs, "10.0.0.2")
    assert id(other) in s._conns


def test_the_share_counts_open_connections_only(server, pairs):
    s = server(cap=4, per=2)
    x1, _ = accept(s, pairs, "10.0.0.1")
    assert not s._over_share("10.0.0.1")  # under half full
    x2, _ = accept(s, pairs, "10.0.0.2")
    assert not s._over_share("10.0.0.1")  # half full, one of its two
    x3, _ = accept(s, pairs, "10.0.0.1")
    assert s._over_share("10.0.0.1") and not s._over_share("10.0.0.2")
    s._conns[id(x3)].closed = True  # two open: half full, and one of its own open
    assert not s._over_share("10.0.0.1")
    s._conns[id(x3)].closed = False
    s._conns[id(x2)].closed = True  # two open, both its own
    assert s._over_share("10.0.0.1")
    s._conns[id(x1)].closed = True  # one open: under half full
    assert not s._over_share("10.0.0.1")
    s3 = server(cap=5, per=2)  # half of 5 is 2
    accept(s3, pairs, "10.0.0.1")
    accept(s3, pairs, "10.0.0.1")
    assert s3._over_share("10.0.0.1")


def test_a_trusted_proxy_has_no_share(server, pairs):
    app = SimpleNamespace(config=SimpleNamespace(server=SimpleNamespace(
        trusted_proxies=["10.9.0.0/16"])), store=SimpleNamespace(release=lambda: None))
    s = server(cap=4, per=1, app=app)
    assert s.unlimited_address("10.9.1.1") and not s.unlimited_address("10.8.1.1")
    for _ in range(3):
        x, _ = accept(s, pairs, "10.9.1.1")
        s.connection_busy(x)
    assert all(not c.limited for c in s._conns.values()) and len(s._conns) == 3
    assert not server().unlimited_address("10.9.1.1")  # no app: nobody is a proxy


def test_the_biggest_address_gives_way_and_proxies_last(server, pairs):
    app = SimpleNamespace(config=SimpleNamespace(server=SimpleNamespace(
        trusted_proxies=["10.9.0.0/16"])), store=SimpleNamespace(release=lambda: None))
    s = server(cap=100, per=100, app=app)
    big = [accept(s, pairs, "10.0.0.1")[0] for _ in range(3)]
    small = accept(s, pairs, "10.0.0.2")[0]
    proxy = [accept(s, pairs, "10.9.0.1")[0] for _ in range(5)]
    for x in big + [small] + proxy:
        s._conns[id(x)].since -= 5
    s._conns[id(big[1])].since -= 1
    assert s._from_the_biggest() is s._conns[id(big[1])]
    for x in big:
        s.connection_busy(x)
    assert s._from_the_biggest() is s._conns[id(small)]
    s.connection_busy(small)
    assert s._from_the_biggest().sock in proxy
    for x in proxy:
        s.connection_busy(x)
    assert s._from_the_biggest() is None
    # counts are of open connections: closed ones do not make an address the biggest
    s2 = server(cap=100, per=100)
    two = [accept(s2, pairs, "10.0.0.1")[0] for _ in range(2)]
    three = [accept(s2, pairs, "10.0.0.2")[0] for _ in range(3)]
    for x in three[:2]:
        s2._conns[id(x)].closed = True
    for x in two + three:
        s2._conns[id(x)].since -= 5
    s2._conns[id(three[2])].since -= 5
    assert s2._from_the_biggest().sock in two


def test_oldest_prefers_those_idle_a_while_and_skips_arriving_requests(server, pairs):
    s = server()
    a, pa = accept(s, pairs)
    b, _ = accept(s, pairs)
    d, _ = accept(s, pairs)
    ca, cb, cd = (s._conns[id(x)] for x in (a, b, d))
    now = time.monotonic()
    ca.since, cb.since, cd.since = now - 0.05, now - 0.01, now - 1.0
    assert s._oldest([ca, cb, cd]) is cd
    cd.closed = True
    assert s._oldest([ca, cb, cd]) is ca  # both recent: the older first
    ca.since = now + 1  # a fresh one after a waited one
    cb.since = now - 0.5
    assert s._oldest([ca, cb]) is cb
    pa.sendall(b"GET")  # its next request is arriving: not closed
    cb.busy = True
    assert s._oldest([ca, cb]) is None
    cb.phase = "headers"  # busy in its headers: closed even with bytes waiting
    assert s._oldest([ca, cb]) is cb
    ca.phase = "headers"
    ca.busy = False
    assert s._oldest([ca]) is ca
    assert s._oldest([]) is None
    cb.phase = "body"
    assert s._oldest([cb], at_work=False) is None and s._oldest([cb]) is cb


def test_evict(pairs):
    a, pa = pairs()
    c = cn._Conn(a)
    cn.BoundedServer._evict(c)
    assert c.closed and pa.recv(10) == b""
    cn.BoundedServer._evict(None)


def test_a_finished_thread_gives_its_slot_back_and_releases_the_store(server, pairs,
                                                                      monkeypatch):
    released = []
    app = SimpleNamespace(config=SimpleNamespace(server=SimpleNamespace(trusted_proxies=[])),
                          store=SimpleNamespace(release=lambda: released.append(1)))
    s = server(app=app)
    a, _ = accept(s, pairs)
    c = s._conns[id(a)]
    s._aliases[12345] = c
    s._aliases[67890] = cn._Conn(pairs()[0])
    handled = []
    monkeypatch.setattr(socketserver.ThreadingMixIn, "process_request_thread",
                        lambda self, request, addr: handled.append((request, addr)))
    s.process_request_thread(a, ("10.0.0.1", 5000))
    assert handled == [(a, ("10.0.0.1", 5000))] and id(a) not in s._conns
    assert list(s._aliases) == [67890]
    stranger, _ = pairs()
    s.process_request_thread(stranger, ("10.0.0.3", 1))  # never counted: nothing to give back
    assert len(handled) == 2 and released == [1, 1]
    released.pop()
    assert released == [1]

    def fails(self, request, addr):
        raise RuntimeError("handler")
    monkeypatch.setattr(socketserver.ThreadingMixIn, "process_request_thread", fails)
    b, _ = accept(s, pairs)
    with pytest.raises(RuntimeError):
        s.process_request_thread(b, ("10.0.0.1", 5000))
    assert id(b) not in s._conns and released == [1, 1]
    s2 = server()
    d, _ = accept(s2, pairs)
    monkeypatch.setattr(socketserver.ThreadingMixIn, "process_request_thread",
                        lambda self, request, addr: None)
    s2.process_request_thread(d, ("10.0.0.1", 5000))  # no app: nothing to release
    assert s2.open_connections() == 0


def test_shutdown_request_closes_the_wrapped_socket(server, pairs, monkeypatch):
    s = server()
    a, _ = accept(s, pairs)
    wrapped, pw = pairs()
    s._conns[id(a)].live = wrapped
    s.shutdown_request(a)
    assert wrapped.fileno() == -1 and a.fileno() == -1
    b, _ = accept(s, pairs)
    s.shutdown_request(b)
    assert b.fileno() == -1
    d, _ = pairs()
    s.shutdown_request(d)  # not one of ours
    assert d.fileno() == -1


def test_readable_fd_and_refuse(pairs):
    a, b = pairs()
    assert cn._readable(a) is False
    b.sendall(b"x")
    assert cn._readable(a) is True
    assert cn._fd(a) == a.fileno()
    a.close()
    assert cn._readable(a) is False and cn._fd(a) == -1
    c, d = pairs()
    d.sendall(b"GET / HTTP/1.1\r\n\r\n")
    cn._refuse(c, b"NO")
    assert d.recv(100) == b"NO" and d.recv(100) == b""
    e, f = pairs()
    cn._refuse(e)
    assert f.recv(1000) == cn.BUSY
    e.close()
    cn._refuse(e)  # a closed socket: nothing raised


def test_the_handshake_runs_in_the_connections_thread(server, pairs, monkeypatch):
    s = server()
    a, pa = accept(s, pairs)
    c = s._conns[id(a)]
    calls = []

    class Wrapped:
        def __init__(self):
            self.sock = pairs()[0]

        def do_handshake(self):
            calls.append(("handshake", c.phase, c.deadline is not None, c.live is self))

        def fileno(self):
            return self.sock.fileno()

    w = Wrapped()

    class Ctx:
        def wrap_socket(self, sock, server_side, do_handshake_on_connect):
            calls.append(("wrap", sock is a, server_side, do_handshake_on_connect,
                          sock.gettimeout()))
            return w

    handled = []
    monkeypatch.setattr(socketserver.BaseServer, "finish_request",
                        lambda self, request, addr: handled.append(request) if addr == (
                            "10.0.0.1", 5000) else None)
    s.ssl_context = Ctx()
    before = time.monotonic()
    s.finish_request(a, ("10.0.0.1", 5000))
    assert calls == [("wrap", True, True, False, cn.HANDSHAKE_TIMEOUT_S),
                     ("handshake", "headers", True, True)]
    assert c.deadline >= before + cn.HANDSHAKE_TIMEOUT_S
    assert handled == [w] and s._aliases[id(w)] is c and s._find(w) is c

    class Failing(Ctx):
        def wrap_socket(self, sock, **kw):
            raise OSError("not TLS")
    s.ssl_context = Failing()
    b, _ = accept(s, pairs)
    s.finish_request(b, ("10.0.0.1", 5000))
    assert handled == [w]
    s.ssl_context = None
    d, _ = accept(s, pairs)
    s.finish_request(d, ("10.0.0.1", 5000))
    assert handled == [w, d] and d.gettimeout() is None


def test_the_share_begins_at_half_the_cap(server, pairs):
    s = server(cap=4, per=1)
    accept(s, pairs, "10.0.0.1")
    assert not s._over_share("10.0.0.1")  # one open, under half of four: no share yet
    accept(s, pairs, "10.0.0.2")
    assert s._over_share("10.0.0.1")


def test_an_address_whose_connections_are_all_closed_gives_none(server, pairs):
    s = server(cap=100, per=100)
    gone = accept(s, pairs, "10.0.0.9")[0]
    s._conns[id(gone)].closed = True
    one = accept(s, pairs, "10.0.0.1")[0]
    two = accept(s, pairs, "10.0.0.2")[0]
    for x in (one, two):
        s._conns[id(x)].since -= 5
    s.connection_busy(two)
    assert s._from_the_biggest() is s._conns[id(one)]


def test_one_that_waited_exactly_the_minimum_may_be_closed(server, pairs, monkeypatch):
    s = server()
    a, _ = accept(s, pairs)
    c = s._conns[id(a)]
    monkeypatch.setattr(cn, "time", SimpleNamespace(monotonic=lambda: cn.MIN_IDLE_TO_EVICT_S))
    c.since = 0.0
    assert s._oldest([c]) is c


def test_a_zone_is_dropped_from_any_address_and_the_reply_is_built_whole():
    assert cn.address_key("10.0.0.1%eth0") == "10.0.0.1"
    assert cn._busy_reply(b"no.") == (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\n"
                                      b"Content-Type: text/plain; charset=utf-8\r\nConnection: "
                                      b"close\r\nContent-Length: 3\r\n\r\nno.")


def test_keyword_arguments_reach_the_socket_server():
    s = cn.BoundedServer(("127.0.0.1", 0), socketserver.BaseRequestHandler,
                         bind_and_activate=False)
    try:
        assert s.server_address == ("127.0.0.1", 0)  # not bound: the keyword was kept
    finally:
        s.server_close()


def test_every_connection_is_looked_at_and_a_deadline_is_kept_to_the_end(server, pairs,
                                                                        monkeypatch):
    s = server()
    idle, _ = accept(s, pairs)  # no deadline: passed over, the others still looked at
    late, _ = accept(s, pairs)
    due, _ = accept(s, pairs)
    monkeypatch.setattr(cn, "time", SimpleNamespace(monotonic=lambda: 100.0))
    s.connection_deadline(late, -1.0, "headers")
    s.connection_deadline(due, 0.0, "write")  # ends at 100.0: not late yet at 100.0
    s.service_actions()
    assert s.connection_closed(late) and not s.connection_closed(due)
    assert not s.connection_closed(idle)


def test_a_client_without_an_address(server, pairs):
    s = server()
    a, _ = pairs()
    s.process_request(a, "")  # a Unix socket's peer has no address
    assert s._conns[id(a)].addr == "" and s._conns[id(a)].limited


def test_the_address_that_holds_the_most_gives_way_whatever_came_first(server, pairs):
    s = server()
    first = accept(s, pairs, "10.0.0.1")[0]
    many = [accept(s, pairs, "10.0.0.2")[0] for _ in range(3)]
    for x in [first] + many:
        s._conns[id(x)].since -= 5
    assert s._from_the_biggest().sock in many


def test_fd_of_a_socket_that_cannot_say():
    def fails():
        raise ValueError("closed")
    assert cn._fd(SimpleNamespace(fileno=fails)) == -1


def test_oldest_passes_over_one_with_a_request_arriving(server, pairs):
    s = server()
    a, pa = accept(s, pairs)
    b, _ = accept(s, pairs)
    ca, cb = s._conns[id(a)], s._conns[id(b)]
    ca.since, cb.since = ca.since - 2, cb.since - 1
    pa.sendall(b"GET")
    assert s._oldest([ca, cb]) is cb


def test_a_servers_own_caps_and_no_tls_unless_given():
    s = cn.BoundedServer(("127.0.0.1", 0), socketserver.BaseRequestHandler)
    try:
        assert (s.max_connections, s.max_per_address, s.ssl_context) == (
            cn.MAX_CONNECTIONS, cn.MAX_PER_ADDRESS, None)
    finally:
        s.server_close()
