"""Hostile and careless use of active learning (docs/active-learning.md): predictions at the
trust boundary, the order under races and hand-outs, the learning curve, upstream's own
example configs. Runs are real naive Bayes runs on the local backend, as in
test_queue_order.py."""

import json
import random
import re
import threading
import time

import pytest

from potato.commands.cli import main
from potato.config.settings import load
from potato.project import queue_order
from potato.project.store import Store
from potato.training.exchange import boundary
from potato.training.remote.bundle import split_of
from potato.training.web.learning import card

from tests.helpers import KEY, Client, make_project, start_run, wait_run
from tests.project.test_queue_order import GOLD, al_project, shown, status, trained, walk

H = {"X-API-Key": KEY}


def gold_ids():
    """The items the example's labels.jsonl labels (imported by make_project as 'gold')."""
    import os

    from tests.helpers import EXAMPLE

    with open(os.path.join(EXAMPLE, "labels.jsonl")) as f:
        return {json.loads(line)["id"] for line in f}


# -- predictions at the trust boundary -------------------------------------------------------

SPLITS = {"a": "unlabeled", "b": "unlabeled"}
SCHEMAS = {"s": {"type": "radio", "labels": ["x", "y", "z"]},
           "m": {"type": "multiselect", "labels": ["x", "y"]},
           "l": {"type": "likert", "labels": [1, 2, 3, 4, 5]},
           "sp": {"type": "span", "labels": ["PER"]}}
TEXTS = {"a": "hello world", "b": "foo bar"}


def row(item="a", **kw):
    r = {"id": item, "split": "unlabeled", "scheme": "s", "label": "x", "confidence": 0.5}
    r.update(kw)
    return r


@pytest.mark.parametrize("bad, words", [
    (row(probabilities={"x": 0.5, "y": 0.5, "w": 0.0}), "not one of s's labels"),
    (row(probabilities={"x": 1e308, "y": -1e308}), "outside 0..1"),
    (row(probabilities={"x": True, "y": False}), "not bool"),
    (row(probabilities=[0.5, 0.5]), "must be an object"),
    (row(probabilities={}), "must be an object"),
    (row(probabilities={"x": 0.5, "y": 0.3}), "sum to 0.8000"),
    (row(scheme="l", label=3, probabilities={"3.0": 1.0}), "not one of l's labels"),
    (row(scheme="sp", label=[], probabilities={"PER": 1.0}), "not sp"),
    (row(uncertainty=0.3), "uncertainty is for span schemes"),
    (row(vector=[1] * 65), "1 to 64 numbers"),
    (row(vector=[]), "1 to 64 numbers"),
    (row(vector=[True]), "not bool"),
    (row(vector="0,1"), "1 to 64 numbers"),
    (row(vector=[1e7]), "outside"),
])
def test_hostile_ranking_fields_are_refused_with_the_field_named(bad, words):
    with pytest.raises(boundary.Invalid) as e:
        boundary.prediction(bad, SPLITS, SCHEMAS, TEXTS)
    assert words in str(e.value)


def test_nan_in_a_probability_rejects_the_predictions_file_not_the_server():
    lines = [json.dumps(row(probabilities={"x": 0.5, "y": 0.5})),
             '{"id": "b", "split": "unlabeled", "scheme": "s", "label": "x", '
             '"confidence": 0.5, "probabilities": {"x": NaN}}']
    rows, problem = boundary.predictions(lines, SPLITS, SCHEMAS, TEXTS)
    assert rows == [] and "line 2" in problem and "NaN" in problem


def test_likert_probabilities_keyed_by_the_point_as_text_rank_like_a_distribution():
    r = boundary.prediction(row(scheme="l", label=3, probabilities={"3": 0.6, "4": 0.4}),
                            SPLITS, SCHEMAS, TEXTS)
    least, margin, _ = queue_order.scores_of(r, SCHEMAS["l"]["labels"], "distribution")
    assert least == pytest.approx(0.4) and margin == pytest.approx(0.8)


def test_one_runs_item_vectors_have_one_dimension():
    """Diversity compares vectors by cosine: two items of one run in vectors of different
    sizes (3 numbers and 5) cannot be compared, and must not silently be (zip truncates)."""
    lines = [json.dumps(row("a", vector=[1.0, 0.0, 0.0])),
             json.dumps(row("b", vector=[1.0, 0.0, 0.0, 5.0, 5.0]))]
    rows, problem = boundary.predictions(lines, SPLITS, SCHEMAS, TEXTS)
    assert problem is not None and "vector" in problem, rows


# -- the order ----------------------------------------------------------------------------------

