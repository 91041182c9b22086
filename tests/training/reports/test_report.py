"""The held-out report against values computed by hand (issue 14, item 1)."""

import pytest

from potato.training.reports.report import holdout_report, wilson
import math
from potato.training.reports import report, ratings as rr

SCHEMAS = {"sentiment": {"type": "radio", "labels": ["pos", "neg"]}}
GOLD = ["pos"] * 6 + ["neg"] * 4
PRED = ["pos", "pos", "pos", "pos", "neg", "neg", "neg", "neg", "neg", "pos"]


def fixture_run(n_copies=1):
    items, predictions = [], []
    for c in range(n_copies):
        for i, (g, p) in enumerate(zip(GOLD, PRED)):
            iid = "t%d-%d" % (c, i)
            items.append({"id": iid, "split": "test", "labels": {"sentiment": g}})
            predictions.append({"id": iid, "split": "test", "scheme": "sentiment", "label": p,
                                "confidence": 0.9})
    for i, g in enumerate(["pos"] * 5 + ["neg"] * 3):
        items.append({"id": "tr%d" % i, "split": "train", "labels": {"sentiment": g}})
    # an unlabelled test-split item and a val prediction are not scored
    predictions.append({"id": "tr0", "split": "train", "scheme": "sentiment", "label": "neg",
                        "confidence": 0.5})
    return predictions, items


def test_every_field_against_hand_computed_values():
    r = holdout_report(*fixture_run(), SCHEMAS)
    assert r["n"] == 10 and r["accuracy"] == 0.7
    # Wilson 95 % for 7/10: (0.3968, 0.8922)
    assert r["accuracy_ci95"] == [0.3968, 0.8922]
    assert r["per_label"]["pos"] == {"precision": 0.8, "recall": 0.6667, "f1": 0.7273,
                                     "support": 6}
    assert r["per_label"]["neg"] == {"precision": 0.6, "recall": 0.75, "f1": 0.6667,
                                     "support": 4}
    assert r["macro_f1"] == 0.697
    assert r["confusion"] == {"labels": ["pos", "neg"], "rows": "gold", "columns": "predicted",
                              "matrix": [[4, 2], [1, 3]]}
    # the train split's majority label (pos, 5 of 8) answers 6 of the 10 test items right;
    # its macro-F1: pos has F1 2*6/(2*6+4) = 0.75, neg 0, so 0.375
    assert r["baseline"] == {"label": "pos", "accuracy": 0.6, "macro_f1": 0.375}
    assert r["above_baseline"] == 0.1
    assert r["note"] == ("Only 10 test items: too few to say much (the 95% interval of the "
                         "accuracy is 0.40 to 0.89). Label more items, or raise splits.test.")


def test_an_interval_over_the_baseline_is_said():
    r = holdout_report(*fixture_run(4), SCHEMAS)  # n = 40, still 70 %
    assert r["n"] == 40 and r["accuracy"] == 0.7
    lo, hi = r["accuracy_ci95"]
    assert lo < 0.6 < hi  # 0.5451..0.8190: it includes the baseline
    assert r["note"].startswith("The 95% interval of the accuracy (0.55 to 0.82) includes the "
                                "majority-class baseline (0.60)")
    r = holdout_report(*fixture_run(20), SCHEMAS)  # n = 200: now it is clear
    assert r["accuracy_ci95"][0] > 0.6 and r["note"] is None


@pytest.mark.parametrize("k,n,lo,hi", [(0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0),
                                       (50, 100, 0.4038, 0.5962)])
def test_wilson_known_values(k, n, lo, hi):
    a, b = wilson(k, n)
    assert (round(a, 4), round(b, 4)) == (lo, hi)


def test_multiselect_per_label():
    schemas = {"topics": {"type": "multiselect", "labels": ["a", "b"]}}
    items = [{"id": "x", "split": "test", "labels": {"topics": ["a"]}},
             {"id": "y", "split": "test", "labels": {"topics": ["a", "b"]}}]
    preds = [{"id": "x", "split": "test", "scheme": "topics", "label": ["a"], "confidence": 1},
             {"id": "y", "split": "test", "scheme": "topics", "label": ["b", "a"],
              "confidence": 1}]
    r = holdout_report(preds, items, schemas)
    assert r["accuracy"] == 1.0 and r["per_label"]["b"]["support"] == 1
    assert "confusion" not in r


