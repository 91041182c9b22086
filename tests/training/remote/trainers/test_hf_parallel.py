"""Data-parallel hf-text-classification on the CPU: two processes with gloo (``processes: 2``),
on the tiny BERT of test_hf_trainer. The run must look like a one-process run; cancelling,
a crash, a SIGKILL or a hang in one rank must end the run with a message and leave no process
behind (the autouse leak fixture checks the last)."""

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

if os.environ.get("CI"):  # CI installs the train-text extra: a missing package is a failure
    import peft  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
else:
    torch = pytest.importorskip("torch", reason="needs the train-text extra (torch)")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")

from potato.training.remote import protocol as events  # noqa: E402
from potato.training.remote import worker  # noqa: E402
from potato.training.remote.trainers import launch, parallel  # noqa: E402
from tests import leaks  # noqa: E402
from tests.helpers import ROOT  # noqa: E402
from tests.helpers import hf_run_dir as _run_dir, hf_train as _train  # noqa: E402

SMALL = dict(epochs=6, batch_size=8, max_length=16, learning_rate=2e-2, processes=2)


def _run(tmp_path, model, **params):
    paths, items = _run_dir(tmp_path, model, **dict(SMALL, **params))
    spec = json.load(open(paths.spec))
    spec["device"] = "cpu"
    json.dump(spec, open(paths.spec, "w"))
    return paths, items


def _error(evs):
    return [e for e in evs if e["type"] == "error"]


# -- pure parts ------------------------------------------------------------------------------

def test_plan_ranks():
    assert parallel.plan(0, "auto", 0) == (1, None)
    assert parallel.plan(0, "auto", 1) == (1, None)
    assert parallel.plan(0, "auto", 4) == (4, "nccl")
    assert parallel.plan(0, "cuda:1", 4) == (1, None)
    assert parallel.plan(2, "auto", 0) == (2, "gloo")
    assert parallel.plan(2, "cpu", 4) == (2, "gloo")
    assert parallel.plan(2, "auto", 2) == (2, "nccl")
    with pytest.raises(parallel.ParallelError, match="only 2 GPU"):
        parallel.plan(3, "auto", 2)
    with pytest.raises(parallel.ParallelError, match="pins one GPU"):
        parallel.plan(2, "cuda:0", 2)


def test_batches_group_by_length_and_shard_deterministically():
    lengths = [(i * 37) % 50 + 1 for i in range(203)]
    a = parallel.length_grouped_batches(lengths, 8, seed=3, epoch=1)
    assert a == parallel.length_grouped_batches(lengths, 8, seed=3, epoch=1)
    assert a != parallel.length_grouped_batches(lengths, 8, seed=3, epoch=2)
    assert sorted(i for b in a for i in b) == list(range(203))
    padded = sum(len(b) * max(lengths[i] for i in b) for b in a)
    assert padded < 1.15 * sum(lengths)  # sorted within mega-batches: little padding
    for b in a:
        parts = [parallel.shard(b, r, 2) for r in range(2)]
        assert all(parts) and sorted(parts[0] + parts[1]) == sorted(b if len(b) > 1 else b * 2)
    assert parallel.shard([5], 1, 2) == [5]


def test_rank_argv_and_env():
    argv = launch.rank_argv("py", "/r/spec.json", 1, 2, "gloo", "/r/ddp.store", 99, "/r/e.json")
    assert argv[:3] == ["py", "-m", "potato.training.remote.rank"]
    # the rendezvous is a file in the private run directory: no port anyone could join
    assert argv[argv.index("--store") + 1] == "/r/ddp.store" and "--port" not in argv
    env = launch.rank_env({"POTATO_TRAINING_TOKEN": "secret", "PATH": "/bin"}, 1, 2)
    assert "POTATO_TRAINING_TOKEN" not in env and "MASTER_PORT" not in env
    assert env["PYTHONPATH"].split(os.pathsep)[0] == ROOT and env["RANK"] == "1"


# -- two real processes ----------------------------------------------------------------------

