"""Fast unit tests for the one door of a run's events (potato/training/exchange/intake.py): what each
event records, the bounds on events.jsonl, dropped events and warnings; written so that
tools/mutation.py's mutants of the module fail. The clock is a fake one (no test waits)."""

import json
import os
from types import SimpleNamespace as NS

import pytest

from potato.training.exchange import boundary, intake
from potato.training.exchange.intake import RunEvents
from potato.training.remote.paths import RunPaths


class Runs:
    """A RunStore stand-in that records what it is asked to store."""

    def __init__(self):
        self.calls = []

    def update(self, run_id, **fields):
        self.calls.append(("update", run_id, json.loads(json.dumps(fields))))

    def append_history(self, run_id, *events):
        self.calls.append(("history", run_id, [dict(e) for e in events]))


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(intake, "time", NS(time=lambda: now[0], monotonic=lambda: now[0]))
    return now


@pytest.fixture
def ev(tmp_path, clock):
    runs, logs, steps = Runs(), [], []
    e = RunEvents(runs, logs.append, "r1", RunPaths(str(tmp_path)), steps.append)
    e.logs, e.steps = logs, steps
    return e


def events_file(e):
    try:
        with open(e.paths.events, encoding="utf-8") as f:
            return [json.loads(line) for line in f]
    except FileNotFoundError:
        return []


