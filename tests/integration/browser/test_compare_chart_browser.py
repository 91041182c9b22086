"""Compare overlays the runs' loss and metric curves (issue 35, item 15): one chart, a colour
per run, the same colour beside the run's id in the table, in a real headless Chromium."""

import os

import pytest

from tests.helpers import PLUGINS, ROOT, SHOTS, Client, admin_login, make_project, start_run, \
    wait_run

pytestmark = pytest.mark.integration


def test_compare_overlays_the_curves_a_colour_per_run(tmp_path, serve, browser, monkeypatch):
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    d = browser
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    runs = [start_run(c, trainer="test-chatty", schemas=["sentiment"], params={"seconds": s})
            for s in (1, 1.5)]
    for run_id in runs:
        wait_run(c, run_id)
    admin_login(d, url, "/admin/training/runs")
    d.get(url + "admin/training/compare?runs=%s&runs=%s" % tuple(runs))

    charts = d.find_elements("css selector", "#compare-chart svg.chart")
    assert len(charts) == 1  # one chart for both runs
    lines = {p.get_attribute("data-series"): p.get_attribute("stroke")
             for p in charts[0].find_elements("css selector", "polyline.series")}
    assert set(lines) == {"%s · %s" % (r, s) for r in runs
                          for s in ("loss (train)", "accuracy (val)")}
    colours = [{lines["%s · %s" % (r, s)] for s in ("loss (train)", "accuracy (val)")}
               for r in runs]
    assert all(len(c) == 1 for c in colours) and colours[0] != colours[1]  # a colour per run
    # the table's column of each run carries the same colour
    swatches = [th.find_element("css selector", "svg.swatch rect").get_attribute("fill")
                for th in d.find_elements("css selector", "#compare thead th")]
    assert [{s} for s in swatches] == colours
    legend = [t.text for t in charts[0].find_elements("css selector", "g.legend text")]
    assert "%s · loss (train) (left axis)" % runs[0] in legend
    assert "%s · accuracy (val) (right axis)" % runs[1] in legend
    box = charts[0].rect
    assert box["width"] > 600 and box["height"] > 200  # drawn, not collapsed
    os.makedirs(SHOTS, exist_ok=True)
    d.execute_script("document.getElementById('compare-chart').scrollIntoView()")
    d.save_screenshot(os.path.join(SHOTS, "compare-chart.png"))
