"""hf-image-classification (issue 22 part 3): a tiny ViT with random weights and its image
processor, built here (no download), trained on real handwritten digits (the first 30 of each
digit in bench/data/digits/) through the worker and through the real server's local
backend; multiselect over images; items without an image refused with one sentence."""

import io
import json
import os
import shutil

import pytest

from potato.cli import main
from potato.training.remote import bundle, worker
from potato.training.remote import protocol as events
from potato.training.remote.paths import RunPaths, write_json
from potato.training.remote.trainers import REGISTRY, resolve_params
from tests.helpers import KEY, ROOT, Client, start_run, wait_run

DIGITS = os.path.join(ROOT, "bench", "data", "digits")
H = {"X-API-Key": KEY}


def digits(n_per_class=30):
    """(id, image path relative to DIGITS, digit name) of the first ``n_per_class`` images of
    each digit."""
    with open(os.path.join(DIGITS, "items.jsonl")) as f:
        items = [json.loads(line) for line in f]
    with open(os.path.join(DIGITS, "gold.jsonl")) as f:
        gold = {d["id"]: d["digit"] for d in map(json.loads, f)}
    out, seen = [], {}
    for it in items:
        name = gold[it["id"]]
        if n_per_class and seen.get(name, 0) >= n_per_class:
            continue
        seen[name] = seen.get(name, 0) + 1
        out.append((it["id"], it["image"], name))
    return out


LABELS = sorted({name for _, _, name in digits()})


def tiny_model(tmp_path_factory, family):
    """A model for 32x32 images with random weights and its image processor (no download):
    a ResNet (it learns the digits in seconds) or a ViT (attention layers for LoRA)."""
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="needs the train-image extra (torch)")
        pytest.importorskip("PIL", reason="needs the train-image extra (Pillow)")
    import torch
    import transformers

    d = str(tmp_path_factory.mktemp("tiny-" + family))
    torch.manual_seed(0)
    if family == "resnet":
        transformers.ResNetModel(transformers.ResNetConfig(
            num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
            layer_type="basic", downsample_in_first_stage=False)).save_pretrained(d)
    else:
        transformers.ViTModel(transformers.ViTConfig(
            image_size=32, patch_size=8, num_channels=3, hidden_size=48, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=96)).save_pretrained(d)
    transformers.ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.5] * 3,
                                   image_std=[0.5] * 3).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def tiny_resnet(tmp_path_factory):
    return tiny_model(tmp_path_factory, "resnet")


@pytest.fixture(scope="module")
def tiny_vit(tmp_path_factory):
    return tiny_model(tmp_path_factory, "vit")


def run_dir(tmp_path, model, schema, label_of, media_of=None, **params):
    """A worker run over the digits slice: ``label_of(name)`` gives each item's label."""
    items, labels = [], {}
    for k, (item_id, rel, name) in enumerate(digits()):
        media = (media_of or (lambda r: {"kind": "image",
                                         "path": os.path.join(DIGITS, r)}))(rel)
        items.append((item_id, "", media))
        if k % 4:  # a quarter stays unlabelled
            labels[item_id] = {"digit": [label_of(name)]}
    paths = RunPaths(str(tmp_path / "run")).create()
    schemas = {"digit": schema}
    bundle.build(paths.bundle, items, labels, schemas, include_unlabeled=True)
    full = resolve_params(REGISTRY["hf-image-classification"], dict(model=model, **params))
    write_json(paths.spec, {"run_id": "t", "trainer": "hf-image-classification",
                            "schemas": schemas, "params": full, "device": "cpu"})
    return paths


def train(paths):
    out = io.StringIO()
    code = worker.run(paths.spec, events.Emitter(out))
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


FAST = dict(epochs=8, batch_size=16, learning_rate=3e-3, lora=False)


def test_radio_over_images_learns_and_saves_what_transformers_loads(tmp_path, tiny_resnet):
    import transformers

    paths = run_dir(tmp_path, tiny_resnet, {"type": "radio", "labels": LABELS}, lambda n: n,
                    **FAST)
    code, evs = train(paths)
    assert code == 0, [e for e in evs if e["type"] in ("error", "log")][-5:]
    preds = [json.loads(line) for line in open(paths.predictions)]
    got = {it["id"]: it for it in bundle.read(paths.bundle).items}
    val = [p for p in preds if got[p["id"]]["split"] == "val"]
    assert val and all(p["label"] in LABELS and 0 < p["confidence"] <= 1 for p in preds)
    right = sum(p["label"] == got[p["id"]]["labels"]["digit"] for p in val)
    # random weights learn the digits: far above chance (1 in 10)
    assert right / len(val) > 0.6, (right, len(val))
    model_dir = os.path.join(paths.artifacts, "model")
    assert json.load(open(os.path.join(model_dir, "labels.json")))["labels"] == LABELS
    back = transformers.AutoModelForImageClassification.from_pretrained(model_dir)
    assert back.config.id2label[0] == LABELS[0]
    transformers.AutoImageProcessor.from_pretrained(model_dir)


