#!/usr/bin/env python3
"""Stateful stand-ins for sbatch, squeue, scancel and scontrol (one script, four names).
``scontrol show partition`` prints $FAKE_SLURM_PARTITIONS (a two-node partition gpu by default).

State lives in $FAKE_SLURM_DIR (jobs/<id>.json); every call is appended to calls.log there.
$FAKE_SLURM_SCENARIO picks what happens to a submitted job:
  ok (default)      PENDING (Priority) for $FAKE_SLURM_PENDING_POLLS squeue calls, then RUNNING
                    (the script runs for real), then gone from the queue when it ends
  timelimit | nodefail | preempt | oom | cancelled
                    like ok, but the "scheduler" kills the job after $FAKE_SLURM_RUN_POLLS polls
                    of RUNNING, with that ending in scontrol and slurm.out
                    (nodefail: SIGTERM first, as slurmd sends, and, as with SLURM's default
                    JobRequeue=1, the job is requeued unless sbatch had --no-requeue: PENDING
                    (BeginTime), then it runs again, once, with SLURM_RESTART_COUNT=1;
                    $FAKE_SLURM_REQUEUE_ANYWAY=1 requeues it even so, as a cluster that
                    ignores the flag would)
  vanish            the job disappears while running: no exit code, no record, no reason
  reject            sbatch fails as a real one does for a bad partition
  cluster           sbatch --parsable prints "id;cluster"
"""
import json
import os
import signal
import subprocess
import sys
import time

name = os.path.basename(sys.argv[1])
args = sys.argv[2:]
state_dir = os.environ["FAKE_SLURM_DIR"]
jobs_dir = os.path.join(state_dir, "jobs")
os.makedirs(jobs_dir, exist_ok=True)
with open(os.path.join(state_dir, "calls.log"), "a") as f:
    f.write(json.dumps([name] + args) + "\n")
scenario = os.environ.get("FAKE_SLURM_SCENARIO", "ok")
ENDINGS = {"timelimit": ("TIMEOUT", "TimeLimit", "DUE TO TIME LIMIT"),
           "nodefail": ("NODE_FAIL", "NodeDown", "DUE TO NODE FAILURE"),
           "preempt": ("PREEMPTED", "Preempted", "DUE TO PREEMPTION"),
           "cancelled": ("CANCELLED", "None", ""),
           "oom": ("OUT_OF_MEMORY", "OutOfMemory", "")}


def load(job_id):
    path = os.path.join(jobs_dir, "%s.json" % job_id)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def save(job):
    with open(os.path.join(jobs_dir, "%s.json" % job["id"]), "w") as f:
        json.dump(job, f)


def alive(job):
    try:
        os.kill(job["pid"], 0)
    except (OSError, KeyError, TypeError):
        return False
    try:  # a zombie of ours counts as gone
        with open("/proc/%d/stat" % job["pid"]) as f:
            return f.read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def kill_group(job, sig):
    try:
        os.killpg(job["pid"], sig)
    except (OSError, KeyError, TypeError):
        pass


def stop_group(job, within=10):
    """SIGTERM to the job's group, then SIGKILL once ``within`` seconds passed (as slurmd)."""
    kill_group(job, signal.SIGTERM)
    deadline = time.time() + within
    while alive(job) and time.time() < deadline:
        time.sleep(0.05)
    kill_group(job, signal.SIGKILL)


def slurm_out_line(job, text):
    with open(job["output"], "a") as f:
        f.write("slurmstepd: error: *** JOB %s ON fake-node01 CANCELLED AT 2026-11-30T10:00:00 "
                "%s***\n" % (job["id"], text + " " if text else ""))


