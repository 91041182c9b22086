"""Annotation kinds over HTTP (a real server on port 0): the JSON API and the annotate form
refuse bad values with a 400 that names the scheme and the problem and store nothing; the admin
export (JSONL, CSV) and `potato annotations import/export` carry every type."""

import csv
import html
import io
import json
import re
import os

import pytest

from potato.commands.cli import main
from tests.helpers import Client

KEY = "test-admin-key-0123456789"
TEXT = "Ana 😀 met Bob in Paris"
CONFIG = """\
annotation_task_name: kinds
data_files: [items.jsonl]
admin_api_key: %s
annotation_schemes:
  - annotation_type: radio
    name: sentiment
    labels: [positive, negative]
  - annotation_type: span
    name: ner
    labels: [PER, LOC]
  - annotation_type: likert
    name: agree
    min_label: no
    max_label: yes
    size: 5
  - annotation_type: slider
    name: temp
    min_value: 0
    max_value: 1
    step: 0.1
  - annotation_type: number
    name: count
    min_value: 0
    max_value: 10
  - annotation_type: text
    name: why
    max_length: 20
  - annotation_type: select
    name: colour
    labels: [red, "=blue"]
    label_requirement: {required: true}
""" % KEY

SPANS = [{"start": 10, "end": 13, "label": "PER", "text": "Bob"},
         {"start": 17, "end": 22, "label": "LOC", "text": "Paris"}]
GOOD = {"sentiment": "positive", "ner": SPANS, "agree": 4, "temp": 0.3, "count": 7,
        "why": "=SUM(A1)", "colour": "=blue"}


@pytest.fixture
def project(write_config):
    return write_config(CONFIG, items=[{"id": "t1", "text": TEXT},
                                       {"id": "t2", "text": "second item"}])


def mine(c, item="t1"):
    status, body = c.json("GET", "/api/annotations/" + item)
    assert status == 200
    return body["labels"]


