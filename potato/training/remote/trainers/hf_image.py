"""``hf-image-classification``: fine-tune any ``AutoModelForImageClassification`` (ViT,
ConvNeXt, ResNet, ...) with its ``AutoImageProcessor`` on the items' images, fully or with a
LoRA adapter, for radio (one label) and multiselect (labels, one sigmoid each) schemes.

It is hf_text's trainer with images in place of token ids: the same loop, events, data
parallelism (parallel.py), validation and saving; the images are read from each item's media
file (remote/media.py ``path_for``) a batch at a time, so a large set never sits in memory.
``augment`` adds light, label-safe augmentation while training: a random crop of 85-100% of
the image resized back, and a small brightness change (no flips: a flipped digit or text is
another class). Saved with ``save_pretrained`` (model or adapter) plus the image processor and
``labels.json``.
Imported only by the worker.
"""

import os
import random

from potato.training.remote import media as media_mod
from potato.training.remote.trainers import hf_text, parallel

torch = Image = ImageEnhance = None
AutoImageProcessor = AutoModelForImageClassification = None


def load_torch():
    """Import torch alone: what this module's loop needs (hf_audio trains with it, without
    Pillow)."""
    global torch
    hf_text.load()
    import torch


def load():
    """Import torch, transformers and Pillow (when a run starts, in the worker only)."""
    global Image, ImageEnhance, AutoImageProcessor, AutoModelForImageClassification
    load_torch()
    from PIL import Image, ImageEnhance
    from transformers import AutoImageProcessor, AutoModelForImageClassification


