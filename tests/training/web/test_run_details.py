"""What the runs table and a run's page tell an admin (issue 14): where exactly a run ran, the
params that differ from the defaults, a visible warning state, the model download, the chart."""

import io
import json
import os
import tarfile
from types import SimpleNamespace

import pytest

from potato.project.store import Store
from potato.training.exchange import boundary
from potato.training.web import chart
from potato.training.reports import report
from potato.training.backends import backend_class
from potato.training.remote import protocol
from potato.training.core.runs import RunStore
from tests.helpers import KEY, Client, make_project, old_runs_table, start_run, wait_run

H = {"X-API-Key": KEY}


pytestmark = pytest.mark.usefixtures("env")  # the test trainers, for server and workers


# -- where exactly ---------------------------------------------------------------------------

def test_the_worker_says_where_it_runs():
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "gpu-n07"}
    here = protocol.here(env)
    assert here["gpus"] == "0,1" and here["slurm_job"] == "4242" and here["slurm_node"] == "gpu-n07"
    assert here["host"]
    assert "gpus" not in protocol.here({}) and "slurm_job" not in protocol.here({})


@pytest.mark.parametrize("backend, btype, where, expected", [
    ("local", "local", {"host": "annot-vm"}, "local"),
    ("local", "local", {"host": "annot-vm", "gpus": "0"}, "local: GPU 0"),
    ("gpu-box", "ssh", {"host": "gpu01", "gpus": "0,1"}, "gpu-box (ssh): host gpu01, GPUs 0,1"),
    ("cluster", "slurm", {"host": "n07", "slurm_job": "4242", "slurm_node": "n07", "gpus": "0"},
     "cluster (slurm): SLURM job 4242 on node n07, GPU 0"),
    ("lab-pc", "agent", {"host": "lab-pc.local"}, "lab-pc (agent): host lab-pc.local"),
    ("lab-pc", "agent", {}, "lab-pc (agent)"),
])
def test_ran_on_in_words(backend, btype, where, expected):
    bcfg = SimpleNamespace(name=backend, options=SimpleNamespace(host="h", remote_dir=None))
    assert backend_class(btype)(bcfg, None).ran_on(where) == expected


def test_a_where_event_is_checked_at_the_boundary():
    e = boundary.event({"type": "where", "host": "<img src=x onerror=alert(1)>" + "h" * 500,
                        "gpus": "0", "junk": "dropped"})
    assert len(e["host"]) <= boundary.NAME_MAX and "junk" not in e
    with pytest.raises(boundary.Invalid):
        boundary.event({"type": "where", "host": {"nested": "object"}})


def test_a_local_run_records_where_it_ran_and_the_params_that_differ(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                       params={"ngrams": 1, "alpha": 1.0})
    run = wait_run(c, run_id)
    assert run["status"] == "success", run
    assert run["placement"]["host"] == os.uname().nodename
    assert run["ran_on"] == "local"
    assert run["params_changed"] == {"ngrams": 1}  # alpha=1.0 is the default
    assert run["warnings"] == []
    page = c.get("/admin/training", headers=H).text
    for head in ("Started", "Params (not default)", "Held-out score", "Ran on", "In use"):
        assert f'<th scope="col">{head}</th>' in page
    assert "<code>ngrams=1</code>" in page and "alpha=" not in page.split("runs-body")[1]


# -- warnings ----------------------------------------------------------------------------------

