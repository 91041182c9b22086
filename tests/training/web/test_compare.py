"""The runs page (filter, sort, pick) and the compare page (issue 24, item 6), over HTTP
against a real server, and the pure parts."""

import re
import time

import pytest

from potato.training.web import compare, history
from potato.training.core.runs import RequestError
from potato.training.core.view import RunView
from tests.helpers import KEY, Client, injected, make_project, start_run, wait_run

H = {"X-API-Key": KEY}

pytestmark = pytest.mark.usefixtures("env")  # the test trainers, for server and workers


def _listed(page):
    body = page.split('id="runs-list">', 1)[1].split("</tbody>", 1)[0]
    return re.findall(r'<tr data-run="([^"]+)">', body)


@pytest.fixture
def three_runs(tmp_path, serve):
    service, url = serve(make_project(tmp_path))
    c = Client(url)
    ids = []
    for params in ({"ngrams": 1}, {"ngrams": 2, "alpha": 0.3}, {"ngrams": 1}):
        ids.append(start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                             params=params))
        wait_run(c, ids[-1])
    cancelled = start_run(c, trainer="test-silent", schemas=["sentiment"],
                          params={"seconds": 60})
    c.post("/admin/training/api/runs/%s/cancel" % cancelled, headers=H)
    assert wait_run(c, cancelled)["status"] == "cancelled"
    return service, c, ids, cancelled


def test_the_runs_page_filters_and_sorts_without_javascript(three_runs):
    service, c, ids, cancelled = three_runs
    page = c.get("/admin/training/runs", headers=H).text
    assert _listed(page) == [cancelled] + ids[::-1]  # newest first
    assert '<input type="checkbox" name="runs" value="%s" form="compare-form"' % ids[0] in page
    page = c.get("/admin/training/runs?status=cancelled", headers=H).text
    assert _listed(page) == [cancelled] and "1 run<" in page
    page = c.get("/admin/training/runs?trainer=text-naive-bayes&sort=created&order=asc",
                 headers=H).text
    assert _listed(page) == ids
    assert '<option value="text-naive-bayes" selected>' in page
    scores = {r: service.manager.runs.get(r).holdout["macro_f1"] for r in ids}
    page = c.get("/admin/training/runs?sort=score", headers=H).text
    listed = _listed(page)
    assert listed[-1] == cancelled  # no score: last
    assert [scores[r] for r in listed[:3]] == sorted(scores.values(), reverse=True)
    best = max(scores.values())
    page = c.get("/admin/training/runs?min_score=%f" % (best - 1e-9), headers=H).text
    assert set(_listed(page)) == {r for r in ids if scores[r] >= best - 1e-9}
    today = time.strftime("%Y-%m-%d")
    assert len(_listed(c.get("/admin/training/runs?since=%s&until=%s" % (today, today),
                             headers=H).text)) == 4
    page = c.get("/admin/training/runs?until=2001-01-01", headers=H).text
    assert _listed(page) == [] and "No run matches these filters." in page
    page = c.get("/admin/training/runs?backend=gpu-box", headers=H).text
    assert _listed(page) == []


@pytest.mark.parametrize("query, says", [
    ("status=done", "status=done is not a run status; it takes queued, running, success"),
    ("sort=colour", "sort=colour is not something runs sort by"),
    ("order=up", "order=up: it takes asc or desc."),
    ("since=yesterday", "since=yesterday is not a date; give it as YYYY-MM-DD"),
    ("min_score=2", "min_score=2: it takes a number from 0 to 1"),
    ("min_score=nan", "min_score=nan: it takes a number from 0 to 1"),
    ("trainer=" + "x" * 101, "trainer is 101 characters long; at most 100 fit."),
    ("status=queued%00", "status holds a control or format character (U+0000); remove it"),
    ("since=%E2%80%AE10-30-2026", "since holds a control or format character (U+202E)"),
])
def test_a_bad_filter_says_which_and_what_it_takes(tmp_path, serve, query, says):
    _, url = serve(make_project(tmp_path), training=False)
    r = Client(url).get("/admin/training/runs?" + query, headers=H)
    assert r.status == 400 and says in r.text and "Runs</h1>" in r.text
    assert not any(ord(ch) < 32 and ch not in "\n\t" or ch == "\u202e" for ch in r.text)


