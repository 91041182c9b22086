"""A crowd worker in a real headless Chromium: they arrive by the Prolific study link (their
id, study and session in the URL), land on their first item without a login form, label their
items by keys, and see the completion code with the link back to Prolific (the redirect a
meta refresh: the page's policy runs no inline script), which a browser follows by itself
after the delay. Screenshots go to test-output/."""

import json
import os

import pytest

from tests.helpers import SHOTS, wait_for

pytestmark = pytest.mark.integration

CONFIG = """\
annotation_task_name: Prolific study
task_description: Is the snippet positive or negative?
login: {type: url_direct, url_argument: PROLIFIC_PID}
completion_code: C1ABCDEF
auto_redirect_on_completion: true
auto_redirect_delay: 600000
hide_navbar: true
jumping_to_id_disabled: true
max_annotations_per_user: 3
num_annotators_per_item: 2
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: radio
    name: sentiment
    labels: [positive, negative]
"""


def keys(d, *ks):
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(d).send_keys(*ks).perform()


def item_id(d):
    found = d.find_elements("css selector", "input[name=item_id]")
    return found[0].get_attribute("value") if found else None


def test_a_prolific_worker_arrives_labels_by_keys_and_gets_the_code(tmp_path, serve, browser):
    from selenium.webdriver.common.keys import Keys

    (tmp_path / "items.jsonl").write_text("".join(
        json.dumps({"id": f"s{n}", "text": f"snippet {n} is {'good' if n % 2 else 'bad'}"}) +
        "\n" for n in range(6)))
    (tmp_path / "config.yaml").write_text(CONFIG)
    service, url = serve(str(tmp_path / "config.yaml"), training=False)
    d = browser
    d.get(url + "?PROLIFIC_PID=5f1a2b3c4d5e6f7a8b9c0d1e&STUDY_ID=study42&SESSION_ID=sess7")
    wait_for(d, lambda d: d.current_url.endswith("/annotate") and item_id(d),
             what="the first item")
    assert not d.find_elements("css selector", "nav form[action='/logout']")  # hide_navbar
    assert not d.find_elements("css selector", "form.jump")  # jumping_to_id_disabled
    seen = []
    while item_id(d):
        current = item_id(d)
        seen.append(current)
        keys(d, "1")
        assert d.find_element("css selector", "input[name='label:sentiment'][value=positive]"
                              ).is_selected()
        keys(d, Keys.ENTER)
        wait_for(d, lambda d: item_id(d) != current, what="the next item")
    assert len(seen) == 3  # max_annotations_per_user
    code = wait_for(d, lambda d: d.find_elements("id", "completion-code"), what="the code")[0]
    assert code.text == "C1ABCDEF"
    back = d.find_element("id", "completion-return")
    assert back.get_attribute("href") == \
        "https://app.prolific.com/submissions/complete?cc=C1ABCDEF"
    assert "Return to Prolific" in back.text
    refresh = d.find_element("css selector", "meta[http-equiv=refresh]")
    assert refresh.get_attribute("content") == \
        "600;url=https://app.prolific.com/submissions/complete?cc=C1ABCDEF"
    assert not d.find_elements("css selector", "script:not([src])")
    assert {r["name"]: r["items"] for r in service.app.store.annotator_stats()} == \
        {"5f1a2b3c4d5e6f7a8b9c0d1e": 3}
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "crowd-done.png"))


def test_the_done_page_goes_back_by_itself_without_a_script(tmp_path, serve, browser):
    from selenium.webdriver.common.keys import Keys

    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "a", "text": "one"}) + "\n")
    (tmp_path / "config.yaml").write_text(CONFIG.replace(
        "login: {type: url_direct, url_argument: PROLIFIC_PID}", """\
login: {type: url_direct, url_argument: rid}
crowdsourcing:
  provider: generic
  generic:
    id_param: rid
    completion: {code: P1, redirect_url: "http://127.0.0.1:9/done?rid={worker_id}&c={code}"}
""").replace("600000", "1000"))
    _, url = serve(str(tmp_path / "config.yaml"), training=False)
    d = browser
    d.get(url + "?rid=w%2B1")
    wait_for(d, lambda d: item_id(d), what="the item")
    keys(d, "2")
    keys(d, Keys.ENTER)
    # the port answers nothing: the browser lands on its error page for that address
    wait_for(d, lambda d: d.current_url.startswith("http://127.0.0.1:9/done"),
             what="the platform's page", timeout=20)
    assert d.current_url == "http://127.0.0.1:9/done?rid=w%2B1&c=P1"
