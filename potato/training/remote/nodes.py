"""A data-parallel run across the nodes of one SLURM job (standard library, Python 3.8; it runs
on compute nodes, and torch is imported by its callers).

The job script (slurm_job.job_script) asks sbatch for ``--nodes=N`` and runs the worker on the
job's first node, as for one node, with ``POTATO_NODES=N`` in its environment. The worker is
rank 0: it starts the other ranks of its own node as children (launch.py), and the ranks of the
other nodes with one ``srun`` step (``--relative=1``: every node but the first, ``SLURM_PROCID``
giving each its place). Everything the ranks need to meet is a fact of the job:

- the hosts: ``scontrol show hostnames $SLURM_JOB_NODELIST``, the first of them rank 0's;
- the port of the rendezvous (a torch TCPStore on rank 0's node): derived from the job id, or
  ``POTATO_DDP_PORT`` when the cluster's firewall allows only some ports;
- the network interface gloo and NCCL use: the one whose address routes to the other nodes
  (``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME``, unless the backend's env sets them).

Rank 0 alone talks to the server. Every rank compares its Python and torch with rank 0's before
training (launch.py), so nodes with different environments fail at once with both versions
named.
"""

import os
import platform
import socket
import struct
import subprocess

NODES_ENV = "POTATO_NODES"  # set by job.sh: the nodes the job asked for
PORT_ENV = "POTATO_DDP_PORT"  # the rendezvous port, when a firewall decides it
PORT_BASE = 20000
PORT_SPAN = 12000  # ports 20000..31999 by job id: below Linux's ephemeral ports (32768 on)
IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
SIOCGIFADDR = 0x8915


class NodesError(Exception):
    """A multi-node run cannot start: the message says why and what to do."""


def requested(environ=None):
    """The nodes job.sh says the job has (1 outside such a job, or for a value that is not a
    whole number)."""
    env = os.environ if environ is None else environ
    return _count(env.get(NODES_ENV)) or 1


