"""One export from the admin page and the CLI (issue 24, item 10): row modes, the same bytes,
file names with the project and the time; the admin page's ties, unlabelled items and
agreement (Cohen's and Fleiss' kappa, checked against scikit-learn and a textbook example)."""

import csv
import http.client
import io
import json
import random
import re

import pytest

from potato.agreement import cohen_kappa, fleiss_kappa, scheme_agreement
from potato.cli import main
from tests.helpers import KEY, Client, make_project, start_run, wait_run

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
    # The default rows of each: the page's links one row per label, the CLI one per item.
    assert c.get("/admin/export.jsonl", headers=H).body == \
        c.get("/admin/export.jsonl?rows=label", headers=H).body
    assert _cli(capsys, cfg)[1].encode() == c.get("/admin/export.jsonl?rows=item",
                                                  headers=H).body
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
