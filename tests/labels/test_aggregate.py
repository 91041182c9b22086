"""Aggregating several annotators (potato/labels/aggregate.py): majority, Dawid-Skene checked against
crowd-kit as an oracle, spans kept by half the annotators, medians; and the config key and the
bundle and export that use it."""

import json
import random

import pytest

from potato.labels import aggregate
from potato.labels.aggregate import TIE, agreed_spans, dawid_skene, median
import math
from potato.labels import aggregate, agreement


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
    from potato.config.settings import load
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
    from potato.config.settings import load
    from potato.labels.export import jsonl, label_counts
    from potato.project.store import Store
    from potato.training.lifecycle.prepare import Destination, prepare, scheme_votes
    from potato.training.remote import bundle
    from potato.training.remote.paths import RunPaths
    from potato.training.core.runs import Run
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
            from potato.project.data import load_items

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
            prepare(cfg, store, run, paths, Destination(local=True), lambda s: None,
                    lambda m: None)
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


# -- Fast unit tests for aggregation (potato/labels/aggregate.py): each kind's shape, the consensus (folded in from test_aggregate.py) ----------
# fallbacks, agreed spans, medians, and Dawid-Skene's steps checked against their formulas and the
# whole fit by its invariants; written so that tools/mutation.py's mutants of the module fail
# (issue 26). tests/labels/test_aggregate.py keeps the end-to-end checks and crowd-kit as an oracle.


def simulated_votes(seed, items=60, classes=("a", "b", "c"), skills=(0.9, 0.75, 0.5, 0.35),
              cover=0.85):
    rng = random.Random(seed)
    votes = {}
    for n in range(items):
        t = rng.choice(classes)
        for w, skill in enumerate(skills):
            if rng.random() > cover:
                continue
            label = t if rng.random() < skill else rng.choice([c for c in classes if c != t])
            votes.setdefault("i%d" % n, {})["w%d" % w] = label
    return votes


# -- aggregate(): which method for which kind ----------------------------------------------------

def test_methods_and_tie():
    assert aggregate.METHODS == ("majority", "consensus")
    assert TIE is None


def test_choice_kinds_take_the_majority_by_default():
    votes = {"i1": {"a": "x", "b": "x", "c": "y"}, "i2": {"a": "x", "b": "y"}}
    r = aggregate.aggregate("radio", votes)
    assert (r.labels, r.method, r.note) == ({"i1": "x", "i2": None}, "majority", "")
    r = aggregate.aggregate("unknown-kind", votes, "majority")
    assert (r.labels, r.method, r.note) == ({"i1": "x", "i2": None}, "majority", "")
    r = aggregate.aggregate("radio", {})
    assert (r.labels, r.method, r.note) == ({}, "majority", "")


def test_spans_numbers_and_text_have_their_own_shape():
    a = [{"start": 0, "end": 2, "label": "P"}]
    r = aggregate.aggregate("span", {"i": {"x": a, "y": a, "z": []}, "j": {"x": []}})
    assert (r.labels, r.method, r.note) == ({"i": a, "j": []}, "spans", "")
    r = aggregate.aggregate("number", {"i": {"x": 1, "y": 4}, "j": {}}, "consensus")
    assert (r.labels, r.method, r.note) == ({"i": 2.5, "j": None}, "median", "")
    r = aggregate.aggregate("text", {"i": {"x": "a", "y": "a"}})
    assert (r.labels, r.method, r.note) == ({"i": None}, "none", "free text is not aggregated")
    r = aggregate.aggregate("text", {})
    assert (r.labels, r.method, r.note) == ({}, "none", "")


def test_consensus_fallbacks_say_why():
    r = aggregate.aggregate("multiselect", {"i": {"w": ["a"], "v": ["a"]}}, "consensus")
    assert (r.labels, r.method) == ({"i": ["a"]}, "majority")
    assert r.note == ("consensus does not apply to multi-label schemes; the majority vote was "
                      "used")
    r = aggregate.aggregate("radio", {"i1": {"w": "a"}, "i2": {"w": "b"}}, "consensus")
    assert (r.labels, r.method) == ({"i1": "a", "i2": "b"}, "majority")
    assert r.note == "consensus needs at least two annotators; the majority vote was used"


