"""Fast unit tests for the trust boundary (potato/training/exchange/boundary.py): every field check, its
bounds and the field it names, so that tools/mutation.py's mutants of the module fail."""

import math

import pytest

from potato.training.exchange import boundary as b
from potato.training.exchange.boundary import Invalid


def raises(fn, *args, match=None, **kw):
    with pytest.raises(Invalid) as e:
        fn(*args, **kw)
    if match:
        assert match in str(e.value), str(e.value)
    return str(e.value)


def test_caps():
    assert (b.TEXT_MAX, b.NAME_MAX, b.PATH_MAX, b.TAIL_MAX) == (2000, 100, 500, 4000)
    assert b.BIG == 10 ** 12 and b.MAX_SPANS == 1000
    assert b.LEVELS == ("info", "warning", "error")
    assert b.STATUSES == ("success", "error", "cancelled")


def test_text():
    assert b.text(None, "f") is None
    raises(b.text, None, "fld", required=True, match="fld is missing")
    assert b.text(5, "f") == "5" and b.text(1.5, "f") == "1.5"
    raises(b.text, True, "fld", match="fld must be text, not bool")
    raises(b.text, [1], "fld", match="not list")
    assert b.text("x" * 2000, "f") == "x" * 2000
    cut = b.text("x" * 2001, "f")
    assert cut == "x" * 1999 + "…" and len(cut) == 2000
    assert b.text("abcd", "f", limit=4) == "abcd"
    assert b.text("abcde", "f", limit=4) == "abc…"
    assert b.text("a\ud800b", "f") == "a?b"  # a lone surrogate cannot be stored


def test_number():
    assert b.number(None, "f") is None
    raises(b.number, None, "fld", required=True, match="fld is missing")
    raises(b.number, True, "fld", match="fld must be a number, not bool")
    raises(b.number, "1", "fld", match="not str")
    for bad in (math.nan, math.inf, -math.inf):
        raises(b.number, bad, "fld", match="fld must be a finite number")
    assert b.number(10 ** 12, "f") == 10 ** 12 and b.number(-10 ** 12, "f") == -10 ** 12
    raises(b.number, 10 ** 12 + 1, "fld", match="fld is")
    raises(b.number, -10 ** 12 - 1, "fld", match="outside")
    assert b.number(0, "f", 0, 1) == 0.0 and b.number(1, "f", 0, 1) == 1.0
    raises(b.number, 1.01, "f", 0, 1)
    raises(b.number, -0.01, "f", 0, 1)
    out = b.number(3, "f")
    assert out == 3.0 and isinstance(out, float)
    out = b.number(3.0, "f", integer=True)
    assert out == 3 and isinstance(out, int)
    raises(b.number, 3.5, "fld", integer=True, match="fld must be a whole number")


def test_event_shape_and_type():
    raises(b.event, [], match="an event must be an object")
    raises(b.event, {"type": "nope"}, match="event type 'nope' is not one of status")
    assert b.event({"type": "status", "message": "hi", "t": 5}) == {
        "type": "status", "t": 5.0, "message": "hi"}
    assert b.event({"type": "status", "message": "hi"}) == {"type": "status", "message": "hi"}
    assert b.event({"type": "status", "message": "m", "t": 1e11})["t"] == 1e11
    assert b.event({"type": "status", "message": "m", "t": 0})["t"] == 0.0
    assert b.event({"type": "status", "message": "m", "t": 0.5})["t"] == 0.5
    why = raises(b.event, {"type": "x" * 60})
    assert why.startswith("event type '%s' is not one of " % ("x" * 40))
    raises(b.event, {"type": "status", "message": "m", "t": 1e11 + 1}, match="t is")
    raises(b.event, {"type": "status", "message": "m", "t": -1}, match="t is")
    raises(b.event, {"type": "status"}, match="message is missing")
    assert b.event({"type": "status", "message": "x" * 3000})["message"].endswith("…")


