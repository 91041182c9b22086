"""A run's page and the runs list follow the runs (issue 35, item 5), and the Training form
remembers the backend and trainer last used (item 8), over HTTP against a real server: what
the pages carry for their script, and the fragments the script asks for."""

import re

import pytest

from tests.helpers import KEY, Client, make_project, start_run, wait_progress, wait_run

H = {"X-API-Key": KEY}
SECOND = "  backends:\n    second: {type: local}\n"

pytestmark = pytest.mark.usefixtures("env")  # the test trainers, for server and workers


def _page(c, path):
    r = c.get(path, headers=H)
    assert r.status == 200, r.text
    return r.text


def test_a_running_runs_page_follows_it_and_a_finished_one_does_not(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-chatty", schemas=["sentiment"], params={"seconds": 30})
    wait_progress(c, run_id)
    page = _page(c, "/admin/training/runs/%s" % run_id)
    assert 'data-follow-run="%s"' % run_id in page
    for part in ("status", "step", "bar", "started", "ran_on", "chart", "cancel"):
        assert 'data-part="%s"' % part in page
    shown_end = int(re.search(r'id="run-log" data-log-end="(\d+)"', page).group(1))
    assert shown_end > 0 and "chatty line 1 of 300\n" in page

    # The update: the parts as the page draws them, and what the log gained after the offset.
    status, f = c.json("GET", "/admin/training/api/fragments/runs/%s?log_from=%d" % (
        run_id, shown_end), headers=H)
    assert status == 200 and f["run_id"] == run_id and f["status"] == "running"
    assert f["terminal"] is False
    assert set(f["parts"]) == {"status", "step", "bar", "started", "ran_on", "chart", "cancel"}
    assert 'status-running' in f["parts"]["status"] and "<progress" in f["parts"]["bar"]
    assert 'data-cancel="%s"' % run_id in f["parts"]["cancel"]
    full = c.get("/admin/training/api/runs/%s/log" % run_id, headers=H).body
    assert f["log"]["end"] >= shown_end and full.startswith(full[:shown_end])
    assert full[shown_end:f["log"]["end"]].decode() == f["log"]["text"]
    # without an offset: the parts only
    assert "log" not in c.json("GET", "/admin/training/api/fragments/runs/%s" % run_id,
                               headers=H)[1]

    c.post("/admin/training/api/runs/%s/cancel" % run_id, headers=H)
    wait_run(c, run_id)
    f = c.json("GET", "/admin/training/api/fragments/runs/%s" % run_id, headers=H)[1]
    assert f["terminal"] is True and f["status"] == "cancelled" and f["parts"]["cancel"] == ""
    page = _page(c, "/admin/training/runs/%s" % run_id)
    assert "data-follow-run" not in page and "data-log-end" not in page
    assert 'id="again-card"' in page


def test_a_run_fragment_for_no_run_or_a_junk_offset(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    status, body = c.json("GET", "/admin/training/api/fragments/runs/r999", headers=H)
    assert status == 404 and body["error"] == "No run r999."
    status, body = c.json("GET", "/admin/training/api/fragments/runs/%s?log_from=1e3" % run_id,
                          headers=H)
    assert status == 400 and body["error"].startswith("log_from must be a byte offset")
    assert c.get("/admin/training/api/fragments/runs/%s" % run_id).status in (401, 403)


def test_a_hostile_step_is_text_in_the_parts(tmp_path, serve):
    service, url = serve(make_project(tmp_path), training=False)  # no queue: it stays queued
    c = Client(url)
    run = service.manager.runs.create("text-naive-bayes", ["sentiment"], "local", {})
    service.manager.runs.update(run.run_id, step="<img src=x onerror=alert(1)>")
    f = c.json("GET", "/admin/training/api/fragments/runs/%s" % run.run_id, headers=H)[1]
    assert f["parts"]["step"] == "&lt;img src=x onerror=alert(1)&gt;"
    assert "<img" not in _page(c, "/admin/training/runs/%s" % run.run_id)


def test_the_runs_list_updates_with_its_own_filters(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    done = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, done)
    page = _page(c, "/admin/training/runs?status=success&sort=score&order=asc")
    query = re.search(r'<tbody data-query="([^"]*)" id="runs-list"', page).group(1)
    assert query.replace("&amp;", "&") == "status=success&sort=score&order=asc"
    assert '<script src="/static/training.js">' in page
    assert re.search(r'<tbody data-query="" id="runs-list">',
                     _page(c, "/admin/training/runs"))
    # the page's list after a new run: the fragment for the same query shows it
    other = start_run(c, trainer="test-steps", schemas=["sentiment"], params={"seconds": 30})
    f = c.json("GET", "/admin/training/api/fragments/runs?status=success", headers=H)[1]
    assert f["heading"] == "1 run" and 'data-run="%s"' % done in f["rows"]
    assert 'data-run="%s"' % other not in f["rows"]
    f = c.json("GET", "/admin/training/api/fragments/runs", headers=H)[1]
    assert f["heading"] == "2 runs" and 'data-run="%s"' % other in f["rows"]
    assert 'name="runs" value="%s"' % other in f["rows"]  # the compare checkbox
    f = c.json("GET", "/admin/training/api/fragments/runs?status=failed", headers=H)[1]
    assert f["error"].startswith("status=failed is not a run status")
    c.post("/admin/training/api/runs/%s/cancel" % other, headers=H)
    wait_run(c, other)
    f = c.json("GET", "/admin/training/api/fragments/runs?status=running", headers=H)[1]
    assert f["heading"] == "0 runs" and "No run matches these filters." in f["rows"]


def _selected(page, select_id):
    select = page.split('id="%s"' % select_id, 1)[1].split("</select>", 1)[0]
    return re.findall(r'<option value="([^"]*)"[^>]*\sselected', select)


def test_the_form_starts_with_the_backend_and_trainer_last_used(tmp_path, serve):
    _, url = serve(make_project(tmp_path, SECOND))
    c = Client(url)
    page = _page(c, "/admin/training")
    assert _selected(page, "backend") == ["local"]
    assert _selected(page, "trainer") == ["text-naive-bayes"]
    assert 'id="remembered-choice"' not in page  # nothing to remember yet

    run_id = start_run(c, trainer="test-steps", schemas=["sentiment"], backend="second",
                       params={"seconds": 0.2})
    wait_run(c, run_id)
    page = _page(c, "/admin/training")
    assert _selected(page, "backend") == ["second"]
    assert _selected(page, "trainer") == ["test-steps"]
    said = re.search(r'<p class="hint remembered" id="remembered-choice">(.*?)</p>',
                     page).group(1)
    assert re.sub("<[^>]+>", "", said) == (
        "Runs on and Trainer start as in run %s, the last run started by hand; change them for "
        "this one." % run_id)
    # Run again's form is filled from that run, not from the last one
    first = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, first)
    page = _page(c, "/admin/training?again=%s" % run_id)
    assert _selected(page, "trainer") == ["test-steps"] and 'id="remembered-choice"' not in page
    page = _page(c, "/admin/training")
    assert _selected(page, "backend") == ["local"]
    assert _selected(page, "trainer") == ["text-naive-bayes"]
    said = re.search(r'id="remembered-choice">(.*?)</p>', page).group(1)
    assert re.sub("<[^>]+>", "", said).startswith("Runs on and Trainer start as in run %s,"
                                                  % first)


def test_a_remembered_backend_that_left_the_config_is_not_claimed(tmp_path, serve):
    path = make_project(tmp_path, SECOND)
    service, url = serve(path)
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="second")
    wait_run(c, run_id)
    service.close()
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace(SECOND, ""))
    _, url = serve(path)
    page = _page(Client(url), "/admin/training")
    assert _selected(page, "backend") == ["local"]
    said = re.search(r'id="remembered-choice">(.*?)</p>', page).group(1)
    assert re.sub("<[^>]+>", "", said).startswith("Trainer starts as in run %s," % run_id)
