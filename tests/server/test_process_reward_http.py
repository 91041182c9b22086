"""process_reward over HTTP (a real server on port 0): the annotate form (first_error's one
choice, per_step's hidden list) and the JSON API save step rewards, refuse a bad value or one
that does not match the item's steps with a 400 that names the scheme (storing nothing), and
the export carries them."""

import csv
import html
import io
import json

import pytest

from tests.helpers import Client

KEY = "test-admin-key-0123456789"
CONFIG = """\
annotation_task_name: prm
data_files: [items.jsonl]
admin_api_key: %s
annotation_schemes:
  - annotation_type: process_reward
    name: first
    steps_key: turns
  - annotation_type: process_reward
    name: each
    steps_key: turns
    mode: per_step
    allow_neutral: true
""" % KEY
TURNS = [{"content": "read the <script>file</script>"}, {"content": "edit"},
         {"content": "test"}]


@pytest.fixture
def project(write_config):
    return write_config(CONFIG, items=[{"id": "t1", "text": "one", "turns": TURNS},
                                       {"id": "t2", "text": "two", "turns": TURNS[:2]}])


def mine(c, item="t1"):
    status, body = c.json("GET", "/api/annotations/" + item)
    assert status == 200
    return body["labels"]


def form(values):
    out = {"item_id": "t1", "position": "0", "action": "next", "present:first": "1",
           "present:each": "1"}
    out.update({"label:" + k: v for k, v in values.items()})
    return out


def test_the_form_and_the_api_save_step_rewards(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    assert 'src="/static/steps.js"' in page and c.get("/static/steps.js").status == 200
    assert "read the &lt;script&gt;file&lt;/script&gt;" in page and "<script>file" not in page
    assert 'name="label:first" value="3/3" aria-label="No step is wrong"' in page
    r = c.post("/annotate", form=dict(form({"first": "1/3", "each": "[1, null, 0]"}),
                                      **{"step:each:0": "1", "step:each:2": "0"}))
    assert r.status == 303, r.text
    assert mine(c) == {"first": [1, -1, -1], "each": [1, None, 0]}
    c.post("/annotate", form={"position": "1", "action": "prev"})
    page = c.get("/annotate").text  # the saved answers shown back
    assert 'value="1/3" aria-label="Step 2 is the first wrong step" checked' in page
    assert '<input type="hidden" name="label:each" value="[1, null, 0]">' in page
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t2", "labels": {"first": [1, 1], "each": [-1, None]}})
    assert status == 200 and body["labels"] == {"first": [1, 1], "each": [-1, None]}, body
    admin = Client(url)
    h = {"X-API-Key": KEY}
    rows = list(csv.DictReader(io.StringIO(admin.get("/admin/export.csv?rows=label",
                                                     headers=h).text)))
    cells = {(r["item_id"], r["scheme"]): r for r in rows}
    assert json.loads(cells[("t1", "first")]["label"]) == [1, -1, -1]
    assert json.loads(cells[("t2", "each")]["aggregated_label"]) == [-1, None]


@pytest.mark.parametrize("labels,message", [
    ({"first": [1, -1, 1]}, "scheme 'first' (process_reward): [1, -1, 1] has a correct step "
                            "after a wrong one"),
    ({"first": [1, -1]}, "gives 2 step reward(s), and the item has 3 steps in 'turns'"),
    ({"each": [1, 0, 0, 0]}, "scheme 'each' (process_reward): gives 4 step reward(s)"),
    ({"each": [1, 5, 0]}, "step 2's reward is 5"),
    ({"each": {"steps": []}}, "takes a list of at most 500 step rewards"),
    ({"each": ["<b>1</b>"]}, "reward is '<b>1</b>'"),
])
def test_the_api_refuses_a_bad_value_and_stores_nothing(project, serve, labels, message):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t1", "labels": dict({"first": [1, 1, 1]}, **labels)})
    assert status == 400 and message in body["error"], body
    assert mine(c) == {}


@pytest.mark.parametrize("values,message", [
    ({"first": "2/2"}, "gives 2 step reward(s), and the item has 3 steps"),
    ({"first": "4/3"}, "scheme 'first' (process_reward)"),
    ({"each": "[1, 1]"}, "gives 2 step reward(s)"),
    ({"each": "[1, NaN, 1]"}, "reward is nan"),
    ({"each": "<img src=x>"}, "scheme 'each' (process_reward)"),
])
def test_the_form_refuses_a_bad_value_and_stores_nothing(project, serve, values, message):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    r = c.post("/annotate", form=form(values))
    assert r.status == 400 and message in html.unescape(r.text), r.text
    assert "<img src=x>" not in r.text
    assert mine(c) == {}
