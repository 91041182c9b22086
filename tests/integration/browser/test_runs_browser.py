"""Run again, the Training form's memory, a run's name and note, and the compare view in a
real headless Chromium (issue 24, items 5 and 6). Screenshots go to test-output/."""

import os

import pytest

from tests.helpers import (KEY, PLUGINS, ROOT, SHOTS, Client, admin_login, make_project, select,
                           start_run, text_of, wait_for, wait_run)

pytestmark = pytest.mark.integration
H = {"X-API-Key": KEY}


@pytest.fixture(autouse=True)
def trainers(monkeypatch):
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)


def _value(d, input_id):
    return d.find_element("id", input_id).get_attribute("value")


def test_run_again_and_the_form_memory(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    first = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                      params={"ngrams": 1, "alpha": 0.5})
    wait_run(c, first)
    admin_login(d, url, "/admin/training")

    # The form starts with the params of the trainer's last run, and says so.
    assert _value(d, "param-text-naive-bayes-ngrams") == "1"
    assert _value(d, "param-text-naive-bayes-alpha") == "0.5"
    hint = d.find_element("css selector", '.param-set[data-trainer="text-naive-bayes"] '
                                          '.remembered')
    assert hint.is_displayed() and "run %s" % first in hint.text
    select(d, "trainer", "test-steps")
    select(d, "trainer", "text-naive-bayes")
    assert _value(d, "param-text-naive-bayes-ngrams") == "1"

    # The run page: a name and a note, saved and shown as text.
    d.get(url + "admin/training/runs/%s" % first)
    d.find_element("css selector", "#edit-label summary").click()
    d.find_element("id", "run-name").send_keys("<i>smooth</i>")
    d.find_element("id", "run-note-text").send_keys("alpha halved\nngrams 1")
    d.find_element("id", "save-label").click()
    wait_for(d, lambda d: "Saved the run's name and note." in text_of(d, "#message"),
             what="the saved message")
    assert text_of(d, "#run-name-head") == "<i>smooth</i>"
    assert text_of(d, "#run-note") == "alpha halved\nngrams 1"
    assert not d.find_elements("css selector", "h1 i")

    # Change them first: the Training form, filled in from the run; Start run starts it.
    d.find_element("id", "run-again-form").click()
    wait_for(d, lambda d: "?again=%s" % first in d.current_url, what="the prefilled form")
    assert "Filled in from run %s" % first in text_of(d, "#again-notice")
    box = d.find_element("id", "param-text-naive-bayes-ngrams")
    box.clear()
    box.send_keys("3")
    d.find_element("id", "start-run").click()
    second = wait_for(d, lambda d: text_of(d, "#message").startswith("Run r") and
                      text_of(d, "#message").split()[1], what="the started run")
    run = wait_run(c, second)
    assert run["params"]["ngrams"] == 3 and run["params"]["alpha"] == 0.5

    # Run again with these params: the same request at once, and its page.
    d.get(url + "admin/training/runs/%s" % first)
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "run-page-run-again.png"))
    assert "--param alpha=0.5 --param ngrams=1" in text_of(d, ".again-command")
    d.find_element("id", "run-again").click()
    wait_for(d, lambda d: d.current_url.rstrip("/").rsplit("/", 1)[1] not in (first, second)
             and "/admin/training/runs/r" in d.current_url, what="the new run's page")
    third = d.current_url.rstrip("/").rsplit("/", 1)[1]
    again, old = wait_run(c, third), wait_run(c, first)
    assert (again["trainer"], again["schemas"], again["backend"], again["params"]) == (
        old["trainer"], old["schemas"], old["backend"], old["params"])

    # The form now remembers the newest run of that trainer.
    d.get(url + "admin/training")
    assert _value(d, "param-text-naive-bayes-ngrams") == "1"


def test_compare_runs_picked_in_the_runs_table(tmp_path, serve, browser):
    d = browser
    service, url = serve(make_project(tmp_path))
    c = Client(url)
    a = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], params={"ngrams": 1})
    b = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                  params={"ngrams": 3, "alpha": 0.2})
    wait_run(c, a), wait_run(c, b)
    long_value = "x" * 70 + "END"
    odd = service.manager.runs.create("text-naive-bayes", ["sentiment"], "local",
                                      {"prompt": long_value})  # a record with a long param
    service.manager.runs.finish(odd.run_id, "error", "made by the test")
    admin_login(d, url, "/admin/training/runs")

    # A cut param ends with an ellipsis and shows in full on hover.
    cut = d.find_element("css selector", 'tr[data-run="%s"] code.cut' % odd.run_id)
    assert cut.text.endswith("…") and "END" not in cut.text
    assert cut.get_attribute("title") == "prompt=%s" % ('"%s"' % long_value)

    # Filter without JavaScript: a GET form; the error run is gone.
    select(d, "f-status", "success")
    select(d, "f-sort", "score")
    d.find_element("id", "apply-filter").click()
    wait_for(d, lambda d: "status=success" in d.current_url, what="the filtered list")
    rows = [r.get_attribute("data-run") for r in
            d.find_elements("css selector", "#runs-list tr[data-run]")]
    assert sorted(rows) == sorted([a, b])
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "runs-page-filtered.png"))

    # Tick both, compare: the differing params are highlighted, scores side by side.
    for rid in (a, b):
        d.find_element("css selector", 'input[name="runs"][value="%s"]' % rid).click()
    d.find_element("id", "compare-runs").click()
    wait_for(d, lambda d: "/admin/training/compare" in d.current_url, what="the compare page")
    heads = [th.text for th in d.find_elements("css selector", "#compare thead th")]
    assert heads == [a, b]
    differs = {tr.find_element("css selector", "th").text.lstrip("≠ ").strip()
               for tr in d.find_elements("css selector", "#compare tr.differs")}
    assert {"alpha", "ngrams"} <= differs
    assert "min_count" not in differs and "calibrate" not in differs
    assert "2 params differ: alpha, ngrams." in text_of(d, "#params-differ")
    f1 = d.find_element("xpath", '//tr[th[contains(., "held-out macro-F1")]]')
    assert len(f1.find_elements("css selector", "td")) == 2
    colour = d.find_element("css selector", "#compare tr.differs").value_of_css_property(
        "background-color")
    plain = d.find_element("xpath", '//tr[th[normalize-space(.)="min_count"]]'
                           ).value_of_css_property("background-color")
    assert colour != plain  # highlighted
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "compare-runs.png"))
