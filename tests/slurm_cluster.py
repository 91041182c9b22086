"""A real multi-node SLURM cluster on this one machine, as root, for tests.

One ``slurmctld`` in the root namespaces plus one ``slurmd`` per node (``pn1``, ``pn2``, ...), each
node in namespaces of its own: network (a veth to a bridge this module creates), UTS (its own host
name), mount (its own ``/etc/hosts``, bind-mounted, naming every node and the controller; the
machine's ``/etc/hosts`` is never touched; its own ``/proc``) and PID (so ``ps`` on a node shows
that node's processes only, and killing the node's init ends every job process on it). munge is
shared (``tests.slurmd._munge``). No accounting database; files live in one directory. The
slurm.conf shares ``tests/slurmd.py``'s common lines (``slurmd.COMMON``).

API::

    available() -> (bool, reason)            # can it run here (root, binaries present)?
    start(d, nodes=2, cpus=1, max_nodes=None, timeout=90) -> Cluster
        d: a pathlib.Path (created if missing); waits until every node is idle; undoes what
        it started and raises RuntimeError (with the logs' tails) if they are not in time.
        max_nodes sets the partition's MaxNodes; EnforcePartLimits stays at its default (NO),
        so a job asking for more nodes PENDs (Reason=PartitionNodeLimit/PartitionConfig).

    Cluster.conf        path of slurm.conf (str); clients need SLURM_CONF=conf (see env())
    Cluster.nodes       node names, ["pn1", "pn2", ...]
    Cluster.addrs       {node: address}; Cluster.ctl_addr: the controller's (bridge) address
    Cluster.ifname      "eth0": every node's interface has this name inside its namespace
    Cluster.bridge      the bridge's name; Cluster.netns: {node: network namespace name}
    Cluster.env()       a copy of os.environ with SLURM_CONF
    Cluster.run_on(node, argv, **kw) -> subprocess.CompletedProcess
                        runs argv inside that node's namespaces (text, output captured unless
                        kw says otherwise; kw goes to subprocess.run)
    Cluster.scontrol(*args, check=True) -> CompletedProcess    scontrol with SLURM_CONF
    Cluster.set_down(node, reason)   scontrol update state=down
    Cluster.pids()      root-namespace pids started here (slurmctld, each node's unshare+init)
    Cluster.stop()      kills every slurmd/slurmctld (and job process) it started, deletes the
                        namespaces, veths and bridge; idempotent, never raises

Addresses: 10.213.N.0/24 with N random among those no interface or route of this machine uses
yet; the bridge (root namespace, the controller side) is .1, node i is .(i+1). Interface and
namespace names carry a random 4-hex suffix (bridge ``pbr<sfx>``, root-side veths
``pv<sfx><i>``, namespaces ``potato-<sfx>-<node>``), so two clusters started at once by two test
processes do not clash (node names repeat, but each cluster has its own slurm.conf and hosts file).
The controller is ``SlurmctldHost=<this machine's short host name>(<bridge address>)`` (slurmctld
checks its own host name against it; nodes resolve that name through their hosts file) on a free
port; every slurmd listens on 6818 in its own namespace. ``SlurmdParameters=config_overrides``
lets ``cpus`` exceed the machine's cores. Job processes are children of slurmd, so they run in
the node's namespaces: a batch script on pn1 reaches slurmctld and pn2 over the bridge.

What was seen here (gVisor, slurm 22.05): slurmd refuses to start under ``ip netns exec`` (that
remounts /sys without /sys/fs/cgroup); ``nsenter --net`` plus ``unshare`` works.
"""

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

from tests import leaks, slurmd
from tests.sshd import free_port

TOOLS = ("slurmctld", "slurmd", "slurmstepd", "sinfo", "scontrol", "srun", "munged", "nsenter",
         "unshare", "ip", "mount")

# pid 1 of a node's PID namespace: set up the mount and UTS namespaces, run slurmd in the
# foreground, reap whatever is reparented here (slurmstepd is), forward SIGTERM to slurmd and end
# when slurmd does (the kernel then kills every other process in the namespace).
_INIT = r"""
import os, signal, socket, subprocess, sys
hosts, name, conf = sys.argv[1:4]
subprocess.run(["mount", "--bind", hosts, "/etc/hosts"], check=True)
socket.sethostname(name)
pid = os.fork()
if pid == 0:
    os.execvp("slurmd", ["slurmd", "-D", "-N", name, "-f", conf])
signal.signal(signal.SIGTERM, lambda *a: os.kill(pid, signal.SIGTERM))
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    try:
        if os.wait()[0] == pid:
            break
    except ChildProcessError:
        break
"""


