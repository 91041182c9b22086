"""Run again, the Training form's memory of each trainer's params, and a run's name and note
(issue 24, items 5 and 6): over HTTP against a real server, and the pure parts."""

import re

import pytest

from potato.project.store import Store
from potato.training.web import run_actions
from potato.training.core.runs import RequestError, RunStore
from potato.commands.summary import summary_lines
from potato.training.core.view import RunView
from tests.helpers import KEY, Client, injected, make_project, old_runs_table, start_run, wait_run

H = {"X-API-Key": KEY}

pytestmark = pytest.mark.usefixtures("env")  # the test trainers, for server and workers


def _value(page, input_id):
    m = re.search(r'<input id="%s" [^>]*value="([^"]*)"' % re.escape(input_id), page)
    assert m, input_id
    return m.group(1)


def test_run_again_from_the_run_page_starts_the_same_request(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    first = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                      params={"ngrams": 1, "alpha": 0.5})
    assert wait_run(c, first)["status"] == "success"
    page = c.get("/admin/training/runs/%s" % first, headers=H).text
    assert 'action="/admin/training/runs/%s/again"' % first in page
    assert 'href="/admin/training?again=%s"' % first in page
    # the equivalent command line, shell-quoted, with the params that are not defaults
    assert ("potato training run %s --trainer text-naive-bayes --schemas sentiment --backend "
            "local --param alpha=0.5 --param ngrams=1" % c_path(tmp_path)) in page
    for action in ("again", "label"):  # another site's page cannot make the browser post them
        r = c.post("/admin/training/runs/%s/%s" % (first, action), form={"name": "x"},
                   headers=dict(H, Origin="http://evil.example"))
        assert r.status == 403 and "Cross-origin request" in r.text
    r = c.post("/admin/training/runs/%s/again" % first, headers=H, form={})
    assert r.status == 303, r.text
    again = r.getheader("Location").rsplit("/", 1)[1]
    assert again != first
    run = wait_run(c, again)
    old = wait_run(c, first)
    assert (run["trainer"], run["schemas"], run["backend"], run["params"]) == (
        old["trainer"], old["schemas"], old["backend"], old["params"])


def c_path(tmp_path):
    return str(tmp_path / "config.yaml")


def test_run_again_that_cannot_start_says_why_on_the_run_page(tmp_path, serve):
    service, url = serve(make_project(tmp_path), training=False)
    runs = service.manager.runs  # a run on a backend the config no longer has
    old = runs.create("text-naive-bayes", ["sentiment"], "gone-box", {"ngrams": 1})
    runs.finish(old.run_id, "error", "it failed")
    c = Client(url)
    r = c.post("/admin/training/runs/%s/again" % old.run_id, headers=H, form={})
    assert r.status == 409, r.text
    assert "Cannot run it again: " in r.text and "gone-box" in r.text
    assert "Run %s" % old.run_id in r.text  # still the run's page, inside the admin layout
    assert len(runs.list()) == 1


def test_run_again_of_a_run_that_kept_a_none_default_starts(tmp_path, serve):
    # the hf trainers store learning_rate: None when the run kept its default; a request
    # cannot ask for None, so running it again leaves the param out (the default again)
    service, url = serve(make_project(tmp_path), training=False)
    runs = service.manager.runs
    old = runs.create("hf-text-classification", ["sentiment"], "local",
                      {"learning_rate": None, "epochs": 1})
    runs.finish(old.run_id, "success", "")
    c = Client(url)
    r = c.post("/admin/training/runs/%s/again" % old.run_id, headers=H, form={})
    assert r.status == 303, r.text
    new = runs.get(r.getheader("Location").rsplit("/", 1)[1])
    assert new.trainer == "hf-text-classification" and new.params.get("epochs") == 1
    assert new.params.get("learning_rate") is None  # the default, as before
    page = c.get("/admin/training?again=%s" % old.run_id, headers=H).text
    assert _value(page, "param-hf-text-classification-learning_rate") == ""
    assert run_actions.again_request(old)[3] == {"epochs": 1}


def test_the_form_remembers_each_trainers_last_params(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    page = c.get("/admin/training", headers=H).text
    assert _value(page, "param-text-naive-bayes-ngrams") == "2"  # the default before any run
    assert "Filled in with the params of run" not in page
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                       params={"ngrams": 1})
    wait_run(c, run_id)
    page = c.get("/admin/training", headers=H).text
    assert _value(page, "param-text-naive-bayes-ngrams") == "1"
    assert 'Filled in with the params of run <a href="/admin/training/runs/%s">' % run_id in page
    page = c.get("/admin/training?again=%s" % run_id, headers=H).text
    assert "Filled in from run %s: press Start run" % run_id in page
    assert re.search(r'<option value="text-naive-bayes" selected>', page)
    assert 'value="sentiment" checked' in page


def test_again_for_an_unknown_run_is_a_404_inside_the_admin_pages(tmp_path, serve):
    _, url = serve(make_project(tmp_path), training=False)
    r = Client(url).get("/admin/training?again=r99", headers=H)
    assert r.status == 404 and "No run r99." in r.text and "Back to Training" in r.text


