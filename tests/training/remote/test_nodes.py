"""Multi-node SLURM runs, the parts a caller sees without a cluster: the job script and sbatch
line for ``nodes``, the srun step, the rendezvous port, the partition check before a job
queues, and what a rank on a node that does not share the run's directory says
(potato/training/remote/nodes.py, slurm_job.py, rank.py). The real two-node cluster is in
tests/integration/slurm/."""

import json
import os
import subprocess
import sys

import pytest

from potato.training.remote import nodes
from potato.training.remote import slurm_job as slurm
from potato.training.remote.protocol import RunSettings
from tests.helpers import ROOT

FAKES = os.path.join(ROOT, "tests", "fakes", "nodes")


def settings(**keys):
    return RunSettings(scheduler=slurm.SlurmSettings.from_dict(keys))


def test_a_job_over_two_nodes_asks_sbatch_for_them_and_tells_the_worker():
    s = settings(nodes=2, ntasks_per_node=4, gpus_per_node="a100:4", partition="gpu")
    argv = slurm.sbatch_argv(s, "/j", "r1")
    assert argv[-5:] == ["--partition=gpu", "--nodes=2", "--ntasks-per-node=4",
                         "--gpus-per-node=a100:4", "/j/job.sh"]
    assert "\nexport POTATO_NODES=2\n" in slurm.job_script(s, "/j", "/c")
    # one node (or none said) is today's job: no flag, no variable
    for one in (settings(), settings(nodes=1)):
        assert "POTATO_NODES" not in slurm.job_script(one, "/j", "/c")
        assert not [a for a in slurm.sbatch_argv(one, "/j", "r1") if a.startswith("--nodes")]


def test_an_agents_nodes_that_are_not_a_count_are_one_node():
    # an agent's --slurm-config is read by the same from_dict: text and junk stay harmless
    assert settings(nodes="3").scheduler.node_count == 3
    for junk in ("2; rm -rf ~", True, -2, "x", "²", 2.7, [2], "9" * 40):
        s = settings(nodes=junk)
        assert s.scheduler.node_count == 1
        assert "POTATO_NODES" not in slurm.job_script(s, "/j", "/c")


def test_the_rendezvous_port_comes_from_the_job_or_the_environment():
    assert nodes.port_for("4242", {}) == nodes.port_for("4242", {}) != nodes.port_for("4243", {})
    # below Linux's ephemeral ports (32768 on), where an outgoing connection could hold it
    assert all(1024 <= nodes.port_for(j, {}) < 32768 for j in ("0", "99999999", "12_3", "²"))
    assert nodes.port_for("7", {nodes.PORT_ENV: "29555"}) == 29555
    for bad in ("80", "x", "70000", "²²²²²", "0029555000"):
        with pytest.raises(nodes.NodesError, match="POTATO_DDP_PORT is '%s'" % bad):
            nodes.port_for("7", {nodes.PORT_ENV: bad})


