"""The trainer registry. Listing trainers and checking params imports no trainer module, so
the server (which never imports torch) can validate a request before it queues a run.

A trainer module defines a class with this interface, used only by the worker::

    class Trainer:
        def __init__(self, ctx): ...          # ctx: worker.Context (bundle, params, emitter ...)
        def train(self) -> dict: ...          # metrics; call ctx.check_cancelled() between steps
        def predict(self, scheme, texts) -> [(label, confidence), ...]
        def predict_ranked(self, scheme, texts)   # optional, for active learning: as predict,
            -> [(label, confidence, {"probabilities": {label: p}, "vector": [x, ...],
                                     "uncertainty": u}), ...]   (each key optional)
                                              # takes_items = True: gets bundle items
                                              # (dicts with "media") instead of texts
                                              # span schemes: label is a list of
                                              # {start, end, label, confidence}
"""

import importlib
import importlib.util
import json
import os
import re

from potato.training.remote import llm_prompt  # standard library only
from potato.training.remote.trainers import load_code as code  # standard library only
from potato.training.remote.trainers.params import (  # noqa: F401 (the registry's names)
    STR_MAX, TEXT_MAX, TYPES, Param, ParamError, coerce, did_you_mean, model_sources,
    resolve_params)

class Hub:
    """A trainer's model as the Hugging Face Hub files it: ``pipeline_tag`` (the task its
    widget and search show, None where no Hub task fits) and ``library_name`` (the library
    that loads it, None where none does); ``lora_library``: the library instead when the run
    trained a LoRA adapter (peft loads the adapter and its base)."""

    def __init__(self, pipeline_tag=None, library_name=None, lora_library="peft"):
        self.pipeline_tag = pipeline_tag
        self.library_name = library_name
        self.lora_library = lora_library if library_name else None


class TrainerInfo:
    """One trainer: what it takes (``schema_types``: the annotation kinds; ``media``: the
    media kinds its model reads, () for item text; ``reads_items=False`` for one that reads
    no item at all), its params, and its model's card: ``load_code`` (and ``load_code_lora``
    for a run with ``lora`` true), the Python that loads a run's files and predicts, with the
    placeholders of ``fill_load_code``; ``hub``: its Hub metadata. ``default``: the trainer
    the config's defaults name (auto_retrain.trainer)."""

    def __init__(self, name, module, description, params, schema_types, packages=(),
                 local_only=False, max_schemas=None, install_hint="", class_name="Trainer",
                 media=(), load_code="", load_code_lora=None, hub=None, reads_items=True,
                 default=False):
        self.name = name
        self.load_code = load_code
        self.load_code_lora = load_code_lora
        self.hub = hub or Hub()
        self.reads_items = reads_items
        self.default = default
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
                "media": list(self.media), "reads_items": self.reads_items}

    def lora(self, params):
        """Whether a run with ``params`` trained a LoRA adapter (the param's default when it
        is not given; a trainer without the param: its one way)."""
        declared = dict((p.name, p.default) for p in self.params)
        if "lora" not in declared:
            return self.load_code_lora is not None and not self.load_code
        value = (params or {}).get("lora", declared["lora"])
        return bool(value) and value != "false"

    def load_template(self, params):
        """The load code's template for a run with ``params`` ("" when it has none)."""
        if self.lora(params) and self.load_code_lora:
            return self.load_code_lora
        return self.load_code or self.load_code_lora or ""

    def hub_meta(self, params):
        """(pipeline_tag, library_name) of a run with ``params``, each None where none fits."""
        library = self.hub.lora_library if self.lora(params) else self.hub.library_name
        return self.hub.pipeline_tag, library

    def reads(self):
        """What of an item its model reads: its media kinds, ("text",), or () for none."""
        if not self.reads_items:
            return ()
        return self.media or ("text",)


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
            Param("lora_alpha", "int", 16, "LoRA scaling", 1, 4096),
            Param("bf16", "str", "auto", "bfloat16 autocast: auto (on GPUs that support it and "
                  "on CPUs that compute it natively, Intel AMX or AVX512-BF16), true or false",
                  choices=["auto", "true", "false"])] + HF_SHARED_PARAMS


