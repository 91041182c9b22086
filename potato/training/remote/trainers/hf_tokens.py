"""``hf-token-classification``: fine-tune any ``AutoModelForTokenClassification`` base on a span
scheme, fully (the word-embedding matrix kept as pretrained unless ``train_embeddings``) or with
a LoRA adapter, and predict character spans with a confidence each.

Spans become BIO tags over the sub-word tokens of a fast tokenizer's offset mapping (every
sub-word of a span is tagged, spans.token_tags); a text longer than ``max_length`` tokens is
cut into windows that overlap by ``stride`` tokens, each a training example, and at prediction
a token's tag probabilities are averaged over the windows that hold it before the tags are read
back into character spans (spans.decode). The loop is hf_text's: texts tokenized once, batches
grouped by length, the loss on the device until the epoch ends, fused AdamW and bf16 autocast on
GPUs, data-parallel over the pinned GPUs (parallel.py). Saved with ``save_pretrained`` plus the
tokenizer and ``labels.json`` (the tags). Imported only by the worker.
"""

import json
import math
import os
import time

from potato.training.remote import spans as bio
from potato.training.remote.trainers import hf_text

torch = None  # imported by load(): importing this module never imports torch
AutoModelForTokenClassification = AutoTokenizer = None

SLOW_TOKENIZER = ("the tokenizer of %s is a slow (Python) tokenizer: hf-token-classification "
                  "needs a fast one (the tokenizers library) for its character offsets. Choose a "
                  "model that ships a tokenizer.json, or convert its tokenizer with "
                  "AutoTokenizer.from_pretrained(..., use_fast=True).save_pretrained(DIR)")


# Scripts written without spaces between words: a tokenizer's "word" there is a phrase.
NO_SPACE_SCRIPTS = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x3040, 0x30FF),
                    (0x3400, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F))


def _in_word(ch):
    cp = ord(ch)
    return (ch.isalnum() or ch == "_") and not any(a <= cp <= b for a, b in NO_SPACE_SCRIPTS)


def words_join(text, end, start):
    """Whether a sub-word at ``start`` continues the word that ends at ``end``: it touches it,
    and the characters on both sides of the join are word characters of a script written
    with spaces. The tokenizer's word ids alone are not enough: tokenizers that split only at
    whitespace (XLM-R, DeBERTa-v3: "Paris." is one word) or not at all (Llama-style) would
    make a word of a phrase."""
    return end == start and 0 < start < len(text) and _in_word(text[start - 1]) and \
        _in_word(text[start])


def load():
    """Import torch and transformers (when a run starts, in the worker only)."""
    global torch, AutoModelForTokenClassification, AutoTokenizer
    hf_text.load()
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer


class Trainer(hf_text.Trainer):
    """hf_text's Trainer with tags for labels: one scheme, spans per item."""

    predict_ranked = None  # spans: the server ranks by each item's confidence (its least sure word)

    def __init__(self, ctx):
        load()
        super().__init__(ctx)
        self.tags = bio.tag_names(self.labels)

    # -- tokens and windows ----------------------------------------------------------------
    def _windows(self, texts):
        """(token ids, offsets, text index, word ids) of every window of every text; a word id
        (the tokenizer's pre-tokenized words: split at whitespace and punctuation) counts over
        the whole text, whatever the window."""
        p = self.p
        enc = self.tokenizer(list(texts), truncation=True, max_length=p["max_length"],
                             stride=min(p["stride"], p["max_length"] // 2),
                             return_overflowing_tokens=True, return_offsets_mapping=True,
                             padding=False)
        out = []
        mapping = enc.get("overflow_to_sample_mapping") or list(range(len(enc["input_ids"])))
        for n, (ids, offsets) in enumerate(zip(enc["input_ids"], enc["offset_mapping"])):
            # a special token ([CLS], [SEP]) has no sequence id: no tag, no prediction
            offsets = [(int(a), int(b)) if seq is not None else (0, 0)
                       for (a, b), seq in zip(offsets, enc.sequence_ids(n))]
            out.append((ids, offsets, mapping[n], enc.word_ids(n)))
        return out

    def _collate_tags(self, rows):
        pad = self.tokenizer.pad_token_id or 0
        width = max(len(r[0]) for r in rows)
        ids = torch.tensor([r[0] + [pad] * (width - len(r[0])) for r in rows])
        mask = torch.tensor([[1] * len(r[0]) + [0] * (width - len(r[0])) for r in rows])
        tags = torch.tensor([r[1] + [bio.IGNORE] * (width - len(r[1])) for r in rows])
        return ({"input_ids": ids.to(self.device, non_blocking=True),
                 "attention_mask": mask.to(self.device, non_blocking=True)},
                tags.to(self.device, non_blocking=True))

    def _load_model(self):
        p = self.p
        self.ctx.emitter.status("loading %s" % p["model"])
        self.tokenizer = AutoTokenizer.from_pretrained(p["model"])
        if not getattr(self.tokenizer, "is_fast", False):
            raise self.ctx.RunFailure(SLOW_TOKENIZER % p["model"])
        import transformers

        dtype_kw = "dtype" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) \
            >= (4, 56) else "torch_dtype"
        model = AutoModelForTokenClassification.from_pretrained(
            p["model"], num_labels=len(self.tags), **{dtype_kw: torch.float32},
            **self._dropout(transformers.AutoConfig.from_pretrained(p["model"])),
            id2label=dict(enumerate(self.tags)),
            label2id=dict((t, i) for i, t in enumerate(self.tags)))
        if p["lora"]:
            from peft import LoraConfig, TaskType, get_peft_model

            model = get_peft_model(model, LoraConfig(task_type=TaskType.TOKEN_CLS, r=p["lora_r"],
                                                     lora_alpha=p["lora_alpha"],
                                                     lora_dropout=0.1))
        elif not p["train_embeddings"]:
            model.get_input_embeddings().weight.requires_grad_(False)
        model.to(self.device)
        self.model = model
        return model

    def _dropout(self, config):
        """Config overrides that set every dropout probability of the model to the dropout
        param (hidden_dropout_prob, attention_probs_dropout_prob, classifier_dropout, dropout,
        attention_dropout, GPT-2's resid_pdrop ...: any number setting whose name says
        dropout or pdrop); none for null."""
        if self.p["dropout"] is None:
            return {}
        value = float(self.p["dropout"])
        out = dict((k, value) for k, v in vars(config).items()
                   if ("dropout" in k or k.endswith("pdrop")) and
                   isinstance(v, (int, float)) and not isinstance(v, bool))
        if "classifier_dropout" in vars(config) and config.classifier_dropout is None:
            out["classifier_dropout"] = value  # None: some heads fall back to 0.1, not hidden's
        return out

    # -- training --------------------------------------------------------------------------
    def _train(self, group):
        ctx, p = self.ctx, self.p
        torch.manual_seed(p["seed"])
        self.device = group.device(lambda: hf_text.pick_device(ctx.device_request, ctx.log))
        ctx.log("device: %s; torch %s" % (self.device, torch.__version__))
        ctx.emitter.emit("where", device=hf_text.describe_device(self.device))
        model = self._load_model()
        torch.manual_seed(p["seed"] + group.rank)
        train = ctx.bundle.labelled("train", self.scheme)
        val = ctx.bundle.labelled("val", self.scheme)
        rows = [(ids, bio.token_tags(offsets, train[i][1], self.labels))
                for ids, offsets, i, _ in self._windows(t for t, _ in train)]
        params = [w for w in model.parameters() if w.requires_grad]
        lr = p["learning_rate"] or (2e-3 if p["lora"] else 5e-5)
        optim = torch.optim.AdamW(params, lr=lr, **hf_text._fused(self.device))
        total = math.ceil(len(rows) / p["batch_size"]) * p["epochs"]
        sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: max(0.0, 1 - s / total))
        ctx.log("training %d items (%d windows of at most %d tokens), %d steps (%d epochs), %s, "
                "learning rate %g, dropout %s, %d tags%s" % (
                    len(train), len(rows), p["max_length"], total, p["epochs"],
                    "LoRA" if p["lora"] else "full fine-tuning" if p["train_embeddings"] else
                    "full fine-tuning but the word embeddings", lr,
                    "as the model's" if p["dropout"] is None else "%g" % p["dropout"],
                    len(self.tags),
                    ", %d processes" % group.world if group.world > 1 else ""))
        ddp = group.wrap(model, self.device)
        lengths = [len(r[0]) for r in rows]
        state = {"step": 0, "total": total, "started": time.time(),
                 "every": max(1, total // 100)}
        metrics = {}
        for epoch in range(1, p["epochs"] + 1):
            ctx.emitter.status("epoch %d/%d" % (epoch, p["epochs"]))
            batches = group.batches(lengths, p["batch_size"], p["seed"], epoch)
            loss_sum, seen = self._epoch(ddp, group, batches, rows, None, optim, sched, state,
                                         epoch)
            train_loss = hf_text.check_loss(ctx, epoch, loss_sum / max(seen, 1))
            ctx.emitter.metric("loss", round(train_loss, 5), epoch=epoch, split="train")
            metrics["%s.train_loss" % self.scheme] = round(train_loss, 5)
            if val:
                f1 = self._val_f1(val, group)
                ctx.emitter.metric("entity_f1", round(f1, 4), epoch=epoch, split="val",
                                   step=state["step"])
                metrics["%s.val_entity_f1" % self.scheme] = round(f1, 4)
        return metrics

    def _forward(self, ddp, rows, batch, ys):
        """One training batch's loss (hf_text's _epoch calls it)."""
        enc, tags = self._collate_tags([rows[i] for i in batch])
        with self._autocast():
            return ddp(**enc, labels=tags).loss

    def _val_f1(self, val, group):
        """Entity micro-F1 on the val split, each rank predicting its share (summed counts)."""
        mine = val[group.rank::group.world]
        predicted = self.predict(self.scheme, [t for t, _ in mine]) if mine else []
        counts = bio.entity_counts([(s, g) for (s, _), (_, g) in zip(predicted, mine)],
                                   self.labels)
        tp, fp, fn = (sum(c[k] for c in counts.values()) for k in range(3))
        tp, fp, fn = group.all_sum([tp, fp, fn], self.device)
        return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0

    # -- prediction ------------------------------------------------------------------------
    def predict(self, scheme, texts, batch_size=64):
        """(spans, confidence) per text, in order: spans as [{start, end, label, confidence}],
        the confidence the lowest tag probability of the text's words (how sure the model is
        of its least sure word; 1.0 for a text without tokens). A span covers whole words: a
        word takes the tag of its first sub-word (the rest of a B word continues it)."""
        self.model.eval()
        texts = list(texts)
        windows = self._windows(texts)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i][0]))
        sums = [dict() for _ in texts]  # per text: {(start, end): [prob sums, windows, word]}
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                self.ctx.check_cancelled()
                chunk = [windows[i] for i in order[start:start + batch_size]]
                enc, _ = self._collate_tags([(w[0], []) for w in chunk])
                with self._autocast():
                    logits = self.model(**enc).logits
                probs = torch.softmax(logits.float(), dim=-1).cpu().tolist()
                for (_, offsets, t, words), rows in zip(chunk, probs):
                    for off, row, word in zip(offsets, rows, words):
                        if off[0] == off[1]:
                            continue
                        if off in sums[t]:  # a token two windows share: their mean
                            held = sums[t][off]
                            held[0] = [a + b for a, b in zip(held[0], row)]
                            held[1] += 1
                        else:
                            sums[t][off] = [row, 1, word]
        return [self._spans(text, acc) for text, acc in zip(texts, sums)]

    def _spans(self, text, acc):
        """Spans of one text from its tokens' mean probabilities, a word at a time."""
        words, lowest = [], 1.0  # [start, end, tag, prob, word id] per word, in text order
        for off in sorted(acc):
            total, n, word = acc[off]
            if words and word is not None and words[-1][4] == word and \
                    words_join(text, words[-1][1], off[0]):
                words[-1][1] = off[1]  # a later sub-word: the word grows, its tag stays
                continue
            tag = max(range(len(total)), key=total.__getitem__)
            prob = total[tag] / n
            lowest = min(lowest, prob)
            words.append([off[0], off[1], tag, prob, word])
        found = bio.decode(text, [w[:4] for w in words], self.labels)
        for s in found:
            s["confidence"] = round(min(1.0, s["confidence"]), 6)
        return found, min(1.0, lowest)

    def _save(self):
        self.ctx.emitter.status("saving the model")
        out = os.path.join(self.ctx.artifacts, "model")
        self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        with open(os.path.join(out, "labels.json"), "w") as f:
            json.dump({"scheme": self.scheme, "labels": self.labels, "tags": self.tags,
                       "lora": bool(self.p["lora"]), "base_model": self.p["model"]}, f)
        for root, _, files in os.walk(out):
            for name in files:
                path = os.path.join(root, name)
                self.ctx.emitter.emit("artifact", path=os.path.relpath(path, self.ctx.artifacts),
                                      bytes=os.path.getsize(path))
