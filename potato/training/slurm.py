"""Submit the worker to SLURM and follow it (standard library, Python 3.8; runs on login nodes).

The agent on the login node writes ``job.sh``, submits it with ``sbatch --parsable``, polls
``squeue`` once per ``poll_interval_s``, relays the worker's events from ``events.jsonl`` on
shared storage as the file grows, and decides the ending from ``exit_code``, the final events
and — when the scheduler ended the job — the scheduler's reason, read from ``scontrol show job``
where the cluster has scontrol, else from ``slurm.out``. It never calls srun or sacct.

Builders and parsers are pure functions; ``run_job`` is the loop.
"""

import os
import platform
import re
import shlex
import shutil
import subprocess
import time

from potato.training import events
from potato.training.paths import RunPaths
from potato.training.supervise import WorkerExit, tail

SBATCH_FLAGS = (("partition", "--partition"), ("gres", "--gres"), ("time", "--time"),
                ("account", "--account"), ("qos", "--qos"), ("mem", "--mem"),
                ("cpus_per_task", "--cpus-per-task"), ("constraint", "--constraint"))
SQUEUE_FORMAT = "%i|%T|%R|%N"
LOST_AFTER_S = 60  # a job gone from the queue with no exit code and no reason: wait this long


class SlurmError(Exception):
    pass


class ParseError(SlurmError):
    pass


# -- builders ---------------------------------------------------------------------------------

def job_script(settings, jobdir, code_dir):
    """The text of job.sh. Every value is shell-quoted; ``prelude`` lines are shell code the
    user wrote for this purpose (module loads, environment activation) and go in as written."""
    q = shlex.quote
    paths = RunPaths(jobdir)
    python = settings.get("job_python") or "python"
    lines = ["#!/bin/sh", "# Written by Potato: runs the training worker of this job.",
             "# prelude (from the backend's config)"]
    lines += list(settings.get("prelude") or [])
    for key, value in sorted((settings.get("env") or {}).items()):
        lines.append("export %s=%s" % (key, q(str(value))))
    if settings.get("num_threads"):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            lines.append("export %s=%s" % (var, q(str(settings["num_threads"]))))
    lines += [
        "export PYTHONPATH=%s\"${PYTHONPATH:+:$PYTHONPATH}\"" % q(code_dir),
        "export PYTHONUNBUFFERED=1",
        "cd %s || exit 96" % q(jobdir),
        "%s -m potato.training.worker --spec %s > %s 2> %s" % (
            q(python), q(paths.spec), q(paths.events), q(paths.stderr)),
        "code=$?",
        "echo \"$code\" > %s && mv %s %s" % (q(paths.exit_code + ".tmp"),
                                             q(paths.exit_code + ".tmp"), q(paths.exit_code)),
        "exit \"$code\"", ""]
    return "\n".join(lines)


def sbatch_argv(settings, jobdir, run_id):
    paths = RunPaths(jobdir)
    argv = ["sbatch", "--parsable", "--job-name=potato-%s" % run_id,
            "--output=%s" % paths.slurm_out, "--chdir=%s" % paths.root]
    for key, flag in SBATCH_FLAGS:
        value = settings.get(key)
        if value not in (None, ""):
            argv.append("%s=%s" % (flag, value))
    argv.append(paths.job_script)
    return argv


def squeue_argv(job_id):
    return ["squeue", "-h", "-j", str(job_id), "-o", SQUEUE_FORMAT]


def scontrol_argv(job_id):
    return ["scontrol", "show", "job", str(job_id)]


def scancel_argv(job_id, signal_term=False):
    if signal_term:
        return ["scancel", "--full", "--signal=TERM", str(job_id)]
    return ["scancel", str(job_id)]


# -- parsers ----------------------------------------------------------------------------------

def parse_sbatch(stdout):
    """The job id from ``sbatch --parsable`` output (``id`` or ``id;cluster``)."""
    for line in stdout.strip().splitlines():
        first = line.strip().split(";")[0]
        if first.isdigit():
            return first
    raise ParseError("sbatch printed no job id: %r" % stdout[-300:])


def parse_squeue(stdout, job_id):
    """(state, reason, nodes) of the job, or None when squeue no longer lists it."""
    for line in stdout.strip().splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4:
            raise ParseError("unexpected squeue line (want %s): %r" % (SQUEUE_FORMAT, line))
        if parts[0].split("_")[0] == str(job_id):
            # squeue shows a pending job's reason in parentheses: "(Priority)"
            reason = parts[2].strip()
            if reason.startswith("(") and reason.endswith(")"):
                reason = reason[1:-1]
            return parts[1], reason, parts[3]
    return None


