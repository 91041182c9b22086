"""Rating schemes in training, without a server (issue 21 parts 3-4): the held-out figures
(QWK against scikit-learn, Spearman against SciPy, MAE and RMSE by hand), the boundary's check
of Likert points and numbers, what a Likert or number scheme puts in the bundle, how the
write-back policy compares rating runs, the pre-selected suggestion's value, and the report's
page and text."""

import io
import json
import math
import random

import pytest

from potato.schemes import make_scheme
from potato.training.exchange import boundary, ingest
from potato.training.web import rating_cells
from potato.training.reports import report, ratings as report_ratings
from potato.commands import summary
from tests.helpers import beats_baseline
from potato.training.core.view import RunView
from potato.training.web.pages import holdout_section
from potato.training.remote import llm_prompt, trainers

LIKERT = {"rating": {"type": "likert", "labels": [1, 2, 3, 4, 5], "min_label": "Bad",
                     "max_label": "Good"}}
SLIDER = {"temp": {"type": "slider", "labels": [], "min_value": 0, "max_value": 10}}
NUMBER = {"n": {"type": "number", "labels": [], "min_value": None, "max_value": None}}


# -- the figures ------------------------------------------------------------------------------

def test_qwk_by_hand():
    # gold 1,2,3 / predicted 1,3,3 on a 3-point scale: observed disagreement weight 1 (one
    # item off by one); expected from the margins (gold 1,1,1; predicted 1,0,2), with weights
    # (i-j)^2: sum_j p_j * sum_i (i-j)^2 / n = (1*5 + 2*5) / 3 = 5. Kappa: 1 - 1/5.
    pairs = [(1, 1), (3, 2), (3, 3)]
    assert report_ratings.qwk(pairs, [1, 2, 3]) == pytest.approx(0.8)
    assert report_ratings.qwk([(2, 2), (2, 2)], [1, 2, 3]) is None  # nothing to measure
    assert report_ratings.qwk([(1, 3), (3, 1)], [1, 2, 3]) == pytest.approx(-1.0)


def test_qwk_matches_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(3)
    for _ in range(200):
        points = list(range(1, rng.randint(2, 7) + 1))
        pairs = [(rng.choice(points), rng.choice(points)) for _ in range(rng.randint(2, 60))]
        ours = report_ratings.qwk(pairs, points)
        theirs = metrics.cohen_kappa_score([g for _, g in pairs], [p for p, _ in pairs],
                                           weights="quadratic", labels=points)
        if math.isnan(theirs):
            assert ours is None
        else:
            assert ours == pytest.approx(theirs, abs=1e-12)


@pytest.mark.filterwarnings("ignore:An input array is constant")
def test_spearman_matches_scipy_with_ties():
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(4)
    for _ in range(200):
        pairs = [(rng.choice([0, 1, 1.5, 2, 9]), rng.choice([0.1, 3, 3, 7]))
                 for _ in range(rng.randint(2, 40))]
        ours = report_ratings.spearman(pairs)
        theirs = stats.spearmanr([p for p, _ in pairs], [g for _, g in pairs]).statistic
        if math.isnan(theirs):
            assert ours is None
        else:
            assert ours == pytest.approx(theirs, abs=1e-12)


def test_mae_rmse_and_the_number_report():
    pairs = [(1.0, 2.0), (4.0, 2.0), (3.0, 3.0), (0.0, 1.0)]
    assert report_ratings.mae(pairs) == 1.0
    assert report_ratings.rmse(pairs) == pytest.approx(math.sqrt(6 / 4))
    r = report_ratings.number_report(pairs, train_values=[1, 2, 2, 10])
    assert r["n"] == 4 and r["mae"] == 1.0 and r["rmse"] == round(math.sqrt(1.5), 4)
    # the baseline always answers the train median (2): errors 0, 0, 1, 1
    assert r["baseline"] == {"value": 2.0, "mae": 0.5, "rmse": round(math.sqrt(0.5), 4)}
    assert r["mae_below_baseline"] == -0.5
    assert "Only 4 test items" in r["note"]
    warning = report.learned_nothing("temp", r)
    assert warning.startswith("temp: the held-out mean absolute error (1.000) is not below the "
                              "median baseline's (0.500, always answering 2.0)")
    good = report_ratings.number_report([(g, g) for g in range(40)], range(40))
    assert good["mae"] == 0 and good["spearman"] == 1.0 and good["note"] is None
    assert report.learned_nothing("temp", good) is None


