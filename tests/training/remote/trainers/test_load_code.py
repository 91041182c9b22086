"""Every built-in trainer's load code (its registry entry's, one template for the run page and
the Hub model card) run for real: a tiny model per trainer is trained (tests/helpers.py's
builders, random weights, no download), its files laid out as the run page's archive unpacks them and
as a published repo holds them, and the code, filled in as each view fills it, loads them and
predicts. text-naive-bayes and decision-calibrate run through a real server (download, the
run page's code); the transformers trainers through the worker."""

import html
import io
import os
import random
import re
import shutil
import tarfile
from types import SimpleNamespace

import pytest

from potato.training.core.view import RunView
from potato.training.hub import model_card, publish
from potato.training.hub import model_files
from potato.training.remote import bundle, worker
from potato.training.remote import protocol as events
from potato.training.remote.paths import RunPaths, write_json
from potato.training.remote.trainers import REGISTRY, resolve_params
from tests.helpers import (
    DIGITS, FILLER, KEY, NEG, POS, Client, build_tiny_audio_model, build_tiny_image_model,
    build_tiny_llama, make_project, sentence, span_item, start_run, wait_run, wav_bytes,
    word_tokenizer)

H = {"X-API-Key": KEY}
TEXT3 = ["positive", "negative", "neutral"]  # three labels: a head that is not the default two


def run_code(code, cwd, monkeypatch, capsys):
    """``code`` executed in ``cwd``; what it printed."""
    monkeypatch.chdir(cwd)
    capsys.readouterr()
    exec(compile(code, "load_code", "exec"), {"__name__": "load_code"})
    return capsys.readouterr().out.strip()


def both_views(tmp_path, paths, trainer, params, scheme, monkeypatch, capsys, inputs=()):
    """The load code of the run page (the archive unpacked) and of the model card (the repo's
    files; hf_hub_download and from_pretrained read the repo's folder), each run; what each
    printed. ``inputs``: (name, bytes) the code reads from the current directory."""
    view = {"run_id": "r1", "trainer": trainer, "params": params, "schemas": [scheme]}
    download = tmp_path / "download"
    shutil.copytree(paths.artifacts, download / "r1-model")
    repo = tmp_path / "hub" / "alice" / "model"
    files = publish.repo_files(paths.artifacts)
    for rel, local in files:
        os.makedirs(os.path.dirname(str(repo / rel)), exist_ok=True)
        shutil.copy(local, str(repo / rel))
    for folder in (download, repo):
        for name, data in inputs:
            (folder / name).write_bytes(data)
    page_code = model_files.load_code(SimpleNamespace(**view))
    card_code = model_card.load_code(RunView.from_dict(view), str(repo), [p for p, _ in files])
    assert page_code and card_code and "{" not in page_code.replace("{}", "")
    assert card_code.startswith("from huggingface_hub import hf_hub_download\n")
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download",
                        lambda repo_id, name: os.path.join(repo_id, name))
    return (run_code(page_code, download, monkeypatch, capsys),
            run_code(card_code, repo, monkeypatch, capsys))


def worker_run(tmp_path, trainer, items, labels, schemas, **params):
    paths = RunPaths(str(tmp_path / "run")).create()
    bundle.build(paths.bundle, items, labels, schemas, include_unlabeled=True)
    full = resolve_params(REGISTRY[trainer], params)
    write_json(paths.spec, {"run_id": "t", "trainer": trainer, "schemas": schemas,
                            "params": full, "device": "cpu"})
    out = io.StringIO()
    assert worker.run(paths.spec, events.Emitter(out)) == 0, out.getvalue()[-3000:]
    return paths, full


def texts(n=120):
    rng = random.Random(4)
    items, labels = [], {}
    for k in range(n):
        label = TEXT3[k % 3]
        words = {"positive": POS, "negative": NEG, "neutral": FILLER}[label]
        items.append(("t%d" % k, sentence(rng, words)))
        labels["t%d" % k] = label
    return items, labels


# -- through the server: the run page's code on the downloaded archive -----------------------

