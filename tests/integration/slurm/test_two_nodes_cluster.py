"""The two-node SLURM fixture itself (tests/slurm_cluster.py): both nodes come up idle, a job
spans both, its tasks on two nodes reach each other over the fixture's bridge (plain TCP, and a
gloo all-reduce when torch is installed), and stop() leaves no process, namespace or link."""

import importlib.util
import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests import slurm_cluster
from tests.leaks import descendants, processes

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _need():
    ok, why = slurm_cluster.available()
    if not ok:
        if os.environ.get("CI"):
            pytest.fail("two-node SLURM fixture cannot run: %s (.ci/run installs slurmctld, "
                        "slurmd, slurm-client, munge, iproute2)" % why)
        pytest.skip(why)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    _need()
    c = slurm_cluster.start(tmp_path_factory.mktemp("two-nodes"))
    try:
        yield c
    finally:
        c.stop()


def batch(c, tmp_path, script, timeout=180):
    """Run a 2-node batch script to its end; returns (final JobState, output). Polls scontrol
    itself: ``sbatch --wait`` polls at growing intervals (10 s for a job of 1 s)."""
    (tmp_path / "job.sh").write_text("#!/bin/sh\n" + textwrap.dedent(script))
    out = tmp_path / "job.out"
    job = subprocess.run(["sbatch", "--parsable", "--nodes=2", "--output=%s" % out,
                          "--chdir=%s" % tmp_path, str(tmp_path / "job.sh")],
                         capture_output=True, text=True, env=c.env(), check=True).stdout.strip()
    deadline = time.time() + timeout
    state = "?"
    while time.time() < deadline:
        shown = c.scontrol("show", "job", "-o", job).stdout
        state = shown.split("JobState=")[1].split()[0]
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            break
        time.sleep(0.2)
    else:
        subprocess.run(["scancel", job], env=c.env())
    return state, out.read_text() if out.exists() else ""


def test_both_nodes_come_up_idle(two):
    r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T %P"], capture_output=True, text=True,
                       env=two.env(), check=True)
    assert sorted(r.stdout.split("\n")[:-1]) == ["pn1 idle debug*", "pn2 idle debug*"]
    assert two.nodes == ["pn1", "pn2"]


def test_srun_runs_on_both_nodes(two):
    r = subprocess.run(["srun", "-N2", "hostname"], capture_output=True, text=True,
                       env=two.env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["pn1", "pn2"]
    # each node sees itself under its own name and only its own processes
    r = two.run_on("pn2", ["sh", "-c", "hostname; ps -e -o comm="])
    assert r.stdout.split()[0] == "pn2" and "slurmd" in r.stdout.split()
    assert "slurmctld" not in r.stdout


TCP = """\
import os, socket, subprocess, time
rank = int(os.environ["SLURM_PROCID"])
first = subprocess.run(["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]],
                       capture_output=True, text=True, check=True).stdout.split()[0]
me = socket.gethostname()
if rank == 0:
    server = socket.create_server(("0.0.0.0", 29400))
    server.settimeout(60)
    conn, peer = server.accept()
    print("rank0 on %s got %r from %s" % (me, conn.recv(100).decode(), peer[0]), flush=True)
else:
    addr = socket.gethostbyname(first)
    deadline = time.time() + 60
    while True:
        try:
            conn = socket.create_connection((addr, 29400), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    conn.sendall(("hello from " + me).encode())
    print("rank1 on %s reached %s at %s" % (me, first, addr), flush=True)
"""


def test_batch_job_tasks_talk_across_nodes(two, tmp_path):
    (tmp_path / "tcp.py").write_text(TCP)
    state, out = batch(two, tmp_path, f"""\
        echo "batch on $(hostname) nodes $SLURM_JOB_NODELIST"
        srun --ntasks-per-node=1 {sys.executable} {tmp_path / 'tcp.py'}
        """)
    assert state == "COMPLETED", out
    assert "batch on pn1 nodes pn[1-2]" in out
    assert "rank1 on pn2 reached pn1 at %s" % two.addrs["pn1"] in out
    assert "rank0 on pn1 got 'hello from pn2' from %s" % two.addrs["pn2"] in out


GLOO = """\
import os, torch, torch.distributed as dist, subprocess, socket
first = subprocess.run(["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]],
                       capture_output=True, text=True, check=True).stdout.split()[0]
rank = int(os.environ["SLURM_PROCID"])
store = dist.TCPStore(socket.gethostbyname(first), 29500, 2, rank == 0)
dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print("rank %d on %s sum %g" % (rank, socket.gethostname(), t.item()), flush=True)
dist.destroy_process_group()
"""


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_gloo_all_reduce_across_nodes(two, tmp_path):
    (tmp_path / "gloo.py").write_text(GLOO)
    state, out = batch(two, tmp_path, f"""\
        export GLOO_SOCKET_IFNAME={two.ifname}
        srun --ntasks-per-node=1 {sys.executable} {tmp_path / 'gloo.py'}
        """, timeout=300)
    assert state == "COMPLETED", out
    assert "rank 0 on pn1 sum 3" in out and "rank 1 on pn2 sum 3" in out, out


def test_stop_leaves_nothing(tmp_path, two):
    """A second cluster (three nodes, MaxNodes=2) at the same time as the module's; stopped with
    a job running on two of its nodes and one pending."""
    before = set(descendants())
    c = slurm_cluster.start(tmp_path / "second", nodes=3, max_nodes=2)
    try:
        assert c.nodes == ["pn1", "pn2", "pn3"]
        assert c.bridge != two.bridge and c.ctl_addr != two.ctl_addr
        assert set(c.netns.values()).isdisjoint(two.netns.values())
        assert "MaxNodes=2 " in c.scontrol("show", "partition", "debug").stdout

        def sbatch(*args):
            return subprocess.run(["sbatch", "--parsable", "--output=/dev/null"] + list(args),
                                  capture_output=True, text=True, env=c.env(), check=True,
                                  cwd=str(tmp_path)).stdout.strip()

        too_big = sbatch("--nodes=3", "--wrap", "hostname")
        job = sbatch("--nodes=2", "--wrap", "srun sleep 300")
        for _ in range(300):
            if "sleep 300" in c.run_on("pn2", ["ps", "-e", "-o", "args="]).stdout:
                break
            time.sleep(0.1)
        else:
            pytest.fail("job %s never ran on pn2" % job)
        assert "sleep" not in c.run_on("pn3", ["ps", "-e", "-o", "args="]).stdout
        # EnforcePartLimits is left at its default (NO): a job over MaxNodes waits, not refused
        shown = c.scontrol("show", "job", "-o", too_big).stdout
        assert "JobState=PENDING Reason=Partition" in shown, shown  # NodeLimit or Config
        pids = c.pids()
        started = [p for p in descendants() if p not in before]
        assert processes(str(c.dir)) and processes("sleep 300") and set(pids) <= set(started)
    finally:
        c.stop()
    c.stop()  # idempotent
    assert [p for p in descendants() if p not in before] == []
    assert not processes(str(c.dir)) and not processes("sleep 300")
    assert not [p for p in started if os.path.exists("/proc/%d/stat" % p)]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [ns for ns in c.netns.values() if ns in listed]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert c.bridge not in links and not [v for v in c._veths if v in links]
    # the module's cluster is untouched
    r = subprocess.run(["srun", "-N2", "hostname"], capture_output=True, text=True,
                       env=two.env(), timeout=60)
    assert sorted(r.stdout.split()) == ["pn1", "pn2"], r.stderr
