"""Annotation kinds (potato/schemes): config keys and every type's value check, with hostile
values (NaN, inf, huge numbers, wrong types, offsets outside the text, overlapping spans,
unknown labels, over-long text, deep nesting)."""

import json
import math

import pytest

from potato.annotations import LabelError, check_label
from potato.config import load
from potato.schemes import KINDS, make_scheme
from potato.training.remote.bundle import build, label_names, majority, read

TEXT = "Ana 😀 met Bob in Paris\r\nbye"  # an astral character and a CR LF: offsets count both


def span_scheme():
    return make_scheme("ner", "span", ["PER", "LOC"])


def test_every_kind_is_registered_once_by_its_type():
    assert sorted(KINDS) == sorted(["radio", "multiselect", "select", "likert", "slider",
                                    "number", "text", "span"])
    assert all(cls.type_name == name for name, cls in KINDS.items())


# -- span ----------------------------------------------------------------------------------------

def test_span_values_are_checked_against_the_text_in_code_points():
    s = span_scheme()
    bob = TEXT.index("Bob")
    assert TEXT[bob:bob + 3] == "Bob" and bob == 10  # "😀" is one character, not two
    got = check_label(s, [{"start": 17, "end": 22, "label": "LOC"},
                          {"start": bob, "end": bob + 3, "label": "PER", "text": "Bob"}], TEXT)
    assert got == [{"start": 10, "end": 13, "label": "PER", "text": "Bob"},
                   {"start": 17, "end": 22, "label": "LOC", "text": "Paris"}]
    # the emoji itself, and the CR LF, are characters like any other
    assert check_label(s, [{"start": 4, "end": 5, "label": "PER"}], TEXT)[0]["text"] == "😀"
    assert check_label(s, [{"start": 22, "end": 24, "label": "LOC"}], TEXT)[0]["text"] == "\r\n"
    assert check_label(s, None, TEXT) is None and check_label(s, "", TEXT) is None
    assert check_label(s, [], TEXT) == []  # marked nothing: an answer (review 23.2)


HOSTILE_SPANS = [
    ("not a list", "takes a list of spans"),
    ({"start": 0, "end": 1, "label": "PER"}, "takes a list of spans"),
    ([["start", 0]], "span 1 must be an object"),
    ([{"start": 0, "end": 3}], "None is not a label of this scheme"),
    ([{"start": 0, "end": 3, "label": "ORG"}], "'ORG' is not a label of this scheme"),
    ([{"start": 0, "end": 3, "label": ["PER"]}], "is not a label of this scheme"),
    ([{"start": -1, "end": 3, "label": "PER"}], "must satisfy 0 <= start < end <= 27"),
    ([{"start": 0, "end": 28, "label": "PER"}], "must satisfy 0 <= start < end <= 27"),
    ([{"start": 3, "end": 3, "label": "PER"}], "must satisfy"),
    ([{"start": 5, "end": 2, "label": "PER"}], "must satisfy"),
    ([{"start": 0, "end": 10 ** 30, "label": "PER"}], "must satisfy"),
    ([{"start": 0.0, "end": 3, "label": "PER"}], "start must be a whole number"),
    ([{"start": True, "end": 3, "label": "PER"}], "start must be a whole number"),
    ([{"start": "0", "end": 3, "label": "PER"}], "start must be a whole number"),
    ([{"start": 0, "end": float("nan"), "label": "PER"}], "end must be a whole number"),
    ([{"start": 0, "end": 3, "label": "PER", "colour": "red"}], "has the key 'colour'"),
    ([{"start": 0, "end": 3, "label": "PER", "text": "Bob"}], "is not the text at 0..3, 'Ana'"),
    # UTF-16 offsets (what a browser counts) for "met": 7..10 there, 6..9 in code points
    ([{"start": 7, "end": 10, "label": "PER", "text": "met"}], "Unicode code points"),
    ([{"start": 0, "end": 5, "label": "PER"}, {"start": 4, "end": 8, "label": "LOC"}],
     "the spans 0..5 (PER) and 4..8 (LOC) overlap"),
    ([{"start": 0, "end": 3, "label": "PER"}, {"start": 0, "end": 3, "label": "PER"}],
     "overlap"),
    ([{"start": 0, "end": 1, "label": "PER"}] * 1001, "more than the 1000"),
]