def test_the_layout_is_read_from_the_job():
    def scontrol(argv):
        assert argv == ["scontrol", "show", "hostnames", "pn[1-2]"]
        return 0, "pn1\npn2\n", ""

    env = {"POTATO_NODES": "2", "SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "pn[1-2]"}
    lay = nodes.layout(2, env, scontrol)
    assert (lay.hosts, lay.master, lay.per_node, lay.world, lay.port) == (
        ["pn1", "pn2"], "pn1", 2, 4, nodes.port_for("12", {}))
    with pytest.raises(nodes.NodesError, match="asked for 3 nodes but SLURM gave it 2"):
        nodes.layout(1, dict(env, POTATO_NODES="3"), scontrol)
    with pytest.raises(nodes.NodesError, match="not a SLURM job"):
        nodes.layout(1, {"POTATO_NODES": "2"}, scontrol)
    with pytest.raises(nodes.NodesError, match="scontrol show hostnames pn.1-2. failed on .*"
                                               "no such command"):
        nodes.layout(1, env, lambda argv: (127, "", "no such command"))


def test_the_tasks_slurm_gave_each_node():
    assert nodes.tasks_per_node({"SLURM_TASKS_PER_NODE": "2(x3)"}) == 2
    assert nodes.tasks_per_node({"SLURM_TASKS_PER_NODE": "4,2(x2)"}) == 2
    assert nodes.tasks_per_node({"SLURM_TASKS_PER_NODE": "x"}) is None
    assert nodes.tasks_per_node({}) is None


def test_the_srun_step_starts_the_other_nodes_ranks():
    lay = nodes.Layout(["a", "b", "c"], 2, "9", 20009)
    argv = nodes.srun_argv(lay, ["py", "-m", "potato.training.remote.rank", "--rank-offset",
                                 "2"])
    assert argv[:10] == ["srun", "--nodes=2", "--ntasks=4", "--ntasks-per-node=2",
                         "--relative=1", "--kill-on-bad-exit=1", "--wait=60", "--overcommit",
                         "--job-name=potato-ranks", "--export=ALL"]
    assert argv[10:] == ["py", "-m", "potato.training.remote.rank", "--rank-offset", "2"]


PARTITIONS = ("PartitionName=debug AllowGroups=ALL Default=YES MaxNodes=UNLIMITED TotalNodes=2 "
              "State=UP\nPartitionName=big Default=NO MaxNodes=4 TotalNodes=16 State=UP\n")


def test_too_many_nodes_is_one_sentence():
    parts = slurm.parse_partitions(PARTITIONS)
    assert slurm.node_limit(parts) == ("debug", 2, None)
    assert slurm.node_limit(parts, "big") == ("big", 16, 4)
    assert slurm.node_limit(parts, "nope") is None
    assert slurm.too_many_nodes(2, slurm.node_limit(parts)) is None
    assert slurm.too_many_nodes(3, slurm.node_limit(parts)) == (
        "nodes is 3 but partition debug has 2 nodes: the job could never start. Lower nodes, "
        "or choose a larger partition.")
    assert slurm.too_many_nodes(5, slurm.node_limit(parts, "big")).startswith(
        "nodes is 5 but partition big allows at most 4 per job (MaxNodes)")


def test_the_follower_refuses_too_many_nodes_before_sbatch(tmp_path):
    log = tmp_path / "calls"
    for name in ("sbatch", "squeue", "scancel"):  # they record that they ran
        path = tmp_path / name
        path.write_text("#!/bin/sh\necho %s >> %s\nexit 1\n" % (name, log))
        path.chmod(0o755)
    env = {"PATH": os.pathsep.join([str(tmp_path), FAKES, "/usr/bin", "/bin"])}
    said = []
    follower = slurm.JobFollower(slurm.Job(settings(nodes=3), str(tmp_path), "/code", "r1", env,
                                           said.append, said.append, lambda: False))
    with pytest.raises(slurm.SlurmError, match="nodes is 3 but partition debug has 2 nodes"):
        follower.submit()
    assert not log.exists() and said == []  # sbatch never ran
    follower = slurm.JobFollower(slurm.Job(settings(nodes=2), str(tmp_path), "/code", "r1", env,
                                           said.append, said.append, lambda: False))
    with pytest.raises(slurm.SlurmError, match="sbatch refused the job"):
        follower.submit()  # within the partition: sbatch is asked
    assert log.read_text() == "sbatch\n"


def test_a_rank_on_a_node_without_the_run_directory_says_so(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, SLURM_PROCID="1", SLURM_LOCALID="0")
    missing = tmp_path / "not-here"
    r = subprocess.run(
        [sys.executable, "-m", "potato.training.remote.rank", "--rank-offset", "1",
         "--world", "3", "--parent", "0", "--spec", str(missing / "spec.json"), "--backend",
         "gloo", "--store", "tcp://pn1:20012", "--error-file", str(missing / "e{rank}.json")],
        env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    line = [x for x in r.stderr.splitlines() if x.startswith("POTATO-RANK-ERROR ")]
    assert len(line) == 1 and "Traceback" not in r.stderr, r.stderr
    said = json.loads(line[0].split(" ", 1)[1])
    assert said["message"] == (
        "node %s does not see the run's directory %s: remote_dir must be on storage that every "
        "compute node shares" % (said["host"], missing))


def test_a_trainer_that_is_not_data_parallel_says_the_other_nodes_stay_idle(tmp_path,
                                                                          monkeypatch):
    import io
    import random

    from potato.training.remote import bundle
    from potato.training.remote import protocol as events
    from potato.training.remote import worker
    from potato.training.remote.paths import RunPaths, write_json
    from potato.training.remote.trainers import REGISTRY, resolve_params
    from tests.helpers import NEG, POS, sentence

    rng = random.Random(1)
    items = [("i%d" % n, sentence(rng, POS if n % 2 else NEG)) for n in range(60)]
    labels = {i: {"s": ["pos" if n % 2 else "neg"]} for n, (i, _) in enumerate(items)}
    schemas = {"s": {"type": "radio", "labels": ["pos", "neg"]}}
    paths = RunPaths(tmp_path / "run").create()
    bundle.build(paths.bundle, items, labels, schemas, include_unlabeled=True)
    write_json(paths.spec, {"run_id": "t", "trainer": "text-naive-bayes", "schemas": schemas,
                            "params": resolve_params(REGISTRY["text-naive-bayes"], {})})
    monkeypatch.setenv("POTATO_NODES", "3")
    out = io.StringIO()
    assert worker.run(paths.spec, events.Emitter(out)) == events.EXIT_OK
    said = [json.loads(x) for x in out.getvalue().splitlines()]
    assert {"level": "warning", "message": "text-naive-bayes trains in one process: the other 2 "
            "node(s) of this SLURM job stay idle; set nodes to 1 for it (nodes is for the "
            "data-parallel hf trainers)"}.items() <= [e for e in said if e["type"] == "log" and
                                                      e["level"] == "warning"][0].items()
    assert said[-1]["type"] == "result"
