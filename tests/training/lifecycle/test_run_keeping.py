"""Runs a lab can keep and act on (issue 24, items 1, 2 and 4): every run's record stays,
retain_runs deletes only model files (never the run in use's or a pinned run's, counting only
successful runs) and says so; "Use this model" only where it can work; pin and unpin; the CLI
says whether a run is in use; a run that learned nothing is a warning."""

import io
import os

import pytest

from potato.project.store import Store
from potato.training.reports import report
from potato.training.lifecycle import retention
from potato.training.remote.paths import RunPaths
from potato.training.core.runs import RunStore
from potato.commands.summary import summary_lines
from potato.training.core.view import RunView
from tests.helpers import KEY, Client, make_project, old_runs_table, start_run, wait_run

H = {"X-API-Key": KEY}


pytestmark = pytest.mark.usefixtures("env")  # the test trainers, for server and workers


# -- retention ---------------------------------------------------------------------------------

def _finished_runs(tmp_path, statuses):
    store = Store(str(tmp_path / "p.db"))
    runs = RunStore(store)
    for status in statuses:
        run_id = runs.create("text-naive-bayes", ["s"], "local", {}).run_id
        assert runs.finish(run_id, status)
        paths = RunPaths(str(tmp_path / "runs" / run_id))
        os.makedirs(paths.artifacts)
        with open(os.path.join(paths.artifacts, "model.bin"), "wb") as f:
            f.write(b"weights")
        with open(paths.log, "w") as f:
            f.write("the run's log\n")
    return store, runs


def test_retention_counts_successes_only_and_spares_the_run_in_use_and_pinned_runs(tmp_path):
    store, runs = _finished_runs(tmp_path, ["success"] * 4 + ["error", "cancelled", "error",
                                                              "success"])
    try:
        with store.tx() as db:
            db.execute("INSERT INTO in_use(scheme, run_id) VALUES ('s', 'r1')")
        assert runs.set_pinned("r2", True) and not runs.set_pinned("r5", True)  # r5 failed
        logs = []

        def prune():
            return retention.prune(runs, lambda r: RunPaths(str(tmp_path / "runs" / r)), 2,
                                   lambda r, m: logs.append((r, m)))

        def has_files(run_id):
            return os.path.exists(tmp_path / "runs" / run_id / "artifacts" / "model.bin")

        # r8 and r4 are the two newest successes: the failed r5-r7 do not count.
        assert prune() == ["r3"]
        assert [r for r in ("r1", "r2", "r4", "r5", "r6", "r7", "r8") if not has_files(r)] == []
        run = runs.get("r3")
        assert run.pruned_at and run.pruned_reason == retention.reason(2, ["r8", "r4"])
        assert "retain_runs: 2 keeps the model files of the 2 newest successful runs (r8, r4)" \
            in run.pruned_reason
        assert logs == [("r3", "model files deleted: " + run.pruned_reason)]
        r9 = runs.create("text-naive-bayes", ["s"], "local", {}).run_id
        assert runs.finish(r9, "success")
        assert prune() == ["r7", "r6", "r5", "r4"]  # two newer successes each
        assert prune() == []
        assert has_files("r1") and has_files("r2") and has_files("r8")
        # every record and log stays
        assert len(runs.list()) == 9 and runs.get("r5").status == "error"
        assert all(os.path.exists(tmp_path / "runs" / r / "run.log") for r in
                   ("r1", "r3", "r4", "r5", "r6", "r7"))
    finally:
        store.close()


def test_retention_leaves_a_run_whose_files_are_being_read(tmp_path):
    """A publish or a model.tar download holds the run: its files stay until it lets go."""
    store, runs = _finished_runs(tmp_path, ["success"] * 3)
    try:
        holds = retention.Holds()

        def prune():
            return retention.prune(runs, lambda r: RunPaths(str(tmp_path / "runs" / r)), 1,
                                   lambda r, m: None, holds)

        with holds.hold("r1"):
            holds.acquire("r2")
            assert prune() == []
            assert runs.get("r1").pruned_at is None
            holds.release("r2")
            assert prune() == ["r2"]
        assert prune() == ["r1"]
    finally:
        store.close()


def test_a_download_cut_short_logs_one_line(tmp_path, caplog):
    from potato.training.hub import model_files
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "w.bin").write_bytes(b"x" * 5000)
    archive = model_files.Archive(str(tmp_path / "a"), "r1-model")
    os.remove(tmp_path / "a" / "w.bin")

    class H:
        close_connection = False
    h, out = H(), io.BytesIO()
    model_files.writer(archive, "r1", h)(out)
    assert h.close_connection and len(out.getvalue()) < archive.size
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("run r1: model.tar cut short: ")
    assert not any(r.exc_info for r in caplog.records)