def test_progress_event():
    ev = b.event({"type": "progress", "current": 3, "total": 10, "unit": "step", "eta_s": 5,
                  "epoch": 2})
    assert ev == {"type": "progress", "current": 3, "total": 10, "unit": "step", "eta_s": 5.0,
                  "epoch": 2}
    assert isinstance(ev["current"], int) and isinstance(ev["total"], int)
    assert b.event({"type": "progress", "current": 10, "total": 10})["current"] == 10
    raises(b.event, {"type": "progress", "current": 11, "total": 10},
           match="current (11) is more than total (10)")
    assert b.event({"type": "progress", "current": 11}) == {"type": "progress", "current": 11}
    raises(b.event, {"type": "progress"}, match="current is missing")
    raises(b.event, {"type": "progress", "current": -1}, match="current is")
    raises(b.event, {"type": "progress", "current": 1.5}, match="current must be a whole")
    raises(b.event, {"type": "progress", "current": 1, "total": -1}, match="total is")
    raises(b.event, {"type": "progress", "current": 1, "total": 2.5}, match="total must be a whole")
    raises(b.event, {"type": "progress", "current": 1, "total": 10 ** 12 + 1}, match="total is")
    assert b.event({"type": "progress", "current": 10 ** 12})["current"] == 10 ** 12
    assert b.event({"type": "progress", "current": 0, "total": 0, "epoch": 0, "eta_s": 0}) == {
        "type": "progress", "current": 0, "total": 0, "epoch": 0, "eta_s": 0.0}
    raises(b.event, {"type": "progress", "current": 10 ** 12 + 1}, match="current is")
    unit = b.event({"type": "progress", "current": 1, "unit": "u" * 150})["unit"]
    assert unit == "u" * 99 + "…"
    raises(b.event, {"type": "progress", "current": 1, "unit": {}}, match="unit must be text")
    raises(b.event, {"type": "progress", "current": 1, "eta_s": -1}, match="eta_s is")
    raises(b.event, {"type": "progress", "current": 1, "eta_s": 1e9 + 1}, match="eta_s is")
    assert b.event({"type": "progress", "current": 1, "eta_s": 1e9})["eta_s"] == 1e9
    raises(b.event, {"type": "progress", "current": 1, "epoch": -1}, match="epoch is")
    raises(b.event, {"type": "progress", "current": 1, "epoch": 1e6 + 1}, match="epoch is")
    raises(b.event, {"type": "progress", "current": 1, "epoch": 0.5}, match="epoch must be a whole")
    assert b.event({"type": "progress", "current": 1, "epoch": 1e6})["epoch"] == 10 ** 6


def test_metric_event():
    ev = b.event({"type": "metric", "name": "f1", "value": 0.5, "epoch": 1, "step": 7,
                  "split": "dev", "scheme": "s"})
    assert ev == {"type": "metric", "name": "f1", "value": 0.5, "epoch": 1, "step": 7,
                  "split": "dev", "scheme": "s"}
    raises(b.event, {"type": "metric", "value": 1}, match="name is missing")
    raises(b.event, {"type": "metric", "name": "n"}, match="value is missing")
    assert b.event({"type": "metric", "name": "n", "value": -10 ** 12})["value"] == -10 ** 12
    raises(b.event, {"type": "metric", "name": "n", "value": 10 ** 13}, match="value is")
    raises(b.event, {"type": "metric", "name": "n", "value": 1, "epoch": -1}, match="epoch is")
    raises(b.event, {"type": "metric", "name": "n", "value": 1, "epoch": 1e6 + 1}, match="epoch")
    raises(b.event, {"type": "metric", "name": "n", "value": 1, "epoch": 1.5}, match="epoch must")
    raises(b.event, {"type": "metric", "name": "n", "value": 1, "step": -1}, match="step is")
    raises(b.event, {"type": "metric", "name": "n", "value": 1, "step": 1.5}, match="step must")
    raises(b.event, {"type": "metric", "name": "n", "value": 1, "step": 10 ** 12 + 1},
           match="step is")
    raises(b.event, {"type": "metric", "name": [], "value": 1}, match="name must be text")
    ev = b.event({"type": "metric", "name": "n", "value": 0, "epoch": 0, "step": 0})
    assert (ev["value"], ev["epoch"], ev["step"]) == (0, 0, 0)
    raises(b.event, {"type": "metric", "name": "n", "value": 1, "split": []},
           match="split must be text")
    raises(b.event, {"type": "metric", "name": "n", "value": 1, "scheme": []},
           match="scheme must be text")
    long = b.event({"type": "metric", "name": "n" * 101, "value": 1, "split": "s" * 101,
                    "scheme": "c" * 101})
    assert len(long["name"]) == len(long["split"]) == len(long["scheme"]) == 100