def test_likert_report_adds_mae_kappa_and_a_confusion_matrix():
    pairs = [(5, 5), (4, 5), (1, 1), (2, 1), (3, 3), (5, 1)]
    r = report.scheme_report(pairs, [1, 2, 3, 4, 5], "likert", [5, 5, 1])
    assert r["mae"] == round((0 + 1 + 0 + 1 + 0 + 4) / 6, 4)
    assert r["qwk"] == round(report_ratings.qwk(pairs, [1, 2, 3, 4, 5]), 4)
    assert r["accuracy"] == 0.5 and r["baseline"]["label"] == 5
    assert r["confusion"]["labels"] == [1, 2, 3, 4, 5]
    assert r["confusion"]["matrix"][0] == [1, 1, 0, 0, 1]  # gold 1: predicted 1, 2 and 5
    assert set(r["per_label"]) == {1, 2, 3, 4, 5}


def test_holdout_report_of_a_number_scheme_and_of_mixed_schemes():
    items = [{"id": "a", "split": "test", "labels": {"temp": 3, "rating": 2}},
             {"id": "b", "split": "test", "labels": {"temp": 7, "rating": 4}},
             {"id": "c", "split": "train", "labels": {"temp": 5, "rating": 4}}]
    preds = [{"id": "a", "split": "test", "scheme": "temp", "label": 4.0, "confidence": 1.0},
             {"id": "b", "split": "test", "scheme": "temp", "label": 7.5, "confidence": 1.0},
             {"id": "a", "split": "test", "scheme": "rating", "label": 2, "confidence": 0.9},
             {"id": "b", "split": "test", "scheme": "rating", "label": 3, "confidence": 0.9}]
    only = report.holdout_report(preds, items, SLIDER)
    assert only["mae"] == 0.75 and only["baseline"]["value"] == 5 and "accuracy" not in only
    both = report.holdout_report(preds, items, dict(SLIDER, **LIKERT))
    assert both["n"] == 4 and both["accuracy"] == 0.5  # the Likert scheme's alone
    assert both["per_scheme"]["temp"]["mae"] == 0.75
    assert both["per_scheme"]["rating"]["qwk"] is not None
    # The run's text and its page show the figures.
    run = {"run_id": "r1", "status": "success", "holdout": json.loads(json.dumps(both)),
           "schemas": ["temp", "rating"], "ran_on": "local"}
    lines = "\n".join(summary.summary_lines(RunView.from_dict(run)))
    assert "temp: n=2: mean absolute error 0.750, RMSE" in lines
    assert "rating: mean absolute error 0.500 points, quadratic-weighted kappa" in lines
    page = str(holdout_section(RunView.from_dict(run)))
    assert "Spearman correlation" in page and "quadratic-weighted kappa" in page
    one = {"run_id": "r2", "status": "success", "holdout": only, "schemas": ["temp"]}
    one = RunView.from_dict(one)
    assert "Held-out score (test split, n=2)" in "\n".join(summary.summary_lines(one))


# -- constant values: every figure defined, never NaN -------------------------------------------

def _constant_case(case):
    """(items, predictions) of a slider's test split where something is constant."""
    gold = {"constant prediction": lambda i: i % 5, "constant gold": lambda i: 3,
            "both constant": lambda i: 3, "one item": lambda i: 2}[case]
    guess = {"constant prediction": lambda i: 4.0, "constant gold": lambda i: float(i % 5),
             "both constant": lambda i: 3.0, "one item": lambda i: 9.0}[case]
    n = 1 if case == "one item" else 40
    items = [{"id": "t%d" % i, "split": "test", "labels": {"temp": gold(i)}} for i in range(n)]
    items += [{"id": "r%d" % i, "split": "train", "labels": {"temp": 4}} for i in range(5)]
    preds = [{"id": "t%d" % i, "split": "test", "scheme": "temp", "label": guess(i),
              "confidence": 1.0} for i in range(n)]
    return items, preds


