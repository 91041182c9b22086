"""Shares of a total (potato/schemes/allocation.py): upstream's constant_sum and soft_label
blocks load with their keys, bad configs are named, posted shares are checked with hostile
input (unknown labels, NaN, negatives, wrong sums, strings, huge objects), the form's boxes
are read, the page shows the boxes and the "left" line (escaped), export cells in our format
and upstream's, aggregation (the mean per label), and training's refusal."""

import json

import pytest

from potato.commands.cli import main
from potato.config.settings import load
from potato.labels import aggregate
from potato.labels.annotations import LabelError, check_label, open_store
from potato.schemes import kind_class
from potato.training.remote import trainers

CONSTANT = """\
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: constant_sum
    name: topics
    description: Share 100 points by relevance
    labels: [Politics, Technology, Sports]
    total_points: 100
    min_per_item: 0
    input_type: number
"""

SOFT = """\
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: soft_label
    name: sentiment
    labels: [Positive, Neutral, Negative]
    total: 1
    min_per_label: 0.1
    show_distribution_chart: true
"""


def project(tmp_path, config, name="c.yaml"):
    (tmp_path / "items.jsonl").write_text('{"id": "a1", "text": "one"}\n'
                                          '{"id": "a2", "text": "two"}\n')
    (tmp_path / name).write_text(config)
    return str(tmp_path / name)


def scheme_of(tmp_path, config):
    cfg, errors, warnings = load(project(tmp_path, config))
    assert errors == [], [e.message for e in errors]
    return cfg.schemes[0], warnings


def errors_of(tmp_path, config):
    _, errors, _ = load(project(tmp_path, config))
    return " | ".join(e.message for e in errors)


# -- config ----------------------------------------------------------------------------------------

def test_upstreams_blocks_load_with_their_totals(tmp_path):
    s, warnings = scheme_of(tmp_path, CONSTANT)
    assert warnings == [] and s.annotation_type == "constant_sum"
    assert s.kind.summary() == "100 shared over Politics, Technology, Sports"
    soft, warnings = scheme_of(tmp_path, SOFT)
    assert warnings == []
    assert soft.kind.summary() == "1 shared over Positive, Neutral, Negative, at least 0.1 each"


def test_defaults_are_upstreams(tmp_path):
    s, _ = scheme_of(tmp_path, "data_files: [items.jsonl]\nannotation_schemes:\n"
                               "  - {annotation_type: soft_label, name: s, labels: [a, b]}\n")
    assert s.kind.summary() == "100 shared over a, b"
    assert check_label(s, {"a": 100, "b": 0}) == {"a": 100, "b": 0}


def test_slider_input_type_is_accepted_as_number_boxes(tmp_path):
    s, warnings = scheme_of(tmp_path, CONSTANT.replace("input_type: number",
                                                        "input_type: slider"))
    assert warnings == [] and 'type="number"' in s.kind.inputs(None, 1)


@pytest.mark.parametrize("config,message", [
    (CONSTANT.replace("total_points: 100", "total_points: 0"),
     "total_points is 0; give the total to share out, more than 0"),
    (CONSTANT.replace("total_points: 100", "total_points: .nan"), "must be a finite number"),
    (CONSTANT.replace("total_points: 100", "total_points: lots"), "must be a number"),
    (CONSTANT.replace("min_per_item: 0", "min_per_item: -5"), "a share cannot be negative"),
    (CONSTANT.replace("min_per_item: 0", "min_per_item: 40"),
     "min_per_item (40) times the 3 labels is more than total_points (100), so no answer is "
     "possible; lower min_per_item to at most 33.33333333"),
    (CONSTANT.replace("input_type: number", "input_type: dial"),
     "input_type is 'dial'; give number or slider"),
    (CONSTANT.replace("labels: [Politics, Technology, Sports]", "labels: [Politics]"),
     "shares the total over one label"),
    (CONSTANT.replace("    labels: [Politics, Technology, Sports]\n", ""),
     "needs a non-empty list of labels"),
    (SOFT.replace("total: 1", "total_points: 1"), "total_points"),
])
def test_bad_blocks_are_named(tmp_path, config, message):
    assert message in errors_of(tmp_path, config)


