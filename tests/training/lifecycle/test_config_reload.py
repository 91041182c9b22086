"""A config change on disk (issue 24, item 11): the Training page says the file differs from
the config the server runs with; Reload config applies what it can live (model_training keys:
a new backend takes runs at once, a running run goes on), and refuses, in one sentence, a
change only a restart applies or an invalid file, keeping the old config."""

import json
import os
import threading
import time

import pytest

from potato.config import diff as config_diff
from potato.config.settings import load
from tests.helpers import KEY, PLUGINS, ROOT, Client, make_project, start_run, wait_run

pytestmark = pytest.mark.integration

H = {"X-API-Key": KEY}
ANCHOR = "model_training:\n  grace_seconds: 2\n"


def _edit(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))


def _backends(c):
    return [b["name"] for b in c.json("GET", "/admin/training/api/backends", headers=H)[1][
        "backends"]]


def _reload(c):
    return c.json("POST", "/admin/training/api/config/reload", headers=H)


@pytest.fixture
def project(tmp_path, serve, monkeypatch):
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    path = make_project(tmp_path)
    _, url = serve(path)
    return path, Client(url)


def test_a_new_backend_is_announced_then_reloaded_and_takes_runs(project):
    path, c = project
    assert c.json("GET", "/admin/training/api/config", headers=H)[1]["differs"] is False
    assert 'id="config-differs"' not in c.get("/admin/training", headers=H).text
    _edit(path, ANCHOR, ANCHOR + "  retain_runs: 7\n  backends:\n    second: {type: local, "
                        "description: the new one}\n")
    state = c.json("GET", "/admin/training/api/config", headers=H)[1]
    assert state["differs"] and state["changes"] == ["model_training.backends.second",
                                                     "model_training.retain_runs"]
    assert state["restart"] == [] and state["error"] is None
    # No silent mismatch: the page says the file differs, and offers only what runs.
    page = c.get("/admin/training", headers=H).text
    assert "differs from the one this server runs with: changed: " \
           "model_training.backends.second, model_training.retain_runs." in page
    assert 'id="reload-config"' in page and 'value="second"' not in page
    assert _backends(c) == ["local"]
    assert c.json("GET", "/admin/training/api/fragments", headers=H)[1]["config"].startswith(
        '<div class="notice" id="config-differs">')
    status, out = _reload(c)
    assert status == 200, out
    assert out["message"] == ("Reloaded %s: backend second added, model_training.retain_runs "
                              "changed." % path)
    assert _backends(c) == ["local", "second"]
    page = c.get("/admin/training", headers=H).text
    assert 'id="config-differs"' not in page and 'value="second"' in page
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="second")
    run = wait_run(c, run_id)
    assert run["status"] == "success" and run["backend"] == "second", run
    # nothing left to reload
    assert _reload(c) == (200, {"applied": True, "message": "The config on disk is the one the "
                                                            "server runs with: nothing to "
                                                            "reload."})


def test_an_invalid_file_is_refused_with_its_error(project):
    path, c = project
    _edit(path, ANCHOR, ANCHOR + "  retain_runs: -1\n  backends:\n    second: {type: local}\n")
    status, out = _reload(c)
    assert status == 409 and out["error"].startswith("Not reloaded: ")
    assert "retain_runs" in out["error"] and str(load(path)[1][0].line) in out["error"]
    assert _backends(c) == ["local"]
    state = c.json("GET", "/admin/training/api/config", headers=H)[1]
    assert state["differs"] and "retain_runs" in state["error"]
    page = c.get("/admin/training", headers=H).text
    assert "it cannot be used, so the server keeps the config it loaded: " in page


def test_a_yaml_error_names_the_file_once(project):
    path, c = project
    _edit(path, ANCHOR, ANCHOR + "  backends: [\n")
    status, out = _reload(c)
    assert status == 409 and out["error"].startswith("Not reloaded: %s:" % path), out
    assert out["error"].count(path) == 1 and "YAML syntax error" in out["error"]
    state = c.json("GET", "/admin/training/api/config", headers=H)[1]
    assert state["error"].startswith("%s:" % path) and state["error"].count(path) == 1


def test_an_alias_bomb_appended_to_the_config_is_refused_and_the_server_keeps_its_own(project):
    # issue 34: a 7-level bomb cost one request 39 s and took the server to 1.7 GB
    path, c = project
    bomb = 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + "".join(
        "l%d: &l%d [%s]\n" % (n, n, ", ".join(["*l%d" % (n - 1)] * 9)) for n in range(1, 8))
    with open(path, "a") as f:
        f.write(bomb)
    state = c.json("GET", "/admin/training/api/config", headers=H)[1]
    assert state["differs"] and state["error"].startswith(path + ":"), state
    assert "the YAML holds more than 100,000 values once the alias" in state["error"]
    status, out = _reload(c)
    assert status == 409 and out["error"].startswith("Not reloaded: %s:" % path), out
    page = c.get("/admin/training", headers=H).text
    assert "it cannot be used, so the server keeps the config it loaded: " in page
    assert _backends(c) == ["local"]