@pytest.mark.parametrize("case, mae, rmse, base_mae", [
    ("constant prediction", 2.0, round(math.sqrt(6), 4), 2.0),  # errors 4, 3, 2, 1, 0
    ("constant gold", 1.4, round(math.sqrt(3), 4), 1.0),  # errors 3, 2, 1, 0, 1
    ("both constant", 0.0, 0.0, 1.0),
    ("one item", 7.0, 7.0, 2.0)])
def test_constant_values_give_defined_errors_and_an_undefined_correlation(case, mae, rmse,
                                                                          base_mae):
    """A model that always answers one value (or a test split whose gold values are all the
    same, or a single item) has an error, an RMSE and a baseline; only Spearman's correlation
    is undefined: None in the record (valid JSON, never NaN), "undefined" in the report's
    note, text and page."""
    items, preds = _constant_case(case)
    r = report.holdout_report(preds, items, SLIDER)
    assert json.loads(json.dumps(r, allow_nan=False)) == r
    assert (r["mae"], r["rmse"], r["spearman"]) == (mae, rmse, None)
    assert r["baseline"] == {"value": 4, "mae": base_mae, "rmse": r["baseline"]["rmse"]}
    assert math.isfinite(r["baseline"]["rmse"])
    assert r["mae_below_baseline"] == round(base_mae - mae, 4)
    assert "Spearman's correlation is undefined" in r["note"] or case == "one item"
    run = {"run_id": "r1", "status": "success", "holdout": r, "schemas": ["temp"]}
    text = "\n".join(summary.summary_lines(RunView.from_dict(run)))
    assert "mean absolute error %.3f, RMSE %.3f, Spearman undefined" % (mae, rmse) in text
    page = str(holdout_section(RunView.from_dict(run)))
    assert "Mean absolute error <b>%.3f</b>, RMSE <b>%.3f</b>, Spearman correlation " \
           "<b>undefined</b>, on %d held-out" % (mae, rmse, r["n"]) in page
    assert "nan" not in page.lower() and "nan" not in text.lower()
    assert str(rating_cells.holdout_cell(r)) == 'MAE %.3f <span class="hint">(n=%d)</span>' % (
        mae, r["n"])


def test_a_model_that_always_answers_the_median_learned_nothing():
    items, preds = _constant_case("constant prediction")  # it answers 4, the train median
    r = report.holdout_report(preds, items, SLIDER)
    assert report.learned_nothing("temp", r).startswith(
        "temp: the held-out mean absolute error (2.000) is not below the median baseline's "
        "(2.000, always answering 4)")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), True, "0.5", None,
                                 [1.0]])
def test_a_stored_figure_that_is_not_a_finite_number_is_shown_undefined(bad):
    """The page reads the stored record: a NaN, an infinity, a boolean or a string there
    (a record from an older or broken run) is shown as undefined, never as "nan"."""
    r = {"n": 40, "mae": 0.5, "rmse": bad, "spearman": bad, "note": None,
         "baseline": {"value": bad, "mae": bad}}
    page = str(rating_cells.number_report("temp", r))
    assert "<h3>temp</h3>" in page and "Mean absolute error <b>0.500</b>" in page
    assert page.count("<b>undefined</b>") == 2 and "(undefined)" in page
    assert "of undefined." in page and "nan" not in page.lower() and "inf" not in page
    # without a usable error there is no number report (nor a runs-table cell) at all
    for mae in (bad, float("nan")):
        assert str(rating_cells.number_report("temp", dict(r, mae=mae))) == ""
        assert str(rating_cells.holdout_cell({"mae": mae, "n": 3})) == ""


