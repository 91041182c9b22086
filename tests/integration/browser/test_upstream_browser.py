"""Upstream's display_logic in a real headless Chromium: a conditional scheme appears when the
answer it depends on is given and disappears again when it changes; a required scheme that is
hidden does not stop Enter, a shown one does; chains (a scheme shown by a shown scheme) and
in_range on a slider. What the page saves is read back from the store."""

import os
import shutil

import pytest

from tests.helpers import ROOT, SHOTS, browser_login, wait_for

pytestmark = pytest.mark.integration

UP = os.path.join(ROOT, "tests", "data", "upstream")


def visible(d):
    return [f.get_attribute("data-scheme")
            for f in d.find_elements("css selector", "fieldset[data-scheme]") if f.is_displayed()]


def test_display_logic_shows_and_hides_schemes(tmp_path, serve, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    d = browser
    shutil.copytree(UP, tmp_path / "up")
    server, url = serve(str(tmp_path / "up" / "45-display-logic.yaml"), training=False)
    browser_login(d, url)
    assert visible(d) == ["sentiment"]
    ActionChains(d).send_keys("2").perform()  # negative: the complaints appear
    assert visible(d) == ["sentiment", "complaints"]
    # complaints is required and shown: Enter is stopped and says so
    d.find_element("tag name", "body").click()
    ActionChains(d).send_keys(Keys.ENTER).perform()
    note = d.find_element("id", "required-missing")
    assert note.is_displayed() and "complaints" in note.text
    d.find_element("css selector", "input[name='label:complaints'][value='other']").click()
    assert visible(d) == ["sentiment", "complaints", "other_complaint", "certainty"]
    slider = d.find_element("css selector", "fieldset[data-scheme='certainty'] input[type=range]")
    slider.click()
    d.execute_script("arguments[0].value = 2; arguments[0].dispatchEvent("
                     "new Event('input', {bubbles: true}));", slider)
    assert "why_unsure" in visible(d)  # in_range [1, 3]
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "annotate-display-logic.png"))
    d.find_element("css selector", "input[name='label:sentiment'][value='positive']").click()
    # positive: complaints (and what hangs on it) hide; certainty stays (logic: any)
    assert visible(d) == ["sentiment", "certainty", "why_unsure"]
    d.find_element("tag name", "body").click()
    ActionChains(d).send_keys(Keys.ENTER).perform()  # hidden required complaints: no stop
    wait_for(d, lambda d: "<code>r1</code>" in d.page_source, what="the next item")
    saved = server.store.labels_of("dana", "r0")
    assert saved["sentiment"] == "positive" and saved["certainty"] == 2
