"""The slurm backend against a real single-node SLURM reached through a real sshd (as root).

Prints, for a few values of poll_interval_s:
- relay latency: a progress event written by the worker on the compute node -> visible in the
  run's API record (median and max), next to poll_interval_s;
- scheduler commands per minute while the job runs (sbatch, squeue, scancel, scontrol), counted
  by wrappers on the login node's PATH.

    python3 bench/slurm_bench.py [--seconds 40] [--polls 2,10]
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from potato.config.settings import load  # noqa: E402
from potato.service import Service  # noqa: E402
from tests import slurmd, sshd  # noqa: E402
from tests.helpers import Client  # noqa: E402
from tests.helpers import KEY, PLUGINS, make_project, start_run, wait_run  # noqa: E402

H = {"X-API-Key": KEY}


def wrappers(d, log):
    d.mkdir()
    for name in ("sbatch", "squeue", "scancel", "scontrol"):
        (d / name).write_text('#!/bin/sh\necho %s >> "%s"\nexec /usr/bin/%s "$@"\n'
                              % (name, log, name))
        os.chmod(d / name, 0o755)


def measure(c, cfg_dir, conf, shared, wrap, calls, poll, seconds):
    backend = ("  backends:\n    cluster:\n" + "".join(
        "      %s: %s\n" % (k, json.dumps(v)) for k, v in {
            "type": "slurm", "host": "potato-real", "remote_dir": shared, "time": "00:10:00",
            "poll_interval_s": poll, "job_python": "python3",
            "env": {"SLURM_CONF": conf, "POTATO_TRAINER_PLUGINS": PLUGINS, "PYTHONPATH": ROOT,
                    "PATH": "%s:/usr/local/bin:/usr/bin:/bin" % wrap}}.items()))
    cfg_path = make_project(cfg_dir, backend)
    cfg, _, _ = load(cfg_path)
    service = Service(cfg, "127.0.0.1", 0, access_log=lambda line: None,
                      owner="bench").open().start()
    c = Client(service.url)
    try:
        run_id = start_run(c, backend="cluster", schemas=["sentiment"], trainer="test-steps",
                           params={"seconds": seconds})
        latencies, seen = [], None
        started = None
        before = 0
        while True:
            _, run = c.json("GET", "/admin/training/api/runs/%s" % run_id, headers=H)
            if run["status"] not in ("queued", "running"):
                break
            p = run.get("progress") or {}
            if p.get("current") and p.get("current") != seen:
                if started is None:
                    started = time.time()
                    before = len(calls.read_text().splitlines()) if calls.exists() else 0
                seen = p["current"]
                latencies.append(time.time() - p["t"])
            time.sleep(0.05)
        ran = time.time() - started
        after = len(calls.read_text().splitlines())
        per_min = (after - before) / ran * 60
        print("poll_interval_s %4.1f: relay latency median %.2f s, max %.2f s (%d events seen); "
              "%.1f scheduler commands per minute of a running job"
              % (poll, statistics.median(latencies), max(latencies), len(latencies), per_min))
        wait_run(c, run_id, timeout=60)
    finally:
        service.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=40)
    p.add_argument("--polls", default="2,10")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "sshd").mkdir()
        (tmp / "slurm").mkdir()
        sshd.start(tmp / "sshd")
        conf = slurmd.start(tmp / "slurm")
        os.environ["PATH"] = str(tmp / "sshd" / "bin") + os.pathsep + os.environ["PATH"]
        os.environ["POTATO_TRAINER_PLUGINS"] = PLUGINS
        os.environ["PYTHONPATH"] = ROOT
        calls = tmp / "calls.log"
        wrappers(tmp / "wrap", calls)
        os.makedirs("/var/cache/potato-tests", exist_ok=True)
        shared = tempfile.mkdtemp(prefix="bench ", dir="/var/cache/potato-tests")
        try:
            for k, poll in enumerate(float(x) for x in args.polls.split(",")):
                (tmp / ("p%d" % k)).mkdir()
                measure(None, tmp / ("p%d" % k), conf, shared, tmp / "wrap", calls, poll,
                        args.seconds)
        finally:
            slurmd.stop(tmp / "slurm")
            sshd.stop(tmp / "sshd")


if __name__ == "__main__":
    main()
