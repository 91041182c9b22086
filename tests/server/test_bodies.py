"""Request bodies read into memory (``potato/server/bodies.py``): each within its cap (4 KB before
a key, session or token is shown; an annotator's save as the project's schemes allow; else
``server.max_body_mb`` or the route's own), one Content-Length of digits, 400/408/411/413/415
with a sentence, a refused body never read, pipelined requests kept apart. Most tests drive the
real handler in-process (``helpers.handle_in_memory``); those about time and sockets use a real
server on port 0."""

import json
import re
import socket
import threading
import time

import pytest

from potato.config.settings import load
from potato.server import connections
from potato.server.app import App
from potato.server.errors import HTTPError
from potato.project.store import Store
from tests.helpers import BASE, KEY, handle_in_memory, http_request, make_project, raw, read_all

JSON = {"Accept": "application/json"}
ADMIN = {"Accept": "application/json", "X-API-Key": KEY}
MAX_BODY = int(0.1 * 1024 * 1024)  # server.max_body_mb: 0.1 below


def add_routes(app):
    """Routes that read their body and say what they got, as the real ones read theirs."""
    for access in ("public", "admin", "annotator"):
        @app.route("POST", r"/t/%s" % access, access=access)
        def echo(h):
            first = h.body()
            h.send_json({"n": len(first), "same": h.body() is first, "head": first[:8].decode()})

    @app.route("POST", r"/t/small", access="admin")
    def small(h):
        h.send_json({"n": len(h.body(limit=100))})

    @app.route("POST", r"/t/huge", access="admin")
    def huge(h):
        h.send_json({"n": len(h.body(limit=10 ** 12))})

    @app.route("POST", r"/t/json")
    def json_route(h):
        h.send_json({"got": h.json_object()})

    @app.route("POST", r"/t/json-small", access="admin")
    def json_small(h):
        h.send_json({"got": h.json_object(limit=20)})

    @app.route("POST", r"/t/json-any")
    def json_any(h):
        h.send_json({"got": h.json_body()})

    @app.route("POST", r"/t/form")
    def form(h):
        h.send_json(h.form())

    @app.route("POST", r"/t/refuse")
    def refuse(h):
        raise HTTPError(409, "Refused before the body.")

    @app.route("GET", r"/t/page")
    def page(h):
        h.send(200, b"p" * 12000, "text/plain")

    @app.route("POST", r"/t/refuse-at-length")
    def refuse_at_length(h):
        raise HTTPError(409, "Refused: " + "x" * 12000)

    @app.route("POST", r"/t/read-then-refuse")
    def read_then_refuse(h):
        h.body()
        raise HTTPError(409, "Refused after the body.")

    @app.route("POST", r"/t/refuse-admin", access="admin")
    def refuse_admin(h):
        raise HTTPError(409, "Refused before the body.")

    @app.route("POST", r"/t/stall", access="admin")
    def stall(h):
        h.allow_stall(float(h.query["s"][0]))
        try:
            h.send_json({"n": len(h.body())})
        except socket.timeout as e:  # as the model-file route does
            app.stalls.append(str(e))
            h.close_connection = True
            h.send_json({"stalled": str(e)}, 504)

    app.released, app.stop, app.stalls = [], threading.Event(), []

    @app.route("POST", r"/t/release", access="admin")
    def release(h):
        h.when_done(lambda: app.released.append(h.query["n"][0]))
        if h.query.get("fail"):
            raise HTTPError(409, "Refused after taking a slot.")
        h.send_json({"n": len(h.body())})

    @app.route("POST", r"/t/watched", access="admin")
    def watched(h):
        h.watch(lambda: "The run ended while its body arrived." if app.stop.is_set() else None)
        h.send_json({"n": len(h.body())})

    @app.route("POST", r"/t/stall-public")
    def stall_public(h):
        h.allow_stall(5)
        h.send_json({"n": len(h.body())})


@pytest.fixture
def app(write_config):
    cfg, errors, _ = load(write_config(BASE + "server: {max_body_mb: 0.1}\n"))
    assert not errors, errors
    store = Store(cfg.db_path)
    app = App(cfg, store)
    from potato.project.data import load_items

    store.sync_items(load_items(cfg))
    add_routes(app)
    yield app
    store.close()


def ask(app, path, body=b"", headers=None, method="POST", length=True):
    """The one response to one request (the connection closes after it)."""
    out = handle_in_memory(app, http_request(method, path, body, headers or JSON, length=length))
    assert len(out) == 1, out
    return out[0]


