"""The Training page in a real headless Chromium (Debian's chromium + chromium-driver)."""

import os
import re
import time

import pytest

from tests.helpers import ROOT
from tests.helpers import KEY, PLUGINS, make_project
from tests.helpers import SHOTS, select, text_of, wait_for

pytestmark = pytest.mark.integration

BACKENDS = """\
  backend: local
  backends:
    gpu-server: {type: ssh, host: gpu.example.org}
    cluster: {type: slurm, host: login.cluster.example.org, remote_dir: ~/potato}
    lab-workstation: {type: agent}
"""


@pytest.fixture
def page(tmp_path, serve, browser, monkeypatch):
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    _, url = serve(make_project(tmp_path, BACKENDS))
    browser.get(url + "admin/training")
    # Not logged in: the admin login asks for the key once, then comes back here.
    assert "/admin/login" in browser.current_url
    browser.find_element("id", "key").send_keys(KEY)
    browser.find_element("css selector", "form.card button[type=submit]").click()
    wait_for(browser, lambda d: d.current_url.endswith("/admin/training"))
    return browser


def test_runs_on_check_start_watch_cancel(page):
    d = page
    from selenium.webdriver.support.ui import Select

    # Runs on: every backend with its label; the first selection is model_training.backend.
    menu = Select(d.find_element("id", "backend"))
    assert [o.text for o in menu.options] == [
        "local (this machine)", "gpu-server (ssh to gpu.example.org)",
        "cluster (SLURM via login.cluster.example.org)", "lab-workstation (agent)"]
    assert menu.first_selected_option.text == "local (this machine)"
    assert d.find_element("css selector", "label[for=backend]").text == "Runs on"

    # Check shows the report and a verdict.
    d.find_element("id", "check").click()
    report = wait_for(d, lambda d: "can start a run" in text_of(d, "#check-report") and
                      text_of(d, "#check-report"), what="the check report")
    assert "local: this machine, " in report
    assert "local (this machine): can start a run" in report

    # decision-calibrate is shown disabled with its reason on a remote backend.
    select(d, "backend", "gpu-server")
    opt = d.find_element("css selector", "#trainer option[value=decision-calibrate]")
    assert opt.get_attribute("disabled") is not None
    assert "(unavailable: it reads the server's store, so it runs only on local)" in opt.text
    select(d, "backend", "local")
    assert d.find_element("css selector", "#trainer option[value=decision-calibrate]"
                          ).get_attribute("disabled") is None

    # Start a text-naive-bayes run on local and watch it reach success.
    select(d, "trainer", "text-naive-bayes")
    assert d.find_element("id", "param-text-naive-bayes-ngrams").get_attribute("value") == "2"
    d.find_element("id", "start-run").click()
    wait_for(d, lambda d: re.match(r"Run r\d+ (is queued|is running|succeeded)\.$",
                                   text_of(d, "#message")), what="the run's message")
    row = wait_for(d, lambda d: d.find_elements("css selector", "#runs-body tr[data-run]") and
                   "success" in text_of(d, "#runs-body tr[data-run]") and
                   d.find_element("css selector", "#runs-body tr[data-run]"),
                   what="the run to succeed")
    cells = [c.text for c in row.find_elements("css selector", "td")]
    heads = [h.text for h in d.find_elements("css selector", "#runs-table thead th")]
    assert heads == ["Run", "Started", "Duration", "Trainer", "Params (not default)", "Schemes",
                     "Ran on", "Status", "Held-out score", "Predictions written", "In use"]
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d$", cells[1]) and cells[4] == "defaults"
    assert cells[3] == "text-naive-bayes" and cells[5] == "sentiment"
    assert cells[6] == "local" and cells[7] == "success"
    assert cells[8].startswith("macro-F1 0.") and cells[9].isdigit() and int(cells[9]) > 0
    assert cells[10] == "in use: sentiment"
    assert "success" == text_of(d, "#live-status")

    # Start another (slow) run, see it live with progress, screenshot it, and cancel it.
    select(d, "trainer", "test-steps")
    field = d.find_element("id", "param-test-steps-seconds")
    field.clear()
    field.send_keys("60")
    d.find_element("id", "start-run").click()
    wait_for(d, lambda d: d.find_elements("css selector", "#live-run progress"),
             what="the progress bar")
    assert text_of(d, "#live-status") == "running"
    # the ETA is smoothed from the progress rate: it shows from the phase's second report on
    wait_for(d, lambda d: "ETA" in text_of(d, "#live-run"), what="the run's ETA")
    os.makedirs(SHOTS, exist_ok=True)
    d.execute_script("document.getElementById('live-run').scrollIntoView()")
    d.save_screenshot(os.path.join(SHOTS, "training-page-during-run.png"))
    # Narrow (phone) width: nothing sticks out sideways.
    d.set_window_size(400, 900)
    time.sleep(0.3)
    assert d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    d.save_screenshot(os.path.join(SHOTS, "training-page-narrow.png"))
    d.set_window_size(1280, 1000)
    # Cancel asks first: dismissing the question cancels nothing.
    d.find_element("css selector", "#live-run [data-cancel]").click()
    alert = wait_for(d, lambda d: _alert(d), what="the confirmation")
    assert alert.text.startswith("Cancel run ")
    alert.dismiss()
    time.sleep(1.5)
    assert text_of(d, "#live-status") == "running"
    d.find_element("css selector", "#live-run [data-cancel]").click()
    wait_for(d, lambda d: _alert(d), what="the confirmation").accept()
    wait_for(d, lambda d: text_of(d, "#live-status") == "cancelled", what="cancelled")
    # the message about the run started from the page follows it: never a stale "is queued"
    assert "is queued" not in text_of(d, "#message")
    statuses = [r.find_elements("css selector", "td")[7].text
                for r in d.find_elements("css selector", "#runs-body tr[data-run]")]
    assert statuses == ["cancelled", "success"]


