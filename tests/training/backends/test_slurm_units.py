"""Pure pieces of the slurm backend: job.sh, sbatch/squeue/scontrol parsing, reasons."""

import os
import subprocess

import pytest

from potato.training.remote import slurm_job as slurm
from potato.training.remote.protocol import RunSettings


def slurm_settings(**keys):
    """A run's settings for a SLURM job: RunSettings's own keys, the rest the scheduler's."""
    own = {k: keys.pop(k) for k in ("host", "env", "num_threads") if k in keys}
    return RunSettings(scheduler=slurm.SlurmSettings.from_dict(keys), **own)

# Captured from slurm-wlm 22.05 (`scontrol show job 7` after a job hit its time limit).
SCONTROL_TIMEOUT = """\
JobId=7 JobName=potato-r3
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   Priority=4294901754 Nice=0 Account=(null) QOS=(null)
   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15
   RunTime=00:01:27 TimeLimit=00:01:00 TimeMin=N/A
   SubmitTime=2026-11-30T09:10:01 EligibleTime=2026-11-30T09:10:01
   Partition=debug AllocNode:Sid=vm:1234
   NodeList=vm
   StdOut=/root/potato jobs/jobs/r3/slurm.out
"""
SQUEUE = "4242|PENDING|Priority|\n"
SQUEUE_RUNNING = "4242|RUNNING|None|node07\n"
HOSTILE = "/shared/pt dir/it's; $(touch HACKED)"


def test_sbatch_argv_maps_settings():
    argv = slurm.sbatch_argv(slurm_settings(**{
        "partition": "gpu", "gres": "gpu:1", "time": "02:00:00", "account": "lab", "qos": None,
        "mem": "16G", "cpus_per_task": "4", "constraint": "a100"}), "/s/jobs/r1", "r1")
    assert argv == ["sbatch", "--parsable", "--job-name=potato-r1",
                    "--output=/s/jobs/r1/slurm.out", "--chdir=/s/jobs/r1", "--no-requeue",
                    "--partition=gpu",
                    "--gres=gpu:1", "--time=02:00:00", "--account=lab", "--mem=16G",
                    "--cpus-per-task=4", "--constraint=a100", "/s/jobs/r1/job.sh"]
    assert not any(a.startswith("--gres") for a in slurm.sbatch_argv(slurm_settings(), "/j", "r"))


