"""Streamed uploads (``potato/server/uploads.py``: agents' predictions and model files): a
Content-Length within the route's cap (411, 413 naming the cap), the body written as it arrives
(a new file replaced at once, never half; or appended), progress after each block, and a full
disk answered 507 once the whole body has been read, so the connection stays usable. The
handler runs in-process (``helpers.handle_in_memory``); progress in pieces over a real socket."""

import json
import logging
import os
import socket
import time

import pytest

from potato.config.settings import load
from potato.server.app import App
from potato.project.store import Store
from tests.helpers import BASE, KEY, handle_in_memory, http_request, make_project, raw, read_all

ADMIN = {"Accept": "application/json", "X-API-Key": KEY}
MB = 1 << 20


def add_routes(app, folder):
    """Routes that stream their body to ``folder/<name>`` under a 1 MB cap (``limit`` in the
    query may change it), and say how it went."""

    def target(h):
        return os.path.join(folder, h.query["name"][0])

    def limit(h):
        return int((h.query.get("limit") or [MB])[0])

    @app.route("PUT", r"/t/stream", access="admin")
    def stream(h):
        calls = []  # what the folder held at each progress call
        if "stall" in h.query:
            h.allow_stall(float(h.query["stall"][0]))
        try:
            n = h.stream_body_to(target(h), limit(h), "the test's cap",
                                 on_progress=lambda: calls.append(sorted(os.listdir(folder))))
        except socket.timeout as e:  # as the model-file route does
            h.close_connection = True
            return h.send_json({"stalled": str(e)}, 504)
        h.send_json({"bytes": n, "progress": len(calls), "after": len(h.body()),
                     "folder": calls[0]})

    @app.route("PUT", r"/t/append", access="admin")
    def append(h):
        seen = []
        n = h.append_body_to(target(h), limit(h), "the test's cap", on_progress=seen.append)
        h.send_json({"bytes": n, "progress": seen})


@pytest.fixture
def app(write_config, tmp_path):
    cfg, errors, _ = load(write_config(BASE))
    assert not errors, errors
    store = Store(cfg.db_path)
    app = App(cfg, store)
    folder = tmp_path / "uploads"
    folder.mkdir()
    add_routes(app, str(folder))
    app.folder = folder
    yield app
    store.close()


def put(app, path, body=b"", length=True, then=b""):
    """Every response to a PUT of ``body`` (and the requests in ``then``, pipelined)."""
    return handle_in_memory(app, http_request("PUT", path, body, ADMIN, length=length) + then)


def error(response):
    return json.loads(response[2])["error"]


NEXT = http_request("GET", "/t/nothing", b"", {"Accept": "application/json"})


def test_an_upload_replaces_the_file_whole_and_leaves_no_temporary_file(app):
    (app.folder / "p.jsonl").write_bytes(b"old")
    (r,) = put(app, "/t/stream?name=p.jsonl", b'{"id": "a"}\n')
    got = json.loads(r[2])
    assert r[0] == 200 and got["bytes"] == 12 and got["progress"] == 1
    assert got["after"] == 0  # the body went to the file: it is not read again
    # while it arrived it was a hidden file beside the old one (renamed over it at the end)
    assert got["folder"][0].startswith(".") and got["folder"][1:] == ["p.jsonl"]
    assert (app.folder / "p.jsonl").read_bytes() == b'{"id": "a"}\n'
    assert os.listdir(app.folder) == ["p.jsonl"]


def test_an_upload_without_content_length_is_411_and_closes(app):
    (r,) = put(app, "/t/stream?name=p.jsonl", length=False, then=NEXT)
    assert r[0] == 411 and error(r) == "Send the body with a Content-Length header."
    assert r[1]["connection"] == "close" and os.listdir(app.folder) == []
    (r,) = put(app, "/t/append?name=m.bin", length=False, then=NEXT)
    assert r[0] == 411 and r[1]["connection"] == "close"