def test_consensus_with_two_annotators_runs_dawid_skene():
    votes = {"i1": {"w": "a", "v": "a"}, "i2": {"w": "b", "v": "b"}, "i3": {"w": "a", "v": "b"}}
    r = aggregate.aggregate("radio", votes, "consensus")
    assert r.method == "consensus" and r.note == ""
    assert r.labels == dawid_skene(votes).labels and r.labels["i1"] == "a"


def test_consensus_that_does_not_converge_names_the_limit(monkeypatch):
    votes = {"i1": {"w": "a", "v": "a"}, "i2": {"w": "b", "v": "a"}}
    fit = dawid_skene(votes)
    fit.converged = False
    monkeypatch.setattr(aggregate, "dawid_skene", lambda v: fit)
    r = aggregate.aggregate("radio", votes, "consensus")
    assert (r.labels, r.method) == ({"i1": "a", "i2": None}, "majority")
    # docs/training.md: "fits that do not converge within 100 iterations use the majority vote"
    assert r.note == "Dawid-Skene did not converge in 100 iterations; the majority vote was used"
    assert aggregate.DS_MAX_ITER == 100


def test_likert_consensus():
    votes = simulated_votes(3, classes=(1, 2, 3))
    r = aggregate.aggregate("likert", votes, "consensus")
    assert r.method == "consensus" and set(r.labels.values()) <= {1, 2, 3, None}


# -- spans and numbers ---------------------------------------------------------------------------

def sp(s, e, lab="P", **extra):
    return dict({"start": s, "end": e, "label": lab}, **extra)


def test_agreed_spans_counts_each_annotator_once_and_half_is_enough():
    assert agreed_spans([]) == []
    assert agreed_spans([[sp(0, 2), sp(0, 2)], [], []]) == []  # 1 of 3
    assert agreed_spans([[sp(0, 2), sp(0, 2)], [sp(0, 2)], []]) == [sp(0, 2)]  # 2 of 3
    assert agreed_spans([[sp(0, 2)], [], [], []]) == []  # 1 of 4
    assert agreed_spans([[sp(0, 2)], [sp(0, 2)], [], []]) == [sp(0, 2)]  # 2 of 4
    assert agreed_spans([[sp(0, 2)], None, "x"]) == []  # 1 of 3; junk annotations ignored
    assert agreed_spans([[sp(0, 2), "junk", 3], None]) == [sp(0, 2)]
    assert agreed_spans([[sp("1", 3.0, 5)], [sp(1, 3, "5")]]) == [sp(1, 3, "5")]


def test_agreed_spans_keep_the_covered_text_and_sort():
    got = agreed_spans([[sp(5, 7, text="cd"), sp(0, 2)], [sp(0, 2, text="ab"), sp(5, 7)]])
    assert got == [sp(0, 2, text="ab"), sp(5, 7, text="cd")]
    got = agreed_spans([[sp(0, 2, text="ab")], [sp(0, 2, text="zz")]])
    assert got == [sp(0, 2, text="ab")]  # the first text seen
    assert agreed_spans([[sp(0, 2, text=3)], [sp(0, 2)]]) == [sp(0, 2)]


def test_agreed_spans_resolve_overlaps():
    # more annotators win over a longer span
    votes = [[sp(0, 3)], [sp(0, 3)], [sp(0, 3), sp(0, 9)], [sp(0, 9)]]
    assert agreed_spans(votes) == [sp(0, 3)]
    # equal counts: the longer, then the earlier, then by end and label
    assert agreed_spans([[sp(2, 9)], [sp(0, 3)]]) == [sp(2, 9)]
    assert agreed_spans([[sp(4, 7)], [sp(2, 5)]]) == [sp(2, 5)]
    assert agreed_spans([[sp(2, 5, "B")], [sp(2, 5, "A")]]) == [sp(2, 5, "A")]
    # touching spans are both kept, in text order
    assert agreed_spans([[sp(3, 6), sp(0, 3)], [sp(6, 8)]]) == [sp(0, 3), sp(3, 6), sp(6, 8)]
    assert agreed_spans([[sp(3, 7)], [sp(0, 3)]]) == [sp(0, 3), sp(3, 7)]  # one ends, one starts
    # an overlap on either side is refused
    assert agreed_spans([[sp(0, 10)], [sp(0, 10), sp(9, 12)], [sp(9, 12)]]) == [sp(0, 10)]
    assert agreed_spans([[sp(5, 10)], [sp(5, 10), sp(3, 6)], [sp(3, 6)]]) == [sp(5, 10)]
    assert agreed_spans([[sp(0, 10)], [sp(0, 10), sp(2, 4)], [sp(2, 4)]]) == [sp(0, 10)]


