"""The trainer registry. Listing trainers and checking params imports no trainer module, so
the server (which never imports torch) can validate a request before it queues a run.

A trainer module defines a class with this interface, used only by the worker::

    class Trainer:
        def __init__(self, ctx): ...          # ctx: worker.Context (bundle, params, emitter ...)
        def train(self) -> dict: ...          # metrics; call ctx.check_cancelled() between steps
        def predict(self, scheme, texts) -> [(label, confidence), ...]
                                              # takes_items = True: gets bundle items
                                              # (dicts with "media") instead of texts
                                              # span schemes: label is a list of
                                              # {start, end, label, confidence}
"""

import difflib
import importlib
import math
import importlib.util
import os

from potato.training.remote import llm_prompt  # standard library only

TYPES = {"int": int, "float": float, "bool": bool, "str": str}


class Param:
    """A trainer param. ``check``: a standard-library function that raises ValueError with a
    sentence when a value cannot work (run by the server before a run is queued, so a bad
    value never waits in the queue or travels to a host). ``multiline``: a text box.
    ``model_source``: a Hugging Face Hub id or a model directory, which Check and the worker's
    start resolve where the run executes (``model_source.resolve``)."""

    def __init__(self, name, type, default, help, minimum=None, maximum=None, choices=None,
                 check=None, multiline=False, model_source=False):
        self.check = check
        self.model_source = model_source
        self.multiline = multiline
        self.name = name
        self.type = type
        self.default = default
        self.help = help
        self.minimum = minimum
        self.maximum = maximum
        self.choices = choices

    def as_dict(self):
        return {"name": self.name, "type": self.type, "default": self.default, "help": self.help,
                "minimum": self.minimum, "maximum": self.maximum, "choices": self.choices,
                "multiline": self.multiline}


class TrainerInfo:
    def __init__(self, name, module, description, params, schema_types, packages=(),
                 local_only=False, max_schemas=None, install_hint="", class_name="Trainer",
                 media=()):
        self.name = name
        # the media kinds ("image", "audio") its model reads: only those travel with a run,
        # and only their URLs are fetched (a text model on an image project fetches nothing)
        self.media = tuple(media)
        self.module = module
        self.description = description
        self.params = params
        self.schema_types = schema_types
        self.packages = list(packages)
        self.local_only = local_only
        self.max_schemas = max_schemas
        self.install_hint = install_hint
        self.class_name = class_name

    def missing_packages(self):
        """Packages this trainer needs that this interpreter cannot import (without importing)."""
        return [p for p in self.packages if importlib.util.find_spec(p) is None]

    def as_dict(self):
        return {"name": self.name, "description": self.description,
                "params": [p.as_dict() for p in self.params],
                "schema_types": sorted(self.schema_types), "packages": self.packages,
                "local_only": self.local_only, "max_schemas": self.max_schemas,
                "media": list(self.media)}


# How to install a trainer's packages; the worker ends the sentence with the backend's own way
# to point at a Python that has them (the spec's ``python_fix``: job_python on SLURM, --python
# for an agent, the server's Python for local runs).
TRAIN_TEXT_HINT = ("install torch, transformers and peft into that Python (pip install torch "
                   "transformers peft)")

TRAIN_LLM_HINT = ("install torch, transformers and peft into that Python (pip install "
                  "'potato-annotation[train-llm]'; bitsandbytes too for load_in_4bit)")

TRAIN_IMAGE_HINT = ("install torch, transformers, peft and Pillow into that Python (pip install "
                    "'potato-annotation[train-image]')")

TRAIN_AUDIO_HINT = ("install torch, transformers and peft into that Python (pip install "
                    "'potato-annotation[train-audio]', which adds soundfile for MP3, Ogg and "
                    "FLAC)")
DEFAULT_PYTHON_FIX = "or point the backend's python at one that has them"

HF_PACKAGES = ("torch", "transformers", "peft")

# The params both hf trainers end their own with (parallel.py reads processes).
HF_SHARED_PARAMS = [
    Param("seed", "int", 0, "random seed", 0, 2 ** 32 - 1),
    Param("processes", "int", 0, "data-parallel processes: 0 for one per visible GPU (one on a "
          "host without GPUs); more than 1 without GPUs runs that many CPU processes", 0, 64)]

