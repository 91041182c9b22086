"""The slurm backend end to end with stateful sbatch/squeue/scancel/scontrol stand-ins and the
ssh stand-in (the "login node" is this machine)."""

import json
import os
import re

import pytest

from tests.helpers import (
    FAKES, KEY, Client, fake_ssh_for_agent_session, job_dirs, make_project, start_run,
    wait_progress,
    wait_run)
from tests.helpers import slurm_backend as backend

H = {"X-API-Key": KEY}


def calls(state):
    path = state / "calls.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_on(c, trainer, **params):
    return wait_run(c, start_run(c, backend="cluster", schemas=["sentiment"], trainer=trainer,
                                 params=params), timeout=120)


def log_of(c, run):
    return c.get(f"/admin/training/api/runs/{run['run_id']}/log", headers=H).text


def test_pending_running_success(tmp_path, serve, cluster, monkeypatch):
    home, state = cluster
    monkeypatch.setenv("FAKE_SLURM_PENDING_POLLS", "3")
    _, url = serve(make_project(tmp_path, backend()))
    c = Client(url)
    run = run_on(c, "text-naive-bayes")
    assert run["status"] == "success", run
    assert run["ran_on"] == "cluster (slurm): SLURM job 4242 on node fake-node01"
    assert run["placement"]["slurm_job"] == "4242" and run["holdout"]["n"] > 50
    assert run["writeback"]["written"] > 1000
    log = log_of(c, run)
    [job] = re.findall(r"jobs/(r1-[0-9a-f]+)/slurm.out", log)[:1]
    assert ("Submitted SLURM job 4242 with --parsable --job-name=potato-r1 '--output=%s/potato "
            "jobs/jobs/%s/slurm.out'" % (home, job)) in log
    assert "--partition=gpu --gres=gpu:1 --time=00:10:00" in log
    assert log.index("SLURM job 4242: PENDING (Priority)") < \
        log.index("SLURM job 4242: RUNNING on fake-node01")
    assert (tmp_path / "annotation_output" / "training" / "runs" / run["run_id"] / "artifacts" /
            "sentiment.naive-bayes.json").is_file()
    assert job_dirs(home / "potato jobs", run["run_id"]) == []
    names = [call[0] for call in calls(state)]
    assert "srun" not in names and "sacct" not in names
    assert names.count("sbatch") == 1
    # One squeue per poll: every call asks for this one job, and the calls are spaced by the
    # poll interval (3 PENDING polls + RUNNING + gone: no more than a handful).
    squeues = [call for call in calls(state) if call[0] == "squeue"]
    assert all(call[call.index("-j") + 1] == "4242" for call in squeues)
    # The job was in the queue for at most the run's duration: one call per 0.3 s poll, plus
    # the first and the one that finds it gone.
    assert 5 <= len(squeues) <= run["duration_s"] / 0.3 + 2


@pytest.mark.parametrize("scenario,fragment", [
    ("timelimit", "SLURM job 4242 ended before the worker finished: it reached its time limit. "
                  "Raise time"),
    ("nodefail", "SLURM job 4242 ended before the worker finished: its node failed."),
    ("preempt", "SLURM job 4242 ended before the worker finished: it was preempted"),
    ("oom", "SLURM job 4242 ended before the worker finished: it ran out of memory."),
    ("cancelled", "SLURM job 4242 ended before the worker finished: it was cancelled from "
                  "outside Potato."),
])
@pytest.mark.parametrize("with_scontrol", [True, False])
def test_scheduler_endings(tmp_path, serve, cluster, monkeypatch, scenario, fragment,
                           with_scontrol):
    home, state = cluster
    monkeypatch.setenv("FAKE_SLURM_SCENARIO", scenario)
    if not with_scontrol:
        monkeypatch.setenv("PATH", os.environ["PATH"].replace(
            os.path.join(FAKES, "scontrol") + os.pathsep, ""))
    _, url = serve(make_project(tmp_path, backend()))
    run = run_on(Client(url), "test-steps", seconds=60)
    assert run["status"] == "error"
    assert run["error"].startswith(fragment), run["error"]
    used = {call[0] for call in calls(state)}
    assert ("scontrol" in used) is with_scontrol


def test_vanished_job_is_lost_after_a_bounded_wait(tmp_path, serve, cluster, monkeypatch):
    from potato.training.backends.slurm import SlurmBackend

    monkeypatch.setattr(SlurmBackend, "lost_after_s", 1)
    monkeypatch.setenv("FAKE_SLURM_SCENARIO", "vanish")
    _, url = serve(make_project(tmp_path, backend()))
    run = run_on(Client(url), "test-steps", seconds=60)
    assert run["status"] == "error"
    assert run["error"].startswith("SLURM job 4242 left the queue without an exit code or a "
                                   "reason from the scheduler; it is treated as lost.")