def test_median():
    assert median([]) is None and median(["x", True, None, float("inf"), float("nan")]) is None
    assert median([3]) == 3.0 and isinstance(median([3]), float)
    assert median([5, 1, 3]) == 3.0
    assert median([4, 1, 3, 10]) == 3.5
    assert median([1, 2]) == 1.5
    assert median([7, False, 2, float("-inf"), 3]) == 3.0
    assert median([1.5, 2.5, 100, -100, 0, 9]) == 2.0


def test_median_each_takes_each_place_of_the_lists_of_the_usual_length():
    assert aggregate.median_each([[10, 40], [20, 90], [30, 50]]) == [20.0, 50.0]
    assert aggregate.median_each([[1, 3], [5, 9]]) == [3.0, 6.0]
    # values that are no list of finite numbers are left out; so is a list of another length
    assert aggregate.median_each([[0, 10], "x", [float("nan"), 4], [2, 6], [1, 2, 3], [True]]) \
        == [1.0, 8.0]
    assert aggregate.median_each([]) is TIE and aggregate.median_each([None, {}, []]) is TIE


def test_mean_per_label_keeps_the_total_and_counts_a_missing_label_as_0():
    assert aggregate.mean_per_label([{"a": 60, "b": 40}, {"a": 20, "b": 80}]) == {"a": 40,
                                                                                  "b": 60}
    assert aggregate.mean_per_label([{"a": 100}, {"b": 100}]) == {"a": 50, "b": 50}
    thirds = aggregate.mean_per_label([{"a": 1, "b": 0}, {"a": 0, "b": 1}, {"a": 0, "b": 1}])
    assert thirds == {"a": 0.3333333333, "b": 0.6666666667}
    assert aggregate.mean_per_label([{"a": float("nan")}, "x", {"a": 1, "b": 0}]) == {"a": 1,
                                                                                      "b": 0}
    assert aggregate.mean_per_label([]) is TIE and aggregate.mean_per_label([{}, None]) is TIE


# -- Dawid-Skene, step by step (through the fit after 0, 1, 2 ... EM steps) ---------------------

VOTES = {"i0": {"w0": "a", "w1": "a"}, "i1": {"w0": "b", "w1": "a"}}
EPS = 1e-10  # a share never given is floored at this, not a log of 0


def steps(votes, n):
    """The fit after exactly n EM steps (a tolerance nothing is below)."""
    return dawid_skene(votes, max_iter=n, tol=-math.inf)


def confusions(votes, posteriors):
    """The M-step by hand: P(annotator says o | truth t) = the posterior mass of t over the
    items where it said o, floored at EPS, over the same for every label it gave."""
    classes = sorted({lab for v in votes.values() for lab in v.values()}, key=repr)
    out = {}
    for a in sorted({a for v in votes.values() for a in v}):
        said = sorted({v[a] for v in votes.values() if a in v}, key=repr)
        mass = {(o, t): max(sum(posteriors[i][t] for i, v in votes.items() if v.get(a) == o),
                            EPS) for o in said for t in classes}
        out[a] = {(o, t): mass[o, t] / sum(mass[x, t] for x in said)
                  for o in said for t in classes}
    return out


def same_errors(got, want, **tol):
    """Two fits' confusions alike: the same annotators, each within tol (approx takes no
    nesting)."""
    return set(got) == set(want) and all(got[a] == pytest.approx(want[a], **tol) for a in want)


