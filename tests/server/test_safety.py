"""The server's safety rules (potato/server/safety.py): request JSON, output JSON, redirects,
Host and Origin checks, the login limiter. Also the tests tools/mutation.py runs against the
module (docs/testing.md, "Mutation testing")."""

import json
import socket
import types

import pytest

from potato.server import safety
from potato.server.safety import (BadInput, LoginLimiter, default_allowed_hosts, dumps, finite, host_allowed,
                                  host_is_loopback, host_of, origin, parse_json, safe_next)


def _bad(raw):
    with pytest.raises(BadInput) as e:
        parse_json(raw)
    return str(e.value)


def test_parse_json_accepts_plain_json():
    assert parse_json(b'{"a": [1, -2, 1.5, "x", true, null]}') == {"a": [1, -2, 1.5, "x", True,
                                                                        None]}
    assert parse_json(b"") is None  # an empty body is null
    assert parse_json(b"7") == 7
    assert parse_json(("-" + "9" * 30).encode()) == -int("9" * 30)  # 30 digits is the most


def test_parse_json_rejects_hostile_numbers_and_text():
    assert "UTF-8" in _bad(b'"\xff"')
    assert "NaN" in _bad(b"[NaN]")
    assert "Infinity" in _bad(b"-Infinity")
    msg = _bad(b"1" * 400 + b".0")  # 1e399: no float holds it
    assert "1" * 40 in msg and "1" * 41 not in msg  # the number, cut to 40 characters
    msg = _bad(b"1" * 31)
    assert "1" * 20 in msg and "1" * 21 not in msg  # the integer, cut to 20 digits
    assert "surrogate" in _bad(b'["\\ud800"]')
    assert "surrogate" in _bad(b'{"\\udfff": 1}')  # keys are checked as well as values
    assert "surrogate" in _bad(b'{"k": "\\ud800"}')
    with pytest.raises(json.JSONDecodeError) as e:
        json.loads("{1: 2}")
    assert _bad(b"{1: 2}") == str(e.value)  # the decoder's own reason


def test_parse_json_depth_limit():
    inner = b"[" * 64 + b"1" + b"]" * 64  # 64 levels: the most allowed
    assert parse_json(inner) is not None
    msg = _bad(b"[" * 65 + b"1" + b"]" * 65)
    assert "nested" in msg and "64" in msg
    # brackets inside strings do not count
    assert parse_json(json.dumps(["[" * 100 + "{" * 100]).encode()) == ["[" * 100 + "{" * 100]


def test_parse_json_turns_decoder_failures_into_bad_input(monkeypatch):
    def recursion(*a, **k):
        raise RecursionError("deep")

    monkeypatch.setattr(safety, "json", types.SimpleNamespace(
        loads=recursion, JSONDecodeError=json.JSONDecodeError))
    assert "nested" in _bad(b"[]")

    def value_error(*a, **k):
        raise ValueError("v" * 300)

    monkeypatch.setattr(safety, "json", types.SimpleNamespace(
        loads=value_error, JSONDecodeError=json.JSONDecodeError))
    assert _bad(b"[]") == "v" * 200  # the reason, cut to 200 characters


NESTED = "it is nested more than 64 levels deep"


def test_parse_json_counts_depth_for_keys_values_and_items():
    # 64 levels is the most: a value inside 64 containers is read, checked like any other
    def inside(n, inner):
        return "[" * n + inner + "]" * n

    for inner in ('{"\\ud800": 1}', '{"k": "\\ud800"}', '["\\ud800"]'):
        assert "surrogate" in _bad(inside(63, inner).encode())
        assert _bad(inside(64, inner).encode()) == NESTED
    assert parse_json(inside(62, '{"k": ["v"]}').encode()) is not None  # "v" inside 64
    assert parse_json(inside(62, '{"k": {"v": 1}}').encode()) is not None
    assert _bad(inside(63, '{"k": {"v": 1}}').encode()) == NESTED
    assert parse_json(inside(64, '"x"').encode()) is not None
    assert parse_json(inside(63, '{"k": 1}').encode()) is not None  # "k" inside 64
    assert _bad(inside(65, '"x"').encode()) == NESTED