REGISTRY = {
    "text-naive-bayes": TrainerInfo(
        "text-naive-bayes", "potato.training.remote.trainers.naive_bayes",
        "Multinomial naive Bayes on word n-grams, standard library only: a fast baseline that "
        "runs anywhere.",
        [Param("alpha", "float", 1.0, "additive (Laplace) smoothing", minimum=0.0001),
         Param("ngrams", "int", 2, "use word n-grams up to this length", 1, 3),
         Param("min_count", "int", 1, "ignore n-grams seen fewer times in training", 1),
         Param("calibrate", "bool", True, "temperature-scale probabilities on the val split")],
        {"radio", "multiselect", "likert"}, load_code=code.NAIVE_BAYES,
        # a Hub task, but no Hub library loads it (potato's own module does, in the card)
        hub=Hub("text-classification"), default=True),
    "hf-text-classification": TrainerInfo(
        "hf-text-classification", "potato.training.remote.trainers.hf_text",
        "Fine-tune a transformers encoder (full or with a PEFT LoRA adapter).",
        _encoder_params(epochs=3),
        {"radio", "likert"}, packages=HF_PACKAGES, max_schemas=1, install_hint=TRAIN_TEXT_HINT,
        load_code=code.SEQUENCE, load_code_lora=code.SEQUENCE_LORA,
        hub=Hub("text-classification", "transformers")),
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
        {"radio", "likert"}, packages=HF_PACKAGES, max_schemas=1, install_hint=TRAIN_LLM_HINT,
        load_code_lora=code.LLM, hub=Hub("text-generation", "peft")),
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
        {"span"}, packages=HF_PACKAGES, max_schemas=1, install_hint=TRAIN_TEXT_HINT,
        load_code=code.TOKENS, load_code_lora=code.TOKENS_LORA,
        hub=Hub("token-classification", "transformers")),
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
        install_hint=TRAIN_IMAGE_HINT, media=("image",), load_code=code.IMAGE,
        load_code_lora=code.IMAGE_LORA, hub=Hub("image-classification", "transformers")),
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
        install_hint=TRAIN_AUDIO_HINT, media=("audio",), load_code=code.AUDIO,
        load_code_lora=code.AUDIO_LORA, hub=Hub("audio-classification", "transformers")),
    "hf-text-regression": TrainerInfo(
        "hf-text-regression", "potato.training.remote.trainers.hf_regression",
        "Fine-tune a transformers encoder with a regression head (full or with a PEFT LoRA "
        "adapter) to predict a slider's or number scheme's value.",
        _encoder_params(epochs=5),
        {"slider", "number"}, packages=HF_PACKAGES, max_schemas=1,
        install_hint=TRAIN_TEXT_HINT, load_code=code.REGRESSION,
        load_code_lora=code.REGRESSION_LORA, hub=Hub("text-classification", "transformers")),
    "decision-calibrate": TrainerInfo(
        "decision-calibrate", "potato.training.remote.trainers.calibrate",
        "Platt-scale the latest successful run's confidences against the human labels and find "
        "the threshold that reaches a target precision. Reads the server's store: local only.",
        [Param("target_precision", "float", 0.9, "precision the reported threshold reaches",
               0.5, 1.0)],
        {"radio"}, local_only=True, max_schemas=1, reads_items=False,
        # no model of its own: a threshold and two numbers for the base run's confidences
        load_code=code.CALIBRATION, hub=Hub()),
}



FILE_PLACEHOLDER = re.compile(r"\{file:((?:\{scheme\}|[^{}\n])+)\}")


