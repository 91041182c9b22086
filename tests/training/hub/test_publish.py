"""Publishing a run's model to the Hugging Face Hub (issue 20, part 1), without the internet: the
real huggingface_hub client talks to a fake of the Hub's HTTP API on loopback
(tests/fakes/hub.py), and any other address is refused while these tests run."""

import html
import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest

from potato.commands.cli import main
from potato.project.store import Store
from potato.training.hub import model_card, publish
from potato.training.core.runs import RunStore
from potato.training.core.view import RunView
from tests.helpers import ROOT, Client, use_endpoint
from tests.fakes.hub import FakeHub
from tests.helpers import KEY, PLUGINS, make_project, start_run, wait_run
import errno
import threading
from types import SimpleNamespace
from potato import __version__
from potato.training.hub import client as hub, model_card, publish
from potato.training.lifecycle import retention
from potato.training.remote.paths import RunPaths

H = {"X-API-Key": KEY}
TOKEN = "hf_write_alice"

pytest.importorskip("huggingface_hub")


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Name lookups for anything but loopback fail: nothing here may reach huggingface.co."""
    real = socket.getaddrinfo

    def only_loopback(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost", "::1", None):
            raise OSError("test refused a lookup of %r: tests talk only to loopback" % host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", only_loopback)
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture
def hub(monkeypatch):
    fake = FakeHub()
    use_endpoint(monkeypatch, fake.url)
    yield fake
    fake.close()


def wait_published(c, run_id, timeout=60):
    deadline = time.time() + timeout
    while True:
        status, state = c.json("GET", f"/admin/training/api/runs/{run_id}/publish", headers=H)
        assert status == 200, state
        if state.get("state") != "publishing":
            return state
        assert time.time() < deadline, state
        time.sleep(0.1)


def publish_run(c, run_id, **body):
    return c.json("POST", f"/admin/training/api/runs/{run_id}/publish", json_body=body,
                  headers=H)


# -- the request's fields ------------------------------------------------------------------------

@pytest.mark.parametrize("repo_id", ["alice/review-sentiment", "review_sentiment",
                                     "Org.Name/model.v2", "a/b", "x" * 96])
def test_good_repo_ids(repo_id):
    assert publish.check_repo_id(" %s " % repo_id) == repo_id


@pytest.mark.parametrize("repo_id", ["", "   ", None, 7, ["a/b"], "a/b/c", "/a", "a/", "-a/b",
                                     "a/b-", "a--b/c", "a/b..c", "a/b.git", "a b/c", "<b>x</b>",
                                     "ü/model", "a/\nb", "x" * 97, "a/" + "b" * 300])
def test_bad_repo_ids_are_refused_with_the_shape(repo_id):
    with pytest.raises(publish.Refused) as e:
        publish.check_repo_id(repo_id)
    assert e.value.status == 400 and "repo" in e.value.message


def test_commit_message_and_private():
    assert publish.check_message(None, "r3") == "Publish Potato run r3"
    assert publish.check_message("  two\nlines\t ", "r3") == "two lines"
    for bad in (5, "x" * 201):
        with pytest.raises(publish.Refused):
            publish.check_message(bad, "r3")
    assert publish.check_private(None) is False and publish.check_private(True) is True
    with pytest.raises(publish.Refused):
        publish.check_private("yes")


def test_config_keys(write_config):
    from potato.config.settings import load

    cfg, errors, _ = load(write_config("""\
        annotation_task_name: T
        data_files: [items.jsonl]
        annotation_schemes:
          - {annotation_type: radio, name: s, labels: [a, b]}
        model_training:
          publish: {token_env: MY_HUB_TOKEN, license: apache-2.0, timeout_s: 5}
        """))
    assert not errors
    assert (cfg.model_training.publish.token_env, cfg.model_training.publish.license,
            cfg.model_training.publish.timeout_s) == ("MY_HUB_TOKEN", "apache-2.0", 5)
    secret = "hf_" + "Zq8" * 10
    _, errors, _ = load(write_config("""\
        annotation_task_name: T
        data_files: [items.jsonl]
        annotation_schemes:
          - {annotation_type: radio, name: s, labels: [a, b]}
        model_training:
          publish: {token_env: %s, license: Apache 2.0, timeout_s: 0}
        """ % secret, name="bad.yaml"))
    text = "\n".join(p.format() for p in errors)
    assert "looks like a Hugging Face token" in text and secret not in text
    assert "license id of the Hub" in text and "timeout_s must be between 1 and 3600" in text


# -- the model card --------------------------------------------------------------------------

def _holdout():
    return {"n": 90, "accuracy": 0.8, "accuracy_ci95": [0.7061, 0.8688], "macro_f1": 0.79,
            "per_label": {"positive": {"precision": 0.8, "recall": 0.85, "f1": 0.82,
                                       "support": 47},
                          "neg|<b>": {"precision": 0.81, "recall": 0.74, "f1": 0.77,
                                      "support": 43}},
            "baseline": {"label": "positive", "accuracy": 0.5222}, "above_baseline": 0.2778,
            "note": None}


def test_card_of_a_lora_text_classifier():
    run = {"run_id": "r7", "trainer": "hf-text-classification", "schemas": ["sentiment"],
           "params": {"model": "distilbert/distilbert-base-uncased", "lora": True,
                      "epochs": 5}, "holdout": _holdout(), "finished_at": 1.7e9}
    release = model_card.Release("alice/reviews", ["adapter_config.json", "labels.json",
                                                   "README.md"],
                                 license="apache-2.0", number=2, now=1.8e9)
    text = model_card.card(RunView.from_dict(run), release,
                           {"sentiment": {"type": "radio", "labels": ["positive", "neg|<b>"]}},
                           {"train": 420, "val": 90, "test": 90, "unlabeled": 1400},
                           {"epochs": 5})
    head = text.split("\n---\n")[0]
    assert head.splitlines() == [
        "---", 'base_model: "distilbert/distilbert-base-uncased"', 'library_name: "peft"',
        'pipeline_tag: "text-classification"', 'license: "apache-2.0"', "tags:",
        '- "potato-annotation"', '- "hf-text-classification"']
    # code spans show their text as it is: no backslash escapes inside (issue 38, item 10)
    assert "scheme **sentiment** (radio): `positive`, `neg|<b>`" in text
    assert "- `adapter_config.json`" in text and "\\_" not in text
    assert ("Accuracy **0.800** (95% interval 0.71 to 0.87), macro-F1 **0.790**, on 90 "
            "held-out (test split) items. Always answering \"positive\"") in text
    assert "scores accuracy 0.522; the model's is 0.278 higher." in text
    assert "| Label | Precision | Recall | F1 | Support |" in text
    assert "| neg\\|\\<b\\> | 0.810 | 0.740 | 0.770 | 43 |" in text  # no broken table, no tag
    assert "- params that differ from the trainer's defaults: `epochs=5`" in text
    assert "- items: 420 train, 90 val, 90 test" in text
    from potato import __version__

    assert "- Potato version: %s" % __version__ in text
    assert ('AutoPeftModelForSequenceClassification.from_pretrained("alice/reviews", '
            'num_labels=len(labels))') in text
    assert "(publish 2 of run r7)" in text


def test_card_without_a_hub_base_model_or_report():
    run = {"run_id": "r1", "trainer": "hf-llm-classification", "schemas": ["s"],
           "params": {"model": "/models/local-llama"}, "holdout": None}
    text = model_card.card(RunView.from_dict(run), model_card.Release("bob/x", ["labels.json"]),
                           {}, None, {})
    assert "base_model" not in text.split("\n---\n")[0]  # a local directory is no Hub id
    assert 'pipeline_tag: "text-generation"' in text and "license" not in text
    assert "No held-out report" in text and "AutoPeftModelForCausalLM" in text


def test_card_of_a_span_model_has_its_entity_figures():
    from potato.training.reports import spans as span_report

    pairs = [([{"start": 0, "end": 3, "label": "PER"}, {"start": 8, "end": 13, "label": "LOC"}],
              [{"start": 0, "end": 3, "label": "PER"}, {"start": 8, "end": 12, "label": "LOC"}]),
             ([], [{"start": 2, "end": 4, "label": "PER"}])]
    report = span_report.scheme_report(pairs, ["PER", "LOC"])  # 1 found of 3, 1 right of 2
    run = {"run_id": "r3", "trainer": "hf-token-classification", "schemas": ["ner"],
           "params": {"model": "bert-base-cased", "lora": False}, "holdout": report}
    text = model_card.card(RunView.from_dict(run),
                           model_card.Release("alice/ner", ["labels.json"]),
                           {"ner": {"type": "span", "labels": ["PER", "LOC"]}}, None, {})
    head = text.split("\n---\n")[0]
    assert 'pipeline_tag: "token-classification"' in head
    assert 'library_name: "transformers"' in head
    assert ("precision **0.500**, recall **0.333**, micro-F1 **0.400**, macro-F1 0.333, on 2 "
            "held-out (test split) items holding 3 human spans; the model predicted 2.") in text
    assert "| PER | 1.000 | 0.500 | 0.667 | 2 |" in text
    assert "| LOC | 0.000 | 0.000 | 0.000 | 1 |" in text
    assert "> Only 3 human spans in 2 test items: too few to say much" in text
    lora = dict(run, params={"model": "bert-base-cased", "lora": True})
    assert 'library_name: "peft"' in model_card.card(
        RunView.from_dict(lora), model_card.Release("alice/ner"), {}, None, {})


def test_card_of_rating_models_has_their_figures():
    likert = {"n": 40, "accuracy": 0.5, "accuracy_ci95": [0.35, 0.65], "macro_f1": 0.4,
              "per_label": {}, "baseline": {"label": "3", "accuracy": 0.3},
              "above_baseline": 0.2, "mae": 0.625, "qwk": 0.71}
    run = {"run_id": "r4", "trainer": "text-naive-bayes", "schemas": ["stars"], "params": {},
           "holdout": likert}
    text = model_card.card(RunView.from_dict(run), model_card.Release("alice/stars"), {}, None, {})
    assert "mean absolute error 0.625 points, quadratic-weighted kappa 0.710" in text
    number = {"n": 30, "mae": 1.25, "rmse": 2.5, "spearman": 0.6,
              "baseline": {"value": 50, "mae": 3.0}}
    run = {"run_id": "r5", "trainer": "hf-text-regression", "schemas": ["score"],
           "params": {"model": "m"}, "holdout": number}
    text = model_card.card(RunView.from_dict(run), model_card.Release("alice/score"), {}, None, {})
    assert ("n=30: mean absolute error 1.250, RMSE 2.500, Spearman 0.600; always answering the "
            "median (50) 3.000") in text


# -- publishing through the server -----------------------------------------------------------

def _files(hub, repo):
    return sorted(hub.repos[repo]["files"])


def test_publish_a_run_then_again_then_another_run(tmp_path, serve, hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    cfg = make_project(tmp_path, model_training="  publish: {license: mit}")
    server, url = serve(cfg)
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"],
                       params={"ngrams": 1})
    run = wait_run(c, run_id)
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert 'id="publish-form"' in page and 'name="repo_id"' in page

    status, state = publish_run(c, run_id, repo_id="alice/sentiment", private=True,
                                commit_message="First <b>model</b>")
    assert status == 202 and state["state"] in ("publishing", "published"), state
    state = wait_published(c, run_id)
    assert state["state"] == "published", state
    repo = hub.repos["alice/sentiment"]
    assert repo["private"] is True and len(repo["commits"]) == 1
    assert _files(hub, "alice/sentiment") == ["README.md", "sentiment.naive-bayes.json"]
    artifacts = os.path.join(tmp_path, "annotation_output", "training", "runs", run_id,
                             "artifacts")
    with open(os.path.join(artifacts, "sentiment.naive-bayes.json"), "rb") as f:
        assert repo["files"]["sentiment.naive-bayes.json"] == f.read()  # exactly as saved
    card = repo["files"]["README.md"].decode()
    h = run["holdout"]
    assert 'license: "mit"' in card and 'pipeline_tag: "text-classification"' in card
    assert "on %d held-out (test split) items" % h["n"] in card
    assert "(95%% interval %.2f to %.2f)" % tuple(h["accuracy_ci95"]) in card
    assert "Always answering \"%s\"" % h["baseline"]["label"] in card
    assert "| positive |" in card and "| negative |" in card
    assert "`ngrams=1`" in card and "scheme **sentiment** (radio): `positive`, `negative`" in card
    manifest = json.load(open(os.path.join(artifacts, "..", "bundle", "manifest.json")))
    assert "- items: %(train)d train, %(val)d val, %(test)d test" % manifest["counts"] in card
    assert 'hf_hub_download("alice/sentiment", "sentiment.naive-bayes.json")' in card
    first = repo["commits"][0]
    assert first["summary"] == "First <b>model</b>" and run_id in first["description"]
    assert state["commit"] == first["oid"]
    assert state["url"] == f"{hub.url}/alice/sentiment"
    assert state["commit_url"] == f"{hub.url}/alice/sentiment/commit/{first['oid']}"
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert f'href="{hub.url}/alice/sentiment"' in page and first["oid"][:12] in page
    assert "(private)" in page

    # Again, the same run: a new commit (the card names the publish; the model is unchanged).
    assert publish_run(c, run_id, repo_id="alice/sentiment")[0] == 202
    state = wait_published(c, run_id)
    assert state["state"] == "published", state
    assert len(repo["commits"]) == 2 and repo["commits"][1]["files"] == ["README.md"]
    assert repo["commits"][1]["summary"] == f"Publish Potato run {run_id}"
    assert "(publish 2 of run %s)" % run_id in repo["files"]["README.md"].decode()
    # Another run to the same repo: a third commit, and the run page shows it.
    other = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, other)
    assert publish_run(c, other, repo_id="sentiment")[0] == 202  # under the token's account
    state = wait_published(c, other)
    assert state["repo_id"] == "alice/sentiment" and len(repo["commits"]) == 3
    assert state["commit"] == repo["commits"][2]["oid"]
    assert "(publish 1 of run %s)" % other in repo["files"]["README.md"].decode()
    # Every request carried the token, and nothing kept it: store, run files, log, pages.
    # huggingface_hub fetches its "agent harness" registry (no credentials) at most once a day,
    # depending on its cache: not ours to count. Every other request carries our token.
    ours = [r for r in hub.requests if r.get("path") != "/api/agent-harnesses"]
    assert {r["auth"] for r in ours} == {"Bearer " + TOKEN}, [(r.get("path"), r["auth"])
                                                             for r in ours]
    assert all(r["auth"] is None for r in hub.requests if r not in ours)
    for rid in (run_id, other):
        root = os.path.join(tmp_path, "annotation_output", "training", "runs", rid)
        for dirpath, _, names in os.walk(root):
            for name in names:
                with open(os.path.join(dirpath, name), "rb") as f:
                    assert TOKEN.encode() not in f.read(), name
        assert TOKEN not in c.get(f"/admin/training/runs/{rid}", headers=H).text
        log = c.get(f"/admin/training/api/runs/{rid}/log", headers=H).text
        assert "published to %s/alice/sentiment" % hub.url in log
    server.app.store.conn().execute("PRAGMA wal_checkpoint(FULL)")
    for dirpath, _, names in os.walk(os.path.join(tmp_path, "annotation_output")):
        for name in names:
            if not name.endswith((".jsonl", ".tar.gz")):
                with open(os.path.join(dirpath, name), "rb") as f:
                    assert TOKEN.encode() not in f.read(), name
    assert wait_run(c, run_id)["status"] == "success"  # the run itself is untouched


def test_the_model_folder_goes_to_the_repo_root(tmp_path, serve, hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-warns", schemas=["sentiment"])
    wait_run(c, run_id)
    assert publish_run(c, run_id, repo_id="alice/warns")[0] == 202
    assert wait_published(c, run_id)["state"] == "published"
    # model/weights.bin and model/labels.json at the root; the symlink is left out
    assert _files(hub, "alice/warns") == ["README.md", "labels.json", "weights.bin"]
    assert hub.repos["alice/warns"]["files"]["weights.bin"] == b"\x00weights" * 1000


def test_every_failure_ends_in_one_sentence(tmp_path, serve, hub, monkeypatch):
    cfg = make_project(tmp_path, model_training="  publish: {token_env: LAB_HF_TOKEN, "
                                                "timeout_s: 1}")
    _, url = serve(cfg)
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)

    # No token: refused at once, and the page says what to do instead of showing the form.
    status, out = publish_run(c, run_id, repo_id="alice/x")
    assert status == 409 and "the server's environment has no LAB_HF_TOKEN" in out["error"]
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert 'id="publish-unready"' in page and 'id="publish-form"' not in page

    hub.add_repo("bob/taken", "bob")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = "http://127.0.0.1:%d" % closed.getsockname()[1]
    closed.close()
    cases = [
        ("hf_read_alice", "alice/x", {}, None,
         "The token in LAB_HF_TOKEN (account alice) can only read, so it cannot publish."),
        ("hf_not_a_token", "alice/x", {}, None,
         "refused the token in LAB_HF_TOKEN (HTTP 401"),
        (TOKEN, "bob/taken", {}, None, "did not let alice write to bob/taken (HTTP 403"),
        (TOKEN, "bob/new", {}, None, "did not let alice write to bob/new (HTTP 403"),
        (TOKEN, "alice/x", {}, dead, "could not be reached from this server while checking "
                                     "the token"),
        (TOKEN, "alice/x", {"hang": "/api/whoami-v2"}, None,
         "did not answer within 1 s while checking the token"),
        (TOKEN, "alice/y", {"fail": "/api/models/alice/y/commit"}, None,
         "failed (HTTP 500 (the fake Hub fails here <b>on purpose</b>)) while committing to "
         "alice/y; it may be down for a while. Try again later."),
    ]
    for token, repo, switch, endpoint, sentence in cases:
        monkeypatch.setenv("LAB_HF_TOKEN", token)
        use_endpoint(monkeypatch, endpoint or hub.url)
        hub.hang = {switch["hang"]} if "hang" in switch else set()
        hub.fail = {switch["fail"]: 500} if "fail" in switch else {}
        status, out = publish_run(c, run_id, repo_id=repo)
        assert status == 202, out
        state = wait_published(c, run_id)
        assert state["state"] == "failed" and sentence in state["error"], (sentence, state)
        assert token not in state["error"]
        page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
        assert 'id="publish-error"' in page and "<b>on purpose" not in page
        assert wait_run(c, run_id)["status"] == "success"  # the run never changes
    hub.release.set()
    assert "bob/taken" in hub.repos and not hub.repos["bob/taken"]["commits"]
    assert "alice/x" not in hub.repos


def test_a_token_the_hub_quotes_never_shows_even_in_part(tmp_path, serve, hub, monkeypatch,
                                                          capsys):
    """A Hub (or a proxy before it) that quotes the request's token in its error, at the start
    and across the point where the Hub's words are cut: no piece of the token reaches the API's
    answer, the run page, the run log or the command line (the Hub's words are kept, masked)."""
    secret = "hf_" + "qP7xZ2mK9vR4tL8wN3bY6cJ1dF5gH0sAeU"
    unknown = "hf_" + "Wm4kT9pQ2zX7vB5nR8sL3yD6gH1jC0fAeV"
    hub.tokens[secret] = ("alice", "write")
    hub.echo = True
    cfg = make_project(tmp_path)
    _, url = serve(cfg)
    c = Client(url)
    run_id = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))[
        "run_id"]

    def pieces(token, text):
        return sorted({token[i:i + 8] for i in range(len(token) - 7)} & {
            text[i:i + 8] for i in range(len(text) - 7)})

    hub.add_repo("bob/taken", "bob")
    for token, repo, fail, said in (
            (unknown, "alice/y", {}, "(HTTP 401)"),  # the client keeps no words of a 401 here
            (secret, "bob/taken", {}, "write to bob/taken (HTTP 403 (token ***: "),
            (secret, "alice/y", {"/api/models/alice/y/commit": 500}, "(HTTP 500 (token ***: ")):
        monkeypatch.setenv("HF_TOKEN", token)
        hub.fail = fail
        assert publish_run(c, run_id, repo_id=repo)[0] == 202
        state = wait_published(c, run_id)
        assert state["state"] == "failed" and said in state["error"], state
        assert pieces(token, json.dumps(state)) == []
        assert pieces(token, c.get(f"/admin/training/runs/{run_id}", headers=H).text) == []
        log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
        assert said in log and pieces(token, log) == []

    hub.fail = {"/api/models/alice/cli/commit": 500}
    monkeypatch.setenv("HF_TOKEN", secret)
    capsys.readouterr()
    assert main(["training", "publish", run_id, cfg, "--repo", "alice/cli"]) == 1
    out, err = capsys.readouterr()
    assert "(HTTP 500 (token ***: " in err and pieces(secret, out + err) == []


