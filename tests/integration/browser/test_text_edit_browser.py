"""text_edit in a real headless Chromium: the box starts with the item's text to edit, typing
in it (the keyboard) updates the live edit distance, the reset button puts the original back,
and what the page saves is read back from the store; a control character is refused by the
server and nothing is stored."""

import json

import pytest

from tests.helpers import browser_login, wait_for

pytestmark = pytest.mark.integration

CONFIG = """\
annotation_task_name: post-editing
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - annotation_type: text_edit
    name: post_edit
    source_field: mt_output
    show_edit_distance: true
    allow_reset: true
"""

ITEMS = [{"id": "t1", "text": "Die Katze sitzt.", "mt_output": "The cat sit on <mat>."},
         {"id": "t2", "text": "Der Hund.", "mt_output": "The dog."}]


def box(d):
    return d.find_element("css selector", "textarea[data-edit-box=post_edit]")


def distance(d):
    return d.find_element("css selector", "[data-edit-distance=post_edit] output").text


def test_an_edit_typed_reset_and_saved_reads_back(tmp_path, serve, browser):
    from selenium.webdriver.common.keys import Keys

    d = browser
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (tmp_path / "config.yaml").write_text(CONFIG)
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    store = server.app.store
    browser_login(d, url)

    assert box(d).get_attribute("value") == "The cat sit on <mat>."
    assert d.find_element("css selector", ".edit-source-text").text == "The cat sit on <mat>."
    assert distance(d) == "0"
    # "sit" to "sits": the caret to after "sit", then one letter typed
    box(d).click()
    box(d).send_keys(Keys.CONTROL, Keys.HOME)
    box(d).send_keys(*[Keys.ARROW_RIGHT] * len("The cat sit"), "s")
    assert box(d).get_attribute("value") == "The cat sits on <mat>."
    assert distance(d) == "1"
    box(d).send_keys(Keys.END, " today")
    assert distance(d) == "7"
    d.find_element("css selector", "button[data-edit-reset=post_edit]").click()
    assert box(d).get_attribute("value") == "The cat sit on <mat>." and distance(d) == "0"

    # A control character typed in (by script: no key types U+0007) is refused on save.
    d.execute_script("arguments[0].value = 'bad\\u0007';", box(d))
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "control character U+0007" in d.page_source, what="the refusal")
    assert store.labels_of("dana", "t1") == {}

    d.get(url + "annotate?item=t1")
    wait_for(d, lambda d: "t1" in d.find_element("css selector", ".item-id").text, what="t1")
    box(d).send_keys(Keys.CONTROL, Keys.END)
    box(d).send_keys(Keys.BACKSPACE, "!")
    assert box(d).get_attribute("value") == "The cat sit on <mat>!" and distance(d) == "1"
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "t2" in d.find_element("css selector", ".item-id").text, what="t2")
    assert store.labels_of("dana", "t1") == {"post_edit": "The cat sit on <mat>!"}
    assert box(d).get_attribute("value") == "The dog."

    # Back to t1, reloaded: the saved edit is in the box; reset still gives the original.
    d.get(url + "annotate?item=t1")
    d.refresh()
    wait_for(d, lambda d: "t1" in d.find_element("css selector", ".item-id").text, what="t1")
    assert box(d).get_attribute("value") == "The cat sit on <mat>!" and distance(d) == "1"
    d.find_element("css selector", "button[data-edit-reset=post_edit]").click()
    assert box(d).get_attribute("value") == "The cat sit on <mat>."