def test_log_event():
    assert b.event({"type": "log", "message": "m"}) == {"type": "log", "level": "info",
                                                        "message": "m"}
    for level in ("info", "warning", "error"):
        assert b.event({"type": "log", "level": level, "message": "m"})["level"] == level
    raises(b.event, {"type": "log", "level": "debug", "message": "m"},
           match="level must be one of info, warning, error")
    raises(b.event, {"type": "log"}, match="message is missing")


def test_artifact_event():
    ev = b.event({"type": "artifact", "path": "a\x1b[2Jb\u202e.txt", "bytes": 12})
    assert ev == {"type": "artifact", "path": "a[2Jb.txt", "bytes": 12}
    raises(b.event, {"type": "artifact"}, match="path is missing")
    raises(b.event, {"type": "artifact", "path": "p", "bytes": -1}, match="bytes is")
    raises(b.event, {"type": "artifact", "path": "p", "bytes": 1.5}, match="bytes must be")
    raises(b.event, {"type": "artifact", "path": "p", "bytes": 10 ** 12 + 1}, match="bytes is")
    assert len(b.event({"type": "artifact", "path": "p" * 600})["path"]) == 500
    assert b.event({"type": "artifact", "path": "p", "bytes": 0})["bytes"] == 0


def test_result_and_error_events():
    assert b.event({"type": "result", "metrics": {"acc": 1}}) == {"type": "result",
                                                                  "metrics": {"acc": 1.0}}
    assert b.event({"type": "result"}) == {"type": "result", "metrics": {}}
    assert b.event({"type": "error", "message": "boom", "kind": "oom"}) == {
        "type": "error", "message": "boom", "kind": "oom"}
    raises(b.event, {"type": "error"}, match="message is missing")
    raises(b.event, {"type": "error", "message": "m", "kind": []}, match="kind must be text")
    assert len(b.event({"type": "error", "message": "m", "kind": "k" * 200})["kind"]) == 100


def test_where_event():
    ev = b.event({"type": "where", "host": "gpu\n1", "gpus": "0,1", "slurm_job": 12,
                  "slurm_node": "n1", "device": "cuda"})
    assert ev == {"type": "where", "host": "gpu1", "gpus": "0,1", "slurm_job": "12",
                  "slurm_node": "n1", "device": "cuda"}
    assert b.event({"type": "where"}) == {"type": "where"}
    for k in ("host", "gpus", "slurm_job", "slurm_node", "device"):
        raises(b.event, {"type": "where", k: []}, match="%s must be text" % k)
        assert len(b.event({"type": "where", k: "x" * 200})[k]) == 100


def test_plain_and_hidden():
    assert b.plain(None) is None
    assert b.plain("a\tb\u200bc\u202ed") == "abcd"
    assert b.plain("a\u2028b") == "a\u2028b"  # a separator is not dropped by plain
    assert b.plain("héllo wörld") == "héllo wörld"
    assert not b.has_hidden("plain name.txt")
    assert b.plain("a\ud800b") == "ab" and b.has_hidden("a\udfffb")  # lone surrogates
    for ch in ("\n", "\x00", "\u200b", "\u202e", "\u2028", "\u2029"):
        assert b.has_hidden("a%sb" % ch), repr(ch)


def test_metrics():
    assert b.metrics(None) == {}
    raises(b.metrics, [], match="metrics must be an object")
    ok = {"m%d" % i: i for i in range(500)}
    assert len(b.metrics(ok)) == 500
    ok["one more"] = 1
    raises(b.metrics, ok, match="metrics has 501 entries; at most 500")
    out = b.metrics({"a": None, "b": True, "c": False, "d": 2, "e": "t" * 300, "k" * 150: 1})
    assert out["a"] is None and out["b"] is True and out["c"] is False
    assert out["d"] == 2.0 and isinstance(out["d"], float)
    assert out["e"] == "t" * 199 + "…"
    assert "k" * 99 + "…" in out
    raises(b.metrics, {"acc": math.nan}, match="metric acc must be a finite number")
    raises(b.metrics, {"acc": 10 ** 13}, match="metric acc is")
    raises(b.metrics, {"acc": [1]}, match="metric acc must be text")
    raises(b.metrics, {(1, 2): 1}, match="a metric's name must be text, not tuple")