def test_the_run_page_and_the_api_show_the_report(tmp_path, serve):
    from tests.helpers import Client
    from tests.helpers import injected
    from tests.helpers import KEY, make_project, start_run, wait_run

    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    h = run["holdout"]
    assert set(h) >= {"n", "accuracy", "accuracy_ci95", "macro_f1", "per_label", "confusion",
                      "baseline", "above_baseline", "note"}
    assert sum(map(sum, h["confusion"]["matrix"])) == h["n"]
    assert sum(v["support"] for v in h["per_label"].values()) == h["n"]
    page = c.get("/admin/training/runs/%s" % run["run_id"], headers={"X-API-Key": KEY}).text
    assert 'id="holdout-report"' in page and 'class="confusion"' in page
    assert "Confusion matrix: rows are the human label" in page
    assert '<th scope="row">positive</th>' in page and injected(page) == []
    from potato.commands.summary import summary_lines
    from potato.training.core.view import RunView

    text = "\n".join(summary_lines(RunView.from_dict(run)))
    assert "95% interval" in text and "(the majority-class baseline) scores accuracy" in text


def _item_run(c, item="sst-test-0001"):
    from tests.helpers import KEY

    _, rec = c.json("GET", "/admin/api/items/%s" % item, headers={"X-API-Key": KEY})
    return rec["predictions"]["sentiment"]["run_id"]


@pytest.mark.parametrize("policy", ["best", "newest"])
def test_the_model_in_use_under_each_policy_and_by_hand(tmp_path, serve, monkeypatch, policy):
    from tests.helpers import Client
    from tests.helpers import KEY, PLUGINS, make_project, start_run, wait_run

    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    cfg = make_project(tmp_path)
    text = open(cfg).read()
    with open(cfg, "w") as f:
        f.write(text.replace("    include_unlabeled: true\n",
                             "    include_unlabeled: true\n    policy: %s\n" % policy))
    _, url = serve(cfg)
    c = Client(url)
    h = {"X-API-Key": KEY}
    good = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    assert good["in_use"] == ["sentiment"] and _item_run(c) == good["run_id"]
    # a run that learned nothing (it always answers "positive") does not beat the majority
    # baseline, so it takes over under neither policy
    worse = wait_run(c, start_run(c, trainer="test-constant", schemas=["sentiment"]))
    assert worse["status"] == "success"
    assert worse["holdout"]["macro_f1"] < good["holdout"]["macro_f1"] - 0.01
    assert worse["holdout"]["versus_baseline"]["beats"] is False
    assert worse["in_use"] == [] and _item_run(c) == good["run_id"]
    log = c.get("/admin/training/api/runs/%s/log" % worse["run_id"], headers=h).text
    assert "it is trained, not in use" in log
    # one label always: not above the baseline, or (a label the train majority is not) no
    # better than its own answers shuffled
    assert "does not beat the baseline's" in log or "is no better than chance" in log
    assert "%s stays in use" % good["run_id"] in log
    # a second run that learned as much: under best it is not worse, under newest it is newer
    again = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    assert again["in_use"] == ["sentiment"] and _item_run(c) == again["run_id"]
    assert ("writeback.policy: %s" % policy) in c.get(
        "/admin/training/api/runs/%s/log" % again["run_id"], headers=h).text
    # the admin puts either one in use, instantly
    target = worse if policy == "best" else good  # the admin may choose knowingly
    status, body = c.json("POST", "/admin/training/api/runs/%s/use" % target["run_id"],
                          headers=h)
    assert status == 200 and body["switched"] == ["sentiment"] and body["in_use"] == ["sentiment"]
    assert _item_run(c) == target["run_id"]
    _, runs = c.json("GET", "/admin/training/api/runs", headers=h)
    assert [r["in_use"] for r in runs["runs"]].count(["sentiment"]) == 1
    page = c.get("/admin/training", headers=h).text
    assert page.count('class="badge in-use-badge"') == 1
    status, body = c.json("POST", "/admin/training/api/runs/r99/use", headers=h)
    assert status == 404


# -- Fast unit tests for the held-out report (potato/training/reports/report.py and report_ratings.py): (folded in from test_report.py) ----------
# each figure against a value worked out by hand, each branch and bound; written so that
# tools/mutation.py's mutants of the modules fail. The pages that show the report:
# tests/training/reports/test_report.py.


def test_constants():
    assert report.Z95 == 1.959964 and report.MIN_N == 30 and rr.MIN_N == 30


def test_slider_and_number_schemes_are_scored_as_numbers_and_others_as_classes():
    """Which report a scheme gets follows its kind: numbers (MAE ...) for slider and number,
    classes (accuracy, macro-F1) for the choice and Likert kinds, entities for spans."""
    items = [{"id": "t1", "split": "test", "labels": {"s": 2}},
             {"id": "t2", "split": "test", "labels": {"s": 1}},
             {"id": "r1", "split": "train", "labels": {"s": 2}}]
    preds = [pred("t1", "s", 2), pred("t2", "s", 2)]
    for kind in ("slider", "number"):
        r = report.holdout_report(preds, items, {"s": {"type": kind, "labels": []}})
        assert scores(r) == rr.number_report([(2, 2), (2, 1)], [2])
    for kind in ("radio", "select", "likert"):
        r = report.holdout_report(preds, items, {"s": {"type": kind, "labels": [1, 2]}})
        assert scores(r) == report.scheme_report([(2, 2), (2, 1)], [1, 2], kind, [2])
        assert "accuracy" in r and "mae" not in r or kind == "likert"


