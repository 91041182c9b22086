"""hierarchical_multiselect and ranking over HTTP (a real server on port 0): saved through the
annotate form and the JSON API, bad values refused with a 400 that names the scheme and
nothing stored, the page shows the saved answer back, and the exports (ours, CSV and
upstream's) carry the values with the mean-rank aggregate."""

import csv
import html
import io
import json

import pytest

from potato.commands.cli import main
from tests.helpers import Client

KEY = "test-admin-key-0123456789"
CONFIG = """\
annotation_task_name: tree and rank
data_files: [items.jsonl]
admin_api_key: %s
annotation_schemes:
  - annotation_type: hierarchical_multiselect
    name: topic
    taxonomy:
      Science:
        Physics: [Optics]
        Biology: [Genetics]
      Medicine: [Genetics]
    show_search: true
  - annotation_type: ranking
    name: order
    labels: [A, B, C]
    allow_ties: true
""" % KEY
H = {"X-API-Key": KEY}


@pytest.fixture
def project(write_config):
    return write_config(CONFIG, items=[{"id": "t1", "text": "one"}, {"id": "t2", "text": "two"}])


def mine(c, item="t1"):
    status, body = c.json("GET", "/api/annotations/" + item)
    assert status == 200
    return body["labels"]


def form_for(fields, action="next"):
    form = {"item_id": "t1", "position": "0", "action": action,
            "present:topic": "1", "present:order": "1"}
    form.update(fields)
    return form


def test_the_annotate_form_saves_both_and_the_page_shows_them_back(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    assert 'src="/static/taxonomy.js"' in page and 'src="/static/ranking.js"' in page
    assert 'value="Science/Biology/Genetics"' in page and 'value="2:B"' in page
    r = c.post("/annotate", form=form_for({
        "label:topic": ["Medicine/Genetics", "Science"],
        "label:order": ["2:A", "1:B", "2:C"]}))
    assert r.status == 303, r.text
    assert mine(c) == {"topic": ["Science", "Medicine/Genetics"], "order": ["B", ["A", "C"]]}
    c.post("/annotate", form={"position": "1", "action": "prev"})
    page = c.get("/annotate").text
    assert 'value="Medicine/Genetics" checked' in page
    assert '<option value="2:A" selected>' in page and '<option value="1:B" selected>' in page
    # nothing ticked and no ranks clear both answers
    r = c.post("/annotate", form=form_for({"label:order": ["", "", ""]}))
    assert r.status == 303 and mine(c) == {}


@pytest.mark.parametrize("fields,message", [
    ({"label:topic": ["Genetics"]}, "scheme 'topic' (hierarchical_multiselect): 'Genetics' "
                                    "is not a node of the taxonomy"),
    ({"label:topic": ["Science", "Science"]}, "'Science' is given twice"),
    ({"label:order": ["1:A", "2:B", ""]}, "scheme 'order' (ranking): 'C' has no place"),
    ({"label:order": ["1:A", "2:B", "3:<script>"]}, "'<script>' is not a label"),
])
def test_the_form_refuses_a_bad_value_and_stores_nothing(project, serve, fields, message):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    r = c.post("/annotate", form=form_for(dict({"label:topic": ["Science"]}, **fields)))
    assert r.status == 400 and message in html.unescape(r.text), r.text
    assert "<script>" not in r.text
    assert mine(c) == {}


@pytest.mark.parametrize("labels,message", [
    ({"topic": "Science/Physics/Optics/Lasers"}, "is not a node of the taxonomy"),
    ({"topic": [["Science"]]}, "is not a node"),
    ({"topic": ["Science"] * 5000}, "5000 nodes given; the taxonomy has 7"),
    ({"order": ["A", "B"]}, "'C' has no place"),
    ({"order": "A,B,C"}, "takes the labels in order"),
    ({"order": ["A", ["B", "C"], "A"]}, "'A' has two places"),
    ({"order": [{"A": 1}, "B", "C"]}, "is not a label"),
])
def test_the_api_refuses_a_bad_value_and_stores_nothing(project, serve, labels, message):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t1", "labels": dict({"order": ["A", "B", "C"]}, **labels)})
    assert status == 400 and message in body["error"], body
    assert mine(c) == {}


def test_the_api_stores_both_and_the_exports_carry_them(project, serve, tmp_path, capsys):
    _, url = serve(project, training=False)
    for name, order in (("ann", ["A", "B", "C"]), ("bob", ["B", "A", "C"]),
                        ("cy", [["A", "C"], "B"])):
        c = Client(url)
        c.login(name)
        status, body = c.json("POST", "/api/annotations", json_body={
            "item_id": "t1", "labels": {"topic": ["Science/Physics"], "order": order}})
        assert status == 200, body
        assert body["labels"]["order"] == order
    admin = Client(url)
    rows = [json.loads(r) for r in admin.get("/admin/export.jsonl?rows=label",
                                              headers=H).text.splitlines()]
    order = next(r for r in rows if r["scheme"] == "order")
    # mean places: A (1 + 2 + 1.5) / 3 = 1.5, B (2 + 1 + 3) / 3 = 2, C (3 + 3 + 1.5) / 3
    assert order["aggregated_label"] == ["A", "B", "C"]
    topic = next(r for r in rows if r["scheme"] == "topic")
    assert topic["aggregated_label"] == ["Science/Physics"]
    table = list(csv.DictReader(io.StringIO(admin.get("/admin/export.csv?rows=label",
                                                      headers=H).text)))
    cells = {(r["annotator"], r["scheme"]): r["label"] for r in table}
    assert cells[("cy", "order")] == '[["A", "C"], "B"]'
    assert cells[("ann", "topic")] == "Science/Physics"
    out = tmp_path / "up"
    assert main(["annotations", "export", project, "--format", "upstream", "-o", str(out)]) == 0
    capsys.readouterr()
    line = json.loads((out / "cy" / "annotated_instances.jsonl").read_text().splitlines()[0])
    assert line["label_annotations"]["order"] == {"rank_order": "A=C,B"}
    assert line["label_annotations"]["topic"] == {"selected_labels": "Physics"}
