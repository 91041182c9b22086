"""Retention (potato/training/lifecycle/retention.py): which finished runs keep their model files, holds,
and the reason logged. The run store is a stand-in with the queries retention uses. Also the
tests tools/mutation.py runs against the module (docs/testing.md, "Mutation testing")."""

import os
from types import SimpleNamespace as NS

import pytest

from potato.training.lifecycle import retention
from potato.training.lifecycle.retention import Holds


class Runs:
    def __init__(self, finished, in_use=()):
        self.finished, self.in_use, self.marked = list(finished), set(in_use), []

    def runs_in_use(self):
        return self.in_use

    def finished_newest_first(self):
        return self.finished

    def mark_pruned(self, run_id, why):
        self.marked.append((run_id, why))


@pytest.fixture
def tree(tmp_path):
    def make(*run_ids, empty=()):
        for r in run_ids:
            os.makedirs(str(tmp_path / r / "artifacts"))
            if r not in empty:
                (tmp_path / r / "artifacts" / "model.bin").write_bytes(b"m")
        return lambda run_id: NS(artifacts=str(tmp_path / run_id / "artifacts"))
    make.root = tmp_path
    return make


def _exists(tree, run_id):
    return os.path.exists(str(tree.root / run_id / "artifacts"))


def test_holds_count_each_reader():
    h = Holds()
    assert h.held("r1") is False
    h.acquire("r1")
    h.acquire("r1")
    assert h.held("r1") is True and h.held("r2") is False
    h.release("r1")
    assert h.held("r1") is True
    h.release("r1")
    assert h.held("r1") is False
    h.acquire("r1")  # a run let go of can be held again
    assert h.held("r1") is True
    h.release("r1")
    with h.hold("r2"):
        assert h.held("r2") is True
    assert h.held("r2") is False
    with pytest.raises(KeyError):
        with h.hold("r3"):
            raise KeyError("x")
    assert h.held("r3") is False
    # a release without its acquire leaves no negative count: the next reader holds the run
    h.release("r4")
    assert h.held("r4") is False
    h.acquire("r4")
    assert h.held("r4") is True


def test_reason():
    one = retention.reason(1, ["r9", "r8"])
    assert one.startswith("model_training.retain_runs: 1 keeps the model files of the 1 newest "
                          "successful run (r9), of the runs in use")
    two = retention.reason(2, ["r9", "r8", "r7"])
    assert "2 keeps the model files of the 2 newest successful runs (r9, r8), of" in two


def test_a_run_without_model_files_is_not_marked_pruned(tree):
    # r2 has an empty artifacts/, r1 none at all (deleted by hand): neither is marked pruned
    paths = tree("r3", "r2", empty=("r2",))
    runs = Runs([("r3", "success", 0, None), ("r2", "success", 0, None),
                 ("r1", "success", 0, None)])
    log = []
    assert retention.prune(runs, paths, 1, lambda r, line: log.append(r)) == []
    assert runs.marked == [] and log == []
    assert _exists(tree, "r3") and _exists(tree, "r2")


def test_prune_keeps_the_newest_successful_runs(tree):
    paths = tree("r6", "r5", "r4", "r3", "r2", "r1")
    runs = Runs([("r6", "success", 0, None), ("r5", "error", 0, None),
                 ("r4", "success", 0, None), ("r3", "cancelled", 0, None),
                 ("r2", "success", 0, None), ("r1", "success", 0, None)])
    log = []
    assert retention.prune(runs, paths, 2, lambda r, line: log.append((r, line))) == [
        "r3", "r2", "r1"]
    assert [_exists(tree, r) for r in ("r6", "r5", "r4", "r3", "r2", "r1")] == [
        True, True, True, False, False, False]
    why = retention.reason(2, ["r6", "r4"])
    assert runs.marked == [("r3", why), ("r2", why), ("r1", why)]
    assert log == [(r, "model files deleted: " + why) for r in ("r3", "r2", "r1")]