def _which(name):
    return shutil.which(name) or next(
        (p for p in ("/usr/sbin/" + name, "/sbin/" + name) if os.path.exists(p)), None)


def available():
    """(True, "") when a cluster can start here, else (False, why)."""
    if os.geteuid() != 0:
        return False, "needs root (network, mount and PID namespaces)"
    missing = [t for t in TOOLS if not _which(t)]
    if missing:
        return False, "missing: " + ", ".join(missing)
    return True, ""


def _ip(*args, check=True):
    r = subprocess.run(["ip"] + list(args), capture_output=True, text=True)
    if check and r.returncode:
        raise RuntimeError("ip %s: %s" % (" ".join(args), r.stderr.strip()))
    return r


def _free_subnet():
    used = _ip("-4", "-o", "addr").stdout + _ip("-4", "route").stdout
    taken = {int(n) for n in re.findall(r"\b10\.213\.(\d+)\.", used)}
    free = [n for n in range(1, 255) if n not in taken]
    if not free:
        raise RuntimeError("no free 10.213.N.0/24 subnet")
    return random.choice(free)


def _child_of(ppid, timeout=10):
    """The pid of ``ppid``'s (first) child, through /proc."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open("/proc/%s/stat" % name, "rb") as f:
                        stat = f.read()
                except OSError:
                    continue
                if int(stat[stat.rfind(b")") + 2:].split()[1]) == ppid:
                    return int(name)
        time.sleep(0.05)
    return None


def _kill(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _end(proc, pid=None, grace=10):
    """SIGTERM ``pid`` (default the Popen's own), SIGKILL after ``grace`` s, reap the Popen."""
    target = pid or proc.pid
    _kill(target, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        _kill(target, signal.SIGKILL)
        _kill(proc.pid, signal.SIGKILL)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass


class Cluster:
    ifname = "eth0"

    def __init__(self, d, sfx, net):
        self.dir = d
        self.conf = str(d / "slurm.conf")
        self.nodes = []
        self.addrs = {}
        self.netns = {}
        self.ctl_addr = "10.213.%d.1" % net
        self.bridge = "pbr" + sfx
        self._sfx = sfx
        self._net = net
        self._veths = []
        self._ctld = None  # Popen
        self._slurmd = {}  # node: (Popen of unshare, pid of the namespace's init)
        self._stopped = False

    def env(self):
        return dict(os.environ, SLURM_CONF=self.conf)

    def _nsenter(self, node):
        init = self._slurmd[node][1]
        return ["nsenter", "-t", str(init), "-n", "-u", "-m", "-p", "--"]

    def run_on(self, node, argv, **kw):
        """Run ``argv`` inside ``node``'s namespaces (network, UTS, mount, PID)."""
        kw.setdefault("env", self.env())
        if "stdout" not in kw and "stderr" not in kw:
            kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(self._nsenter(node) + list(argv), **kw)

    def scontrol(self, *args, check=True):
        return subprocess.run(["scontrol"] + list(args), capture_output=True, text=True,
                              env=self.env(), check=check, timeout=60)

    def set_down(self, node, reason):
        self.scontrol("update", "nodename=" + node, "state=down", "reason=" + reason)

    def pids(self):
        """Root-namespace pids of the processes started here (slurmctld, each node's init)."""
        out = [self._ctld.pid] if self._ctld else []
        for proc, init in self._slurmd.values():
            out += [proc.pid] + ([init] if init else [])
        return out

    def stop(self):
        """Kill everything started, delete namespaces, veths and bridge. Idempotent."""
        if self._stopped:
            return
        for node, (proc, init) in list(self._slurmd.items()):
            try:
                _end(proc, init)
            finally:
                if init:
                    _kill(init, signal.SIGKILL)  # ends the whole PID namespace
        if self._ctld:
            _end(self._ctld)
        for ns in self.netns.values():
            _ip("netns", "delete", ns, check=False)
        for veth in self._veths:
            if _ip("link", "show", veth, check=False).returncode == 0:
                _ip("link", "delete", veth, check=False)
        if _ip("link", "show", self.bridge, check=False).returncode == 0:
            _ip("link", "delete", self.bridge, check=False)
        deadline = time.time() + 10
        while any(leaks.alive(p) for p in self.pids()) and time.time() < deadline:
            time.sleep(0.1)
        self._stopped = True

    # -- start ------------------------------------------------------------------------------

    def _network(self, count):
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", self.ctl_addr + "/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(1, count + 1):
            node, ns = "pn%d" % i, "potato-%s-pn%d" % (self._sfx, i)
            veth, peer = "pv%s%d" % (self._sfx, i), "pp%s%d" % (self._sfx, i)
            self.nodes.append(node)
            self.addrs[node] = "10.213.%d.%d" % (self._net, i + 1)
            _ip("netns", "add", ns)
            self.netns[node] = ns
            _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            self._veths.append(veth)
            _ip("link", "set", peer, "netns", ns)
            _ip("link", "set", veth, "master", self.bridge, "up")
            _ip("-n", ns, "link", "set", peer, "name", self.ifname)
            _ip("-n", ns, "addr", "add", self.addrs[node] + "/24", "dev", self.ifname)
            _ip("-n", ns, "link", "set", self.ifname, "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def _write(self, cpus, max_nodes, ctl_host):
        d = self.dir
        for sub in ("state", "log"):
            (d / sub).mkdir(exist_ok=True)
        for node in self.nodes:
            (d / "spool" / node).mkdir(parents=True, exist_ok=True)
        (d / "hosts").write_text(
            "127.0.0.1 localhost\n%s %s\n" % (self.ctl_addr, ctl_host) +
            "".join("%s %s\n" % (self.addrs[n], n) for n in self.nodes))
        nodes = ",".join(self.nodes)
        limit = " MaxNodes=%d" % max_nodes if max_nodes else ""
        (d / "slurm.conf").write_text(f"""\
ClusterName=potato-two
SlurmctldHost={ctl_host}({self.ctl_addr})
SlurmctldPort={free_port()}
SlurmdPort=6818
SlurmdParameters=config_overrides
{slurmd.COMMON}StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/spool/%n/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
MinJobAge=300
""" + "".join(f"NodeName={n} NodeAddr={self.addrs[n]} CPUs={cpus} State=UNKNOWN\n"
              for n in self.nodes) +
            f"PartitionName=debug Nodes={nodes} Default=YES MaxTime=INFINITE State=UP{limit}\n")

    def _spawn(self, argv, log):
        with open(log, "ab") as out:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, env=self.env(),
                                    start_new_session=True)

    def _logs(self):
        out = []
        for f in sorted((self.dir / "log").glob("*")):
            out.append("== %s\n%s" % (f.name, f.read_text(errors="replace")[-1500:]))
        return "\n".join(out)

    def _wait_idle(self, timeout):
        deadline = time.time() + timeout
        states = ""
        while time.time() < deadline:
            r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True,
                               text=True, env=self.env())
            states = r.stdout.strip()
            if r.returncode == 0 and sorted(states.splitlines()) == sorted(
                    "%s idle" % n for n in self.nodes):
                return
            time.sleep(0.3)
        raise RuntimeError("SLURM nodes not idle (%r):\n%s" % (states, self._logs()))


def start(d, nodes=2, cpus=1, max_nodes=None, timeout=90):
    """Start munge (if needed), slurmctld and ``nodes`` slurmds, files in ``d``; wait until
    every node is idle. On failure everything already started is undone."""
    ok, why = available()
    if not ok:
        raise RuntimeError(why)
    slurmd._munge()
    c = Cluster(d, "%04x" % random.getrandbits(16), _free_subnet())
    d.mkdir(parents=True, exist_ok=True)
    init = d / "node_init.py"
    init.write_text(_INIT)
    try:
        c._network(nodes)
        c._write(cpus, max_nodes, socket.gethostname().split(".")[0])
        c._ctld = c._spawn(["slurmctld", "-D", "-f", c.conf], d / "log" / "slurmctld.out")
        for node in c.nodes:
            proc = c._spawn(
                ["nsenter", "--net=/run/netns/" + c.netns[node], "--",
                 "unshare", "--mount", "--uts", "--pid", "--fork", "--mount-proc",
                 "--kill-child", "--", sys.executable, str(init), str(d / "hosts"), node, c.conf],
                d / "log" / ("slurmd-%s.out" % node))
            c._slurmd[node] = (proc, None)
            c._slurmd[node] = (proc, _child_of(proc.pid))
            if not c._slurmd[node][1]:
                raise RuntimeError("node %s did not start:\n%s" % (node, c._logs()))
        c._wait_idle(timeout)
    except BaseException:
        c.stop()
        raise
    return c
