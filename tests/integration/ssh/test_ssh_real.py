"""The ssh backend against a real OpenSSH server on loopback, started by the fixture.

The server has its own config, host key and authorized keys in a temp dir (nothing touches the
machine's own ssh setup); an ``ssh`` wrapper first on PATH adds ``-F`` with a client config that
defines the alias ``potato-real`` (so the backend's host is a ~/.ssh/config-style alias).
"""

import socket
import json
import os
import re
import signal
import stat
import subprocess
import time

import pytest

from tests import leaks
from tests import sshd as sshd_mod
from tests.helpers import ROOT, Client
from tests.helpers import (
    KEY, PLUGINS, job_dirs, make_project, start_run, stuck_run_frees_the_queue, wait_progress,
    wait_run, wall_limited)

pytestmark = pytest.mark.integration
H = {"X-API-Key": KEY}


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    d = sshd_mod.for_tests(tmp_path_factory)
    _ROOTS[:] = [os.getpid(), int((d / "sshd.pid").read_text())]
    yield d
    sshd_mod.stop(d)


@pytest.fixture
def real_host(sshd, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(sshd / "bin") + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    return tmp_path / "remote dir 'x'"


def backend(remote, **extra):
    # sshd passes no environment through: the test trainers reach the worker through env.
    keys = {"type": "ssh", "host": "potato-real", "remote_dir": str(remote),
            "heartbeat_timeout_s": 30,
            "env": {"POTATO_TRAINER_PLUGINS": PLUGINS, "PYTHONPATH": ROOT}}
    keys.update(extra)
    return "  backends:\n    gpu-server:\n" + "".join(
        f"      {k}: {json.dumps(v)}\n" for k, v in keys.items())


def running(c, run_id, timeout=60):
    wait_progress(c, run_id, timeout)


_ROOTS = []  # this test process (the ssh clients) and our sshd daemon (the remote side)


def processes(pattern):
    """Processes of this test's own trees whose command line holds ``pattern``."""
    return [line for root in _ROOTS for line in leaks.processes(pattern, root)]


def wait_gone(pattern, timeout=30):
    deadline = time.time() + timeout
    while processes(pattern) and time.time() < deadline:
        time.sleep(0.2)
    return processes(pattern)


def test_naive_bayes_over_real_ssh(tmp_path, serve, real_host):
    _, url = serve(make_project(tmp_path, backend(real_host)))
    c = Client(url)
    run = wait_run(c, start_run(c, backend="gpu-server", schemas=["sentiment"],
                                trainer="text-naive-bayes"), timeout=120)
    assert run["status"] == "success", run
    assert run["ran_on"] == "gpu-server (ssh): host %s" % socket.gethostname()
    assert run["holdout"]["n"] > 50
    log = c.get(f"/admin/training/api/runs/{run['run_id']}/log", headers=H).text
    assert "copying Potato's code to potato-real" in log
    assert (tmp_path / "annotation_output" / "training" / "runs" / run["run_id"] / "artifacts" /
            "sentiment.naive-bayes.json").is_file()
    assert job_dirs(real_host, run["run_id"]) == [] and (real_host / "jobs").is_dir()
    second = wait_run(c, start_run(c, backend="gpu-server", schemas=["sentiment"],
                                   trainer="text-naive-bayes"), timeout=120)
    assert second["status"] == "success"
    log2 = c.get(f"/admin/training/api/runs/{second['run_id']}/log", headers=H).text
    assert "copying Potato's code" not in log2


def test_socket_mode_token_and_cancel(tmp_path, serve, real_host, monkeypatch):
    from potato.training.backends import ssh as ssh_mod

    token = "tok-" + "y" * 40
    monkeypatch.setattr(ssh_mod.secrets, "token_urlsafe", lambda n=32: token)
    _, url = serve(make_project(tmp_path, backend(real_host)))
    c = Client(url)
    run_id = start_run(c, backend="gpu-server", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 120})
    running(c, run_id)
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    sock = re.search(r"-R (/tmp/potato-%s-[0-9a-f]+\.sock):127\.0\.0\.1:" % run_id, log).group(1)
    mode = os.stat(sock).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    ps = subprocess.run(["ps", "-ewwo", "args"], capture_output=True, text=True).stdout
    assert "potato.training.agent" in ps and token not in ps
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    assert wait_run(c, run_id, timeout=60)["status"] == "cancelled"
    assert wait_gone(f"--run {run_id}") == [] and wait_gone(f"jobs/{run_id}") == []
    deadline = time.time() + 10
    while os.path.exists(sock) and time.time() < deadline:
        time.sleep(0.2)
    assert not os.path.exists(sock), "the forwarded socket stayed"


