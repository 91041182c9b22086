"""The model against its baseline (potato/training/reports/versus.py, through the held-out
report): the figure each kind is judged by, a verdict the test split supports, and the same
verdict every time it is computed."""

import random

import pytest

from potato.training.reports import ratings, report, versus

LABELS = ["pos", "neg", "neu"]


def items_and_preds(golds, preds, scheme="s", train=()):
    items = [{"id": "t%d" % i, "split": "test", "labels": {scheme: g}}
             for i, g in enumerate(golds)]
    items += [{"id": "r%d" % i, "split": "train", "labels": {scheme: g}}
              for i, g in enumerate(train)]
    rows = [{"id": "t%d" % i, "split": "test", "scheme": scheme, "label": p, "confidence": 0.9}
            for i, p in enumerate(preds)]
    return rows, items


def versus_of(golds, preds, kind="radio", labels=LABELS, train=()):
    rows, items = items_and_preds(golds, preds, train=train)
    r = report.holdout_report(rows, items, {"s": {"type": kind, "labels": labels}})
    return r, r["versus_baseline"]


def noisy(golds, right, seed=1):
    rng = random.Random(seed)
    return [g if rng.random() < right else rng.choice(LABELS) for g in golds]


def test_a_model_that_learned_the_labels_beats_the_majority_baseline():
    rng = random.Random(7)
    golds = [rng.choice(LABELS) for _ in range(300)]
    r, v = versus_of(golds, noisy(golds, 0.7))
    assert v["figure"] == "macro-F1" and v["higher_is_better"] is True
    assert v["model"] == pytest.approx(r["macro_f1"], abs=1e-3)  # the report's own figure
    # the baseline is the best constant answer on these items: never below the train majority's
    assert v["baseline"] >= r["baseline"]["macro_f1"] - 1e-4
    assert v["baseline_is"].startswith("always answering ")
    assert v["baseline_is"].endswith(", the best single answer on these items")
    assert v["n"] == 300 and v["resamples"] == versus.RESAMPLES
    lo, hi = v["ci95"]
    assert 0 < lo <= v["difference"] <= hi
    assert v["beats"] is True


def test_a_model_that_always_answers_one_label_does_not_beat_it():
    # digits with naive Bayes, issue 35: every item predicted "six", macro-F1 near 0
    golds = ["pos"] * 50 + ["neg"] * 40 + ["neu"] * 30
    r, v = versus_of(golds, ["neu"] * 120, train=["pos"] * 10 + ["neg"] * 5)
    assert v["model"] < v["baseline"] and v["difference"] < 0
    assert v["ci95"][1] < 0 and v["beats"] is False
    # the majority answer itself: no better, the interval is zero
    r, v = versus_of(golds, ["pos"] * 120, train=["pos"] * 10)
    assert v["difference"] == 0 and v["ci95"] == [0, 0] and v["beats"] is False


def test_a_few_test_items_cannot_show_a_model_beats_anything():
    golds = ["pos", "neg", "pos", "neg"]
    r, v = versus_of(golds, golds, train=["pos"] * 3)  # perfect on 4 items
    assert v["difference"] > 0 and v["ci95"][0] <= 0 and v["beats"] is False
    golds = ["pos", "neg"] * 40
    r, v = versus_of(golds, golds, train=["pos"] * 3)  # perfect on 80 items
    assert v["beats"] is True


def test_the_verdict_is_the_same_every_time():
    rng = random.Random(3)
    golds = [rng.choice(LABELS) for _ in range(120)]
    preds = noisy(golds, 0.3, seed=5)
    assert versus_of(golds, preds)[1] == versus_of(golds, preds)[1]


def test_the_interval_narrows_with_more_test_items():
    rng = random.Random(11)
    golds = [rng.choice(LABELS) for _ in range(1000)]
    preds = noisy(golds, 0.5)
    small = versus_of(golds[:60], preds[:60])[1]["ci95"]
    large = versus_of(golds, preds)[1]["ci95"]
    assert large[1] - large[0] < small[1] - small[0]


def test_multi_label_schemes_compare_label_sets():
    golds = [["pos"], ["neg", "neu"], ["pos", "neu"], ["neg"]] * 30
    r, v = versus_of(golds, golds, kind="multiselect", train=[["pos"]] * 5)
    assert v["figure"] == "macro-F1"
    assert v["baseline_is"].startswith("always answering ") and "best single answer" in \
        v["baseline_is"]
    assert v["model"] == 1.0 and v["beats"] is True


