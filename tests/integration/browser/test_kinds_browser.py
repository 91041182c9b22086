"""Annotation kinds in a real headless Chromium: spans selected with the mouse (a drag, a double
click) and with the keyboard, on a text with an astral character (the browser counts UTF-16
units, the server code points); relabelling and deleting a span; the overlap message; Likert
keys; the slider; the text box. What the page saves is read back from the store. Screenshots
go to test-output/."""

import json
import os

import pytest

from tests.helpers import SHOTS, browser_login, wait_for

pytestmark = pytest.mark.integration

TEXT = "Ana 😀 met Bob in Paris"
CONFIG = """\
annotation_task_name: kinds
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - annotation_type: span
    name: ner
    labels: [PER, LOC]
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
  - annotation_type: text
    name: why
    textarea: {on: true, rows: 3}
"""

# Where a substring is on screen: the client rect of its UTF-16 range in the item text.
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

# Select UTF-16 units a..b of the item text (text nodes may be split by marks) as a mouse
# would, then the mouse button comes up.
SELECT_JS = """
const box = document.getElementById('item-text');
function at(u) {
  const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
  let pos = 0, node;
  while ((node = walker.nextNode())) {
    if (u <= pos + node.data.length) return [node, u - pos];
    pos += node.data.length;
  }
}
const [n1, o1] = at(arguments[0]), [n2, o2] = at(arguments[1]);
window.getSelection().setBaseAndExtent(n1, o1, n2, o2);
box.dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));
"""


def spans(d):
    return json.loads(d.find_element("css selector", "input[name='label:ner']")
                      .get_attribute("value"))


def message(d):
    el = d.find_element("css selector", "fieldset[data-scheme=ner] .span-message")
    return el.text if el.is_displayed() else ""


def open_page(tmp_path, serve, d):
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "t1", "text": TEXT}) + "\n" +
                                          json.dumps({"id": "t2", "text": "next"}) + "\n")
    (tmp_path / "config.yaml").write_text(CONFIG)
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    browser_login(d, url)
    return server.app.store


def drag_over(d, word):
    from selenium.webdriver.common.action_chains import ActionChains

    box = d.find_element("id", "item-text")
    left, right, y = d.execute_script(RECT_JS, word)
    ActionChains(d).move_to_element_with_offset(box, int(left) + 1, int(y)).click_and_hold() \
        .move_to_element_with_offset(box, int(right) - 1, int(y)).release().perform()


def keys(d, *seq):
    """Press keys in turn; a tuple is a chord, its leading keys held (Shift, Ctrl)."""
    from selenium.webdriver.common.action_chains import ActionChains

    chain = ActionChains(d)
    for k in seq:
        if isinstance(k, tuple):
            for mod in k[:-1]:
                chain = chain.key_down(mod)
            chain = chain.send_keys(k[-1])
            for mod in reversed(k[:-1]):
                chain = chain.key_up(mod)
        else:
            chain = chain.send_keys(k)
    chain.perform()