def test_killed_ssh_session_leaves_no_process(tmp_path, serve, real_host):
    _, url = serve(make_project(tmp_path, backend(real_host)))
    c = Client(url)
    run_id = start_run(c, backend="gpu-server", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 120})
    running(c, run_id)
    [client] = [line for line in processes("-R /tmp/potato-%s-" % run_id)
                if "/usr/bin/ssh" in line]
    os.kill(int(client.split()[0]), signal.SIGKILL)
    run = wait_run(c, run_id, timeout=60)
    assert run["status"] == "error"
    assert wait_gone(f"--run {run_id}") == [] and wait_gone(f"jobs/{run_id}") == []


def test_silent_agent_fails_on_heartbeat(tmp_path, serve, real_host):
    _, url = serve(make_project(tmp_path, backend(real_host, heartbeat_timeout_s=4)))
    c = Client(url)
    run_id = start_run(c, backend="gpu-server", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 120})
    running(c, run_id)
    [agent] = [line for line in processes(f"--run {run_id}") if "potato.training.agent" in line
               and "sh -c" not in line]
    pid = int(agent.split()[0])
    os.kill(pid, signal.SIGSTOP)
    try:
        run = wait_run(c, run_id, timeout=60)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert run["status"] == "error"
    assert run["error"].startswith("No word from the agent on gpu-server for 4 seconds. ")
    agent_log = tmp_path / "annotation_output" / "training" / "runs" / run_id / "agent.log"
    assert "job directory" in agent_log.read_text()
    assert wait_gone(f"--run {run_id}") == [] and wait_gone(f"jobs/{run_id}") == []


def test_artifact_settings_over_real_ssh(tmp_path, serve, real_host):
    _, url = serve(make_project(tmp_path, backend(real_host, max_artifact_mb=0.0001,
                                                  keep_remote=True)))
    c = Client(url)
    run = wait_run(c, start_run(c, backend="gpu-server", schemas=["sentiment"],
                                trainer="text-naive-bayes"), timeout=120)
    assert run["status"] == "success", run
    [job] = job_dirs(real_host, run["run_id"])
    assert os.path.isfile(os.path.join(job, "artifacts", "sentiment.naive-bayes.json"))
    assert run["artifact_uri"] == f"ssh://potato-real{job}/artifacts"
    log = c.get(f"/admin/training/api/runs/{run['run_id']}/log", headers=H).text
    assert "is over max_artifact_mb; it stays on" in log


def test_fetch_artifacts_false_over_real_ssh(tmp_path, serve, real_host):
    _, url = serve(make_project(tmp_path, backend(real_host, fetch_artifacts=False)))
    c = Client(url)
    run = wait_run(c, start_run(c, backend="gpu-server", schemas=["sentiment"],
                                trainer="text-naive-bayes"), timeout=120)
    assert run["status"] == "success"
    [job] = job_dirs(real_host, run["run_id"])
    assert os.path.isfile(os.path.join(job, "artifacts", "sentiment.naive-bayes.json"))
    assert run["artifact_uri"] == f"ssh://potato-real{job}/artifacts"


def test_cancel_ends_within_grace(tmp_path, serve, real_host):
    """Issue 11.7: an agent that cannot confirm the cancel (stopped with SIGSTOP, as a stuck
    host would be); after grace_seconds (2 in make_project) the run ends cancelled on the
    server and the agent's ssh session is closed. It used to take grace + 10 s + 15 s."""
    _, url = serve(make_project(tmp_path, backend(real_host)))
    c = Client(url)
    run_id = start_run(c, backend="gpu-server", schemas=["sentiment"],
                       trainer="test-ignore-term", params={"seconds": 120})
    mine = str(real_host)  # this test's own remote_dir: no other test's process matches it
    deadline = time.time() + 60
    while not [p for p in processes(mine) if "potato.training.worker" in p]:
        assert time.time() < deadline, "the worker never started"
        time.sleep(0.2)
    [agent] = [int(p.split()[0]) for p in processes(mine)
               if "-m potato.training.agent" in p and "sh -c" not in p]
    os.kill(agent, signal.SIGSTOP)
    try:
        asked = time.time()
        c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
        run = wait_run(c, run_id, timeout=60)
        assert run["status"] == "cancelled"
        assert run["finished_at"] - asked <= 2 + 2, run["finished_at"] - asked
        assert wait_gone("-R /tmp/potato-%s-" % run_id, timeout=5) == []
    finally:
        os.kill(agent, signal.SIGCONT)  # it finds its session gone and stops the worker
    assert wait_gone(f"--run {run_id}") == [] and wait_gone(f"jobs/{run_id}") == []


