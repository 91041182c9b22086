"""hierarchical_multiselect and ranking in a real headless Chromium: nodes of a taxonomy ticked
with the mouse and with Tab and Space, auto_select_children and auto_select_parent, the search
box (Enter in it does not save); labels ranked with the keyboard (a rank menu stepped with the
arrow keys swaps ranks, the last label is filled in) and with the mouse; what the page saves
is read back from the store, and shown again after going back."""

import json

import pytest

from tests.helpers import browser_login, wait_for

pytestmark = pytest.mark.integration

CONFIG = """\
annotation_task_name: tree and rank
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - annotation_type: hierarchical_multiselect
    name: topic
    taxonomy:
      Science:
        Physics: [Optics, Mechanics]
        Biology: [Genetics]
      "<i>Arts": [Music]
    auto_select_children: true
    auto_select_parent: true
    show_search: true
  - annotation_type: ranking
    name: order
    labels: [A, B, C]
"""
ITEMS = [{"id": "t1", "text": "first"}, {"id": "t2", "text": "second"}]


def box(d, path):
    return d.find_element("css selector", "input[name='label:topic'][value='%s']" % path)


def menu(d, label):
    return d.find_element("css selector", "select[aria-label='Rank of %s']" % label)


def on_item(d, item_id):
    wait_for(d, lambda d: item_id in d.find_element("css selector", ".item-id").text,
             what="item " + item_id)


def test_a_tree_and_a_ranking_save_from_keys_and_mouse(tmp_path, serve, browser):
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    d = browser
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (tmp_path / "config.yaml").write_text(CONFIG)
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    store = server.app.store
    browser_login(d, url)
    assert not d.find_elements("css selector", ".tree i")  # names are text

    # The mouse ticks Physics: its children follow (auto_select_children).
    box(d, "Science/Physics").find_element("xpath", "..").click()
    assert box(d, "Science/Physics/Optics").is_selected()
    assert box(d, "Science/Physics/Mechanics").is_selected()
    assert not box(d, "Science").is_selected()
    # Tab and Space tick Biology/Genetics: Biology, then Science, have all children ticked
    # (auto_select_parent).
    box(d, "Science/Biology").send_keys(Keys.TAB)
    active = d.switch_to.active_element
    assert active.get_attribute("value") == "Science/Biology/Genetics"
    active.send_keys(Keys.SPACE)
    assert box(d, "Science/Biology").is_selected() and box(d, "Science").is_selected()

    # The search box shows the matching nodes with their ancestors; Enter does not save.
    find = d.find_element("css selector", "input.tree-filter")
    find.send_keys("mus", Keys.ENTER)
    assert box(d, "<i>Arts/Music").is_displayed() and box(d, "<i>Arts").is_displayed()
    assert not box(d, "Science").is_displayed()
    assert "t1" in d.find_element("css selector", ".item-id").text
    find.send_keys(Keys.BACKSPACE * 3, "zzz")
    assert d.find_element("css selector", ".tree-none").is_displayed()
    find.clear()
    find.send_keys(" ")  # an input event with an empty query: everything shows again
    wait_for(d, lambda d: box(d, "Science").is_displayed(), what="the whole tree")

    # Ranking with the keyboard: C's menu takes 1, B's 2, and A gets the rank left (3); then
    # the arrow key moves C from 1 to 2, swapping with B.
    menu(d, "C").send_keys("1")
    menu(d, "B").send_keys("2")
    assert Select(menu(d, "A")).first_selected_option.text == "3"
    assert d.find_element("css selector", "output.ranking-order").text == "C > B > A"
    menu(d, "C").send_keys(Keys.ARROW_DOWN)
    assert Select(menu(d, "C")).first_selected_option.text == "2"
    assert Select(menu(d, "B")).first_selected_option.text == "1"
    assert d.find_element("css selector", "output.ranking-order").text == "B > C > A"
    d.find_element("css selector", "button[value=next]").click()
    on_item(d, "t2")
    assert store.labels_of("dana", "t1") == {
        "topic": ["Science", "Science/Physics", "Science/Physics/Optics",
                  "Science/Physics/Mechanics", "Science/Biology", "Science/Biology/Genetics"],
        "order": ["B", "C", "A"]}

    # t2: the mouse alone, and unticking a parent unticks its children.
    box(d, "<i>Arts").find_element("xpath", "..").click()
    box(d, "<i>Arts").find_element("xpath", "..").click()
    assert not box(d, "<i>Arts/Music").is_selected()
    box(d, "<i>Arts/Music").find_element("xpath", "..").click()
    assert box(d, "<i>Arts").is_selected()  # its only child: auto_select_parent
    for label, rank in (("A", "3"), ("B", "1"), ("C", "2")):
        menu(d, label).click()
        menu(d, label).find_element("css selector", "option[value='%s:%s']" % (rank, label)) \
            .click()
    d.find_element("css selector", "button[value=next]").click()
    wait_for(d, lambda d: "All done" in d.page_source, what="the end of the queue")
    assert store.labels_of("dana", "t2") == {"topic": ["<i>Arts", "<i>Arts/Music"],
                                             "order": ["B", "C", "A"]}

    # Back to t1: the saved answers are what the page shows.
    d.get(url + "annotate?item=t1")
    on_item(d, "t1")
    assert box(d, "Science/Biology/Genetics").is_selected()
    assert not box(d, "<i>Arts").is_selected()
    assert Select(menu(d, "A")).first_selected_option.text == "3"
    assert d.find_element("css selector", "output.ranking-order").text == "B > C > A"


def test_more_ticks_than_max_selections_are_not_sent(tmp_path, serve, browser):
    # Review 36.7: the server's 400 page was where the annotator learnt of the limit
    d = browser
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (tmp_path / "config.yaml").write_text(CONFIG.replace("    show_search: true\n",
                                                         "    max_selections: 2\n")
                                          .replace("auto_select_children: true",
                                                   "auto_select_children: false")
                                          .replace("auto_select_parent: true",
                                                   "auto_select_parent: false"))
    server, url = serve(str(tmp_path / "config.yaml"), training=False)
    d.get(url + "login")
    d.find_element("id", "username").send_keys("dana")
    d.find_element("css selector", "form button[type=submit]").click()
    on_item(d, "t1")
    for path in ("Science", "Science/Physics", "Science/Physics/Optics"):
        box(d, path).click()
    d.find_element("css selector", "button[value=next]").click()
    note = d.find_element("id", "required-missing")
    assert note.is_displayed() and note.text == (
        "Not saved yet: topic: 3 nodes are ticked, and at most 2 may be. Everything you gave "
        "is still here.")
    assert server.app.store.labels_of("dana", "t1") == {}
    box(d, "Science").click()
    assert not note.is_displayed()
    d.find_element("css selector", "button[value=next]").click()
    on_item(d, "t2")
    assert server.app.store.labels_of("dana", "t1")["topic"] == [
        "Science/Physics", "Science/Physics/Optics"]