def test_hostile_filter_values_are_escaped(tmp_path, serve):
    _, url = serve(make_project(tmp_path), training=False)
    r = Client(url).get("/admin/training/runs?status=%3Cscript%3Ealert(1)%3C/script%3E",
                        headers=H)
    assert r.status == 400 and injected(r.text) == [] and "&lt;script&gt;" in r.text


def test_the_compare_page_shows_differing_params_and_scores(three_runs):
    service, c, ids, cancelled = three_runs
    service.manager.runs.set_label(ids[1], "<b>alpha low</b>", "tried alpha")
    r = c.get("/admin/training/compare?runs=%s&runs=%s&runs=%s" % (ids[0], ids[1], cancelled),
              headers=H)
    assert r.status == 200, r.text
    page = r.text
    assert injected(page) == [] and "&lt;b&gt;alpha low&lt;/b&gt;" in page
    rows = {name: bool(cls) for cls, name in re.findall(
        r'<tr( class="differs")?><th scope="row">(?:<span[^>]*>≠ </span>)?([^<]+)</th>', page)}
    assert rows["alpha"] and rows["ngrams"] and rows["Trainer"]  # all three differ
    assert rows["held-out macro-F1"]
    assert not rows["Schemes"]
    assert re.search(r"\d+ params differ: [^.]*alpha[^.]*ngrams", page)
    assert page.count('<b class="best">') >= 1
    # two runs with the same params: nothing highlighted among the params
    same = c.get("/admin/training/compare?runs=%s,%s" % (ids[0], ids[2]), headers=H).text
    assert "Every param is the same in these runs." in same


@pytest.mark.parametrize("query, status, says", [
    ("", 400, "Pick at least two runs to compare"),
    ("runs=r1", 400, "Pick at least two runs to compare"),
    ("runs=r1,r1", 400, "Pick at least two runs to compare"),
    ("runs=r1&runs=r99", 404, "No run r99; pick runs from the runs table."),
    ("runs=r1&runs=%3Cx%3E", 400, "is not a run id"),
    ("runs=" + ",".join("r%d" % i for i in range(1, 14)), 400, "13 runs picked; at most 12"),
])
def test_compare_refuses_with_a_way_back(tmp_path, serve, query, status, says):
    service, url = serve(make_project(tmp_path), training=False)
    for _ in range(2):
        service.manager.runs.create("text-naive-bayes", ["sentiment"], "local", {})
    c = Client(url)
    r = c.get("/admin/training/compare?" + query, headers=H)
    assert r.status == status and says in r.text and "Back to Training" in r.text
    assert injected(r.text) == []


def test_differing_counts_a_missing_param():
    views = [RunView(params={"a": 1, "b": "x"}), RunView(params={"a": 1}),
             RunView(params={"a": 1.0, "b": "x"})]
    assert compare.differing(views) == ["b"]


def test_query_parsing_is_the_boundary():
    q = history.parse_query({"status": ["success"], "sort": ["score"], "order": ["asc"],
                             "min_score": ["0.5"], "unknown": ["kept quiet"]})
    assert (q.status, q.sort, q.order, q.min_score) == ("success", "score", "asc", 0.5)
    with pytest.raises(RequestError):
        history.parse_query({"min_score": ["inf"]})
    assert compare.parse_ids({"runs": ["r1, r2", "r1"]}) == ["r1", "r2"]


@pytest.mark.parametrize("name", ["status", "sort", "order", "since", "min_score", "trainer"])
@pytest.mark.parametrize("char", ["\x00", "\x1b", "\x7f", "\u202e", "\u200b"])
def test_a_filter_value_with_a_control_character_is_refused_by_code_point(name, char):
    with pytest.raises(RequestError) as e:
        history.parse_query({name: ["queued" + char]})
    assert e.value.status == 400 and char not in e.value.message
    assert "U+%04X" % ord(char) in e.value.message