# -- report.py -------------------------------------------------------------------------------

def test_wilson():
    assert report.wilson(0, 0) == (0.0, 1.0)
    assert report.wilson(3, 0, 1.0) == (0.0, 1.0)
    assert report.wilson(1, 2, 0.0) == (0.5, 0.5)  # no width without z
    # z = 1, k = 1, n = 4: p = .25, denom = 1.25, centre = (.25 + .125) / 1.25 = .3,
    # half = sqrt(.25 * .75 / 4 + 1 / 64) / 1.25 = sqrt(.0625) / 1.25 = .2
    lo, hi = report.wilson(1, 4, 1.0)
    assert lo == pytest.approx(0.1) and hi == pytest.approx(0.5)
    lo, hi = report.wilson(1, 4)  # the default z is Z95
    assert (round(lo, 4), round(hi, 4)) == (0.0456, 0.6994)
    lo, hi = report.wilson(0, 10)
    assert lo == 0.0 and round(hi, 4) == 0.2775
    lo, hi = report.wilson(10, 10)
    assert round(hi, 4) == 1.0 and round(lo, 4) == 0.7225
    assert report.wilson(0, 1, 100.0)[0] == 0.0 and report.wilson(1, 1, 100.0)[1] == 1.0
    # rounding puts these just outside [0, 1] (1 + 2e-16, -3e-17): they are clamped
    assert report.wilson(20, 20)[1] == 1.0 and report.wilson(0, 7)[0] == 0.0


def per_label(pairs, labels, kind="radio"):
    r = report.scheme_report(pairs, labels, kind)
    return r["per_label"], r["macro_f1"]


ZERO = {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}


def test_multiselect_labels_are_sets_and_others_values():
    # a multiselect answer is right whatever the order of its labels; any other is compared
    # as a value
    m = report.scheme_report([(["b", "a"], ["a", "b"]), (["a"], ["a", "b"])], ["a", "b"],
                             "multiselect", [["b", "a"], ["a", "b"], ["a"]])
    assert m["accuracy"] == 0.5 and m["baseline"]["label"] == ["a", "b"]
    assert m["baseline"]["accuracy"] == 1.0
    assert report.scheme_report([("x", "x"), ("x", "y")], ["x", "y"], "radio")["accuracy"] == 0.5
    likert = report.scheme_report([(3, 3), (2, 3), (3, 3)], [1, 2, 3], "likert")
    assert likert["accuracy"] == 0.6667 and likert["baseline"]["label"] == 3


def test_precision_recall_f1_and_support_per_label():
    # multiselect: each label counted on its own, so each row below sets one label's counts
    # (tp, fp, fn): a (0, 0, 0), b (1, 2, 0), c (2, 0, 1), d (0, 1, 0), e (0, 0, 2), f (3, 1, 2)
    pairs = [(["b"], ["b"]), (["b"], []), (["b"], []),
             (["c"], ["c"]), (["c"], ["c"]), ([], ["c"]),
             (["d"], []),
             ([], ["e"]), ([], ["e"]),
             (["f"], ["f"]), (["f"], ["f"]), (["f"], ["f"]), (["f"], []), ([], ["f"]),
             ([], ["f"])]
    per, macro = per_label(pairs, ["a", "b", "c", "d", "e", "f"], "multiselect")
    assert per == {
        "a": ZERO,
        "b": {"precision": 0.3333, "recall": 1.0, "f1": 0.5, "support": 1},
        "c": {"precision": 1.0, "recall": 0.6667, "f1": 0.8, "support": 3},
        "d": ZERO,
        "e": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 2},
        "f": {"precision": 0.75, "recall": 0.6, "f1": 0.6667, "support": 5}}
    # a is neither predicted nor present: not averaged; d and e are
    assert macro == round((0.5 + 0.8 + 0.0 + 0.0 + 0.6667) / 5, 4) == 0.3933


def test_per_label_single():
    pairs = [("a", "a"), ("a", "b"), ("b", "b"), ("c", "b")]
    per, macro = per_label(pairs, ["a", "b", "c", "d"])
    assert per["a"] == {"precision": 0.5, "recall": 1.0, "f1": 0.6667, "support": 1}
    assert per["b"] == {"precision": 1.0, "recall": 0.3333, "f1": 0.5, "support": 3}
    assert per["c"] == ZERO and per["d"] == ZERO
    # d is neither predicted nor present: not averaged; c is predicted once: it is
    assert macro == round((0.6667 + 0.5 + 0.0) / 3, 4) == 0.3889
    assert per_label([], ["a"]) == ({"a": ZERO}, 0.0)
    assert per_label([("a", "a")], []) == ({}, 0.0)