def test_parse_json_counts_open_brackets_outside_strings():
    # a nesting refused before the decoder sees it: the depth, not the decoder's reason
    assert _bad(b"[" * 100000 + b"]" * 100000) == NESTED  # never a RecursionError
    assert _bad(b"{" * 65) == NESTED
    assert _bad(b"[" * 65) == NESTED
    assert _bad(b"[" * 60 + b"[]" + b"[" * 5) == NESTED  # 60 + 5 open
    # at most 64 open at once: the decoder's own reason (unbalanced), not the depth
    for raw in (b"[" * 64, b"{" * 64, b"[" * 40 + b"]" * 40 + b"[" * 64):
        assert _bad(raw) != NESTED and "nested" not in _bad(raw)
    assert parse_json(b"[" + b"[]," * 200 + b"[]]") is not None  # closing brings it down
    # brackets inside strings, even after an escaped quote or line break, do not count
    assert parse_json(b'["\\"' + b"[" * 100 + b'"]') == ['"' + "[" * 100]
    msg = _bad(b'["\\\n' + b"[" * 100 + b'"]')
    assert msg != NESTED and "nested" not in msg  # the decoder's reason: the line break


def test_finite_and_dumps_never_write_nan_or_infinity():
    nan, inf = float("nan"), float("inf")
    assert finite({"a": [nan, 1.5, (inf, "s")], "b": -inf, "c": "t", "d": 2}) == {
        "a": [None, 1.5, [None, "s"]], "b": None, "c": "t", "d": 2}
    assert dumps({"a": [nan, 1]}) == '{"a": [null, 1]}'
    assert dumps(inf) == "null"
    assert dumps({"a": 1}) == '{"a": 1}'
    try:
        out = dumps({nan: 1})  # a key finite() cannot replace
    except ValueError:
        out = ""
    assert "NaN" not in out


def test_safe_next_keeps_only_same_site_paths():
    d = "/home"
    assert safe_next("/annotate?x=1", d) == "/annotate?x=1"
    assert safe_next("/a!~", d) == "/a!~"  # the ends of printable ASCII
    assert safe_next("/" + "a" * 1999, d) == "/" + "a" * 1999  # 2000 characters
    for bad in (None, "", "/" + "a" * 2000, "http://evil.example/", "evil", "//evil.example",
                "/%2Fevil.example", "/a\\b", "/%5Cevil", "/a b", "/a\tb", "/a\x7f",
                "/%7F", "/%0d%0aSet-Cookie:x", "/\xe9"):
        assert safe_next(bad, d) == d, bad


def test_host_of():
    assert host_of("Example.COM:8080") == "example.com"
    assert host_of("  host  ") == "host"
    assert host_of(None) == ""
    assert host_of("[::1]:8080") == "[::1]"
    assert host_of("[::1]") == "[::1]"
    assert host_of("[::1]x]") == "[::1]"  # up to the first closing bracket
    assert host_of("[::1") == "[::1"
    assert host_of("::1") == "::1"  # a bare address: its colons are not a port
    assert host_of("a:b:c") == "a:b:c"


def test_default_allowed_hosts(monkeypatch):
    table = {"MyHost": ["10.0.0.5", "fe80::1"], "myhost.example": ["10.0.0.5"]}

    def getaddrinfo(host, port):
        if host not in table:
            raise OSError("unknown host %r" % (host,))
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in table[host]]

    fake = types.SimpleNamespace(gethostname=lambda: "MyHost",
                                 getfqdn=lambda: "MyHost.Example", getaddrinfo=getaddrinfo)
    monkeypatch.setattr(safety, "socket", fake)
    base = ["10.0.0.5", "127.0.0.1", "[::1]", "[fe80::1]", "localhost", "myhost",
            "myhost.example"]
    assert default_allowed_hosts("", None) == base
    assert default_allowed_hosts("0.0.0.0", None) == base
    assert default_allowed_hosts("::", None) == base
    assert default_allowed_hosts("10.1.2.3", None) == sorted(base + ["10.1.2.3"])
    assert default_allowed_hosts("FE80::2", None) == sorted(base + ["[fe80::2]"])
    assert default_allowed_hosts("", "https://Annot.Example.org:8443/x") == sorted(
        base + ["annot.example.org"])
    assert default_allowed_hosts("", "http://[FE80::3]:80/") == sorted(base + ["[fe80::3]"])
    assert default_allowed_hosts("", "/relative") == base


