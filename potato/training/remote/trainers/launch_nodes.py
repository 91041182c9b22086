"""The multi-node side of rank_io.py (rank 0 of a data-parallel run across the nodes of one
SLURM job; remote/nodes.py has the job's facts): the TCP rendezvous, the srun step that starts
the other nodes' ranks, "Ran on"'s list of nodes, the environment every node must share, and
the sentence for a rank that failed on another node (standard library at import time; torch
is imported by the functions).

The rendezvous is a TCPStore on the first node, at a port derived from the job id: the ranks
of other nodes can meet no other way (gloo and NCCL connect the nodes without authentication
too; a multi-node job trusts its cluster's network). The other nodes' ranks are started by one
``srun`` step, whose output goes to ``srun.out`` in the run's directory.
"""

import json
import os
import platform
import re
import subprocess
import sys

from potato.training.remote import nodes, proc, protocol
from potato.training.remote.trainers import rank_io

NODES_TEXT_MAX = 400  # "Ran on"'s list of nodes (the server's boundary cuts there too)
STEP_OUT = "srun.out"  # the output of the other nodes' ranks, relayed by srun
SRUN_TASK = re.compile(r"srun: error: (\S+): task (\d+): (.+)$")


def fingerprint():
    """What must be the same on every node: Python's and torch's versions."""
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "none"
    return "Python %d.%d.%d, torch %s" % (sys.version_info[:3] + (torch_version,))


def mismatch_message(host, mine, first_host, theirs):
    return ("node %s runs %s but node %s (rank 0) runs %s: every node must have the same "
            "environment (job_python and prelude must give the same software on each)"
            % (host, mine, first_host, theirs))


def tcp_store(group, lay):
    """Rank 0's TCPStore for a multi-node run; the --store argument of the other ranks."""
    import torch.distributed as dist

    ctx = group.ctx
    try:
        ifname, group.chosen_ifname = nodes.choose_interface(lay, 0)
        group.store = tcp_server(dist, lay.port, group.world, rank_io.timedelta(group))
    except nodes.NodesError as e:
        raise ctx.RunFailure(str(e))
    except (RuntimeError, OSError) as e:
        why = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
        if os.environ.get(nodes.PORT_ENV):
            raise ctx.RunFailure(
                "rank 0 could not open the rendezvous port %d (%s) on %s (%s): choose another "
                "port there" % (lay.port, nodes.PORT_ENV, lay.master, why))
        raise ctx.RunFailure(
            "rank 0 could not open the rendezvous port %d on %s (%s): another job on the node "
            "may hold it; set %s in the backend's env to a free port" % (
                lay.port, lay.master, why, nodes.PORT_ENV))
    group.store.set("env/0", fingerprint())
    group.store.set("where/0", json.dumps([platform.node(),
                                           os.environ.get("CUDA_VISIBLE_DEVICES", "")]))
    ctx.log("multi-node: %d nodes (%s), %d rank(s) each; rendezvous at %s:%d; network "
            "interface %s" % (len(lay.hosts), ", ".join(lay.hosts), lay.per_node, lay.master,
                              lay.port, ifname or "chosen by %s" % group.backend))
    tasks = nodes.tasks_per_node()
    if tasks is not None and tasks < lay.per_node:
        ctx.log("this job has %d task(s) per node but runs %d ranks on each (processes, or one "
                "per GPU): they share the CPUs SLURM gave the job; set the backend's "
                "ntasks_per_node to %d" % (tasks, lay.per_node, lay.per_node), "warning")
    elif tasks is not None and tasks > lay.per_node:
        ctx.log("this job has %d tasks per node but runs %d rank(s) on each (the trainer's "
                "processes, or one per GPU): the rest of the allocation is idle; set processes "
                "to %d, or ntasks_per_node to %d" % (tasks, lay.per_node, tasks, lay.per_node),
                "warning")
    return "tcp://%s:%d" % (lay.master, lay.port)


def tcp_server(dist, port, world, timeout):
    """Rank 0's TCPStore server, on every interface of its node. Not the libuv server where
    torch can choose: that one keeps a pipe pair open for the rest of the process."""
    try:
        return dist.TCPStore("0.0.0.0", port, world, True, timeout=timeout,
                             wait_for_workers=False, use_libuv=False)
    except TypeError:  # a torch without the choice
        return dist.TCPStore("0.0.0.0", port, world, True, timeout=timeout,
                             wait_for_workers=False)


def start_step(group, lay, python, spec_path, store_arg, base):
    """The srun step that runs the ranks of the other nodes."""
    argv = rank_io.rank_argv(python, spec_path, 0, group.world, group.backend, store_arg, 0,
                            os.path.join(base, "rank{rank}.error.json"), lay.per_node)
    i = argv.index("--rank")
    argv[i:i + 2] = ["--rank-offset", str(lay.per_node)]
    step = nodes.srun_argv(lay, argv)
    env = protocol.worker_env(os.environ, rank_io.CODE_ROOT)
    for var in group.chosen_ifname:  # this node's interface: each node chooses its own
        env.pop(var, None)
    try:
        with open(os.path.join(base, STEP_OUT), "wb") as out:  # this attempt's output only
            child = proc.spawn(step, new_session=False, env=env, stdin=subprocess.DEVNULL,
                               stdout=out, stderr=subprocess.STDOUT)
    except proc.SpawnError as e:
        raise group.ctx.RunFailure("%s could not start srun for the ranks of the other nodes "
                                   "(%s): a multi-node run needs SLURM's srun on the compute "
                                   "nodes' PATH" % (platform.node(), e.__cause__ or e))
    group.srun, group.srun_base = child, base
    group.children.append((lay.per_node, child, base))
    ctx = group.ctx
    ctx.log("started ranks %d to %d on %s with %s" % (
        lay.per_node, group.world - 1, ", ".join(lay.hosts[1:]), proc.quoted(step[:9])))


