"""A new annotation kind is one module and one line in ``potato.schemes.KINDS`` (issue 33): a
toy ``yesno`` kind, defined here and registered for the test alone, validates in a config,
shows on the annotate page, saves (and refuses a bad value), aggregates, exports (CSV, JSONL,
upstream's layout and back), gets its annotators' agreement, has its predictions checked at
the trust boundary and a held-out report, without a line of any other module knowing it."""

import csv
import io
import json
import os

import pytest

from potato.labels import agreement
from potato.commands.cli import main
from potato.config.settings import load
from potato.markup import Safe, join, render
from potato.schemes import KEEP, KINDS, Kind
from potato.schemes.base import short
from potato.labels.annotations import open_store
from potato.training.exchange import boundary
from potato.training.reports import heldout, report
from tests.helpers import Client

KEY = "test-admin-key-0123456789"


class YesNo(Kind):
    """A question answered yes or no: no labels in the config, one of two answers stored."""

    type_name = "yesno"
    label_rule = "none"
    one_label = True       # the annotators' agreement applies
    suggests_labels = True
    confusion = True
    ANSWERS = ("yes", "no")

    def check(self, value, text=None):
        if value is None or value == "":
            return None
        if value not in self.ANSWERS:
            raise self.fail(f"takes yes or no, not {short(value)}.")
        return value

    def from_form(self, values):
        return values[-1] if values else KEEP

    def training_schema(self):
        return {"labels": list(self.ANSWERS)}

    def summary(self):
        return "yes or no"

    def inputs(self, current, first_key):
        return join(render('<label class="option"><input type="radio" name="label:{s}" '
                           'value="{v}"{c}> {v}</label>', s=self.name, v=answer,
                           c=Safe(" checked" if current == answer else ""))
                    for answer in self.ANSWERS)


CONFIG = """\
annotation_task_name: yesno
data_files: [items.jsonl]
admin_api_key: %s
annotation_schemes:
  - annotation_type: yesno
    name: relevant
    description: Is the item about cats?
""" % KEY


@pytest.fixture
def yesno(monkeypatch):
    monkeypatch.setitem(KINDS, "yesno", YesNo)  # the one registry line


@pytest.fixture
def project(yesno, write_config):
    return write_config(CONFIG, items=[{"id": f"t{n}", "text": f"item {n}"} for n in range(4)])


def test_the_config_takes_the_new_kind_and_refuses_labels(yesno, write_config, tmp_path):
    cfg, errors, _ = load(write_config(CONFIG))
    assert errors == [] and cfg.schemes[0].kind.__class__ is YesNo
    _, errors, _ = load(write_config(CONFIG + "    labels: [a, b]\n", name="bad.yaml"))
    assert any("yesno scheme, which takes no labels" in str(e) for e in errors), errors


def test_a_new_kind_is_served_saved_aggregated_and_exported(project, serve, tmp_path):
    _, url = serve(project, training=False)
    a = Client(url)
    a.login("ann")
    page = a.get("/annotate").text
    assert 'data-type="yesno"' in page and 'name="label:relevant" value="yes"' in page
    assert 'Is the item about cats?' in page
    status, body = a.json("POST", "/api/annotations", json_body={
        "item_id": "t0", "labels": {"relevant": "maybe"}})
    assert status == 400 and "scheme 'relevant' (yesno): takes yes or no" in body["error"]
    for who, answers in (("ann", "yyn"), ("bob", "yyy"), ("cat", "ynn")):
        c = Client(url)
        c.login(who)
        for n, answer in enumerate(answers):
            value = "yes" if answer == "y" else "no"
            status, body = c.json("POST", "/api/annotations", json_body={
                "item_id": f"t{n}", "labels": {"relevant": value}})
            assert status == 200, body
    admin = Client(url)
    h = {"X-API-Key": KEY}
    rows = [json.loads(line) for line in admin.get("/admin/export.jsonl?rows=label",
                                                   headers=h).text.splitlines()]
    decided = {r["item_id"]: r["aggregated_label"] for r in rows}
    assert decided == {"t0": "yes", "t1": "yes", "t2": "no"}  # the majority of three
    table = list(csv.DictReader(io.StringIO(admin.get("/admin/export.csv?rows=label", headers=h).text)))
    assert {r["label"] for r in table} == {"yes", "no"}
    assert "yes or no" in admin.get("/admin", headers=h).text

    out = str(tmp_path / "upstream")
    assert main(["annotations", "export", project, "--format", "upstream", "-o", out]) == 0
    with open(os.path.join(out, "bob", "annotated_instances.jsonl")) as f:
        first = json.loads(f.readline())
    assert first["label_annotations"] == {"relevant": {"yesno": "yes"}}
    os.rename(os.path.join(out, "bob"), os.path.join(out, "dan"))  # read back as dan's
    assert main(["annotations", "import", project, "--format", "upstream",
                 os.path.join(out, "dan")]) == 0
    cfg, _, _ = load(project)
    store = open_store(cfg)
    try:
        assert store.item_labels("t2")["relevant"] == [{"annotator": a, "label": v} for a, v in
                                                       (("ann", "no"), ("bob", "yes"),
                                                        ("cat", "no"), ("dan", "yes"))]
    finally:
        store.close()


def test_a_new_kind_gets_agreement(project, tmp_path):
    cfg, errors, _ = load(project)
    assert errors == []
    labels = tmp_path / "labels.jsonl"
    for who, answers in (("ann", ["yes", "no", "yes", "no"]), ("bob", ["yes", "no", "no", "no"])):
        labels.write_text("".join(json.dumps({"id": f"t{n}", "relevant": v}) + "\n"
                                  for n, v in enumerate(answers)))
        assert main(["annotations", "import", project, str(labels), "--annotator", who]) == 0
    store = open_store(cfg)
    try:
        found = agreement.summary(cfg, store)["relevant"]
    finally:
        store.close()
    # ann and bob agree on 3 of 4 (p_o = .75); p_e = (2/4 * 1/4) + (2/4 * 3/4) = .5: kappa .5
    assert found["cohen"] == [{"annotators": ["ann", "bob"], "items": 4, "kappa": 0.5}]
    assert found["labelled"] == 4


def test_a_new_kind_predictions_are_checked_and_scored(yesno):
    schema = dict({"type": "yesno"}, **YesNo.training_schema(YesNo(None)))
    schemas = {"relevant": schema}
    splits = {"t1": "test", "t2": "test", "r1": "train"}
    row = boundary.prediction({"id": "t1", "split": "test", "scheme": "relevant",
                               "label": "yes", "confidence": 0.9}, splits, schemas)
    assert row["label"] == "yes"
    with pytest.raises(boundary.Invalid, match="not one of relevant's labels"):
        boundary.prediction({"id": "t1", "split": "test", "scheme": "relevant",
                             "label": "maybe", "confidence": 0.9}, splits, schemas)
    items = [{"id": "t1", "split": "test", "labels": {"relevant": "yes"}},
             {"id": "t2", "split": "test", "labels": {"relevant": "no"}},
             {"id": "r1", "split": "train", "labels": {"relevant": "no"}}]
    preds = [{"id": i, "split": "test", "scheme": "relevant", "label": "yes", "confidence": 1.0}
             for i in ("t1", "t2")]
    r = report.holdout_report(preds, items, schemas)
    assert r["accuracy"] == 0.5 and r["confusion"]["matrix"] == [[1, 0], [1, 0]]
    held = heldout.HeldOut.from_dict(r)
    assert held.shape == heldout.CLASSES
    assert held.headline == heldout.Headline("macro-F1", r["macro_f1"], True)
