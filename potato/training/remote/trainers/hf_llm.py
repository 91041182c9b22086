"""``hf-llm-classification``: fine-tune a causal LM with a LoRA adapter to answer a scheme's
question with one of its labels.

Each item becomes a prompt (``llm_prompt``) followed by the answer `` <label>`` and the
tokenizer's EOS; the loss covers only the answer tokens. Prediction scores every label's answer
and never generates (llm_scoring.py).

A plain PyTorch loop like ``hf_text``: progress per optimizer step with an ETA, cancellation
between micro-batches, micro-batches grouped by length (little padding). With several GPUs (or
``processes`` on the CPU) it trains data-parallel, one process per GPU (parallel.py), as
``hf_text`` does: ``batch_size`` is the items of one micro-batch over all the processes (each
takes its share), an optimizer step is ``gradient_accumulation`` micro-batches, so a step sees
the same batch_size x gradient_accumulation items and a run has the same steps however many
processes share it. Rank 0 alone reports, saves and (in the worker) predicts. Saved with
``save_pretrained`` (adapter, tokenizer, ``labels.json`` with the template) so plain
transformers/peft code loads it. Imported only by the worker.
"""

import contextlib
import importlib.util
import inspect
import json
import math
import os
import sys
import time

from potato.training.remote import llm_prompt
from potato.training.remote.trainers import parallel
from potato.training.remote.trainers.hf_text import check_loss, describe_device, pick_device
from potato.training.remote.trainers.llm_scoring import Scoring

torch = None  # imported by load(): importing this module never imports torch
transformers = AutoModelForCausalLM = AutoTokenizer = None


def load():
    """Import torch, transformers and peft (when a run starts, in the worker only)."""
    global torch, transformers, AutoModelForCausalLM, AutoTokenizer
    import peft  # noqa: F401  (a missing peft fails here, before the run starts)
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer


NO_CUDA_4BIT = ("load_in_4bit needs a CUDA GPU (bitsandbytes NF4 quantisation), but this run's "
                "device is %s. Set load_in_4bit=false to train without quantisation, or run on "
                "a backend with an NVIDIA GPU.")
NO_BNB_4BIT = ("load_in_4bit needs the %s package, which %s cannot import. Install it there "
               "(pip install 'potato-annotation[train-llm]', or pip install %s), or set "
               "load_in_4bit=false.")
NO_BF16 = ("bf16=true but %s does not support bfloat16. Set bf16=auto (or false) to train in "
           "float32.")


def _dtype_kwarg():
    """from_pretrained's dtype keyword: ``dtype`` since transformers 4.56, ``torch_dtype``
    before."""
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


