"""The ssh backend against a real sshd on loopback (started here, like the tests do).

Prints, side by side in one run:
- ssh client processes spawned per warm run (code already on the host)    target <= 2
- time from run start to the worker's first event over one bare `ssh HOST true`   target <= 3
- model-file copy throughput over `ssh HOST cat FILE > /dev/null` of the same file  target >= 0.9

    python3 bench/ssh_bench.py [--mb 300]        (as root: it starts /usr/sbin/sshd)
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from potato.config.settings import load  # noqa: E402
from potato.service import Service  # noqa: E402
from tests import sshd  # noqa: E402
from tests.helpers import Client  # noqa: E402
from tests.helpers import make_project, start_run, wait_run  # noqa: E402


def events_of(cfg, run_id):
    path = os.path.join(cfg.runs_dir, run_id, "events.jsonl")
    return [json.loads(line) for line in open(path)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mb", type=int, default=300)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "sshd").mkdir()
        spawns = tmp / "spawns.log"
        sshd.start(tmp / "sshd", log_spawns=str(spawns))
        os.environ["PATH"] = str(tmp / "sshd" / "bin") + os.pathsep + os.environ["PATH"]
        os.environ["POTATO_TRAINER_PLUGINS"] = "bench.plugins"
        remote = tmp / "remote"
        backend = ("  backends:\n    gpu:\n      type: ssh\n      host: potato-real\n"
                   "      remote_dir: %s\n      keep_remote: true\n      env: %s\n"
                   % (json.dumps(str(remote)), json.dumps({"POTATO_TRAINER_PLUGINS": "bench.plugins",
                                                           "PYTHONPATH": ROOT})))
        (tmp / "project").mkdir()
        cfg_path = make_project(tmp / "project", backend)
        cfg, _, _ = load(cfg_path)
        service = Service(cfg, "127.0.0.1", 0, access_log=lambda line: None,
                          owner="bench").open().start()
        c = Client(service.url)
        try:
            cold = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                                         backend="gpu"), timeout=300)
            assert cold["status"] == "success", cold
            before = len(spawns.read_text().splitlines())
            warm = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                                         backend="gpu"), timeout=300)
            assert warm["status"] == "success", warm
            n_spawn = len(spawns.read_text().splitlines()) - before
            print("ssh client processes spawned for a warm run: %d (target <= 2)" % n_spawn)

            first = min(e["t"] for e in events_of(cfg, warm["run_id"]))
            startup = first - warm["started_at"]
            bare = []
            for _ in range(5):
                t0 = time.time()
                subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "ControlMaster=no",
                                "-o", "ControlPath=none", "potato-real", "true"], check=True)
                bare.append(time.time() - t0)
            b = statistics.median(bare)
            print("run start to the worker's first event %.2f s, bare `ssh HOST true` %.2f s "
                  "(median of 5): ratio %.2f (target <= 3)" % (startup, b, startup / b))

            big = wait_run(c, start_run(c, trainer="bench-big-artifact", schemas=["sentiment"],
                                        backend="gpu", params={"mb": args.mb}), timeout=900)
            assert big["status"] == "success", big
            copying = [e["t"] for e in events_of(cfg, big["run_id"])
                       if e.get("type") == "status" and
                       str(e.get("message", "")).startswith("copying the model back")]
            ours = copying[-1] - copying[0]
            remote_file = remote / "jobs" / big["run_id"] / "artifacts" / "big.bin"
            t0 = time.time()
            subprocess.run("ssh -o ControlMaster=no -o ControlPath=none potato-real cat %s "
                           "> /dev/null" % json.dumps(str(remote_file)), shell=True, check=True)
            theirs = time.time() - t0
            mb = args.mb
            print("model copy %d MB: %.1f MB/s through the agent, %.1f MB/s by `ssh cat`: "
                  "ratio %.2f (target >= 0.9)" % (mb, mb / ours, mb / theirs, theirs / ours))
        finally:
            service.close()
            sshd.stop(tmp / "sshd")


if __name__ == "__main__":
    main()
