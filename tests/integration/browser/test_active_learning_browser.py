"""Active learning as an admin and an annotator see it in a real headless Chromium: the
training page's Active learning card with its learning curve, and the annotate page handing
out the item the model is least sure of (issue 37)."""

import os

import pytest

from tests.helpers import SHOTS, Client, KEY, admin_login, make_project, start_run, wait_run

pytestmark = pytest.mark.integration
H = {"X-API-Key": KEY}


def test_the_card_draws_the_curve_and_the_annotator_gets_the_head(tmp_path, serve, browser):
    d = browser
    path = make_project(tmp_path, top="""assignment_strategy: active_learning
active_learning:
  random_sample_percent: 0
  min_instances_for_training: 1000000
""")
    _, url = serve(path)
    c = Client(url)
    for _ in range(2):
        run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]),
                       timeout=120)
        assert run["status"] == "success", run
    code, st = c.json("GET", "/admin/training/api/active_learning", headers=H)
    head = st["order"]["next"][0]
    admin_login(d, url, "/admin/training")
    card = d.find_element("id", "active-learning")
    assert "Strategy: uncertainty on sentiment" in card.text
    assert "The queue is ordered by run %s (sentiment)" % run["run_id"] in card.text
    svg = card.find_element("css selector", "#al-curve-sentiment svg")
    assert svg.rect["width"] > 300 and svg.rect["height"] > 150  # drawn, not collapsed
    dots = svg.find_elements("css selector", "circle")
    assert len(dots) == 2
    titles = [t.get_attribute("textContent") for t in svg.find_elements("css selector", "title")]
    assert any("(in use)" in t for t in titles) and all("600 labelled items" in t
                                                        for t in titles)
    os.makedirs(SHOTS, exist_ok=True)
    d.execute_script("arguments[0].scrollIntoView()", card)
    d.save_screenshot(os.path.join(SHOTS, "active-learning-card.png"))
    # an annotator is handed the head of the order
    d.delete_all_cookies()
    d.get(url + "login")
    d.find_element("name", "username").send_keys("ann")
    d.find_element("css selector", "form button[type=submit]").click()
    d.get(url + "annotate")
    shown = d.find_element("css selector", "input[name=item_id]").get_attribute("value")
    assert shown == head["item_id"], (shown, head)
