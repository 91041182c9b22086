"""A range on a scale (potato/schemes/ranges.py): upstream's range_slider block loads with its
keys, bad configs are named, a posted range is checked with hostile input (low above high,
off the scale or its steps, NaN, strings, wrong shapes), the two hidden fields are read, the
page's two thumbs (escaped), export cells in our format and upstream's, aggregation (the
median of each end), and training's refusal."""

import json

import pytest

from potato.config.settings import load
from potato.labels import aggregate
from potato.labels.annotations import LabelError, check_label
from potato.schemes import kind_class
from potato.training.remote import trainers

RANGE = """\
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: range_slider
    name: formality
    description: Which range of formality fits?
    min_value: 0
    max_value: 100
    step: 5
    left_label: Very informal
    right_label: Very formal
    show_values: true
"""


def scheme_of(tmp_path, config):
    (tmp_path / "items.jsonl").write_text('{"id": "r1", "text": "one"}\n')
    (tmp_path / "c.yaml").write_text(config)
    cfg, errors, warnings = load(str(tmp_path / "c.yaml"))
    assert errors == [], [e.message for e in errors]
    return cfg.schemes[0], warnings


def errors_of(tmp_path, config):
    (tmp_path / "items.jsonl").write_text('{"id": "r1", "text": "one"}\n')
    (tmp_path / "c.yaml").write_text(config)
    return " | ".join(e.message for e in load(str(tmp_path / "c.yaml"))[1])


def test_upstreams_block_loads(tmp_path):
    s, warnings = scheme_of(tmp_path, RANGE)
    assert warnings == [] and s.annotation_type == "range_slider" and s.labels == []
    assert s.kind.summary() == ("a range within 0 to 100 in steps of 5 (Very informal to "
                                "Very formal)")


@pytest.mark.parametrize("change,message", [
    (("max_value: 100", "max_value: 0"), "max_value (0) must be more than min_value (0)"),
    (("step: 5", "step: 0"), "step is 0: give a step more than 0"),
    (("step: 5", "step: 1.0e-12"), "at most 1e+09 steps"),
    (("show_values: true", "show_values: maybe"), "show_values"),
    (("show_values: true", "default_low: 7"), "default_low (7) must be a value the slider can "
                                              "take: from 0 to 100 in steps of 5"),
    (("show_values: true", "default_high: 200"), "default_high (200) must be a value"),
    (("show_values: true", "default_low: 80\n    default_high: 20"),
     "default_low (80) is above default_high (20); swap them"),
    (("show_values: true", "labels: [a, b]"), "takes no labels"),
    (("show_values: true", "min: 3"), "min"),
])
def test_bad_blocks_are_named(tmp_path, change, message):
    assert message in errors_of(tmp_path, RANGE.replace(*change))


def test_a_range_is_two_ends_on_the_steps(tmp_path):
    s, _ = scheme_of(tmp_path, RANGE)
    assert check_label(s, [20, 75.0]) == [20, 75]
    assert check_label(s, [40, 40]) == [40, 40]  # a point is a range too
    assert check_label(s, [0, 100]) == [0, 100]
    for empty in (None, "", []):
        assert check_label(s, empty) is None


@pytest.mark.parametrize("value,message", [
    ([80, 20], "low (80) is above high (20)"),
    ([-5, 20], "low is -5, outside 0 to 100"),
    ([0, 105], "high is 105, outside 0 to 100"),
    ([0, 7], "7 is not on the range's steps of 5 from 0"),
    ([float("nan"), 5], "takes a finite number, not nan"),
    ([0, float("inf")], "takes a finite number, not inf"),
    (["10", "20"], "takes a number from 0 to 100 as low, not '10'"),
    ([True, 5], "not True"),
    ([10], "takes a range [low, high] of two numbers from 0 to 100, not [10]"),
    ([10, 20, 30], "not [10, 20, 30]"),
    ({"range_low": 10, "range_high": 20}, "takes a range [low, high]"),
    (50, "not 50"),
    ("<b>10-20</b>", "not '<b>10-20</b>'"),
    ([[10], [20]], "not [10]"),
])
def test_hostile_ranges_are_refused_naming_the_scheme(tmp_path, value, message):
    s, _ = scheme_of(tmp_path, RANGE)
    with pytest.raises(LabelError) as e:
        check_label(s, value)
    assert "scheme 'formality' (range_slider)" in str(e.value) and message in str(e.value)


def test_the_form_holds_the_two_hidden_fields(tmp_path):
    s, _ = scheme_of(tmp_path, RANGE)
    assert s.kind.from_form([]) is None and s.kind.from_form(["", ""]) is None
    assert check_label(s, s.kind.from_form(["25", "60"])) == [25, 60]
    for bad, message in ((["60", "25"], "above"), (["nan", "5"], "finite"),
                         (["5", ""], "as high, not None"), (["1", "2", "3"], "two numbers")):
        with pytest.raises(LabelError, match=message):
            check_label(s, s.kind.from_form(bad))


def test_the_page_has_two_thumbs_set_only_when_moved(tmp_path):
    s, _ = scheme_of(tmp_path, RANGE.replace("Very formal", '"<b>formal</b>"'))
    unset = s.kind.fieldset(None, 1)
    assert s.kind.script == "range.js" and s.kind.key_count() == 0
    assert 'type="range" data-range-end="low"' in unset and 'data-range-end="high"' in unset
    assert 'min="0" max="100" step="5" value="0"' in unset and 'value="100"' in unset
    assert unset.count('<input type="hidden" name="label:formality" value="">') == 2
    assert "&lt;b&gt;formal&lt;/b&gt;" in unset and "<b>" not in unset and "style=" not in unset
    shown = s.kind.inputs([20, 45], 1)
    assert '<input type="hidden" name="label:formality" value="20">' in shown
    assert "20 – 45" in shown and 'class="hint range-unset" hidden' in shown
    hidden, _ = scheme_of(tmp_path, RANGE.replace("show_values: true", "show_values: false\n"
                                                  "    default_low: 25\n    default_high: 75"))
    page = hidden.kind.inputs(None, 1)
    assert '<output class="range-values" hidden>' in page and 'value="25"' in page


def test_cells_and_upstreams_entries_round_trip(tmp_path):
    s, _ = scheme_of(tmp_path, RANGE)
    assert s.kind.cell([20, 45]) == "[20, 45]" and s.kind.cell(None) == ""
    entry = s.kind.upstream_cell([20, 45])
    assert entry == {"range_low": "20", "range_high": "45"}
    assert check_label(s, s.kind.from_upstream_cell(entry)) == [20, 45]
    for bad in ({"range_low": "20"}, {"range_low": "x", "range_high": "5"}):
        with pytest.raises(LabelError):
            check_label(s, s.kind.from_upstream_cell(bad))


def test_annotators_ranges_aggregate_as_the_median_of_each_end():
    votes = {"r1": {"a": [10, 40], "b": [20, 90], "c": [30, 50]}, "r2": {"a": [0, 100]},
             "r3": {}}
    result = aggregate.aggregate("range_slider", votes)
    assert result.method == "median_each"
    assert result.labels == {"r1": [20.0, 50.0], "r2": [0.0, 100.0], "r3": None}
    assert not kind_class("range_slider").one_label


def test_no_trainer_trains_ranges():
    assert trainers.annotate_only("range_slider").startswith(
        "no trainer trains range_slider schemes")
    assert kind_class("range_slider").ranks_by is None


def test_a_range_reads_back_from_json(tmp_path):
    s, _ = scheme_of(tmp_path, RANGE)
    assert check_label(s, json.loads(s.kind.cell([5, 95]))) == [5, 95]
