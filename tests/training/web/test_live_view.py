"""The live view stays still (issue 24, item 7): series keep their colours, a one-point metric
is a number, the ETA is smoothed and covers the prediction phase."""

import re

import pytest

from potato.training.web import chart, live
from potato.training.core import eta
from tests.helpers import KEY, ROOT, Client, make_project, start_run, wait_run

LOSS = [{"name": "loss", "split": "train", "value": 0.7 - 0.01 * i, "step": i + 1}
        for i in range(10)]


def _strokes(svg):
    return dict(re.findall(r'<polyline class="series" data-series="([^"]*)" fill="none" '
                           r'stroke="([^"]*)"', str(svg)))


def test_a_series_keeps_its_colour_when_others_appear():
    before = _strokes(chart.chart_svg(LOSS))
    # a new series whose name sorts before "loss (train)" used to take its colour
    more = LOSS + [{"name": "accuracy", "split": "val", "value": 0.5 + 0.1 * e, "step": 5 * e}
                   for e in (1, 2)]
    more += [{"name": "aardvark", "value": v, "step": s} for s, v in ((1, 0.2), (2, 0.3))]
    after = _strokes(chart.chart_svg(more))
    assert before["loss (train)"] == after["loss (train)"]
    assert set(after) == {"loss (train)", "accuracy (val)", "aardvark"}
    assert len(set(after.values())) == 3  # the trainers' own series differ from each other
    assert after["accuracy (val)"] != after["loss (train)"]
    # the colour depends on the name only: the same on every page and run
    assert chart.colour_of("aardvark") == after["aardvark"] == chart.colour_of("aardvark")


def test_a_one_point_metric_is_a_number_not_an_empty_chart():
    nb = [{"name": "val_accuracy", "value": 0.8123, "scheme": "sentiment", "epoch": 1},
          {"name": "val_accuracy", "value": 0.7, "scheme": "topic", "epoch": 1}]
    out = str(chart.chart_svg(nb, pending=False))
    assert "<svg class=\"chart\"" not in out and "polyline" not in out
    assert "val_accuracy (sentiment): <b>0.8123</b>" in out
    assert "val_accuracy (topic): <b>0.7</b>" in out and "(epoch 1)" in out
    # beside a line: the line is charted, the lone value listed under it
    mixed = str(chart.chart_svg(LOSS + [{"name": "accuracy", "split": "val", "value": 0.6,
                                         "step": 10}]))
    assert 'data-series="loss (train)"' in mixed and "accuracy (val): <b>0.6</b>" in mixed
    assert 'polyline class="series" data-series="accuracy (val)"' not in mixed


def test_eta_is_smoothed_over_the_progress_rate():
    e = eta.Eta()
    # a steady 10 steps a second, then one stalled report: the ETA does not jump
    for i in range(1, 21):
        left = e.update(i * 10, 1000, "step", float(i))
    assert abs(left - 80) < 1e-6  # (1000 - 200) / 10
    stalled = e.update(201, 1000, "step", 25.0)
    assert stalled < 2 * left  # an EMA moves part of the way, never to 4000 s at once


def test_eta_restarts_with_the_prediction_phase():
    e = eta.Eta()
    for i in range(1, 6):
        e.update(i, 5, "step", float(i))
    assert e.update(100, 1000, "prediction", 10.0) is None  # one point: no rate yet
    left = e.update(300, 1000, "prediction", 11.0)  # 200 predictions a second
    assert abs(left - 3.5) < 0.01


@pytest.mark.parametrize("raw", ["\u00b2", "\u0663", "-1", "1.5", "abc", "1" * 16, " 7"])
def test_a_log_offset_is_ascii_digits_only(raw):
    with pytest.raises(ValueError, match="log_from must be a byte offset"):
        live.log_offset({"log_from": [raw]})


def test_a_log_offset_absent_or_given():
    assert live.log_offset({}) is None and live.log_offset({"log_from": [""]}) is None
    assert live.log_offset({"log_from": ["0"]}) == 0
    assert live.log_offset({"log_from": ["9" * 15]}) == 10 ** 15 - 1


def test_a_junk_log_offset_is_a_400_not_a_500(tmp_path, serve, monkeypatch):
    # "\u00b2".isdigit() is true and int() refuses it: the route gave a 500 with a traceback
    monkeypatch.setenv("PYTHONPATH", ROOT)
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    H = {"X-API-Key": KEY}
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    for raw in ("%C2%B2", "abc"):
        status, out = c.json("GET", "/admin/training/api/fragments?run=%s&log_from=%s"
                             % (run_id, raw), headers=H)
        assert status == 400 and out["error"].startswith("log_from must be a byte offset"), out
    status, out = c.json("GET", "/admin/training/api/fragments?run=%s&log_from=3" % run_id,
                         headers=H)
    assert status == 200 and "log" in out
