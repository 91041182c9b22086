"""Pairwise preference (potato/schemes/pairwise.py): upstream's scheme keys and their decided
answers, bad configs named, the item's responses checked when items are read, the posted
value checked with hostile input, the page's tiles, keys and slider (escaped), export cells
in our format and upstream's, aggregation (binary as a choice, scale as a rating), agreement,
and training's refusal."""

import json
import math

import pytest

from potato.commands.cli import main
from potato.config.settings import load
from potato.labels import agreement, aggregate
from potato.labels.annotations import LabelError, check_label, open_store
from potato.project.data import DataError, load_items
from potato.schemes import KEEP, kind_class
from potato.training.remote import trainers

BINARY = """\
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: pairwise
    name: preference
    description: Which reply is kinder?
    mode: binary
    items_key: replies
    show_labels: true
    labels: ["Reply A", "Reply B"]
    allow_tie: true
    tie_label: Hard to tell
    sequential_key_binding: true
    label_requirement: {required: true}
    layout: {columns: 1}
"""

SCALE = """\
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: pairwise
    name: strength
    description: How much kinder is one reply?
    mode: scale
    items_key: replies
    labels: ["Reply A", "Reply B"]
    scale:
      min: -3
      max: 3
      step: 1
      default: 0
      labels: {min: A is much kinder, max: B is much kinder, center: Equal}
"""

ITEMS = [{"id": "p1", "text": "Can you help?",
          "replies": ["Thanks, glad to help!", "Figure it out yourself."]},
         {"id": "p2", "text": "Hi", "replies": ["<script>alert(1)</script>", "Sure & welcome"]},
         {"id": "p3", "text": "Please?", "replies": ["No.", "Yes, here you go."]}]


def project(tmp_path, config, items=ITEMS, name="c.yaml"):
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    (tmp_path / name).write_text(config)
    return str(tmp_path / name)


def scheme_of(tmp_path, config, items=ITEMS):
    cfg, errors, warnings = load(project(tmp_path, config, items))
    assert errors == [], [e.message for e in errors]
    return cfg.schemes[0], warnings


# -- config ----------------------------------------------------------------------------------------

def test_a_binary_scheme_offers_its_labels_and_the_tie(tmp_path):
    s, warnings = scheme_of(tmp_path, BINARY)
    assert warnings == []
    assert s.annotation_type == "pairwise" and s.required
    assert s.labels == ["Reply A", "Reply B", "Hard to tell"]
    assert s.kind.summary() == "which response is preferred: Reply A, Reply B (or Hard to tell)"


def test_a_bare_scheme_compares_a_and_b_from_the_text_field(tmp_path):
    s, _ = scheme_of(tmp_path, "data_files: [items.jsonl]\nannotation_schemes:\n"
                               "  - {annotation_type: pairwise, name: p}\n",
                     [{"id": "1", "text": ["one", "two"]}])
    assert s.labels == ["A", "B"]  # no tie unless allow_tie
    assert s.kind.item_fields() == ("text",)


def test_a_scale_scheme_is_a_rating_between_the_two_responses(tmp_path):
    s, warnings = scheme_of(tmp_path, SCALE)
    assert warnings == []
    assert s.annotation_type == "pairwise_scale" and s.labels == []
    assert s.kind.summary() == ("how much one response is preferred: -3 (Reply A: A is much "
                                "kinder) to 3 (Reply B: B is much kinder) in steps of 1")


def test_scale_defaults_are_upstreams(tmp_path):
    s, _ = scheme_of(tmp_path, "data_files: [items.jsonl]\nannotation_schemes:\n"
                               "  - {annotation_type: pairwise, name: p, mode: scale}\n",
                     [{"id": "1", "text": ["one", "two"]}])
    page = s.kind.inputs(None, 1)
    assert 'min="-3" max="3" step="1" value="0"' in page
    assert "A: A is better" in page and "B: B is better" in page and ">Equal<" in page


def test_labels_written_bare_as_yes_or_no_are_the_text_as_written(tmp_path):
    s, _ = scheme_of(tmp_path, BINARY.replace("tie_label: Hard to tell", "tie_label: No"))
    assert s.labels[-1] == "No"
    s, _ = scheme_of(tmp_path, SCALE.replace("center: Equal", "center: Off"))
    assert ">Off<" in s.kind.inputs(None, 1)


