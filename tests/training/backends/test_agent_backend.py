"""The agent backend: the real `potato training agent` process against a real server on
loopback (register, claim, run, transfers, tokens, liveness)."""

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from potato.commands.cli import main
from tests.helpers import agent_backends as backends
from tests.helpers import ROOT, Client
from tests.helpers import KEY, make_project, start_run, wait_progress, wait_run

H = {"X-API-Key": KEY}


def register(cfg, capsys, name="lab"):
    capsys.readouterr()
    assert main(["training", "register", name, cfg]) == 0
    out = capsys.readouterr().out
    token = re.search(r"export POTATO_TRAINING_TOKEN=(\S+)", out).group(1)
    assert out.startswith(f"Token for backend '{name}' (shown once; registering again "
                          f"replaces it):\n\n  {token}\n\nOn the training machine:\n\n")
    assert "potato training agent --server http://" in out and f"--backend {name}" in out
    return token


def agent(url, token, workdir, *extra, server=None):
    env = dict(os.environ, POTATO_TRAINING_TOKEN=token)
    return subprocess.Popen([sys.executable, "-m", "potato", "training", "agent", "--server",
                             server or url.rstrip("/"), "--backend", "lab", "--workdir",
                             str(workdir), "--poll-interval", "0.2", *extra],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def finish(p, timeout=120):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise AssertionError("the agent did not finish:\n" + err[-3000:])
    return p.returncode, out, err


def test_register_claim_run_and_write_back(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends())
    _, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    status, report = c.json("POST", "/admin/training/api/backends/lab/check", headers=H)
    assert not report["ok"] and "no agent has connected with this token yet" in report["lines"]
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    time.sleep(1.0)
    assert c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)[1]["status"] == "queued"
    work = tmp_path / "agent work"
    code, out, err = finish(agent(url, token, work, "--once"))
    assert code == 0, err
    run = wait_run(c, run_id)
    assert run["status"] == "success", (run, err)
    assert run["ran_on"] == "lab (agent): host %s" % socket.gethostname()
    assert run["holdout"]["n"] > 50
    assert run["writeback"]["written"] > 1000
    _, item = c.json("GET", "/admin/api/items/sst-test-0002", headers=H)
    assert item["predictions"]["sentiment"]["run_id"] == run_id
    # The model came back to the server (test_agent_artifacts.py); nothing stays in the
    # agent's work directory.
    assert not run["artifact_uri"].startswith("agent://")
    assert os.path.isfile(os.path.join(run["artifact_uri"], "sentiment.naive-bayes.json"))
    assert not os.listdir(work / "jobs")
    status, report = c.json("POST", "/admin/training/api/backends/lab/check", headers=H)
    assert any(line.startswith("last seen ") for line in report["lines"])
    assert report["token"]["agent_host"] == socket.gethostname()
    assert "plain http" not in err  # loopback: no warning
    # --keep keeps the job's directory with its bundle, as the tutorial says (issue 38,
    # item 5: it kept nothing once model files came back), and it is not swept later
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    code, out, err = finish(agent(url, token, work, "--once", "--keep"))
    assert code == 0 and wait_run(c, run_id)["status"] == "success", err
    [kept] = list((work / "jobs").iterdir())
    assert kept.name.startswith(run_id + "-")
    assert (kept / "bundle.tar.gz").is_file() and (kept / "bundle" / "items.jsonl").is_file()
    assert not (kept / ".alive").exists()  # kept on purpose: the sweep leaves it


def test_old_token_rejected_after_registering_again(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends(), labels=False)
    _, url = serve(cfg)
    old = register(cfg, capsys)
    register(cfg, capsys)
    code, out, err = finish(agent(url, old, tmp_path / "w", "--once"))
    assert code == 3
    assert "rejected this agent" in err and "registering again replaced it" in err


def test_token_scope(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends(), labels=False)
    _, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    auth = {"Authorization": "Bearer " + token}
    assert c.json("GET", "/admin/training/api/runs", headers=auth)[0] == 401
    assert c.json("GET", "/admin/training/api/runs", headers={"X-API-Key": token})[0] == 401
    assert c.json("POST", "/agent/v1/backends/lab2/claim", json_body={}, headers=auth)[0] == 401
    assert c.json("POST", "/agent/v1/backends/lab/claim", json_body={}, headers=auth)[0] == 200
    assert c.json("POST", "/agent/v1/backends/local/claim", json_body={}, headers=auth)[0] == 404


