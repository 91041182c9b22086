"""A span model's suggestions on the annotate page in headless Chromium: drawn dashed, apart from
the annotator's own spans and not saved until accepted; one accepted by a click, the rest with
the A key; a suggestion the annotator has overridden is never taken; ignored ones are not
saved. What the page saves is read back from the store."""

import json
import os

import pytest

from tests.helpers import SHOTS, browser_login, wait_for

pytestmark = pytest.mark.integration

TEXT = "Ana 😀 met Bob in Paris"
CONFIG = """\
annotation_task_name: suggestions
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - annotation_type: span
    name: ner
    labels: [PER, LOC]
"""
RECT_JS = """
const box = document.getElementById('item-text'), word = arguments[0];
const start = box.textContent.indexOf(word), end = start + word.length;
const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
let pos = 0, r = document.createRange(), node;
while ((node = walker.nextNode())) {
  const n = node.data.length;
  if (start >= pos && start <= pos + n && !r._s) { r.setStart(node, start - pos); r._s = 1; }
  if (end >= pos && end <= pos + n) { r.setEnd(node, end - pos); break; }
  pos += n;
}
const a = r.getBoundingClientRect(), b = box.getBoundingClientRect();
return [a.left - b.left - b.width / 2, a.right - b.left - b.width / 2,
        a.top + a.height / 2 - b.top - b.height / 2];
"""


def spans(d):
    return json.loads(d.find_element("css selector", "input[name='label:ner']")
                      .get_attribute("value"))


def suggested(d):
    return [(e.text, e.get_attribute("data-label"))
            for e in d.find_elements("css selector", "#item-text .suggested")]


def at_word(d, word, click=False):
    from selenium.webdriver.common.action_chains import ActionChains

    box = d.find_element("id", "item-text")
    left, right, y = d.execute_script(RECT_JS, word)
    chain = ActionChains(d)
    if click:
        chain.move_to_element_with_offset(box, int((left + right) / 2), int(y)).click()
    else:
        chain.move_to_element_with_offset(box, int(left) + 1, int(y)).click_and_hold() \
            .move_to_element_with_offset(box, int(right) - 1, int(y)).release()
    chain.perform()


def test_suggested_spans_accepted_by_click_and_key_or_ignored(tmp_path, serve, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    d = browser
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "t1", "text": TEXT}) + "\n" +
                                          json.dumps({"id": "t2", "text": "next Rome"}) + "\n")
    (tmp_path / "config.yaml").write_text(CONFIG)
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    store = server.app.store
    model = [{"start": 0, "end": 3, "label": "PER", "text": "Ana", "confidence": 0.91},
             {"start": 10, "end": 13, "label": "PER", "text": "Bob", "confidence": 0.8},
             {"start": 17, "end": 22, "label": "LOC", "text": "Paris", "confidence": 0.7}]
    with store.tx() as db:
        db.execute("INSERT INTO predictions(item_id, scheme, label, confidence, run_id) VALUES "
                   "(?,?,?,?,?), (?,?,?,?,?)",
                   ("t1", "ner", json.dumps(model), 0.7, "r1", "t2", "ner",
                    json.dumps([{"start": 5, "end": 9, "label": "LOC", "text": "Rome",
                                 "confidence": 0.6}]), 0.6, "r1"))
    browser_login(d, url)
    box = d.find_element("id", "item-text")
    assert box.text == TEXT
    # Drawn dashed, apart from own spans (no .mark), listed with confidences; nothing chosen yet.
    assert suggested(d) == [("Ana", "PER"), ("Bob", "PER"), ("Paris", "LOC")]
    first = d.find_element("css selector", "#item-text .suggested")
    assert first.value_of_css_property("border-top-style") == "dashed"
    assert "mark" not in first.get_attribute("class")
    assert spans(d) == []
    listed = d.find_element("css selector", "ul.suggested-list").text
    assert "Paris LOC (0.70)" in listed and "Model suggests 3 spans for ner" in \
        d.find_element("css selector", ".span-suggestions").text
    # The annotator marks Bob as a place themselves: the model's Bob is no longer offered.
    at_word(d, "Bob")  # a drag over a suggestion selects (the first press on the page, too)
    ActionChains(d).send_keys("2").perform()
    assert spans(d) == [{"start": 10, "end": 13, "label": "LOC", "text": "Bob"}]
    assert [t for t, _ in suggested(d)] == ["Ana", "Paris"]
    # A click on a suggested span accepts that one alone.
    at_word(d, "Ana", click=True)
    assert {"start": 0, "end": 3, "label": "PER", "text": "Ana"} in spans(d)
    assert [t for t, _ in suggested(d)] == ["Paris"]
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "annotate-span-suggestions.png"))
    # A accepts the rest; the annotator's Bob stays a place.
    ActionChains(d).send_keys("a").perform()
    want = [{"start": 0, "end": 3, "label": "PER", "text": "Ana"},
            {"start": 10, "end": 13, "label": "LOC", "text": "Bob"},
            {"start": 17, "end": 22, "label": "LOC", "text": "Paris"}]
    assert spans(d) == want and suggested(d) == []
    assert not d.find_element("css selector", ".span-suggestions").is_displayed()
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "t2" in d.find_element("css selector", ".item-id").text,
             what="the next item")
    assert store.labels_of("dana", "t1") == {"ner": want}
    # Ignored: saving without accepting stores nothing of the model's (Enter twice: the
    # first warns that nothing is chosen).
    assert suggested(d) == [("Rome", "LOC")]
    d.find_element("css selector", "button.accept-span")  # one by one from the list, too
    d.find_element("tag name", "body").click()
    ActionChains(d).send_keys(Keys.ENTER).perform()
    ActionChains(d).send_keys(Keys.ENTER).perform()
    wait_for(d, lambda d: "All done" in d.page_source, what="the end page")
    # what is kept is the annotator's own answer, "nothing here" (a span scheme saved with
    # nothing marked is [], docs/annotation-server.md), and none of the model's spans
    assert store.labels_of("dana", "t2") == {"ner": []}
