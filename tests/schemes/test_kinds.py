"""Annotation kinds (potato/schemes): config keys and every type's value check, with hostile
values (NaN, inf, huge numbers, wrong types, offsets outside the text, overlapping spans,
unknown labels, over-long text, deep nesting)."""

import json
import math

import pytest

from potato.labels.annotations import LabelError, check_label
from potato.config.settings import load
from potato.schemes import KINDS, make_scheme
from potato.training.remote.bundle import build, label_names, majority, read
import html
import re
from potato.labels import aggregate
from potato.config.reader import Reader
from potato.schemes.base import KEEP, LabelError
from potato.schemes import span as span_mod
from potato.schemes import save_bytes
from potato.project.store import Store
from potato.project.data import load_items
from potato.commands.cli import main
from potato.training.exchange import boundary
from potato.training.reports import heldout, report
from urllib.parse import urlencode

TEXT = "Ana 😀 met Bob in Paris\r\nbye"  # an astral character and a CR LF: offsets count both


def span_scheme():
    return make_scheme("ner", "span", ["PER", "LOC"])


def test_every_kind_is_registered_once_by_its_type():
    assert sorted(KINDS) == sorted(["radio", "multiselect", "select", "likert", "slider",
                                    "number", "text", "span", "pairwise",
                                    "image_annotation", "constant_sum", "soft_label",
                                    "range_slider", "hierarchical_multiselect", "ranking",
                                    "text_edit", "extractive_qa", "pure_display",
                                    "process_reward", "span_link"])
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


# -- Fast unit tests for the span and rating kinds' checks, form reading, config keys and fields (folded in from test_kinds.py) ----------
# (potato/schemes/span.py, potato/schemes/rating.py); written so that tools/mutation.py's mutants of
# those modules fail (issue 26).


SHORT_TEXT = "Ana met Bo in Oslo"


def ner():
    return make_scheme("ner", "span", ["PER", "LOC"]).kind


def _err(kind, value, text=SHORT_TEXT):
    with pytest.raises(LabelError) as e:
        kind.check(value, text)
    msg = str(e.value)
    assert msg.startswith("scheme %r (%s): " % (kind.name, kind.type_name)), msg
    return msg[len("scheme %r (%s): " % (kind.name, kind.type_name)):]


# -- span ----------------------------------------------------------------------------------------

def test_span_kind_is_registered_with_its_traits():
    k = ner()
    assert KINDS["span"] is span_mod.Span and k.type_name == "span"
    assert (k.label_values, k.script, k.marks_text) == (True, "spans.js", True)
    spans = [{"start": 0, "end": 3, "label": "PER"}]
    res = aggregate.aggregate("span", {"i": {"a": spans, "b": spans, "c": []}})
    assert res.method == "spans" and res.labels == {"i": spans}


def test_span_check_empty_and_sorted():
    k = ner()
    assert k.check(None, SHORT_TEXT) is None and k.check("", SHORT_TEXT) is None and k.check("", None) is None
    assert k.check([], SHORT_TEXT) == [] and k.check([], None) == []
    got = k.check([{"start": 14, "end": 18, "label": "LOC"},
                   {"start": 8, "end": 10, "label": "PER", "text": "Bo"},
                   {"start": 0, "end": 3, "label": "PER"}], SHORT_TEXT)
    assert got == [{"start": 0, "end": 3, "label": "PER", "text": "Ana"},
                   {"start": 8, "end": 10, "label": "PER", "text": "Bo"},
                   {"start": 14, "end": 18, "label": "LOC", "text": "Oslo"}]
    # same start: the shorter first; touching spans do not overlap
    got = k.check([{"start": 0, "end": 7, "label": "PER"}, {"start": 7, "end": 8, "label": "LOC"},
                   {"start": 8, "end": 18, "label": "LOC"}], SHORT_TEXT)
    assert [(s["start"], s["end"]) for s in got] == [(0, 7), (7, 8), (8, 18)]
    whole = k.check([{"start": 0, "end": len(SHORT_TEXT), "label": "LOC"}], SHORT_TEXT)
    assert whole[0]["text"] == SHORT_TEXT