def test_one_publish_at_a_time(tmp_path, serve, hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    hub.hang = {"/api/repos/create"}
    assert publish_run(c, run_id, repo_id="alice/one")[0] == 202
    deadline = time.time() + 30
    while not any(r["path"] == "/api/repos/create" for r in hub.requests):
        assert time.time() < deadline
        time.sleep(0.05)
    status, out = publish_run(c, run_id, repo_id="alice/two")
    assert status == 409 and "one publish runs at a time" in out["error"]
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert 'id="publish-progress"' in page and "creating the repo alice/one" in page
    assert 'id="publish-button" disabled' in page
    hub.release.set()  # the create answers nothing: the client's timeout (60 s) is not waited
    state = wait_published(c, run_id, timeout=120)
    assert state["state"] == "failed"


def test_retention_leaves_a_run_being_published(tmp_path, serve, hub, monkeypatch):
    """retain_runs does not delete the files of a run while it is published (they would
    vanish halfway, leaving an empty repo); a file gone anyway is said in a sentence."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    _, url = serve(make_project(tmp_path, "    policy: newest\n  retain_runs: 1"))
    c = Client(url)
    r1 = wait_run(c, start_run(c, trainer="test-warns", schemas=["sentiment"]))["run_id"]
    hub.pause = {"/api/repos/create"}
    assert publish_run(c, r1, repo_id="alice/kept")[0] == 202
    deadline = time.time() + 30
    while not any(r["path"] == "/api/repos/create" for r in hub.requests):
        assert time.time() < deadline
        time.sleep(0.05)
    r2 = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))
    assert r2["in_use"] == ["sentiment"]  # a model that beats the baseline: r1 is not kept
    assert c.json("GET", f"/admin/training/api/runs/{r1}", headers=H)[1]["pruned_at"] is None
    hub.resume.set()
    state = wait_published(c, r1)
    assert state["state"] == "published", state
    assert "weights.bin" in " ".join(_files(hub, "alice/kept"))


def test_a_model_file_gone_while_publishing_is_said(tmp_path):
    from potato.training.hub import client as hub_mod
    session = hub_mod.Session("http://127.0.0.1:9", TOKEN, 5, "HF_TOKEN")
    try:
        with pytest.raises(hub_mod.HubFailure) as e:
            session.push(hub_mod.Commit("alice/x", False, "m", "d",
                                        [("w.bin", str(tmp_path / "w.bin"))]),
                         b"card", lambda s: None)
    finally:
        session.close()
    assert str(e.value).startswith("The run's model files changed on this server while "
                                   "preparing the upload: %s is gone" % (tmp_path / "w.bin"))
    assert "nothing was committed" in str(e.value)


def test_a_refused_form_shows_the_run_page_again_with_the_input(tmp_path, serve, hub,
                                                                monkeypatch):
    """Without JavaScript: the reason on the run page (inside the admin pages), the form
    still holding what was typed, escaped; nothing reaches the Hub."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=["sentiment"]))[
        "run_id"]
    form = {"repo_id": "<img src=x>", "private": "true", "commit_message": "first <b>try</b>"}
    resp = c.post(f"/admin/training/runs/{run_id}/publish", headers=H, form=form)
    assert resp.status == 400 and 'class="error"' in resp.text
    assert 'href="/admin/training"' in resp.text and 'id="publish-form"' in resp.text
    assert 'value="&lt;img src=x&gt;"' in resp.text and "<img src=x>" not in resp.text
    assert 'value="first &lt;b&gt;try&lt;/b&gt;"' in resp.text
    assert 'value="true" checked' in resp.text
    monkeypatch.delenv("HF_TOKEN")
    resp = c.post(f"/admin/training/runs/{run_id}/publish", headers=H,
                  form={"repo_id": "alice/kept"})
    assert resp.status == 409 and "No Hugging Face token" in resp.text
    assert not hub.requests


