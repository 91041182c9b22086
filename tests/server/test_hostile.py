"""Hostile input at every boundary (issue 12): what a remote host, a trainer, a browser or a long
uptime can send must never put markup in a page, a label outside its scheme in the store, an
empty reply on the wire, or an unbounded pile of anything on the server."""

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from potato.training.exchange import boundary
from potato.training.remote import bundle as bundle_mod
from tests.helpers import ROOT, SCHEMA, TOKEN, Client, active_run, post_events, read_all
from tests.helpers import injected
from tests.helpers import KEY, make_project, start_run, wait_run

H = {"X-API-Key": KEY}
MARKUP = '</title></circle></svg><meta http-equiv="refresh" content="0;url=http://evil.example/">' \
         '<script>alert(1)</script><img src=x onerror=alert(2)>'


def pages_of(c, run_id):
    out = {}
    for path in ("/admin/training", f"/admin/training/runs/{run_id}"):
        r = c.get(path, headers=H)
        assert r.status == 200, (path, r.status, r.text[:300])
        out[path] = r.text
    status, frag = c.json("GET", "/admin/training/api/fragments", headers=H)
    assert status == 200
    out["fragments"] = frag["live"] + frag["runs"]
    return out


# -- 1, 2: markup and malformed data from an agent --------------------------------------------

def test_markup_in_an_epoch_never_reaches_the_page(hostile):
    server, c, run_id, _ = hostile
    post_events(c, run_id, [{"type": "metric", "name": "loss", "value": 0.5, "epoch": MARKUP},
                            {"type": "metric", "name": "loss", "value": 0.4, "epoch": 1},
                            {"type": "metric", "name": MARKUP, "value": 0.3, "epoch": 2}])
    for path, page in pages_of(c, run_id).items():
        assert injected(page) == [], path
        assert "evil.example" not in page or "&lt;meta" in page


@pytest.mark.parametrize("events", [
    [{"type": "progress", "current": 1, "total": "lots"}],
    [{"type": "metric", "name": "acc", "value": 0.5, "epoch": "one"},
     {"type": "metric", "name": "acc", "value": 0.6, "epoch": "two"}],
    [{"type": "progress", "current": float("1e300"), "total": None}],
    [{"type": "metric", "name": "acc", "value": "NaN", "epoch": 1}],
    [{"type": "status", "message": {"nested": ["x"]}}],
    [{"type": "log", "level": "<b>", "message": "m"}],
    [{"type": "result", "metrics": {"a": [1, 2, 3]}}],
    ["not an object", 42, None, []],
])
def test_malformed_events_never_take_a_page_down(hostile, events):
    server, c, run_id, _ = hostile
    status, reply = post_events(c, run_id, events)
    assert status == 200 and reply["cancel"] is False
    pages_of(c, run_id)  # every page answers 200
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert "dropped an event that does not fit the protocol" in log


def test_old_records_that_predate_the_boundary_still_render(hostile):
    """Malformed data already in the store (written by an older server) renders too."""
    server, c, run_id, _ = hostile
    server.manager.runs.update(run_id, progress={"type": "progress", "current": "x",
                                                     "total": "lots"},
                                   history=[{"name": "a", "value": "v", "epoch": "<b>"}])
    for page in pages_of(c, run_id).values():
        assert injected(page) == []


# -- 3: predictions are checked before anything is written back ------------------------------