def test_a_store_from_before_gains_the_pin_and_pruning_columns(tmp_path):

    path = str(tmp_path / "old.sqlite")
    db = old_runs_table(path)
    db.execute("INSERT INTO runs(run_id, trainer, schemas, backend, params, status, created_at) "
               "VALUES ('r1', 'text-naive-bayes', '[\"s\"]', 'local', '{}', 'success', 1)")
    db.commit()
    db.close()
    store = Store(path)
    try:
        runs = RunStore(store)
        run = runs.get("r1")
        assert run.pinned is False and run.pruned_at is None
        assert runs.set_pinned("r1", True) and runs.get("r1").pinned is True
        runs.mark_pruned("r1", "why")
        assert runs.get("r1").pruned_reason == "why"
    finally:
        store.close()


# -- pin, use and pruning through the server ------------------------------------------------------

def test_pin_keeps_a_run_in_use_and_its_files_while_older_files_go(tmp_path, serve):
    cfg_path = make_project(tmp_path, "  retain_runs: 1")
    _, url = serve(cfg_path)
    c = Client(url)
    runs_dir = tmp_path / "annotation_output" / "training" / "runs"
    r1 = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))["run_id"]
    worse = wait_run(c, start_run(c, trainer="test-warns", schemas=["sentiment"]))
    r2 = worse["run_id"]
    assert worse["in_use"] == [] and "stays in use" in worse["writeback"]["kept_in_use"][
        "sentiment"]
    assert any(line.startswith("In use: no") for line in summary_lines(RunView.from_dict(worse)))
    page = c.get(f"/admin/training/runs/{r2}", headers=H).text
    assert 'id="use-run"' in page and 'id="pin-run"' in page and ">Use and pin<" in page
    # Pinning the worse run puts it in use; a better run then does not take over.
    status, pinned = c.json("POST", f"/admin/training/api/runs/{r2}/pin", headers=H)
    assert status == 200 and pinned["pinned"] is True and pinned["in_use"] == ["sentiment"]
    better = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    r3 = better["run_id"]
    assert better["holdout"]["macro_f1"] > worse["holdout"]["macro_f1"]
    assert better["in_use"] == []
    why = better["writeback"]["kept_in_use"]["sentiment"]
    assert why.startswith(f"run {r2} is pinned: it stays in use for sentiment")
    text = "\n".join(summary_lines(RunView.from_dict(better)))
    assert "In use: no" in text and f"sentiment: run {r2} is pinned" in text
    # r1 is neither in use nor pinned, and two newer successes exist: only its files go.
    _, listing = c.json("GET", "/admin/training/api/runs", headers=H)
    assert [r["run_id"] for r in listing["runs"]] == [r3, r2, r1]
    assert not (runs_dir / r1 / "artifacts").exists()
    assert (runs_dir / r2 / "artifacts" / "model" / "weights.bin").exists()
    assert list((runs_dir / r3 / "artifacts").iterdir())
    gone = wait_run(c, r1)
    assert gone["status"] == "success" and gone["holdout"] and gone["pruned_at"]
    assert "retain_runs: 1 keeps the model files" in gone["pruned_reason"]
    log = c.get(f"/admin/training/api/runs/{r1}/log", headers=H).text
    assert "model files deleted: model_training.retain_runs: 1" in log
    page = c.get(f"/admin/training/runs/{r1}", headers=H).text
    assert "Model files" in page and "deleted on " in page and "retain_runs: 1 keeps" in page
    resp = c.get(f"/admin/training/runs/{r1}/model.tar", headers=H)
    assert resp.status == 404 and "deleted on " in resp.text
    assert 'href="/admin/training"' in resp.text and 'href="/login"' not in resp.text
    # its kept predictions went with its files (they would grow at every retraining), so it
    # cannot be put in use, and says why
    status, body = c.json("POST", f"/admin/training/api/runs/{r1}/use", headers=H)
    assert status == 409 and body["error"] == (
        f"Run {r1} cannot be put in use: its model files and kept predictions were deleted "
        "(model_training.retain_runs keeps those of the newest successful run; pin a run to "
        "keep them), so annotators would see nothing from it.")
    status, body = c.json("POST", f"/admin/training/api/runs/{r1}/pin", headers=H)
    assert status == 409 and body["error"].startswith(
        f"Run {r1} cannot be pinned: its model files and kept predictions were deleted")
    assert not c.json("GET", f"/admin/training/api/runs/{r1}", headers=H)[1]["pinned"]
    assert "deleted with the model files (retain_runs)" in page  # not "kept, not shown"
    assert "the run's kept predictions went with them" in gone["pruned_reason"]
    # Unpin from the page's form: the page says what changed.
    resp = c.post(f"/admin/training/runs/{r2}/unpin", headers=H, form={})
    assert resp.status == 303 and resp.headers["Location"].endswith(f"/runs/{r2}?done=unpin")
    page = c.get(resp.headers["Location"], headers=H).text
    assert f"Run {r2} is no longer pinned" in page and 'id="pin-run"' in page
    assert c.json("GET", f"/admin/training/api/runs/{r2}", headers=H)[1]["pinned"] is False
    # Use from the page's form: the page says so.
    resp = c.post(f"/admin/training/runs/{r3}/use", headers=H, form={})
    assert resp.status == 303
    page = c.get(resp.headers["Location"], headers=H).text
    assert f"Run {r3} is now in use for sentiment" in page and 'class="ok"' in page


