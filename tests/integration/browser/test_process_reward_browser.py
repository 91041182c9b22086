"""process_reward in a real headless Chromium: in first_error mode a step chosen with the
arrow keys, then another with the mouse, marks the steps before it correct and it and the
later ones wrong; in per_step mode each step marked with the keyboard (Space, arrow keys) or
a click fills the hidden list; what the page saves is read back from the store and shown
again on reload (the server checks the values: tests/server/test_process_reward_http.py)."""

import json

import pytest

from tests.helpers import browser_login, wait_for

pytestmark = pytest.mark.integration

CONFIG = """\
annotation_task_name: prm
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - annotation_type: process_reward
    name: first
    steps_key: turns
    mode: first_error
  - annotation_type: process_reward
    name: each
    steps_key: turns
    mode: per_step
    allow_neutral: true
"""
TURNS = [{"content": "read login.py"}, {"content": "delete the check"}, {"content": "run tests"}]
ITEMS = [{"id": "t1", "text": "Fix the login bypass.", "turns": TURNS},
         {"id": "t2", "text": "Second.", "turns": TURNS[:1]}]


def marks(d, scheme):
    return [e.get_attribute("data-reward") for e in d.find_elements(
        "css selector", "fieldset[data-scheme=%s] li.prm-step" % scheme)]


def radio(d, name, value):
    return d.find_element("css selector", "input[name='%s'][value='%s']" % (name, value))


def hidden(d):
    return d.find_element("css selector", "input[type=hidden][name='label:each']") \
        .get_attribute("value")


def test_steps_marked_by_keyboard_and_mouse_save_and_read_back(tmp_path, serve, browser):
    from selenium.webdriver.common.keys import Keys

    d = browser
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (tmp_path / "config.yaml").write_text(CONFIG)
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    store = server.app.store
    browser_login(d, url)

    # first_error: nothing chosen, nothing marked; the keyboard picks step 2, the mouse step 3
    assert marks(d, "first") == ["", "", ""]
    radio(d, "label:first", "0/3").send_keys(Keys.SPACE)
    assert marks(d, "first") == ["-1", "-1", "-1"]
    radio(d, "label:first", "0/3").send_keys(Keys.ARROW_DOWN)  # to step 2 in the group
    assert radio(d, "label:first", "1/3").is_selected()
    assert marks(d, "first") == ["1", "-1", "-1"]
    radio(d, "label:first", "2/3").click()
    assert marks(d, "first") == ["1", "1", "-1"]
    radio(d, "label:first", "3/3").click()  # no step is wrong
    assert marks(d, "first") == ["1", "1", "1"]
    radio(d, "label:first", "2/3").click()

    # per_step: the keyboard marks step 1 correct and step 2 neutral; the mouse step 3 wrong
    assert hidden(d) == ""
    radio(d, "step:each:0", "1").send_keys(Keys.SPACE)
    assert hidden(d) == "[1,null,null]" and marks(d, "each") == ["1", "", ""]
    radio(d, "step:each:1", "1").send_keys(Keys.SPACE, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
    assert radio(d, "step:each:1", "0").is_selected()
    radio(d, "step:each:2", "-1").click()
    assert hidden(d) == "[1,0,-1]" and marks(d, "each") == ["1", "0", "-1"]

    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "t2" in d.find_element("css selector", ".item-id").text, what="t2")
    assert store.labels_of("dana", "t1") == {"first": [1, 1, -1], "each": [1, 0, -1]}

    # Back to t1, reloaded: the saved choices are what the page shows and marks.
    d.get(url + "annotate?item=t1")
    d.refresh()
    wait_for(d, lambda d: "t1" in d.find_element("css selector", ".item-id").text, what="t1")
    assert radio(d, "label:first", "2/3").is_selected()
    assert marks(d, "first") == ["1", "1", "-1"] and marks(d, "each") == ["1", "0", "-1"]
    assert radio(d, "step:each:1", "0").is_selected() and hidden(d) == "[1, 0, -1]"
