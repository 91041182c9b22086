"""Data files, `potato annotations import/export`, and `potato start` refusing bad input."""

import json
import os
import subprocess
import sys

import pytest

from potato.commands.cli import main
from tests.helpers import BASE, ROOT


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def write_lines(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def test_import_then_export(write_config, tmp_path, capsys):
    cfg = write_config(BASE)
    labels = tmp_path / "labels.jsonl"
    write_lines(labels, [{"id": "i0", "sentiment": "positive"}, {"id": "i1", "sentiment": "negative"}])
    code, out, err = run_cli(capsys, "annotations", "import", cfg, str(labels), "--annotator", "gold")
    assert code == 0, err
    assert "Imported 2 label(s) on 2 item(s) as annotator 'gold'" in out
    # Importing again replaces (idempotent), and a second annotator adds.
    assert run_cli(capsys, "annotations", "import", cfg, str(labels), "--annotator", "gold")[0] == 0
    write_lines(labels, [{"id": "i0", "sentiment": "negative"}])
    assert run_cli(capsys, "annotations", "import", cfg, str(labels), "--annotator", "bob")[0] == 0
    out_file = tmp_path / "export.jsonl"
    code, _, err = run_cli(capsys, "annotations", "export", cfg, "-o", str(out_file))
    assert code == 0 and "Exported 5 item(s)" in err
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["i0", "i1", "i2", "i3", "i4"]
    assert rows[0] == {"id": "i0", "text": "item number 0", "predictions": {},
                       "labels": {"sentiment": [{"annotator": "bob", "label": "negative"},
                                                {"annotator": "gold", "label": "positive"}]},
                       "aggregated_label": {"sentiment": None}}  # a tie
    assert rows[1]["labels"] == {"sentiment": [{"annotator": "gold", "label": "negative"}]}
    # stdout export is the same content.
    code, out, _ = run_cli(capsys, "annotations", "export", cfg)
    assert out == out_file.read_text()


def test_import_with_problems_imports_nothing(write_config, tmp_path, capsys):
    cfg = write_config(BASE)
    labels = tmp_path / "labels.jsonl"
    write_lines(labels, [
        {"id": "i0", "sentiment": "positive"},
        {"id": "zzz", "sentiment": "positive"},
        {"id": "i1", "sentiment": "meh"},
        "not json",
        {"id": "i2", "colour": "red"},
        {"sentiment": "positive"},
        '{"id": "i3", "sentiment": ' + "[" * 100000 + "]" * 100000 + "}",  # too deep
    ])
    code, out, err = run_cli(capsys, "annotations", "import", cfg, str(labels), "--annotator", "a")
    assert code == 1
    assert f"{labels}: line 7: a value on this line cannot be read" in err
    assert f"{labels}: line 2: unknown item id 'zzz'" in err
    assert f"{labels}: line 3: 'meh' is not a label of scheme 'sentiment'" in err
    assert f"{labels}: line 4: not a JSON object" in err
    assert f"{labels}: line 5: 'colour' is not an annotation scheme" in err
    assert f"{labels}: line 6: has no \"id\"" in err
    assert "nothing imported: 6 problem(s)" in err
    code, out, _ = run_cli(capsys, "annotations", "export", cfg)
    assert all(json.loads(line)["labels"] == {} for line in out.splitlines())


def test_json_array_data_files(tmp_path, capsys):
    (tmp_path / "items.json").write_text(json.dumps(
        [{"key": 1, "body": "first"}, {"key": 2, "body": "second"}]))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(BASE.replace("[items.jsonl]", "[items.json]") +
                   "item_properties: {id_key: key, text_key: body}\n")
    code, out, _ = run_cli(capsys, "annotations", "export", str(cfg))
    assert code == 0
    assert [json.loads(line)["text"] for line in out.splitlines()] == ["first", "second"]


@pytest.mark.parametrize("rows,expect", [
    ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}],
     "items.jsonl:2: duplicate id 'a'; it was first seen at"),
    ([{"id": "a", "text": "x"}, {"text": "y"}], "items.jsonl:2: the item has no 'id'"),
    ([{"id": "a"}], "items.jsonl:1: item 'a' has no 'text' text"),
    ([{"id": "a", "text": "x"}, "{broken"], "items.jsonl:2: not a JSON object"),
])
def test_bad_data_files_stop_with_file_and_line(write_config, capsys, rows, expect):
    cfg = write_config(BASE, items=[])
    write_lines(__import__("pathlib").Path(os.path.dirname(cfg)) / "items.jsonl", rows)
    code, _, err = run_cli(capsys, "annotations", "export", cfg)
    assert code == 1 and expect in err, err
    assert "Traceback" not in err