def test_host_allowed():
    assert host_allowed("Example.com:80", ["example.com"]) is True
    assert host_allowed("evil.example", ["example.com"]) is False
    assert host_allowed("evil.example", iter(["*"])) is True
    assert host_allowed(None, ["example.com"]) is False


def test_origin():
    assert origin("HTTP", " Example.com ") == "http://example.com:80"
    assert origin("https", "x") == "https://x:443"
    assert origin("https", "x:8443") == "https://x:8443"
    assert origin("http", "[::1]:8080") == "http://[::1]:8080"
    assert origin("http", "Stra\xdfe.example") == "http://stra\xdfe.example:80"  # not "ss"
    for scheme, netloc in (("ftp", "x"), ("http", ""), ("http", None), (None, "x"),
                           (None, None), ("http", "u@x"), ("http", "x:99999")):
        assert origin(scheme, netloc) is None, (scheme, netloc)


def test_host_is_loopback():
    assert host_is_loopback("127.0.0.1:8000") is True
    assert host_is_loopback("[::1]:8000") is True
    assert host_is_loopback("example.com") is False


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(safety, "time", c)
    return c


def test_login_limiter_defaults(clock):
    lim = LoginLimiter()
    for _ in range(9):
        lim.failed("a")
    assert lim.retry_after("a") == 0  # 9 of 10
    lim.failed("a")
    assert lim.retry_after("a") == 61  # 10 failures now: the window is 60 s
    clock.now += 59.5
    assert lim.retry_after("a") == 1
    clock.now += 0.5  # exactly 60 s after: the window has passed
    assert lim.retry_after("a") == 0
    for _ in range(10):
        lim.failed("a")
    assert lim.retry_after("a") == 61
    # it remembers 4096 addresses: the oldest is forgotten first
    for i in range(4096):
        for _ in range(10):
            lim.failed("c%d" % i)
    assert lim.retry_after("a") == 0  # 4097 addresses: "a" is forgotten
    assert lim.retry_after("c0") == 61 and lim.retry_after("c4095") == 61
    lim.failed("c4096")
    assert lim.retry_after("c0") == 0 and lim.retry_after("c1") == 61


def test_login_limiter_counts_a_window_per_client(clock):
    lim = LoginLimiter(limit=3, window_s=10.0, max_clients=2)
    assert lim.retry_after("a") == 0
    for _ in range(3):
        lim.failed("a")
        clock.now += 1
    # failures at 1000, 1001, 1002; now 1003: the first leaves the window at 1010
    assert lim.retry_after("a") == 8
    assert lim.retry_after("b") == 0
    lim.failed("a")  # a fourth: only the last three count, the oldest now 1001
    assert lim.retry_after("a") == 9
    clock.now = 1010.5  # 1000 would have left too; 1001 has not
    assert lim.retry_after("a") == 1
    clock.now = 1011.0  # 1001 has left the window: two remain
    assert lim.retry_after("a") == 0
    lim.failed("a")
    assert lim.retry_after("a") == 2  # 1002, 1003, 1011: 1002 leaves at 1012
    lim.succeeded("a")  # a login that succeeds forgets the failures
    assert lim.retry_after("a") == 0
    lim.failed("a")
    lim.failed("a")
    assert lim.retry_after("a") == 0  # counted afresh: two of three
    lim.succeeded("never-seen")


def test_login_limiter_forgets_the_oldest_client_first(clock):
    lim = LoginLimiter(limit=1, window_s=10.0, max_clients=2)  # one failure blocks
    lim.failed("b")
    lim.failed("c")
    assert lim.retry_after("b") > 0 and lim.retry_after("c") > 0
    lim.failed("b")  # b failed again: now c is the oldest
    lim.failed("d")
    assert lim.retry_after("c") == 0
    assert lim.retry_after("b") > 0 and lim.retry_after("d") > 0