@pytest.mark.parametrize("bad,reason", [
    ({"label": "neutral"}, "is not one of sentiment's labels"),
    ({"confidence": 7.5}, "confidence is 7.5, outside 0..1"),
    ({"label": {"x": 1}}, "is not one of sentiment's labels"),
    ({"id": "no-such-item"}, "is not an item of the run's bundle"),
    ({"split": "train"}, "is not item a35's split"),
    ({"confidence": float("nan")}, "NaN is not a number JSON allows"),
    ({"confidence": 1e308 * 10}, "Infinity is not a number JSON allows"),
])
def test_invalid_predictions_write_back_nothing(tmp_path, bad, reason):
    from potato.training.exchange.ingest import PredictionsError, read_predictions

    d = tmp_path / "b"
    items = [("a%d" % i, "t") for i in range(40)]
    labels = {"a%d" % i: {"sentiment": ["positive"]} for i in range(30)}
    bundle_mod.build(str(d), items, labels, SCHEMA, include_unlabeled=True)
    b = bundle_mod.read(str(d))
    good = [{"id": it["id"], "split": it["split"], "scheme": "sentiment", "label": "positive",
             "confidence": 0.9} for it in b.items if it["split"] != "train"]
    target = next(i for i, g in enumerate(good) if g["id"] == "a35")
    rows = [dict(g) for g in good]
    rows[target].update(bad)
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(PredictionsError) as e:
        read_predictions(str(path), b)
    message = str(e.value)
    assert message.startswith("predictions.jsonl line %d: " % (target + 1)), message
    assert reason in message and "(1 of %d lines are invalid)" % len(rows) in message
    path.write_text("".join(json.dumps(r) + "\n" for r in good))
    assert len(read_predictions(str(path), b)) == len(good)


