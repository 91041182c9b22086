"""Upstream's pairwise examples as projects (issue 36, item 8): configs written like upstream's
pairwise-comparison and pairwise-scale examples (their top-level keys, a text_key that holds
the list of responses, made-up items) validate, open, show the responses side by side with
the scheme's tiles or slider, save from the annotate form and the JSON API, refuse a hostile
value, and export."""

import csv
import io
import json

import pytest

from potato.commands.cli import main
from tests.helpers import Client

KEY = "test-admin-key-0123456789"

TOP = """\
port: 9001
annotation_task_name: Pairwise example
task_dir: .
output_annotation_dir: annotation_output/pairwise/
output_annotation_format: tsv
annotation_codebook_url: ''
data_files:
- items.jsonl
item_properties:
  id_key: id
  text_key: text
list_as_text:
  text_list_prefix_type: alphabet
user_config:
  allow_all_users: true
  users: []
jumping_to_id_disabled: true
surveyflow:
  'on': false
automatic_assignment:
  'on': false
alert_time_each_instance: 10000000
horizontal_key_bindings: true
admin_api_key: %s
site_dir: default
""" % KEY

COMPARISON = TOP + """\
annotation_schemes:
- annotation_type: pairwise
  name: preference
  description: Which note is warmer?
  mode: binary
  items_key: text
  show_labels: true
  labels:
    - "Option A"
    - "Option B"
  allow_tie: true
  tie_label: "Hard to tell"
  sequential_key_binding: true
  label_requirement:
    required: true
"""

SCALE = TOP + """\
annotation_schemes:
- annotation_type: pairwise
  name: preference_scale
  description: How much warmer is one note than the other?
  mode: scale
  items_key: text
  show_labels: true
  labels:
    - "Note A"
    - "Note B"
  scale:
    min: -3
    max: 3
    step: 1
    default: 0
    labels:
      min: "A is much warmer"
      max: "B is much warmer"
      center: "Equal / Hard to tell"
  label_requirement:
    required: true
"""

ITEMS = [{"id": "1", "text": ["See you soon, friend!", "Meeting moved to 3pm."]},
         {"id": "2", "text": ["<script>alert('x')</script>", "Miss you & love you"]}]


@pytest.mark.parametrize("config", [COMPARISON, SCALE], ids=["comparison", "scale"])
def test_upstreams_pairwise_examples_validate(write_config, config, capsys):
    path = write_config(config, items=ITEMS)
    assert main(["validate", path]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "OK (0 error(s), 0 warning(s)" in out and "blocking (0)" in out, out
    # no trainer takes a pairwise scheme: no note asks for its suggestions to be written back
    assert "writeback" not in out, out


def test_a_comparison_opens_renders_and_saves(write_config, serve):
    _, url = serve(write_config(COMPARISON, items=ITEMS), training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    assert '<section class="pairwise-view" data-field="text"' in page
    assert page.index("See you soon, friend!") < page.index("Meeting moved to 3pm.")
    assert 'id="item-text"' not in page  # the list is shown as the responses, not as text
    for key, label in (("1", "Option A"), ("2", "Option B"), ("3", "Hard to tell")):
        assert f'name="label:preference" value="{label}" data-key="{key}"' in page
    form = {"item_id": "1", "position": "0", "action": "next", "present:preference": "1",
            "label:preference": "Option B"}
    assert c.post("/annotate", form=form).status == 303
    page = c.get("/annotate").text  # the next item: 2
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)" in page
    assert "Miss you &amp; love you" in page
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "2", "labels": {"preference": "<img src=x onerror=alert(1)>"}})
    assert status == 400 and "scheme 'preference' (pairwise): takes one of" in body["error"]
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "2", "labels": {"preference": "Hard to tell"}})
    assert status == 200, body
    rows = list(csv.DictReader(io.StringIO(c.get(
        "/admin/export.csv?rows=label", headers={"X-API-Key": KEY}).text)))
    assert {(r["item_id"], r["label"]) for r in rows} == {("1", "Option B"),
                                                          ("2", "Hard to tell")}
    # the item's text in the export: its responses, lettered as upstream's list_as_text does
    assert {r["item_id"]: r["text"] for r in rows}["1"] == (
        "A. See you soon, friend!\n\nB. Meeting moved to 3pm.")
    bob = Client(url)  # a second annotator: the admin page shows their agreement
    bob.login("bob")
    for item_id, label in (("1", "Option B"), ("2", "Option A")):
        assert bob.json("POST", "/api/annotations", json_body={
            "item_id": item_id, "labels": {"preference": label}})[0] == 200
    admin = c.get("/admin", headers={"X-API-Key": KEY}).text
    assert "which response is preferred: Option A, Option B (or Hard to tell)" in admin
    assert "Cohen's κ (ann and bob)" in admin and "over the 2 item(s)" in admin


def test_a_scale_opens_renders_and_saves(write_config, serve):
    _, url = serve(write_config(SCALE, items=ITEMS), training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    assert "See you soon, friend!" in page and 'data-slider="preference_scale"' in page
    assert "Note A: A is much warmer" in page and "Equal / Hard to tell" in page
    form = {"item_id": "1", "position": "0", "action": "next",
            "present:preference_scale": "1", "label:preference_scale": "-2"}
    assert c.post("/annotate", form=form).status == 303
    status, body = c.json("GET", "/api/annotations/1")
    assert body["labels"] == {"preference_scale": -2}
    for bad in (0.5, 7, "NaN", True):
        status, body = c.json("POST", "/api/annotations", json_body={
            "item_id": "2", "labels": {"preference_scale": bad}})
        assert status == 400 and "'preference_scale' (pairwise_scale)" in body["error"], body
    lines = [json.loads(x) for x in c.get("/admin/export.jsonl?rows=label",
                                          headers={"X-API-Key": KEY}).text.splitlines()]
    assert [(r["item_id"], r["label"], r["aggregated_label"]) for r in lines] == [
        ("1", -2, -2.0)]  # a rating: the median of the annotators' values


def test_an_item_with_one_response_stops_the_project_with_its_name(write_config, capsys):
    path = write_config(COMPARISON, items=ITEMS + [{"id": "3", "text": ["alone"]}])
    assert main(["validate", path]) == 1
    out = capsys.readouterr().out
    assert "item '3' has 1 response(s) in 'text' (items_key of pairwise scheme 'preference')" \
        in out, out


def test_training_refuses_a_pairwise_scheme_with_a_sentence(write_config, serve):
    _, url = serve(write_config(COMPARISON, items=ITEMS))
    c = Client(url)
    h = {"X-API-Key": KEY}
    status, body = c.json("POST", "/admin/training/api/runs", headers=h, json_body={
        "trainer": "text-naive-bayes", "schemas": ["preference"]})
    assert status == 400 and "no trainer trains pairwise schemes: they are annotate-only" \
        in body["error"], body
    status, body = c.json("GET", "/admin/training/api/trainers", headers=h)
    assert status == 200 and [s["scheme"] for s in body["annotate_only"]] == ["preference"]