def bayes(votes, priors, errors):
    """The E-step by hand: P(truth t | votes) from the priors and the confusions."""
    out = {}
    for i, v in votes.items():
        raw = {t: max(q, EPS) * math.prod(errors[a][o, t] for a, o in v.items())
               for t, q in priors.items()}
        out[i] = {t: x / sum(raw.values()) for t, x in raw.items()}
    return out


def test_the_start_is_the_majority_share_and_its_confusions():
    fit = steps(VOTES, 0)
    assert (fit.iterations, fit.converged) == (0, False)
    assert fit.posteriors == {"i0": {"a": 1.0, "b": 0.0}, "i1": {"a": 0.5, "b": 0.5}}
    assert fit.priors == {"a": 0.75, "b": 0.25}
    # w0 said a on i0 (a: 1) and b on i1 (a: 0.5, b: 0.5); w1 said a on both
    assert fit.errors["w0"] == pytest.approx({
        ("a", "a"): 1 / 1.5, ("b", "a"): 0.5 / 1.5,
        ("a", "b"): EPS / (0.5 + EPS), ("b", "b"): 0.5 / (0.5 + EPS)}, rel=1e-12)
    assert fit.errors["w1"] == pytest.approx({("a", "a"): 1.0, ("a", "b"): 1.0}, rel=1e-12)
    assert same_errors(fit.errors, confusions(VOTES, fit.posteriors), rel=1e-12)


def test_a_label_never_seen_with_a_truth_is_floored_at_epsilon():
    fit = steps({"i1": {"w": "a"}, "i2": {"w": "b"}, "i3": {"v": "a"}}, 0)
    total = 1.0 + EPS
    assert fit.errors["w"] == pytest.approx({("a", "a"): 1 / total, ("b", "a"): EPS / total,
                                             ("a", "b"): EPS / total, ("b", "b"): 1 / total},
                                            rel=1e-9)
    assert fit.errors["w"][("b", "a")] > 0


@pytest.mark.parametrize("votes", [VOTES, simulated_votes(3, items=40)])
def test_each_em_step_is_bayes_then_the_confusions(votes):
    before = steps(votes, 0)
    for n in range(1, 4):
        fit = steps(votes, n)
        want = bayes(votes, before.priors, before.errors)
        for i in votes:
            assert fit.posteriors[i] == pytest.approx(want[i], abs=1e-9), (n, i)
        assert fit.priors == pytest.approx(
            {t: sum(p[t] for p in want.values()) / len(want) for t in fit.priors}, abs=1e-9)
        assert same_errors(fit.errors, confusions(votes, fit.posteriors), abs=1e-9)
        before = fit


