"""Readable run logs and texts (issue 24, item 8): the held-out score and write-back as one
sentence in the log (JSON in the events file), and a cancelled run that says what happened."""

import json
import os

import pytest

from potato.training.reports import run_texts
from potato.training.reports.writeback import WriteBack
from potato.training.remote.paths import RunPaths
from potato.training.remote import trainers
from tests.helpers import KEY, Client, make_project, start_run, wait_progress, wait_run

H = {"X-API-Key": KEY}

pytestmark = pytest.mark.usefixtures("env")  # the test trainers, for server and workers

CLASSES = {"n": 90, "accuracy": 0.8123, "macro_f1": 0.79,
           "baseline": {"label": "positive", "accuracy": 0.55}}
WB = {"schemes": ["sentiment"], "written": 1234, "below_min_confidence": 12,
      "min_confidence": 0.5, "unlabeled_skipped": 0, "in_use": ["sentiment"]}


def test_the_scored_sentence_reads_as_words():
    line = run_texts.scored_sentence({"per_scheme": {"sentiment": CLASSES}},
                                     WriteBack.from_dict(WB))
    assert line == ("held-out: sentiment: accuracy 0.812, macro-F1 0.790 on 90 test items "
                    "(always answering positive scores accuracy 0.550). Write-back: 1234 "
                    "predictions written for sentiment, 12 below min_confidence 0.5 not "
                    "written.")
    assert "{" not in line
    # the same run, not put in use: its predictions are kept, not shown
    line = run_texts.scored_sentence({"per_scheme": {"sentiment": CLASSES}},
                                     WriteBack.from_dict(dict(WB, in_use=[])))
    assert line.endswith("Write-back: 1234 predictions kept for sentiment, not shown (the run "
                         "is not in use), 12 below min_confidence 0.5 not written.")


@pytest.mark.parametrize("holdout, wb, expected", [
    (None, {"schemes": []}, "held-out: no score (no labelled item fell in the test split). "
                            "Write-back: none (no scheme of this run is in writeback.schemas)."),
    ({"kind": "span", "n": 1, "micro_f1": 0.5}, {"schemes": ["ents"], "written": 1,
                                                 "in_use": ["ents"]},
     "held-out: entity micro-F1 0.500 on 1 test item. Write-back: 1 prediction written for ents."),
    ({"per_scheme": {"stars": {"n": 4, "mae": 0.25}}}, {"schemes": ["stars"], "written": 3,
                                                        "unlabeled_skipped": 2,
                                                        "in_use": ["stars"]},
     "held-out: stars: MAE 0.250 on 4 test items. Write-back: 3 predictions written for stars, "
     "2 unlabelled items skipped (include_unlabeled: false)."),
    ({"per_scheme": "junk"}, "junk", "held-out: on 0 test items. Write-back: none (no scheme "
                                     "of this run is in writeback.schemas)."),  # never breaks
])
def test_the_scored_sentence_for_every_kind(holdout, wb, expected):
    assert run_texts.scored_sentence(holdout, WriteBack.from_dict(wb)) == expected


