"""A data-parallel run across the nodes of a SLURM job, on one machine: the worker is rank 0
of a job that says it has two nodes (POTATO_NODES, SLURM_JOB_ID, SLURM_JOB_NODELIST), and a
stand-in srun (tests/fakes/nodes) starts the other node's rank, which meets rank 0 through the
TCP rendezvous as on a cluster. The run must train as one process does, report the nodes, and
end with the other node's own message when a rank there fails. The real two-node cluster is in
tests/integration/slurm/test_slurm_nodes_real.py."""

import json
import os

import pytest

if os.environ.get("CI"):  # CI installs the train-text extra: a missing package is a failure
    import torch  # noqa: F401
else:
    torch = pytest.importorskip("torch", reason="needs the train-text extra (torch)")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")

from potato.training.remote import protocol as events  # noqa: E402
from potato.training.remote.trainers import parallel  # noqa: E402
from tests import leaks  # noqa: E402
from tests.helpers import ROOT  # noqa: E402
from tests.helpers import hf_run_dir, hf_train  # noqa: E402
from tests.sshd import free_port  # noqa: E402

FAKES = os.path.join(ROOT, "tests", "fakes", "nodes")
SMALL = dict(epochs=6, batch_size=8, max_length=16, learning_rate=1e-2, bf16="false")


def two_nodes(monkeypatch, tmp_path):
    """This process as the first node of a two-node job whose srun is the stand-in."""
    monkeypatch.setenv("PATH", FAKES + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("FAKE_SLURM_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_HOSTNAMES", "localhost localhost")
    for key, value in (("POTATO_NODES", "2"), ("SLURM_JOB_ID", "4242"),
                       ("SLURM_JOB_NODELIST", "localhost"), ("POTATO_DDP_PORT", str(free_port())),
                       ("GLOO_SOCKET_IFNAME", "lo"), ("NCCL_SOCKET_IFNAME", "lo")):
        monkeypatch.setenv(key, value)


def _run(tmp_path, model, **params):
    paths, items = hf_run_dir(tmp_path, model, **dict(SMALL, **params))
    spec = json.load(open(paths.spec))
    spec["device"] = "cpu"
    json.dump(spec, open(paths.spec, "w"))
    return paths


def test_two_nodes_train_like_one_process(tmp_path, tiny_bert, monkeypatch):
    code, alone = hf_train(_run(tmp_path / "one", tiny_bert, processes=1))
    assert code == 0, alone[-1]
    two_nodes(monkeypatch, tmp_path)
    paths = _run(tmp_path / "two", tiny_bert)
    code, evs = hf_train(paths)
    errors = [e for e in evs if e["type"] == "error"]
    assert code == 0 and not errors, (errors, open(os.path.join(paths.root, "srun.out")).read())
    logs = [e["message"] for e in evs if e["type"] == "log"]
    assert any("data-parallel: 2 processes (gloo backend)" in m for m in logs), logs
    assert any(m.startswith("multi-node: 2 nodes (localhost, localhost), 1 rank(s) each; "
                            "rendezvous at localhost:") and m.endswith("network interface lo")
               for m in logs), logs
    calls = [json.loads(x) for x in open(tmp_path / "calls.log")]
    assert [c[:7] for c in calls] == [["srun", "--nodes=1", "--ntasks=1", "--ntasks-per-node=1",
                                       "--relative=1", "--kill-on-bad-exit=1", "--wait=60"]]
    assert calls[0][calls[0].index("--rank-offset") + 1] == "1"
    wheres = [e for e in evs if e["type"] == "where" and "nodes" in e]
    assert len(wheres) == 1 and wheres[0]["nodes"], wheres
    metrics, one = evs[-1]["metrics"], alone[-1]["metrics"]
    # the same global batches split over two ranks: as one process, up to the rounding of two
    # half-batch means and each rank's own dropout (as test_hf_parallel's two processes)
    for key, close in (("sentiment.train_loss", 0.1), ("sentiment.val_accuracy", 0.07)):
        assert abs(metrics[key] - one[key]) <= close, (metrics, one)
    assert leaks.processes("remote.rank") == []


def test_a_rank_failing_on_the_other_node_ends_the_run_with_its_message(tmp_path, tiny_bert,
                                                                       monkeypatch):
    two_nodes(monkeypatch, tmp_path)
    monkeypatch.setenv(parallel.FAULT_ENV, "1:2:raise")
    monkeypatch.setenv(parallel.TIMEOUT_ENV, "20")
    code, evs = hf_train(_run(tmp_path, tiny_bert, epochs=50))
    assert code == events.EXIT_OTHER, evs[-3:]
    message = [e for e in evs if e["type"] == "error"][-1]["message"]
    assert message.startswith("rank 1 of 2 on node %s failed: RuntimeError: injected fault in "
                              "rank 1 at step 2" % os.uname().nodename), message
    assert message.endswith("its traceback is in the run's stderr")
    assert leaks.processes("remote.rank") == [] and leaks.processes("fakes/nodes/srun") == []
