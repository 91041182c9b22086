"""Rating schemes trained end to end through the real server and its API (issue 21 parts 3-4):
a Likert scheme with naive Bayes (classes over the points) on the local backend, on the fake
ssh host and on a real agent, a slider with hf-text-regression on a tiny BERT locally and on the
fake SLURM cluster; the held-out figures recomputed from
the run's own files (and checked against scikit-learn and SciPy), write-back per scheme, the
suggestions on the annotate page, and free text refused as annotate-only."""

import json
import math
import os
import random

import pytest

from potato.commands.cli import main
from potato.training.remote.paths import RunPaths
from tests.helpers import (
    FILLER, KEY, NEG, POS, Client, agent_once, job_dirs, register_agent, slurm_backend,
    ssh_backend, start_run, wait_run)

H = {"X-API-Key": KEY}

SCHEMES = """\
annotation_schemes:
  - annotation_type: likert
    name: rating
    min_label: Awful
    max_label: Great
    size: 5
  - annotation_type: slider
    name: score
    min_value: 0
    max_value: 10
    step: 1
  - annotation_type: text
    name: why
"""


def rating_of(words):
    """The Likert point and slider value an item's words call for: two good words 5, one 4,
    a good and a bad one 3, one bad 2, two bad 1."""
    pos, neg = sum(w in POS for w in words), sum(w in NEG for w in words)
    point = {(2, 0): 5, (1, 0): 4, (1, 1): 3, (0, 1): 2, (0, 2): 1}[pos, neg]
    return point, 2 * point - 1


def write_project(tmp_path, model_training="", n=400, labelled=320, without=()):
    """Items whose words say their rating, ``labelled`` of them labelled by "gold" (none with
    a point in ``without``)."""
    rng = random.Random(7)
    items, labels = [], []
    for k in range(n):
        pos = [2, 1, 1, 0, 0][k % 5]
        neg = [0, 0, 1, 1, 2][k % 5]
        words = rng.sample(FILLER, 3) + rng.sample(POS, pos) + rng.sample(NEG, neg)
        rng.shuffle(words)
        item = {"id": "r%03d" % k, "text": " ".join(words)}
        items.append(item)
        point, value = rating_of(words)
        if k < labelled and point not in without:
            labels.append({"id": item["id"], "rating": point, "score": value})
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    cfg = tmp_path / "config.yaml"
    cfg.write_text("annotation_task_name: Ratings\ndata_files: [items.jsonl]\n"
                   "admin_api_key: %s\n%smodel_training:\n  grace_seconds: 2\n  writeback:\n"
                   "    schemas: [rating, score]\n    include_unlabeled: true\n%s"
                   % (KEY, SCHEMES, model_training))
    if labels:
        assert main(["annotations", "import", str(cfg), str(tmp_path / "labels.jsonl"),
                     "--annotator", "gold"]) == 0
    return str(cfg)


def run_files(tmp_path, run_id):
    paths = RunPaths(os.path.join(tmp_path, "annotation_output", "training", "runs", run_id))
    items = [json.loads(line) for line in open(paths.bundle + "/items.jsonl")]
    preds = [json.loads(line) for line in open(paths.predictions)]
    return paths, items, preds


def annotate_page_of(server, c, item_id):
    """The annotate page of an item (items are r000, r001 ... in order), for annotator dana."""
    c.login("dana")
    server.app.store.set_position("dana", int(item_id[1:]))
    page = c.get("/annotate").text
    assert "<code>%s</code>" % item_id in page
    return page


