"""Upstream's code and document display fields in a real headless Chromium: the code is shown
line by line with its numbers, the document's HTML keeps its structure and nothing in it
runs, loads or navigates; a span scheme marks a code field shown as the item's text.
Screenshots go to test-output/."""

import json
import os

import pytest

from tests.helpers import SHOTS, browser_login, wait_for

pytestmark = pytest.mark.integration

HOSTILE = ("<h2>Report</h2><p>Some <strong>bold</strong> text.</p><ul><li>one</li><li>two</li>"
           "</ul><img src=x onerror=\"window.pwned = 'img'\" alt=\"a chart\">"
           "<script>window.pwned = 'script'</script><a href=\"javascript:window.pwned='a'\">"
           "link</a><svg><script>window.pwned = 'svg'</script></svg>"
           "<p style=\"position:fixed;inset:0\" onmouseover=\"window.pwned='p'\">cover</p>")
CODE = "def f(x):\n    return x < 1\n\nprint(f(0))"
CONFIG = """\
annotation_task_name: displays
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
item_properties: {id_key: id, text_key: code}
instance_display:
  fields:
    - {key: doc, type: document, label: Document, display_options: {max_height: 200}}
    - {key: code, type: code, label: Code, span_target: true,
       display_options: {language: python, show_line_numbers: true}}
annotation_schemes:
  - annotation_type: radio
    name: ok
    labels: [fine, broken]
  - annotation_type: span
    name: names
    labels: [NAME]
"""


def test_code_and_a_hostile_document(tmp_path, serve, browser):
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "d1", "doc": HOSTILE,
                                                      "code": CODE}) + "\n")
    (tmp_path / "config.yaml").write_text(CONFIG)
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    d = browser
    browser_login(d, url)
    doc = d.find_element("css selector", ".display-document div.document")
    assert [e.text for e in doc.find_elements("css selector", "li")] == ["one", "two"]
    assert doc.find_element("css selector", "h2").text == "Report"
    assert "[image: a chart]" in doc.text
    d.execute_script("window.scrollTo(0, 0)")
    from selenium.webdriver.common.action_chains import ActionChains
    cover = [p for p in doc.find_elements("css selector", "p") if p.text == "cover"][0]
    ActionChains(d).move_to_element(cover).perform()
    link = doc.find_element("css selector", "a")
    assert link.get_attribute("href") is None
    link.click()
    assert d.current_url.endswith("/annotate")
    assert d.execute_script("return window.pwned === undefined")
    assert not doc.find_elements("css selector", "img, script, svg, [style], [onmouseover]")
    assert d.execute_script("return getComputedStyle(arguments[0]).position", cover) == "static"
    # The code field is the text the span scheme marks (item_properties.text_key): shown as
    # text, monospaced, exactly as the item has it.
    text = d.find_element("css selector", ".display-code #item-text")
    assert d.execute_script("return JSON.parse(arguments[0].dataset.text)", text) == CODE
    assert "monospace" in d.execute_script("return getComputedStyle(arguments[0]).fontFamily",
                                           text)
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "annotate-displays.png"))


def test_a_code_field_alone_numbers_its_lines(tmp_path, serve, browser):
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "d1", "doc": "<p>x</p>",
                                                      "code": CODE}) + "\n")
    (tmp_path / "config.yaml").write_text(CONFIG.replace("item_properties: {id_key: id, "
                                                         "text_key: code}",
                                                         "item_properties: {id_key: id, "
                                                         "text_key: doc}")
                                          .replace(", span_target: true", "")
                                          .replace("  - annotation_type: span\n    name: names\n"
                                                   "    labels: [NAME]\n", ""))
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    d = browser
    browser_login(d, url)
    lines = d.find_elements("css selector", ".display-code ol.code-block > li")
    assert [li.text for li in lines] == CODE.split("\n")[:2] + ["", "print(f(0))"]
    block = d.find_element("css selector", "ol.code-block")
    assert block.get_attribute("data-language") == "python"
    assert d.execute_script("return getComputedStyle(arguments[0]).listStyleType",
                            block) == "decimal"
    assert d.find_element("css selector", ".display-document div.document p").text == "x"


TRACE = [{"role": "user", "content": "Fix the bug", "tool_calls": []},
         {"role": "assistant", "content": "Reading <it>.", "tool_calls": [
             {"tool": "Read", "input": {"file_path": "src/a.py"},
              "output": "\n".join("line %d" % n for n in range(60))}]}]


def test_an_agent_trace_shows_its_steps_and_folds_long_output(tmp_path, serve, browser):
    from selenium.webdriver.common.keys import Keys

    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "t1", "task": "Fix it",
                                                      "turns": TRACE}) + "\n")
    (tmp_path / "config.yaml").write_text(
        "annotation_task_name: traces\ndata_files: [items.jsonl]\n"
        "item_properties: {id_key: id, text_key: task}\ninstance_display:\n  fields:\n"
        "    - {key: task, type: text}\n    - {key: turns, type: coding_trace, label: "
        "Session, display_options: {max_output_lines: 50}}\nannotation_schemes:\n"
        "  - {annotation_type: radio, name: ok, labels: [fine, broken]}\n")
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    d = browser
    browser_login(d, url)
    steps = d.find_elements("css selector", ".display-coding_trace ol.trace > li.trace-step")
    assert [s.find_element("css selector", ".speaker").text for s in steps] == [
        "user", "assistant"]
    assert "Reading <it>." in steps[1].text
    fold = steps[1].find_element("css selector", "details.trace-long")
    assert not fold.get_attribute("open") and "line 59" not in fold.text
    summary = fold.find_element("css selector", "summary")
    assert summary.text == "60 lines"
    summary.send_keys(Keys.ENTER)  # opens by keyboard, and Enter does not save the item
    wait_for(d, lambda d: fold.get_attribute("open") is not None, what="the folded output")
    assert "line 59" in fold.text and d.current_url.endswith("/annotate")
    d.find_element("css selector", "input[name='label:ok'][value='fine']").click()
    assert server.app.store.labels_of("dana", "t1") == {}
