"""The model against its baseline and against chance (potato/training/reports/versus.py,
through the held-out report): the figure each kind is judged by, a verdict the test split
supports (a model that guesses never beats them), and the same verdict every time."""

import random

import pytest

from potato.training.reports import ratings, report, versus

LABELS = ["pos", "neg", "neu"]


def items_and_preds(golds, preds, scheme="s", train=(), texts=None):
    items = [{"id": "t%d" % i, "split": "test", "labels": {scheme: g},
              "text": texts[i] if texts else "t%d" % i} for i, g in enumerate(golds)]
    items += [{"id": "r%d" % i, "split": "train", "labels": {scheme: g}}
              for i, g in enumerate(train)]
    rows = [{"id": "t%d" % i, "split": "test", "scheme": scheme, "label": p, "confidence": 0.9}
            for i, p in enumerate(preds)]
    return rows, items


def versus_of(golds, preds, kind="radio", labels=LABELS, train=(), texts=None):
    rows, items = items_and_preds(golds, preds, train=train, texts=texts)
    r = report.holdout_report(rows, items, {"s": {"type": kind, "labels": labels}})
    return r, r["versus_baseline"]


def noisy(golds, right, seed=1):
    rng = random.Random(seed)
    return [g if rng.random() < right else rng.choice(LABELS) for g in golds]


def test_a_model_that_learned_the_labels_beats_the_baseline_and_chance():
    rng = random.Random(7)
    golds = [rng.choice(LABELS) for _ in range(300)]
    r, v = versus_of(golds, noisy(golds, 0.7), train=["pos"] * 5)
    assert v["figure"] == "macro-F1" and v["higher_is_better"] is True
    assert v["model"] == pytest.approx(r["macro_f1"], abs=1e-3)  # the report's own figure
    assert v["baseline"] == r["baseline"]["macro_f1"]  # the report's own baseline
    assert v["baseline_is"] == "always answering pos, the majority-class baseline"
    assert v["n"] == 300 and v["shuffles"] == versus.SHUFFLES
    assert v["chance"] <= v["chance_bound"] < v["model"] and v["beats"] is True


def test_a_model_that_guesses_does_not_beat_chance():
    # Random guesses, guesses at the class rates, one label always: none depends on the items.
    wins = 0
    for seed in range(40):
        rng = random.Random(seed)
        golds = [rng.choice(LABELS) for _ in range(150)]
        wins += versus_of(golds, [rng.choice(LABELS) for _ in golds], train=["pos"])[1]["beats"]
    assert wins <= 3  # a test at the 2.5 % level: about 1 in 40 by luck
    golds = ["pos"] * 50 + ["neg"] * 40 + ["neu"] * 30
    for constant in LABELS:
        r, v = versus_of(golds, [constant] * 120, train=["pos"] * 10 + ["neg"] * 5)
        assert v["beats"] is False and v["chance_bound"] == v["model"]  # shuffling changes nothing


def test_a_constant_that_is_not_the_train_majority_does_not_beat_either():
    # Issue 35's digits: ten classes of equal size, the train split's most common digit absent
    # from the test split (so its macro-F1 there is 0); always answering another digit scores
    # above that, but no better than its own answers shuffled.
    labels = ["d%d" % k for k in range(10)]
    golds = ["d%d" % (k % 9) for k in range(90)]
    for constant in labels:
        r, v = versus_of(golds, [constant] * 90, labels=labels, train=["d9"] * 20)
        assert v["beats"] is False, constant


def test_a_few_test_items_cannot_show_a_model_beats_chance():
    golds = ["pos", "neg", "pos", "neg"]
    r, v = versus_of(golds, golds, train=["pos"] * 3)  # perfect on 4 items
    assert v["model"] > v["baseline"] and v["beats"] is False
    golds = ["pos", "neg"] * 40
    r, v = versus_of(golds, golds, train=["pos"] * 3)  # perfect on 80 items
    assert v["beats"] is True


def test_the_verdict_is_the_same_every_time():
    rng = random.Random(3)
    golds = [rng.choice(LABELS) for _ in range(120)]
    preds = noisy(golds, 0.3, seed=5)
    assert versus_of(golds, preds)[1] == versus_of(golds, preds)[1]


def test_multi_label_schemes_compare_label_sets():
    golds = [["pos"], ["neg", "neu"], ["pos", "neu"], ["neg"]] * 30
    r, v = versus_of(golds, golds, kind="multiselect", train=[["pos"]] * 5)
    assert v["figure"] == "macro-F1" and v["model"] == pytest.approx(1.0)
    assert v["baseline_is"].startswith("always answering pos, ") and v["beats"] is True
    every = [["pos", "neg", "neu"]] * 120  # always every label: high macro-F1, learned nothing
    r, v = versus_of(golds, every, kind="multiselect", train=[["pos"]] * 5)
    assert v["model"] > v["baseline"] and v["beats"] is False