@pytest.mark.parametrize("cold", ["fixed_order", "random"])
def test_a_project_with_labels_does_not_hand_them_out_again_before_a_model(tmp_path, serve,
                                                                            cold):
    """A project that has labels (imported, or from before it switched to active learning)
    and no model in use yet: one annotator per item, so an item that has a label needs none.
    The example's first 600 items in data-file order are labelled."""
    path = make_project(tmp_path, top="""assignment_strategy: active_learning
active_learning:
  cold_start_strategy: %s
  min_instances_for_training: 1000000
""" % cold)
    service, url = serve(path)
    a = Client(url)
    a.login("ann")
    got = walk(a, 10)
    labelled = gold_ids()
    assert [i for i in got if i in labelled] == []


def model_vectors(tmp_path, strategy="diversity"):
    """A project with the example's 600 labels and the scores and 8-number vectors a model
    that sends vectors would leave (every item it predicts: all but the train split)."""
    path = make_project(tmp_path, top="""assignment_strategy: active_learning
active_learning:
  query_strategy: %s
  random_sample_percent: 0
""" % strategy)
    cfg, errors, _ = load(path)
    assert errors == []
    store = Store(cfg.db_path)
    labelled = {r[0] for r in store.conn().execute("SELECT DISTINCT item_id FROM annotations")}
    rng = random.Random(7)
    rows = []
    for (item,) in store.conn().execute("SELECT id FROM items"):
        split = split_of(item, 13, (0.70, 0.15, 0.15)) if item in labelled else "unlabeled"
        if split != "train":  # the model predicts val, test and unlabeled items
            rows.append(("sentiment", item, (0.5, 0.5, 0.5),
                         [rng.gauss(0, 1) for _ in range(8)]))
    queue_order.keep_scores(store, "r1", rows)
    return cfg, store


def test_a_model_that_sends_vectors_is_not_said_to_have_sent_none(tmp_path):
    """The doc: the fallback (words hashed) is for a trainer that sends no vector, and the
    reason column says so. A trainer that sends a vector for every item it predicts is
    compared in its own space, and its picks are not labelled as the fallback."""
    cfg, store = model_vectors(tmp_path)
    try:
        assert queue_order.reorder(store, cfg, lambda st, scheme: "r1") is not None
        picks = [x for x in queue_order.status(store, 20)["next"]
                 if not x["why"].startswith("test split")]
        assert picks and picks[0]["why"].startswith("diversity")
        assert not any("the model sent no vector" in x["why"] for x in picks), picks[:3]
    finally:
        store.close()


def test_two_reorders_at_once_both_finish_and_leave_one_whole_order(tmp_path):
    """A run's ingest reorders on the training thread while the admin's Use this model
    reorders on a request thread: both must finish, and the order in use must be one plan,
    whole."""
    store = Store(str(tmp_path / "potato.db"))
    try:
        queue_order.ensure(store)
        n = 12000  # more than one write transaction each
        plans = [queue_order.Plan([("%s%05d" % (tag, k), 0.5, tag) for k in range(n)],
                                  {"s": tag}) for tag in ("one", "two")]
        errors = []

        def write(p):
            try:
                queue_order.write(store, p, "uncertainty")
            except Exception as e:  # what the caller (a request, the queue) would get
                errors.append(repr(e))
            finally:
                store.release()

        threads = [threading.Thread(target=write, args=(p,)) for p in plans]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        gen = int(store.meta_get("queue_order.gen"))
        whys = store.conn().execute("SELECT w.why, COUNT(*) FROM queue_places o JOIN "
                                    "queue_whys w ON w.gen=o.gen AND w.code=o.why WHERE "
                                    "o.gen=? GROUP BY w.why", (gen,)).fetchall()
        assert [tuple(w) for w in whys] in ([("one", n)], [("two", n)])
    finally:
        store.close()


def test_use_this_model_on_an_older_run_reorders_by_it_and_racers_get_different_items(
        tmp_path, serve):
    c, first = trained(serve, al_project(tmp_path))
    second = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]),
                      timeout=120)["run_id"]
    assert status(c)["order"]["runs"] == {"sentiment": second}
    code, out = c.json("POST", "/admin/training/api/runs/%s/use" % first, headers=H)
    assert code == 200, out
    assert status(c)["order"]["runs"] == {"sentiment": first}
    url = "http://127.0.0.1:%d" % c.port
    clients = [Client(url) for _ in range(6)]
    for k, a in enumerate(clients):
        a.login("racer%d" % k)
    got = [None] * len(clients)

    def take(k):
        got[k] = shown(clients[k].get("/annotate").text)

    threads = [threading.Thread(target=take, args=(k,)) for k in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert None not in got and len(set(got)) == len(got)


def test_an_inactive_ranked_item_is_never_handed_out(tmp_path, serve):
    service, url = serve(al_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]),
                   timeout=120)
    assert run["status"] == "success"
    head = status(c)["order"]["next"][0]["item_id"]
    # the item leaves the data file; the sync (the data-file watcher's) makes it inactive
    data = tmp_path / "reviews.jsonl"
    data.write_text("".join(line + "\n" for line in data.read_text().splitlines()
                            if json.loads(line)["id"] != head))
    assert service.app.sync_items()["deactivated"] == 1
    assert status(c)["order"]["next"][0]["item_id"] != head
    a = Client(url)
    a.login("ann")
    assert head not in walk(a, 3)


