"""Fast unit tests for the agent's HTTP client (potato/training/remote/client.py): log lines,
signals, requests over a unix socket and over a URL, the resumable bundle download, patience
with a restarting server, and sending the result. A tiny loopback HTTP server (a thread in this
process) plays the server; sleeps and clocks are faked, so nothing waits. Also the tests
tools/mutation.py runs against client.py (docs/testing.md, "Mutation testing")."""

import hashlib
import http.client
import http.server
import io
import json
import os
import re
import signal
import socketserver
import ssl
import threading
import time

import pytest

from potato.training.remote import client as c


class Handler(http.server.BaseHTTPRequestHandler):
    """Answers from ``server.script``: a list of callables (handler) -> None, one per request
    (the last one repeats); every request is recorded in ``server.seen``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        self.server.seen.append((self.command, self.path, dict(self.headers), body))
        script = self.server.script
        (script.pop(0) if len(script) > 1 else script[0])(self)

    do_GET = do_POST = do_PUT = _any

    def reply(self, status, data=b"", headers=None, length=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data) if length is None else length))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        sock, _ = self.socket.accept()
        return sock, ("unix", 0)


class TCPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


@pytest.fixture
def tcp():
    s = TCPServer(("127.0.0.1", 0), Handler)
    s.seen, s.script = [], [lambda h: h.reply(200, b'{"ok": 1}')]
    t = threading.Thread(target=s.serve_forever, daemon=True)
    t.start()
    yield s
    s.shutdown()
    s.server_close()
    t.join()


@pytest.fixture
def unix(tmp_path):
    path = str(tmp_path / "s.sock")
    s = UnixServer(path, Handler)
    s.seen, s.script, s.path = [], [lambda h: h.reply(200, b'{"ok": 1}')], path
    t = threading.Thread(target=s.serve_forever, daemon=True)
    t.start()
    yield s
    s.shutdown()
    s.server_close()
    t.join()


def _url(s, path=""):
    return "http://127.0.0.1:%d%s" % (s.server_address[1], path)


def test_constants():
    assert c.PROTOCOL == "v1"
    assert c.DOWNLOAD_TRIES == 6
    assert c.CHUNK == 64 << 20  # an upload's request size (upload.send_file's default)


def test_log_to_stderr(capsys):
    c.log("hello")
    err = capsys.readouterr().err
    assert re.fullmatch(r"\[agent \d\d:\d\d:\d\d\] hello\n", err)


class Closed:
    def write(self, s):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


class FlushFails(io.StringIO):
    def flush(self):
        raise ValueError("I/O operation on closed file")


def test_log_falls_back_to_the_file(tmp_path, monkeypatch):
    try:
        a, b = tmp_path / "agent.log", tmp_path / "before.log"
        monkeypatch.setattr(c.sys, "stderr", None)
        c.log("nowhere")  # no file yet: the line is lost, quietly
        c.set_log_file(str(b))
        c.set_log_file(str(a))  # the file instead of the one before, not beside it
        c.set_log_file(str(a))  # and once, however often it is set
        monkeypatch.setattr(c.sys, "stderr", Closed())
        c.log("one")
        monkeypatch.setattr(c.sys, "stderr", FlushFails())
        c.log("two")
        monkeypatch.setattr(c.sys, "stderr", None)
        c.log("three")
        lines = a.read_text().splitlines()
        assert [x.split("] ", 1)[1] for x in lines] == ["one", "two", "three"]
        assert not b.exists()
        assert all(re.fullmatch(r"\[agent \d\d:\d\d:\d\d\] \w+", x) for x in lines)
        c.set_log_file(str(tmp_path / "no" / "such" / "dir.log"))
        c.log("lost, quietly")  # never raises
        ok = io.StringIO()
        monkeypatch.setattr(c.sys, "stderr", ok)
        c.set_log_file(str(a))
        c.log("four")
        assert ok.getvalue().endswith("] four\n")
        assert "four" not in a.read_text()
    finally:
        c.set_log_file(os.devnull)  # as good as none for the tests that follow


@pytest.fixture
def own_signals():
    sigs = (signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE)
    saved = {s: signal.getsignal(s) for s in sigs}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_on_hangup(own_signals, sig):
    class Watch:
        closed = threading.Event()

    w = Watch()
    c.on_hangup(w)
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
    os.kill(os.getpid(), sig)
    assert w.closed.wait(10)


def test_unix_connection(unix):
    conn = c.UnixHTTPConnection(unix.path)
    assert conn.socket_path == unix.path and conn.timeout == 60 and conn.host == "localhost"
    assert conn.blocksize == 1 << 20
    assert c.UnixHTTPConnection(unix.path, 5).timeout == 5
    conn.request("GET", "/x")
    assert conn.sock.gettimeout() == 60
    r = conn.getresponse()
    assert (r.status, r.read()) == (200, b'{"ok": 1}')
    conn.close()


def test_server_error():
    e = c.ServerError(409, "taken")
    assert e.status == 409 and str(e) == "taken"


def test_client_defaults():
    cl = c.Client("tok")
    assert (cl.token, cl.socket_path, cl.server, cl.timeout, cl.patience) == \
        ("tok", None, None, 60, 15)


def test_request_connections(unix, tcp):
    """Which connection a request takes: a unix socket, or the URL's host, port and scheme,
    with the client's timeout and 1 MiB reads; the URL's path prefixes every request path.
    A streamed answer hands the caller its connection."""
    status, resp, conn = c.Client("t", socket_path=unix.path, timeout=7).request(
        "GET", "/x", stream_to=True)
    assert isinstance(conn, c.UnixHTTPConnection) and unix.seen[-1][1] == "/x"
    assert conn.socket_path == unix.path and conn.timeout == 7
    resp.read()
    conn.close()
    status, resp, conn = c.Client("t", server=_url(tcp, "/base/"), timeout=9).request(
        "GET", "/x", stream_to=True)
    assert type(conn) is http.client.HTTPConnection and tcp.seen[-1][1] == "/base/x"
    assert (conn.host, conn.port, conn.timeout, conn.blocksize) == \
        ("127.0.0.1", tcp.server_address[1], 9, 1 << 20)
    resp.read()
    conn.close()
    c.Client("t", server=_url(tcp, "/baseX//")).request("GET", "/y")
    assert tcp.seen[-1][1] == "/baseX/y"
    n = len(tcp.seen)
    with pytest.raises(ssl.SSLError):  # https: TLS, which this plain server does not speak
        c.Client("t", server="https://127.0.0.1:%d" % tcp.server_address[1]).request("GET", "/z")
    assert len(tcp.seen) == n


def test_request_over_a_unix_socket(unix):
    cl = c.Client("tok", socket_path=unix.path)
    assert cl.request("POST", "/a", {"k": [1]}) == (200, {"ok": 1}, None)
    method, path, headers, body = unix.seen[-1]
    assert (method, path, json.loads(body)) == ("POST", "/a", {"k": [1]})
    assert headers["Authorization"] == "Bearer tok" and headers["X-Potato-Agent"] == "v1"
    assert headers["Content-Type"] == "application/json"


def test_request_headers_and_bodies(tcp):
    cl = c.Client("tok", server=_url(tcp, "/p/"))
    cl.request("PUT", "/b", b"raw", headers={"X-Potato-Agent": "v0", "X-Other": "1"})
    method, path, headers, body = tcp.seen[-1]
    assert (method, path, body) == ("PUT", "/p/b", b"raw")
    assert headers["X-Potato-Agent"] == "v0" and headers["X-Other"] == "1"
    assert "Content-Type" not in headers and headers["Authorization"] == "Bearer tok"
    cl.request("POST", "/l", [1, 2])
    assert json.loads(tcp.seen[-1][3]) == [1, 2]
    assert tcp.seen[-1][2]["Content-Type"] == "application/json"
    cl.request("GET", "/g")
    assert tcp.seen[-1][3] == b"" and "Content-Type" not in tcp.seen[-1][2]


def test_request_answers(tcp):
    cl = c.Client("tok", server=_url(tcp))
    tcp.script[:] = [lambda h: h.reply(204)]
    assert cl.request("GET", "/") == (204, None, None)
    tcp.script[:] = [lambda h: h.reply(200, b"x" * 300)]
    assert cl.request("GET", "/") == (200, {"error": "x" * 200}, None)
    tcp.script[:] = [lambda h: h.reply(200, b"\xff\xfe")]
    assert cl.request("GET", "/") == (200, {"error": "\ufffd\ufffd"}, None)
    tcp.script[:] = [lambda h: h.reply(399, b'{"a": 2}')]
    assert cl.request("GET", "/") == (399, {"a": 2}, None)
    tcp.script[:] = [lambda h: h.reply(400, b'{"error": "bad field"}')]
    with pytest.raises(c.ServerError) as e:
        cl.request("GET", "/")
    assert (e.value.status, str(e.value)) == (400, "bad field")
    tcp.script[:] = [lambda h: h.reply(500)]
    with pytest.raises(c.ServerError) as e:
        cl.request("GET", "/")
    assert (e.value.status, str(e.value)) == (500, "HTTP 500")
    tcp.script[:] = [lambda h: h.reply(503, b'{"other": 1}')]
    with pytest.raises(c.ServerError, match="^HTTP 503$"):
        cl.request("GET", "/")


def test_request_stream_to(tcp):
    cl = c.Client("tok", server=_url(tcp))
    for status in (200, 206):
        tcp.script[:] = [lambda h, s=status: h.reply(s, b"bytes")]
        got, resp, conn = cl.request("GET", "/f", stream_to=True)
        assert got == status and resp.read() == b"bytes" and conn is not None
        conn.close()
    tcp.script[:] = [lambda h: h.reply(404, b'{"error": "no run"}')]
    with pytest.raises(c.ServerError, match="no run"):
        cl.request("GET", "/f", stream_to=True)
    tcp.script[:] = [lambda h: h.reply(201, b'{"a": 1}')]
    assert cl.request("GET", "/f", stream_to=True) == (201, {"a": 1}, None)


def test_request_closes_on_failure(tmp_path):
    cl = c.Client("tok", socket_path=str(tmp_path / "nobody.sock"))
    with pytest.raises(OSError):
        cl.request("GET", "/")


DATA = bytes(range(256)) * 5000  # 1.28 MB: more than one read1 block


def _ranged(h, cut=None, ignore_range=False):
    """Serve DATA, from the requested offset; ``cut``: send only that many bytes, then close."""
    rng = h.headers.get("Range")
    start = 0 if (ignore_range or not rng) else int(re.match(r"bytes=(\d+)-", rng).group(1))
    part = DATA[start:]
    status = 206 if start else 200
    h.reply(status, part if cut is None else part[:cut], length=len(part))


@pytest.fixture
def no_sleep(monkeypatch):
    slept = []
    monkeypatch.setattr(c.time, "sleep", slept.append)
    return slept


def test_download_whole(tcp, tmp_path, no_sleep, monkeypatch):
    sizes = []
    real_read1 = http.client.HTTPResponse.read1
    monkeypatch.setattr(http.client.HTTPResponse, "read1",
                        lambda self, n=-1: (sizes.append(n), real_read1(self, n))[1])
    tcp.script[:] = [_ranged]
    dest = tmp_path / "b.tar.gz"
    dest.write_bytes(b"stale bytes from an earlier run")
    cl = c.Client("tok", server=_url(tcp))
    c.download_bundle(cl, "r1", str(dest), hashlib.sha256(DATA).hexdigest(), len(DATA))
    assert dest.read_bytes() == DATA
    assert [s[:2] for s in tcp.seen] == [("GET", "/agent/v1/runs/r1/bundle")]
    assert "Range" not in tcp.seen[0][2]
    assert no_sleep == []
    assert sizes and set(sizes) == {1 << 20}  # bounded: one MiB at a time


def test_download_resumes(tcp, tmp_path, no_sleep, capsys):
    tcp.script[:] = [lambda h: _ranged(h, cut=1000), lambda h: _ranged(h, cut=500000), _ranged]
    dest = tmp_path / "b.tar.gz"
    cl = c.Client("tok", server=_url(tcp))
    c.download_bundle(cl, "r1", str(dest), hashlib.sha256(DATA).hexdigest(), len(DATA))
    assert dest.read_bytes() == DATA
    assert [s[2].get("Range") for s in tcp.seen] == [None, "bytes=1000-", "bytes=501000-"]
    assert no_sleep == [0.4, 0.8]
    err = capsys.readouterr().err
    assert "bundle download interrupted at 1000 of %d bytes (" % len(DATA) in err


def test_download_restarts_when_the_server_ignores_the_range(tcp, tmp_path, no_sleep):
    tcp.script[:] = [lambda h: _ranged(h, cut=700), lambda h: _ranged(h, ignore_range=True)]
    dest = tmp_path / "b.tar.gz"
    cl = c.Client("tok", server=_url(tcp))
    c.download_bundle(cl, "r1", str(dest), hashlib.sha256(DATA).hexdigest(), len(DATA))
    assert dest.read_bytes() == DATA


def test_download_hashes_on_a_daemon_thread_at_most_16_blocks_behind(tcp, tmp_path, no_sleep,
                                                                     monkeypatch):
    """The checksum is computed on a second thread as the bytes arrive; a hashing that falls
    behind holds the download back at 16 blocks (of at most 1 MiB) waiting, and its thread,
    a daemon, ends with the download."""
    big = os.urandom(1 << 16) * 400  # 25 MiB: many more than 18 reads
    want = hashlib.sha256(big).hexdigest()
    tcp.script[:] = [lambda h: h.reply(200, big, length=len(big))]
    reads = []
    real_read1 = http.client.HTTPResponse.read1
    monkeypatch.setattr(http.client.HTTPResponse, "read1",
                        lambda self, n=-1: (reads.append(n), real_read1(self, n))[1])
    gate, hashing, real_sha = threading.Event(), [], hashlib.sha256

    class Stuck:  # the first block's hashing waits for the gate
        def __init__(self):
            self.h = real_sha()

        def update(self, block):
            hashing.append(threading.current_thread())
            assert gate.wait(20)
            self.h.update(block)

        def hexdigest(self):
            return self.h.hexdigest()
    monkeypatch.setattr(c.hashlib, "sha256", Stuck)
    dest, failed = tmp_path / "b.tar.gz", []

    def download():
        try:
            c.download_bundle(c.Client("tok", server=_url(tcp)), "r1", str(dest), want, len(big))
        except BaseException as e:  # noqa: B902 (said below)
            failed.append(e)
    t = threading.Thread(target=download, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 20
        while len(reads) < 18 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        # one block being hashed, 16 waiting, one read and waiting for room
        assert len(reads) == 18
        assert hashing[0] is not t and hashing[0].daemon
    finally:
        gate.set()
        t.join(20)
    assert not t.is_alive() and failed == [] and dest.read_bytes() == big
    assert not hashing[0].is_alive()


def test_download_gives_up(tcp, tmp_path, no_sleep):
    tcp.script[:] = [lambda h: h.reply(200, b"", length=0)]
    cl = c.Client("tok", server=_url(tcp))
    with pytest.raises(RuntimeError) as e:
        c.download_bundle(cl, "r1", str(tmp_path / "b"), "x", 10)
    assert str(e.value) == ("the bundle download stopped at 0 of 10 bytes after 6 tries (the "
                            "connection closed early)")
    assert len(tcp.seen) == 6
    assert no_sleep == [0.4, 0.8, 1.6, 3.2, 5]


def test_download_reports_the_last_error(tmp_path, no_sleep, capsys):
    cl = c.Client("tok", socket_path=str(tmp_path / "nobody.sock"), patience=0)
    with pytest.raises(RuntimeError) as e:
        c.download_bundle(cl, "r1", str(tmp_path / "b"), "x", 10)
    assert str(e.value).startswith("the bundle download stopped at 0 of 10 bytes after 6 tries (")
    assert "No such file" in str(e.value) or "Errno" in str(e.value)
    assert "(the connection closed early)" not in str(e.value)
    assert "(the connection closed)" not in capsys.readouterr().err


def test_download_checks_size_and_checksum(tcp, tmp_path, no_sleep):
    tcp.script[:] = [_ranged]
    cl = c.Client("tok", server=_url(tcp))
    with pytest.raises(RuntimeError, match="does not match its checksum"):
        c.download_bundle(cl, "r1", str(tmp_path / "b"), "0" * 64, len(DATA))
    with pytest.raises(RuntimeError, match="does not match its checksum"):
        c.download_bundle(cl, "r1", str(tmp_path / "c"), hashlib.sha256(DATA).hexdigest(),
                          len(DATA) - 1)
    assert len(tcp.seen) == 2


def test_download_of_nothing(tcp, tmp_path, no_sleep):
    cl = c.Client("tok", server=_url(tcp))
    c.download_bundle(cl, "r1", str(tmp_path / "b"), hashlib.sha256(b"").hexdigest(), 0)
    assert tcp.seen == []


def test_stdin_watch():
    r, w = os.pipe()
    rf = os.fdopen(r, "rb")
    sw = c.StdinWatch(rf)
    os.write(w, b"line\n")
    assert not sw.closed.wait(0.2)
    os.close(w)
    assert sw.closed.wait(10)
    rf.close()

    class Broken:
        def readline(self):
            raise ValueError("closed")

    assert c.StdinWatch(Broken()).closed.wait(10)

    class Gone:
        def readline(self):
            raise OSError(9, "bad fd")

    assert c.StdinWatch(Gone()).closed.wait(10)


def test_slice():
    s = c.Slice(io.BytesIO(b"abcdefgh"), 5)
    assert s.read(2) == b"ab" and s.left == 3
    assert s.read() == b"cde" and s.left == 0
    assert s.read(3) == b""
    s = c.Slice(io.BytesIO(b"abcdefgh"), 4)
    assert s.read(None) == b"abcd"
    s = c.Slice(io.BytesIO(b"ab"), 4)
    assert s.read(10) == b"ab" and s.left == 2
    assert s.read(-1) == b""
    assert c.Slice(io.BytesIO(b"ab"), 0).read() == b""


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clk = Clock()
    monkeypatch.setattr(c.time, "monotonic", clk)
    slept = []

    def sleep(s):
        slept.append(s)
        clk.now += s

    monkeypatch.setattr(c.time, "sleep", sleep)
    clk.slept = slept
    return clk


class Fake:
    patience = 30


def _failing(errors, value="done"):
    def call():
        if errors:
            raise errors.pop(0)
        return value
    return call


def test_patiently_retries_until_it_works(clock, capsys):
    class Patient:
        patience = 1000

    errors = [c.ServerError(503, "restarting")] + [ConnectionRefusedError(111, "refused")] * 9
    assert c.patiently(Patient(), "say hi", _failing(errors)) == "done"
    assert clock.slept == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    err = capsys.readouterr().err
    assert err.count("cannot say hi (") == 2  # the first try and the tenth
    errors = [OSError("x")] * 12
    assert c.patiently(Patient(), "again", _failing(errors)) == "done"
    assert capsys.readouterr().err.count("cannot again (") == 2  # tries 1 and 10, not 11
    assert clock.slept[-2:] == [10, 10]  # at most 10 s between tries
    assert "cannot say hi (restarting); trying again" in err


def test_patiently_gives_up_at_the_deadline(clock):
    errors = [http.client.RemoteDisconnected("gone")] * 100
    with pytest.raises(http.client.RemoteDisconnected):
        c.patiently(Fake(), "x", _failing(errors))
    assert sum(clock.slept) == 36 and clock.now == 1036  # 1+2+...+8 = 36 >= 30
    clock.slept[:] = []
    with pytest.raises(OSError):
        c.patiently(object(), "x", _failing([OSError("no")] * 100))
    assert sum(clock.slept) == 15  # no patience attribute: 15 s


def test_patiently_deadline_is_inclusive(clock):
    class Exact:
        patience = 3

    with pytest.raises(OSError):
        c.patiently(Exact(), "x", _failing([OSError("a")] * 10))
    assert clock.slept == [1, 2]


def test_patiently_does_not_retry_other_refusals(clock):
    with pytest.raises(c.ServerError):
        c.patiently(Fake(), "x", _failing([c.ServerError(500, "boom")]))
    with pytest.raises(ValueError):
        c.patiently(Fake(), "x", _failing([ValueError("bug")]))
    assert clock.slept == []


class Poster:
    patience = 30

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def request(self, method, path, body=None):
        self.calls.append((method, path, body))
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a


def test_send_result(clock, capsys):
    p = Poster([(200, {}, None)])
    c.send_result(p, "r5", {"status": "success"})
    assert p.calls == [("POST", "/agent/v1/runs/r5/result", {"status": "success"})]
    assert capsys.readouterr().err == ""
    p = Poster([ConnectionResetError(104, "reset"), c.ServerError(409, "has one")])
    c.send_result(p, "r5", {})
    assert "the server already has the result" in capsys.readouterr().err
    p = Poster([c.ServerError(409, "has one")])
    c.send_result(p, "r5", {})
    assert "the server refused the result: has one" in capsys.readouterr().err
    p = Poster([c.ServerError(400, "bad")])
    c.send_result(p, "r5", {})
    assert "the server refused the result: bad" in capsys.readouterr().err
    p = Poster([OSError("down")] * 100)
    c.send_result(p, "r5", {})
    assert "could not report the result: down" in capsys.readouterr().err
    p = Poster([http.client.BadStatusLine("x")] * 100)
    c.send_result(p, "r5", {})
    assert "could not report the result: " in capsys.readouterr().err


def test_download_waits_out_a_restarting_server(tcp, tmp_path, no_sleep, capsys):
    tcp.script[:] = [lambda h: h.reply(503, b'{"error": "restarting"}'), _ranged]
    cl = c.Client("tok", server=_url(tcp))
    c.download_bundle(cl, "r1", str(tmp_path / "b"), hashlib.sha256(DATA).hexdigest(), len(DATA))
    assert "cannot download the bundle (restarting); trying again" in capsys.readouterr().err


def test_stdin_watch_thread_is_a_daemon():
    before = set(threading.enumerate())
    r, w = os.pipe()
    rf = os.fdopen(r, "rb")
    sw = c.StdinWatch(rf)
    new = [t for t in threading.enumerate() if t not in before]
    assert [t.daemon for t in new] == [True]  # it cannot keep the agent alive
    os.close(w)
    assert sw.closed.wait(10)
    for t in new:
        t.join()
    rf.close()


def test_slice_edges():
    class File:
        def __init__(self, data):
            self.f, self.reads = io.BytesIO(data), []

        def read(self, n):
            self.reads.append(n)
            return self.f.read(n)

    f = File(b"abcdef")
    s = c.Slice(f, 1)
    assert s.read(0) == b"" and s.left == 1
    assert s.read() == b"a" and s.left == 0
    assert s.read() == b"" and s.read(5) == b""
    assert f.reads == [0, 1]  # nothing is asked of the file once the slice is used up


def test_send_result_patience_and_its_words(clock, capsys):
    class Impatient(Poster):
        patience = 3

    p = Impatient([OSError("down")] * 100)
    c.send_result(p, "r5", {})
    assert len(p.calls) == 3  # the client's own patience (3 s), not the default
    assert "cannot report the result (down); trying again" in capsys.readouterr().err
