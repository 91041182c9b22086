"""``hf-text-regression``: fine-tune a transformers encoder with a regression head (one output,
``problem_type="regression"``: a mean squared error loss), fully or with a LoRA adapter, to
predict a slider's or number scheme's value.

The same loop as ``hf_text`` (length-grouped batches, progress with an ETA, cancellation
between steps, bf16 autocast on GPUs that have it, data-parallel over several GPUs); only the
head, the targets, the validation figure and the predictions differ. Targets are standardised
by the train split's mean and standard deviation (a head starts near 0, whatever the scale of
the scheme: 0..1 or 0..1000); predictions are turned back into the scheme's units and clipped
to its min_value..max_value. A regression head gives no probability, so every prediction's
confidence is 1 (writeback.min_confidence does not filter them). Saved like hf_text, with
``regression.json`` (mean, scale, bounds) beside the model. Imported only by the worker.
"""

import math

from potato.training.remote.trainers import hf_text

LIMIT = 1e15  # a number scheme without bounds: what the server accepts (boundary.py)


def load():
    """Import torch and transformers (when a run starts, in the worker only)."""
    hf_text.load()


class Trainer(hf_text.Trainer):
    info_file = "regression.json"

    predict_ranked = None  # a regression's number has no probabilities to rank by

    def __init__(self, ctx):
        super().__init__(ctx)
        schema = ctx.schemas[self.scheme]
        self.lo = schema.get("min_value")
        self.hi = schema.get("max_value")
        self.mean, self.scale = 0.0, 1.0

    def _head(self):
        return {"num_labels": 1, "problem_type": "regression"}

    def _targets(self, train):
        """Standardised values (every rank computes the same mean and scale from the same
        train split)."""
        values = [float(v) for _, v in train]
        self.mean = sum(values) / len(values)
        self.scale = math.sqrt(sum((v - self.mean) ** 2 for v in values) / len(values)) or 1.0
        return [(v - self.mean) / self.scale for v in values]

    def _info(self):
        return {"mean": self.mean, "scale": self.scale, "min_value": self.lo,
                "max_value": self.hi}

    def _clip(self, value):
        lo = -LIMIT if self.lo is None else self.lo
        hi = LIMIT if self.hi is None else self.hi
        return min(max(value, lo), hi)

    def _validate(self, val, group, epoch, step, metrics):
        """The validation split's mean absolute error, in the scheme's units (each rank
        predicts its share)."""
        mine = val[group.rank::group.world]
        predicted = self.predict(self.scheme, [t for t, _ in mine]) if mine else []
        err = sum(abs(p - float(g)) for (p, _), (_, g) in zip(predicted, mine))
        err, n = group.all_sum([err, len(mine)], self.device)
        mae = round(err / max(n, 1), 5)
        self.ctx.emitter.metric("mae", mae, epoch=epoch, split="val", step=step)
        metrics["%s.val_mae" % self.scheme] = mae

    def predict(self, scheme, texts, batch_size=64):
        """(value, 1.0) per text, in order: the head's output in the scheme's units, clipped
        to its range."""
        torch = hf_text.torch
        self.model.eval()
        rows = self._encode(texts)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        out = [None] * len(rows)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                self.ctx.check_cancelled()
                chunk = order[start:start + batch_size]
                with self._autocast():
                    logits = self.model(**self._collate([rows[i] for i in chunk])).logits
                for i, v in zip(chunk, logits.float()[:, 0].tolist()):
                    value = v * self.scale + self.mean if math.isfinite(v) else self.mean
                    out[i] = (round(self._clip(value), 6), 1.0)
        return out
