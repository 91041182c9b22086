"""extractive_qa in a real headless Chromium: the question is shown above the passage, an
answer marked with the mouse (then its key) is the one span, a second one marked with the
keyboard replaces it, ticking Unanswerable deletes it and marking one unticks the box, and
what the page saves (an answer, or unanswerable) is read back from the store."""

import json

import pytest

from tests.helpers import browser_login, wait_for
from tests.integration.browser.test_kinds_browser import drag_over, keys

pytestmark = pytest.mark.integration

CONFIG = """\
annotation_task_name: qa
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
item_properties: {id_key: id, text_key: passage}
annotation_schemes:
  - annotation_type: extractive_qa
    name: answer
    question_field: question
    passage_field: passage
    allow_unanswerable: true
"""
PASSAGE = "The tower was built from 1887 to 1889 in Paris."
ITEMS = [{"id": "q1", "question": "Where is the tower?", "passage": PASSAGE},
         {"id": "q2", "question": "Who painted it?", "passage": PASSAGE}]


def answer(d):
    return json.loads(d.find_element("css selector", "input[name='label:answer'][data-spans]")
                      .get_attribute("value"))


def unanswerable(d):
    return d.find_element("css selector", "input[data-spans-none=answer]")


def test_an_answer_marked_replaced_unanswerable_and_saved(tmp_path, serve, browser):
    from selenium.webdriver.common.keys import Keys

    d = browser
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (tmp_path / "config.yaml").write_text(CONFIG)
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    store = server.app.store
    browser_login(d, url)

    assert d.find_element("css selector", ".qa-question-text").text == "Where is the tower?"
    assert d.find_element("id", "item-text").text == PASSAGE
    drag_over(d, "1887")
    keys(d, "1")
    assert answer(d) == [{"start": 25, "end": 29, "label": "answer", "text": "1887"}]
    # The keyboard: the text has the focus; End, then Shift+Left over "Paris" (and the
    # stop), "1": the new answer replaces the old one.
    box = d.find_element("id", "item-text")
    d.execute_script("arguments[0].focus()", box)
    left = (Keys.SHIFT, Keys.ARROW_LEFT)
    keys(d, Keys.END, Keys.ARROW_LEFT, *[left] * 5, "1")
    assert answer(d) == [{"start": 41, "end": 46, "label": "answer", "text": "Paris"}]
    unanswerable(d).click()
    assert answer(d) == [] and unanswerable(d).is_selected()
    drag_over(d, "Paris")
    keys(d, "1")
    assert answer(d) == [{"start": 41, "end": 46, "label": "answer", "text": "Paris"}]
    assert not unanswerable(d).is_selected()
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "q2" in d.find_element("css selector", ".item-id").text, what="q2")
    assert store.labels_of("dana", "q1") == {
        "answer": [{"start": 41, "end": 46, "label": "answer", "text": "Paris"}]}

    assert d.find_element("css selector", ".qa-question-text").text == "Who painted it?"
    unanswerable(d).click()
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "All done" in d.page_source or "q2" not in d.find_element(
        "css selector", "h1, .item-id").text, what="the next page")
    assert store.labels_of("dana", "q2") == {"answer": []}

    # Back to q2: the box is ticked again; q1 shows its answer.
    d.get(url + "annotate?item=q2")
    wait_for(d, lambda d: "q2" in d.find_element("css selector", ".item-id").text, what="q2")
    assert unanswerable(d).is_selected() and answer(d) == []
