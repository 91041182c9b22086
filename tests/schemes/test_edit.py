"""Post-editing (potato/schemes/edit.py): upstream's text_edit block loads with its keys (its
show_diff named as not drawn), bad blocks and items without the text to edit are named, a
posted edit is checked with hostile input (non-strings, too long, control characters), the
page's box starts with the source and shows the original above it (escaped), export cells in
our format and upstream's, no aggregation, and training's refusal."""

import pytest

from potato.config.settings import load
from potato.labels.annotations import LabelError, check_label
from potato.project.data import DataError, load_items
from potato.schemes import kind_class
from potato.training.remote import trainers

EDIT = """\
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: text_edit
    name: post_edit
    description: Fix the translation
    source_field: mt_output
    show_edit_distance: true
    allow_reset: true
"""
ITEM = '{"id": "e1", "text": "Die Katze.", "mt_output": "The cat sit."}\n'


def load_of(tmp_path, config, items=ITEM):
    (tmp_path / "items.jsonl").write_text(items)
    (tmp_path / "c.yaml").write_text(config)
    return load(str(tmp_path / "c.yaml"))


def scheme_of(tmp_path, config=EDIT):
    cfg, errors, warnings = load_of(tmp_path, config)
    assert errors == [], [e.message for e in errors]
    return cfg.schemes[0], [w.message for w in warnings]


def test_upstreams_block_loads(tmp_path):
    s, warnings = scheme_of(tmp_path)
    assert warnings == [] and s.annotation_type == "text_edit" and s.labels == []
    assert s.kind.source_field == "mt_output" and s.kind.max_length == 5000
    assert s.kind.summary() == "the item's 'mt_output' edited, at most 5000 characters"
    _, warnings = scheme_of(tmp_path, EDIT + "    show_diff: true\n")
    assert len(warnings) == 1 and "word-by-word diff is not drawn here" in warnings[0]
    _, warnings = scheme_of(tmp_path, EDIT + "    show_diff: false\n")
    assert warnings == []


@pytest.mark.parametrize("change,message", [
    (("    source_field: mt_output\n", ""), "without source_field: give source_field"),
    (("source_field: mt_output", "source_field: 7"), "source_field must be a string"),
    (("allow_reset: true", "allow_reset: maybe"), "allow_reset"),
    (("allow_reset: true", "labels: [a]"), "takes no labels"),
    (("allow_reset: true", "max_length: 0"), "max_length"),
    (("allow_reset: true", "diff_mode: words"), "diff_mode"),
])
def test_bad_blocks_are_named(tmp_path, change, message):
    _, errors, _ = load_of(tmp_path, EDIT.replace(*change))
    assert message in " | ".join(e.message for e in errors)


@pytest.mark.parametrize("item,message", [
    ('{"id": "e1", "text": "x"}', "has no 'mt_output' (source_field of text_edit scheme "
                                  "'post_edit'): give each item the text to edit there."),
    ('{"id": "e1", "text": "x", "mt_output": ["a"]}', "as a list, not the text to edit"),
    ('{"id": "e1", "text": "x", "mt_output": null}', "as a NoneType"),
    ('{"id": "e1", "text": "x", "mt_output": "' + "y" * 21 + '"}',
     "has 21 characters in 'mt_output' (source_field of text_edit scheme 'post_edit'), more "
     "than the 20 an edit may keep; raise the scheme's max_length."),
    ('{"id": "e1", "text": "x", "mt_output": "a\\u0007b"}', "control character U+0007"),
])
def test_an_item_without_the_text_to_edit_is_an_error_when_read(tmp_path, item, message):
    cfg, errors, _ = load_of(tmp_path, EDIT + "    max_length: 20\n", item + "\n")
    assert errors == []
    with pytest.raises(DataError) as e:
        load_items(cfg)
    assert "item 'e1' " in str(e.value) and message in str(e.value)


def test_an_edit_is_free_text(tmp_path):
    s, _ = scheme_of(tmp_path)
    assert check_label(s, "The cat sits.") == "The cat sits."
    assert check_label(s, "line one\r\nline\ttwo") == "line one\nline\ttwo"
    assert check_label(s, "The cat sit.") == "The cat sit."  # unchanged: an answer
    for empty in (None, "", "  \n "):
        assert check_label(s, empty) is None