def test_span_check_refusals():
    k = ner()
    with pytest.raises(LabelError) as e:
        k.check([{"start": 0, "end": 3, "label": "PER"}], None)
    assert str(e.value) == "scheme 'ner' (span): spans can only be checked against the item's text."
    assert _err(k, "x") == ('takes a list of spans like [{"start": 0, "end": 5, "label": "PER"}], '
                            "not 'x'.")
    assert _err(k, {"start": 0}).endswith("not {'start': 0}.")
    assert _err(k, ["x"]) == "span 1 must be an object with start, end and label, not 'x'."
    ok = {"start": 0, "end": 3, "label": "PER"}
    assert _err(k, [ok, dict(ok, start=4, end=6, colour=1)]) == (
        "span 2 has the key 'colour'; a span has only start, end, label, text.")
    assert _err(k, [dict(ok, b=1, a=2)]).startswith("span 1 has the key 'b';")
    assert _err(k, [dict(ok, start="0")]) == (
        "span 1: start must be a whole number (a character offset), not '0'.")
    assert _err(k, [dict(ok, end=True)]).startswith("span 1: end must be a whole number")
    assert _err(k, [dict(ok, end=3.0)]).startswith("span 1: end must be a whole number")
    assert _err(k, [{"end": 3, "label": "PER"}]).startswith("span 1: start must be a whole")
    assert _err(k, [{"start": 0, "label": "PER"}]).startswith("span 1: end must be a whole")
    for start, end in ((-1, 3), (3, 3), (4, 3), (0, len(SHORT_TEXT) + 1)):
        assert _err(k, [dict(ok, start=start, end=end)]) == (
            "span 1: start %d and end %d must satisfy 0 <= start < end <= %d (the item's text "
            "has %d characters)." % (start, end, len(SHORT_TEXT), len(SHORT_TEXT)))
    assert _err(k, [dict(ok, label="ORG")]) == (
        "span 1: 'ORG' is not a label of this scheme (labels: PER, LOC).")
    assert _err(k, [dict(ok, label=None)]).startswith("span 1: None is not a label")
    assert _err(k, [{"start": 0, "end": 3}]).startswith("span 1: None is not a label")
    assert _err(k, [dict(ok, text="Anna")]) == (
        "span 1: its text 'Anna' is not the text at 0..3, 'Ana' (offsets count characters, "
        "Unicode code points, not bytes or UTF-16 units).")
    assert _err(k, [dict(ok), {"start": 2, "end": 6, "label": "LOC"}]) == (
        "the spans 0..3 (PER) and 2..6 (LOC) overlap; spans of one scheme may not overlap.")
    assert _err(k, [{"start": 2, "end": 6, "label": "LOC"}, dict(ok)]).startswith(
        "the spans 0..3 (PER) and 2..6 (LOC) overlap")


def test_span_check_counts_code_points():
    k = ner()
    text = "é😀 Bo"
    assert k.check([{"start": 3, "end": 5, "label": "PER", "text": "Bo"}], text)[0]["text"] == "Bo"


def test_span_count_cap():
    k = ner()
    text = "x" * 2001
    many = [{"start": 2 * i, "end": 2 * i + 1, "label": "PER"} for i in range(1000)]
    assert len(k.check(many, text)) == 1000
    more = many + [{"start": 2000, "end": 2001, "label": "PER"}]
    assert _err(k, more, text) == "1001 spans is more than the 1000 one item may hold."


def test_span_from_form():
    k = ner()
    assert k.from_form([]) == [] and k.from_form(["  "]) == [] and k.from_form(["x", ""]) == []
    assert k.from_form(['[{"start": 0}]', '[{"start": 1}]']) == [{"start": 1}]
    assert k.from_form(["", '[{"start": 1}]']) == [{"start": 1}]
    assert k.from_form(['["a"]']) == ["a"]
    bad = "not json " * 20
    assert k.from_form([bad]) == bad[:80]
    assert k.from_form(["[" * 100000]) == ("[" * 80)
    edge = "[" + " " * (span_mod.MAX_FORM_CHARS - 2) + "]"
    assert len(edge) == 2_000_000 and k.from_form([edge]) == []
    over = "[" + " " * (span_mod.MAX_FORM_CHARS - 1) + "]"
    assert k.from_form([over]) == over[:80]


def test_span_cell_and_summary():
    k = ner()
    assert k.cell(None) == ""
    assert k.cell([]) == "[]"
    assert k.cell([{"text": "Ålesund"}]) == '[{"text": "Ålesund"}]'
    assert k.summary() == "spans of the text: PER, LOC"


def test_span_inputs():
    k = make_scheme("ner", "span", ["PER", "LOC"] + ["L%d" % i for i in range(8)]).kind
    current = [{"start": 0, "end": 3, "label": "PER", "text": "Åna"}]
    page = str(k.inputs(current, 1))
    assert ('<button type="button" class="span-label" data-scheme="ner" data-label="PER" '
            'data-key="1"><kbd>1</kbd> PER</button>') in page
    assert 'data-label="LOC" data-key="2"><kbd>2</kbd> LOC</button>' in page
    assert 'data-label="L7" data-key=""> L7</button>' in page  # the 10th label has no key
    assert page.count('class="span-label"') == 10
    assert "<li>PER: Åna</li>" in page
    m = re.search(r'<input type="hidden" name="label:ner" value="([^"]*)" data-spans="ner">', page)
    assert m and json.loads(html.unescape(m.group(1))) == current and "Åna" in m.group(1)
    assert '<ul class="span-list" data-scheme="ner"><li>' in page
    empty = str(k.inputs(None, 1))
    assert 'value="[]"' in empty and '<ul class="span-list" data-scheme="ner"></ul>' in empty
    assert str(k.inputs([], 1)).count("<li>") == 0


def test_span_suggestion():
    k = ner()
    for nothing in (None, "x", {"label": "x"}, {"label": []}, {"other": [{"start": 0}]}):
        assert k.suggestion(nothing) == ""
    one = {"label": [{"start": 0, "end": 3, "label": "PER", "text": "Åna", "confidence": 0.9,
                      "extra": 1}, "junk"]}
    page = str(k.suggestion(one))
    assert page.startswith('<div class="span-suggestions" data-scheme="ner" data-spans="')
    spans = json.loads(html.unescape(re.search(r'data-spans="([^"]*)"', page).group(1)))
    assert spans == [{"start": 0, "end": 3, "label": "PER", "text": "Åna", "confidence": 0.9}]
    assert "Åna" in page
    assert "Model suggests 1 span for ner " in page
    two = {"label": [{"start": 0, "end": 3}, {"end": 6}]}
    page = str(k.suggestion(two))
    assert "Model suggests 2 spans for ner " in page
    spans = json.loads(html.unescape(re.search(r'data-spans="([^"]*)"', page).group(1)))
    assert spans == [{"start": 0, "end": 3, "label": None, "text": None, "confidence": None},
                     {"start": None, "end": 6, "label": None, "text": None, "confidence": None}]
    many = {"label": [{"start": i, "end": i + 1} for i in range(1001)]}
    assert "Model suggests 1000 spans" in str(k.suggestion(many))