def test_a_fifo_at_the_config_path_is_said_never_opened_to_wait(project):
    # the page's look at the file opened it: a FIFO hung the Training page (and its lock)
    path, c = project
    os.remove(path)
    os.mkfifo(path)
    out = []
    t = threading.Thread(target=lambda: out.append(
        c.json("GET", "/admin/training/api/config", headers=H)))
    t.start()
    t.join(timeout=30)
    if t.is_alive():  # free the hung reader for the teardown, then fail
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        t.join(timeout=30)
        pytest.fail("GET /admin/training/api/config hung on a FIFO at the config path")
    status, state = out[0]
    said = "%s: cannot be read (it is a named pipe, not a regular file)." % path
    assert status == 200 and state["differs"] and state["error"] == said, state
    assert _reload(c) == (409, {"error": "Not reloaded: " + said})
    assert "it cannot be used, so the server keeps the config it loaded: " in c.get(
        "/admin/training", headers=H).text


def test_a_config_file_over_a_megabyte_is_not_read(project):
    path, c = project
    with open(path, "a") as f:
        f.write("#" * (1 << 20))
    status, out = _reload(c)
    assert (status, out) == (409, {"error": "Not reloaded: %s: cannot be read (it is over 1 MB, "
                                            "too big for a config file)." % path})


def test_a_restart_only_change_is_reported_in_one_sentence(project):
    path, c = project
    _edit(path, ANCHOR, "server:\n  port: 8123\n" + ANCHOR + "  backends:\n    second: "
                        "{type: local}\n")
    status, out = _reload(c)
    assert (status, out) == (409, {"error": "Not reloaded: server.port changed: restart the "
                                            "server to apply it."})
    assert _backends(c) == ["local"]  # all or nothing: the new backend waits too
    page = c.get("/admin/training", headers=H).text
    assert "runs with: server.port changed: restart the server to apply it.</p>" in page


def test_a_running_run_is_unaffected(project):
    path, c = project
    run_id = start_run(c, trainer="test-steps", schemas=["sentiment"], params={"seconds": 4})
    deadline = time.time() + 30
    while c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)[1]["status"] != \
            "running":
        assert time.time() < deadline
        time.sleep(0.1)
    # its own backend cannot change under it ...
    _edit(path, ANCHOR, ANCHOR + "  backends:\n    local: {type: local, description: edited}\n")
    status, out = _reload(c)
    assert (status, out) == (409, {"error": f"Not reloaded: model_training.backends.local "
                                            f"changed while run {run_id} runs on it: reload "
                                            f"again when it has ended."})
    # ... other keys and backends can
    _edit(path, "description: edited}\n", "}\n    second: {type: local}\n  retain_runs: 9\n")
    status, out = _reload(c)
    assert status == 200 and "backend second added" in out["message"], out
    run = wait_run(c, run_id)
    assert run["status"] == "success", run
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert "error" not in log.lower().replace("stderr", "")


def test_the_reload_form_is_admin_only_and_same_origin(project):
    path, c = project
    _edit(path, ANCHOR, ANCHOR + "  backends:\n    second: {type: local}\n")
    r = c.post("/admin/training/reload", headers=dict(H, Origin="http://evil.example"))
    assert r.status == 403 and "Cross-origin request" in r.text
    stranger = Client(f"http://{c.host}:{c.port}/")
    for where in ("/admin/training/reload", "/admin/training/api/config/reload"):
        r = stranger.post(where)  # not admin
        assert r.status == 401 and "Admin access needed" in r.text
    assert _backends(c) == ["local"]
    r = c.post("/admin/training/reload", headers=dict(H, Origin=f"http://{c.host}:{c.port}"))
    assert r.status == 303 and r.getheader("Location").endswith("/admin/training?reload=done")
    page = c.get("/admin/training?reload=done", headers=H).text
    assert f'id="reload-result" role="status">Reloaded {path}: backend second added.</p>' in page
    assert _backends(c) == ["local", "second"]


def test_which_keys_apply_live():
    assert config_diff.live("model_training.backends.gpu")
    assert config_diff.live("model_training.writeback.min_confidence")
    assert config_diff.live("validation.acknowledge")
    for key in ("model_training.enabled", "model_training.publish.token_env", "server.port",
                "annotation_schemes", "data_files", "output_annotation_dir", "admin_api_key"):
        assert not config_diff.live(key), key
    assert config_diff.restart_sentence(["a", "b"]) == \
        "a and b changed: restart the server to apply them"


def test_changes_compare_the_typed_configs(tmp_path):
    path = make_project(tmp_path, labels=False)
    before = load(path)[0]
    assert config_diff.changes(before, load(path)[0]) == []
    _edit(path, ANCHOR, "# a comment\n" + ANCHOR + "  retain_runs: 5\n")  # 5 is the default
    assert config_diff.changes(before, load(path)[0]) == []
    _edit(path, "labels: [positive, negative]", "labels: [positive, negative, mixed]")
    _edit(path, ANCHOR, ANCHOR + "  backends:\n    local: {type: local, description: here}\n")
    after = load(path)[0]
    assert config_diff.changes(before, after) == ["annotation_schemes",
                                                  "model_training.backends.local"]
    assert config_diff.backend_change(before, after, "local") == "changed"