def test_a_number_report_shows_its_figures_its_note_and_its_count():
    r = {"n": 12, "mae": 0.25, "rmse": 0.5, "spearman": -0.125, "note": "Only <12> items",
         "baseline": {"value": 3.5, "mae": 1}}
    page = str(rating_cells.number_report("a<b", r))
    assert page.startswith("<h3>a&lt;b</h3>")
    assert ("Mean absolute error <b>0.250</b>, RMSE <b>0.500</b>, Spearman correlation "
            "<b>-0.125</b>, on 12 held-out (test split) items. Always answering the train median "
            "(3.500) would have a mean absolute error of 1.000.") in page
    assert page.endswith('<p class="warning report-note" role="note">Only &lt;12&gt; items</p>')
    assert str(rating_cells.number_report("t", dict(r, note=None))).endswith(
        "would have a mean absolute error of 1.000.</p>")  # no note after it
    assert "on 0 held-out" in str(rating_cells.number_report("t", dict(r, n=None)))
    assert "on 7 held-out" in str(rating_cells.number_report("t", dict(r, n=7.9)))
    assert "(undefined)" in str(rating_cells.number_report("t", dict(r, baseline=[3.5])))
    assert str(rating_cells.number_report("t", dict(r, accuracy=0.5))) == ""  # a choice report
    assert str(rating_cells.holdout_cell({"mae": 2, "n": 7.9})) == (
        'MAE 2.000 <span class="hint">(n=7)</span>')
    assert str(rating_cells.holdout_cell({"mae": 2})) == 'MAE 2.000 <span class="hint">(n=0)</span>'


def test_a_likert_report_adds_its_error_and_kappa_and_others_nothing():
    line = str(rating_cells.ordinal_line({"mae": 0.5, "qwk": float("nan")}))
    assert line.startswith('<p class="report-ordinal">Mean absolute error <b>0.500</b> points; '
                           "quadratic-weighted kappa <b>undefined</b>")
    assert "<b>0.750</b>" in str(rating_cells.ordinal_line({"mae": 1, "qwk": 0.75}))
    assert str(rating_cells.ordinal_line({"mae": 0.5, "accuracy": 0.5})) == ""


# -- the boundary -------------------------------------------------------------------------------

def check(schemas, label, scheme=None):
    scheme = scheme or next(iter(schemas))
    line = json.dumps({"id": "i1", "split": "test", "scheme": scheme, "label": label,
                       "confidence": 1.0})
    rows, problem = boundary.predictions(io.StringIO(line), {"i1": "test"}, schemas)
    return rows[0]["label"] if rows else problem


@pytest.mark.parametrize("label", ["3", 0, 6, 2.5, True, None, [3], {"p": 3}, -1, 10 ** 30])
def test_a_likert_prediction_must_be_a_point(label):
    assert "is not a point of rating's scale (1 to 5)" in check(LIKERT, label)


def test_likert_points_pass_as_integers():
    assert check(LIKERT, 4) == 4 and check(LIKERT, 4.0) == 4
    assert isinstance(check(LIKERT, 4.0), int)


@pytest.mark.parametrize("label, problem", [
    (10.5, "outside 0..10"), (-0.01, "outside 0..10"), ("5", "must be a number"),
    (True, "must be a number"), (None, "label is missing"), ([5], "must be a number")])
def test_a_slider_prediction_must_be_a_number_in_range(label, problem):
    assert problem in check(SLIDER, label)


def test_numbers_not_finite_or_too_large_are_refused():
    for raw in ("NaN", "Infinity", "-Infinity"):
        line = '{"id": "i1", "split": "test", "scheme": "n", "label": %s, "confidence": 1}' % raw
        rows, problem = boundary.predictions(io.StringIO(line), {"i1": "test"}, NUMBER)
        assert rows == [] and "is not a number JSON allows" in problem
    assert "outside" in check(NUMBER, 1e16)
    assert check(NUMBER, -3.25) == -3.25 and check(SLIDER, 10) == 10


# -- the bundle's schema entry, the suggestion's value, the prompt ------------------------------

def test_training_schema_of_each_rating_kind():
    likert = make_scheme("rating", "likert", [], size=4, min_label="No", max_label="Yes")
    assert likert.kind.training_schema() == {"labels": [1, 2, 3, 4], "min_label": "No",
                                             "max_label": "Yes"}
    slider = make_scheme("temp", "slider", [], min_value=0, max_value=10, step=0.5)
    assert slider.kind.training_schema() == {"labels": [], "min_value": 0, "max_value": 10}
    radio = make_scheme("s", "radio", ["a", "b"])
    assert radio.kind.training_schema() == {"labels": ["a", "b"]}