def test_two_processes_train_like_one(tmp_path, tiny_bert):
    # float32 on both sides: the differences left are the ones named below (on a CPU with
    # native bfloat16, bf16 auto would add its rounding to both runs' losses); learning rate
    # 1e-2, not SMALL's 2e-2: with gradients clipped at norm 1, 2e-2 makes this tiny model's
    # last-epoch loss swing with the rounding of a half-batch mean (0.09 against 0.20)
    one, _ = _run(tmp_path / "one", tiny_bert, processes=1, bf16="false", learning_rate=1e-2)
    code, alone = _train(one)
    assert code == 0, alone[-1]
    paths, items = _run(tmp_path, tiny_bert, bf16="false", learning_rate=1e-2)
    code, evs = _train(paths)
    assert code == 0 and not _error(evs), _error(evs)
    assert not os.path.exists(os.path.join(paths.root, launch.STORE_FILE))  # removed at the end
    assert [e["type"] for e in evs].count("result") == 1 and evs[-1]["type"] == "result"
    metrics = evs[-1]["metrics"]
    assert set(metrics) == {"sentiment.train_loss", "sentiment.val_accuracy", "train_seconds",
                            "predictions"}
    assert metrics["sentiment.val_accuracy"] >= 0.9, metrics
    # The same global batches, split in two: the same training as one process (up to the
    # rounding of two half-batch means and each rank's own dropout).
    for key, close in (("sentiment.train_loss", 0.1), ("sentiment.val_accuracy", 0.07)):
        assert abs(metrics[key] - alone[-1]["metrics"][key]) <= close, (metrics, alone[-1])
    n_train = json.load(open(os.path.join(paths.bundle, "manifest.json")))["counts"]["train"]
    steps = [e["current"] for e in evs if e["type"] == "progress" and e["unit"] == "step"]
    assert steps == list(range(1, 6 * -(-n_train // 8) + 1))  # as many steps as one process
    assert [e["epoch"] for e in evs if e["type"] == "metric" and e["name"] == "loss"
            and "step" not in e] == list(range(1, 7))
    # rank 0 alone draws the per-step loss: one point per step here, never one per rank
    assert [e["step"] for e in evs if e["type"] == "metric" and e["name"] == "loss"
            and "step" in e] == steps
    assert any("data-parallel: 2 processes (gloo backend)" in e.get("message", "")
               for e in evs if e["type"] == "log")
    assert len(open(paths.predictions).readlines()) == metrics["predictions"] > 0
    assert os.path.exists(os.path.join(paths.artifacts, "model", "labels.json"))
    assert not [f for f in os.listdir(paths.root) if f.startswith("rank")]


def test_cancel_stops_every_rank(tmp_path, tiny_bert):
    paths, _ = _run(tmp_path, tiny_bert, epochs=50)
    ranks = []

    class CancelAt(events.Emitter):
        def emit(self, event_type, **fields):
            event = super().emit(event_type, **fields)
            if event_type == "progress" and fields.get("current") == 3:
                ranks.extend(leaks.processes("remote.rank"))
                os.kill(os.getpid(), signal.SIGTERM)  # as the supervisor's cancel does
            return event

    out = io.StringIO()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = worker.run(paths.spec, CancelAt(out))
    finally:
        signal.signal(signal.SIGTERM, previous)
    evs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert code == events.EXIT_CANCELLED and evs[-1]["kind"] == "cancelled", evs[-3:]
    assert len(ranks) == 1 and leaks.processes("remote.rank") == []
    assert max(e["current"] for e in evs if e["type"] == "progress") <= 4


@pytest.mark.parametrize("mode,expect", [
    ("raise", "rank 1 of 2 (pid %d) failed: RuntimeError: injected fault in rank 1 at step 2"),
    ("kill", "rank 1 of 2 (pid %d) was killed (SIGKILL"),
    ("hang", "rank 1 of 2 stopped answering: rank 0 waited 10 s for it"),
], ids=["raise", "kill", "hang"])
def test_a_failing_rank_fails_the_run(tmp_path, tiny_bert, monkeypatch, mode, expect):
    monkeypatch.setenv(parallel.FAULT_ENV, "1:2:%s" % mode)
    # 10 s: long enough for the other rank to import torch on a loaded 2-core machine (its
    # start counts against the same wait), short enough that a hang ends the run quickly
    monkeypatch.setenv(parallel.TIMEOUT_ENV, "10")
    paths, _ = _run(tmp_path, tiny_bert, epochs=50)
    started = time.monotonic()
    code, evs = _train(paths)
    assert time.monotonic() - started < 60
    assert code == events.EXIT_OTHER, evs[-3:]
    message = _error(evs)[-1]["message"]
    log = next(e["message"] for e in evs if "data-parallel" in e.get("message", ""))
    pid = int(log.rsplit(" ", 1)[1])
    assert (expect % pid if "%d" in expect else expect) in message, message
    assert not [e for e in evs if e["type"] == "progress" and e["current"] > 3]


def test_ranks_die_with_a_killed_worker(tmp_path, tiny_bert):
    """The worker alone SIGKILLed (no group kill): its ranks notice and exit within seconds."""
    paths, _ = _run(tmp_path, tiny_bert, epochs=50)
    env = dict(os.environ, PYTHONPATH=ROOT)
    with open(os.path.join(str(tmp_path), "worker.err"), "wb") as err:
        p = subprocess.Popen([sys.executable, "-m", "potato.training.worker", "--spec",
                              paths.spec], env=env, stdout=subprocess.PIPE, stderr=err)
    try:
        for line in p.stdout:
            if b'"progress"' in line:
                break
        ranks = [int(r.split()[0]) for r in leaks.processes("remote.rank")]
        assert len(ranks) == 1
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
    deadline = time.monotonic() + 15
    while leaks.alive(ranks[0]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not leaks.alive(ranks[0])




@pytest.mark.parametrize("how", ["cancel", "wall_clock"])
def test_supervised_stop_reaches_every_rank(tmp_path, tiny_bert, how):
    """Through the supervisor, as on every backend: SIGTERM to the worker's process group
    (which holds the ranks), the run ends as with one process, and nothing is left. Cancel
    comes mid-training; the 1 s wall clock while the ranks are still starting."""
    from potato.training.remote import protocol, supervise

    paths, _ = _run(tmp_path, tiny_bert, epochs=50)
    seen, ranks = [], []

    def on_event(event):
        seen.append(event)
        if event["type"] == "progress" and not ranks:
            ranks.extend(leaks.processes("remote.rank"))

    started = time.monotonic()
    result = supervise.run_worker(
        [sys.executable, "-m", "potato.training.worker", "--spec", paths.spec],
        protocol.worker_env(os.environ, ROOT), os.path.join(paths.root, "stderr.log"), on_event,
        supervise.Supervision(should_cancel=lambda: how == "cancel" and bool(ranks),
                        max_wall_seconds=None if how == "cancel" else 1.0, grace_seconds=20,
                        tick=0.2))
    status, message = supervise.explain(result, supervise.Supervision(max_wall_seconds=1.0))
    assert time.monotonic() - started < 60
    if how == "cancel":
        assert len(ranks) == 1 and (status, message) == ("cancelled", "cancelled"), seen[-3:]
    else:
        assert status == "error" and "max_wall_seconds (1 s)" in message, message
    assert result.returncode != -9  # stopped by SIGTERM in time, not killed after the grace
    assert leaks.processes("remote.rank") == []


def test_a_stuck_rank_0_is_ended_by_its_watch(tmp_path, tiny_bert, monkeypatch):
    """What NCCL does to rank 0 when a peer dies (waits in the collective), simulated: rank 1
    fails and rank 0 sleeps. The worker's watch reports rank 1's error and exits, in about the
    collective timeout, leaving nothing behind."""
    from potato.training.remote import protocol, supervise

    monkeypatch.setenv(parallel.FAULT_ENV, "1:2:raise,0:2:hang")
    # 10 s: long enough for the other rank to import torch on a loaded 2-core machine (its
    # start counts against the same wait), short enough that a hang ends the run quickly
    monkeypatch.setenv(parallel.TIMEOUT_ENV, "10")
    paths, _ = _run(tmp_path, tiny_bert, epochs=50)
    started = time.monotonic()
    result = supervise.run_worker(
        [sys.executable, "-m", "potato.training.worker", "--spec", paths.spec],
        protocol.worker_env(os.environ, ROOT), os.path.join(paths.root, "stderr.log"),
        lambda event: None, supervise.Supervision(tick=0.2))
    status, message = supervise.explain(result)
    assert time.monotonic() - started < 60
    assert result.returncode == protocol.EXIT_OTHER and status == "error", message
    assert "rank 1 of 2" in message and "injected fault in rank 1 at step 2" in message
    assert leaks.processes("remote.rank") == []


@pytest.mark.parametrize("value, expected", [("inf", 600.0), ("nan", 600.0), ("-5", 1.0),
                                             ("1e20", 86400.0), ("30", 30.0), ("x", 600.0)])
def test_a_bad_timeout_setting_never_crashes_a_run(monkeypatch, value, expected):
    from potato.training.remote.trainers import parallel

    monkeypatch.setenv("POTATO_DDP_TIMEOUT_S", value)
    assert parallel.Group(None, 0, 1, "gloo").timeout == expected  # one rank: no torch


def test_an_empty_train_split_fails_before_any_rank_starts(tmp_path, tiny_bert):
    """Used to start both ranks, load the model twice, and report rank 1's copy of the error."""
    paths, _ = _run(tmp_path, tiny_bert)
    import shutil

    from potato.training.remote import bundle

    rows = [json.loads(line) for line in open(os.path.join(paths.bundle, "items.jsonl"))]
    shutil.rmtree(paths.bundle)  # the same items, labelled only outside the train split
    bundle.build(paths.bundle, [(r["id"], r["text"]) for r in rows],
                 {r["id"]: r["labels"] for r in rows if r["split"] in ("val", "test")},
                 {"sentiment": {"type": "radio", "labels": ["positive", "negative"]}},
                 include_unlabeled=True)
    code, evs = _train(paths)
    assert code == events.EXIT_OTHER
    assert _error(evs)[-1]["message"] == ("scheme sentiment has no labelled items in the train "
                                          "split")
    assert not any("data-parallel" in e.get("message", "") for e in evs)
