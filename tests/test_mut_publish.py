"""Publishing a run's model, unit by unit (issue 26: the mutation run's tests for
potato/training/publish.py). No Hub and no server: ``hub.publish`` is replaced by a stand-in,
the config by a namespace with the fields publish reads, runs by folders in tmp_path."""

import errno
import json
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from potato import __version__
from potato.training import hub, model_card, publish, retention
from potato.training.remote.paths import RunPaths

TOKEN = "hf_write_alice"


def make_cfg(backends=None, token_env="HF_TOKEN", license=None):
    return SimpleNamespace(
        model_training=SimpleNamespace(
            publish=SimpleNamespace(token_env=token_env, license=license, timeout_s=7),
            backends=backends or {}),
        schemes=[SimpleNamespace(name="s", annotation_type="radio", labels=["a", "b"]),
                 SimpleNamespace(name="t", annotation_type="span", labels=None)])


def view(run_id="r1", status="success", uri="", backend="local", **kw):
    v = {"run_id": run_id, "status": status, "artifact_uri": uri, "backend": backend,
         "trainer": "tr"}
    v.update(kw)
    return v


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
    assert publish.cannot_publish(cfg, {"run_id": "r1", "status": "success", "backend": "x"},
                                  p.artifacts) is None
    empty = runs.make("r2", files=())
    assert publish.cannot_publish(cfg, view("r2"), empty.artifacts) == (
        "Run r2 left no model files on this server, so there is nothing to publish.")
    # issue 38, item 8: files that retention deleted are said so, not "left no model files"
    pruned = dict(view("r2"), pruned_at=time.mktime((2026, 12, 1, 9, 30, 0, 0, 0, -1)),
                  pruned_reason="model_training.retain_runs: 1 keeps the model files of the 1 "
                                "newest successful run (r5). Pin a run to keep its model files.")
    assert publish.cannot_publish(cfg, pruned, empty.artifacts) == (
        "Run r2's model files were deleted on 2026-12-01 09:30, so there is nothing left to "
        "publish: model_training.retain_runs: 1 keeps the model files of the 1 newest "
        "successful run (r5). Pin a run to keep its model files. Run it again for a model to "
        "publish.")


def test_cannot_publish_files_left_on_a_host(runs):
    kept = SimpleNamespace(fetch_artifacts=False, max_artifact_mb=5)
    fetched = SimpleNamespace(fetch_artifacts=True, max_artifact_mb=5.5)
    cfg = make_cfg({"kept": kept, "fetched": fetched})
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


def test_alive(sleeper, monkeypatch):
    assert publish._alive(sleeper.pid) is True
    assert sleeper.poll() is None  # asked, not signalled
    for pid in (None, "12", 0, -1, os.getpid(), 1.5, True if False else 0):
        assert publish._alive(pid) is False
    dead = []

    def with_kill(kill):  # publish's own os, so that the test runner's stays as it is
        monkeypatch.setattr(publish, "os", SimpleNamespace(kill=kill, getpid=os.getpid))

    def kill(pid, sig):
        dead.append((pid, sig))
        raise ProcessLookupError()
    with_kill(kill)
    assert publish._alive(4242) is False and dead == [(4242, 0)]

    def not_ours(pid, sig):
        raise PermissionError(errno.EPERM, "not permitted")
    with_kill(not_ours)
    assert publish._alive(4242) is True
    with_kill(lambda pid, sig: None)
    assert publish._alive(1) is True


# -- the publisher ----------------------------------------------------------------------------------

class FakeHub:
    """hub.publish's stand-in: records its arguments, says each step, returns a result or
    raises ``fail``; ``gate`` holds it until set."""

    def __init__(self, monkeypatch):
        self.calls, self.fail, self.cards = [], None, []
        self.gate = threading.Event()
        self.gate.set()
        self.before = threading.Event()  # held before the first step
        self.before.set()
        self.steps_seen = []
        monkeypatch.setattr(hub, "publish", self)
        monkeypatch.setattr(hub, "available", lambda: True)

    def __call__(self, endpoint, token, timeout_s, token_env, repo_id, private, message,
                 description, files, card_for, step):
        self.calls.append(dict(endpoint=endpoint, token=token, timeout_s=timeout_s,
                               token_env=token_env, repo_id=repo_id, private=private,
                               message=message, description=description, files=files))
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
    return FakeHub(monkeypatch)


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
    pub._active = "r1"
    assert pub.state("r1")["state"] == "publishing"
    pub._active = "r2"
    assert pub.state("r1")["state"] == "failed"