def test_preselected_values():
    likert = make_scheme("rating", "likert", [], size=5)
    assert likert.kind.preselect(4) == "4" and likert.kind.preselect(9) is None
    slider = make_scheme("temp", "slider", [], min_value=0, max_value=10, step=0.5)
    assert slider.kind.preselect(3.3) == "3.5" and slider.kind.preselect(7.24) == "7"
    assert slider.kind.preselect(float("nan")) is None
    number = make_scheme("n", "number", [], min_value=None, max_value=None)
    assert number.kind.preselect(-3.25) == "-3.25"
    assert make_scheme("s", "radio", ["a"]).kind.preselect("a") is None  # accepted with A
    assert make_scheme("w", "text", []).kind.preselect("words") is None


def test_the_llm_prompt_names_the_points_and_the_ends():
    schema = dict(LIKERT["rating"], type="likert")
    prompt = llm_prompt.render(llm_prompt.DEFAULT_TEMPLATE, "rating", schema["labels"], "txt",
                               llm_prompt.scale_note(schema))
    assert "Answer with one of: 1, 2, 3, 4, 5." in prompt
    assert "1 means Bad; 5 means Good." in prompt
    assert llm_prompt.answer(3) == " 3"
    assert llm_prompt.scale_note({"type": "radio", "labels": ["a"]}) == ""


def test_which_trainer_takes_which_rating_scheme():
    def takes(kind):
        return sorted(n for n, info in trainers.REGISTRY.items() if kind in info.schema_types)

    assert takes("likert") == ["hf-llm-classification", "hf-text-classification",
                               "text-naive-bayes"]
    assert takes("slider") == takes("number") == ["hf-text-regression"]
    assert takes("text") == []
    assert trainers.annotate_only("text").startswith("no trainer trains text schemes: they are "
                                                     "annotate-only")
    assert trainers.annotate_only("likert") == ""


# -- write-back: which run's suggestions annotators see -----------------------------------------

class _Store:
    def __init__(self, current, holdout, pinned=0):
        self.row = (json.dumps(holdout), pinned)
        self.current = current

    def conn(self):
        store = self

        class Conn:
            def execute(self, sql, args):
                class Rows:
                    def fetchone(self):
                        return (store.current,) if "in_use" in sql else store.row
                return Rows()
        return Conn()


class _Cfg:
    class model_training:
        class writeback:
            policy = "best"
            tolerance = 0.01


@pytest.mark.parametrize("old, new, take, words", [
    ({"qwk": 0.6, "macro_f1": 0.9}, {"qwk": 0.7, "macro_f1": 0.1}, True,
     "held-out quadratic-weighted kappa 0.700 is not below r1's 0.600"),
    ({"qwk": 0.6, "macro_f1": 0.1}, {"qwk": 0.5, "macro_f1": 0.9}, False,
     "held-out quadratic-weighted kappa 0.500 is below r1's 0.600 by more than"),
    ({"mae": 2.0}, {"mae": 1.5}, True, "held-out MAE 1.500 is not above r1's 2.000"),
    ({"mae": 2.0}, {"mae": 2.005}, True, "held-out MAE 2.005 is above r1's 2.000 but within"),
    ({"mae": 2.0}, {"mae": 2.5}, False, "held-out MAE 2.500 is above r1's 2.000 by more than"),
    ({"mae": 2.0}, {}, False, "run r2 has no held-out score; r1 (MAE 2.000) stays in use"),
    ({"macro_f1": 0.8}, {"macro_f1": 0.7}, False,
     "held-out macro-F1 0.700 is below r1's 0.800 by more than")])
def test_best_policy_compares_kappa_for_likert_and_mae_for_numbers(old, new, take, words):
    took, why = ingest.takes_over(_Store("r1", old), _Cfg, "r2", "s", beats_baseline(new))
    assert took is take and words in why