LAB = "  backends:\n    lab: {type: local, description: the lab box}\n"


def test_a_request_whose_backend_a_reload_removes_meanwhile_is_refused(tmp_path, serve):
    # the reload lands after the request was checked and before it is recorded: a 409 with
    # the sentence an unknown backend gets, never a 500 with a KeyError
    path = make_project(tmp_path, model_training=LAB)
    service, url = serve(path, training=False)
    manager, c = service.manager, Client(url)
    checked = manager.resolve_request

    def resolve_then_reload(*args):
        req = checked(*args)
        _edit(path, LAB, "")
        assert service.on_disk.reload()[0]
        return req

    manager.resolve_request = resolve_then_reload
    status, out = c.json("POST", "/admin/training/api/runs", headers=H, json_body={
        "trainer": "text-naive-bayes", "schemas": ["sentiment"], "backend": "lab"})
    assert (status, out) == (409, {"error": "Unknown backend 'lab'. Configured backends: "
                                            "local."})
    assert manager.runs.list() == []


def test_a_reload_cannot_slip_between_the_check_and_the_queued_run(tmp_path, serve):
    # a reload that removes the backend while the request is being recorded waits for it, and
    # then sees the queued run: no run stays queued on a backend that is gone
    path = make_project(tmp_path, model_training=LAB)
    service, url = serve(path, training=False)
    manager, c = service.manager, Client(url)
    lab = manager.backends["lab"]
    results = []

    def step_while_reloading(busy):
        _edit(path, LAB, "")
        t = threading.Thread(target=lambda: results.append(service.on_disk.reload()))
        t.start()
        t.join(timeout=1)  # without the lock the reload is done by now
        threads.append(t)
        return None

    threads = []
    lab.queued_step = step_while_reloading
    status, out = c.json("POST", "/admin/training/api/runs", headers=H, json_body={
        "trainer": "text-naive-bayes", "schemas": ["sentiment"], "backend": "lab"})
    assert status == 202, out
    threads[0].join(timeout=30)
    run = manager.runs.get(out["run_id"])
    assert results == [(False, "Not reloaded: model_training.backends.lab removed while run "
                               "%s waits for it: cancel the run, or reload again when it has "
                               "ended." % run.run_id)]
    assert run.status == "queued" and "lab" in manager.backends


def test_a_check_that_raises_is_a_sentence_not_a_500(tmp_path, monkeypatch):
    """Review 26: a value a check had not foreseen raised out of validation.check, and the
    Training page and config API answered 500; now any such failure is the reason the file
    cannot be used."""
    from types import SimpleNamespace

    from potato.project import validation
    from potato.training.lifecycle import reload

    path = str(tmp_path / "config.yaml")
    on_disk = reload.ConfigOnDisk(SimpleNamespace(cfg=SimpleNamespace(path=path)), None)

    def boom(_path, **_kw):
        raise OverflowError("cannot convert float infinity to integer")

    monkeypatch.setattr(validation, "check", boom)
    why = ("%s cannot be used: checking it failed (OverflowError: cannot convert float infinity "
           "to integer); run potato validate %s to see where." % (path, path))
    assert on_disk.state() == {"differs": True, "changes": [], "restart": [], "error": why,
                               "prunes": []}
    applied, sentence = on_disk.reload()
    assert not applied and sentence == "Not reloaded: " + why


def test_a_reload_reaches_the_agent_routes_and_the_publisher(tmp_path, serve):
    # issue 38, item 9: both kept the config the server started with
    from tests.helpers import TOKEN, active_run

    path = make_project(tmp_path)
    server, url = serve(path, training=False)
    c = Client(url)
    _edit(path, ANCHOR, ANCHOR + "  max_predictions_mb: 3\n  backends:\n    gpu: {type: ssh, "
                        "host: gpu.example.org, max_artifact_mb: 7.5}\n")
    status, out = _reload(c)
    assert status == 200, out
    runs = server.manager.runs
    run_id = runs.create("text-naive-bayes", ["sentiment"], "gpu", {}).run_id
    assert runs.transition(run_id, "queued", "running")
    runs.finish(run_id, "success", artifact_uri="ssh://gpu.example.org/jobs/x/artifacts")
    status, state = c.json("GET", f"/admin/training/api/runs/{run_id}/publish", headers=H)
    assert status == 200
    assert "larger than max_artifact_mb (7.5 MB)" in json.dumps(state), state
    # the agent routes: what a run's agent is told, and the predictions cap it meets
    active, _ = active_run(server)
    auth = {"Authorization": "Bearer " + TOKEN}
    r = c.request("GET", f"/agent/v1/runs/{active}", headers=auth)
    assert r.status == 200 and json.loads(r.body)["max_predictions_mb"] == 3
    r = c.request("PUT", f"/agent/v1/runs/{active}/predictions", body=b"x" * (4 << 20),
                  headers=dict(auth, **{"Content-Type": "application/octet-stream"}))
    assert r.status == 413 and "max_predictions_mb (3 MB)" in r.text, r.text
    server.manager._active.clear()
