"""Why SLURM ended or requeued a job, in words (standard library, Python 3.8; runs on login
nodes): the scheduler's reason read from ``scontrol show job`` or ``slurm.out``, and the
sentences a run's error and log use. Pure functions; remote/slurm_job.py follows the job.
"""

import re

WHAT_TO_DO = {
    "time limit": "Raise time in the backend (or train on fewer items or epochs); "
                  "keep_remote: true keeps slurm.out for a look.",
    "node failure": "Start the run again (requeue: true in the backend lets SLURM restart such "
                    "a job); if it repeats, tell the cluster's admins about the node.",
    "preemption": "Start the run again, or use a partition or qos that is not preempted "
                  "(requeue: true in the backend lets SLURM restart a preempted job).",
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
    """The scheduler's reason in slurm.out; the latest line that gives one wins (a job requeued
    once may end for another reason the second time)."""
    for line in reversed(text.splitlines()):
        for pattern, reason in SLURM_OUT:
            if pattern.search(line):
                return reason
    return None


# squeue states of a job sent back to the queue; a job seen RUNNING and then PENDING was too
REQUEUE_STATES = ("REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED")


def requeued(was_running, state):
    """Whether squeue's ``state`` says the job went back to the queue (``was_running``: it was
    seen RUNNING since it was submitted or last requeued)."""
    return state in REQUEUE_STATES or (was_running and state == "PENDING")


def requeue_words(reason):
    """"requeued after node failure" (``reason`` from reason_from_slurm_out, or None)."""
    return "requeued after %s" % reason if reason else "requeued by the scheduler"


def requeued_message(job_id, reason):
    """The run's error when SLURM requeued a job submitted with --no-requeue (a cluster that
    ignores the flag): Potato cancels it rather than train again in silence."""
    if reason:
        return "%s Potato cancelled the requeued job." % ended_message(job_id, reason)
    return ("SLURM job %s was requeued by the scheduler although Potato submitted it with "
            "--no-requeue; Potato cancelled it. Start the run again, or set requeue: true in "
            "the backend to let SLURM restart it." % job_id)


def unasked_stop_message(job_id):
    """What the worker's "cancelled" means when Potato sent no cancel: the TERM came from
    SLURM (a time limit, a node failure, a preemption, a requeue) or from someone's scancel."""
    return ("the worker of SLURM job %s stopped on a SIGTERM that Potato did not send: the "
            "scheduler ended or requeued the job, or someone ran scancel" % job_id)


def ended_message(job_id, reason):
    return "SLURM job %s ended before the worker finished: %s. %s" % (
        job_id, SENTENCES[reason], WHAT_TO_DO[reason])