def fill_load_code(template, model, file, scheme):
    """A trainer's load code with its placeholders filled: ``{model}`` becomes ``model`` (the
    model directory or Hub repo id) as a Python string; ``{file:PATH}`` the Python expression
    ``file(PATH)`` gives for that file of the run's artifacts (PATH relative to them, e.g.
    ``model/labels.json``); ``{scheme}`` (also inside a PATH) the run's first scheme."""
    code = FILE_PLACEHOLDER.sub(lambda m: file(m.group(1).replace("{scheme}", scheme)),
                                template)
    return code.replace("{model}", json.dumps(model)).replace("{scheme}", scheme)


MEDIA_WORDS = {"text": "item text", "image": "images", "audio": "audio"}


def unfit(info, kinds, holds):
    """Why ``info`` cannot train this project ("" when it can): ``kinds``: the annotation
    kinds of its schemes; ``holds``: what its items hold ("text", "image", "audio")."""
    takes = set(info.schema_types) & set(kinds)
    if not takes:
        return "it trains %s schemes and this project has %s" % (
            ", ".join(sorted(info.schema_types)), ", ".join(sorted(set(kinds))) or "none")
    reads = info.reads()  # a model that reads images or audio fits items with either
    if reads and not any(m in holds for m in reads):
        return "it reads %s and this project's items have none (they hold %s)" % (
            " or ".join(MEDIA_WORDS.get(m, m) for m in reads),
            " and ".join(MEDIA_WORDS.get(m, m) for m in sorted(holds)) or "nothing")
    return ""


def default_trainer():
    """The name of the trainer marked ``default`` (the config's auto_retrain.trainer)."""
    return next(name for name, info in REGISTRY.items() if info.default)


PLUGINS_ENV = "POTATO_TRAINER_PLUGINS"


def all_trainers():
    """The built-in trainers plus those of plugin modules named in $POTATO_TRAINER_PLUGINS
    (comma-separated importable modules, each with a ``TRAINERS`` dict of TrainerInfo)."""
    return _with_plugins()[0]


def _with_plugins():
    """(every trainer, {plugin module: why it could not be imported}) for the environment now:
    a plugin that cannot load leaves the others, and is said by ``plugin_problems``."""
    out, errors = dict(REGISTRY), {}
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            module = importlib.import_module(name)
        except Exception as e:
            errors[name] = "%s: %s" % (type(e).__name__, str(e)[:300])
            continue
        found = getattr(module, "TRAINERS", {})
        if isinstance(found, dict):
            out.update((k, v) for k, v in found.items()
                       if isinstance(k, str) and isinstance(v, TrainerInfo))
    return out, errors


def plugin_problems():
    """One sentence per plugin module that could not be imported, for messages and Check."""
    return ["the trainer plugin module %s (named in $%s) could not be imported (%s); fix or "
            "install it, or remove it from $%s" % (m, PLUGINS_ENV, e, PLUGINS_ENV)
            for m, e in sorted(_with_plugins()[1].items())]


def get(name):
    return all_trainers().get(name)


def sentence(text):
    """``text`` ended with a full stop, unless it ends with one already or with a question
    (a "did you mean X?" last): never "X?."."""
    return text if text.endswith((".", "?", "!")) else text + "."


def unknown_trainer(name):
    """The sentence for a trainer name the registry does not know: every trainer, and the
    closest one when it looks like a typo."""
    names = list(all_trainers())
    shown = name if not isinstance(name, str) or len(name) <= 80 else name[:80] + "..."
    problems = "".join(" Also: %s." % p for p in plugin_problems())
    return "Unknown trainer %r. Trainers: %s.%s%s" % (shown, ", ".join(names),
                                                      did_you_mean(name, names), problems)


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


def load(info):
    """The trainer class (imports its module: only the worker calls this). A module whose heavy
    packages load on demand has ``load()``: called here, so a missing package is an ImportError
    before the run starts."""
    module = importlib.import_module(info.module)
    if callable(getattr(module, "load", None)):
        module.load()
    return getattr(module, info.class_name)