def test_rank_scores_do_not_grow_with_every_run_for_good(tmp_path, serve):
    """Each ranking run keeps a row (and a vector) per item it predicted. With retain_runs: 1
    the model files of older runs are deleted; their ranking rows (forget: "a pruned run's
    numbers go with it") must not stay for good, or the store grows by the whole item count at
    every update_frequency labels."""
    path = al_project(tmp_path)
    text = open(path).read().replace("model_training:\n", "model_training:\n  retain_runs: 1\n")
    open(path, "w").write(text)
    c, first = trained(serve, path)
    for _ in range(2):
        run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]),
                       timeout=120)
        assert run["status"] == "success"
    deadline = time.time() + 30
    while True:
        code, r1 = c.json("GET", "/admin/training/api/runs/%s" % first, headers=H)
        if r1.get("pruned_at") or time.time() > deadline:
            break
        time.sleep(0.2)
    assert r1.get("pruned_at"), r1  # retain_runs: 1 deleted the first run's model files
    store = Store(load(path)[0].db_path)
    try:
        kept = store.conn().execute("SELECT COUNT(*) FROM rank_scores WHERE run_id=?",
                                    (first,)).fetchone()[0]
        runs = store.conn().execute("SELECT COUNT(DISTINCT run_id) FROM rank_scores"
                                    ).fetchone()[0]
    finally:
        store.close()
    assert kept == 0 and runs <= 2, (kept, runs)


# -- the admin's card -----------------------------------------------------------------------

def card_with(points):
    return str(card({"enabled": True, "strategy": "uncertainty", "schemes": ["s"],
                     "cold_start": "random", "random_sample_percent": 20,
                     "order": {"ordered": False},
                     "retraining": {"new_labels": 0, "next_at": 10, "reason": "x"},
                     "curves": {"s": points}}))


def test_the_learning_curves_x_ticks_stand_where_their_numbers_say(tmp_path):
    """The first run of min_instances_for_training: 10 has 10 labelled items: the x axis
    0..10. Each tick's number must stand at its place on the axis (0 at the left end, 10 at
    the right)."""
    page = card_with([{"run_id": "r1", "labelled": 10, "figure": "macro-F1", "value": 0.6,
                       "higher_is_better": True, "in_use": True, "trainer": "t",
                       "auto": True}])
    xt = [(float(x), float(v)) for x, v in re.findall(
        r'<text x="([0-9.]+)" y="\d+" font-size="11" text-anchor="middle">([0-9.]+)</text>',
        page)]
    ends = dict((v, x) for x, v in xt)
    assert 0.0 in ends and 10.0 in ends, xt
    for x, v in xt:
        assert x == pytest.approx(ends[0.0] + (ends[10.0] - ends[0.0]) * v / 10, abs=0.5), xt


def test_markup_in_run_ids_scheme_names_and_reasons_is_escaped():
    st = {"enabled": True, "strategy": "<i>s</i>", "schemes": ["<script>x</script>"],
          "cold_start": "random", "random_sample_percent": 20,
          "order": {"ordered": True, "runs": {"<b>s</b>": "<img src=x onerror=alert(1)>"},
                    "at": None, "strategy": "<i>x</i>", "size": 1},
          "retraining": {"new_labels": None, "next_at": None,
                         "reason": "<script>alert(1)</script>"},
          "curves": {"<script>x</script>": [
              {"run_id": "<img src=y>", "labelled": 5, "figure": "<b>F</b>", "value": -0.3,
               "higher_is_better": False, "in_use": False, "trainer": "t", "auto": False}],
              "<svg>": []}}
    page = str(card(st))
    for raw in ("<script", "<img", "<b>", "<i>", "<svg>"):
        assert raw not in page


# -- upstream's own example configs -----------------------------------------------------------

