"""The cells of a run's page and of the runs table (run_cells.py): the model in use and the
pin, with a button only where the action can work and the reason in place otherwise; the
admin's message line; a span scheme's held-out report and its entity F1 in the runs table;
the metrics table. Every value a run or a worker wrote is escaped, and a figure that is not a
number reads as 0."""

import html
import re

import pytest

from potato.training.core.view import RunView
from potato.training.web import run_cells
from tests.helpers import Elements


def text(markup):
    """What a reader sees: the tags dropped, entities read, spaces collapsed."""
    words = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())
    return re.sub(r" ([,;.)])", r"\1", words)


def tags(markup):
    p = Elements()
    p.feed(markup)
    return p.tags


def forms(markup):
    return [a["action"] for t, a in tags(markup) if t == "form"]


def buttons(markup):
    return [a.get("id") for t, a in tags(markup) if t == "button"]


def run(**kw):
    """A run's view as the API's JSON; ``use_refusal``: in_use.use_refusal's sentence."""
    return dict({"run_id": "r7", "status": "success"}, **kw)


def in_use_cell(view):
    return run_cells.in_use_cell(RunView.from_dict(view), view.get("use_refusal", ""))


def pin_cell(view):
    return run_cells.pin_cell(RunView.from_dict(view), view.get("use_refusal", ""))


def runs_table_marks(view):
    return run_cells.runs_table_marks(RunView.from_dict(view))


# -- in use ---------------------------------------------------------------------------------------

def test_a_run_in_use_names_its_schemes_and_offers_no_button():
    out = in_use_cell(run(in_use=["who", "<b>x</b>"]))
    assert text(out).startswith("in use for who, <b>x</b>")
    assert "<b>x</b>" not in out and forms(out) == [] and buttons(out) == []
    assert [a.get("class") for t, a in tags(out) if t == "b"] == ["in-use-badge"]


def test_a_successful_run_not_in_use_offers_the_use_button():
    out = in_use_cell(run(run_id="r<9>", in_use=[], use_refusal=""))
    assert forms(out) == ["/admin/training/runs/r<9>/use"] and "r<9>" not in out
    assert buttons(out) == ["use-run"] and text(out).startswith("Use this model")


@pytest.mark.parametrize("view, says", [
    (run(use_refusal="its labels are <old>"), "no its labels are <old>"),
    (run(status="error"), "no"),
    (run(status="running", use_refusal="it is still running"), "no it is still running"),
])
def test_a_run_that_cannot_be_used_says_why_in_place_of_the_button(view, says):
    out = in_use_cell(view)
    assert text(out) == says and forms(out) == [] and buttons(out) == []
    assert [a.get("id") for t, a in tags(out) if t == "span"] == ["use-refusal"]
    assert "<old>" not in out


# -- the pin --------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", ["error", "running", "cancelled"])
def test_only_a_successful_run_can_be_pinned(status):
    assert pin_cell(run(status=status, pinned=True)) == ""
    assert pin_cell(run(status=status)) == ""


def test_a_pinned_run_offers_unpin_and_says_what_a_pin_does():
    out = pin_cell(run(run_id="r&1", pinned=True))
    assert forms(out) == ["/admin/training/runs/r&1/unpin"] and buttons(out) == ["unpin-run"]
    assert text(out).startswith("pinned Unpin ") and run_cells.PIN_HINT in text(out)
    assert [a.get("class") for t, a in tags(out) if t == "b"] == ["pinned-badge"]


@pytest.mark.parametrize("view, word", [
    (run(), "Use and pin"),  # pinning it also puts it in use
    (run(in_use=["who"]), "Pin"),
    (run(use_refusal="its scheme is gone"), "Pin"),  # it cannot be used: only pinned
])
def test_an_unpinned_run_offers_pin_or_use_and_pin(view, word):
    out = pin_cell(view)
    assert forms(out) == ["/admin/training/runs/r7/pin"] and buttons(out) == ["pin-run"]
    assert text(out) == "not pinned %s %s" % (word, run_cells.PIN_HINT)


# -- the message line -----------------------------------------------------------------------------

def test_the_message_line_is_there_when_empty_and_says_ok_or_error():
    empty = run_cells.message_box("", True)
    assert tags(empty) == [("div", {"id": "message", "role": "alert"})] and text(empty) == ""
    ok = run_cells.message_box("Run <r1> is in use.", True)
    assert tags(ok) == [("div", {"id": "message", "role": "alert", "class": "ok"})]
    assert text(ok) == "Run <r1> is in use." and "<r1>" not in ok
    bad = run_cells.message_box("Run r1 cannot be used.", False)
    assert tags(bad)[0][1]["class"] == "error" and text(bad) == "Run r1 cannot be used."


# -- the runs table's marks -----------------------------------------------------------------------

def test_the_runs_table_marks_in_use_and_pinned_runs():
    assert runs_table_marks(run()) == ""
    both = runs_table_marks(run(in_use=["who", "<i>"], pinned=True))
    assert text(both) == "in use: who, <i> pinned" and "<i>" not in both
    assert [a["class"] for t, a in tags(both)] == ["badge in-use-badge", "badge pinned-badge"]
    assert [a["title"] for t, a in tags(both)][1] == run_cells.PIN_HINT
    pinned = runs_table_marks(run(pinned=True))
    assert text(pinned) == "pinned"
    in_use = runs_table_marks(run(in_use=["who"]))
    assert text(in_use) == "in use: who"


# -- a span scheme's report -----------------------------------------------------------------------