def test_spans_with_mouse_and_keyboard_edit_delete_and_overlap(tmp_path, serve, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    d = browser
    store = open_page(tmp_path, serve, d)
    box = d.find_element("id", "item-text")
    assert box.text == TEXT
    # The mouse: drag over "Bob" (after the emoji, two UTF-16 units but one character), key 1.
    drag_over(d, "Bob")
    keys(d, "1")
    assert spans(d) == [{"start": 10, "end": 13, "label": "PER", "text": "Bob"}]
    assert box.text == TEXT  # the marks change the looks, not the text
    # A double click selects a word; the label's button marks it.
    left, right, y = d.execute_script(RECT_JS, "Paris")
    ActionChains(d).move_to_element_with_offset(box, int((left + right) / 2), int(y)) \
        .double_click().perform()
    d.find_element("css selector", "button.span-label[data-label=LOC]").click()
    assert spans(d)[1] == {"start": 17, "end": 22, "label": "LOC", "text": "Paris"}
    # A selection over "Bob in" overlaps Bob: it says so and marks nothing.
    drag_over(d, "Bob in")
    keys(d, "2")
    assert "overlaps the span \u201cBob\u201d (PER); spans of ner may not overlap" in message(d)
    assert len(spans(d)) == 2
    keys(d, Keys.ESCAPE)
    # A selection that ends or starts inside the emoji's surrogate pair (UTF-16 units 3..5 of
    # "Ana 😀 ": the space and the high half; 5..6: the low half and the space) grows to the
    # whole character, never half of it (the spaces are left out). The second has the same
    # range as the first's span: its key relabels that span.
    for (a, b), key, label in (((3, 5), "2", "LOC"), ((5, 6), "1", "PER")):
        d.execute_script(SELECT_JS, a, b)
        keys(d, key)
        assert spans(d)[0] == {"start": 4, "end": 5, "label": label, "text": "😀"}

    # The keyboard: Tab to the text (from the page's first link), Home, Shift+Right three
    # times: "Ana".
    d.execute_script("document.querySelector('a.brand').focus()")
    for _ in range(12):
        if d.switch_to.active_element == box:
            break
        keys(d, Keys.TAB)
    assert d.switch_to.active_element == box
    right = (Keys.SHIFT, Keys.ARROW_RIGHT)
    keys(d, Keys.HOME, right, right, right, "1")
    assert spans(d)[0] == {"start": 0, "end": 3, "label": "PER", "text": "Ana"}
    assert message(d) == ""
    # The emoji alone: one arrow step is one character, never half a surrogate pair (the
    # same range as its span: the key relabels it rather than overlapping it).
    keys(d, Keys.HOME, *[Keys.ARROW_RIGHT] * 4, right, "2")
    assert {"start": 4, "end": 5, "label": "LOC", "text": "😀"} in spans(d)
    # Ctrl+Shift+Left twice from the end selects "in Paris", over the Paris span: overlap.
    word_left = (Keys.CONTROL, Keys.SHIFT, Keys.ARROW_LEFT)
    keys(d, Keys.END, word_left, word_left, "1")
    assert "overlaps the span \u201cParis\u201d" in message(d)
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "annotate-spans.png"))

    # Edit: the cursor inside "Ana" and key 2 relabel it; Delete with the cursor in it deletes.
    keys(d, Keys.ESCAPE, Keys.HOME, Keys.ARROW_RIGHT, "2")
    assert spans(d)[0]["label"] == "LOC"
    keys(d, Keys.DELETE)
    assert [s["text"] for s in spans(d)] == ["😀", "Bob", "Paris"]
    # A click on a span focuses its entry in the list: change its label there, or delete it.
    left, right, y = d.execute_script(RECT_JS, "Bob")
    ActionChains(d).move_to_element_with_offset(box, int((left + right) / 2), int(y)) \
        .click().perform()
    pick = d.switch_to.active_element
    assert pick.tag_name == "select" and pick.get_attribute("aria-label") == "Label of \u201cBob\u201d"
    Select(pick).select_by_value("LOC")
    assert {"start": 10, "end": 13, "label": "LOC", "text": "Bob"} in spans(d)
    d.find_element("css selector", "button.delete-span[aria-label='Delete the span "
                                   "\u201c😀\u201d']").click()
    want = [{"start": 10, "end": 13, "label": "LOC", "text": "Bob"},
            {"start": 17, "end": 22, "label": "LOC", "text": "Paris"}]
    assert spans(d) == want
    # Saved on the server as code point offsets, and shown again on the way back.
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "t2" in d.find_element("css selector", ".item-id").text,
             what="the next item")
    assert store.labels_of("dana", "t1") == {"ner": want}
    d.find_element("css selector", "button[value=prev]").click()
    wait_for(d, lambda d: "t1" in d.find_element("css selector", ".item-id").text,
             what="the first item again")
    assert spans(d) == want
    marks = d.find_elements("css selector", "#item-text .mark-start")
    assert [m.get_attribute("data-label") for m in marks] == ["LOC", "LOC"]
    assert [m.text for m in marks] == ["Bob", "Paris"]