def _encoder_params(epochs):
    """The params of the trainers that fine-tune a transformers encoder on whole items
    (classification and regression heads alike); ``epochs``: its default."""
    return [Param("model", "str", "sentence-transformers/all-MiniLM-L6-v2",
                  "a Hugging Face Hub id or a local model directory", model_source=True),
            Param("epochs", "int", epochs, "passes over the training items", 1, 100),
            Param("learning_rate", "float", None, "AdamW learning rate (default: 2e-3 with "
                  "LoRA, 5e-5 for full fine-tuning)", minimum=1e-8, maximum=1.0),
            Param("batch_size", "int", 16, "items per step", 1, 4096),
            Param("max_length", "int", 128, "tokens per item (longer texts are cut)", 8, 8192),
            Param("lora", "bool", True, "train a LoRA adapter (true) or every weight (false)"),
            Param("lora_r", "int", 8, "LoRA rank", 1, 512),
            Param("lora_alpha", "int", 16, "LoRA scaling", 1, 4096)] + HF_SHARED_PARAMS


REGISTRY = {
    "text-naive-bayes": TrainerInfo(
        "text-naive-bayes", "potato.training.remote.trainers.naive_bayes",
        "Multinomial naive Bayes on word n-grams, standard library only: a fast baseline that "
        "runs anywhere.",
        [Param("alpha", "float", 1.0, "additive (Laplace) smoothing", minimum=0.0001),
         Param("ngrams", "int", 2, "use word n-grams up to this length", 1, 3),
         Param("min_count", "int", 1, "ignore n-grams seen fewer times in training", 1),
         Param("calibrate", "bool", True, "temperature-scale probabilities on the val split")],
        {"radio", "multiselect", "likert"}),
    "hf-text-classification": TrainerInfo(
        "hf-text-classification", "potato.training.remote.trainers.hf_text",
        "Fine-tune a transformers encoder (full or with a PEFT LoRA adapter).",
        _encoder_params(epochs=3),
        {"radio", "likert"}, packages=HF_PACKAGES, max_schemas=1, install_hint=TRAIN_TEXT_HINT),
    "hf-llm-classification": TrainerInfo(
        "hf-llm-classification", "potato.training.remote.trainers.hf_llm",
        "Fine-tune a causal LM (Llama, Qwen, Mistral, Phi, GPT-2 ...) with a LoRA adapter to "
        "answer the scheme's question; predicts by scoring each label's answer.",
        [Param("model", "str", "Qwen/Qwen2.5-0.5B-Instruct",
               "a Hugging Face Hub id or a local directory of a causal LM",
               check=llm_prompt.check_model, model_source=True),
         Param("epochs", "int", 2, "passes over the training items", 1, 100),
         Param("learning_rate", "float", 2e-4, "AdamW learning rate (linear decay to 0)",
               minimum=1e-8, maximum=1.0),
         Param("lora_r", "int", 16, "LoRA rank", 1, 512),
         Param("lora_alpha", "int", 32, "LoRA scaling", 1, 4096),
         Param("lora_dropout", "float", 0.05, "dropout on the LoRA input", 0.0, 0.9),
         Param("lora_target_modules", "str", "auto",
               "modules LoRA adapts: auto (the attention query/value projections of the "
               "model's family), all-linear, or comma-separated names such as q_proj,v_proj",
               check=llm_prompt.check_targets),
         Param("max_length", "int", 256, "tokens per prompt and answer (the item text is cut)",
               16, 32768),
         Param("batch_size", "int", 8, "items per micro-batch (over all the processes)",
               1, 4096),
         Param("gradient_accumulation", "int", 1, "micro-batches per optimizer step", 1, 1024),
         Param("gradient_checkpointing", "bool", False,
               "recompute activations in the backward pass: less memory, about 30% slower"),
         Param("load_in_4bit", "bool", False, "load the base model in 4-bit NF4 (bitsandbytes, "
               "CUDA GPUs only; the run fails at once elsewhere)"),
         Param("bf16", "str", "auto", "bfloat16 weights and compute: auto (on GPUs that support "
               "it), true or false", choices=["auto", "true", "false"])] + HF_SHARED_PARAMS + [
         Param("prompt_template", "str", "", "the prompt before the answer, with placeholders "
               "{text}, {labels}, {scheme}, {description}; empty: the built-in template",
               check=llm_prompt.check_template_param, multiline=True)],
        {"radio", "likert"}, packages=HF_PACKAGES, max_schemas=1, install_hint=TRAIN_LLM_HINT),
    "hf-token-classification": TrainerInfo(
        "hf-token-classification", "potato.training.remote.trainers.hf_tokens",
        "Tag spans: fine-tune a transformers token-classification model (BIO tags over "
        "sub-word tokens, full or with a LoRA adapter); predicts character spans with a "
        "confidence each.",
        [Param("model", "str", "sentence-transformers/all-MiniLM-L6-v2",
               "a Hugging Face Hub id or a local model directory (any model "
               "AutoModelForTokenClassification loads, with a fast tokenizer)",
               model_source=True),
         Param("epochs", "int", 3, "passes over the training items", 1, 100),
         Param("learning_rate", "float", None, "AdamW learning rate (default: 2e-3 with LoRA, "
               "5e-5 for full fine-tuning)", minimum=1e-8, maximum=1.0),
         Param("batch_size", "int", 16, "windows per step", 1, 4096),
         Param("max_length", "int", 128, "tokens per window (longer texts are cut into "
               "overlapping windows)", 8, 8192),
         Param("stride", "int", 32, "tokens two windows of a long text share (at most half "
               "of max_length)", 0, 4096),
         Param("lora", "bool", False, "train a LoRA adapter (true) or every weight (false)"),
         Param("train_embeddings", "bool", False, "full fine-tuning also updates the word-"
               "embedding matrix (false keeps the pretrained token vectors: about half of a "
               "small model's weights, so steps are faster, and the rare words of unseen "
               "entities keep their pretrained meaning)"),
         Param("dropout", "float", 0.0, "dropout probability of every dropout in the model "
               "while it trains (null: the model's own, 0.1 in BERT-like models)", 0.0, 0.9),
         Param("lora_r", "int", 8, "LoRA rank", 1, 512),
         Param("lora_alpha", "int", 16, "LoRA scaling", 1, 4096)] + HF_SHARED_PARAMS,
        {"span"}, packages=HF_PACKAGES, max_schemas=1, install_hint=TRAIN_TEXT_HINT),
    "hf-image-classification": TrainerInfo(
        "hf-image-classification", "potato.training.remote.trainers.hf_image",
        "Fine-tune an image classifier (any AutoModelForImageClassification: ViT, ConvNeXt, "
        "ResNet ...) with its image processor on the items' images, full or with a LoRA "
        "adapter.",
        [Param("model", "str", "google/vit-base-patch16-224-in21k",
               "a Hugging Face Hub id or a local directory of an image classification model "
               "and its image processor", model_source=True),
         Param("epochs", "int", 5, "passes over the training items", 1, 100),
         Param("learning_rate", "float", None, "AdamW learning rate (default: 2e-3 with LoRA, "
               "5e-5 for full fine-tuning)", minimum=1e-8, maximum=1.0),
         Param("batch_size", "int", 32, "images per step", 1, 4096),
         Param("augment", "bool", False, "light augmentation while training: a random crop of "
               "85-100% resized back and a small brightness change (no flips)"),
         Param("lora", "bool", False, "train a LoRA adapter (true) or every weight (false)"),
         Param("lora_r", "int", 8, "LoRA rank", 1, 512),
         Param("lora_alpha", "int", 16, "LoRA scaling", 1, 4096)] + HF_SHARED_PARAMS,
        {"radio", "multiselect"}, packages=HF_PACKAGES + ("PIL",), max_schemas=1,
        install_hint=TRAIN_IMAGE_HINT, media=("image",)),
    "hf-audio-classification": TrainerInfo(
        "hf-audio-classification", "potato.training.remote.trainers.hf_audio",
        "Fine-tune an audio classifier (any AutoModelForAudioClassification: Wav2Vec2, HuBERT, "
        "AST, Whisper's encoder ...) with its feature extractor on the items' audio, full or "
        "with a LoRA adapter. Needs audio items (item_properties.audio_key): WAV, or MP3, Ogg "
        "and FLAC with the soundfile package.",
        [Param("model", "str", "facebook/wav2vec2-base",
               "a Hugging Face Hub id or a local directory of an audio classification model "
               "and its feature extractor", model_source=True),
         Param("epochs", "int", 5, "passes over the training items", 1, 100),
         Param("learning_rate", "float", None, "AdamW learning rate (default: 2e-3 with LoRA, "
               "5e-5 for full fine-tuning)", minimum=1e-8, maximum=1.0),
         Param("batch_size", "int", 16, "clips per step", 1, 4096),
         Param("max_seconds", "float", 10.0, "seconds of each clip the model hears (the "
               "first ones; longer clips are cut)", minimum=0.1, maximum=600.0),
         Param("lora", "bool", False, "train a LoRA adapter (true) or every weight (false)"),
         Param("lora_r", "int", 8, "LoRA rank", 1, 512),
         Param("lora_alpha", "int", 16, "LoRA scaling", 1, 4096)] + HF_SHARED_PARAMS,
        {"radio", "multiselect"}, packages=HF_PACKAGES + ("numpy",), max_schemas=1,
        install_hint=TRAIN_AUDIO_HINT, media=("audio",)),
    "hf-text-regression": TrainerInfo(
        "hf-text-regression", "potato.training.remote.trainers.hf_regression",
        "Fine-tune a transformers encoder with a regression head (full or with a PEFT LoRA "
        "adapter) to predict a slider's or number scheme's value.",
        _encoder_params(epochs=5),
        {"slider", "number"}, packages=HF_PACKAGES, max_schemas=1,
        install_hint=TRAIN_TEXT_HINT),
    "decision-calibrate": TrainerInfo(
        "decision-calibrate", "potato.training.remote.trainers.calibrate",
        "Platt-scale the latest successful run's confidences against the human labels and find "
        "the threshold that reaches a target precision. Reads the server's store: local only.",
        [Param("target_precision", "float", 0.9, "precision the reported threshold reaches",
               0.5, 1.0)],
        {"radio"}, local_only=True, max_schemas=1),
}