# -- values ----------------------------------------------------------------------------------------

def test_shares_are_stored_with_every_label_in_order(tmp_path):
    s, _ = scheme_of(tmp_path, CONSTANT)
    assert check_label(s, {"Sports": 30, "Politics": 70.0}) == {
        "Politics": 70, "Technology": 0, "Sports": 30}
    assert check_label(s, {"Politics": 33.3, "Technology": 33.3, "Sports": 33.4}) == {
        "Politics": 33.3, "Technology": 33.3, "Sports": 33.4}
    for empty in (None, "", {}):
        assert check_label(s, empty) is None


def test_a_sum_with_fractions_may_be_off_by_a_millionth_of_the_total(tmp_path):
    soft, _ = scheme_of(tmp_path, SOFT)
    assert check_label(soft, {"Positive": 0.1, "Neutral": 0.2, "Negative": 0.7})
    assert check_label(soft, {"Positive": 0.2, "Neutral": 0.2, "Negative": 0.6000009})
    with pytest.raises(LabelError, match="add up to 1.000002, not 1: 2e-06 too many"):
        check_label(soft, {"Positive": 0.2, "Neutral": 0.2, "Negative": 0.600002})


@pytest.mark.parametrize("value,message", [
    ({"Politics": 50, "Technology": 40}, "add up to 90, not 100: 10 left to give."),
    ({"Politics": 80, "Technology": 40}, "add up to 120, not 100: 20 too many."),
    ({"Politics": 100, "Religion": 0}, "'Religion' is not one of its labels"),
    ({"Politics": 110, "Technology": -10}, "'Technology' gets -10; each label gets at least 0"),
    ({"Politics": float("nan"), "Sports": 100}, "takes a finite number, not nan"),
    ({"Politics": float("inf")}, "takes a finite number, not inf"),
    ({"Politics": 1e300}, "too large"),
    ({"Politics": "100"}, "takes a number for 'Politics', not '100'"),
    ({"Politics": True}, "takes a number for 'Politics', not True"),
    ({"Politics": [100]}, "not [100]"),
    ({"Politics": {"x": 1}}, "not {'x': 1}"),
    ([100, 0, 0], "takes an object of {label: number} (labels: Politics, Technology, Sports)"),
    ("Politics", "not 'Politics'"),
    (100, "not 100"),
    ({f"l{n}": 1 for n in range(100000)}, "has 100000 shares; it has 3 labels"),
    ({"<script>": 100}, "'<script>' is not one of its labels"),
])
def test_hostile_shares_are_refused_naming_the_scheme(tmp_path, value, message):
    s, _ = scheme_of(tmp_path, CONSTANT)
    with pytest.raises(LabelError) as e:
        check_label(s, value)
    assert "scheme 'topics' (constant_sum)" in str(e.value) and message in str(e.value)


def test_the_minimum_per_label_is_kept(tmp_path):
    soft, _ = scheme_of(tmp_path, SOFT)
    with pytest.raises(LabelError, match="'Neutral' gets 0; each label gets at least 0.1"):
        check_label(soft, {"Positive": 0.5, "Negative": 0.5})


def test_the_form_holds_one_box_per_label(tmp_path):
    s, _ = scheme_of(tmp_path, CONSTANT)
    assert s.kind.from_form([]) is None and s.kind.from_form(["", " ", ""]) is None
    assert check_label(s, s.kind.from_form(["60", "", "40"])) == {
        "Politics": 60, "Technology": 0, "Sports": 40}  # a blank box is 0
    assert check_label(s, s.kind.from_form(["33.3", "33.3", "33.4"]))["Sports"] == 33.4
    for bad, message in ((["nan", "50", "50"], "finite"), (["1e999", "0", "0"], "finite"),
                         (["12abc", "88", "0"], "not '12abc'"), (["100", "0"], "takes an object")):
        with pytest.raises(LabelError, match=message):
            check_label(s, s.kind.from_form(bad))