@pytest.mark.parametrize("value,message", HOSTILE_SPANS)
def test_hostile_span_values_are_refused_naming_the_scheme(value, message):
    with pytest.raises(LabelError) as e:
        check_label(span_scheme(), value, TEXT)
    assert str(e.value).startswith("scheme 'ner' (span): ")
    assert message in str(e.value)


def test_deeply_nested_values_are_refused_with_a_message():
    deep = []
    for _ in range(100000):
        deep = [deep]
    for scheme, text in ((span_scheme(), TEXT), (make_scheme("s", "radio", ["a"]), None),
                         (make_scheme("n", "number", []), None),
                         (make_scheme("t", "text", []), None)):
        with pytest.raises(LabelError) as e:
            check_label(scheme, deep, text)
        assert "'%s'" % scheme.name in str(e.value) and len(str(e.value)) < 400


def test_span_form_value_is_json_and_garbage_is_named():
    k = span_scheme().kind
    assert k.from_form(['[{"start": 0, "end": 3, "label": "PER"}]']) == [
        {"start": 0, "end": 3, "label": "PER"}]
    assert k.from_form([""]) == [] and k.from_form([]) == []  # on the form, nothing marked
    with pytest.raises(LabelError, match="takes a list of spans"):
        k.check(k.from_form(["[" * 100000]), TEXT)
    with pytest.raises(LabelError, match="takes a list of spans"):
        k.check(k.from_form(["{not json"]), TEXT)


# -- likert, slider, number ----------------------------------------------------------------------

def test_likert_takes_a_whole_point_in_range():
    s = make_scheme("agree", "likert", [], size=5)
    assert check_label(s, 3) == 3 and check_label(s, 5.0) == 5 and check_label(s, None) is None
    assert s.kind.from_form(["4"]) == 4 and check_label(s, s.kind.from_form(["4"])) == 4
    for bad, msg in ((0, "from 1 to 5"), (6, "from 1 to 5"), (2.5, "whole point"),
                     (True, "takes a point"), ("3", "takes a point"), ([3], "takes a point"),
                     (float("nan"), "finite"), (float("inf"), "finite"), (10 ** 400, "too large")):
        with pytest.raises(LabelError) as e:
            check_label(s, bad)
        assert str(e.value).startswith("scheme 'agree' (likert): ") and msg in str(e.value)


def test_slider_takes_a_finite_number_on_its_steps():
    s = make_scheme("temp", "slider", [], min_value=0, max_value=1, step=0.1)
    assert check_label(s, 0.3) == 0.3 and check_label(s, 1) == 1 and check_label(s, 0) == 0
    assert check_label(s, 0.1 + 0.2) == 0.3  # float noise is rounded onto the step
    assert s.kind.from_form([""]) is None and s.kind.from_form(["0.7"]) == 0.7
    for bad, msg in ((1.1, "outside 0 to 1"), (-0.1, "outside"), (0.35, "not on the slider"),
                     (float("nan"), "finite"), (float("-inf"), "finite"), ("0.5", "a number"),
                     (None if False else {}, "a number"), (1e300, "too large")):
        with pytest.raises(LabelError) as e:
            check_label(s, bad)
        assert str(e.value).startswith("scheme 'temp' (slider): ") and msg in str(e.value)


def test_number_bounds_and_magnitude():
    free = make_scheme("count", "number", [])
    assert check_label(free, 12) == 12 and check_label(free, -2.5) == -2.5
    assert check_label(free, 3.0) == 3 and isinstance(check_label(free, 3.0), int)
    bounded = make_scheme("age", "number", [], min_value=0, max_value=120)
    for scheme, bad, msg in ((free, 10 ** 16, "too large"), (free, -1e16, "too large"),
                             (free, 10 ** 5000, "too large"), (free, float("nan"), "finite"),
                             (bounded, 121, "outside 0 to 120"), (bounded, -1, "outside"),
                             (bounded, "12", "a number"), (bounded, False, "a number")):
        with pytest.raises(LabelError) as e:
            check_label(scheme, bad)
        assert scheme.name in str(e.value) and msg in str(e.value)
    # a form's text: numbers are parsed, anything else is named by the check
    assert free.kind.from_form(["1e999"]) == math.inf
    with pytest.raises(LabelError, match="finite"):
        check_label(free, free.kind.from_form(["1e999"]))
    with pytest.raises(LabelError, match="takes a number, not 'nan!'"):
        check_label(free, free.kind.from_form(["nan!"]))


