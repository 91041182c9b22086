"""Fast unit tests for the write-back policy (potato/training/exchange/ingest.py): which run takes over,
which predictions are kept and counted; written so that tools/mutation.py's mutants of the
module fail. Auto-retraining's decision: tests/test_mut_autoretrain.py."""

import json
from dataclasses import replace
from types import SimpleNamespace as NS

import pytest

from potato.config.active_learning import ActiveLearning
from potato.config.settings import AutoRetrain, Writeback
from potato.schemes import make_scheme
from potato.project.store import Store
from potato.training.exchange import ingest
from potato.training.core.runs import RunStore
from potato.training.reports.writeback import WriteBack
from tests.helpers import BEATS, beats_baseline


def test_writeback_defaults():
    wb = Writeback()
    assert (wb.schemas, wb.min_confidence, wb.include_unlabeled, wb.policy, wb.tolerance) == \
        ([], 0.0, False, "best", 0.01)
    ar = AutoRetrain()
    assert (ar.enabled, ar.update_frequency, ar.min_interval_s, ar.backend) == \
        (False, 100, 600, None)


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "p.db"))
    yield s
    s.close()


def cfg(schemas=("s",), min_confidence=0.0, unlabeled=False, policy="best", tolerance=0.01,
        numbers=()):
    wb = Writeback(list(schemas), min_confidence, unlabeled, policy, tolerance)
    kinds = {n: make_scheme(n, "number", []) for n in numbers}  # real number schemes
    return NS(model_training=NS(writeback=wb), scheme=lambda name: kinds.get(name),
              active_learning=ActiveLearning())


def new_run(store, holdout=None, schemas=("s",)):
    runs = RunStore(store)
    run = runs.create("t", list(schemas), "local", {})
    if holdout is not None:
        runs.update(run.run_id, holdout=holdout)
    return run.run_id


def p(item, label, conf=0.9, split="test", scheme="s"):
    return {"id": item, "split": split, "scheme": scheme, "label": label, "confidence": conf}


# Only a run whose model beats its baseline and chance takes over automatically; these tests
# are about what the write-back policy decides once it has (won: tests/helpers.beats_baseline).
won = beats_baseline


def test_takes_over_first_and_same_run(store):
    assert ingest.takes_over(store, cfg(), "r9", "s", won(None)) == (True, "")
    ingest.use(store, "s", "r9")
    assert ingest.in_use(store, "s") == "r9"
    assert ingest.takes_over(store, cfg(), "r9", "s", won(None)) == (True, "")


def test_pinned_run_is_never_replaced(store):
    old = new_run(store, {"macro_f1": 0.1})
    ingest.use(store, "s", old)
    with store.tx() as db:  # a finished run (how it finished is not what is tested here)
        db.execute("UPDATE runs SET status='success' WHERE run_id=?", (old,))
    assert RunStore(store).set_pinned(old, True)
    for policy in ("best", "newest"):
        took, why = ingest.takes_over(store, cfg(policy=policy), "rX", "s", won({"macro_f1": 0.9}))
        assert took is False
        assert why == ("run %s is pinned: it stays in use for s until the admin changes it "
                       "(Use this model on another run, or Unpin on %s's page)" % (old, old))


def test_newest_policy(store):
    old = new_run(store, {"macro_f1": 0.9})
    ingest.use(store, "s", old)
    assert ingest.takes_over(store, cfg(policy="newest"), "rX", "s", won({"macro_f1": 0.1})) == (
        True, "run rX replaces %s in use (writeback.policy: newest)" % old)


@pytest.mark.parametrize("old, new, take, words", [
    (0.8, 0.8, True, "held-out macro-F1 0.800 is not below R's 0.800: it replaces R in use"),
    (0.8, 0.85, True, "is not below"),
    (0.8, 0.795, True, "macro-F1 0.795 is below R's 0.800 but within writeback.tolerance "
                       "(0.01): it replaces R in use (writeback.policy: best; pin a run"),
    (0.8, 0.79, True, "but within writeback.tolerance"),
    (0.8, 0.7899, False, "macro-F1 0.790 is below R's 0.800 by more than writeback.tolerance "
                         "(0.01): R stays in use (writeback.policy: best)"),
])
def test_best_policy_and_tolerance(store, old, new, take, words):
    r = new_run(store, {"macro_f1": old})
    ingest.use(store, "s", r)
    took, why = ingest.takes_over(store, cfg(), "rX", "s", won({"macro_f1": new}))
    assert took is take and words.replace("R", r) in why, why