def test_the_largest_span_answer_a_browser_posts_fits_the_save_cap():
    # What a browser posts at most for one span scheme (every span it may hold, each with the
    # longest label, covering a text of astral characters: 12 bytes each once form-encoded) fits
    # in what the server lets one save carry; a cap that fell short would refuse real answers.
    labels = ["PER", "\U0001F600" * 30]
    scheme = make_scheme("ner", "span", labels)
    per = 3
    text = "\U0001F600" * (span_mod.MAX_SPANS * per)
    spans = [{"start": i * per, "end": (i + 1) * per, "label": labels[1],
              "text": text[i * per:(i + 1) * per]} for i in range(span_mod.MAX_SPANS)]
    assert scheme.kind.check(spans, text) == spans
    body = urlencode({"label:ner": json.dumps(spans, ensure_ascii=False)})
    assert len(body) <= scheme.kind.answer_bytes(len(text))
    assert len(body) <= save_bytes([scheme], len(text))
    # A longer text takes more room, 12 bytes a character at least.
    assert scheme.kind.answer_bytes(len(text) + 100) >= scheme.kind.answer_bytes(len(text)) + 1200


def test_span_predictions_are_checked_as_spans_and_scored_by_entity():
    schemas = {"ner": dict({"type": "span"}, **ner().training_schema())}
    splits = {"t1": "test", "t2": "test", "r1": "train"}
    texts = {"t1": "Ana met Bob", "t2": "in Paris", "r1": "Eve"}

    def pred(item, spans):
        return boundary.prediction({"id": item, "split": splits[item], "scheme": "ner",
                                    "label": spans, "confidence": 0.9}, splits, schemas, texts)

    row = pred("t1", [{"start": 0, "end": 3, "label": "PER", "confidence": 0.8}])
    assert row["label"] == [{"start": 0, "end": 3, "label": "PER", "text": "Ana",
                             "confidence": 0.8}]
    with pytest.raises(boundary.Invalid, match="not a list of spans of ner"):
        pred("t1", "PER")
    with pytest.raises(boundary.Invalid, match="need the item's text"):
        boundary.prediction({"id": "t1", "split": "test", "scheme": "ner", "label": [],
                             "confidence": 0.9}, splits, schemas)
    gold = {"t1": [{"start": 0, "end": 3, "label": "PER", "text": "Ana"},
                   {"start": 8, "end": 11, "label": "PER", "text": "Bob"}],
            "t2": [{"start": 3, "end": 8, "label": "LOC", "text": "Paris"}],
            "r1": [{"start": 0, "end": 3, "label": "PER", "text": "Eve"}]}
    items = [{"id": i, "split": splits[i], "labels": {"ner": gold[i]}} for i in gold]
    preds = [row, pred("t2", [{"start": 3, "end": 8, "label": "LOC", "confidence": 0.7}])]
    r = report.holdout_report(preds, items, schemas)
    held = heldout.HeldOut.from_dict(r)
    assert held.shape == heldout.ENTITIES
    # 2 of the 3 test entities found, both right: precision 1, recall 2/3, F1 0.8.
    assert held.headline.name == "entity micro-F1"
    assert held.headline.value == pytest.approx(0.8)


def test_span_answers_go_to_upstreams_span_annotations_and_back(tmp_path, capsys):
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "a", "text": "Ana met Bob"}) + "\n"
                                      + json.dumps({"id": "b", "text": "nobody"}) + "\n")
    conf = ("data_files: [d.jsonl]\nannotation_schemes:\n"
            "  - {annotation_type: span, name: ner, labels: [PER, LOC]}\n")
    (tmp_path / "c.yaml").write_text(conf)
    (tmp_path / "fresh.yaml").write_text(conf + "output_annotation_dir: fresh_output/\n")
    spans = [{"start": 0, "end": 3, "label": "PER", "text": "Ana"}]
    (tmp_path / "l.jsonl").write_text(json.dumps({"id": "a", "ner": spans}) + "\n"
                                      + json.dumps({"id": "b", "ner": []}) + "\n")
    assert main(["annotations", "import", str(tmp_path / "c.yaml"), str(tmp_path / "l.jsonl"),
                 "--annotator", "ana"]) == 0
    out = tmp_path / "out"
    assert main(["annotations", "export", str(tmp_path / "c.yaml"), "--format", "upstream",
                 "-o", str(out)]) == 0
    rows = {r["id"]: r for r in map(json.loads, open(out / "ana" / "annotated_instances.jsonl"))}
    assert [(s["start"], s["end"], s["annotation"]) for s in rows["a"]["span_annotations"]] \
        == [(0, 3, "PER")]
    assert rows["b"]["label_annotations"] == {"ner": {}}  # submitted, nothing marked
    capsys.readouterr()
    assert main(["annotations", "import", str(tmp_path / "fresh.yaml"), str(out),
                 "--format", "upstream"]) == 0, capsys.readouterr().err
    store = Store(load(str(tmp_path / "fresh.yaml"))[0].db_path)
    try:
        assert store.labels_of("ana", "a") == {"ner": spans}
        assert store.labels_of("ana", "b") == {"ner": []}
    finally:
        store.close()


