"""hf-text-classification on a tiny BERT built here (random weights, a vocab written by the
test; no downloads), with LoRA and without, and its artifacts loaded back."""

import io
import json
import os

import pytest

if os.environ.get("CI"):  # CI installs the train-text extra: a missing package is a failure
    import peft
    import torch
    import transformers
else:
    torch = pytest.importorskip("torch", reason="needs the train-text extra (torch)")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")

from potato.training.remote import protocol as events
from potato.training.remote import worker  # noqa: E402
from tests.helpers import hf_run_dir as _run_dir, hf_train as _train

@pytest.mark.parametrize("lora", [True, False])
def test_trains_saves_and_loads_back(tmp_path, tiny_bert, lora):
    # float32 (bf16 false): the predictions are compared below with a float32 reload's,
    # digit for digit; test_bf16_* covers bfloat16 autocast
    params = {"epochs": 8, "batch_size": 8, "max_length": 16, "lora": lora,
              "learning_rate": 5e-3 if lora else 1e-3, "bf16": "false"}
    paths, items = _run_dir(tmp_path, tiny_bert, **params)
    code, evs = _train(paths)
    errors = [e for e in evs if e["type"] == "error"]
    assert code == 0 and not errors, errors
    kinds = [e["type"] for e in evs]
    assert kinds[-1] == "result"
    progress = [e for e in evs if e["type"] == "progress" and e["unit"] == "step"]
    n_train = json.load(open(os.path.join(paths.bundle, "manifest.json")))["counts"]["train"]
    assert progress[-1]["current"] == progress[-1]["total"] == 8 * -(-n_train // 8)
    assert all("eta_s" in e for e in progress)
    losses = [e for e in evs if e["type"] == "metric" and e["name"] == "loss" and "step" not in e]
    # a loss point per step for the chart (about every 1% of the run), each epoch's last step
    points = [e for e in evs if e["type"] == "metric" and e["name"] == "loss" and "step" in e]
    steps = [e["current"] for e in evs if e["type"] == "progress" and e["unit"] == "step"]
    assert [e["step"] for e in points] == steps  # few steps here: every step has its point
    assert any(e["type"] == "where" and e.get("device") == "cpu" for e in evs)
    accs = [e for e in evs if e["type"] == "metric" and e["name"] == "accuracy"]
    assert [e["epoch"] for e in losses] == list(range(1, 9)) and len(accs) == 8
    assert "epoch 3/8" in [e.get("message") for e in evs if e["type"] == "status"]
    # The requested cuda:1 is absent here: a warning, then CPU.
    assert any(e["type"] == "log" and e["level"] == "warning" and
               "device cuda:1 was requested but is not available" in e["message"] for e in evs)
    result = next(e for e in evs if e["type"] == "result")
    assert result["metrics"]["sentiment.val_accuracy"] >= 0.9, result  # an easy task

    # Load the artifacts with plain transformers/peft and predict the same labels.
    model_dir = os.path.join(paths.artifacts, "model")
    meta = json.load(open(os.path.join(model_dir, "labels.json")))
    assert meta["labels"] == ["positive", "negative"] and meta["lora"] is lora
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    if lora:
        assert os.path.exists(os.path.join(model_dir, "adapter_config.json"))
        base = transformers.AutoModelForSequenceClassification.from_pretrained(tiny_bert,
                                                                               num_labels=2)
        model = peft.PeftModel.from_pretrained(base, model_dir)
    else:
        assert os.path.exists(os.path.join(model_dir, "config.json"))
        model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir)
    model.eval()
    preds = [json.loads(line) for line in open(paths.predictions)]
    texts = dict(items)
    sample = preds[:20]
    with torch.no_grad():
        enc = tok([texts[p["id"]] for p in sample], truncation=True, padding=True, max_length=16,
                  return_tensors="pt")
        probs = torch.softmax(model(**enc).logits, dim=-1)
    for p, row in zip(sample, probs):
        k = int(row.argmax())
        assert meta["labels"][k] == p["label"]
        assert abs(float(row[k]) - p["confidence"]) < 1e-4