def test_per_label_multiselect():
    pairs = [(["a"], ["a", "b"]), (["a", "b"], ["b"]), ([], ["a"])]
    per, macro = per_label(pairs, ["a", "b"], "multiselect")
    # a: tp 1, fp 1 (second), fn 1 (third); b: tp 1, fp 0, fn 1 (first)
    assert per["a"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2}
    assert per["b"] == {"precision": 1.0, "recall": 0.5, "f1": 0.6667, "support": 2}
    assert macro == round((0.5 + 0.6667) / 2, 4) == 0.5834


def test_scheme_report_radio():
    pairs = [("a", "a"), ("a", "b"), ("b", "b"), ("x", "b"), ("a", "zz")]
    r = report.scheme_report(pairs, ["a", "b"], "radio", ["b", "b", "a"])
    assert r["n"] == 5 and r["accuracy"] == 0.4
    lo, hi = report.wilson(2, 5)
    assert r["accuracy_ci95"] == [round(lo, 4), round(hi, 4)]
    assert r["confusion"] == {"labels": ["a", "b"], "rows": "gold", "columns": "predicted",
                              "matrix": [[1, 0], [1, 1]]}
    # a: tp 1, fp 2, fn 0; b: tp 1, fp 0, fn 2
    assert r["per_label"] == {"a": {"precision": 0.3333, "recall": 1.0, "f1": 0.5, "support": 1},
                              "b": {"precision": 1.0, "recall": 0.3333, "f1": 0.5, "support": 3}}
    assert r["macro_f1"] == 0.5
    # always "b" (the train majority): right on 3 of 5
    assert r["baseline"]["label"] == "b" and r["baseline"]["accuracy"] == 0.6
    assert r["above_baseline"] == -0.2
    assert r["note"].startswith("Only 5 test items")
    assert "mae" not in r and "qwk" not in r


def test_scheme_report_confusion_list_is_a_copy():
    labels = ["a", "b"]
    r = report.scheme_report([("a", "a")], labels, "radio")
    assert r["confusion"]["labels"] == labels and r["confusion"]["labels"] is not labels


def test_scheme_report_likert_and_multiselect():
    pairs = [(1, 1), (2, 3), (3, 3)]
    r = report.scheme_report(pairs, [1, 2, 3], "likert")
    assert r["mae"] == round(1 / 3, 4) and r["qwk"] == round(rr.qwk(pairs, [1, 2, 3]), 4)
    assert r["confusion"]["matrix"] == [[1, 0, 0], [0, 0, 0], [0, 1, 1]]
    m = report.scheme_report([(["b", "a"], ["a", "b"]), (["a"], ["b"])], ["a", "b"],
                             "multiselect")
    assert m["accuracy"] == 0.5 and "confusion" not in m and "mae" not in m
    # a: tp 1, fn 0, fp 1; b: tp 1, fn 1, fp 0 (labels as sets, not as values)
    assert m["per_label"]["a"] == {"precision": 0.5, "recall": 1.0, "f1": 0.6667, "support": 1}
    assert m["per_label"]["b"] == {"precision": 1.0, "recall": 0.5, "f1": 0.6667, "support": 2}
    assert m["macro_f1"] == 0.6667
    assert m["baseline"]["label"] == ["a", "b"] or m["baseline"]["label"] == ["b"]


def test_scheme_report_empty():
    r = report.scheme_report([], ["a"], "radio")
    assert r["n"] == 0 and r["accuracy"] == 0.0 and r["accuracy_ci95"] == [0.0, 1.0]
    assert r["baseline"] == {"label": None, "accuracy": 0.0, "macro_f1": 0.0}
    assert r["above_baseline"] == 0.0


def baseline(pairs, train, labels, kind="radio"):
    return report.scheme_report(pairs, labels, kind, train)["baseline"]


def test_baseline():
    pairs = [("p", "a"), ("p", "b"), ("p", "b")]
    # no train labels: the test split's commonest
    assert baseline(pairs, [], ["a", "b"]) == {"label": "b", "accuracy": 0.6667, "macro_f1": 0.4}
    assert baseline(pairs, ["a", "a", "b"], ["a", "b"]) == {
        "label": "a", "accuracy": 0.3333, "macro_f1": 0.25}
    assert baseline([], ["a"], ["a"]) == {"label": "a", "accuracy": 0.0, "macro_f1": 0.0}
    multi = baseline([(["x"], ["b", "a"]), (["x"], ["a"])], [["a", "b"], ["b", "a"], ["a"]],
                     ["a", "b"], "multiselect")
    # always {a, b}: a tp 2; b tp 1, fp 1: F1 1.0 and 0.6667
    assert multi["label"] == ["a", "b"] and multi["accuracy"] == 0.5
    assert multi["macro_f1"] == round((1.0 + 0.6667) / 2, 4)


