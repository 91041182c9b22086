"""The agent protocol's server side: token scope, Range, upload limits, stalled copies."""

import json
import os
import socket
import time

import pytest

from potato.training.remote import bundle as bundle_mod
from potato.training.web import agent_routes as agent_api
from potato.training.backends.base import RemoteState
from potato.training.backends.base import RunContext
from potato.training.remote.paths import write_json
from potato.training.remote.protocol import RunSettings
from tests.helpers import Client
from tests.helpers import make_project

TOKEN = "t" * 40


@pytest.fixture
def active(tmp_path, serve):
    """A server with one run made active by hand, as a remote backend would."""
    server, url = serve(make_project(tmp_path, model_training="  max_predictions_mb: 0.01\n"
                                                            "  backends:\n    gpu: {type: ssh, "
                                                            "host: gpu.example.org}"),
                        training=False)
    manager = server.manager
    run = manager.runs.create("text-naive-bayes", ["sentiment"], "gpu", {})
    assert manager.runs.transition(run.run_id, "queued", "running")
    paths = manager.paths(run.run_id).create()
    bundle_mod.build(paths.bundle, [("a", "x" * 5000)], {"a": {"sentiment": ["positive"]}},
                     {"sentiment": {"type": "radio", "labels": ["positive", "negative"]}})
    write_json(paths.spec, {"run_id": run.run_id})
    ctx = RunContext(run, paths, manager.cfg, lambda e: None, lambda s: None, lambda m: None)
    ctx.bundle_sha256 = bundle_mod.pack(paths.bundle, paths.bundle_archive)
    ctx.remote = RemoteState(TOKEN, RunSettings(host="gpu.example.org"))
    manager._active[run.run_id] = ctx
    yield Client(url), run.run_id, ctx, server
    manager._active.clear()


def auth(token=TOKEN):
    return {"Authorization": "Bearer " + token}


def test_token_scope(active):
    c, run_id, ctx, _ = active
    assert c.json("GET", f"/agent/v1/runs/{run_id}")[0] == 401
    # another token learns nothing: the same answer as for a run that is not active
    assert c.json("GET", f"/agent/v1/runs/{run_id}", headers=auth("wrong"))[0] == 410
    status, info = c.json("GET", f"/agent/v1/runs/{run_id}", headers=auth())
    assert status == 200 and info["bundle"]["sha256"] == ctx.bundle_sha256
    # An unknown run and a finished one answer alike: a bearer learns no run's status.
    status, body = c.json("GET", "/agent/v1/runs/r999", headers=auth())
    assert status == 410 and body["error"] == ("Run r999 is not active on a remote backend: no "
                                               "agent may report for it now.")
    # The run token is not an admin key.
    assert c.json("GET", "/admin/training/api/runs", headers=auth())[0] == 401
    assert c.json("GET", "/admin/training/api/runs",
                  headers={"X-API-Key": TOKEN})[0] == 401


def test_bundle_range_resume(active):
    c, run_id, ctx, _ = active
    whole = open(ctx.paths.bundle_archive, "rb").read()
    r = c.get(f"/agent/v1/runs/{run_id}/bundle", headers=auth())
    assert r.status == 200 and r.body == whole
    r = c.get(f"/agent/v1/runs/{run_id}/bundle", headers=dict(auth(), Range="bytes=100-"))
    assert r.status == 206 and r.body == whole[100:]
    assert r.headers["Content-Range"] == f"bytes 100-{len(whole) - 1}/{len(whole)}"
    r = c.get(f"/agent/v1/runs/{run_id}/bundle",
              headers=dict(auth(), Range=f"bytes={len(whole)}-"))
    assert r.status == 416


def test_events_reply_carries_cancel(active):
    c, run_id, ctx, _ = active
    status, reply = c.json("POST", f"/agent/v1/runs/{run_id}/events", json_body={"events": []},
                           headers=auth())
    assert reply["cancel"] is False and ctx.remote.reports == 1
    ctx.cancel.set()
    assert c.json("POST", f"/agent/v1/runs/{run_id}/events", json_body={"events": []},
                  headers=auth())[1]["cancel"] is True


