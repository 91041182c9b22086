"""The held-out report against values computed by hand (issue 14, item 1)."""

import pytest

from potato.training.report import holdout_report, wilson

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
    from potato.training.summary import summary_lines

    text = "\n".join(summary_lines(run))
    assert "95% interval" in text and "majority-class baseline (" in text


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
    # a worse run: it always answers "positive"
    worse = wait_run(c, start_run(c, trainer="test-steps", schemas=["sentiment"],
                                  params={"seconds": 0.1}))
    assert worse["status"] == "success"
    assert worse["holdout"]["macro_f1"] < good["holdout"]["macro_f1"] - 0.01
    if policy == "best":
        assert worse["in_use"] == [] and _item_run(c) == good["run_id"]
        assert "stays in use (writeback.policy: best)" in c.get(
            "/admin/training/api/runs/%s/log" % worse["run_id"], headers=h).text
    else:
        assert worse["in_use"] == ["sentiment"] and _item_run(c) == worse["run_id"]
    # the admin puts either one in use, instantly
    target = worse if policy == "best" else good
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
