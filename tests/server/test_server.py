"""The annotation server over real HTTP: login, annotate, resume, admin auth, errors, XSS."""

import json
import re
import time

import pytest

from tests.helpers import BASE, Client

ADMIN_KEY = "test-admin-key-0123456789"
HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)"> & "quotes"'

MULTI = BASE + """\
  - annotation_type: multiselect
    name: topics
    labels: [acting, plot, music]
"""


@pytest.fixture
def project(write_config):
    items = [{"id": f"i{n}", "text": f"item number {n}"} for n in range(5)]
    items.append({"id": "evil", "text": HOSTILE})
    return write_config(MULTI, items=items)


def test_login_annotate_and_resume(project, serve):
    server, url = serve(project)
    c = Client(url)
    r = c.get("/")
    assert r.status == 303 and r.headers["Location"] == "/login"
    r = c.login("alice")
    cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    page = c.get("/annotate").text
    assert "item number 0" in page and "0 of 6 items labelled by you" in page
    r = c.post("/annotate", form={"item_id": "i0", "position": "0", "action": "next",
                                  "label:sentiment": "positive", "present:sentiment": "1",
                                  "label:topics": ["plot", "acting"], "present:topics": "1"})
    assert r.status == 303
    page = c.get("/annotate").text
    assert "item number 1" in page and "1 of 6 items labelled by you" in page
    # A new browser, same username: resumes at item 2 with item 1's labels kept.
    c2 = Client(url)
    c2.login("alice")
    assert "item number 1" in c2.get("/annotate").text
    status, mine = c2.json("GET", "/api/annotations/i0")
    assert mine["labels"] == {"sentiment": "positive", "topics": ["acting", "plot"]}
    # Previous shows item 1 again with its saved choice checked.
    c2.post("/annotate", form={"item_id": "i1", "position": "1", "action": "prev"})
    page = c2.get("/annotate").text
    assert "item number 0" in page
    assert re.search(r'value="positive" data-key="1" checked', page)
    # Another annotator starts from the beginning.
    c3 = Client(url)
    c3.login("bob")
    assert "item number 0" in c3.get("/annotate").text


def test_annotate_needs_login(project, serve):
    _, url = serve(project)
    c = Client(url)
    r = c.get("/annotate")
    assert r.status == 303 and r.headers["Location"] == "/login"
    status, body = c.json("POST", "/api/annotations", json_body={"item_id": "i0", "labels": {}})
    assert status == 401 and "Log in first" in body["error"]


def test_bad_username_is_refused(project, serve):
    _, url = serve(project)
    r = Client(url).post("/login", form={"username": "<b>x</b>"})
    assert r.status == 400 and "Choose a username" in r.text


def test_json_annotation_api_validates(project, serve):
    _, url = serve(project)
    c = Client(url)
    c.login("ann")
    ok = c.json("POST", "/api/annotations",
                json_body={"item_id": "i2", "labels": {"sentiment": "negative"}})
    assert ok == (200, {"ok": True, "item_id": "i2", "labels": {"sentiment": "negative"}})
    for body, fragment in [
        ({"item_id": "i2", "labels": {"sentiment": "meh"}}, "'meh' is not a label of scheme"),
        ({"item_id": "i2", "labels": {"colour": "red"}}, "'colour' is not an annotation scheme"),
        ({"item_id": "nope", "labels": {"sentiment": "negative"}}, "is not an item"),
        ({"item_id": "i2", "labels": {"sentiment": ["positive"]}}, "takes one label"),
        ({"item_id": "i2"}, "labels must be an object"),
    ]:
        status, err = c.json("POST", "/api/annotations", json_body=body)
        assert status == 400 and fragment in err["error"], (body, err)