def test_oversized_predictions_get_413(active):
    c, run_id, ctx, _ = active
    r = c.request("PUT", f"/agent/v1/runs/{run_id}/predictions", body=b"x" * 20000,
                  headers=auth())
    assert r.status == 413 and "max_predictions_mb" in json.loads(r.body)["error"]
    assert not os.path.exists(ctx.paths.predictions)
    r = c.request("PUT", f"/agent/v1/runs/{run_id}/predictions", body=b'{"id": "a"}\n',
                  headers=auth())
    assert r.status == 200 and open(ctx.paths.predictions, "rb").read() == b'{"id": "a"}\n'


def test_artifact_paths_and_offsets(active):
    c, run_id, ctx, _ = active
    base = f"/agent/v1/runs/{run_id}/artifacts"
    assert c.request("PUT", base + "?path=../evil&offset=0", body=b"x", headers=auth()
                     ).status == 400
    assert c.request("PUT", base + "?path=m/w.bin&offset=0", body=b"abc", headers=auth()
                     ).status == 200
    r = c.request("PUT", base + "?path=m/w.bin&offset=0", body=b"abc", headers=auth())
    assert r.status == 409 and "resume from 3" in json.loads(r.body)["error"]
    assert c.request("PUT", base + "?path=m/w.bin&offset=3", body=b"def", headers=auth()
                     ).status == 200
    assert open(os.path.join(ctx.paths.artifacts, "m", "w.bin"), "rb").read() == b"abcdef"


def test_stalled_copy_is_named(active, monkeypatch):
    c, run_id, ctx, server = active
    monkeypatch.setattr(agent_api, "COPY_STALL_S", 1)
    host, port = server.http.server_address[:2]
    s = socket.create_connection((host, port))
    s.sendall((f"PUT /agent/v1/runs/{run_id}/artifacts?path=big.bin&offset=0 HTTP/1.1\r\n"
               f"Host: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 1000000\r\n\r\n"
               ).encode() + b"x" * 1000)
    deadline = time.time() + 10
    while ctx.remote.copy_error is None and time.time() < deadline:
        time.sleep(0.1)
    s.close()
    assert ctx.remote.copy_error == "The copy from gpu.example.org sent nothing for 1 s."


def test_a_stalled_copy_that_resumes_and_completes_is_no_error(active, monkeypatch):
    """A stall names the copy error; once the agent resumes that file and it arrives whole
    (verified by its sha256), the error is gone and the run can end as a success."""
    import hashlib

    c, run_id, ctx, server = active
    monkeypatch.setattr(agent_api, "COPY_STALL_S", 1)
    data = b"y" * 3000
    sha = hashlib.sha256(data).hexdigest()
    host, port = server.http.server_address[:2]
    s = socket.create_connection((host, port))
    s.sendall((f"PUT /agent/v1/runs/{run_id}/artifacts?path=w.bin&offset=0&size=3000&sha256="
               f"{sha} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
               f"Content-Length: 3000\r\n\r\n").encode() + data[:1000])
    deadline = time.time() + 10
    while ctx.remote.copy_error is None and time.time() < deadline:
        time.sleep(0.1)
    s.close()
    assert ctx.remote.copy_error == "The copy from gpu.example.org sent nothing for 1 s."
    status, have = c.json("GET", f"/agent/v1/runs/{run_id}/artifacts?path=w.bin",
                          headers=auth())
    assert status == 200 and have["bytes"] == 1000
    r = c.request("PUT", f"/agent/v1/runs/{run_id}/artifacts?path=w.bin&offset=1000&size=3000"
                         f"&sha256={sha}", body=data[1000:], headers=auth())
    assert r.status == 200 and json.loads(r.body)["bytes"] == 3000
    assert ctx.remote.copy_error is None


def test_inactive_run_is_410(active):
    c, run_id, ctx, server = active
    server.manager._active.clear()
    status, err = c.json("GET", f"/agent/v1/runs/{run_id}", headers=auth())
    assert status == 410 and "is not active" in err["error"]


def test_a_batch_passes_on_only_its_newest_progress(active):
    c, run_id, ctx, _ = active
    seen = []
    ctx.on_event = seen.append
    batch = [{"type": "progress", "current": n, "total": 9, "t": n} for n in (1, 2, 3)]
    batch.insert(1, {"type": "log", "level": "info", "message": "m", "t": 1.5})
    c.json("POST", f"/agent/v1/runs/{run_id}/events", json_body={"events": batch},
           headers=auth())
    assert [(e["type"], e.get("current")) for e in seen] == [("log", None), ("progress", 3)]
