"""hf-token-classification on a tiny BERT built here (random weights, a fast tokenizer over the
test's words; no downloads): the worker alone, then end to end through the real server and
its API on the local backend, through the fake ssh host, the fake SLURM cluster and a real
agent, with write-back and suggestions."""

import json
import os
import random

import pytest

if os.environ.get("CI"):  # CI installs the train-text extra: a missing package is a failure
    import torch
    import transformers
else:
    torch = pytest.importorskip("torch", reason="needs the train-text extra (torch)")
    transformers = pytest.importorskip("transformers")

from potato.training.exchange import boundary
from potato.training.remote import bundle
from potato.training.remote.paths import RunPaths, write_json
from potato.training.remote.trainers import REGISTRY, resolve_params
from tests.helpers import (
    KEY, Client, agent_once, hf_train, job_dirs, make_span_project, register_agent,
    slurm_backend, span_item, ssh_backend, start_run, wait_run)

H = {"X-API-Key": KEY}
SCHEMAS = {"who": {"type": "span", "labels": ["person", "place"]}}
# The tiny model's word vectors are random (they mean nothing yet), so they train with the rest:
# the trainer's default keeps a pretrained model's word embeddings as they are.
FAST = {"epochs": 6, "batch_size": 8, "max_length": 16, "stride": 4, "learning_rate": 5e-3,
        "train_embeddings": True}


def run_dir(tmp_path, model, **params):
    rng = random.Random(1)
    items, labels = [], {}
    for n in range(200):
        text, spans = span_item(rng, 25 if n % 10 == 0 else None)
        items.append(("i%d" % n, text))
        if n < 170:
            labels["i%d" % n] = {"who": [spans]}
    paths = RunPaths(tmp_path / "run").create()
    bundle.build(paths.bundle, items, labels, SCHEMAS, include_unlabeled=True)
    full = resolve_params(REGISTRY["hf-token-classification"], dict(model=model, **params))
    write_json(paths.spec, {"run_id": "t", "trainer": "hf-token-classification",
                            "schemas": SCHEMAS, "params": full, "device": "cpu"})
    return paths, dict(items)


