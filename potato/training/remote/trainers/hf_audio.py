"""``hf-audio-classification``: fine-tune any ``AutoModelForAudioClassification`` (Wav2Vec2,
HuBERT, WavLM, AST, Whisper's encoder ...) with its ``AutoFeatureExtractor`` on the items'
audio, fully or with a LoRA adapter, for radio (one label) and multiselect (labels, one sigmoid
each) schemes.

It is hf_image's trainer with sound in place of pictures: the same loop (hf_text's), events,
data parallelism, multiselect head, validation, prediction and saving. Each item's audio file
is read a batch at a time (audio_io.py: WAV here, MP3/Ogg/FLAC with soundfile when it is
installed), mixed down to mono, cut at ``max_seconds`` and resampled to the feature
extractor's ``sampling_rate``. Saved with ``save_pretrained`` (model or adapter) plus the
feature extractor and ``labels.json``.
Imported only by the worker.
"""

import inspect
import os

from potato.training.remote import media as media_mod
from potato.training.remote.trainers import audio_io, hf_image, hf_text

torch = AutoFeatureExtractor = AutoModelForAudioClassification = None
HEADS = ("projector", "classifier", "head", "fc")  # trained fully beside a LoRA adapter


def load():
    """Import torch, numpy and transformers (when a run starts, in the worker only)."""
    global torch, AutoFeatureExtractor, AutoModelForAudioClassification
    hf_image.load_torch()
    import numpy  # noqa: F401  (audio_io decodes with it: missing, it fails here, at the start)
    import torch
    from transformers import AutoFeatureExtractor, AutoModelForAudioClassification


class Trainer(hf_image.Trainer):
    takes_items = True  # predict() gets bundle items (with their media), not texts

    def __init__(self, ctx):
        load()
        hf_text.Trainer.__init__(self, ctx)  # not hf_image's: that one reads images
        self.multi = ctx.schemas[self.scheme].get("type") == "multiselect"
        self.processor = None
        self.rate = None
        self._pad = {}
        self._keep_mask = True  # False: the extractor's mask only normalises, the model skips it
        self._least = self._field = 0  # samples: see min_samples
        self._check_media()

    def _check_media(self):
        """Every item the run reads (the unlabelled ones it will predict too) must have an
        audio file here that this trainer can decode: its header is checked before training,
        so one bad file fails the run at its start in one sentence, not an hour in."""
        bad, needs = [], {}
        for item in self.ctx.bundle.items:
            self.ctx.check_cancelled()
            m = item.get("media")
            if not m or m.get("kind") != "audio":
                bad.append("%s (no audio)" % item["id"])
                continue
            name = m.get("name") or os.path.basename(m.get("path") or m.get("url") or "")
            try:
                audio_io.check(media_mod.path_for(m, self.ctx.spec))
            except media_mod.MediaMissing as e:
                bad.append("%s (%s)" % (item["id"], e))
            except audio_io.NeedsSoundfile as e:
                needs.setdefault(e.format, []).append(name)
            except (audio_io.AudioError, OSError) as e:
                bad.append("%s (%s: %s)" % (item["id"], name, e))
        n = len(self.ctx.bundle.items)
        if bad:
            raise self.ctx.RunFailure(
                "%d of %d items have no audio this trainer can read: %s%s. Check "
                "item_properties.audio_key and the media files (potato validate lists them)."
                % (len(bad), n, "; ".join(bad[:3]), " ..." if len(bad) > 3 else ""))
        if needs:
            raise self.ctx.RunFailure(needs_sentence(needs, n))

    # -- inputs: items' audio files, read a batch at a time -------------------------------------
    def _clip(self, path):
        x, rate = audio_io.read(path, self.p["max_seconds"])
        return audio_io.resample(x, rate, self.rate)

    def _collate(self, rows, augment=False):
        clips = [self._clip(path) for path in rows]
        enc = self.processor(clips, sampling_rate=self.rate, return_tensors="pt", **self._pad)
        enc = dict((k, v) for k, v in enc.items() if hasattr(v, "to"))
        if not self._keep_mask:
            enc.pop("attention_mask", None)
        enc = pad_short(enc, self._least, self._field,
                        float(getattr(self.processor, "padding_value", 0.0) or 0.0))
        return dict((k, v.to(self.device, non_blocking=True)) for k, v in enc.items())

    def _forward(self, ddp, rows, batch, ys):
        """The loss from the logits here: Wav2Vec2's and HuBERT's heads always take
        cross-entropy, whatever the config's problem_type, so a multiselect scheme's sigmoid
        loss (one yes/no per label) is computed by the trainer for every model alike."""
        enc = self._collate([rows[i] for i in batch])
        y = torch.tensor([ys[i] for i in batch]).to(self.device, non_blocking=True)
        with self._autocast():
            logits = ddp(**enc).logits.float()
        if self.multi:
            return torch.nn.functional.binary_cross_entropy_with_logits(logits, y.float())
        return torch.nn.functional.cross_entropy(logits, y)

    def _load_model(self):
        p = self.p
        self.ctx.emitter.status("loading %s" % p["model"])
        self.processor = AutoFeatureExtractor.from_pretrained(p["model"])
        self.rate = int(getattr(self.processor, "sampling_rate", 0) or 16000)
        self._pad = padding(self.processor)
        self._keep_mask = bool(getattr(self.processor, "return_attention_mask", True))
        self.ctx.log("audio: mono at %d Hz (the feature extractor's rate), the first %g s of "
                     "each clip" % (self.rate, p["max_seconds"]))
        import transformers

        dtype_kw = "dtype" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) \
            >= (4, 56) else "torch_dtype"
        model = AutoModelForAudioClassification.from_pretrained(
            p["model"], ignore_mismatched_sizes=True, **{dtype_kw: torch.float32},
            **dict(self._head(), **no_layerdrop(p["model"])))
        self._least, self._field = min_samples(model.config)
        if p["lora"]:
            from peft import LoraConfig, get_peft_model

            head = [n for n in HEADS if hasattr(model, n)]
            try:
                model = get_peft_model(model, LoraConfig(
                    r=p["lora_r"], lora_alpha=p["lora_alpha"], lora_dropout=0.1,
                    target_modules="all-linear", modules_to_save=head or None))
            except ValueError as e:
                raise self.ctx.RunFailure(
                    "lora: %s has no layers a LoRA adapter can adapt here (%s); set lora to "
                    "false to train every weight" % (p["model"], str(e).splitlines()[0][:200]))
        model.to(self.device)
        self.model = model
        return model


