"""Fast unit tests for page escaping (potato/markup.py) and the server's safety rules
(potato/server/safety.py), written so that tools/mutation.py's mutants of those modules fail."""

from potato.markup import Safe, esc, join, render


def test_esc_escapes_markup_and_both_quotes():
    assert esc('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"
    assert esc(3) == "3"


def test_render_escapes_attribute_values_and_keeps_safe_markup():
    out = render('<a title="{t}">{b}</a>', t='" onmouseover="x', b=Safe("<b>ok</b>"))
    assert out == '<a title="&quot; onmouseover=&quot;x"><b>ok</b></a>'
    assert isinstance(out, Safe)


def test_render_fields_by_type():
    assert render("{v}", v=None) == ""
    assert render("{v}", v=True) == "True"
    assert render("{v}", v=False) == "False"
    assert render("{v:.2f}", v=1.5) == "1.50"  # numbers keep their format specs
    assert render("{v:d}", v=7) == "7"
    assert render("{v}", v=float("nan")) == "0"
    assert render("{v}", v=float("inf")) == "0"
    assert render("{v}", v="<i>") == "&lt;i&gt;"


def test_join_escapes_all_but_safe_parts():
    out = join([Safe("<p>"), "<x>", Safe("</p>")])
    assert out == "<p>&lt;x&gt;</p>"
    assert isinstance(out, Safe)
    assert join([]) == ""


# -- potato/server/safety.py ------------------------------------------------------------------

import json  # noqa: E402
import socket  # noqa: E402
import types  # noqa: E402

import pytest  # noqa: E402

from potato.server import safety  # noqa: E402
from potato.server.safety import (BadInput, LoginLimiter, _check_tree, _too_deep,  # noqa: E402
                                  default_allowed_hosts, dumps, finite, host_allowed,
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


def test_check_tree_counts_depth_for_keys_values_and_items():
    for value in ({"\ud800": 1}, {"k": "\ud800"}, ["\ud800"]):
        with pytest.raises(BadInput) as e:
            _check_tree(value, 63)  # the children are at 64: checked, not too deep
        assert "surrogate" in str(e.value)
        with pytest.raises(BadInput) as e:
            _check_tree(value, 64)  # the children are at 65: too deep, before anything else
        assert "nested" in str(e.value)
    _check_tree({"k": ["v"]}, 62)
    with pytest.raises(BadInput):
        _check_tree({"k": ["v"]}, 63)  # the key and the list are at 64, "v" at 65
    nested = "x"
    for _ in range(64):
        nested = [nested]
    _check_tree(nested)  # the string is at depth 64
    with pytest.raises(BadInput):
        _check_tree([nested])


def test_too_deep_counts_open_brackets_outside_strings():
    assert _too_deep("[" * 64 + "]" * 64) is False
    assert _too_deep("{" * 64) is False
    assert _too_deep("[" * 65) is True
    assert _too_deep("{" * 65) is True
    assert _too_deep("[]" * 200) is False  # closing brackets bring the depth back down
    assert _too_deep("[" * 40 + "]" * 40 + "[" * 64) is False
    assert _too_deep("[" * 60 + "[]" + "[" * 5) is True  # 60 + 5 open
    assert _too_deep('"' + "[" * 100 + '"') is False
    assert _too_deep('"\\"' + "[" * 100 + '"') is False  # an escaped quote does not end it
    assert _too_deep('"\\\n' + "[" * 100 + '"') is False  # nor does an escaped line break


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
    for i in range(4097):  # one more address than it remembers
        lim.failed("c%d" % i)
    assert "a" not in lim._failures and "c0" not in lim._failures
    assert "c1" in lim._failures and len(lim._failures) == 4096


def test_login_limiter_counts_a_window_per_client(clock):
    lim = LoginLimiter(limit=3, window_s=10.0, max_clients=2)
    assert lim.retry_after("a") == 0
    for _ in range(3):
        lim.failed("a")
        clock.now += 1
    # failures at 1000, 1001, 1002; now 1003: the first leaves the window at 1010
    assert lim.retry_after("a") == 8
    assert lim.retry_after("b") == 0
    lim.failed("a")  # a fourth: only the last three are kept, the oldest now 1001
    assert lim._failures["a"] == [1001.0, 1002.0, 1003.0]
    assert lim.retry_after("a") == 9
    clock.now = 1011.0  # 1001 has left the window: two remain
    assert lim.retry_after("a") == 0
    lim.succeeded("a")
    assert "a" not in lim._failures
    lim.succeeded("never-seen")
    lim.failed("b")
    lim.failed("c")
    assert set(lim._failures) == {"b", "c"}
    lim.failed("b")  # b failed again: now c is the oldest
    lim.failed("d")
    assert set(lim._failures) == {"b", "d"}
