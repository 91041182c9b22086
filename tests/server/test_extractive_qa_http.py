"""extractive_qa over HTTP (a real server on port 0): the annotate page shows the question and
the passage with the span field and the Unanswerable box, the form and the JSON API save an
answer or unanswerable, a bad value is refused with a 400 that names the scheme and the
problem (nothing stored), and the exports carry the answer, upstream's output included."""

import csv
import html
import io
import json
import zipfile

import pytest

from tests.helpers import Client

KEY = "test-admin-key-0123456789"
CONFIG = """\
annotation_task_name: qa
data_files: [items.jsonl]
admin_api_key: %s
item_properties: {id_key: id, text_key: passage}
annotation_schemes:
  - annotation_type: extractive_qa
    name: answer
    question_field: question
    passage_field: passage
""" % KEY
PASSAGE = "The tower was built from 1887 to 1889 in Paris."
ITEMS = [{"id": "q1", "question": "When was it <built>?", "passage": PASSAGE},
         {"id": "q2", "question": "Who built it?", "passage": PASSAGE}]
ANSWER = {"start": 25, "end": 37, "label": "answer", "text": "1887 to 1889"}


@pytest.fixture
def project(write_config):
    return write_config(CONFIG, items=ITEMS)


def mine(c, item="q1"):
    status, body = c.json("GET", "/api/annotations/" + item)
    assert status == 200
    return body["labels"]


def form(*values):
    return {"item_id": "q1", "position": "0", "action": "next", "present:answer": "1",
            "label:answer": list(values)}


def test_the_page_the_form_and_the_api_save_answers(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    assert 'src="/static/spans.js"' in page
    assert '<p class="qa-question-text">When was it &lt;built&gt;?</p>' in page
    assert 'data-spans="answer" data-max-spans="1">' in page and 'data-spans-none="answer"' in page
    r = c.post("/annotate", form=form(json.dumps([ANSWER]), "unanswerable"))
    assert r.status == 400
    assert "scheme 'answer' (extractive_qa): an answer is marked and Unanswerable is ticked" \
        in html.unescape(r.text)
    assert mine(c) == {}
    r = c.post("/annotate", form=form(json.dumps([ANSWER])))
    assert r.status == 303, r.text
    assert mine(c) == {"answer": [ANSWER]}
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "q2", "labels": {"answer": []}})  # unanswerable
    assert status == 200 and body["labels"] == {"answer": []}, body
    admin = Client(url)
    h = {"X-API-Key": KEY}
    rows = list(csv.DictReader(io.StringIO(admin.get("/admin/export.csv?rows=label",
                                                     headers=h).text)))
    cells = {(r["item_id"], r["scheme"]): r["label"] for r in rows}
    assert json.loads(cells[("q1", "answer")]) == [ANSWER]
    assert json.loads(cells[("q2", "answer")]) == []
    archive = zipfile.ZipFile(io.BytesIO(admin.get("/admin/export-upstream.zip",
                                                   headers=h).body))
    name = next(n for n in archive.namelist() if n.endswith("annotated_instances.jsonl"))
    records = {r["id"]: r for r in map(json.loads, archive.read(name).decode().splitlines())}
    assert records["q1"]["span_annotations"] == []
    assert json.loads(records["q1"]["label_annotations"]["answer"]["answer"]) == {
        "answer_text": "1887 to 1889", "start": 25, "end": 37, "unanswerable": False}
    assert json.loads(records["q2"]["label_annotations"]["answer"]["answer"])["unanswerable"]


@pytest.mark.parametrize("value,message", [
    ([ANSWER, dict(ANSWER, start=0, end=3, text="The")], "takes one answer span, not 2"),
    ([dict(ANSWER, label="PER")], "'PER' is not a label of this scheme (labels: answer)"),
    ([dict(ANSWER, end=99)], "must satisfy 0 <= start < end <= 47"),
    ("1887", "takes a list of spans"),
    ({"answer_text": "1887"}, "takes a list of spans"),
])
def test_the_api_refuses_a_bad_value_and_stores_nothing(project, serve, value, message):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "q1", "labels": {"answer": value}})
    assert status == 400 and "scheme 'answer' (extractive_qa): " in body["error"], body
    assert message in body["error"], body
    assert mine(c) == {}
