"""Active learning's order (potato/project/queue_order.py, assignment.py, config/active_learning.py)
as its callers see it: the config, the annotate page's hand-outs, the admin API, the export.
The runs are real naive Bayes runs on the local backend over the bundled example's items."""

import csv
import io
import json
import math
import time

import pytest

from potato.commands.cli import main
from potato.config.settings import load
from potato.project.queue_order import scores_of
from potato.training.remote.bundle import split_of

from tests.helpers import (KEY, PLUGINS, Client, gold_labels, make_project, start_run,
                           wait_run)

AL = """assignment_strategy: active_learning
active_learning:
  enabled: true
  query_strategy: {strategy}
  random_sample_percent: {pct}
  update_frequency: 1000
  min_instances_for_training: 1000000
"""
H = {"X-API-Key": KEY}


def is_test(item_id):
    """Whether an item is in the held-out test split (make_project's split_seed 13, the
    default fractions 0.70 / 0.15 / 0.15)."""
    return split_of(item_id, 13, (0.70, 0.15, 0.15)) == "test"


def al_project(tmp_path, strategy="uncertainty", pct=0, extra=""):
    return make_project(tmp_path, top=AL.format(strategy=strategy, pct=pct) + extra)


def shown(page):
    """The item id the annotate page shows."""
    marker = 'name="item_id" value="'
    start = page.index(marker) + len(marker)
    return page[start:page.index('"', start)]


GOLD = gold_labels()


def walk(c, n):
    """Label ``n`` items as the annotate page hands them out (with their gold label), their
    ids."""
    out = []
    for _ in range(n):
        page = c.get("/annotate").text
        item = shown(page)
        position = page.split('name="position" value="')[1].split('"')[0]
        r = c.post("/annotate", form={"item_id": item, "position": position,
                                      "label:sentiment": GOLD[item], "action": "next"})
        assert r.status == 303, r.text
        out.append(item)
    return out


def predictions(c):
    """{item id: confidence} of the model in use, from the admin's item export."""
    r = c.get("/admin/export.jsonl?rows=item", headers=H)
    assert r.status == 200
    rows = [json.loads(line) for line in r.text.splitlines()]
    return {x["id"]: x["predictions"]["sentiment"]["confidence"] for x in rows
            if x["predictions"].get("sentiment")}


def status(c):
    code, st = c.json("GET", "/admin/training/api/active_learning", headers=H)
    assert code == 200
    return st


def trained(serve, path):
    service, url = serve(path)
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]),
                   timeout=120)
    assert run["status"] == "success", run
    return c, run["run_id"]


# -- scores ------------------------------------------------------------------------------------

def test_scores_of_a_distribution_a_multilabel_answer_and_spans():
    row = {"confidence": 0.7, "probabilities": {"a": 0.7, "b": 0.2, "c": 0.1}}
    least, margin, entropy = scores_of(row, ["a", "b", "c"], "distribution")
    assert least == pytest.approx(0.3) and margin == pytest.approx(0.5)
    assert entropy == pytest.approx(-(0.7 * math.log(0.7) + 0.2 * math.log(0.2)
                                      + 0.1 * math.log(0.1)) / math.log(3))
    # without probabilities: the confidence on the label, the rest shared (as upstream does)
    assert scores_of({"confidence": 0.6}, ["a", "b", "c"], "distribution")[1] == \
        pytest.approx(1 - (0.6 - 0.2))
    # a multi-label answer: independent yes/no; its least sure decision
    least, margin, _ = scores_of({"confidence": 0.9, "probabilities": {"a": 0.9, "b": 0.4}},
                                 ["a", "b"], "each")
    assert least == pytest.approx(0.4) and margin == pytest.approx(0.8)
    # spans: the model's item-level uncertainty, else 1 - the confidence
    assert scores_of({"confidence": 0.8}, ["PER"], "confidence") == pytest.approx((0.2,) * 3)
    assert scores_of({"confidence": 0.8, "uncertainty": 0.5}, ["PER"], "confidence")[0] == 0.5
    assert scores_of({"confidence": 0.8}, [], None) is None  # free text, numbers


# -- the config --------------------------------------------------------------------------------

def test_the_config_in_upstream_vocabulary(tmp_path):
    cfg, errors, warnings = load(al_project(tmp_path, "margin", 20, """  hybrid_weights: {uncertainty: 1}
  max_instances_to_reorder: 50
  cold_start_strategy: fixed_order
  classifier_name: sklearn.linear_model.LogisticRegression
  vectorizer_params: {ngram_range: [1, 2]}
  calibrate_probabilities: true
"""))
    assert errors == []
    al = cfg.active_learning
    assert (al.enabled, al.strategy, al.schemes, al.max_reorder, al.cold_start) == (
        True, "margin", ["sentiment"], 50, "fixed_order")
    assert al.random_percent == pytest.approx(0.2)  # upstream writes a fraction
    said = {w.key: w.message for w in warnings}
    assert "model_training.auto_retrain.trainer" in said["active_learning.classifier_name"]
    assert "auto_retrain.params" in said["active_learning.vectorizer_params"]
    assert "active_learning.calibrate_probabilities" in said
    assert cfg.upstream.strategy == "active_learning"