def test_prune_keep_one_and_failed_runs_count_for_nothing(tree):
    paths = tree("r3", "r2", "r1")
    runs = Runs([("r3", "error", 0, None), ("r2", "success", 0, None),
                 ("r1", "success", 0, None)])
    assert retention.prune(runs, paths, 1, lambda r, line: None) == ["r1"]
    assert runs.marked == [("r1", retention.reason(1, ["r2"]))]


def test_prune_spares_pinned_pruned_in_use_held_and_empty(tree):
    paths = tree("r7", "r6", "r5", "r4", "r3", "r2", "r1", empty=("r2",))
    runs = Runs([("r7", "success", 0, None), ("r6", "success", 1, None),
                 ("r5", "success", 0, 12.0), ("r4", "success", 0, None),
                 ("r3", "success", 0, None), ("r2", "success", 0, None),
                 ("r1", "success", 0, None)], in_use={"r4"})
    holds = Holds()
    holds.acquire("r3")
    log = []
    assert retention.prune(runs, paths, 1, lambda r, line: log.append(r), holds) == ["r1"]
    assert [_exists(tree, r) for r in ("r7", "r6", "r5", "r4", "r3", "r2", "r1")] == [
        True, True, True, True, True, True, False]
    assert [r for r, _ in runs.marked] == ["r1"] and log == ["r1"]
    holds.release("r3")
    assert retention.prune(runs, paths, 1, lambda r, line: None, holds) == ["r3"]


def test_prune_with_nothing_to_do(tree):
    paths = tree("r2", "r1")
    runs = Runs([("r2", "success", 0, None), ("r1", "success", 0, None)])
    assert retention.prune(runs, paths, 2, lambda r, line: None) == []
    assert retention.prune(Runs([]), paths, 0, lambda r, line: None) == []
    assert runs.marked == [] and _exists(tree, "r1")


def test_a_failed_delete_is_logged_and_not_marked(tree, monkeypatch):
    paths = tree("r2", "r1")
    runs = Runs([("r2", "success", 0, None), ("r1", "success", 0, None)])

    def refuse(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(retention.shutil, "rmtree", refuse)
    log = []
    assert retention.prune(runs, paths, 1, lambda r, line: log.append((r, line))) == []
    assert runs.marked == []
    art = paths("r1").artifacts
    assert log == [("r1", "could not delete the model files in %s (%s): %s" % (
        art, retention.reason(1, ["r2"]), PermissionError(13, "Permission denied", art)))]


# -- warned of before it happens (issue 35, item 14) ------------------------------------------------

def test_would_prune_names_what_prune_deletes_and_deletes_nothing(tree):
    paths = tree("r1", "r2", "r3", "r4", "r5", empty=("r4",))
    finished = [("r5", "success", 0, None), ("r4", "success", 0, None),
                ("r3", "error", 0, None), ("r2", "success", 1, None),
                ("r1", "success", 0, None)]
    runs = Runs(finished, in_use={"r5"})
    assert retention.would_prune(runs, paths, 1) == ["r3", "r1"]  # r4 empty, r2 pinned
    assert all(_exists(tree, r) for r in ("r1", "r3"))  # nothing deleted
    assert retention.would_prune(runs, paths, 3) == ["r1"]
    assert retention.would_prune(runs, paths, 4) == []
    # what prune then deletes is what it said
    assert retention.prune(runs, paths, 1, lambda r, line: None) == ["r3", "r1"]


def test_the_named_and_annotated_runs_are_the_ones_named():
    records = {"r1": NS(name="baseline", note=None), "r2": NS(name=None, note=None),
               "r3": NS(name=None, note="the one with the long context " * 5)}
    runs = NS(get=records.get)
    words = retention.named_words(runs, ["r1", "r2", "r3", "r9"])
    assert words[0] == "r1 (baseline)" and len(words) == 2
    assert words[1].startswith("r3 (noted: the one with the long context") and len(words[1]) < 80


def test_a_reload_that_lowers_retain_runs_warns_before_it_deletes(tmp_path, serve):
    """The reload notice names the named or annotated runs whose model files the new
    retain_runs would delete, and says to pin them; a pinned one is not named."""
    from tests.helpers import KEY, Client, make_project, start_run, wait_run

    h = {"X-API-Key": KEY}
    path = make_project(tmp_path, "    policy: newest\n  retain_runs: 3")
    _, url = serve(path)
    c = Client(url)
    ids = [wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                                 params={"alpha": a}))["run_id"] for a in (0.5, 1.0, 2.0)]
    for run_id, name in zip(ids, ("first", "second", "third")):
        c.json("POST", "/admin/training/api/runs/%s/label" % run_id, headers=h,
               json_body={"name": name})
    text = open(path).read()
    open(path, "w").write(text.replace("  retain_runs: 3", "  retain_runs: 1"))
    notice = c.get("/admin/training", headers=h).text
    assert "Reloading deletes the model files of named or annotated runs: %s (second), %s "\
           "(first)" % (ids[1], ids[0]) in notice, notice[:3000]
    c.json("POST", "/admin/training/api/runs/%s/pin" % ids[0], headers=h)
    notice = c.get("/admin/training", headers=h).text  # the file itself did not change
    assert "runs: %s (second)" % ids[1] in notice and "(first)" not in notice
    state = c.json("GET", "/admin/training/api/config", headers=h)[1]
    assert state["prunes"] == ["%s (second)" % ids[1]]