def test_admin_api_key_and_session(project, serve):
    _, url = serve(project)
    c = Client(url)
    status, body = c.json("GET", "/admin/api/items/i0")
    assert status == 401 and "X-API-Key" in body["error"]
    status, _ = c.json("GET", "/admin/api/items/i0", headers={"X-API-Key": ADMIN_KEY + "x"})
    assert status == 401
    status, item = c.json("GET", "/admin/api/items/i0", headers={"X-API-Key": ADMIN_KEY})
    assert status == 200
    assert item == {"id": "i0", "text": "item number 0", "labels": {}, "predictions": {}}
    status, _ = c.json("GET", "/admin/api/items/missing", headers={"X-API-Key": ADMIN_KEY})
    assert status == 404
    # Pages: ask for the key once, then a session cookie.
    r = c.get("/admin")
    assert r.status == 303 and r.headers["Location"].startswith("/admin/login")
    r = c.post("/admin/login", form={"key": "wrong", "next": "/admin"})
    assert r.status == 401 and "not the admin key" in r.text
    r = c.post("/admin/login", form={"key": ADMIN_KEY, "next": "https://evil.example/"})
    assert r.status == 303 and r.headers["Location"] == "/admin"
    cookie = r.headers["Set-Cookie"]
    assert re.match(r"potato_admin_[0-9a-f]{10}=", cookie)  # the project's own name
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    page = c.get("/admin")
    assert page.status == 200 and "6 items" in page.text
    assert c.json("GET", "/admin/api/stats")[1]["items"] == 6
    # Logged out: the cookie no longer works.
    [name] = [k for k in c.cookies if k.startswith("potato_admin_")]
    token = c.cookies[name]
    c.post("/admin/logout")
    c.cookies[name] = token
    assert c.get("/admin").status == 303


def test_cross_origin_posts_refused(project, serve):
    _, url = serve(project)
    c = Client(url)
    c.post("/admin/login", form={"key": ADMIN_KEY})
    host = url.split("//")[1].rstrip("/")
    r = c.post("/admin/logout", headers={"Origin": "http://evil.example"})
    assert r.status == 403 and "Cross-origin request from http://evil.example refused" in r.text
    r = c.post("/admin/logout", headers={"Sec-Fetch-Site": "cross-site"})
    assert r.status == 403
    assert c.get("/admin").status == 200  # still logged in: nothing happened
    r = c.post("/admin/logout", headers={"Origin": f"http://{host}"})
    assert r.status == 303
    # Annotator POSTs are protected the same way.
    a = Client(url)
    r = a.post("/login", form={"username": "x"}, headers={"Origin": "http://evil.example"})
    assert r.status == 403


def test_debug_gives_loopback_admin(project, serve):
    _, url = serve(project, debug=True)
    status, _ = Client(url).json("GET", "/admin/api/stats")
    assert status == 200


def test_hostile_item_text_is_inert(project, serve):
    _, url = serve(project)
    c = Client(url)
    c.login("x")
    c.post("/annotate", form={"position": "4", "action": "next"})  # jump to the 6th item
    r = c.get("/annotate")
    assert "evil" in r.text
    assert "<script>alert(1)" not in r.text and "<img src=x" not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" \
        in r.text
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    assert r.headers["X-Content-Type-Options"] == "nosniff"


