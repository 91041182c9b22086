"""Fast unit tests for the admin's choice of the run in use (potato/training/lifecycle/in_use.py): use, pin,
unpin, their refusals and messages. A real store, a stand-in for the training manager. Also the
tests tools/mutation.py runs against the module (issue 26)."""

from types import SimpleNamespace as NS

from potato.config.active_learning import ActiveLearning

import pytest

from potato.project.store import Store
from potato.training.exchange import ingest
from potato.training.lifecycle import in_use
from potato.training.core.runs import RequestError, RunStore


class Manager:
    def __init__(self, store, schemes):
        self.store, self.runs = store, RunStore(store)
        self.cfg = NS(model_training=NS(writeback=NS(schemas=list(schemes)), retain_runs=5),
                      active_learning=ActiveLearning())
        self.log = []

    def run_log(self, run_id, line):
        assert isinstance(run_id, str) and isinstance(line, str)
        self.log.append((run_id, line))


@pytest.fixture
def m(tmp_path):
    s = Store(str(tmp_path / "potato.db"))
    s.conn().execute("PRAGMA synchronous=OFF")  # speed: durability is not what these test
    yield Manager(s, ["a", "b"])
    s.close()


def _run(m, schemes, status="success", kept=(), writeback=None):
    """A run of ``schemes`` ended with ``status``, with kept predictions for ``kept``."""
    r = m.runs.create("t", list(schemes), "local", {})
    if writeback is not None:
        m.runs.update(r.run_id, writeback=writeback)
    if status == "running":
        m.runs.transition(r.run_id, "queued", "running")
    elif status != "queued":
        m.runs.finish(r.run_id, status)
    with m.store.tx() as db:
        for scheme in kept:
            db.execute("INSERT INTO run_predictions VALUES (?, 'i1', ?, '\"x\"', 0.9)",
                       (r.run_id, scheme))
    return r.run_id


def test_usable_schemes(m):
    rid = _run(m, ["a", "b", "c"], kept=["a", "c"])
    assert in_use.usable_schemes(m, m.runs.get(rid)) == ["a"]
    rid = _run(m, ["b", "a"], kept=["a", "b"])
    assert in_use.usable_schemes(m, m.runs.get(rid)) == ["b", "a"]
    m.cfg.model_training.writeback.schemas = ["c"]
    assert in_use.usable_schemes(m, m.runs.get("r1")) == ["c"]


def test_not_finished(m):
    q, r, e = _run(m, ["a"], "queued"), _run(m, ["a"], "running"), _run(m, ["a"], "error")
    assert in_use.not_finished(m.runs.get(q)).startswith("Run r1 is queued: ")
    msg = in_use.not_finished(m.runs.get(r))
    assert msg.startswith("Run r2 is running: ") and msg.endswith("wait for it to finish.")
    assert in_use.not_finished(m.runs.get(e)) == ""
    assert in_use.not_finished(m.runs.get(_run(m, ["a"]))) == ""


def test_use_refusal_of_an_unfinished_or_failed_run(m):
    q = _run(m, ["a"], "queued", kept=["a"])
    assert in_use.use_refusal(m, m.runs.get(q)) == in_use.not_finished(m.runs.get(q))
    e = _run(m, ["a"], "error", kept=["a"])
    assert in_use.use_refusal(m, m.runs.get(e)) == (
        "Run r2 did not succeed, so it has no model to use.")
    assert in_use.use_refusal(m, m.runs.get(_run(m, ["a"], kept=["a"]))) == ""


