"""The GPU checks of issue 15, in one script to run on a GPU machine when one is lent.

1. hf-text-classification against transformers.Trainer on one GPU (bench/hf_speed.py with
   device cuda, in a child that sees one GPU: ratio and both held-out accuracies).
2. With two or more visible GPUs: the same run through the real worker (python -m
   potato.training.worker, supervised as the product does) with processes 1, then processes 0
   (one rank per visible GPU): wall time, speed-up, held-out accuracy of each, and that the
   run reported "data-parallel: N processes (nccl backend)".
   Then the multi-node path (issue 39) on this one machine: the worker as rank 0 of a job that
   says it has two nodes, the other "node" started by the stand-in srun of tests/fakes/nodes
   with a GPU of its own, NCCL over TCP on loopback (no shared memory, no peer-to-peer: as
   between two nodes), against the one-GPU run.
3. hf-llm-classification against transformers.Trainer on one GPU (bench/llm_speed.py with
   device cuda, in a child that sees one GPU; its model is a random-initialised small Llama:
   the accuracies show only that both sides learn alike).

    python3 bench/gpu_check.py                 # on the GPU machine (about 10 minutes)
    python3 bench/gpu_check.py --dry-run       # here: the same code paths on the CPU, tiny
                                               # (two gloo processes stand in for two GPUs)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import hf_speed  # noqa: E402
from potato.training.remote import bundle, protocol, supervise  # noqa: E402
from potato.training.remote.paths import RunPaths, write_json  # noqa: E402


def worker_run(tmp, name, params, labelled, dev, device, env=None):
    """One run through the worker (``env``: more of its environment); (seconds, held-out
    accuracy, result or error, logs)."""
    paths = RunPaths(os.path.join(tmp, name)).create()
    items = [(r["id"], r["text"]) for r in labelled + dev]
    labels = {r["id"]: {"sentiment": [r["sentiment"]]} for r in labelled}
    bundle.build(paths.bundle, items, labels, hf_speed.SCHEMAS, include_unlabeled=True)
    write_json(paths.spec, {"run_id": name, "trainer": "hf-text-classification",
                            "schemas": hf_speed.SCHEMAS, "params": params, "device": device})
    seen = []
    argv = [sys.executable, "-m", "potato.training.worker", "--spec", paths.spec]
    t0 = time.perf_counter()
    env = protocol.worker_env(dict(os.environ, **(env or {})), ROOT)
    limit = supervise.Supervision(max_wall_seconds=1800)
    result = supervise.run_worker(argv, env, os.path.join(paths.root, "stderr.log"),
                                  seen.append, limit)
    seconds = time.perf_counter() - t0
    logs = [e["message"] for e in seen if e["type"] == "log"]
    if not result.ok:
        status, message = supervise.explain(result, limit)
        return seconds, None, "%s: %s; stderr: %s" % (status, message,
                                                     result.stderr_tail[-500:]), logs
    gold = {r["id"]: r["sentiment"] for r in dev}
    preds = [json.loads(line) for line in open(paths.predictions)]
    hits = [p["label"] == gold[p["id"]] for p in preds if p["id"] in gold]
    return seconds, sum(hits) / max(len(hits), 1), result.result["metrics"], logs


def data_parallel(args, device, ranks):
    params = hf_speed.params_for(args)
    params["batch_size"] = args.batch_size
    labelled = hf_speed.rows("sst2-2000-labelled.jsonl", args.items)
    dev = hf_speed.rows("sst2-dev-872.jsonl", args.dev)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, processes in (("one", 1), ("all", 0 if device == "auto" else ranks)):
            out[name] = worker_run(tmp, name, dict(params, processes=processes), labelled, dev,
                                   device)
            seconds, acc, result, logs = out[name]
            said = [m for m in logs if m.startswith("data-parallel")]
            print("  processes=%s: %.1f s, held-out accuracy %s; %s; %s" % (
                processes, seconds, "%.4f" % acc if acc is not None else "-",
                said[0] if said else "one process", result))
    (one, acc1, _, _), (many, accn, _, logs) = out["one"], out["all"]
    ok = acc1 is not None and accn is not None and any(
        "data-parallel: %d processes" % ranks in m for m in logs)
    print("data-parallel on %d %s: %.1f s over %.1f s on one: speed-up %.2fx; held-out accuracy "
          "%s vs %s (batch_size %d, %d labelled items, %d epochs): %s" % (
              ranks, "GPUs" if device == "auto" else "CPU processes", many, one, one / many,
              "%.4f" % accn if accn is not None else "-", "%.4f" % acc1 if acc1 is not None
              else "-", args.batch_size, args.items, args.epochs, "ran" if ok else "FAILED"))
    return ok


def two_nodes(args, device):
    """The multi-node path on one machine: two "nodes" of one GPU (or one CPU rank) each."""
    from tests.sshd import free_port

    params = dict(hf_speed.params_for(args), batch_size=args.batch_size, processes=0)
    labelled = hf_speed.rows("sst2-2000-labelled.jsonl", args.items)
    dev = hf_speed.rows("sst2-dev-872.jsonl", args.dev)
    env = {"PATH": os.path.join(ROOT, "tests", "fakes", "nodes") + os.pathsep +
           os.environ["PATH"], "POTATO_NODES": "2", "SLURM_JOB_ID": "1",
           "SLURM_JOB_NODELIST": "localhost", "FAKE_HOSTNAMES": "localhost localhost",
           "POTATO_DDP_PORT": str(free_port()), "GLOO_SOCKET_IFNAME": "lo",
           "NCCL_SOCKET_IFNAME": "lo", "NCCL_SHM_DISABLE": "1", "NCCL_P2P_DISABLE": "1"}
    one_gpu = {}
    if device == "auto":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0,1").split(",")
        one_gpu = {"CUDA_VISIBLE_DEVICES": visible[0]}
        env.update(one_gpu, FAKE_SRUN_CUDA_VISIBLE_DEVICES=visible[1])
    with tempfile.TemporaryDirectory() as tmp:
        one, acc1, _, _ = worker_run(tmp, "one", params, labelled, dev, device, one_gpu)
        two, acc2, result, logs = worker_run(tmp, "two", params, labelled, dev, device, env)
    said = [m for m in logs if m.startswith("multi-node")]
    ok = acc2 is not None and bool(said)
    print("  two nodes: %.1f s over %.1f s on one %s: speed-up %.2fx; held-out accuracy %s vs "
          "%s; %s; %s" % (two, one, "GPU" if device == "auto" else "CPU rank", one / two,
                          "%.4f" % acc2 if acc2 is not None else "-",
                          "%.4f" % acc1 if acc1 is not None else "-",
                          said[0] if said else "no multi-node line", "ran" if ok else result))
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="tiny, on the CPU (no GPU needed)")
    p.add_argument("--items", type=int, default=2000)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--dev", type=int, default=872)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="for the data-parallel runs")
    p.add_argument("--model", help="a local model directory (default: all-MiniLM-L6-v2)")
    args = p.parse_args()
    args.warmup = True
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    print("torch %s, CUDA %s, %d GPU(s)%s" % (torch.__version__, torch.version.cuda, gpus,
                                              ": " + ", ".join(torch.cuda.get_device_name(i)
                                                               for i in range(gpus))
                                              if gpus else ""))
    if args.dry_run:
        args.items, args.epochs, args.dev, args.repeat = 120, 1, 40, 1
        args.batch_size = 16
    elif not gpus:
        sys.exit("no CUDA GPU here: run with --dry-run to check the script on the CPU")
    device = "cpu" if args.dry_run else "cuda"
    print("1. hf-text-classification vs transformers.Trainer on %s" % device)
    # A child process that sees one GPU: Trainer would use nn.DataParallel over all it sees.
    env = dict(os.environ, PYTHONPATH=ROOT)
    if not args.dry_run:
        env["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    argv = [sys.executable, os.path.join(ROOT, "bench", "hf_speed.py"), "--device", device,
            "--items", str(args.items), "--epochs", str(args.epochs), "--dev", str(args.dev),
            "--repeat", str(args.repeat)] + (["--model", args.model] if args.model else [])
    subprocess.run(argv, env=env, check=False)
    ok = True
    if args.dry_run or gpus >= 2:
        print("2. data-parallel")
        ok = data_parallel(args, "cpu" if args.dry_run else "auto", 2 if args.dry_run else gpus)
        print("2b. two nodes (the multi-node path on this machine)")
        ok = two_nodes(args, "cpu" if args.dry_run else "auto") and ok
    else:
        print("2. data-parallel: skipped (one GPU visible)")
    print("3. hf-llm-classification vs transformers.Trainer on %s" % device)
    argv = [sys.executable, os.path.join(ROOT, "bench", "llm_speed.py"), "--device", device,
            "--repeat", str(args.repeat)]
    if args.dry_run:
        argv += ["--items", "120", "--epochs", "1", "--dev", "40"]
    subprocess.run(argv, env=env, check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
