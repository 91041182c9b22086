"""A run's write-back result as a record (potato/training/reports/writeback.py): what
``ingest.write_back`` returns and the views read, stored as the JSON it always was."""

import math

import pytest

from potato.training.reports.writeback import WriteBack

FULL = {"written": 5, "below_min_confidence": 2, "unlabeled_skipped": 1, "schemes": ["s", "t"],
        "min_confidence": 0.5, "by_label": {"pos": 3, "neg": 2}, "in_use": ["s"],
        "kept_in_use": {"t": "r1 stays in use"}, "took_over": {"s": "r2 replaces r1"}}


def test_the_json_round_trips():
    wb = WriteBack.from_dict(FULL)
    assert (wb.written, wb.below_min_confidence, wb.unlabeled_skipped) == (5, 2, 1)
    assert wb.schemes == ["s", "t"] and wb.in_use == ["s"] and wb.by_label["pos"] == 3
    assert wb.as_dict() == FULL and list(wb.as_dict()) == list(FULL)
    assert WriteBack().as_dict() == {
        "written": 0, "below_min_confidence": 0, "unlabeled_skipped": 0, "schemes": [],
        "min_confidence": None, "by_label": {}, "in_use": [], "kept_in_use": {},
        "took_over": {}}


@pytest.mark.parametrize("data", [None, "junk", [], 3, {}, {"unknown": 1},
                                  {"written": "many", "schemes": "s", "by_label": [1],
                                   "in_use": {"s": 1}, "kept_in_use": ["x"],
                                   "min_confidence": True},
                                  {"written": math.nan, "below_min_confidence": math.inf,
                                   "min_confidence": math.nan}])
def test_an_odd_or_old_record_reads_as_empty_never_breaks(data):
    assert WriteBack.from_dict(data) == WriteBack()


def test_counts_and_names_are_read_as_such():
    wb = WriteBack.from_dict({"written": 2.0, "by_label": {"a": 1, 7: "x"}, "schemes": [1],
                              "took_over": {"s": 3}, "min_confidence": 1})
    assert (wb.written, wb.by_label, wb.schemes, wb.took_over) == (
        2, {"a": 1, "7": 0}, ["1"], {"s": "3"})
    assert wb.min_confidence == 1 and "%s" % wb.min_confidence == "1"


def test_why_and_all_below():
    wb = WriteBack.from_dict(FULL)
    assert wb.why == {"s": "r2 replaces r1", "t": "r1 stays in use"}
    assert not wb.all_below
    assert WriteBack(below_min_confidence=3).all_below
    assert not WriteBack(below_min_confidence=3, written=1).all_below
    assert not WriteBack().all_below


def test_predictions_of_a_run_not_in_use_read_as_kept_not_shown():
    wb = WriteBack.from_dict(FULL)  # took over s, not t
    assert wb.kept_words() == "5 predictions written for s; for t kept, not shown (not in use)"
    assert wb.kept_words(["s", "t"]) == "5 predictions written for s, t"
    assert wb.kept_words([]) == "5 predictions kept for s, t, not shown (the run is not in use)"
    one = WriteBack(written=1, schemes=["s"])
    assert one.kept_words() == "1 prediction kept for s, not shown (the run is not in use)"
    assert one.kept_words(["s"]) == "1 prediction written for s"
