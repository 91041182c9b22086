"""Fast unit tests for the runs' store (potato/training/core/runs.py): the queue's states, each run's
record and its JSON columns, the schema upgrade; written so that tools/mutation.py's mutants of the
module fail (issue 26)."""

import dataclasses
import json
import os
import sqlite3

import pytest

from potato.project.store import Store
from potato.training.core import runs as runs_mod
from potato.training.core.runs import COLUMNS, JSON_FIELDS, RequestError, Run, RunStore
from potato.training.reports.writeback import WriteBack


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "potato.db"))
    s.conn().execute("PRAGMA synchronous=OFF")  # speed: durability is not what these test
    yield s
    s.close()


@pytest.fixture
def rs(store):
    return RunStore(store)


def _bulk(store, n, **extra):
    """n runs r1..rn inserted in one transaction (fast), created_at = seq."""
    with store.tx() as db:
        db.executemany("INSERT INTO runs(seq, run_id, trainer, schemas, backend, params, status, "
                       "created_at, auto) VALUES (?,?,?,?,?,?,?,?,?)",
                       [(i, "r%d" % i, extra.get("trainer", "t"), "[]", "local", "{}",
                         extra.get("status", "success"), float(i), extra.get("auto", 0))
                        for i in range(1, n + 1)])


def test_create_queues_a_run_with_its_values(rs):
    r = rs.create("tfidf", ["sentiment", "topic"], "local", {"C": 1.5})
    assert (r.seq, r.run_id, r.trainer, r.schemas, r.backend, r.params) == (
        1, "r1", "tfidf", ["sentiment", "topic"], "local", {"C": 1.5})
    assert r.status == "queued" and r.step == "waiting for its turn"
    assert r.auto is False and r.created_at > 0 and r.in_use == []
    r2 = rs.create("bert", ["sentiment"], "ssh", {}, auto=True)
    assert (r2.seq, r2.run_id, r2.auto) == (2, "r2", True)


def test_dataclass_defaults_are_a_fresh_rows_values(store, rs):
    with store.tx() as db:
        db.execute("INSERT INTO runs(seq, run_id, trainer, schemas, backend, params, status, "
                   "created_at) VALUES (7, 'r7', 't', '[\"s\"]', 'local', '{}', 'queued', 5.0)")
    built = Run(seq=7, run_id="r7", trainer="t", schemas=["s"], backend="local", params={},
                status="queued", created_at=5.0)
    assert rs.get("r7") == built
    assert Run(1, "r1", "t", [], "b", {}, "queued").created_at == 0.0
    assert COLUMNS == tuple(f.name for f in dataclasses.fields(Run))[:-1]
    assert "in_use" not in COLUMNS and "note" in COLUMNS


def test_get_unknown_and_in_use(store, rs):
    assert rs.get("r9") is None
    rs.create("t", ["a", "b"], "local", {})
    rs.create("t", ["a"], "local", {})
    with store.tx() as db:
        db.execute("INSERT INTO in_use(scheme, run_id) VALUES ('a', 'r1'), ('b', 'r1')")
    assert sorted(rs.get("r1").in_use) == ["a", "b"]
    assert rs.get("r2").in_use == []
    assert rs.in_use_schemes() == {"r1": ["a", "b"]} or rs.in_use_schemes() == {"r1": ["b", "a"]}
    assert [r.run_id for r in rs.list()] == ["r2", "r1"]
    assert sorted(rs.list()[1].in_use) == ["a", "b"] and rs.list()[0].in_use == []
    assert sorted(rs.find()[1].in_use) == ["a", "b"]
    assert [sorted(r.in_use) for r in rs.with_status("queued")] == [["a", "b"], []]


