"""A run as the API and the pages see it (potato/training/core/view.py): ``RunView.as_dict`` is
the API's JSON exactly as it was before the record (the reference below is the dict builder it
replaced), and ``from_dict`` reads that JSON back for the CLI."""

import json
import time

import pytest

from potato.project.store import Store
from potato.training.core.runs import TERMINAL, RunStore
from potato.training.core.view import RunView, params_changed
from potato.training.reports.heldout import ENTITIES, HeldOut
from potato.training.reports.writeback import WriteBack

OLD_FIELDS = ("run_id", "trainer", "schemas", "backend", "ran_on", "status", "step", "error",
              "metrics", "holdout", "writeback", "created_at", "started_at", "finished_at",
              "artifact_uri", "params", "progress", "history", "auto", "in_use", "placement",
              "warnings", "pinned", "pruned_at", "pruned_reason", "name", "note")


def old_run_view(run):
    """The API's run JSON as api.run_view built it before RunView (the wire format)."""
    out = {k: getattr(run, k) for k in OLD_FIELDS}
    out["writeback"] = run.writeback.as_dict() if run.writeback is not None else None
    out["placement"] = out["placement"] or {}
    out["warnings"] = out["warnings"] or []
    out["params_changed"] = params_changed(run)
    if run.started_at:
        end = run.finished_at or time.time()
        out["duration_s"] = round(end - run.started_at, 1)
    else:
        out["duration_s"] = None
    out["terminal"] = run.status in TERMINAL
    return out


HOLDOUT = {"n": 40, "accuracy": 0.8, "macro_f1": 0.75, "per_label": {"pos": {"f1": 0.7}},
           "per_scheme": {"s": {"n": 40, "accuracy": 0.8, "macro_f1": 0.75}}}
SPANS = {"n": 9, "micro_f1": 0.5, "precision": 0.5, "recall": 0.5, "entities": 4}


@pytest.fixture
def rs(tmp_path):
    s = Store(str(tmp_path / "potato.db"))
    yield RunStore(s)
    s.close()


def _runs(rs, monkeypatch):
    """Runs in each state the pages show: queued, running, success with reports, named,
    error, cancelled, and a trainer this server does not know."""
    rs.create("text-naive-bayes", ["s"], "local", {"alpha": 1.0, "ngrams": 1})
    rs.create("text-naive-bayes", ["s"], "slurm", {"alpha": 0.5, "ngrams": 1})
    rs.transition("r2", "queued", "running", step="training", started_at=100.0,
                  placement={"host": "gpu1", "gpus": [0]}, progress={"current": 3, "total": 9})
    rs.create("text-naive-bayes", ["s", "t"], "local", {"alpha": 1.0, "ngrams": 1})
    rs.transition("r3", "queued", "running", started_at=100.0)
    rs.update("r3", holdout=HOLDOUT, metrics={"val_accuracy": 0.9}, ran_on="this server",
              writeback=WriteBack(written=3, schemes=["s"], by_label={"pos": 3},
                                  min_confidence=0.5, in_use=["s"]),
              warnings=["a <b>warning</b>"], history=[{"epoch": 1, "train_loss": 0.3}],
              artifact_uri="/runs/r3/artifacts")
    monkeypatch.setattr(time, "time", lambda: 163.44)
    rs.finish("r3", "success")
    rs.set_label("r3", "best ü", "a note\nwith lines")
    rs.create("gone-trainer", ["sp"], "agent", {"x": [1, 2]})
    rs.transition("r4", "queued", "running", started_at=50.0)
    rs.update("r4", holdout=SPANS)
    monkeypatch.setattr(time, "time", lambda: 51.0)
    rs.finish("r4", "error", error="it broke")
    rs.create("text-naive-bayes", ["s"], "local", {})
    rs.finish("r5", "cancelled")
    monkeypatch.undo()
    return [rs.get("r%d" % i) for i in range(1, 6)]


def test_as_dict_is_the_api_json_as_it_was(rs, monkeypatch):
    runs = _runs(rs, monkeypatch)
    monkeypatch.setattr(time, "time", lambda: 130.0)  # the running run's duration
    for run in runs:
        old, new = old_run_view(run), RunView.from_run(run).as_dict()
        assert list(new) == list(old)  # the same keys in the same order
        assert json.dumps(new) == json.dumps(old)
    views = {v.run_id: v for v in map(RunView.from_run, runs)}
    assert views["r1"].duration_s is None and not views["r1"].terminal
    assert views["r1"].params_changed == {"ngrams": 1}
    assert views["r2"].duration_s == 30.0 and views["r2"].placement["host"] == "gpu1"
    assert views["r3"].duration_s == 63.4 and views["r3"].terminal
    assert views["r3"].holdout.f1 == 0.75 and views["r3"].writeback.written == 3
    assert views["r4"].holdout.shape == ENTITIES and views["r4"].writeback is None
    assert views["r4"].params_changed == {"x": [1, 2]}  # an unknown trainer: every param
    assert views["r5"].holdout is None and views["r5"].warnings == []


def test_a_running_run_counts_to_now(rs, monkeypatch):
    run = _runs(rs, monkeypatch)[1]
    assert RunView.from_run(run, now=200.0).duration_s == 100.0


def test_a_damaged_report_reads_as_none(rs, monkeypatch):
    run = _runs(rs, monkeypatch)[0]
    run.holdout = ["not", "a", "report"]
    assert RunView.from_run(run).holdout is None


def test_from_dict_reads_the_json_back(rs, monkeypatch):
    for run in _runs(rs, monkeypatch):
        view = RunView.from_run(run, now=130.0)
        wire = json.loads(json.dumps(view.as_dict()))
        assert RunView.from_dict(wire) == view
        assert RunView.from_dict(dict(wire, switched=["s"])) == view  # extra keys ignored


def test_from_dict_gives_defaults_for_missing_or_wrong_values():
    view = RunView.from_dict({"run_id": "r9", "status": "success", "warnings": None,
                              "params": "odd", "holdout": [1], "writeback": {"written": 2}})
    assert view.run_id == "r9" and view.status == "success"
    assert view.warnings == [] and view.params == {} and view.in_use == []
    assert view.holdout is None and view.writeback == WriteBack(written=2)
    assert RunView.from_dict(None) == RunView()
    assert RunView.from_dict({"holdout": SPANS}).holdout == HeldOut.from_dict(SPANS)


def test_the_record_cannot_be_changed():
    with pytest.raises(AttributeError):
        RunView().status = "success"
