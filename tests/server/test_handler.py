"""Handler-level tests (the first of two tiers, as CPython's http.server tests have): a request is
driven through the real Handler over in-memory streams — no socket, no thread, no server loop.
The live-server tests (test_server.py and the others) are the second tier."""

import json

import pytest

from potato.config.settings import load
from potato.server.app import App
from potato.server.http import Handler, HTTPError
from potato.project.store import Store
from tests.helpers import BASE, MemorySocket

KEY = "test-admin-key-0123456789"


class MemoryServer:
    def __init__(self, app):
        self.app = app


@pytest.fixture
def app(write_config, tmp_path):
    cfg, errors, _ = load(write_config(BASE))
    assert not errors
    store = Store(cfg.db_path)
    app = App(cfg, store)
    from potato.project.data import load_items

    store.sync_items(load_items(cfg))
    yield app
    store.close()


def drive(app, raw: bytes):
    """(status, headers dict, body bytes) of the response to ``raw`` (one HTTP/1.1 request)."""
    conn = MemorySocket(raw)
    Handler(conn, ("127.0.0.1", 40000), MemoryServer(app))
    head, _, body = bytes(conn.sent).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


def request(method, path, body=b"", headers=None):
    h = {"Host": "127.0.0.1", "Connection": "close", "Content-Length": str(len(body))}
    h.update(headers or {})
    head = "%s %s HTTP/1.1\r\n%s\r\n\r\n" % (method, path, "\r\n".join(
        "%s: %s" % kv for kv in h.items()))
    return head.encode() + body


def test_login_page(app):
    status, headers, body = drive(app, request("GET", "/login"))
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert int(headers["content-length"]) == len(body)
    assert b"<form" in body


def test_unknown_path_is_a_json_404_for_api_clients(app):
    status, headers, body = drive(app, request("GET", "/admin/api/nothing",
                                               headers={"Accept": "application/json"}))
    assert status in (401, 404)
    assert "error" in json.loads(body)


def test_method_not_allowed_names_the_allowed_ones(app):
    status, headers, body = drive(app, request("DELETE", "/login"))
    assert status == 405 and headers["allow"] == "GET, POST"


def test_an_exception_in_a_route_is_a_500_with_a_body(app):
    """The one choke point answers; it never drops the connection with an empty reply."""

    @app.route("GET", r"/boom")
    def boom(h):
        raise RuntimeError("internal detail that must not leak")

    status, headers, body = drive(app, request("GET", "/boom",
                                               headers={"Accept": "application/json"}))
    assert status == 500
    assert json.loads(body) == {"error": "Internal error in the Potato server; the server log "
                                         "has the details."}
    status, headers, body = drive(app, request("GET", "/boom"))
    assert status == 500 and b"internal detail" not in body and b"<html" in body.lower()


def test_http_error_headers_reach_the_client(app):
    @app.route("GET", r"/limited")
    def limited(h):
        raise HTTPError(429, "Too many tries.", {"Retry-After": "30"})

    status, headers, body = drive(app, request("GET", "/limited",
                                               headers={"Accept": "application/json"}))
    assert status == 429 and headers["retry-after"] == "30"


def test_admin_api_needs_the_key(app):
    status, _, body = drive(app, request("GET", "/admin/api/stats",
                                         headers={"Accept": "application/json"}))
    assert status == 401 and "error" in json.loads(body)
    status, _, body = drive(app, request("GET", "/admin/api/stats",
                                         headers={"X-API-Key": KEY}))
    assert status == 200 and json.loads(body)["items"] == 5


def test_cross_origin_post_is_refused(app):
    status, _, _ = drive(app, request("POST", "/login", b"username=ann", {
        "Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"}))
    assert status == 403


@pytest.mark.parametrize("raw", [b"GET /login HTTP/1.1 extra\r\n\r\n",
                                 b"GET /login HTTP/7.0\r\n\r\n"])
def test_malformed_request_line_gets_an_answer(app, raw):
    conn = MemorySocket(raw)
    Handler(conn, ("127.0.0.1", 40000), MemoryServer(app))
    assert bytes(conn.sent) and b"400" in bytes(conn.sent) or b"505" in bytes(conn.sent)