# -- likert, number, slider: values --------------------------------------------------------------

def kind(kind_type, **options):
    return make_scheme("q", kind_type, [], **options).kind


def test_as_int():
    from potato.schemes.rating import as_int
    assert as_int(3.0) == 3 and type(as_int(3.0)) is int
    assert type(as_int(-3.0)) is int
    assert as_int(2.5) == 2.5 and as_int("3.0") == "3.0" and as_int(3) == 3
    assert type(as_int(float(2 ** 53))) is int and type(as_int(-float(2 ** 53))) is int
    assert type(as_int(float(2 ** 54))) is float
    assert type(as_int(float(2 ** 53 + 2))) is float


def test_likert_check():
    k = kind("likert", size=7)
    assert k.check(None) is None and k.check("") is None
    assert k.check(1) == 1 and k.check(7) == 7 and k.check(4.0) == 4 and type(k.check(4.0)) is int
    for bad in (0, 8, 2.5, -1):
        assert _err(k, bad, None) == "takes a whole point from 1 to 7, not %r." % bad
    assert _err(k, "3", None) == "takes a point from 1 to 7, not '3'."
    assert _err(k, True, None) == "takes a point from 1 to 7, not True."
    assert kind("likert").size == 5 and kind("likert").check(5) == 5


def test_likert_form_preselect_schema_summary():
    k = kind("likert", size=5)
    assert k.from_form([]) is KEEP and k.from_form(["2", "4", " 3 "]) == 3 and k.from_form([""]) is None
    assert k.from_form(["x"]) == "x"
    assert k.key_count() == 5
    assert k.preselect(3) == "3" and k.preselect(3.0) == "3" and k.preselect(None) is None
    assert k.preselect(9) is None and k.preselect("a") is None
    assert k.training_schema() == {"labels": [1, 2, 3, 4, 5], "min_label": "", "max_label": ""}
    assert k.summary() == "points 1 to 5"
    k2 = kind("likert", size=3, min_label="bad", max_label="good")
    assert k2.training_schema() == {"labels": [1, 2, 3], "min_label": "bad",
                                    "max_label": "good"}
    assert k2.summary() == "points 1 to 3 (bad to good)"
    assert kind("likert", max_label="good").summary() == "points 1 to 5 (good)"


def test_likert_inputs():
    k = kind("likert", size=3, min_label="lo<", max_label="hi")
    page = str(k.inputs(2, 1))
    assert page.startswith('<div class="likert"><span class="likert-end">lo&lt;</span>')
    assert page.endswith('<span class="likert-end">hi</span></div>')
    assert ('<label class="option point"><input type="radio" name="label:q" value="1" '
            'data-key="1"> <kbd>1</kbd></label>') in page
    assert ('<label class="option point chosen"><input type="radio" name="label:q" value="2" '
            'data-key="2" checked> <kbd>2</kbd></label>') in page
    assert 'value="3" data-key="3"> <kbd>3</kbd></label></span>' not in page
    assert page.count("<label") == 3 and page.count("checked") == 1
    big = str(kind("likert", size=12).inputs(None, 1))
    assert big.count("<label") == 12 and "checked" not in big and "chosen" not in big
    assert 'value="9" data-key="9"> <kbd>9</kbd></label>' in big
    assert 'value="10" data-key=""> 10</label>' in big
    shifted = str(kind("likert", size=3).inputs(None, 8))
    assert 'value="1" data-key="8"> <kbd>8</kbd>' in shifted
    assert 'value="2" data-key="9"> <kbd>9</kbd>' in shifted
    assert 'value="3" data-key=""> 3</label>' in shifted


def test_number_check_and_range():
    k = kind("number")
    assert k.check(None) is None and k.check("") is None
    assert k.check(-5) == -5 and k.check(2.0) == 2 and type(k.check(2.0)) is int
    assert k.check(2.5) == 2.5
    assert _err(k, "2", None) == "takes a number, not '2'."
    assert k.summary() == "a number from -1e+15 to 1e+15"
    b = kind("number", min_value=0, max_value=10)
    assert b.check(0) == 0 and b.check(10) == 10
    assert _err(b, -1, None) == "-1 is outside 0 to 10."
    assert _err(b, 10.5, None) == "10.5 is outside 0 to 10."
    lo = kind("number", min_value=1.5)
    assert lo.check(1e9) == 1e9 and _err(lo, 1, None) == "1 is outside 1.5 to 1e+15."
    hi = kind("number", max_value=-2)
    assert hi.check(-1e9) == -1e9 and _err(hi, 0, None) == "0 is outside -1e+15 to -2."
    assert kind("number").min_value is None and kind("number").max_value is None