REPORT = {"kind": "span", "n": 60, "entities": 120, "predicted": 110, "precision": 0.8,
          "recall": 0.73333, "micro_f1": 0.76522, "macro_f1": 0.5,
          "per_label": {"person": {"precision": 0.9, "recall": 0.81818, "f1": 0.86124,
                                   "support": 99, "predicted": 90},
                        "<place>": {"precision": 0.4, "recall": 0.38095, "f1": 0.39024,
                                    "support": 21, "predicted": 20}},
          "note": None}


def rows(markup):
    body = markup.split("<tbody>")[1].split("</tbody>")[0]
    return [text(r) for r in body.split("</tr>") if text(r)]


def test_a_span_report_shows_the_entity_figures_and_a_row_per_label():
    out = run_cells.span_report("who", REPORT)
    head = text(out.split("<table")[0])
    assert head == ("who Entity-level (exact span and label) micro precision 0.800, recall "
                    "0.733, F1 0.765 (macro-F1 over labels 0.500), on 120 human spans in 60 "
                    "held-out (test split) items; the model marked 110.")
    assert rows(out) == ["person 0.900 0.818 0.861 99 90", "<place> 0.400 0.381 0.390 21 20"]
    assert "<place>" not in out and 'role="note"' not in out
    assert text(out.split("<tbody>")[0].split("<thead>")[1]) == \
        "Label Precision Recall F1 Support Predicted"


def test_a_span_reports_note_is_shown_escaped():
    out = run_cells.span_report("who", dict(REPORT, note="Only 3 <b>spans</b>."))
    notes = [a for t, a in tags(out) if t == "p" and a.get("role") == "note"]
    assert notes == [{"class": "warning report-note", "role": "note"}]
    assert "Only 3 &lt;b&gt;spans&lt;/b&gt;." in out


@pytest.mark.parametrize("bad", [None, "0.9", True, [1], {"x": 1}])
def test_a_span_report_reads_a_figure_that_is_not_a_number_as_zero(bad):
    r = {k: bad for k in ("n", "entities", "predicted", "precision", "recall", "micro_f1",
                          "macro_f1")}
    r["per_label"] = {"person": {k: bad for k in ("precision", "recall", "f1", "support",
                                                  "predicted")}}
    out = run_cells.span_report("<who>", r)
    assert text(out.split("<table")[0]) == (
        "<who> Entity-level (exact span and label) micro precision 0.000, recall 0.000, F1 "
        "0.000 (macro-F1 over labels 0.000), on 0 human spans in 0 held-out (test split) "
        "items; the model marked 0.")
    assert rows(out) == ["person 0.000 0.000 0.000 0 0"]


def test_a_span_report_with_no_usable_labels_has_an_empty_table():
    for per_label in (None, "person", ["person"], {"person": 0.5, "place": None}):
        out = run_cells.span_report("who", dict(REPORT, per_label=per_label))
        assert rows(out) == [] and "<tbody></tbody>" in out
    one = run_cells.span_report("who", dict(REPORT, per_label={"person": 1, "place": {}}))
    assert rows(one) == ["place 0.000 0.000 0.000 0 0"]


def test_the_runs_table_shows_a_span_runs_entity_f1_and_its_test_items():
    assert text(run_cells.span_holdout_cell({"micro_f1": 0.76522, "n": 60})) == \
        "entity micro-F1 0.765 (n=60)"
    assert text(run_cells.span_holdout_cell({"micro_f1": 1, "n": 3})) == "entity micro-F1 1.000 (n=3)"
    for bad in ({}, {"micro_f1": "0.9", "n": "60"}, {"micro_f1": None, "n": 6.0}):
        assert text(run_cells.span_holdout_cell(bad)) == "entity micro-F1 0.000 (n=0)"


# -- metrics --------------------------------------------------------------------------------------

def test_metric_names_are_said_in_words_with_their_scheme():
    assert run_cells.metric_name("val_accuracy") == \
        "validation accuracy (val split, seen while training)"
    assert run_cells.metric_name("sentiment.val_accuracy") == \
        "sentiment: validation accuracy (val split, seen while training)"
    assert run_cells.metric_name("a.b.train_loss") == "a.b: training loss (last epoch)"
    assert run_cells.metric_name("train_seconds") == "training time, seconds"
    assert run_cells.metric_name("who.predictions") == "who: predictions made"
    assert run_cells.metric_name("sentiment.train_items") == \
        "sentiment: items trained on (train split)"
    # a name it does not know, in words: its scheme before a colon, underscores as spaces
    assert run_cells.metric_name("xval_accuracy") == "xval accuracy"
    assert run_cells.metric_name("sentiment.best_epoch") == "sentiment: best epoch"
    assert run_cells.metric_name("val_accuracy.x") == "val_accuracy: x"
    for other in ("loss", ""):
        assert run_cells.metric_name(other) == other


def test_metric_values_are_short_and_a_non_finite_one_is_said_as_it_is():
    assert run_cells.metric_text(0.912345678) == "0.9123"
    assert run_cells.metric_text(123456.0) == "1.235e+05"
    assert run_cells.metric_text(12) == "12"
    assert run_cells.metric_text(float("nan")) == "nan"
    assert run_cells.metric_text(float("inf")) == "inf"
    assert run_cells.metric_text("<b>") == "<b>"


def test_the_metrics_table_lists_the_metrics_by_key_in_words():
    out = run_cells.metrics_table(RunView(metrics={"who.val_accuracy": 0.5, "a<b": "<x>",
                                                   "train_loss": 0.123456}))
    assert [text(r) for r in out.split("</tr>") if text(r)] == [
        "a<b <x>", "training loss (last epoch) 0.1235",
        "who: validation accuracy (val split, seen while training) 0.5"]
    assert "<x>" not in out and out.startswith('<table class="metrics">')
    for metrics in (None, {}, [["a", 1]], "a"):
        assert run_cells.metrics_table(RunView(metrics=metrics)) == ""