def error(response):
    return json.loads(response[2])["error"]


def too_large(n, limit, what):
    return "The request body (%d bytes) is larger than the server accepts here (%d bytes; %s)." % (
        n, limit, what)


def annotator_cookie(app):
    out = handle_in_memory(app, http_request("POST", "/login", b"username=alice", {
        "Content-Type": "application/x-www-form-urlencoded"}))
    assert out[0][0] == 303, out
    return re.search(r"potato_session_[0-9a-f]+=[^;]+", out[0][1]["set-cookie"]).group(0)


# -- the caps ---------------------------------------------------------------------------------

def test_without_a_key_session_or_token_a_body_may_take_4_kb_and_no_more(app):
    status, _, body = ask(app, "/t/public", b"a" * 4096)
    assert status == 200 and json.loads(body) == {"n": 4096, "same": True, "head": "aaaaaaaa"}
    r = ask(app, "/t/public", b"a" * 4097)
    assert r[0] == 413 and error(r) == too_large(4097, 4096,
                                                 "before a key, session or token is shown")
    assert r[1]["connection"] == "close"  # the body was not read: where it ends is unknown


def test_an_admin_body_may_take_max_body_mb_and_no_more(app):
    status, _, body = ask(app, "/t/admin", b"b" * MAX_BODY, ADMIN)
    assert status == 200 and json.loads(body)["n"] == MAX_BODY
    r = ask(app, "/t/admin", b"b" * (MAX_BODY + 1), ADMIN)
    assert r[0] == 413 and error(r) == too_large(MAX_BODY + 1, MAX_BODY,
                                                 "server.max_body_mb caps every request")
    assert r[1]["connection"] == "close"


def test_a_routes_own_cap_applies_below_max_body_mb_and_never_above_it(app):
    assert json.loads(ask(app, "/t/small", b"c" * 100, ADMIN)[2]) == {"n": 100}
    r = ask(app, "/t/small", b"c" * 101, ADMIN)
    assert r[0] == 413 and error(r) == too_large(101, 100, "server.max_body_mb caps every request")
    assert json.loads(ask(app, "/t/huge", b"c" * MAX_BODY, ADMIN)[2]) == {"n": MAX_BODY}
    r = ask(app, "/t/huge", b"c" * (MAX_BODY + 1), ADMIN)
    assert r[0] == 413 and error(r) == too_large(MAX_BODY + 1, MAX_BODY,
                                                 "server.max_body_mb caps every request")


def test_an_annotators_body_may_take_what_one_save_of_the_schemes_can_and_no_more(app):
    cap = app.annotator_body_bytes
    assert 4096 < cap < MAX_BODY  # the project's one radio scheme: more than a login, far less
    headers = dict(JSON, Cookie=annotator_cookie(app))
    assert json.loads(ask(app, "/t/annotator", b"d" * cap, headers)[2])["n"] == cap
    r = ask(app, "/t/annotator", b"d" * (cap + 1), headers)
    assert r[0] == 413 and error(r) == too_large(
        cap + 1, cap, "for an annotator's request: what one save of this project's schemes can "
                      "take")
    # the same body without the session: the unauthenticated cap
    r = ask(app, "/t/annotator", b"d" * 10, JSON)
    assert r[0] == 401


def test_an_annotator_cap_never_lifts_a_routes_lower_one(app, write_config):
    app.annotator_body_bytes = MAX_BODY * 2  # schemes that need more than max_body_mb
    headers = dict(JSON, Cookie=annotator_cookie(app))
    r = ask(app, "/t/annotator", b"d" * (MAX_BODY + 1), headers)
    assert r[0] == 413 and error(r) == too_large(MAX_BODY + 1, MAX_BODY,
                                                 "server.max_body_mb caps every request")


def test_when_max_body_mb_is_what_bounds_a_save_the_413_names_it(app):
    # schemes that need exactly what max_body_mb allows: raising max_body_mb is the fix, so
    # the sentence names it, not the schemes
    app.annotator_body_bytes = MAX_BODY
    headers = dict(JSON, Cookie=annotator_cookie(app))
    r = ask(app, "/t/annotator", b"d" * (MAX_BODY + 1), headers)
    assert r[0] == 413 and error(r) == too_large(MAX_BODY + 1, MAX_BODY,
                                                 "server.max_body_mb caps every request")