def test_likert_with_naive_bayes_on_local(tmp_path, serve):
    metrics = pytest.importorskip("sklearn.metrics")
    server, url = serve(write_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["rating"]))
    assert run["status"] == "success", run
    # The bundle carries the points as integers; the predictions are points.
    paths, items, preds = run_files(tmp_path, run["run_id"])
    manifest = json.load(open(os.path.join(paths.bundle, "manifest.json")))
    assert manifest["schemas"]["rating"] == {"type": "likert", "labels": [1, 2, 3, 4, 5],
                                             "min_label": "Awful", "max_label": "Great"}
    assert {p["label"] for p in preds} <= {1, 2, 3, 4, 5}
    assert all(type(p["label"]) is int for p in preds)
    # The held-out figures are the test split's, and match scikit-learn's.
    gold = {it["id"]: it["labels"]["rating"] for it in items if it["split"] == "test"}
    test = [(p["label"], gold[p["id"]]) for p in preds if p["split"] == "test"]
    h = run["holdout"]
    assert h["n"] == len(test) > 30
    assert h["mae"] == round(sum(abs(p - g) for p, g in test) / len(test), 4)
    assert h["qwk"] == pytest.approx(metrics.cohen_kappa_score(
        [g for _, g in test], [p for p, _ in test], weights="quadratic",
        labels=[1, 2, 3, 4, 5]), abs=1e-4)
    assert h["qwk"] > 0.8  # the words say the point
    assert h["confusion"]["labels"] == [1, 2, 3, 4, 5]
    # Write-back: an unlabelled item's suggestion is a point, the store's kind of value.
    unlabelled = next(it["id"] for it in items if it["split"] == "unlabeled")
    _, item = c.json("GET", "/admin/api/items/%s" % unlabelled, headers=H)
    point = item["predictions"]["rating"]["label"]
    assert point in (1, 2, 3, 4, 5)
    page = annotate_page_of(server, c, unlabelled)
    assert ('<p class="suggestion suggestion-value" data-scheme="rating" data-value="%d">'
            'Model suggests for rating: <b>%d</b> (pre-selected' % (point, point)) in page
    assert run["writeback"]["by_label"] and set(run["writeback"]["by_label"]) <= set("12345")
    page = c.get("/admin/training/runs/%s" % run["run_id"], headers=H).text
    assert "quadratic-weighted kappa" in page
    # A second run is compared by its kappa (writeback.policy: best).
    second = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["rating"],
                                   params={"ngrams": 1}))
    why = second["writeback"]["took_over"].get("rating") or \
        second["writeback"]["kept_in_use"]["rating"]
    assert "held-out quadratic-weighted kappa" in why, why


def test_a_likert_point_nobody_chose_is_left_out_not_a_refusal(tmp_path, serve):
    """Issue 35, item 4: a point with fewer than min_labels_per_class train items (here none:
    no item deserved a 2) does not block the run: the model does not learn it, the run says
    so, and the test split still scores every point."""
    _, url = serve(write_project(tmp_path, without=(2,)))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["rating"]))
    assert run["status"] == "success", run
    said = ("rating: the model will not predict 2: 2 has no labelled item in the train split, "
            "fewer than model_training.min_labels_per_class (2). Label items that deserve it "
            "if any do")
    assert said in run["warnings"]
    log = c.get("/admin/training/api/runs/%s/log" % run["run_id"], headers=H).text
    assert said in log
    page = c.get("/admin/training/runs/%s" % run["run_id"], headers=H).text
    assert "the model will not predict 2" in page
    # no prediction of the point it did not learn; its gold items in the test split are scored
    paths, items, preds = run_files(tmp_path, run["run_id"])
    predicted = {p["label"] for p in preds if p["scheme"] == "rating"}
    assert predicted and 2 not in predicted
    assert not any(it["labels"].get("rating") == 2 for it in items if it["split"] != "test")


def test_a_scheme_with_fewer_than_two_learnable_labels_is_refused(tmp_path, serve):
    _, url = serve(write_project(tmp_path, without=(2, 3, 4, 5)))
    status, body = Client(url).json("POST", "/admin/training/api/runs", headers=H, json_body={
        "trainer": "text-naive-bayes", "schemas": ["rating"]})
    assert status == 400 and body["error"].startswith("Scheme rating has ")
    assert body["error"].endswith(" in the train split; a model needs at least two labels with "
                                  "2 labelled items each (model_training.min_labels_per_class), "
                                  "so it can tell them apart. Label more items before training.")
    assert "0 labelled items with 2" in body["error"]


def test_a_number_scheme_short_of_train_items_is_refused(tmp_path, serve):
    _, url = serve(write_project(tmp_path, labelled=1))
    status, body = Client(url).json("POST", "/admin/training/api/runs", headers=H, json_body={
        "trainer": "hf-text-regression", "schemas": ["score"]})
    assert status == 400 and body["error"].startswith("Scheme score has ")
    assert body["error"].endswith("labelled item(s) in the train split; a model needs at least "
                                  "2 (model_training.min_labels_per_class). Label more items "
                                  "before training.")