def parse_scontrol(stdout):
    """``scontrol show job`` output as a dict of its Key=Value fields."""
    fields = {}
    for token in re.findall(r"(\w[\w:/]*)=(\S*)", stdout):
        fields.setdefault(token[0], token[1])
    if "JobState" not in fields:
        raise ParseError("no JobState in scontrol output: %r" % stdout[-300:])
    return fields


WHAT_TO_DO = {
    "time limit": "Raise time in the backend (or train on fewer items or epochs); "
                  "keep_remote: true keeps slurm.out for a look.",
    "node failure": "Start the run again; if it repeats, tell the cluster's admins about the node.",
    "preemption": "Start the run again, or use a partition or qos that is not preempted.",
    "out of memory": "Ask for more memory (mem in the backend) or lower batch_size or "
                     "max_length.",
    "cancelled": "Someone cancelled the job outside Potato (scancel); start the run again.",
}
STATE_REASONS = {"TIMEOUT": "time limit", "DEADLINE": "time limit", "NODE_FAIL": "node failure",
                 "PREEMPTED": "preemption", "OUT_OF_MEMORY": "out of memory",
                 "CANCELLED": "cancelled"}
SLURM_OUT = [(re.compile(r"DUE TO TIME LIMIT"), "time limit"),
             (re.compile(r"DUE TO NODE FAIL"), "node failure"),
             (re.compile(r"DUE TO PREEMPTION"), "preemption"),
             (re.compile(r"oom[-_ ]kill|Out Of Memory|OUT_OF_MEMORY", re.I), "out of memory"),
             (re.compile(r"\*\*\* JOB \d+ ON \S+ CANCELLED AT"), "cancelled")]
SENTENCES = {"time limit": "it reached its time limit", "node failure": "its node failed",
             "preemption": "it was preempted by another job",
             "out of memory": "it ran out of memory",
             "cancelled": "it was cancelled from outside Potato"}


def reason_from_scontrol(fields):
    state = fields.get("JobState", "")
    return STATE_REASONS.get(state.split("+")[0])


def reason_from_slurm_out(text):
    for pattern, reason in SLURM_OUT:
        if pattern.search(text):
            return reason
    return None


def ended_message(job_id, reason):
    return "SLURM job %s ended before the worker finished: %s. %s" % (
        job_id, SENTENCES[reason], WHAT_TO_DO[reason])


# -- the loop ---------------------------------------------------------------------------------