def test_goes_next_is_what_the_next_successful_run_prunes(tree):
    paths = tree("r1", "r2", "r3")
    runs = Runs([("r3", "success", 0, None), ("r2", "success", 0, None),
                 ("r1", "success", 0, None)])
    assert retention.would_prune(runs, paths, 2) == ["r1"]
    assert retention.goes_next(runs, paths, 2) == ["r2"]  # the next run makes r2 the third
    assert retention.goes_next(runs, paths, 1) == ["r3"]
    runs.in_use = {"r3"}
    assert retention.goes_next(runs, paths, 1) == []  # in use: it stays
    assert "retain_runs: 2 keeps those of the 2 newest successful runs" in \
        retention.next_sentence(2)
    assert "of the 1 newest successful run," in retention.next_sentence(1)


def test_a_runs_page_warns_before_its_files_go(tmp_path, serve):
    from tests.helpers import KEY, Client, make_project, start_run, wait_run

    h = {"X-API-Key": KEY}
    _, url = serve(make_project(tmp_path, "    policy: newest\n  retain_runs: 2"))
    c = Client(url)
    ids = [wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                                 params={"alpha": a}))["run_id"] for a in (0.5, 1.0)]
    page = c.get("/admin/training/runs/%s" % ids[0], headers=h).text
    assert 'id="files-go-next"' in page and "Pin the run to keep them." in page
    assert 'id="files-go-next"' not in c.get("/admin/training/runs/%s" % ids[1],
                                             headers=h).text  # in use (policy newest)
    c.json("POST", "/admin/training/api/runs/%s/pin" % ids[0], headers=h)
    assert 'id="files-go-next"' not in c.get("/admin/training/runs/%s" % ids[0],
                                             headers=h).text


def test_superseded_is_every_run_retain_runs_lets_go_files_here_or_not():
    # a run whose model files stayed on its GPU host (fetch_artifacts: false) has nothing
    # here to prune, but its kept predictions must go all the same (they grow at every run)
    runs = Runs([("r7", "success", 0, None), ("r6", "failed", 0, None),
                 ("r5", "success", 1, None), ("r4", "success", 0, None),
                 ("r3", "cancelled", 0, None), ("r2", "success", 0, 12.0),
                 ("r1", "success", 0, None)], in_use={"r4"})
    assert retention.superseded(runs, 2) == ["r3", "r2", "r1"]
    assert retention.superseded(runs, 1) == ["r6", "r3", "r2", "r1"]
    assert retention.superseded(runs, 9) == []


def test_the_reason_says_the_kept_predictions_went_too():
    why = retention.reason(1, ["r9", "r8"])
    assert "the run's kept predictions went with them" in why and "Pin a run" in why
