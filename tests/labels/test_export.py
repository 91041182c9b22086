"""One export from the admin page and the CLI (issue 24, item 10): row modes, the same bytes,
file names with the project and the time; the admin page's ties, unlabelled items and
agreement (Cohen's and Fleiss' kappa, checked against scikit-learn and a textbook example)."""

import csv
import http.client
import io
import json
import random
import re
import time

import pytest

from potato.labels import export
from potato.labels.agreement import cohen_kappa, fleiss_kappa, scheme_agreement
from potato.commands.cli import main
from potato.config.settings import load
from potato.project.data import load_items
from potato.project.store import Store
from tests.helpers import KEY, Client, beats_baseline, make_project, start_run, wait_run

H = {"X-API-Key": KEY}
NAME = r"training-test-%ss-\d{8}-\d{6}\.%s"


# -- kappa ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_cohen_kappa_matches_scikit_learn(seed):
    from sklearn.metrics import cohen_kappa_score

    rng = random.Random(seed)
    labels = ["a", "b", "c", "d"][:rng.randint(2, 4)]
    first = [rng.choice(labels) for _ in range(rng.randint(5, 200))]
    second = [x if rng.random() < 0.6 else rng.choice(labels) for x in first]
    assert cohen_kappa(list(zip(first, second))) == pytest.approx(
        cohen_kappa_score(first, second), abs=1e-12)


def test_cohen_kappa_by_hand_and_when_undefined():
    # 50 items: both yes 20, both no 15, yes/no 5, no/yes 10 (a common textbook table):
    # p_o = 0.7, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.4.
    pairs = [("y", "y")] * 20 + [("n", "n")] * 15 + [("y", "n")] * 5 + [("n", "y")] * 10
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([]) is None and cohen_kappa([("a", "a")] * 3) is None