class EventTail:
    """Reads complete lines appended to events.jsonl (a partial last line waits for its newline)."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.partial = b""

    def read(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        out = []
        for raw in lines:
            event = events.parse(raw.decode("utf-8", "replace"))
            if event is not None:
                out.append(event)
        return out


class JobExit(WorkerExit):
    """What run_job learned: a local WorkerExit's fields, and the scheduler's word."""

    def __init__(self):
        WorkerExit.__init__(self)
        self.reason_message = None
        self.job_id = None


NEEDED = ("sbatch", "squeue", "scancel")
WHAT_FOR = {"sbatch": "submit jobs", "squeue": "follow its jobs", "scancel": "cancel its jobs"}


def missing_commands(env):
    """The SLURM commands the agent needs that are not on the PATH it runs them with."""
    return [c for c in NEEDED if shutil.which(c, path=env.get("PATH", os.defpath)) is None]


def no_command_message(host, command):
    """The tutorial's sentence, the same in ``training check`` and in a run's error."""
    return ("%s has no %s on PATH, so it cannot %s. Set PATH under the backend's env (for "
            "example env: {PATH: \"/opt/slurm/bin:/usr/bin:/bin\"})." % (host, command,
                                                                      WHAT_FOR[command]))


def _call(argv, env, timeout=60):
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=timeout, env=env)
    except FileNotFoundError:
        return 127, "", "%s: command not found" % argv[0]
    except subprocess.TimeoutExpired:
        return None, "", "%s did not answer within %d s" % (argv[0], timeout)
    return r.returncode, r.stdout, r.stderr


def run_job(settings, jobdir, code_dir, run_id, env, on_event, log, should_cancel,
            grace_seconds=20.0, tick=0.5, clock=time.monotonic, on_tick=None):
    """Submit the worker and follow it to the end; returns a JobExit."""
    out = JobExit()
    missing = missing_commands(env)
    if missing:
        raise SlurmError(no_command_message(settings.get("host") or platform.node(), missing[0]))
    paths = RunPaths(jobdir)
    with open(paths.job_script, "w") as f:
        f.write(job_script(settings, jobdir, code_dir))
    os.chmod(paths.job_script, 0o755)
    argv = sbatch_argv(settings, jobdir, run_id)
    rc, stdout, stderr = _call(argv, env, timeout=120)
    if rc != 0:
        raise SlurmError("sbatch refused the job (exit %s): %s. The command was: %s" % (
            rc, stderr.strip()[-400:] or stdout.strip()[-400:], " ".join(
                shlex.quote(a) for a in argv)))
    job_id = out.job_id = parse_sbatch(stdout)
    flags = " ".join(shlex.quote(a) for a in argv[1:-1])
    on_event(events.make("log", level="info", message="Submitted SLURM job %s with %s"
                                                      % (job_id, flags)))
    on_event(events.make("status", message="SLURM job %s submitted" % job_id))
    has_scontrol = shutil.which("scontrol", path=env.get("PATH")) is not None
    poll = float(settings.get("poll_interval_s") or 10)
    tailer = EventTail(paths.events)
    exit_path = paths.exit_code
    last_state = None
    next_poll = clock()
    gone_since = None
    term_at = None
    killed = False

    def relay():
        for event in tailer.read():
            out.note(event)
            on_event(event)

    left_queue = False
    try:
        while True:
            relay()
            now = clock()
            if should_cancel() and term_at is None:
                out.stopped = "cancelled"
                term_at = now
                _call(scancel_argv(job_id, signal_term=True), env)
                log("sent SIGTERM to SLURM job %s (scancel --full --signal=TERM)" % job_id)
            if term_at is not None and not killed and now - term_at > grace_seconds:
                _call(scancel_argv(job_id), env)
                killed = True
                log("the worker did not stop within %g s; scancel %s" % (grace_seconds, job_id))
            if now >= next_poll:
                next_poll = now + poll
                rc, stdout, stderr = _call(squeue_argv(job_id), env)
                state = None
                if rc == 0:
                    state = parse_squeue(stdout, job_id)
                elif "Invalid job id" not in stderr:
                    log("squeue failed (exit %s): %s" % (rc, stderr.strip()[-200:]))
                    time.sleep(tick)
                    continue
                if state is not None:
                    gone_since = None
                    st, reason, nodes = state
                    text = ("SLURM job %s: %s on %s" % (job_id, st, nodes) if st == "RUNNING"
                            else "SLURM job %s: %s (%s)" % (job_id, st, reason))
                    if text != last_state:
                        last_state = text
                        on_event(events.make("status", message=text))
                else:
                    # The job left the queue: exit_code and the final events decide, unless the
                    # scheduler ended it (a time limit's SIGTERM also looks like a cancel to the
                    # worker, so the scheduler's reason comes before the worker's last word).
                    relay()
                    if os.path.exists(exit_path):
                        try:
                            out.returncode = int(open(exit_path).read().strip() or "1")
                        except ValueError:
                            out.returncode = 1
                    if out.result is not None and out.returncode is not None:
                        break
                    if out.stopped == "cancelled":
                        break  # we cancelled it: the scheduler's ending says nothing new
                    reason = None
                    if has_scontrol:
                        rc2, sc_out, _ = _call(scontrol_argv(job_id), env)
                        if rc2 == 0:
                            try:
                                reason = reason_from_scontrol(parse_scontrol(sc_out))
                            except ParseError as e:
                                log(str(e))
                    if reason is None:
                        reason = reason_from_slurm_out(tail(paths.slurm_out, 50))
                    if reason is not None:
                        out.reason_message = ended_message(job_id, reason)
                        break
                    if out.returncode is not None:
                        break  # the worker's own failure: its exit code and error event say why
                    if gone_since is None:
                        gone_since = now
                    elif now - gone_since > float(settings.get("lost_after_s", LOST_AFTER_S)):
                        out.reason_message = ("SLURM job %s left the queue without an exit code or "
                                              "a reason from the scheduler; it is treated as lost. "
                                              "keep_remote: true keeps slurm.out for a look."
                                              % job_id)
                        break
            if on_tick is not None:
                on_tick()
            time.sleep(max(0.05, min(tick, next_poll - clock())))
        left_queue = True
    finally:
        if not left_queue:
            # Whatever stopped the loop (a closed pipe, a signal, a bug), the job must not keep
            # its GPUs: cancel it before anything else can fail.
            _call(scancel_argv(job_id), env)
    relay()
    out.stderr_tail = tail(paths.stderr)
    return out