def test_number_form_preselect_schema_inputs():
    k = kind("number", min_value=0, max_value=10)
    assert k.from_form([]) is None and k.from_form(["1", "7", "2.5"]) == 2.5
    assert k.preselect(3.0) == "3" and k.preselect(None) is None and k.preselect(11) is None
    assert k.preselect(2.5) == "2.5" and k.snap(2.4) == 2.4
    assert k.training_schema() == {"labels": [], "min_value": 0, "max_value": 10}
    assert str(k.inputs(None, 1)) == ('<input type="number" name="label:q" aria-label="q" '
                                      'step="any" min="0" max="10" value="">')
    assert str(kind("number", max_value=3).inputs(2.5, 1)) == (
        '<input type="number" name="label:q" aria-label="q" step="any" max="3" value="2.5">')
    assert str(kind("number").inputs(0, 1)).endswith('step="any" value="0">')


def test_slider_check_snaps_to_steps():
    k = kind("slider", min_value=0, max_value=1, step=0.1)
    assert k.check(None) is None and k.check(0.3) == 0.3 and k.check(1) == 1
    assert k.check(0.30000000000000004) == 0.3 and k.check(1.0) == 1 and type(k.check(1.0)) is int
    assert _err(k, 0.35, None) == "0.35 is not on the slider's steps of 0.1 from 0."
    assert _err(k, 1.1, None) == "1.1 is outside 0 to 1."
    s = kind("slider", min_value=5, max_value=25, step=10)
    assert s.check(15) == 15 and s.check(25) == 25
    assert _err(s, 10, None) == "10 is not on the slider's steps of 10 from 5."
    f = kind("slider", min_value=0.5, max_value=10.5, step=2)
    assert f.check(2.5) == 2.5 and f.check(10.5) == 10.5
    assert _err(f, 3.5, None).startswith("3.5 is not on the slider's steps of 2 from 0.5")
    tiny = kind("slider", min_value=0, max_value=1, step=1e-6)
    assert tiny.check(0.5) == 0.5
    e = kind("slider", min_value=0, max_value=10, step=1)
    assert e.check(1e-6) == 0  # within the tolerance of a step (1e-6 of it): snapped
    assert _err(e, 2e-6, None).startswith("2e-06 is not on the slider's steps")
    assert e.check(3.0000000001) == 3 and type(e.check(3.0000000001)) is int
    assert _err(e, 3.00001, None).startswith("3.00001 is not on")
    d = kind("slider")
    assert (d.min_value, d.max_value, d.step, d.starting_value) == (0, 100, 1, 0)
    assert (d.min_label, d.max_label) == ("", "")


def test_a_slider_step_finer_than_1e_10_keeps_its_values():
    # rounding every value to 10 decimals stored 5e-12 on a 1e-12 grid as 0
    k = kind("slider", min_value=0, max_value=1e-3, step=1e-12)
    assert k.check(5e-12) == 5e-12 and k.snap(5.2e-12) == 5e-12
    k = kind("slider", min_value=0, max_value=1e-2, step=3e-11)
    assert k.check(3e-11) == 3e-11 and k.check(6e-11) == 6e-11
    assert kind("slider", min_value=0, max_value=1, step=1e-7).check(
        0.30000000000000004) == 0.3
    k = kind("slider", min_value=0, max_value=1, step=2e-7)
    assert k.check(2.0000000000000002e-07 * 3) == 6e-7


def test_slider_snap_and_preselect():
    k = kind("slider", min_value=1, max_value=2, step=0.25)
    assert k.snap(1.3) == 1.25 and k.snap(1.9) == 2 and type(k.snap(1.9)) is int
    assert k.snap(True) is True and k.snap("x") == "x"
    assert math_is_nan(k.snap(float("nan")))
    assert k.snap(float("inf")) == float("inf")
    assert k.preselect(1.3) == "1.25" and k.preselect(7) is None and k.preselect(None) is None
    s = kind("slider", min_value=3, max_value=30, step=3)
    assert s.snap(7) == 6 and s.snap(8) == 9 and s.snap(4.4) == 3 and s.snap(0.1) == 0
    assert kind("slider", min_value=0, max_value=1, step=0.1).snap(0.3) == 0.3


def math_is_nan(x):
    return x != x


def test_slider_form_and_summary():
    k = kind("slider", min_value=0, max_value=10, step=0.5)
    assert k.from_form([]) is None and k.from_form(["", "1", "2.5"]) == 2.5
    assert k.summary() == "a value from 0 to 10 in steps of 0.5"
    k2 = kind("slider", min_label="cold", max_label="hot")
    assert k2.summary() == "a value from 0 to 100 in steps of 1 (cold to hot)"
    assert kind("slider", min_label="cold").summary().endswith("steps of 1 (cold)")


def test_slider_inputs():
    k = kind("slider", min_value=0, max_value=10, step=0.5, starting_value=5, min_label="cold",
             max_label="hot")
    page = str(k.inputs(None, 1))
    assert page.startswith('<div class="slider"><span class="slider-end">cold 0</span><input '
                           'type="range" data-slider="q" aria-label="q" min="0" max="10" '
                           'step="0.5" value="5"><span class="slider-end">10 hot</span> '
                           '<output class="slider-value">–</output>'
                           '<input type="hidden" name="label:q" value=""></div>'
                           '<p class="hint slider-unset">')
    set_ = str(k.inputs(2.5, 1))
    assert 'step="0.5" value="2.5"><span' in set_
    assert '<output class="slider-value">2.5</output>' in set_
    assert '<input type="hidden" name="label:q" value="2.5"></div>' in set_
    assert '<p class="hint slider-unset" hidden>' in set_
    plain = str(kind("slider").inputs(0, 1))
    assert plain.startswith('<div class="slider"><span class="slider-end">0</span><input ')
    assert '<span class="slider-end">100</span> ' in plain
    assert 'value="0"><span' in plain and '<output class="slider-value">0</output>' in plain
    assert 'name="label:q" value="0"></div><p class="hint slider-unset" hidden>' in plain