def test_a_run_with_invalid_predictions_fails_and_writes_nothing(tmp_path, serve, monkeypatch):
    from tests.helpers import PLUGINS

    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)  # test-bad-predictions lives there
    server, url = serve(make_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-bad-predictions", schemas=["sentiment"]))
    assert run["status"] == "error"
    assert "The run finished but its predictions cannot be used: predictions.jsonl line 1: " \
           "label \"neutral\" is not one of sentiment's labels" in run["error"]
    assert run["writeback"] is None
    assert server.app.store.conn().execute("SELECT COUNT(*) FROM predictions").fetchone()[0] == 0


# -- 4, 5, 6: redirects, the choke point, JSON -------------------------------------------------

@pytest.mark.parametrize("nxt", ["/%09/evil.example", "//evil.example", "/\\evil.example",
                                 "/%0d%0aSet-Cookie:%20x=1", "http://evil.example/",
                                 "/caf%C3%A9", "/%2F%2Fevil.example"])
def test_next_never_leaves_the_site(tmp_path, serve, nxt):
    from urllib.parse import unquote

    _, url = serve(make_project(tmp_path, labels=False))
    c = Client(url)
    r = c.post("/admin/login", body=("key=%s&next=%s" % (KEY, nxt)).encode(),
               headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 303 and r.headers["Location"] == "/admin"
    assert len(r.headers.get_all("Set-Cookie")) == 1
    r = c.post("/login", body=("username=ann&next=%s" % nxt).encode(),
               headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 303 and r.headers["Location"] == "/annotate", unquote(nxt)


@pytest.mark.parametrize("body", [b'{"username": "\\ud800"}', b"[" * 100000 + b"]" * 100000,
                                  b'{"trainer": NaN}', b'{"params": {"alpha": Infinity}}',
                                  b'{"params": {"alpha": 1e309}}', b"\xff\xfe"])
def test_bad_json_is_a_400_with_a_reason(tmp_path, serve, body):
    _, url = serve(make_project(tmp_path, labels=False))
    c = Client(url)
    for path, headers in (("/login", {}), ("/admin/training/api/runs", H)):
        r = c.post(path, body=body, headers=dict(headers, **{"Content-Type": "application/json",
                                                              "Accept": "application/json"}))
        if path == "/login" and len(body) > 4096:  # unauthenticated bodies are capped (#25)
            assert r.status == 413, (path, r.status, r.text[:200])
            continue
        assert r.status == 400, (path, r.status, r.text[:200])
        assert json.loads(r.body)["error"].startswith("The request body is not valid JSON: ")


def test_non_finite_params_are_refused_and_never_emitted(tmp_path, serve):
    _, url = serve(make_project(tmp_path, labels=False), training=False)
    c = Client(url)
    r = c.post("/admin/training/start", headers=H, form={
        "trainer": "text-naive-bayes", "schemas": "sentiment", "param:alpha": "nan"})
    assert r.status == 400 and "alpha must be a finite number" in r.text
    status, runs = c.json("GET", "/admin/training/api/runs", headers=H)
    assert status == 200 and runs == {"runs": []}


# -- 7: Host headers ---------------------------------------------------------------------------

def test_foreign_host_is_refused_and_debug_admin_needs_a_loopback_host(tmp_path, serve):
    _, url = serve(make_project(tmp_path, top="debug: true", labels=False), training=False)
    c = Client(url)
    r = c.get("/admin/api/stats", headers={"Host": "evil.example", "Origin": "http://evil.example"})
    assert r.status == 400 and "does not answer to the host name 'evil.example'" in r.text
    assert c.get("/admin/api/stats", headers={"Host": "localhost"}).status == 200
    assert c.get("/admin/api/stats").status == 200  # 127.0.0.1:port


def test_allowed_hosts_from_the_config(tmp_path, serve):
    _, url = serve(make_project(tmp_path, top="allowed_hosts: [annotate.example.org]",
                                labels=False), training=False)
    c = Client(url)
    assert c.get("/login", headers={"Host": "annotate.example.org:8443"}).status == 200
    assert c.get("/login", headers={"Host": "localhost"}).status == 400


# -- 8, 11: descriptors, connections and threads stay bounded ------------------------------------

def test_five_thousand_requests_under_a_low_descriptor_limit(tmp_path):
    """A server child with ulimit -n 256 answers 5,000 requests, each on a new connection, and
    its descriptor count stays flat."""
    cfg = make_project(tmp_path, labels=False)
    code = r'''
import resource, sys, os, threading, http.client
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
from potato.config.settings import load
from potato.service import Service
cfg, errors, _ = load(sys.argv[1])
service = Service(cfg, "127.0.0.1", 0, access_log=lambda line: None, owner=None).open()
service.start(training=False)
server = service.http
port = server.server_address[1]
counts = []
for i in range(5000):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/admin/api/stats", headers={"X-API-Key": sys.argv[2]})  # uses the store
    r = conn.getresponse(); r.read(); conn.close()
    assert r.status == 200, (i, r.status)
    if i % 1000 == 999:
        counts.append(len(os.listdir("/proc/self/fd")))
print(counts, server.app.store.open_connections())
service.close()
'''
    r = subprocess.run([sys.executable, "-c", code, cfg, KEY], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    counts, open_db = r.stdout.strip().rsplit(" ", 1)
    counts = json.loads(counts)
    assert max(counts) - min(counts) <= 4, counts
    assert int(open_db) <= 2


def test_idle_sockets_cannot_starve_annotators(tmp_path, serve):
    server, url = serve(make_project(tmp_path, labels=False), training=False)
    port = server.http.server_address[1]
    idle = []
    try:
        for _ in range(500):
            s = socket.create_connection(("127.0.0.1", port))
            idle.append(s)
        time.sleep(0.5)
        assert server.http.open_connections() <= server.http.max_connections
        slowest = 0.0
        for n in range(20):
            c = Client(url)
            t0 = time.time()
            c.login("ann%d" % n)
            r = c.request("POST", "/api/annotations", json_body={
                "item_id": "sst-train-00000", "labels": {"sentiment": "positive"}})
            slowest = max(slowest, time.time() - t0)
            assert r.status == 200, (n, r.status, r.getheaders(), r.body[:200])
        assert slowest < 1.0, slowest
    finally:
        for s in idle:
            s.close()


# -- 9: run states have one owner -------------------------------------------------------------

def test_cancel_racing_the_start(tmp_path):
    from potato.config.settings import load
    from potato.project.store import Store
    from potato.training.lifecycle.queue import Manager

    cfg, _, _ = load(make_project(tmp_path))
    store = Store(cfg.db_path)
    manager = Manager(cfg, store)
    try:
        for _ in range(40):
            run_id = manager.submit("text-naive-bayes", ["sentiment"]).run_id
            barrier = threading.Barrier(2)
            started = []

            def start():
                barrier.wait()
                started.append(manager.runs.transition(run_id, "queued", "running",
                                                       started_at=time.time()))

            def cancel():
                barrier.wait()
                manager.cancel(run_id)

            threads = [threading.Thread(target=start), threading.Thread(target=cancel)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            run = manager.runs.get(run_id)
            if started[0]:  # it started first: the cancel must reach it as a running run
                assert run.status == "running" and run.cancel_requested == 1
                assert manager.runs.finish(run_id, "cancelled", "cancelled")
            else:
                assert run.status == "cancelled" and not run.started_at
            # a finished run never moves again
            assert not manager.runs.transition(run_id, "queued", "running")
            assert not manager.runs.update(run_id, step="late")
            assert manager.runs.get(run_id).status == "cancelled"
    finally:
        manager.stop()
        store.close()


# -- 10: sessions end with the key they were made under ------------------------------------------

def test_sessions_outlive_no_key_change(tmp_path, serve):
    cfg = make_project(tmp_path, labels=False)
    _, url = serve(cfg, training=False)
    c = Client(url)
    r = c.post("/admin/login", form={"key": KEY})
    assert r.status == 303
    assert c.get("/admin/api/stats").status == 200
    text = open(cfg).read()
    assert KEY in text
    with open(cfg, "w") as f:
        f.write(text.replace(KEY, KEY + "-rotated"))
    _, url2 = serve(cfg, training=False)
    c2 = Client(url2)
    c2.cookies = dict(c.cookies)
    assert c2.get("/admin/api/stats", headers={"Accept": "application/json"}).status == 401
    # the new key works, and a session made under it does too
    assert c2.get("/admin/api/stats", headers={"X-API-Key": KEY + "-rotated"}).status == 200
    assert c2.post("/admin/login", form={"key": KEY + "-rotated"}).status == 303
    assert c2.get("/admin/api/stats").status == 200


def test_failed_admin_logins_are_limited(tmp_path, serve):
    _, url = serve(make_project(tmp_path, labels=False), training=False)
    c = Client(url)
    for _ in range(5):
        assert c.post("/admin/login", form={"key": "wrong"}).status == 401
    for _ in range(5):  # the X-API-Key header counts too
        assert c.get("/admin/api/stats", headers={"X-API-Key": "wrong",
                                                  "Accept": "application/json"}).status == 401
    r = c.post("/admin/login", form={"key": KEY})
    assert r.status == 429 and int(r.headers["Retry-After"]) >= 1
    r = c.get("/admin/api/stats", headers={"X-API-Key": KEY, "Accept": "application/json"})
    assert r.status == 429


# -- 12: files are private ---------------------------------------------------------------------

def test_the_server_writes_private_files(tmp_path):
    cfg = make_project(tmp_path)
    with open(cfg, "a") as f:
        f.write("server:\n  port: 0\n")
    p = subprocess.Popen([sys.executable, "-m", "potato", "start", cfg], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        url = line.split(" at ")[1].split()[0]
        c = Client(url)
        run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
        assert run["status"] == "success"
    finally:
        p.terminate()
        p.communicate(timeout=30)
    out = tmp_path / "annotation_output"
    checked = 0
    for folder, dirs, files in os.walk(out):  # every file and folder the server made
        for name in dirs + files:
            path = os.path.join(folder, name)
            assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0, path
            checked += 1
    assert checked > 10


# -- 13: the smaller ones ------------------------------------------------------------------------

def test_negative_content_length_on_an_artifact_is_refused(hostile):
    server, c, run_id, _ = hostile
    port = server.http.server_address[1]
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("PUT /agent/v1/runs/%s/artifacts?path=m.bin&offset=0 HTTP/1.1\r\nHost: 127.0.0.1"
               "\r\nAuthorization: Bearer %s\r\nContent-Length: -5\r\n\r\n" % (run_id, TOKEN)
               ).encode())
    reply = read_all(s)
    assert reply.startswith(b"HTTP/1.1 400") and b"Content-Length is negative" in reply


def test_a_get_body_is_drained_not_parsed_as_a_request(hostile):
    server, c, run_id, _ = hostile
    s = socket.create_connection(("127.0.0.1", server.http.server_address[1]))
    smuggled = b"GET /admin/api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    s.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n"
              % len(smuggled) + smuggled + b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              b"Connection: close\r\n\r\n")
    data = read_all(s)
    assert data.count(b"HTTP/1.1 200") == 2 and b"HTTP/1.1 401" not in data


def test_backend_names_are_url_decoded(tmp_path, serve):
    _, url = serve(make_project(tmp_path, "  backends:\n    \"lab box\": {type: agent}\n",
                                labels=False), training=False)
    c = Client(url)
    status, report = c.json("POST", "/admin/training/api/backends/lab%20box/check", headers=H)
    assert status == 200 and report["backend"] == "lab box"
    status, body = c.json("POST", "/agent/v1/backends/lab%20box/claim", json_body={},
                          headers={"Authorization": "Bearer nope"})
    assert status == 401 and "backend lab box" in body["error"]


def test_the_run_log_stays_bounded(hostile, monkeypatch):
    from potato.training.core import runlog

    monkeypatch.setattr(runlog, "MAX_BYTES", 200000)
    monkeypatch.setattr(runlog, "HEAD_BYTES", 20000)
    monkeypatch.setattr(runlog, "TAIL_BYTES", 100000)
    server, c, run_id, _ = hostile
    for i in range(20):
        post_events(c, run_id, [{"type": "log", "level": "info", "message": "x" * 1990}] * 20)
    size = os.path.getsize(server.manager.paths(run_id).log)
    assert size <= 200000 + 20 * 2100, size
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert "bytes of this log were cut" in log


def test_duplicate_prediction_rows_are_refused():
    splits = {"a": "test"}
    row = json.dumps({"id": "a", "split": "test", "scheme": "sentiment", "label": "positive",
                      "confidence": 0.9})
    rows, problem = boundary.predictions([row, row], splits, SCHEMA)
    assert rows == [] and problem.startswith("predictions.jsonl line 2: item a has a second "
                                             "prediction for sentiment")


def test_odd_uploads_get_clear_answers(hostile):
    server, c, run_id, _ = hostile
    auth = {"Authorization": "Bearer " + TOKEN}
    base = f"/agent/v1/runs/{run_id}/artifacts"
    r = c.request("PUT", base + "?path=a%00b&offset=0", body=b"x", headers=auth)
    assert r.status == 400
    r = c.request("PUT", base + "?path=" + "n" * 300 + "&offset=0", body=b"x", headers=auth)
    assert r.status == 400 and r.body
    assert c.request("PUT", base + "?path=x/y&offset=0", body=b"x", headers=auth).status == 200
    r = c.request("PUT", base + "?path=x/y/z&offset=0", body=b"x", headers=auth)
    assert r.status == 409 and "clashes with another model file" in json.loads(r.body)["error"]
    r = c.request("GET", f"/agent/v1/runs/{run_id}/bundle",
                  headers=dict(auth, Range="bytes=" + "9" * 5000 + "-"))
    assert r.status == 416


def test_transfer_encoding_and_two_hosts_are_refused(hostile):
    server, c, _, _ = hostile
    s = socket.create_connection(("127.0.0.1", server.http.server_address[1]))
    s.sendall(b"POST /logout HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
              b"\r\n2d\r\nGET /nothing-smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n\r\n0\r\n\r\n")
    data = read_all(s)
    assert data.startswith(b"HTTP/1.1 411") and data.count(b"HTTP/1.1") == 1
    s = socket.create_connection(("127.0.0.1", server.http.server_address[1]))
    s.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n"
              b"Connection: close\r\n\r\n")
    assert read_all(s).startswith(b"HTTP/1.1 400")


def test_huge_numbers_are_400s_not_500s(tmp_path, serve):
    _, url = serve(make_project(tmp_path), training=False)
    c = Client(url)
    r = c.post("/login", body=b'{"username": ' + b"9" * 4000 + b"}",  # within the 4 KB cap
               headers={"Content-Type": "application/json"})
    assert r.status == 400
    c.login("ann")  # past Python's 4300-digit limit: a logged-in body may be that long
    r = c.post("/api/annotations", body=b'{"item_id": ' + b"9" * 5000 + b"}",
               headers={"Content-Type": "application/json"})
    assert r.status == 400
    status, body = c.json("POST", "/admin/training/api/runs", headers=H, json_body={
        "trainer": "text-naive-bayes", "schemas": ["sentiment"], "params": {"alpha": 10 ** 400}})
    assert status == 400 and "more digits than any count Potato uses" in body["error"]
    from potato.training.remote import trainers

    info = trainers.get("text-naive-bayes")
    with pytest.raises(trainers.ParamError, match="alpha is too large a number"):
        trainers.resolve_params(info, {"alpha": 10 ** 400})


def test_a_worker_line_that_breaks_the_parser_leaves_nothing_running(tmp_path):
    from potato.training.remote import supervise

    script = tmp_path / "w.py"
    script.write_text("import sys, time\nsys.stdout.write('{\"type\":\"log\",\"x\":' + "
                      "'[' * 200000 + '\\n')\nsys.stdout.flush()\ntime.sleep(30)\n")
    out = supervise.run_worker([sys.executable, str(script)], dict(os.environ),
                               str(tmp_path / "err.log"), lambda e: None,
                               supervise.Supervision(max_wall_seconds=5))
    assert out.returncode is not None  # it was stopped, not left behind


def test_the_worker_never_sees_the_agent_token():
    from potato.training.remote.protocol import worker_env

    env = worker_env({"POTATO_TRAINING_TOKEN": "secret", "PATH": "/bin"}, "/code",
                     env={"POTATO_TRAINING_TOKEN": "again"})
    assert "POTATO_TRAINING_TOKEN" not in env and env["PATH"] == "/bin"


# -- (b) property-based: random event batches and prediction files ----------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 20, 10 ** 20),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=50), st.just(MARKUP))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=10)
event_types = st.sampled_from(["status", "progress", "metric", "log", "artifact", "result",
                               "error", "other", MARKUP])
fields = st.sampled_from(["message", "current", "total", "unit", "eta_s", "epoch", "name",
                          "value", "split", "level", "path", "bytes", "metrics", "kind", "t"])
events = st.lists(st.one_of(values, st.builds(
    lambda t, kv: dict(kv, type=t), event_types, st.dictionaries(fields, values, max_size=6))),
    max_size=8)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batch=events)
def test_any_event_batch_leaves_every_page_answering(hostile, batch):
    server, c, run_id, _ = hostile
    status, _ = post_events(c, run_id, batch)
    assert status == 200
    for page in pages_of(c, run_id).values():
        assert injected(page) == []
    status, run = c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)
    assert status == 200 and run["run_id"] == run_id


rows = st.fixed_dictionaries({
    "id": st.one_of(st.sampled_from(["a%d" % i for i in range(40)]), st.text(max_size=8)),
    "split": st.sampled_from(["train", "val", "test", "unlabeled", "x"]),
    "scheme": st.sampled_from(["sentiment", "other"]),
    "label": st.one_of(st.sampled_from(["positive", "negative"]), values),
    "confidence": st.one_of(st.floats(), st.integers(), st.text(max_size=3))})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(rows, max_size=12))