@pytest.mark.parametrize("top, key, words", [
    ("  query_strategy: badge\n", "active_learning.query_strategy",
     "badge is upstream's and not implemented here; hybrid"),
    ("  query_strategy: vibes\n", "active_learning.query_strategy",
     "'vibes' is not a query strategy"),
    ("  annotation_routing: true\n", "active_learning.annotation_routing",
     "store a model's labels as annotations without an annotator"),
    ("  cold_start_strategy: llm\n", "active_learning.cold_start_strategy",
     "an LLM's cold start is not implemented here"),
    ("  schema_names: [nope]\n", "active_learning.schema_names[0]",
     "'nope', which is not a scheme of this config"),
    ("  hybrid_weights: {uncertainty: 0, diversity: 0}\n  query_strategy: hybrid\n",
     "active_learning.hybrid_weights", "are all 0"),
    ("  llm: {enabled: true}\n", "active_learning.llm", "no LLM is called by the server"),
])
def test_keys_that_cannot_apply_are_refused_with_what_to_do(tmp_path, top, key, words):
    cfg, errors, _ = load(make_project(tmp_path, top="assignment_strategy: active_learning\n"
                                                     "active_learning:\n" + top, labels=False))
    assert [e.key for e in errors] == [key], errors
    assert words in errors[0].message


def test_a_scheme_no_strategy_fits_and_contradictions_are_refused(tmp_path):
    path = make_project(tmp_path, top="""  - annotation_type: text
    name: note
assignment_strategy: active_learning
active_learning:
  schema_names: [sentiment, note]
""", labels=False)
    _, errors, _ = load(path)
    assert any("a text scheme: a model's answer to it has no uncertainty" in e.message
               for e in errors), errors
    for top, words in (("assignment_strategy: active_learning\nactive_learning: "
                        "{enabled: false}\n", "say which you mean"),
                       ("assignment_strategy: random\nactive_learning: {enabled: true}\n",
                        "the model cannot order the queue and random too")):
        _, errors, _ = load(make_project(tmp_path, top=top, labels=False))
        assert len(errors) == 1 and words in errors[0].message, errors


def test_validate_and_the_upstream_report_call_it_implemented(tmp_path, capsys):
    path = al_project(tmp_path)
    assert main(["validate", path]) == 0
    out = capsys.readouterr().out
    assert "implemented (2): assignment_strategy, active_learning" in out


# -- the order through the server -----------------------------------------------------------------

def test_annotators_get_the_items_the_model_is_least_sure_of(tmp_path, serve):
    c, run_id = trained(serve, al_project(tmp_path))
    st = status(c)
    assert st["enabled"] and st["order"]["ordered"] and st["order"]["runs"] == {
        "sentiment": run_id}
    conf = predictions(c)
    pool = [i for i in conf if not is_test(i)]
    # unlabelled items only: the export's predictions of labelled val items are not in the pool
    r = c.get("/admin/export.jsonl?rows=item", headers=H)
    has_labels = {json.loads(x)["id"] for x in r.text.splitlines() if json.loads(x)["labels"]}
    pool = [i for i in pool if i not in has_labels]
    least_sure = sorted(pool, key=lambda i: (conf[i], i))
    a = Client("http://127.0.0.1:%d" % c.port)
    a.login("ann")
    got = walk(a, 10)
    # places 1..6 are the model's; the 7th is the test split's (its 15 % share), then the
    # model's again
    model = got[:6] + got[7:]
    assert [conf[i] for i in model] == [conf[i] for i in least_sure[:9]]
    assert is_test(got[6]) and not any(is_test(i) for i in model)
    rows = list(csv.DictReader(io.StringIO(
        c.get("/admin/export.csv?rows=label", headers=H).text)))
    why = {r["item_id"]: r["assigned_because"] for r in rows if r["annotator"] == "ann"}
    assert why[got[0]].startswith("uncertainty 0.") and "(run %s)" % run_id in why[got[0]]
    assert why[got[6]].startswith("test split: random order")
    assert status(c)["order"]["next"][0]["item_id"] not in got