def test_when_max_body_mb_is_4_kb_an_unauthenticated_413_names_it(app):
    app.max_body_bytes = 4096  # server.max_body_mb as small as the login cap
    r = ask(app, "/t/public", b"a" * 4097)
    assert r[0] == 413 and error(r) == too_large(4097, 4096,
                                                 "server.max_body_mb caps every request")


def test_a_request_without_content_length_has_an_empty_body(app):
    status, _, body = ask(app, "/t/public", length=False)
    assert status == 200 and json.loads(body) == {"n": 0, "same": True, "head": ""}


# -- Content-Length ---------------------------------------------------------------------------

@pytest.mark.parametrize("values, shown", [
    (["14", "14"], "'14', '14'"),
    (["14", "2"], "'14', '2'"),
    (["+14"], "'+14'"),
    (["1_4"], "'1_4'"),
    (["0x10"], "'0x10'"),
    (["1234567890123456"], "'1234567890123456'"),  # 16 digits
    (["9" * 40], "'%s'" % ("9" * 20)),  # shown cut at 20 characters
])
def test_content_length_must_be_one_header_of_1_to_15_digits(app, values, shown):
    r = ask(app, "/t/public", b"username=alice",
            [("Accept", "application/json")] + [("Content-Length", v) for v in values],
            length=False)
    assert r[0] == 400 and error(r) == ("The request needs one Content-Length header of 1 to 15 "
                                        "digits (it has %s)." % shown)
    assert r[1]["connection"] == "close"


def test_a_negative_content_length_is_named(app):
    for value in ("-5", " -5"):
        r = ask(app, "/t/public", b"", [("Accept", "application/json"), ("Content-Length", value)],
                length=False)
        assert r[0] == 400 and error(r) == (
            "Content-Length is negative. The request needs one Content-Length header of 1 to 15 "
            "digits (it has '-5').")


def test_fifteen_digits_are_a_length_and_refused_for_their_size(app):
    r = ask(app, "/t/public", b"", [("Accept", "application/json"),
                                    ("Content-Length", "999999999999999")], length=False)
    assert r[0] == 413 and error(r) == too_large(999999999999999, 4096,
                                                 "before a key, session or token is shown")


def test_a_body_that_stops_short_is_a_400_naming_how_much_came(app):
    r = handle_in_memory(app, http_request("POST", "/t/admin", b"", [
        ("Accept", "application/json"), ("X-API-Key", KEY), ("Content-Length", "10")],
        length=False) + b"abc")
    assert len(r) == 1 and r[0][0] == 400
    assert error(r[0]) == "The request body ended after 3 of 10 bytes."
    assert r[0][1]["connection"] == "close"


# -- JSON and forms ---------------------------------------------------------------------------

def test_a_json_body_is_read_as_json(app):
    for ctype in ("application/json", "Application/JSON; charset=utf-8",
                  "application/merge-patch+json"):
        r = ask(app, "/t/json", b'{"a": [1, "x"]}', dict(JSON, **{"Content-Type": ctype}))
        assert r[0] == 200 and json.loads(r[2]) == {"got": {"a": [1, "x"]}}, ctype


def test_a_json_route_refuses_another_type_with_415(app):
    r = ask(app, "/t/json", b'{"a": 1}', dict(JSON, **{"Content-Type": "text/plain; x=y"}))
    assert r[0] == 415 and error(r) == ("Send the body as JSON with Content-Type: "
                                        "application/json (not 'text/plain').")
    r = ask(app, "/t/json", b'{"a": 1}')
    assert r[0] == 415 and error(r) == ("Send the body as JSON with Content-Type: "
                                        "application/json (not without one).")
    r = ask(app, "/t/json", b'{"a": 1}', dict(JSON, **{"Content-Type": "text/" + "x" * 70}))
    assert r[0] == 415 and error(r) == ("Send the body as JSON with Content-Type: "
                                        "application/json (not 'text/%s')." % ("x" * 55))


def test_an_empty_body_of_any_type_is_judged_as_json(app):
    r = ask(app, "/t/json-any", b"", dict(JSON, **{"Content-Type": "text/plain"}))
    assert r[0] == 200 and json.loads(r[2]) == {"got": None}
    r = ask(app, "/t/json", b"", dict(JSON, **{"Content-Type": "text/plain"}))
    assert r[0] == 400 and error(r) == "The request body must be a JSON object."
    r = ask(app, "/t/json-any", b"", dict(JSON, **{"Content-Type": "text/plain"}), length=False)
    assert r[0] == 200 and json.loads(r[2]) == {"got": None}