def test_every_json_field_round_trips(rs):
    rs.create("t", ["s"], "local", {"k": [1, 2]})
    values = {"metrics": {"acc": 0.5}, "holdout": {"n": 3},
              "writeback": WriteBack(written=2, schemes=["s"], took_over={"s": "why"}),
              "progress": {"epoch": 1}, "history": [{"loss": 1.0}], "placement": {"host": "h"},
              "warnings": ["w1"], "schemas": ["s", "u"], "params": {"C": 2}}
    assert rs.update("r1", **values) is True
    r = rs.get("r1")
    for k, v in values.items():
        assert getattr(r, k) == v, k
    assert set(JSON_FIELDS) == set(values)
    assert rs.update("r1", step="epoch 1", ran_on="here", progress=None) is True
    r = rs.get("r1")
    assert (r.step, r.ran_on, r.progress) == ("epoch 1", "here", None)


def test_a_write_back_is_kept_as_its_json_and_read_back_as_a_record(rs, store):
    """The column holds the JSON it always held; a record written before a key existed (or
    with one since dropped) still reads, the missing counts as empty."""
    rs.create("t", ["s"], "local", {})
    wb = WriteBack(written=3, below_min_confidence=1, schemes=["s"], min_confidence=0.5,
                   by_label={"pos": 3}, in_use=["s"])
    assert rs.finish("r1", "success", writeback=wb)
    stored = store.conn().execute("SELECT writeback FROM runs WHERE run_id='r1'").fetchone()[0]
    assert json.loads(stored) == {
        "written": 3, "below_min_confidence": 1, "unlabeled_skipped": 0, "schemes": ["s"],
        "min_confidence": 0.5, "by_label": {"pos": 3}, "in_use": ["s"], "kept_in_use": {},
        "took_over": {}}
    assert rs.get("r1").writeback == wb
    rs.create("t", ["s"], "local", {})
    with store.tx() as db:
        db.execute("UPDATE runs SET writeback=? WHERE run_id='r2'", (json.dumps(
            {"written": 4, "schemes": ["s"], "min_confidence": 1, "later": "key"}),))
    old = rs.get("r2").writeback
    assert old == WriteBack(written=4, schemes=["s"], min_confidence=1)
    assert "%s" % old.min_confidence == "1"  # quoted as it was configured
    assert rs.get("r1").writeback is not None and rs.create("t", ["s"], "local", {}) \
        .writeback is None


def test_update_never_the_status_nor_a_finished_run(rs):
    rs.create("t", ["s"], "local", {})
    with pytest.raises(ValueError, match="transition"):
        rs.update("r1", status="running")
    assert rs.update("r1") is False
    assert rs.update("r1", step="x") is True and rs.get("r1").step == "x"
    assert rs.transition("r1", "queued", "running", started_at=3.0)
    assert rs.update("r1", step="y") is True and rs.get("r1").step == "y"
    assert rs.update("r9", step="y") is False
    assert rs.finish("r1", "success")
    assert rs.update("r1", step="z") is False and rs.get("r1").step == "y"


def test_transition_is_compare_and_set(rs):
    rs.create("t", ["s"], "local", {})
    assert rs.transition("r1", "running", "success") is False
    assert rs.get("r1").status == "queued"
    assert rs.transition("r1", "queued", "running", step="go", progress={"p": 1},
                         holdout=None) is True
    r = rs.get("r1")
    assert (r.status, r.step, r.progress, r.holdout) == ("running", "go", {"p": 1}, None)
    assert rs.transition("r1", "queued", "running") is False


def test_finish_once_with_its_error_and_forgets_the_token(rs):
    rs.create("t", ["s"], "local", {})
    rs.update("r1", remote_token="abc", remote_host="h")
    assert rs.get("r1").remote_token == "abc"
    assert rs.finish("r1", "error", "it broke", metrics={"acc": 1}, step="done") is True
    r = rs.get("r1")
    assert (r.status, r.error, r.metrics, r.step, r.remote_token, r.remote_host) == (
        "error", "it broke", {"acc": 1}, "done", None, "h")
    assert r.finished_at is not None and r.finished_at > 0
    assert rs.finish("r1", "success") is False
    assert (rs.get("r1").status, rs.get("r1").error) == ("error", "it broke")
    rs.create("t", ["s"], "local", {})
    assert rs.finish("r2", "cancelled", holdout=None) is True
    assert rs.get("r2").holdout is None and rs.get("r2").error is None
    assert rs.finish("r2", "error") is False