def test_use_refusal_says_why_a_success_has_nothing(m):
    rid = _run(m, ["c", "d"], kept=["c"])
    msg = in_use.use_refusal(m, m.runs.get(rid))
    assert msg.startswith("Run r1 cannot be put in use: none of its schemes (c, d) is in "
                          "model_training.writeback.schemas (a, b)")
    m.cfg.model_training.writeback.schemas = []
    assert "writeback.schemas (none)" in in_use.use_refusal(m, m.runs.get(rid))
    m.cfg.model_training.writeback.schemas = ["a", "b"]
    rid = _run(m, ["c", "a"], writeback={"below_min_confidence": 7, "written": 0,
                                         "min_confidence": 0.8})
    msg = in_use.use_refusal(m, m.runs.get(rid))
    assert msg.startswith("Run r2 cannot be put in use: all 7 of its predictions were below "
                          "writeback.min_confidence (0.8)")
    assert msg.endswith("so annotators would see nothing from it.")
    for wb in ({"below_min_confidence": 7, "written": 3}, {"below_min_confidence": 0},
               {"written": 0}, "not a dict", None):
        rid = _run(m, ["a"], writeback=wb)
        assert in_use.use_refusal(m, m.runs.get(rid)) == (
            "Run %s cannot be put in use: it kept no predictions for a scheme in "
            "model_training.writeback.schemas (a, b), so annotators would see nothing from it."
            % rid), wb


def test_use_errors(m):
    with pytest.raises(RequestError) as e:
        in_use.use(m, "r9")
    assert (e.value.status, e.value.message) == (404, "No run r9.")
    rid = _run(m, ["a"], "error", kept=["a"])
    with pytest.raises(RequestError) as e:
        in_use.use(m, rid)
    assert (e.value.status, e.value.message) == (409, in_use.use_refusal(m, m.runs.get(rid)))
    assert m.log == [] and ingest.in_use(m.store, "a") is None


def test_use_switches_the_usable_schemes(m):
    rid = _run(m, ["a", "b", "c"], kept=["a", "b", "c"])
    assert in_use.use(m, rid) == ["a", "b"]
    assert (ingest.in_use(m.store, "a"), ingest.in_use(m.store, "b")) == (rid, rid)
    assert ingest.in_use(m.store, "c") is None
    assert m.log == [(rid, "put in use for a, b by the admin")]
    assert m.runs.pinned(rid) is False


def test_use_moves_the_pin_of_the_runs_it_replaces(m):
    old = _run(m, ["a", "b"], kept=["a", "b"])
    in_use.use(m, old)
    m.runs.set_pinned(old, True)
    new = _run(m, ["a"], kept=["a"])
    m.log.clear()
    assert in_use.use(m, new) == ["a"]
    # old is still in use for b: it keeps its pin; new gets one too
    assert (m.runs.pinned(old), m.runs.pinned(new)) == (True, True)
    assert [r for r, _ in m.log] == [new, new]
    assert m.log[1][1].startswith("pinned by the admin: the pin of %s moved" % old)
    third = _run(m, ["a", "b"], kept=["a", "b"])
    m.log.clear()
    assert in_use.use(m, third) == ["a", "b"]
    assert (m.runs.pinned(old), m.runs.pinned(new), m.runs.pinned(third)) == (False, False, True)
    assert m.log[0] == (third, "put in use for a, b by the admin")
    unpinned = {r: line for r, line in m.log[1:3]}
    assert sorted(unpinned) == sorted([old, new])
    assert unpinned[old].startswith("unpinned by the admin: run %s was put in use for a, b "
                                    "instead" % third)
    assert m.log[3][0] == third and m.log[3][1].startswith("pinned by the admin: the pin of ")
    assert set(m.log[3][1].split("the pin of ")[1].split(" moved")[0].split(", ")) == {old, new}
    assert len(m.log) == 4


def test_use_again_of_a_pinned_run_in_use_changes_no_pin(m):
    rid = _run(m, ["a"], kept=["a"])
    in_use.use(m, rid)
    m.runs.set_pinned(rid, True)
    m.log.clear()
    assert in_use.use(m, rid) == ["a"]
    assert m.runs.pinned(rid) is True and len(m.log) == 1


def test_use_after_an_unpinned_run_sets_no_pin(m):
    old = _run(m, ["a"], kept=["a"])
    in_use.use(m, old)
    new = _run(m, ["a"], kept=["a"])
    m.log.clear()
    in_use.use(m, new)
    assert (m.runs.pinned(old), m.runs.pinned(new)) == (False, False) and len(m.log) == 1