# -- issue 25.4: training data left readable on the host ---------------------------------------

def open_to_others(root):
    """Paths under ``root`` (itself included) that group or others may read or enter."""
    bad = []
    for folder, _, files in os.walk(root):
        for p in [folder] + [os.path.join(folder, f) for f in files]:
            if stat.S_IMODE(os.lstat(p).st_mode) & 0o077:
                bad.append("%s %o" % (os.path.relpath(p, root), stat.S_IMODE(os.lstat(p).st_mode)))
    return bad


def wait_no_job_dir(root, run_id, timeout=30):
    deadline = time.time() + timeout
    while job_dirs(root, run_id) and time.time() < deadline:
        time.sleep(0.2)
    return job_dirs(root, run_id)


def test_remote_files_are_private_and_cancelled_or_failed_runs_leave_none(tmp_path, serve,
                                                                          real_host):
    _, url = serve(make_project(tmp_path, backend(real_host)))
    c = Client(url)
    run_id = start_run(c, backend="gpu-server", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 120})
    running(c, run_id)
    [job] = job_dirs(real_host, run_id)
    assert os.path.isfile(os.path.join(job, "bundle.tar.gz"))
    assert os.path.isdir(os.path.join(job, "bundle"))
    assert open_to_others(real_host) == []  # before: bundle.tar.gz 0644, bundle/ jobs/ 0755
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    assert wait_run(c, run_id, timeout=60)["status"] == "cancelled"
    assert wait_no_job_dir(real_host, run_id) == []
    failed = wait_run(c, start_run(c, backend="gpu-server", schemas=["sentiment"],
                                   trainer="test-sigkill"), timeout=120)
    assert failed["status"] == "error", failed
    assert wait_no_job_dir(real_host, failed["run_id"]) == []


def test_a_killed_agents_job_directory_is_swept_by_the_next_connection(tmp_path, serve,
                                                                       real_host):
    jobs = real_host / "jobs"
    for name, age in (("r-dead-1", 3600), ("r-live-1", 0)):
        (jobs / name / "bundle").mkdir(parents=True)
        (jobs / name / "bundle.tar.gz").write_bytes(b"labels")
        (jobs / name / ".alive").write_text("")
        then = time.time() - age
        os.utime(jobs / name / ".alive", (then, then))
    (jobs / "r-kept-1").mkdir()  # kept on purpose (keep_remote, or its model files stay)
    for p in (real_host, jobs):
        os.chmod(p, 0o755)  # as older versions left them
    _, url = serve(make_project(tmp_path, backend(real_host)))  # heartbeat_timeout_s: 30
    c = Client(url)
    status, report = c.json("POST", "/admin/training/api/backends/gpu-server/check", headers=H)
    assert status == 200, report
    assert sorted(os.listdir(jobs)) == ["r-kept-1", "r-live-1"]
    assert stat.S_IMODE(os.stat(jobs).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(real_host).st_mode) == 0o700


def test_cancel_ends_a_worker_that_ignores_sigterm(tmp_path, serve, real_host):
    """Issue 20.2, on ssh: the agent answers, the worker ignores SIGTERM; after Cancel, within
    grace_seconds (2) and a few seconds, nothing of the run is left on the host."""
    _, url = serve(make_project(tmp_path, backend(real_host)))
    c = Client(url)
    run_id = start_run(c, backend="gpu-server", schemas=["sentiment"],
                       trainer="test-ignore-term", params={"seconds": 120})
    mine = str(real_host)
    deadline = time.time() + 60
    while not [p for p in processes(mine) if "potato.training.worker" in p]:
        assert time.time() < deadline, "the worker never started"
        time.sleep(0.2)
    time.sleep(1.5)  # the trainer installs its SIG_IGN
    asked = time.time()
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    run = wait_run(c, run_id, timeout=60)
    assert run["status"] == "cancelled"
    assert wait_gone(mine, timeout=max(1, asked + 2 + 10 - time.time())) == []


def test_a_worker_that_ignores_term_does_not_hold_the_queue_past_max_wall_seconds(
        tmp_path, serve, real_host):
    """Issue 38.3 on a real sshd: with max_wall_seconds 6 and grace_seconds 10, a worker that
    ignores SIGTERM used to hold the queue until the agent's session closed (limit + about
    15 s). The run now ends within seconds of the limit and the next run starts; the agent on
    the host stops the worker within grace_seconds, and nothing of the job is left."""
    limit, grace = 6, 10
    _, url = serve(wall_limited(make_project(tmp_path, backend(real_host)), limit, grace))
    stuck = stuck_run_frees_the_queue(Client(url), limit, grace)
    assert wait_no_job_dir(real_host, stuck, timeout=5) == []