def test_a_scale_whose_range_leaves_out_0_starts_in_the_middle(tmp_path):
    s, _ = scheme_of(tmp_path, SCALE.replace("min: -3", "min: 1").replace("max: 3", "max: 5")
                     .replace("      default: 0\n", ""))
    assert 'value="3"' in s.kind.inputs(None, 1)  # upstream's 0 is off the scale


@pytest.mark.parametrize("keys,message", [
    ("mode: multi_dimension", "make one pairwise scheme per dimension"),
    ("mode: triple", "Give binary (pick one response) or scale"),
    ("dimensions: [{name: a}]", "make one pairwise scheme per dimension"),
    ("justification: {required: true}", "a text scheme for the rationale"),
    ("items: [a, b]", "as a list under items_key"),
    ("mode: multi_dimension\n    dimensions: [{name: a}]", "dimensions is not a key a pairwise"),
    ("labels: [only]", "a pairwise scheme compares 2 to 9"),
    ("labels: [a, b, c, d, e, f, g, h, i, j]", "a pairwise scheme compares 2 to 9"),
    ("labels: [a, a]", "lists the label 'a' twice"),
    ("labels: [a, b]\n    allow_tie: true\n    tie_label: b", "give the tie its own label"),
    ("allow_tie: 'yes'", "allow_tie must be true or false"),
    ("items_key: [a]", "items_key must be a string"),
    ("show_label: true", "Did you mean show_labels?"),
    ("mode: scale\n    scale: {min: 3, max: 3}", "max (3) must be more than min (3)"),
    ("mode: scale\n    scale: {step: 0}", "give a step more than 0"),
    ("mode: scale\n    scale: {step: 1.0e-12}", "at most 1e+09 steps"),
    ("mode: scale\n    scale: {default: 9}", "must be a value the slider can take"),
    ("mode: scale\n    scale: {step: 2}", "must be a value the slider can take"),  # 0 off -3+2k
    ("mode: scale\n    scale: {max: .inf}", "must be a finite number"),
    ("mode: scale\n    scale: {minimum: 1}", "scale.minimum is not a key"),
    ("mode: scale\n    scale: {labels: {left: x}}", "scale.labels.left is not a key"),
    ("mode: scale\n    scale: [1, 2]", "must be a mapping"),
    ("mode: scale\n    labels: [a, b, c]", "a scale between two responses"),
])
def test_bad_pairwise_blocks_are_named(tmp_path, keys, message):
    config = ("data_files: [items.jsonl]\nannotation_schemes:\n"
              "  - annotation_type: pairwise\n    name: p\n    " + keys + "\n")
    cfg, errors, _ = load(project(tmp_path, config, [{"id": "1", "text": ["x", "y"]}]))
    assert any(message in e.message for e in errors), [e.message for e in errors]
    assert all(e.line for e in errors)


def test_upstreams_multi_dimension_block_is_refused_once_per_feature(tmp_path):
    config = ("data_files: [items.jsonl]\nannotation_schemes:\n"
              "  - annotation_type: pairwise\n    name: p\n    mode: multi_dimension\n"
              "    dimensions: [{name: accuracy, allow_tie: true}]\n"
              "    justification: {required: true, reason_categories: [Safer]}\n")
    _, errors, _ = load(project(tmp_path, config, [{"id": "1", "text": ["x", "y"]}]))
    assert sorted(e.key for e in errors) == ["annotation_schemes[0].dimensions",
                                             "annotation_schemes[0].justification"], errors


@pytest.mark.parametrize("keys,message", [
    ("tie_label: Same", "has no effect without allow_tie: true"),
    ("scale: {min: 0, max: 4}", "has no effect in mode binary"),
    ("mode: scale\n    allow_tie: true", "has no effect in mode scale"),
])
def test_keys_without_effect_in_their_mode_are_warned_about(tmp_path, keys, message):
    config = ("data_files: [items.jsonl]\nannotation_schemes:\n"
              "  - annotation_type: pairwise\n    name: p\n    " + keys + "\n")
    cfg, errors, warnings = load(project(tmp_path, config, [{"id": "1", "text": ["x", "y"]}]))
    assert errors == [] and any(message in w.message for w in warnings), warnings


def test_a_type_named_after_the_scale_form_is_not_a_config_type(tmp_path):
    config = ("data_files: [items.jsonl]\nannotation_schemes:\n"
              "  - {annotation_type: pairwise_scale, name: p}\n")
    _, errors, _ = load(project(tmp_path, config, [{"id": "1", "text": "x"}]))
    assert any("Did you mean pairwise?" in e.message for e in errors), errors