def test_readiness(runs, monkeypatch):
    monkeypatch.setattr(hub, "available", lambda: False)
    assert publisher(runs).readiness() == hub.NO_LIBRARY
    monkeypatch.setattr(hub, "available", lambda: True)
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
    kept = make_cfg({"kept": SimpleNamespace(fetch_artifacts=False, max_artifact_mb=5)})
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
    assert pub._active is None and pub._thread is None
    seen_holds = []
    monkeypatch.setattr(model_card, "card", lambda *a: (seen_holds.append(holds.held("r1")),
                                                         "CARD ü %r" % (a,))[1])
    s = pub.start(view(params_changed={"epochs": 2}),
                  {"repo_id": " m ", "private": True, "commit_message": " go  now "})
    assert s["state"] == "publishing" and "pid" not in s
    assert (s["repo_id"], s["private"], s["message"], s["error"]) == ("m", True, "go now", None)
    assert s["history"] == [] and s["step"] == "starting" and s["started_at"] > 0
    assert state_on_disk(runs)["pid"] == os.getpid()
    assert pub.busy() and holds.held("r1") and pub._active == "r1"
    assert pub._thread.daemon and pub._thread.name == "potato-publish"
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
    assert not holds.held("r1") and pub._active is None
    [call] = fake.calls
    assert call == dict(endpoint="https://huggingface.co", token=TOKEN, timeout_s=7,
                        token_env="HF_TOKEN", repo_id="m", private=True, message="go now",
                        description="Run r1 (trainer tr), published by Potato %s." % __version__,
                        files=[("config.json", os.path.join(p.artifacts, "model/config.json")),
                               ("w.bin", os.path.join(p.artifacts, "model/w.bin"))])
    [during] = fake.steps_seen
    assert during["state"] == "publishing" and during["step"] == "uploading"
    assert during["pid"] == os.getpid() and during["started_at"] > 0
    assert fake.cards == [("CARD ü %r" % ((view(params_changed={"epochs": 2}), "alice/m",
                                           ["config.json", "w.bin", "README.md"],
                                           {"s": {"type": "radio", "labels": ["a", "b"]},
                                            "t": {"type": "span", "labels": []}},
                                           None, {"epochs": 2}, "mit", 1),)).encode("utf-8")]
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
    monkeypatch.setattr(model_card, "card", lambda *a: "n=%d" % a[-1])
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
    fake.fail = hub.HubFailure("The Hub said no.")
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
    assert pub._active is None and not holds.held("r1")


def test_a_run_removed_meanwhile_gets_no_state_file(runs):
    pub = publisher(runs)
    pub._write("gone", {"state": "publishing"})
    assert not os.path.exists(runs.paths_of("gone").root)
    p = runs.make("r1")
    pub._write("r1", {"state": "publishing"})
    assert state_on_disk(runs) == {"state": "publishing"}


@pytest.mark.parametrize("fails", [False, True])
def test_a_run_removed_while_it_is_published_stays_removed(runs, fake, monkeypatch, fails):
    """Its folder went (the run was deleted) while the Hub worked: neither the outcome's log
    line nor its state file makes the folder again."""
    import shutil
    monkeypatch.setattr(model_card, "card", lambda *a: "c")
    pub = publisher(runs)
    p = runs.make("r1")
    fake.gate.clear()
    fake.fail = hub.HubFailure("The Hub said no.") if fails else None
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
    assert got[-1] == (view(), "a/m", ["w.bin", "README.md"],
                       {"s": {"type": "radio", "labels": ["a", "b"]},
                        "t": {"type": "span", "labels": []}}, None, {}, "apache-2.0", 3)
    os.makedirs(p.bundle)
    with open(os.path.join(p.bundle, "manifest.json"), "w") as f:
        json.dump({"schemas": {"q": {"type": "radio"}}, "counts": {"train": 4}}, f)
    pub.card(view(params_changed={"lr": 1}), p, "a/m", files)
    assert got[-1][3:] == ({"q": {"type": "radio"}}, {"train": 4}, {"lr": 1}, "apache-2.0", 1)
    with open(os.path.join(p.bundle, "manifest.json"), "w") as f:
        json.dump({"schemas": ["q"], "counts": [4]}, f)
    pub.card(view(params_changed=None), p, "a/m", files)
    assert got[-1][3]["s"] == {"type": "radio", "labels": ["a", "b"]}
    assert got[-1][4] is None and got[-1][5] == {}
    with open(os.path.join(p.bundle, "manifest.json"), "w") as f:
        f.write("{bad")
    pub.card(view(), p, "a/m", files)
    assert got[-1][4] is None and "s" in got[-1][3]