def test_use_is_offered_only_where_it_can_work(tmp_path, serve):
    cfg = make_project(tmp_path, model_training="    min_confidence: 1.0")
    _, url = serve(cfg)
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-warns", schemas=["sentiment"]))
    assert run["status"] == "success" and run["writeback"]["written"] == 0
    page = c.get(f"/admin/training/runs/{run['run_id']}", headers=H).text
    assert 'id="use-run"' not in page
    assert ("cannot be put in use: all %d of its predictions were below "
            "writeback.min_confidence (1.0)" % run["writeback"]["below_min_confidence"]) in page
    # Posted anyway (an old page): the run page again, with the reason, inside the admin pages.
    resp = c.post(f"/admin/training/runs/{run['run_id']}/use", headers=H, form={})
    assert resp.status == 409 and "cannot be put in use" in resp.text
    assert 'class="error"' in resp.text and "&larr; Training" in resp.text
    assert 'href="/admin/training"' in resp.text and 'href="/login"' not in resp.text
    status, body = c.json("POST", f"/admin/training/api/runs/{run['run_id']}/use", headers=H)
    assert status == 409 and "cannot be put in use" in body["error"]
    # Pinning a run that cannot be used keeps its files, and says it is in use for nothing.
    status, body = c.json("POST", f"/admin/training/api/runs/{run['run_id']}/pin", headers=H)
    assert status == 200 and body["pinned"] is True and body["in_use"] == []
    failed = wait_run(c, start_run(c, trainer="test-sigkill", schemas=["sentiment"]))
    status, body = c.json("POST", f"/admin/training/api/runs/{failed['run_id']}/pin", headers=H)
    assert status == 409 and "only a successful run can be pinned" in body["error"]
    page = c.get(f"/admin/training/runs/{failed['run_id']}", headers=H).text
    assert 'id="use-run"' not in page and 'id="pin-run"' not in page
    assert "did not succeed, so it has no model to use" in page
    # A run that does not exist: an admin page with a way back, not the annotator's login.
    resp = c.get("/admin/training/runs/r99", headers=H)
    assert resp.status == 404 and "No run r99." in resp.text
    assert 'href="/admin/training"' in resp.text and 'href="/login"' not in resp.text
    assert c.json("POST", "/admin/training/api/runs/r99/pin", headers=H)[0] == 404


def test_a_newer_run_within_tolerance_says_that_it_took_over(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    first = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    second = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    assert second["in_use"] == ["sentiment"]
    why = second["writeback"]["took_over"]["sentiment"]
    assert why.startswith("run %s's held-out macro-F1" % second["run_id"])
    assert "it replaces %s in use" % first["run_id"] in why
    assert "In use: yes, for sentiment" in "\n".join(summary_lines(RunView.from_dict(second)))
    log = c.get("/admin/training/api/runs/%s/log" % second["run_id"], headers=H).text
    assert "sentiment: " + why in log


def test_pinning_does_not_lose_to_a_run_finishing_at_the_same_moment(tmp_path, serve,
                                                                    monkeypatch):
    """Write-back's take-over (decision and switch) and pin share one lock: a pin made while
    a newer run decides is applied after it, so the pinned run ends in use."""
    import threading
    from potato.training.exchange import ingest
    _, url = serve(make_project(tmp_path, "    policy: newest"))
    c = Client(url)
    r1 = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))["run_id"]
    deciding = threading.Event()
    real = ingest.takes_over

    def slow(*args, **kwargs):
        out = real(*args, **kwargs)
        deciding.set()
        threading.Event().wait(1.0)  # the window a pin used to fall into
        return out
    monkeypatch.setattr(ingest, "takes_over", slow)
    r2 = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    assert deciding.wait(120)
    status, pinned = c.json("POST", f"/admin/training/api/runs/{r1}/pin", headers=H)
    assert status == 200 and pinned["pinned"] is True and pinned["in_use"] == ["sentiment"]
    assert wait_run(c, r2)["in_use"] == []
    run = c.json("GET", f"/admin/training/api/runs/{r1}", headers=H)[1]
    assert run["pinned"] is True and run["in_use"] == ["sentiment"]