def report_nodes(group, lay):
    """The ``where`` event's nodes: every host and the GPUs each rank there uses."""
    seen = {}
    for rank in range(group.world):
        try:
            host, gpus = json.loads(group.store.get("where/%d" % rank).decode())
        except Exception:  # a rank that said nothing: named without its GPUs
            host, gpus = lay.hosts[rank // lay.per_node], ""
        seen.setdefault(host, [])
        if gpus and gpus not in seen[host]:
            seen[host].append(gpus)
    names = ["%s%s" % (h, " (GPUs %s)" % ",".join(g) if g else "") for h, g in seen.items()]
    text = ", ".join(names)
    for shown in range(len(names) - 1, 0, -1):  # whole names, then how many more
        if len(text) <= NODES_TEXT_MAX:
            break
        text = "%s and %d more" % (", ".join(names[:shown]), len(names) - shown)
    group.ctx.emitter.emit("where", nodes=text[:NODES_TEXT_MAX])


def step_sentence(group, child, code, base):
    """(sentence, secondary) for the srun step of the other nodes' ranks that ended badly.
    The cause comes first: a rank that failed of its own accord (its error file on the shared
    run directory, or its marked line in srun.out), else a rank srun says was killed, else a
    rank that said nothing while the others only lost their peers; a rank that only lost a
    peer is the last resort (secondary). The end of srun.out goes to the run's stderr."""
    lines = tail_lines(os.path.join(base, STEP_OUT))
    dump_output(group, lines)
    said = {}
    for rank in range(group.per_node, group.world):
        data = rank_io.read_error(rank_io.error_file(base, rank))
        if data:
            said[rank] = data
    for line in lines:
        if rank_io.ERROR_MARK in line:
            try:
                data = json.loads(line.split(rank_io.ERROR_MARK, 1)[1])
                said.setdefault(int(data["rank"]), data)
            except (ValueError, TypeError, KeyError):
                continue
    causes = [r for r in sorted(said) if not rank_io.is_secondary(said[r])]
    if causes:
        return rank_failed(group, causes[0], said[causes[0]]), False
    for line in lines:  # srun's own word on a task: "srun: error: pn2: task 1: Killed"
        m = SRUN_TASK.search(line)
        rank = group.per_node + int(m.group(2)) if m else None
        if m and rank not in said and "Killed" in m.group(3):
            return "rank %d of %d on node %s was killed (SIGKILL; out of memory, or stopped " \
                   "by hand)" % (rank, group.world, m.group(1)), False
    silent = [r for r in range(group.per_node, group.world) if r not in said]
    if said and silent:
        return "rank %d of %d on node %s ended without saying why (killed: out of memory, or " \
               "stopped by hand?) and the others lost it" % (
                   silent[0], group.world, host_of(group, silent[0])), False
    if said:
        first = min(said)
        return rank_failed(group, first, said[first]), True
    if any("No module named" in x and "potato" in x for x in lines):
        return ("the ranks on the other nodes could not import Potato's code from %s: remote_dir "
                "must be on storage that every compute node shares" % rank_io.CODE_ROOT), False
    first, last = group.per_node, group.world - 1
    word = next((x for x in reversed(lines) if x), "")
    return "the srun step of %s ended (exit %s)%s; its output is in the run's stderr" % (
        "rank %d" % first if first == last else "ranks %d to %d" % (first, last), code,
        ": " + word[-300:] if word else ""), False


def host_of(group, rank):
    lay = group.layout
    return lay.hosts[rank // lay.per_node] if lay is not None else "?"


def dump_output(group, lines=None):
    """The end of srun.out to the run's stderr, once (the job directory may not outlive the
    run: the agent sends the stderr's end to the server's run log)."""
    if group.srun_dumped or group.srun is None:
        return
    group.srun_dumped = True
    if lines is None:
        lines = tail_lines(os.path.join(group.srun_base, STEP_OUT))
    if lines:
        sys.stderr.write("%s\n-- above: the end of %s (the other nodes' ranks) --\n" % (
            "\n".join(lines[-15:]), STEP_OUT))
        sys.stderr.flush()


def tail_lines(path, size=8192):
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - size))
            return [x.decode("utf-8", "replace").strip() for x in f.read().splitlines()]
    except OSError:
        return []


def rank_failed(group, rank, data):
    """The sentence for rank ``rank`` of another node, from what it wrote (``data``)."""
    return "rank %d of %d on node %s failed: %s%s" % (
        rank, group.world, str(data.get("host") or "?")[:100], str(data["message"])[:400],
        rank_io.RANK_TRACEBACK if data.get("traceback", True) else "")