def test_every_accepted_prediction_is_in_its_scheme(lines):
    items = [("a%d" % i, "t") for i in range(40)]
    splits = {i: bundle_mod.split_of(i, 0, (0.7, 0.15, 0.15)) for i, _ in items}
    text = [json.dumps(r) for r in lines]
    accepted, problem = boundary.predictions(text, splits, SCHEMA)
    if problem is None:
        for row in accepted:
            assert row["label"] in SCHEMA["sentiment"]["labels"]
            assert 0 <= row["confidence"] <= 1 and row["split"] == splits[row["id"]]
    else:
        assert accepted == [] and problem.startswith("predictions.jsonl line ")


# -- (c) protocol fuzzing: every agent endpoint answers malformed bodies with a 4xx ----------

ENDPOINTS = [("POST", "/agent/v1/backends/gpu/claim"), ("GET", "/agent/v1/runs/{run}"),
             ("GET", "/agent/v1/runs/{run}/bundle"), ("POST", "/agent/v1/runs/{run}/events"),
             ("PUT", "/agent/v1/runs/{run}/predictions"),
             ("PUT", "/agent/v1/runs/{run}/artifacts?path=m&offset=0"),
             ("POST", "/agent/v1/runs/{run}/result")]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(endpoint=st.sampled_from(ENDPOINTS), body=st.one_of(st.binary(max_size=200),
                                                           values.map(lambda v: json.dumps(v)
                                                                      .encode())),
       auth=st.sampled_from([None, "Bearer " + TOKEN, "Bearer x", "Basic abc", "Bearer "]))