def test_a_runs_log_has_the_sentence_and_its_events_file_the_json(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    run = wait_run(c, run_id)
    assert run["status"] == "success", run
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    line = next(x for x in log.splitlines() if "held-out: " in x)
    assert "accuracy %.3f" % run["holdout"]["accuracy"] in line
    assert "Write-back: %d predictions written for sentiment" % run["writeback"]["written"] \
        in line
    assert '"per_label"' not in log and '"written"' not in log  # no report JSON in the log
    paths = RunPaths(os.path.join(tmp_path, "annotation_output", "training", "runs", run_id))
    scored = [json.loads(x) for x in open(paths.events) if '"scored"' in x]
    assert len(scored) == 1
    assert scored[0]["holdout"] == run["holdout"] and scored[0]["writeback"] == run["writeback"]


def test_a_cancelled_run_says_what_happened(tmp_path, serve):
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    running = start_run(c, trainer="test-steps", schemas=["sentiment"], params={"seconds": 30})
    queued = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_progress(c, running)  # the worker is training: the cancel reaches it
    c.post(f"/admin/training/api/runs/{queued}/cancel", headers=H)
    c.post(f"/admin/training/api/runs/{running}/cancel", headers=H)
    q, r = wait_run(c, queued), wait_run(c, running)
    assert (q["status"], q["step"], q["error"]) == ("cancelled", run_texts.CANCELLED_QUEUED,
                                                    run_texts.CANCELLED_QUEUED)
    assert (r["status"], r["step"], r["error"]) == ("cancelled", run_texts.CANCELLED_RUNNING,
                                                    run_texts.CANCELLED_RUNNING)
    log = c.get(f"/admin/training/api/runs/{running}/log", headers=H).text
    assert "error: the run was cancelled" not in log
    assert "the worker stopped, as the cancel asked" in log
    assert "cancelled: " + run_texts.CANCELLED_RUNNING in log
    page = c.get("/admin/training", headers=H).text  # the live card shows the newest run
    assert '<span id="live-step">never started: it was cancelled while queued</span>' in page
    live = c.get("/admin/training/runs/%s" % running, headers=H).text
    assert "stopped while it ran, as asked" in live


# -- the command line: check's argument order, trainer and param choices -------------------------

def test_check_takes_config_first_and_the_old_order_too(tmp_path, capsys):
    from potato.commands.cli import main

    cfg = make_project(tmp_path, labels=False)
    assert main(["training", "check", cfg, "local"]) == 0
    assert capsys.readouterr().out.strip().endswith("local (this machine): can start a run")
    assert main(["training", "check", "local", cfg]) == 0  # the order the tutorial uses
    assert capsys.readouterr().out.strip().endswith("local (this machine): can start a run")
    assert main(["training", "check", cfg, "nope"]) == 1
    assert "no backend 'nope'" in capsys.readouterr().err


def test_a_mistyped_trainer_or_param_gets_the_choices_and_a_suggestion(tmp_path, capsys):
    from potato.commands.cli import main

    cfg = make_project(tmp_path, labels=False)
    assert main(["training", "check", cfg, "local", "--trainer", "text-naive-bays"]) == 1
    out = capsys.readouterr().out
    assert "Unknown trainer 'text-naive-bays'. Trainers: text-naive-bayes, " in out
    assert "Did you mean text-naive-bayes?" in out
    assert main(["training", "check", cfg, "local", "--trainer", "text-naive-bayes",
                 "--param", "alfa=1"]) == 1
    out = capsys.readouterr().out
    assert "unknown param alfa for trainer text-naive-bayes; valid params: alpha, ngrams, " \
           "min_count, calibrate; did you mean alpha?" in out
    assert main(["training", "run", cfg, "--trainer", "hf-text-clasification", "--schemas",
                 "sentiment"]) == 1
    assert "Did you mean hf-text-classification?" in capsys.readouterr().err
    assert main(["training", "check", cfg, "local", "--trainer", "zzz"]) == 1
    assert "Did you mean" not in capsys.readouterr().out  # nothing close: no guess


def test_a_did_you_mean_ends_the_sentence_once(tmp_path, capsys):
    from potato.commands.cli import main

    cfg = make_project(tmp_path, labels=False)
    assert main(["training", "check", cfg, "local", "--trainer", "text-naive-bayes",
                 "--param", "alfa=1"]) == 1
    out = capsys.readouterr().out
    assert "did you mean alpha?" in out and "?." not in out
    assert trainers.sentence("Bad params: x") == "Bad params: x."
    assert trainers.sentence("Bad params: did you mean alpha?") == \
        "Bad params: did you mean alpha?"


def test_a_mistyped_backend_gets_a_suggestion(tmp_path, capsys):
    from potato.commands.cli import main

    cfg = make_project(tmp_path, labels=False)
    assert main(["training", "check", cfg, "locl"]) == 1
    err = capsys.readouterr().err
    assert "no backend 'locl' in %s. Configured: local. Did you mean local?" % cfg in err
    assert main(["training", "check", cfg, "zzz"]) == 1
    assert "Did you mean" not in capsys.readouterr().err  # nothing close: no guess
    assert main(["training", "run", cfg, "--trainer", "text-naive-bayes", "--schemas",
                 "sentiment", "--backend", "locl"]) == 1
    assert "Unknown backend 'locl'. Configured backends: local. Did you mean local?" in \
        capsys.readouterr().err


@pytest.mark.parametrize("action", ["run", "check"])
def test_the_help_lists_trainers_and_their_params(action, capsys):
    from potato.commands.cli import main

    with pytest.raises(SystemExit):
        main(["training", action, "--help"])
    out = "".join(capsys.readouterr().out.split())  # help wraps lines, at hyphens too
    assert "text-naive-bayes,hf-text-classification" in out
    assert "text-naive-bayes:alpha,ngrams,min_count,calibrate" in out


def test_params_are_logged_as_words_not_json():
    assert run_texts.params_words({"alpha": 0.5, "ngrams": 2, "calibrate": True,
                                   "model": "distilbert-base-uncased", "seed": None,
                                   "layers": [1, 2]}) == (
        'alpha 0.5, ngrams 2, calibrate true, model "distilbert-base-uncased", seed none, '
        'layers [1, 2]')
    assert run_texts.params_words({}) == "none" and run_texts.params_words(None) == "none"
    long = run_texts.params_words({"prompt": "x" * 500})
    assert long.endswith('..."') is False and long.endswith("...") and len(long) < 140


def test_a_runs_log_reads_as_sentences(tmp_path, serve):
    """Issue 35, item 9: no JSON or Python reprs, one line per epoch, the error said once."""
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                                params={"alpha": 0.5}))
    log = c.get("/admin/training/api/runs/%s/log" % run["run_id"], headers=H).text
    queued = next(x for x in log.splitlines() if "queued: " in x)
    assert "queued: trainer text-naive-bayes on sentiment, backend local; params: " in queued
    assert "alpha 0.5" in queued and "{" not in queued
    assert "ties skipped: {" not in log and "no tie skipped" in log
    failed = wait_run(c, start_run(c, trainer="test-sigkill", schemas=["sentiment"]))
    assert failed["status"] == "error"
    log = c.get("/admin/training/api/runs/%s/log" % failed["run_id"], headers=H).text
    assert log.count(failed["error"]) == 1, log
