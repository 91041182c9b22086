"""The training engine on the local backend, over real HTTP against a real server."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

from potato.config.settings import load
from potato.project.store import Store
from potato.training.remote.paths import RunPaths
from potato.training.core.runs import RunStore
from tests import leaks
from tests.helpers import ROOT, Client
from tests.helpers import (
    KEY, PLUGINS, gold_labels, make_project, start_run, wait_progress, wait_run)

H = {"X-API-Key": KEY}


pytestmark = pytest.mark.usefixtures("env")  # the test trainers, for server and workers


def test_naive_bayes_run_end_to_end(tmp_path, serve):
    cfg_path = make_project(tmp_path)
    server, url = serve(cfg_path)
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    run = wait_run(c, run_id)
    assert run["status"] == "success", run
    assert run["ran_on"] == "local" and run["backend"] == "local"
    # ~90 test items: too few to bound the accuracy tightly (quality is checked on 1,400 below).
    assert run["holdout"]["n"] > 50 and 0 < run["holdout"]["accuracy"] <= 1
    assert 0 < run["holdout"]["macro_f1"] <= 1
    wb = run["writeback"]
    assert wb["written"] > 1000 and wb["schemes"] == ["sentiment"]
    assert run["params"] == {"alpha": 1.0, "ngrams": 2, "min_count": 1, "calibrate": True}
    assert run["metrics"]["predictions"] > 0
    # The held-out score is what the server computes from the test split against human labels.
    paths = RunPaths(os.path.join(tmp_path, "annotation_output", "training", "runs", run_id))
    items = [json.loads(line) for line in open(os.path.join(paths.bundle, "items.jsonl"))]
    preds = [json.loads(line) for line in open(paths.predictions)]
    human = {it["id"]: it["labels"]["sentiment"] for it in items if it["split"] == "test"}
    test_preds = [p for p in preds if p["split"] == "test"]
    acc = sum(p["label"] == human[p["id"]] for p in test_preds) / len(test_preds)
    assert run["holdout"]["accuracy"] == round(acc, 4)
    # Write-back: unlabeled items get predictions; train items never; human labels untouched.
    train_id = next(it["id"] for it in items if it["split"] == "train")
    unlabeled_id = next(it["id"] for it in items if it["split"] == "unlabeled")
    _, item = c.json("GET", f"/admin/api/items/{unlabeled_id}", headers=H)
    assert item["predictions"]["sentiment"]["run_id"] == run_id
    assert item["labels"] == {}
    _, item = c.json("GET", f"/admin/api/items/{train_id}", headers=H)
    assert item["predictions"] == {}
    assert item["labels"]["sentiment"][0]["annotator"] == "gold"
    # Predictions beat chance against the real gold labels of unlabeled items.
    gold = gold_labels()
    unl = [p for p in preds if p["split"] == "unlabeled"]
    assert sum(p["label"] == gold[p["id"]] for p in unl) / len(unl) > 0.6
    # Log, list and the model file.
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert "bundle:" in log and "held-out:" in log
    assert os.path.exists(os.path.join(paths.artifacts, "sentiment.naive-bayes.json"))
    _, runs = c.json("GET", "/admin/training/api/runs", headers=H)
    assert runs["runs"][0]["run_id"] == run_id


def test_second_run_waits_for_the_first(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    first = start_run(c, trainer="test-steps", schemas=["sentiment"], params={"seconds": 1.5})
    second = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, first, until=("running",))
    _, s = c.json("GET", f"/admin/training/api/runs/{second}", headers=H)
    assert s["status"] == "queued"
    a, b = wait_run(c, first), wait_run(c, second)
    assert a["status"] == b["status"] == "success"
    assert b["started_at"] >= a["finished_at"]


def _worker_pids():
    return leaks.processes("potato.training.worker")


def test_cancel_queued_and_running(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    running = start_run(c, trainer="test-steps", schemas=["sentiment"], params={"seconds": 60})
    queued = start_run(c, trainer="test-steps", schemas=["sentiment"], params={"seconds": 60})
    wait_run(c, running, until=("running",))
    status, q = c.json("POST", f"/admin/training/api/runs/{queued}/cancel", headers=H)
    assert status == 200 and q["status"] == "cancelled"
    wait_progress(c, running, timeout=20)
    t0 = time.time()
    c.json("POST", f"/admin/training/api/runs/{running}/cancel", headers=H)
    run = wait_run(c, running, timeout=20)
    assert run["status"] == "cancelled" and time.time() - t0 < 10
    assert _worker_pids() == []


def test_sigterm_ignored_gets_sigkill_after_grace(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-ignore-term", schemas=["sentiment"],
                       params={"seconds": 60})
    wait_run(c, run_id, until=("running",))
    time.sleep(1.0)  # let the worker install its SIG_IGN
    t0 = time.time()
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    run = wait_run(c, run_id, timeout=30)
    assert run["status"] == "cancelled"
    assert 1.5 <= time.time() - t0 < 15  # grace_seconds is 2
    assert _worker_pids() == []


def test_wall_clock_limit_stops_a_silent_child(tmp_path, serve):
    _, url = serve(make_project(tmp_path, "  max_wall_seconds: 1.5"))
    c = Client(url)
    t0 = time.time()
    run = wait_run(c, start_run(c, trainer="test-silent", schemas=["sentiment"],
                                params={"seconds": 60}))
    assert run["status"] == "error"
    assert run["error"].startswith("The run took longer than max_wall_seconds (1.5 s)")
    assert time.time() - t0 < 15
    assert _worker_pids() == []


def test_max_ram_mb_stops_a_hungry_worker(tmp_path, serve):
    _, url = serve(make_project(tmp_path, "  max_ram_mb: 150"))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-hog", schemas=["sentiment"],
                                params={"seconds": 30}))
    assert run["status"] == "error"
    assert run["error"].startswith("The training process used more than max_ram_mb (150 MB) "
                                   "and was killed.")
    assert run["duration_s"] < 20


def test_sigkilled_child_is_reported(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-sigkill", schemas=["sentiment"]))
    assert run["status"] == "error"
    assert run["error"] == "the training process was killed (probably out of memory)"


def test_missing_dependency_message(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-missing-dep", schemas=["sentiment"]))
    assert run["status"] == "error"
    assert run["error"].startswith("Trainer 'test-missing-dep' could not be imported. ")
    assert "install it with: pip install nothing" in run["error"]


def test_num_threads_reach_the_worker(tmp_path, serve):
    _, url = serve(make_project(tmp_path, "  num_threads: 3"))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-env", schemas=["sentiment"]))
    assert run["metrics"]["omp"] == "3" and run["metrics"]["openblas"] == "3"


@pytest.mark.parametrize("token_env", ["LAB_HF_TOKEN", None])
def test_the_publish_token_reaches_no_child(tmp_path, serve, monkeypatch, token_env):
    """The server's Hub write token (publish.token_env, HF_TOKEN by default) is for publishing:
    no training run, ssh, sbatch or other child sees it; other variables still pass."""
    from potato.training.remote import proc
    monkeypatch.setenv("HF_TOKEN", "hf_read_or_write")
    monkeypatch.setenv("LAB_HF_TOKEN", "hf_write_lab")
    extra = "  publish: {token_env: %s}" % token_env if token_env else ""
    server, url = serve(make_project(tmp_path, extra))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-env", schemas=["sentiment"]))
    hidden = token_env or "HF_TOKEN"
    other = "HF_TOKEN" if token_env else "LAB_HF_TOKEN"
    assert run["status"] == "success", run
    assert run["metrics"]["hf_token" if hidden == "HF_TOKEN" else "lab_token"] is None
    assert run["metrics"]["lab_token" if other == "LAB_HF_TOKEN" else "hf_token"]
    def names():  # what ssh, scp, sbatch ... get
        return {line.split("=")[0] for line in proc.run(["env"]).stdout.splitlines()}
    assert hidden not in names() and other in names()
    server.close()
    assert hidden in names()  # the server's own, until it stops


@pytest.mark.parametrize("body,status,fragment", [
    ({"trainer": "nope", "schemas": ["sentiment"]}, 400, "Unknown trainer 'nope'"),
    ({"trainer": "text-naive-bayes", "schemas": ["mood"]}, 400, "Unknown scheme 'mood'"),
    ({"trainer": "text-naive-bayes", "schemas": []}, 400, "schemas must name"),
    ({"trainer": "text-naive-bayes", "schemas": ["sentiment"], "params": {"alfa": 1}}, 400,
     "unknown param alfa for trainer text-naive-bayes; valid params: alpha, ngrams"),
    ({"trainer": "text-naive-bayes", "schemas": ["sentiment"], "params": {"ngrams": "two"}},
     400, "ngrams must be a whole number"),
    ({"trainer": "text-naive-bayes", "schemas": ["sentiment"], "params": {"ngrams": 9}},
     400, "ngrams must be at most 3"),
    ({"trainer": "text-naive-bayes", "schemas": ["sentiment"], "backend": "gpu"}, 409,
     "Unknown backend 'gpu'"),
    ({"trainer": "text-naive-bayes", "schemas": ["sentiment"], "colour": 1}, 400,
     "Unknown field(s) colour"),
])
def test_bad_requests(tmp_path, serve, body, status, fragment):
    _, url = serve(make_project(tmp_path, labels=False))
    got, out = Client(url).json("POST", "/admin/training/api/runs", json_body=body, headers=H)
    assert got == status and fragment in out["error"], out


def test_training_api_needs_admin(tmp_path, serve):
    _, url = serve(make_project(tmp_path, labels=False))
    c = Client(url)
    for method, path in [("GET", "/admin/training/api/runs"), ("POST", "/admin/training/api/runs"),
                         ("GET", "/admin/training/api/backends")]:
        status, out = c.json(method, path, json_body={})
        assert status == 401, (path, out)


def test_too_few_labels_are_refused_before_a_run_starts(tmp_path, serve):
    """A run that could say nothing is refused, with the reason (issue 14: guardrails)."""
    _, url = serve(make_project(tmp_path, labels=False))
    c = Client(url)
    status, body = c.json("POST", "/admin/training/api/runs", headers=H, json_body={
        "trainer": "text-naive-bayes", "schemas": ["sentiment"]})
    assert status == 400 and body["error"] == (
        "Scheme sentiment has 0 labelled items with positive; 0 labelled items with negative in "
        "the train split; a model needs at least two labels with 2 labelled items each "
        "(model_training.min_labels_per_class), so it can tell them apart. Label more items "
        "before training.")
    r = c.post("/admin/training/start", headers=H, form={"trainer": "text-naive-bayes",
                                                          "schemas": "sentiment"})
    assert r.status == 400 and "a model needs at least two labels with 2" in r.text
    status, runs = c.json("GET", "/admin/training/api/runs", headers=H)
    assert runs["runs"] == []


def test_no_test_items_are_refused(tmp_path, serve):
    cfg = make_project(tmp_path, labels=False)
    text = open(cfg).read()
    with open(cfg, "w") as f:  # 2 train labels per class, nothing in test
        f.write(text.replace("  grace_seconds: 2\n", "  grace_seconds: 2\n  splits: "
                                                      "{train: 0.98, val: 0.01, test: 0.01}\n"))
    from potato.config.settings import load
    from potato.project.store import Store
    from potato.training.remote.bundle import split_of

    cfg_obj, _, _ = load(cfg)
    ids = [json.loads(line)["id"] for line in open(tmp_path / "reviews.jsonl")]
    train = [i for i in ids if split_of(i, 13, (0.98, 0.01, 0.01)) == "train"][:4]
    store = Store(cfg_obj.db_path)
    store.ensure_annotator("ann")
    for n, item in enumerate(train):
        store.save_labels("ann", item, {"sentiment": "positive" if n % 2 else "negative"})
    store.close()
    _, url = serve(cfg)
    status, body = Client(url).json("POST", "/admin/training/api/runs", headers=H, json_body={
        "trainer": "text-naive-bayes", "schemas": ["sentiment"]})
    assert status == 400 and body["error"].startswith(
        "Scheme sentiment has no labelled item in the test split, so the run could not be "
        "scored.")


def test_restart_recovery(tmp_path, serve):
    cfg_path = make_project(tmp_path)
    cfg, _, _ = load(cfg_path)
    store = Store(cfg.db_path)
    runs = RunStore(store)
    stale = runs.create("text-naive-bayes", ["sentiment"], "local", {}).run_id
    assert runs.transition(stale, "queued", "running", started_at=time.time())
    waiting = runs.create("text-naive-bayes", ["sentiment"], "local",
                          {"alpha": 1.0, "ngrams": 2, "min_count": 1, "calibrate": True}).run_id
    store.close()
    _, url = serve(cfg_path)
    c = Client(url)
    assert wait_run(c, stale)["error"] == (
        "The run was interrupted by a server restart: its training process on the server "
        "stopped with the server. Start the run again.")
    assert wait_run(c, waiting)["status"] == "success"


def test_retain_runs_keeps_every_record_and_counts_only_successful_runs(tmp_path, serve):
    cfg_path = make_project(tmp_path, "  retain_runs: 1")
    _, url = serve(cfg_path)
    c = Client(url)
    runs_dir = tmp_path / "annotation_output" / "training" / "runs"
    r1 = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))["run_id"]
    r2 = wait_run(c, start_run(c, trainer="test-sigkill", schemas=["sentiment"]))["run_id"]
    r3 = wait_run(c, start_run(c, trainer="test-sigkill", schemas=["sentiment"]))["run_id"]
    time.sleep(0.3)
    # failed runs do not count toward retain_runs, and no run's record or log is deleted
    assert list((runs_dir / r1 / "artifacts").iterdir()), "r1's model files were deleted"
    for run_id in (r1, r2, r3):
        assert (runs_dir / run_id / "run.log").exists()
    _, listing = c.json("GET", "/admin/training/api/runs", headers=H)
    assert [r["run_id"] for r in listing["runs"]] == [r3, r2, r1]
    assert [r["pruned_at"] for r in listing["runs"]] == [None, None, None]


def test_auto_retrain_starts_and_explains(tmp_path, serve):
    cfg_path = make_project(tmp_path, """\
  auto_retrain:
    enabled: true
    trainer: text-naive-bayes
    schemas: [sentiment]
    update_frequency: 5
    min_interval_s: 0