def test_bad_json_and_json_that_is_no_object_are_400s(app):
    h = dict(JSON, **{"Content-Type": "application/json"})
    r = ask(app, "/t/json", b'{"a": ', h)
    assert r[0] == 400 and error(r).startswith("The request body is not valid JSON: ")
    r = ask(app, "/t/json", b'[1, 2]', h)
    assert r[0] == 400 and error(r) == "The request body must be a JSON object."
    assert json.loads(ask(app, "/t/json-any", b'[1, 2]', h)[2]) == {"got": [1, 2]}


def test_a_json_routes_own_cap_applies(app):
    h = dict(ADMIN, **{"Content-Type": "application/json"})
    assert ask(app, "/t/json-small", b'{"a": "%s"}' % (b"x" * 11), h)[0] == 200  # 20 bytes
    r = ask(app, "/t/json-small", b'{"a": "%s"}' % (b"x" * 12), h)
    assert r[0] == 413 and error(r) == too_large(21, 20, "server.max_body_mb caps every request")


def test_a_form_is_read_with_its_blank_values(app):
    h = dict(JSON, **{"Content-Type": "application/x-www-form-urlencoded; charset=UTF-8"})
    r = ask(app, "/t/form", b"a=&b=1&b=%C3%A9", h)
    assert r[0] == 200 and json.loads(r[2]) == {"a": [""], "b": ["1", "\u00e9"]}


def test_a_form_of_another_type_is_refused_unless_empty(app):
    r = ask(app, "/t/form", b"a=1", dict(JSON, **{"Content-Type": "text/plain"}))
    assert r[0] == 400 and error(r) == "Send the form as application/x-www-form-urlencoded."
    r = ask(app, "/t/form", b"", dict(JSON, **{"Content-Type": "text/plain"}))
    assert r[0] == 200 and json.loads(r[2]) == {}


def test_a_form_that_is_not_utf8_is_a_400(app):
    r = ask(app, "/t/form", b"a=\xff\xfe",
            dict(JSON, **{"Content-Type": "application/x-www-form-urlencoded"}))
    assert r[0] == 400 and error(r) == "The form is not valid UTF-8."


# -- what is left on the connection -----------------------------------------------------------

def pipelined(app, first, second=None):
    second = second or http_request("GET", "/t/nothing", b"", JSON)
    return handle_in_memory(app, first + second)


def test_an_unread_body_is_drained_so_the_next_request_is_read_apart(app):
    out = pipelined(app, http_request("GET", "/login", b"x=1&y=2"))
    assert [r[0] for r in out] == [200, 404]
    assert error(out[1]) == "Nothing at /t/nothing."
    out = pipelined(app, http_request("POST", "/t/refuse-admin", b"x=1&y=2", ADMIN))
    assert [r[0] for r in out] == [409, 404]  # an admin's refused body is read and dropped


def test_a_refused_body_without_credentials_is_never_read_and_the_connection_closes(app):
    out = pipelined(app, http_request("POST", "/t/refuse", b"x=1&y=2", JSON))
    assert [r[0] for r in out] == [409] and out[0][1]["connection"] == "close"
    # a refusal with no body, or after its body was read, leaves nothing unread: kept
    out = pipelined(app, http_request("POST", "/t/refuse", b"", JSON))
    assert [r[0] for r in out] == [409, 404]
    out = pipelined(app, http_request("POST", "/t/read-then-refuse", b"x=1&y=2", JSON))
    assert [r[0] for r in out] == [409, 404]


def test_an_unread_body_too_large_to_drain_closes_the_connection(app):
    out = pipelined(app, http_request("GET", "/login", b"x" * 5000))
    assert [r[0] for r in out] == [200] and out[0][1]["connection"] == "close"


def test_a_request_with_no_body_keeps_the_connection(app):
    out = pipelined(app, http_request("GET", "/login"), http_request("GET", "/login", length=False))
    assert [r[0] for r in out] == [200, 200]


def test_100_continue_is_sent_only_when_the_body_is_read(app):
    h = dict(JSON, Expect="100-continue")
    out = handle_in_memory(app, http_request("POST", "/t/public", b"abc", h))
    assert [r[0] for r in out] == [100, 200] and json.loads(out[1][2])["n"] == 3
    out = handle_in_memory(app, http_request("POST", "/t/public", b"a" * 5000, h))
    assert [r[0] for r in out] == [413]  # never invited
    out = handle_in_memory(app, http_request("POST", "/t/refuse", b"abc", h))
    assert [r[0] for r in out] == [409]
    out = handle_in_memory(app, http_request("POST", "/t/public", b"", h))
    assert [r[0] for r in out] == [200]  # no body: nothing to invite