@pytest.mark.parametrize("value,message", [
    (5, "takes text (a string), not 5"),
    (True, "not True"),
    (["The cat"], "not ['The cat']"),
    ({"edited_text": "x"}, "not {'edited_text': 'x'}"),
    ("x" * 5001, "the text has 5001 characters; at most 5000 are allowed (max_length)"),
    ("a\x00b", "control character U+0000 at character 1"),
    ("a\u202eb", "control character U+202E"),
    ("a\x85b", "control character U+0085"),
])
def test_hostile_edits_are_refused_naming_the_scheme(tmp_path, value, message):
    s, _ = scheme_of(tmp_path)
    with pytest.raises(LabelError) as e:
        check_label(s, value)
    assert "scheme 'post_edit' (text_edit)" in str(e.value) and message in str(e.value)


def test_the_box_starts_with_the_source_and_the_original_is_shown(tmp_path):
    s, _ = scheme_of(tmp_path)
    row = {"id": "e1", "mt_output": "<b>The cat</b> & sit."}
    assert s.kind.script == "edit.js" and s.kind.key_count() == 0
    assert s.kind.item_fields() == ("mt_output",)
    page = s.kind.fieldset(s.kind.initial(row), 1)
    assert ('<textarea name="label:post_edit" aria-label="post_edit: edited text" rows="5" '
            'maxlength="5000" data-edit-box="post_edit">\n&lt;b&gt;The cat&lt;/b&gt; &amp; '
            'sit.</textarea>') in page
    assert 'data-edit-reset="post_edit"' in page and 'data-edit-distance="post_edit"' in page
    assert "<b>" not in page and "style=" not in page and "<script" not in page
    view = s.kind.view(row)
    assert 'class="edit-source" data-scheme="post_edit"' in view
    assert "&lt;b&gt;The cat&lt;/b&gt; &amp; sit." in view and "<b>" not in view
    assert s.kind.view({"id": "e2"}) == "" and s.kind.initial({"id": "e2"}) is None
    saved = s.kind.inputs("The cat sits.", 1)
    assert ">\nThe cat sits.</textarea>" in saved
    plain, _ = scheme_of(tmp_path, EDIT.replace("true", "false"))
    page = plain.kind.inputs("x", 1)
    assert "data-edit-reset" not in page and "data-edit-distance" not in page


def test_the_form_holds_the_box(tmp_path):
    s, _ = scheme_of(tmp_path)
    assert s.kind.from_form([]) is None
    assert check_label(s, s.kind.from_form(["The cat sits."])) == "The cat sits."


def test_cells_and_upstreams_entries_round_trip(tmp_path):
    s, _ = scheme_of(tmp_path)
    assert s.kind.cell("The cat sits.") == "The cat sits." and s.kind.cell(None) == ""
    entry = s.kind.upstream_cell("Die «Katze» sits.")
    assert entry == {"post_edit": '{"edited_text": "Die «Katze» sits."}'}
    assert check_label(s, s.kind.from_upstream_cell(entry)) == "Die «Katze» sits."
    upstreams = {"post_edit": '{"edited_text": "x y", "original_text": "x", '
                              '"edit_distance_chars": 2, "edit_distance_words": 1}'}
    assert check_label(s, s.kind.from_upstream_cell(upstreams)) == "x y"
    assert check_label(s, s.kind.from_upstream_cell({"post_edit": "plain"})) == "plain"
    assert check_label(s, s.kind.from_upstream_cell({"post_edit": "{not json"})) == "{not json"
    for bad in ({"post_edit": '{"edited": "x"}'}, {"post_edit": '{"edited_text": 5}'}):
        with pytest.raises(LabelError):
            check_label(s, s.kind.from_upstream_cell(bad))


def test_edits_are_not_aggregated_nor_trained():
    cls = kind_class("text_edit")
    assert cls.aggregate_as == "none" and not cls.one_label and not cls.suggests_labels
    assert trainers.annotate_only("text_edit").startswith(
        "no trainer trains text_edit schemes")
