"""constant_sum, soft_label and range_slider over HTTP (a real server on port 0): the annotate
form's boxes and hidden fields and the JSON API save them, refuse a bad value with a 400 that
names the scheme and the problem (storing nothing), and the export carries them."""

import csv
import html
import io
import json

import pytest

from tests.helpers import Client

KEY = "test-admin-key-0123456789"
CONFIG = """\
annotation_task_name: shares
data_files: [items.jsonl]
admin_api_key: %s
annotation_schemes:
  - annotation_type: constant_sum
    name: topics
    labels: [Politics, Sports]
    total_points: 10
  - annotation_type: soft_label
    name: mood
    labels: [up, down]
    total: 1
  - annotation_type: range_slider
    name: span
    min_value: 0
    max_value: 10
    step: 0.5
""" % KEY
GOOD = {"topics": {"Politics": 7, "Sports": 3}, "mood": {"up": 0.25, "down": 0.75},
        "span": [2.5, 6]}


@pytest.fixture
def project(write_config):
    return write_config(CONFIG, items=[{"id": "t1", "text": "one"}, {"id": "t2", "text": "two"}])


def mine(c, item="t1"):
    status, body = c.json("GET", "/api/annotations/" + item)
    assert status == 200
    return body["labels"]


def form(values):
    out = {"item_id": "t1", "position": "0", "action": "next"}
    for name in ("topics", "mood", "span"):
        out["present:" + name] = "1"
    out.update({"label:" + k: v for k, v in values.items()})
    return out


def test_the_form_and_the_api_save_shares_and_ranges(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    assert 'src="/static/allocation.js"' in page and 'src="/static/range.js"' in page
    assert c.get("/static/allocation.js").status == 200 and c.get("/static/range.js").status == 200
    r = c.post("/annotate", form=form({"topics": ["7", ""], "mood": ["0.25", "0.75"],
                                       "span": ["2.5", "6"]}))
    assert r.status == 400  # a blank box is 0: 7 of 10, and nothing stored
    assert "scheme 'topics' (constant_sum): the shares add up to 7, not 10: 3 left to give." \
        in html.unescape(r.text)
    assert mine(c) == {}
    r = c.post("/annotate", form=form({"topics": ["7", "3"], "mood": ["0.25", "0.75"],
                                       "span": ["2.5", "6"]}))
    assert r.status == 303, r.text
    assert mine(c) == GOOD
    c.post("/annotate", form={"position": "1", "action": "prev"})
    page = c.get("/annotate").text  # the saved answers shown back
    assert 'data-share="Politics" aria-label="topics: Politics" min="0" max="10" step="any" ' \
           'value="7"' in page and "<output>0</output> of 10 left" in page
    assert '<input type="hidden" name="label:span" value="2.5">' in page
    # the API, on the second item, and the export of both
    status, body = c.json("POST", "/api/annotations", json_body={"item_id": "t2",
                                                                  "labels": GOOD})
    assert status == 200 and body["labels"] == GOOD, body
    admin = Client(url)
    h = {"X-API-Key": KEY}
    rows = list(csv.DictReader(io.StringIO(admin.get("/admin/export.csv?rows=label",
                                                     headers=h).text)))
    cells = {(r["item_id"], r["scheme"]): r for r in rows}
    assert json.loads(cells[("t2", "topics")]["label"]) == GOOD["topics"]
    assert json.loads(cells[("t2", "span")]["aggregated_label"]) == [2.5, 6]
    page = admin.get("/admin", headers=h).text
    assert "10 shared over Politics, Sports" in page and "a range within 0 to 10" in page


@pytest.mark.parametrize("labels,message", [
    ({"topics": {"Politics": 7, "Sports": 4}}, "scheme 'topics' (constant_sum): the shares "
                                                "add up to 11, not 10: 1 too many."),
    ({"topics": {"Politics": 10, "Crime": 0}}, "'Crime' is not one of its labels"),
    ({"topics": {"Politics": 11, "Sports": -1}}, "'Sports' gets -1"),
    ({"mood": {"up": "0.5", "down": 0.5}}, "scheme 'mood' (soft_label): takes a number"),
    ({"mood": [0.5, 0.5]}, "takes an object of {label: number}"),
    ({"span": [6, 2.5]}, "scheme 'span' (range_slider): low (6) is above high (2.5)"),
    ({"span": [0, 10.25]}, "high is 10.25, outside 0 to 10"),
    ({"span": [0.2, 1]}, "not on the range's steps"),
    ({"span": {"low": 1}}, "takes a range [low, high]"),
])
def test_the_api_refuses_a_bad_value_and_stores_nothing(project, serve, labels, message):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t1", "labels": dict({"span": [1, 2]}, **labels)})
    assert status == 400 and message in body["error"], body
    assert mine(c) == {}


def test_nan_and_infinity_in_shares_are_refused(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    for raw in (b'{"item_id": "t1", "labels": {"topics": {"Politics": NaN, "Sports": 10}}}',
                b'{"item_id": "t1", "labels": {"span": [0, Infinity]}}',
                b'{"item_id": "t1", "labels": {"mood": {"up": 1e999}}}'):
        r = c.post("/api/annotations", body=raw, headers={"Content-Type": "application/json"})
        assert r.status == 400 and json.loads(r.body)["error"], r.text
    r = c.post("/annotate", form=form({"span": ["nan", "5"]}))
    assert r.status == 400 and "scheme 'span' (range_slider)" in html.unescape(r.text)
    assert mine(c) == {}