# -- the item's responses, checked when items are read --------------------------------------------

@pytest.mark.parametrize("item,message", [
    ({"id": "q9", "text": "plain"}, "item 'q9' has no 'replies' (items_key of pairwise scheme "
                                    "'preference')"),
    ({"id": "q9", "replies": "one, two"}, "item 'q9' has 'replies' (items_key of pairwise scheme "
                                          "'preference') as a str, not a list"),
    ({"id": "q9", "replies": {"a": 1}}, "as a dict, not a list"),
    ({"id": "q9", "replies": ["only one"]}, "has 1 response(s) in 'replies'"),
    ({"id": "q9", "replies": []}, "has 0 response(s)"),
    ({"id": "q9", "replies": ["a", "b", "c"]}, "the scheme compares 2 (one per label: Reply A, "
                                               "Reply B); give the item 2 responses, or the "
                                               "scheme a label per response."),
    ({"id": "q9", "replies": ["a", {"html": "<b>"}]}, "has a dict as response 2"),
    ({"id": "q9", "replies": ["a", None]}, "has a NoneType as response 2"),
    ({"id": "q9", "replies": [True, "b"]}, "has a bool as response 1"),
    ({"id": "q9", "replies": ["a", float("nan")]}, "has nan as response 2"),  # JSON's NaN
    ({"id": "q9", "replies": [float("-inf"), "b"]}, "has -inf as response 1"),
])
def test_items_without_the_responses_are_named_with_their_field(tmp_path, item, message):
    cfg, errors, _ = load(project(tmp_path, BINARY, ITEMS[:1] + [dict(item, text="t")
                                                                  if "text" not in item
                                                                  else item]))
    with pytest.raises(DataError) as e:
        load_items(cfg)
    assert message in str(e.value) and "items.jsonl:2" in str(e.value), str(e.value)


def test_a_text_key_holding_the_responses_makes_them_the_items_text_lettered(tmp_path):
    cfg, errors, _ = load(project(tmp_path, "data_files: [items.jsonl]\nannotation_schemes:\n"
                                            "  - {annotation_type: pairwise, name: p}\n",
                                  [{"id": "1", "text": ["one", "two\nlines"]}]))
    assert errors == []
    [(item_id, text, row)] = load_items(cfg)
    assert (item_id, text, row["text"]) == ("1", "A. one\n\nB. two\nlines",
                                            ["one", "two\nlines"])


def test_a_list_no_scheme_reads_is_still_not_the_items_text(tmp_path):
    cfg, errors, _ = load(project(tmp_path, BINARY, [{"id": "1", "text": ["a", "b"],
                                                       "replies": ["x", "y"]}]))
    with pytest.raises(DataError, match="'text' .* is a list, not text"):
        load_items(cfg)


# -- values at the boundary ---------------------------------------------------------------------

def test_binary_values_are_a_label_or_the_tie(tmp_path):
    s, _ = scheme_of(tmp_path, BINARY)
    assert check_label(s, "Reply B") == "Reply B"
    assert check_label(s, "Hard to tell") == "Hard to tell"
    assert check_label(s, None) is None and check_label(s, "") is None


@pytest.mark.parametrize("value", [
    "A", "tie", "reply a", "Reply A ", "<script>alert(1)</script>", "x" * 100000, 1, 0, True,
    1.5, float("nan"), ["Reply A"], {"selection": "A"}, [[["deep"]]], b"Reply A"])
def test_hostile_binary_values_are_refused_naming_the_scheme(tmp_path, value):
    s, _ = scheme_of(tmp_path, BINARY)
    with pytest.raises(LabelError) as e:
        check_label(s, value)
    assert "scheme 'preference' (pairwise): takes one of 'Reply A', 'Reply B', 'Hard to tell'" \
        in str(e.value)
    assert len(str(e.value)) < 300  # a huge value is cut in the message


def test_the_tie_is_refused_when_not_allowed(tmp_path):
    s, _ = scheme_of(tmp_path, BINARY.replace("allow_tie: true", "allow_tie: false")
                     .replace("    tie_label: Hard to tell\n", ""))
    assert s.labels == ["Reply A", "Reply B"]
    with pytest.raises(LabelError):
        check_label(s, "No preference")