# -- config keys ---------------------------------------------------------------------------------

P = ("annotation_schemes", 0)


def parsed(kind_type, m, scalars=None):
    k = kind(kind_type)
    r = Reader("c.yaml", {}, dict(scalars or {}))
    k.parse(r, dict(m), P)
    return k, [(e.key, e.message) for e in r.errors]


def test_kinds_keys_and_registry():
    from potato.schemes import rating
    assert KINDS["likert"] is rating.Likert and KINDS["number"] is rating.Number
    assert KINDS["slider"] is rating.Slider
    assert rating.Likert.keys == ("min_label", "max_label", "size")
    assert rating.Number.keys == ("min_value", "max_value", "min", "max", "step")
    assert rating.Slider.keys == ("min_value", "max_value", "step", "starting_value",
                                  "show_labels", "min_label", "max_label")
    assert rating.Likert.label_rule == "none" and rating.Number.label_rule == "none"
    res = aggregate.aggregate("number", {"i": {"a": 1, "b": 2, "c": 9}})
    assert (res.method, res.labels) == ("median", {"i": 2.0})
    assert aggregate.aggregate("slider", {"i": {"a": 1, "b": 3}}).labels == {"i": 2.0}
    assert aggregate.aggregate("likert", {"i": {"a": 1, "b": 1, "c": 3}}).labels == {"i": 1}


def test_likert_parse():
    k, errs = parsed("likert", {"size": 7, "min_label": "bad", "max_label": "good"})
    assert errs == [] and (k.size, k.min_label, k.max_label) == (7, "bad", "good")
    k, errs = parsed("likert", {"size": 2})
    assert errs == [] and (k.size, k.min_label, k.max_label) == (2, "", "")
    k, errs = parsed("likert", {"size": 20})
    assert errs == [] and k.size == 20
    k, errs = parsed("likert", {})
    assert k.size == 5 and errs == [("annotation_schemes[0]", "annotation_schemes[0] (q) is a "
                                     "likert scale without size: give the number of points (2 "
                                     "to 20), for example size: 5.")]
    for bad in (1, 21, 2.5, "5"):
        k, errs = parsed("likert", {"size": bad})
        assert k.size == 5 and len(errs) == 1 and errs[0][0] == "annotation_schemes[0].size", bad
    k, errs = parsed("likert", {"size": None})  # size: (empty) is the default, 5
    assert k.size == 5 and errs == []


def test_end_labels_read_yaml_booleans_as_written():
    k, errs = parsed("likert", {"size": 3, "min_label": False, "max_label": True},
                     {P + ("min_label",): "No", P + ("max_label",): "Yes"})
    assert errs == [] and (k.min_label, k.max_label) == ("No", "Yes")
    k, errs = parsed("likert", {"size": 3, "min_label": 1, "max_label": "x"},
                     {P + ("min_label",): "1"})
    assert errs == [] and (k.min_label, k.max_label) == ("1", "x")
    k, errs = parsed("likert", {"size": 3, "min_label": 1000}, {P + ("min_label",): "1_000"})
    assert errs == [] and k.min_label == "1000"  # only a boolean is read back as written
    k, errs = parsed("likert", {"size": 3, "min_label": False}, {})
    assert k.min_label == "" and errs[0][0] == "annotation_schemes[0].min_label"
    k, errs = parsed("slider", {"min_value": 0, "max_value": 1, "step": 0.5,
                                "min_label": True, "max_label": "hot"},
                     {P + ("min_label",): "on"})
    assert errs == [] and (k.min_label, k.max_label) == ("on", "hot")


def test_number_parse():
    k, errs = parsed("number", {})
    assert errs == [] and (k.min_value, k.max_value) == (None, None)
    k, errs = parsed("number", {"min_value": -1, "max_value": 2.5})
    assert errs == [] and (k.min_value, k.max_value) == (-1, 2.5)
    k, errs = parsed("number", {"max_value": 3})
    assert errs == [] and (k.min_value, k.max_value) == (None, 3)
    k, errs = parsed("number", {"min_value": 3})
    assert errs == [] and (k.min_value, k.max_value) == (3, None)
    for lo, hi in ((3, 3), (4, 3)):
        k, errs = parsed("number", {"min_value": lo, "max_value": hi})
        assert errs == [("annotation_schemes[0].max_value",
                         "annotation_schemes[0] (q): max_value (%s) must be more than min_value "
                         "(%s)." % (hi, lo))]