def _result(**kw):
    raw = {"status": "success"}
    raw.update(kw)
    return b.result(raw)


def test_result():
    raises(b.result, [], match="the result must be an object")
    raises(b.result, {"status": "done"}, match="status must be success, error or cancelled")
    for st in ("success", "error", "cancelled"):
        assert b.result({"status": st})["status"] == st
    assert _result() == {"status": "success", "error": None, "exit_code": None,
                         "stderr_tail": None, "artifacts": [], "workdir": None, "host": None,
                         "python": None}
    full = _result(error="e", exit_code=-9, stderr_tail="tail", workdir="/w", host="h",
                   python="3.11", artifacts=[{"path": "m/x.bin", "bytes": 3, "fetched": 1},
                                             {"path": "y"}])
    assert full["exit_code"] == -9 and isinstance(full["exit_code"], int)
    assert full["artifacts"] == [{"path": "m/x.bin", "bytes": 3, "fetched": True},
                                 {"path": "y", "bytes": None, "fetched": False}]
    assert (full["error"], full["stderr_tail"], full["workdir"], full["host"], full["python"]) \
        == ("e", "tail", "/w", "h", "3.11")
    assert _result(exit_code=255)["exit_code"] == 255
    assert _result(exit_code=-255)["exit_code"] == -255
    raises(_result, exit_code=256, match="exit_code is")
    raises(_result, exit_code=-256, match="exit_code is")
    raises(_result, exit_code=1.5, match="exit_code must be a whole")
    assert len(_result(stderr_tail="s" * 5000)["stderr_tail"]) == 4000
    assert len(_result(error="e" * 5000)["error"]) == 2000
    assert len(_result(workdir="w" * 600)["workdir"]) == 500
    assert len(_result(host="h" * 300)["host"]) == 255
    assert len(_result(python="p" * 50)["python"]) == 40
    for k in ("error", "stderr_tail", "workdir", "host", "python"):
        raises(_result, **{k: []}, match="%s must be text" % k)


def test_result_artifacts():
    raises(_result, artifacts="x", match="artifacts must be a list")
    raises(_result, artifacts=[{}] * 100001, match="artifacts must be a list")
    assert len(_result(artifacts=[{"path": "p"}] * 100000)["artifacts"]) == 100000
    raises(_result, artifacts=[{"path": "p"}, "x"], match="artifacts[1] must be an object")
    raises(_result, artifacts=[{"path": "p"}, {}], match="artifacts[1].path is missing")
    raises(_result, artifacts=[{"path": "p"}, {"path": "a\u202eb"}],
           match="artifacts[1].path holds control or format characters")
    raises(_result, artifacts=[{"path": "p"}, {"path": "q", "bytes": -1}],
           match="artifacts[1].bytes is")
    raises(_result, artifacts=[{"path": "p", "bytes": 1.5}], match="artifacts[0].bytes must be")
    raises(_result, artifacts=[{"path": "p", "bytes": 10 ** 12 + 1}], match="artifacts[0].bytes")
    assert len(_result(artifacts=[{"path": "p" * 600}])["artifacts"][0]["path"]) == 500
    assert _result(artifacts=None)["artifacts"] == []


SPLITS = {"a": "train", "b": "test"}
SCHEMAS = {"s": {"type": "radio", "labels": ["pos", "neg"]},
           "m": {"type": "multiselect", "labels": ["x", "y", "z"]},
           "l": {"type": "likert", "labels": [1, 2, 3, 4, 5]},
           "v": {"type": "slider", "min_value": 0, "max_value": 10},
           "n": {"type": "number"},
           "w": {"type": "number", "min_value": -1e16, "max_value": 1e16},
           "sp": {"type": "span", "labels": ["PER", "LOC"]}}
TEXTS = {"a": "Ann lives in Oslo", "b": "x"}


def pred(label, scheme="s", conf=0.5, item="a", split=None, texts=TEXTS):
    return b.prediction({"id": item, "split": split or SPLITS.get(item, "train"),
                         "scheme": scheme, "label": label, "confidence": conf},
                        SPLITS, SCHEMAS, texts)


