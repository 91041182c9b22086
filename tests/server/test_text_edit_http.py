"""text_edit over HTTP (a real server on port 0): the annotate page shows the original and a
box that starts with it, the form and the JSON API save an edit, a bad value is refused with a
400 that names the scheme and the problem (nothing stored), and the exports carry the text."""

import csv
import html
import io
import json
import zipfile

import pytest

from tests.helpers import Client

KEY = "test-admin-key-0123456789"
CONFIG = """\
annotation_task_name: post-editing
data_files: [items.jsonl]
admin_api_key: %s
annotation_schemes:
  - annotation_type: text_edit
    name: post_edit
    source_field: mt_output
    max_length: 200
""" % KEY
ITEMS = [{"id": "t1", "text": "Die Katze sitzt.", "mt_output": "The cat <sit> & mat."},
         {"id": "t2", "text": "Der Hund.", "mt_output": "The dog."}]


@pytest.fixture
def project(write_config):
    return write_config(CONFIG, items=ITEMS)


def mine(c, item="t1"):
    status, body = c.json("GET", "/api/annotations/" + item)
    assert status == 200
    return body["labels"]


def form(value):
    return {"item_id": "t1", "position": "0", "action": "next", "present:post_edit": "1",
            "label:post_edit": value}


def test_the_page_the_form_and_the_api_save_an_edit(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    assert 'src="/static/edit.js"' in page and c.get("/static/edit.js").status == 200
    assert ('data-edit-box="post_edit">\nThe cat &lt;sit&gt; &amp; mat.</textarea>' in page)
    assert '<div class="edit-source-text">The cat &lt;sit&gt; &amp; mat.</div>' in page
    r = c.post("/annotate", form=form("bad\x00text"))
    assert r.status == 400
    assert "scheme 'post_edit' (text_edit): the text holds the control character U+0000" \
        in html.unescape(r.text)
    assert mine(c) == {}
    r = c.post("/annotate", form=form("The cat sits\r\non the mat."))
    assert r.status == 303, r.text
    assert mine(c) == {"post_edit": "The cat sits\non the mat."}
    c.post("/annotate", form={"position": "1", "action": "prev"})
    page = c.get("/annotate").text  # the saved edit shown back, not the source
    assert 'data-edit-box="post_edit">\nThe cat sits\non the mat.</textarea>' in page
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t2", "labels": {"post_edit": "The dog."}})  # unchanged: stored
    assert status == 200 and body["labels"] == {"post_edit": "The dog."}, body
    admin = Client(url)
    h = {"X-API-Key": KEY}
    rows = list(csv.DictReader(io.StringIO(admin.get("/admin/export.csv?rows=label",
                                                     headers=h).text)))
    cells = {(r["item_id"], r["scheme"]): r["label"] for r in rows}
    assert cells[("t1", "post_edit")] == "The cat sits\non the mat."
    assert cells[("t2", "post_edit")] == "The dog."
    archive = zipfile.ZipFile(io.BytesIO(admin.get("/admin/export-upstream.zip",
                                                   headers=h).body))
    name = next(n for n in archive.namelist() if n.endswith("annotated_instances.jsonl"))
    records = {r["id"]: r for r in map(json.loads, archive.read(name).decode().splitlines())}
    assert json.loads(records["t1"]["label_annotations"]["post_edit"]["post_edit"]) == {
        "edited_text": "The cat sits\non the mat."}
    assert "the item's 'mt_output' edited, at most 200 characters" in html.unescape(admin.get(
        "/admin", headers=h).text)


@pytest.mark.parametrize("value,message", [
    (7, "takes text (a string), not 7"),
    (["The cat"], "takes text (a string)"),
    ({"edited_text": "x"}, "takes text (a string)"),
    ("x" * 201, "the text has 201 characters; at most 200 are allowed (max_length)"),
    ("a\u202eb", "the text holds the control character U+202E"),
])
def test_the_api_refuses_a_bad_value_and_stores_nothing(project, serve, value, message):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t1", "labels": {"post_edit": value}})
    assert status == 400 and "scheme 'post_edit' (text_edit): " + message in body["error"], body
    assert mine(c) == {}


def test_a_box_display_logic_hides_stores_nothing_when_left_as_it_started(write_config, serve):
    # Review 36.3: the hidden box was posted prefilled and stored as an edit of distance 0
    config = CONFIG.replace("annotation_schemes:\n", "annotation_schemes:\n"
                            "  - annotation_type: radio\n    name: quality\n"
                            "    labels: [good, bad]\n") + (
        "    display_logic: {show_when: [{schema: quality, operator: equals, value: bad}]}\n")
    _, url = serve(write_config(config, items=ITEMS), training=False)
    c = Client(url)
    c.login("ann")
    f = dict(form("The cat <sit> & mat."), **{"label:quality": "good"})
    assert c.post("/annotate", form=f).status == 303
    assert mine(c) == {"quality": "good"}
    f = dict(form("The cat <sit> & mat."), **{"label:quality": "bad", "position": "0"})
    assert c.post("/annotate", form=f).status == 303  # shown: left as it was, it is kept
    assert mine(c) == {"quality": "bad", "post_edit": "The cat <sit> & mat."}
    f = dict(form("Changed, though hidden."), **{"label:quality": "good", "position": "0"})
    assert c.post("/annotate", form=f).status == 303  # an edit is kept whatever hides it
    assert mine(c)["post_edit"] == "Changed, though hidden."