def test_tolerance_is_read_from_the_config(store):
    r = new_run(store, {"macro_f1": 0.8})
    ingest.use(store, "s", r)
    assert ingest.takes_over(store, cfg(tolerance=0.2), "rX", "s", won({"macro_f1": 0.65}))[0]
    assert not ingest.takes_over(store, cfg(tolerance=0.0), "rX", "s", won({"macro_f1": 0.7999}))[0]
    assert ingest.takes_over(store, cfg(tolerance=0.0), "rX", "s", won({"macro_f1": 0.8}))[0]


def test_lower_is_better_for_mae(store):
    r = new_run(store, {"mae": 2.0})
    ingest.use(store, "s", r)
    took, why = ingest.takes_over(store, cfg(tolerance=0.1), "rX", "s", won({"mae": 2.05}))
    assert took and "MAE 2.050 is above %s's 2.000 but within" % r in why
    took, why = ingest.takes_over(store, cfg(tolerance=0.1), "rX", "s", won({"mae": 2.2}))
    assert not took and "MAE 2.200 is above %s's 2.000 by more than" % r in why
    took, why = ingest.takes_over(store, cfg(tolerance=0.1), "rX", "s", won({"mae": 1.0}))
    assert took and "MAE 1.000 is not above" in why


def test_missing_scores(store):
    r = new_run(store)
    ingest.use(store, "s", r)
    assert ingest.takes_over(store, cfg(), "rX", "s", won(None)) == (
        True, "run rX replaces %s in use (neither has a held-out score)" % r)
    assert ingest.takes_over(store, cfg(), "rX", "s", won({"macro_f1": 0.5})) == (
        True, "run rX replaces %s in use (%s has no held-out score)" % (r, r))
    r2 = new_run(store, {"qwk": 0.4})
    ingest.use(store, "s", r2)
    assert ingest.takes_over(store, cfg(), "rX", "s", won({"n": 3})) == (
        False, "run rX has no held-out score; %s (quadratic-weighted kappa 0.400) stays in use"
        % r2)


def compared(store, old, new, scheme="s"):
    """What takes_over says of a run with held-out report ``new`` against one with ``old``."""
    r = new_run(store, old, schemas=(scheme,))
    ingest.use(store, scheme, r)
    took, why = ingest.takes_over(store, cfg(tolerance=0.0), "rX", scheme, won(new))
    return took, why.replace(r, "R")


def test_the_score_compared_is_the_schemes_own(store):
    per = {"per_scheme": {"s": {"macro_f1": 0.5, "qwk": 0.7}, "t": {"mae": 1}}}
    # a Likert scheme is compared by its kappa, before its macro-F1
    assert compared(store, per, {"per_scheme": {"s": {"macro_f1": 0.9, "qwk": 0.6}}}) == (
        False, "run rX's held-out quadratic-weighted kappa 0.600 is below R's 0.700 by more "
               "than writeback.tolerance (0): R stays in use (writeback.policy: best)")
    # a number scheme by its MAE (lower is better), an int read as a number
    assert compared(store, per, {"per_scheme": {"t": {"mae": 2}}}, "t") == (
        False, "run rX's held-out MAE 2.000 is above R's 1.000 by more than "
               "writeback.tolerance (0): R stays in use (writeback.policy: best)")
    # spans by the entity micro-F1, before anything else
    took, why = compared(store, {"micro_f1": 0.1, "qwk": 0.9}, {"micro_f1": 0.2, "qwk": 0.1})
    assert took and why.startswith("run rX's held-out entity micro-F1 0.200 is not below R's "
                                   "0.100")
    # a single-scheme report is its scheme's
    assert compared(store, {"qwk": 0.5}, per)[1].startswith(
        "run rX's held-out quadratic-weighted kappa 0.700 is not below R's 0.500")
    assert compared(store, {"macro_f1": 0.25}, {"macro_f1": 0.5})[1].startswith(
        "run rX's held-out macro-F1 0.500 is not below R's 0.250")


NO_SCORE = "run rX has no held-out score; R (macro-F1 0.400) stays in use"