def test_find_filters_and_limits(store, rs):
    rs.create("a", ["s"], "local", {})
    rs.create("b", ["s"], "ssh", {})
    rs.create("a", ["s"], "ssh", {})
    with store.tx() as db:
        db.execute("UPDATE runs SET created_at=seq * 10.0")
    rs.transition("r2", "queued", "running")
    ids = lambda rows: [r.run_id for r in rows]  # noqa: E731
    assert ids(rs.find()) == ["r3", "r2", "r1"]
    assert ids(rs.find(status="running")) == ["r2"]
    assert ids(rs.find(trainer="a")) == ["r3", "r1"]
    assert ids(rs.find(backend="ssh")) == ["r3", "r2"]
    assert ids(rs.find(trainer="a", backend="ssh")) == ["r3"]
    assert ids(rs.find(status="", trainer=None)) == ["r3", "r2", "r1"]
    assert ids(rs.find(since=20.0)) == ["r3", "r2"]
    assert ids(rs.find(until=20.0)) == ["r1"]
    assert ids(rs.find(since=10.0, until=30.0, trainer="a")) == ["r1"]
    assert ids(rs.find(limit=2)) == ["r3", "r2"]
    assert ids(rs.find(limit=1, backend="ssh")) == ["r3"]


def test_default_limits(store, rs):
    _bulk(store, 1001)
    assert len(rs.find()) == 1000 and rs.find()[0].run_id == "r1001"
    assert len(rs.list()) == 200 and rs.list()[-1].run_id == "r802"
    assert len(rs.list(limit=3)) == 3


def test_distinct(rs):
    rs.create("b", ["s"], "ssh", {})
    rs.create("a", ["s"], "local", {})
    rs.create("b", ["s"], "local", {})
    assert rs.distinct("trainer") == ["a", "b"]
    assert rs.distinct("backend") == ["local", "ssh"]
    with pytest.raises(ValueError, match="status"):
        rs.distinct("status")


def test_with_status(rs):
    assert rs.with_status("queued", "running") == []
    for _ in range(3):
        rs.create("t", ["s"], "local", {})
    rs.transition("r2", "queued", "running")
    rs.finish("r3", "success")
    assert [r.run_id for r in rs.with_status("queued", "running")] == ["r1", "r2"]
    assert [r.run_id for r in rs.with_status("success")] == ["r3"]
    assert [r.run_id for r in rs.with_status("running", "success", "error")] == ["r2", "r3"]


def test_append_history_keeps_the_newest_500(rs):
    rs.append_history("r9", {"x": 1})  # no such run: nothing, no error
    rs.create("t", ["s"], "local", {})
    rs.append_history("r1", {"x": 0})
    rs.append_history("r1", {"x": 1}, {"x": 2})
    assert rs.get("r1").history == [{"x": 0}, {"x": 1}, {"x": 2}]
    rs.append_history("r1", *({"x": i} for i in range(3, 502)))
    h = rs.get("r1").history
    assert len(h) == 500 and h[0] == {"x": 2} and h[-1] == {"x": 501}


def test_set_label(rs):
    rs.create("t", ["s"], "local", {})
    rs.set_label("r1", "best", "a note")
    assert (rs.get("r1").name, rs.get("r1").note) == ("best", "a note")
    rs.set_label("r1", "", "")
    assert (rs.get("r1").name, rs.get("r1").note) == (None, None)


def test_last_by_trainer_leaves_out_automatic_runs(store, rs):
    assert rs.last_by_trainer("t") is None
    rs.create("t", ["s"], "local", {"C": 1})
    rs.create("t", ["s"], "local", {"C": 2})
    rs.create("t", ["s"], "local", {"C": 3}, auto=True)
    rs.create("u", ["s"], "local", {"C": 4})
    with store.tx() as db:
        db.execute("INSERT INTO in_use(scheme, run_id) VALUES ('s', 'r2')")
    r = rs.last_by_trainer("t")
    assert (r.run_id, r.params, r.in_use) == ("r2", {"C": 2}, [])


