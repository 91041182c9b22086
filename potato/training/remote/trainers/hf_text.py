"""``hf-text-classification``: fine-tune a transformers encoder, fully or with a LoRA adapter.

A plain PyTorch loop rather than ``transformers.Trainer``: it reports progress per step with an
ETA, checks for cancellation between steps, and adds nothing else to the step time (bench/
compares it with a bare loop). Saved with ``save_pretrained`` (the model, or the PEFT adapter),
plus the tokenizer and ``labels.json``, so standard transformers/peft code loads it back.
Imported only by the worker.
"""

import json
import math
import os
import random
import time

torch = None  # imported by load(): importing this module never imports torch
AutoModelForSequenceClassification = AutoTokenizer = None


def load():
    """Import torch and transformers (when a run starts, in the worker only)."""
    global torch, AutoModelForSequenceClassification, AutoTokenizer
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer


def pick_device(requested, log):
    """The torch device for a request (auto: CUDA, then Apple Metal, then CPU)."""
    load()
    has_mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda:0")
        return torch.device("mps") if has_mps else torch.device("cpu")
    if requested.startswith("cuda"):
        index = int(requested.split(":")[1]) if ":" in requested else 0
        if torch.cuda.is_available() and index < torch.cuda.device_count():
            return torch.device("cuda:%d" % index)
        fallback = "mps" if has_mps else "cpu"
        log("device %s was requested but is not available here (%d CUDA GPU(s)); using %s"
            % (requested, torch.cuda.device_count() if torch.cuda.is_available() else 0,
               fallback), "warning")
        return torch.device(fallback)
    if requested == "mps" and not has_mps:
        log("device mps was requested but Apple Metal is not available; using cpu", "warning")
        return torch.device("cpu")
    return torch.device(requested)


def describe_device(device):
    """The device a run trains on, for the run's Ran on: ``cuda:0 (NVIDIA H200)``, ``cpu``."""
    if device.type == "cuda":
        try:
            return "%s (%s)" % (device, torch.cuda.get_device_name(device))
        except (RuntimeError, AssertionError):
            return str(device)
    return str(device)


class Trainer:
    def __init__(self, ctx):
        load()
        self.ctx = ctx
        self.p = ctx.params
        self.scheme = next(iter(ctx.schemas))
        self.labels = ctx.schemas[self.scheme]["labels"]
        self.model = None
        self.tokenizer = None

    def _batches(self, pairs, size, shuffle, rng):
        order = list(range(len(pairs)))
        if shuffle:
            rng.shuffle(order)
        for start in range(0, len(order), size):
            chunk = [pairs[i] for i in order[start:start + size]]
            enc = self.tokenizer([t for t, _ in chunk], truncation=True, padding=True,
                                 max_length=self.p["max_length"], return_tensors="pt")
            y = torch.tensor([self.labels.index(lab) for _, lab in chunk])
            yield enc, y

    def _autocast(self):
        if self.device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return torch.autocast(self.device.type, enabled=False)

    def train(self):
        ctx, p = self.ctx, self.p
        emit = ctx.emitter
        torch.manual_seed(p["seed"])
        rng = random.Random(p["seed"])
        self.device = pick_device(ctx.device_request, ctx.log)
        ctx.log("device: %s; torch %s" % (self.device, torch.__version__))
        emit.status("loading %s" % p["model"])
        self.tokenizer = AutoTokenizer.from_pretrained(p["model"])
        model = AutoModelForSequenceClassification.from_pretrained(
            p["model"], num_labels=len(self.labels),
            id2label=dict(enumerate(self.labels)),
            label2id=dict((lab, i) for i, lab in enumerate(self.labels)))
        if p["lora"]:
            from peft import LoraConfig, TaskType, get_peft_model

            model = get_peft_model(model, LoraConfig(task_type=TaskType.SEQ_CLS, r=p["lora_r"],
                                                     lora_alpha=p["lora_alpha"],
                                                     lora_dropout=0.1))
        model.to(self.device)
        self.model = model
        train = self.ctx.bundle.labelled("train", self.scheme)
        val = self.ctx.bundle.labelled("val", self.scheme)
        if not train:
            raise ctx.RunFailure("scheme %s has no labelled items in the train split"
                                 % self.scheme)
        params = [w for w in model.parameters() if w.requires_grad]
        lr = p["learning_rate"] or (2e-3 if p["lora"] else 5e-5)
        optim = torch.optim.AdamW(params, lr=lr)
        steps_per_epoch = math.ceil(len(train) / p["batch_size"])
        total = steps_per_epoch * p["epochs"]
        sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: max(0.0, 1 - s / total))
        ctx.log("training %d items, %d steps (%d epochs), %s, learning rate %g, %d trainable "
                "parameters" % (len(train), total, p["epochs"],
                                "LoRA" if p["lora"] else "full fine-tuning", lr,
                                sum(w.numel() for w in params)))
        step = 0
        started = time.time()
        metrics = {}
        for epoch in range(1, p["epochs"] + 1):
            emit.status("epoch %d/%d" % (epoch, p["epochs"]))
            model.train()
            loss_sum, seen = 0.0, 0
            for enc, y in self._batches(train, p["batch_size"], True, rng):
                ctx.check_cancelled()
                enc = enc.to(self.device)
                with self._autocast():
                    out = model(**enc, labels=y.to(self.device))
                out.loss.backward()
                optim.step()
                sched.step()
                optim.zero_grad(set_to_none=True)
                step += 1
                loss_sum += out.loss.item() * len(y)
                seen += len(y)
                elapsed = time.time() - started
                emit.progress(step, total, unit="step", epoch=epoch,
                              eta_s=elapsed / step * (total - step))
            train_loss = loss_sum / max(seen, 1)
            emit.metric("loss", round(train_loss, 5), epoch=epoch, split="train")
            metrics["%s.train_loss" % self.scheme] = round(train_loss, 5)
            if val:
                acc = self._accuracy(val)
                emit.metric("accuracy", round(acc, 4), epoch=epoch, split="val")
                metrics["%s.val_accuracy" % self.scheme] = round(acc, 4)
        self._save()
        return metrics

    def _accuracy(self, pairs):
        predicted = self.predict(self.scheme, [t for t, _ in pairs])
        return sum(1 for (lab, _), (_, gold) in zip(predicted, pairs) if lab == gold) / len(pairs)

    def predict(self, scheme, texts, batch_size=64):
        self.model.eval()
        out = []
        for start in range(0, len(texts), batch_size):
            self.ctx.check_cancelled()
            enc = self.tokenizer(texts[start:start + batch_size], truncation=True, padding=True,
                                 max_length=self.p["max_length"], return_tensors="pt")
            enc = enc.to(self.device)
            with torch.no_grad(), self._autocast():
                logits = self.model(**enc).logits
            probs = torch.softmax(logits.float(), dim=-1).cpu()
            conf, idx = probs.max(dim=-1)
            out.extend((self.labels[i], c) for i, c in zip(idx.tolist(), conf.tolist()))
        return out

    def _save(self):
        self.ctx.emitter.status("saving the model")
        out = os.path.join(self.ctx.artifacts, "model")
        self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        with open(os.path.join(out, "labels.json"), "w") as f:
            json.dump({"scheme": self.scheme, "labels": self.labels,
                       "lora": bool(self.p["lora"]), "base_model": self.p["model"]}, f)
        for root, _, files in os.walk(out):
            for name in files:
                path = os.path.join(root, name)
                self.ctx.emitter.emit("artifact", path=os.path.relpath(path, self.ctx.artifacts),
                                      bytes=os.path.getsize(path))