@pytest.mark.parametrize("holdout, new_run_says", [
    (None, NO_SCORE), ([], NO_SCORE), ({"macro_f1": "0.3"}, NO_SCORE),
    # no report of s at all, so no verdict against the baseline either
    ({"per_scheme": {"s": 3}}, None), ({"per_scheme": {"u": {"qwk": 1}}}, None),
    ({"per_scheme": [1]}, NO_SCORE), ({"n": 3}, NO_SCORE)])
def test_a_report_without_the_schemes_score(store, holdout, new_run_says):
    assert compared(store, holdout, won({"macro_f1": 0.5})) == (
        True, "run rX replaces R in use (R has no held-out score)")
    assert compared(store, {"per_scheme": {"s": {"macro_f1": 0.4}}}, holdout) == (
        False, new_run_says or NOT_SCORED % "; R stays in use")


NOT_SCORED = ("run rX has no held-out score for s (no labelled test item was scored), so nothing "
              "shows that it beats the baseline: it is trained, not in use, and annotators see "
              "no suggestions from it%s. Label more items, or put it in use knowingly with Use "
              "this model on its page")


@pytest.mark.parametrize("holdout", [
    None, [], {"macro_f1": 0.9}, {"per_scheme": {"s": {"macro_f1": 0.9}}},
    {"per_scheme": {"t": {"macro_f1": 0.9, "versus_baseline": BEATS}}},
    {"scheme": "t", "macro_f1": 0.9, "versus_baseline": BEATS},
    {"macro_f1": 0.9, "versus_baseline": "beats"}])
def test_a_run_with_no_verdict_against_the_baseline_never_takes_over(store, holdout):
    # The first run of a scheme too: nothing in use is better than a model nobody measured.
    assert ingest.takes_over(store, cfg(), "rX", "s", holdout) == (False, NOT_SCORED % "")
    r = new_run(store, {"macro_f1": 0.1})
    ingest.use(store, "s", r)
    for policy in ("best", "newest"):
        assert ingest.takes_over(store, cfg(policy=policy), "rX", "s", holdout) == (
            False, NOT_SCORED % ("; %s stays in use" % r))


def test_a_model_that_does_not_beat_its_baseline_is_kept_not_in_use(store):
    lost = dict(BEATS, model=0.0, baseline=0.333, baseline_is="always answering six, the most "
                "common label in the train split", n=120, chance_bound=0.05, beats=False)
    took, why = ingest.takes_over(store, cfg(), "rX", "s", {"macro_f1": 0.0,
                                                            "versus_baseline": lost})
    assert took is False and why == (
        "run rX's held-out macro-F1 (0.000) does not beat the baseline's (0.333, always "
        "answering six, the most common label in the train split): it is trained, not in use, "
        "and annotators see no suggestions from it. Label more items, or put it in use "
        "knowingly with Use this model on its page")
    # above the baseline, but no better than its own answers shuffled across the items
    lucky = dict(lost, model=0.4, chance_bound=0.45)
    took, why = ingest.takes_over(store, cfg(policy="newest"), "rX", "s",
                                  {"per_scheme": {"s": {"versus_baseline": lucky}}})
    assert took is False and why.startswith(
        "run rX's held-out macro-F1 (0.400) is no better than chance (1 in 40 shuffles of its "
        "answers across its 120 test items scores 0.450 or more)")
    # A one-scheme report named for this scheme is this scheme's.
    assert ingest.takes_over(store, cfg(), "rX", "s", {"scheme": "s", "macro_f1": 0.9,
                                                       "versus_baseline": BEATS}) == (True, "")
    # A stored verdict that does not read as one (a forged or broken record) is no verdict.
    for broken in ({"beats": True}, dict(BEATS, model="0.9"), dict(BEATS, n=float("nan")),
                   dict(BEATS, chance_bound=[1])):
        took, why = ingest.takes_over(store, cfg(), "rX", "s", {"versus_baseline": broken})
        assert (took, why.startswith("run rX has no held-out score for s")) in (
            (False, True), (True, False)), broken
        if took:  # a readable record with beats true: only the NaN n, read as 0 items
            assert broken.get("n") != broken.get("n")


def test_in_use_falls_back_to_the_predictions_table(store):
    assert ingest.in_use(store, "s") is None
    with store.tx() as db:
        db.execute("INSERT INTO predictions(item_id, scheme, label, confidence, run_id) "
                   "VALUES ('i', 's', '\"a\"', 1, 'old')")
    assert ingest.in_use(store, "s") == "old"
    assert ingest.in_use(store, "t") is None


