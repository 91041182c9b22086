"""hf-llm-classification on tiny causal LMs built here (a Llama and a GPT-2 with random weights,
a word-level tokenizer trained on SST-2 text by the test; no downloads): training through the
worker, label scoring, reloading the adapter with plain peft, the early failures, and runs
through a real server on the local and the real-sshd backends."""

import socket
import io
import json
import os
import sys

import pytest

if os.environ.get("CI"):  # CI installs train-text (torch, transformers, peft): all this needs
    import peft
    import tokenizers
    import torch
    import transformers
else:
    torch = pytest.importorskip("torch", reason="needs the train-llm extra (torch)")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    tokenizers = pytest.importorskip("tokenizers")

from potato.training.remote import bundle  # noqa: E402
from potato.training.remote import protocol as events  # noqa: E402
from potato.training.remote import worker  # noqa: E402
from potato.training.remote.paths import RunPaths, write_json  # noqa: E402
from potato.training.remote.trainers import REGISTRY, ParamError, resolve_params  # noqa: E402
from potato.training.remote import llm_prompt  # noqa: E402
from potato.training.remote.trainers import hf_llm  # noqa: E402
from tests.helpers import ROOT, build_tiny_llama, word_tokenizer  # noqa: E402

TRAINER = "hf-llm-classification"
SST2 = os.path.join(ROOT, "bench", "data", "sst2-2000-labelled.jsonl")
LABELS = ["positive", "negative"]
SCHEMAS = {"sentiment": {"type": "radio", "labels": LABELS,
                         "description": "Is the review positive or negative?"}}