def test_agent_endpoints_answer_every_body(hostile, endpoint, body, auth):
    server, c, run_id, _ = hostile
    method, path = endpoint
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = auth
    r = c.request(method, path.format(run=run_id), body=body, headers=headers)
    assert r.status < 500, (r.status, r.text[:200])
    assert r.body, "an empty reply"
    if r.status >= 400:
        assert "error" in json.loads(r.body)


# -- (a) the markup matrix: every field that can reach a page -------------------------------------

def test_markup_in_every_field_that_reaches_a_page(tmp_path, serve):
    m = MARKUP.replace('"', "'")
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "i1", "text": MARKUP}) + "\n" +
                                          json.dumps({"id": "i2", "text": "plain"}) + "\n")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f'''annotation_task_name: "{m}"
data_files: [items.jsonl]
admin_api_key: {KEY}
annotation_schemes:
  - annotation_type: radio
    name: sentiment
    description: "{m}"
    labels: ["{m}", "negative"]
model_training:
  backends:
    gpu: {{type: ssh, host: gpu.example.org, description: "{m}"}}
''')
    server, url = serve(str(cfg), training=False)
    run_id, ctx = active_run(server)
    c = Client(url)
    c.login("ann")
    post_events(c, run_id, [
        {"type": "status", "message": MARKUP}, {"type": "log", "level": "error",
                                                "message": MARKUP},
        {"type": "progress", "current": 1, "total": 2, "unit": MARKUP},
        {"type": "metric", "name": MARKUP, "value": 0.5, "epoch": 1, "split": MARKUP},
        {"type": "artifact", "path": MARKUP, "bytes": 1}, {"type": "error", "message": MARKUP,
                                                           "kind": MARKUP}])
    pages = {"annotate": c.get("/annotate").text}
    pages.update(pages_of(c, run_id))
    server.manager.runs.finish(run_id, "error", MARKUP)
    pages["run page, failed"] = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    pages["admin"] = c.get("/admin", headers=H).text
    for name, page in pages.items():
        assert injected(page) == [], name
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages["run page, failed"]