def needs_sentence(needs, n):
    """The run's failure when files need the soundfile package that is not installed:
    ``needs`` maps each format ("MP3", "mu-law WAV" ...) to its files' names; each format is
    named with its own count where there are several."""
    parts = sorted(needs.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    named = ["%s (%s%s%s)" % (fmt, "%d: " % len(names) if len(parts) > 1 else "",
                              ", ".join(names[:3]), " ..." if len(names) > 3 else "")
             for fmt, names in parts]
    listed = named[0] if len(named) == 1 else "%s and %s" % (", ".join(named[:-1]), named[-1])
    wav = any("WAV" in fmt for fmt in needs)  # "convert them to WAV" is no help for those
    return ("%d of %d items' audio files are %s, which this trainer decodes only with the "
            "soundfile package: %s into the Python that runs the worker, or convert them to "
            "%s." % (sum(map(len, needs.values())), n, listed, audio_io.INSTALL,
                     "16-bit PCM WAV" if wav else "WAV"))


def no_layerdrop(model):
    """from_pretrained's keywords that turn LayerDrop off (Wav2Vec2, HuBERT and WavLM skip
    each layer with probability ``layerdrop`` while training, Whisper's encoder with
    ``encoder_layerdrop``): each data-parallel process would skip other layers, its gradients
    would not match the others' and the processes' exchange would fail; off, a run learns the
    same with any number of processes."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model)
    return dict((k, 0.0) for k in ("layerdrop", "encoder_layerdrop")
                if getattr(config, k, 0))


def padding(extractor):
    """The keywords a batch of clips of different lengths needs: Wav2Vec2's and HuBERT's
    extractors do not pad unless asked (padding=True: to the longest clip), and they normalise
    each clip over its own samples only with an attention mask (without one, over the padded
    batch: a clip's input would depend on its neighbours), so one is always asked for (and
    dropped again when the extractor's config says the model takes none, as
    facebook/wav2vec2-base's does). Whisper's pads to its 30 s window by default and AST's
    makes fixed-size spectrograms, so theirs are left alone."""
    try:
        params = inspect.signature(extractor.__call__).parameters
    except (TypeError, ValueError):
        return {}
    param = params.get("padding")
    if param is None or param.default not in (False, None):
        return {}
    if "return_attention_mask" in params:
        return {"padding": True, "return_attention_mask": True}
    return {"padding": True}


def min_samples(config):
    """(least, field): the fewest samples a clip is padded to, and the conv feature encoder's
    receptive field, from a Wav2Vec2-style config (``conv_kernel``, ``conv_stride``; (0, 0)
    for models without them, as AST and Whisper). A clip shorter than the receptive field
    makes no frame (the conv layers fail); with ``mask_time_prob`` > 0 (SpecAugment while
    training, 0.05 in facebook/wav2vec2-base) it needs ``mask_time_length`` frames more, each
    the encoder's total stride: 400 + 10 x 320 = 3,600 samples (0.225 s at 16 kHz) there."""
    kernels = getattr(config, "conv_kernel", None)
    strides = getattr(config, "conv_stride", None)
    if not kernels or not strides:
        return 0, 0
    field, jump = 1, 1
    for k, s in zip(kernels, strides):
        field += (int(k) - 1) * jump
        jump *= int(s)
    least = field
    if (getattr(config, "mask_time_prob", 0) or 0) > 0:
        least += int(getattr(config, "mask_time_length", 0) or 0) * jump
    return least, field


def pad_short(enc, least, field, value=0.0):
    """A batch (tensors by name) whose ``input_values`` are padded with ``value`` to at least
    ``least`` samples, its attention mask with zeros; the mask covers at least the first
    ``field`` samples of each clip, so even a clip of one sample makes a frame (of it and
    silence)."""
    x = enc.get("input_values")
    if not least or x is None or x.dim() != 2:
        return enc
    enc = dict(enc)
    mask = enc.get("attention_mask")
    if x.shape[1] < least:
        extra = least - x.shape[1]
        enc["input_values"] = torch.nn.functional.pad(x, (0, extra), value=value)
        if mask is not None:
            mask = torch.nn.functional.pad(mask, (0, extra), value=0)
    if mask is not None:
        mask = mask.clone()
        mask[:, :field] = 1
        enc["attention_mask"] = mask
    return enc