def _sst2(n=240):
    with open(SST2) as f:
        rows = [json.loads(line) for line in f][:n]
    return [(r["id"], r["text"], r["sentiment"]) for r in rows]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A word-level tokenizer over SST-2, the prompt and the labels,
    with BOS and EOS but no pad token (like most causal LMs)."""
    texts = [t for _, t, _ in _sst2(2000)]
    texts += [llm_prompt.DEFAULT_TEMPLATE, " ".join(LABELS), SCHEMAS["sentiment"]["description"]]
    tok = word_tokenizer(texts)
    assert tok.pad_token is None
    return tok


def _save_model(d, model, tok):
    model.save_pretrained(str(d))
    tok.save_pretrained(str(d))
    return str(d)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory, tokenizer):
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), tokenizer)


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory, tokenizer):
    cfg = transformers.GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2,
                                  n_positions=256, bos_token_id=tokenizer.bos_token_id,
                                  eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    return _save_model(tmp_path_factory.mktemp("tiny-gpt2"),
                       transformers.GPT2LMHeadModel(cfg), tokenizer)


def _run_dir(tmp_path, model_dir, n=240, schemas=SCHEMAS, **params):
    rows = _sst2(n)
    items = [(i, t) for i, t, _ in rows]
    labels = {i: {"sentiment": [lab]} for i, _, lab in rows[:n - 40]}  # 40 unlabeled
    paths = RunPaths(tmp_path / "run").create()
    bundle.build(paths.bundle, items, labels, schemas, include_unlabeled=True)
    full = resolve_params(REGISTRY[TRAINER], dict(model=model_dir, **params))
    write_json(paths.spec, {"run_id": "t", "trainer": TRAINER, "schemas": schemas,
                            "params": full, "device": "cpu"})
    return paths, dict(items)


def _work(paths):
    out = io.StringIO()
    code = worker.run(paths.spec, events.Emitter(out))
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


FAST = {"epochs": 3, "batch_size": 16, "max_length": 80, "lora_r": 8, "learning_rate": 1e-2}


def _docs_snippet(model_dir):
    """The loading code of docs/training.md, run as written (on ``model_dir``)."""
    import re

    with open(os.path.join(ROOT, "docs", "training.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    [code] = [b for b in blocks if "AutoPeftModelForCausalLM" in b]
    assert 'd = "artifacts/model"' in code
    ns = {}
    exec(code.replace('d = "artifacts/model"', "d = %r" % model_dir), ns)
    return ns["label_probabilities"]


def test_llama_trains_predicts_and_reloads_with_peft(tmp_path, tiny_llama):
    paths, texts = _run_dir(tmp_path, tiny_llama, n=180, **FAST)
    code, evs = _work(paths)
    errors = [e for e in evs if e["type"] == "error"]
    assert code == 0 and not errors, errors
    assert evs[-1]["type"] == "result"
    progress = [e for e in evs if e["type"] == "progress" and e["unit"] == "step"]
    n_train = json.load(open(os.path.join(paths.bundle, "manifest.json")))["counts"]["train"]
    assert progress[-1]["current"] == progress[-1]["total"] == 3 * -(-n_train // 16)
    losses = [e["value"] for e in evs if e["type"] == "metric" and e["name"] == "loss"
              and "step" not in e]  # the epochs' means (per-step points have a step)
    steps = [e for e in evs if e["type"] == "metric" and e["name"] == "loss" and "step" in e]
    assert steps and steps[-1]["step"] == progress[-1]["total"]
    assert any(e["type"] == "where" and e.get("device") == "cpu" for e in evs)
    print("losses", losses, "val accuracy", [e["value"] for e in evs if e.get("name") == "accuracy"])
    assert len(losses) == 3 and losses[-1] < losses[0] * 0.8, losses
    assert len([e for e in evs if e["type"] == "metric" and e["name"] == "accuracy"]) == 3
    assert any("q_proj" in e.get("message", "") for e in evs if e["type"] == "log")

    preds = [json.loads(line) for line in open(paths.predictions)]
    assert preds and {p["label"] for p in preds} <= set(LABELS)
    assert all(0.5 <= p["confidence"] <= 1 for p in preds)
    assert {p["split"] for p in preds} == {"val", "test", "unlabeled"}

    model_dir = os.path.join(paths.artifacts, "model")
    meta = json.load(open(os.path.join(model_dir, "labels.json")))
    assert meta["labels"] == LABELS and meta["base_model"] == tiny_llama
    assert meta["prompt_template"] == llm_prompt.DEFAULT_TEMPLATE
    assert os.path.exists(os.path.join(model_dir, "adapter_config.json"))
    artifacts = {e["path"] for e in evs if e["type"] == "artifact"}
    assert "model/labels.json" in artifacts and "model/adapter_config.json" in artifacts

    # Plain peft loads it (the base model from adapter_config.json), one unpadded sequence per
    # label as the docs show, and gives the trainer's predictions.
    label_probabilities = _docs_snippet(model_dir)
    for p in preds[:12]:
        probs = label_probabilities(texts[p["id"]])
        assert list(probs) == LABELS and abs(sum(probs.values()) - 1) < 1e-6
        best = max(probs, key=probs.get)
        assert best == p["label"], (probs, p)
        assert abs(probs[best] - p["confidence"]) < 1e-4, (probs, p)


def _trainer(tmp_path, model_dir, schemas=SCHEMAS, **params):
    """A trainer run by hand (not through the worker), to look at its scores."""
    paths, texts = _run_dir(tmp_path, model_dir, n=120, schemas=schemas, **params)
    spec = json.load(open(paths.spec))
    ctx = worker.Context(spec, os.path.dirname(paths.spec), events.Emitter(io.StringIO()))
    ctx.bundle = bundle.read(ctx.bundle_dir)
    os.makedirs(ctx.artifacts, exist_ok=True)
    return hf_llm.Trainer(ctx), texts


def test_gpt2_scores_are_a_distribution_over_the_scheme(tmp_path, tiny_gpt2):
    three = {"sentiment": {"type": "radio", "labels": ["positive", "negative", "neutral"]}}
    trainer, texts = _trainer(tmp_path, tiny_gpt2, schemas=three, epochs=1, batch_size=16,
                              learning_rate=1e-2, max_length=40)
    trainer.train()
    assert trainer.targets == ["c_attn"]
    sample = list(texts.values())[:24]
    probs = trainer.label_probabilities(sample)
    assert len(probs) == len(sample)
    for row in probs:
        assert len(row) == 3 and all(0 < x < 1 for x in row)
        assert abs(sum(row) - 1) < 1e-9
    assert len(set(tuple(round(x, 6) for x in row) for row in probs)) > 1  # depends on the text
    for (label, conf), row in zip(trainer.predict("sentiment", sample), probs):
        assert label == three["sentiment"]["labels"][row.index(max(row))] and conf == max(row)
    # active learning gets the same distribution, by label
    for (label, conf, extra), row in zip(trainer.predict_ranked("sentiment", sample), probs):
        assert extra["probabilities"] == dict(zip(three["sentiment"]["labels"], row))
    # Left padding with position ids: a batch of mixed lengths scores as each text alone
    # (GPT-2's absolute positions would shift without them).
    batched = trainer.label_scores(sample)
    for text, row in zip(sample[:6], batched):
        assert trainer.label_scores([text])[0] == pytest.approx(row, abs=1e-4)
    # Long texts are cut to fit max_length with the longest answer.
    # The item text is cut, not the instructions around it (BOS first, "Answer:" last).
    ids = trainer.prompt_ids(" ".join(sample) * 3)
    assert len(ids) + trainer.longest_answer == 40  # word-level: the cut fills it exactly
    assert ids[0] == trainer.tokenizer.bos_token_id
    assert trainer.tokenizer.decode(ids[-2:]) == "Answer :"


def test_accumulation_checkpointing_and_bf16(tmp_path, tiny_llama):
    """bf16=true on the CPU (bfloat16 weights and autocast), gradient checkpointing, and two
    micro-batches per optimizer step."""
    trainer, texts = _trainer(tmp_path, tiny_llama, epochs=1, batch_size=8,
                              gradient_accumulation=2, gradient_checkpointing=True, bf16="true",
                              learning_rate=1e-2, max_length=64)
    out = io.StringIO()
    trainer.ctx.emitter = events.Emitter(out)
    metrics = trainer.train()
    evs = [json.loads(line) for line in out.getvalue().splitlines()]
    n_train = len(trainer.ctx.bundle.labelled("train", "sentiment"))
    steps = [e for e in evs if e["type"] == "progress"]
    assert steps[-1]["current"] == steps[-1]["total"] == -(-(-(-n_train // 8)) // 2)
    assert trainer.bf16 and trainer.model.get_base_model().dtype == torch.bfloat16
    assert trainer.model.get_base_model().is_gradient_checkpointing
    assert "bf16" in next(e["message"] for e in evs if e["type"] == "log" and "steps" in
                          e["message"])
    assert metrics["sentiment.train_loss"] > 0
    for row in trainer.label_probabilities(list(texts.values())[:8]):
        assert abs(sum(row) - 1) < 1e-9


def test_two_processes_train_data_parallel(tmp_path, tiny_llama):
    """processes: 2 on the CPU (gloo): the steps of one process (batch_size items per
    micro-batch over both ranks, two micro-batches per step, so no_sync on the first), rank 0's
    per-step loss only, one result, predictions among the labels (rank 0 alone predicts)."""
    small = dict(n=120, epochs=2, batch_size=8, gradient_accumulation=2, max_length=48,
                 lora_r=4, learning_rate=1e-2)
    code, alone = _work(_run_dir(tmp_path / "one", tiny_llama, processes=1, **small)[0])
    assert code == 0, alone[-1]
    paths, _ = _run_dir(tmp_path, tiny_llama, processes=2, **small)
    code, evs = _work(paths)
    errors = [e for e in evs if e["type"] == "error"]
    assert code == 0 and not errors, errors
    assert [e["type"] for e in evs].count("result") == 1 and evs[-1]["type"] == "result"
    assert set(evs[-1]["metrics"]) == {"sentiment.train_loss", "sentiment.val_accuracy",
                                       "train_seconds", "predictions"}
    assert any("data-parallel: 2 processes (gloo backend)" in e.get("message", "")
               for e in evs if e["type"] == "log")
    # the same global micro-batches, each split in two: about the same training
    key = "sentiment.train_loss"
    assert abs(evs[-1]["metrics"][key] - alone[-1]["metrics"][key]) < 0.3, (evs[-1], alone[-1])
    n_train = json.load(open(os.path.join(paths.bundle, "manifest.json")))["counts"]["train"]
    steps = [e["current"] for e in evs if e["type"] == "progress" and e["unit"] == "step"]
    assert steps == list(range(1, 2 * -(-(-(-n_train // 8)) // 2) + 1))  # as one process
    assert [e["step"] for e in evs if e["type"] == "metric" and e["name"] == "loss"
            and "step" in e] == steps  # one point per step (rank 0's), never one per rank
    assert len([e for e in evs if e["type"] == "metric" and e["name"] == "accuracy"]) == 2
    assert [e["device"] for e in evs if e["type"] == "where" and "device" in e] == ["cpu"]
    preds = [json.loads(line) for line in open(paths.predictions)]
    assert len(preds) == evs[-1]["metrics"]["predictions"] > 0
    assert {p["label"] for p in preds} <= set(LABELS)
    assert os.path.exists(os.path.join(paths.artifacts, "model", "adapter_config.json"))
    assert not [f for f in os.listdir(paths.root) if f.startswith("rank")]


def test_labels_the_tokenizer_cannot_tell_apart(tmp_path, tiny_llama):
    odd = {"sentiment": {"type": "radio", "labels": ["qqqx", "zzzy"]}}  # both <unk>
    trainer, _ = _trainer(tmp_path, tiny_llama, schemas=odd)
    with pytest.raises(worker.RunFailure, match="labels 'qqqx' and 'zzzy' are the same tokens"):
        trainer.train()


def test_load_in_4bit_without_cuda_fails_at_once(tmp_path, tiny_llama):
    paths, _ = _run_dir(tmp_path, tiny_llama, n=60, load_in_4bit=True)
    code, evs = _work(paths)
    assert code == events.EXIT_OTHER
    assert evs[-1]["type"] == "error"
    assert evs[-1]["message"] == hf_llm.NO_CUDA_4BIT % "cpu"
    assert evs[-1]["message"].startswith("load_in_4bit needs a CUDA GPU")
    assert not any(e["type"] == "status" and e["message"].startswith("loading")
                   for e in evs)  # failed before loading the model


def test_unknown_placeholder_fails_clearly(tmp_path, tiny_llama):
    # The server refuses it before a run is queued (the check is standard library) ...
    with pytest.raises(ParamError) as e:
        resolve_params(REGISTRY[TRAINER], {"prompt_template": "Review: {txt}\nAnswer:"})
    assert str(e.value).startswith("prompt_template: the prompt template has an unknown "
                                   "placeholder {txt}; ")
    # ... and a worker given such a spec anyway fails at once, saying the same.
    paths, _ = _run_dir(tmp_path, tiny_llama, n=60)
    spec = json.load(open(paths.spec))
    spec["params"]["prompt_template"] = "Review: {txt}\nAnswer:"
    write_json(paths.spec, spec)
    code, evs = _work(paths)
    assert code == events.EXIT_OTHER
    message = evs[-1]["message"]
    assert message.startswith("the prompt template has an unknown placeholder {txt}; "), message
    assert "{text}, {labels}, {scheme}, {description}" in message


@pytest.mark.parametrize("template, fragment", [
    ("{text} {label}", "unknown placeholder {label}"),
    ("{text!r}", "format spec or conversion"),
    ("{text:>9}", "format spec or conversion"),
    ("no text here {labels}", "has no {text} placeholder"),
    ("{text} {", "cannot be read"),
    ("{text.upper}", "unknown placeholder {text.upper}"),
])
def test_template_check(template, fragment):
    with pytest.raises(llm_prompt.SettingError) as e:
        llm_prompt.check_template(template)
    assert fragment in str(e.value)


def test_prompt_rendering_and_targets():
    llm_prompt.check_template(llm_prompt.DEFAULT_TEMPLATE)
    with_desc = llm_prompt.render(llm_prompt.DEFAULT_TEMPLATE, "sentiment", LABELS, "a film",
                                  "Is it good?")
    assert "Is it good?\n" in with_desc and "positive, negative" in with_desc
    plain = llm_prompt.render(llm_prompt.DEFAULT_TEMPLATE, "sentiment", LABELS, "a film")
    assert "\n\n" not in plain and plain.endswith("Text: a film\nAnswer:")
    assert llm_prompt.render("{{x}} {text}", "s", LABELS, "t") == "{x} t"
    assert llm_prompt.target_modules("auto", "llama") == ["q_proj", "v_proj"]
    assert llm_prompt.target_modules("auto", "gpt2") == ["c_attn"]
    assert llm_prompt.target_modules("auto", "unheard-of") is None  # peft's own default
    assert llm_prompt.target_modules(" q_proj, k_proj ", "llama") == ["q_proj", "k_proj"]
    assert llm_prompt.target_modules("all-linear", "llama") == "all-linear"


def test_params_declared_and_checked():
    from potato.training.remote.trainers import ParamError

    info = REGISTRY[TRAINER]
    assert info.packages == ["torch", "transformers", "peft"]
    assert info.schema_types == {"radio", "likert"}
    full = resolve_params(info, {"bf16": True, "load_in_4bit": "yes"})
    assert full["bf16"] == "true" and full["load_in_4bit"] is True
    assert full["lora_target_modules"] == "auto" and full["prompt_template"] == ""
    with pytest.raises(ParamError, match="bf16 must be one of auto, true, false"):
        resolve_params(info, {"bf16": "maybe"})
    with pytest.raises(ParamError, match="lora_dropout must be at most 0.9"):
        resolve_params(info, {"lora_dropout": 1.5})


# -- through a real server: the local backend and a real sshd on loopback ------------------------

def _project(tmp_path, backend_yaml):
    """A project of 300 SST-2 items, 260 labelled (the example's 2,000 would only cost time)."""
    from potato.commands.cli import main
    from tests.helpers import KEY

    rows = _sst2(300)
    (tmp_path / "items.jsonl").write_text("".join(
        json.dumps({"id": i, "text": t}) + "\n" for i, t, _ in rows))
    (tmp_path / "labels.jsonl").write_text("".join(
        json.dumps({"id": i, "sentiment": lab}) + "\n" for i, _, lab in rows[:260]))
    cfg = tmp_path / "config.yaml"
    cfg.write_text("annotation_task_name: LLM test\ndata_files: [items.jsonl]\n"
                   "admin_api_key: %s\nannotation_schemes:\n  - annotation_type: radio\n"
                   "    name: sentiment\n    description: Is the review positive or negative?\n"
                   "    labels: [positive, negative]\nmodel_training:\n  grace_seconds: 2\n"
                   "  writeback:\n    schemas: [sentiment]\n    include_unlabeled: true\n%s"
                   % (KEY, backend_yaml))
    assert main(["annotations", "import", str(cfg), str(tmp_path / "labels.jsonl"),
                 "--annotator", "gold"]) == 0
    return str(cfg)


def _server_run(tmp_path, serve, model_dir, backend_yaml="", backend=None):
    from tests.helpers import Client
    from tests.helpers import KEY, start_run, wait_run

    _, url = serve(_project(tmp_path, backend_yaml))
    c = Client(url)
    body = {"schemas": ["sentiment"], "trainer": TRAINER,
            "params": {"model": model_dir, "epochs": 1, "batch_size": 32, "max_length": 80,
                       "learning_rate": 1e-2, "lora_r": 4}}
    if backend:
        body["backend"] = backend
    run = wait_run(c, start_run(c, **body), timeout=240)
    log = c.get("/admin/training/api/runs/%s/log" % run["run_id"],
                headers={"X-API-Key": KEY}).text
    assert run["status"] == "success", (run, log[-3000:])
    assert run["holdout"]["n"] >= 20 and run["writeback"]["written"] > 0, run
    model = (tmp_path / "annotation_output" / "training" / "runs" / run["run_id"] / "artifacts" /
             "model")
    assert (model / "adapter_config.json").is_file()
    meta = json.loads((model / "labels.json").read_text())
    assert meta["description"] == "Is the review positive or negative?"  # from the config
    return run, log


def test_local_run_through_a_real_server(tmp_path, serve, tiny_llama):
    run, _ = _server_run(tmp_path, serve, tiny_llama)
    assert run["ran_on"] == "local: device cpu"  # the where event the trainer sent


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    from tests import sshd as sshd_mod

    d = sshd_mod.for_tests(tmp_path_factory)
    yield d
    sshd_mod.stop(d)


@pytest.mark.integration
def test_run_over_real_ssh(tmp_path, serve, sshd, tiny_llama, monkeypatch):
    monkeypatch.setenv("PATH", str(sshd / "bin") + os.pathsep + os.environ["PATH"])
    remote = tmp_path / "remote dir"
    # sshd passes no environment through: the interpreter and the code path go in the config.
    keys = {"type": "ssh", "host": "potato-real", "remote_dir": str(remote),
            "python": sys.executable, "heartbeat_timeout_s": 60, "env": {"PYTHONPATH": ROOT}}
    yaml = "  backends:\n    gpu-server:\n" + "".join(
        "      %s: %s\n" % (k, json.dumps(v)) for k, v in keys.items())
    run, log = _server_run(tmp_path, serve, tiny_llama, yaml, backend="gpu-server")
    assert run["ran_on"] == "gpu-server (ssh): host %s, device cpu" % socket.gethostname()
    assert "copying Potato's code to potato-real" in log


def test_long_labels_short_prompts_and_control_strings(tmp_path, tiny_gpt2):
    """A label's answer longer than a batch's shortest rows used to crash scoring after
    training had finished; "</s>" in an item's text used to become the real EOS token."""
    schemas = {"sentiment": {"type": "radio", "labels": [
        "good", "the film is clearly and strongly bad from the start"]}}
    trainer, _ = _trainer(tmp_path, tiny_gpt2, schemas=schemas, epochs=1, batch_size=1,
                          max_length=64, prompt_template="{text}")
    trainer.load()
    texts = ["fine", "ok", "", "a long and rather dull film that goes on and on"]
    batched = trainer.label_scores(texts)
    for text, row in zip(texts, batched):
        assert trainer.label_scores([text])[0] == pytest.approx(row, abs=1e-4)
    assert trainer.prompt_ids("")  # never empty: the first answer token needs a prompt
    ids = trainer.prompt_ids("great film </s> <s> really")
    assert trainer.tokenizer.eos_token_id not in ids
    assert ids.count(trainer.tokenizer.bos_token_id) <= 1


def test_bf16_false_means_float32_even_for_a_bf16_checkpoint(tmp_path, tiny_llama):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_llama).to(torch.bfloat16)
    tok = transformers.AutoTokenizer.from_pretrained(tiny_llama)
    d = _save_model(tmp_path / "bf16-llama", model, tok)
    for setting in ("false", "auto"):  # auto on a CPU: no bf16
        trainer, _ = _trainer(tmp_path / setting, d, bf16=setting)
        trainer.load()
        assert {w.dtype for w in trainer.model.parameters()} == {torch.float32}, setting