def test_api_stores_every_kind_and_the_export_carries_it(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    status, body = c.json("POST", "/api/annotations", json_body={"item_id": "t1",
                                                                  "labels": GOOD})
    assert status == 200, body
    assert body["labels"] == GOOD
    admin = Client(url)
    h = {"X-API-Key": KEY}
    rows = {r["scheme"]: r for r in map(json.loads, admin.get("/admin/export.jsonl?rows=label",
                                                               headers=h).text.splitlines())}
    assert {k: r["label"] for k, r in rows.items()} == GOOD
    assert rows["ner"]["aggregated_label"] == SPANS and rows["agree"]["aggregated_label"] == 4
    table = list(csv.DictReader(io.StringIO(admin.get("/admin/export.csv?rows=label", headers=h).text)))
    cells = {r["scheme"]: r["label"] for r in table}
    assert json.loads(cells["ner"]) == SPANS  # spans as JSON in one cell
    assert (cells["agree"], cells["temp"], cells["count"]) == ("4", "0.3", "7")
    assert cells["why"] == "'=SUM(A1)" and cells["colour"] == "'=blue"  # defused formulas
    page = admin.get("/admin", headers=h).text
    assert "points 1 to 5 (no to yes)" in page and "spans of the text: PER, LOC" in page


BAD = [
    ({"ner": [{"start": 0, "end": 99, "label": "PER"}]}, "scheme 'ner' (span): span 1: "
                                                         "start 0 and end 99 must satisfy"),
    ({"ner": [{"start": 0, "end": 3, "label": "ORG"}]}, "'ORG' is not a label"),
    ({"ner": [{"start": 0, "end": 5, "label": "PER"}, {"start": 3, "end": 8, "label": "LOC"}]},
     "overlap"),
    ({"ner": [{"start": 11, "end": 14, "label": "PER", "text": "Bob"}]},
     "is not the text at 11..14"),
    ({"agree": 6}, "scheme 'agree' (likert): takes a whole point from 1 to 5"),
    ({"agree": "4"}, "scheme 'agree' (likert): takes a point"),
    ({"temp": 1e300}, "scheme 'temp' (slider): 1e+300 is too large"),
    ({"temp": 0.35}, "not on the slider's steps"),
    ({"count": 11}, "scheme 'count' (number): 11 is outside 0 to 10"),
    ({"count": True}, "scheme 'count' (number): takes a number"),
    ({"why": "x" * 21}, "scheme 'why' (text): the text has 21 characters; at most 20"),
    ({"why": {"a": 1}}, "scheme 'why' (text): takes text"),
    ({"colour": "green"}, "'green' is not a label of scheme 'colour'"),
]


@pytest.mark.parametrize("labels,message", BAD)
def test_api_refuses_a_bad_value_and_stores_nothing(project, serve, labels, message):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    # a good value alongside: nothing is stored half
    status, body = c.json("POST", "/api/annotations", json_body={
        "item_id": "t1", "labels": dict({"sentiment": "negative"}, **labels)})
    assert status == 400 and message in body["error"], body
    assert mine(c) == {}


def test_api_refuses_nan_infinity_and_deep_nesting(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    for raw in (b'{"item_id": "t1", "labels": {"temp": NaN}}',
                b'{"item_id": "t1", "labels": {"count": Infinity}}',
                b'{"item_id": "t1", "labels": {"count": 1e999}}',
                b'{"item_id": "t1", "labels": {"ner": ' + b"[" * 30000 + b"]" * 30000 + b"}}"):
        r = c.post("/api/annotations", body=raw, headers={"Content-Type": "application/json"})
        assert r.status == 400, r.text
        assert json.loads(r.body)["error"]
    assert mine(c) == {}


def form_for(values, action="next"):
    form = {"item_id": "t1", "position": "0", "action": action}
    for name in ("sentiment", "ner", "agree", "temp", "count", "why", "colour"):
        form["present:" + name] = "1"
    form.update({"label:" + k: v for k, v in values.items()})
    return form


def test_annotate_form_saves_every_kind(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    page = c.get("/annotate").text
    assert 'src="/static/spans.js"' in page and 'data-text="' in page
    r = c.post("/annotate", form=form_for({
        "sentiment": "positive", "ner": json.dumps(SPANS), "agree": "4", "temp": "0.3",
        "count": "7", "why": "line one\r\nline two"[:20], "colour": "=blue"}))
    assert r.status == 303, r.text
    got = mine(c)
    assert got["ner"] == SPANS and got["agree"] == 4 and got["temp"] == 0.3
    assert got["count"] == 7 and got["why"] == "line one\nline two"[:19]
    # the page shows the saved values back
    c.post("/annotate", form={"position": "1", "action": "prev"})
    page = c.get("/annotate").text
    assert 'value="4" data-key="6" checked' in page  # points 1..5 take keys 3..7
    assert '<option value="=blue" selected>' in page
    # empty fields clear their schemes (a radio or Likert group cannot be cleared); a span
    # scheme with nothing marked is kept as the answer "nothing" (review 23.2)
    r = c.post("/annotate", form=form_for({"ner": "[]", "temp": "", "count": "", "why": "",
                                            "colour": "=blue"}))
    assert r.status == 303
    assert mine(c) == {"sentiment": "positive", "ner": [], "agree": 4, "colour": "=blue"}


@pytest.mark.parametrize("field,value,message", [
    ("ner", "[{\"start\": 0, \"end\": 3, \"label\": \"PER\", \"text\": \"An\"}]",
     "is not the text at 0..3"),
    ("ner", "{broken", "scheme 'ner' (span): takes a list of spans"),
    ("agree", "nan", "scheme 'agree' (likert): takes a finite number, not nan"),
    ("agree", "9", "takes a whole point from 1 to 5, not 9"),
    ("temp", "1e999", "takes a finite number"),
    ("count", "99999999999999999999", "too large"),
    ("count", "12abc", "takes a number, not '12abc'"),
])
def test_annotate_form_refuses_a_bad_value_and_stores_nothing(project, serve, field, value,
                                                              message):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    r = c.post("/annotate", form=form_for({"sentiment": "positive", "colour": "red",
                                            field: value}))
    assert r.status == 400 and message in html.unescape(r.text), r.text
    assert mine(c) == {}


def test_a_required_scheme_stops_next_but_not_previous(project, serve):
    _, url = serve(project, training=False)
    c = Client(url)
    c.login("ann")
    r = c.post("/annotate", form=form_for({"sentiment": "positive"}))
    assert r.status == 400 and "scheme 'colour' needs an answer" in html.unescape(r.text)
    assert mine(c) == {}
    assert c.post("/annotate", form=form_for({"sentiment": "positive"}, "prev")).status == 303
    assert mine(c) == {"sentiment": "positive"}


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_import_export_round_trip_of_every_kind(project, tmp_path, capsys):
    given = dict(GOOD, ner=[{k: v for k, v in s.items() if k != "text"} for s in SPANS])
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps(dict(given, id="t1")) + "\n" +
                      json.dumps({"id": "t2", "ner": [{"start": 0, "end": 6, "label": "LOC",
                                                       "text": "second"}]}) + "\n")
    code, out, err = run_cli(capsys, "annotations", "import", project, str(labels),
                             "--annotator", "gold")
    assert code == 0, err
    assert "Imported 8 label(s) on 2 item(s)" in out
    out_file = tmp_path / "out.jsonl"
    assert run_cli(capsys, "annotations", "export", project, "-o", str(out_file))[0] == 0
    rows = {r["id"]: r for r in map(json.loads, out_file.read_text().splitlines())}
    got = {k: v[0]["label"] for k, v in rows["t1"]["labels"].items()}
    assert got == GOOD  # the spans come back with their text
    # the export's values import again unchanged (a second annotator)
    again = tmp_path / "again.jsonl"
    again.write_text(json.dumps(dict(got, id="t1")) + "\n")
    assert run_cli(capsys, "annotations", "import", project, str(again), "--annotator",
                   "copy")[0] == 0


def test_an_import_with_one_bad_row_imports_nothing_and_names_the_line(project, tmp_path,
                                                                       capsys):
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in [
        {"id": "t1", "agree": 2, "ner": SPANS},
        {"id": "t2", "ner": [{"start": 0, "end": 6, "label": "LOC", "text": "SECOND"}]},
        {"id": "t2", "temp": float("nan")},
        {"id": "t1", "why": "x" * 21},
    ]) + "\n")
    code, _, err = run_cli(capsys, "annotations", "import", project, str(labels),
                           "--annotator", "gold")
    assert code == 1
    assert f"{labels}: line 2: scheme 'ner' (span): span 1: its text 'SECOND'" in err
    assert f"{labels}: line 3: scheme 'temp' (slider): takes a finite number" in err
    assert f"{labels}: line 4: scheme 'why' (text): the text has 21 characters" in err
    assert "nothing imported: 3 problem(s)" in err
    _, out, _ = run_cli(capsys, "annotations", "export", project)
    assert all(json.loads(line)["labels"] == {} for line in out.splitlines())


