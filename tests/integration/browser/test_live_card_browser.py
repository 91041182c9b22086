"""The Training page's live card in a real headless Chromium (issue 24, item 7): updated in
place, a selection in the log survives updates, the log keeps its scroll position and follows
the tail only from the bottom, only the status line is aria-live, series keep their colours."""

import os
import time

import pytest

from tests.helpers import KEY, PLUGINS, ROOT, SHOTS, Client, admin_login, make_project, \
    start_run, text_of, wait_for, wait_run

pytestmark = pytest.mark.integration

LOG_STATE = """
var log = document.getElementById('live-log'), sel = window.getSelection();
return {same: log === window.__log, top: log.scrollTop, end: +log.getAttribute('data-log-end'),
        lines: log.textContent.split('\\n').length, selected: sel.toString(),
        inLog: sel.rangeCount > 0 && log.contains(sel.anchorNode),
        bottom: log.scrollHeight - log.scrollTop - log.clientHeight < 4,
        scrollable: log.scrollHeight > log.clientHeight + 20};
"""


def _stroke(d, name):
    found = d.find_elements("css selector", f'#live-run polyline[data-series="{name}"]')
    return found[0].get_attribute("stroke") if found else None


def test_live_card_updates_in_place(tmp_path, serve, browser, monkeypatch):
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-chatty", schemas=["sentiment"], params={"seconds": 14})
    d = browser
    admin_login(d, url, "/admin/training")

    # Only the status line is live for screen readers, not the card, the log or the chart.
    wait_for(d, lambda d: d.find_elements("id", "live-status-line"), what="the live card")
    assert d.find_element("id", "live-run").get_attribute("aria-live") is None
    assert d.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#live-run [aria-live], "
        "#live-run [role=alert]'), function (e) { return e.id; });") == ["live-status-line"]

    # The log fills past its box: scrollable.
    wait_for(d, lambda d: d.execute_script(LOG_STATE)["scrollable"] and
             _stroke(d, "loss (train)"), what="a scrollable log and the loss line")
    loss_colour = _stroke(d, "loss (train)")
    assert d.execute_script(LOG_STATE)["bottom"]  # drawn at its tail

    # Scroll up, select the first line's words; updates come; both stay.
    d.execute_script("""
        var log = document.getElementById('live-log'); window.__log = log; log.scrollTop = 0;
        var node = log.firstChild, r = document.createRange();
        r.setStart(node, 0); r.setEnd(node, 19);
        window.getSelection().removeAllRanges(); window.getSelection().addRange(r);""")
    before = d.execute_script(LOG_STATE)
    assert len(before["selected"]) == 19 and before["inLog"] and before["top"] == 0
    wait_for(d, lambda d: d.execute_script(LOG_STATE)["end"] > before["end"] + 300,
             what="the log to grow")
    wait_for(d, lambda d: _stroke(d, "accuracy (val)"), what="the second series")
    after = d.execute_script(LOG_STATE)
    assert after["same"], "the log element was replaced"
    assert after["selected"] == before["selected"] and after["inLog"]
    assert after["top"] == 0 and after["lines"] > before["lines"]
    # the loss line kept its colour when a series sorted before it appeared
    assert _stroke(d, "loss (train)") == loss_colour != _stroke(d, "accuracy (val)")
    os.makedirs(SHOTS, exist_ok=True)
    d.execute_script("document.getElementById('live-run').scrollIntoView()")
    d.save_screenshot(os.path.join(SHOTS, "training-live-card-selection.png"))

    # Back at the bottom, with nothing selected, the log follows the tail.
    d.execute_script("window.getSelection().removeAllRanges(); var log = "
                     "document.getElementById('live-log'); log.scrollTop = log.scrollHeight;")
    end = d.execute_script(LOG_STATE)["end"]
    wait_for(d, lambda d: d.execute_script(LOG_STATE)["end"] > end + 200, what="more log")
    state = d.execute_script(LOG_STATE)
    assert state["bottom"] and state["same"]

    # The run ends: the status line says so, and the log holds every line it wrote, once.
    wait_run(c, run_id)
    wait_for(d, lambda d: text_of(d, "#live-status") == "success", what="success")
    text = d.execute_script("return document.getElementById('live-log').textContent")
    full = c.get(f"/admin/training/api/runs/{run_id}/log", headers={"X-API-Key": KEY}).text
    assert text.count("chatty line 140 of 140") == 1
    assert text in full  # appended pieces fit together: no line lost or doubled


def test_the_fragment_appends_to_the_log(tmp_path, serve, monkeypatch):
    """``?run=ID&log_from=N`` gives what the log gained after byte N; another run, or an
    offset past the end (the log was cut), starts the card's log again."""
    monkeypatch.setenv("PYTHONPATH", ROOT)
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    H = {"X-API-Key": KEY}
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    full = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).body
    f = c.json("GET", "/admin/training/api/fragments", headers=H)[1]
    assert "log" not in f and f'data-log-end="{len(full)}"' in f["live"]
    f = c.json("GET", f"/admin/training/api/fragments?run={run_id}&log_from=10", headers=H)[1]
    assert f["log"] == {"text": full[10:].decode(), "end": len(full)}
    f = c.json("GET", f"/admin/training/api/fragments?run={run_id}&log_from={len(full)}",
               headers=H)[1]
    assert f["log"] == {"text": "", "end": len(full)}
    f = c.json("GET", f"/admin/training/api/fragments?run={run_id}&log_from={len(full) + 5}",
               headers=H)[1]
    assert f["log"]["reset"] and f["log"]["end"] == len(full)
    for odd in ("r999", "%3Cx%3E"):
        f = c.json("GET", f"/admin/training/api/fragments?run={odd}&log_from=0", headers=H)[1]
        assert "log" not in f


def test_a_config_change_on_disk_appears_and_reloads(tmp_path, serve, browser, monkeypatch):
    """The notice appears on an open page (no reload of the page), and the button applies it."""
    monkeypatch.setenv("PYTHONPATH", ROOT)
    path = make_project(tmp_path)
    _, url = serve(path)
    d = browser
    admin_login(d, url, "/admin/training")
    assert not d.find_elements("id", "config-differs")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace("model_training:\n", "model_training:\n  backends:\n    second: "
                                                  "{type: local}\n", 1))
    notice = wait_for(d, lambda d: d.find_elements("id", "config-differs") and
                      text_of(d, "#config-differs"), what="the notice")
    assert "differs from the one this server runs with: changed: " \
           "model_training.backends.second." in notice
    assert [o.get_attribute("value") for o in
            d.find_elements("css selector", "#backend option")] == ["local"]
    d.find_element("id", "reload-config").click()
    wait_for(d, lambda d: d.find_elements("id", "reload-result"), what="the reload's result")
    assert text_of(d, "#reload-result") == f"Reloaded {path}: backend second added."
    assert [o.get_attribute("value") for o in
            d.find_elements("css selector", "#backend option")] == ["local", "second"]
    time.sleep(1.5)  # a live update keeps the page as it is: nothing differs any more
    assert not d.find_elements("id", "config-differs")
    assert d.find_elements("id", "reload-result")