# -- text, select --------------------------------------------------------------------------------

def test_text_length_cap_control_characters_and_newlines():
    s = make_scheme("why", "text", [], max_length=10)
    assert check_label(s, "a\r\nb") == "a\nb"  # browsers post CR LF
    assert check_label(s, "   ") is None and check_label(s, "") is None
    assert check_label(s, "😀" * 10) == "😀" * 10  # code points, not UTF-16 units or bytes
    assert check_label(s, "👩\u200d💻 a\tb") == "👩\u200d💻 a\tb"  # a joiner is no control
    for bad, msg in (("x" * 11, "has 11 characters; at most 10"), ("a\x00b", "U+0000"),
                     ("\x1b[31m", "U+001B"), (5, "takes text"), (["a"], "takes text"),
                     ("a\x85b", "U+0085"), ("\x9b31m", "U+009B"), ("\u202egnp", "U+202E"),
                     ("a\u202ab", "U+202A"), ("\u2066x", "U+2066"), ("\u2069", "U+2069")):
        with pytest.raises(LabelError) as e:
            check_label(s, bad)
        assert str(e.value).startswith("scheme 'why' (text): ") and msg in str(e.value)


def test_select_and_the_choices_keep_their_messages():
    sel = make_scheme("colour", "select", ["red", "blue"])
    assert check_label(sel, "red") == "red" and sel.kind.from_form([""]) == ""
    assert check_label(sel, "") is None
    with pytest.raises(LabelError, match="'green' is not a label of scheme 'colour'"):
        check_label(sel, "green")
    multi = make_scheme("tags", "multiselect", ["a", "b", "c"])
    assert check_label(multi, ["c", "a", "c"]) == ["a", "c"]
    with pytest.raises(LabelError, match="takes one label"):
        check_label(make_scheme("r", "radio", ["a"]), ["a"])


# -- config --------------------------------------------------------------------------------------

UPSTREAM = """\
annotation_task_name: kinds
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - annotation_type: span
    name: entities
    description: Mark the names
    labels: [PER, {name: LOC, key_value: l, tooltip: places}]
    sequential_key_binding: true
    label_requirement: {required: true}
  - annotation_type: likert
    name: awesomeness
    description: How awesome is this?
    min_label: Not Awesome
    max_label: Completely Awesome
    size: 5
    sequential_key_binding: true
  - annotation_type: slider
    name: temperature
    min_value: 0
    max_value: 100
    starting_value: 50
    step: 5
  - annotation_type: text
    name: feedback
    textarea: {on: true, rows: 4, cols: 40}
  - annotation_type: text
    name: short
    multiline: true
    rows: 2
    labels: [comment]
  - annotation_type: select
    name: country
    labels: [France, Peru]
  - annotation_type: number
    name: count
    min_value: 0
    max_value: 10
"""


def test_upstream_scheme_blocks_load_unchanged(tmp_path):
    (tmp_path / "items.jsonl").write_text('{"id": "1", "text": "x"}\n')
    (tmp_path / "c.yaml").write_text(UPSTREAM)
    cfg, errors, warnings = load(str(tmp_path / "c.yaml"))
    assert errors == [] and warnings == []
    by = {s.name: s for s in cfg.schemes}
    assert by["entities"].labels == ["PER", "LOC"] and by["entities"].label_keys == ["1", "l"]
    assert by["entities"].required and not by["awesomeness"].required
    assert (by["awesomeness"].kind.size, by["awesomeness"].kind.min_label) == (5, "Not Awesome")
    t = by["temperature"].kind
    assert (t.min_value, t.max_value, t.step, t.starting_value) == (0, 100, 5, 50)
    assert by["feedback"].kind.multiline and by["feedback"].kind.rows == 4
    assert by["short"].kind.multiline and by["short"].kind.rows == 2
    assert by["count"].kind.max_value == 10