def test_scale_values_are_numbers_on_the_grid(tmp_path):
    s, _ = scheme_of(tmp_path, SCALE)
    assert check_label(s, -3) == -3 and check_label(s, 3) == 3
    assert check_label(s, 2.0) == 2 and type(check_label(s, 2.0)) is int
    assert check_label(s, None) is None and check_label(s, "") is None
    half, _ = scheme_of(tmp_path, SCALE.replace("step: 1", "step: 0.1"))
    assert check_label(half, 0.30000000000000004) == 0.3


@pytest.mark.parametrize("value,message", [
    (4, "4 is outside -3 to 3"), (-3.5, "is outside"), (0.5, "not on the scale's steps of 1"),
    (float("nan"), "finite number"), (float("inf"), "finite number"),
    (1e300, "too large"), ("1", "takes a number from -3 to 3, not '1'"),
    ("<img src=x onerror=alert(1)>", "not '<img"), (True, "not True"), ([1], "not [1]"),
    ({"scale_value": 1}, "not {"), ("A", "not 'A'")])
def test_hostile_scale_values_are_refused(tmp_path, value, message):
    s, _ = scheme_of(tmp_path, SCALE)
    with pytest.raises(LabelError) as e:
        check_label(s, value)
    assert "scheme 'strength' (pairwise_scale)" in str(e.value) and message in str(e.value)


def test_forms_hold_the_tile_or_the_slider_value(tmp_path):
    b, _ = scheme_of(tmp_path, BINARY)
    assert b.kind.from_form([]) is KEEP  # a tile cannot be unchosen: the answer stays
    assert b.kind.from_form(["Reply A", "Reply B"]) == "Reply B"
    s, _ = scheme_of(tmp_path, SCALE)
    assert s.kind.from_form([]) is None and s.kind.from_form([""]) is None
    assert s.kind.from_form(["-2"]) == -2 and s.kind.from_form(["1.5"]) == 1.5
    with pytest.raises(LabelError):
        check_label(s, s.kind.from_form(["NaN"]))
    with pytest.raises(LabelError):
        check_label(s, s.kind.from_form(["1e999"]))


# -- the page ------------------------------------------------------------------------------------

def test_tiles_have_number_keys_and_the_tie_the_next(tmp_path):
    s, _ = scheme_of(tmp_path, BINARY)
    html = s.kind.fieldset("Reply B", 1)
    assert s.kind.key_count() == 3
    for key, label in (("1", "Reply A"), ("2", "Reply B"), ("3", "Hard to tell")):
        assert f'value="{label}" data-key="{key}"' in html and f"<kbd>{key}</kbd> {label}" in html
    assert 'value="Reply B" data-key="2" checked' in html
    assert 'class="option pairwise-tie"' in html and 'data-required="1"' in html
    later = s.kind.inputs(None, 8)  # after 7 keys of other schemes: 8, 9, then 0
    assert 'data-key="8"' in later and 'data-key="9"' in later and 'data-key="0"' in later


def test_keys_can_be_turned_off(tmp_path):
    s, _ = scheme_of(tmp_path, BINARY.replace("sequential_key_binding: true",
                                              "sequential_key_binding: false"))
    assert s.kind.key_count() == 0
    assert "data-key" not in s.kind.inputs(None, 1) and "<kbd>" not in s.kind.inputs(None, 1)


def test_the_responses_and_labels_are_escaped(tmp_path):
    hostile = '"><img src=x onerror=alert(1)>'
    s, _ = scheme_of(tmp_path, BINARY.replace('"Reply A"', json.dumps(hostile)))
    view = s.kind.view({"replies": ["<script>alert(1)</script>", "a & b"]})
    assert "<script>" not in view and "&lt;script&gt;alert(1)&lt;/script&gt;" in view
    assert "a &amp; b" in view
    for html in (view, s.kind.inputs(None, 1)):
        assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert s.kind.view({"replies": "not a list"}) == ""
    bare, _ = scheme_of(tmp_path, BINARY.replace("show_labels: true", "show_labels: false"))
    assert "pairwise-title" not in bare.kind.view({"replies": ["a", "b"]})


def test_the_scale_is_a_slider_set_only_when_moved(tmp_path):
    s, _ = scheme_of(tmp_path, SCALE.replace("center: Equal", "center: <b>Equal</b>"))
    unset = s.kind.inputs(None, 1)
    assert 'type="range" data-slider="strength"' in unset and 'value="0"' in unset
    assert '<input type="hidden" name="label:strength" value="">' in unset
    assert "&lt;b&gt;Equal&lt;/b&gt;" in unset and s.kind.key_count() == 0
    shown = s.kind.inputs(-2, 1)
    assert 'value="-2"' in shown and '<input type="hidden" name="label:strength" value="-2">' \
        in shown