def test_likert_is_judged_by_its_weighted_kappa():
    points = [1, 2, 3, 4, 5]
    rng = random.Random(2)
    golds = [rng.choice(points) for _ in range(150)]
    near = [min(5, max(1, g + rng.choice([-1, 0, 0, 1]))) for g in golds]
    r, v = versus_of(golds, near, kind="likert", labels=points, train=[3] * 5)
    assert v["figure"] == "quadratic-weighted kappa"
    assert v["model"] == pytest.approx(ratings.qwk(list(zip(near, golds)), points), abs=1e-4)
    assert v["baseline"] == 0.0  # a constant answer agrees no better than chance
    assert v["beats"] is True
    r, v = versus_of(golds, [3] * 150, kind="likert", labels=points, train=[3])
    assert v["model"] == 0.0 and v["beats"] is False


def test_numbers_are_judged_by_the_mean_absolute_error():
    rng = random.Random(4)
    golds = [rng.uniform(0, 100) for _ in range(100)]
    close = [g + rng.uniform(-5, 5) for g in golds]
    r, v = versus_of(golds, close, kind="slider", labels=[], train=[50.0] * 9)
    assert v["figure"] == "MAE" and v["higher_is_better"] is False
    assert v["model"] == pytest.approx(r["mae"], abs=1e-3)
    median = sorted(golds)[49] / 2 + sorted(golds)[50] / 2
    assert v["baseline"] == pytest.approx(sum(abs(median - g) for g in golds) / 100, abs=1e-3)
    assert v["baseline_is"] == "always answering %g, the median of these items" % median
    assert v["difference"] > 0 and v["beats"] is True  # lower MAE: better, counted positive
    far = [g + 60 for g in golds]
    r, v = versus_of(golds, far, kind="slider", labels=[], train=[50.0] * 9)
    assert v["difference"] < 0 and v["beats"] is False


def spans_of(text_len, i, label="PER"):
    return [{"start": i % text_len, "end": i % text_len + 1, "label": label, "text": "x"}]


def test_spans_are_judged_by_entity_f1_against_marking_nothing():
    golds = [spans_of(10, i) for i in range(80)]
    r, v = versus_of(golds, golds, kind="span", labels=["PER"])
    assert v["figure"] == "entity micro-F1" and v["baseline_is"] == "marking nothing"
    assert v["model"] == r["micro_f1"] == 1.0 and v["baseline"] == 0.0
    assert v["beats"] is True
    wrong = [spans_of(10, i + 1) for i in range(80)]
    r, v = versus_of(golds, wrong, kind="span", labels=["PER"])
    assert v["model"] == 0.0 and v["beats"] is False


def test_a_large_test_split_is_resampled_fewer_times_within_bounds():
    golds = ["pos", "neg"] * 2500
    r, v = versus_of(golds, golds, train=["pos"])
    assert v["resamples"] * 5000 <= versus.MAX_DRAWS and v["resamples"] >= 200
    assert v["beats"] is True


def test_one_scheme_scored_names_itself():
    rows, items = items_and_preds(["pos", "neg"], ["pos", "neg"], scheme="s")
    r = report.holdout_report(rows, items, {"s": {"type": "radio", "labels": LABELS},
                                            "t": {"type": "radio", "labels": LABELS}})
    assert r["scheme"] == "s"


def test_a_constant_answer_never_beats_the_best_constant():
    # Issue 35's digits: ten classes of equal size, the train split's most common digit absent
    # from the test split. Always answering the majority scores macro-F1 0 there, and a model
    # that always answers another digit would look better; against the best single answer on
    # these items it does not.
    labels = ["d%d" % k for k in range(10)]
    golds = ["d%d" % (k % 9) for k in range(90)]  # d9 never in the test split
    r, v = versus_of(golds, ["d0"] * 90, labels=labels, train=["d9"] * 20)
    assert r["baseline"]["label"] == "d9" and r["baseline"]["macro_f1"] == 0.0
    assert v["difference"] <= 0 and v["beats"] is False
    for constant in labels:
        assert versus_of(golds, [constant] * 90, labels=labels, train=["d9"] * 20)[1][
            "beats"] is False