def test_job_script_quotes_every_value(tmp_path):
    jobdir = str(tmp_path / "job dir; $(touch HACKED)")
    os.makedirs(jobdir)
    text = slurm.job_script(slurm_settings(job_python="python3",
                                           env={"MSG": "it's $(touch HACKED)"}, num_threads=2,
                                           prelude=["export FROM_PRELUDE=yes"]),
                            jobdir, HOSTILE)
    assert "export FROM_PRELUDE=yes" in text
    assert "export MSG='it'\"'\"'s $(touch HACKED)'" in text
    r = subprocess.run(["sh", "-n", "-c", text])
    assert r.returncode == 0
    # Run it with a fake python that prints its env and argv: nothing is executed by accident.
    fake = tmp_path / "python3"
    fake.write_text('#!/bin/sh\necho "$MSG|$OMP_NUM_THREADS|$PYTHONPATH|$FROM_PRELUDE|$*"\n')
    fake.chmod(0o755)
    env = dict(os.environ, PATH=str(tmp_path) + os.pathsep + os.environ["PATH"])
    env.pop("PYTHONPATH", None)
    r = subprocess.run(["sh", "-c", text], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = open(os.path.join(jobdir, "events.jsonl")).read().strip()
    assert out == ("it's $(touch HACKED)|2|%s|yes|-m potato.training.remote.supervise --grace 20 "
                   "-- python3 -m potato.training.worker --spec %s/spec.json" % (HOSTILE, jobdir))
    assert open(os.path.join(jobdir, "exit_code")).read().strip() == "0"
    assert not list(tmp_path.rglob("HACKED"))


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("whom", ["shell", "job"])
def test_job_script_never_exits_before_its_worker(tmp_path, whom):
    """Issue 20.2: a TERM (scancel --signal=TERM to the batch shell, or --full to the whole job)
    reaches a worker that ignores it; the script waits, kills the worker's group after
    grace_seconds, writes exit_code and only then exits. Before, the shell died at once and the
    worker lived on under PID 1."""
    import signal
    import sys
    import time

    from tests.helpers import ROOT

    jobdir = tmp_path / "job"
    jobdir.mkdir()
    # job_python: the real interpreter, except that the worker is one that ignores SIGTERM
    # (and starts a child of its own, which must go too).
    fake = tmp_path / "python3"
    fake.write_text("""#!/bin/sh
if [ "$2" = potato.training.worker ]; then
  exec %s -c 'import os, signal, subprocess, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "300"])
open("pids", "w").write("%%d %%d" %% (os.getpid(), child.pid))
time.sleep(300)'
fi
exec %s "$@"
""" % (sys.executable, sys.executable))
    fake.chmod(0o755)
    text = slurm.job_script(slurm_settings(job_python=str(fake)), str(jobdir), ROOT,
                            grace_seconds=2)
    (jobdir / "job.sh").write_text(text)
    shell = subprocess.Popen(["sh", str(jobdir / "job.sh")], start_new_session=True)
    try:
        deadline = time.time() + 30
        while not (jobdir / "pids").exists() or not (jobdir / "pids").read_text():
            assert time.time() < deadline and shell.poll() is None, "the worker never started"
            time.sleep(0.1)
        worker, child = map(int, (jobdir / "pids").read_text().split())
        if whom == "shell":
            os.kill(shell.pid, signal.SIGTERM)
        else:
            os.killpg(shell.pid, signal.SIGTERM)
            os.kill(worker, signal.SIGTERM)
        time.sleep(1.0)
        assert shell.poll() is None, "job.sh exited while its worker was still running"
        assert _alive(worker)
        shell.wait(timeout=15)  # grace_seconds is 2
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
    assert not _alive(worker) and not _alive(child)
    assert shell.returncode == 137
    assert (jobdir / "exit_code").read_text().strip() == "137"


@pytest.mark.parametrize("out,job", [("4242\n", "4242"), ("4242;cluster-a\n", "4242"),
                                     ("sbatch: warning: x\n4243\n", "4243")])
def test_parse_sbatch(out, job):
    assert slurm.parse_sbatch(out) == job


def test_parse_sbatch_failure_quotes_input():
    with pytest.raises(slurm.SlurmParseError, match="Submitted batch job"):
        slurm.parse_sbatch("Submitted batch job\n")


def test_parse_squeue():
    assert slurm.parse_squeue(SQUEUE, "4242") == ("PENDING", "Priority", "")
    # Captured from slurm 22.05: the reason of a pending job comes in parentheses.
    assert slurm.parse_squeue("1|PENDING|(Resources)|\n", "1") == ("PENDING", "Resources", "")
    assert slurm.parse_squeue(SQUEUE_RUNNING, "4242") == ("RUNNING", "None", "node07")
    assert slurm.parse_squeue("", "4242") is None
    with pytest.raises(slurm.SlurmParseError, match="unexpected squeue line"):
        slurm.parse_squeue("garbage output\n", "4242")


def test_parse_scontrol_and_reasons():
    fields = slurm.parse_scontrol(SCONTROL_TIMEOUT)
    assert fields["JobState"] == "TIMEOUT" and fields["ExitCode"] == "0:15"
    assert slurm.reason_from_scontrol(fields) == "time limit"
    for state, reason in [("NODE_FAIL", "node failure"), ("PREEMPTED", "preemption"),
                          ("OUT_OF_MEMORY", "out of memory"), ("CANCELLED", "cancelled"),
                          ("COMPLETED", None), ("FAILED", None)]:
        assert slurm.reason_from_scontrol({"JobState": state}) == reason
    with pytest.raises(slurm.SlurmParseError):
        slurm.parse_scontrol("slurm_load_jobs error: Invalid job id specified")


@pytest.mark.parametrize("line,reason", [
    ("slurmstepd: error: *** JOB 7 ON vm CANCELLED AT 2026-11-30T09:11:28 DUE TO TIME LIMIT ***",
     "time limit"),
    ("slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2026-11-30T09:11:28 DUE TO NODE FAILURE ***",
     "node failure"),
    ("slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2026-11-30T09:11:28 DUE TO PREEMPTION ***",
     "preemption"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=7.batch. Some of the step tasks "
     "have been OOM Killed.", "out of memory"),
    ("slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2026-11-30T09:11:28 ***", "cancelled"),
    ("all fine", None),
])
def test_reason_from_slurm_out(line, reason):
    assert slurm.reason_from_slurm_out(line) == reason


def test_ended_message():
    assert slurm.ended_message("4242", "time limit").startswith(
        "SLURM job 4242 ended before the worker finished: it reached its time limit. Raise time")


def test_event_tail_waits_for_the_newline(tmp_path):
    path = tmp_path / "events.jsonl"
    t = slurm.EventTail(str(path))
    assert t.read() == []
    with open(path, "w") as f:
        f.write('{"type": "log", "message": "a"}\n{"type": "log", "mess')
    assert [e["message"] for e in t.read()] == ["a"]
    with open(path, "a") as f:
        f.write('age": "b"}\n')
    assert [e["message"] for e in t.read()] == ["b"]


def test_a_failure_while_following_the_job_still_cancels_it(tmp_path, monkeypatch):
    """Whatever stops the follow loop (here a closed pipe in the tick), scancel runs."""
    fakes = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "fakes")
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.join(fakes, "slurm"),
                                                os.environ["PATH"]]))
    state = tmp_path / "slurm-state"
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    jobdir = tmp_path / "job"
    jobdir.mkdir()

    def broken_tick():
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        slurm.run_job(slurm.Job(slurm_settings(job_python="python3", poll_interval_s=0.1),
                                str(jobdir), "/code", "r1", dict(os.environ), lambda e: None,
                                lambda m: None, lambda: False, tick=0.05,
                                on_tick=broken_tick))
    import json

    calls = [json.loads(line) for line in (state / "calls.log").read_text().splitlines()]
    assert ["scancel", "4242"] in calls, calls


