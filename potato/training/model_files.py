"""A run's model files for the admin: one tar archive streamed from the run's artifacts, and the
few lines of Python that load them. Only files on this server are offered (a run whose files
stayed on its host names where they are instead)."""

import os
import tarfile
from typing import Any, Dict, List, Optional

# How each built-in trainer's files load, with the archive unpacked in the current directory.
LOAD_CODE = {
    ("hf-text-classification", True): (
        "from peft import AutoPeftModelForSequenceClassification\n"
        "from transformers import AutoTokenizer\n"
        "model = AutoPeftModelForSequenceClassification.from_pretrained(\"{d}/model\")\n"
        "tokenizer = AutoTokenizer.from_pretrained(\"{d}/model\")"),
    ("hf-text-classification", False): (
        "from transformers import AutoModelForSequenceClassification, AutoTokenizer\n"
        "model = AutoModelForSequenceClassification.from_pretrained(\"{d}/model\")\n"
        "tokenizer = AutoTokenizer.from_pretrained(\"{d}/model\")"),
    ("hf-llm-classification", True): (
        "from peft import AutoPeftModelForCausalLM\n"
        "from transformers import AutoTokenizer\n"
        "model = AutoPeftModelForCausalLM.from_pretrained(\"{d}/model\")\n"
        "tokenizer = AutoTokenizer.from_pretrained(\"{d}/model\")"),
    ("text-naive-bayes", None): (
        "import json\n"
        "model = json.load(open(\"{d}/SCHEME.naive-bayes.json\"))  # word counts per label"),
}


def files(directory: Optional[str]) -> List[str]:
    """The regular files under ``directory`` (relative paths, sorted); links are left out."""
    if not directory or not os.path.isdir(directory):
        return []
    out = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                out.append(os.path.relpath(path, directory))
    return sorted(out)


def archive_name(run_id: str) -> str:
    return "%s-model.tar" % run_id


def write_archive(directory: str, top: str, out) -> None:
    """Stream a tar of the files under ``directory`` (as ``top/...``) to the file object ``out``.
    Uncompressed: model weights do not compress, and the archive starts at once."""
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for rel in files(directory):
            path = os.path.join(directory, rel)
            info = tar.gettarinfo(path, arcname="%s/%s" % (top, rel))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o644
            with open(path, "rb") as f:
                tar.addfile(info, f)


def load_code(run: Dict[str, Any]) -> str:
    """The Python that loads the run's unpacked archive, or "" for an unknown trainer."""
    params = run.get("params") if isinstance(run.get("params"), dict) else {}
    trainer = run.get("trainer")
    for key in ((trainer, bool(params.get("lora", True))), (trainer, True), (trainer, None)):
        if key in LOAD_CODE:
            return LOAD_CODE[key].replace("{d}", "%s-model" % run["run_id"])
    return ""