def test_learned_nothing():
    r = {"n": 10, "macro_f1": 0.4, "baseline": {"macro_f1": 0.4, "label": "pos"}}
    why = report.learned_nothing("s", r)
    assert why.startswith("s: the held-out macro-F1 (0.400) is not above the majority-class "
                          "baseline's (0.400, always answering pos)")
    assert report.learned_nothing("", r).startswith("the held-out macro-F1")
    assert report.learned_nothing("s", dict(r, macro_f1=0.41)) is None
    assert report.learned_nothing("s", dict(r, macro_f1=0.3)).startswith("s: the held-out")
    assert report.learned_nothing("s", dict(r, n=0)) is None
    assert report.learned_nothing("s", {k: v for k, v in r.items() if k != "n"}) is None
    assert report.learned_nothing("s", dict(r, macro_f1=None)) is None
    assert report.learned_nothing("s", dict(r, baseline={"macro_f1": "x"})) is None
    assert report.learned_nothing("s", dict(r, baseline=[1])) is None
    assert report.learned_nothing("s", dict(r, macro_f1=1)) is None
    one = dict(r, macro_f1=1.0, baseline={"macro_f1": 1.0, "label": "neg"})
    assert report.learned_nothing("s", one).startswith(
        "s: the test split cannot tell the model from the majority-class baseline: its 10 "
        "items all have the gold label neg, which always answering neg gets right.")
    assert report.learned_nothing("", one).startswith("the test split cannot")
    assert "the test split cannot" in report.learned_nothing(
        "s", dict(one, macro_f1=0.9, baseline={"macro_f1": 1.2, "label": "neg"}))
    assert "held-out macro-F1 (0.900)" in report.learned_nothing(
        "s", dict(one, macro_f1=0.9, baseline={"macro_f1": 0.99, "label": "neg"}))
    number = {"n": 5, "mae": 2.0, "baseline": {"mae": 1.0, "value": 3}}
    assert report.learned_nothing("x", number) == rr.learned_nothing("x", number)
    assert report.learned_nothing("x", number).startswith("x: the held-out mean absolute")
    assert report.learned_nothing("x", dict(number, accuracy=0.5)) is None


def note(n, correct, base_hits):
    """The note of a radio report on n items, ``correct`` of them right, where always
    answering the train majority (a) is right on ``base_hits``."""
    gold = ["a"] * base_hits + ["b"] * (n - base_hits)
    pred = [g if i < correct else ("b" if g == "a" else "a") for i, g in enumerate(gold)]
    return report.scheme_report(list(zip(pred, gold)), ["a", "b"], "radio", ["a"])["note"]


def test_note():
    # 20 of 29: Wilson 95 % (0.5077, 0.8272)
    assert note(29, 20, 0) == (
        "Only 29 test items: too few to say much (the 95% interval of the accuracy is 0.51 to "
        "0.83). Label more items, or raise splits.test.")
    # 29 of 30: Wilson 95 % (0.8333, 0.9941); always a: 24 of 30 (0.8), below the interval
    assert note(30, 29, 24) is None
    # ... 25 of 30 (0.8333): the interval's lower end itself
    assert note(30, 29, 25) == (
        "The 95% interval of the accuracy (0.83 to 0.99) includes the majority-class baseline "
        "(0.83): this test split cannot tell the model from always answering a.")
    assert note(31, 29, 28).startswith("The 95% interval")


def item(iid, split, **labels):
    return {"id": iid, "split": split, "labels": labels}


def pred(iid, scheme, label, split="test"):
    return {"id": iid, "split": split, "scheme": scheme, "label": label, "confidence": 1.0}


def scores(r):
    """A scheme's report without the verdict against the baseline (test_versus.py) and the name
    a single scheme's report carries: the figures scheme_report and its kin compute."""
    return {k: v for k, v in r.items() if k not in ("versus_baseline", "scheme")}


def test_holdout_report_one_scheme():
    schemas = {"s": {"type": "radio", "labels": ["a", "b"]}}
    items = [item("t1", "test", s="a"), item("t2", "test", s="b"), item("t3", "test"),
             item("v1", "val", s="a"), item("r1", "train", s="b"), item("r2", "train", s="b"),
             item("r3", "train", s="a"), item("r4", "train")]
    preds = [pred("t1", "s", "a"), pred("t2", "s", "a"), pred("t3", "s", "a"),
             pred("v1", "s", "b", "val"), pred("r1", "s", "a", "train"), pred("t1", "o", "a"),
             pred("zz", "s", "a")]
    r = report.holdout_report(preds, items, schemas)
    assert scores(r) == report.scheme_report([("a", "a"), ("a", "b")], ["a", "b"], "radio",
                                             ["b", "b", "a"])
    assert r["scheme"] == "s" and r["versus_baseline"]["beats"] is False  # 2 items show nothing
    assert r["baseline"]["label"] == "b"
    # a test prediction tagged with another split is not scored
    assert report.holdout_report([pred("t1", "s", "a", "val")], items, schemas) is None
    # an item whose split is not test is not gold, whatever the prediction says
    assert report.holdout_report([pred("v1", "s", "a")], items, schemas) is None
    assert report.holdout_report([], items, schemas) is None