def test_a_run_has_a_name_and_a_note_escaped_and_capped(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    hostile = '<img src=x onerror=alert(1)>"baseline"'
    r = c.post("/admin/training/runs/%s/label" % run_id, headers=H,
               form={"name": hostile, "note": "line one\nline <b>two</b>"})
    assert r.status == 303 and r.getheader("Location").endswith("?done=label")
    page = c.get(r.getheader("Location"), headers=H).text
    assert "Saved the run&#x27;s name and note." in page
    assert injected(page) == [] and "&lt;img src=x" in page
    assert "line &lt;b&gt;two&lt;/b&gt;" in page
    listing = c.get("/admin/training", headers=H).text
    assert '<span class="run-name">&lt;img src=x' in listing and injected(listing) == []
    _, run = c.json("GET", "/admin/training/api/runs/%s" % run_id, headers=H)
    assert run["name"] == hostile and run["note"] == "line one\nline <b>two</b>"
    # too long: a clear error on the run page (admin layout), nothing saved
    r = c.post("/admin/training/runs/%s/label" % run_id, headers=H,
               form={"name": "n" * 81, "note": ""})
    assert r.status == 400
    assert "The name is 81 characters long; at most 80 fit. Shorten it and save again." in r.text
    assert "Run %s" % run_id in r.text
    _, run = c.json("GET", "/admin/training/api/runs/%s" % run_id, headers=H)
    assert run["name"] == hostile
    # the API takes the same checked values
    status, out = c.json("POST", "/admin/training/api/runs/%s/label" % run_id, headers=H,
                         json_body={"name": "", "note": "x" * 2001})
    assert status == 400 and "at most 2000" in out["error"]
    status, out = c.json("POST", "/admin/training/api/runs/%s/label" % run_id, headers=H,
                         json_body={"name": "", "note": ""})
    assert status == 200 and out["name"] is None and out["note"] is None
    status, out = c.json("POST", "/admin/training/api/runs/%s/label" % run_id, headers=H,
                         json_body={"title": "x"})
    assert status == 400 and "Unknown field(s) title" in out["error"]


@pytest.mark.parametrize("name, note, says", [
    ("a\x00b", "", "control characters"),
    ("two\nlines", "", "line breaks"),
    ("evil\u202etxt.exe", "", "reverse the text around them"),
    ("", "note \u202eesrever", "reverse the text around them"),
    ("zero\u200bwidth", "", "print nothing"),
    ("", "a\u2028b", "print nothing"),
    (5, "", "must be text"),
    ("", ["a"], "must be text"),
    ("", "bell\x07", "control characters"),
    ("x" * 81, "", "81 characters long"),
])
def test_label_boundary_refuses_with_a_reason(name, note, says):
    with pytest.raises(RequestError) as e:
        run_actions.parse_label(name, note)
    assert e.value.status == 400 and says in e.value.message


def test_label_boundary_keeps_a_notes_lines_and_trims():
    assert run_actions.parse_label("  best so far ", "a\r\n\tb\n") == ("best so far", "a\n\tb")
    assert run_actions.parse_label(None, None) == ("", "")


def test_the_again_command_quotes_every_value():
    view = RunView(trainer="hf-text-classification", schemas=["my scheme"], backend="gpu; rm",
                   params_changed={"prompt": "it's $(x)", "lora": True, "lr": 2e-05})
    cmd = run_actions.again_command("/p/my config.yaml", view)
    assert cmd == ("potato training run '/p/my config.yaml' --trainer hf-text-classification "
                   "--schemas 'my scheme' --backend 'gpu; rm' --param lora=true --param "
                   "lr=2e-05 --param 'prompt=it'\"'\"'s $(x)'")


def test_the_cli_summary_prints_the_command_that_runs_it_again():
    run = RunView(run_id="r3", status="success", backend="local", trainer="t", schemas=["s"],
                  params_changed={"ngrams": 1}, duration_s=1.0)
    lines = summary_lines(run, "cfg.yaml")
    assert lines[-1] == ("Run it again: potato training run cfg.yaml --trainer t --schemas s "
                         "--backend local --param ngrams=1")
    assert not any(line.startswith("Run it again") for line in summary_lines(run))


def test_an_old_store_gains_names_and_notes(tmp_path):
    path = str(tmp_path / "old.sqlite")
    db = old_runs_table(path)
    db.execute("INSERT INTO runs(run_id, trainer, schemas, backend, params, status, created_at) "
               "VALUES ('r1', 'text-naive-bayes', '[\"s\"]', 'local', '{}', 'success', 1)")
    db.commit()
    db.close()
    store = Store(path)
    try:
        runs = RunStore(store)
        assert runs.get("r1").name is None and runs.get("r1").note is None
        runs.set_label("r1", "first", "a note")
        assert (runs.get("r1").name, runs.get("r1").note) == ("first", "a note")
        assert runs.last_by_trainer("text-naive-bayes").run_id == "r1"
        assert runs.last_by_trainer("nope") is None
    finally:
        store.close()