UPSTREAM_EXAMPLE = """annotation_task_name: Active Learning Example
data_files: [data.jsonl]
admin_api_key: %s
item_properties: {id_key: id, text_key: text}
output_annotation_dir: annotation_output/
alert_time_each_instance: 10000000
user_config: {allow_all_users: true, users: []}
annotation_schemes:
  - annotation_type: radio
    name: favorite_food
    description: What kind of food is this?
    labels: [pizza, sushi, tacos, salad, burger]
assignment_strategy: active_learning
active_learning:
%s
""" % (KEY, "%s")

EXAMPLES = {
    "active-learning": """  enabled: true
  query_strategy: uncertainty
  min_instances_for_training: 5
  update_frequency: 5
  random_sample_percent: 0.2
  schema_names: [favorite_food]""",
    "active-learning-strategies": """  enabled: true
  query_strategy: hybrid
  hybrid_weights: {uncertainty: 0.7, diversity: 0.3}
  vectorizer_params: {ngram_range: [1, 2], max_features: 5000}
  classifier_params: {C: 1.0, max_iter: 500}
  calibrate_probabilities: true
  min_instances_for_training: 5
  update_frequency: 3
  schema_names: [favorite_food]""",
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_upstreams_example_configs_validate_and_hand_out_items(tmp_path, serve, name, capsys):
    foods = ["pizza", "sushi", "tacos", "salad", "burger"]
    (tmp_path / "data.jsonl").write_text("".join(
        json.dumps({"id": "i%02d" % k, "text": "a plate of %s number %d" % (foods[k % 5], k)})
        + "\n" for k in range(40)))
    path = tmp_path / "config.yaml"
    path.write_text(UPSTREAM_EXAMPLE % EXAMPLES[name])
    assert main(["validate", str(path)]) == 0, capsys.readouterr()
    service, url = serve(str(path))
    a = Client(url)
    a.login("ann")
    first = shown(a.get("/annotate").text)
    assert re.fullmatch(r"i\d\d", first)
    st = status(Client(url))
    assert st["enabled"] and st["strategy"] == ("uncertainty" if name == "active-learning"
                                                else "hybrid")


def test_active_learning_does_not_show_suggestions_for_a_scheme_writeback_leaves_out(
        tmp_path, serve):
    """Write-back is asked for another scheme (topic), not for sentiment: the admin wants no
    model suggestions for sentiment on the annotate page. Active learning's model in use for
    sentiment orders the queue; it must not also put sentiment suggestions in front of
    annotators (they would label what the model says, on the items it is least sure of)."""
    path = make_project(tmp_path, top=AL_OTHER_WB)
    text = open(path).read().replace("    schemas: [sentiment]\n", "    schemas: [topic]\n")
    open(path, "w").write(text)
    c, _ = trained(serve, path)
    assert status(c)["order"]["ordered"]
    a = Client("http://127.0.0.1:%d" % c.port)
    a.login("ann")
    for _ in range(5):
        page = a.get("/annotate").text
        assert 'class="suggestion" data-scheme="sentiment"' not in page, shown(page)
        walk(a, 1)


AL_OTHER_WB = """  - annotation_type: radio
    name: topic
    labels: [film, other]
assignment_strategy: active_learning
active_learning:
  schema_names: [sentiment]
  random_sample_percent: 0
  update_frequency: 1000
  min_instances_for_training: 1000000
"""


def test_the_export_of_a_project_without_assignments_has_an_empty_reason(tmp_path, serve):
    service, url = serve(make_project(tmp_path))
    r = Client(url).get("/admin/export.csv?rows=label", headers=H)
    assert r.status == 200
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert len(rows) == 600 and {x["assigned_because"] for x in rows} == {""}


def test_a_tiny_ranked_head_all_random_and_a_per_user_cap_still_hand_out(tmp_path, serve):
    """max_instances_to_reorder: 1, random_sample_percent: 100 (every ranked place random),
    max_annotations_per_user: 3: the one ranked place is the random draw, the rest follows
    the cold-start order, and the annotator gets 3 items, then none."""
    c, _ = trained(serve, al_project(tmp_path, pct=100, extra="""  max_instances_to_reorder: 1
max_annotations_per_user: 3
"""))
    st = status(c)
    assert st["random_sample_percent"] == 100
    whys = [x["why"] for x in st["order"]["next"]]
    assert whys[0] == "random sample (random_sample_percent)"
    assert all(w.startswith(("after the ranked head", "test split")) for w in whys[1:]), whys
    a = Client("http://127.0.0.1:%d" % c.port)
    a.login("ann")
    got = walk(a, 3)
    assert len(set(got)) == 3
    assert 'name="item_id"' not in a.get("/annotate").text