# -- export, upstream's output, aggregation, agreement, training --------------------------------

def test_export_cells_and_upstreams_entries_round_trip(tmp_path):
    b, _ = scheme_of(tmp_path, BINARY)
    assert b.kind.cell("Reply A") == "Reply A" and b.kind.cell(None) == ""
    for value, entry in (("Reply A", "A"), ("Reply B", "B"), ("Hard to tell", "tie")):
        assert b.kind.upstream_cell(value) == {"selection": entry}
        assert b.kind.from_upstream_cell({"selection": entry}) == value
    with pytest.raises(LabelError):  # an entry that is no option is refused, not guessed
        check_label(b, b.kind.from_upstream_cell({"selection": "C"}))
    s, _ = scheme_of(tmp_path, SCALE)
    assert s.kind.upstream_cell(-2) == {"scale_value": "-2"}
    assert s.kind.from_upstream_cell({"scale_value": "-2"}) == -2
    assert s.kind.cell(1) == "1"


def test_binary_aggregates_as_a_choice_and_scale_as_a_rating():
    votes = {"p1": {"a": "Reply A", "b": "Reply A", "c": "Hard to tell"},
             "p2": {"a": "Reply A", "b": "Reply B"}}
    assert aggregate.aggregate("pairwise", votes).labels == {"p1": "Reply A", "p2": None}
    scale = aggregate.aggregate("pairwise_scale", {"p1": {"a": -3, "b": 1, "c": 2}})
    assert (scale.method, scale.labels) == ("median", {"p1": 1.0})
    assert kind_class("pairwise").one_label and not kind_class("pairwise_scale").one_label
    assert kind_class("pairwise_scale").quantity


def test_no_trainer_trains_either_mode():
    for kind in ("pairwise", "pairwise_scale"):
        assert trainers.annotate_only(kind) == (
            f"no trainer trains {kind} schemes: they are annotate-only (their answers are "
            f"stored and exported, not learned)")
        assert kind_class(kind).ranks_by is None  # active learning cannot order by it


def test_binary_answers_get_the_annotators_agreement(tmp_path):
    path = project(tmp_path, BINARY)
    for who, answers in (("ann", ["Reply A", "Reply B", "Hard to tell"]),
                         ("bob", ["Reply A", "Reply B", "Reply B"])):
        (tmp_path / "l.jsonl").write_text("".join(
            json.dumps({"id": f"p{n + 1}", "preference": v}) + "\n" for n, v in enumerate(answers)))
        assert main(["annotations", "import", path, str(tmp_path / "l.jsonl"),
                     "--annotator", who]) == 0
    cfg, _, _ = load(path)
    store = open_store(cfg)
    try:
        found = agreement.summary(cfg, store)["preference"]
    finally:
        store.close()
    [pair] = found["cohen"]
    assert pair["annotators"] == ["ann", "bob"] and pair["items"] == 3
    assert 0 < pair["kappa"] < 1 and not math.isnan(pair["kappa"])


def test_answers_go_to_upstreams_layout_and_back(tmp_path, capsys):
    config = BINARY + SCALE.split("annotation_schemes:\n")[1]
    path = project(tmp_path, config)
    answers = [{"id": "p1", "preference": "Reply A", "strength": -3},
               {"id": "p2", "preference": "Hard to tell", "strength": 0}]
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    assert main(["annotations", "import", path, str(tmp_path / "l.jsonl"),
                 "--annotator", "ana"]) == 0
    out = tmp_path / "out"
    assert main(["annotations", "export", path, "--format", "upstream", "-o", str(out)]) == 0
    rows = {r["id"]: r for r in map(json.loads, open(out / "ana" / "annotated_instances.jsonl"))}
    assert rows["p1"]["label_annotations"] == {"preference": {"selection": "A"},
                                               "strength": {"scale_value": "-3"}}
    assert rows["p2"]["label_annotations"]["preference"] == {"selection": "tie"}
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    again = project(fresh, config)
    capsys.readouterr()
    assert main(["annotations", "import", again, str(out), "--format", "upstream"]) == 0, \
        capsys.readouterr().err
    cfg, _, _ = load(again)
    store = open_store(cfg)
    try:
        for a in answers:
            assert store.labels_of("ana", a["id"]) == {k: v for k, v in a.items() if k != "id"}
    finally:
        store.close()