@pytest.mark.parametrize("block,message", [
    ("- {annotation_type: likert, name: l}", "likert scale without size"),
    ("- {annotation_type: likert, name: l, size: 1}", "must be between 2 and 20"),
    ("- {annotation_type: likert, name: l, size: 5, labels: [a]}", "takes no labels"),
    ("- {annotation_type: slider, name: s, max_value: 5}", "slider without min_value"),
    ("- {annotation_type: slider, name: s, min_value: 5, max_value: 5}", "must be more than"),
    ("- {annotation_type: slider, name: s, min_value: 0, max_value: 5, step: 0}",
     "must be more than 0"),
    ("- {annotation_type: slider, name: s, min_value: 0, max_value: 5, starting_value: 9}",
     "must be between min_value and max_value"),
    ("- {annotation_type: number, name: n, max_value: .inf}", "finite number"),
    # several labels are one box each (potato/schemes/expand.py); repeated ones cannot be
    ("- {annotation_type: text, name: t, labels: [a, a]}", "lists the label 'a' twice"),
    ("- {annotation_type: text, name: t, max_length: 0}", "max_length must be between"),
    ("- {annotation_type: span, name: s}", "needs a non-empty list of labels"),
    ("- {annotation_type: span, name: s, labels: [{name: a, key_value: x}, "
     "{name: b, key_value: x}]}", "the key 'x' is given to 'a' and 'b'"),
    ("- {annotation_type: span, name: s, labels: [a], label_requirement: {mandatory: 1}}",
     "label_requirement.mandatory is not a key"),
    ("- {annotation_type: spam, name: s, labels: [a]}", "Did you mean span?"),
    ("- {annotation_type: slider, name: s, min_value: 0, max_value: 1, labels: [a]}",
     "takes no labels"),
    ("- {annotation_type: radio, name: r, labels: [a], size: 3}",
     "annotation_schemes[0].size is not a key a radio scheme accepts"),
])
def test_bad_scheme_blocks_are_named(tmp_path, block, message):
    (tmp_path / "items.jsonl").write_text('{"id": "1", "text": "x"}\n')
    (tmp_path / "c.yaml").write_text("data_files: [items.jsonl]\nannotation_schemes:\n  "
                                     + block + "\n")
    _, errors, _ = load(str(tmp_path / "c.yaml"))
    assert any(message in e.message for e in errors), [e.message for e in errors]
    assert all(e.line for e in errors)


# -- what training reads: majority vote and the bundle on the new value shapes -------------------

def test_majority_and_bundle_take_every_value_shape(tmp_path):
    span = [{"start": 0, "end": 3, "label": "PER", "text": "Ana"}]
    assert majority([span, span, []]) == span
    assert majority([span, [{"start": 0, "end": 3, "label": "LOC", "text": "Ana"}]]) is None
    assert majority([3, 3, 4]) == 3 and majority(["a", "b"]) is None
    assert majority([["a", "b"], ["a", "b"], ["a"]]) == ["a", "b"]
    assert label_names(span + span) == ["PER", "PER"] and label_names(2.5) == []
    items = [("i%d" % n, "Ana met Bob") for n in range(6)]
    labels = {"i%d" % n: {"ner": [span, span], "agree": [n % 5 + 1], "t": [0.5], "why": ["ok"]}
              for n in range(6)}
    schemas = {"ner": {"type": "span", "labels": ["PER"]},
               "agree": {"type": "likert", "labels": []}, "t": {"type": "slider", "labels": []},
               "why": {"type": "text", "labels": []}}
    manifest = build(str(tmp_path / "b"), items, labels, schemas)
    assert manifest["label_counts"]["ner"] == {"PER": 6}
    assert json.dumps(manifest)  # every count key is JSON
    assert read(str(tmp_path / "b")).items[0]["labels"]["ner"] == span