def test_trainers_refuse_kinds_they_cannot_train_and_the_pages_show_every_kind(project, serve):
    _, url = serve(project)
    admin = Client(url)
    h = {"X-API-Key": KEY}
    for trainer, scheme, kind in (("text-naive-bayes", "ner", "span"),
                                  ("hf-text-regression", "agree", "likert"),
                                  ("text-naive-bayes", "temp", "slider"),
                                  ("text-naive-bayes", "why", "text"),
                                  ("text-naive-bayes", "count", "number")):
        status, body = admin.json("POST", "/admin/training/api/runs", headers=h, json_body={
            "trainer": trainer, "schemas": [scheme]})
        assert status == 400, body
        assert f"cannot train {kind} scheme {scheme}" in body["error"]
    # naive Bayes takes a Likert scheme (classes over its points): here it has no labels yet
    status, body = admin.json("POST", "/admin/training/api/runs", headers=h, json_body={
        "trainer": "text-naive-bayes", "schemas": ["agree"]})
    assert status == 400 and body["error"].startswith(
        "Scheme agree has 0 labelled items with 1; 0 labelled items with 2;")
    assert admin.get("/admin/training", headers=h).status == 200
    assert admin.get("/admin", headers=h).status == 200


def test_bundle_and_refusal_read_every_value_shape(project, serve):
    """A run on a choice scheme of a project whose other schemes hold spans and numbers, with
    several annotators (the majority vote compares span lists whole): the bundle is built."""
    from potato.training.lifecycle import prepare
    from potato.training.remote.paths import RunPaths
    from potato.training.core.runs import Run

    server, url = serve(project, training=False)
    store, cfg = server.app.store, server.app.config
    for who in ("ann", "bob", "cy"):
        store.save_labels(who, "t1", dict(GOOD, sentiment="positive" if who != "cy"
                                          else "negative"))
    assert prepare.refusal(cfg, store, ["ner", "agree", "temp", "why"]) is not None
    paths = RunPaths(str(tmp_run_dir(cfg)))
    log = []
    run = Run(seq=1, run_id="r1", trainer="t", schemas=["sentiment", "ner"], backend="local",
              params={}, status="running")
    outcome = prepare.prepare(cfg, store, run, paths, prepare.Destination(local=True),
                              log.append, log.append)
    assert outcome is None or "train split" in outcome.error
    assert any("bundle:" in line for line in log)
    with open(os.path.join(paths.bundle, "manifest.json")) as f:
        manifest = json.load(f)
    assert manifest["label_counts"] == {"sentiment": {"positive": 1}, "ner": {"LOC+PER": 1}}


