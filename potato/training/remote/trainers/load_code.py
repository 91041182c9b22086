"""The built-in trainers' load code: the Python that loads a run's model files and predicts,
shown on the run page (for the downloaded archive) and in the Hub model card (for the
published repo) from the same template (``fill_load_code``'s placeholders: ``{model}`` the
model directory or repo id, ``{file:PATH}`` a file of the run's artifacts, ``{scheme}``).
tests/training/remote/trainers/test_load_code.py trains each trainer's tiny model and runs this text. Standard
library only (the registry imports it).
"""

SEQUENCE = (
    "import json\n"
    "from transformers import AutoModelForSequenceClassification, AutoTokenizer\n\n"
    "model = AutoModelForSequenceClassification.from_pretrained({model})\n"
    "tokenizer = AutoTokenizer.from_pretrained({model})\n"
    "labels = json.load(open({file:model/labels.json}))[\"labels\"]\n"
    "logits = model(**tokenizer([\"a text to label\"], return_tensors=\"pt\")).logits\n"
    "print(labels[int(logits.argmax(-1)[0])])")

SEQUENCE_LORA = (
    "import json\n"
    "from peft import AutoPeftModelForSequenceClassification\n"
    "from transformers import AutoTokenizer\n\n"
    "labels = json.load(open({file:model/labels.json}))[\"labels\"]\n"
    "# the base model named in adapter_config.json, with the adapter and the trained head\n"
    "model = AutoPeftModelForSequenceClassification.from_pretrained({model}, "
    "num_labels=len(labels))\n"
    "tokenizer = AutoTokenizer.from_pretrained({model})\n"
    "logits = model(**tokenizer([\"a text to label\"], return_tensors=\"pt\")).logits\n"
    "print(labels[int(logits.argmax(-1)[0])])")

REGRESSION = (
    "import json\n"
    "from transformers import AutoModelForSequenceClassification, AutoTokenizer\n\n"
    "model = AutoModelForSequenceClassification.from_pretrained({model})\n"
    "tokenizer = AutoTokenizer.from_pretrained({model})\n"
    "scale = json.load(open({file:model/regression.json}))  # value = out * scale + mean\n"
    "out = model(**tokenizer([\"a text to score\"], return_tensors=\"pt\")).logits[0, 0].item()\n"
    "print(out * scale[\"scale\"] + scale[\"mean\"])")

REGRESSION_LORA = (
    "import json\n"
    "from peft import AutoPeftModelForSequenceClassification\n"
    "from transformers import AutoTokenizer\n\n"
    "# the base model named in adapter_config.json, with the adapter and the trained head\n"
    "model = AutoPeftModelForSequenceClassification.from_pretrained({model}, num_labels=1)\n"
    "tokenizer = AutoTokenizer.from_pretrained({model})\n"
    "scale = json.load(open({file:model/regression.json}))  # value = out * scale + mean\n"
    "out = model(**tokenizer([\"a text to score\"], return_tensors=\"pt\")).logits[0, 0].item()\n"
    "print(out * scale[\"scale\"] + scale[\"mean\"])")

TOKENS = (
    "import json\n"
    "from transformers import AutoModelForTokenClassification, AutoTokenizer\n\n"
    "model = AutoModelForTokenClassification.from_pretrained({model})\n"
    "tokenizer = AutoTokenizer.from_pretrained({model})\n"
    "tags = json.load(open({file:model/labels.json}))[\"tags\"]  # BIO tags over sub-words\n"
    "logits = model(**tokenizer(\"a text to tag\", return_tensors=\"pt\")).logits\n"
    "print([tags[k] for k in logits.argmax(-1)[0].tolist()])")

TOKENS_LORA = (
    "import json\n"
    "from peft import AutoPeftModelForTokenClassification\n"
    "from transformers import AutoTokenizer\n\n"
    "tags = json.load(open({file:model/labels.json}))[\"tags\"]  # BIO tags over sub-words\n"
    "# the base model named in adapter_config.json, with the adapter and the trained head\n"
    "model = AutoPeftModelForTokenClassification.from_pretrained({model}, "
    "num_labels=len(tags))\n"
    "tokenizer = AutoTokenizer.from_pretrained({model})\n"
    "logits = model(**tokenizer(\"a text to tag\", return_tensors=\"pt\")).logits\n"
    "print([tags[k] for k in logits.argmax(-1)[0].tolist()])")