def test_fleiss_kappa_on_the_textbook_example():
    """Fleiss (1971) as worked on Wikipedia: 10 subjects, 14 raters, 5 categories, kappa 0.210
    (P-bar 0.378, P-e-bar 0.213)."""
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
             [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
             [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert round(fleiss_kappa(table), 3) == 0.210
    assert fleiss_kappa([[3, 0], [0, 3]]) == pytest.approx(1.0)
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # one category throughout
    assert fleiss_kappa([[2, 1], [1, 1]]) is None  # not the same number of raters


def test_scheme_agreement_groups_items_by_their_annotators():
    votes = {"i1": {"ann": "p", "bob": "p"}, "i2": {"ann": "p", "bob": "n"},
             "i3": {"ann": "n", "bob": "n"}, "i4": {"ann": "p", "cy": "n"},
             "i5": {"ann": "p", "bob": "p", "cy": "n"}, "i6": {"ann": "n", "bob": "n", "cy": "n"},
             "i7": {"ann": "p"}}
    out = scheme_agreement(votes)
    assert out["ties"] == 2  # i2 and i4
    assert [(c["annotators"], c["items"]) for c in out["cohen"]] == [
        (["ann", "bob"], 3), (["ann", "cy"], 1)]
    assert out["cohen"][0]["kappa"] == pytest.approx(cohen_kappa(
        [("p", "p"), ("p", "n"), ("n", "n")]))
    assert out["fleiss"]["annotators_per_item"] == 3 and out["fleiss"]["items"] == 2
    assert out["fleiss"]["kappa"] == pytest.approx(fleiss_kappa([[1, 2], [3, 0]]))


# -- the export ----------------------------------------------------------------------------------

def _cli(capsys, *args):
    capsys.readouterr()
    code = main(["annotations", "export", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_page_and_cli_give_the_same_export_in_both_row_modes(tmp_path, serve, capsys):
    cfg = make_project(tmp_path)
    _, url = serve(cfg)
    c = Client(url)
    assert wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))[
        "status"] == "success"
    for rows in ("label", "item"):
        for fmt in ("jsonl", "csv"):
            r = c.get(f"/admin/export.{fmt}?rows={rows}", headers=H)
            assert r.status == 200
            name = re.fullmatch(r'attachment; filename="(.*)"',
                                r.getheader("Content-Disposition")).group(1)
            assert re.fullmatch(NAME % (rows, fmt), name), name
            out = tmp_path / f"cli-{rows}.{fmt}"
            code, _, err = _cli(capsys, cfg, "--rows", rows, "--format", fmt, "-o", str(out))
            assert code == 0, err
            assert out.read_bytes() == r.body, (rows, fmt)  # the same bytes
            # Into a folder: the page's file name.
            folder = tmp_path / f"into-{rows}-{fmt}"
            folder.mkdir()
            assert _cli(capsys, cfg, "--rows", rows, "--format", fmt, "-o", str(folder))[0] == 0
            written, = folder.iterdir()
            assert re.fullmatch(NAME % (rows, fmt), written.name)
            assert written.read_bytes() == r.body
    # One row per item carries the model's prediction and its confidence.
    items = [json.loads(x) for x in c.get("/admin/export.jsonl?rows=item", headers=H).text
             .splitlines()]
    assert len(items) == 2000
    pred = next(i for i in items if i["predictions"])["predictions"]["sentiment"]
    assert pred["label"] in ("positive", "negative") and 0 < pred["confidence"] <= 1
    table = list(csv.DictReader(io.StringIO(c.get("/admin/export.csv?rows=item", headers=H)
                                            .text)))
    assert list(table[0]) == ["id", "sentiment:labels", "sentiment:aggregated_label",
                              "sentiment:prediction", "sentiment:confidence", "text"]
    labelled = next(r for r in table if r["sentiment:labels"])
    assert json.loads(labelled["sentiment:labels"])["gold"] == \
        labelled["sentiment:aggregated_label"]
    predicted = next(r for r in table if r["sentiment:prediction"])
    assert 0 < float(predicted["sentiment:confidence"]) <= 1
    # The same default rows in both (issue 35, item 16): one row per item.
    assert c.get("/admin/export.jsonl", headers=H).body == \
        c.get("/admin/export.jsonl?rows=item", headers=H).body
    assert _cli(capsys, cfg)[1].encode() == c.get("/admin/export.jsonl", headers=H).body
    r = c.get("/admin/export.csv?rows=<b>", headers=H)
    assert r.status == 400 and "rows must be label" in r.text and "<b>" not in r.text
    r = c.get("/admin/export-upstream.zip", headers=H)
    assert re.fullmatch(r'attachment; filename="training-test-upstream-\d{8}-\d{6}\.zip"',
                        r.getheader("Content-Disposition"))
    assert _cli(capsys, cfg, "--format", "upstream", "-o", str(tmp_path / "up"))[0] == 0
    assert (tmp_path / "up" / "gold" / "annotated_instances.jsonl").is_file()


def test_the_admin_page_counts_ties_unlabelled_and_agreement(tmp_path, serve):
    cfg = make_project(tmp_path, labels=False)
    _, url = serve(cfg, training=False)
    votes = {"ann": {"sst-train-00000": "positive", "sst-train-00001": "positive",
                     "sst-train-00002": "negative", "sst-train-00003": "positive"},
             "<b>ob": {"sst-train-00000": "positive", "sst-train-00001": "negative",
                       "sst-train-00002": "negative", "sst-train-00003": "positive"},
             "cy": {"sst-train-00003": "negative"}}
    for name, labels in votes.items():
        c = Client(url)
        if c.post("/login", form={"username": name}).status != 303:
            name = "bob"  # such a name cannot be made: the page escapes what it shows anyway
            c.login(name)
        for item, label in labels.items():
            assert c.json("POST", "/api/annotations", json_body={
                "item_id": item, "labels": {"sentiment": label}})[0] == 200
    page = Client(url).get("/admin", headers=H).text
    assert ("<b>sentiment</b>: 4 of 2000 items labelled, 1996 unlabelled, 1 tied (no single "
            "most frequent label)") in page
    kappa = cohen_kappa([("positive", "positive"), ("positive", "negative"),
                         ("negative", "negative")])
    assert ("Cohen's κ (ann and bob): %.3f over the 3 item(s) that exactly these two "
            "labelled" % kappa) in page
    assert "Fleiss' κ: not defined (one label throughout) over the 1 item(s) with 3 " \
           "annotators each" not in page  # two labels on that item: defined
    assert "Fleiss' κ: " in page and "over the 1 item(s) with 3 annotators each" in page


def test_the_page_export_is_sent_from_a_file_not_built_in_memory(tmp_path, serve):
    # a 96 MB export took 583 MB: the body, its list of lines and its text at once. Now the
    # rows go to a file with no name in the output folder and are sent from it, so the
    # request allocates about the texts it reads, not several copies of the export.
    import tracemalloc

    from tests.helpers import BASE

    n, width = 1500, 6000
    with open(tmp_path / "items.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": "i%04d" % i, "text": ("t%04d " % i) * (width // 6)}) + "\n")
    with open(tmp_path / "labels.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": "i%04d" % i, "sentiment": "positive"}) + "\n")
    (tmp_path / "config.yaml").write_text(BASE)
    cfg = str(tmp_path / "config.yaml")
    assert main(["annotations", "import", cfg, str(tmp_path / "labels.jsonl"),
                 "--annotator", "gold"]) == 0
    _, url = serve(cfg, training=False)
    c = Client(url)
    H2 = {"X-API-Key": "test-admin-key-0123456789"}
    conn = http.client.HTTPConnection(c.host, c.port, timeout=60)
    tracemalloc.start()
    try:
        conn.request("GET", "/admin/export.jsonl?rows=label", headers=H2)
        r, size = conn.getresponse(), 0
        while True:  # read in blocks: the client holds none of it
            block = r.read(1 << 16)
            if not block:
                break
            size += len(block)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        conn.close()
    assert r.status == 200 and size == int(r.getheader("Content-Length")) > n * width
    assert peak < 1.5 * size, (peak, size)
    assert list((tmp_path / "annotation_output").glob(".export-*")) == []


# -- the export's rows, cells and file names, without a server ----------------------------------

PROJECT = """\
annotation_task_name: {name}
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: radio
    name: sentiment
    labels: [positive, negative]
  - annotation_type: multiselect
    name: aspects
    labels: [plot, acting]
  - annotation_type: span
    name: who
    labels: [person, place]
  - annotation_type: text
    name: note
model_training:
  writeback:
    schemas: [sentiment, who]
    include_unlabeled: true
{more}
"""
TEXTS = {"i0": "=SUM(A1) alice in paris", "i1": "bob", "i2": "-carol", "i3": "dave"}
ALICE = {"start": 9, "end": 14, "label": "person"}


@pytest.fixture
def project(tmp_path):
    """(config, store) of a four-item project with four kinds of scheme, and a labeller."""
    opened = []

    def make(name="Export test", more="", items=TEXTS, text=PROJECT):
        with open(tmp_path / "items.jsonl", "w") as f:
            for k, v in items.items():
                f.write(json.dumps({"id": k, "text": v}) + "\n")
        (tmp_path / "config.yaml").write_text(text.format(name=json.dumps(name), more=more))
        cfg, errors, _ = load(str(tmp_path / "config.yaml"))
        assert not errors, errors
        store = Store(cfg.db_path)
        opened.append(store)
        store.sync_items(load_items(cfg))
        return cfg, store

    yield make
    for store in opened:
        store.close()


def label(store):
    store.save_labels("ann", "i0", {"sentiment": "positive", "aspects": ["plot", "acting"],
                                    "who": [ALICE], "note": "=1+1"})
    store.save_labels("bob", "i0", {"sentiment": "negative", "aspects": ["plot", "acting"]})
    for who, value in (("ann", "negative"), ("bob", "positive"), ("cy", "negative")):
        store.save_labels(who, "i1", {"sentiment": value})
    store.save_labels("ann", "i1", {"who": []})  # nothing to mark: an answer, unlike no label


def lines(data):
    return [json.loads(x) for x in data.decode("utf-8").splitlines()]


def test_one_row_per_label_with_the_time_the_aggregate_and_the_text(project):

    cfg, store = project()
    label(store)
    before = time.time()
    rows = lines(export.build(store, cfg, "label", "jsonl"))
    assert [(r["item_id"], r["scheme"], r["annotator"], r["label"]) for r in rows] == [
        ("i0", "aspects", "ann", ["plot", "acting"]), ("i0", "aspects", "bob", ["plot", "acting"]),
        ("i0", "note", "ann", "=1+1"), ("i0", "sentiment", "ann", "positive"),
        ("i0", "sentiment", "bob", "negative"), ("i0", "who", "ann", [ALICE]),
        ("i1", "sentiment", "ann", "negative"), ("i1", "sentiment", "bob", "positive"),
        ("i1", "sentiment", "cy", "negative"), ("i1", "who", "ann", [])]
    assert [list(r) for r in rows] == [list(export.COLUMNS)] * len(rows)
    assert [r["aggregated_label"] for r in rows] == [
        ["plot", "acting"]] * 2 + [None, None, None, [ALICE]] + ["negative"] * 3 + [[]]
    assert [r["text"] for r in rows] == [TEXTS["i0"]] * 6 + [TEXTS["i1"]] * 4
    for r in rows:  # when it was labelled, in UTC to the second
        when = time.mktime(time.strptime(r["labelled_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        assert before - 2 <= when <= time.time() + 1
    assert export.jsonl(store, cfg) == export.build(store, cfg)  # one row per label by default


def test_the_label_csv_writes_each_kind_its_own_way_and_defuses_formulas(project):

    cfg, store = project()
    label(store)
    data = export.build(store, cfg, "label", "csv")
    assert data.count(b"\r\n") == 11  # CRLF rows, as a CSV file has them
    table = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    assert table[0] == list(export.COLUMNS)
    by = {(r[0], r[1], r[2]): r for r in table[1:]}
    assert by["i0", "aspects", "ann"][3:4] == ["plot;acting"] and by["i0", "aspects", "ann"][5] \
        == "plot;acting"
    assert json.loads(by["i0", "who", "ann"][3]) == [ALICE] == json.loads(by["i0", "who", "ann"][5])
    assert by["i0", "note", "ann"][3] == "'=1+1" and by["i0", "note", "ann"][5] == ""
    assert by["i0", "sentiment", "bob"][3] == "negative" and by["i0", "sentiment", "bob"][5] == ""
    assert {r[6] for r in table[1:] if r[0] == "i0"} == {"'" + TEXTS["i0"]}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", by["i1", "sentiment", "cy"][4])
    assert by["i1", "who", "ann"][3] == "[]" == by["i1", "who", "ann"][5]  # not "" (no label)
    assert [c for r in table[1:] for c in r[:3] + r[4:5] + r[6:]] == \
        [c for r in list(csv.reader(io.StringIO(export.build(store, None, "label", "csv")
                                                .decode())))[1:] for c in r[:3] + r[4:5] + r[6:]]


def test_the_label_time_is_when_it_was_saved_in_utc(project, monkeypatch):
    cfg, store = project()
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: 1772600767.5)  # 2026-03-04 05:06:07.5 UTC
        store.save_labels("ann", "i0", {"sentiment": "positive"})
    [row] = lines(export.build(store, cfg))
    assert row["labelled_at"] == "2026-03-04T05:06:07Z"
    store.import_labels("ann", [("ghost", "sentiment", "negative")])  # an item never loaded
    ghost = lines(export.build(store, cfg))[0]
    assert (ghost["item_id"], ghost["text"]) == ("ghost", "")
    table = list(csv.reader(io.StringIO(export.build(store, cfg, "label", "csv").decode())))
    assert table[1][0] == "ghost" and table[1][6] == ""


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_a_cell_a_spreadsheet_would_run_gets_an_apostrophe(project, start):

    cfg, store = project(items={"i0": start + "1+2 x", "i1": "a" + start})
    store.save_labels("ann", "i0", {"note": start + "cmd", "sentiment": "positive"})
    store.save_labels("ann", "i1", {"note": "ok " + start})
    for rows in ("label", "item"):
        table = list(csv.reader(io.StringIO(export.build(store, cfg, rows, "csv").decode())))
        cells = [c for r in table[1:] for c in r]
        assert "'" + start + "1+2 x" in cells and "'" + start + "cmd" in cells or rows == "item"
        assert not any(c.startswith(start) for c in cells if c), (rows, cells)
        assert "a" + start in cells or start in "\t\r"  # a formula character inside is left
    table = list(csv.reader(io.StringIO(export.build(store, cfg, "item", "csv").decode())))
    assert table[1][0] == "i0" and table[1][-1] == "'" + start + "1+2 x"


def test_the_configured_aggregation_decides_the_export_and_the_page_counts_by_majority(project):

    cfg, store = project(more="  aggregation: consensus")
    label(store)
    for item, votes in (("i0", ("positive", "negative")), ("i1", ("negative", "positive",
                                                                  "negative"))):
        for who, value in zip(("ann", "bob", "cy"), votes):  # a scheme no longer in the config
            store.save_labels(who, item, {"old": value})
    rows = lines(export.build(store, cfg, "label", "jsonl"))
    tied = {r["aggregated_label"] for r in rows if (r["item_id"], r["scheme"]) == ("i0",
                                                                                   "sentiment")}
    assert tied in ({"positive"}, {"negative"})  # Dawid-Skene decides the tie majority leaves
    assert {r["aggregated_label"] for r in rows if r["scheme"] == "old" and r["item_id"] ==
            "i0"} == {None}  # the same votes: the majority vote's tie
    default, store2 = project()
    assert {r["aggregated_label"] for r in lines(export.build(store, default)) if
            (r["item_id"], r["scheme"]) == ("i0", "sentiment")} == {None}
    # the page's counts: always the majority, an item once per label, ties left out
    store.save_labels("ann", "i3", {"who": [ALICE, dict(ALICE, start=0, end=3)],
                                    "sentiment": "negative", "aspects": ["acting"]})
    store.save_labels("bob", "i3", {"who": [ALICE]})  # the spans both marked: ALICE
    assert export.label_counts(cfg, store) == {
        "sentiment": {"positive": 0, "negative": 2}, "aspects": {"plot": 1, "acting": 2},
        "who": {"person": 2, "place": 0}}


def test_a_span_value_with_a_label_the_scheme_lost_is_not_counted(project):

    cfg, store = project()
    store.save_labels("ann", "i0", {"who": [dict(ALICE, label="pet")], "sentiment": "neutral"})
    assert export.label_counts(cfg, store) == {
        "sentiment": {"positive": 0, "negative": 0}, "aspects": {"plot": 0, "acting": 0},
        "who": {"person": 0, "place": 0}}


def test_without_a_config_the_export_takes_every_scheme_by_majority(project):

    cfg, store = project(more="  aggregation: consensus")
    label(store)
    rows = lines(export.build(store, None, "label", "jsonl"))
    assert {r["aggregated_label"] for r in rows if (r["item_id"], r["scheme"]) == (
        "i0", "sentiment")} == {None}
    table = list(csv.reader(io.StringIO(export.build(store, None, "label", "csv").decode())))
    assert [r[3] for r in table[1:] if r[1] == "aspects"] == ["plot;acting"] * 2
    who = [r[3] for r in table[1:] if r[1] == "who"]
    assert json.loads(who[0]) == [ALICE] and who[1] == ""  # [] of an unknown kind: no labels
    items = list(csv.reader(io.StringIO(export.build(store, None, "item", "csv").decode())))
    assert items[0] == ["id"] + ["%s:%s" % (n, c) for n in ("aspects", "note", "sentiment", "who")
                                 for c in export.ITEM_COLUMNS] + ["text"]


def test_one_row_per_item_with_votes_aggregate_and_the_models_prediction(project):
    from potato.training.exchange import ingest

    cfg, store = project()
    label(store)
    wb = ingest.write_back(store, cfg, "r1", [
        {"id": "i1", "split": "unlabeled", "scheme": "sentiment", "label": "negative",
         "confidence": 0.8125},
        {"id": "i2", "split": "unlabeled", "scheme": "sentiment", "label": "positive",
         "confidence": 0.75},
        {"id": "i1", "split": "unlabeled", "scheme": "who", "label": [], "confidence": 0.5}],
        beats_baseline())
    assert wb.written == 3
    store.save_labels("ann", "i3", {"sentiment": "positive"})
    # i3 (labelled) and i2 (not) leave the data files; i4 comes
    store.sync_items([("i0", TEXTS["i0"], {}), ("i1", TEXTS["i1"], {}), ("i4", "eve", {})])
    items = lines(export.build(store, cfg, "item", "jsonl"))
    assert [i["id"] for i in items] == ["i0", "i1", "i4", "i3"]  # the inactive one with labels
    assert items[0]["labels"]["sentiment"] == [{"annotator": "ann", "label": "positive"},
                                               {"annotator": "bob", "label": "negative"}]
    assert items[0]["aggregated_label"] == {"aspects": ["plot", "acting"], "note": None,
                                            "sentiment": None, "who": [ALICE]}
    assert items[1]["predictions"] == {
        "sentiment": {"label": "negative", "confidence": 0.8125, "run_id": "r1"},
        "who": {"label": [], "confidence": 0.5, "run_id": "r1"}}
    assert items[2] == {"id": "i4", "text": "eve", "labels": {}, "aggregated_label": {},
                        "predictions": {}}
    data = export.build(store, cfg, "item", "csv").decode()
    assert data.split("\r\n")[0] == ",".join(
        ["id"] + ["%s:%s" % (n, c) for n in ("sentiment", "aspects", "who", "note")
                  for c in export.ITEM_COLUMNS] + ["text"])  # the config's order
    table = list(csv.DictReader(io.StringIO(data)))
    assert [r["id"] for r in table] == ["i0", "i1", "i4", "i3"]
    assert table[0]["who:labels"] == '{"ann": [{"end": 14, "label": "person", "start": 9}]}'
    assert (table[1]["who:labels"], table[1]["who:aggregated_label"],
            table[1]["who:prediction"], table[1]["who:confidence"]) == (
        '{"ann": []}', "[]", "[]", "0.5")
    assert json.loads(table[0]["sentiment:labels"]) == {"ann": "positive", "bob": "negative"}
    assert table[0]["aspects:aggregated_label"] == "plot;acting"
    assert json.loads(table[0]["who:aggregated_label"]) == [ALICE]
    assert table[0]["note:aggregated_label"] == "" and "=1+1" in table[0]["note:labels"]
    assert (table[1]["sentiment:prediction"], table[1]["sentiment:confidence"]) == (
        "negative", "0.8125")
    assert table[1]["sentiment:aggregated_label"] == "negative"
    assert (table[2]["sentiment:labels"], table[2]["sentiment:prediction"],
            table[2]["sentiment:confidence"]) == ("", "", "")
    assert table[0]["text"] == "'" + TEXTS["i0"] and table[2]["text"] == "eve"


def test_the_export_written_to_a_file_is_the_same_bytes_and_says_its_size(project, tmp_path):

    cfg, store = project()
    label(store)
    store.save_labels("ann", "i2", {"note": "süß 😀"})
    for rows in export.ROW_MODES:
        for fmt in export.FORMATS:
            path = tmp_path / ("out." + fmt)
            with open(path, "wb") as f:
                size = export.to_file(f, store, cfg, rows, fmt)
                assert not f.closed  # the caller's file stays open
            data = path.read_bytes()
            assert data == export.build(store, cfg, rows, fmt) and size == len(data)
            assert "süß 😀".encode() in data
            assert data.endswith(b"\r\n" if fmt == "csv" else b"\n")


def test_the_file_name_carries_the_project_the_rows_and_the_utc_time(project):

    when = time.mktime((2026, 3, 4, 5, 6, 7, 0, 0, 0)) - time.timezone  # 05:06:07 UTC
    cfg, _ = project(name="My  Project: <b>über</b>!")
    assert export.filename(cfg, "label", "csv", when) == \
        "my-project-b-ber-b-labels-20260304-050607.csv"
    assert export.filename(cfg, "item", "jsonl", when) == \
        "my-project-b-ber-b-items-20260304-050607.jsonl"
    assert export.filename(cfg, "upstream", "zip", when) == \
        "my-project-b-ber-b-upstream-20260304-050607.zip"
    for name, slug in (("--a_b--", "a_b"), ("!!!", "potato"), ("", "potato"),
                       ("x" * 70, "x" * 60), ("-" * 70 + "y", "y"), ("Ab 12", "ab-12"),
                       ("a" * 59 + "/b", "a" * 59 + "-"), ("X-ray lab X", "x-ray-lab-x")):
        cfg.annotation_task_name = name
        assert export.filename(cfg, "label", "jsonl", when) == \
            "%s-labels-20260304-050607.jsonl" % slug, name
    cfg.annotation_task_name = None
    assert export.filename(cfg, "label", "jsonl", when).startswith("potato-labels-")
    name = export.filename(cfg, "item", "csv")  # now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    assert name[len("potato-items-"):-len(".csv")] <= stamp


def test_the_label_csv_still_exports_a_span_scheme_removed_from_the_config(project):
    # the CSV export raised TypeError (a 500 on the admin page, a traceback from the CLI) once
    # a span scheme whose labels the store keeps was taken out of the config

    cfg, store = project()
    label(store)
    store.save_labels("ann", "i1", {"aspects": ["plot"], "note": 7, "score": 7})
    store.save_labels("ann", "i2", {"who": [dict(ALICE, text="süß")], "score": 2})
    store.save_labels("bob", "i2", {"score": 4})
    store.close()
    without = PROJECT.replace("  - annotation_type: span\n    name: who\n    labels: [person, "
                              "place]\n", "").replace("  - annotation_type: multiselect\n    "
                                                      "name: aspects\n    labels: [plot, "
                                                      "acting]\n", "").replace(
        "[sentiment, who]", "[sentiment]")
    assert "who" not in without and "aspects" not in without
    cfg, store = project(text=without)
    table = list(csv.reader(io.StringIO(export.build(store, cfg, "label", "csv").decode())))
    by = {(r[0], r[1], r[2]): r for r in table[1:]}
    assert json.loads(by["i0", "who", "ann"][3]) == [ALICE] == \
        json.loads(by["i0", "who", "ann"][5])
    assert by["i0", "aspects", "bob"][3] == "plot;acting" == by["i0", "aspects", "bob"][5]
    assert by["i1", "aspects", "ann"][3] == "plot" and by["i1", "note", "ann"][3] == "7"
    assert by["i1", "score", "ann"][3] == "7" == by["i1", "score", "ann"][5]
    assert by["i2", "score", "ann"][5] == ""  # a tie
    assert '"text": "süß"' in by["i2", "who", "ann"][3]  # as it was written, not escaped


def test_the_export_file_is_utf8_whatever_the_locale(project, tmp_path):
    # a server or CLI started under the C locale (ASCII) writes the same UTF-8 file
    import os
    import subprocess
    import sys

    from tests.helpers import ROOT

    cfg, store = project()
    store.save_labels("ann", "i2", {"note": "süß 😀", "sentiment": "positive"})
    env = dict(os.environ, LC_ALL="C", LANG="C", PYTHONCOERCECLOCALE="0",
               PYTHONPATH=os.pathsep.join([ROOT] + sys.path))
    env.pop("PYTHONUTF8", None)
    env.pop("PYTHONIOENCODING", None)
    for fmt in export.FORMATS:
        out = tmp_path / ("c-locale." + fmt)
        done = subprocess.run([sys.executable, "-X", "utf8=0", "-m", "potato", "annotations",
                               "export", cfg.path, "--rows", "label", "--format", fmt, "-o",
                               str(out)], env=env, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        assert out.read_bytes() == export.build(store, cfg, "label", fmt)
        assert "süß 😀".encode() in out.read_bytes()