def test_number_takes_upstreams_min_max_and_step():
    k, errs = parsed("number", {"min": 1, "max": 10, "step": 0.5})
    assert errs == [] and (k.min_value, k.max_value) == (1, 10)
    assert k.check(2.5) == 2.5 and k.check(10) == 10
    with pytest.raises(LabelError, match="2.2 is not on the steps of 0.5 from 1"):
        k.check(2.2)
    with pytest.raises(LabelError, match="is outside 1 to 10"):
        k.check(11)
    html = str(k.inputs(None, 1))
    assert 'step="0.5"' in html and 'min="1"' in html and 'max="10"' in html
    k, errs = parsed("number", {"step": 3})
    assert errs == [] and k.check(-6) == -6
    with pytest.raises(LabelError, match="4 is not on the steps of 3 from 0"):
        k.check(4)
    k, errs = parsed("number", {"min_value": 1, "min": 1})  # the same: fine
    assert errs == [] and k.min_value == 1
    k, errs = parsed("number", {"min_value": 1, "min": 2})
    assert errs == [("annotation_schemes[0].min", "annotation_schemes[0] (q) gives both "
                     "min_value (1) and min (2), upstream's name for it: keep one.")]
    k, errs = parsed("number", {"step": 0})
    assert errs == [("annotation_schemes[0].step",
                     "annotation_schemes[0].step must be more than 0, not 0.")]
    assert 'step="any"' in str(k.inputs(None, 1))
    k, errs = parsed("number", {"min": 5, "max": 5})
    assert errs and "max_value (5) must be more than min_value (5)" in errs[0][1]


def test_slider_parse():
    k, errs = parsed("slider", {"min_value": -1, "max_value": 1, "step": 0.5,
                                "starting_value": 0.5, "show_labels": False})
    assert errs == []
    assert (k.min_value, k.max_value, k.step, k.starting_value) == (-1, 1, 0.5, 0.5)
    k, errs = parsed("slider", {"min_value": 2, "max_value": 4})
    assert errs == [] and (k.step, k.starting_value) == (1, 2)
    k, errs = parsed("slider", {"min_value": 2, "max_value": 4, "starting_value": 4})
    assert errs == [] and k.starting_value == 4
    k, errs = parsed("slider", {})
    assert [m for _, m in errs] == [
        "annotation_schemes[0] (q) is a slider without min_value: give min_value and max_value "
        "(for example 0 and 100).",
        "annotation_schemes[0] (q) is a slider without max_value: give min_value and max_value "
        "(for example 0 and 100)."]
    assert [key for key, _ in errs] == ["annotation_schemes[0]"] * 2
    assert (k.min_value, k.max_value, k.step, k.starting_value) == (0, 100, 1, 0)
    k, errs = parsed("slider", {"max_value": 5})
    assert len(errs) == 1 and "without min_value" in errs[0][1] and (k.min_value, k.max_value) == (
        0, 5)
    k, errs = parsed("slider", {"min_value": 5, "max_value": None})
    assert len(errs) == 1 and "without max_value" in errs[0][1] and k.max_value == 100
    k, errs = parsed("slider", {"min_value": 5, "max_value": 5})
    assert errs == [("annotation_schemes[0].max_value", "annotation_schemes[0] (q): max_value "
                     "(5) must be more than min_value (5).")]
    assert (k.min_value, k.max_value, k.starting_value) == (5, 6, 5)
    k, errs = parsed("slider", {"min_value": 5, "max_value": 2})
    assert len(errs) == 1 and k.max_value == 6


def test_slider_parse_step():
    for step in (0, -1):
        k, errs = parsed("slider", {"min_value": 0, "max_value": 10, "step": step})
        assert errs == [("annotation_schemes[0].step", "annotation_schemes[0].step must be more "
                         "than 0, not %s." % step)] and k.step == 1
    k, errs = parsed("slider", {"min_value": 0, "max_value": 10, "step": 1e-9})
    assert errs == [("annotation_schemes[0].step", "annotation_schemes[0].step (1e-09) is too "
                     "small for the range: a slider has at most 1e+09 steps; give a larger step.")]
    assert k.step == 1
    k, errs = parsed("slider", {"min_value": 0, "max_value": 1e9, "step": 1})
    assert errs == [] and k.step == 1  # exactly 1e9 steps
    k, errs = parsed("slider", {"min_value": 0, "max_value": 4e9, "step": 1})
    assert len(errs) == 1 and k.step == 4
    k, errs = parsed("slider", {"min_value": -1e9, "max_value": 1e9, "step": 0.5})
    assert len(errs) == 1 and k.step == 2
    k, errs = parsed("slider", {"min_value": 1e9, "max_value": 2e9, "step": 0.5})
    assert len(errs) == 1 and k.step == 1 and type(k.step) is int


def test_slider_parse_starting_value():
    for start in (-1, 11):
        k, errs = parsed("slider", {"min_value": 0, "max_value": 10, "starting_value": start})
        assert errs == [("annotation_schemes[0].starting_value", "annotation_schemes[0]."
                         "starting_value (%s) must be between min_value and max_value." % start)]
        assert k.starting_value == 0
    k, errs = parsed("slider", {"min_value": 0, "max_value": 10, "starting_value": 0})
    assert errs == [] and k.starting_value == 0
    k, errs = parsed("slider", {"min_value": 0, "max_value": 10, "show_labels": "yes"})
    assert errs[0][0] == "annotation_schemes[0].show_labels"


# -- Likert, slider, number through their callers (the kinds' traits) ------------------------------

def _rating_project(tmp_path):
    (tmp_path / "d.jsonl").write_text("".join(
        json.dumps({"id": "i%d" % k, "text": "text %d" % k}) + "\n" for k in range(3)))
    conf = ("data_files: [d.jsonl]\nannotation_schemes:\n"
            "  - {annotation_type: likert, name: agree, size: 5, min_label: no, max_label: yes}\n"
            "  - {annotation_type: slider, name: temp, min_value: 0, max_value: 10, step: 0.5}\n"
            "  - {annotation_type: number, name: count, min_value: -5, max_value: 100}\n")
    (tmp_path / "c.yaml").write_text(conf)
    (tmp_path / "fresh.yaml").write_text(conf + "output_annotation_dir: fresh_output/\n")
    return tmp_path / "c.yaml", tmp_path / "fresh.yaml"


