"""The slurm backend's ``nodes: 2`` against a real two-node SLURM (tests/slurm_cluster.py: one
slurmctld, two slurmd each in its own network, UTS, mount and PID namespaces, on a bridge the
fixture makes), reached through the real sshd on loopback: a tiny BERT trained data-parallel
over both nodes with gloo on the CPU, compared with a one-node run on the same data and seed;
Cancel and a node set down mid-run end every rank on every node; a job that asks more nodes
than the partition has is refused before it queues."""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from potato.commands.cli import main
from tests import slurm_cluster
from tests import sshd as sshd_mod
from tests.helpers import FILLER, KEY, NEG, PLUGINS, POS, ROOT, Client, start_run, wait_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]
H = {"X-API-Key": KEY}
PARAMS = dict(epochs=6, batch_size=8, max_length=16, learning_rate=1e-2, bf16="false",
              lora=False, processes=0)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    ok, why = slurm_cluster.available()
    if not ok or not os.path.exists(sshd_mod.SSHD):
        if os.environ.get("CI"):
            pytest.fail("the two-node SLURM cluster cannot run: %s (.ci/run installs what it "
                        "needs)" % (why or "no sshd"))
        pytest.skip(why or "openssh-server not installed")
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="needs the train-text extra (torch)")
    d = tmp_path_factory.mktemp("nodes")
    (d / "sshd").mkdir()
    sshd_mod.start(d / "sshd")
    cluster = None
    os.makedirs("/var/cache/potato-tests", exist_ok=True)
    shared = tempfile.mkdtemp(prefix="nodes ", dir="/var/cache/potato-tests")
    try:
        cluster = slurm_cluster.start(d / "slurm", nodes=2, cpus=2)
        yield d, cluster, shared
    finally:
        if cluster is not None:
            cluster.stop()
        sshd_mod.stop(d / "sshd")
        shutil.rmtree(shared, ignore_errors=True)