def page_code_on_download(c, run_id, tmp_path, monkeypatch, capsys):
    r = c.get("/admin/training/runs/%s/model.tar" % run_id, headers=H)
    with tarfile.open(fileobj=io.BytesIO(r.body)) as tar:
        tar.extractall(str(tmp_path / "download"))
    page = c.get("/admin/training/runs/%s" % run_id, headers=H).text
    [code] = re.findall(r'<pre class="load-code"><code>(.*?)</code></pre>', page, re.S)
    return run_code(html.unescape(code), tmp_path / "download", monkeypatch, capsys)


def test_naive_bayes_and_calibration_load_code_runs_on_the_download(tmp_path, serve,
                                                                    monkeypatch, capsys):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    base = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    out = page_code_on_download(c, base["run_id"], tmp_path / "nb", monkeypatch, capsys)
    label, confidence = eval(out)[0]  # [(label, confidence)]
    assert label in ("positive", "negative") and 0.5 <= confidence <= 1
    cal = wait_run(c, start_run(c, trainer="decision-calibrate", schemas=["sentiment"]))
    assert cal["status"] == "success", cal
    out = page_code_on_download(c, cal["run_id"], tmp_path / "cal", monkeypatch, capsys)
    calibrated, _, threshold = out.partition(" keep at or above ")
    assert 0 < float(calibrated) < 1 and threshold == str(cal["metrics"]["threshold"])


def test_naive_bayes_load_code_of_the_card_and_a_multiselect_scheme(tmp_path, monkeypatch,
                                                                    capsys):
    items, labels = texts()
    schemas = {"tags": {"type": "multiselect", "labels": TEXT3}}
    paths, params = worker_run(tmp_path, "text-naive-bayes", items,
                               {i: {"tags": [[lab]]} for i, lab in labels.items()}, schemas)
    page, card = both_views(tmp_path, paths, "text-naive-bayes", params, "tags", monkeypatch,
                            capsys)
    assert page == card
    chosen, confidence = eval(page)[0]
    assert set(chosen) <= set(TEXT3) and 0 <= confidence <= 1


# -- the transformers trainers: their tiny models through the worker ---------------------------

def needs(*modules):
    for m in modules:
        pytest.importorskip(m, reason="needs the training extras (%s)" % m)


@pytest.mark.parametrize("lora", [True, False])
def test_text_classification_load_code(tmp_path, tiny_bert, lora, monkeypatch, capsys):
    needs("torch", "transformers", "peft", "huggingface_hub")
    items, labels = texts()
    schemas = {"s": {"type": "radio", "labels": TEXT3}}
    paths, params = worker_run(tmp_path, "hf-text-classification", items,
                               {i: {"s": [lab]} for i, lab in labels.items()}, schemas,
                               model=tiny_bert, epochs=1, batch_size=16, max_length=16,
                               lora=lora)
    page, card = both_views(tmp_path, paths, "hf-text-classification", params, "s",
                            monkeypatch, capsys)
    assert page == card and page in TEXT3


@pytest.mark.parametrize("lora", [True, False])
def test_text_regression_load_code(tmp_path, tiny_bert, lora, monkeypatch, capsys):
    needs("torch", "transformers", "peft", "huggingface_hub")
    items, _ = texts()
    schemas = {"score": {"type": "slider", "labels": [], "min_value": 0, "max_value": 10}}
    values = {i: {"score": [k % 11]} for k, (i, _) in enumerate(items)}
    paths, params = worker_run(tmp_path, "hf-text-regression", items, values, schemas,
                               model=tiny_bert, epochs=1, batch_size=16, max_length=16,
                               lora=lora)
    page, card = both_views(tmp_path, paths, "hf-text-regression", params, "score",
                            monkeypatch, capsys)
    assert page == card and -100 < float(page) < 100


