"""The slurm backend against a real single-node SLURM (munge + slurmctld + slurmd, no accounting
database), reached through the real sshd on loopback. The fixtures start both."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from tests import slurmd as slurm_mod
from tests import sshd as sshd_mod
from tests.helpers import ROOT, Client
from tests.helpers import (
    KEY, PLUGINS, job_dirs, job_mark, job_processes, make_project, start_run, wait_progress,
    wait_run)

pytestmark = pytest.mark.integration
H = {"X-API-Key": KEY}


def _need(path, package):
    if not os.path.exists(path):
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing: .ci/run installs {package}")
        pytest.skip(f"{package} not installed")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    _need(sshd_mod.SSHD, "openssh-server")
    _need("/usr/sbin/slurmctld", "slurmctld")
    _need("/usr/sbin/slurmd", "slurmd")
    d = tmp_path_factory.mktemp("cluster")
    (d / "sshd").mkdir()
    (d / "slurm").mkdir()
    sshd_mod.start(d / "sshd")
    conf = slurm_mod.start(d / "slurm")
    # Jobs must see the files: remote_dir on "shared" storage, not under /tmp.
    os.makedirs("/var/cache/potato-tests", exist_ok=True)
    shared = tempfile.mkdtemp(prefix="slurm ", dir="/var/cache/potato-tests")
    yield d, conf, shared
    slurm_mod.stop(d / "slurm")
    sshd_mod.stop(d / "sshd")
    shutil.rmtree(shared, ignore_errors=True)


@pytest.fixture
def login(cluster, monkeypatch):
    d, conf, shared = cluster
    monkeypatch.setenv("PATH", str(d / "sshd" / "bin") + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("SLURM_CONF", conf)
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    return conf, shared


def backend(conf, shared, **extra):
    keys = {"type": "slurm", "host": "potato-real", "remote_dir": shared,
            "partition": "debug", "time": "00:10:00", "poll_interval_s": 1,
            "job_python": "python3", "heartbeat_timeout_s": 60,
            "env": {"SLURM_CONF": conf, "POTATO_TRAINER_PLUGINS": PLUGINS, "PYTHONPATH": ROOT}}
    keys.update(extra)
    return "  backends:\n    cluster:\n" + "".join(
        f"      {k}: {json.dumps(v)}\n" for k, v in keys.items())


def squeue_ids():
    r = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True)
    return r.stdout.split()


def test_naive_bayes_on_real_slurm(tmp_path, serve, login):
    conf, shared = login
    # Hold both CPUs for a few seconds so our job is seen waiting first.
    blocker = subprocess.run(["sbatch", "--parsable", "-c", "2", "--output=/dev/null",
                              "--wrap", "sleep 15"], capture_output=True, text=True, check=True,
                             cwd="/var/tmp").stdout.strip()
    # The naive Bayes worker needs about a second; a prelude that takes a few seconds (as module
    # loads do on real clusters) keeps the job RUNNING long enough for a 1 s poll to see it.
    _, url = serve(make_project(tmp_path, backend(conf, shared, poll_interval_s=1,
                                                  prelude=["sleep 4"])))
    c = Client(url)
    run = wait_run(c, start_run(c, backend="cluster", schemas=["sentiment"],
                                trainer="text-naive-bayes"), timeout=180)
    assert run["status"] == "success", run
    assert run["holdout"]["n"] > 50 and run["writeback"]["written"] > 1000
    log = c.get(f"/admin/training/api/runs/{run['run_id']}/log", headers=H).text
    job = log.split("Submitted SLURM job ")[1].split()[0]
    assert job != blocker
    assert run["ran_on"].startswith(f"cluster (slurm): SLURM job {job} on node ")
    assert f"SLURM job {job}: PENDING (" in log
    assert log.index(f"SLURM job {job}: PENDING (") < log.index(f"SLURM job {job}: RUNNING on ")
    assert (tmp_path / "annotation_output" / "training" / "runs" / run["run_id"] / "artifacts" /
            "sentiment.naive-bayes.json").is_file()
    assert job_dirs(shared, run["run_id"]) == []


def test_cancel_releases_the_job(tmp_path, serve, login):
    conf, shared = login
    _, url = serve(make_project(tmp_path, backend(conf, shared)))
    c = Client(url)
    run_id = start_run(c, backend="cluster", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 300})
    wait_progress(c, run_id, timeout=120)
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    job = log.split("Submitted SLURM job ")[1].split()[0]
    assert job in squeue_ids()
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    run = wait_run(c, run_id, timeout=120)
    assert run["status"] == "cancelled"
    deadline = time.time() + 60
    while job in squeue_ids() and time.time() < deadline:
        time.sleep(0.5)
    assert job not in squeue_ids()


def test_cancel_ends_a_worker_that_ignores_sigterm(tmp_path, serve, login):
    """Issue 20.2: scancel --full --signal=TERM used to kill the batch shell first; the job left
    the queue and the worker, which ignores SIGTERM, kept running under PID 1. Now job.sh waits
    for its worker and kills its group after grace_seconds (2 here)."""
    conf, shared = login
    _, url = serve(make_project(tmp_path, backend(conf, shared)))
    c = Client(url)
    run_id = start_run(c, backend="cluster", schemas=["sentiment"], trainer="test-ignore-term",
                       params={"seconds": 300})
    mark = job_mark(c, run_id)
    deadline = time.time() + 120
    while not [p for p in job_processes(mark)
               if b"potato.training.worker" in open(f"/proc/{p}/cmdline", "rb").read()]:
        assert time.time() < deadline, "the worker never started"
        assert wait_run(c, run_id, until=("running", "success", "error", "cancelled"))[
            "status"] == "running"
        time.sleep(0.2)
    time.sleep(1.5)  # the trainer installs its SIG_IGN
    asked = time.time()
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    run = wait_run(c, run_id, timeout=60)
    assert run["status"] == "cancelled", run
    while job_processes(mark) and time.time() < asked + 2 + 20:
        time.sleep(0.5)
    assert job_processes(mark) == [], "processes of the run still running 22 s after Cancel"


@pytest.mark.slow
def test_time_limit_message(tmp_path, serve, login):
    conf, shared = login
    _, url = serve(make_project(tmp_path, backend(conf, shared, time="1", poll_interval_s=2)))
    c = Client(url)
    run = wait_run(c, start_run(c, backend="cluster", schemas=["sentiment"],
                                trainer="test-steps", params={"seconds": 400}), timeout=300)
    assert run["status"] == "error"
    assert run["error"].startswith("SLURM job ") and \
        "ended before the worker finished: it reached its time limit. Raise time" in run["error"]


def _processes_with(text):
    """Pids of ssh clients whose command line holds ``text`` (ours only: ``text`` is the
    backend's private control directory). The connection master renames itself
    ``ssh: <control path> [mux]``."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        first = argv[0].split() if argv else []
        if first and first[0].rstrip(b":").endswith(b"ssh") and \
                any(text.encode() in a for a in argv):
            pids.append(int(pid))
    return pids


def test_dropped_ssh_session_cancels_the_job(tmp_path, serve, login):
    """Issue 11.4: the login node's ssh session dies (the server's ssh client is SIGKILLed);
    the agent must scancel its job although its stderr is now a closed pipe."""
    import signal

    conf, shared = login
    server, url = serve(make_project(tmp_path, backend(conf, shared)))
    c = Client(url)
    run_id = start_run(c, backend="cluster", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 300})
    wait_progress(c, run_id, timeout=120)
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    job = log.split("Submitted SLURM job ")[1].split()[0]
    assert job in squeue_ids()
    # The run's session and the connection it shares (ControlMaster): every ssh client of this
    # server's backend. Killing only the session's client would leave the master holding it.
    control_dir = server.manager.backends["cluster"]._control_dir
    clients = _processes_with(control_dir)
    assert len(clients) >= 2, "expected the run's ssh client and its connection master"
    for pid in clients:
        os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 30
    while job in squeue_ids() and time.time() < deadline:
        time.sleep(0.5)
    assert job not in squeue_ids(), f"SLURM job {job} still queued 30 s after the ssh drop"
    run = wait_run(c, run_id, timeout=180)
    assert run["status"] == "error"