def test_likert_is_judged_by_its_weighted_kappa():
    points = [1, 2, 3, 4, 5]
    rng = random.Random(2)
    golds = [rng.choice(points) for _ in range(150)]
    near = [min(5, max(1, g + rng.choice([-1, 0, 0, 1]))) for g in golds]
    r, v = versus_of(golds, near, kind="likert", labels=points, train=[3] * 5)
    assert v["figure"] == "quadratic-weighted kappa" and v["baseline"] == 0.0
    assert v["model"] == pytest.approx(ratings.qwk(list(zip(near, golds)), points), abs=1e-4)
    assert v["beats"] is True
    r, v = versus_of(golds, [3] * 150, kind="likert", labels=points, train=[3])
    assert v["model"] == 0.0 and v["beats"] is False
    r, v = versus_of(golds, [rng.choice(points) for _ in golds], kind="likert", labels=points,
                     train=[3])
    assert v["beats"] is False


def test_numbers_are_judged_by_the_mean_absolute_error():
    rng = random.Random(4)
    golds = [rng.uniform(0, 100) for _ in range(100)]
    close = [g + rng.uniform(-5, 5) for g in golds]
    r, v = versus_of(golds, close, kind="slider", labels=[], train=[50.0] * 9)
    assert v["figure"] == "MAE" and v["higher_is_better"] is False
    assert v["model"] == pytest.approx(r["mae"], abs=1e-3)
    assert v["baseline"] == r["baseline"]["mae"]
    assert v["baseline_is"] == "always answering the median, 50"
    assert v["chance_bound"] > v["model"] and v["beats"] is True  # lower is better
    noise = [rng.uniform(0, 100) for _ in golds]
    assert versus_of(golds, noise, kind="slider", labels=[], train=[50.0] * 9)[1][
        "beats"] is False


WORDS = ["w%d" % k for k in range(10)]
TEXT = " ".join(WORDS)  # "w0 w1 ... w9": word k at 3k .. 3k+2


def word(k, label="PER"):
    return {"start": 3 * k, "end": 3 * k + 2, "label": label, "text": WORDS[k]}


def test_spans_are_judged_by_entity_f1_against_marking_nothing_and_chance():
    rng = random.Random(5)
    golds = [[word(rng.randrange(10), rng.choice(["PER", "LOC"]))] for _ in range(120)]
    texts = [TEXT] * 120
    r, v = versus_of(golds, golds, kind="span", labels=["PER", "LOC"], texts=texts)
    assert v["figure"] == "entity micro-F1" and v["baseline_is"] == "marking nothing"
    assert v["model"] == r["micro_f1"] == 1.0 and v["baseline"] == 0.0 and v["beats"] is True
    # guessers that follow the text's words but know nothing of the entities: every word as
    # one label, every word with a random label, a random fifth of the words
    guessers = {
        "every word PER": [[word(k) for k in range(10)] for _ in golds],
        "every word, any label": [[word(k, rng.choice(["PER", "LOC"])) for k in range(10)]
                                  for _ in golds],
        "a fifth of the words": [[word(k, rng.choice(["PER", "LOC"])) for k in range(10)
                                  if rng.random() < 0.2] for _ in golds]}
    for name, answers in guessers.items():
        r, v = versus_of(golds, answers, kind="span", labels=["PER", "LOC"], texts=texts)
        assert v["model"] > 0 and v["beats"] is False, (name, v)
    wrong = [[word((g[0]["start"] // 3 + 1) % 10, g[0]["label"])] for g in golds]
    assert versus_of(golds, wrong, kind="span", labels=["PER", "LOC"], texts=texts)[1][
        "beats"] is False


def test_a_large_test_split_is_shuffled_fewer_times_within_bounds():
    golds = ["pos", "neg"] * 2500
    r, v = versus_of(golds, golds, train=["pos"])
    assert v["shuffles"] * 5000 <= versus.MAX_WORK and v["shuffles"] >= 200
    assert v["beats"] is True


def test_one_scheme_scored_names_itself():
    rows, items = items_and_preds(["pos", "neg"], ["pos", "neg"], scheme="s")
    r = report.holdout_report(rows, items, {"s": {"type": "radio", "labels": LABELS},
                                            "t": {"type": "radio", "labels": LABELS}})
    assert r["scheme"] == "s"


def test_a_left_out_label_is_still_scored():
    # prepare.py gives the trainer fewer labels (all_labels keeps the scheme's): the items
    # whose gold is the left-out point count, as misses
    points = [1, 2, 3, 4, 5]
    golds = [1, 2, 3, 4, 5] * 20
    preds = [g if g != 3 else 4 for g in golds]
    rows, items = items_and_preds(golds, preds)
    r = report.holdout_report(rows, items, {"s": {"type": "likert", "labels": [1, 2, 4, 5],
                                                  "all_labels": points}})
    assert r["n"] == 100 and r["accuracy"] == 0.8 and r["qwk"] < 1.0
    assert r["versus_baseline"]["n"] == 100