def test_free_text_is_annotate_only(tmp_path, serve):
    _, url = serve(write_project(tmp_path, labelled=0))
    c = Client(url)
    status, body = c.json("GET", "/admin/training/api/trainers", headers=H)
    assert status == 200
    assert body["annotate_only"] == [{
        "scheme": "why", "type": "text", "reason": "no trainer trains text schemes: they are "
        "annotate-only (their answers are stored and exported, not learned)"}]
    assert not any("text" in t["schema_types"] for t in body["trainers"])
    status, body = c.json("POST", "/admin/training/api/runs", headers=H, json_body={
        "trainer": "text-naive-bayes", "schemas": ["why"]})
    assert status == 400 and body["error"] == (
        "Trainer text-naive-bayes cannot train text scheme why (it takes likert, multiselect, "
        "radio); no trainer trains text schemes: they are annotate-only (their answers are "
        "stored and exported, not learned).")
    page = c.get("/admin/training", headers=H).text
    assert ('<input type="checkbox" name="schemas" value="why" disabled> why <span class="hint">'
            '(text: no trainer trains text schemes: they are annotate-only') in page
    assert '<input type="checkbox" name="schemas" value="rating" checked>' in page


def test_slider_with_hf_text_regression_on_local(tmp_path, serve, tiny_bert):
    stats = pytest.importorskip("scipy.stats")
    server, url = serve(write_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="hf-text-regression", schemas=["score"], params={
        "model": tiny_bert, "epochs": 8, "batch_size": 8, "max_length": 16, "lora": False,
        "learning_rate": 1e-3}), timeout=600)
    assert run["status"] == "success", (run["error"], c.get(
        "/admin/training/api/runs/%s/log" % run["run_id"], headers=H).text[-3000:])
    paths, items, preds = run_files(tmp_path, run["run_id"])
    manifest = json.load(open(os.path.join(paths.bundle, "manifest.json")))
    assert manifest["schemas"]["score"] == {"type": "slider", "labels": [], "min_value": 0,
                                            "max_value": 10}
    # Predictions are numbers within the slider's range, each with confidence 1.
    assert preds and all(isinstance(p["label"], (int, float)) and 0 <= p["label"] <= 10 and
                         p["confidence"] == 1.0 for p in preds)
    gold = {it["id"]: it["labels"]["score"] for it in items if it["split"] == "test"}
    test = [(p["label"], gold[p["id"]]) for p in preds if p["split"] == "test"]
    h = run["holdout"]
    assert h["n"] == len(test) and "accuracy" not in h
    assert h["mae"] == round(sum(abs(p - g) for p, g in test) / len(test), 4)
    assert h["rmse"] == round((sum((p - g) ** 2 for p, g in test) / len(test)) ** 0.5, 4)
    assert h["spearman"] == pytest.approx(stats.spearmanr([p for p, _ in test],
                                                          [g for _, g in test]).statistic,
                                          abs=1e-4)
    # It learned: well below always answering the median, and in the right order.
    assert h["mae"] < 0.6 * h["baseline"]["mae"] and h["spearman"] > 0.8, h
    assert run["metrics"]["score.val_mae"] < h["baseline"]["mae"]
    assert run["warnings"] == []
    assert run["writeback"]["written"] > 0 and run["writeback"]["by_label"] == {}  # numbers
    model = os.path.join(paths.artifacts, "model")
    meta = json.load(open(os.path.join(model, "regression.json")))
    assert meta["scheme"] == "score" and meta["min_value"] == 0 and meta["scale"] > 0
    # The suggestion pre-selects a value on the slider's steps for an item without a label.
    unlabelled = next(it["id"] for it in items if it["split"] == "unlabeled")
    _, item = c.json("GET", "/admin/api/items/%s" % unlabelled, headers=H)
    value = item["predictions"]["score"]["label"]
    assert item["predictions"]["score"]["run_id"] == run["run_id"]
    page = annotate_page_of(server, c, unlabelled)
    assert ('class="suggestion suggestion-value" data-scheme="score" data-value="%s"'
            % round(value)) in page


