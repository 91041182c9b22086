"""Runs across a server restart (issue 20.3) and a quick, honest shutdown (issue 25.3).

An agent-backend run survives a restart of a real ``potato start`` process (SIGTERM or SIGKILL)
and finishes with its predictions written back once; other runs end with a sentence that names
the restart, never as ``cancelled``; the server stops within seconds whatever is running."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from potato.commands.cli import main
from potato.config.settings import load
from potato.project.store import Store
from potato.training.backends.errors import silent_agent
from potato.training.core.runs import RunStore
from tests.helpers import agent_backends as backends
from tests.helpers import (
    KEY, ROOT, Client, make_project, ssh_backend, start_run, wait_progress, wait_run)
from tests.sshd import free_port

H = {"X-API-Key": KEY}


def register(cfg, capsys):
    capsys.readouterr()
    assert main(["training", "register", "lab", cfg]) == 0
    return re.search(r"export POTATO_TRAINING_TOKEN=(\S+)", capsys.readouterr().out).group(1)


def agent(url, token, workdir):
    """``potato training agent`` for backend lab, polling on (no --once)."""
    return subprocess.Popen([sys.executable, "-m", "potato", "training", "agent", "--server",
                             url.rstrip("/"), "--backend", "lab", "--workdir", str(workdir),
                             "--poll-interval", "0.2"], cwd=ROOT,
                            env=dict(os.environ, POTATO_TRAINING_TOKEN=token),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def potato_start(cfg, port, log, env=None):
    """``potato start`` as its own process; returns it once it serves. With ``env``
    SLOW_INGEST, it is tests/fakes/slow_ingest.py's potato (a slow ingest)."""
    how = ["-m", "potato"] if not env else [os.path.join(ROOT, "tests", "fakes",
                                                         "slow_ingest.py")]
    p = subprocess.Popen([sys.executable] + how + ["start", cfg, "--host", "127.0.0.1",
                                                   "--port", str(port)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=open(log, "ab"), text=True,
                         start_new_session=True, env=dict(os.environ, **(env or {})))
    line = p.stdout.readline()
    assert line.startswith("Potato is serving"), (line, open(log).read()[-2000:])
    return p


def stop(p, sig=signal.SIGTERM, timeout=30):
    if p.poll() is not None:
        return
    os.killpg(p.pid, sig)
    try:
        p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError("the server did not stop within %d s of %s" % (timeout, sig))


def stored_run(cfg, run_id):
    config, _, _ = load(cfg)
    store = Store(config.db_path)
    try:
        return RunStore(store).get(run_id)
    finally:
        store.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_agent_run_survives_a_server_restart(tmp_path, env, capsys, sig):
    cfg = make_project(tmp_path, backends(heartbeat_timeout_s=60))
    token = register(cfg, capsys)
    port = free_port()
    url = "http://127.0.0.1:%d/" % port
    log = tmp_path / "server.log"
    server = potato_start(cfg, port, log)
    worker = None
    try:
        c = Client(url)
        run_id = start_run(c, trainer="test-steps", schemas=["sentiment"], backend="lab",
                           params={"seconds": 15})
        worker = agent(url, token, tmp_path / "agent work")
        wait_progress(c, run_id, timeout=60)
        step_before = c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)[1]["step"]
        asked = time.time()
        stop(server, sig)
        took = time.time() - asked
        if sig == signal.SIGTERM:
            assert server.returncode == 0
            assert took < 10, "potato start took %.1f s to stop during an agent run" % took
        run = stored_run(cfg, run_id)
        assert run.status == "running", run  # not cancelled, not an error: left to the agent
        time.sleep(1.0)  # the agent keeps training and finds the server gone
        server = potato_start(cfg, port, log)
        # issue 34, item 10: once the agent reports again, the step is the run's own again,
        # not "waiting for the agent ... to report again" while it progresses
        first = wait_run(c, run_id, until=("running", "success"))
        deadline, run = time.time() + 60, first
        while time.time() < deadline and run["status"] == "running" and (
                run["progress"] or {}).get("current") == (first["progress"] or {}).get(
                    "current"):
            time.sleep(0.2)
            run = c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)[1]
        assert run["status"] == "running", run  # 15 s of steps outlast the restart
        assert run["step"] == step_before, (run["step"], step_before)
        run = wait_run(c, run_id, timeout=120)
        assert run["status"] == "success", (run, open(log).read()[-3000:])
        assert run["holdout"]["n"] > 50 and run["writeback"]["written"] > 1000
        assert run["progress"]["current"] == run["progress"]["total"]
        _, item = c.json("GET", "/admin/api/items/sst-test-0002", headers=H)
        assert item["predictions"]["sentiment"]["run_id"] == run_id
        text = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
        assert "the server restarted: waiting for the agent on " in text
        assert text.count("held-out: ") == 1  # written back exactly once
        assert text.count("agent on %s: Python" % os.uname().nodename) == 1  # one worker
        time.sleep(1.5)  # the agent polls on: it must not claim the run again
        assert wait_run(c, run_id)["status"] == "success"
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGKILL)
            _, err = worker.communicate()
        stop(server)
    assert err.count("claimed run %s" % run_id) == 1, err