def test_trains_predicts_spans_and_loads_back(tmp_path, tiny_token_bert):
    paths, texts = run_dir(tmp_path, tiny_token_bert, **FAST)
    code, evs = hf_train(paths)
    errors = [e for e in evs if e["type"] == "error"]
    assert code == 0 and not errors, errors
    f1s = [e["value"] for e in evs if e["type"] == "metric" and e["name"] == "entity_f1"]
    assert len(f1s) == 6 and f1s[-1] >= 0.9, f1s  # an easy task
    log = " ".join(e.get("message", "") for e in evs if e["type"] == "log")
    assert "windows of at most 16 tokens" in log
    lines = open(paths.predictions).read().splitlines()
    splits = {it["id"]: it["split"] for it in bundle.read(paths.bundle).items}
    rows, problem = boundary.predictions(lines, splits, SCHEMAS, texts)
    assert problem is None and len(rows) == len(lines) > 20
    # A text of 25 words and more is longer than one window: spans found past the first.
    long_ids = ["i%d" % n for n in range(170, 200) if n % 10 == 0]
    late = [s for r in rows if r["id"] in long_ids for s in r["label"] if s["end"] > 60]
    assert late, [r for r in rows if r["id"] in long_ids]
    # The model files load with plain transformers and tag like the predictions.
    model_dir = os.path.join(paths.artifacts, "model")
    meta = json.load(open(os.path.join(model_dir, "labels.json")))
    assert meta["tags"] == ["O", "B-person", "I-person", "B-place", "I-place"]
    model = transformers.AutoModelForTokenClassification.from_pretrained(model_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    row = next(r for r in rows if r["label"] and r["id"] not in long_ids)
    with torch.no_grad():
        enc = tok(texts[row["id"]], return_tensors="pt", return_offsets_mapping=True)
        offsets = enc.pop("offset_mapping")[0].tolist()
        tags = model(**enc).logits[0].argmax(-1).tolist()
    starts = [a for (a, b), t in zip(offsets, tags) if a != b and  # not [CLS] or [SEP]
              meta["tags"][t].startswith("B-")]
    assert [s["start"] for s in row["label"]] == starts


def test_two_processes_train_like_one(tmp_path, tiny_token_bert):
    """Data-parallel on the CPU (gloo), as on pinned GPUs: the same steps, val F1 summed over
    the ranks, one set of predictions from rank 0."""
    one, _ = run_dir(tmp_path / "one", tiny_token_bert, **dict(FAST, processes=1))
    code, alone = hf_train(one)
    assert code == 0, alone[-1]
    paths, _ = run_dir(tmp_path / "two", tiny_token_bert, **dict(FAST, processes=2))
    code, evs = hf_train(paths)
    assert code == 0, [e for e in evs if e["type"] == "error"]
    assert any("data-parallel: 2 processes (gloo backend)" in e.get("message", "")
               for e in evs if e["type"] == "log")
    steps = [e["current"] for e in evs if e["type"] == "progress" and e["unit"] == "step"]
    assert steps[-1] == [e["current"] for e in alone
                         if e["type"] == "progress" and e["unit"] == "step"][-1]
    metrics = evs[-1]["metrics"]
    assert metrics["who.val_entity_f1"] >= 0.85, metrics
    assert abs(metrics["who.val_entity_f1"] - alone[-1]["metrics"]["who.val_entity_f1"]) <= 0.1
    assert len(open(paths.predictions).readlines()) == metrics["predictions"] > 0


def test_lora_saves_an_adapter(tmp_path, tiny_token_bert):
    paths, _ = run_dir(tmp_path, tiny_token_bert, **dict(FAST, epochs=2, lora=True))
    code, evs = hf_train(paths)
    assert code == 0, [e for e in evs if e["type"] == "error"]
    assert os.path.exists(os.path.join(paths.artifacts, "model", "adapter_config.json"))


def embeddings(model_dir):
    model = transformers.AutoModelForTokenClassification.from_pretrained(model_dir)
    return model.get_input_embeddings().weight.detach().clone()


@pytest.mark.parametrize("train_embeddings", [False, True])
def test_full_fine_tuning_keeps_the_word_embeddings_unless_asked(tmp_path, tiny_token_bert,
                                                                 train_embeddings):
    """The default keeps the pretrained word vectors (every other weight trains);
    train_embeddings: true updates them too."""
    paths, _ = run_dir(tmp_path, tiny_token_bert,
                       **dict(FAST, epochs=1, train_embeddings=train_embeddings))
    code, evs = hf_train(paths)
    assert code == 0, [e for e in evs if e["type"] == "error"]
    saved = os.path.join(paths.artifacts, "model")
    base = transformers.AutoModel.from_pretrained(tiny_token_bert)
    before = base.get_input_embeddings().weight.detach()
    assert torch.equal(embeddings(saved), before) is not train_embeddings
    trained = transformers.AutoModel.from_pretrained(saved)
    layer = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(trained.state_dict()[layer], base.state_dict()[layer])


def test_a_slow_tokenizer_is_refused_with_the_way_out(tmp_path, tiny_token_bert, monkeypatch):
    real = transformers.AutoTokenizer.from_pretrained

    def slow(*a, **kw):
        tok = real(*a, **kw)
        monkeypatch.setattr(type(tok), "is_fast", property(lambda self: False))
        return tok

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", slow)
    paths, _ = run_dir(tmp_path, tiny_token_bert, **dict(FAST, epochs=1))
    code, evs = hf_train(paths)
    error = next(e for e in evs if e["type"] == "error")
    assert code != 0 and "needs a fast one" in error["message"]
    assert "tokenizer.json" in error["message"]


def check_span_run(c, run, rows):
    """What every backend's span run must show: the entity report, written spans, the page."""
    assert run["status"] == "success", run["error"]
    h = run["holdout"]
    assert h["kind"] == "span" and h["n"] > 10 and h["micro_f1"] >= 0.8, h
    assert set(h["per_label"]) == {"person", "place"} and h["entities"] > 10
    assert run["writeback"]["written"] > 40 and run["writeback"]["in_use"] == ["who"]
    unlabeled = rows[-1]  # past the labelled items: a suggestion from the model
    _, item = c.json("GET", "/admin/api/items/%s" % unlabeled["id"], headers=H)
    spans = item["predictions"]["who"]["label"]
    assert spans and all(unlabeled["text"][s["start"]:s["end"]] == s["text"] for s in spans)
    page = c.get("/admin/training/runs/%s" % run["run_id"], headers=H).text
    assert "Entity-level (exact span and label)" in page and "report-spans" in page


def test_span_run_on_the_local_backend(tmp_path, serve, tiny_token_bert):
    cfg, rows = make_span_project(tmp_path, "  backend: local\n")
    _, url = serve(cfg)
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="hf-token-classification", schemas=["who"],
                                params=dict(FAST, model=tiny_token_bert)), timeout=300)
    check_span_run(c, run, rows)
    assert run["metrics"]["who.val_entity_f1"] >= 0.8
    table = c.get("/admin/training", headers=H).text
    assert "entity micro-F1 " in table and "(n=" in table


