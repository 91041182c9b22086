"""A run's inputs (potato/training/lifecycle/prepare.py): which labels a run learns, and when a
run is refused before it queues (issue 35, item 4: a label nobody used does not block a run)."""

import json

import pytest

from potato.config.settings import load
from potato.project.data import load_items
from potato.project.store import Store
from potato.training.core.runs import RunStore
from potato.training.lifecycle import prepare
from potato.training.remote import bundle as bundle_mod
from potato.training.remote.paths import RunPaths

SPLITS = (0.7, 0.15, 0.15)


@pytest.fixture
def project(tmp_path):
    n = 120
    (tmp_path / "items.jsonl").write_text("".join(
        json.dumps({"id": "i%03d" % k, "text": "text %d" % k}) + "\n" for k in range(n)))
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\nannotation_schemes:\n"
        "  - {annotation_type: radio, name: s, labels: [pos, neg, rare]}\n"
        "  - {annotation_type: multiselect, name: m, labels: [a, b, rare]}\n"
        "  - {annotation_type: likert, name: agree, size: 5, min_label: no, max_label: yes}\n")
    cfg = load(str(tmp_path / "c.yaml"))[0]
    store = Store(cfg.db_path)
    store.sync_items(load_items(cfg))
    split = {"i%03d" % k: bundle_mod.split_of("i%03d" % k, 0, SPLITS) for k in range(n)}
    yield cfg, store, split
    store.close()


def label_all(store, split, rare_in_train=0, rare_in_test=2):
    """pos/neg alternately; ``rare`` on that many train items and test items."""
    train = [i for i, s in sorted(split.items()) if s == "train"]
    test = [i for i, s in sorted(split.items()) if s == "test"]
    rare = set(train[:rare_in_train]) | set(test[:rare_in_test])
    for k, item in enumerate(sorted(split)):
        choice = "rare" if item in rare else ("pos", "neg")[k % 2]
        store.save_labels("ann", item, {
            "s": choice, "m": ["a", "rare"] if item in rare else [("a", "b")[k % 2]],
            "agree": 3 if item in rare else (1, 5)[k % 2]})
    return rare


def test_a_label_too_few_train_items_have_is_left_out_not_refused(project):
    cfg, store, split = project
    label_all(store, split, rare_in_train=1)
    assert prepare.refusal(cfg, store, ["s", "m", "agree"]) is None
    decided = {i: l["s"] for i, l in ((i, store.labels_of("ann", i)) for i in split)}
    assert prepare.left_out(cfg, decided, ["pos", "neg", "rare"]) == {"rare": 1}


def test_fewer_than_two_labels_left_is_refused_with_every_count(project):
    cfg, store, split = project
    for item in split:
        store.save_labels("ann", item, {"s": "pos"})
    why = prepare.refusal(cfg, store, ["s"])
    n = sum(1 for s in split.values() if s == "train")
    assert why == ("Scheme s has %d labelled items with pos; 0 labelled items with neg; 0 "
                   "labelled items with rare in the train split; a model needs at least two "
                   "labels with 2 labelled items each (model_training.min_labels_per_class), so "
                   "it can tell them apart. Label more items before training." % n)


def test_the_bundle_leaves_the_label_out_of_training_but_scores_it(project, tmp_path):
    cfg, store, split = project
    rare = label_all(store, split, rare_in_train=1)
    run = RunStore(store).create("text-naive-bayes", ["s", "m", "agree"], "local", {})
    paths = RunPaths(str(tmp_path / "run"))
    logs = []
    assert prepare.prepare(cfg, store, run, paths, prepare.Destination(local=True),
                           lambda step: None, logs.append) is None
    b = bundle_mod.read(paths.bundle, verify=False)
    assert b.schemas["s"]["labels"] == ["pos", "neg"]
    assert b.schemas["s"]["left_out"] == [["rare", 1]]
    # a 5-point scale whose 2 and 4 nobody chose (and 3 once): the run learns 1 and 5
    assert b.schemas["m"]["labels"] == ["a", "b"] and b.schemas["agree"]["labels"] == [1, 5]
    for item in b.items:
        if item["split"] == "test":
            continue
        assert item["labels"].get("s") != "rare"
        assert "rare" not in item["labels"].get("m", [])
        assert item["labels"].get("agree") not in (2, 3, 4)
    held = {it["id"]: it["labels"] for it in b.items if it["split"] == "test"}  # a local run
    assert sum(1 for i in rare if split[i] == "test" and held[i]["s"] == "rare") == 2
    said = [line for line in logs if "will not predict" in line]
    assert said == [
        "s: the model will not predict rare: rare has 1 labelled item in the train split, "
        "fewer than model_training.min_labels_per_class (2). Label items that deserve it if "
        "any do",
        "m: the model will not predict rare: rare has 1 labelled item in the train split, "
        "fewer than model_training.min_labels_per_class (2). Label items that deserve it if "
        "any do",
        "agree: the model will not predict 2 or 3 or 4: 2 has no labelled item; 3 has 1 "
        "labelled item; 4 has no labelled item in the train split, fewer than "
        "model_training.min_labels_per_class (2). Label items that deserve them if any do"]
    assert any(line.endswith("no tie skipped; not trained on, for a left-out label: 1 s label, "
                             "1 agree label") for line in logs), logs