def _running(runs, backend, **fields):
    run_id = runs.create("text-naive-bayes", ["sentiment"], backend, {}).run_id
    assert runs.transition(run_id, "queued", "running", started_at=time.time(), **fields)
    return run_id


def test_what_a_restart_does_to_each_backend(tmp_path, serve):
    """After a kill, the next start: an agent run waits for its agent (and fails with the
    tutorial's sentence when none reports), ssh and slurm runs end with a sentence that names
    the restart, a local run is interrupted, a queued run stays queued."""
    extra = (backends(heartbeat_timeout_s=2) +
             "    gpu: {type: ssh, host: gpu.example.org}\n"
             "    cluster: {type: slurm, host: login.example.org, remote_dir: /shared/pt}\n")
    cfg = make_project(tmp_path, extra, labels=False)
    config, _, _ = load(cfg)
    store = Store(config.db_path)
    runs = RunStore(store)
    waiting = _running(runs, "lab", remote_token="0" * 64, remote_host="ws-under-desk")
    archive = os.path.join(config.runs_dir, waiting, "bundle.tar.gz")
    os.makedirs(os.path.dirname(archive))
    with open(archive, "wb") as f:
        f.write(b"not really a bundle")
    no_token = _running(runs, "lab")
    ssh = _running(runs, "gpu")
    slurm = _running(runs, "cluster")
    local = _running(runs, "local")
    queued = runs.create("text-naive-bayes", ["sentiment"], "lab2", {}).run_id
    store.close()
    _, url = serve(cfg)
    c = Client(url)
    assert wait_run(c, ssh)["error"] == (
        "The run was ended by a server restart: the server's ssh session to gpu.example.org "
        "closed with it, and the agent there stopped the worker. Start the run again.")
    assert wait_run(c, slurm)["error"] == (
        "The run was ended by a server restart: the server's ssh session to login.example.org "
        "closed with it, and the agent there cancelled its SLURM job. Start the run again.")
    assert wait_run(c, local)["error"].startswith("The run was interrupted by a server restart")
    # claimed, but the claim never reached its agent (no token recorded): queued again
    assert wait_run(c, no_token, until=("queued",))["status"] == "queued"
    run = wait_run(c, waiting, until=("running",))
    assert run["step"] == ("the server restarted: waiting for the agent on ws-under-desk to "
                           "report again (up to 2 s)")
    run = wait_run(c, waiting, timeout=30)
    assert (run["status"], run["error"]) == ("error", silent_agent("lab", 2))
    assert run["error"].startswith("No word from the agent on lab for 2 seconds.")
    assert wait_run(c, queued, until=("queued",))["status"] == "queued"
    for run_id in (ssh, slurm, local, waiting):
        assert wait_run(c, run_id)["status"] == "error"  # never "cancelled"


def test_shutdown_during_a_local_run_is_quick_and_not_a_cancel(tmp_path, serve, env):
    service, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-ignore-term", schemas=["sentiment"],
                       params={"seconds": 120})
    wait_run(c, run_id, until=("running",))
    time.sleep(1.5)  # the worker ignores SIGTERM from here on
    asked = time.time()
    service.close()
    assert time.time() - asked < 10
    run = stored_run(service.cfg.path, run_id)
    assert run.status == "error", run
    assert run.error == ("The run was interrupted by a server restart: its training process "
                            "on the server stopped with the server. Start the run again.")


def test_shutdown_during_an_ssh_run_ends_it_with_the_restart_sentence(tmp_path, serve,
                                                                      fake_host):
    service, url = serve(make_project(tmp_path, ssh_backend()))
    c = Client(url)
    run_id = start_run(c, backend="gpu-server", trainer="test-steps", schemas=["sentiment"],
                       params={"seconds": 120})
    wait_progress(c, run_id, timeout=60)
    asked = time.time()
    service.close()
    assert time.time() - asked < 10
    run = stored_run(service.cfg.path, run_id)
    assert run.status == "error", run
    assert run.error == (
        "The run was ended by a server restart: the server's ssh session to gpu.example.org "
        "closed with it, and the agent there stopped the worker. Start the run again.")
    assert "cancel" not in json.dumps({k: getattr(run, k) for k in ("status", "step", "error")})


