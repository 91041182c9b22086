"""Pairwise preference in a real headless Chromium (issue 36, item 8): an item's two responses
side by side (escaped: one holds markup), a tile chosen with the mouse and with its number
key, the tie with its own visible key, the scale's slider moved with the arrow keys; what the
page saves is read back from the store, and shown again after going back and reloading."""

import json
import os

import pytest

from tests.helpers import SHOTS, browser_login, wait_for

pytestmark = pytest.mark.integration

CONFIG = """\
annotation_task_name: pairwise
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
item_properties: {id_key: id, text_key: text}
annotation_schemes:
  - annotation_type: pairwise
    name: preference
    description: Which reply is kinder?
    items_key: text
    labels: [Option A, Option B]
    allow_tie: true
    tie_label: Hard to tell
    label_requirement: {required: true}
  - annotation_type: pairwise
    name: strength
    description: How much kinder?
    mode: scale
    items_key: text
    labels: [Option A, Option B]
    scale: {min: -3, max: 3, step: 1, default: 0,
            labels: {min: A is much kinder, max: B is much kinder, center: Equal}}
"""

HOSTILE = "<b>bold</b> & <script>window.pwned = 1</script>"
ITEMS = [{"id": "t1", "text": ["Glad to help, here is how.", HOSTILE]},
         {"id": "t2", "text": ["No.", "Sure!"]}]


def tile(d, label):
    return d.find_element("css selector", "input[name='label:preference'][value='%s']" % label)


def hidden_scale(d):
    return d.find_element("css selector", "input[type=hidden][name='label:strength']") \
        .get_attribute("value")


def on_item(d, item_id):
    wait_for(d, lambda d: item_id in d.find_element("css selector", ".item-id").text,
             what="item " + item_id)


def test_pairwise_tiles_keys_tie_and_scale_save_and_read_back(tmp_path, serve, browser):
    from selenium.webdriver.common.keys import Keys

    d = browser
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (tmp_path / "config.yaml").write_text(CONFIG)
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    store = server.app.store
    browser_login(d, url)

    # The two responses, side by side: same row, the first on the left, not overlapping.
    first, second = d.find_elements("css selector", ".pairwise-view .pairwise-response")
    a, b = first.rect, second.rect
    assert abs(a["y"] - b["y"]) < 2 and a["x"] + a["width"] <= b["x"] and a["width"] > 200
    assert first.text == "Option A\nGlad to help, here is how."
    assert second.find_element("css selector", ".pairwise-text").text == HOSTILE  # as text
    assert not second.find_elements("css selector", "b, script")
    assert d.execute_script("return window.pwned") is None
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "annotate-pairwise.png"))

    # A click on a tile chooses it; the number keys choose too, the tie with its own key.
    d.find_element("xpath", "//label[contains(@class, 'pairwise-tile')][contains(., "
                            "'Option B')]").click()
    assert tile(d, "Option B").is_selected()
    assert "chosen" in tile(d, "Option B").find_element("xpath", "..").get_attribute("class")
    body = d.find_element("tag name", "body")
    body.send_keys("1")
    assert tile(d, "Option A").is_selected() and not tile(d, "Option B").is_selected()
    tie = d.find_element("css selector", "label.pairwise-tie")
    assert tie.find_element("tag name", "kbd").text == "3" and "Hard to tell" in tie.text
    body.send_keys("3")
    assert tile(d, "Hard to tell").is_selected()

    # The scale holds no answer until the slider is moved: two steps to the left of 0.
    assert hidden_scale(d) == ""
    slider = d.find_element("css selector", "input[type=range][data-slider=strength]")
    slider.send_keys(Keys.ARROW_LEFT, Keys.ARROW_LEFT)
    assert hidden_scale(d) == "-2"
    assert d.find_element("css selector", "fieldset[data-scheme=strength] output").text == "-2"
    d.find_element("css selector", "button[value=next]").click()
    on_item(d, "t2")
    assert store.labels_of("dana", "t1") == {"preference": "Hard to tell", "strength": -2}

    # t2: the required choice stops Enter until a tile is chosen; key 2 chooses Option B.
    body = d.find_element("tag name", "body")
    body.send_keys(Keys.ENTER)
    note = d.find_element("id", "required-missing")
    assert note.is_displayed() and "preference" in note.text
    body.send_keys("2")
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "All done" in d.page_source, what="the end of the queue")
    assert store.labels_of("dana", "t2") == {"preference": "Option B"}

    # Back to t1, and a reload: the saved answers are what the page shows.
    d.get(url + "annotate?item=t1")
    on_item(d, "t1")
    d.refresh()
    on_item(d, "t1")
    assert tile(d, "Hard to tell").is_selected() and not tile(d, "Option A").is_selected()
    assert hidden_scale(d) == "-2"
    assert d.find_element("css selector", "input[type=range][data-slider=strength]") \
        .get_attribute("value") == "-2"