@pytest.fixture
def login(nodes, monkeypatch):
    d, cluster, shared = nodes
    monkeypatch.setenv("PATH", str(d / "sshd" / "bin") + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("SLURM_CONF", cluster.conf)
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    return cluster, shared


def project(tmp_path, cluster, shared, n=240, **keys):
    """``n`` items whose one telling word says their sentiment, five in six labelled, and a
    slurm backend on the two-node cluster."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    items, labels = [], []
    for k in range(n):
        words = rng.sample(FILLER, 3) + [rng.choice(POS if k % 2 == 0 else NEG)] + \
            rng.sample(FILLER, 2)
        items.append({"id": "i%d" % k, "text": " ".join(words)})
        if k < n * 5 // 6:
            labels.append({"id": "i%d" % k, "sentiment": "positive" if k % 2 == 0 else
                           "negative"})
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    backend = {"type": "slurm", "host": "potato-real", "remote_dir": shared,
               "partition": "debug", "time": "00:10:00", "poll_interval_s": 1,
               "job_python": "python3", "heartbeat_timeout_s": 60,
               "env": {"SLURM_CONF": cluster.conf, "POTATO_TRAINER_PLUGINS": PLUGINS,
                       "PYTHONPATH": ROOT}}
    backend.update(keys)
    cfg = tmp_path / "config.yaml"
    cfg.write_text("annotation_task_name: Nodes\ndata_files: [items.jsonl]\n"
                   "admin_api_key: %s\nannotation_schemes:\n  - annotation_type: radio\n"
                   "    name: sentiment\n    labels: [positive, negative]\nmodel_training:\n"
                   "  grace_seconds: 2\n  backends:\n    cluster:\n%s" % (KEY, "".join(
                       "      %s: %s\n" % (k, json.dumps(v)) for k, v in backend.items())))
    assert main(["annotations", "import", str(cfg), str(tmp_path / "labels.jsonl"),
                 "--annotator", "gold"]) == 0
    return str(cfg)


def hf_run(c, tiny_bert, timeout=400, **params):
    """A finished hf-text-classification run on the cluster backend, with PARAMS and
    ``params``."""
    return wait_run(c, hf_start(c, tiny_bert, **params), timeout=timeout)


def hf_start(c, tiny_bert, **params):
    return start_run(c, backend="cluster", schemas=["sentiment"],
                     trainer="hf-text-classification",
                     params=dict(PARAMS, model=tiny_bert, **params))


def run_with(c, cluster, tiny_bert, change, undo):
    """A run while pn2 alone has ``change`` (a command run in its namespaces), undone after."""
    r = cluster.run_on("pn2", change)
    assert r.returncode == 0, r.stderr
    try:
        return hf_run(c, tiny_bert)
    finally:
        cluster.run_on("pn2", undo)


def training_on_both(c, cluster, tiny_bert):
    """A long run, once its ranks train on both nodes: its id."""
    run_id = hf_start(c, tiny_bert, epochs=100)
    deadline = time.time() + 300
    while not all(ranks_on(cluster).values()) or "multi-node:" not in log_of(c, run_id):
        assert time.time() < deadline, (ranks_on(cluster), log_of(c, run_id)[-2000:])
        assert wait_run(c, run_id, until=("running", "success", "error", "cancelled"))[
            "status"] in ("running", "queued")
        time.sleep(0.5)
    return run_id


def log_of(c, run_id):
    return c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text


def ranks_on(cluster):
    """{node: command lines of Potato's worker and rank processes there}."""
    out = {}
    for node in cluster.nodes:
        r = cluster.run_on(node, ["ps", "-eo", "args"])
        out[node] = [line for line in r.stdout.splitlines()
                     if "potato.training.remote.rank" in line or "potato.training.worker" in line]
    return out


def wait_no_ranks(cluster, timeout=60):
    deadline = time.time() + timeout
    while any(ranks_on(cluster).values()) and time.time() < deadline:
        time.sleep(0.5)
    return ranks_on(cluster)


def test_two_nodes_train_as_one_node_does(tmp_path, serve, login, tiny_bert):
    cluster, shared = login
    _, url = serve(project(tmp_path / "one", cluster, shared))
    c = Client(url)
    one = hf_run(c, tiny_bert)
    assert one["status"] == "success", (one["error"], log_of(c, one["run_id"])[-3000:])

    _, url = serve(project(tmp_path / "two", cluster, shared, nodes=2))
    c = Client(url)
    run = hf_run(c, tiny_bert)
    log = log_of(c, run["run_id"])
    assert run["status"] == "success", (run["error"], log[-4000:])
    job = log.split("Submitted SLURM job ")[1].split()[0]
    assert "--nodes=2" in log.split("Submitted SLURM job ")[1].splitlines()[0]
    assert "data-parallel: 2 processes (gloo backend)" in log
    assert "multi-node: 2 nodes (pn1, pn2), 1 rank(s) each" in log
    assert "network interface %s" % cluster.ifname in log
    assert run["ran_on"] == "cluster (slurm): SLURM job %s on nodes pn1, pn2, device cpu" % job, \
        run["ran_on"]
    # The same global batches, split over two nodes: as one node, up to the rounding of two
    # half-batch means and each rank's own dropout (test_hf_parallel's tolerance).
    for key, close in (("sentiment.train_loss", 0.1), ("sentiment.val_accuracy", 0.07)):
        assert abs(run["metrics"][key] - one["metrics"][key]) <= close, (run["metrics"],
                                                                        one["metrics"])
    assert run["holdout"]["n"] == one["holdout"]["n"] > 0
    assert abs(run["holdout"]["accuracy"] - one["holdout"]["accuracy"]) <= 0.1
    assert run["metrics"]["predictions"] == one["metrics"]["predictions"] > 0  # rank 0 alone
    assert wait_no_ranks(cluster, 30) == {n: [] for n in cluster.nodes}


def test_cancel_ends_every_rank_on_every_node(tmp_path, serve, login, tiny_bert):
    cluster, shared = login
    _, url = serve(project(tmp_path, cluster, shared, nodes=2))
    c = Client(url)
    run_id = training_on_both(c, cluster, tiny_bert)
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    run = wait_run(c, run_id, timeout=120)
    assert run["status"] == "cancelled", (run, log_of(c, run_id)[-2000:])
    assert wait_no_ranks(cluster) == {n: [] for n in cluster.nodes}
    r = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=cluster.env())
    assert r.stdout.strip() == ""


def test_a_node_set_down_ends_the_run_on_every_node(tmp_path, serve, login, tiny_bert):
    cluster, shared = login
    _, url = serve(project(tmp_path, cluster, shared, nodes=2))
    c = Client(url)
    run_id = training_on_both(c, cluster, tiny_bert)
    try:
        cluster.set_down("pn2", "potato test")
        run = wait_run(c, run_id, timeout=180)
        assert run["status"] == "error", run
        assert "its node failed" in run["error"], run["error"]
        assert wait_no_ranks(cluster) == {n: [] for n in cluster.nodes}
        # not requeued: the job is gone, not waiting to train again
        r = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=cluster.env())
        assert r.stdout.strip() == ""
    finally:
        cluster.scontrol("update", "nodename=pn2", "state=resume", check=False)
        deadline = time.time() + 60
        while time.time() < deadline:
            r = cluster.scontrol("show", "node", "pn2", check=False)
            if "State=IDLE" in r.stdout:
                break
            time.sleep(0.5)