def test_squeue_failing_forever_ends_the_follow(tmp_path, monkeypatch):
    """A controller that never answers again: the loop ends (bounded) and the job is cancelled."""
    fakes = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "fakes")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "scancel"):
        (bin_dir / name).write_text('#!/bin/sh\nexec python3 %s %s "$@"\n'
                                    % (os.path.join(fakes, "fakeslurm.py"), name))
        (bin_dir / name).chmod(0o755)
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact "
                                    "slurm controller' >&2\nexit 1\n")
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), os.environ["PATH"]]))
    monkeypatch.setenv("FAKE_SLURM_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(slurm, "SQUEUE_FAILING_S", 0.5)
    jobdir = tmp_path / "job"
    jobdir.mkdir()
    out = slurm.run_job(slurm.Job(slurm_settings(job_python="python3", poll_interval_s=0.1),
                                  str(jobdir), "/code", "r1", dict(os.environ), lambda e: None,
                                  lambda m: None, lambda: False, tick=0.05))
    assert out.reason_message.startswith("squeue kept failing for ")
    assert "Unable to contact slurm controller" in out.reason_message


# -- issue 38.2: requeue ----------------------------------------------------------------------

# Captured from slurm-wlm 22.05 after `scontrol update nodename=vm state=down` while a job ran:
# with --requeue (or JobRequeue=1) it went back to the queue, with --no-requeue it ended.
SLURM_OUT_NODE_DOWN = """\
start
slurmstepd-vm: error: *** JOB 2 ON vm CANCELLED AT 2026-12-03T19:36:04 DUE TO NODE FAILURE, \
SEE SLURMCTLD LOG FOR DETAILS ***
got TERM
"""
SCONTROL_NODE_FAIL = """\
JobId=1 JobName=potato-r1
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   JobState=NODE_FAIL Reason=NodeDown Dependency=(null)
   Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=143:0
"""


def test_a_job_is_submitted_with_no_requeue_unless_the_backend_allows_it():
    assert "--no-requeue" in slurm.sbatch_argv(slurm_settings(), "/j", "r1")
    assert "--requeue" not in slurm.sbatch_argv(slurm_settings(), "/j", "r1")
    allowed = slurm.sbatch_argv(slurm_settings(**{"requeue": True}), "/j", "r1")
    assert "--requeue" in allowed and "--no-requeue" not in allowed
    # an older server sends no requeue: the job is not requeued
    assert "--no-requeue" in slurm.sbatch_argv(slurm_settings(**{"partition": "gpu"}),
                                               "/j", "r1")


def test_a_node_failure_is_read_from_scontrol_and_slurm_out():
    assert slurm.reason_from_scontrol(slurm.parse_scontrol(SCONTROL_NODE_FAIL)) == "node failure"
    assert slurm.reason_from_slurm_out(SLURM_OUT_NODE_DOWN) == "node failure"
    assert slurm.ended_message("1", "node failure").startswith(
        "SLURM job 1 ended before the worker finished: its node failed. Start the run again")


def test_the_latest_reason_in_slurm_out_wins():
    twice = SLURM_OUT_NODE_DOWN + (
        "slurmstepd: error: *** JOB 2 ON vm CANCELLED AT 2026-12-03T19:50:00 DUE TO TIME LIMIT "
        "***\n")
    assert slurm.reason_from_slurm_out(twice) == "time limit"


@pytest.mark.parametrize("was_running,state,expected", [
    (True, "PENDING", True), (False, "PENDING", False), (True, "RUNNING", False),
    (False, "REQUEUED", True), (False, "REQUEUE_HOLD", True), (True, "COMPLETING", False)])
def test_a_job_back_in_the_queue_is_seen_as_requeued(was_running, state, expected):
    assert slurm.requeued(was_running, state) is expected


def test_requeue_words_and_message():
    assert slurm.requeue_words("node failure") == "requeued after node failure"
    assert slurm.requeue_words(None) == "requeued by the scheduler"
    assert slurm.requeued_message("5", "preemption").startswith(
        "SLURM job 5 ended before the worker finished: it was preempted by another job.")
    assert slurm.requeued_message("5", None).startswith(
        "SLURM job 5 was requeued by the scheduler although Potato submitted it with "
        "--no-requeue; Potato cancelled it.")


def test_job_script_appends_events_and_forgets_an_earlier_exit_code(tmp_path):
    """A requeued job runs job.sh again: the second attempt's events follow the first's (the
    agent reads on from where it was), and while it runs the first attempt's exit code is not
    there to be taken for the second's."""
    jobdir = tmp_path / "job"
    jobdir.mkdir()
    fake = tmp_path / "python3"  # the "worker" says whether an exit code is there as it runs
    fake.write_text('#!/bin/sh\n[ -e exit_code ] && m=stale || m=none\n'
                    'echo "{\\"type\\": \\"log\\", \\"level\\": \\"info\\", '
                    '\\"message\\": \\"$m\\"}"\nexit 3\n')
    fake.chmod(0o755)
    text = slurm.job_script(slurm_settings(job_python=str(fake)), str(jobdir), "/code")
    (jobdir / "exit_code").write_text("143\n")
    (jobdir / "events.jsonl").write_text('{"type": "log", "level": "info", "message": "1st"}\n')
    tail = slurm.EventTail(str(jobdir / "events.jsonl"))
    assert [e["message"] for e in tail.read()] == ["1st"]
    r = subprocess.run(["sh", "-c", text], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 3, r.stderr
    assert [e["message"] for e in tail.read()] == ["none"]
    assert (jobdir / "exit_code").read_text().strip() == "3"