def test_queue_timeout_without_an_agent(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends(queue_timeout_s=1))
    _, url = serve(cfg)
    register(cfg, capsys)  # a token exists, but no agent polls
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                                backend="lab"), timeout=30)
    assert run["status"] == "error"
    assert run["error"].startswith("No agent of backend lab claimed the run within 1 s.")
    # the server names its own config file, not a literal CONFIG (issue 38, item 6)
    assert run["error"].endswith("potato training register lab %s gives its token)." % cfg), \
        run["error"]


def test_waiting_agent_run_does_not_block_local_runs(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends())
    _, url = serve(cfg)
    register(cfg, capsys)
    c = Client(url)
    waiting = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    local = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    assert local["status"] == "success"
    assert c.json("GET", f"/admin/training/api/runs/{waiting}", headers=H)[1]["status"] == \
        "queued"


def test_agent_killed_mid_run_fails_on_heartbeat(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends())
    _, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    run_id = start_run(c, trainer="test-steps", schemas=["sentiment"], backend="lab",
                       params={"seconds": 120})
    p = agent(url, token, tmp_path / "w")
    try:
        wait_progress(c, run_id, timeout=60)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        run = wait_run(c, run_id, timeout=60)
        assert run["status"] == "error"
        assert run["error"] == ("No word from the agent on lab for 5 seconds. The machine or the "
                                "network to it went away.")
    finally:
        if p.poll() is None:
            p.kill()
        p.stdout.close()
        p.stderr.close()
    # The orphaned worker notices that its agent is gone and stops.
    deadline = time.time() + 20
    while time.time() < deadline:
        ps = subprocess.run(["ps", "-ewwo", "args"], capture_output=True, text=True).stdout
        if str(tmp_path / "w") not in ps:
            break
        time.sleep(0.3)
    assert str(tmp_path / "w") not in ps
    # Its job directory, with the run's labels, is left behind. The next agent on this machine
    # removes it once its .alive is stale (issue 34, item 5: only the ssh probe swept before);
    # a directory kept on purpose (no .alive) and a live one stay.
    jobs = tmp_path / "w" / "jobs"
    [left] = list(jobs.iterdir())
    assert (left / "bundle.tar.gz").exists() or (left / "bundle").exists()
    old = time.time() - 301
    os.utime(left / ".alive", (old, old))
    (jobs / "kept").mkdir()
    (jobs / "live").mkdir()
    (jobs / "live" / ".alive").write_text("")
    p = agent(url, token, tmp_path / "w")
    try:
        deadline = time.time() + 30
        while left.exists() and time.time() < deadline:
            time.sleep(0.2)
        assert not left.exists()
        assert (jobs / "kept").is_dir() and (jobs / "live").is_dir()
    finally:
        p.kill()
        _, err = p.communicate(timeout=10)
    assert "removed the job directory %s: its agent was killed (nothing touched it for 300 " \
           "s)" % left in err, err


def test_oversized_predictions_fail_the_run(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends() + "  max_predictions_mb: 0.001\n")
    _, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    code, out, err = finish(agent(url, token, tmp_path / "w", "--once"))
    run = wait_run(c, run_id)
    assert run["status"] == "error"
    assert run["error"].startswith("the server refused the predictions: The upload")
    assert "max_predictions_mb" in run["error"]


class CuttingProxy:
    """Forwards to the server; cuts the first ``cuts`` bundle downloads after ``limit`` bytes."""

    def __init__(self, target_port, cuts, limit=4000):
        self.target = ("127.0.0.1", target_port)
        self.cuts = cuts
        self.limit = limit
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.cut_done = 0
        self.threads = [threading.Thread(target=self.accept, daemon=True)]
        self.threads[0].start()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self.sock.close()
        for t in self.threads:
            t.join(10)

    def accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self.handle, args=(client,), daemon=True)
            self.threads.append(t)
            t.start()

    def handle(self, client):
        upstream = socket.create_connection(self.target)
        first = client.recv(65536)
        cut = b"/bundle" in first.split(b"\r\n")[0] and self.cut_done < self.cuts
        if cut:
            self.cut_done += 1
        upstream.sendall(first)

        def up():
            try:
                while True:
                    data = client.recv(65536)
                    if not data:
                        break
                    upstream.sendall(data)
            except OSError:
                pass
            try:
                upstream.shutdown(socket.SHUT_WR)  # the agent is done: so is the server
            except OSError:
                pass

        reader = threading.Thread(target=up, daemon=True)
        reader.start()
        sent = 0
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if cut and sent + len(data) > self.limit:
                    client.sendall(data[:self.limit - sent])
                    client.shutdown(socket.SHUT_RDWR)  # the reader thread holds it open too
                    break
                client.sendall(data)
                sent += len(data)
        except OSError:
            pass
        reader.join(10)
        client.close()
        upstream.close()