def test_more_nodes_than_the_partition_has_is_refused_before_it_queues(tmp_path, serve, login):
    cluster, shared = login
    _, url = serve(project(tmp_path, cluster, shared, nodes=3))
    c = Client(url)
    run = wait_run(c, start_run(c, backend="cluster", schemas=["sentiment"],
                                trainer="text-naive-bayes"), timeout=120)
    assert run["status"] == "error"
    assert "nodes is 3 but partition debug has 2 nodes: the job could never start. Lower " \
           "nodes, or choose a larger partition." in run["error"], run["error"]
    assert "Submitted SLURM job" not in log_of(c, run["run_id"])


def test_the_time_limit_ends_every_rank_on_every_node(tmp_path, serve, login, tiny_bert):
    """SLURM's --time has one-minute steps and a ~30 s sweep: this takes about two minutes."""
    cluster, shared = login
    _, url = serve(project(tmp_path, cluster, shared, n=2400, nodes=2, time="1",
                           poll_interval_s=2))
    c = Client(url)
    run_id = hf_start(c, tiny_bert, epochs=100)
    run = wait_run(c, run_id, timeout=300)
    assert run["status"] == "error", run
    assert "ended before the worker finished: it reached its time limit" in run["error"], \
        run["error"]
    assert "multi-node: 2 nodes" in log_of(c, run_id)  # it was training on both
    assert wait_no_ranks(cluster) == {n: [] for n in cluster.nodes}


def _rename(cluster, node, old, new):
    for argv in (["ip", "link", "set", old, "down"], ["ip", "link", "set", old, "name", new],
                 ["ip", "link", "set", new, "up"]):
        r = cluster.run_on(node, argv)
        assert r.returncode == 0, (argv, r.stderr)