def shown(store, scheme="s"):
    return sorted((r[0], json.loads(r[1]), r[2]) for r in store.conn().execute(
        "SELECT item_id, label, run_id FROM predictions WHERE scheme=?", (scheme,)))


def test_write_back_keeps_and_counts(store):
    rows = [p("a", "pos", 0.5), p("b", "neg", 0.49), p("c", "pos", 1.0, split="train"),
            p("d", "pos", 0.9, split="unlabeled"), p("e", "neg", 0.7, scheme="other"),
            p("f", ["x", "y"], 0.8)]
    out = ingest.write_back(store, cfg(min_confidence=0.5), "r1", rows, won(None))
    assert out.as_dict() == {"written": 2, "below_min_confidence": 1, "unlabeled_skipped": 1,
                   "schemes": ["s"], "min_confidence": 0.5,
                   "by_label": {"pos": 1, "x, y": 1}, "in_use": ["s"], "kept_in_use": {},
                   "took_over": {}}
    assert shown(store) == [("a", "pos", "r1"), ("f", ["x", "y"], "r1")]
    kept = store.conn().execute("SELECT count(*) FROM run_predictions WHERE run_id='r1'")
    assert kept.fetchone()[0] == 2


def test_write_back_unlabeled_and_numbers(store):
    skipped = ingest.write_back(store, cfg(), "r0", [p("d", "a", split="unlabeled"),
                                                     p("e", "a", split="unlabeled")], None)
    assert skipped.unlabeled_skipped == 2 and skipped.written == 0
    rows = [p("d", 3.5, 0.9, split="unlabeled"), p("e", 2, 0.9)]
    out = ingest.write_back(store, cfg(unlabeled=True, numbers=("s",)), "r1", rows, won(None))
    assert out.written == 2 and out.unlabeled_skipped == 0 and out.by_label == {}
    assert shown(store) == [("d", 3.5, "r1"), ("e", 2, "r1")]


def test_write_back_spans_one_by_one(store):
    spans = [{"start": 0, "end": 1, "label": "A", "confidence": 0.9},
             {"start": 2, "end": 3, "label": "B", "confidence": 0.2},
             {"start": 4, "end": 5, "label": "A", "confidence": 0.5}]
    out = ingest.write_back(store, cfg(min_confidence=0.5), "r1", [p("a", spans, 0.1)], won(None))
    assert out.written == 1 and out.below_min_confidence == 1
    assert out.by_label == {"A": 2}
    assert [s["label"] for s in shown(store)[0][1]] == ["A", "A"]


def test_write_back_nothing_for_other_schemes(store):
    out = ingest.write_back(store, cfg(schemas=("t",)), "r1", [p("a", "pos")], None)
    assert out.written == 0 and out.schemes == [] and out.in_use == []
    assert shown(store) == []


def test_write_back_nothing_kept_is_not_put_in_use(store):
    old = new_run(store)
    ingest.write_back(store, cfg(), old, [p("a", "pos")], won(None))
    out = ingest.write_back(store, cfg(min_confidence=0.95), "r2", [p("a", "neg", 0.9)], won(None))
    assert out.in_use == [] and out.kept_in_use == {
        "s": "run r2 kept no predictions for s, so it is not put in use"}
    assert shown(store) == [("a", "pos", old)]


def test_write_back_policy_decides(store):
    old = new_run(store, {"macro_f1": 0.9})
    ingest.write_back(store, cfg(), old, [p("a", "pos")], won({"macro_f1": 0.9}))
    out = ingest.write_back(store, cfg(), "r2", [p("a", "neg")], won({"macro_f1": 0.5}))
    assert out.in_use == [] and "by more than" in out.kept_in_use["s"]
    assert shown(store) == [("a", "pos", old)]
    out = ingest.write_back(store, cfg(policy="newest"), "r3", [p("a", "neg")], won(None))
    assert out.in_use == ["s"] and out.took_over == {
        "s": "run r3 replaces %s in use (writeback.policy: newest)" % old}
    assert shown(store) == [("a", "neg", "r3")]
    assert ingest.use(store, "s", old) == 1 and shown(store) == [("a", "pos", old)]


