"""Submit the worker to SLURM and follow it (standard library, Python 3.8; runs on login nodes).

The agent on the login node writes ``job.sh``, submits it with ``sbatch --parsable``, polls
``squeue`` once per ``poll_interval_s``, relays the worker's events from ``events.jsonl`` on
shared storage as the file grows, and decides the ending from ``exit_code``, the final events
and — when the scheduler ended the job — the scheduler's reason, read from ``scontrol show job``
where the cluster has scontrol, else from ``slurm.out`` (put into words by
remote/slurm_reasons.py). It never calls srun or sacct.

Builders and parsers are pure functions; ``run_job`` is the loop.
"""

import os
import platform
import shlex
import shutil
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, ClassVar, Dict, List, Optional

from potato.training.remote import nodes, proc, protocol
from potato.training.remote import protocol as events
from potato.training.remote.paths import RunPaths
from potato.training.remote.slurm_parse import (  # noqa: F401 (this module's API too)
    SQUEUE_FORMAT, EventTail, SlurmError, SlurmParseError, node_limit, parse_partitions,
    parse_sbatch, parse_scontrol, parse_squeue, partitions_argv, scancel_argv, scontrol_argv,
    squeue_argv, too_many_nodes)
from potato.training.remote.slurm_reasons import (  # noqa: F401 (this module's API too)
    REQUEUE_STATES, SENTENCES, SLURM_OUT, STATE_REASONS, WHAT_TO_DO, ended_message,
    reason_from_scontrol, reason_from_slurm_out, requeue_words, requeued, requeued_message,
    unasked_stop_message)
from potato.training.remote.supervise import WorkerExit, tail

SBATCH_FLAGS = (("partition", "--partition"), ("gres", "--gres"), ("time", "--time"),
                ("account", "--account"), ("qos", "--qos"), ("mem", "--mem"),
                ("cpus_per_task", "--cpus-per-task"), ("constraint", "--constraint"),
                ("nodes", "--nodes"), ("ntasks_per_node", "--ntasks-per-node"),
                ("gpus_per_node", "--gpus-per-node"))
LOST_AFTER_S = 60  # a job gone from the queue with no exit code and no reason: wait this long


@dataclass
class SlurmSettings:
    """The slurm scheduler's part of a run's settings (``RunSettings.scheduler``): with it, the
    agent submits the worker with sbatch instead of running it (``run``)."""

    name: ClassVar[str] = "slurm"
    SBATCH_KEYS: ClassVar = tuple(k for k, _ in SBATCH_FLAGS)
    # what an agent's --slurm-config may set (lost_after_s is the server's to say)
    CONFIG_KEYS: ClassVar = SBATCH_KEYS + ("job_python", "prelude", "poll_interval_s", "requeue")

    job_python: str = "python"
    prelude: List[str] = field(default_factory=list)
    poll_interval_s: float = 10.0
    lost_after_s: float = float(LOST_AFTER_S)
    requeue: bool = False  # sbatch --requeue (SLURM restarts the job) or --no-requeue
    partition: Optional[str] = None
    gres: Optional[str] = None
    time: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    mem: Optional[str] = None
    cpus_per_task: Optional[str] = None
    constraint: Optional[str] = None
    nodes: Optional[int] = None  # more than 1: a data-parallel run across nodes (nodes.py)
    ntasks_per_node: Optional[int] = None
    gpus_per_node: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return dict(asdict(self), name=self.name)

    @classmethod
    def from_dict(cls, data: Optional[Dict[str, Any]]) -> "SlurmSettings":
        return protocol.read_fields(cls(), data)

    def sbatch_options(self) -> Dict[str, str]:
        out = {k: str(getattr(self, k)) for k in self.SBATCH_KEYS
               if getattr(self, k) not in (None, "")}
        out.pop("nodes", None)  # sbatch's default is one node; more is a whole count
        if self.node_count > 1:
            out["nodes"] = str(self.node_count)
        return out

    @property
    def node_count(self) -> int:
        """The nodes the job asks for (1 unless ``nodes`` says more)."""
        return nodes.requested({nodes.NODES_ENV: self.nodes})

    def run(self, job: "Job") -> "JobExit":
        """The scheduler's hook: run the job's worker under SLURM, to its end."""
        return run_job(job)


@dataclass
class Job:
    """One run handed to SLURM: what ``run_job`` needs (``settings.scheduler`` is its
    SlurmSettings)."""

    settings: Any  # the run's protocol.RunSettings
    jobdir: str
    code_dir: str
    run_id: str
    env: Dict[str, str]  # the agent's environment for the SLURM commands
    on_event: Callable[[dict], None]
    log: Callable[[str], None]
    should_cancel: Callable[[], bool]
    grace_seconds: float = 20.0
    tick: float = 0.5
    clock: Callable[[], float] = time.monotonic
    on_tick: Optional[Callable[[], None]] = None


