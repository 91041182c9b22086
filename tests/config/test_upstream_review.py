"""Review 36: what `potato validate` says about upstream configs (a scheme type not here, the
migration report, instance_display's span_target, the items it now reads)."""

import json

from potato.commands.cli import main
from potato.config.settings import load
from potato.project.validation import check

ITEMS = '{"id": "a", "text": "t"}\n'


def project(tmp_path, text, items=ITEMS):
    (tmp_path / "items.jsonl").write_text(items)
    (tmp_path / "c.yaml").write_text(text)
    return str(tmp_path / "c.yaml")


def test_display_logic_on_a_scheme_of_a_type_not_here_is_not_called_missing(tmp_path):
    """The scheme 'boxes' is in the config (its type is the one error); the radio after it
    must not be told 'boxes' is not a scheme of this config, nor be blamed at the place of
    the image_annotation scheme (annotation_schemes[0], line 3)."""
    path = project(tmp_path, "data_files: [items.jsonl]\nannotation_schemes:\n"
                             "  - annotation_type: image_annotation\n    name: boxes\n"
                             "  - annotation_type: radio\n    name: q\n    labels: [a, b]\n"
                             "    display_logic:\n      show_when:\n"
                             "        - {schema: boxes, operator: not_empty}\n")
    _, report = check(path)
    assert not any("not a scheme of this config" in e.message for e in report.errors), \
        [e.message for e in report.errors]
    assert all(e.key != "annotation_schemes[0].display_logic" for e in report.errors), \
        [(e.key, e.line) for e in report.errors]


def test_following_the_span_target_advice_does_not_just_move_the_error(tmp_path):
    """Upstream's examples/span/multi-span marks spans on two fields (premise: text_key, and
    hypothesis). The error says 'Set item_properties.text_key: hypothesis'; doing so must
    not simply make premise the field in error: the message should say only one field can
    be marked here."""
    body = ("instance_display:\n  fields:\n"
            "    - {key: premise, type: text, span_target: true}\n"
            "    - {key: hypothesis, type: text, span_target: true}\n"
            "annotation_schemes:\n  - {annotation_type: span, name: s, labels: [x]}\n")
    items = '{"id": "a", "premise": "p", "hypothesis": "h"}\n'
    path = project(tmp_path, "data_files: [items.jsonl]\nitem_properties: {text_key: premise}\n"
                   + body, items)
    _, errors, _ = load(path)
    [err] = errors  # one error naming both, and no advice that only moves it
    assert err.key == "instance_display.fields" and "Set item_properties.text_key" not in \
        err.message
    assert "marks spans on 2 fields (premise, hypothesis); spans here mark one field" in \
        err.message
    project(tmp_path, "data_files: [items.jsonl]\nitem_properties: {text_key: hypothesis}\n"
            + body, items)
    _, errors, _ = load(path)
    assert [e.key for e in errors] == ["instance_display.fields"], [e.message for e in errors]


def test_annotation_schemes_not_a_list_is_not_also_called_empty(tmp_path):
    path = project(tmp_path, "data_files: [items.jsonl]\nannotation_schemes: {type: radio}\n")
    _, report = check(path)
    messages = [e.message for e in report.errors]
    assert any("annotation_schemes must be a list" in m for m in messages), messages
    assert not any("annotation_schemes is empty" in m for m in messages), messages


def test_an_empty_display_type_is_not_a_nameless_blocker(tmp_path, capsys):
    path = project(tmp_path, "data_files: [items.jsonl]\nport: 8000\n"
                             "instance_display: {fields: [{key: text, type: ''}]}\n"
                             "annotation_schemes:\n  - {annotation_type: radio, name: q, "
                             "labels: [a, b]}\n")
    main(["validate", "--json", path])
    blocking = json.loads(capsys.readouterr().out)["upstream"]["blocking"]
    assert "instance_display type  (1 field)" not in blocking, blocking


def test_what_each_key_does_does_not_contradict_a_value_refused(tmp_path, capsys):
    """require_password: true is refused (its error says passwords are not asked); the
    --upstream line for it must not read 'require_password (refused): false: annotators log
    in with a user name alone' (the sentence of the form that is implemented)."""
    path = project(tmp_path, "data_files: [items.jsonl]\nrequire_password: true\n"
                             "annotation_schemes:\n  - {annotation_type: radio, name: q, "
                             "labels: [a, b]}\n")
    assert main(["validate", "--upstream", path]) == 1
    out = capsys.readouterr().out
    [line] = [l for l in out.splitlines() if l.startswith("  require_password (refused)")]
    assert not line.startswith("  require_password (refused): false:"), line


def test_validate_names_a_text_key_that_holds_a_list_not_no_text(tmp_path, capsys):
    """Upstream's pairwise examples put a list under text_key; without a pairwise scheme that
    reads it, validate (which now reads the items) must not say the item has no 'text' when
    it has one that is a list."""
    path = project(tmp_path, "data_files: [items.jsonl]\nannotation_schemes:\n"
                             "  - {annotation_type: radio, name: q, labels: [a, b]}\n",
                   '{"id": "1", "text": ["Isn\'t this awesome?!", "I like you"]}\n')
    assert main(["validate", path]) == 1
    out = capsys.readouterr().out
    assert "has no 'text' text" not in out, out
    assert "'text'" in out and "list" in out, out