def test_write_back_counts_by_label(store):
    rows = [p("a", "x", 0.5), p("b", "y", 0.4), p("c", [], 0.9), p("d", ["x"], 0.9),
            p("e", 4, 0.9), p("f", ["y", "x"], 0.9), p("g", "x", 0.6)]
    out = ingest.write_back(store, cfg(min_confidence=0.5), "r1", rows, won(None))
    # a label at min_confidence is kept; an empty answer is a value (counted as ""), not spans
    assert out.written == 6 and out.below_min_confidence == 1
    assert out.by_label == {"x": 3, "": 1, "4": 1, "y, x": 1}
    assert shown(store) == [("a", "x", "r1"), ("c", [], "r1"), ("d", ["x"], "r1"),
                            ("e", 4, "r1"), ("f", ["y", "x"], "r1"), ("g", "x", "r1")]


def test_warnings():
    run = NS(schemas=["s"])
    assert ingest.warnings(cfg(schemas=("t",)), run, WriteBack()) == [
        "no predictions were written: none of this run's schemes (s) is listed in "
        "model_training.writeback.schemas, so annotators see no suggestions from it"]
    wb = WriteBack(schemes=["s"], written=0, below_min_confidence=4, min_confidence=0.7)
    assert ingest.warnings(cfg(), run, wb) == [
        "no predictions were written: all 4 were below writeback.min_confidence (0.7)"]
    assert ingest.warnings(cfg(), run, replace(wb, written=1)) == []
    assert ingest.warnings(cfg(), run, replace(wb, below_min_confidence=0)) == []
    assert ingest.warnings(cfg(), run, replace(wb, schemes=[])) == []


def test_warnings_from_the_report(monkeypatch):
    seen = []
    monkeypatch.setattr(ingest.report, "learned_nothing",
                        lambda k, v: seen.append((k, v)) or ("w:%s" % k if k == "b" else None))
    run = NS(schemas=["s"])
    assert ingest.warnings(cfg(), run, WriteBack(), {"per_scheme": {"a": 1, "b": 2}}) == ["w:b"]
    assert seen == [("a", 1), ("b", 2)]
    seen.clear()
    assert ingest.warnings(cfg(), run, WriteBack(), {"macro_f1": 1}) == []
    assert seen == [("", {"macro_f1": 1})]
    assert ingest.warnings(cfg(), run, WriteBack(), None) == [] and len(seen) == 1


def test_with_heldout_and_read_lines(tmp_path):
    path = tmp_path / "heldout.jsonl"
    path.write_text('{"id": "t1", "labels": {"s": "pos"}}\nnot json\n{"id": "t2"}\n')
    items = [{"id": "t1", "split": "test", "labels": {}},
             {"id": "t2", "split": "test", "labels": {"s": "x"}},
             {"id": "t3", "split": "test", "labels": {"s": "y"}},
             {"id": "t1", "split": "train", "labels": {}}]
    out = ingest.with_heldout(items, str(path))
    assert [it["labels"] for it in out] == [{"s": "pos"}, {}, {"s": "y"}, {}]
    assert [(it["id"], it["split"]) for it in out] == [(it["id"], it["split"]) for it in items]
    assert items[0]["labels"] == {}  # the bundle's items are not changed
    assert ingest.with_heldout(items, str(tmp_path / "none")) is items
    assert list(ingest.read_lines(str(tmp_path / "none"))) == []


def test_read_predictions(tmp_path):
    bundle = NS(items=[{"id": "a", "split": "test", "text": "t"}],
                schemas={"s": {"type": "radio", "labels": ["pos", "neg"]}})
    with pytest.raises(ingest.PredictionsError, match="the worker wrote no predictions.jsonl"):
        ingest.read_predictions(str(tmp_path / "none"), bundle)
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(p("a", "pos", 1)) + "\n")
    assert ingest.read_predictions(str(path), bundle) == [p("a", "pos", 1.0)]
    path.write_bytes(json.dumps(p("a", "zzz\xff", 1)).encode().replace(b"\\u00ff", b"\xff"))
    with pytest.raises(ingest.PredictionsError) as e:
        ingest.read_predictions(str(path), bundle)  # bytes that are not UTF-8: replaced
    assert 'line 1: label "zzz\\ufffd" is not one' in str(e.value)
    spans = NS(items=bundle.items, schemas={"sp": {"type": "span", "labels": ["A"]}})
    row = p("a", [{"start": 0, "end": 1, "label": "A", "confidence": 1}], 1, scheme="sp")
    path.write_text(json.dumps(row) + "\n")
    assert ingest.read_predictions(str(path), spans)[0]["label"][0]["text"] == "t"
    path.write_text(json.dumps(p("a", "zzz", 1)) + "\n")
    with pytest.raises(ingest.PredictionsError, match="line 1: label"):
        ingest.read_predictions(str(path), bundle)