@pytest.mark.parametrize("cuts,ok", [(3, True), (6, False)])
def test_interrupted_bundle_download_resumes(tmp_path, serve, env, capsys, cuts, ok):
    cfg = make_project(tmp_path, backends())
    server, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    proxy = CuttingProxy(server.http.server_address[1], cuts)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    try:
        code, out, err = finish(agent(url, token, tmp_path / "w", "--once",
                                      server=f"http://127.0.0.1:{proxy.port}"))
    finally:
        proxy.close()
    run = wait_run(c, run_id)
    assert proxy.cut_done == cuts, err
    assert err.count("bundle download interrupted") >= min(cuts, 5)
    if ok:
        assert run["status"] == "success", (run, err)
    else:
        assert run["status"] == "error"
        assert "the bundle download stopped at" in run["error"]
        assert "after 6 tries" in run["error"]


def test_plain_http_to_another_host_warns():
    from potato.training.remote.poll import plain_http_warning

    assert plain_http_warning("http://127.0.0.1:8000") is None
    assert plain_http_warning("http://localhost:8000") is None
    assert plain_http_warning("https://potato.example.org") is None
    assert plain_http_warning("http://potato.example.org:8000").startswith(
        "warning: http://potato.example.org:8000 is plain http")


def test_slurm_config_submits_the_worker(tmp_path, serve, env, capsys, monkeypatch):
    import json

    fakes = os.path.join(ROOT, "tests", "fakes")
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.join(fakes, "slurm"),
                                                os.path.join(fakes, "scontrol"),
                                                os.environ["PATH"]]))
    monkeypatch.setenv("FAKE_SLURM_DIR", str(tmp_path / "slurm-state"))
    cfg = make_project(tmp_path, backends())
    _, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    slurm_json = tmp_path / "slurm.json"
    slurm_json.write_text(json.dumps({"partition": "gpu", "time": "00:10:00",
                                      "job_python": sys.executable, "poll_interval_s": 0.3}))
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    code, out, err = finish(agent(url, token, tmp_path / "shared", "--once", "--slurm-config",
                                  str(slurm_json)))
    run = wait_run(c, run_id)
    assert run["status"] == "success", (run, err)
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert "Submitted SLURM job 4242 with" in log and "--partition=gpu" in log
    assert "--no-requeue" in log
    assert "SLURM job 4242: RUNNING on fake-node01" in log


def test_slurm_config_with_unknown_keys_is_refused(tmp_path):
    bad = tmp_path / "slurm.json"
    bad.write_text('{"partiton": "gpu"}')
    r = subprocess.run([sys.executable, "-m", "potato", "training", "agent", "--server",
                        "http://127.0.0.1:9", "--backend", "lab", "--slurm-config", str(bad)],
                       cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, POTATO_TRAINING_TOKEN="x"), timeout=60)
    assert r.returncode == 1
    assert "has key(s) partiton that a slurm job does not take" in r.stderr


def test_slurm_config_requeue_must_be_true_or_false(tmp_path):
    bad = tmp_path / "slurm.json"
    bad.write_text('{"requeue": "yes"}')
    r = subprocess.run([sys.executable, "-m", "potato", "training", "agent", "--server",
                        "http://127.0.0.1:9", "--backend", "lab", "--slurm-config", str(bad)],
                       cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, POTATO_TRAINING_TOKEN="x"), timeout=60)
    assert r.returncode == 1
    assert "requeue must be true or false, not 'yes'" in r.stderr


def test_a_run_no_agent_can_claim_is_refused(tmp_path, serve, env):
    cfg = make_project(tmp_path, backends())
    _, url = serve(cfg)
    status, body = Client(url).json("POST", "/admin/training/api/runs", headers=H, json_body={
        "trainer": "text-naive-bayes", "schemas": ["sentiment"], "backend": "lab"})
    assert status == 409 and body["error"] == (
        "Backend lab is an agent backend with no token issued, so no agent can claim it: run "
        "potato training register lab %s and start the agent first." % cfg)