def test_holdout_report_several_schemes():
    schemas = {"s": {"type": "radio", "labels": ["a", "b"]},
               "m": {"type": "multiselect", "labels": ["a", "b"]},
               "n": {"type": "number", "labels": []},
               "sl": {"type": "slider", "labels": []},
               "sp": {"type": "span", "labels": ["E"]},
               "none": {"type": "radio", "labels": ["a"]}}
    span = [{"start": 0, "end": 2, "label": "E"}]
    items = [item("t1", "test", s="a", m=["a"], n=1.0, sl=3, sp=span),
             item("t2", "test", s="b", n=2.0),
             item("r1", "train", n=10.0, sl=7)]
    preds = [pred("t1", "s", "a"), pred("t2", "s", "a"), pred("t1", "m", ["a"]),
             pred("t1", "n", 4.0), pred("t2", "n", 2.0), pred("t1", "sl", 3),
             pred("t1", "sp", span)]
    r = report.holdout_report(preds, items, schemas)
    per = r["per_scheme"]
    assert sorted(per) == ["m", "n", "s", "sl", "sp"]
    assert scores(per["n"]) == rr.number_report([(4.0, 1.0), (2.0, 2.0)], [10.0])
    assert scores(per["sl"]) == rr.number_report([(3, 3)], [7])
    assert scores(per["sp"]) == report.span_report.scheme_report([(span, span)], ["E"])
    assert scores(per["m"]) == report.scheme_report([(["a"], ["a"])], ["a", "b"], "multiselect")
    assert [per[k]["versus_baseline"]["figure"] for k in ("n", "sl", "sp", "m", "s")] == [
        "MAE", "MAE", "entity micro-F1", "macro-F1", "macro-F1"]
    assert r["n"] == 2 + 1 + 2 + 1 + per["sp"]["n"]
    # accuracy over the schemes that have one (s: 0.5, m: 1.0; sp has none)
    assert "accuracy" not in per["sp"] and "accuracy" not in per["n"]
    assert r["accuracy"] == 0.75
    f1s = [per[k]["macro_f1"] for k in per if "macro_f1" in per[k]]
    assert r["macro_f1"] == round(sum(f1s) / len(f1s), 4)
    assert set(r) == {"n", "accuracy", "macro_f1", "per_scheme"}


def test_holdout_report_averages_are_rounded_and_skip_missing():
    schemas = {"a": {"type": "radio", "labels": ["x", "y"]},
               "b": {"type": "radio", "labels": ["x", "y"]},
               "c": {"type": "radio", "labels": ["x", "y"]}}
    items = [item("t1", "test", a="x", b="x", c="x"), item("t2", "test", a="x", b="y", c="x"),
             item("t3", "test", a="x", b="x", c="y")]
    preds = [pred("t1", "a", "x"), pred("t2", "a", "y"), pred("t3", "a", "y"),
             pred("t1", "b", "x"), pred("t2", "b", "x"), pred("t3", "b", "x"),
             pred("t1", "c", "x"), pred("t2", "c", "x"), pred("t3", "c", "x")]
    r = report.holdout_report(preds, items, schemas)
    assert r["n"] == 9 and r["accuracy"] == round((1 / 3 + 2 / 3 + 2 / 3) / 3, 4) == 0.5556
    numbers = {"n1": {"type": "number", "labels": []}, "n2": {"type": "slider", "labels": []}}
    items = [item("t1", "test", n1=1, n2=2)]
    r = report.holdout_report([pred("t1", "n1", 1), pred("t1", "n2", 2)], items, numbers)
    assert set(r) == {"n", "per_scheme"} and r["n"] == 2


def test_holdout_report_single_is_a_copy():
    schemas = {"s": {"type": "radio", "labels": ["a"]}}
    r = report.holdout_report([pred("t1", "s", "a")], [item("t1", "test", s="a")], schemas)
    assert r["n"] == 1 and "per_scheme" not in r


# -- report_ratings.py -----------------------------------------------------------------------

def test_mae_rmse():
    assert rr.mae([]) == 0.0 and rr.rmse([]) == 0.0
    assert rr.mae([(1, 3), (5, 4)]) == 1.5
    assert rr.rmse([(1, 3), (5, 4)]) == math.sqrt(2.5)
    assert rr.mae([(3, 1)]) == 2.0 and rr.rmse([(3, 1)]) == 2.0


