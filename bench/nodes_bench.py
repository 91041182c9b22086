"""Multi-node scaling (issue 39): the same hf-text-classification run on one node and on two
nodes of a real two-node SLURM (tests/slurm_cluster.py: two slurmd in their own network
namespaces on this machine, as root), through the real server, sshd and agent, CPU and gloo.

Prints, for each run (one-node and two-node runs alternate, ``--repeat`` pairs):
- wall time of the run (queued to finished), the training time the trainer reports, and the
  rest (submission, start-up, rendezvous, prediction, upload);
- training throughput (train items x epochs per second of training);
and the medians' ratios two nodes / one node.

On this machine both "nodes" share the same 2 cores: a two-node run has two ranks with one
thread each where the one-node run has one rank with two threads. The figure shows what the
machinery costs (the rendezvous, the gradient exchange over the bridge), not the speed-up of
real nodes, which each bring their own cores or GPUs.

    python3 bench/nodes_bench.py [--repeat 2] [--epochs 3] [--model DIR]
"""

import argparse
import json
import os
import pathlib
import shutil
import signal
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.quality import minilm_dir  # noqa: E402
from potato.config.settings import load  # noqa: E402
from potato.service import Service  # noqa: E402
from tests import slurm_cluster, sshd  # noqa: E402
from tests.helpers import Client  # noqa: E402
from tests.helpers import KEY, PLUGINS, make_project, start_run, wait_run  # noqa: E402

H = {"X-API-Key": KEY}


def one_run(tmp, cluster, shared, nodes, params):
    backend = {"type": "slurm", "host": "potato-real", "remote_dir": shared,
               "partition": "debug", "time": "01:00:00", "poll_interval_s": 1,
               "job_python": sys.executable, "nodes": nodes,
               "env": {"SLURM_CONF": cluster.conf, "POTATO_TRAINER_PLUGINS": PLUGINS,
                       "PYTHONPATH": ROOT}}
    tmp.mkdir()
    cfg_path = make_project(tmp, "  backends:\n    cluster:\n" + "".join(
        "      %s: %s\n" % (k, json.dumps(v)) for k, v in backend.items()))
    cfg, _, _ = load(cfg_path)
    service = Service(cfg, "127.0.0.1", 0, access_log=lambda line: None,
                      owner="bench").open().start()
    try:
        c = Client(service.url)
        asked = time.time()
        run = wait_run(c, start_run(c, backend="cluster", schemas=["sentiment"],
                                    trainer="hf-text-classification", params=params),
                       timeout=3600)
        wall = time.time() - asked
        if run["status"] != "success":
            sys.exit("the %d-node run failed: %s" % (nodes, run["error"]))
        m = run["metrics"]
        log = c.get("/admin/training/api/runs/%s/log" % run["run_id"], headers=H).text
        met = [line.split("ranks met after ")[1].split(" s")[0] for line in log.splitlines()
               if "ranks met after " in line]
        manifest = json.load(open(os.path.join(
            tmp, "annotation_output", "training", "runs", run["run_id"], "bundle",
            "manifest.json")))
        items = manifest["counts"]["train"] * params["epochs"]
        return {"wall": wall, "train": m["train_seconds"], "rest": wall - m["train_seconds"],
                "meet": float(met[0]) if met else 0.0,
                "throughput": items / m["train_seconds"],
                "accuracy": (run.get("holdout") or {}).get("accuracy"), "ran_on": run["ran_on"]}
    finally:
        service.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--model", default=None)
    args = p.parse_args()
    # a TERM (a timeout) unwinds: the cluster's daemons and namespaces are stopped below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))
    ok, why = slurm_cluster.available()
    if not ok:
        sys.exit("the two-node SLURM cannot run here: %s" % why)
    params = {"model": args.model or minilm_dir(), "epochs": args.epochs, "batch_size": 16,
              "max_length": 64, "processes": 0, "seed": 0}
    results = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "sshd").mkdir()
        sshd.start(tmp / "sshd")
        os.environ["PATH"] = str(tmp / "sshd" / "bin") + os.pathsep + os.environ["PATH"]
        os.environ["POTATO_TRAINER_PLUGINS"] = PLUGINS
        os.environ["PYTHONPATH"] = ROOT
        os.makedirs("/var/cache/potato-tests", exist_ok=True)
        shared = tempfile.mkdtemp(prefix="bench ", dir="/var/cache/potato-tests")
        cluster = slurm_cluster.start(tmp / "slurm", nodes=2, cpus=2)
        os.environ["SLURM_CONF"] = cluster.conf
        try:
            k = 0
            for pair in range(args.repeat):
                for nodes in ((1, 2) if pair % 2 == 0 else (2, 1)):
                    k += 1
                    r = one_run(tmp / ("r%d" % k), cluster, shared, nodes, params)
                    results[nodes].append(r)
                    print("%d node(s): wall %.1f s = training %.1f s (of which %.1f s waiting "
                          "for the other ranks to start) + the rest %.1f s; %.1f items/s; "
                          "held-out accuracy %s; %s" % (
                              nodes, r["wall"], r["train"], r["meet"], r["rest"],
                              r["throughput"], r["accuracy"], r["ran_on"]), flush=True)
        finally:
            cluster.stop()
            sshd.stop(tmp / "sshd")
            shutil.rmtree(shared, ignore_errors=True)
    med = {n: {key: statistics.median(r[key] for r in rs) for key in
               ("wall", "train", "rest", "throughput", "meet")} for n, rs in results.items()}
    print("two nodes / one node (medians of %d): training throughput %.2f, training time %.2f "
          "(%.2f without the wait for the other ranks), the rest %.2f, wall %.2f" % (
              args.repeat, med[2]["throughput"] / med[1]["throughput"],
              med[2]["train"] / med[1]["train"],
              (med[2]["train"] - med[2]["meet"]) / med[1]["train"],
              med[2]["rest"] / med[1]["rest"], med[2]["wall"] / med[1]["wall"]))


if __name__ == "__main__":
    main()