def test_sbatch_rejected(tmp_path, serve, cluster, monkeypatch):
    monkeypatch.setenv("FAKE_SLURM_SCENARIO", "reject")
    _, url = serve(make_project(tmp_path, backend()))
    run = run_on(Client(url), "text-naive-bayes")
    assert run["status"] == "error"
    assert run["error"].startswith("sbatch refused the job (exit 1): sbatch: error: Batch job "
                                   "submission failed: Invalid partition name specified.")


def test_parsable_with_cluster_name(tmp_path, serve, cluster, monkeypatch):
    monkeypatch.setenv("FAKE_SLURM_SCENARIO", "cluster")
    _, url = serve(make_project(tmp_path, backend()))
    assert run_on(Client(url), "text-naive-bayes")["status"] == "success"


def test_cancel_sends_term_then_releases(tmp_path, serve, cluster):
    home, state = cluster
    _, url = serve(make_project(tmp_path, backend()))
    c = Client(url)
    run_id = start_run(c, backend="cluster", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 120})
    wait_progress(c, run_id, timeout=60)
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    run = wait_run(c, run_id, timeout=60)
    assert run["status"] == "cancelled"
    assert ["scancel", "--full", "--signal=TERM", "4242"] in calls(state)


def test_env_prelude_and_threads_reach_the_job(tmp_path, serve, cluster):
    _, url = serve(make_project(tmp_path, backend(num_threads=3, env={"EXTRA": "x y"})))
    c = Client(url)
    run = run_on(c, "test-env")
    assert run["status"] == "success", run
    assert run["metrics"]["omp"] == "3"


def test_check(tmp_path, serve, cluster, monkeypatch):
    _, url = serve(make_project(tmp_path, backend(), labels=False))
    c = Client(url)
    status, report = c.json("POST", "/admin/training/api/backends/cluster/check", headers=H)
    assert report["ok"] is True, report
    text = "\n".join(report["lines"])
    assert "sbatch: " + os.path.join(FAKES, "slurm", "sbatch") in text
    assert "job_python python3 on the login node: Python 3." in text
    assert "compute nodes cannot be seen from the login node" in text



@pytest.mark.parametrize("nodes,ok", [(2, True), (3, False)])
def test_check_shows_the_nodes_a_run_asks_for(tmp_path, serve, cluster, nodes, ok):
    _, url = serve(make_project(tmp_path, backend(nodes=nodes, ntasks_per_node=2),
                                labels=False))
    status, report = Client(url).json("POST", "/admin/training/api/backends/cluster/check",
                                      headers=H)
    assert report["ok"] is ok, report["lines"]
    lines = report["lines"]
    assert ("a run asks for %d nodes (sbatch --nodes=%d, --ntasks-per-node=2), one worker rank "
            "0 on the first and the other ranks started with srun" % (nodes, nodes)) in lines
    assert "partition gpu: 2 nodes, MaxNodes UNLIMITED" in lines
    refusal = ("nodes is 3 but partition gpu has 2 nodes: the job could never start. Lower "
               "nodes, or choose a larger partition.")
    assert (refusal in lines) is not ok


def test_check_without_sbatch(tmp_path, serve, cluster):
    import sys

    # The backend's env sets PATH on the login node: here, one without any SLURM command.
    _, url = serve(make_project(tmp_path, backend(env={"PATH": os.path.dirname(sys.executable)}),
                                labels=False))
    status, report = Client(url).json("POST", "/admin/training/api/backends/cluster/check",
                                      headers=H)
    assert report["ok"] is False
    assert any(line.startswith("login.cluster.example.org has no sbatch on PATH, so it cannot "
                               "submit jobs.") for line in report["lines"]), report["lines"]


def test_dropped_login_session_cancels_the_job(tmp_path, serve, cluster, monkeypatch):
    import time

    home, state = cluster
    _, url = serve(make_project(tmp_path, backend(heartbeat_timeout_s=5)))
    c = Client(url)
    fake_ssh_for_agent_session(monkeypatch, FAKE_SSH_MODE="drop", FAKE_SSH_DROP_AFTER="4")
    run_id = start_run(c, backend="cluster", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 120})
    run = wait_run(c, run_id, timeout=60)
    assert run["status"] == "error"
    deadline = time.time() + 30
    while ["scancel", "--full", "--signal=TERM", "4242"] not in calls(state):
        assert time.time() < deadline, calls(state)
        time.sleep(0.2)