# -- the page ------------------------------------------------------------------------------------

def test_the_page_has_a_box_per_label_and_the_left_line(tmp_path):
    s, _ = scheme_of(tmp_path, CONSTANT.replace("Sports]", '"<b>Sports</b>"]'))
    page = s.kind.fieldset(None, 1)
    assert s.kind.script == "allocation.js" and s.kind.key_count() == 0
    assert page.count('type="number" name="label:topics"') == 3
    assert 'data-share="&lt;b&gt;Sports&lt;/b&gt;"' in page and "<b>" not in page
    assert "<output>100</output> of 100 left" in page and "style=" not in page
    again = s.kind.inputs({"Politics": 70, "Technology": 0, "<b>Sports</b>": 20}, 1)
    assert 'value="70"' in again and "<output>10</output> of 100 left" in again


# -- export, upstream's output, aggregation, training -------------------------------------------

def test_cells_and_upstreams_entries_round_trip(tmp_path):
    s, _ = scheme_of(tmp_path, CONSTANT)
    value = {"Politics": 70, "Technology": 0.5, "Sports": 29.5}
    assert json.loads(s.kind.cell(value)) == value and s.kind.cell(None) == ""
    entry = s.kind.upstream_cell(value)
    assert entry == {"Politics": "70", "Technology": "0.5", "Sports": "29.5"}
    assert check_label(s, s.kind.from_upstream_cell(entry)) == value
    with pytest.raises(LabelError):
        check_label(s, s.kind.from_upstream_cell({"Politics": "lots"}))


def test_annotators_shares_aggregate_as_the_mean_per_label():
    votes = {"a1": {"ann": {"x": 60, "y": 40}, "bob": {"x": 20, "y": 80}},
             "a2": {"ann": {"x": 100, "y": 0}}}
    for kind in ("constant_sum", "soft_label"):
        result = aggregate.aggregate(kind, votes)
        assert result.method == "mean_per_label"
        assert result.labels == {"a1": {"x": 40, "y": 60}, "a2": {"x": 100, "y": 0}}
        assert not kind_class(kind).one_label  # no kappa over shares


def test_no_trainer_trains_shares():
    for kind in ("constant_sum", "soft_label"):
        assert trainers.annotate_only(kind).startswith(f"no trainer trains {kind} schemes")
        assert kind_class(kind).ranks_by is None


def test_shares_go_to_upstreams_layout_and_back(tmp_path, capsys):
    path = project(tmp_path, CONSTANT)
    answer = {"Politics": 50, "Technology": 25, "Sports": 25}
    (tmp_path / "l.jsonl").write_text(json.dumps({"id": "a1", "topics": answer}) + "\n")
    assert main(["annotations", "import", path, str(tmp_path / "l.jsonl"),
                 "--annotator", "ana"]) == 0
    out = tmp_path / "out"
    assert main(["annotations", "export", path, "--format", "upstream", "-o", str(out)]) == 0
    [row] = map(json.loads, open(out / "ana" / "annotated_instances.jsonl"))
    assert row["label_annotations"]["topics"] == {"Politics": "50", "Technology": "25",
                                                  "Sports": "25"}
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    again = project(fresh, CONSTANT)
    capsys.readouterr()
    assert main(["annotations", "import", again, str(out), "--format", "upstream"]) == 0, \
        capsys.readouterr().err
    cfg, _, _ = load(again)
    store = open_store(cfg)
    try:
        assert store.labels_of("ana", "a1") == {"topics": answer}
    finally:
        store.close()
