"""The SLURM commands the follower runs and parsers of what they print (standard library, Python
3.8), and the reader of the worker's events as a job appends them on shared storage: pure
functions, tested on output captured from the real tools. Part of ``slurm_job``'s API (it
re-exports them)."""

import re

from potato.training.remote import protocol as events

SQUEUE_FORMAT = "%i|%T|%R|%N"


class SlurmError(Exception):
    pass


class SlurmParseError(SlurmError):
    pass


# -- commands ---------------------------------------------------------------------------------

def squeue_argv(job_id):
    return ["squeue", "-h", "-j", str(job_id), "-o", SQUEUE_FORMAT]


def partitions_argv():
    return ["scontrol", "show", "partition", "-o"]


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
    raise SlurmParseError("sbatch printed no job id: %r" % stdout[-300:])


def parse_squeue(stdout, job_id):
    """(state, reason, nodes) of the job, or None when squeue no longer lists it."""
    for line in stdout.strip().splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4:
            raise SlurmParseError("unexpected squeue line (want %s): %r" % (SQUEUE_FORMAT, line))
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
        raise SlurmParseError("no JobState in scontrol output: %r" % stdout[-300:])
    return fields


def parse_partitions(stdout):
    """``scontrol show partition -o`` output: {name: its Key=Value fields}, one line each."""
    out = {}
    for line in stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("PartitionName"):
            out[fields["PartitionName"]] = fields
    return out


def node_limit(partitions, name=None):
    """(partition name, nodes it has, MaxNodes or None for unlimited) of the partition ``name``,
    or of the default one; None when scontrol did not show it."""
    if name is None:
        name = next((n for n, f in partitions.items() if f.get("Default") == "YES"), None)
    fields = partitions.get(name) if name else None
    if fields is None:
        return None
    total = fields.get("TotalNodes", "")
    most = fields.get("MaxNodes", "")
    return (name, int(total) if total.isdigit() else None,
            int(most) if most.isdigit() else None)


def too_many_nodes(nodes, limit):
    """The sentence for a job that asks more nodes than its partition gives, or None."""
    if limit is None or nodes <= 1:
        return None
    name, total, most = limit
    if total is not None and nodes > total:
        return ("nodes is %d but partition %s has %d node%s: the job could never start. Lower "
                "nodes, or choose a larger partition." % (nodes, name, total,
                                                           "" if total == 1 else "s"))
    if most is not None and nodes > most:
        return ("nodes is %d but partition %s allows at most %d per job (MaxNodes): the job "
                "would wait forever. Lower nodes, or choose another partition." % (
                    nodes, name, most))
    return None


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