def _alert(d):
    try:
        return d.switch_to.alert
    except Exception:  # selenium's NoAlertPresentException: none yet
        return None


def test_api_errors_appear_on_the_page(page):
    d = page
    # 409: a backend that is gone (the config changed after this page was loaded).
    d.execute_script("var o = document.createElement('option'); o.value = 'retired'; "
                     "o.textContent = 'retired (ssh to old.example.org)'; "
                     "document.getElementById('backend').appendChild(o);")
    select(d, "backend", "retired")
    d.find_element("id", "start-run").click()
    msg = wait_for(d, lambda d: text_of(d, "#message"), what="an error message")
    assert msg.startswith("Unknown backend 'retired'. Configured backends: local, gpu-server")
    # 400: bad params.
    select(d, "backend", "local")
    select(d, "trainer", "text-naive-bayes")
    field = d.find_element("id", "param-text-naive-bayes-ngrams")
    field.clear()
    field.send_keys("9")
    d.find_element("id", "start-run").click()
    wait_for(d, lambda d: "ngrams must be at most 3" in text_of(d, "#message"),
             what="the params error")
    # A failed check.
    select(d, "backend", "gpu-server")
    d.find_element("id", "check").click()
    report = wait_for(d, lambda d: "cannot start a run" in text_of(d, "#check-report") and
                      text_of(d, "#check-report"), what="the failed check")
    assert "gpu-server (ssh to gpu.example.org): cannot start a run" in report


def test_runs_table_reads_without_javascript(tmp_path, serve, monkeypatch):
    from tests.helpers import Client
    from tests.helpers import start_run, wait_run

    monkeypatch.setenv("PYTHONPATH", ROOT)
    _, url = serve(make_project(tmp_path, BACKENDS))
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    html = c.get("/admin/training", headers={"X-API-Key": KEY}).text
    assert f'<a href="/admin/training/runs/{run_id}">{run_id}</a>' in html
    assert '<td class="ran-on">local</td>' in html
    run_html = c.get(f"/admin/training/runs/{run_id}", headers={"X-API-Key": KEY}).text
    assert "Model files" in run_html and "/artifacts" in run_html
    assert "held-out:" in run_html  # the full log