def test_per_endpoint_size_caps(hostile):
    server, c, run_id, _ = hostile
    status, body = post_events(c, run_id, [{"type": "status", "message": "m"}] * 10001)
    assert status == 400 and "at most 10000 events" in body["error"]
    r = c.request("POST", "/agent/v1/backends/gpu/claim", body=b"{" + b" " * (70 << 10) + b"}",
                  headers={"Authorization": "Bearer x", "Content-Type": "application/json"})
    assert r.status in (401, 404, 413)  # gpu is no agent backend: refused before the body
    r = c.request("POST", f"/agent/v1/runs/{run_id}/result",
                  body=json.dumps({"status": "error", "error": "x" * (2 << 20)}).encode(),
                  headers={"Authorization": "Bearer " + TOKEN,
                           "Content-Type": "application/json"})
    assert r.status == 413 and "larger than the server accepts here" in json.loads(r.body)["error"]


def test_brackets_inside_strings_do_not_count_as_nesting():
    """An agent's report of 70 log lines with ANSI colours (``\\x1b[32m``) was refused as
    'nested more than 64 levels deep'; brackets in strings are text, not nesting."""
    import json as _json

    from potato.server import safety

    body = _json.dumps({"events": [{"type": "log", "message": "\x1b[32mINFO [%d {" % i}
                                   for i in range(200)]}).encode()
    assert len(safety.parse_json(body)["events"]) == 200
    with pytest.raises(safety.BadInput, match="nested more than 64"):
        safety.parse_json(b"[" * 65 + b"]" * 65)
    assert safety.parse_json(b'["a\\\\", [1]]') == ["a\\", [1]]  # an escaped backslash ends it


