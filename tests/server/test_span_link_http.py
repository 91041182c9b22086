"""span_link over HTTP (a real server on port 0): the annotate page carries links.js, the
link type buttons and the scheme's field; the form and the JSON API save links beside the
spans; a bad value is refused with a 400 naming the scheme and the problem (nothing stored);
the exports carry the links, upstream's output included."""

import csv
import html
import io
import json
import zipfile

import pytest

from tests.helpers import Client

KEY = "test-admin-key-0123456789"
CONFIG = """\
annotation_task_name: links
data_files: [items.jsonl]
admin_api_key: %s
item_properties: {id_key: id, text_key: text}
annotation_schemes:
  - annotation_type: span
    name: entities
    labels: [PERSON, ORG]
  - annotation_type: span_link
    name: relations
    span_schema: entities
    link_types:
      - {name: WORKS_FOR, directed: true, allowed_source_labels: [PERSON],
         allowed_target_labels: [ORG]}
      - {name: KNOWS, directed: false}
""" % KEY
TEXT = "Ana met Bo at Acme."
ANA = {"start": 0, "end": 3, "label": "PERSON", "text": "Ana"}
BO = {"start": 8, "end": 10, "label": "PERSON", "text": "Bo"}
ACME = {"start": 14, "end": 18, "label": "ORG", "text": "Acme"}


def end(span):
    return {k: span[k] for k in ("start", "end", "label")}


LINKS = [{"type": "KNOWS", "source": end(ANA), "target": end(BO)},
         {"type": "WORKS_FOR", "source": end(BO), "target": end(ACME)}]


@pytest.fixture
def project(write_config):
    return write_config(CONFIG, items=[{"id": "t1", "text": TEXT}, {"id": "t2", "text": TEXT}])


def mine(c, item="t1"):
    status, body = c.json("GET", "/api/annotations/" + item)
    assert status == 200
    return body["labels"]


def form(spans, links):
    return {"item_id": "t1", "position": "0", "action": "next", "present:entities": "1",
            "label:entities": json.dumps(spans), "present:relations": "1",
            "label:relations": links if isinstance(links, str) else json.dumps(links)}


def test_the_page_the_form_and_the_api_save_links(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    assert 'src="/static/links.js"' in page and 'src="/static/spans.js"' in page
    assert 'data-links="relations" data-span-scheme="entities"' in page
    assert 'class="link-type" data-type="WORKS_FOR"' in page
    r = c.post("/annotate", form=form([ANA, BO, ACME], list(reversed(LINKS))))
    assert r.status == 303, r.text
    assert mine(c) == {"entities": [ANA, BO, ACME], "relations": LINKS}
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t2", "labels": {"entities": [ANA, BO],
                                    "relations": [{"type": "KNOWS", "source": end(BO),
                                                   "target": end(ANA)}]}})
    assert status == 200, body
    assert body["labels"]["relations"] == LINKS[:1]  # undirected: the earlier span first
    admin = Client(url)
    h = {"X-API-Key": KEY}
    rows = list(csv.DictReader(io.StringIO(admin.get("/admin/export.csv?rows=label",
                                                     headers=h).text)))
    cells = {(r["item_id"], r["scheme"]): r["label"] for r in rows}
    assert json.loads(cells[("t1", "relations")]) == LINKS
    archive = zipfile.ZipFile(io.BytesIO(admin.get("/admin/export-upstream.zip",
                                                   headers=h).body))
    name = next(n for n in archive.namelist() if n.endswith("annotated_instances.jsonl"))
    records = {r["id"]: r for r in map(json.loads, archive.read(name).decode().splitlines())}
    entry = json.loads(records["t1"]["label_annotations"]["relations"]["relations"])
    assert [(e["link_type"], e["span_ids"], e["direction"]) for e in entry] == [
        ("KNOWS", ["entities:0-3", "entities:8-10"], "undirected"),
        ("WORKS_FOR", ["entities:8-10", "entities:14-18"], "directed")]
    assert len(records["t1"]["span_annotations"]) == 3


@pytest.mark.parametrize("links,message", [
    ("[{", "takes a list of links"),
    ([{"type": "WORKS_FOR", "source": end(ACME), "target": end(BO)}],
     "a WORKS_FOR link goes from PERSON to ORG, not from ORG to PERSON"),
    ([{"type": "KNOWS", "source": end(ANA), "target": end(ANA)}], "to itself"),
    ([{"type": "<img src=x>", "source": end(ANA), "target": end(BO)}],
     "is not a link type of this scheme"),
    ([{"type": "KNOWS", "source": dict(end(ANA), end=99), "target": end(BO)}],
     "must satisfy 0 <= start < end <= 19"),
])
def test_a_bad_value_is_refused_and_nothing_is_stored(project, serve, links, message):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    r = c.post("/annotate", form=form([ANA, BO, ACME], links))
    assert r.status == 400
    assert "scheme 'relations' (span_link): " in html.unescape(r.text)
    assert message in html.unescape(r.text)
    assert "<img src=x>" not in r.text
    assert mine(c) == {}
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t1", "labels": {"entities": [ANA],
                                    "relations": json.loads(links) if links == "[]" else links}})
    assert status == 400 and "scheme 'relations' (span_link): " in body["error"], body
    assert mine(c) == {}


def test_a_link_to_a_span_not_marked_is_refused(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    r = c.post("/annotate", form=form([ANA, BO], LINKS))  # ACME, WORKS_FOR's end, not marked
    assert r.status == 400
    assert ("which is not a span marked in entities: mark it first (in the same save, or "
            "before), or remove the link.") in html.unescape(r.text)
    assert mine(c) == {}
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t1", "labels": {"relations": LINKS[:1]}})
    assert status == 400 and "not a span marked in entities" in body["error"]
    # spans stored before count: the links may come in a later save
    status, _ = c.json("POST", "/api/annotations", json_body={
        "item_id": "t1", "labels": {"entities": [ANA, BO, ACME]}})
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t1", "labels": {"relations": LINKS}})
    assert status == 200 and body["labels"]["relations"] == LINKS