class Trainer(Scoring):
    def __init__(self, ctx):
        load()
        self.ctx = ctx
        self.p = ctx.params
        self.scheme = next(iter(ctx.schemas))
        schema = ctx.schemas[self.scheme]
        self.labels = list(schema["labels"])
        self.description = " ".join(x for x in (schema.get("description") or "",
                                                llm_prompt.scale_note(schema)) if x)
        self.template = self.p["prompt_template"] or llm_prompt.DEFAULT_TEMPLATE
        try:
            llm_prompt.check_template(self.template)
        except llm_prompt.SettingError as e:
            raise ctx.RunFailure(str(e))
        # Fail before anything loads: a 4-bit run never silently trains in full precision.
        self.device = pick_device(ctx.device_request, ctx.log)
        dist = getattr(ctx, "dist", None)
        if dist and dist["backend"] == "nccl":  # a child rank: its own GPU (parallel.Group)
            torch.cuda.set_device(dist["rank"])
            self.device = torch.device("cuda:%d" % dist["rank"])
        if self.p["load_in_4bit"]:
            if self.device.type != "cuda":
                raise ctx.RunFailure(NO_CUDA_4BIT % self.device)
            for package in ("bitsandbytes", "accelerate"):
                if importlib.util.find_spec(package) is None:
                    raise ctx.RunFailure(NO_BNB_4BIT % (package, "Python %s" % sys.executable,
                                                        package))
        self.bf16 = self._use_bf16()
        self.model = None
        self.tokenizer = None

    def _use_bf16(self):
        choice = self.p["bf16"]
        cuda = self.device.type == "cuda"
        supported = cuda and torch.cuda.is_bf16_supported()
        if choice == "true" and cuda and not supported:
            raise self.ctx.RunFailure(NO_BF16 % torch.cuda.get_device_name(self.device))
        return choice == "true" or (choice == "auto" and supported)

    def _autocast(self):
        if self.bf16:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return torch.autocast(self.device.type, enabled=False)

    # -- the model ------------------------------------------------------------------------------
    def load(self):
        """The tokenizer, the label answers' tokens and the model (``tokenizer``, ``model``),
        as training loads them: a max_length or labels that cannot work fail before the
        model is loaded. After it, ``label_scores`` and ``prompt_ids`` work untrained."""
        self._load_tokenizer()
        self._prepare_tokens()
        self._load_model()

    def _load_tokenizer(self):
        p, ctx = self.p, self.ctx
        ctx.emitter.status("loading %s" % p["model"])
        try:
            tok = AutoTokenizer.from_pretrained(p["model"])
        except (OSError, ValueError) as e:
            raise ctx.RunFailure(
                "the tokenizer of %s could not be loaded: %s. The model param must be a Hub id "
                "the host can download, or a directory with the model's tokenizer files "
                "(tokenizer.json or its vocabulary)" % (p["model"], str(e).splitlines()[0][:300]))
        if tok.eos_token_id is None:
            raise ctx.RunFailure("the tokenizer of %s has no end-of-sequence token, which ends "
                                 "every answer; use a causal LM whose tokenizer has one"
                                 % p["model"])
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token  # positions, not token values, mark padding here
        self.tokenizer = tok

    def _load_model(self):
        p, tok = self.p, self.tokenizer
        # Always an explicit dtype: transformers 5 otherwise loads the checkpoint's own (often
        # bfloat16), whatever bf16 says.
        kwargs = {_dtype_kwarg(): torch.bfloat16 if self.bf16 else torch.float32}
        if p["load_in_4bit"]:
            compute = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            kwargs[_dtype_kwarg()] = compute
            kwargs["quantization_config"] = transformers.BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute,
                bnb_4bit_use_double_quant=True)
            # every rank loads its own copy on its own GPU (self.device is cuda:RANK there)
            kwargs["device_map"] = {"": self.device.index or 0}
        model = AutoModelForCausalLM.from_pretrained(p["model"], **kwargs)
        model.config.use_cache = False
        model.config.pad_token_id = tok.pad_token_id
        gc_kwargs = {"use_reentrant": False}
        if p["load_in_4bit"]:
            from peft import prepare_model_for_kbit_training

            model = prepare_model_for_kbit_training(
                model, use_gradient_checkpointing=p["gradient_checkpointing"],
                gradient_checkpointing_kwargs=gc_kwargs)
        elif p["gradient_checkpointing"]:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gc_kwargs)
        self.model = self._add_lora(model)
        if not p["load_in_4bit"]:
            self.model.to(self.device)
        forward = inspect.signature(self.model.get_base_model().forward).parameters
        self.keep_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep")
                             if k in forward), None)

    def _add_lora(self, model):
        from peft import LoraConfig, TaskType, get_peft_model

        p = self.p
        model_type = getattr(model.config, "model_type", "")
        try:
            targets = llm_prompt.target_modules(p["lora_target_modules"], model_type)
            config = LoraConfig(task_type=TaskType.CAUSAL_LM, r=p["lora_r"],
                                lora_alpha=p["lora_alpha"], lora_dropout=p["lora_dropout"],
                                target_modules=targets)
            model = get_peft_model(model, config)
        except ValueError as e:
            raise self.ctx.RunFailure(
                "LoRA could not be set up on %s (model type %r): %s Set lora_target_modules to "
                "its attention projections (e.g. q_proj,v_proj) or all-linear."
                % (p["model"], model_type, " ".join(str(e).split())[:600].rstrip(".") + "."))
        self.targets = targets
        return model

    # -- tokens ---------------------------------------------------------------------------------
    def _prepare_tokens(self):
        """Answer ids per label, and the room the item text has within max_length."""
        tok, limit = self.tokenizer, self.p["max_length"]
        self.answers = [tok(llm_prompt.answer(lab), add_special_tokens=False)["input_ids"]
                        + [tok.eos_token_id] for lab in self.labels]
        seen = {}
        for lab, ids in zip(self.labels, self.answers):
            if tuple(ids) in seen:
                raise self.ctx.RunFailure(
                    "labels %r and %r are the same tokens for the tokenizer of %s, so the model "
                    "cannot tell them apart; rename one label or use another model"
                    % (seen[tuple(ids)], lab, self.p["model"]))
            seen[tuple(ids)] = lab
        self.longest_answer = max(len(a) for a in self.answers)
        overhead = len(self._ids(self._render("")))
        self.text_room = limit - self.longest_answer - overhead
        if self.text_room < 1:
            raise self.ctx.RunFailure(
                "max_length %d leaves no room for the item text: the prompt template takes %d "
                "tokens and the longest answer %d; raise max_length or shorten prompt_template"
                % (limit, overhead, self.longest_answer))

    def _render(self, text):
        return llm_prompt.render(self.template, self.scheme, self.labels, text, self.description)

    def _ids(self, prompt):
        # split_special_tokens: "</s>" or "<|im_end|>" inside an item's text is text, not the
        # tokenizer's control token
        return self.tokenizer(prompt, add_special_tokens=True,
                              split_special_tokens=True)["input_ids"]

    def prompt_ids(self, text):
        """The prompt's token ids, the item text cut so that prompt + answer fit max_length."""
        limit = self.p["max_length"] - self.longest_answer
        ids = self._ids(self._render(text))
        room = self.text_room
        while len(ids) > limit and room > 0:
            ids = self._ids(self._render(self._cut(text, room)))
            room -= max(len(ids) - limit, 1)  # the cut text may tokenise differently in place
        ids = ids if len(ids) <= limit else ids[-limit:]
        # the answer's first token is predicted from the prompt's last: never an empty prompt
        return ids or [self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None
                       else self.tokenizer.eos_token_id]

    def _cut(self, text, room):
        """The start of ``text`` that is ``room`` tokens long: cut in the original text (by
        the fast tokenizer's offsets), else decoded from the tokens."""
        tok = self.tokenizer
        if getattr(tok, "is_fast", False):
            offsets = tok(text, add_special_tokens=False, split_special_tokens=True,
                          return_offsets_mapping=True)["offset_mapping"][:room]
            return text[:offsets[-1][1]] if offsets else ""
        ids = tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"][:room]
        return tok.decode(ids)

    # -- training -------------------------------------------------------------------------------
    def train(self):
        """Train on one process, or data-parallel on several (parallel.train); rank 0 saves."""
        return parallel.train(self)

    def _train(self, group):
        ctx, p = self.ctx, self.p
        emit = ctx.emitter
        torch.manual_seed(p["seed"])  # the same LoRA init on every rank
        self.device = group.device(lambda: self.device)
        train = ctx.bundle.labelled("train", self.scheme)
        val = ctx.bundle.labelled("val", self.scheme)
        ctx.log("device: %s; torch %s; transformers %s" % (self.device, torch.__version__,
                                                           transformers.__version__))
        self.load()
        torch.manual_seed(p["seed"] + group.rank)  # LoRA dropout differs between ranks
        emit.emit("where", device=describe_device(self.device))
        examples = [(self.prompt_ids(t), self.answers[self.labels.index(lab)])
                    for t, lab in train]
        weights = [w for w in self.model.parameters() if w.requires_grad]
        optim = torch.optim.AdamW(weights, lr=p["learning_rate"])
        batches = math.ceil(len(examples) / p["batch_size"])
        per_epoch = math.ceil(batches / p["gradient_accumulation"])
        total = per_epoch * p["epochs"]
        sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: max(0.0, 1 - s / total))
        ctx.log("training %d items, %d steps (%d epochs, batch %d x %d), LoRA r=%d on %s, %s, "
                "learning rate %g, %d trainable parameters%s"
                % (len(examples), total, p["epochs"], p["batch_size"],
                   p["gradient_accumulation"], p["lora_r"], self.targets or "peft's default",
                   "4-bit NF4" if p["load_in_4bit"] else ("bf16" if self.bf16 else "float32"),
                   p["learning_rate"], sum(w.numel() for w in weights),
                   ", %d processes" % group.world if group.world > 1 else ""))
        ddp = group.wrap(self.model, self.device)
        lengths = [len(a) + len(b) for a, b in examples]
        # a loss point for the chart about every 1% of the run (at most ~100 per run)
        self.progress = {"step": 0, "total": total, "started": time.time(),
                         "every": max(1, total // 100)}
        metrics = {}
        for epoch in range(1, p["epochs"] + 1):
            emit.status("epoch %d/%d" % (epoch, p["epochs"]))
            # global micro-batches of batch_size items, this rank's share of each
            chunks = group.batches(lengths, p["batch_size"], p["seed"], epoch)
            loss_sum, n = self._epoch(ddp, group, examples, chunks, optim, sched, weights,
                                      epoch)
            train_loss = check_loss(self.ctx, epoch, loss_sum / max(n, 1))
            emit.metric("loss", round(train_loss, 5), epoch=epoch, split="train")
            metrics["%s.train_loss" % self.scheme] = round(train_loss, 5)
            if val:
                acc = parallel.accuracy(lambda texts: self.predict(self.scheme, texts), val,
                                        group, self.device)
                emit.metric("accuracy", round(acc, 4), epoch=epoch, split="val",
                            step=self.progress["step"])
                metrics["%s.val_accuracy" % self.scheme] = round(acc, 4)
        return metrics

    def _epoch(self, ddp, group, examples, chunks, optim, sched, weights, epoch):
        """One pass over this rank's micro-batches; (sum of micro-batch mean losses, number of
        micro-batches) over every rank. Gradients are all-reduced once per optimizer step: the
        micro-batches before a step's last run under ``ddp.no_sync()``."""
        ctx, accum = self.ctx, self.p["gradient_accumulation"]
        ddp.train()
        # losses stay on the device (no host sync per micro-batch): the epoch's sum, and the
        # window since rank 0's last per-step point (read once per point)
        loss_sum = torch.zeros((), device=self.device)
        window, in_window = torch.zeros((), device=self.device), 0
        for b, chunk in enumerate(chunks):
            ctx.check_cancelled()
            group_start = b - b % accum
            size = min(accum, len(chunks) - group_start)
            if b == group_start:
                group.step(self.progress["step"] + 1)
            last_of_step = b - group_start + 1 == size
            ids, mask, labels, _ = self._rows([examples[i] for i in chunk], left=False)
            sync = ddp.no_sync() if group.world > 1 and not last_of_step \
                else contextlib.nullcontext()
            with sync:
                with self._autocast():
                    loss = ddp(input_ids=ids, attention_mask=mask, labels=labels).loss
                (loss / size).backward()
            value = loss.detach().float()
            loss_sum += value
            window += value
            in_window += 1
            if not last_of_step:
                continue
            torch.nn.utils.clip_grad_norm_(weights, 1.0)
            optim.step()
            sched.step()
            optim.zero_grad(set_to_none=True)
            prog = self.progress
            prog["step"] += 1
            elapsed = time.time() - prog["started"]
            ctx.emitter.progress(prog["step"], prog["total"], unit="step", epoch=epoch,
                                 eta_s=elapsed / prog["step"] * (prog["total"] - prog["step"]))
            last = b == len(chunks) - 1  # an epoch's last step always gets its point
            if group.is_main and (prog["step"] % prog["every"] == 0 or last):
                ctx.emitter.metric("loss", round((window / in_window).item(), 5),
                                   step=prog["step"], epoch=epoch, split="train")
                window.zero_()
                in_window = 0
        return group.all_sum([loss_sum, len(chunks)], self.device)

    def _save(self):
        self.ctx.emitter.status("saving the model")
        out = os.path.join(self.ctx.artifacts, "model")
        self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        with open(os.path.join(out, "labels.json"), "w", encoding="utf-8") as f:
            json.dump({"scheme": self.scheme, "labels": self.labels,
                       "description": self.description, "base_model": self.p["model"],
                       "prompt_template": self.template, "answer_prefix": " ",
                       "answer_ends_with_eos": True, "lora": True,
                       "load_in_4bit": bool(self.p["load_in_4bit"])}, f, ensure_ascii=False)
        for root, _, files in os.walk(out):
            for name in files:
                path = os.path.join(root, name)
                self.ctx.emitter.emit("artifact", path=os.path.relpath(path, self.ctx.artifacts),
                                      bytes=os.path.getsize(path))