""")
    _, url = serve(cfg_path)
    c = Client(url)
    deadline = time.time() + 30
    while True:
        _, runs = c.json("GET", "/admin/training/api/runs", headers=H)
        if runs["runs"]:
            break
        assert time.time() < deadline
        time.sleep(0.1)
    run = wait_run(c, runs["runs"][0]["run_id"])
    assert run["auto"] is True and run["status"] == "success"
    c.login("ann")
    for item in ("sst-test-0000", "sst-test-0001"):
        c.json("POST", "/api/annotations", json_body={"item_id": item,
                                                      "labels": {"sentiment": "positive"}})
    deadline = time.time() + 10
    while True:
        _, auto = c.json("GET", "/admin/training/api/auto_retrain", headers=H)
        if auto["reason"].startswith("2 new label(s)"):
            break
        assert time.time() < deadline, auto
        time.sleep(0.1)
    assert auto["reason"] == "2 new label(s) since the last automatic run; waiting for 5"


def test_backends_list_and_local_check(tmp_path, serve):
    _, url = serve(make_project(tmp_path, labels=False))
    c = Client(url)
    _, out = c.json("GET", "/admin/training/api/backends", headers=H)
    assert out == {"backends": [{"name": "local", "type": "local", "host": None,
                                 "label": "local (this machine)", "description": "",
                                 "default": True}]}
    status, report = c.json("POST", "/admin/training/api/backends/local/check", headers=H)
    assert status == 200 and report["ok"] is True
    assert re.match(r"local: this machine, (CPU \(\d+ threads\)|CUDA GPU|Apple Metal)",
                    report["lines"][0])
    assert any("load_in_4bit" in line for line in report["lines"])  # bitsandbytes there or not
    assert c.json("POST", "/admin/training/api/backends/nope/check", headers=H)[0] == 404


def _cli(*argv, **kw):
    env = dict(os.environ, PYTHONPATH=ROOT, POTATO_TRAINER_PLUGINS=PLUGINS)
    return subprocess.run([sys.executable, "-m", "potato", *argv], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT, **kw)


def test_cli_training_run_in_process(tmp_path):
    cfg = make_project(tmp_path)
    r = _cli("training", "run", cfg, "--trainer", "text-naive-bayes", "--schemas", "sentiment",
             "--param", "ngrams=1")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^Run r1 success in [\d.]+ s on local$", r.stdout, re.M), r.stdout
    assert re.search(r"^Held-out score \(test split, n=\d+\): accuracy 0\.\d{3}, macro-F1 0\.\d{3}$",
                     r.stdout, re.M), r.stdout
    assert re.search(r"^Predictions written: \d+ for sentiment", r.stdout, re.M)
    assert re.search(r"^Model files: .*/runs/r1/artifacts$", r.stdout, re.M)
    bad = _cli("training", "run", cfg, "--trainer", "text-naive-bayes", "--schemas", "sentiment",
               "--param", "ngrams=9")
    assert bad.returncode == 1 and "ngrams must be at most 3" in bad.stderr
    failing = _cli("training", "run", cfg, "--trainer", "test-sigkill", "--schemas", "sentiment")
    assert failing.returncode == 1
    assert "the training process was killed (probably out of memory)" in failing.stdout


def test_cli_training_run_goes_through_the_running_server(tmp_path):
    cfg = make_project(tmp_path)
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONUNBUFFERED="1", POTATO_TRAINER_PLUGINS=PLUGINS)
    server = subprocess.Popen([sys.executable, "-m", "potato", "start", cfg, "--port", "0"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert "Potato is serving" in server.stdout.readline()
        r = _cli("training", "run", cfg, "--trainer", "text-naive-bayes", "--schemas",
                 "sentiment")
        assert r.returncode == 0, r.stderr
        assert "Queueing through the running server at http://127.0.0.1:" in r.stdout
        assert "success" in r.stdout
    finally:
        server.terminate()
        server.wait(timeout=20)
        server.stdout.close()
    assert server.returncode == 0


def test_cli_check_local(tmp_path):
    r = _cli("training", "check", "local", make_project(tmp_path, labels=False))
    assert r.returncode == 0
    assert r.stdout.startswith("local: this machine, ")
    assert r.stdout.strip().endswith("local (this machine): can start a run")
    r = _cli("training", "check", "nope", make_project(tmp_path, labels=False))
    assert r.returncode == 1 and "no backend 'nope'" in r.stderr


def test_decision_calibrate_rescores_the_latest_run(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    first = start_run(c, trainer="decision-calibrate", schemas=["sentiment"])
    run = wait_run(c, first)
    assert run["status"] == "error"
    assert run["error"].startswith("no successful run of scheme sentiment to calibrate yet")
    base = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    cal = wait_run(c, start_run(c, trainer="decision-calibrate", schemas=["sentiment"],
                                params={"target_precision": 0.8}))
    assert cal["status"] == "success", cal
    m = cal["metrics"]
    assert m["base_run"] == base["run_id"] and m["heldout_n"] > 100
    assert m["target_precision"] == 0.8
    if m["threshold"] is not None:
        assert m["precision_at_threshold"] >= 0.8 and 0 < m["coverage_at_threshold"] <= 1
    # Same items and labels as the base run, new confidences, and write-back now points at it.
    assert cal["holdout"]["accuracy"] == base["holdout"]["accuracy"]
    _, item = c.json("GET", "/admin/api/items/sst-test-0000", headers=H)
    assert item["predictions"]["sentiment"]["run_id"] == cal["run_id"]