def latin1_locale(monkeypatch):
    """open() as on a host whose locale encoding is Latin-1: a file read without an explicit
    encoding gets it."""
    real = open

    def fake_open(path, mode="r", *args, **kw):
        if "b" not in mode and not args and kw.get("encoding") is None:
            kw["encoding"] = "latin-1"
        return real(path, mode, *args, **kw)

    monkeypatch.setattr(ingest, "open", fake_open, raising=False)


def test_files_are_read_as_utf8_whatever_the_locale(tmp_path, monkeypatch):
    latin1_locale(monkeypatch)
    bundle = NS(items=[{"id": "a", "split": "test", "text": "t"}],
                schemas={"s": {"type": "radio", "labels": ["né", "x"]}})
    path = tmp_path / "p.jsonl"
    path.write_bytes((json.dumps(p("a", "né", 1), ensure_ascii=False) + "\n").encode("utf-8"))
    assert ingest.read_predictions(str(path), bundle)[0]["label"] == "né"
    held = tmp_path / "heldout.jsonl"
    held.write_bytes('{"id": "t1", "labels": {"s": "né"}}\n'.encode("utf-8"))
    assert list(ingest.read_lines(str(held))) == [{"id": "t1", "labels": {"s": "né"}}]


def test_tolerance_is_in_the_score_s_units(store):
    r = new_run(store, {"macro_f1": 0.8})
    ingest.use(store, "s", r)
    assert ingest.takes_over(store, cfg(tolerance=0.01), "rX", "s", won({"macro_f1": 0.792}))[0]
    r = new_run(store, {"mae": 2.0})
    ingest.use(store, "s", r)
    assert ingest.takes_over(store, cfg(tolerance=0.1), "rX", "s", won({"mae": 2.08}))[0]


def test_the_new_run_s_kind_of_score_is_compared(store):
    # the new run has a kappa only, the old one a macro-F1 only: no common score
    r = new_run(store, {"macro_f1": 0.9})
    ingest.use(store, "s", r)
    assert ingest.takes_over(store, cfg(), "rX", "s", won({"qwk": 0.6})) == (
        True, "run rX replaces %s in use (%s has no held-out score)" % (r, r))
    # both have both: the new run's first kind (kappa) decides, not macro-F1
    r = new_run(store, {"qwk": 0.5, "macro_f1": 0.9})
    ingest.use(store, "s", r)
    took, why = ingest.takes_over(store, cfg(), "rX", "s", won({"qwk": 0.6, "macro_f1": 0.1}))
    assert took and "held-out quadratic-weighted kappa 0.600 is not below" in why


def per(**schemes):
    return {"per_scheme": dict(schemes, o={"macro_f1": 0.5})}


def test_the_scheme_s_own_scores_are_compared(store):
    r = new_run(store, per(s={"qwk": 0.5}))
    ingest.use(store, "s", r)
    assert ingest.takes_over(store, cfg(), "rX", "s", won(per(s={"qwk": 0.45}))) == (
        False, "run rX's held-out quadratic-weighted kappa 0.450 is below %s's 0.500 by more "
        "than writeback.tolerance (0.01): %s stays in use (writeback.policy: best)" % (r, r))
    r = new_run(store, per(s={"macro_f1": 0.2}))
    ingest.use(store, "s", r)
    assert ingest.takes_over(store, cfg(), "rX", "s", won(per(s={"qwk": 0.45}))) == (
        True, "run rX replaces %s in use (%s has no held-out score)" % (r, r))
    r = new_run(store, per(s={"qwk": 0.4}))
    ingest.use(store, "s", r)
    assert ingest.takes_over(store, cfg(), "rX", "s", won(per(s={"n": 3}))) == (
        False, "run rX has no held-out score; %s (quadratic-weighted kappa 0.400) stays in use"
        % r)