def test_likert_on_the_fake_ssh_host(tmp_path, serve, fake_host):
    """The same Likert run on the ssh backend: the test split's points stay on the server
    (heldout.jsonl), the host's predictions cross the boundary as points."""
    server, url = serve(write_project(tmp_path, ssh_backend()))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["rating"],
                                backend="gpu-server"), timeout=120)
    assert run["status"] == "success", run["error"]
    assert run["ran_on"].startswith("gpu-server (ssh)")
    paths, items, preds = run_files(tmp_path, run["run_id"])
    assert all(it["labels"] == {} for it in items if it["split"] == "test")  # never sent
    held = {json.loads(line)["id"]: json.loads(line)["labels"]["rating"]
            for line in open(paths.heldout)}
    test = [(p["label"], held[p["id"]]) for p in preds if p["split"] == "test"]
    assert run["holdout"]["n"] == len(test) > 30
    assert run["holdout"]["mae"] == round(sum(abs(p - g) for p, g in test) / len(test), 4)
    assert run["holdout"]["qwk"] > 0.8
    unlabelled = next(it["id"] for it in items if it["split"] == "unlabeled")
    _, item = c.json("GET", "/admin/api/items/%s" % unlabelled, headers=H)
    assert item["predictions"]["rating"]["run_id"] == run["run_id"]
    assert type(item["predictions"]["rating"]["label"]) is int


def test_likert_on_an_agent(tmp_path, serve, capsys):
    """A real ``potato training agent`` claims the Likert run, trains it and sends back points;
    the server scores them against the test split it kept, and writes them back."""
    cfg = write_project(tmp_path, "  backends:\n    lab: {type: agent, heartbeat_timeout_s: 20}\n")
    server, url = serve(cfg)
    c = Client(url)
    token = register_agent(cfg, "lab", capsys)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["rating"], backend="lab")
    agent_once(url, "lab", token, tmp_path / "agent work", timeout=120)
    run = wait_run(c, run_id)
    assert run["status"] == "success", run["error"]
    assert run["ran_on"].startswith("lab (agent)")
    assert run["holdout"]["n"] > 30 and run["holdout"]["qwk"] > 0.8, run["holdout"]
    assert run["writeback"]["written"] > 0 and run["writeback"]["in_use"] == ["rating"]
    _, items, _ = run_files(tmp_path, run_id)
    unlabelled = next(it["id"] for it in items if it["split"] == "unlabeled")
    _, item = c.json("GET", "/admin/api/items/%s" % unlabelled, headers=H)
    assert item["predictions"]["rating"]["run_id"] == run_id
    point = item["predictions"]["rating"]["label"]
    assert type(point) is int and 1 <= point <= 5
    page = annotate_page_of(server, c, unlabelled)
    assert 'data-scheme="rating" data-value="%d">Model suggests' % point in page


def test_slider_with_hf_text_regression_on_the_fake_slurm_cluster(tmp_path, serve, cluster,
                                                                   tiny_bert):
    """sbatch, squeue and the login node are stand-ins (tests/fakes/slurm); the job runs the
    real worker and trainer, and its numbers come back, are scored and written back."""
    home, _ = cluster
    server, url = serve(write_project(tmp_path, slurm_backend()))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="hf-text-regression", schemas=["score"],
                                backend="cluster", params={
        "model": tiny_bert, "epochs": 8, "batch_size": 8, "max_length": 16, "lora": False,
        "learning_rate": 1e-3}), timeout=600)
    assert run["status"] == "success", (run["error"], c.get(
        "/admin/training/api/runs/%s/log" % run["run_id"], headers=H).text[-3000:])
    assert run["ran_on"].startswith("cluster (slurm): SLURM job 4242 on node fake-node01")
    h = run["holdout"]
    assert "accuracy" not in h and h["mae"] < 0.6 * h["baseline"]["mae"], h
    assert run["writeback"]["written"] > 0 and run["writeback"]["in_use"] == ["score"]
    _, items, preds = run_files(tmp_path, run["run_id"])
    assert preds and all(0 <= p["label"] <= 10 for p in preds)
    unlabelled = next(it["id"] for it in items if it["split"] == "unlabeled")
    _, item = c.json("GET", "/admin/api/items/%s" % unlabelled, headers=H)
    assert item["predictions"]["score"]["run_id"] == run["run_id"]
    page = annotate_page_of(server, c, unlabelled)
    assert ('data-scheme="score" data-value="%s">Model suggests'
            % round(item["predictions"]["score"]["label"])) in page
    assert job_dirs(home / "potato jobs", run["run_id"]) == []