def test_a_job_python_without_the_packages_is_named_in_the_check_and_the_error(
        tmp_path, serve, cluster):
    # issue 38, item 4: the fix on SLURM is job_python, not the backend's python; and check
    # judges the trainers this project can use with job_python as the login node sees it
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True, timeout=120)
    bare = str(tmp_path / "bare" / "bin" / "python")
    _, url = serve(make_project(tmp_path, backend(job_python=bare)))
    c = Client(url)
    status, report = c.json("POST", "/admin/training/api/backends/cluster/check", headers=H)
    assert report["ok"] is False, report
    assert any(line.startswith("trainer hf-text-classification cannot run there: it needs "
                               "torch, transformers, peft") and line.endswith(
        "on the compute nodes: point the backend's job_python at an environment there that has "
        "them (python runs only the agent on the login node))") for line in report["lines"]), \
        report["lines"]
    run = run_on(c, "hf-text-classification")
    assert run["status"] == "error"
    assert run["error"].startswith("Trainer 'hf-text-classification' could not be imported. "), run
    assert run["error"].endswith("on the compute nodes: point the backend's job_python at an "
                                 "environment there that has them (python runs only the agent "
                                 "on the login node))"), run["error"]


# -- issue 38.2: a node failure ends the run; requeue only when the backend allows it ----------

def test_a_node_failure_ends_the_run_with_its_reason_and_no_requeue(tmp_path, serve, cluster,
                                                                     monkeypatch):
    """The stand-in requeues a job after a node failure unless sbatch had --no-requeue (as
    SLURM's default JobRequeue=1 does): the run used to go on, retrain from scratch and read
    'the worker stopped, as the cancel asked'."""
    home, state = cluster
    monkeypatch.setenv("FAKE_SLURM_SCENARIO", "nodefail")
    _, url = serve(make_project(tmp_path, backend()))
    c = Client(url)
    run = run_on(c, "test-steps", seconds=30)
    assert run["status"] == "error"
    assert run["error"].startswith("SLURM job 4242 ended before the worker finished: its node "
                                   "failed. Start the run again"), run["error"]
    [sbatch] = [call for call in calls(state) if call[0] == "sbatch"]
    assert "--no-requeue" in sbatch
    log = log_of(c, run)
    assert "was requeued" not in log and "requeued after" not in log
    assert "as the cancel asked" not in log
    assert "stopped on a SIGTERM that Potato did not send" in log


def test_requeue_true_lets_slurm_restart_the_job_and_says_so(tmp_path, serve, cluster,
                                                            monkeypatch):
    home, state = cluster
    monkeypatch.setenv("FAKE_SLURM_SCENARIO", "nodefail")
    monkeypatch.setenv("FAKE_SLURM_PENDING_POLLS", "3")
    _, url = serve(make_project(tmp_path, backend(requeue=True)))
    c = Client(url)
    run = run_on(c, "test-steps", seconds=3)
    assert run["status"] == "success", run
    [sbatch] = [call for call in calls(state) if call[0] == "sbatch"]
    assert "--requeue" in sbatch and "--no-requeue" not in sbatch
    log = log_of(c, run)
    assert "SLURM job 4242 was requeued after node failure (requeue: true in the backend)" in log
    assert "SLURM job 4242: requeued after node failure, PENDING (BeginTime)" in log
    assert log.index("requeued after node failure, PENDING") < \
        log.rindex("SLURM job 4242: RUNNING on fake-node01")
    assert "as the cancel asked" not in log


def test_a_job_requeued_despite_no_requeue_is_cancelled_and_the_run_ends(tmp_path, serve,
                                                                        cluster, monkeypatch):
    """A cluster that requeues the job although sbatch had --no-requeue: Potato does not let it
    train again in silence; it cancels the job and the run ends with the reason."""
    home, state = cluster
    monkeypatch.setenv("FAKE_SLURM_SCENARIO", "nodefail")
    monkeypatch.setenv("FAKE_SLURM_REQUEUE_ANYWAY", "1")
    monkeypatch.setenv("FAKE_SLURM_PENDING_POLLS", "5")
    _, url = serve(make_project(tmp_path, backend()))
    c = Client(url)
    run = run_on(c, "test-steps", seconds=30)
    assert run["status"] == "error"
    assert run["error"].startswith("SLURM job 4242 ended before the worker finished: its node "
                                   "failed."), run["error"]
    assert run["error"].endswith("Potato cancelled the requeued job.")
    assert ["scancel", "4242"] in calls(state)
    assert "as the cancel asked" not in log_of(c, run)