def _loss(scale, n=6, name="loss"):
    return [{"name": name, "split": "train", "value": scale / (i + 1), "step": i + 1}
            for i in range(n)]


def _lines(svg):
    return re.findall(r'<polyline class="series" data-series="([^"]*)" fill="none" '
                      r'stroke="([^"]*)"', str(svg))


def test_compare_overlays_the_runs_curves_a_colour_per_run():
    from potato.training.web import chart

    acc = [{"name": "accuracy", "split": "val", "value": 0.5 + 0.1 * e, "step": 2 * e}
           for e in (1, 2, 3)]
    svg = str(chart.overlay_svg([("r1", _loss(1.0)), ("r2", _loss(0.5) + acc)]))
    lines = dict(_lines(svg))
    assert set(lines) == {"r1 · loss (train)", "r2 · loss (train)", "r2 · accuracy (val)"}
    assert lines["r1 · loss (train)"] == chart.run_colour(0)
    assert lines["r2 · loss (train)"] == lines["r2 · accuracy (val)"] == chart.run_colour(1)
    assert chart.run_colour(0) != chart.run_colour(1)
    assert svg.count("<svg") == 1  # one chart
    assert 'aria-label="Loss and metrics of runs r1, r2 by step"' in svg
    assert "r2 · accuracy (val) (right axis)" in svg and "r1 · loss (train) (left axis)" in svg
    # a run's colour follows its place in the comparison, not its series' names
    swapped = dict(_lines(chart.overlay_svg([("r2", _loss(0.5)), ("r1", _loss(1.0))])))
    assert swapped["r2 · loss (train)"] == chart.run_colour(0)


def test_compare_chart_numbers_other_axes_and_hostile_names():
    from potato.training.web import chart

    nb = [{"name": "val_accuracy", "value": 0.81, "scheme": "sentiment", "epoch": 1}]
    out = str(chart.overlay_svg([("r1", nb), ("r2", [dict(e, value=0.7) for e in nb])]))
    assert "<svg class=\"chart\"" not in out  # one point each: numbers, in the runs' colours
    assert re.search(r'fill="%s"/></svg> r1 · val_accuracy \(sentiment\): <b>0.81</b>'
                     % chart.run_colour(0), out)
    assert re.search(r'fill="%s"/></svg> r2 · val_accuracy \(sentiment\): <b>0.7</b>'
                     % chart.run_colour(1), out)
    by_epoch = [{"name": "loss", "value": v, "epoch": e} for e, v in ((1, 0.9), (2, 0.5))]
    out = str(chart.overlay_svg([("r1", _loss(1.0)), ("r2", []), ("r3", by_epoch)]))
    assert dict(_lines(out)).keys() == {"r1 · loss (train)"}
    assert "Not drawn: r3 report by epoch, the others by step." in out
    assert "No chart: none of these runs reported a loss or accuracy." in str(
        chart.overlay_svg([("r1", []), ("r2", None)]))
    hostile = str(chart.overlay_svg([("r1", _loss(1.0, name="<script>x</script>")),
                                     ("r2", _loss(0.5))]))
    assert "<script>" not in hostile and "&lt;script&gt;x&lt;/script&gt;" in hostile


def test_the_compare_page_draws_the_overlay(three_runs):
    service, c, ids, cancelled = three_runs
    page = c.get("/admin/training/compare?runs=%s&runs=%s" % (ids[0], ids[1]), headers=H).text
    chart_part = page.split('id="compare-chart"', 1)[1]
    # naive Bayes reports one val accuracy per scheme: each run's number, in its colour
    assert "%s · val_accuracy (sentiment)" % ids[0] in chart_part
    assert "%s · val_accuracy (sentiment)" % ids[1] in chart_part
    assert not injected(page)