def _count(value):
    """A whole number above 0 from text (ASCII digits only), else None."""
    text = str(value if value is not None else "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) < 1:
        return None
    return int(text)


def port_for(job_id, environ=None):
    """The rendezvous port of job ``job_id``: POTATO_DDP_PORT, else one derived from the id
    (two jobs that share a first node get different ports unless their ids are PORT_SPAN
    apart)."""
    env = os.environ if environ is None else environ
    text = str(env.get(PORT_ENV) or "").strip()
    if text:
        if not 1024 <= (_count(text) or 0) <= 65535:
            raise NodesError("%s is %r; give a port between 1024 and 65535, or leave it unset "
                             "(the port is then derived from the job id)" % (PORT_ENV, text))
        return int(text)
    digits = "".join(ch for ch in str(job_id) if ch in "0123456789") or "0"
    return PORT_BASE + int(digits) % PORT_SPAN


def hostnames(nodelist, run=None):
    """The host names of a SLURM node list (``pn[1-2]``), in order, as ``scontrol show
    hostnames`` expands it."""
    run = run or _run
    code, out, err = run(["scontrol", "show", "hostnames", nodelist])
    names = [line.strip() for line in out.splitlines() if line.strip()]
    if code != 0 or not names:
        raise NodesError("scontrol show hostnames %s failed on %s (%s): a multi-node run needs "
                         "SLURM's scontrol on the compute nodes' PATH" % (
                             nodelist, platform.node(), (err or out).strip()[-200:] or
                             "exit %s" % code))
    return names


def _run(argv):
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, "", str(e)
    return r.returncode, r.stdout, r.stderr


class Layout:
    """Where the ranks of a multi-node run are: ``hosts`` (rank 0's first), ``per_node`` ranks
    on each, the job's id and the rendezvous port."""

    def __init__(self, hosts, per_node, job_id, port):
        self.hosts, self.per_node, self.job_id, self.port = list(hosts), per_node, job_id, port

    @property
    def world(self):
        return len(self.hosts) * self.per_node

    @property
    def master(self):
        return self.hosts[0]


def layout(per_node, environ=None, run=None):
    """The Layout of this job (run on its first node), or NodesError."""
    env = os.environ if environ is None else environ
    nodes = requested(env)
    job_id, nodelist = env.get("SLURM_JOB_ID"), env.get("SLURM_JOB_NODELIST")
    if not job_id or not nodelist:
        raise NodesError("%s is %d but this is not a SLURM job (no SLURM_JOB_ID or "
                         "SLURM_JOB_NODELIST): multi-node runs run on a slurm backend with "
                         "nodes set" % (NODES_ENV, nodes))
    hosts = hostnames(nodelist, run)
    if len(hosts) != nodes:
        raise NodesError("the job asked for %d nodes but SLURM gave it %d (%s); check the "
                         "backend's nodes against the partition" % (nodes, len(hosts),
                                                                    ", ".join(hosts)))
    return Layout(hosts, per_node, job_id, port_for(job_id, env))


def tasks_per_node(environ=None):
    """The tasks per node SLURM gave the job (SLURM_TASKS_PER_NODE: "2(x2)" or "2,1"; the
    fewest), or None when it does not say."""
    env = os.environ if environ is None else environ
    counts = [_count(part.split("(")[0]) for part in
              str(env.get("SLURM_TASKS_PER_NODE") or "").split(",")]
    return min(counts) if counts and None not in counts else None


def srun_argv(lay, rank_argv):
    """The srun step that starts the ranks of every node but the first (pure): ``per_node``
    tasks on each, one rank each (``rank_argv`` is rank.py's command line without --rank;
    each task's rank is ``per_node + SLURM_PROCID``). --kill-on-bad-exit ends every rank of
    the step when one fails; the step never waits for a rank that is gone (--wait). The step
    gets the job's GPUs on its nodes, as SLURM gives steps by default; --overcommit lets it
    start a rank per GPU where the job has fewer tasks per node (as the first node's ranks,
    which the worker starts itself)."""
    others = len(lay.hosts) - 1
    argv = ["srun", "--nodes=%d" % others, "--ntasks=%d" % (others * lay.per_node),
            "--ntasks-per-node=%d" % lay.per_node, "--relative=1", "--kill-on-bad-exit=1",
            "--wait=60", "--overcommit", "--job-name=potato-ranks", "--export=ALL"]
    return argv + list(rank_argv)


def _address(host):
    try:
        return socket.gethostbyname(host)
    except OSError as e:
        raise NodesError("%s cannot resolve the host name %s of another node of the job (%s); "
                         "the nodes must know each other's names" % (platform.node(), host, e))


def route_source(host, port):
    """The address of this node that packets to ``host`` leave from (no packet is sent)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((_address(host), port))
        return s.getsockname()[0]
    except OSError as e:
        raise NodesError("%s has no route to %s (%s)" % (platform.node(), host, e))
    finally:
        s.close()


def route_device(host):
    """The interface the kernel routes ``host`` through (``ip -o route get``), or None where
    ``ip`` cannot say: it also finds an interface whose address is not its first."""
    code, out, _ = _run(["ip", "-o", "route", "get", _address(host)])
    words = out.split() if code == 0 else []
    return words[words.index("dev") + 1] if "dev" in words[:-1] else None


def interface_of(address):
    """The name of this host's network interface whose first IPv4 address is ``address``
    (Linux), or None."""
    try:
        import fcntl
    except ImportError:  # not Linux: gloo and NCCL choose for themselves
        return None
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s.fileno(), SIOCGIFADDR,
                                  struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            if socket.inet_ntoa(raw[20:24]) == address:
                return name
    finally:
        s.close()
    return None


def choose_interface(lay, rank, environ=None):
    """Set GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME (those not already set) to the interface
    that routes to the other nodes: rank 0's node looks towards the second host, the others
    towards the first. Returns (the name in use, the variables this call set): what it set is
    this node's, and must not be handed to another node (whose interface may be named
    otherwise)."""
    env = os.environ if environ is None else environ
    if all(env.get(v) for v in IFNAME_VARS):
        return env[IFNAME_VARS[0]], []
    peer = lay.hosts[1] if rank < lay.per_node else lay.hosts[0]
    source = route_source(peer, lay.port)
    if source.startswith("127."):
        raise NodesError("%s reaches node %s through the loopback interface (%s resolves to "
                         "%s there): each node's /etc/hosts (or DNS) must give the other nodes "
                         "their network addresses" % (platform.node(), peer, peer,
                                                      _address(peer)))
    name = route_device(peer) or interface_of(source)
    chosen = [v for v in IFNAME_VARS if not env.get(v)] if name else []
    for var in chosen:
        env[var] = name
    return env.get(IFNAME_VARS[0]) or name, chosen