def test_many_votes_on_one_item_do_not_underflow():
    # 20 items every annotator agrees on (10 a, 10 b), and one that 240 call a and 240 call b:
    # each vote on it weighs log(0.5 / 20.5) against the other label, about -3.7, so either
    # label's likelihood is about exp(-890): below what a float holds
    votes = {"i%d" % n: {"w%d" % a: "ab"[n % 2] for a in range(480)} for n in range(20)}
    votes["x"] = {"w%d" % a: "ab"[a // 240] for a in range(480)}
    fit = steps(votes, 1)
    assert fit.posteriors["x"] == pytest.approx({"a": 0.5, "b": 0.5})
    assert fit.labels["i0"] == "a" and fit.labels["i1"] == "b"


def bound(votes, fit):
    """The evidence lower bound per vote of a fit, by hand from its public figures."""
    total = 0.0
    for i, v in votes.items():
        for t, q in fit.posteriors[i].items():
            joint = math.log(max(fit.priors[t], EPS)) + sum(
                math.log(fit.errors[a][o, t]) for a, o in v.items())
            total += q * joint - q * math.log(max(q, EPS))
    return total / sum(len(v) for v in votes.values())


def test_convergence_is_a_gain_of_the_bound_per_vote_below_tol():
    votes = simulated_votes(4, items=60)
    bounds = [bound(votes, steps(votes, n)) for n in range(1, 6)]
    gains = [b - a for a, b in zip(bounds, bounds[1:])]
    assert all(g > 0 for g in gains) and gains == sorted(gains, reverse=True)
    for n, g in enumerate(gains, start=2):  # the step whose gain is g is step n
        fit = dawid_skene(votes, max_iter=50, tol=g * (1 + 1e-6))
        assert (fit.iterations, fit.converged) == (n, True), n
        fit = dawid_skene(votes, max_iter=50, tol=g * (1 - 1e-6))
        assert fit.iterations > n, n


# -- Dawid-Skene, the whole fit ------------------------------------------------------------------

def test_fit_shape_and_its_probabilities():
    votes = simulated_votes(1)
    votes["empty"] = {}
    fit = dawid_skene(votes)
    assert fit.converged is True and 2 < fit.iterations < 100
    assert "empty" not in fit.labels and set(fit.labels) == set(votes) - {"empty"}
    assert set(fit.priors) == {"a", "b", "c"} and sum(fit.priors.values()) == pytest.approx(1)
    for item, p in fit.posteriors.items():
        assert set(p) == {"a", "b", "c"} and sum(p.values()) == pytest.approx(1), item
        best = max(p.values())
        assert fit.labels[item] == [c for c, x in p.items() if x == best][0]
    assert set(fit.errors) == {"w0", "w1", "w2", "w3"}
    for w, e in fit.errors.items():
        for t in "abc":  # for each truth, what the annotator says sums to 1
            assert sum(v for (o, tt), v in e.items() if tt == t) == pytest.approx(1), (w, t)
    assert fit.errors["w0"][("a", "a")] > 0.8 and fit.errors["w3"][("a", "a")] < 0.6


def test_a_label_an_annotator_never_gave_has_no_error_entry():
    votes = {"i1": {"w": "a", "v": "a"}, "i2": {"w": "b", "v": "a"}, "i3": {"w": "b", "v": "a"}}
    fit = dawid_skene(votes)
    assert set(fit.errors["v"]) == {("a", "a"), ("a", "b")}
    assert set(fit.errors["w"]) == {("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")}
    assert fit.errors["v"][("a", "a")] == pytest.approx(1.0)


def test_iterations_and_convergence_flags():
    votes = simulated_votes(2)
    fit = dawid_skene(votes, max_iter=0)
    assert (fit.iterations, fit.converged) == (0, False)
    shares = {i: {c: list(v.values()).count(c) / len(v) for c in "abc"} for i, v in
              votes.items()}
    for i, p in fit.posteriors.items():  # no EM step: the majority vote's shares
        assert p == pytest.approx(shares[i]), i
    fit = dawid_skene(votes, max_iter=3, tol=-1.0)
    assert (fit.iterations, fit.converged) == (3, False)
    fit = dawid_skene(votes, max_iter=1, tol=-1.0)
    assert (fit.iterations, fit.converged) == (1, False)
    full = dawid_skene(votes, max_iter=1000, tol=1e-12)
    fit = dawid_skene(votes)
    assert fit.converged and fit.iterations < full.iterations
    assert full.converged and sum(fit.labels[i] == full.labels[i] for i in votes) > 0.9 * len(votes)


def test_convergence_needs_a_gain_below_tol():
    # unanimous votes reach an exact fixed point: a gain of 0 is not below tol=0
    votes = {"i1": {"w": "a", "v": "a"}, "i2": {"w": "b", "v": "b"}, "i3": {"w": "a", "v": "a"}}
    fit = dawid_skene(votes, max_iter=50, tol=0.0)
    assert (fit.iterations, fit.converged) == (50, False)
    fit = dawid_skene(votes, max_iter=50, tol=1e-300)
    assert fit.converged and fit.iterations < 50


def test_a_single_item_and_no_items():
    fit = dawid_skene({"i": {"w": "a", "v": "b", "u": "a"}})
    assert sum(fit.priors.values()) == pytest.approx(1) and fit.labels == {"i": "a"}
    fit = dawid_skene({})
    assert (fit.labels, fit.posteriors, fit.priors, fit.errors) == ({}, {}, {}, {})


def test_ties_and_labels_of_any_type():
    votes = {"i1": {"w": "a", "v": "b"}, "i2": {"w": "b", "v": "a"}}
    fit = dawid_skene(votes)
    assert fit.labels == {"i1": None, "i2": None}
    mixed = {"i1": {"w": 1, "v": 1}, "i2": {"w": "1", "v": "1"}, "i3": {"w": 1, "v": "1"}}
    fit = dawid_skene(mixed)
    assert fit.labels["i1"] == 1 and fit.labels["i2"] == "1"
    assert list(fit.priors) == ["1", 1]  # classes in repr order: "'1'" < "1"


# -- agreement (potato/labels/agreement.py) -------------------------------------------------------------

def test_cohen_kappa():
    from potato.labels.agreement import cohen_kappa
    assert cohen_kappa([]) is None
    assert cohen_kappa([("a", "a"), ("a", "a")]) is None  # one label throughout: undefined
    # Wikipedia's example: 50 items, 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no -> 0.4
    pairs = [("y", "y")] * 20 + [("y", "n")] * 5 + [("n", "y")] * 10 + [("n", "n")] * 15
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([("a", "b"), ("b", "a")]) == pytest.approx(-1.0)
    assert cohen_kappa([("a", "a"), ("b", "b"), ("c", "c")]) == pytest.approx(1.0)
    assert cohen_kappa([("a", "a"), ("a", "b")]) == pytest.approx(0.0)
    # observed 2/3; expected (1 * 2 + 1 * 0 + 1 * 1) / 9: a label one rater never gave adds 0
    assert cohen_kappa([("a", "a"), ("b", "a"), ("c", "c")]) == pytest.approx(0.5)


FLEISS = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
          [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def test_fleiss_kappa():
    from potato.labels.agreement import fleiss_kappa
    assert fleiss_kappa(FLEISS) == pytest.approx(0.20993, abs=1e-5)  # Wikipedia's example
    assert fleiss_kappa([]) is None
    assert fleiss_kappa([[1, 0], [0, 1]]) is None  # one rater
    assert fleiss_kappa([[2, 0], [1, 0]]) is None  # rows of different sums
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # one category throughout
    assert fleiss_kappa([[2, 0], [0, 2]]) == pytest.approx(1.0)
    assert fleiss_kappa([[2, 1]]) == pytest.approx(-0.5)  # one item: (1/3 - 5/9) / (4/9)
    assert fleiss_kappa([[1, 1], [1, 1]]) == pytest.approx(-1.0)
    assert fleiss_kappa([[2, 0, 0], [0, 1, 1]]) == pytest.approx(
        ((1 + 0) / 2 - (0.25 + 1 / 16 + 1 / 16)) / (1 - (0.25 + 1 / 16 + 1 / 16)))


def test_scheme_agreement_pairs_ties_and_fleiss():
    from potato.labels.agreement import scheme_agreement
    votes = {"i1": {"b": "x", "a": "x"}, "i2": {"a": "x", "b": "y"},
             "i3": {"c": "y", "a": "y"},
             "i4": {"a": "x", "b": "x", "c": "y"}, "i5": {"a": "x", "b": "y", "c": "y"},
             "i6": {"a": "x", "b": "x", "c": "x", "d": "x"},
             "i7": {"a": "z"}, "i8": {"a": [1, 2], "b": [2, 1]}}
    out = scheme_agreement(votes)
    assert out["ties"] == 2  # i2, i8 (i4, i5: 2 to 1)
    assert out["cohen"] == [
        {"annotators": ["a", "b"], "items": 3, "kappa": pytest.approx(
            agreement.cohen_kappa(
                [('"x"', '"x"'), ('"x"', '"y"'), ("[1, 2]", "[2, 1]")]))},
        {"annotators": ["a", "c"], "items": 1, "kappa": None}]
    assert out["more_pairs"] == 0
    assert out["fleiss"] == {"annotators_per_item": 3, "items": 2, "kappa": pytest.approx(
        agreement.fleiss_kappa([[2, 1], [1, 2]]))}
    assert scheme_agreement({}) == {"ties": 0, "cohen": [], "more_pairs": 0, "fleiss": None}
    # pairs with as many items: by their names, whatever they said
    out = scheme_agreement({"i1": {"a": "x", "b": "y"}, "i2": {"a": "x", "c": "x"}})
    assert [c["annotators"] for c in out["cohen"]] == [["a", "b"], ["a", "c"]]


def test_scheme_agreement_keys_values_as_json_and_picks_the_commonest_count():
    from potato.labels.agreement import scheme_agreement
    votes = {"i1": {"a": {"k": 1, "j": 2}, "b": {"j": 2, "k": 1}}}
    assert scheme_agreement(votes)["ties"] == 0
    votes = {"f%d" % i: {"a": "x", "b": "y", "c": "x"} for i in range(2)}
    votes.update({"g%d" % i: {"a": "x", "b": "x", "c": "x", "d": "y"} for i in range(2)})
    out = scheme_agreement(votes)
    assert out["fleiss"]["annotators_per_item"] == 4 and out["fleiss"]["items"] == 2  # a tie: more
    votes["f2"] = {"a": "y", "b": "y", "c": "x"}
    out = scheme_agreement(votes)
    assert out["fleiss"]["annotators_per_item"] == 3 and out["fleiss"]["items"] == 3
    assert out["fleiss"]["kappa"] == pytest.approx(
        agreement.fleiss_kappa([[2, 1], [2, 1], [1, 2]]))


def test_scheme_agreement_shows_the_pairs_with_the_most_items():
    from potato.labels.agreement import MAX_PAIRS, scheme_agreement
    assert MAX_PAIRS == 10
    votes = {}
    for n in range(12):  # pair (a, wNN) has n + 1 items
        for i in range(n + 1):
            votes["p%d-%d" % (n, i)] = {"a": "x", "w%02d" % n: "x" if i else "y"}
    votes["q"] = {"w00": "x", "a": "x"}
    out = scheme_agreement(votes)
    assert [c["annotators"][1] for c in out["cohen"]] == ["w%02d" % n for n in range(11, 1, -1)]
    assert [c["items"] for c in out["cohen"]] == list(range(12, 2, -1))
    assert out["more_pairs"] == 2
    votes["q2"] = {"w01": "x", "a": "x"}  # (a, w00) and (a, w01): 2 and 3 items
    votes["q3"] = {"w00": "x", "a": "x"}
    out = scheme_agreement(votes)
    assert out["more_pairs"] == 2 and out["cohen"][-1]["items"] == 3


def test_summary_per_scheme(tmp_path):
    import json as _json
    from types import SimpleNamespace as NS

    from potato.labels.agreement import summary
    from potato.schemes import make_scheme
    from potato.project.store import Store

    store = Store(str(tmp_path / "potato.db"))
    try:
        store.conn().execute("PRAGMA synchronous=OFF")
        store.sync_items([("i1", "t", {}), ("i2", "t", {}), ("i3", "t", {})])
        with store.tx() as db:
            for item, scheme, who, label in (("i1", "s", "a", "x"), ("i1", "s", "b", "y"),
                                             ("i2", "s", "a", "x"), ("gone", "s", "a", "x"),
                                             ("i1", "t", "a", "free"), ("i1", "u", "a", "x")):
                db.execute("INSERT INTO annotations VALUES (?, ?, ?, ?, 0)",
                           (item, who, scheme, _json.dumps(label)))
        store.sync_items([("i1", "t", {}), ("i2", "t", {}), ("i3", "t", {}), ("i4", "t", {})])
        cfg = NS(schemes=[make_scheme("s", "radio", ["x", "y"]),
                          make_scheme("t", "text", []),
                          make_scheme("l", "likert", []),
                          make_scheme("m", "select", ["x", "y"])])
        out = summary(cfg, store)
    finally:
        store.close()
    assert set(out) == {"s", "t", "l", "m"}
    assert out["s"] == {"ties": 1, "cohen": [{"annotators": ["a", "b"], "items": 1,
                                              "kappa": 0.0}],
                        "more_pairs": 0, "fleiss": None, "items": 4, "labelled": 2,
                        "unlabelled": 2}
    assert out["t"] == {"ties": None, "cohen": [], "more_pairs": 0, "fleiss": None, "items": 4,
                        "labelled": 1, "unlabelled": 3}
    assert out["l"] == {"ties": 0, "cohen": [], "more_pairs": 0, "fleiss": None, "items": 4,
                        "labelled": 0, "unlabelled": 4}
    assert out["m"]["ties"] == 0