def test_cli_run_on_an_agent_backend_needs_the_server(tmp_path, env):
    cfg = make_project(tmp_path, backends())
    r = subprocess.run([sys.executable, "-m", "potato", "training", "run", cfg, "--trainer",
                        "text-naive-bayes", "--schemas", "sentiment", "--backend", "lab"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.startswith("error: runs on agent backend lab wait for an agent to poll the "
                               "server, and no server of this project is running.")



# -- a silent agent (issue 24, item 3) -----------------------------------------------------------

def _claim(c, token, **body):
    return c.json("POST", "/agent/v1/backends/lab/claim", json_body=body,
                  headers={"Authorization": "Bearer " + token})


def _silent_for(cfg, seconds):
    """Make the lab agent's last poll ``seconds`` ago, as if it had stopped then."""
    from potato.config.settings import load
    from potato.project.store import Store

    store = Store(load(cfg)[0].db_path)
    try:
        with store.tx() as db:
            db.execute("UPDATE agent_tokens SET last_seen=? WHERE backend='lab'",
                       (time.time() - seconds,))
    finally:
        store.close()


def test_silence_in_words():
    from potato.training.backends.agent import silence_words

    assert [silence_words(s) for s in (15, 95.5, 119, 125, 7199, 7300)] == [
        "10 s", "90 s", "110 s", "2 min", "119 min", "2 h"]


def test_check_says_a_run_would_wait_for_a_silent_agent(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends(), labels=False)
    _, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    assert _claim(c, token, host="ws", poll_interval_s=2)[0] == 200
    status, report = c.json("POST", "/admin/training/api/backends/lab/check", headers=H)
    assert report["ok"] and not any("no agent has polled" in x for x in report["lines"])
    _silent_for(cfg, 95)  # longer than its 2 s interval (and the grace)
    status, report = c.json("POST", "/admin/training/api/backends/lab/check", headers=H)
    assert not report["ok"]
    assert ("no agent has polled for 90 s: a run will wait until one does. Start potato "
            "training agent --server URL --backend lab on the training machine") in report["lines"]
    capsys.readouterr()
    assert main(["training", "check", "lab", cfg]) == 1
    out = capsys.readouterr().out
    assert "no agent has polled for 90 s: a run will wait until one does" in out
    assert out.rstrip().endswith("cannot start a run")
    # An agent that polls every 10 minutes is not silent after 95 s.
    assert _claim(c, token, host="ws", poll_interval_s=600)[0] == 200
    _silent_for(cfg, 95)
    assert main(["training", "check", "lab", cfg]) == 0
    # The claim's interval is checked at the boundary.
    for bad in ("5", -1, 1e9, True):
        status, body = _claim(c, token, poll_interval_s=bad)
        assert status == 400 and "poll_interval_s" in body["error"]


def test_a_queued_run_says_how_long_no_agent_has_polled(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends())
    _, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    assert _claim(c, token, host="ws", poll_interval_s=1)[0] == 200
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    _silent_for(cfg, 310)
    deadline = time.time() + 30
    while True:
        run = c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)[1]
        if "(no agent has polled for 5 min: a run will wait until one does)" in run["step"]:
            break
        assert time.time() < deadline, run["step"]
        time.sleep(0.1)
    assert run["status"] == "queued" and run["step"].startswith(
        "waiting for an agent of backend lab to poll the server")
    live = c.json("GET", "/admin/training/api/fragments", headers=H)[1]["live"]
    assert "no agent has polled for 5 min: a run will wait until one does" in live
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert log.count("no agent has polled for") == 1
    # An agent polls again (a claim would take the run): the step says only what it waits for.
    _silent_for(cfg, 0)
    deadline = time.time() + 30
    while "no agent has polled" in c.json("GET", f"/admin/training/api/runs/{run_id}",
                                          headers=H)[1]["step"]:
        assert time.time() < deadline
        time.sleep(0.1)
    assert c.json("POST", f"/admin/training/api/runs/{run_id}/cancel",
                  headers=H)[1]["status"] == "cancelled"


def test_register_prints_the_port_the_running_server_listens_on(tmp_path, capsys):
    """Issue 35, item 11: `potato start --port 8123` on a config that says 8000: register
    names the port agents can reach, from the running server; with no server, the config's."""
    from potato.config.settings import load
    from potato.service import Service

    cfg_path = make_project(tmp_path, backends())
    cfg = load(cfg_path)[0]
    capsys.readouterr()
    assert main(["training", "register", "lab", cfg_path]) == 0
    assert ":%d --backend lab" % cfg.server.port in capsys.readouterr().out
    service = Service(cfg, "127.0.0.1", 0).open()
    try:
        port = service.http.server_address[1]
        assert port != cfg.server.port
        assert main(["training", "register", "lab", cfg_path]) == 0
        out = capsys.readouterr().out
        assert ":%d --backend lab" % port in out, out
    finally:
        service.close()
    assert main(["training", "register", "lab", cfg_path]) == 0
    assert ":%d --backend lab" % cfg.server.port in capsys.readouterr().out