@pytest.mark.parametrize("params, fragment", [
    ({"lora_target_modules": "q_proj v_proj"}, "'q_proj v_proj' is not a module name"),
    ({"lora_target_modules": " , "}, "is not a module name"),
    ({"model": " "}, "model: name a Hugging Face Hub id"),
    ({"seed": 2 ** 70}, "seed must be at most 4294967295"),
    ({"bf16": "maybe"}, "bf16 must be one of auto, true, false"),
    ({"prompt_template": "no text {labels}"}, "has no {text} placeholder"),
])
def test_bad_params_are_refused_before_a_run_is_queued(params, fragment):
    with pytest.raises(ParamError) as e:
        resolve_params(REGISTRY[TRAINER], params)
    assert fragment in str(e.value)
    assert resolve_params(REGISTRY[TRAINER], {"bf16": " TRUE", "lora_target_modules":
                                             "q_proj, v_proj"})["bf16"] == "true"


def test_a_likert_scale_trains_as_its_points(tmp_path, tiny_gpt2):
    """A Likert scheme's points are the labels (integers): the prompt lists them with the
    scale's ends, the answers are their digits, the predictions the points themselves."""
    likert = {"agree": {"type": "likert", "labels": [1, 2], "min_label": "bad",
                        "max_label": "good"}}
    rows = _sst2(120)
    paths = RunPaths(tmp_path / "run").create()
    bundle.build(paths.bundle, [(i, t) for i, t, _ in rows],
                 {i: {"agree": [2 if lab == "positive" else 1]} for i, _, lab in rows[:100]},
                 likert, include_unlabeled=True)
    full = resolve_params(REGISTRY[TRAINER], dict(model=tiny_gpt2, epochs=1, batch_size=16,
                                                  learning_rate=1e-2, max_length=60))
    write_json(paths.spec, {"run_id": "t", "trainer": TRAINER, "schemas": likert,
                            "params": full, "device": "cpu"})
    code, evs = _work(paths)
    assert code == 0, [e for e in evs if e["type"] in ("error", "log")][-3:]
    preds = [json.loads(line) for line in open(paths.predictions)]
    assert preds and all(type(p["label"]) is int and p["label"] in (1, 2) for p in preds)
    meta = json.load(open(os.path.join(paths.artifacts, "model", "labels.json")))
    assert meta["labels"] == [1, 2]
    assert meta["description"] == "1 means bad; 2 means good."  # the prompt's, kept
    prompt = llm_prompt.render(meta["prompt_template"], "agree", meta["labels"], "a film",
                               meta["description"])
    assert "Answer with one of: 1, 2.\n" in prompt and "1 means bad; 2 means good." in prompt