def _node():
    """The single node's name and its state (sinfo)."""
    import socket

    host = socket.gethostname().split(".")[0]
    r = subprocess.run(["sinfo", "-h", "-n", host, "-o", "%T"], capture_output=True, text=True)
    return host, r.stdout.strip()


def _resume_node(host, timeout=60):
    """Bring the node back for the tests after this one (with ReturnToService=2 it may be back
    already, and then scontrol refuses 'resume')."""
    subprocess.run(["scontrol", "update", "nodename=" + host, "state=resume"],
                   capture_output=True, text=True)
    deadline = time.time() + timeout
    while _node()[1] not in ("idle", "mixed", "allocated") and time.time() < deadline:
        time.sleep(0.5)


def test_a_node_failure_ends_the_run_with_its_reason_and_no_requeue(tmp_path, serve, login):
    """Issue 38.2: with SLURM's default JobRequeue=1 a node set down while the run trained
    requeued the job; the run stayed running and retrained from scratch. Now the job is
    submitted with --no-requeue and the run ends with the scheduler's reason."""
    conf, shared = login
    _, url = serve(make_project(tmp_path, backend(conf, shared)))
    c = Client(url)
    run_id = start_run(c, backend="cluster", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 300})
    wait_progress(c, run_id, timeout=120)
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    job = log.split("Submitted SLURM job ")[1].split()[0]
    host, _ = _node()
    try:
        r = subprocess.run(["scontrol", "update", "nodename=" + host, "state=down",
                            "reason=potato test: node failure"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        run = wait_run(c, run_id, timeout=120)
    finally:
        _resume_node(host)
    assert run["status"] == "error", run
    assert run["error"].startswith(f"SLURM job {job} ended before the worker finished: its node "
                                   f"failed. Start the run again"), run["error"]
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert "--no-requeue" in log.split("Submitted SLURM job ")[1].splitlines()[0]
    assert "requeued after" not in log and "BeginTime" not in log
    assert "as the cancel asked" not in log
    shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True)
    assert "Restarts=0" in shown.stdout and "JobState=NODE_FAIL" in shown.stdout, shown.stdout
    assert job not in squeue_ids()


@pytest.mark.slow
def test_requeue_true_restarts_the_job_after_a_node_failure_and_says_so(tmp_path, serve,
                                                                        login):
    """requeue: true: SLURM requeues the job when its node goes down (and holds it about two
    minutes, BeginTime); the log and the step say so, the worker trains again from the
    beginning and the run ends with the last attempt's result."""
    conf, shared = login
    _, url = serve(make_project(tmp_path, backend(conf, shared, requeue=True)))
    c = Client(url)
    run_id = start_run(c, backend="cluster", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 10})
    wait_progress(c, run_id, timeout=120)
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    job = log.split("Submitted SLURM job ")[1].split()[0]
    assert "--requeue" in log.split("Submitted SLURM job ")[1].splitlines()[0]
    host, _ = _node()
    try:
        subprocess.run(["scontrol", "update", "nodename=" + host, "state=down",
                        "reason=potato test: node failure"], check=True, capture_output=True)
        deadline = time.time() + 60
        while f"SLURM job {job} was requeued" not in log:
            assert time.time() < deadline, log[-3000:]
            time.sleep(0.5)
            log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
        status, run = c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)
        assert run["status"] == "running"
        assert run["step"].startswith(f"SLURM job {job}: requeued after node failure, PENDING")
    finally:
        _resume_node(host)
    run = wait_run(c, run_id, timeout=400)
    assert run["status"] == "success", run
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert f"SLURM job {job} was requeued after node failure (requeue: true in the backend)" in log
    assert "as the cancel asked" not in log
    shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True)
    assert "Restarts=1" in shown.stdout, shown.stdout


def test_a_job_python_without_the_trainers_packages_is_named_with_its_fix(tmp_path, serve,
                                                                         login):
    # issue 38, item 4: on SLURM the fix is job_python (the compute nodes' Python), not the
    # backend's python (the login node's, which runs the agent); check says so first
    conf, shared = login
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True, timeout=120)
    bare = str(tmp_path / "bare" / "bin" / "python")
    _, url = serve(make_project(tmp_path, backend(conf, shared, job_python=bare)))
    c = Client(url)
    status, report = c.json("POST", "/admin/training/api/backends/cluster/check", headers=H)
    assert report["ok"] is False and any(
        line.startswith("trainer hf-text-classification cannot run there: it needs torch")
        for line in report["lines"]), report["lines"]
    run = wait_run(c, start_run(c, backend="cluster", schemas=["sentiment"],
                                trainer="hf-text-classification"), timeout=180)
    assert run["status"] == "error", run
    assert run["error"].startswith("Trainer 'hf-text-classification' could not be imported. ")
    assert "point the backend's job_python at an environment there that has them" in \
        run["error"], run["error"]
    assert squeue_ids() == []