def test_annotators_who_marked_nothing_count_in_the_span_vote(project, serve):
    """Review 23.2: an empty span list was dropped, so an item most annotators left unmarked
    trained on the one annotator who marked something, and an item nobody marked had no label."""
    from potato.training.lifecycle import prepare
    from potato.training.remote import bundle
    from potato.training.remote.paths import RunPaths
    from potato.training.core.runs import Run

    server, url = serve(project, training=False)
    store, cfg = server.app.store, server.app.config
    for who, ner in (("ann", "[]"), ("bob", ""), ("cy", json.dumps(SPANS))):
        c = Client(url)
        c.login(who)
        if who == "ann":  # paging back past an item is no answer
            assert c.post("/annotate", form=form_for({"ner": "[]"}, "prev")).status == 303
            assert "ner" not in mine(c)
        assert c.post("/annotate", form=form_for({"ner": ner, "colour": "red"})).status == 303
        assert mine(c)["ner"] == ([] if who != "cy" else SPANS)
        status, body = c.json("POST", "/api/annotations",
                              json_body={"item_id": "t2", "labels": {"ner": []}})
        assert status == 200 and body["labels"] == {"ner": []}
    paths = RunPaths(str(tmp_run_dir(cfg)))
    run = Run(seq=1, run_id="r1", trainer="t", schemas=["ner"], backend="local",
              params={}, status="running")
    prepare.prepare(cfg, store, run, paths, prepare.Destination(local=True), lambda _: None,
                    lambda _: None)
    got = {it["id"]: it["labels"] for it in bundle.read(paths.bundle).items}
    assert got == {"t1": {"ner": []}, "t2": {"ner": []}}


def tmp_run_dir(cfg):
    path = os.path.join(cfg.output_dir, "runs-test", "r1")
    os.makedirs(path, exist_ok=True)
    return path


# -- long answers (issue 34, item 2) -------------------------------------------------------------

LONG = """\
annotation_task_name: long answers
data_files: [items.jsonl]
admin_api_key: %s
annotation_schemes:
  - annotation_type: text
    name: summary
    textarea: {on: true}
    max_length: 8000
  - annotation_type: text
    name: notes
    textarea: {on: true}
""" % KEY