class Trainer(hf_text.Trainer):
    takes_items = True  # predict() gets bundle items (with their media), not texts

    def __init__(self, ctx):
        load()
        super().__init__(ctx)
        schema = ctx.schemas[self.scheme]
        self.multi = schema.get("type") == "multiselect"
        self.processor = None
        self._max_side = 1024
        self._rng = random.Random(self.p["seed"])
        self._check_media()

    def _check_media(self):
        """Every item the run reads (the unlabelled ones it will predict too) must have an
        image here that Pillow can decode: checked before training, one sentence naming a few,
        so no run trains for an hour and then fails on one bad file."""
        missing = []
        for item in self.ctx.bundle.items:
            self.ctx.check_cancelled()
            m = item.get("media")
            if not m or m.get("kind") != "image":
                missing.append("%s (no image)" % item["id"])
                continue
            try:
                path = media_mod.path_for(m, self.ctx.spec)
                with Image.open(path) as im:
                    im.verify()  # the file's structure and checksums, without decoding it all
            except media_mod.MediaMissing as e:
                missing.append("%s (%s)" % (item["id"], e))
            except Exception as e:  # Pillow raises many kinds (UnidentifiedImageError, OSError,
                # SyntaxError, DecompressionBombError): each is a file this run cannot read
                missing.append("%s (%s: %s)" % (item["id"], os.path.basename(path),
                                                _first_line(e)))
        if missing:
            raise self.ctx.RunFailure(
                "%d of %d items have no image this trainer can read: %s%s. Check "
                "item_properties.image_key and the media files (potato validate lists them)."
                % (len(missing), len(self.ctx.bundle.items), "; ".join(missing[:3]),
                   " ..." if len(missing) > 3 else ""))

    # -- inputs: items, read a batch at a time -------------------------------------------------
    def _labelled(self, split):
        """(item, label) pairs: the loop reads images from the items' media."""
        return [(it, it["labels"][self.scheme]) for it in self.ctx.bundle.items
                if it["split"] == split and self.scheme in it["labels"]]

    def _encode(self, items):
        """The image file of each item (opened when its batch is built)."""
        return [media_mod.path_for(it["media"], self.ctx.spec) for it in items]

    def _image(self, path, augment):
        with Image.open(path) as im:
            im = to_rgb(im, self._max_side)
        if augment:
            w, h = im.size
            scale = self._rng.uniform(0.85, 1.0)
            cw, ch = max(1, int(w * scale)), max(1, int(h * scale))
            x, y = self._rng.randint(0, w - cw), self._rng.randint(0, h - ch)
            im = im.crop((x, y, x + cw, y + ch)).resize((w, h))
            im = ImageEnhance.Brightness(im).enhance(self._rng.uniform(0.9, 1.1))
        return im

    def _collate(self, rows, augment=False):
        images = [self._image(path, augment) for path in rows]
        pixels = self.processor(images=images, return_tensors="pt")["pixel_values"]
        return {"pixel_values": pixels.to(self.device, non_blocking=True)}

    def _load_model(self):
        p = self.p
        self.ctx.emitter.status("loading %s" % p["model"])
        self.processor = AutoImageProcessor.from_pretrained(p["model"])
        self._max_side = max_side(self.processor)
        import transformers

        dtype_kw = "dtype" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) \
            >= (4, 56) else "torch_dtype"
        model = AutoModelForImageClassification.from_pretrained(
            p["model"], ignore_mismatched_sizes=True, **{dtype_kw: torch.float32},
            **self._head())
        if p["lora"]:
            from peft import LoraConfig, get_peft_model

            head = [n for n in ("classifier", "fc", "head") if hasattr(model, n)]
            try:
                model = get_peft_model(model, LoraConfig(
                    r=p["lora_r"], lora_alpha=p["lora_alpha"], lora_dropout=0.1,
                    target_modules="all-linear", modules_to_save=head or None))
            except ValueError as e:  # e.g. a convolutional model with no linear layer to adapt
                raise self.ctx.RunFailure(
                    "lora: %s has no layers a LoRA adapter can adapt here (%s); set lora to "
                    "false to train every weight" % (p["model"], str(e).splitlines()[0][:200]))
        model.to(self.device)
        self.model = model
        return model

    def _head(self):
        head = super()._head()
        if self.multi:
            head["problem_type"] = "multi_label_classification"
        return head

    def _targets(self, train):
        if self.multi:
            return [[1.0 if lab in labs else 0.0 for lab in self.labels] for _, labs in train]
        return super()._targets(train)

    def _validate(self, val, group, epoch, step, metrics):
        if self.multi:  # exact-set accuracy: the predicted label set is the gold one
            val = [(it, sorted(labs)) for it, labs in val]
            predict = lambda items: [(sorted(lab), c) for lab, c in self.predict(self.scheme,
                                                                                 items)]
        else:
            predict = lambda items: self.predict(self.scheme, items)
        acc = parallel.accuracy(predict, val, group, self.device)
        self.ctx.emitter.metric("accuracy", round(acc, 4), epoch=epoch, split="val", step=step)
        metrics["%s.val_accuracy" % self.scheme] = round(acc, 4)

    def _forward(self, ddp, rows, batch, ys):
        enc = self._collate([rows[i] for i in batch], augment=self.p.get("augment", False))
        y = torch.tensor([ys[i] for i in batch])
        with self._autocast():
            return ddp(**enc, labels=y.to(self.device, non_blocking=True)).loss

    def predict(self, scheme, items, batch_size=64):
        """(label, confidence) per item: for multiselect, the labels whose sigmoid is at least
        0.5, with the least certain of those yes/no decisions as the confidence."""
        return [answer[:2] for answer in self._scored(items, batch_size)]

    def predict_ranked(self, scheme, items, batch_size=64):
        """As ``predict``, with each label's probability (softmax; for multiselect each
        label's own sigmoid) for active learning; no vector (the server's fallback applies)."""
        return self._scored(items, batch_size)

    def _scored(self, items, batch_size):
        self.model.eval()
        rows = self._encode(items)
        out = []
        with torch.inference_mode():
            for start in range(0, len(rows), batch_size):
                self.ctx.check_cancelled()
                with self._autocast():
                    logits = self.model(**self._collate(rows[start:start + batch_size])).logits
                if self.multi:
                    probs = torch.sigmoid(logits.float()).tolist()
                    for row in probs:
                        chosen = [lab for lab, q in zip(self.labels, row) if q >= 0.5]
                        out.append((chosen, min(max(q, 1 - q) for q in row),
                                    {"probabilities": dict(zip(map(str, self.labels), row))}))
                else:
                    probs = torch.softmax(logits.float(), dim=-1)
                    conf, idx = probs.max(dim=-1)
                    out.extend((self.labels[k], c, {"probabilities": dict(
                        zip(map(str, self.labels), p))})
                        for k, c, p in zip(idx.tolist(), conf.tolist(), probs.tolist()))
        return out

    def _save(self):
        self.tokenizer = self.processor  # hf_text's _save saves "the tokenizer" beside the model
        super()._save()



def _first_line(e):
    text = str(e).splitlines()[0][:160] if str(e) else ""
    return "%s%s" % (type(e).__name__, ": " + text if text else "")


def max_side(processor):
    """The longest side worth decoding an image at: twice the processor's largest size (or
    1,024 pixels), so a 12,000-pixel photo is shrunk once, on its own, before a batch holds
    it."""
    size = getattr(processor, "size", None) or {}
    sides = [v for v in (size.values() if isinstance(size, dict) else [size])
             if isinstance(v, int)]
    return max([1024] + [2 * v for v in sides])


def to_rgb(im, limit):
    """An 8-bit RGB copy of a decoded image no larger than ``limit`` on its longest side.
    16-bit and 32-bit greyscale (modes I;16, I) are scaled to 8 bits by their bit depth, and
    floating-point ones (F) by their own range: a plain convert("RGB") clips them to white."""
    im.load()
    if im.mode.startswith("I;16") or im.mode == "I":
        im = im.convert("I").point(lambda v: v * (1 / 257.0)).convert("L")
    elif im.mode == "F":
        lo, hi = im.getextrema()
        span = (hi - lo) or 1.0
        im = im.point(lambda v: (v - lo) * (255.0 / span)).convert("L")
    if max(im.size) > limit:
        im.thumbnail((limit, limit))
    return im.convert("RGB")