def test_prediction_row():
    assert pred("pos") == {"id": "a", "split": "train", "scheme": "s", "label": "pos",
                           "confidence": 0.5}
    raises(b.prediction, [], SPLITS, SCHEMAS, match="a prediction must be an object")
    raises(pred, "pos", item="zz", match='id "zz" is not an item of the run\'s bundle')
    raises(b.prediction, {"id": 5}, SPLITS, SCHEMAS, match="id 5 is not an item")
    raises(pred, "pos", split="test", match='split "test" is not item a\'s split (train)')
    raises(pred, "pos", scheme="q", match='scheme "q" is not a scheme of the run')
    raises(pred, "pos", conf=None, match="confidence is missing")
    raises(pred, "pos", conf=1.01, match="confidence is")
    raises(pred, "pos", conf=-0.1, match="confidence is")
    assert pred("pos", conf=0)["confidence"] == 0.0 and pred("pos", conf=1)["confidence"] == 1.0


def test_prediction_labels_per_kind():
    raises(pred, "other", match="label \"other\" is not one of s's labels (pos, neg)")
    raises(pred, 1, match="label 1 is not one of s's labels")
    assert pred(["x", "z"], "m")["label"] == ["x", "z"]
    assert pred([], "m")["label"] == []
    for bad in ("x", ["x", "x"], ["x", "w"], ["x", 1]):
        raises(pred, bad, "m", match="is not a set of m's labels (x, y, z)")
    assert pred(3, "l")["label"] == 3
    out = pred(4.0, "l")["label"]
    assert out == 4 and isinstance(out, int)
    for bad in (3.5, "3", True, 0, 6):
        raises(pred, bad, "l", match="is not a point of l's scale (1 to 5)")
    assert pred(10, "v")["label"] == 10 and pred(0, "v")["label"] == 0
    assert isinstance(pred(2.0, "v")["label"], int) and pred(2.5, "v")["label"] == 2.5
    raises(pred, 10.5, "v", match="label is")
    raises(pred, -0.5, "v", match="label is")
    raises(pred, None, "v", match="label is missing")
    assert pred(1e15, "n")["label"] == 10 ** 15 and pred(-1e15, "n")["label"] == -10 ** 15
    raises(pred, 1.1e15, "n", match="label is")
    raises(pred, -1.1e15, "n", match="label is")
    big = pred(2.0 ** 53, "w")["label"]
    assert big == 2.0 ** 53 and isinstance(big, float)
    assert isinstance(pred(2.0 ** 53 - 1, "w")["label"], int)
    assert isinstance(pred(-(2.0 ** 53 - 1), "w")["label"], int)
    assert isinstance(pred(-(2.0 ** 53), "w")["label"], float)


def span(s, e, label="PER", conf=0.9, **kw):
    d = {"start": s, "end": e, "label": label, "confidence": conf}
    d.update(kw)
    return d


def test_span_predictions():
    out = pred([span(13, 17, "LOC"), span(0, 3)], "sp")["label"]
    assert out == [{"start": 0, "end": 3, "label": "PER", "text": "Ann", "confidence": 0.9},
                   {"start": 13, "end": 17, "label": "LOC", "text": "Oslo", "confidence": 0.9}]
    assert pred([span(0, 3, text="forged")], "sp")["label"][0]["text"] == "Ann"
    assert pred([span(0, 17)], "sp")["label"][0]["end"] == 17
    assert pred([span(0, 3), span(3, 5)], "sp")["label"][1]["start"] == 3  # touching is fine
    raises(pred, [span(0, 3)], "sp", texts=None, match="span predictions for sp need the item's")
    raises(pred, [span(0, 3)], "sp", texts={}, match="need the item's text")
    raises(pred, "x", "sp", match='label "x" is not a list of spans of sp')
    raises(pred, [span(0, 18)], "sp", match="span 1 end is")
    raises(pred, [span(-1, 2)], "sp", match="span 1 start is")
    raises(pred, [span(0, 1), span(1.5, 2)], "sp", match="span 2 start must be a whole")
    raises(pred, [span(0, 1.5)], "sp", match="span 1 end must be a whole")
    raises(pred, [{"end": 2, "label": "PER", "confidence": 1}], "sp",
           match="span 1 start is missing")
    raises(pred, [{"start": 0, "label": "PER", "confidence": 1}], "sp",
           match="span 1 end is missing")
    raises(pred, [span(3, 3)], "sp", match="span 1: start 3 is not before end 3")
    raises(pred, [span(4, 3)], "sp", match="start 4 is not before end 3")
    raises(pred, [span(0, 3, "ORG")], "sp",
           match='span 1: label "ORG" is not one of sp\'s labels (PER, LOC)')
    raises(pred, [span(0, 3, conf=None)], "sp", match="span 1 confidence is missing")
    raises(pred, [span(0, 3, conf=2)], "sp", match="span 1 confidence is")
    raises(pred, [span(0, 3, extra=1)], "sp", match="span 1 must be an object of start, end")
    raises(pred, ["x"], "sp", match="span 1 must be an object")
    raises(pred, [span(0, 5), span(2, 8)], "sp", match="spans 0..5 and 2..8 overlap")
    raises(pred, [span(2, 8), span(0, 5)], "sp", match="spans 0..5 and 2..8 overlap")
    long = "y" * 3000
    many = [span(i, i + 1) for i in range(1000)]
    assert len(b.span_label(many, long, "sp", ["PER"])) == 1000
    raises(b.span_label, many + [span(1000, 1001)], long, "sp", ["PER"],
           match="1001 spans for one item of sp; at most 1000")


