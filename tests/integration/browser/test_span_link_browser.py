"""span_link in a real headless Chromium: spans marked with the mouse and their keys, a link
made by choosing its type and clicking the two marks, another picked in the menus (the
keyboard's way), a link deleted with its button, a link whose span is deleted gone with it,
and what the page saves read back from the store."""

import json

import pytest

from tests.helpers import browser_login, wait_for
from tests.integration.browser.test_kinds_browser import drag_over, keys

pytestmark = pytest.mark.integration

CONFIG = """\
annotation_task_name: links
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
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
"""
TEXT = "Ana met Bo at Acme."
ITEMS = [{"id": "t1", "text": TEXT}, {"id": "t2", "text": TEXT}]


def links(d):
    return json.loads(d.find_element("css selector", "input[data-links=relations]")
                      .get_attribute("value"))


def listed(d):
    return [li.text for li in d.find_elements("css selector", "ul.link-list li")]


def click_mark(d, word):
    from selenium.webdriver.common.action_chains import ActionChains

    mark = next(m for m in d.find_elements("css selector", "#item-text .mark")
                if m.text == word)
    ActionChains(d).move_to_element(mark).click().perform()


def end(start, stop, label):
    return {"start": start, "end": stop, "label": label}


ANA, BO, ACME = end(0, 3, "PERSON"), end(8, 10, "PERSON"), end(14, 18, "ORG")


def test_links_made_by_clicks_and_menus_deleted_and_saved(tmp_path, serve, browser):
    from selenium.webdriver.support.ui import Select

    d = browser
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (tmp_path / "config.yaml").write_text(CONFIG)
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    store = server.app.store
    browser_login(d, url)

    for word, key in (("Ana", "1"), ("Bo", "1"), ("Acme", "2")):
        drag_over(d, word)
        keys(d, key)
    assert len(d.find_elements("css selector", "#item-text .mark")) == 3
    # KNOWS by clicks, Bo first: undirected, so listed and stored from Ana
    d.find_element("css selector", "button.link-type[data-type=KNOWS]").click()
    click_mark(d, "Bo")
    click_mark(d, "Ana")
    assert links(d) == [{"type": "KNOWS", "source": ANA, "target": BO}]
    # WORKS_FOR the wrong way round is refused on the page, saying why
    d.find_element("css selector", "button.link-type[data-type=WORKS_FOR]").click()
    click_mark(d, "Acme")
    click_mark(d, "Bo")
    assert "not from ORG to PERSON" in d.find_element("css selector", ".link-message").text
    assert len(links(d)) == 1
    # WORKS_FOR picked in the menus (the keyboard's way)
    Select(d.find_element("css selector", "select.link-source")).select_by_index(1)
    Select(d.find_element("css selector", "select.link-target")).select_by_index(2)
    d.find_element("css selector", "button.link-add").click()
    assert links(d)[1] == {"type": "WORKS_FOR", "source": BO, "target": ACME}
    assert listed(d) == ["KNOWS: \u201cAna\u201d (PERSON) \u2194 \u201cBo\u201d (PERSON) delete",
                         "WORKS_FOR: \u201cBo\u201d (PERSON) \u2192 \u201cAcme\u201d (ORG) delete"]
    # deleting a link with its button
    d.find_elements("css selector", "button.link-delete")[0].click()
    assert links(d) == [{"type": "WORKS_FOR", "source": BO, "target": ACME}]
    # a link whose span is deleted goes with it: KNOWS again, then Ana deleted
    d.find_element("css selector", "button.link-type[data-type=KNOWS]").click()
    click_mark(d, "Ana")
    click_mark(d, "Bo")
    assert len(links(d)) == 2
    d.find_element("css selector", "button.delete-span[aria-label*=Ana]").click()
    assert links(d) == [{"type": "WORKS_FOR", "source": BO, "target": ACME}]
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "t2" in d.find_element("css selector", ".item-id").text, what="t2")
    saved = store.labels_of("dana", "t1")
    assert saved["relations"] == [{"type": "WORKS_FOR", "source": BO, "target": ACME}]
    assert [s["text"] for s in saved["entities"]] == ["Bo", "Acme"]
