"""Rating suggestions in a real headless Chromium (issue 21 part 4): a model's Likert point,
slider value and number are pre-selected where the annotator has no answer, marked as the
model's until the annotator changes them, and never replace an answer of the annotator's own.
What the page saves is read back from the store."""

import json
import os

import pytest

from tests.helpers import SHOTS, browser_login, wait_for

pytestmark = pytest.mark.integration

CONFIG = """\
annotation_task_name: ratings
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - annotation_type: likert
    name: agree
    min_label: Disagree
    max_label: Agree
    size: 5
  - annotation_type: slider
    name: temp
    min_value: 0
    max_value: 10
    starting_value: 5
  - annotation_type: number
    name: count
"""


def suggest(store, item_id, scheme, value, confidence=1.0):
    with store.tx() as db:
        db.execute("INSERT OR REPLACE INTO predictions(item_id, scheme, label, confidence, "
                   "run_id) VALUES (?, ?, ?, ?, 'r1')", (item_id, scheme, json.dumps(value),
                                                        confidence))


def classes(el):
    return (el.get_attribute("class") or "").split()


def test_rating_suggestions_are_preselected_never_over_an_answer(tmp_path, serve, browser):
    d = browser
    items = [{"id": "t%d" % k, "text": "item %d" % k} for k in (1, 2, 3)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    (tmp_path / "config.yaml").write_text(CONFIG)
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    store = server.app.store
    for item_id in ("t1", "t2"):
        suggest(store, item_id, "agree", 4, 0.8)
        suggest(store, item_id, "temp", 7.3)  # the slider's steps are 1: 7 is pre-selected
        suggest(store, item_id, "count", -2.5)
    store.save_labels("dana", "t2", {"agree": 1, "temp": 2})  # dana's own answers on t2
    browser_login(d, url)
    # t1: nothing answered, so every suggestion is pre-selected and marked as the model's.
    point = d.find_element("css selector", "input[name='label:agree'][value='4']")
    agree = d.find_element("css selector", "fieldset[data-scheme=agree]")
    temp = d.find_element("css selector", "fieldset[data-scheme=temp]")
    assert point.is_selected()
    assert "suggested" in classes(agree) and "suggested" in classes(point.find_element(
        "xpath", ".."))
    assert "suggested" in classes(temp)
    assert d.find_element("css selector", "input[type=hidden][name='label:temp']") \
        .get_attribute("value") == "7"
    assert d.find_element("css selector", "output.slider-value").text == "7"
    assert d.find_element("css selector", "input[name='label:count']") \
        .get_attribute("value") == "-2.5"
    legend_note = d.execute_script(
        "return getComputedStyle(arguments[0], '::after').content",
        agree.find_element("tag name", "legend"))
    assert "suggested by the model" in legend_note
    assert not d.find_element("id", "nothing-chosen").is_displayed()
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "annotate-rating-suggestions.png"))
    # The annotator's key replaces the suggested point: the mark goes, their choice stays.
    d.find_element("tag name", "body").send_keys("2")
    assert d.find_element("css selector", "input[name='label:agree'][value='2']").is_selected()
    assert "suggested" not in classes(agree)
    assert "suggested" in classes(temp)  # untouched: still the model's
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "t2" in d.find_element("css selector", ".item-id").text,
             what="item t2")
    assert store.labels_of("dana", "t1") == {"agree": 2, "temp": 7, "count": -2.5}
    # t2: dana's own answers stand; only the unanswered number takes the suggestion.
    assert d.find_element("css selector", "input[name='label:agree'][value='1']").is_selected()
    assert not d.find_element("css selector", "input[name='label:agree'][value='4']") \
        .is_selected()
    assert "suggested" not in classes(d.find_element("css selector",
                                                     "fieldset[data-scheme=agree]"))
    assert d.find_element("css selector", "input[type=hidden][name='label:temp']") \
        .get_attribute("value") == "2"
    assert "suggested" in classes(d.find_element("css selector", "fieldset[data-scheme=count]"))
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "t3" in d.find_element("css selector", ".item-id").text,
             what="item t3")
    assert store.labels_of("dana", "t2") == {"agree": 1, "temp": 2, "count": -2.5}
    # t3 has no suggestion: nothing is pre-selected.
    assert not d.find_elements("css selector", "fieldset.suggested")
    assert d.find_element("css selector", "input[type=hidden][name='label:temp']") \
        .get_attribute("value") == ""
