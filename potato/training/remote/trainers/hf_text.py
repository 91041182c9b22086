"""``hf-text-classification``: fine-tune a transformers encoder, fully or with a LoRA adapter.

A plain PyTorch loop rather than ``transformers.Trainer``: it reports progress per step with an
ETA, checks for cancellation between steps, and is faster than Trainer at its defaults
(bench/hf_speed.py): texts are tokenized once, batches are grouped by length (little padding),
the loss stays on the device until the epoch ends, AdamW is fused on CUDA, bf16 autocast runs
on GPUs that have it and on CPUs that compute it natively (the ``bf16`` param), and
prediction sorts by length under inference_mode. With several GPUs it trains data-parallel,
one process per GPU (parallel.py). Saved with ``save_pretrained`` (the model, or the PEFT
adapter), plus the tokenizer and ``labels.json``, so standard transformers/peft code loads it
back.
Imported only by the worker.
"""

import json
import math
import os
import time

from potato.training.remote.trainers import parallel

torch = None  # imported by load(): importing this module never imports torch
AutoModelForSequenceClassification = AutoTokenizer = None


def load():
    """Import torch and transformers (when a run starts, in the worker only)."""
    global torch, AutoModelForSequenceClassification, AutoTokenizer
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer


def _fused(device):
    """fused=True for AdamW on CUDA (one kernel for the whole update)."""
    return {"fused": True} if device.type == "cuda" else {}


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


def check_loss(ctx, epoch, train_loss):
    """The epoch's training loss, or RunFailure when it is not a finite number (read once an
    epoch, where the loop reads it anyway: no extra host sync)."""
    if not math.isfinite(train_loss):
        raise ctx.RunFailure(
            "the training loss of epoch %d was %s, so the model's weights are no "
            "longer numbers; try a lower learning_rate, and check the data for corrupt "
            "items (audio or images with extreme values, empty texts)" % (epoch, train_loss))
    return train_loss