@pytest.mark.parametrize("lora", [False, True])
def test_token_classification_load_code(tmp_path, tiny_token_bert, lora, monkeypatch, capsys):
    needs("torch", "transformers", "peft", "huggingface_hub")
    rng = random.Random(1)
    items, labels = [], {}
    for n in range(60):
        text, spans = span_item(rng)
        items.append(("i%d" % n, text))
        labels["i%d" % n] = {"who": [spans]}
    schemas = {"who": {"type": "span", "labels": ["person", "place"]}}
    paths, params = worker_run(tmp_path, "hf-token-classification", items, labels, schemas,
                               model=tiny_token_bert, epochs=1, batch_size=8, max_length=16,
                               stride=4, lora=lora)
    page, card = both_views(tmp_path, paths, "hf-token-classification", params, "who",
                            monkeypatch, capsys)
    tags = eval(page)
    assert page == card and tags and all(t == "O" or t[2:] in ("person", "place") for t in tags)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """Built once per module (training its word-level tokenizer starts a progress thread)."""
    needs("torch", "transformers", "peft", "tokenizers", "huggingface_hub")
    from potato.training.remote import llm_prompt

    words = [t for _, t in texts(60)[0]] + [llm_prompt.DEFAULT_TEMPLATE, " ".join(TEXT3)]
    return build_tiny_llama(tmp_path_factory.mktemp("llama"), word_tokenizer(words))


def test_llm_classification_load_code(tmp_path, tiny_llama, monkeypatch, capsys):
    items, labels = texts(60)
    model = tiny_llama
    schemas = {"s": {"type": "radio", "labels": TEXT3, "description": "Which one?"}}
    paths, params = worker_run(tmp_path, "hf-llm-classification", items,
                               {i: {"s": [lab]} for i, lab in labels.items()}, schemas,
                               model=model, epochs=1, batch_size=16, max_length=64)
    page, card = both_views(tmp_path, paths, "hf-llm-classification", params, "s",
                            monkeypatch, capsys)
    assert page == card and page in TEXT3


IMAGES = os.path.join(DIGITS, "media", "images")


@pytest.mark.parametrize("family,lora", [("resnet", False), ("vit", True)])
def test_image_classification_load_code(tmp_path, family, lora, monkeypatch, capsys):
    needs("torch", "transformers", "peft", "PIL", "huggingface_hub")
    model = build_tiny_image_model(str(tmp_path / "model"), family)
    items, labels = [], {}
    for k, name in enumerate(sorted(os.listdir(IMAGES))[:40]):
        items.append((name, "", {"kind": "image", "path": os.path.join(IMAGES, name)}))
        labels[name] = {"digit": [TEXT3[k % 3]]}
    paths, params = worker_run(tmp_path, "hf-image-classification", items, labels,
                               {"digit": {"type": "radio", "labels": TEXT3}}, model=model,
                               epochs=1, batch_size=16, lora=lora)
    with open(os.path.join(IMAGES, "digit-0000.png"), "rb") as f:
        png = f.read()
    page, card = both_views(tmp_path, paths, "hf-image-classification", params, "digit",
                            monkeypatch, capsys, inputs=[("an-image.png", png)])
    assert page == card and page in TEXT3


@pytest.mark.parametrize("lora", [False, True])
def test_audio_classification_load_code(tmp_path, lora, monkeypatch, capsys):
    needs("torch", "transformers", "peft", "numpy", "huggingface_hub")
    model = build_tiny_audio_model(str(tmp_path / "model"))
    sounds = tmp_path / "sounds"
    sounds.mkdir()
    items, labels = [], {}
    for k in range(24):
        high = k % 2 == 1
        path = sounds / ("clip-%d.wav" % k)
        path.write_bytes(wav_bytes(0.3, 16000, (1500.0 if high else 200.0) + 10 * k))
        items.append(("c%d" % k, "", {"kind": "audio", "path": str(path)}))
        labels["c%d" % k] = {"pitch": ["high" if high else "low"]}
    paths, params = worker_run(tmp_path, "hf-audio-classification", items, labels,
                               {"pitch": {"type": "radio", "labels": ["low", "high"]}},
                               model=model, epochs=1, batch_size=8, lora=lora)
    page, card = both_views(tmp_path, paths, "hf-audio-classification", params, "pitch",
                            monkeypatch, capsys,
                            inputs=[("a-clip.wav", wav_bytes(0.5, 16000, 440.0))])
    assert page == card and page in ("low", "high")


def test_every_built_in_trainer_has_load_code_and_a_test_here():
    """A trainer added to the registry without load code, or without a test above that runs
    it, fails here."""
    src = open(__file__).read()
    for name, info in REGISTRY.items():
        assert info.load_template({}) and info.load_template({"lora": True}), name
        assert '"%s"' % name in src, name  # a test above trains it and runs its code
