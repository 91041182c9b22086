"""Issue 14 in a real headless Chromium: the held-out report and the confusion matrix on the
run page, the model in use (a worse run does not take over; "Use this model" moves it), the
refusal of a too-small project, the annotate page's keys, and the admin export download.
Screenshots go to test-output/."""

import csv
import os
import re
import time

import pytest

from tests.helpers import (
    KEY, SHOTS, Client, admin_login, browser_login, make_project, select, start_run, text_of,
    wait_for, wait_run)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("env")]
H = {"X-API-Key": KEY}




def row_of(d, run_id):
    return d.find_element("css selector", f'#runs-body tr[data-run="{run_id}"]')


def test_report_in_use_and_use_this_model(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    good = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    good_run = wait_run(c, good)
    admin_login(d, url, f"/admin/training/runs/{good}")
    # The report: a sentence, per-label table, confusion matrix matching the API's numbers.
    h = good_run["holdout"]
    summary = text_of(d, "#holdout-report .report-summary")
    assert f"on {h['n']} held-out (test split) items" in summary and "95% interval" in summary
    labels = [r.find_element("css selector", "th").text
              for r in d.find_elements("css selector", "table.report-labels tbody tr")]
    assert labels == list(h["per_label"])
    cells = [[int(td.text) for td in r.find_elements("css selector", "td")]
             for r in d.find_elements("css selector", "table.confusion tbody tr")]
    assert cells == h["confusion"]["matrix"] and sum(map(sum, cells)) == h["n"]
    assert "predictions written for sentiment" in text_of(d, ".writeback-summary")
    # naive Bayes reports one val accuracy: a number, not a chart with a lone dot
    assert not d.find_elements("css selector", "svg.chart")
    numbers = text_of(d, "ul.chart-numbers")
    assert re.match(r"val_accuracy \(sentiment\): 0\.\d+ \(epoch 1\)$", numbers), numbers
    assert d.find_element("id", "model-download").get_attribute("href").endswith(
        f"/admin/training/runs/{good}/model.tar")
    code = text_of(d, ".load-code")  # the trainer's load code, with this run's scheme file
    assert "import Saved" in code and "sentiment.naive-bayes.json" in code
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "run-page-report.png"))
    d.execute_script("document.querySelector('ul.chart-numbers').scrollIntoView()")
    d.save_screenshot(os.path.join(SHOTS, "run-page-chart.png"))

    # A worse run (always "positive") does not take over under writeback.policy: best.
    worse = start_run(c, trainer="test-warns", schemas=["sentiment"])
    worse_run = wait_run(c, worse)
    assert worse_run["holdout"]["macro_f1"] < h["macro_f1"]
    d.get(url + "admin/training")
    wait_for(d, lambda d: "in use: sentiment" in row_of(d, good).text, what="the marker")
    assert "in use" not in row_of(d, worse).text
    assert "success, 2 warnings" in row_of(d, worse).text  # the warning state
    d.execute_script("document.getElementById('runs-table').scrollIntoView()")
    d.save_screenshot(os.path.join(SHOTS, "training-page-in-use.png"))
    # The admin puts the worse run in use anyway: the marker moves at once.
    d.get(url + f"admin/training/runs/{worse}")
    d.find_element("id", "use-run").click()
    wait_for(d, lambda d: "in use for sentiment" in d.page_source, what="the run in use")
    d.get(url + "admin/training")
    wait_for(d, lambda d: "in use: sentiment" in row_of(d, worse).text, what="the moved marker")
    assert "in use" not in row_of(d, good).text


