"""A model earns its place (issue 35, item 1), end to end on the bundled digits example: a run
that learns nothing (it answers one digit for every image) succeeds, is kept, and is not put in
use; its page, its log and the CLI's summary say why; annotators see no suggestion from it."""

import json
import os
import shutil

import pytest

from potato.commands.cli import main
from tests.helpers import KEY, PLUGINS, ROOT, Client, start_run, wait_run

H = {"X-API-Key": KEY}
DIGITS = os.path.join(ROOT, "examples", "digits")


@pytest.fixture
def digits(tmp_path, monkeypatch):
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    project = tmp_path / "digits"
    shutil.copytree(DIGITS, project)
    cfg = project / "config.yaml"
    cfg.write_text(cfg.read_text().replace("example-admin-key-change-me", KEY))
    gold = [json.loads(line) for line in open(project / "data" / "gold.jsonl")]
    (tmp_path / "labels.jsonl").write_text("".join(
        json.dumps({"id": g["id"], "digit": g["digit"]}) + "\n" for g in gold[:160]))
    assert main(["annotations", "import", str(cfg), str(tmp_path / "labels.jsonl"),
                 "--annotator", "gold"]) == 0
    return str(cfg), gold


def test_a_digits_run_that_learns_nothing_is_not_in_use_and_says_why(digits, serve, capsys):
    cfg, gold = digits
    _, url = serve(cfg)
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="test-image-constant", schemas=["digit"]))
    assert run["status"] == "success", run
    versus = run["holdout"]["versus_baseline"]
    assert versus["figure"] == "macro-F1" and versus["beats"] is False
    assert run["in_use"] == [] and run["writeback"]["in_use"] == []
    why = run["writeback"]["kept_in_use"]["digit"]
    assert why.startswith("run %s's held-out macro-F1 (" % run["run_id"])
    # it answers one digit: above the train majority's score (a digit absent from the test
    # split), but no better than its own answers shuffled across the digits
    assert "is no better than chance (1 in 40 shuffles of its answers across its " in why
    assert "it is trained, not in use" in why
    # kept, not shown: no suggestion on an unlabelled digit
    unlabelled = gold[-1]["id"]
    _, item = c.json("GET", "/admin/api/items/%s" % unlabelled, headers=H)
    assert item["predictions"] == {}
    page = c.get("/admin/training/runs/%s" % run["run_id"], headers=H).text
    assert "kept for digit, not shown (the run is not in use)" in page
    assert "so it has not shown it learned anything." in page
    log = c.get("/admin/training/api/runs/%s/log" % run["run_id"], headers=H).text
    assert "digit: run %s's held-out macro-F1" % run["run_id"] in log
    # what `potato training run` ends with
    from potato.commands.summary import summary_lines
    from potato.training.core.view import RunView

    text = "\n".join(summary_lines(RunView.from_dict(run)))
    assert "In use: no" in text and "is no better than chance" in text
    assert "Predictions kept, not shown: " in text and "(not in use for digit" in text
    assert "so it has not shown it learned anything." in text