def test_ratings_go_to_upstreams_layout_and_back_as_numbers(tmp_path, capsys):
    cfg, fresh = _rating_project(tmp_path)
    answers = [{"id": "i0", "agree": 4, "temp": 2.5, "count": -3},
               {"id": "i1", "agree": 1, "temp": 10, "count": 70}]
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    assert main(["annotations", "import", str(cfg), str(tmp_path / "l.jsonl"),
                 "--annotator", "ana"]) == 0
    out = tmp_path / "out"
    assert main(["annotations", "export", str(cfg), "--format", "upstream", "-o", str(out)]) == 0
    rows = {r["id"]: r for r in map(json.loads, open(out / "ana" / "annotated_instances.jsonl"))}
    assert rows["i0"]["label_annotations"]["agree"] == {"scale_4": "4"}
    assert list(rows["i0"]["label_annotations"]["temp"].values()) == ["2.5"]
    assert list(rows["i1"]["label_annotations"]["count"].values()) == ["70"]
    capsys.readouterr()
    assert main(["annotations", "import", str(fresh), str(out), "--format", "upstream"]) == 0, \
        capsys.readouterr().err
    store = Store(load(str(fresh))[0].db_path)
    try:
        for a in answers:
            back = store.labels_of("ana", a["id"])
            assert back == {k: v for k, v in a.items() if k != "id"}
            assert type(back["count"]) is int and type(back["agree"]) is int
            assert type(back["temp"]) is type(a["temp"])
    finally:
        store.close()


def test_a_likert_scale_has_agreement_points_and_a_kappa_report(tmp_path):
    from potato.labels import agreement
    cfg_path, _ = _rating_project(tmp_path)
    cfg = load(str(cfg_path))[0]
    store = Store(cfg.db_path)
    try:
        store.sync_items(load_items(cfg))
        for who, points in (("a", (1, 2, 3)), ("b", (1, 2, 4))):
            for item, point in zip(("i0", "i1", "i2"), points):
                store.save_labels(who, item, {"agree": point, "temp": 5, "count": 1})
        found = agreement.summary(cfg, store)
        assert found["agree"]["cohen"] and found["agree"]["cohen"][0]["items"] == 3
        assert found["temp"]["cohen"] == [] and found["count"]["cohen"] == []  # quantities
    finally:
        store.close()
    schemas = {"agree": dict({"type": "likert"}, **cfg.scheme("agree").kind.training_schema()),
               "temp": dict({"type": "slider"}, **cfg.scheme("temp").kind.training_schema())}
    splits = {"t%d" % k: "test" for k in range(6)}

    def pred(item, scheme, label):
        return boundary.prediction({"id": item, "split": "test", "scheme": scheme,
                                    "label": label, "confidence": 0.9}, splits, schemas)

    assert pred("t0", "agree", 3)["label"] == 3 and pred("t0", "agree", 3.0)["label"] == 3
    with pytest.raises(boundary.Invalid):
        pred("t0", "agree", 6)  # off the scale
    with pytest.raises(boundary.Invalid):
        pred("t0", "agree", "three")
    assert pred("t0", "temp", 7.5)["label"] == 7.5
    with pytest.raises(boundary.Invalid):
        pred("t0", "temp", "hot")
    items = [{"id": "t%d" % k, "split": "test", "labels": {"agree": 1 + k % 5, "temp": k}}
             for k in range(6)]
    preds = [pred("t%d" % k, "agree", 1 + k % 5) for k in range(6)] + \
        [pred("t%d" % k, "temp", k + 1.0) for k in range(6)]
    r = report.holdout_report(preds, items, schemas)["per_scheme"]
    agree = heldout.HeldOut.from_dict(r["agree"])
    assert agree.shape == heldout.CLASSES and agree.headline.name == heldout.KAPPA
    assert agree.headline.value == 1.0 and r["agree"]["confusion"]["labels"] == [1, 2, 3, 4, 5]
    temp = heldout.HeldOut.from_dict(r["temp"])
    assert temp.shape == heldout.NUMBERS and temp.headline == heldout.Headline("MAE", 1.0, False)


def test_a_number_schemes_predictions_are_quantities_not_labels(tmp_path):
    from potato.training.exchange import ingest
    from tests.helpers import beats_baseline

    cfg_path, _ = _rating_project(tmp_path)
    cfg_path.write_text(cfg_path.read_text() + "model_training:\n  writeback:\n"
                        "    schemas: [count, agree]\n    include_unlabeled: true\n")
    cfg = load(str(cfg_path))[0]
    store = Store(cfg.db_path)
    try:
        store.sync_items(load_items(cfg))
        rows = [{"id": "i%d" % k, "split": "unlabeled", "scheme": s, "label": v,
                 "confidence": 0.9} for k in range(3) for s, v in (("count", 7 + k),
                                                                   ("agree", 2))]
        wb = ingest.write_back(store, cfg, "r1", rows, beats_baseline())
        assert wb.written == 6
        assert wb.by_label == {"2": 3}  # a Likert point is counted; a number is not a label
    finally:
        store.close()
