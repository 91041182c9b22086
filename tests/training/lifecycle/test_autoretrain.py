"""Fast unit tests for auto-retraining's decision (potato/training/lifecycle/autoretrain.py): when a run is
queued and why not. Also the tests tools/mutation.py runs against the module."""

import time
from types import SimpleNamespace as NS

from potato.config.active_learning import ActiveLearning
from potato.config.settings import AutoRetrain
from potato.training.lifecycle import autoretrain


class FakeStore:
    def __init__(self, count, last=None):
        self.count, self.last = count, last

    def annotation_count(self):
        return self.count

    def meta_get(self, key, default=None):
        assert key == "auto_retrain.labels"
        return self.last if self.last is not None else default


class FakeRuns:
    def __init__(self, pending=(), last_auto=None):
        self.pending, self.last_auto = list(pending), last_auto

    def with_status(self, *statuses):
        assert statuses == ("queued", "running")
        return self.pending

    def last_auto_created(self):
        return self.last_auto


def ar_cfg(enabled=True, training=True, every=10, interval=60.0):
    ar = AutoRetrain(enabled=enabled, update_frequency=every, min_interval_s=interval)
    return NS(model_training=NS(enabled=training, auto_retrain=ar),
              active_learning=ActiveLearning())


def test_auto_retrain_off():
    assert autoretrain.decide(ar_cfg(enabled=False), FakeStore(99), FakeRuns()) is None
    assert autoretrain.decide(ar_cfg(training=False), FakeStore(99), FakeRuns()) is None


def test_auto_retrain_starts_at_update_frequency():
    d = autoretrain.decide(ar_cfg(), FakeStore(15, "5"), FakeRuns())
    assert d.start is True and d.labels == 15
    assert d.status == {"enabled": True, "labels": 15, "new_labels": 10, "update_frequency": 10}
    d = autoretrain.decide(ar_cfg(), FakeStore(14, "5"), FakeRuns())
    assert d.start is False and d.labels == 0
    assert d.status["reason"] == ("9 new label(s) since the last automatic run; waiting for 10")
    assert d.status["new_labels"] == 9
    d = autoretrain.decide(ar_cfg(), FakeStore(10), FakeRuns())
    assert d.start and d.status["new_labels"] == 10


def test_auto_retrain_waits_for_a_pending_auto_run():
    pending = [NS(auto=False, run_id="m", status="running"),
               NS(auto=True, run_id="a1", status="queued")]
    d = autoretrain.decide(ar_cfg(), FakeStore(50), FakeRuns(pending))
    assert not d.start and d.status["reason"] == "automatic run a1 is queued"
    d = autoretrain.decide(ar_cfg(), FakeStore(50), FakeRuns(pending[:1]))
    assert d.start


def test_auto_retrain_min_interval():
    recent = time.time() - 30
    d = autoretrain.decide(ar_cfg(interval=60), FakeStore(50), FakeRuns(last_auto=recent))
    assert not d.start
    assert d.status["reason"].startswith("the last automatic run started ")
    assert d.status["reason"].endswith(" s ago; min_interval_s is 60")
    assert int(d.status["reason"].split()[5]) in range(29, 60)
    old = time.time() - 61
    assert autoretrain.decide(ar_cfg(interval=60), FakeStore(50), FakeRuns(last_auto=old)).start
    d = autoretrain.decide(ar_cfg(interval=60), FakeStore(50), FakeRuns(last_auto=time.time()))
    assert not d.start


def test_decision_defaults():
    d = autoretrain.Decision({"x": 1})
    assert d.status == {"x": 1} and d.start is False and d.labels == 0


def test_auto_retrain_at_exactly_min_interval(monkeypatch):
    monkeypatch.setattr(autoretrain, "time", NS(time=lambda: 1000.0))
    runs = FakeRuns(last_auto=940.0)
    assert autoretrain.decide(ar_cfg(interval=60), FakeStore(50), runs).start
    d = autoretrain.decide(ar_cfg(interval=60.5), FakeStore(50), runs)
    assert not d.start and d.status["reason"] == (
        "the last automatic run started 60 s ago; min_interval_s is 60.5")