@pytest.mark.parametrize("uri, backend, expected", [
    ("ssh://gpu.example.org/home/u/.cache/potato-training/jobs/r1-x/artifacts", "gpu",
     "fetch_artifacts: false kept the model files on the GPU host, at ssh://gpu.example.org"),
    ("ssh://big.example.org/w/jobs/r1-x/artifacts", "big",
     "larger than max_artifact_mb (100 MB), so they stayed on the GPU host"),
    ("agent://lab-pc/home/u/.cache/potato-training/jobs/r1/artifacts", "lab",
     "the model files stayed on the agent's machine (over max_artifact_mb, a copy that failed, "
     "or a run from before agent runs copied them back; the run log says which), at "
     "agent://lab-pc/"),
    ("agent://lab-pc/w/jobs/r1/artifacts", "kept",
     "fetch_artifacts: false kept the model files on the agent's machine, at agent://lab-pc/"),
])
def test_a_model_left_on_its_host_cannot_be_published(tmp_path, serve, hub, monkeypatch, uri,
                                                      backend, expected):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    cfg = make_project(tmp_path, labels=False, model_training="""\
  backends:
    gpu: {type: ssh, host: gpu.example.org, fetch_artifacts: false}
    big: {type: ssh, host: big.example.org, max_artifact_mb: 100}
    lab: {type: agent}
    kept: {type: agent, fetch_artifacts: false}""")
    from potato.config.settings import load

    store = Store(load(cfg)[0].db_path)
    try:
        runs = RunStore(store)
        run_id = runs.create("text-naive-bayes", ["sentiment"], backend, {}).run_id
        assert runs.finish(run_id, "success", artifact_uri=uri)
    finally:
        store.close()
    _, url = serve(cfg, training=False)
    c = Client(url)
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert 'id="publish-blocked"' in page and html.escape(expected) in page
    assert 'id="publish-form"' not in page
    status, out = publish_run(c, run_id, repo_id="alice/x")
    assert status == 409 and expected in out["error"] and uri in out["error"]
    assert not hub.requests


def test_hostile_requests(tmp_path, serve, hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="test-sigkill", schemas=["sentiment"])
    wait_run(c, run_id)
    assert "Only a successful run" in publish_run(c, run_id, repo_id="alice/x")[1]["error"]
    assert c.json("POST", "/admin/training/api/runs/r999/publish", json_body={"repo_id": "a/b"},
                  headers=H)[0] == 404
    ok = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, ok)
    for body in ({"repo_id": "<script>alert(1)</script>"}, {"repo_id": "a/b", "private": "no"},
                 {"repo_id": "a/b", "token": "x"}, {"repo_id": "a/b", "commit_message": ["x"]}):
        status, out = publish_run(c, ok, **body)
        assert status == 400, (body, out)
    r = c.post(f"/admin/training/runs/{ok}/publish", headers=H,
               form={"repo_id": "<img src=x onerror=alert(1)>", "private": "true"})
    assert r.status == 400 and "<img" not in r.text
    assert c.post(f"/admin/training/runs/{ok}/publish", form={"repo_id": "a/b"}).status in (
        303, 401, 403)
    assert publish_run(c, ok, repo_id="alice/form")[0] == 202  # still works afterwards
    assert wait_published(c, ok)["state"] == "published"
    r = c.post(f"/admin/training/runs/{ok}/publish", headers=H,
               form={"repo_id": "alice/form", "private": "false", "commit_message": ""})
    assert r.status == 303 and r.getheader("Location") == f"/admin/training/runs/{ok}"
    assert wait_published(c, ok)["state"] == "published"
    assert len(hub.repos["alice/form"]["commits"]) == 2