def test_malformed_requests_answer_json(project, write_config, serve):
    _, url = serve(project)
    c = Client(url)
    c.login("x")
    r = c.post("/api/annotations", body=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status == 400 and r.headers["Content-Type"] == "application/json"
    assert json.loads(r.body)["error"].startswith("The request body is not valid JSON")
    r = c.get("/api/nothing-here")
    assert r.status == 404 and json.loads(r.body) == {"error": "Nothing at /api/nothing-here."}
    r = c.request("DELETE", "/api/annotations")
    assert r.status == 405 and r.headers["Allow"] == "POST"
    r = c.get("/nowhere")
    assert r.status == 404 and "text/html" in r.headers["Content-Type"]
    assert "Traceback" not in r.text


def test_oversized_body_is_413(write_config, serve):
    path = write_config(BASE + "server: {max_body_mb: 0.001}\n")
    _, url = serve(path)
    c = Client(url)
    c.login("x")
    r = c.post("/api/annotations", body=b"x" * 5000, headers={"Content-Type": "application/json"})
    assert r.status == 413
    assert "larger than the server accepts" in json.loads(r.body)["error"]


def test_a_returning_annotator_resumes_at_the_first_item_not_labelled(project, serve):
    _, url = serve(project)
    c = Client(url)
    c.login("bo")
    # Label item 0, skip item 1 (no label), label item 2: now at item 3.
    for n, label in ((0, "positive"), (1, None), (2, "negative")):
        form = {"item_id": f"i{n}", "position": str(n), "action": "next"}
        if label:
            form.update({"label:sentiment": label, "present:sentiment": "1"})
        assert c.post("/annotate", form=form).status == 303
    page = c.get("/annotate").text
    assert "item number 3" in page
    assert 'href="/annotate?resume=1"' in page and "(item 2)" in page  # the link to item 1
    # Coming back (a new login) resumes at item 1, the first without a label from bo.
    c2 = Client(url)
    c2.login("bo")
    page = c2.get("/annotate").text
    assert "item number 1" in page and "resume=1" not in page
    # The link does the same within a session.
    c.post("/annotate", form={"item_id": "i3", "position": "3", "action": "next"})
    r = c.get("/annotate?resume=1")
    assert r.status == 303 and "item number 1" in c.get("/annotate").text


def test_all_done_points_at_skipped_items(project, serve):
    _, url = serve(project)
    c = Client(url)
    c.login("cy")
    for n, item in enumerate(["i0", "i1", "i2", "i3", "i4", "evil"]):
        form = {"item_id": item, "position": str(n), "action": "next"}
        if item != "i2":
            form.update({"label:sentiment": "positive", "present:sentiment": "1"})
        c.post("/annotate", form=form)
    page = c.get("/annotate").text
    assert "All done" in page and "go to the first of them (item 3)" in page


def test_prediction_shown_as_suggestion_not_label(project, serve):
    server, url = serve(project)
    with server.app.store.tx() as db:
        db.execute("INSERT INTO predictions VALUES ('i0', 'sentiment', '\"positive\"', 0.87, 'r1')")
    c = Client(url)
    c.login("x")
    page = c.get("/annotate").text
    assert "Model suggests: <b>positive</b>, 0.87" in page
    assert ' checked' not in page
    status, item = c.json("GET", "/admin/api/items/i0", headers={"X-API-Key": ADMIN_KEY})
    assert item["labels"] == {}
    assert item["predictions"] == {"sentiment": {"label": "positive", "confidence": 0.87,
                                                 "run_id": "r1"}}


def test_access_log_lines(project, serve):
    server, url = serve(project)
    Client(url).get("/login")
    assert any(re.match(r'127\.0\.0\.1 - - \[.+\] "GET /login HTTP/1\.1" 200', line)
               for line in server.access_lines), server.access_lines


def test_items_follow_data_file_changes(project, serve, tmp_path, monkeypatch):
    server, url = serve(project)
    c = Client(url)
    c.login("x")
    c.json("POST", "/api/annotations", json_body={"item_id": "i0", "labels": {"sentiment": "positive"}})
    data = tmp_path / "items.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    rows = rows[1:] + [{"id": "new", "text": "a new item"}]  # i0 (labelled) leaves the file
    time.sleep(0.01)
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    counts = server.app.sync_items()
    assert counts == {"added": 1, "updated": 0, "deactivated": 1, "total": 6}
    assert server.app.store.item_ids()[-1] == "new"
    status, item = c.json("GET", "/admin/api/items/i0", headers={"X-API-Key": ADMIN_KEY})
    assert item["labels"]["sentiment"] == [{"annotator": "x", "label": "positive"}]


def test_watcher_picks_up_new_items(project, serve, tmp_path, monkeypatch):
    from potato.server import app as app_module

    monkeypatch.setattr(app_module, "SYNC_INTERVAL_S", 0.05)
    server, url = serve(project)
    server.app.start_background()
    data = tmp_path / "items.jsonl"
    data.write_text(data.read_text() + json.dumps({"id": "late", "text": "arrived later"}) + "\n")
    deadline = time.time() + 5
    while "late" not in server.app.store.item_ids() and time.time() < deadline:
        time.sleep(0.05)
    assert "late" in server.app.store.item_ids()


def test_two_projects_on_one_host_keep_their_own_sessions(tmp_path, serve):
    """Issue 35, item 10: cookies are per host, not per port; each project names its own, so
    logging in to one does not log the browser out of the other."""
    from tests.helpers import make_project

    urls = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        urls.append(serve(make_project(tmp_path / name))[1])
    jar = {}  # one browser: one cookie jar for the host
    for url in urls:
        c = Client(url)
        c.login("dana")
        assert c.post("/admin/login", form={"key": ADMIN_KEY, "next": "/admin"}).status == 303
        jar.update(c.cookies)
    assert len(jar) == 4  # a session and an admin cookie for each project, none overwritten
    for url in urls:
        c = Client(url)
        c.cookies.update(jar)
        assert c.get("/annotate").status == 200
        assert c.get("/admin").status == 200