def test_long_korean_answers_are_saved_from_the_form_and_the_api(write_config, serve):
    # 8,000 Korean characters are 216 KB as a browser posts them (9 bytes each): over the old
    # 64 KB cap for every annotator. The cap now follows from the schemes' max_length.
    path = write_config(LONG, items=[{"id": "t1", "text": "x"}, {"id": "t2", "text": "y"}])
    _, url = serve(path, training=False)
    c = Client(url)
    c.login("ann")
    summary, notes = "가나다라마바사아" * 1000, "줄 하나\n" * 1000  # 8,000 and 5,000 characters
    form = {"item_id": "t1", "position": "0", "action": "next", "present:summary": "1",
            "present:notes": "1", "label:summary": summary,
            "label:notes": notes.replace("\n", "\r\n")}
    r = c.post("/annotate", form=form)
    assert r.status == 303, r.text
    assert mine(c) == {"summary": summary, "notes": notes}
    # the JSON API, every character escaped (\uXXXX: 6 bytes each)
    body = json.dumps({"item_id": "t2", "labels": {"summary": summary, "notes": notes}},
                      ensure_ascii=True).encode()
    r = c.post("/api/annotations", body=body, headers={"Content-Type": "application/json"})
    assert r.status == 200, r.text
    assert mine(c, "t2") == {"summary": summary, "notes": notes}
    # still bounded: what no save of these schemes can need is refused, and says so
    r = c.post("/api/annotations", body=b" " * (2 << 20),
               headers={"Content-Type": "application/json"})
    assert r.status == 413
    assert "for an annotator's request: what one save of this project's schemes can take" in \
        json.loads(r.body)["error"]


def test_validate_refuses_answers_that_max_body_mb_cannot_carry(write_config, capsys):
    path = write_config(LONG.replace("max_length: 8000", "max_length: 100000") +
                        "server: {max_body_mb: 1}\n", items=[{"id": "t1", "text": "x"}])
    assert main(["validate", path]) == 1
    err = capsys.readouterr().out
    assert "One save of this project's answers can take 1.3 MB" in err, err
    assert "more than server.max_body_mb (1) lets a request carry" in err
    assert "Raise server.max_body_mb to at least 2, or lower max_length (scheme summary " \
           "takes the most)." in err
    # at the default of 16 MB the same schemes are fine
    path = write_config(LONG.replace("max_length: 8000", "max_length: 100000"),
                        name="ok.yaml")
    assert main(["validate", path]) == 0, capsys.readouterr().out


def test_many_spans_over_a_long_item_are_saved(write_config, serve):
    # the hostile review: spans echo their text, so a span save grew past the 64 KB every
    # save may take; the cap now counts the spans' structure and the longest item's text
    text = "가나다 " * 3000  # 12,000 characters
    path = write_config("""\
annotation_task_name: spans
data_files: [items.jsonl]
admin_api_key: %s
annotation_schemes:
  - {annotation_type: span, name: ner, labels: [PERSON, LOCATION]}
""" % KEY, items=[{"id": "t1", "text": text}])
    _, url = serve(path, training=False)
    c = Client(url)
    c.login("ann")
    spans = [{"start": 4 * i, "end": 4 * i + 3, "label": "LOCATION", "text": "가나다"}
             for i in range(1000)]  # the most an item may hold
    form = {"item_id": "t1", "position": "0", "action": "next", "present:ner": "1",
            "label:ner": json.dumps(spans, ensure_ascii=False)}
    r = c.post("/annotate", form=form)
    assert r.status == 303, r.text[:300]
    assert len(mine(c)["ner"]) == 1000
    one = [{"start": 0, "end": 11999, "label": "PERSON", "text": text[:11999]}]
    r = c.post("/api/annotations", body=json.dumps({"item_id": "t1", "labels": {"ner": one}},
                                                   ensure_ascii=True).encode(),
               headers={"Content-Type": "application/json"})
    assert r.status == 200, r.text[:300]


def test_the_admin_page_counts_every_kinds_classes_in_words(project, serve):
    """Issue 35, item 16: a Likert scale's points are counted as a choice's labels are; one
    annotator is "1 annotator"; the page links the runs list; its export links give the rows
    the CLI gives by default (one per item)."""
    server, url = serve(project, training=False)
    server.app.store.save_labels("ann", "t1", GOOD)
    page = Client(url).get("/admin", headers={"X-API-Key": KEY}).text
    assert re.search(r"· 7 labels ·\s+1 annotator</p>", page) and "1 annotators" not in page
    assert "agree: items by majority label" in page
    assert '<th scope="row">4</th><td>1</td>' in page and '<th scope="row">1</th><td>0</td>' \
        in page
    assert 'href="/admin/training/runs"' in page
    assert '<a href="/admin/export.csv" id="export-items-csv" download>' in page
    assert "temp: items by majority label" not in page  # a slider has no classes