def advance(job):
    """Move a job along one poll, as the scheduler would between two squeue calls."""
    if job["state"] == "PENDING":
        job["polls"] += 1
        if job["polls"] > int(os.environ.get("FAKE_SLURM_PENDING_POLLS", "1")):
            env = dict(os.environ, SLURM_JOB_ID=str(job["id"]), SLURMD_NODENAME="fake-node01")
            if job.get("restarts"):
                env["SLURM_RESTART_COUNT"] = str(job["restarts"])
            out = open(job["output"], "a")
            p = subprocess.Popen(["sh", job["script"]], cwd=job["chdir"], env=env, stdout=out,
                                 stderr=out, start_new_session=True)
            job.update(state="RUNNING", pid=p.pid, polls=0)
    elif job["state"] == "RUNNING":
        job["polls"] += 1
        if not alive(job):
            job["state"] = "GONE"
        elif job["scenario"] in ENDINGS and not job.get("restarts") and job["polls"] > int(
                os.environ.get("FAKE_SLURM_RUN_POLLS", "2")):
            state, reason, text = ENDINGS[job["scenario"]]
            if job["scenario"] == "nodefail":
                stop_group(job)
                if job["requeue"]:
                    slurm_out_line(job, text)
                    job.update(state="PENDING", reason="BeginTime", polls=0,
                               restarts=job.get("restarts", 0) + 1)
                    save(job)
                    return job
            kill_group(job, signal.SIGKILL)
            job.update(state=state, reason=reason, ended=True)
            if job["scenario"] == "oom":
                with open(job["output"], "a") as f:
                    f.write("slurmstepd: error: Detected 1 oom_kill event in StepId=%s.batch. "
                            "Some of the step tasks have been OOM Killed.\n" % job["id"])
            else:
                slurm_out_line(job, text)
        elif job["scenario"] == "vanish" and job["polls"] > 1:
            kill_group(job, signal.SIGKILL)
            os.unlink(os.path.join(jobs_dir, "%s.json" % job["id"]))
            return None
    save(job)
    return job


if name == "sbatch":
    if scenario == "reject":
        sys.stderr.write("sbatch: error: Batch job submission failed: Invalid partition name "
                         "specified\n")
        sys.exit(1)
    opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    ids = sorted(int(p.split(".")[0]) for p in os.listdir(jobs_dir)) or [4241]
    job = {"id": ids[-1] + 1, "script": args[-1], "output": opts["output"],
           "chdir": opts.get("chdir", "."), "state": "PENDING", "reason": "Priority",
           "polls": 0, "scenario": scenario, "opts": opts,
           "requeue": "--no-requeue" not in args or
           bool(os.environ.get("FAKE_SLURM_REQUEUE_ANYWAY"))}
    save(job)
    print("%d;fake-cluster" % job["id"] if scenario == "cluster" else job["id"])
elif name == "squeue":
    job_id = args[args.index("-j") + 1]
    fmt = args[args.index("-o") + 1]
    job = load(job_id)
    if job is not None:
        job = advance(job)
    if job is not None and job["state"] in ("PENDING", "RUNNING"):
        nodes = "fake-node01" if job["state"] == "RUNNING" else ""
        reason = job["reason"] if job["state"] == "PENDING" else "None"
        print(fmt.replace("%i", str(job["id"])).replace("%T", job["state"])
              .replace("%R", reason).replace("%N", nodes))
elif name == "scancel":
    job = load(args[-1])
    if job is None:
        sys.stderr.write("scancel: error: Invalid job id %s\n" % args[-1])
        sys.exit(1)
    if "--signal=TERM" in args:
        kill_group(job, signal.SIGTERM)
    else:
        kill_group(job, signal.SIGKILL)
        job.update(state="CANCELLED", reason="None", ended=True)
        slurm_out_line(job, "")
        save(job)
elif name == "scontrol" and args[:2] == ["show", "partition"]:
    print(os.environ.get("FAKE_SLURM_PARTITIONS", "PartitionName=gpu AllowGroups=ALL Default=YES "
                                                  "MaxNodes=UNLIMITED TotalNodes=2 State=UP"))
elif name == "scontrol":
    job = load(args[-1])
    if job is None:
        sys.stderr.write("slurm_load_jobs error: Invalid job id specified\n")
        sys.exit(1)
    state = {"GONE": "COMPLETED"}.get(job["state"], job["state"])
    print("JobId=%s JobName=potato UserId=root(0) Priority=1 Nice=0\n"
          "   JobState=%s Reason=%s Dependency=(null)\n"
          "   Requeue=%d Restarts=%d BatchFlag=1 Reboot=0 ExitCode=0:0\n"
          "   NodeList=fake-node01 TimeLimit=00:01:00" % (
              job["id"], state, job.get("reason", "None"), job.get("requeue", True),
              job.get("restarts", 0)))