def test_span_run_through_the_fake_ssh_host(tmp_path, serve, fake_host, tiny_token_bert):
    cfg, rows = make_span_project(tmp_path, ssh_backend())
    _, url = serve(cfg)
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="hf-token-classification", schemas=["who"],
                                backend="gpu-server",
                                params=dict(FAST, model=tiny_token_bert)), timeout=300)
    check_span_run(c, run, rows)
    assert run["ran_on"].startswith("gpu-server (ssh)")


def test_span_run_on_an_agent(tmp_path, serve, capsys, tiny_token_bert):
    cfg, rows = make_span_project(tmp_path, "  backends:\n    lab: {type: agent, "
                                            "heartbeat_timeout_s: 20}\n")
    _, url = serve(cfg)
    c = Client(url)
    token = register_agent(cfg, "lab", capsys)
    run_id = start_run(c, trainer="hf-token-classification", schemas=["who"], backend="lab",
                       params=dict(FAST, model=tiny_token_bert))
    agent_once(url, "lab", token, tmp_path / "agent work")
    run = wait_run(c, run_id)
    check_span_run(c, run, rows)
    assert run["ran_on"].startswith("lab (agent)")


def test_span_run_on_the_fake_slurm_cluster(tmp_path, serve, cluster, tiny_token_bert):
    """sbatch, squeue and the login node are stand-ins (tests/fakes/slurm); the job runs the
    real worker with the real trainer, and its spans come back and are written."""
    home, state = cluster
    cfg, rows = make_span_project(tmp_path, slurm_backend())
    _, url = serve(cfg)
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="hf-token-classification", schemas=["who"],
                                backend="cluster",
                                params=dict(FAST, model=tiny_token_bert)), timeout=300)
    check_span_run(c, run, rows)
    assert run["ran_on"].startswith("cluster (slurm): SLURM job 4242 on node fake-node01")
    assert run["placement"]["slurm_job"] == "4242"
    assert job_dirs(home / "potato jobs", run["run_id"]) == []  # the job's files cleaned up