def test_pin_and_use_on_the_run_page(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    good = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))["run_id"]
    worse = wait_run(c, start_run(c, trainer="test-warns", schemas=["sentiment"]))["run_id"]
    admin_login(d, url, f"/admin/training/runs/{worse}")
    assert "Use this model" in text_of(d, "#use-run")
    pin = d.find_element("id", "pin-run")
    assert pin.text == "Use and pin"
    pin.click()
    msg = wait_for(d, lambda d: text_of(d, "#message"), what="the pin's message")
    assert msg.startswith(f"Run {worse} is pinned and in use for sentiment")
    assert d.find_element("id", "unpin-run").is_displayed()
    assert "in use for sentiment" in d.page_source and not d.find_elements("id", "use-run")
    d.save_screenshot(os.path.join(SHOTS, "run-page-pinned.png"))
    # A better run does not take over from the pinned one; its page offers Use.
    better = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    assert better["in_use"] == [] and better["run_id"] != good
    d.get(url + f"admin/training/runs/{better['run_id']}")
    assert f"run {worse} is pinned" in d.page_source
    d.find_element("id", "use-run").click()
    msg = wait_for(d, lambda d: text_of(d, "#message"), what="the switch's message")
    assert msg.startswith(f"Run {better['run_id']} is now in use for sentiment")
    d.get(url + "admin/training")
    wait_for(d, lambda d: "in use: sentiment" in row_of(d, better["run_id"]).text,
             what="the moved marker")
    # Use on another run moves the pin with it (the admin chose that run): the old one is
    # neither pinned nor in use any more, so no stale pin waits to surprise anyone.
    assert "pinned" in row_of(d, better["run_id"]).text
    assert "pinned" not in row_of(d, worse).text and "in use" not in row_of(d, worse).text


def test_a_too_small_project_is_refused_on_the_page(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path, labels=False))
    admin_login(d, url, "/admin/training")
    select(d, "trainer", "text-naive-bayes")
    d.find_element("id", "start-run").click()
    msg = wait_for(d, lambda d: text_of(d, "#message"), what="the refusal")
    assert "Scheme sentiment has 0 labelled items with positive; 0 labelled items with negative in " \
        "the train split" in msg
    assert "model_training.min_labels_per_class" in msg
    assert d.find_elements("css selector", "#runs-body tr[data-run]") == []


def test_annotate_keys_accept_highlight_and_warn(tmp_path, serve, browser):
    d = browser
    server, url = serve(make_project(tmp_path, labels=False))
    store = server.app.store
    first, second, third = (store.item_at(i)["id"] for i in range(3))
    with store.tx() as db:
        for item in (first, third):
            db.execute("INSERT INTO predictions VALUES (?, 'sentiment', '\"negative\"', 0.91, "
                       "'r1')", (item,))
    browser_login(d, url)
    assert "Model suggests: negative, 0.91" in text_of(d, ".suggestion")
    body = d.find_element("tag name", "body")
    # Enter with nothing chosen warns and stays.
    body.send_keys("\n")
    wait_for(d, lambda d: d.find_element("id", "nothing-chosen").is_displayed(), what="warning")
    assert first in text_of(d, ".item-id")
    # A accepts the suggestion: the label is chosen and highlighted.
    body.send_keys("a")
    chosen = d.find_element("css selector", "input[value=negative]")
    assert chosen.is_selected()
    option = chosen.find_element("xpath", "..")
    assert "chosen" in option.get_attribute("class")
    assert option.value_of_css_property("font-weight") in ("700", "bold")
    assert not d.find_element("id", "nothing-chosen").is_displayed()
    d.save_screenshot(os.path.join(SHOTS, "annotate-accepted.png"))
    body.send_keys("\n")
    wait_for(d, lambda d: second in text_of(d, ".item-id"), what="the next item")
    assert store.labels_of("dana", first) == {"sentiment": "negative"}
    # Enter twice with nothing chosen skips (the first one only warns).
    body = d.find_element("tag name", "body")
    body.send_keys("\n")
    wait_for(d, lambda d: d.find_element("id", "nothing-chosen").is_displayed(), what="warning")
    body.send_keys("\n")
    wait_for(d, lambda d: third in text_of(d, ".item-id"), what="the skip")
    assert store.labels_of("dana", second) == {}
    # A never replaces a choice the annotator made.
    body = d.find_element("tag name", "body")
    body.send_keys("1")
    body.send_keys("a")
    assert d.find_element("css selector", "input[value=positive]").is_selected()
    assert not d.find_element("css selector", "input[value=negative]").is_selected()


def test_admin_export_downloads(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path))
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    d.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow",
                                                      "downloadPath": str(downloads)})
    admin_login(d, url, "/admin")
    d.find_element("id", "export-csv").click()
    wait_for(d, lambda d: any(p.suffix == ".csv" and p.stat().st_size > 0
                              for p in downloads.iterdir()), what="the download")
    time.sleep(0.3)
    path, = downloads.iterdir()  # the project and the time in its name
    assert re.fullmatch(r"training-test-labels-\d{8}-\d{6}\.csv", path.name), path.name
    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    assert len(rows) == 600 and {"item_id", "annotator", "label"} <= set(rows[0])
    assert all(r["annotator"] == "gold" for r in rows)
