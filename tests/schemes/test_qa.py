"""Extractive QA (potato/schemes/qa.py): upstream's extractive_qa block loads with its keys,
a passage_field other than the text_key and items without a question are named, a posted
answer is checked with hostile input (two spans, wrong label, offsets off the text, both an
answer and unanswerable), the form's span field and Unanswerable box are read, the question is
shown (escaped), export cells in our format and upstream's, and training's refusal."""

import pytest

from potato.config.settings import load
from potato.labels.annotations import LabelError, check_label
from potato.project.data import DataError, load_items
from potato.schemes import kind_class
from potato.training.remote import trainers

QA = """\
data_files: [items.jsonl]
item_properties: {id_key: id, text_key: passage}
annotation_schemes:
  - annotation_type: extractive_qa
    name: answer_span
    description: Highlight the answer
    question_field: question
    passage_field: passage
    allow_unanswerable: true
    highlight_color: "#FFEB3B"
"""
PASSAGE = "The tower was built from 1887 to 1889 in Paris."
ITEM = '{"id": "q1", "question": "When was it <built>?", "passage": "%s"}\n' % PASSAGE
ANSWER = {"start": 25, "end": 37, "label": "answer", "text": "1887 to 1889"}


def load_of(tmp_path, config, items=ITEM):
    (tmp_path / "items.jsonl").write_text(items)
    (tmp_path / "c.yaml").write_text(config)
    return load(str(tmp_path / "c.yaml"))


def scheme_of(tmp_path, config=QA):
    cfg, errors, warnings = load_of(tmp_path, config)
    assert errors == [], [e.message for e in errors]
    return cfg.schemes[0], [w.message for w in warnings]


def test_upstreams_block_loads(tmp_path):
    s, warnings = scheme_of(tmp_path)
    assert warnings == [] and s.annotation_type == "extractive_qa"
    assert s.labels == ["answer"] and s.kind.allow_unanswerable
    assert s.kind.summary() == ("the answer to the item's 'question', marked in its text, or "
                                "unanswerable")
    scheme_of(tmp_path, QA.replace("    passage_field: passage\n", ""))  # the text by default


@pytest.mark.parametrize("change,message", [
    (("text_key: passage", "text_key: question"),
     "scheme 'answer_span' marks its answer in the item field 'passage', and what is marked is "
     "the item's text, item_properties.text_key ('question'); set text_key: passage"),
    (("allow_unanswerable: true", "allow_unanswerable: maybe"), "allow_unanswerable"),
    (("allow_unanswerable: true", "labels: [a]"), "takes no labels"),
    (("question_field: question", "question_field: [q]"), "question_field must be a string"),
    (("allow_unanswerable: true", "max_spans: 2"), "max_spans"),
])
def test_bad_blocks_are_named(tmp_path, change, message):
    _, errors, _ = load_of(tmp_path, QA.replace(*change))
    assert message in " | ".join(e.message for e in errors)


@pytest.mark.parametrize("item,message", [
    ('{"id": "q1", "passage": "p"}', "has no 'question' (question_field of extractive_qa "
                                     "scheme 'answer_span'); give each item its question"),
    ('{"id": "q1", "passage": "p", "question": ["a"]}', "has a list as its 'question'"),
    ('{"id": "q1", "passage": "p", "question": "  "}', "has a str as its 'question'"),
])
def test_an_item_without_a_question_is_an_error_when_read(tmp_path, item, message):
    cfg, errors, _ = load_of(tmp_path, QA, item + "\n")
    assert errors == []
    with pytest.raises(DataError) as e:
        load_items(cfg)
    assert "item 'q1' " in str(e.value) and message in str(e.value)


def test_an_answer_is_one_span_or_unanswerable(tmp_path):
    s, _ = scheme_of(tmp_path)
    assert check_label(s, [ANSWER], PASSAGE) == [ANSWER]
    assert check_label(s, [{"start": 25, "end": 29, "label": "answer"}], PASSAGE) == [
        {"start": 25, "end": 29, "label": "answer", "text": "1887"}]
    assert check_label(s, [], PASSAGE) == []  # unanswerable
    assert check_label(s, None, PASSAGE) is None
    strict, _ = scheme_of(tmp_path, QA.replace("allow_unanswerable: true",
                                               "allow_unanswerable: false"))
    with pytest.raises(LabelError, match="allow_unanswerable: false does not offer"):
        check_label(strict, [], PASSAGE)
    assert 'type="checkbox"' not in strict.kind.inputs(None, 1)