def test_a_predicted_span_covers_whole_words():
    """A word takes its first sub-word's tag: a span never starts or ends inside a word, and a
    word whose first sub-word is O is not tagged whatever its later sub-words say."""
    from potato.training.remote.trainers.hf_tokens import Trainer

    me = type("T", (), {"labels": ["person", "place"]})()
    tags = ["O", "B-person", "I-person", "B-place", "I-place"]

    def probs(tag, p=0.9):
        row = [(1 - p) / 4] * 5
        row[tags.index(tag)] = p
        return row

    text = "Parisville rocks , Bo"
    acc = {(0, 5): [probs("B-place"), 1, 0], (5, 10): [probs("O", 0.6), 1, 0],
           (11, 13): [probs("O"), 1, 1], (13, 16): [probs("B-person"), 1, 1],
           (17, 18): [probs("O"), 1, 2], (19, 21): [[x * 2 for x in probs("B-person", 0.8)], 2, 3]}
    found, lowest = Trainer._spans(me, text, acc)
    assert [(s["start"], s["end"], s["label"]) for s in found] == [
        (0, 10, "place"), (19, 21, "person")]
    assert found[0]["confidence"] == 0.9 and lowest == pytest.approx(0.8)


def test_the_dropout_param_sets_every_dropout_setting_of_the_config():
    from potato.training.remote.trainers.hf_tokens import Trainer

    config = type("C", (), {})()
    config.__dict__.update(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                           classifier_dropout=None, hidden_size=32, dropout_rate_name="x")
    me = type("T", (), {"p": {"dropout": 0.0}})()
    assert Trainer._dropout(me, config) == {"hidden_dropout_prob": 0.0,
                                           "attention_probs_dropout_prob": 0.0,
                                           "classifier_dropout": 0.0}
    me.p["dropout"] = 0.25
    assert set(Trainer._dropout(me, config).values()) == {0.25}
    gpt2 = type("C", (), {})()
    gpt2.__dict__.update(resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0, summary_first_dropout=0.1,
                         scale_attn_weights=True, n_layer=2)
    assert Trainer._dropout(me, gpt2) == dict.fromkeys(
        ["resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_first_dropout"], 0.25)
    me.p["dropout"] = None
    assert Trainer._dropout(me, config) == {}


def test_words_are_not_joined_across_punctuation_or_in_scripts_without_spaces():
    """Tokenizers that split only at whitespace (XLM-R, DeBERTa-v3) or nowhere (Llama-style)
    give one word id to "Paris." or to a whole Chinese sentence: a span must still end before
    the full stop, and Chinese names stay apart."""
    from potato.training.remote.trainers.hf_tokens import Trainer, words_join

    assert words_join("Texasville", 5, 5) and not words_join("Paris.", 5, 5)
    assert not words_join("ab cd", 2, 3) and not words_join("张伟在北京", 2, 2)
    me = type("T", (), {"labels": ["person", "place"]})()
    tags = ["O", "B-person", "I-person", "B-place", "I-place"]

    def row(tag):
        out = [0.025] * 5
        out[tags.index(tag)] = 0.9
        return out

    text = "Alice, 张伟在北京"  # every token in word 0, as a whitespace-free pre-tokenizer gives
    acc = {(0, 5): [row("B-person"), 1, 0], (5, 6): [row("O"), 1, 0],
           (7, 8): [row("B-person"), 1, 0], (8, 9): [row("I-person"), 1, 0],
           (9, 10): [row("O"), 1, 0], (10, 11): [row("B-place"), 1, 0],
           (11, 12): [row("I-place"), 1, 0]}
    found, _ = Trainer._spans(me, text, acc)
    assert [(text[s["start"]:s["end"]], s["label"]) for s in found] == [
        ("Alice", "person"), ("张伟", "person"), ("北京", "place")]


def test_a_loss_that_is_not_finite_fails_the_run_in_every_hf_loop():
    """hf_text, hf_tokens and hf_llm read the epoch's loss through one check."""
    import inspect

    from potato.training.remote.trainers import hf_llm, hf_text, hf_tokens

    class Failure(Exception):
        pass

    ctx = type("Ctx", (), {"RunFailure": Failure})()
    assert hf_text.check_loss(ctx, 1, 0.25) == 0.25
    for bad in (float("nan"), float("inf")):
        with pytest.raises(Failure, match="the training loss of epoch 2 was"):
            hf_text.check_loss(ctx, 2, bad)
    for module in (hf_text, hf_tokens, hf_llm):
        assert "check_loss(" in inspect.getsource(module.Trainer._train)