# -- bidi controls from a host (issue 34, item 6) ----------------------------------------------

BIDI = "\u202e\u2066\u200f\u061c"


def test_bidi_controls_from_a_host_never_reach_the_log_or_the_pages(hostile):
    server, c, run_id, _ = hostile
    status, _ = post_events(c, run_id, [
        {"type": "status", "message": "epoch 1 \u202egnp.exe"},
        {"type": "log", "level": "warning", "message": "line \u2066one\u2069 of two\u200f"},
        {"type": "where", "host": "gpu\u202e01"},
        {"type": "error", "message": "failed \u202eon purpose\u061c", "kind": "other"}])
    assert status == 200
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert "line one of two" in log and "failed on purpose" in log, log
    run = c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)[1]
    assert run["step"] == "epoch 1 gnp.exe", run
    pages = pages_of(c, run_id)
    pages["run"] = json.dumps(c.json("GET", f"/admin/training/api/runs/{run_id}",
                                     headers=H)[1], ensure_ascii=False)
    pages["log"] = log
    for name, page in pages.items():
        assert not any(ch in page for ch in BIDI), name


def test_bidi_controls_in_a_result_and_an_agent_claim_are_dropped():
    r = boundary.result({"status": "error", "error": "x\u202ey", "host": "h\u202eost",
                         "python": "3.11\u2066", "stderr_tail": "a\u2067b"})
    assert (r["error"], r["host"], r["python"], r["stderr_tail"]) == ("xy", "host", "3.11", "ab")


def test_an_agent_claiming_with_a_bidi_host_name_is_shown_without_it(tmp_path, serve, capsys):
    from tests.helpers import agent_backends, register_agent

    cfg = make_project(tmp_path, agent_backends())
    _, url = serve(cfg)
    token = register_agent(cfg, "lab", capsys)
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    deadline = time.time() + 30
    while time.time() < deadline:  # the run waits for an agent once its bundle is built
        status, body = c.json("POST", "/agent/v1/backends/lab/claim", json_body={
            "host": "lab\u202egpj.exe", "version": "1\u2066", "python": "3.11"},
            headers={"Authorization": "Bearer " + token})
        assert status == 200, body
        if body.get("run_id"):
            break
        time.sleep(0.2)
    assert body.get("run_id") == run_id
    run = c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)[1]
    assert "labgpj.exe" in json.dumps(run, ensure_ascii=False), run
    for path in ("/admin/training", f"/admin/training/runs/{run_id}"):
        page = c.get(path, headers=H).text
        assert not any(ch in page for ch in BIDI), path
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
