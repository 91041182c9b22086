"""The pages follow the run, and the form says what happened (issue 35, items 5 to 8 and 12),
in a real headless Chromium at a 1,280 px window:

- a run's page is live (status, step, chart, log) and shows the report once the run ends;
  Run again lands on the new run's page, live too; the runs list follows the runs;
- a failed run is said as a failure, with its reason, in the error colour; after Start run
  the message and the live card come into view and the card takes the focus;
- a change to the backend, trainer or params clears Check's verdict; Start after a failed
  Check asks first;
- the form starts with the backend and trainer last used, and says so;
- a run page with a long Run again command is no wider than the window."""

import os
import time

import pytest

from tests.helpers import (KEY, PLUGINS, ROOT, SHOTS, Client, admin_login, make_project, select,
                           start_run, text_of, wait_for, wait_run)

pytestmark = pytest.mark.integration
H = {"X-API-Key": KEY}
BACKENDS = "  backends:\n    second: {type: local}\n    lab: {type: agent}\n"


@pytest.fixture(autouse=True)
def trainers(monkeypatch):
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)


def _run_of(d):
    return d.current_url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[1]


def _in_view(d, element_id):
    return d.execute_script(
        "var r = document.getElementById(arguments[0]).getBoundingClientRect();"
        "return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0;", element_id)


def _fits(d):
    return d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")


def _alert(d):
    try:
        return d.switch_to.alert
    except Exception:  # selenium's NoAlertPresentException: none yet
        return None


def test_a_runs_page_follows_it_and_run_again_lands_on_the_next(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-chatty", schemas=["sentiment"], params={"seconds": 8})
    admin_login(d, url, "/admin/training/runs/%s" % run_id)
    assert d.find_elements("id", "run-follows")
    d.execute_script("window.__page = document.body; window.__log = "
                     "document.getElementById('run-log');")

    # Status, step, chart and log change in place, without a reload.
    wait_for(d, lambda d: text_of(d, '[data-part="status"]') == "running", what="running")
    wait_for(d, lambda d: "chatty line" in text_of(d, '[data-part="step"]') or
             d.find_elements("css selector", '[data-part="bar"] progress'), what="the step")
    wait_for(d, lambda d: d.find_elements(
        "css selector", '[data-part="chart"] polyline[data-series="loss (train)"]'),
        what="the loss line")
    wait_for(d, lambda d: "chatty line 40 of 80" in text_of(d, "#run-log"), what="the log")
    assert d.execute_script("return window.__log === document.getElementById('run-log') && "
                            "window.__page === document.body")
    assert text_of(d, '[data-part="started"]') != ""
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "run-page-live.png"))

    # The run ends: the page shows it as finished, with the report and Run again.
    wait_for(d, lambda d: d.find_elements("id", "again-card"), what="the finished page")
    assert not d.find_elements("id", "run-follows")
    assert text_of(d, '[data-part="status"]') == "success"
    log = text_of(d, "#run-log")
    assert log.count("chatty line 80 of 80") == 1

    # Run again lands on the new run's page, which follows that run.
    d.find_element("id", "run-again").click()
    wait_for(d, lambda d: _run_of(d) != run_id, what="the new run's page")
    again = _run_of(d)
    assert d.find_elements("id", "run-follows")
    wait_for(d, lambda d: text_of(d, '[data-part="status"]') == "running", what="running")
    wait_for(d, lambda d: d.find_elements("id", "again-card"), what="the new run's end")
    assert text_of(d, '[data-part="status"]') == "success" and _run_of(d) == again
    assert wait_run(c, again)["params"] == wait_run(c, run_id)["params"]


def test_the_runs_list_follows_the_runs(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    first = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, first)
    admin_login(d, url, "/admin/training/runs")
    assert text_of(d, "#list-h") == "1 run"
    d.find_element("css selector", 'input[name="runs"][value="%s"]' % first).click()
    d.execute_script("window.__page = document.body;")
    second = start_run(c, trainer="test-steps", schemas=["sentiment"], params={"seconds": 3})
    row = 'tr[data-run="%s"]' % second
    wait_for(d, lambda d: d.find_elements("css selector", row) and
             "running" in text_of(d, row), what="the new run, running")
    assert text_of(d, "#list-h") == "2 runs"
    wait_for(d, lambda d: "success" in text_of(d, row), what="the new run's success")
    assert d.execute_script("return window.__page === document.body")  # never reloaded
    # a run ticked for compare stayed ticked through the updates
    assert d.find_element("css selector", 'input[name="runs"][value="%s"]' % first).is_selected()
    # a filtered list follows its own filter: a run that does not match stays out
    d.get(url + "admin/training/runs?status=success")
    third = start_run(c, trainer="test-steps", schemas=["sentiment"], params={"seconds": 30})
    time.sleep(2.5)  # more than one update
    assert not d.find_elements("css selector", 'tr[data-run="%s"]' % third)
    c.post("/admin/training/api/runs/%s/cancel" % third, headers=H)
    wait_run(c, third)


