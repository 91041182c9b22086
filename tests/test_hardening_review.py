"""The hostile review of issue 25's hardening: annotator bodies, debug behind a proxy,
Content-Length, new-name logins. Each test here failed before its fix."""

import json

from tests.helpers import Client, make_project, raw, read_all


def test_an_annotator_session_does_not_lift_the_body_cap(tmp_path, serve):
    _, url = serve(make_project(tmp_path, labels=False), training=False)
    c = Client(url)
    c.login("mallory")
    r = c.post("/api/annotations", body=b" " * (100 << 10),
               headers={"Content-Type": "application/json"})
    assert r.status == 413 and "annotator" in json.loads(r.body)["error"]


def test_debug_gives_no_admin_to_a_forwarded_request(tmp_path, serve):
    _, url = serve(make_project(tmp_path, top="debug: true", labels=False), training=False)
    assert Client(url).get("/admin/api/stats").status == 200  # debug on loopback, as before
    r = Client(url).get("/admin/api/stats", headers={"X-Forwarded-For": "203.0.113.9"})
    assert r.status == 401


def test_content_length_must_be_one_header_of_digits(tmp_path, serve):
    server, _ = serve(make_project(tmp_path, labels=False), training=False)
    port = server.http.server_address[1]
    for cl in (b"Content-Length: +1", b"Content-Length: 1_0", b"Content-Length: 1\r\n"
               b"Content-Length: 2"):
        s = raw(port, b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/"
                      b"x-www-form-urlencoded\r\n" + cl + b"\r\n\r\nu=a")
        assert read_all(s).startswith(b"HTTP/1.1 400"), cl


def test_new_annotator_names_are_limited_per_address(tmp_path, serve):
    _, url = serve(make_project(tmp_path, labels=False), training=False)
    c = Client(url)
    statuses = [c.post("/login", form={"username": "u%d" % i}).status for i in range(101)]
    assert statuses[:100] == [303] * 100 and statuses[100] == 429
    assert c.post("/login", form={"username": "u3"}).status == 303  # a known name