def test_use_on_a_pinned_new_run_keeps_its_pin_and_logs_no_pin(m):
    old = _run(m, ["a"], kept=["a"])
    in_use.use(m, old)
    m.runs.set_pinned(old, True)
    new = _run(m, ["a"], kept=["a"])
    m.runs.set_pinned(new, True)
    m.log.clear()
    in_use.use(m, new)
    assert (m.runs.pinned(old), m.runs.pinned(new)) == (False, True)
    assert [r for r, _ in m.log] == [new, old]


def test_pin_errors(m):
    with pytest.raises(RequestError) as e:
        in_use.pin(m, "r9")
    assert (e.value.status, e.value.message) == (404, "No run r9.")
    q = _run(m, ["a"], "running")
    with pytest.raises(RequestError) as e:
        in_use.pin(m, q)
    assert (e.value.status, e.value.message) == (409, in_use.not_finished(m.runs.get(q)))
    f = _run(m, ["a"], "cancelled")
    with pytest.raises(RequestError) as e:
        in_use.pin(m, f)
    assert (e.value.status, e.value.message) == (
        409, "Run r2 did not succeed: only a successful run can be pinned.")
    assert m.log == [] and not m.runs.pinned(q)


def test_pin_puts_a_usable_run_in_use(m):
    rid = _run(m, ["a"], kept=["a"])
    r = in_use.pin(m, rid)
    assert (r.run_id, r.pinned, r.in_use) == (rid, True, ["a"])
    assert ingest.in_use(m.store, "a") == rid
    assert m.log[0] == (rid, "put in use for a by the admin")
    assert m.log[1][0] == rid and m.log[1][1].startswith("pinned by the admin: it stays in use "
                                                         "for a until")
    assert len(m.log) == 2


def test_pin_of_a_run_in_use_or_with_nothing_to_use(m):
    rid = _run(m, ["a", "b"], kept=["a", "b"])
    with m.store.tx() as db:
        db.execute("INSERT INTO in_use VALUES ('b', ?)", (rid,))
    r = in_use.pin(m, rid)  # in use for b already: not put in use for a
    assert (r.pinned, r.in_use) == (True, ["b"]) and ingest.in_use(m.store, "a") is None
    assert len(m.log) == 1 and m.log[0][0] == rid
    none = _run(m, ["c"], kept=["c"])
    r = in_use.pin(m, none)
    assert (r.pinned, r.in_use) == (True, [])
    assert m.log[-1] == (none, "pinned by the admin: it is in use for no scheme; its model "
                               "files are never pruned")


def test_unpin(m):
    with pytest.raises(RequestError) as e:
        in_use.unpin(m, "r9")
    assert (e.value.status, e.value.message) == (404, "No run r9.")
    rid = _run(m, ["a"], kept=["a"])
    r = in_use.unpin(m, rid)
    assert (r.run_id, r.pinned) == (rid, False) and m.log == []
    m.runs.set_pinned(rid, True)
    r = in_use.unpin(m, rid)
    assert (r.run_id, r.pinned) == (rid, False) and m.runs.pinned(rid) is False
    assert m.log == [(rid, "unpinned by the admin: writeback.policy decides again from the "
                           "next successful run")]


def test_switched_message():
    r = NS(run_id="r3", in_use=["a", "b"])
    assert in_use.switched_message(r, "use") == (
        "Run r3 is now in use for a, b: annotators see its predictions as suggestions.")
    assert in_use.switched_message(NS(run_id="r3", in_use=[]), "use") == (
        "Run r3 is in use for no scheme.")
    assert in_use.switched_message(NS(run_id="r3", in_use=None), "use") == (
        "Run r3 is in use for no scheme.")
    assert in_use.switched_message(r, "pin").startswith("Run r3 is pinned and in use for a, b: ")
    assert in_use.switched_message(NS(run_id="r3", in_use=None), "pin").startswith(
        "Run r3 is pinned: no later")
    assert in_use.switched_message(r, "unpin").startswith("Run r3 is no longer pinned: ")
    assert in_use.switched_message(r, "other") == ""
