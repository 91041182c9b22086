"""The agent's run, step by step, in-process against a fake client (no server, no ssh): download
-> prepare -> execute -> upload -> clean up -> report (potato/training/remote/run.py)."""

import json
import os
import sys

from potato.training.remote import bundle as bundle_mod
from potato.training.remote import protocol
from potato.training.remote.client import ServerError
from tests.helpers import ROOT, FakeClient, make_run


def test_download_reads_settings_and_fetches_the_bundle(tmp_path, archive):
    run, client = make_run(tmp_path, archive, num_threads=3, env={"HF_HOME": "/h"},
                           unknown_from_a_newer_server=1)
    run.download()
    assert run.settings == protocol.RunSettings(gpus="none", host="fake-host", num_threads=3,
                                                env={"HF_HOME": "/h"})
    assert run.grace == 2
    assert bundle_mod.file_sha256(run.paths.bundle_archive) == client.sha


def test_prepare_writes_the_spec_and_the_worker_env(tmp_path, archive):
    run, _ = make_run(tmp_path, archive, num_threads=3, env={"HF_HOME": "/h"})
    run.download()
    run.prepare()
    spec = json.load(open(run.paths.spec))
    assert (spec["bundle"], spec["artifacts"], spec["trainer"]) == ("bundle", "artifacts",
                                                                    "text-naive-bayes")
    assert os.path.isfile(os.path.join(run.paths.bundle, "manifest.json"))
    assert run.env["OMP_NUM_THREADS"] == run.env["OPENBLAS_NUM_THREADS"] == "3"
    assert run.env["HF_HOME"] == "/h" and run.env["PYTHONUNBUFFERED"] == "1"
    assert run.env["PYTHONPATH"].split(os.pathsep)[0] == run.code_dir


def test_execute_upload_clean_up_report(tmp_path, archive):
    run, client = make_run(tmp_path, archive)
    run.download()
    run.prepare()
    run.result = run.execute()
    assert run.result.ok, run.result.stderr_tail
    run.report_events(force=True)
    assert any(e["type"] == "result" for e in client.events)
    status, error = run.upload()
    assert (status, error) == ("success", None)
    rows = client.uploads["/agent/v1/runs/r1/predictions"].decode().splitlines()
    assert len(rows) > 50 and all(json.loads(r)["label"] in ("positive", "negative")
                                  for r in rows)
    assert any(p.startswith("/agent/v1/runs/r1/artifacts?path=sentiment.naive-bayes.json")
               for p in client.uploads)  # fetch_artifacts defaults to true
    assert all(a.get("fetched") for a in run.artifacts)
    run.clean_up(status)
    assert not os.path.exists(run.paths.root)  # everything came back: nothing stays
    run.report(status, error)
    assert client.results[-1]["status"] == "success"
    assert client.results[-1]["host"] and client.results[-1]["exit_code"] == 0


def test_files_stay_when_the_backend_keeps_them(tmp_path, archive):
    run, client = make_run(tmp_path, archive, fetch_artifacts=False, keep_remote=True)
    assert run.run() == protocol.EXIT_OK
    assert not any("/artifacts" in p for p in client.uploads)
    assert os.path.isdir(run.paths.artifacts) and os.listdir(run.paths.artifacts)
    assert client.results[-1]["status"] == "success"


def test_a_cancel_in_a_reply_stops_the_worker(tmp_path, archive, monkeypatch):
    from potato.training.remote import run as run_mod

    monkeypatch.setattr(run_mod, "REPORT_S", 0.0)
    run, client = make_run(tmp_path, archive, cancel_after=1)
    assert run.run() == protocol.EXIT_OK
    assert run.cancelled
    assert client.results[-1]["status"] in ("cancelled", "error")
    assert "/agent/v1/runs/r1/predictions" not in client.uploads


def test_a_closed_stdin_is_a_lost_session(tmp_path, archive):
    class Closed:
        class closed:
            @staticmethod
            def is_set():
                return True

    run, client = make_run(tmp_path, archive)
    run.watch = Closed()
    assert run.run() == protocol.AGENT_LOST
    assert client.results == []  # a lost agent reports nothing more