def test_what_a_request_took_is_released_once_it_is_answered_or_refused(app):
    assert ask(app, "/t/release?n=1", b"abc", ADMIN)[0] == 200
    assert ask(app, "/t/release?n=2&fail=1", b"abc", ADMIN)[0] == 409
    assert app.released == ["1", "2"]


def test_only_an_authenticated_sender_may_pause_its_body(app):
    r = ask(app, "/t/stall-public", b"abc")
    assert r[0] == 401 and error(r) == "Only an authenticated sender may stream this body."


# -- over a real socket: time, pieces, the close ----------------------------------------------

@pytest.fixture
def live(tmp_path, serve):
    server, _ = serve(make_project(tmp_path, labels=False), training=False)
    add_routes(server.app)
    return server.http.server_address[1], server.app, server.access_lines


def head(path, n, extra=b""):
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\nX-API-Key: %s"
            b"\r\nConnection: close\r\n%sContent-Length: %d\r\n\r\n" % (path.encode(), KEY.encode(),
                                                                      extra, n))


def reply_of(data):
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.partition(b"\r\n\r\n")[2])


def test_a_body_sent_in_pieces_arrives_whole(live):
    s = raw(live[0], head("/t/admin", 3000))
    for i in range(3):
        time.sleep(0.05)
        s.sendall(b"%d" % i * 1000)
    status, got = reply_of(read_all(s))
    assert status == 200 and got == {"n": 3000, "same": True, "head": "00000000"}


def test_a_body_behind_the_rate_floor_gets_408(live):
    s = raw(live[0], head("/t/stall?s=1", 100))
    t0 = time.monotonic()
    status, got = reply_of(read_all(s))
    assert status == 408 and got["error"] == (
        "The request body did not arrive in time: 0 of 100 bytes in 1 s (a body must keep up "
        "16 KB/s after its first 1 s).")
    assert time.monotonic() - t0 < 5


def test_a_pause_past_the_allowed_stall_is_named_while_the_floor_is_still_ahead(live):
    s = raw(live[0], head("/t/stall?s=1", 100000) + b"x" * 40000)  # 40 KB: 2.4 s ahead of the floor
    status, got = reply_of(read_all(s))
    assert status == 504 and got == {"stalled": "nothing sent for 1 s"}


def test_a_body_in_pieces_ends_where_its_length_says_and_the_next_request_follows(live):
    first = head("/t/admin", 3000).replace(b"Connection: close\r\n", b"")
    s = raw(live[0], first + b"a" * 1000)
    time.sleep(0.1)
    s.sendall(b"b" * 2000 + b"GET /t/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: "
                            b"application/json\r\nConnection: close\r\n\r\n")
    data = read_all(s)
    assert data.count(b"HTTP/1.1 ") == 2 and b"HTTP/1.1 404" in data, data
    assert b'{"n": 3000, "same": true, "head": "aaaaaaaa"}' in data, data