def test_predictions_file():
    lines = ['{"id": "a", "split": "train", "scheme": "s", "label": "pos", "confidence": 1}',
             "", "   ",
             '{"id": "b", "split": "test", "scheme": "s", "label": "neg", "confidence": 0}']
    rows, why = b.predictions(lines, SPLITS, SCHEMAS, TEXTS)
    assert why is None and [r["id"] for r in rows] == ["a", "b"]
    rows, why = b.predictions(lines + [lines[0], "nope", lines[3]], SPLITS, SCHEMAS, TEXTS)
    assert rows == []
    assert why == ("predictions.jsonl line 5: item a has a second prediction for s "
                   "(3 of 5 lines are invalid); nothing was written back")
    assert b.predictions([], SPLITS, SCHEMAS) == ([], None)
    row = '{"id": "a", "split": "train", "scheme": "s", "label": "pos", "confidence": NaN}'
    rows, why = b.predictions([row], SPLITS, SCHEMAS)
    assert rows == [] and "line 1: not JSON (NaN is not a number JSON allows)" in why
    rows, why = b.predictions(["{" * 100000], SPLITS, SCHEMAS)
    assert rows == [] and "line 1: not JSON (" in why
    rows, why = b.predictions(['{"x": '], SPLITS, SCHEMAS)
    assert "line 1: not JSON (Expecting value" in why
    span_row = ('{"id": "a", "split": "train", "scheme": "sp", "confidence": 1, '
                '"label": [{"start": 0, "end": 3, "label": "PER", "confidence": 1}]}')
    rows, why = b.predictions([span_row], SPLITS, SCHEMAS, TEXTS)
    assert why is None and rows[0]["label"][0]["text"] == "Ann"
    rows, why = b.predictions([span_row], SPLITS, SCHEMAS)
    assert "need the item's text" in why


def test_long_values_are_cut_in_messages():
    long = "q" * 100  # json.dumps: a quote, then the q's
    cut80, cut40 = '"' + "q" * 79, '"' + "q" * 39
    why = raises(pred, "pos", item=long)
    assert why == "id %s is not an item of the run's bundle" % cut80
    why = raises(pred, "pos", split=long)
    assert why == "split %s is not item a's split (train)" % cut40
    why = raises(pred, "pos", scheme=long)
    assert why == "scheme %s is not a scheme of the run" % cut80
    assert raises(pred, long).startswith("label %s is not one of" % cut80)
    assert raises(pred, long, "m").startswith("label %s is not a set of" % cut80)
    assert raises(pred, long, "l").startswith("label %s is not a point of" % cut80)
    assert raises(pred, long, "sp").startswith("label %s is not a list of spans" % cut80)
    assert raises(pred, [span(0, 3, long)], "sp").startswith("span 1: label %s is not one"
                                                             % cut80)


def test_artifact_of_zero_bytes():
    assert _result(artifacts=[{"path": "p", "bytes": 0}])["artifacts"][0]["bytes"] == 0


def test_span_ending_at_zero_is_an_empty_span():
    # end 0 is inside the text; the span is empty, and the message says so
    assert raises(pred, [span(0, 0)], "sp") == "span 1: start 0 is not before end 0"