def _start(cfg, *extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "potato", "start", cfg, "--port", "0", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=30, env=env)


def test_start_refuses_config_errors_with_validate_messages(write_config, capsys):
    cfg = write_config(BASE + """\
model_training:
  backends:
    gpu: {type: ssh, host: gpu.example.org, pyhton: python3.11}
""")
    r = _start(cfg)
    assert r.returncode == 1
    code, out, _ = run_cli(capsys, "validate", cfg)
    validate_line = next(line for line in out.splitlines() if line.startswith("error:"))
    assert validate_line in r.stderr
    assert "Did you mean python?" in r.stderr
    assert "Traceback" not in r.stderr


def test_start_refuses_bad_data_file(write_config):
    cfg = write_config(BASE, items=[{"id": "a", "text": "x"}, {"id": "a", "text": "y"}])
    r = _start(cfg)
    assert r.returncode == 1
    assert "items.jsonl:2: duplicate id 'a'" in r.stderr
    assert "Traceback" not in r.stderr


def test_admin_export_jsonl_csv_and_label_counts(tmp_path, serve):
    """The admin page's export: one row per label with annotator, time and the majority label;
    CSV cells that a spreadsheet would run are defused; per-label counts on the page."""
    import csv
    import io
    import json

    from tests.helpers import Client
    from tests.helpers import KEY, make_project

    (tmp_path / "reviews.jsonl")
    cfg = make_project(tmp_path, labels=False)
    _, url = serve(cfg, training=False)
    h = {"X-API-Key": KEY}
    for name, label in (("ann", "positive"), ("bob", "positive"), ("=cmd", "negative")):
        c = Client(url)
        if name.startswith("="):
            r = c.post("/login", form={"username": name})
            assert r.status == 400  # such a name cannot even be made
            name = "eve"
            c.login(name)
        else:
            c.login(name)
        status, _ = c.json("POST", "/api/annotations", json_body={
            "item_id": "sst-train-00000", "labels": {"sentiment": label}})
        assert status == 200
    c = Client(url)
    r = c.get("/admin/export.jsonl?rows=label", headers=h)
    assert r.status == 200 and "attachment" in r.headers["Content-Disposition"]
    rows = [json.loads(line) for line in r.text.splitlines()]
    assert [(x["annotator"], x["label"]) for x in rows] == [("ann", "positive"),
                                                           ("bob", "positive"),
                                                           ("eve", "negative")]
    assert all(x["aggregated_label"] == "positive" and x["labelled_at"].endswith("Z")
               for x in rows)
    r = c.get("/admin/export.csv?rows=label", headers=h)
    table = list(csv.reader(io.StringIO(r.text)))
    assert table[0] == ["item_id", "scheme", "annotator", "label", "labelled_at",
                        "aggregated_label", "text", "assigned_because"] and len(table) == 4
    assert [row[-1] for row in table[1:]] == ["", "", ""]  # no active learning: nothing chosen
    page = c.get("/admin", headers=h).text
    assert 'id="export-csv"' in page and "sentiment: items by majority label" in page
    assert '<th scope="row">positive</th><td>1</td>' in page
    assert c.get("/admin/export.csv").status in (303, 401)  # admin only


def test_csv_cells_that_would_run_as_formulas_are_defused(tmp_path):
    """A cell a spreadsheet would run (=, +, -, @ first) is written with a ' before it, in
    both CSV exports; a list label is its values joined by ;."""
    import csv
    import io

    from potato.labels import export
    from potato.project.store import Store

    store = Store(str(tmp_path / "potato.db"))
    try:
        store.sync_items([("=id", '=HYPERLINK("http://evil")', {}), ("i2", "+1", {}),
                          ("i3", "-x", {}), ("i4", "@a", {}), ("i5", "plain", {})])
        store.save_labels("ann", "i5", {"s": ["a", "b"]})
        store.save_labels("ann", "i4", {"s": "=1+1"})
        items = list(csv.reader(io.StringIO(export.build(store, None, "item", "csv").decode())))
        assert [(r[0], r[-1]) for r in items[1:]] == [
            ("'=id", '\'=HYPERLINK("http://evil")'), ("i2", "'+1"), ("i3", "'-x"),
            ("i4", "'@a"), ("i5", "plain")]
        labels = list(csv.reader(io.StringIO(export.build(store, None, "label", "csv")
                                             .decode())))
        by = {r[0]: r for r in labels[1:]}
        assert by["i5"][3] == "a;b" and by["i4"][3] == "'=1+1" and by["i4"][6] == "'@a"
    finally:
        store.close()