def cpu_has_bf16():
    """Whether this CPU computes bfloat16 natively (Intel AMX or AVX512-BF16, read from
    Linux's /proc/cpuinfo). There bf16 autocast takes about three quarters of float32's time
    at the same accuracy (bench/hf_speed.py); elsewhere it is emulated, and slower."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return "amx_bf16" in flags or "avx512_bf16" in flags
    except OSError:
        pass
    return False


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
        self.device = None
        self.bf16 = None  # bfloat16 autocast, decided once the device is known

    def _encode(self, texts):
        """Token ids of each text, cut at max_length and not padded (tokenized once)."""
        return self.tokenizer(list(texts), truncation=True, max_length=self.p["max_length"],
                              padding=False)["input_ids"]

    def _collate(self, rows):
        """A padded batch on the device from rows of token ids."""
        pad = self.tokenizer.pad_token_id or 0
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        return {"input_ids": ids.to(self.device, non_blocking=True),
                "attention_mask": mask.to(self.device, non_blocking=True)}

    def _use_bf16(self):
        """bfloat16 autocast or not, by the ``bf16`` param (hf-text-classification and
        -regression; auto: CUDA GPUs that support it and CPUs that compute it natively);
        trainers without the param: CUDA GPUs that support it."""
        choice = self.p.get("bf16")
        gpu = self.device.type == "cuda" and torch.cuda.is_bf16_supported()
        if choice == "true" and self.device.type == "cuda" and not gpu:
            raise self.ctx.RunFailure(
                "bf16=true but %s does not support bfloat16. Set bf16 to auto (or false) to "
                "train in float32 there" % describe_device(self.device))
        if choice in (None, "auto"):
            return gpu or choice == "auto" and self.device.type == "cpu" and cpu_has_bf16()
        return choice == "true"

    def _autocast(self):
        if self.bf16 is None:
            self.bf16 = self._use_bf16()
        if self.bf16:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return torch.autocast(self.device.type, enabled=False)

    def _load_model(self):
        p = self.p
        self.ctx.emitter.status("loading %s" % p["model"])
        self.tokenizer = AutoTokenizer.from_pretrained(p["model"])
        import transformers

        # float32 explicitly: transformers 5 otherwise keeps a checkpoint's own (bf16) dtype;
        # bf16 compute comes from autocast on GPUs that support it
        dtype_kw = "dtype" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) \
            >= (4, 56) else "torch_dtype"
        model = AutoModelForSequenceClassification.from_pretrained(
            p["model"], **{dtype_kw: torch.float32}, **self._head())
        if p["lora"]:
            from peft import LoraConfig, TaskType, get_peft_model

            model = get_peft_model(model, LoraConfig(task_type=TaskType.SEQ_CLS, r=p["lora_r"],
                                                     lora_alpha=p["lora_alpha"],
                                                     lora_dropout=0.1))
        model.to(self.device)
        self.model = model
        return model

    def train(self):
        """Train on one process, or data-parallel on several (parallel.train); rank 0 saves."""
        return parallel.train(self)

    def _train(self, group):
        ctx, p = self.ctx, self.p
        torch.manual_seed(p["seed"])
        self.device = group.device(lambda: pick_device(ctx.device_request, ctx.log))
        ctx.log("device: %s; torch %s" % (self.device, torch.__version__))
        ctx.emitter.emit("where", device=describe_device(self.device))
        model = self._load_model()
        torch.manual_seed(p["seed"] + group.rank)  # dropout differs between ranks
        train = self._labelled("train")
        val = self._labelled("val")
        params = [w for w in model.parameters() if w.requires_grad]
        lr = p["learning_rate"] or (2e-3 if p["lora"] else 5e-5)
        optim = torch.optim.AdamW(params, lr=lr, **_fused(self.device))
        rows = self._encode(t for t, _ in train)
        ys = self._targets(train)
        total = math.ceil(len(train) / p["batch_size"]) * p["epochs"]
        sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: max(0.0, 1 - s / total))
        self.bf16 = self._use_bf16()
        ctx.log("training %d items, %d steps (%d epochs), %s, learning rate %g, %d trainable "
                "parameters, %s%s" % (len(train), total, p["epochs"],
                                      "LoRA" if p["lora"] else "full fine-tuning", lr,
                                      sum(w.numel() for w in params),
                                      "bfloat16 autocast" if self.bf16 else "float32",
                                      ", %d processes" % group.world if group.world > 1 else ""))
        ddp = group.wrap(model, self.device)
        lengths = [len(r) for r in rows]
        # a loss point for the chart about every 1% of the run (one host sync each)
        state = {"step": 0, "total": total, "started": time.time(),
                 "every": max(1, total // 100)}
        metrics = {}
        for epoch in range(1, p["epochs"] + 1):
            ctx.emitter.status("epoch %d/%d" % (epoch, p["epochs"]))
            batches = group.batches(lengths, p["batch_size"], p["seed"], epoch)
            loss_sum, seen = self._epoch(ddp, group, batches, rows, ys, optim, sched, state,
                                         epoch)
            train_loss = check_loss(ctx, epoch, loss_sum / max(seen, 1))
            ctx.emitter.metric("loss", round(train_loss, 5), epoch=epoch, split="train")
            metrics["%s.train_loss" % self.scheme] = round(train_loss, 5)
            if val:
                self._validate(val, group, epoch, state["step"], metrics)
        return metrics

    # -- what a subclass with another head changes (hf_regression.py) ---------------------------
    def _labelled(self, split):
        """The (input, label) pairs of a split: (text, label) here; hf_image gives items."""
        return self.ctx.bundle.labelled(split, self.scheme)

    def _head(self):
        """from_pretrained's keywords for the classification head: a class per label (a
        Likert scheme's labels are its points, integers; the config names them as text)."""
        return {"num_labels": len(self.labels),
                "id2label": dict((i, str(lab)) for i, lab in enumerate(self.labels)),
                "label2id": dict((str(lab), i) for i, lab in enumerate(self.labels))}

    def _targets(self, train):
        """The training targets of (text, label) pairs: each label's class index."""
        return [self.labels.index(lab) for _, lab in train]

    info_file = "labels.json"  # saved with the model: what code that loads it back needs

    def _info(self):
        return {"labels": self.labels}

    def _validate(self, val, group, epoch, step, metrics):
        acc = parallel.accuracy(lambda texts: self.predict(self.scheme, texts), val,
                                group, self.device)
        self.ctx.emitter.metric("accuracy", round(acc, 4), epoch=epoch, split="val", step=step)
        metrics["%s.val_accuracy" % self.scheme] = round(acc, 4)

    MAX_GRAD_NORM = 1.0  # gradients clipped to this norm, as transformers.Trainer does

    def _epoch(self, ddp, group, batches, rows, ys, optim, sched, state, epoch):
        """One pass; (loss sum, items) over every rank. The loss stays on the device until the
        epoch ends: no host sync per step beyond what progress needs (none). Gradients are
        clipped to a norm of 1 (a high learning rate without warmup then does not throw the
        pretrained weights off in the first steps)."""
        ctx = self.ctx
        ddp.train()
        trainable = [w for w in ddp.parameters() if w.requires_grad]
        loss_sum = torch.zeros((), device=self.device)
        window = torch.zeros((), device=self.device)  # this rank's loss since the last point
        seen = in_window = 0
        for n, batch in enumerate(batches):
            ctx.check_cancelled()
            group.step(state["step"] + 1)
            loss = self._forward(ddp, rows, batch, ys)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, self.MAX_GRAD_NORM)
            optim.step()
            sched.step()
            optim.zero_grad(set_to_none=True)
            loss_sum += loss.detach().float() * len(batch)
            window += loss.detach().float()
            seen += len(batch)
            in_window += 1
            state["step"] += 1
            step, total = state["step"], state["total"]
            elapsed = time.time() - state["started"]
            ctx.emitter.progress(step, total, unit="step", epoch=epoch,
                                 eta_s=elapsed / step * (total - step))
            if group.is_main and (step % state["every"] == 0 or n == len(batches) - 1):
                ctx.emitter.metric("loss", round((window / in_window).item(), 5), step=step,
                                   epoch=epoch, split="train")
                window.zero_()
                in_window = 0
        return group.all_sum([loss_sum, seen], self.device)

    def _forward(self, ddp, rows, batch, ys):
        """One batch's loss (hf_token's trainer gives tags instead of labels)."""
        enc = self._collate([rows[i] for i in batch])
        y = torch.tensor([ys[i] for i in batch]).to(self.device, non_blocking=True)
        with self._autocast():
            return ddp(**enc, labels=y).loss

    def predict(self, scheme, texts, batch_size=64):
        """(label, confidence) per text, in order; batched by length (little padding)."""
        return [answer[:2] for answer in self._scored(texts, batch_size, False)]

    def predict_ranked(self, scheme, texts, batch_size=64):
        """As ``predict``, with each label's probability and the text's vector (the first
        token's last hidden state, projected to VECTOR_DIM dimensions by a fixed random
        matrix: distances are kept, the size stays small) for active learning."""
        return self._scored(texts, batch_size, True)

    VECTOR_DIM = 32

    def _projection(self, width):
        if getattr(self, "_proj", None) is None or self._proj.shape[0] != width:
            g = torch.Generator().manual_seed(0)
            self._proj = (torch.randn(width, self.VECTOR_DIM, generator=g)
                          / math.sqrt(self.VECTOR_DIM)).to(self.device)
        return self._proj

    def _scored(self, texts, batch_size, ranked):
        self.model.eval()
        rows = self._encode(texts)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        out = [None] * len(rows)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                self.ctx.check_cancelled()
                chunk = order[start:start + batch_size]
                with self._autocast():
                    result = self.model(**self._collate([rows[i] for i in chunk]),
                                        output_hidden_states=ranked)
                probs = torch.softmax(result.logits.float(), dim=-1)
                conf, idx = probs.max(dim=-1)
                vectors = None
                if ranked:
                    first = result.hidden_states[-1][:, 0].float()
                    vectors = (first @ self._projection(first.shape[-1])
                               if first.shape[-1] > self.VECTOR_DIM else first).tolist()
                for n, (i, k, c) in enumerate(zip(chunk, idx.tolist(), conf.tolist())):
                    if not ranked:
                        out[i] = (self.labels[k], c)
                        continue
                    dist = dict((str(lab), p) for lab, p in zip(self.labels,
                                                                 probs[n].tolist()))
                    out[i] = (self.labels[k], c, {"probabilities": dist,
                                                  "vector": vectors[n]})
        return out

    def _save(self):
        self.ctx.emitter.status("saving the model")
        out = os.path.join(self.ctx.artifacts, "model")
        self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        with open(os.path.join(out, self.info_file), "w") as f:
            json.dump(dict({"scheme": self.scheme, "lora": bool(self.p["lora"]),
                            "base_model": self.p["model"]}, **self._info()), f)
        for root, _, files in os.walk(out):
            for name in files:
                path = os.path.join(root, name)
                self.ctx.emitter.emit("artifact", path=os.path.relpath(path, self.ctx.artifacts),
                                      bytes=os.path.getsize(path))
