"""The prompt and LoRA-target choices of ``hf-llm-classification``, standard library only.

Kept apart from the torch code so that the template check runs before any model loads, and so
that code which loads a saved adapter can rebuild exactly the prompt the model was trained on
(``labels.json`` keeps the template; ``render`` is all it takes).
"""

import re
import string

PLACEHOLDERS = ("text", "labels", "scheme", "description")

# A line holding only {description} is left out when the scheme has no description.
DEFAULT_TEMPLATE = ("Classify the text for the question \"{scheme}\".\n"
                    "{description}\n"
                    "Answer with one of: {labels}.\n"
                    "Text: {text}\n"
                    "Answer:")


class SettingError(ValueError):
    """A prompt template or LoRA setting that cannot work; the message says what to change."""


def check_template(template):
    """Raise SettingError (a sentence saying what to change) unless ``template`` is usable."""
    valid = ", ".join("{%s}" % p for p in PLACEHOLDERS)
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as e:
        raise SettingError("the prompt template %r cannot be read: %s (placeholders are %s; "
                            "write {{ and }} for literal braces)" % (template[:200], e, valid))
    names = []
    for _, name, spec, conversion in fields:
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            raise SettingError("the prompt template has an unknown placeholder {%s}; the "
                                "placeholders are %s (write {{ and }} for literal braces)"
                                % (name, valid))
        if spec or conversion:
            raise SettingError("the prompt template's placeholder {%s} has a format spec or "
                                "conversion; write it plainly as {%s}" % (name, name))
        names.append(name)
    if "text" not in names:
        raise SettingError("the prompt template has no {text} placeholder, so the model would "
                            "never see the item; add {text} (placeholders: %s)" % valid)


def render(template, scheme, labels, text, description=""):
    """The prompt for one item (the answer follows it: ``answer(label)``)."""
    if not description:
        template = "\n".join(line for line in template.split("\n")
                             if line.strip() != "{description}")
    return template.format(text=text, labels=", ".join(str(x) for x in labels), scheme=scheme,
                           description=description or "")


def answer(label):
    """The text the model learns to write after the prompt (the tokenizer's EOS follows)."""
    return " " + str(label)  # a Likert point (an integer) is answered as its digits


def scale_note(schema):
    """A scale's named ends for the prompt's description ("1 means ..., 5 means ..."): a
    scheme whose classes are points between a min_label and a max_label (Likert's bundle
    schema); "" for other schemes and for scales without named ends."""
    points = schema.get("labels") or []
    if not points or not (schema.get("min_label") or schema.get("max_label")):
        return ""
    ends = [("%s means %s" % (point, schema.get(key)))
            for point, key in ((points[0], "min_label"), (points[-1], "max_label"))
            if schema.get(key)]
    return ("; ".join(ends) + ".") if ends else ""


# LoRA targets per ``config.model_type`` when lora_target_modules is "auto": the attention
# query/value projections (as the LoRA paper), named as each family names them. A family not
# listed falls back to peft's own table (and a clear error if peft has none).
AUTO_TARGETS = {
    "llama": ["q_proj", "v_proj"], "mistral": ["q_proj", "v_proj"],
    "mixtral": ["q_proj", "v_proj"], "qwen2": ["q_proj", "v_proj"],
    "qwen3": ["q_proj", "v_proj"], "qwen2_moe": ["q_proj", "v_proj"],
    "gemma": ["q_proj", "v_proj"], "gemma2": ["q_proj", "v_proj"],
    "gemma3_text": ["q_proj", "v_proj"], "phi": ["q_proj", "v_proj"],
    "phi3": ["qkv_proj"], "olmo": ["q_proj", "v_proj"], "opt": ["q_proj", "v_proj"],
    "gptj": ["q_proj", "v_proj"], "gpt2": ["c_attn"], "gpt_neox": ["query_key_value"],
    "falcon": ["query_key_value"], "bloom": ["query_key_value"],
}


def target_modules(param, model_type):
    """LoRA target modules for the param (``auto``, ``all-linear`` or comma-separated names);
    None lets peft choose by model type."""
    value = (param or "auto").strip()
    if value == "auto":
        return AUTO_TARGETS.get(model_type)
    if value == "all-linear":
        return value
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise SettingError("lora_target_modules is empty; use auto, all-linear or module "
                            "names such as q_proj,v_proj")
    return names


def check_template_param(value):
    """The prompt_template param: empty (the built-in template) or a usable template."""
    if value.strip():
        check_template(value)


def check_model(value):
    if not value.strip():
        raise SettingError("name a Hugging Face Hub id or a local model directory")


TARGET_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def check_targets(value):
    """lora_target_modules: auto, all-linear, or comma-separated module names."""
    value = (value or "auto").strip()
    if value in ("auto", "all-linear"):
        return
    names = [n.strip() for n in value.split(",")]
    bad = [n for n in names if not TARGET_NAME.match(n)]
    if bad or not names:
        raise SettingError("%r is not a module name; use auto, all-linear or comma-separated "
                            "names such as q_proj,v_proj" % (bad[0] if bad else value))