# -- builders ---------------------------------------------------------------------------------

def job_script(settings, jobdir, code_dir, grace_seconds=20.0):
    """The text of job.sh (``settings``: the run's RunSettings, a SlurmSettings its
    scheduler). Every value is shell-quoted; ``prelude`` lines are shell code the user wrote
    for this purpose (module loads, environment activation) and go in as written.

    The script never exits before its worker: the worker runs under ``supervise.guard`` (its
    own process group; a TERM is passed on, and the group is killed ``grace_seconds`` later),
    and the shell itself survives a TERM (it passes it on to the guard) and waits."""
    q = shlex.quote
    paths = RunPaths(jobdir)
    slurm = settings.scheduler or SlurmSettings()
    python = slurm.job_python or "python"
    lines = ["#!/bin/sh", "# Written by Potato: runs the training worker of this job.",
             "# prelude (from the backend's config)"]
    lines += list(slurm.prelude)
    # The worker's environment as protocol.worker_env makes it, written as exports (the job
    # runs on another node, so the agent's own environment cannot be handed over).
    made = protocol.worker_env({}, code_dir, settings.num_threads, settings.env)
    for key, value in sorted(made.items()):
        if key == "PYTHONPATH":
            value = q(value) + "\"${PYTHONPATH:+:$PYTHONPATH}\""
        else:
            value = q(str(value))
        lines.append("export %s=%s" % (key, value))
    if slurm.node_count > 1:  # the worker is rank 0 and starts the other nodes' ranks
        lines.append("export %s=%s" % (nodes.NODES_ENV, q(str(slurm.node_count))))
    lines += [
        "cd %s || exit %d" % (q(jobdir), protocol.REMOTE_NO_CODE),
        # A requeued job runs this script again: the last attempt's exit code goes, and its
        # events are appended (the agent reads the file as it grows).
        "rm -f %s" % q(paths.exit_code),
        "pid=",
        "trap '[ -n \"$pid\" ] && kill -TERM \"$pid\" 2>/dev/null' TERM INT HUP",
        "%s -m potato.training.remote.supervise --grace %s -- %s >> %s 2> %s &" % (
            q(python), q("%g" % grace_seconds),
            proc.quoted(protocol.worker_argv(python, paths.spec)), q(paths.events),
            q(paths.stderr)),
        "pid=$!",
        # wait returns early when a trapped signal arrives: wait again until the guard is gone
        "wait \"$pid\"; code=$?",
        "while kill -0 \"$pid\" 2>/dev/null; do wait \"$pid\"; code=$?; done",
        "echo \"$code\" > %s && mv %s %s" % (q(paths.exit_code + ".tmp"),
                                             q(paths.exit_code + ".tmp"), q(paths.exit_code)),
        "exit \"$code\"", ""]
    return "\n".join(lines)


def sbatch_argv(settings, jobdir, run_id):
    """The sbatch command line (``settings``: the run's RunSettings, a SlurmSettings its
    scheduler). A job is submitted with --no-requeue unless the backend sets requeue: true:
    SLURM's default (JobRequeue=1) would otherwise restart it from the beginning after a node
    failure or a preemption, while the run seemed to go on."""
    settings = settings.scheduler or SlurmSettings()
    paths = RunPaths(jobdir)
    argv = ["sbatch", "--parsable", "--job-name=potato-%s" % run_id,
            "--output=%s" % paths.slurm_out, "--chdir=%s" % paths.root,
            "--requeue" if settings.requeue else "--no-requeue"]
    options = settings.sbatch_options()
    for key, flag in SBATCH_FLAGS:
        if key in options:
            argv.append("%s=%s" % (flag, options[key]))
    argv.append(paths.job_script)
    return argv


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


def call(argv, env, timeout=60):
    """(exit status or None on a timeout, stdout, stderr) of a SLURM command, via proc.run.
    Every SLURM command the follower runs goes through here (a test's scripted cluster
    replaces it)."""
    r = proc.run(argv, timeout=timeout, env=env)
    if r.timed_out:
        return None, "", "%s did not answer within %d s" % (argv[0], timeout)
    return r.returncode, r.stdout, r.stderr


SQUEUE_FAILING_S = 300  # squeue failing this long (the controller is down): the run ends
REASON_WAITS = 6  # half-second looks at slurm.out for why a job was requeued (a dead node
# writes none: the requeue is then "by the scheduler")