def test_qwk():
    assert rr.qwk([], [1, 2]) is None and rr.qwk([(1, 1)], [1]) is None
    assert rr.qwk([(1, 1), (2, 2)], [1, 2]) == 1.0
    assert rr.qwk([(2, 2), (2, 2)], [1, 2, 3]) is None
    assert rr.qwk([(1, 2), (2, 1)], [1, 2]) == -1.0
    # predicted 1,2,3 for gold 1,3,3 on 1..3: observed (gold, pred) (0,0) (2,1) (2,2);
    # gold hist [1, 0, 2], pred hist [1, 1, 1]; num = 1; den = (1 + 4 + 8 + 2) / 3 = 5
    assert rr.qwk([(1, 1), (2, 3), (3, 3)], [1, 2, 3]) == pytest.approx(0.8)
    # pred 3, 1, 3 for gold 3, 2, 1: num = 1 + 4 = 5; gold hist [1, 1, 1], pred hist
    # [1, 0, 2]; den = (8 + 1 + 2 + 4) / 3 = 5: no better than chance
    assert rr.qwk([(3, 3), (1, 2), (3, 1)], [1, 2, 3]) == pytest.approx(0.0)
    # two points, pred 2, 2, 1 for gold 1, 2, 2: num = 2; gold [1, 2], pred [1, 2]; den = 4 / 3
    assert rr.qwk([(2, 1), (2, 2), (1, 2)], [1, 2]) == pytest.approx(1 - 2 / (4 / 3))
    # repeated pairs count each time: observed [[1, 3], [1, 1]], gold [4, 2], pred [2, 4];
    # num = 4, den = (16 + 4) / 6
    pairs = [(2, 1), (2, 1), (2, 1), (1, 1), (2, 2), (1, 2)]
    assert rr.qwk(pairs, [1, 2]) == pytest.approx(-0.2)


def pearson(x, y):
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    return sxy / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))


def test_spearman_ranks_ties_by_their_average():
    # Pearson's r of the ranks (ties share their average rank, as scipy.stats.rankdata)
    assert rr.spearman([(5, 1), (5, 2), (1, 3), (5, 4)]) == pytest.approx(
        pearson([3.0, 3.0, 1.0, 3.0], [1, 2, 3, 4]))
    assert rr.spearman([(2, 10), (1, 30), (2, 20), (1, 50), (3, 40)]) == pytest.approx(
        pearson([3.5, 1.5, 3.5, 1.5, 5.0], [1, 3, 2, 5, 4]))
    assert rr.spearman([(10, 1), (30, 2), (20, 3)]) == pytest.approx(
        pearson([1, 3, 2], [1, 2, 3]))
    # the gold side is ranked the same way
    assert rr.spearman([(1, 2), (2, 1), (3, 2), (4, 1), (5, 3)]) == pytest.approx(
        pearson([1, 2, 3, 4, 5], [3.5, 1.5, 3.5, 1.5, 5.0]))


def test_spearman():
    assert rr.spearman([]) is None and rr.spearman([(1, 2)]) is None
    assert rr.spearman([(1, 2), (2, 3)]) == 1.0
    assert rr.spearman([(1, 3), (2, 2), (3, 1)]) == -1.0
    assert rr.spearman([(1, 1), (1, 2)]) is None and rr.spearman([(1, 1), (2, 1)]) is None
    # ranks x [1, 2, 3], y [1, 3, 2]: rho = 1 - 6 * 2 / (3 * 8) = 0.5
    assert rr.spearman([(1, 10), (2, 30), (3, 20)]) == pytest.approx(0.5)
    assert rr.spearman([(1, 1), (2, 1), (3, 2)]) == pytest.approx(math.sqrt(3) / 2)


def test_r_ordinal_median():
    out = rr.ordinal([(1, 1), (2, 3), (3, 3), (9, 1), (1, 9)], [1, 2, 3])
    assert out == {"mae": 0.3333, "qwk": 0.8}
    assert rr.ordinal([], [1, 2]) == {"mae": 0.0, "qwk": None}
    assert rr.median([3, 1, 2]) == 2 and rr.median([4, 1, 3, 2]) == 2.5
    assert rr.median([5]) == 5 and rr.median([1, 9]) == 5.0