def test_two_annotators_never_get_the_same_item_and_a_given_item_stays(tmp_path, serve):
    c, _ = trained(serve, al_project(tmp_path, pct=20))
    url = "http://127.0.0.1:%d" % c.port
    a, b = Client(url), Client(url)
    a.login("ann")
    b.login("bob")
    first_a = shown(a.get("/annotate").text)
    first_b = shown(b.get("/annotate").text)
    assert first_a != first_b
    assert shown(a.get("/annotate").text) == first_a  # given stays given
    got = walk(a, 5) + walk(b, 5)
    assert len(set(got)) == 10
    rows = list(csv.DictReader(io.StringIO(
        c.get("/admin/export.csv?rows=label", headers=H).text)))
    assert any(r["assigned_because"] == "random sample (random_sample_percent)" for r in rows)


def test_the_test_split_order_does_not_depend_on_the_model(tmp_path, serve):
    """Two projects, one ranked by uncertainty, one by entropy of a different run: the test
    items handed out are the same ones, in the same order."""
    seen = []
    for n, strategy in enumerate(("uncertainty", "diversity")):
        d = tmp_path / str(n)
        d.mkdir()
        c, _ = trained(serve, al_project(d, strategy))
        a = Client("http://127.0.0.1:%d" % c.port)
        a.login("ann")
        got = walk(a, 30)
        seen.append([i for i in got if is_test(i)])
    assert len(seen[0]) == 4 and seen[0] == seen[1]


def test_diversity_and_hybrid_rank_with_the_stated_fallback(tmp_path, serve):
    c, run_id = trained(serve, al_project(tmp_path, "hybrid"))
    nxt = status(c)["order"]["next"]
    assert nxt[0]["why"].startswith("hybrid (words of the item: the model sent no vector)")
    assert all(x["score"] is not None for x in nxt[:9] if not is_test(x["item_id"]))
    assert all(x["score"] is None for x in nxt if is_test(x["item_id"]))


def test_before_a_model_the_cold_start_order_and_the_first_run_at_the_threshold(
        tmp_path, serve):
    path = make_project(tmp_path, labels=False, top="""assignment_strategy: active_learning
active_learning:
  min_instances_for_training: 30
  update_frequency: 4
""", model_training="""  auto_retrain:
    min_interval_s: 0
""")
    service, url = serve(path)
    c = Client(url)
    st = status(c)
    while st["retraining"]["reason"] == "not checked yet":  # the queue's first tick
        time.sleep(0.05)
        st = status(c)
    assert not st["order"]["ordered"]
    assert "starts at 30 (active_learning.min_instances_for_training)" in \
        st["retraining"]["reason"]
    a = Client(url)
    a.login("ann")
    got = walk(a, 5)
    assert got != sorted(got)  # random, upstream's default cold start
    rows = list(csv.DictReader(io.StringIO(c.get("/admin/export.csv?rows=label",
                                                 headers=H).text)))
    assert rows[0]["assigned_because"].startswith("cold start: random order")
    code, auto = c.json("GET", "/admin/training/api/auto_retrain", headers=H)
    assert auto["next_at"] == 30
    walk(a, 25)  # the 30th label queues the first run
    deadline = time.time() + 30
    while True:
        code, runs = c.json("GET", "/admin/training/api/runs", headers=H)
        if runs["runs"]:
            break
        assert time.time() < deadline, auto
        time.sleep(0.1)
    assert runs["runs"][0]["auto"] is True and runs["runs"][0]["schemas"] == ["sentiment"]


def test_a_model_that_does_not_beat_its_baseline_orders_nothing(tmp_path, serve, monkeypatch):
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    path = al_project(tmp_path, extra="")
    service, url = serve(path)
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-constant", schemas=["sentiment"]), timeout=60)
    assert run["status"] == "success"
    assert status(c)["order"] == {"ordered": False}


def test_the_learning_curve_and_the_card(tmp_path, serve):
    c, first = trained(serve, al_project(tmp_path))
    second = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]),
                      timeout=120)["run_id"]
    curve = status(c)["curves"]["sentiment"]
    assert [p["run_id"] for p in curve] == [first, second]
    assert curve[0]["labelled"] == 600 and curve[0]["figure"] == "macro-F1"
    assert 0.5 < curve[0]["value"] <= 1
    page = c.get("/admin/training", headers=H).text
    assert 'id="active-learning"' in page and 'id="al-curve-sentiment"' in page
    assert "The queue is ordered by run" in page


def test_a_fraction_of_one_is_said_to_mean_every_place_and_llm_false_is_fine(tmp_path):
    cfg, errors, warnings = load(al_project(tmp_path, pct=1, extra="  llm: false\n"))
    assert errors == [] and cfg.active_learning.random_percent == 1.0
    [w] = [w for w in warnings if w.key == "active_learning.random_sample_percent"]
    assert "every ranked place is drawn at random" in w.message and "0.01 for 1 %" in w.message