def test_an_upload_may_take_its_cap_and_no_more(app):
    (r,) = put(app, "/t/stream?name=p.jsonl", b"a" * MB)
    assert r[0] == 200 and json.loads(r[2])["bytes"] == MB
    (r,) = put(app, "/t/stream?name=p.jsonl", b"b" * (MB + MB // 2), then=NEXT)
    assert r[0] == 413 and error(r) == "The upload (1.5 MB) is larger than the test's cap allows."
    assert r[1]["connection"] == "close"  # the body was not read
    assert (app.folder / "p.jsonl").read_bytes() == b"a" * MB
    (r,) = put(app, "/t/append?name=m.bin&limit=10", b"c" * 11, then=NEXT)
    assert r[0] == 413 and error(r) == "The upload (0.0 MB) is larger than the test's cap allows."
    assert not (app.folder / "m.bin").exists()


def test_an_upload_that_stops_short_keeps_the_old_file(app):
    (app.folder / "p.jsonl").write_bytes(b"old")
    out = handle_in_memory(app, http_request("PUT", "/t/stream?name=p.jsonl", b"", list(
        ADMIN.items()) + [("Content-Length", "10")], length=False) + b"abc")
    assert len(out) == 1 and out[0][0] == 400
    assert error(out[0]) == "The request body ended after 3 of 10 bytes."
    assert out[0][1]["connection"] == "close"
    assert (app.folder / "p.jsonl").read_bytes() == b"old" and os.listdir(app.folder) == [
        "p.jsonl"]


def test_appending_adds_to_the_file(app):
    (app.folder / "m.bin").write_bytes(b"abc")
    (r,) = put(app, "/t/append?name=m.bin", b"def")
    assert r[0] == 200 and json.loads(r[2]) == {"bytes": 3, "progress": [3]}
    assert (app.folder / "m.bin").read_bytes() == b"abcdef"


FULL = "The server's disk is full (output_annotation_dir on "


def test_too_little_free_space_is_a_507_after_the_body_and_the_connection_stays(app, caplog):
    caplog.set_level(logging.WARNING, "potato.server")
    app.disk.free_bytes = lambda: 5 * MB  # the upload would leave less than the spare
    (app.folder / "p.jsonl").write_bytes(b"old")
    out = put(app, "/t/stream?name=p.jsonl&limit=%d" % (8 * MB), b"x" * (4 * MB + 1),
              then=NEXT)
    assert [r[0] for r in out] == [507, 404]  # the body was read: the next request is apart
    assert error(out[0]).startswith(FULL) and "nothing more can be stored" in error(out[0])
    assert "less free space than the upload needs" in caplog.text  # the server log says why
    assert (app.folder / "p.jsonl").read_bytes() == b"old" and os.listdir(app.folder) == [
        "p.jsonl"]
    app.disk.free_bytes = lambda: 5 * MB + MB  # room with the spare: stored
    out = put(app, "/t/stream?name=p.jsonl&limit=%d" % (8 * MB), b"x" * (4 * MB), then=NEXT)
    assert [r[0] for r in out] == [200, 404]


def test_a_disk_that_fills_while_writing_is_a_507_after_the_body(app):
    os.symlink("/dev/full", str(app.folder / "full.bin"))  # every write: ENOSPC
    out = put(app, "/t/append?name=full.bin&limit=%d" % (8 * MB), b"y" * (5 * MB), then=NEXT)
    assert [r[0] for r in out] == [507, 404]
    assert error(out[0]).startswith(FULL)


def test_an_error_other_than_a_full_disk_is_no_507(app):
    (app.folder / "dir").mkdir()
    out = put(app, "/t/append?name=dir", b"z" * 10, then=NEXT)
    assert out[0][0] == 500


@pytest.fixture
def live(tmp_path, serve):
    server, _ = serve(make_project(tmp_path, labels=False), training=False)
    folder = tmp_path / "uploads"
    folder.mkdir()
    add_routes(server.app, str(folder))
    return server.http.server_address[1], folder


def test_progress_comes_after_each_block_as_it_arrives(live):
    port, folder = live
    for route in ("stream", "append"):
        s = raw(port, b"PUT /t/%s?name=%s.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: %s\r\n"
                      b"Connection: close\r\nContent-Length: 3000\r\n\r\n"
                % (route.encode(), route.encode(), KEY.encode()))
        for i in range(3):
            time.sleep(0.1)
            s.sendall(b"%d" % i * 1000)
        data = read_all(s)
        got = json.loads(data.partition(b"\r\n\r\n")[2])
        assert data.startswith(b"HTTP/1.1 200") and got["bytes"] == 3000, data
        assert (folder / ("%s.bin" % route)).read_bytes() == b"0" * 1000 + b"1" * 1000 + b"2" * 1000
        if route == "stream":
            assert got["progress"] >= 3
        else:  # bytes so far, rising to the whole
            assert len(got["progress"]) >= 3 and got["progress"][-1] == 3000
            assert got["progress"] == sorted(set(got["progress"]))


def test_an_upload_behind_the_rate_floor_gets_408_and_leaves_no_file(live):
    port, folder = live
    s = raw(port, b"PUT /t/stream?name=p.bin&stall=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: "
                  b"%s\r\nAccept: application/json\r\nContent-Length: 100000\r\n\r\n"
            % KEY.encode())
    data = read_all(s)
    assert data.startswith(b"HTTP/1.1 408"), data
    assert json.loads(data.partition(b"\r\n\r\n")[2])["error"].startswith(
        "The request body did not arrive in time: 0 of 100000 bytes")
    assert os.listdir(folder) == []


def test_an_upload_that_pauses_past_its_stall_leaves_no_file(live):
    port, folder = live
    s = raw(port, b"PUT /t/stream?name=p.bin&stall=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: "
                  b"%s\r\nAccept: application/json\r\nContent-Length: 100000\r\n\r\n"
            % KEY.encode() + b"x" * 40000)  # 40 KB: 2.4 s ahead of the floor
    data = read_all(s)
    assert data.startswith(b"HTTP/1.1 504"), data
    assert json.loads(data.partition(b"\r\n\r\n")[2]) == {"stalled": "nothing sent for 1 s"}
    assert os.listdir(folder) == []