def test_every_label_of_a_multiselect():
    assert pred(["z", "x", "y"], "m")["label"] == ["z", "x", "y"]


def test_number_scheme_bounds_are_exact():
    raises(pred, 1e15 + 1, "n", match="label is")
    raises(pred, -1e15 - 1, "n", match="label is")


def test_hidden_kinds_of_characters():
    # one of each hidden kind: Cc, Cf, Co, Cs, Cn, Zl, Zp
    for ch in ("\x07", "\u200b", "\ue000", "\ud800", "\u0378", "\u2028", "\u2029"):
        assert b.has_hidden("a%sb" % ch), repr(ch)
    for ch in ("\ue000", "\u0378", "\u3164", "\u115f", "\u1160", "\uffa0", "\u2800", "\x7f"):
        assert b.has_hidden("a%sb" % ch), repr(ch)
    for ok in ("a b", "naïve", "日本語.txt", "dir/file-1_2.bin", "\u2801"):
        assert not b.has_hidden(ok), repr(ok)


def test_a_combining_mark_must_follow_a_character():
    assert b.has_hidden("\u0301abc")  # a leading mark
    assert b.has_hidden("dir/\u0301x") and b.has_hidden("dir\\\u0301x")  # a part's first
    assert b.has_hidden("ab/\u20dd")  # an enclosing mark (Me) too
    for ok in ("e\u0301", "ab\u0301/c", "X\u0303", "a/b\u0301"):
        assert not b.has_hidden(ok), repr(ok)


def ranked(label, scheme="s", **extra):
    row = {"id": "a", "split": "train", "scheme": scheme, "label": label, "confidence": 0.6}
    row.update(extra)
    return b.prediction(row, SPLITS, SCHEMAS, TEXTS)


def test_what_active_learning_ranks_by_is_checked_at_the_boundary():
    row = ranked("pos", probabilities={"pos": 0.6, "neg": 0.4}, vector=[1, -2.5, 0])
    assert row["probabilities"] == {"pos": 0.6, "neg": 0.4} and row["vector"] == [1, -2.5, 0]
    assert ranked("pos", probabilities={"pos": 0.6, "neg": 0.395})  # within 0.01 of 1
    assert ranked(3, "l", probabilities={"3": 0.9, "1": 0.1})["probabilities"]["3"] == 0.9
    assert ranked(["x"], "m", probabilities={"x": 0.9, "y": 0.9, "z": 0.2})  # each its own
    assert ranked([], "sp", uncertainty=0.25)["uncertainty"] == 0.25
    assert "probabilities" not in ranked("pos") and "vector" not in ranked("pos")
    for bad, words in (
            ({"pos": 0.6, "other": 0.4}, 'probabilities: "other" is not one of s\'s labels'),
            ({"pos": 0.6, "neg": 0.2}, "probabilities of s sum to 0.8000, not 1"),
            ({"pos": 1.5, "neg": -0.5}, "probability of pos is 1.5, outside 0..1"),
            ({"pos": float("nan"), "neg": 0.5}, "probability of pos must be a finite number"),
            ({"pos": "0.6", "neg": 0.4}, "probability of pos must be a number"),
            ([0.6, 0.4], "probabilities must be an object of s's labels"),
            ({}, "probabilities must be an object of s's labels")):
        raises(ranked, "pos", probabilities=bad, match=words)
    raises(ranked, 3, "l", probabilities={"6": 1.0}, match='"6" is not one of l\'s labels')
    raises(ranked, 5, "v", probabilities={"5": 1.0}, match="probabilities are for choice and")
    for bad, words in (([], "vector must be a list of 1 to 64 numbers"),
                       ([0.0] * 65, "vector must be a list of 1 to 64 numbers"),
                       ("1,2", "vector must be a list"),
                       ([1, float("inf")], "vector value must be a finite number"),
                       ([1, 1e7], "vector value is 10000000.0, outside -1e+06..1e+06"),
                       ([True], "vector value must be a number")):
        raises(ranked, "pos", vector=bad, match=words)
    raises(ranked, "pos", uncertainty=0.5, match="uncertainty is for span schemes")
    raises(ranked, [], "sp", uncertainty=2, match="uncertainty is 2, outside 0..1")