def test_likert_keys_slider_and_text_box(tmp_path, serve, browser):
    from selenium.webdriver.common.keys import Keys

    d = browser
    store = open_page(tmp_path, serve, d)
    body = d.find_element("tag name", "body")
    # Nothing chosen: Enter warns first.
    body.send_keys(Keys.ENTER)
    wait_for(d, lambda d: d.find_element("id", "nothing-chosen").is_displayed(), what="warning")
    # Likert: with no text selected, keys 1..5 choose a point (the span scheme uses none).
    keys(d, "4")
    point = d.find_element("css selector", "input[name='label:agree'][value='4']")
    assert point.is_selected()
    assert "chosen" in point.find_element("xpath", "..").get_attribute("class")
    assert not d.find_element("id", "nothing-chosen").is_displayed()
    keys(d, "2")
    assert d.find_element("css selector", "input[name='label:agree'][value='2']").is_selected()
    # The slider holds no answer until moved; arrow keys move it (and do not go back).
    hidden = d.find_element("css selector", "input[type=hidden][name='label:temp']")
    assert hidden.get_attribute("value") == ""
    assert d.find_element("css selector", ".slider-unset").is_displayed()
    slider = d.find_element("css selector", "input[type=range][data-slider=temp]")
    slider.click()  # at its middle, the start value: an answer, though nothing moved
    wait_for(d, lambda d: hidden.get_attribute("value") == "5", what="the start value set")
    assert not d.find_element("css selector", ".slider-unset").is_displayed()
    keys(d, Keys.HOME, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_LEFT)
    assert hidden.get_attribute("value") == "1"
    assert d.find_element("css selector", "output.slider-value").text == "1"
    assert not d.find_element("css selector", ".slider-unset").is_displayed()
    assert "t1" in d.find_element("css selector", ".item-id").text  # ArrowLeft stayed here
    # The text box: digits and Enter are text there, not keys.
    box = d.find_element("css selector", "textarea[name='label:why']")
    box.click()
    box.send_keys("5 stars", Keys.ENTER, "thanks ☺")  # (ChromeDriver types no astral)
    assert d.find_element("css selector", "input[name='label:agree'][value='2']").is_selected()
    assert "t1" in d.find_element("css selector", ".item-id").text
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "annotate-likert-slider-text.png"))
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "t2" in d.find_element("css selector", ".item-id").text,
             what="the next item")
    # the span scheme was on the page and nothing was marked: kept as [] (review 23.2)
    assert store.labels_of("dana", "t1") == {"agree": 2, "temp": 1, "why": "5 stars\nthanks ☺",
                                             "ner": []}


def test_an_answer_too_long_to_save_stays_in_the_form_with_the_reason(tmp_path, serve, browser):
    # issue 34, item 2: a save the server would refuse for its size is not sent, and the text
    # is kept. The cap follows from the schemes, so only a smaller max_body_mb (which potato
    # validate refuses; load alone accepts it) or a proxy can make it bite.
    d = browser
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "t1", "text": "a"}) + "\n" +
                                          json.dumps({"id": "t2", "text": "b"}) + "\n")
    (tmp_path / "config.yaml").write_text(
        "annotation_task_name: long\ndata_files: [items.jsonl]\nserver: {max_body_mb: 0.05}\n"
        "annotation_schemes:\n  - {annotation_type: text, name: why, textarea: {on: true}, "
        "max_length: 20000}\n")
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    browser_login(d, url)
    text = "가나다라마바사아" * 1000  # 72 KB as the browser sends it; the server takes 51 KB
    d.execute_script("document.querySelector(\"textarea[name='label:why']\").value = "
                     "arguments[0];", text)
    d.find_element("css selector", "button[value=next]").click()
    note = d.find_element("id", "required-missing")
    wait_for(d, lambda d: note.is_displayed(), what="the note")
    assert note.text.startswith("Not saved: these answers take ")
    assert "the server takes at most 52428 in one save" in note.text
    assert "Shorten the longest answer (a text, or fewer spans); everything you typed is still " \
           "here." in note.text
    assert d.execute_script("return document.querySelector(\"textarea[name='label:why']\")"
                            ".value;") == text
    assert "t1" in d.find_element("css selector", ".item-id").text
    assert server.app.store.labels_of("dana", "t1") == {}
    # shortened, it saves
    d.execute_script("document.querySelector(\"textarea[name='label:why']\").value = "
                     "arguments[0];", text[:2000])
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "t2" in d.find_element("css selector", ".item-id").text,
             what="the next item")
    assert server.app.store.labels_of("dana", "t1") == {"why": text[:2000]}