class JobFollower:
    """Submit the worker with sbatch and follow the job until it leaves the queue."""

    def __init__(self, job):
        self.settings, self.jobdir, self.code_dir = job.settings, job.jobdir, job.code_dir
        self.slurm = job.settings.scheduler or SlurmSettings()
        self.run_id, self.env, self.on_event, self.log = job.run_id, job.env, job.on_event, job.log
        self.should_cancel, self.grace, self.tick = job.should_cancel, job.grace_seconds, job.tick
        self.clock, self.on_tick = job.clock, job.on_tick
        self.out = JobExit()
        self.paths = RunPaths(job.jobdir)
        self.tailer = EventTail(self.paths.events)
        self.job_id = None
        self.last_state = None
        self.gone_since = None
        self.failing_since = None
        self.term_at = None
        self.killed = False
        self.has_scontrol = False
        self.was_running = False  # seen RUNNING since it was submitted or last requeued
        self.requeue_note = None  # "requeued after node failure", until it runs again

    def submit(self):
        missing = missing_commands(self.env)
        if missing:
            raise SlurmError(no_command_message(self.settings.host or platform.node(),
                                                missing[0]))
        with open(self.paths.job_script, "w") as f:
            f.write(job_script(self.settings, self.jobdir, self.code_dir, self.grace))
        os.chmod(self.paths.job_script, 0o755)
        self.has_scontrol = shutil.which("scontrol", path=self.env.get("PATH")) is not None
        self.check_nodes()
        argv = sbatch_argv(self.settings, self.jobdir, self.run_id)
        rc, stdout, stderr = call(argv, self.env, timeout=120)
        if rc != 0:
            raise SlurmError("sbatch refused the job (exit %s): %s. The command was: %s" % (
                rc, stderr.strip()[-400:] or stdout.strip()[-400:], proc.quoted(argv)))
        self.job_id = self.out.job_id = parse_sbatch(stdout)
        self.on_event(events.make("log", level="info", message="Submitted SLURM job %s with %s"
                                  % (self.job_id, proc.quoted(argv[1:-1]))))
        self.on_event(events.make("status", message="SLURM job %s submitted" % self.job_id))

    def check_nodes(self):
        """A job that asks more nodes than its partition has (or allows) never starts: say so
        before it queues (where scontrol can tell)."""
        if self.slurm.node_count <= 1 or not self.has_scontrol:
            return
        rc, stdout, _ = call(partitions_argv(), self.env)
        if rc != 0:
            return
        message = too_many_nodes(self.slurm.node_count, node_limit(
            parse_partitions(stdout), self.slurm.partition))
        if message:
            raise SlurmError(message)

    def follow(self):
        """Poll until the job has left the queue; scancel whatever stops this early."""
        poll = self.slurm.poll_interval_s or 10
        next_poll = self.clock()
        left_queue = False
        try:
            while True:
                self.relay()
                now = self.clock()
                self.cancel_step(now)
                if now >= next_poll:
                    next_poll = now + poll
                    if self.poll_queue(now):
                        break
                if self.on_tick is not None:
                    self.on_tick()
                time.sleep(max(0.05, min(self.tick, next_poll - self.clock())))
            left_queue = True
        finally:
            if not left_queue:
                # Whatever stopped the loop (a closed pipe, a signal, a bug), the job must not
                # keep its GPUs: cancel it before anything else can fail.
                call(scancel_argv(self.job_id), self.env)
        self.relay()
        self.out.stderr_tail = tail(self.paths.stderr)
        return self.out

    def relay(self):
        for event in self.tailer.read():
            if event["type"] == "error" and event.get("kind") == "cancelled" and \
                    self.term_at is None:
                # Potato sent no TERM: the scheduler did (or an scancel from outside). Not a
                # cancel: the scheduler's reason, or a requeue, says what happened.
                message = unasked_stop_message(self.job_id)
                self.out.note(events.make("error", kind="other", message=message))
                self.on_event(events.make("log", level="warning", message=message))
                continue
            self.out.note(event)
            self.on_event(event)

    def cancel_step(self, now):
        """SIGTERM through scancel when the run is cancelled; a plain scancel after grace."""
        if self.should_cancel() and self.term_at is None:
            self.out.stopped = "cancelled"
            self.term_at = now
            call(scancel_argv(self.job_id, signal_term=True), self.env)
            self.log("sent SIGTERM to SLURM job %s (scancel --full --signal=TERM)" % self.job_id)
        if self.term_at is not None and not self.killed and now - self.term_at > self.grace:
            call(scancel_argv(self.job_id), self.env)
            self.killed = True
            self.log("the worker did not stop within %g s; scancel %s" % (self.grace,
                                                                         self.job_id))

    def poll_queue(self, now):
        """One squeue; True once the job's ending is known."""
        rc, stdout, stderr = call(squeue_argv(self.job_id), self.env)
        if rc != 0 and "Invalid job id" not in stderr:
            self.log("squeue failed (exit %s): %s" % (rc, stderr.strip()[-200:]))
            self.failing_since = self.failing_since or now
            limit = self.grace + 30 if self.term_at is not None else SQUEUE_FAILING_S
            if now - self.failing_since > limit:
                self.out.reason_message = (
                    "squeue kept failing for %d s (%s), so SLURM job %s could not be followed; "
                    "it was cancelled. Check the cluster's controller." % (
                        now - self.failing_since, stderr.strip()[-200:] or "no output",
                        self.job_id))
                call(scancel_argv(self.job_id), self.env)
                return True
            return False
        self.failing_since = None
        state = parse_squeue(stdout, self.job_id) if rc == 0 else None
        if state is not None:
            self.gone_since = None
            st, reason, nodes = state
            if requeued(self.was_running, st):
                self.was_running = False
                if self.on_requeue():
                    return True
            if st == "RUNNING":
                self.was_running, self.requeue_note = True, None
                text = "SLURM job %s: %s on %s" % (self.job_id, st, nodes)
            elif self.requeue_note:
                text = "SLURM job %s: %s, %s (%s)" % (self.job_id, self.requeue_note, st, reason)
            else:
                text = "SLURM job %s: %s (%s)" % (self.job_id, st, reason)
            if text != self.last_state:
                self.last_state = text
                self.on_event(events.make("status", message=text))
            return False
        return self.on_gone(now)

    def on_requeue(self):
        """SLURM put the job back in the queue (a node failure, a preemption): its worker will
        start again from the beginning. With requeue: true that is a log line and the step
        says so; otherwise (a cluster that ignored --no-requeue) the job is cancelled and the
        run ends with the reason. True when the run ends."""
        self.relay()
        for _ in range(REASON_WAITS):  # slurmstepd may write its line just after the requeue
            reason = reason_from_slurm_out(tail(self.paths.slurm_out, 50))
            if reason is not None:
                break
            time.sleep(0.5)
        if self.term_at is not None:
            return False  # we are cancelling it: cancel_step finishes the job
        if not self.slurm.requeue:
            call(scancel_argv(self.job_id), self.env)
            self.out.reason_message = requeued_message(self.job_id, reason)
            self.log("SLURM job %s was %s although it was submitted with --no-requeue; "
                     "scancel %s" % (self.job_id, requeue_words(reason), self.job_id))
            return True
        self.requeue_note = requeue_words(reason)
        self.out.result = self.out.error = None  # the next attempt decides
        self.on_event(events.make("log", level="info", message=(
            "SLURM job %s was %s (requeue: true in the backend): its worker starts again from "
            "the beginning when the job runs again" % (self.job_id, self.requeue_note))))
        return False

    def on_gone(self, now):
        """The job left the queue: exit_code and the final events decide, unless the scheduler
        ended it (a time limit's SIGTERM also looks like a cancel to the worker, so the
        scheduler's reason comes before the worker's last word)."""
        self.relay()
        out = self.out
        if os.path.exists(self.paths.exit_code):
            try:
                with open(self.paths.exit_code) as f:
                    out.returncode = int(f.read().strip() or "1")
            except ValueError:
                out.returncode = 1
        if out.result is not None and out.returncode is not None:
            return True
        if out.stopped == "cancelled":
            return True  # we cancelled it: the scheduler's ending says nothing new
        reason = self.scheduler_reason()
        if reason is not None:
            out.reason_message = ended_message(self.job_id, reason)
            return True
        if out.returncode is not None:
            return True  # the worker's own failure: its exit code and error event say why
        if self.gone_since is None:
            self.gone_since = now
        elif now - self.gone_since > self.slurm.lost_after_s:
            out.reason_message = ("SLURM job %s left the queue without an exit code or a "
                                  "reason from the scheduler; it is treated as lost. "
                                  "keep_remote: true keeps slurm.out for a look." % self.job_id)
            return True
        return False

    def scheduler_reason(self):
        reason = None
        if self.has_scontrol:
            rc, sc_out, _ = call(scontrol_argv(self.job_id), self.env)
            if rc == 0:
                try:
                    reason = reason_from_scontrol(parse_scontrol(sc_out))
                except SlurmParseError as e:
                    self.log(str(e))
        if reason is None:
            reason = reason_from_slurm_out(tail(self.paths.slurm_out, 50))
        return reason


def run_job(job):
    """Submit the worker of ``job`` (a Job) and follow it to the end; returns a JobExit."""
    follower = JobFollower(job)
    follower.submit()
    return follower.follow()