def test_events_file_keeps_8_mib_and_then_1_mib_of_results(ev):
    # docs/security.md: events.jsonl at most 8 MB, plus room for the result
    status = {"type": "status", "message": "m" * 2000}
    line = len(json.dumps(status)) + 1
    for _ in range(8 * 1024 * 1024 // line + 1):
        ev(status)
    assert os.path.getsize(ev.paths.events) == (8 * 1024 * 1024 // line) * line == ev.written
    small = {"type": "status", "message": "m"}
    while True:  # fill what is left, until not even a small line fits
        before = ev.written
        ev(small)
        if ev.written == before:
            break
    full = ev.written
    assert 8 * 1024 * 1024 - len(json.dumps(small)) - 1 < full <= 8 * 1024 * 1024
    # results (the biggest an agent may send: 500 metrics) go on for 1 MiB more
    result = {"type": "result",
              "metrics": {"m%03d" % i + "n" * 96: "v" * 200 for i in range(500)}}
    kept = len(json.dumps(boundary.event(result))) + 1
    for _ in range(20):
        ev(result)
    assert ev.written == full + (8 * 1024 * 1024 + 1024 * 1024 - full) // kept * kept
    assert os.path.getsize(ev.paths.events) == ev.written
    assert events_file(ev)[-1]["type"] == "result"


def test_a_new_door_is_empty(tmp_path):
    runs, logged, step = Runs(), [], (lambda s: None)
    e = RunEvents(runs, logged.append, "r7", RunPaths(str(tmp_path)), step)
    assert (e.runs, e.run_id, e.set_step, e.ran_on) == (runs, "r7", step, None)
    assert e.paths.events == str(tmp_path / "events.jsonl")
    assert (e.placement, e.warnings, e.server_warnings) == ({}, [], [])
    assert (e.warnings_dropped, e.last_warning_write, e.last_progress) == (0, 0.0, 0.0)
    assert (e.dropped, e.written) == (0, 0)
    assert e.eta.rate is None and e.eta.last is None
    # outside a batch a log line and a metric go out at once
    e.log("first")
    e({"type": "metric", "name": "a", "value": 1})
    assert logged == ["first", "metric a = 1.0"]
    assert runs.calls == [("history", "r7", [{"type": "metric", "name": "a", "value": 1.0}])]
    where = lambda p: "there"  # noqa: E731
    assert RunEvents(runs, logged.append, "r7", e.paths, step, where).ran_on is where


def test_status_sets_the_step_and_is_kept(ev):
    ev({"type": "status", "message": "training", "t": 3})
    assert ev.steps == ["training"]
    assert events_file(ev) == [{"type": "status", "t": 3.0, "message": "training"}]
    assert ev.written == len(json.dumps({"type": "status", "t": 3.0, "message": "training"})) + 1
    assert ev.runs.calls == [] and ev.logs == []


def test_dropped_events_are_logged_twenty_times(ev):
    for _ in range(19):
        ev({"type": "nope"})
    assert ev.dropped == 19 and len(ev.logs) == 19
    assert ev.logs[0] == ("warning: dropped an event that does not fit the protocol: event type "
                          "'nope' is not one of %s" % ", ".join(intake.boundary.TYPES))
    ev([])
    assert ev.logs[-1] == ("warning: dropped an event that does not fit the protocol: an event "
                           "must be an object (further ones are dropped silently)")
    ev({"type": "status"})
    assert ev.dropped == 21 and len(ev.logs) == 20
    assert events_file(ev) == [] and ev.steps == []


def test_events_file_is_bounded_with_room_for_the_result(ev, monkeypatch):
    status = {"type": "status", "message": "m"}
    size = len(json.dumps(status)) + 1
    monkeypatch.setattr(intake, "EVENTS_MAX_BYTES", 2 * size)
    monkeypatch.setattr(intake, "RESULT_ROOM", 1000)
    ev(status)
    ev(status)  # exactly at the cap: kept
    assert ev.written == 2 * size and len(events_file(ev)) == 2
    ev(status)  # past it: not kept, still recorded
    assert ev.written == 2 * size and len(events_file(ev)) == 2 and ev.steps == ["m"] * 3
    result = {"type": "result", "metrics": {"a": 1}}
    ev(result)
    assert events_file(ev)[-1] == {"type": "result", "metrics": {"a": 1.0}}
    assert ev.written == 2 * size + len(json.dumps(events_file(ev)[-1])) + 1


def test_result_room_is_exact(ev, monkeypatch):
    result = {"type": "result", "metrics": {}}
    size = len(json.dumps(result)) + 1
    monkeypatch.setattr(intake, "EVENTS_MAX_BYTES", 0)
    monkeypatch.setattr(intake, "RESULT_ROOM", size)
    ev({"type": "status", "message": "m"})
    assert events_file(ev) == []
    ev(result)
    ev(result)
    assert events_file(ev) == [result] and ev.written == size


def test_progress_is_not_kept_in_the_file_and_is_throttled(ev, clock):
    ev({"type": "progress", "current": 1, "total": 10, "unit": "step", "t": 5, "eta_s": 99})
    assert events_file(ev) == [] and ev.written == 0
    assert ev.runs.calls == [("update", "r1", {"progress": {
        "type": "progress", "t": 5.0, "current": 1, "total": 10, "unit": "step"},
        "heartbeat_at": 1000.0})]
    assert ev.last_progress == 1000.0
    clock[0] = 1000.1
    ev({"type": "progress", "current": 2, "total": 10, "unit": "step", "t": 6})
    assert len(ev.runs.calls) == 1  # too soon
    clock[0] = 1000.25
    ev({"type": "progress", "current": 4, "total": 10, "unit": "step", "t": 7})
    assert len(ev.runs.calls) == 2 and ev.last_progress == 1000.25
    progress = ev.runs.calls[-1][2]["progress"]
    assert ev.runs.calls[-1][2]["heartbeat_at"] == 1000.25
    assert progress["current"] == 4 and progress["eta_s"] == round(ev.eta.left(4, 10), 1)
    assert progress["eta_s"] > 0
    clock[0] = 1000.3
    ev({"type": "progress", "current": 10, "total": 10, "unit": "step", "t": 8})
    assert len(ev.runs.calls) == 3 and ev.runs.calls[-1][2]["progress"]["current"] == 10
    assert ev.runs.calls[-1][2]["progress"]["eta_s"] == 0.0


def test_progress_eta_is_rounded_and_uses_the_event_time(ev, clock):
    ev({"type": "progress", "current": 0, "total": 7, "unit": "step", "t": 0})
    clock[0] = 2000.0
    ev({"type": "progress", "current": 1, "total": 7, "unit": "step", "t": 3})
    # one unit in 3 s (the events' own times, not the server's clock): 6 left, 18 s
    assert ev.runs.calls[-1][2]["progress"]["eta_s"] == 18.0
    clock[0] = 3000.0
    ev({"type": "progress", "current": 4, "total": 7, "unit": "step", "t": 10})
    eta = ev.runs.calls[-1][2]["progress"]["eta_s"]
    assert eta == round(ev.eta.left(4, 7), 1) and eta != ev.eta.left(4, 7)


def test_progress_without_time_uses_the_server_clock(ev, clock):
    ev({"type": "progress", "current": 0, "total": 4, "unit": "step"})
    clock[0] = 1002.0
    ev({"type": "progress", "current": 1, "total": 4, "unit": "step"})
    assert ev.runs.calls[-1][2]["progress"]["eta_s"] == 6.0


def test_progress_without_total(ev):
    ev({"type": "progress", "current": 3})
    assert ev.runs.calls == [("update", "r1", {"progress": {"type": "progress", "current": 3},
                                               "heartbeat_at": 1000.0})]


def test_metric_goes_to_the_history_and_the_log(ev):
    ev({"type": "metric", "name": "loss", "value": 0.5, "epoch": 2})
    ev({"type": "metric", "name": "acc", "value": 1})
    assert ev.runs.calls == [
        ("history", "r1", [{"type": "metric", "name": "loss", "value": 0.5, "epoch": 2}]),
        ("history", "r1", [{"type": "metric", "name": "acc", "value": 1.0}])]
    assert ev.logs == ["metric loss = 0.5 (epoch 2)", "metric acc = 1.0"]
    assert len(events_file(ev)) == 2


def test_a_training_steps_metric_goes_to_the_chart_not_the_log(ev):
    for step in (1, 2, 3):
        ev({"type": "metric", "name": "loss", "value": 1.0 / step, "step": step, "epoch": 1,
            "split": "train"})
    ev({"type": "metric", "name": "accuracy", "value": 0.8, "step": 3, "epoch": 1,
        "split": "val"})
    assert [c[0] for c in ev.runs.calls] == ["history"] * 4  # all four on the chart
    assert ev.logs == ["metric accuracy = 0.8 (epoch 1)"]  # the validation figure only
    assert len(events_file(ev)) == 4


def test_many_writes_once(ev):
    ev.many([{"type": "metric", "name": "a", "value": 1}, {"type": "bad"},
             {"type": "metric", "name": "b", "value": 2, "epoch": 1},
             {"type": "log", "message": "hi"}])
    assert ev.runs.calls == [("history", "r1", [{"type": "metric", "name": "a", "value": 1.0},
                                                {"type": "metric", "name": "b", "value": 2.0,
                                                 "epoch": 1}])]
    assert len(ev.logs) == 1
    lines = ev.logs[0].split("\n")
    assert lines[0] == "metric a = 1.0" and lines[2] == "metric b = 2.0 (epoch 1)"
    assert lines[1].startswith("warning: dropped an event") and lines[3] == "info: hi"
    # after the batch, a log line and a metric go out at once again
    ev.log("after")
    ev({"type": "metric", "name": "c", "value": 3})
    assert ev.logs[1:] == ["after", "metric c = 3.0"]
    assert ev.runs.calls[1:] == [("history", "r1", [{"type": "metric", "name": "c",
                                                      "value": 3.0}])]


def test_many_with_nothing_to_write(ev):
    ev.many([{"type": "status", "message": "s"}])
    assert ev.runs.calls == [] and ev.logs == [] and ev.steps == ["s"]
    ev.many([])
    assert ev.runs.calls == [] and ev.logs == []


def test_many_writes_what_it_had_when_a_record_fails(ev):
    def boom(step):
        raise RuntimeError("step failed")

    ev.set_step = boom
    with pytest.raises(RuntimeError):
        ev.many([{"type": "metric", "name": "a", "value": 1}, {"type": "status", "message": "x"}])
    assert ev.runs.calls == [("history", "r1", [{"type": "metric", "name": "a", "value": 1.0}])]
    assert ev.logs == ["metric a = 1.0"]
    ev.log("after")
    ev({"type": "metric", "name": "c", "value": 3})
    assert ev.logs[1:] == ["after", "metric c = 3.0"]
    assert ev.runs.calls[1:] == [("history", "r1", [{"type": "metric", "name": "c",
                                                      "value": 3.0}])]


def test_where_records_the_placement_when_it_changes(ev):
    seen = []
    ev.ran_on = lambda p: seen.append(dict(p)) or "on %s" % p.get("host")
    ev({"type": "where", "host": "gpu1", "t": 4})
    assert ev.placement == {"host": "gpu1"}
    assert ev.runs.calls == [("update", "r1", {"placement": {"host": "gpu1"},
                                               "ran_on": "on gpu1"})]
    ev({"type": "where", "host": "gpu1", "t": 5})
    assert len(ev.runs.calls) == 1 and seen == [{"host": "gpu1"}]
    ev({"type": "where", "device": "cuda:0"})
    assert ev.runs.calls[-1] == ("update", "r1", {
        "placement": {"host": "gpu1", "device": "cuda:0"}, "ran_on": "on gpu1"})


def test_where_without_ran_on(ev):
    ev({"type": "where", "slurm_job": "42"})
    assert ev.runs.calls == [("update", "r1", {"placement": {"slurm_job": "42"}})]


def test_log_and_error_lines(ev):
    ev({"type": "log", "message": "plain"})
    ev({"type": "log", "level": "error", "message": "bad"})
    ev({"type": "error", "message": "it broke"})
    ev({"type": "error", "message": "stop", "kind": "cancelled"})
    ev({"type": "artifact", "path": "model.bin", "bytes": 12})
    ev({"type": "artifact", "path": "x"})
    assert ev.logs == ["info: plain", "error: bad", "error: it broke",
                       "the worker stopped, as the cancel asked", "artifact model.bin (12 bytes)",
                       "artifact x (None bytes)"]
    assert ev.warnings == [] and ev.runs.calls == []


def test_a_warning_log_is_a_run_warning(ev):
    ev({"type": "log", "level": "warning", "message": "careful"})
    assert ev.logs == ["warning: careful"] and ev.warnings == ["careful"]
    assert ev.runs.calls == [("update", "r1", {"warnings": ["careful"]})]


def test_warn_cuts_at_300(ev):
    ev.warn("w" * 300)
    ev.warn("v" * 301)
    assert ev.warnings == ["w" * 300, "v" * 299 + "…"]


def test_server_warnings_come_first_and_are_always_kept(ev):
    ev.warn("run")
    for i in range(25):
        ev.warn("server %d" % i, server=True)
    assert ev.warnings == ["run"] and len(ev.server_warnings) == 25
    assert ev.runs.calls[-1] == ("update", "r1", {"warnings": ["server %d" % i
                                                               for i in range(25)] + ["run"]})
    assert ev.warnings_dropped == 0


def test_warnings_past_the_cap_are_counted_and_written_once_a_second(ev, clock):
    for i in range(20):
        ev.warn("w%d" % i)
    assert len(ev.runs.calls) == 20 and ev.warnings_dropped == 0
    ev.warn("over")
    assert ev.warnings_dropped == 1 and len(ev.warnings) == 20
    assert ev.last_warning_write == 1000.0
    assert ev.runs.calls[-1][2]["warnings"][-1] == "… and 1 more warning(s) in the run log"
    assert len(ev.runs.calls) == 21
    clock[0] = 1000.5
    ev.warn("over")
    assert ev.warnings_dropped == 2 and len(ev.runs.calls) == 21  # a flood costs one write
    clock[0] = 1001.0
    ev.warn("over")
    assert ev.warnings_dropped == 3 and len(ev.runs.calls) == 22
    assert ev.last_warning_write == 1001.0
    assert ev.runs.calls[-1][2]["warnings"] == ["w%d" % i for i in range(20)] + [
        "… and 3 more warning(s) in the run log"]


def test_flush_warnings(ev):
    ev.flush_warnings()
    assert ev.runs.calls == []
    ev.server_warnings.append("s")
    ev.flush_warnings()
    assert ev.runs.calls == [("update", "r1", {"warnings": ["s"]})]
    ev.server_warnings.clear()
    ev.warnings.append("w")
    ev.flush_warnings()
    assert ev.runs.calls[-1] == ("update", "r1", {"warnings": ["w"]})


def test_an_event_one_byte_over_the_cap_is_not_kept(ev, monkeypatch):
    status = {"type": "status", "message": "m"}
    monkeypatch.setattr(intake, "EVENTS_MAX_BYTES", len(json.dumps(status)))  # the line: +1
    ev(status)
    assert events_file(ev) == [] and ev.written == 0


def test_a_new_unit_is_a_new_phase_of_the_eta(ev, clock):
    ev({"type": "progress", "current": 0, "total": 10, "unit": "step", "t": 0})
    clock[0] = 1001.0
    ev({"type": "progress", "current": 5, "total": 10, "unit": "step", "t": 5})
    assert ev.runs.calls[-1][2]["progress"]["eta_s"] == 5.0
    clock[0] = 1002.0
    ev({"type": "progress", "current": 8, "total": 10, "unit": "prediction", "t": 6})
    assert ev.runs.calls[-1][2]["progress"] == {"type": "progress", "t": 6.0, "current": 8,
                                                "total": 10, "unit": "prediction"}


def test_a_reattached_run_gets_its_step_back_with_the_first_event(ev):
    # restarts.py sets resume_step when it re-attaches a run: the first event puts it back
    ev.resume_step = "training"
    ev({"type": "metric", "name": "a", "value": 1})
    assert ev.steps == ["training"] and ev.resume_step is None
    ev({"type": "metric", "name": "a", "value": 2})
    assert ev.steps == ["training"]
    # a status event says the step itself: it is not put back first
    ev.resume_step = "training"
    ev({"type": "status", "message": "predicting"})
    assert ev.steps == ["training", "predicting"] and ev.resume_step is None
