"""Aggregating several annotators (potato/aggregate.py): majority, Dawid-Skene checked against
crowd-kit as an oracle, spans kept by half the annotators, medians; and the config key and the
bundle and export that use it."""

import json
import random

import pytest

from potato import aggregate
from potato.aggregate import TIE, agreed_spans, dawid_skene, median


def simulated(seed, items=300, classes=("a", "b", "c"), skills=(0.9, 0.8, 0.55, 0.35, 0.7),
              cover=0.8):
    """Votes of annotators with known skills on items with known truths (some items get few
    annotators: Dawid-Skene matters most where majority has little to count)."""
    rng = random.Random(seed)
    truth = {"i%d" % n: rng.choice(classes) for n in range(items)}
    votes = {}
    for item, t in truth.items():
        for w, skill in enumerate(skills):
            if rng.random() > cover:
                continue
            label = t if rng.random() < skill else rng.choice([c for c in classes if c != t])
            votes.setdefault(item, {})["w%d" % w] = label
    return truth, votes


def crowdkit_fit(votes):
    pd = pytest.importorskip("pandas")
    ck = pytest.importorskip("crowdkit.aggregation")
    df = pd.DataFrame([{"task": i, "worker": w, "label": lab}
                       for i, v in votes.items() for w, lab in v.items()])
    model = ck.DawidSkene(n_iter=1000, tol=1e-7)
    model.fit(df)
    return model


@pytest.mark.filterwarnings("ignore")  # pandas deprecations inside crowd-kit
@pytest.mark.parametrize("seed", [1, 2])
def test_dawid_skene_matches_crowd_kit(seed):
    """Both run to the same fixed point (their stopping rules weigh the prior differently, so
    at the default tolerance they stop a few iterations apart)."""
    _, votes = simulated(seed)
    ours = dawid_skene(votes, max_iter=1000, tol=1e-12)
    theirs = crowdkit_fit(votes)
    assert ours.converged
    for item, p in ours.posteriors.items():
        for label, q in p.items():
            assert q == pytest.approx(float(theirs.probas_.loc[item, label]), abs=5e-4), item
    for label, q in ours.priors.items():
        assert q == pytest.approx(float(theirs.priors_[label]), abs=5e-4)
    clear = [i for i, p in ours.posteriors.items() if max(p.values()) > 0.51]
    assert len(clear) > 250
    assert all(ours.labels[i] == theirs.labels_[i] for i in clear)


def test_dawid_skene_beats_majority_when_annotators_differ():
    truth, votes = simulated(7, items=400)
    fit = dawid_skene(votes)
    plain = {i: aggregate.majority(list(v.values())) for i, v in votes.items()}
    right_ds = sum(fit.labels.get(i) == t for i, t in truth.items())
    right_mv = sum(plain.get(i) == t for i, t in truth.items())
    assert right_ds > right_mv
    # and it learnt who is reliable: the 0.9 annotator's diagonal beats the 0.35 one's
    diag = {w: sum(e.get((c, c), 0) for c in "abc") / 3 for w, e in fit.errors.items()}
    assert diag["w0"] > 0.8 and diag["w3"] < 0.5


def test_consensus_through_aggregate_and_its_fallbacks():
    _, votes = simulated(4, items=100)
    r = aggregate.aggregate("radio", votes, "consensus")
    assert r.method == "consensus" and r.note == ""
    assert r.labels == dawid_skene(votes).labels
    one = {"i1": {"w": "a"}, "i2": {"w": "b"}}
    r = aggregate.aggregate("radio", one, "consensus")
    assert r.method == "majority" and "at least two annotators" in r.note
    r = aggregate.aggregate("multiselect", {"i": {"w": ["a"], "v": ["a"]}}, "consensus")
    assert r.labels == {"i": ["a"]} and "multi-label" in r.note
    r = aggregate.aggregate("radio", votes, "majority")
    assert r.method == "majority"
    assert r.labels == {i: aggregate.majority(list(v.values())) for i, v in votes.items()}


def test_consensus_that_does_not_converge_falls_back(monkeypatch):
    _, votes = simulated(5, items=60)
    monkeypatch.setattr(aggregate, "DS_MAX_ITER", 1)
    monkeypatch.setattr(aggregate.dawid_skene, "__defaults__", (1, -1.0))  # never "converged"
    r = aggregate.aggregate("radio", votes, "consensus")
    assert r.method == "majority" and "did not converge in 1 iterations" in r.note


def test_likert_points_are_classes():
    votes = {"i1": {"a": 4, "b": 4, "c": 2}, "i2": {"a": 1, "b": 2}}
    r = aggregate.aggregate("likert", votes, "majority")
    assert r.labels == {"i1": 4, "i2": TIE}


def test_spans_kept_by_at_least_half():
    a = [{"start": 0, "end": 5, "label": "PER"}, {"start": 10, "end": 14, "label": "LOC"}]
    b = [{"start": 0, "end": 5, "label": "PER"}, {"start": 10, "end": 14, "label": "ORG"}]
    c = [{"start": 0, "end": 4, "label": "PER"}]
    assert agreed_spans([a, b, c]) == [{"start": 0, "end": 5, "label": "PER"}]
    # the same stretch with two labels overlaps itself: one is kept (review 23.7)
    assert agreed_spans([a, b]) == [{"start": 0, "end": 5, "label": "PER"},
                                    {"start": 10, "end": 14, "label": "LOC"}]
    assert agreed_spans([a, [], []]) == []  # two of three saw no entity
    assert agreed_spans([a + a]) == a  # one annotator's duplicate counts once
    r = aggregate.aggregate("span", {"i": {"x": a, "y": a, "z": []}}, "consensus")
    assert r.labels == {"i": a} and r.method == "spans"