def test_without_the_library(tmp_path, serve, hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if not installed
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert "pip install &#x27;potato-annotation[publish]&#x27;" in page
    status, out = publish_run(c, run_id, repo_id="alice/x")
    assert status == 409 and "pip install 'potato-annotation[publish]'" in out["error"]


def test_the_server_starts_without_the_library():
    code = ("import sys; sys.modules['huggingface_hub'] = None\n"
            "import potato.server.app, potato.training.web.api, potato.commands.publish\n"
            "from potato.training.hub import client; assert not client.available()\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.stdout.strip() == "ok", out.stderr
    code = ("import sys, potato.server.app, potato.training.web.api\n"
            "print('huggingface_hub' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.stdout.strip() == "False", out.stderr


# -- the command line --------------------------------------------------------------------------

def test_cli_publishes_without_a_server(tmp_path, serve, hub, monkeypatch, capsys):
    cfg = make_project(tmp_path)
    server, url = serve(cfg)
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    capsys.readouterr()
    args = ["training", "publish", run_id, cfg, "--repo", "alice/cli", "--private"]
    assert main(args) == 1
    assert ("No Hugging Face token: this command's environment has no HF_TOKEN. Create a token "
            "with write access on the Hub (Settings, Access Tokens), set HF_TOKEN in this "
            "command's environment, and run it again.") in capsys.readouterr().err
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert main(args + ["--message", "from the shell"]) == 0
    out = capsys.readouterr().out
    assert f"Published to {hub.url}/alice/cli, commit " in out and "publishing: " in out
    assert hub.repos["alice/cli"]["private"] is True
    assert hub.repos["alice/cli"]["commits"][0]["summary"] == "from the shell"
    assert main(["training", "publish", "r999", cfg, "--repo", "alice/cli"]) == 1
    assert "no run r999" in capsys.readouterr().err
    assert main(["training", "publish", "../x", cfg, "--repo", "alice/cli"]) == 1
    # the run page of the server shows what the command published
    assert f"{hub.url}/alice/cli" in c.get(f"/admin/training/runs/{run_id}", headers=H).text


def test_cli_goes_through_the_running_server(tmp_path, serve, hub, monkeypatch, capsys):
    from potato.config.settings import load
    from potato.project.paths import remove_server_file, write_server_file

    cfg = make_project(tmp_path)
    _, url = serve(cfg)
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    config = load(cfg)[0]
    write_server_file(config, url)  # as potato start does: the command finds the server
    try:
        args = ["training", "publish", run_id, cfg, "--repo", "alice/via-server"]
        assert main(args) == 1  # the server's environment (this process's here) has no token
        err = capsys.readouterr().err
        assert "the server's environment has no HF_TOKEN" in err
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        assert main(args) == 0
        out = capsys.readouterr().out
        assert f"Publishing through the running server at {url}" in out
        assert f"Published to {hub.url}/alice/via-server, commit " in out
    finally:
        remove_server_file(config)
    assert len(hub.repos["alice/via-server"]["commits"]) == 1


def test_card_code_spans_hold_backticks_and_newlines_as_one_span():
    run = {"run_id": "r2", "trainer": "hf-text-classification", "schemas": ["s"],
           "params": {"model": "org/m`x", "lora": True}, "holdout": None}
    text = model_card.card(RunView.from_dict(run),
                           model_card.Release("alice/x", ["weird`name.bin", "two\nlines.txt"]),
                           {"s": {"type": "radio", "labels": ["`tick", "a``b"]}}, None, {})
    assert "- base model: ``org/m`x``" in text
    assert "- ``weird`name.bin``" in text and "- `two lines.txt`" in text
    assert "(radio): `` `tick ``, ```a``b```" in text


# -- hub.py against the fake Hub, without a server -------------------------------------------------

CARD = b"---\nlicense: mit\n---\n# model\n"


@pytest.fixture
def bare_hub(monkeypatch):
    """The fake Hub, reached only through the endpoint hub.publish is given: the library's
    own default (HF_ENDPOINT) points at a closed port."""
    fake = FakeHub()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    use_endpoint(monkeypatch, "http://127.0.0.1:%d" % closed.getsockname()[1])
    closed.close()
    yield fake
    fake.close()


class Publish:
    """hub.publish with a model file, what card_for was asked and each step said."""

    def __init__(self, fake, tmp_path, sizes=(7,)):
        self.fake, self.steps, self.cards = fake, [], []
        self.files = []
        for i, size in enumerate(sizes):
            path = tmp_path / ("w%d.bin" % i)
            path.write_bytes(b"w" * size)
            self.files.append(("w%d.bin" % i, str(path)))

    def __call__(self, repo="alice/m", token=TOKEN, endpoint=None, card=CARD, timeout_s=5,
                 private=False, step=None):
        def card_for(repo_id):
            self.cards.append(repo_id)
            if isinstance(card, BaseException):
                raise card
            return card

        commit = hub_mod.Commit(repo_id=repo, private=private, message="the message",
                                description="the description", files=self.files)
        return hub_mod.publish(endpoint or self.fake.url, token, timeout_s, "LAB_TOKEN", commit,
                               card_for, step or self.steps.append)

    def fails(self, **kw):
        with pytest.raises(hub_mod.HubFailure) as e:
            self(**kw)
        return str(e.value)


from potato.training.hub import client as hub_mod  # noqa: E402


def test_publish_commits_the_files_and_the_card_and_answers_where(bare_hub, tmp_path):
    pub = Publish(bare_hub, tmp_path, sizes=(1_000_000, 150_001))
    out = pub(repo="m", private=True)  # a bare name goes under the token's account
    repo = bare_hub.repos["alice/m"]
    oid = repo["commits"][0]["oid"]
    assert out == {"repo_id": "alice/m", "account": "alice", "commit": oid,
                   "url": "%s/alice/m" % bare_hub.url,
                   "commit_url": "%s/alice/m/commit/%s" % (bare_hub.url, oid)}
    assert repo["private"] is True and pub.cards == ["alice/m"]
    assert repo["files"] == {"w0.bin": b"w" * 1_000_000, "w1.bin": b"w" * 150_001,
                             "README.md": CARD}
    assert (repo["commits"][0]["summary"], repo["commits"][0]["description"]) == (
        "the message", "the description")
    assert pub.steps[0] == "checking the token with %s" % bare_hub.url
    m = re.search(r"(\d+) files \(([\d.]+) MB\) to alice/m", pub.steps[1])
    assert m and (int(m.group(1)), m.group(2)) == (3, "1.2")  # the card is the third
    assert "alice/m" in pub.steps[2] and len(pub.steps) == 3
    assert all(r["auth"] == "Bearer " + TOKEN for r in bare_hub.requests)
    assert all(r["agent"].startswith("potato-annotation/") for r in bare_hub.requests)
    again = pub(repo="alice/m", private=False, card=CARD + b"again\n")  # the repo exists
    assert again["commit"] == repo["commits"][1]["oid"] != oid
    assert repo["commits"][1]["files"] == ["README.md"] and repo["files"]["README.md"].endswith(
        b"again\n")
    assert repo["private"] is True  # an existing repo keeps its visibility


@pytest.mark.parametrize("oid", ["a" * 40, "0123456789abcdef" * 4])
def test_a_commit_id_of_sha1_or_sha256_is_taken(bare_hub, tmp_path, oid):
    bare_hub.oid = oid
    out = Publish(bare_hub, tmp_path)()
    assert out["commit"] == oid and out["commit_url"].endswith("/commit/" + oid)


@pytest.mark.parametrize("oid", ["", "a" * 39, "a" * 41, "A" * 40, "g" * 40, "a" * 63,
                                 "a" * 40 + "\n", "a" * 40 + "/x"])
def test_a_commit_answered_without_a_valid_id_is_said(bare_hub, tmp_path, oid):
    bare_hub.oid = oid
    said = Publish(bare_hub, tmp_path).fails()
    assert said.startswith("The Hugging Face Hub at %s accepted the commit to alice/m but "
                           "answered no valid commit id" % bare_hub.url)
    assert said.endswith("open the repo's page to see whether it is there.")


def test_each_failure_of_the_client_is_a_sentence_of_its_own(bare_hub):
    """The client's own exceptions (named as httpx, requests, h11 and huggingface_hub name
    them), each made here so that no other name in its class tree matches."""
    session = hub_mod.Session(bare_hub.url, TOKEN, 7, "LAB_TOKEN")
    where = "The Hugging Face Hub at %s" % bare_hub.url

    def said(exc):
        return session.explain(exc, "alice/m")

    try:
        for name in ("ConnectError", "NetworkError", "ConnectionError", "ProtocolError",
                     "OfflineModeIsEnabled"):
            kind = type(name, (Exception,), {})
            assert said(kind("no route\nwith %s" % TOKEN)).startswith(
                "%s could not be reached from this server while checking the token (no route "
                "with ***). " % where), name
            assert "checking the token (%s). " % name in said(kind()), name
        assert said(type("ReadTimeout", (Exception,), {})()) == (
            "%s did not answer within 7 s while checking the token. It may be slow or "
            "unreachable from this server; try again later, or raise "
            "model_training.publish.timeout_s." % where)
        assert said(FileNotFoundError(2, "No such file", "/run/w.bin")) == session.vanished(
            "/run/w.bin")
        assert "/run/w.bin is gone" in session.vanished("/run/w.bin")
        assert said(FileNotFoundError("gone")) == session.vanished("a model file")
        assert said(ValueError("Provided path: '/x' is not a file on the local file "
                               "system")) == session.vanished("a model file")
        assert said(ValueError("Invalid metadata in README.md: %s" % TOKEN)) == (
            "%s rejected the model card's metadata: Invalid metadata in README.md: ***. This "
            "is a Potato bug; please report it." % where)
        assert said(RuntimeError("README.md is not a file %s" % TOKEN)) == (
            "Publishing failed while checking the token: RuntimeError: README.md is not a "
            "file ***. The server log has the details.")
        assert said(hub_mod.HubFailure("As it is.")) == "As it is."
    finally:
        session.close()


def test_the_hubs_words_are_one_line_cut_at_200_characters(bare_hub):
    """docs/security.md: the Hub's words in a sentence are masked, then cut to 200
    characters."""
    class HubError(Exception):
        response = type("Response", (), {"status_code": 500})()
        server_message = "first\n  line " + "w" * 1000

    session = hub_mod.Session(bare_hub.url, TOKEN, 5, "LAB_TOKEN")
    try:
        said = session.explain(HubError(), "alice/m")
    finally:
        session.close()
    kept = ("first line " + "w" * 1000)[:200]
    assert "(HTTP 500 (%s)) while checking the token" % kept in said, said


def test_an_http_error_without_the_hubs_words_is_said_by_its_status(bare_hub):
    """An HTTP error of the client's stack that carries a response but no words of the Hub."""
    class HTTPStatusError(Exception):
        response = type("Response", (), {"status_code": 503})()

    session = hub_mod.Session(bare_hub.url, TOKEN, 5, "LAB_TOKEN")
    try:
        said = session.explain(HTTPStatusError("boom"), "alice/m")
    finally:
        session.close()
    assert said == ("The Hugging Face Hub at %s failed (HTTP 503) while checking the token; it "
                    "may be down for a while. Try again later." % bare_hub.url)


@pytest.mark.parametrize("account", ["a", "a" * 96, "Org.Name_x-1", "9lives"])
def test_an_account_name_of_the_hubs_shape_is_taken(bare_hub, tmp_path, account):
    bare_hub.tokens["hf_new"] = (account, "write")
    assert Publish(bare_hub, tmp_path)(repo="m", token="hf_new")["account"] == account


@pytest.mark.parametrize("account", ["", "a" * 97, "-a", ".a", "a b", "a/b", "<b>", "alice\n"])
def test_a_token_check_without_an_account_name_is_said(bare_hub, tmp_path, account):
    bare_hub.tokens["hf_new"] = (account, "write")
    said = Publish(bare_hub, tmp_path).fails(token="hf_new")
    assert said.startswith("The Hugging Face Hub at %s answered the token check without an "
                           "account name" % bare_hub.url)
    assert [r["path"] for r in bare_hub.requests] == ["/api/whoami-v2"]  # nothing made


@pytest.mark.parametrize("answer", [["alice"], "alice", {"name": 7}, {"user": "alice"}])
def test_a_token_check_answered_in_another_shape_is_said(bare_hub, tmp_path, answer):
    bare_hub.whoami = answer
    said = Publish(bare_hub, tmp_path).fails()
    assert said.startswith("The Hugging Face Hub at %s answered the token check without an "
                           "account name" % bare_hub.url)


@pytest.mark.parametrize("auth", [None, "write", {"accessToken": "read"},
                                  {"accessToken": {"role": None}}])
def test_a_token_check_that_does_not_say_the_role_lets_the_hub_decide(bare_hub, tmp_path,
                                                                      auth):
    bare_hub.whoami = {"name": "alice", "auth": auth}
    assert Publish(bare_hub, tmp_path)()["account"] == "alice"


def test_a_repo_of_another_account_is_refused_with_where_to_publish_instead(bare_hub,
                                                                          tmp_path):
    bare_hub.add_repo("bob/taken", "bob")
    said = Publish(bare_hub, tmp_path).fails(repo="bob/taken")
    assert said.startswith("The Hugging Face Hub at %s did not let alice write to bob/taken "
                           "(HTTP 403 (" % bare_hub.url)
    assert said.endswith("Publish to alice/taken, or ask the owner for write access.")
    assert not bare_hub.repos["bob/taken"]["commits"]


def test_a_failure_before_the_conversation_starts_is_one_sentence(bare_hub, tmp_path,
                                                                  monkeypatch):
    def broken(*args):
        raise RuntimeError("the client\nbroke with %s" % TOKEN)

    monkeypatch.setattr(hub_mod, "Session", broken)
    assert Publish(bare_hub, tmp_path).fails() == (
        "Publishing could not start: RuntimeError: the client broke with ***.")

    def refused(*args):
        raise hub_mod.HubFailure("As the Hub said.")

    monkeypatch.setattr(hub_mod, "Session", refused)
    assert Publish(bare_hub, tmp_path).fails() == "As the Hub said."
    assert not bare_hub.requests


def test_a_read_token_is_refused_before_anything_is_made(bare_hub, tmp_path):
    said = Publish(bare_hub, tmp_path).fails(token="hf_read_alice")
    assert said.startswith("The token in LAB_TOKEN (account alice) can only read")
    assert "%s/settings/tokens" % bare_hub.url in said
    assert [r["path"] for r in bare_hub.requests] == ["/api/whoami-v2"]


@pytest.mark.parametrize("path, status, said", [
    ("/api/whoami-v2", 403, "did not let the token's account write to alice/m (HTTP 403 ("),
    ("/api/repos/create", 401, "refused the token in LAB_TOKEN (HTTP 401 ("),
    ("/api/repos/create", 403, "did not let alice write to alice/m (HTTP 403 ("),
    ("/api/repos/create", 429, "(HTTP 429 (the fake Hub fails here <b>on purpose</b>)) while "
                               "creating the repo alice/m;"),
    ("/api/repos/create", 418, "answered HTTP 418 (the fake Hub fails here <b>on purpose</b>) "
                               "while creating the repo alice/m."),
    ("/api/repos/create", 499, "answered HTTP 499 ("),
    ("/api/models/alice/m/commit", 500, "failed (HTTP 500 (the fake Hub fails here <b>on "
                                        "purpose</b>)) while committing to alice/m;"),
    ("/api/models/alice/m/commit", 503, "failed (HTTP 503 ("),
])
def test_each_answer_of_the_hub_is_a_sentence_of_its_own(bare_hub, tmp_path, path, status,
                                                         said):
    bare_hub.fail = {path: status}
    out = Publish(bare_hub, tmp_path).fails()
    assert out.startswith("The Hugging Face Hub at %s " % bare_hub.url) and said in out, out
    assert "\n" not in out


def test_a_hub_that_does_not_answer_names_what_was_being_done(bare_hub, tmp_path):
    for path, doing in (("/api/whoami-v2", "checking the token"),
                        ("/api/models/alice/m/commit", "committing to alice/m")):
        bare_hub.hang = {path}
        said = Publish(bare_hub, tmp_path).fails(timeout_s=1)
        assert said.startswith("The Hugging Face Hub at %s did not answer within 1 s while %s."
                               % (bare_hub.url, doing)), said
    bare_hub.release.set()


def test_a_hub_that_cannot_be_reached_is_said(bare_hub, tmp_path):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = "http://127.0.0.1:%d" % closed.getsockname()[1]
    closed.close()
    said = Publish(bare_hub, tmp_path).fails(endpoint=dead)
    assert said.startswith("The Hugging Face Hub at %s could not be reached from this server "
                           "while checking the token (" % dead), said
    assert "()" not in said


@pytest.mark.parametrize("card", [b"---\n- [a\n---\n# m\n", b"---\n[1, 2]\n---\n# m\n"])
def test_a_card_the_hub_refuses_is_said_as_a_bug(bare_hub, tmp_path, card):
    said = Publish(bare_hub, tmp_path).fails(card=card)
    assert said.startswith("The Hugging Face Hub at %s rejected the model card's metadata: "
                           "Invalid metadata in README.md. - " % bare_hub.url)
    assert said.endswith("This is a Potato bug; please report it.")
    assert not bare_hub.repos["alice/m"]["commits"]


def test_a_model_file_gone_on_the_way_is_said_and_nothing_committed(bare_hub, tmp_path):
    pub = Publish(bare_hub, tmp_path)

    def step(text):
        if "alice/m" in text and not text.startswith("uploading"):
            os.unlink(pub.files[0][1])  # once the repo is made, before the commit reads it

    said = pub.fails(step=step)
    assert said.startswith("The run's model files changed on this server while committing to "
                           "alice/m: ")
    assert not bare_hub.repos["alice/m"]["commits"]
    gone = pub.fails()  # gone before the publish: named, with the step it was found in
    assert gone.startswith("The run's model files changed on this server while preparing the "
                           "upload: %s is gone" % pub.files[0][1])
    m = re.search(r"(\d+) files \(([\d.]+) MB\)", pub.steps[-1])
    assert m and m.groups() == ("2", "0.0")  # a file gone counts nothing


def test_any_other_failure_is_one_sentence_with_the_token_masked(bare_hub, tmp_path):
    said = Publish(bare_hub, tmp_path).fails(
        card=RuntimeError("the card\nbroke <b>here</b> with %s in it" % TOKEN))
    assert said == ("Publishing failed while checking the token: RuntimeError: the card broke "
                    "<b>here</b> with *** in it. The server log has the details.")

    def step(text):
        raise OSError("the state file %s cannot be written" % TOKEN)

    asked = len(bare_hub.requests)
    said = Publish(bare_hub, tmp_path).fails(step=step)
    assert said == ("Publishing failed while checking the token: OSError: the state file *** "
                    "cannot be written. The server log has the details.")
    assert len(bare_hub.requests) == asked  # it stopped before its first request


def test_without_the_library_publishing_says_how_to_install_it(bare_hub, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if not installed
    assert hub_mod.available() is False
    assert Publish(bare_hub, tmp_path).fails() == hub_mod.NO_LIBRARY
    assert "pip install 'potato-annotation[publish]'" in hub_mod.NO_LIBRARY
    import types
    monkeypatch.setitem(sys.modules, "huggingface_hub", types.ModuleType("huggingface_hub"))
    assert hub_mod.available() is False  # a stand-in without a spec: it cannot be told
    monkeypatch.delitem(sys.modules, "huggingface_hub")
    assert hub_mod.available() is True


@pytest.mark.parametrize("value, endpoint", [
    (None, "https://huggingface.co"), ("", "https://huggingface.co"),
    (" https://hub.example.org/ ", "https://hub.example.org"),
    ("http://127.0.0.1:8080//", "http://127.0.0.1:8080"),
    ("https://[::1]:9/hub/", "https://[::1]:9/hub"), ("https://HUBX/X/", "https://HUBX/X")])
def test_the_endpoint_comes_from_hf_endpoint(value, endpoint):
    environ = {} if value is None else {"HF_ENDPOINT": value}
    assert hub_mod.endpoint_of(environ) == endpoint


@pytest.mark.parametrize("value", ["ftp://hub.example.org", "hub.example.org",
                                   "https://hub example.org", "https://hub.example.org/a b",
                                   "javascript:alert(1)", "https://", "https://x/?q=1"])
def test_an_endpoint_that_is_not_an_http_url_is_refused_with_what_to_do(value):
    with pytest.raises(hub_mod.HubFailure) as e:
        hub_mod.endpoint_of({"HF_ENDPOINT": value})
    assert str(e.value).startswith("HF_ENDPOINT in the server's environment is not an http(s) "
                                   "URL")


# -- Publishing a run's model, unit by unit (issue 26: the mutation run's tests for (folded in from test_publish.py) ----------
# potato/training/hub/publish.py). No Hub and no server: ``hub.publish`` is replaced by a stand-in,
# the config by a namespace with the fields publish reads, runs by folders in tmp_path.




def make_cfg(backends=None, token_env="HF_TOKEN", license=None):
    return SimpleNamespace(
        model_training=SimpleNamespace(
            publish=SimpleNamespace(token_env=token_env, license=license, timeout_s=7),
            backends=backends or {}),
        schemes=[SimpleNamespace(name="s", annotation_type="radio", labels=["a", "b"]),
                 SimpleNamespace(name="t", annotation_type="span", labels=None)])


def view(run_id="r1", status="success", uri="", backend="local", **kw):
    """A run's view, from the API's JSON (its keys; the rest as a fresh run's)."""
    v = {"run_id": run_id, "status": status, "artifact_uri": uri, "backend": backend,
         "trainer": "tr"}
    v.update(kw)
    return RunView.from_dict(v)


@pytest.fixture
def runs(tmp_path):
    def paths_of(run_id):
        return RunPaths(str(tmp_path / "runs" / run_id))

    def make(run_id="r1", files=("model/w.bin", "model/config.json")):
        p = paths_of(run_id)
        for rel in files:
            path = os.path.join(p.artifacts, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(b"x" * 10)
        os.makedirs(p.root, exist_ok=True)
        return p

    return SimpleNamespace(paths_of=paths_of, make=make)


@pytest.fixture
def sleeper():
    """A live process of ours that is not our parent (a mutant that signals the pid it asks
    about must not reach the test runner)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


# -- the request's fields ---------------------------------------------------------------------------

def test_check_repo_id():
    assert publish.check_repo_id("  a/b\t") == "a/b"
    assert publish.check_repo_id("a") == "a"
    assert publish.check_repo_id("a" * 96 + "/" + "b" * 96) == "a" * 96 + "/" + "b" * 96
    assert publish.check_repo_id("a.b_c-d") == "a.b_c-d"
    for bad in (None, 3, "", " ", "a/b/c", "a--b", "a..b", "a.git", "a/b.git", "_a", "a_",
                "a" * 97, "a b"):
        with pytest.raises(publish.Refused) as e:
            publish.check_repo_id(bad)
        assert e.value.status == 400 and e.value.message == str(e.value)
    with pytest.raises(publish.Refused) as e:
        publish.check_repo_id("x" * 150 + "!")
    assert e.value.message.startswith("'%s' is not a Hugging Face repo id." % ("x" * 100))
    with pytest.raises(publish.Refused) as e:
        publish.check_repo_id(" a b ")
    assert e.value.message.startswith("'a b' is not")
    with pytest.raises(publish.Refused) as e:
        publish.check_repo_id(None)
    assert e.value.message == ("Name the Hugging Face repo to publish to (repo_id), such as "
                               "your-name/review-sentiment.")
    assert publish.check_repo_id("a.gitx") == "a.gitx"


def test_check_private():
    assert publish.check_private(None) is False
    assert publish.check_private(True) is True
    assert publish.check_private(False) is False
    for bad in (1, 0, "true", "false", [], {}):
        with pytest.raises(publish.Refused) as e:
            publish.check_private(bad)
        assert (e.value.status, e.value.message) == (400, "private must be true or false.")


def test_check_message():
    assert publish.check_message(None, "r9") == "Publish Potato run r9"
    assert publish.check_message(" \n ", "r9") == "Publish Potato run r9"
    assert publish.check_message("", "r9") == "Publish Potato run r9"
    assert publish.check_message("  a \n\t b ", "r9") == "a b"
    assert publish.check_message("x" * 200, "r") == "x" * 200
    assert publish.check_message("x" * 100 + "   " + "y" * 99, "r") == "x" * 100 + " " + "y" * 99
    with pytest.raises(publish.Refused) as e:
        publish.check_message("x" * 201, "r")
    assert (e.value.status, e.value.message) == (
        400, "The commit message has 201 characters; keep it to 200 (one line).")
    for bad in (5, ["m"], b"m"):
        with pytest.raises(publish.Refused) as e:
            publish.check_message(bad, "r")
        assert (e.value.status, e.value.message) == (400, "commit_message must be a string.")
    assert publish.MESSAGE_MAX == 200


# -- what may be published ----------------------------------------------------------------------------

def test_cannot_publish_a_run_that_did_not_succeed_or_left_nothing(runs):
    cfg = make_cfg()
    p = runs.make("r1")
    assert publish.cannot_publish(cfg, view(status="failed"), p.artifacts) == (
        "Only a successful run's model can be published; run r1 is failed.")
    assert publish.cannot_publish(cfg, view(), p.artifacts) is None
    assert publish.cannot_publish(cfg, view(uri=None), p.artifacts) is None
    assert publish.cannot_publish(cfg, RunView(run_id="r1", status="success", backend="x"),
                                  p.artifacts) is None
    empty = runs.make("r2", files=())
    assert publish.cannot_publish(cfg, view("r2"), empty.artifacts) == (
        "Run r2 left no model files on this server, so there is nothing to publish.")
    # issue 38, item 8: files that retention deleted are said so, not "left no model files"
    pruned = view("r2", pruned_at=time.mktime((2026, 12, 1, 9, 30, 0, 0, 0, -1)),
                   pruned_reason="model_training.retain_runs: 1 keeps the model files of the 1 "
                                 "newest successful run (r5). Pin a run to keep its model files.")
    assert publish.cannot_publish(cfg, pruned, empty.artifacts) == (
        "Run r2's model files were deleted on 2026-12-01 09:30, so there is nothing left to "
        "publish: model_training.retain_runs: 1 keeps the model files of the 1 newest "
        "successful run (r5). Pin a run to keep its model files. Run it again for a model to "
        "publish.")


def test_cannot_publish_files_left_on_a_host(runs):
    # a backend's own keys are its options (config/backends.py's Backend)
    kept = SimpleNamespace(options=SimpleNamespace(fetch_artifacts=False, max_artifact_mb=5))
    fetched = SimpleNamespace(options=SimpleNamespace(fetch_artifacts=True, max_artifact_mb=5.5))
    keyless = SimpleNamespace(options=SimpleNamespace(max_artifact_mb=6))  # a kind without it
    cfg = make_cfg({"kept": kept, "fetched": fetched, "keyless": keyless})
    p = runs.make("r1")
    empty = runs.make("r2", files=())

    def why(uri, backend, artifacts=p.artifacts):
        text = publish.cannot_publish(cfg, view(uri=uri, backend=backend), artifacts)
        assert text.startswith("This model cannot be published from the run page: ")
        assert text.endswith(", at %s, and publishing needs the files on this server. Upload "
                             "them from there (huggingface_hub's hf upload), or train again "
                             "with the files fetched." % uri)
        return text[len("This model cannot be published from the run page: "):].split(
            ", at ")[0]

    assert why("ssh://h/x", "kept") == "fetch_artifacts: false kept the model files on the GPU host"
    assert why("agent://m/x", "kept") == ("fetch_artifacts: false kept the model files on the "
                                          "agent's machine")
    assert why("agent://m/x", "fetched", empty.artifacts).startswith(
        "the model files stayed on the agent's machine (over max_artifact_mb")
    assert why("agent://m/x", "fetched") == ("some model files were larger than max_artifact_mb "
                                             "(5.5 MB), so they stayed on the agent's machine "
                                             "(the run log names them)")
    assert why("ssh://h/x", "fetched", empty.artifacts) == (
        "some model files were larger than max_artifact_mb (5.5 MB), so they stayed on the GPU "
        "host (the run log names them)")
    assert why("slurm://h/x", "gone") == (
        "some model files were larger than max_artifact_mb (2048 MB), so they stayed on the "
        "GPU host (the run log names them)")
    assert why("xagent://m/x", "gone").endswith("on the GPU host (the run log names them)")
    assert why("ssh://h/x", "keyless") == (  # a kind without the key fetches its files
        "some model files were larger than max_artifact_mb (6 MB), so they stayed on the GPU "
        "host (the run log names them)")


def test_repo_files_flat_unless_names_clash(runs):
    p = runs.make("r1", files=("model/w.bin", "model/sub/c.json", "model/README.md", "labels.json"))
    a = p.artifacts
    assert publish.repo_files(a) == [("labels.json", os.path.join(a, "labels.json")),
                                     ("sub/c.json", os.path.join(a, "model/sub/c.json")),
                                     ("w.bin", os.path.join(a, "model/w.bin"))]
    p = runs.make("r2", files=("model/labels.json", "labels.json", "README.md", "model/x"))
    a = p.artifacts
    assert publish.repo_files(a) == [("labels.json", os.path.join(a, "labels.json")),
                                     ("model/labels.json", os.path.join(a, "model/labels.json")),
                                     ("model/x", os.path.join(a, "model/x"))]
    p = runs.make("r3", files=("modelx/a", "README.md.txt"))
    a = p.artifacts
    assert publish.repo_files(a) == [("README.md.txt", os.path.join(a, "README.md.txt")),
                                     ("modelx/a", os.path.join(a, "modelx/a"))]
    assert publish.repo_files(runs.make("r4", files=()).artifacts) == []
    p = runs.make("r5", files=("model/a", "model/model/a"))  # no clash: only model/ files
    a = p.artifacts
    assert publish.repo_files(a) == [("a", os.path.join(a, "model/a")),
                                     ("model/a", os.path.join(a, "model/model/a"))]


def test_repo_files_refuses_a_name_that_is_not_utf8(runs, tmp_path):
    p = runs.make("r1")
    name = os.path.join(os.fsencode(p.artifacts), b"bad-\xff.bin")
    with open(name, "wb") as f:
        f.write(b"x")
    with pytest.raises(publish.Refused) as e:
        publish.repo_files(p.artifacts)
    assert e.value.status == 409
    assert e.value.message == ("The model file bad-\\xff.bin has a name that is not UTF-8, which "
                               "the Hub cannot store; rename it in %s and publish again."
                               % p.artifacts)


def test_a_publish_is_interrupted_unless_its_pid_is_a_live_process(runs, sleeper, monkeypatch):
    """A state file that says publishing, left by a server: it still runs while its pid is a
    live process (asked with signal 0, never signalled), else it was interrupted."""
    pub = publisher(runs)
    p = runs.make("r1")

    def said(pid):
        with open(os.path.join(p.root, "publish.json"), "w") as f:
            json.dump({"state": "publishing", "step": "uploading", "pid": pid}, f)
        return pub.state("r1")["state"]
    assert said(sleeper.pid) == "publishing"
    assert sleeper.poll() is None  # asked, not signalled
    for pid in (None, "12", 0, -1, os.getpid(), 1.5, [4]):
        assert said(pid) == "failed", pid
    dead = []

    def with_kill(kill):  # publish's own os, so that the test runner's stays as it is
        monkeypatch.setattr(publish, "os", SimpleNamespace(kill=kill, getpid=os.getpid,
                                                           path=os.path))

    def kill(pid, sig):
        dead.append((pid, sig))
        raise ProcessLookupError()
    with_kill(kill)
    assert said(4242) == "failed" and dead == [(4242, 0)]

    def not_ours(pid, sig):
        raise PermissionError(errno.EPERM, "not permitted")
    with_kill(not_ours)
    assert said(4242) == "publishing"  # alive, only not ours to signal
    with_kill(lambda pid, sig: None)
    assert said(1) == "publishing"


# -- the publisher ----------------------------------------------------------------------------------

class HubStandIn:
    """hub.publish's stand-in: records its arguments, says each step, returns a result or
    raises ``fail``; ``gate`` holds it until set."""

    def __init__(self, monkeypatch):
        self.calls, self.fail, self.cards = [], None, []
        self.gate = threading.Event()
        self.gate.set()
        self.before = threading.Event()  # held before the first step
        self.before.set()
        self.steps_seen = []
        monkeypatch.setattr(hub_mod, "publish", self)
        monkeypatch.setattr(hub_mod, "available", lambda: True)

    def __call__(self, endpoint, token, timeout_s, token_env, commit, card_for, step):
        repo_id = commit.repo_id
        self.calls.append(dict(endpoint=endpoint, token=token, timeout_s=timeout_s,
                               token_env=token_env, repo_id=repo_id, private=commit.private,
                               message=commit.message, description=commit.description,
                               files=commit.files))
        self.before.wait(20)
        step("uploading")
        self.steps_seen.append(self.state_file and json.load(open(self.state_file)))
        self.gate.wait(20)
        if self.fail is not None:
            raise self.fail
        self.cards.append(card_for("alice/" + repo_id.split("/")[-1]))
        return {"repo_id": "alice/m", "account": "alice", "commit": "c0ffee",
                "url": "%s/alice/m" % endpoint, "commit_url": "%s/alice/m/commit/c0ffee"
                % endpoint}

    state_file = None


@pytest.fixture
def fake(monkeypatch):
    return HubStandIn(monkeypatch)


def publisher(runs, environ=None, cfg=None, **kw):
    env = {"HF_TOKEN": " %s " % TOKEN} if environ is None else environ
    return publish.Publisher(cfg or make_cfg(), runs.paths_of, environ=env, **kw)


def state_on_disk(runs, run_id="r1"):
    with open(os.path.join(runs.paths_of(run_id).root, "publish.json")) as f:
        return json.load(f)


def test_state_of_a_run_never_published_or_unreadable(runs):
    pub = publisher(runs)
    p = runs.make("r1")
    assert pub.state("r1") == {}
    with open(os.path.join(p.root, "publish.json"), "w") as f:
        f.write("{broken")
    assert pub.state("r1") == {}
    with open(os.path.join(p.root, "publish.json"), "w") as f:
        f.write("[1, 2]")
    assert pub.state("r1") == {}
    with open(os.path.join(p.root, "publish.json"), "w") as f:
        json.dump({"state": "published", "pid": 5}, f)
    assert pub.state("r1") == {"state": "published", "history": []}
    with open(os.path.join(p.root, "publish.json"), "w") as f:
        json.dump({"state": "failed", "history": [{"repo_id": "a/b"}]}, f)
    assert pub.state("r1") == {"state": "failed", "history": [{"repo_id": "a/b"}]}
    assert publish.STATE_FILE == "publish.json"


def test_a_publish_its_server_did_not_finish_is_interrupted(runs, monkeypatch, sleeper):
    pub = publisher(runs)
    p = runs.make("r1")
    with open(os.path.join(p.root, "publish.json"), "w") as f:
        json.dump({"state": "publishing", "step": "uploading", "pid": 0, "history": [1]}, f)
    assert pub.state("r1") == {"state": "failed", "step": "interrupted", "history": [1],
                               "error": publish.INTERRUPTED}
    assert "interrupted" in publish.INTERRUPTED  # a sentence, not an empty error
    with open(os.path.join(p.root, "publish.json"), "w") as f:
        json.dump({"state": "publishing", "step": "uploading", "pid": sleeper.pid}, f)
    assert pub.state("r1") == {"state": "publishing", "step": "uploading", "history": []}
    with open(os.path.join(p.root, "publish.json"), "w") as f:
        json.dump({"state": "publishing", "step": "uploading", "pid": os.getpid()}, f)
    assert pub.state("r1")["state"] == "failed"  # our own pid, but not ours to run now


def test_only_the_run_being_published_now_reads_as_publishing(runs, fake, monkeypatch):
    """Its state file carries our own pid, which alone says nothing: the publisher knows
    which run it publishes now."""
    monkeypatch.setattr(model_card, "card", lambda *a: "c")
    pub = publisher(runs)
    p1, p2 = runs.make("r1"), runs.make("r2")
    fake.gate.clear()
    pub.start(view("r2"), {"repo_id": "m"})
    with open(os.path.join(p1.root, "publish.json"), "w") as f:
        json.dump({"state": "publishing", "step": "uploading", "pid": os.getpid()}, f)
    assert pub.state("r2")["state"] == "publishing"
    assert state_on_disk(runs, "r2")["pid"] == os.getpid()
    assert pub.state("r1")["state"] == "failed"  # a leftover: r2 is the one running
    fake.gate.set()
    assert pub.wait(20)
    assert pub.state("r2")["state"] == "published" and pub.state("r1")["state"] == "failed"


def test_readiness(runs, monkeypatch):
    monkeypatch.setattr(hub_mod, "available", lambda: False)
    assert publisher(runs).readiness() == hub_mod.NO_LIBRARY
    monkeypatch.setattr(hub_mod, "available", lambda: True)
    assert publisher(runs).readiness() == ""
    assert publisher(runs, environ={"MY_TOK": "t"}, cfg=make_cfg(token_env="MY_TOK")) \
        .readiness() == ""
    for env in ({}, {"HF_TOKEN": " \n"}, {"HF_TOKEN": ""}, {"HF_TOKEN": None}, {"OTHER": "t"}):
        assert publisher(runs, environ=env, whose="W", then="T").readiness() == (
            "No Hugging Face token: W has no HF_TOKEN. Create a token with write access on the "
            "Hub (Settings, Access Tokens), set HF_TOKEN in W, T.")
    text = publisher(runs, environ={}).readiness()
    assert text.endswith("set HF_TOKEN in the server's environment, restart the server, and "
                         "publish again.")
    os.environ.pop("POTATO_MUT_TOKEN", None)
    monkeypatch.setenv("POTATO_MUT_TOKEN", "t")
    pub = publish.Publisher(make_cfg(token_env="POTATO_MUT_TOKEN"), runs.paths_of)
    assert pub.environ is os.environ and pub.readiness() == ""


def test_start_refuses_unknown_fields_and_bad_values_before_anything(runs, fake):
    holds = retention.Holds()
    pub = publisher(runs, holds=holds)
    runs.make("r1")
    with pytest.raises(publish.Refused) as e:
        pub.start(view(), {"repo_id": "a/b", "zz": 1, "aa": 2})
    assert (e.value.status, e.value.message) == (
        400, "Unknown field(s) aa, zz; a publish request has repo_id, private, commit_message.")
    with pytest.raises(publish.Refused) as e:
        pub.start(view(), {"repo_id": "a/b", 7: 1})
    assert e.value.message.startswith("Unknown field(s) 7;")
    with pytest.raises(publish.Refused) as e:
        pub.start(view(), {"repo_id": "a/b", "x" * 300: 1})
    assert e.value.message == ("Unknown field(s) %s; a publish request has repo_id, private, "
                               "commit_message." % ("x" * 200))
    for body in ({"repo_id": "a b"}, {"repo_id": "a/b", "private": "yes"},
                 {"repo_id": "a/b", "commit_message": 3}):
        with pytest.raises(publish.Refused) as e:
            pub.start(view(), body)
        assert e.value.status == 400
    assert not holds.held("r1") and fake.calls == []
    assert not os.path.exists(os.path.join(runs.paths_of("r1").root, "publish.json"))


def test_start_refuses_what_cannot_be_published_and_lets_go_of_the_run(runs, fake, monkeypatch):
    holds = retention.Holds()
    runs.make("r1")
    with pytest.raises(publish.Refused) as e:
        publisher(runs, holds=holds).start(view(status="failed"), {"repo_id": "a/b"})
    assert e.value.status == 409 and e.value.message.startswith("Only a successful run's")
    kept = make_cfg({"kept": SimpleNamespace(options=SimpleNamespace(fetch_artifacts=False,
                                                                      max_artifact_mb=5))})
    with pytest.raises(publish.Refused) as e:
        publisher(runs, holds=holds, cfg=kept).start(view(uri="ssh://h/x", backend="kept"),
                                                     {"repo_id": "a/b"})
    assert e.value.status == 409 and "fetch_artifacts: false kept" in e.value.message
    with pytest.raises(publish.Refused) as e:
        publisher(runs, environ={}, holds=holds).start(view(), {"repo_id": "a/b"})
    assert e.value.status == 409 and e.value.message.startswith("No Hugging Face token")
    with pytest.raises(publish.Refused) as e:
        publisher(runs, environ={"HF_TOKEN": "t", "HF_ENDPOINT": "ftp://x"}, holds=holds).start(
            view(), {"repo_id": "a/b"})
    assert e.value.status == 409 and e.value.message.startswith("HF_ENDPOINT in the server's")
    runs.make("r2", files=("ok.bin",))
    with open(os.path.join(os.fsencode(runs.paths_of("r2").artifacts), b"\xff"), "wb") as f:
        f.write(b"x")
    with pytest.raises(publish.Refused) as e:
        publisher(runs, holds=holds).start(view("r2"), {"repo_id": "a/b"})
    assert e.value.status == 409 and "not UTF-8" in e.value.message
    assert not holds.held("r1") and not holds.held("r2") and fake.calls == []

    def boom(*a):
        raise KeyboardInterrupt()
    monkeypatch.setattr(publish, "cannot_publish", boom)
    with pytest.raises(KeyboardInterrupt):
        publisher(runs, holds=holds).start(view(), {"repo_id": "a/b"})
    assert not holds.held("r1")


def test_a_publish_from_start_to_published(runs, fake, monkeypatch):
    holds = retention.Holds()
    pub = publisher(runs, holds=holds, cfg=make_cfg(license="mit"))
    p = runs.make("r1")
    fake.state_file = os.path.join(p.root, "publish.json")
    fake.gate.clear()
    fake.before.clear()
    assert not pub.busy() and pub.wait(0) is True
    seen_holds = []
    monkeypatch.setattr(model_card, "card", lambda *a: (seen_holds.append(holds.held("r1")),
                                                         "CARD ü %r" % (a,))[1])
    s = pub.start(view(params_changed={"epochs": 2}),
                  {"repo_id": " m ", "private": True, "commit_message": " go  now "})
    assert s["state"] == "publishing" and "pid" not in s
    assert (s["repo_id"], s["private"], s["message"], s["error"]) == ("m", True, "go now", None)
    assert s["history"] == [] and s["step"] == "starting" and s["started_at"] > 0
    assert state_on_disk(runs)["pid"] == os.getpid()
    assert pub.busy() and holds.held("r1") and pub.state("r1")["state"] == "publishing"
    [worker] = [t for t in threading.enumerate() if t.name == "potato-publish"]
    assert worker.daemon  # a publish never holds the server's exit
    assert pub.wait(0.05) is False
    fake.before.set()
    with pytest.raises(publish.Refused) as e:
        pub.start(view("r1"), {"repo_id": "other"})
    assert e.value.status == 409 and e.value.message == (
        "Run r1 is being published now; one publish runs at a time. Wait for it to finish, "
        "then publish again.")
    assert holds.held("r1")
    fake.gate.set()
    assert pub.wait(20) is True and not pub.busy()
    assert not holds.held("r1")
    assert not [t for t in threading.enumerate() if t.name == "potato-publish"]
    [call] = fake.calls
    assert call == dict(endpoint="https://huggingface.co", token=TOKEN, timeout_s=7,
                        token_env="HF_TOKEN", repo_id="m", private=True, message="go now",
                        description="Run r1 (trainer tr), published by Potato %s." % __version__,
                        files=[("config.json", os.path.join(p.artifacts, "model/config.json")),
                               ("w.bin", os.path.join(p.artifacts, "model/w.bin"))])
    [during] = fake.steps_seen
    assert during["state"] == "publishing" and during["step"] == "uploading"
    assert during["pid"] == os.getpid() and during["started_at"] > 0
    release = model_card.Release("alice/m", ["config.json", "w.bin", "README.md"], "mit", 1)
    assert fake.cards == [("CARD ü %r" % ((view(params_changed={"epochs": 2}), release,
                                           {"s": {"type": "radio", "labels": ["a", "b"]},
                                            "t": {"type": "span", "labels": []}},
                                           None, {"epochs": 2}),)).encode("utf-8")]
    assert seen_holds == [True]
    s = pub.state("r1")
    assert s["state"] == "published" and s["step"] == "published"
    assert (s["commit"], s["url"]) == ("c0ffee", "https://huggingface.co/alice/m")
    assert s["repo_id"] == "alice/m" and s["account"] == "alice" and s["finished_at"] > 0
    assert s["history"] == [{"repo_id": "alice/m", "private": True, "commit": "c0ffee",
                             "url": "https://huggingface.co/alice/m", "finished_at":
                             s["finished_at"], "commit_url":
                             "https://huggingface.co/alice/m/commit/c0ffee"}]
    assert "pid" not in state_on_disk(runs) or state_on_disk(runs)["pid"] == os.getpid()
    log = open(p.log).read()
    assert "publishing to the Hugging Face Hub: m (private)" in log
    assert "published to https://huggingface.co/alice/m, commit c0ffee" in log
    # again: the history grows, the card's number counts the publishes
    monkeypatch.setattr(model_card, "card", lambda *a: "n=%d" % a[1].number)
    pub.start(view(), {"repo_id": "m"})
    assert pub.wait(20)
    assert fake.cards[-1] == b"n=2" and len(pub.state("r1")["history"]) == 2
    assert "publishing to the Hugging Face Hub: m (public)" in open(p.log).read()
    assert fake.calls[-1]["private"] is False
    assert fake.calls[-1]["message"] == "Publish Potato run r1"


def test_the_history_keeps_the_last_fifty(runs, fake, monkeypatch):
    monkeypatch.setattr(model_card, "card", lambda *a: "c")
    pub = publisher(runs)
    p = runs.make("r1")
    old = [{"repo_id": "old/%d" % n} for n in range(publish.HISTORY_MAX)]
    with open(os.path.join(p.root, "publish.json"), "w") as f:
        json.dump({"state": "published", "history": old}, f)
    pub.start(view(), {"repo_id": "m"})
    assert pub.wait(20)
    h = pub.state("r1")["history"]
    assert len(h) == 50 and h[0] == {"repo_id": "old/1"} and h[-1]["repo_id"] == "alice/m"
    assert publish.HISTORY_MAX == 50


def test_a_failure_at_the_hub_or_inside_ends_in_one_sentence(runs, fake, monkeypatch, caplog):
    monkeypatch.setattr(model_card, "card", lambda *a: "c")
    holds = retention.Holds()
    pub = publisher(runs, holds=holds, environ={"HF_TOKEN": "t", "HF_ENDPOINT": "http://h:1/"})
    p = runs.make("r1")
    fake.fail = hub_mod.HubFailure("The Hub said no.")
    pub.start(view(), {"repo_id": "m"})
    assert pub.wait(20)
    assert fake.calls[-1]["endpoint"] == "http://h:1" and fake.calls[-1]["token"] == "t"
    s = pub.state("r1")
    assert (s["state"], s["step"], s["error"]) == ("failed", "failed", "The Hub said no.")
    assert s["finished_at"] > 0 and s["history"] == [] and not holds.held("r1")
    assert "publishing to m failed: The Hub said no." in open(p.log).read()
    fake.fail = ValueError("bug")
    pub.start(view(), {"repo_id": "m"})
    assert pub.wait(20)
    s = pub.state("r1")
    assert (s["state"], s["step"]) == ("failed", "failed") and s["finished_at"] > 0
    assert s["error"] == ("Publishing failed inside Potato (ValueError); the server log has "
                          "the details.")
    assert "publishing run r1 failed" in caplog.text and not holds.held("r1")
    assert {r.name for r in caplog.records} == {"potato.training"}


def test_a_state_that_cannot_be_written_is_logged(runs, fake, monkeypatch, caplog):
    monkeypatch.setattr(model_card, "card", lambda *a: "c")
    holds = retention.Holds()
    pub = publisher(runs, holds=holds)
    runs.make("r1")
    real = publish.write_json

    def write(path, state):
        if state.get("state") == "published":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, state)
    monkeypatch.setattr(publish, "write_json", write)
    pub.start(view(), {"repo_id": "m"})
    assert pub.wait(20)
    assert "run r1: the publish state cannot be written: [Errno 28] No space left" in caplog.text
    assert not holds.held("r1")
    # the file still says publishing, with our pid: no longer ours, so interrupted
    assert state_on_disk(runs)["state"] == "publishing"
    assert (pub.state("r1")["state"], pub.state("r1")["step"]) == ("failed", "interrupted")


@pytest.mark.parametrize("fails", [False, True])
def test_a_run_removed_while_it_is_published_stays_removed(runs, fake, monkeypatch, fails):
    """Its folder went (the run was deleted) while the Hub worked: neither the outcome's log
    line nor its state file makes the folder again."""
    import shutil
    monkeypatch.setattr(model_card, "card", lambda *a: "c")
    pub = publisher(runs)
    p = runs.make("r1")
    fake.gate.clear()
    fake.fail = hub_mod.HubFailure("The Hub said no.") if fails else None
    pub.start(view(), {"repo_id": "m"})
    deadline = time.time() + 20
    while not fake.steps_seen and time.time() < deadline:  # its first state is written
        time.sleep(0.01)
    shutil.rmtree(p.root)
    fake.gate.set()
    assert pub.wait(20)
    assert not os.path.exists(p.root)


def test_wait_and_busy_without_a_publish(runs):
    pub = publisher(runs)
    assert pub.busy() is False and pub.wait() is True and pub.wait(0) is True


def test_the_card_reads_the_bundles_manifest(runs, monkeypatch):
    got = []
    monkeypatch.setattr(model_card, "card", lambda *a: got.append(a) or "C")
    pub = publisher(runs, cfg=make_cfg(license="apache-2.0"))
    p = runs.make("r1")
    files = [("w.bin", "/x/w.bin")]
    assert pub.card(view(), p, "a/m", files, 3) == "C"
    assert got[-1] == (view(), model_card.Release("a/m", ["w.bin", "README.md"], "apache-2.0",
                                                  3),
                       {"s": {"type": "radio", "labels": ["a", "b"]},
                        "t": {"type": "span", "labels": []}}, None, {})
    os.makedirs(p.bundle)
    with open(os.path.join(p.bundle, "manifest.json"), "w") as f:
        json.dump({"schemas": {"q": {"type": "radio"}}, "counts": {"train": 4}}, f)
    pub.card(view(params_changed={"lr": 1}), p, "a/m", files)
    assert got[-1][2:] == ({"q": {"type": "radio"}}, {"train": 4}, {"lr": 1})
    assert (got[-1][1].license, got[-1][1].number) == ("apache-2.0", 1)
    with open(os.path.join(p.bundle, "manifest.json"), "w") as f:
        json.dump({"schemas": ["q"], "counts": [4]}, f)
    pub.card(view(params_changed=None), p, "a/m", files)
    assert got[-1][2]["s"] == {"type": "radio", "labels": ["a", "b"]}
    assert got[-1][3] is None and got[-1][4] == {}
    with open(os.path.join(p.bundle, "manifest.json"), "w") as f:
        f.write("{bad")
    pub.card(view(), p, "a/m", files)
    assert got[-1][3] is None and "s" in got[-1][2]


def test_the_card_gives_the_verdict_for_every_kind_of_report():
    """The model card says the model against its baseline and chance for spans and numbers as
    it does for choices (issue 35: the same sentence as the run page and the CLI)."""
    from potato.training.core.view import RunView
    from potato.training.hub import model_card

    verdict = {"figure": "entity micro-F1", "higher_is_better": True, "model": 0.8,
               "baseline": 0.0, "baseline_is": "marking nothing", "n": 60, "shuffles": 1000,
               "chance": 0.05, "chance_bound": 0.07, "beats": True}
    span = {"kind": "span", "n": 60, "entities": 80, "predicted": 75, "precision": 0.8,
            "recall": 0.8, "micro_f1": 0.8, "macro_f1": 0.8, "per_label": {},
            "versus_baseline": verdict}
    slider = {"n": 40, "mae": 1.0, "rmse": 1.5, "spearman": 0.7,
              "baseline": {"value": 46.898382478203864, "mae": 2.0, "rmse": 2.5},
              "versus_baseline": dict(verdict, figure="MAE", higher_is_better=False,
                                      model=1.0, baseline=2.0, chance_bound=1.8,
                                      baseline_is="always answering the median, 46.9")}
    for report in (span, slider):
        view = RunView.from_dict({"run_id": "r1", "status": "success", "trainer": "t",
                                  "schemas": ["s"], "backend": "local", "holdout": report})
        text = "\n".join(model_card.holdout_lines(view))
        assert "so the model beats both." in text, text
    assert "46.898382478203864" not in text and "median (46.9)" in text
