"""Review 36: a number scheme's step over HTTP (the JSON API and the annotate form)."""

import html
import re

import pytest

from tests.helpers import Client

CONFIG = """\
annotation_task_name: steps
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: number
    name: tiny
    step: 1.0e-300
  - annotation_type: number
    name: third
    step: 0.333333333
  - annotation_type: number
    name: whole
    step: 1
  - annotation_type: number
    name: tenth
    step: 0.1
"""


@pytest.fixture
def project(write_config):
    return write_config(CONFIG, items=[{"id": "t1", "text": "some text"}])


def mine(c, item="t1"):
    status, body = c.json("GET", "/api/annotations/" + item)
    assert status == 200
    return body["labels"]


def post(c, labels):
    return c.json("POST", "/api/annotations", json_body={"item_id": "t1", "labels": labels})


def test_a_value_far_from_a_tiny_step_is_a_400_not_a_server_error(project, serve):
    """step 1e-300 is accepted by validate; 1e15 / 1e-300 overflows to inf and round(inf)
    raises OverflowError: the API must answer 200 or a 400 naming the scheme, never a 500."""
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    status, body = post(c, {"tiny": 1e15})
    assert status in (200, 400), (status, body)
    if status == 400:
        assert "scheme 'tiny'" in body["error"], body


def test_a_value_on_the_step_the_page_gives_is_accepted(project, serve):
    """The page's input says step="X"; a browser lets an annotator submit 2·X, so the server
    must take it (or the page must give the step the server checks)."""
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    m = re.search(r'name="label:third"[^>]*step="([^"]+)"', page)
    assert m, page
    step = float(html.unescape(m.group(1)))
    two = round(2 * step, 12)  # 0.666666: on the page's steps
    form = {"item_id": "t1", "position": "0", "action": "next"}
    for name in ("tiny", "third", "whole", "tenth"):
        form["present:" + name] = "1"
    form["label:third"] = repr(two)
    r = c.post("/annotate", form=form)
    assert r.status == 303, html.unescape(r.text)[-600:]
    assert mine(c)["third"] == two


def test_a_value_off_the_steps_is_refused(project, serve):
    """step: 1 means whole numbers: 2.0000005 is not on its steps (a browser refuses it)."""
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    status, body = post(c, {"whole": 2.0000005})
    assert status == 400 and "not on the steps of 1" in body["error"], body
    assert mine(c) == {}


def test_a_large_value_on_the_steps_is_accepted(project, serve):
    """100000000000000.1 is within ±1e15 and on the steps of 0.1 (a browser takes it)."""
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    status, body = post(c, {"tenth": 100000000000000.1})
    assert status == 200, body