def test_use_on_another_run_moves_the_pin(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    r1 = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))["run_id"]
    r2 = wait_run(c, start_run(c, trainer="test-warns", schemas=["sentiment"]))["run_id"]
    assert c.json("POST", f"/admin/training/api/runs/{r1}/pin", headers=H)[1]["pinned"]
    assert c.json("POST", f"/admin/training/api/runs/{r2}/use", headers=H)[0] == 200
    old = c.json("GET", f"/admin/training/api/runs/{r1}", headers=H)[1]
    new = c.json("GET", f"/admin/training/api/runs/{r2}", headers=H)[1]
    assert (old["pinned"], old["in_use"]) == (False, [])
    assert (new["pinned"], new["in_use"]) == (True, ["sentiment"])
    log = c.get(f"/admin/training/api/runs/{r1}/log", headers=H).text
    assert f"unpinned by the admin: run {r2} was put in use for sentiment instead" in log
    # a better run does not replace the admin's choice
    r3 = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    assert r3["in_use"] == [] and r3["writeback"]["kept_in_use"]["sentiment"].startswith(
        f"run {r2} is pinned")


def test_a_queued_or_running_run_says_so_when_used_or_pinned(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-steps", schemas=["sentiment"], params={"seconds": 3})
    for action in ("use", "pin"):
        status, body = c.json("POST", f"/admin/training/api/runs/{run_id}/{action}", headers=H)
        assert status == 409 and body["error"].startswith(f"Run {run_id} is ")
        assert body["error"].split(" ")[3].rstrip(":") in ("queued", "running"), body
        assert "only a successful run can be used or pinned" in body["error"]
    wait_run(c, run_id)


# -- a run that learned nothing ----------------------------------------------------------------

def test_the_baseline_has_a_macro_f1_and_a_model_at_it_warns():
    pairs = [("positive", g) for g in ["positive"] * 6 + ["negative"] * 4]
    r = report.scheme_report(pairs, ["positive", "negative"], "radio", ["positive"] * 7)
    assert r["baseline"]["label"] == "positive"
    assert r["baseline"]["macro_f1"] == r["macro_f1"] == 0.375  # F1 0.75 and 0 over 2 labels
    assert report.learned_nothing("", r) == (
        "the held-out macro-F1 (0.375) is not above the majority-class baseline's (0.375, "
        "always answering positive): the model learned nothing the label counts do not tell. "
        "Check the training loss, label more items, or change the params")
    good = report.scheme_report([(g, g) for _, g in pairs], ["positive", "negative"], "radio",
                                ["positive"] * 7)
    assert good["macro_f1"] == 1.0 and report.learned_nothing("s", good) is None
    multi = report.scheme_report([(["a"], ["a"]), (["a"], ["a", "b"]), (["a"], ["b"])],
                                 ["a", "b"], "multiselect", [["a"], ["a"]])
    assert multi["baseline"]["label"] == ["a"]
    assert report.learned_nothing("tags", multi).startswith("tags: the held-out macro-F1")


def test_a_test_split_of_one_gold_class_is_not_called_learned_nothing():
    r = report.scheme_report([("positive", "positive")] * 12, ["positive", "negative"],
                             "radio", ["positive"] * 7)
    assert r["macro_f1"] == r["baseline"]["macro_f1"] == 1.0
    said = report.learned_nothing("sentiment", r)
    assert "learned nothing" not in said
    assert said == ("sentiment: the test split cannot tell the model from the majority-class "
                    "baseline: its 12 items all have the gold label positive, which always "
                    "answering positive gets right. Label items of the other classes, or raise "
                    "splits.test")


def test_a_run_that_predicts_one_class_is_a_warning_not_a_plain_success(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-constant", schemas=["sentiment"]))
    assert run["status"] == "success"
    assert [w for w in run["warnings"] if "not above the majority-class baseline" in w] == [
        report.learned_nothing("", run["holdout"])]
    assert run["in_use"] == []  # and it does not reach the annotators
    good = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    assert good["holdout"]["macro_f1"] > good["holdout"]["baseline"]["macro_f1"]
    assert good["warnings"] == []


def test_the_newest_automatic_run_is_found_without_reading_every_run(tmp_path):
    store = Store(str(tmp_path / "p.db"))
    try:
        runs = RunStore(store)
        assert runs.last_auto_created() is None
        runs.create("text-naive-bayes", ["s"], "local", {})
        auto = runs.create("text-naive-bayes", ["s"], "local", {}, auto=True)
        runs.create("text-naive-bayes", ["s"], "local", {})
        assert runs.last_auto_created() == auto.created_at
    finally:
        store.close()