LLM = (
    "import json\n"
    "import torch\n"
    "from peft import AutoPeftModelForCausalLM\n"
    "from transformers import AutoTokenizer\n"
    "from potato.training.remote.llm_prompt import render  # pip install potato-annotation\n\n"
    "meta = json.load(open({file:model/labels.json}))  # labels, prompt template, scheme\n"
    "tokenizer = AutoTokenizer.from_pretrained({model})\n"
    "# the base model named in adapter_config.json, with the adapter\n"
    "model = AutoPeftModelForCausalLM.from_pretrained({model}).eval()\n"
    "prompt = tokenizer(render(meta[\"prompt_template\"], meta[\"scheme\"], meta[\"labels\"],\n"
    "                          \"a text to label\", meta[\"description\"]),\n"
    "                   split_special_tokens=True)[\"input_ids\"]\n"
    "scores = []  # each label's answer: its tokens' log-likelihood after the prompt\n"
    "for label in meta[\"labels\"]:\n"
    "    answer = tokenizer(\" \" + str(label), add_special_tokens=False)[\"input_ids\"]\n"
    "    answer += [tokenizer.eos_token_id]\n"
    "    with torch.no_grad():\n"
    "        logits = model(input_ids=torch.tensor([prompt + answer])).logits[0, :-1]\n"
    "    logp = logits.float().log_softmax(-1)\n"
    "    scores.append(sum(logp[len(prompt) - 1 + j, t].item() for j, t in enumerate(answer)))\n"
    "print(meta[\"labels\"][scores.index(max(scores))])")

IMAGE = (
    "import json\n"
    "from PIL import Image\n"
    "from transformers import AutoImageProcessor, AutoModelForImageClassification\n\n"
    "model = AutoModelForImageClassification.from_pretrained({model})\n"
    "processor = AutoImageProcessor.from_pretrained({model})\n"
    "labels = json.load(open({file:model/labels.json}))[\"labels\"]\n"
    "image = Image.open(\"an-image.png\").convert(\"RGB\")\n"
    "logits = model(**processor(images=image, return_tensors=\"pt\")).logits\n"
    "# a multiselect scheme: the labels whose sigmoid(logit) is at least 0.5\n"
    "print(labels[int(logits.argmax(-1)[0])])")

IMAGE_LORA = (
    "import json\n"
    "from peft import PeftModel\n"
    "from PIL import Image\n"
    "from transformers import AutoImageProcessor, AutoModelForImageClassification\n\n"
    "meta = json.load(open({file:model/labels.json}))\n"
    "labels = meta[\"labels\"]\n"
    "base = AutoModelForImageClassification.from_pretrained(\n"
    "    meta[\"base_model\"], num_labels=len(labels), ignore_mismatched_sizes=True)\n"
    "model = PeftModel.from_pretrained(base, {model})  # the adapter and the trained head\n"
    "processor = AutoImageProcessor.from_pretrained({model})\n"
    "image = Image.open(\"an-image.png\").convert(\"RGB\")\n"
    "logits = model(**processor(images=image, return_tensors=\"pt\")).logits\n"
    "# a multiselect scheme: the labels whose sigmoid(logit) is at least 0.5\n"
    "print(labels[int(logits.argmax(-1)[0])])")

_WAV = (
    "with wave.open(\"a-clip.wav\") as w:  # 16-bit mono PCM at the extractor's rate\n"
    "    clip = numpy.frombuffer(w.readframes(w.getnframes()), \"<i2\") / 32768.0\n"
    "inputs = extractor(clip, sampling_rate=extractor.sampling_rate, return_tensors=\"pt\")\n"
    "logits = model(**inputs).logits\n"
    "# a multiselect scheme: the labels whose sigmoid(logit) is at least 0.5\n"
    "print(labels[int(logits.argmax(-1)[0])])")

AUDIO = (
    "import json\n"
    "import wave\n"
    "import numpy\n"
    "from transformers import AutoFeatureExtractor, AutoModelForAudioClassification\n\n"
    "model = AutoModelForAudioClassification.from_pretrained({model})\n"
    "extractor = AutoFeatureExtractor.from_pretrained({model})\n"
    "labels = json.load(open({file:model/labels.json}))[\"labels\"]\n" + _WAV)

AUDIO_LORA = (
    "import json\n"
    "import wave\n"
    "import numpy\n"
    "from peft import PeftModel\n"
    "from transformers import AutoFeatureExtractor, AutoModelForAudioClassification\n\n"
    "meta = json.load(open({file:model/labels.json}))\n"
    "labels = meta[\"labels\"]\n"
    "base = AutoModelForAudioClassification.from_pretrained(\n"
    "    meta[\"base_model\"], num_labels=len(labels), ignore_mismatched_sizes=True)\n"
    "model = PeftModel.from_pretrained(base, {model})  # the adapter and the trained head\n"
    "extractor = AutoFeatureExtractor.from_pretrained({model})\n" + _WAV)

NAIVE_BAYES = (
    "from potato.training.remote.trainers.naive_bayes import Saved  # pip install "
    "potato-annotation\n\n"
    "model = Saved({file:{scheme}.naive-bayes.json})  # word counts per label\n"
    "print(model.predict([\"a text to label\"]))  # [(label, confidence)]")

CALIBRATION = (
    "import json\n"
    "import math\n\n"
    "# Platt scaling of the base run's confidences, and the threshold that reaches the target\n"
    "cal = json.load(open({file:calibration.json}))\n\n"
    "def calibrated(confidence):\n"
    "    p = min(max(confidence, 1e-6), 1 - 1e-6)\n"
    "    z = cal[\"platt_a\"] * math.log(p / (1 - p)) + cal[\"platt_b\"]\n"
    "    return 1 / (1 + math.exp(-z))\n\n"
    "print(calibrated(0.8), \"keep at or above\", cal[\"threshold\"])")