def test_the_terminal_states_are_the_ones_the_queries_treat_as_finished(rs):
    assert runs_mod.TERMINAL == ("success", "error", "cancelled")
    for status in runs_mod.TERMINAL:
        rid = rs.create("t", ["s"], "local", {}).run_id
        assert rs.finish(rid, status) is True and rs.update(rid, step="x") is False
        assert rs.finish(rid, "error") is False
    assert [r[1] for r in rs.finished_newest_first()] == list(reversed(runs_mod.TERMINAL))


def test_finished_newest_first_and_pruning(rs):
    for _ in range(4):
        rs.create("t", ["s"], "local", {})
    rs.finish("r1", "success")
    rs.finish("r2", "error")
    rs.finish("r4", "cancelled")
    assert rs.set_pinned("r1", True) is True
    rs.mark_pruned("r2", "too old")
    rs.mark_pruned("r2", "again")
    got = rs.finished_newest_first()
    assert [g[:3] for g in got] == [("r4", "cancelled", 0), ("r2", "error", 0),
                                    ("r1", "success", 1)]
    assert got[0][3] is None and got[1][3] > 0 and got[2][3] is None
    assert rs.get("r2").pruned_reason == "too old" and rs.get("r2").pruned_at == got[1][3]


def test_last_auto_created(store, rs):
    assert rs.last_auto_created() is None
    rs.create("t", ["s"], "local", {}, auto=True)
    rs.create("t", ["s"], "local", {})
    with store.tx() as db:
        db.execute("UPDATE runs SET created_at=seq * 10.0")
    assert rs.last_auto_created() == 10.0


def test_pinning_only_a_successful_run(rs):
    rs.create("t", ["s"], "local", {})
    rs.create("t", ["s"], "local", {})
    assert rs.pinned("r1") is False and rs.pinned("r9") is False
    assert rs.set_pinned("r1", True) is False and rs.pinned("r1") is False
    rs.finish("r1", "success")
    rs.finish("r2", "error")
    assert rs.set_pinned("r1", True) is True and rs.pinned("r1") is True
    assert rs.get("r1").pinned is True
    assert rs.set_pinned("r2", True) is False and rs.set_pinned("r9", True) is False
    assert rs.set_pinned("r1", False) is True and rs.pinned("r1") is False
    assert rs.get("r1").pinned is False and rs.get("r1").cancel_requested is False


def test_runs_in_use_and_kept_predictions(store, rs):
    assert rs.runs_in_use() == set()
    with store.tx() as db:
        db.execute("INSERT INTO predictions VALUES ('i1', 's', '\"a\"', 0.9, 'r1'), "
                   "('i2', 's', '\"a\"', 0.9, 'r1')")
        db.execute("INSERT INTO in_use(scheme, run_id) VALUES ('u', 'r2')")
        db.execute("INSERT INTO run_predictions VALUES ('r3', 'i1', 's', '\"a\"', 0.5), "
                   "('r3', 'i2', 's', '\"a\"', 0.5), ('r3', 'i1', 'u', '\"b\"', 0.5)")
    assert rs.runs_in_use() == {"r1", "r2"}
    assert rs.kept_predictions("r3", "s") == 2 and rs.kept_predictions("r3", "u") == 1
    assert rs.kept_predictions("r1", "s") == 0


def test_latest_success(store, rs):
    assert rs.latest_success("a") is None
    rs.create("t", ["a", "b"], "local", {})
    rs.create("x", ["a"], "local", {})
    rs.create("t", ["b"], "local", {})
    rs.create("t", ["a"], "local", {})
    for rid in ("r1", "r2", "r3"):
        rs.finish(rid, "success")
    with store.tx() as db:
        db.execute("INSERT INTO in_use(scheme, run_id) VALUES ('a', 'r2')")
    r = rs.latest_success("a")
    assert (r.run_id, r.in_use) == ("r2", ["a"])
    assert rs.latest_success("a", exclude_trainers=("x",)).run_id == "r1"
    assert rs.latest_success("b").run_id == "r3"
    assert rs.latest_success("c") is None


def test_request_error():
    e = RequestError(409, "Run r1 is running.")
    assert (e.status, e.message, str(e)) == (409, "Run r1 is running.", "Run r1 is running.")