def test_hangup_and_term_mean_a_lost_session_and_log_survives_a_closed_stderr(tmp_path):
    """In a child: SIGHUP sets the watch, SIGPIPE is ignored, and log() with stderr closed (or
    gone) writes to agent.log instead of raising, so the cancel path goes on."""
    import subprocess

    code = r'''
import os, signal, sys, threading
from potato.training.remote import client
class W: closed = threading.Event()
client.on_hangup(W)
os.kill(os.getpid(), signal.SIGHUP)
assert W.closed.wait(5), "SIGHUP did not mark the session gone"
W.closed.clear(); os.kill(os.getpid(), signal.SIGTERM)
assert W.closed.wait(5), "SIGTERM did not mark the session gone"
assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
client.set_log_file(sys.argv[1])
r, w = os.pipe(); os.close(r); os.dup2(w, 2)  # stderr is now a pipe nobody reads
client.log("first line after the session died")
sys.stderr = None
client.log("second line")
print("ok")
'''
    log = tmp_path / "agent.log"
    r = subprocess.run([sys.executable, "-c", code, str(log)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    text = log.read_text()
    assert "first line after the session died" in text and "second line" in text


class Refusing(FakeClient):
    """Refuses (400) any report holding an event marked bad, as the server does with an event
    batch it cannot parse; fails to connect while ``down``."""

    down = False

    def request(self, method, path, body=None, headers=None, stream_to=None):
        if path.endswith("/events"):
            self.calls.append((method, path, len(body["events"])))
            if self.down:
                raise OSError("connection refused")
            if any(e.get("bad") for e in body["events"]):
                raise ServerError(400, "The request body is not valid JSON")
            self.events.extend(body["events"])
            return 200, {"ok": True, "cancel": False}, None
        return super().request(method, path, body, headers, stream_to)


def test_a_refused_event_is_dropped_and_the_rest_arrive(tmp_path, archive):
    """One bad event used to make the agent resend the same refused batch forever (and the
    server lose the run's heartbeat): now the batch is split and only the bad event dropped."""
    run, _ = make_run(tmp_path, archive)
    client = Refusing(archive, {"gpus": "none"})
    run.client = client
    events = [{"type": "log", "n": i} for i in range(100)]
    events[37]["bad"] = True
    for e in events:
        run.on_event(e)
    run.report_events(force=True)
    assert [e["n"] for e in client.events] == [i for i in range(100) if i != 37]
    assert run.pending == [] and not run.cancelled
    run.report_events(force=True)  # nothing is resent
    assert len([c for c in client.calls if len(c) == 3 and c[2]]) <= 16


def test_events_kept_while_the_server_is_down_are_bounded(tmp_path, archive, monkeypatch):
    from potato.training.remote import run as run_mod

    monkeypatch.setattr(run_mod, "PENDING_MAX", 50)
    run, _ = make_run(tmp_path, archive)
    client = Refusing(archive, {"gpus": "none"})
    client.down = True
    run.client = client
    for i in range(300):
        run.on_event({"type": "progress", "current": i})
        if i % 3 == 0:
            run.on_event({"type": "metric", "name": "loss", "value": i})
        run.report_events(force=True)
    assert len(run.pending) <= 50
    assert run.pending[-1] == {"type": "progress", "current": 299}  # the newest progress stays
    assert sum(e["type"] == "progress" for e in run.pending) == 1
    client.down = False
    run.report_events(force=True)
    assert client.events[-1]["current"] == 299 and run.pending == []


class Restarting(FakeClient):
    """The server is restarting: the first ``down`` requests of each kind find nobody, then
    two answer 503, then it serves."""

    def __init__(self, archive, settings, down=6):
        FakeClient.__init__(self, archive, settings)
        self.patience = 300
        self.left = {}
        self.down = down

    def request(self, method, path, body=None, headers=None, stream_to=None):
        kind = (method, path.rsplit("/", 1)[-1])
        left = self.left.setdefault(kind, self.down + 2)
        if left > 0:
            self.left[kind] = left - 1
            if left > 2:
                raise ConnectionRefusedError(111, "Connection refused")
            raise ServerError(503, "The server is stopping or restarting; report again shortly.")
        return FakeClient.request(self, method, path, body, headers, stream_to)


def test_a_restart_during_the_download_is_waited_out(tmp_path, archive, monkeypatch):
    """The run's spec and its bundle are fetched patiently (the run client's patience): a
    server restarting as the agent begins the run does not fail it."""
    from potato.training.remote import client as client_mod

    monkeypatch.setattr(client_mod.time, "sleep", lambda s: None)
    run, _ = make_run(tmp_path, archive)
    client = run.client = Restarting(archive, {"gpus": "none"}, down=8)
    run.download()
    assert bundle_mod.file_sha256(run.paths.bundle_archive) == client.sha
    assert client.left == {("GET", "r1"): 0, ("GET", "bundle"): 0}


def test_an_unreachable_server_is_an_error_not_a_cancel(tmp_path, archive):
    """An outage longer than the agent's patience stops the worker, and the run is reported
    as an error that says so: only the server asks for a cancel."""
    run, _ = make_run(tmp_path, archive)
    run.download()
    run.prepare()
    client = run.client = Refusing(archive, {"gpus": "none"})
    client.down = True
    run.report_events(force=True)
    run.failing_since -= protocol.LOST_CONTACT_S + 1  # the outage has lasted that long
    run.report_events(force=True)
    assert run.should_cancel() and not run.cancelled
    run.result = run.execute()
    assert run.upload() == ("error", "the agent could not reach the server for %d s and "
                                     "stopped the worker" % protocol.LOST_CONTACT_S)