def test_pipelined_requests_are_answered_in_turn(live):
    one = b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    s = raw(live[0], one + one + one.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
    t0 = time.monotonic()
    data = read_all(s)
    assert data.count(b"HTTP/1.1 200") == 3 and time.monotonic() - t0 < 5


def test_a_refused_body_still_in_flight_does_not_reset_the_answer(live):
    """The server shuts its side and drops what still comes for a moment before it closes:
    the client reads its 413 and a clean end, however much it was still sending."""
    s = raw(live[0], b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
                  b"Content-Length: 1000000\r\n\r\n" + b"u" * 30000, timeout=10)
    data = b""
    t0 = time.monotonic()
    while True:
        block = s.recv(65536)  # a reset would raise here
        if not block:
            break
        data += block
        s.sendall(b"u" * 20000)  # still sending after the answer came
    s.close()
    status, got = reply_of(data)
    assert status == 413 and "before a key, session or token is shown" in got["error"]
    assert time.monotonic() - t0 < 5


def test_a_watched_body_is_cut_off_with_the_servers_reason(live):
    port, app, _ = live
    s = raw(port, head("/t/watched", 1000) + b"x" * 10)
    time.sleep(0.2)
    app.stop.set()
    status, got = reply_of(read_all(s))
    assert status == 409 and got == {"error": "The run ended while its body arrived."}


def test_a_pause_within_the_allowed_stall_is_not_cut_by_the_servers_backstop(live, monkeypatch):
    """The server's own check of slow bodies (a backstop, after the default floor and a grace)
    uses the floor this body was given, not the default."""
    monkeypatch.setattr(connections, "BODY_FLOOR_S", 0.2)
    s = raw(live[0], head("/t/stall?s=4", 100))
    time.sleep(2.8)
    s.sendall(b"z" * 100)
    status, got = reply_of(read_all(s))
    assert status == 200 and got == {"n": 100}


def test_a_trickled_body_is_cut_at_its_floor_however_long_it_goes_on(live):
    s = raw(live[0], head("/t/stall?s=1", 1000))
    s.setblocking(False)
    t0, data = time.monotonic(), b""
    while time.monotonic() - t0 < 6:  # a byte every 0.1 s: each read is quick, the whole is not
        try:
            s.sendall(b"t")
            data = s.recv(65536)
        except (BlockingIOError, OSError):
            pass
        if data:
            break
        time.sleep(0.1)
    took = time.monotonic() - t0
    s.setblocking(True)
    s.settimeout(10)
    status, got = reply_of(data + read_all(s))
    assert status == 408 and "did not arrive in time" in got["error"]
    assert took < 3  # at the floor (1 s), not when the sender gives up


def test_a_reset_connection_is_no_stall(live):
    """A client that resets its connection within the allowed pause has not paused: the route
    is not told "nothing sent for N s" (an agent's run log would blame a stall)."""
    port, app, _ = live
    s = raw(port, head("/t/stall?s=4", 1000) + b"r" * 10)
    time.sleep(0.3)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")  # close: reset
    s.close()
    time.sleep(1)  # the server's read fails at once
    assert app.stalls == []


def test_a_long_body_that_keeps_up_the_rate_is_not_cut(live, monkeypatch):
    """The server's own check (a backstop past the floor and a grace) counts the bytes that
    came: a body longer than floor + grace that keeps up is read whole."""
    s = raw(live[0], head("/t/stall?s=1", 8 * 20000))
    for _ in range(8):  # 40 KB/s for 4 s
        s.sendall(b"k" * 20000)
        time.sleep(0.5)
    status, got = reply_of(read_all(s))
    assert status == 200 and got == {"n": 160000}


def test_a_pipelined_request_waits_until_the_previous_answer_has_left(live):
    """A client that sends requests but does not read the answers gets no more work done: the
    next request is read only once the previous answer has left the server."""
    port, app, lines = live
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)  # takes little until it reads
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    one = b"GET /t/page HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    s.sendall(one + one.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
    time.sleep(0.5)
    assert sum("/t/page" in line for line in lines) == 1  # the second is not read yet
    data = read_all(s)
    assert data.count(b"HTTP/1.1 200") == 2
    assert sum("/t/page" in line for line in lines) == 2


def test_a_long_refusal_reaches_a_slow_reader_whose_body_was_never_read(live):
    """The server never reads a refused body, but before it closes it shuts its sending side and
    drops what the client sent: closing on unread bytes would reset the connection and lose
    the part of the answer the client had not taken yet."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)  # takes the answer slowly
    s.settimeout(10)
    s.connect(("127.0.0.1", live[0]))
    s.sendall(b"POST /t/refuse-at-length HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/"
              b"json\r\nContent-Length: 100000\r\n\r\n" + b"u" * 30000)
    time.sleep(0.5)  # the answer is out, mostly still on the server's side
    status, got = reply_of(read_all(s))  # a reset would raise, or cut the answer short
    assert status == 409 and got == {"error": "Refused: " + "x" * 12000}


def test_a_refused_client_that_goes_on_sending_is_cut_off_after_a_little(live):
    """After a refusal the server drops at most 64 KB of what still comes, for at most 2 s,
    then closes: a client streaming a huge body into a 409 is stopped long before it has sent
    it (over loopback 2 s of reading would take hundreds of MB)."""
    s = socket.socket()
    s.settimeout(10)
    s.connect(("127.0.0.1", live[0]))
    s.sendall(b"POST /t/refuse HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
              b"Content-Length: 1000000000\r\n\r\n")
    sent, block = 0, b"z" * 65536
    try:
        while sent < 1000000000:
            sent += s.send(block)
    except OSError:
        pass  # reset: the server closed
    finally:
        s.close()
    assert sent < 50 << 20, sent