def test_number_report():
    pairs = [(1.0, 2.0), (4.0, 4.0), (2.0, 9.0)]
    r = rr.number_report(pairs, [1, 5, 3, 7])
    assert r["n"] == 3 and r["mae"] == round(8 / 3, 4)
    assert r["rmse"] == round(math.sqrt(50 / 3), 4)
    assert r["spearman"] == round(rr.spearman(pairs), 4) == 0.5
    # the train median is 4: errors 2, 0, 5
    assert r["baseline"] == {"value": 4.0, "mae": round(7 / 3, 4),
                             "rmse": round(math.sqrt(29 / 3), 4)}
    assert r["mae_below_baseline"] == round(round(7 / 3, 4) - round(8 / 3, 4), 4) == -0.3334
    assert r["note"].startswith("Only 3 test items")
    own = rr.number_report([(1.0, 2.0), (5.0, 4.0), (3.0, 9.0)])  # no train values: the gold's
    assert own["baseline"]["value"] == 4.0
    empty = rr.number_report([])
    assert empty["n"] == 0 and empty["baseline"] == {"value": 0, "mae": 0.0, "rmse": 0.0}
    assert empty["spearman"] is None and empty["mae_below_baseline"] == 0.0


def test_number_note():
    assert rr.number_note({"n": 29, "spearman": 0.5}) == (
        "Only 29 test items: too few to say much about the error. Label more items, or raise "
        "splits.test.")
    assert rr.number_note({"n": 30, "spearman": 0.5}) is None
    assert rr.number_note({"n": 30, "spearman": None}).startswith(
        "Spearman's correlation is undefined")
    assert rr.number_note({"n": 30, "spearman": 0}) is None


def test_ratings_learned_nothing():
    r = {"n": 4, "mae": 1.0, "baseline": {"mae": 1.0, "value": 2.5}}
    assert rr.learned_nothing("s", r) == (
        "s: the held-out mean absolute error (1.000) is not below the median baseline's "
        "(1.000, always answering 2.5): the model learned nothing the train values do not "
        "tell. Check the training loss, label more items, or change the params")
    assert rr.learned_nothing("", r).startswith("the held-out mean absolute error (1.000)")
    assert rr.learned_nothing("s", dict(r, mae=0.99)) is None
    assert rr.learned_nothing("s", dict(r, mae=2)).startswith("s: the held-out mean")
    assert rr.learned_nothing("s", dict(r, n=0)) is None
    assert rr.learned_nothing("s", {"mae": 1.0, "baseline": r["baseline"]}) is None
    assert rr.learned_nothing("s", dict(r, mae=None)) is None
    assert rr.learned_nothing("s", dict(r, baseline={"mae": None})) is None
    assert rr.learned_nothing("s", dict(r, baseline=[1])) is None


def test_fmt_and_summary_line():
    assert rr.summary_line("s", {"qwk": "x", "mae": 0.12345}) == (
        "  s: mean absolute error 0.123 points, quadratic-weighted kappa undefined")
    assert rr.summary_line("s", {"qwk": 0.5, "mae": 1, "accuracy": 1}) == (
        "  s: mean absolute error 1.000 points, quadratic-weighted kappa 0.500")
    assert rr.summary_line("", {"qwk": None}) == (
        "  mean absolute error undefined points, quadratic-weighted kappa undefined")
    assert rr.summary_line("s", {"accuracy": 1, "mae": 1}) is None
    assert rr.summary_line("s", {"n": 3}) is None
    r = {"n": 3, "mae": 1.5, "rmse": 2, "spearman": None, "baseline": {"value": 4, "mae": 2}}
    assert rr.summary_line("s", r) == (
        "  s: n=3: mean absolute error 1.500, RMSE 2.000, Spearman undefined; always answering "
        "the median (4) 2.000")
    assert rr.summary_line("s", dict(r, spearman=0.25)).endswith("Spearman 0.250; always "
                                                                "answering the median (4) 2.000")
    assert rr.summary_line("", dict(r, baseline=5)) == (
        "  n=3: mean absolute error 1.500, RMSE 2.000, Spearman undefined; always answering "
        "the median (None) undefined")


def test_a_scheme_without_pairs_is_skipped_not_the_end():
    schemas = {"first": {"type": "radio", "labels": ["a"]},
               "s": {"type": "radio", "labels": ["a", "b"]}}
    r = report.holdout_report([pred("t1", "s", "a")], [item("t1", "test", s="a")], schemas)
    assert r is not None and r["n"] == 1 and r["accuracy"] == 1.0


def test_scheme_report_counts_and_rounding():
    pairs = [("a", "b"), ("a", "b"), ("b", "b")]
    r = report.scheme_report(pairs, ["a", "b"], "radio", ["a"])
    assert r["accuracy"] == 0.3333 and r["confusion"]["matrix"] == [[0, 0], [2, 1]]
    assert r["baseline"] == {"label": "a", "accuracy": 0.0, "macro_f1": 0.0}
    assert r["above_baseline"] == 0.3333
    m = report.scheme_report([(["a"], ["a", "b"]), (["b"], ["a", "b"])], ["a", "b"],
                             "multiselect", [["b", "a"]])
    # always answering {a, b}: both items right; per label a and b: tp 2, so macro-F1 1
    assert m["baseline"] == {"label": ["a", "b"], "accuracy": 1.0, "macro_f1": 1.0}