def test_a_failed_run_is_said_as_a_failure_where_the_eye_is(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path))
    admin_login(d, url, "/admin/training")
    select(d, "trainer", "test-sigkill")
    d.find_element("id", "start-run").click()  # Selenium scrolls the button into view first

    # The message under the button and the live card come into view; the card has the focus.
    wait_for(d, lambda d: text_of(d, "#message").startswith("Run r"), what="the message")
    run_id = text_of(d, "#message").split()[1]
    wait_for(d, lambda d: d.execute_script("return document.activeElement.id") == "live-card",
             what="the live card's focus")
    assert _in_view(d, "message") and _in_view(d, "live-status-line")
    assert d.find_element("css selector", "#live-run .live").get_attribute("data-run") == run_id

    # It fails: in words, with the reason, as an error (not green).
    run = wait_run(Client(url), run_id)
    assert run["status"] == "error" and run["error"]
    wait_for(d, lambda d: text_of(d, "#message").startswith("Run %s failed: " % run_id),
             what="the failure")
    message = d.find_element("id", "message")
    assert message.text == "Run %s failed: %s" % (run_id, run["error"])
    assert message.get_attribute("class") == "error"
    assert message.value_of_css_property("color") == "rgba(179, 38, 30, 1)"  # --bad
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "training-run-failed.png"))


def test_check_stays_true_and_start_after_a_failed_check_asks(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path, BACKENDS))
    c = Client(url)
    admin_login(d, url, "/admin/training")

    def check_fails():
        d.find_element("id", "check").click()
        wait_for(d, lambda d: "lab (agent): cannot start a run" in text_of(d, "#check-report"),
                 what="the failed check")

    select(d, "backend", "lab")
    check_fails()
    select(d, "trainer", "test-steps")  # another trainer: the verdict no longer holds
    assert text_of(d, "#check-report") == ""
    check_fails()
    box = d.find_element("id", "param-test-steps-seconds")
    box.clear()
    box.send_keys("2")  # another param value: the same
    assert text_of(d, "#check-report") == ""

    # Start after a failed Check asks first; dismissing it starts nothing.
    check_fails()
    d.find_element("id", "start-run").click()
    alert = wait_for(d, _alert, what="the question")
    assert alert.text == ("Check said lab (agent) cannot start a run with this trainer and these "
                          "params. Start it anyway?")
    alert.dismiss()
    time.sleep(0.5)
    assert c.json("GET", "/admin/training/api/runs", headers=H)[1]["runs"] == []
    assert text_of(d, "#message") == ""
    # Accepting it sends the request: the server's answer is shown.
    d.find_element("id", "start-run").click()
    wait_for(d, _alert, what="the question").accept()
    wait_for(d, lambda d: "no token issued" in text_of(d, "#message"), what="the refusal")

    # Another backend clears the verdict: Start no longer asks.
    select(d, "backend", "local")
    assert text_of(d, "#check-report") == ""
    d.find_element("id", "start-run").click()
    wait_for(d, lambda d: text_of(d, "#message").startswith("Run r"), what="the started run")
    assert _alert(d) is None


def test_the_form_starts_with_the_backend_and_trainer_last_used(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path, BACKENDS))
    c = Client(url)
    run_id = start_run(c, trainer="test-steps", schemas=["sentiment"], backend="second",
                       params={"seconds": 0.3})
    wait_run(c, run_id)
    admin_login(d, url, "/admin/training")
    assert d.find_element("id", "backend").get_attribute("value") == "second"
    assert d.find_element("id", "trainer").get_attribute("value") == "test-steps"
    hint = d.find_element("id", "remembered-choice")
    assert hint.is_displayed() and hint.text == (
        "Runs on and Trainer start as in run %s, the last run started by hand; change them for "
        "this one." % run_id)
    # the trainer's params are the ones shown, filled in from that run
    box = d.find_element("id", "param-test-steps-seconds")
    assert box.is_displayed() and box.get_attribute("value") == "0.3"


def test_a_run_page_fits_a_1280_px_window(tmp_path, serve, browser):
    d = browser
    service, url = serve(make_project(tmp_path), training=False)  # runs stay as made
    runs = service.manager.runs
    long_run = runs.create("text-naive-bayes", ["sentiment"], "local",
                           {"prompt": "word" * 120, "alpha": 0.5})
    runs.finish(long_run.run_id, "error", "made by the test")
    queued = runs.create("text-naive-bayes", ["sentiment"], "local", {"prompt": "x" * 400})
    admin_login(d, url, "/admin/training/runs/%s" % long_run.run_id)
    assert d.execute_script("return window.innerWidth") == 1280
    assert "word" * 120 in text_of(d, ".again-command")
    assert _fits(d), d.execute_script("return document.documentElement.scrollWidth")
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "run-page-long-command.png"))
    for path in ("/admin/training/runs/%s" % queued.run_id, "/admin/training/runs",
                 "/admin/training"):
        d.get(url + path.lstrip("/"))
        assert _fits(d), (path, d.execute_script(
            "return document.documentElement.scrollWidth"))