def test_a_run_that_warned_is_not_plain_success(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-warns", schemas=["sentiment"])
    run = wait_run(c, run_id)
    assert run["status"] == "success"
    # test-warns answers one label for everything: the server says so first
    nothing = report.learned_nothing("", run["holdout"])
    assert run["warnings"] == [nothing, "no threshold <b>reaches</b> the target"]
    rows = c.json("GET", "/admin/training/api/fragments", headers=H)[1]["runs"]
    assert "success, 2 warnings" in rows and "status-warning" in rows
    assert "<b>reaches" not in rows and "&lt;b&gt;reaches" in rows
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert "run-warnings" in page and "&lt;b&gt;reaches&lt;/b&gt;" in page
    from potato.commands.summary import summary_lines
    from potato.training.core.view import RunView

    text = "\n".join(summary_lines(RunView.from_dict(run)))
    assert f"Run {run_id} success (with warnings)" in text
    assert "2 warnings:\n  %s\n  no threshold <b>reaches</b> the target" % nothing in text


def test_no_writeback_scheme_is_a_warning(tmp_path, serve):
    cfg = make_project(tmp_path)
    text = open(cfg).read().replace("schemas: [sentiment]", "schemas: []")
    open(cfg, "w").write(text)
    _, url = serve(cfg)
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    assert run["status"] == "success"
    assert any("writeback.schemas" in w for w in run["warnings"]), run["warnings"]


def test_every_prediction_below_min_confidence_is_a_warning(tmp_path, serve):
    cfg = make_project(tmp_path, model_training="    min_confidence: 1.0")
    _, url = serve(cfg)
    c = Client(url)
    # test-warns predicts 0.99 for everything: below 1.0
    run = wait_run(c, start_run(c, trainer="test-warns", schemas=["sentiment"]))
    assert run["writeback"]["written"] == 0 and run["writeback"]["below_min_confidence"] > 0
    assert any("below writeback.min_confidence" in w for w in run["warnings"]), run["warnings"]


# -- model download ------------------------------------------------------------------------------

def test_the_model_downloads_as_one_archive(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-warns", schemas=["sentiment"])
    wait_run(c, run_id)
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert f'href="/admin/training/runs/{run_id}/model.tar"' in page
    r = c.get(f"/admin/training/runs/{run_id}/model.tar", headers=H)
    assert r.status == 200 and r.getheader("Content-Type") == "application/x-tar"
    assert f'filename="{run_id}-model.tar"' in r.getheader("Content-Disposition")
    with tarfile.open(fileobj=io.BytesIO(r.body)) as tar:
        names = tar.getnames()
        weights = tar.extractfile(f"{run_id}-model/model/weights.bin").read()
    assert sorted(names) == [f"{run_id}-model/model/labels.json",
                             f"{run_id}-model/model/weights.bin"]  # the symlink is left out
    assert weights == b"\x00weights" * 1000
    assert c.get(f"/admin/training/runs/{run_id}/model.tar").status in (303, 401, 403)


def test_naive_bayes_download_and_load_code(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    r = c.get(f"/admin/training/runs/{run_id}/model.tar", headers=H)
    with tarfile.open(fileobj=io.BytesIO(r.body)) as tar:
        model = json.load(tar.extractfile(f"{run_id}-model/sentiment.naive-bayes.json"))
    assert model
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert "load-code" in page and f"{run_id}-model/sentiment.naive-bayes.json" in page


def test_no_download_for_a_run_without_files(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-sigkill", schemas=["sentiment"])
    wait_run(c, run_id)
    r = c.get(f"/admin/training/runs/{run_id}/model.tar", headers=H)
    assert r.status == 404 and "has no model files on this server" in r.text
    assert c.get("/admin/training/runs/r999/model.tar", headers=H).status == 404


# -- the chart ---------------------------------------------------------------------------------

def test_ticks_are_round_and_cover_the_range():
    assert chart.ticks(0, 0.8) == [0.0, 0.2, 0.4, 0.6, 0.8]
    assert chart.ticks(0, 150, 6, whole=True) == [0, 50, 100, 150]
    assert chart.ticks(1, 3, 6, whole=True) == [1.0, 2.0, 3.0]  # epochs are whole
    assert chart.ticks(2, 2) == [2]


def test_chart_has_two_axes_ticks_and_a_legend():
    history = [{"name": "loss", "split": "train", "value": 0.7 - 0.01 * i, "step": 5 * i,
                "epoch": 1 + i // 10} for i in range(30)]
    history += [{"name": "accuracy", "split": "val", "value": 0.6 + 0.05 * e, "epoch": e,
                 "step": 50 * e} for e in (1, 2, 3)]
    svg = str(chart.chart_svg(history))
    assert 'aria-label="Training loss and accuracy by step"' in svg
    assert svg.count('class="tick-x"') >= 3 and svg.count('class="tick-loss"') >= 3
    assert svg.count('class="tick-acc"') >= 3
    assert "loss (train) (left axis)" in svg and "accuracy (val) (right axis)" in svg
    assert 'data-series="loss (train)"' in svg


def test_chart_by_epoch_and_hostile_names():
    svg = str(chart.chart_svg([{"name": "<script>x</script>", "value": 0.5, "epoch": 1},
                               {"name": "<script>x</script>", "value": 0.6, "epoch": 2},
                               {"name": "loss", "value": float("nan"), "epoch": 1}]))
    assert "by epoch" in svg and "<script>" not in svg and "&lt;script&gt;" in svg
    assert "appears when the run reports its first loss" in str(chart.chart_svg([], pending=True))
    assert "reported no loss" in str(chart.chart_svg([], pending=False))


# -- an older store gains the new columns ------------------------------------------------------

def test_a_store_from_before_gains_placement_and_warnings(tmp_path):
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
        assert run.placement is None and run.warnings is None
        created = runs.create("text-naive-bayes", ["s"], "local", {})
        assert runs.update(created.run_id, warnings=["w"], placement={"host": "h"})
        assert runs.get(created.run_id).warnings == ["w"]
    finally:
        store.close()


@pytest.mark.parametrize("history", [
    # a subnormal: log10 of ~0 used to raise (two points: one point is a number, no chart)
    [{"name": "loss", "value": 5e-324, "epoch": 1}, {"name": "loss", "value": 5e-324, "epoch": 2}],
    [{"name": "loss", "value": 0, "epoch": 1}, {"name": "loss", "value": 0, "epoch": 2}],
    [{"name": "loss", "value": -0.5, "step": 1}, {"name": "loss", "value": 2.3, "step": 2}],
    [{"name": "perplexity", "value": 35, "epoch": 1}, {"name": "x" * 140, "value": 1, "epoch": 1},
     {"name": "perplexity", "value": 30, "epoch": 2}, {"name": "x" * 140, "value": 2, "epoch": 2}],
])
def test_odd_values_still_draw(history):
    svg = str(chart.chart_svg(history))
    assert svg.startswith("<svg") and "cannot be drawn" not in svg


def test_epoch_only_points_sit_at_their_epochs_last_step():
    axis, data = chart.series([
        {"name": "loss", "value": 0.5, "step": 10, "epoch": 1},
        {"name": "loss", "value": 0.4, "step": 20, "epoch": 2},
        {"name": "accuracy", "value": 0.7, "epoch": 1}, {"name": "accuracy", "value": 0.8,
                                                          "epoch": 2}])
    assert axis == "step" and data["accuracy"] == [(10.0, 0.7), (20.0, 0.8)]


def test_negative_loss_stays_inside_the_plot():
    svg = str(chart.chart_svg([{"name": "loss", "value": -0.5, "step": 1},
                               {"name": "loss", "value": 2.3, "step": 2}]))
    ys = [float(p.split(",")[1]) for p in
          svg.split('points="')[1].split('"')[0].split()]
    assert all(chart.TOP <= y <= chart.BOTTOM for y in ys)


def _artifacts(tmp_path, run_id):
    return os.path.join(tmp_path, "annotation_output", "training", "runs", run_id, "artifacts")


def test_the_archive_has_its_exact_length_and_odd_names(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-warns", schemas=["sentiment"])
    wait_run(c, run_id)
    art = os.fsencode(_artifacts(tmp_path, run_id))
    with open(os.path.join(art, b"model", b"latin1-\xe9.bin"), "wb") as f:  # not UTF-8
        f.write(b"y" * 700)
    with open(os.path.join(art, b"model", 'q"uote <b>.bin'.encode()), "wb") as f:
        f.write(b"")
    page = c.get(f"/admin/training/runs/{run_id}", headers=H)
    assert page.status == 200 and "latin1-\\xe9.bin" in page.text
    assert "q&quot;uote &lt;b&gt;.bin" in page.text
    r = c.get(f"/admin/training/runs/{run_id}/model.tar", headers=H)
    assert int(r.getheader("Content-Length")) == len(r.body) and len(r.body) % 10240 == 0
    with tarfile.open(fileobj=io.BytesIO(r.body)) as tar:
        names = tar.getnames()
        assert tar.extractfile(next(n for n in names if "latin1" in n)).read() == b"y" * 700
    assert len(names) == 4


def test_a_file_that_shrinks_mid_download_gives_an_incomplete_download(tmp_path, serve,
                                                                       monkeypatch):
    import http.client

    from potato.training.hub import model_files

    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-warns", schemas=["sentiment"])
    wait_run(c, run_id)
    weights = os.path.join(_artifacts(tmp_path, run_id), "model", "weights.bin")
    real_write = model_files.Archive.write

    def shrink_then_write(self, out):
        with open(weights, "wb") as f:
            f.write(b"short")
        return real_write(self, out)

    monkeypatch.setattr(model_files.Archive, "write", shrink_then_write)
    conn = http.client.HTTPConnection(c.host, c.port, timeout=10)
    try:
        conn.request("GET", f"/admin/training/runs/{run_id}/model.tar", headers=H)
        resp = conn.getresponse()
        assert resp.status == 200
        with pytest.raises(http.client.IncompleteRead):
            resp.read()
    finally:
        conn.close()


def test_the_servers_warnings_are_never_crowded_out(tmp_path, serve):
    cfg = make_project(tmp_path)
    text = open(cfg).read().replace("schemas: [sentiment]", "schemas: []")
    open(cfg, "w").write(text)
    _, url = serve(cfg)
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-many-warnings", schemas=["sentiment"]))
    w = run["warnings"]
    assert "writeback.schemas" in w[0]  # the server's own, first
    assert "not above the majority-class baseline" in w[1]
    assert w[2:22] == ["trainer warning %d" % i for i in range(20)]
    assert w[22] == "… and 5 more warning(s) in the run log" and len(w) == 23


def test_where_fields_lose_control_and_bidi_characters():
    e = boundary.event({"type": "where", "host": "gpu01\u202egnp.exe\x1b[31m\n\u200fx"})
    assert e["host"] == "gpu01gnp.exe[31mx"


def test_two_processes_migrating_an_old_store_at_once(tmp_path):
    import threading

    path = str(tmp_path / "old.sqlite")
    db = old_runs_table(path)
    db.commit()
    db.close()
    stores = [Store(path) for _ in range(4)]  # each thread migrates through its own
    barrier, errors = threading.Barrier(4, timeout=60), []

    def migrate(store):
        try:
            barrier.wait()
            RunStore(store)
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)
        finally:
            store.release()

    threads = [threading.Thread(target=migrate, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for s in stores:
        s.close()
    assert errors == []


def test_a_flood_of_warnings_ends_with_the_true_count(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-many-warnings", schemas=["sentiment"]))
    assert run["warnings"][0] == report.learned_nothing("", run["holdout"])  # the server's
    assert run["warnings"][1:21] == ["trainer warning %d" % i for i in range(20)]
    assert run["warnings"][21:] == ["… and 5 more warning(s) in the run log"]