def test_agreed_spans_never_overlap():
    # Review 23.7: with two annotators, 0..5 PER and 0..3 PER were both kept.
    def sp(s, e, lab="PER"):
        return {"start": s, "end": e, "label": lab}

    assert agreed_spans([[sp(0, 5)], [sp(0, 3)]]) == [sp(0, 5)]  # a tie: the longer
    assert agreed_spans([[sp(0, 3)], [sp(2, 5)]]) == [sp(0, 3)]  # same length: the earlier
    votes = [[sp(0, 3), sp(6, 9)], [sp(0, 3), sp(6, 9)], [sp(0, 9)], [sp(0, 9)]]
    assert agreed_spans(votes) == [sp(0, 9)]  # equal counts: 0..9 is longer...
    votes[2] = [sp(0, 3), sp(0, 9)]
    assert agreed_spans(votes) == [sp(0, 3), sp(6, 9)]  # ...but 0..3 has more annotators
    for n in range(2, 6):  # any vote gives a valid span list
        rng = random.Random(n)
        ann = [[sp(s, s + rng.randint(1, 4)) for s in sorted(rng.sample(range(20), 3))]
               for _ in range(n)]
        got = agreed_spans(ann)
        assert all(x["end"] <= y["start"] for x, y in zip(got, got[1:])), got


def test_numbers_take_the_median():
    assert median([1, 5, 2]) == 2 and median([1, 2, 3, 10]) == 2.5
    assert median([float("nan"), "x", True]) is TIE
    r = aggregate.aggregate("slider", {"i": {"a": 0.2, "b": 0.9, "c": 0.4}}, "consensus")
    assert r.labels == {"i": 0.4} and r.method == "median"


def test_aggregation_key_is_checked(write_config):
    from potato.config import load
    from tests.helpers import BASE

    cfg, errors, _ = load(write_config(BASE + "model_training:\n  aggregation: consensus\n"))
    assert not errors and cfg.model_training.aggregation == "consensus"
    _, errors, _ = load(write_config(BASE + "model_training:\n  aggregation: dawid\n",
                                     name="bad.yaml"))
    assert any("model_training.aggregation is 'dawid'; use majority" in e.message
               for e in errors), errors


def test_bundle_and_export_follow_the_configured_aggregation(write_config, tmp_path,
                                                             monkeypatch):
    """Three annotators: two careless ones agree on a wrong label for item x, but they disagree
    with the careful one everywhere else; consensus trusts the careful one."""
    from potato.config import load
    from potato.export import jsonl, label_counts
    from potato.store import Store
    from potato.training.prepare import prepare, scheme_votes
    from potato.training.remote import bundle
    from potato.training.remote.paths import RunPaths
    from potato.training.runs import Run
    from tests.helpers import BASE

    _, votes = simulated(11, items=120, classes=("positive", "negative"),
                         skills=(0.95, 0.6, 0.6), cover=1.0)
    items = [{"id": i, "text": "text %s" % i} for i in votes]
    for method in ("majority", "consensus"):
        path = write_config(BASE + "model_training:\n  aggregation: %s\n" % method,
                            name="%s.yaml" % method, items=items)
        cfg, errors, _ = load(path)
        assert not errors
        store = Store(cfg.db_path)
        try:
            from potato.data import load_items

            store.sync_items(load_items(cfg))
            with store.tx() as conn:
                for i, v in votes.items():
                    for w, lab in v.items():
                        conn.execute("INSERT OR REPLACE INTO annotations (item_id, scheme, "
                                     "annotator, label, updated_at) VALUES (?,?,?,?,0)",
                                     (i, "sentiment", w, json.dumps(lab)))
            expected = aggregate.aggregate("radio", scheme_votes(store, "sentiment"),
                                           method).labels
            paths = RunPaths(str(tmp_path / ("run-" + method)))
            run = Run(seq=1, run_id="r1", trainer="text-naive-bayes", schemas=["sentiment"],
                      backend="local", params={}, status="running")
            prepare(cfg, store, run, paths, True, lambda s: None, lambda m: None)
            got = {it["id"]: it["labels"].get("sentiment")
                   for it in bundle.read(paths.bundle).items if it["labels"]}
            assert got == {i: lab for i, lab in expected.items() if lab is not None}
            exported = [json.loads(line) for line in jsonl(store, cfg).splitlines()]
            assert all(row["aggregated_label"] == expected[row["item_id"]] for row in exported)
            # the admin page's counts are the majority vote's, whatever the method: Dawid-Skene
            # on every page load took seconds (review 23.6)
            plain = aggregate.aggregate("radio", scheme_votes(store, "sentiment")).labels
            with monkeypatch.context() as m:
                m.setattr(aggregate, "dawid_skene", None)
                counts = label_counts(cfg, store)["sentiment"]
            assert counts == {lab: list(plain.values()).count(lab)
                              for lab in ("positive", "negative")}
        finally:
            store.close()
    assert aggregate.aggregate("radio", votes, "consensus").labels != \
        aggregate.aggregate("radio", votes, "majority").labels
