"""Upstream's pure_display: a scheme that only shows its description (a heading for upstream's
Markdown "## ..."), stores nothing, and refuses any value posted for it."""

import pytest

from potato.config.reader import Reader
from potato.schemes import KEEP, LabelError, make_scheme, parse_schemes
from tests.helpers import Client


def note(description):
    return make_scheme("sec", "pure_display", [], description)


def test_a_heading_or_a_note_escaped_and_no_inputs():
    out = str(note("## Selection <Types>").kind.fieldset(None, 1))
    assert out == ('<fieldset class="scheme scheme-pure_display" data-scheme="sec" '
                   'data-type="pure_display"><h3 class="scheme-note-heading">Selection '
                   '&lt;Types&gt;</h3></fieldset>')
    out = str(note("**Read** the text <b>first</b>").kind.fieldset(None, 1))
    assert '<p class="scheme-note-text">**Read** the text &lt;b&gt;first&lt;/b&gt;</p>' in out
    assert "<input" not in out and note("x").kind.key_count() == 0


@pytest.mark.parametrize("value", ["a", 0, ["x"], {"a": 1}, True])
def test_it_takes_no_answer(value):
    k = note("## H").kind
    assert k.check(None) is None and k.check("") is None
    assert k.from_form(["x"]) is KEEP
    with pytest.raises(LabelError, match="shows a note and takes no answer"):
        k.check(value)


def test_it_cannot_be_required():
    r = Reader("c.yaml", {}, {})
    parse_schemes(r, [{"annotation_type": "pure_display", "name": "h", "description": "## H",
                       "label_requirement": {"required": True}}], {})
    assert [e.message for e in r.errors] == [
        "h: a pure_display scheme asks nothing, so it cannot be required. Remove "
        "label_requirement."]


CONFIG = """\
annotation_task_name: notes
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - {annotation_type: pure_display, name: head, description: "## Part one"}
  - {annotation_type: radio, name: r, labels: [a, b]}
"""


def test_the_page_shows_it_and_saves_only_the_others(write_config, serve):
    _, url = serve(write_config(CONFIG), training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    assert '<h3 class="scheme-note-heading">Part one</h3>' in page
    r = c.post("/annotate", form={"item_id": "i0", "position": "0", "action": "next",
                                  "present:r": "1", "label:r": "a", "label:head": "x"})
    assert r.status == 303
    status, body = c.json("GET", "/api/annotations/i0")
    assert body["labels"] == {"r": "a"}
    status, body = c.json("POST", "/api/annotations",
                          json_body={"item_id": "i1", "labels": {"head": "x"}})
    assert status == 400 and "shows a note and takes no answer" in body["error"]


def test_a_condition_on_it_is_refused():
    # review 39.7: the condition could never hold, so the scheme would never be shown
    r = Reader("c.yaml", {}, {})
    parse_schemes(r, [{"annotation_type": "pure_display", "name": "note", "description": "x"},
                      {"annotation_type": "text", "name": "why", "display_logic": {
                          "show_when": [{"schema": "note", "operator": "equals",
                                         "value": "x"}]}}], {})
    assert [e.message for e in r.errors] == [
        "why's display_logic names the scheme 'note', which takes no answer (it only shows a "
        "note), so the condition could never hold; name a scheme annotators answer."]