class ParamError(ValueError):
    pass


PLUGINS_ENV = "POTATO_TRAINER_PLUGINS"


def all_trainers():
    """The built-in trainers plus those of plugin modules named in $POTATO_TRAINER_PLUGINS
    (comma-separated importable modules, each with a ``TRAINERS`` dict of TrainerInfo)."""
    out = dict(REGISTRY)
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        module = importlib.import_module(name)
        out.update(getattr(module, "TRAINERS", {}))
    return out


def get(name):
    return all_trainers().get(name)


def did_you_mean(word, choices, lead=" "):
    """``lead`` + "did you mean X?" for the closest of ``choices`` (a typo), else ""."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return "%s%s you mean %s?" % (lead, "Did" if lead == " " else "did", close[0]) \
        if close else ""


def sentence(text):
    """``text`` ended with a full stop, unless it ends with one already or with a question
    (a "did you mean X?" last): never "X?."."""
    return text if text.endswith((".", "?", "!")) else text + "."


def unknown_trainer(name):
    """The sentence for a trainer name the registry does not know: every trainer, and the
    closest one when it looks like a typo."""
    names = list(all_trainers())
    return "Unknown trainer %r. Trainers: %s.%s" % (name, ", ".join(names),
                                                    did_you_mean(name, names))


STR_MAX = 1000  # a one-line string param (a model id or path) is never longer
TEXT_MAX = 20000  # a multiline one (a prompt template)


def _check_text(param, value):
    """No control characters (a multiline param may hold newlines and tabs), and a cap."""
    cap = TEXT_MAX if param.multiline else STR_MAX
    if len(value) > cap:
        raise ParamError("%s is %d characters long; at most %d are allowed"
                         % (param.name, len(value), cap))
    allowed = "\n\r\t" if param.multiline else ""
    if any((ord(ch) < 32 or ord(ch) == 127) and ch not in allowed for ch in value):
        raise ParamError("%s must not contain control characters (%s)" % (
            param.name, "only newlines and tabs" if param.multiline
            else "such as a newline or a null byte"))


ANNOTATE_ONLY = ("no trainer trains %s schemes: they are annotate-only (their answers are "
                 "stored and exported, not learned)")


def cannot_train(info, annotation_type, scheme):
    """The sentence for a scheme this trainer does not take (and why none does, if so)."""
    why = annotate_only(annotation_type)
    return "Trainer %s cannot train %s scheme %s (it takes %s)%s." % (
        info.name, annotation_type, scheme, ", ".join(sorted(info.schema_types)),
        "; " + why if why else "")


def annotate_only(annotation_type):
    """Why no run can train a scheme of this type (free text), or "" when a trainer takes it."""
    if any(annotation_type in info.schema_types for info in all_trainers().values()):
        return ""
    return ANNOTATE_ONLY % annotation_type


def coerce(param, value):
    """``value`` as the param's type (strings from the CLI are parsed), or ParamError."""
    kind = TYPES[param.type]
    if isinstance(value, str) and kind is not str:
        text = value.strip()
        if kind is bool:
            if text.lower() in ("true", "yes", "1", "on"):
                return True
            if text.lower() in ("false", "no", "0", "off"):
                return False
            raise ParamError("%s must be true or false, not %r" % (param.name, value))
        try:
            value = kind(text)
        except ValueError:
            raise ParamError("%s must be %s, not %r" % (
                param.name, "a whole number" if kind is int else "a number", value))
    if kind is bool and not isinstance(value, bool):
        raise ParamError("%s must be true or false, not %r" % (param.name, value))
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ParamError("%s must be a whole number, not %r" % (param.name, value))
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamError("%s must be a number, not %r" % (param.name, value))
        try:
            value = float(value)
        except OverflowError:
            raise ParamError("%s is too large a number" % param.name)
        if not math.isfinite(value):
            raise ParamError("%s must be a finite number, not %r" % (param.name, value))
    if kind is str and param.choices and isinstance(value, bool):
        value = "true" if value else "false"  # bf16: true from JSON means "true"
    if kind is str and not isinstance(value, str):
        raise ParamError("%s must be a string, not %r" % (param.name, value))
    if kind is str:
        _check_text(param, value)
    if kind is str and param.choices:
        value = value.strip().lower()
    if param.choices and value not in param.choices:
        raise ParamError("%s must be one of %s, not %r" % (param.name, ", ".join(
            str(c) for c in param.choices), value))
    if param.minimum is not None and value < param.minimum:
        raise ParamError("%s must be at least %s, not %s" % (param.name, param.minimum, value))
    if param.maximum is not None and value > param.maximum:
        raise ParamError("%s must be at most %s, not %s" % (param.name, param.maximum, value))
    if param.check is not None:
        try:
            param.check(value)
        except ValueError as e:
            raise ParamError("%s: %s" % (param.name, e))
    return value


def resolve_params(info, given):
    """Every declared param with its value (given or default); ParamError lists what is wrong."""
    given = dict(given or {})
    declared = dict((p.name, p) for p in info.params)
    unknown = sorted(k for k in given if k not in declared)
    if unknown:
        raise ParamError("unknown param%s %s for trainer %s; valid params: %s%s" % (
            "s" if len(unknown) > 1 else "", ", ".join(unknown), info.name,
            ", ".join(declared), did_you_mean(unknown[0], declared, "; ")))
    out = {}
    for name, p in declared.items():
        out[name] = coerce(p, given[name]) if name in given else p.default
    return out


def model_sources(info, params):
    """The values of a trainer's model-source params (given, else their defaults)."""
    params = params or {}
    return [str(params.get(p.name, p.default)) for p in info.params
            if p.model_source and params.get(p.name, p.default)]


def load(info):
    """The trainer class (imports its module: only the worker calls this). A module whose heavy
    packages load on demand has ``load()``: called here, so a missing package is an ImportError
    before the run starts."""
    module = importlib.import_module(info.module)
    if callable(getattr(module, "load", None)):
        module.load()
    return getattr(module, info.class_name)