@pytest.mark.parametrize("value,message", [
    ([ANSWER, {"start": 0, "end": 3, "label": "answer"}], "takes one answer span, not 2"),
    ([dict(ANSWER, label="PER")], "'PER' is not a label of this scheme (labels: answer)"),
    ([dict(ANSWER, end=999)], "must satisfy 0 <= start < end <= 47"),
    ([dict(ANSWER, start=True)], "start must be a whole number"),
    ([dict(ANSWER, text="1888")], "is not the text at 25..37"),
    ("1887 to 1889", "takes a list of spans"),
    ({"answer_text": "x"}, "takes a list of spans"),
    ([dict(ANSWER, color="red")], "has the key 'color'"),
])
def test_hostile_answers_are_refused_naming_the_scheme(tmp_path, value, message):
    s, _ = scheme_of(tmp_path)
    with pytest.raises(LabelError) as e:
        check_label(s, value, PASSAGE)
    assert "scheme 'answer_span' (extractive_qa)" in str(e.value) and message in str(e.value)


def test_the_form_holds_the_span_field_and_the_unanswerable_box(tmp_path):
    import json
    s, _ = scheme_of(tmp_path)
    k = s.kind
    assert k.from_form([]) is None and k.from_form(["[]"]) is None  # nothing: no answer
    assert check_label(s, k.from_form([json.dumps([ANSWER])]), PASSAGE) == [ANSWER]
    assert check_label(s, k.from_form(["[]", "unanswerable"]), PASSAGE) == []
    assert check_label(s, k.from_form(["unanswerable"]), PASSAGE) == []
    with pytest.raises(LabelError, match="an answer is marked and Unanswerable is ticked"):
        check_label(s, k.from_form([json.dumps([ANSWER]), "unanswerable"]), PASSAGE)


def test_the_page_shows_the_question_and_one_span_with_the_box(tmp_path):
    s, _ = scheme_of(tmp_path)
    assert s.kind.script == "spans.js" and s.kind.marks_text
    view = s.kind.view({"question": "When was it <built>?"})
    assert '<p class="qa-question-text">When was it &lt;built&gt;?</p>' in view
    assert "<built>" not in view and s.kind.view({}) == ""
    page = s.kind.fieldset(None, 1)
    assert 'data-spans="answer_span" data-max-spans="1">' in page
    assert ('<input type="checkbox" name="label:answer_span" value="unanswerable" '
            'data-spans-none="answer_span">') in page
    assert 'data-spans-none="answer_span" checked>' in s.kind.inputs([], 1)
    assert "style=" not in page and "<script" not in page


def test_cells_and_upstreams_entries_round_trip(tmp_path):
    s, _ = scheme_of(tmp_path)
    assert s.kind.cell([ANSWER]) == (
        '[{"start": 25, "end": 37, "label": "answer", "text": "1887 to 1889"}]')
    assert s.kind.cell([]) == "[]" and s.kind.cell(None) == ""
    entry = s.kind.upstream_cell([ANSWER])
    assert entry == {"answer_span": '{"answer_text": "1887 to 1889", "start": 25, "end": 37, '
                                    '"unanswerable": false}'}
    assert check_label(s, s.kind.from_upstream_cell(entry), PASSAGE) == [ANSWER]
    none = s.kind.upstream_cell([])
    assert none == {"answer_span": '{"answer_text": "", "start": -1, "end": -1, '
                                   '"unanswerable": true}'}
    assert check_label(s, s.kind.from_upstream_cell(none), PASSAGE) == []
    for bad in ({"answer_span": "{oops"}, {"answer_span": '{"answer_text": "x", "start": 0, '
                                                          '"end": 1, "unanswerable": false}'}):
        with pytest.raises(LabelError):
            check_label(s, s.kind.from_upstream_cell(bad), PASSAGE)


def test_answers_aggregate_whole_and_are_not_trained():
    cls = kind_class("extractive_qa")
    assert cls.aggregate_as == "whole" and not cls.upstream_spans and cls.ranks_by is None
    assert trainers.annotate_only("extractive_qa").startswith(
        "no trainer trains extractive_qa schemes")


def test_annotators_answers_are_agreed_whole():
    from potato.labels import aggregate
    a = {"start": 0, "end": 3, "label": "answer", "text": "The"}
    b = {"start": 4, "end": 9, "label": "answer", "text": "tower"}
    result = aggregate.aggregate("extractive_qa", {"q1": {"x": [a], "y": [a], "z": [b]},
                                                   "q2": {"x": [], "y": [], "z": [a]}})
    assert result.method == "majority" and result.labels == {"q1": [a], "q2": []}
    # Review 36.5: two different answers are no answer (not two spans, which the kind
    # refuses), and three different ones are not "unanswerable"
    c = {"start": 10, "end": 12, "label": "answer", "text": "is"}
    result = aggregate.aggregate("extractive_qa", {"q1": {"x": [a], "y": [b]},
                                                   "q2": {"x": [a], "y": [b], "z": [c]},
                                                   "q3": {"x": [a], "y": [a], "z": [], "w": []},
                                                   "q4": {"x": [], "y": [], "z": [a]}},
                                  "consensus")
    assert result.labels == {"q1": None, "q2": None, "q3": None, "q4": []}
    assert result.note == "consensus does not apply to whole answers; the majority vote was used"
    for value in result.labels.values():
        assert value is None or kind_class("extractive_qa").max_spans >= len(value)