def test_a_reattached_run_answers_its_own_token_only(tmp_path, serve):
    """After the restart the run's token (kept as its sha256) is the only one its endpoints
    take; a cancel asked for before the restart reaches the agent in the reply."""
    import hashlib

    cfg = make_project(tmp_path, backends(heartbeat_timeout_s=30), labels=False)
    config, _, _ = load(cfg)
    store = Store(config.db_path)
    runs = RunStore(store)
    token = "run-token-" + "x" * 30
    run_id = _running(runs, "lab", remote_token=hashlib.sha256(token.encode()).hexdigest(),
                      remote_host="ws-under-desk", cancel_requested=1)
    os.makedirs(os.path.join(config.runs_dir, run_id))
    with open(os.path.join(config.runs_dir, run_id, "bundle.tar.gz"), "wb") as f:
        f.write(b"x")
    store.close()
    _, url = serve(cfg)
    c = Client(url)
    path = f"/agent/v1/runs/{run_id}/events"
    status, _ = c.json("POST", path, json_body={"events": []},
                       headers={"Authorization": "Bearer someone-else"})
    assert status == 410
    status, reply = c.json("POST", path, json_body={"events": []},
                           headers={"Authorization": "Bearer " + token})
    assert (status, reply["cancel"]) == (200, True)
    status, _ = c.json("POST", f"/agent/v1/runs/{run_id}/result",
                       json_body={"status": "cancelled", "error": "cancelled"},
                       headers={"Authorization": "Bearer " + token})
    assert status == 200
    assert wait_run(c, run_id)["status"] == "cancelled"


def test_a_queued_run_whose_backend_was_removed_ends_and_the_queue_goes_on(tmp_path, serve):
    """A run queued on a backend the config no longer has ends at the next start with a
    sentence naming the backend and the config; the queue does not stop on it."""
    cfg = make_project(tmp_path, backends())
    config, _, _ = load(cfg)
    store = Store(config.db_path)
    orphan = RunStore(store).create("text-naive-bayes", ["sentiment"], "removed", {}).run_id
    store.close()
    _, url = serve(cfg)
    c = Client(url)
    run = wait_run(c, orphan, timeout=20)
    assert (run["status"], run["error"]) == ("error", (
        "Backend removed is no longer in %s; the run was not started. Start it again on a "
        "configured backend." % config.path))
    local = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="local")
    assert wait_run(c, local, timeout=60)["status"] == "success"


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_kill_while_the_result_is_ingested_loses_nothing(tmp_path, env, capsys, when):
    """The server answered the agent's result, then was killed while it wrote the predictions
    back (before or after the write-back): the next start finishes the run from the saved
    result, writes back once, and the run succeeds in use (not "No word from the agent")."""
    cfg = make_project(tmp_path, backends(heartbeat_timeout_s=8))
    token = register(cfg, capsys)
    port = free_port()
    url = "http://127.0.0.1:%d/" % port
    log = tmp_path / "server.log"
    marker = tmp_path / "ingesting"
    server = potato_start(cfg, port, log, env={"SLOW_INGEST": when,
                                                "SLOW_INGEST_MARKER": str(marker)})
    worker = None
    try:
        c = Client(url)
        run_id = start_run(c, trainer="test-steps", schemas=["sentiment"], backend="lab",
                           params={"seconds": 2})
        worker = agent(url, token, tmp_path / "agent work")
        deadline = time.time() + 90
        while not marker.exists() and time.time() < deadline:
            time.sleep(0.1)
        assert marker.exists(), open(log).read()[-3000:]
        stop(server, signal.SIGKILL)
        assert stored_run(cfg, run_id).status == "running"
        server = potato_start(cfg, port, log)
        run = wait_run(c, run_id, timeout=60)
        assert (run["status"], run["error"]) == ("success", None), open(log).read()[-3000:]
        assert run["writeback"]["written"] > 1000 and run["in_use"] == ["sentiment"]
        _, item = c.json("GET", "/admin/api/items/sst-test-0002", headers=H)
        assert item["predictions"]["sentiment"]["run_id"] == run_id
        text = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
        assert "the server restarted after the agent's result (success)" in text
        again = text.count("the predictions were written back before the restart")
        assert again == (1 if when == "after" else 0), text
        assert stored_run(cfg, run_id).remote_token is None
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.communicate()
        stop(server)


def test_only_potato_start_reattaches_agent_runs(tmp_path):
    """potato training run owns the queue on a loopback port its agents do not know: an agent
    run a killed potato start left stays running, untouched, for potato start to pick up."""
    from potato.service import Service

    cfg = make_project(tmp_path, backends(heartbeat_timeout_s=2), labels=False)
    config, _, _ = load(cfg)
    store = Store(config.db_path)
    run_id = _running(RunStore(store), "lab", remote_token="0" * 64, remote_host="ws")
    os.makedirs(os.path.join(config.runs_dir, run_id))
    with open(os.path.join(config.runs_dir, run_id, "bundle.tar.gz"), "wb") as f:
        f.write(b"x")
    store.close()
    service = Service(config, "127.0.0.1", 0, access_log=lambda line: None, ui=False,
                      owner="potato training run", reattach=False).open()
    try:
        service.start(training=True)
        time.sleep(4)  # past heartbeat_timeout_s: a re-attached run would have failed
        assert service.manager.active_context(run_id) is None
    finally:
        service.close()
    run = stored_run(cfg, run_id)
    assert (run.status, run.remote_token) == ("running", "0" * 64), run
    with open(os.path.join(config.runs_dir, run_id, "run.log")) as f:
        assert "left running with its agent" in f.read()