def test_cancel_between_steps(tmp_path, tiny_bert):
    paths, _ = _run_dir(tmp_path, tiny_bert, epochs=50, batch_size=4, max_length=16)

    class CancelAfter(events.Emitter):
        def emit(self, event_type, **fields):
            event = super().emit(event_type, **fields)
            if event_type == "progress" and fields.get("current") == 5:
                self.ctx_flag()
            return event

    out = io.StringIO()
    em = CancelAfter(out)
    # Cancel exactly as SIGTERM does: the handler flips the context's flag.
    import signal

    em.ctx_flag = lambda: os.kill(os.getpid(), signal.SIGTERM)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = worker.run(paths.spec, em)
    finally:
        signal.signal(signal.SIGTERM, previous)
    evs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert code == events.EXIT_CANCELLED
    steps = [e["current"] for e in evs if e["type"] == "progress"]
    assert max(steps) <= 6
    assert evs[-1] == {**evs[-1], "type": "error", "kind": "cancelled"}


def test_active_learning_predictions_carry_probabilities_and_a_vector(tmp_path, tiny_bert):
    """With the spec's ``ranking`` (active learning), each prediction carries each label's
    probability and the item's vector, and the server's trust boundary accepts them."""
    from potato.training.exchange import boundary
    from potato.training.remote.bundle import read

    paths, items = _run_dir(tmp_path, tiny_bert, epochs=2, batch_size=8, max_length=16)
    spec = json.load(open(paths.spec))
    spec["ranking"] = True
    json.dump(spec, open(paths.spec, "w"))
    code, evs = _train(paths)
    assert code == 0, [e for e in evs if e["type"] == "error"]
    lines = open(paths.predictions).read().splitlines()
    rows = [json.loads(line) for line in lines]
    unlabeled = [r for r in rows if r["split"] == "unlabeled"]
    assert len(unlabeled) == 40
    for r in rows:
        probs = r["probabilities"]
        assert set(probs) == {"positive", "negative"}
        assert abs(sum(probs.values()) - 1) < 1e-4
        assert probs[r["label"]] == pytest.approx(r["confidence"], abs=1e-5)
        assert len(r["vector"]) == 32  # the tiny model's width: no projection needed
    b = read(paths.bundle, verify=False)
    checked, problem = boundary.predictions(lines, {it["id"]: it["split"] for it in b.items},
                                            b.schemas)
    assert problem is None and checked[0]["probabilities"] and checked[0]["vector"]


@pytest.mark.parametrize("bf16", ["true", "false", "auto"])
def test_bf16_autocast_on_the_cpu_as_the_param_says(tmp_path, tiny_bert, bf16):
    """bf16 true trains and predicts under bfloat16 autocast on a CPU as well; auto does so
    only on a CPU that computes bfloat16 natively; the log says which. The model learns
    either way, and a float32 reload of it predicts the labels its predictions carry."""
    from potato.training.remote.trainers.hf_text import cpu_has_bf16

    paths, items = _run_dir(tmp_path, tiny_bert, epochs=8, batch_size=8, max_length=16,
                            learning_rate=5e-3, bf16=bf16)
    code, evs = _train(paths)
    assert code == 0, [e for e in evs if e["type"] == "error"]
    logs = " ".join(e["message"] for e in evs if e["type"] == "log")
    on = bf16 == "true" or bf16 == "auto" and cpu_has_bf16()
    assert ("bfloat16 autocast" in logs) is on and ("float32" in logs) is not on, logs
    result = next(e for e in evs if e["type"] == "result")
    assert result["metrics"]["sentiment.val_accuracy"] >= 0.9, result
    model_dir = os.path.join(paths.artifacts, "model")
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    base = transformers.AutoModelForSequenceClassification.from_pretrained(tiny_bert,
                                                                           num_labels=2)
    model = peft.PeftModel.from_pretrained(base, model_dir).eval()
    preds = [json.loads(line) for line in open(paths.predictions)][:40]
    texts = dict(items)
    with torch.no_grad():
        enc = tok([texts[p["id"]] for p in preds], truncation=True, padding=True,
                  max_length=16, return_tensors="pt")
        probs = torch.softmax(model(**enc).logits, dim=-1)
    labels = ["positive", "negative"]
    agree = sum(labels[int(row.argmax())] == p["label"] for p, row in zip(preds, probs))
    assert agree >= 38, agree  # bfloat16 rounding may flip an item the model is unsure of
    for p, row in zip(preds, probs):
        assert abs(float(row[labels.index(p["label"])]) - p["confidence"]) < (
            0.05 if on else 1e-4)