def test_multiselect_over_images_gives_label_sets(tmp_path, tiny_vit):
    """Two overlapping tags per digit: "round" (0, 6, 8, 9) and "even"; the predictions are
    label lists."""
    round_ = {"zero", "six", "eight", "nine"}
    even = {"zero", "two", "four", "six", "eight"}
    tags = lambda n: [t for t, on in (("even", n in even), ("round", n in round_)) if on]
    paths = run_dir(tmp_path, tiny_vit, {"type": "multiselect", "labels": ["even", "round"]},
                    tags, lora=True, epochs=2, batch_size=32)
    code, evs = train(paths)
    assert code == 0, [e for e in evs if e["type"] in ("error", "log")][-5:]
    preds = [json.loads(line) for line in open(paths.predictions)]
    assert preds and all(isinstance(p["label"], list) and set(p["label"]) <= {"even", "round"}
                         and 0.5 <= p["confidence"] <= 1 for p in preds)
    assert any(e["type"] == "metric" and e["name"] == "accuracy" for e in evs)
    assert os.path.exists(os.path.join(paths.artifacts, "model", "adapter_config.json"))


def test_items_without_an_image_fail_the_run_with_one_sentence(tmp_path, tiny_resnet):
    paths = run_dir(tmp_path, tiny_resnet, {"type": "radio", "labels": LABELS}, lambda n: n,
                    media_of=lambda rel: {"kind": "image", "path": "/nonexistent/" + rel}, **FAST)
    code, evs = train(paths)
    assert code != 0
    error = [e for e in evs if e["type"] == "error"][-1]["message"]
    assert error.startswith("%d of %d items have no image this trainer can read: " % (
        len(digits()), len(digits())))
    assert "potato validate lists them" in error and "Traceback" not in error


def write_project(tmp_path):
    items = digits()
    os.makedirs(tmp_path / "images")
    for _, rel, _ in items:
        shutil.copy(os.path.join(DIGITS, rel), tmp_path / rel)
    (tmp_path / "items.jsonl").write_text("".join(
        json.dumps({"id": i, "text": i, "image": rel}) + "\n" for i, rel, _ in items))
    (tmp_path / "labels.jsonl").write_text("".join(
        json.dumps({"id": i, "digit": name}) + "\n" for k, (i, _, name) in enumerate(items)
        if k % 4))
    cfg = tmp_path / "config.yaml"
    cfg.write_text("annotation_task_name: Digits\ndata_files: [items.jsonl]\n"
                   "item_properties: {id_key: id, text_key: text, image_key: image}\n"
                   "admin_api_key: %s\nannotation_schemes:\n  - annotation_type: radio\n"
                   "    name: digit\n    labels: [%s]\nmodel_training:\n  grace_seconds: 2\n"
                   "  writeback:\n    schemas: [digit]\n    include_unlabeled: true\n"
                   % (KEY, ", ".join(LABELS)))
    assert main(["annotations", "import", str(cfg), str(tmp_path / "labels.jsonl"),
                 "--annotator", "gold"]) == 0
    return str(cfg)


def test_an_image_project_trains_on_the_local_backend_and_writes_back(tmp_path, serve,
                                                                         tiny_resnet):
    _, url = serve(write_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="hf-image-classification", schemas=["digit"],
                                params=dict(FAST, model=tiny_resnet)), timeout=600)
    assert run["status"] == "success", (run["error"], c.get(
        "/admin/training/api/runs/%s/log" % run["run_id"], headers=H).text[-3000:])
    h = run["holdout"]
    assert h["n"] > 20 and h["accuracy"] > h["baseline"]["accuracy"] + 0.2, h
    # the bundle named each image in place (local backend: no copy)
    items = [json.loads(line) for line in open(os.path.join(
        tmp_path, "annotation_output", "training", "runs", run["run_id"], "bundle",
        "items.jsonl"))]
    assert all(it["media"]["path"].startswith(str(tmp_path / "images")) for it in items)
    unlabelled = next(i for k, (i, _, _) in enumerate(digits()) if k % 4 == 0)
    _, item = c.json("GET", "/admin/api/items/%s" % unlabelled, headers=H)
    assert item["predictions"]["digit"]["label"] in LABELS