OLD = """CREATE TABLE runs (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT UNIQUE NOT NULL,
    trainer TEXT NOT NULL, schemas TEXT NOT NULL, backend TEXT NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL, step TEXT NOT NULL DEFAULT '', error TEXT, metrics TEXT, holdout TEXT,
    writeback TEXT, progress TEXT, history TEXT NOT NULL DEFAULT '[]', ran_on TEXT,
    artifact_uri TEXT, auto INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, started_at REAL,
    finished_at REAL, heartbeat_at REAL);
INSERT INTO runs(run_id, trainer, schemas, backend, params, status, created_at)
    VALUES ('r1', 't', '["s"]', 'local', '{}', 'success', 1.0);"""


def _columns(path):
    db = sqlite3.connect(path)
    try:
        return {r[1]: r[2:] for r in db.execute("PRAGMA table_info(runs)")}
    finally:
        db.close()


def test_an_old_store_gets_the_new_columns(tmp_path):
    old = str(tmp_path / "old" / "potato.db")
    os.makedirs(os.path.dirname(old))
    db = sqlite3.connect(old)
    db.executescript(OLD)
    db.close()
    s = Store(old)
    try:
        rs = RunStore(s)
        r = rs.get("r1")
        assert (r.pinned, r.placement, r.warnings, r.name, r.note, r.remote_token) == (
            False, None, None, None, None, None)
        assert rs.set_pinned("r1", True) and rs.pinned("r1")
        rs.mark_pruned("r1", "old")
        rs.set_label("r1", "n", "m")
    finally:
        s.close()
    s2 = Store(str(tmp_path / "new.db"))
    try:
        RunStore(s2)
    finally:
        s2.close()
    assert _columns(old) == _columns(str(tmp_path / "new.db"))


class CountingStore(Store):
    txs = 0

    def tx(self):
        self.txs += 1
        return super().tx()


def test_reopening_an_up_to_date_store_writes_nothing(tmp_path):
    s = CountingStore(str(tmp_path / "potato.db"))
    try:
        RunStore(s)
        RunStore(s)
        assert s.txs == 0  # the new schema has every column: nothing to add, no write
    finally:
        s.close()


class RacingStore(Store):
    """Another process adds each missing column just before this one's ALTER does."""

    def tx(self):
        other = sqlite3.connect(self.path)
        try:
            have = {r[1] for r in other.execute("PRAGMA table_info(runs)")}
            for name, kind in runs_mod.ADDED_COLUMNS:
                if name not in have:
                    other.execute("ALTER TABLE runs ADD COLUMN %s %s" % (name, kind))
                    other.commit()
                    break
        finally:
            other.close()
        return super().tx()


def test_a_column_another_process_added_first_is_fine(tmp_path):
    path = str(tmp_path / "potato.db")
    db = sqlite3.connect(path)
    db.executescript(OLD)
    db.close()
    s = RacingStore(path)
    try:
        RunStore(s)
        assert RunStore(s).get("r1").pinned is False
    finally:
        s.close()
    assert set(_columns(path)) == set(COLUMNS)


class LockedStore(Store):
    def tx(self):
        raise sqlite3.OperationalError("database is locked")


def test_another_schema_error_is_raised(tmp_path):
    path = str(tmp_path / "potato.db")
    db = sqlite3.connect(path)
    db.executescript(OLD)
    db.close()
    s = LockedStore(path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            RunStore(s)
    finally:
        s.close()


def test_the_run_an_admin_last_asked_for_leaves_automatic_runs_out(rs):
    assert rs.last_asked() is None
    first = rs.create("text-naive-bayes", ["s"], "gpu", {"alpha": 0.5})
    rs.create("hf-text-classification", ["s"], "local", {}, auto=True)
    got = rs.last_asked()
    assert (got.run_id, got.trainer, got.backend, got.params) == (
        first.run_id, "text-naive-bayes", "gpu", {"alpha": 0.5})
    second = rs.create("hf-text-classification", ["s"], "cluster", {})
    assert rs.last_asked().run_id == second.run_id
