"""Held-out accuracy of hf-image-classification on the 1,797 real handwritten digits
(bench/data/digits/), with a small ResNet trained from scratch (random weights, built here: no
download), through the worker exactly as a run executes it. Target: >= 0.90 on the test split.

The bundle's splits are the product's (70/15/15 by a seeded hash of the item id); every item
is labelled with its gold digit. Prints the test accuracy, the majority baseline beside it, and
the training time.

    python3 bench/image_digits.py [--epochs 10] [--batch-size 32]
"""

import argparse
import io
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from potato.training.remote import bundle, worker  # noqa: E402
from potato.training.remote import protocol as events  # noqa: E402
from potato.training.remote.paths import RunPaths, write_json  # noqa: E402
from potato.training.remote.trainers import REGISTRY, resolve_params  # noqa: E402

DIGITS = os.path.join(ROOT, "bench", "data", "digits")


def build_model(d):
    import torch
    import transformers

    torch.manual_seed(0)
    transformers.ResNetModel(transformers.ResNetConfig(
        num_channels=3, embedding_size=32, hidden_sizes=[32, 64], depths=[1, 1],
        layer_type="basic", downsample_in_first_stage=False)).save_pretrained(d)
    transformers.ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.5] * 3,
                                   image_std=[0.5] * 3).save_pretrained(d)
    return sum(p.numel() for p in transformers.ResNetModel.from_pretrained(d).parameters())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--learning-rate", type=float, default=3e-3)
    args = ap.parse_args()
    with open(os.path.join(DIGITS, "items.jsonl")) as f:
        items = [json.loads(line) for line in f]
    with open(os.path.join(DIGITS, "gold.jsonl")) as f:
        gold = {d["id"]: d["digit"] for d in map(json.loads, f)}
    labels = sorted(set(gold.values()))
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        n_params = build_model(model)
        paths = RunPaths(os.path.join(tmp, "run")).create()
        schemas = {"digit": {"type": "radio", "labels": labels}}
        rows = [(it["id"], "", {"kind": "image", "path": os.path.join(DIGITS, it["image"])})
                for it in items]
        votes = {it["id"]: {"digit": [gold[it["id"]]]} for it in items}
        manifest = bundle.build(paths.bundle, rows, votes, schemas, heldout=paths.heldout)
        params = resolve_params(REGISTRY["hf-image-classification"], {
            "model": model, "epochs": args.epochs, "batch_size": args.batch_size,
            "learning_rate": args.learning_rate, "lora": False})
        write_json(paths.spec, {"run_id": "bench", "trainer": "hf-image-classification",
                                "schemas": schemas, "params": params, "device": "auto"})
        started = time.time()
        out = io.StringIO()
        code = worker.run(paths.spec, events.Emitter(out))
        seconds = time.time() - started
        if code != 0:
            print(out.getvalue()[-3000:])
            return 1
        with open(paths.heldout) as f:
            truth = {r["id"]: r["labels"]["digit"] for r in map(json.loads, f)}
        with open(paths.predictions) as f:
            preds = {p["id"]: p["label"] for p in map(json.loads, f) if p["id"] in truth}
    right = sum(preds[i] == g for i, g in truth.items())
    top = max(sum(1 for g in truth.values() if g == lab) for lab in labels)
    acc = right / len(truth)
    print("digits: %d train, %d val, %d test images; a ResNet of %d parameters from scratch, "
          "%d epochs" % (manifest["counts"]["train"], manifest["counts"]["val"],
                         manifest["counts"]["test"], n_params, args.epochs))
    print("held-out accuracy %.4f (majority baseline %.4f); target >= 0.90: %s; %.0f s"
          % (acc, top / len(truth), "met" if acc >= 0.90 else "NOT met", seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