def test_likert_with_hf_text_classification_in_the_worker(tmp_path, tiny_bert):
    """hf-text-classification takes a Likert scheme as classes over its points: the model's
    config names them as text, its predictions are the points (integers)."""
    import io

    from potato.training.remote import bundle, worker
    from potato.training.remote import protocol as events
    from potato.training.remote.paths import write_json
    from potato.training.remote.trainers import REGISTRY, resolve_params

    rng = random.Random(2)
    word = {5: "superb", 4: "good", 3: "fine", 2: "poor", 1: "awful"}  # a word per point
    items, labels = [], {}
    for k in range(100):
        point = k % 5 + 1
        items.append(("h%d" % k, " ".join(rng.sample(FILLER, 3) + [word[point]])))
        if k < 80:
            labels["h%d" % k] = {"rating": [point]}
    schemas = {"rating": {"type": "likert", "labels": [1, 2, 3, 4, 5]}}
    paths = RunPaths(str(tmp_path / "run")).create()
    bundle.build(paths.bundle, items, labels, schemas, include_unlabeled=True)
    params = resolve_params(REGISTRY["hf-text-classification"], {
        "model": tiny_bert, "epochs": 2, "batch_size": 8, "max_length": 16, "lora": False,
        "learning_rate": 1e-3})
    write_json(paths.spec, {"run_id": "t", "trainer": "hf-text-classification",
                            "schemas": schemas, "params": params, "device": "cpu"})
    out = io.StringIO()
    assert worker.run(paths.spec, events.Emitter(out)) == 0, out.getvalue()[-2000:]
    preds = [json.loads(line) for line in open(paths.predictions)]
    assert preds and all(type(p["label"]) is int and 1 <= p["label"] <= 5 for p in preds)
    config = json.load(open(os.path.join(paths.artifacts, "model", "config.json")))
    assert config["id2label"] == {str(i): str(i + 1) for i in range(5)}
    meta = json.load(open(os.path.join(paths.artifacts, "model", "labels.json")))
    assert meta["labels"] == [1, 2, 3, 4, 5]


def test_a_slider_whose_train_values_are_all_the_same_trains_and_answers_that_value(
        tmp_path, tiny_bert):
    """hf-text-regression on train values that are all 7: nothing to standardise by (a
    standard deviation of 0), so the scale is 1, not a division by zero; the run succeeds,
    its model files say so, and every prediction is a finite number near 7, within the
    slider's range. Its held-out report then has errors and an undefined correlation."""
    import io

    from potato.training.reports import report
    from potato.training.remote import bundle, worker
    from potato.training.remote import protocol as events
    from potato.training.remote.paths import write_json
    from potato.training.remote.trainers import REGISTRY, resolve_params

    rng = random.Random(3)
    items = [("c%d" % k, " ".join(rng.sample(FILLER, 4))) for k in range(60)]
    labels = {item_id: {"score": [7]} for item_id, _ in items[:50]}
    schemas = {"score": {"type": "slider", "labels": [], "min_value": 0, "max_value": 10}}
    paths = RunPaths(str(tmp_path / "run")).create()
    bundle.build(paths.bundle, items, labels, schemas, include_unlabeled=True)
    params = resolve_params(REGISTRY["hf-text-regression"], {
        "model": tiny_bert, "epochs": 2, "batch_size": 8, "max_length": 16, "lora": False,
        "learning_rate": 1e-3})
    write_json(paths.spec, {"run_id": "t", "trainer": "hf-text-regression",
                            "schemas": schemas, "params": params, "device": "cpu"})
    out = io.StringIO()
    assert worker.run(paths.spec, events.Emitter(out)) == 0, out.getvalue()[-2000:]
    meta = json.load(open(os.path.join(paths.artifacts, "model", "regression.json")))
    assert (meta["mean"], meta["scale"]) == (7.0, 1.0)
    preds = [json.loads(line) for line in open(paths.predictions)]
    assert {p["split"] for p in preds} == {"val", "test", "unlabeled"}
    assert all(math.isfinite(p["label"]) and abs(p["label"] - 7) < 1 for p in preds), preds
    val = [json.loads(line) for line in out.getvalue().splitlines()
           if '"metric"' in line and '"mae"' in line]
    assert val and all(math.isfinite(v["value"]) for v in val), val
    gold = [json.loads(line) for line in open(os.path.join(paths.bundle, "items.jsonl"))]
    h = report.holdout_report(preds, gold, schemas)
    assert h["spearman"] is None and math.isfinite(h["mae"]) and h["baseline"]["value"] == 7
    assert json.loads(json.dumps(h, allow_nan=False)) == h