def test_each_node_uses_its_own_interface_and_ranks_per_node_need_no_ntasks(tmp_path, serve,
                                                                             login, tiny_bert):
    """pn2's interface is named otherwise than pn1's (mixed hardware), and processes: 2 asks
    two ranks of each node although the job has one task per node."""
    cluster, shared = login
    _, url = serve(project(tmp_path, cluster, shared, nodes=2))
    c = Client(url)
    _rename(cluster, "pn2", cluster.ifname, "eth7")
    try:
        run = hf_run(c, tiny_bert, processes=2)
    finally:
        _rename(cluster, "pn2", "eth7", cluster.ifname)
    log = log_of(c, run["run_id"])
    assert run["status"] == "success", (run["error"], log[-3000:])
    assert "data-parallel: 4 processes (gloo backend)" in log
    assert "multi-node: 2 nodes (pn1, pn2), 2 rank(s) each" in log
    assert "this job has 1 task(s) per node but runs 2 ranks on each" in log
    assert wait_no_ranks(cluster, 30) == {n: [] for n in cluster.nodes}


def test_a_rank_killed_on_the_other_node_is_named(tmp_path, serve, login, tiny_bert):
    """Two ranks a node: rank 3 (pn2's second) is killed; rank 2 beside it and rank 1 on pn1
    only lose their peer, and must not be blamed."""
    cluster, shared = login
    env = {"SLURM_CONF": cluster.conf, "POTATO_TRAINER_PLUGINS": PLUGINS, "PYTHONPATH": ROOT,
           "POTATO_TEST_RANK_FAULT": "3:3:kill"}
    _, url = serve(project(tmp_path, cluster, shared, nodes=2, env=env))
    c = Client(url)
    run = hf_run(c, tiny_bert, epochs=50, processes=2)
    assert run["status"] == "error", run
    assert run["error"] in (
        "rank 3 of 4 on node pn2 was killed (SIGKILL; out of memory, or stopped by hand)",
        "rank 3 of 4 on node pn2 ended without saying why (killed: out of memory, or stopped "
        "by hand?) and the others lost it"), run["error"]
    log = log_of(c, run["run_id"])  # the other nodes' last words reach the run's log
    assert "worker stderr (last lines, on " in log and "the end of srun.out" in log, log[-3000:]
    assert wait_no_ranks(cluster) == {n: [] for n in cluster.nodes}


def test_a_node_that_does_not_share_the_run_directory_says_so(tmp_path, serve, login,
                                                              tiny_bert):
    cluster, shared = login
    _, url = serve(project(tmp_path, cluster, shared, nodes=2))
    c = Client(url)
    # pn2 alone sees an empty directory where remote_dir is (its own mount namespace)
    run = run_with(c, cluster, tiny_bert, ["mount", "-t", "tmpfs", "tmpfs", shared],
                   ["umount", shared])
    assert run["status"] == "error", run
    assert run["error"].startswith(
        "rank 1 of 2 on node pn2 failed: node pn2 does not see the run's directory %s/jobs/"
        % shared), run["error"]
    assert "remote_dir must be on storage that every compute node shares" in run["error"]
    assert "traceback" not in run["error"]
    assert wait_no_ranks(cluster) == {n: [] for n in cluster.nodes}


def test_nodes_with_different_software_fail_before_training(tmp_path, serve, login, tiny_bert):
    import torch

    cluster, shared = login
    _, url = serve(project(tmp_path, cluster, shared, nodes=2))
    c = Client(url)
    real = os.path.join(os.path.dirname(torch.__file__), "version.py")
    other = tmp_path / "version.py"
    other.write_text(open(real).read() + "\n__version__ = '9.9.9'\n")
    # pn2's torch says 9.9.9
    run = run_with(c, cluster, tiny_bert, ["mount", "--bind", str(other), real],
                   ["umount", real])
    assert run["status"] == "error", run
    assert run["error"].startswith(
        "rank 1 of 2 on node pn2 failed: node pn2 runs Python %d.%d.%d, torch 9.9.9 but node pn1 "
        "(rank 0) runs Python %d.%d.%d, torch %s: every node must have the same environment" % (
            sys.version_info[:3] + sys.version_info[:3] + (torch.__version__,))), run["error"]
    assert "traceback" not in run["error"]
    assert wait_no_ranks(cluster) == {n: [] for n in cluster.nodes}
