"""A trainer's model, resolved where the run executes (issue 24, item 3): an existing
directory, the host's Hugging Face cache, or a Hub id the host can reach; otherwise one
sentence, from Check (page, API and CLI, for local and over ssh) and at a run's start."""

import http.server
import json
import socket
import threading

import pytest

from potato.commands.cli import main
from potato.training.backends import sshcmd
from potato.training.remote import model_source
from tests.helpers import KEY, Client, make_project, start_run, wait_run
from tests.helpers import ssh_backend as backend

H = {"X-API-Key": KEY}
HOST = socket.gethostname()
FIX = "set model to a Hub id or an existing directory"


class _Hub(http.server.BaseHTTPRequestHandler):
    """A Hub on loopback: knows org/known, needs a login for org/gated."""

    def do_GET(self):
        code = {"/api/models/org/known": 200, "/api/models/org/gated": 401}.get(self.path, 404)
        if code == 401 and self.headers.get("Authorization") == "Bearer hf_secret":
            code = 200
        body = b"{}"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def hub():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    t.start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()
    t.join(5)


def _closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_resolve_a_directory_the_cache_and_the_hub(tmp_path, hub):
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": hub}
    model_dir = tmp_path / "my model"
    model_dir.mkdir()
    assert model_source.resolve(str(model_dir), "gpu01", env) == (
        True, "model %s: the directory %s on gpu01" % (model_dir, model_dir))
    for missing in ("/x", "./models/x", "~/nope", "a/b/c", "bad--id"):
        ok, sentence = model_source.resolve(missing, "gpu01", env)
        assert (ok, sentence) == (False, "no directory %s on gpu01; %s" % (missing, FIX))
    snap = tmp_path / "hf" / "hub" / "models--org--cached" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    assert model_source.resolve("org/cached", "gpu01", env) == (
        True, "model org/cached: in the Hugging Face cache on gpu01")
    assert model_source.resolve("org/known", "gpu01", env) == (
        True, "model org/known: on the Hugging Face Hub, which gpu01 can reach")
    ok, sentence = model_source.resolve("org/unknown", "gpu01", env)
    assert not ok and sentence.startswith(
        "no directory org/unknown on gpu01, and no model org/unknown on the Hugging Face Hub "
        "that gpu01 may read (a gated or private model needs HF_TOKEN there)")
    assert not model_source.resolve("org/gated", "gpu01", env)[0]
    assert model_source.resolve("org/gated", "gpu01", dict(env, HF_TOKEN="hf_secret"))[0]


def _serve(handler):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    t.start()
    return server, t


def test_the_token_goes_only_to_the_hub_it_was_meant_for(tmp_path):
    """A redirect to another host gets no Authorization header (urllib would copy it); a
    redirect on the same host keeps it; the token ``huggingface-cli login`` stored is used."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.server.name, self.path, self.headers.get("Authorization")))
            if self.path.startswith("/api/models/"):
                self.send_response(302)
                where = {"org/away": other_url, "org/near": hub_url}[self.path[12:]]
                self.send_header("Location", where + "/landing")
            else:
                self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    hub, t1 = _serve(Handler)
    other, t2 = _serve(Handler)
    hub.name, other.name = "hub", "other"
    hub_url = "http://127.0.0.1:%d" % hub.server_address[1]
    other_url = "http://localhost:%d" % other.server_address[1]
    try:
        env = {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": hub_url, "HF_TOKEN": "hf_s"}
        assert model_source.resolve("org/away", "gpu01", env)[0]
        assert seen == [("hub", "/api/models/org/away", "Bearer hf_s"),
                        ("other", "/landing", None)]
        del seen[:]
        (tmp_path / "hf").mkdir()
        (tmp_path / "hf" / "token").write_text("hf_login\n")
        del env["HF_TOKEN"]
        assert model_source.resolve("org/near", "gpu01", env)[0]
        assert seen == [("hub", "/api/models/org/near", "Bearer hf_login"),
                        ("hub", "/landing", "Bearer hf_login")]
    finally:
        for server, t in ((hub, t1), (other, t2)):
            server.shutdown()
            server.server_close()
            t.join(5)


def test_an_offline_host_says_so_at_once(tmp_path):
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    assert model_source.resolve("org/model", "gpu01", env) == (False, (
        "model org/model is not in the Hugging Face cache on gpu01, and HF_HUB_OFFLINE is set "
        "there; download it there first (huggingface-cli download org/model) or set model to "
        "an existing directory"))
    env = {"HF_HOME": str(tmp_path / "hf"),
           "HF_ENDPOINT": "http://127.0.0.1:%d" % _closed_port()}
    ok, sentence = model_source.resolve("org/model", "gpu01", env, timeout=5)
    assert not ok and sentence.startswith(
        "model org/model is not in the Hugging Face cache on gpu01, and gpu01 cannot reach "
        "http://127.0.0.1:")
    assert sentence.endswith("download it there first (huggingface-cli download org/model) or "
                             "set model to an existing directory")


def test_the_ssh_command_is_quoted_and_its_answer_parsed():
    cmd = sshcmd.model_check_command("/opt/py thon", "it's; $(touch HACKED)")
    assert cmd.startswith("'/opt/py thon' -c '") and cmd.endswith(
        " 'it'\"'\"'s; $(touch HACKED)'")
    assert sshcmd.parse_model_check('noise\nPOTATO-MODEL {"ok": false, "sentence": "no"}\n') \
        == (False, "no")
    with pytest.raises(ValueError):
        sshcmd.parse_model_check("Traceback ...")


# -- Check, with the trainer and params the form holds -----------------------------------------

def test_check_local_resolves_the_model(tmp_path, serve, capsys, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = make_project(tmp_path, labels=False)
    capsys.readouterr()
    code = main(["training", "check", "local", cfg, "--trainer", "hf-text-classification",
                 "--param", "model=/no/such/dir"])
    out = capsys.readouterr().out
    assert code == 1 and "no directory /no/such/dir on %s; %s" % (HOST, FIX) in out
    assert out.rstrip().endswith("cannot start a run")
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    assert main(["training", "check", "local", cfg, "--trainer", "hf-text-classification",
                 "--param", "model=%s" % model_dir]) == 0
    # the trainer's default model, offline and not cached
    assert main(["training", "check", "local", cfg, "--trainer", "hf-text-classification"]) == 1
    assert "HF_HUB_OFFLINE is set there" in capsys.readouterr().out
    _, url = serve(cfg, training=False)
    c = Client(url)
    status, report = c.json("POST", "/admin/training/api/backends/local/check", headers=H,
                            json_body={"trainer": "hf-text-classification",
                                       "params": {"model": "/no/such/dir"}})
    assert status == 200 and report["ok"] is False and report["model_ok"] is False
    assert "no directory /no/such/dir on %s; %s" % (HOST, FIX) in report["lines"]
    status, report = c.json("POST", "/admin/training/api/backends/local/check", headers=H,
                            json_body={"trainer": "text-naive-bayes", "params": {}})
    assert status == 200 and "model_ok" not in report
    for bad in ({"trainer": 3}, {"params": []}, {"trainr": "x"}):
        status, body = c.json("POST", "/admin/training/api/backends/local/check", headers=H,
                              json_body=bad)
        assert status == 400 and "{trainer, params}" in body["error"]
    status, report = c.json("POST", "/admin/training/api/backends/local/check", headers=H,
                            json_body={"trainer": "hf-text-classification",
                                       "params": {"epochs": "many"}})
    assert report["ok"] is False and any(x.startswith("Bad params:") for x in report["lines"])


def test_check_over_ssh_resolves_the_model_on_the_host(tmp_path, serve, fake_host,  # noqa: F811
                                                       monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the fake host inherits it
    _, url = serve(make_project(tmp_path, backend(), labels=False), training=False)
    c = Client(url)
    model_dir = fake_host / "models" / "mine"
    model_dir.mkdir(parents=True)
    for model, ok, line in [
            ("/srv/nope", False, "no directory /srv/nope on %s; %s" % (HOST, FIX)),
            (str(model_dir), True, "model %s: the directory %s on %s" % (model_dir, model_dir,
                                                                          HOST)),
            ("org/model", False, "model org/model is not in the Hugging Face cache on %s, and "
                                 "HF_HUB_OFFLINE is set there" % HOST)]:
        status, report = c.json("POST", "/admin/training/api/backends/gpu-server/check",
                                headers=H, json_body={"trainer": "hf-llm-classification",
                                                      "params": {"model": model}})
        assert status == 200 and report["ok"] is ok, report
        assert any(x.startswith(line) for x in report["lines"]), report["lines"]


# -- a run started anyway fails at its start with the same sentence ----------------------------

def test_a_run_with_a_missing_model_fails_at_its_start(tmp_path, serve):
    pytest.importorskip("transformers")
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    missing = str(tmp_path / "no model here")
    run = wait_run(c, start_run(c, trainer="hf-text-classification", schemas=["sentiment"],
                                params={"model": missing}))
    assert run["status"] == "error"
    assert run["error"] == "no directory %s on %s; %s" % (missing, HOST, FIX), run["error"]
    log = c.get("/admin/training/api/runs/%s/log" % run["run_id"], headers=H).text
    assert "Traceback" not in log and "Repo id must be" not in log
    assert "Repo id" not in json.dumps(run)


def test_a_model_with_control_characters_or_a_huge_value_is_refused(tmp_path):
    """A null byte no longer crashes Check over ssh, and no 200 KB value is echoed."""
    from potato.config.settings import load
    from potato.training.backends import check_backend, make_backends
    from potato.training.remote import trainers
    info = trainers.get("hf-text-classification")
    for bad, said in (("a\x00b", "model must not contain control characters"),
                      ("org/m\n", "model must not contain control characters"),
                      ("x" * 200000, "model is 200000 characters long; at most 1000")):
        with pytest.raises(trainers.ParamError) as e:
            trainers.resolve_params(info, {"model": bad})
        assert str(e.value).startswith(said) and len(str(e.value)) < 200
    llm = trainers.get("hf-llm-classification")
    template = "Text:\n\t{text}\nLabels: {labels}\nAnswer:"
    assert trainers.resolve_params(llm, {"prompt_template": template})["prompt_template"] \
        == template
    cfg, errors, _ = load(make_project(tmp_path, backend(host="127.0.0.1", port=1),
                                       labels=False))
    assert not errors, errors
    backends = make_backends(cfg)
    try:
        gpu = backends["gpu-server"]
        ok, sentence = gpu.check_model("a\x00b")  # no UnboundLocalError
        assert ok is False and "null byte" in sentence
        gpu.check = lambda: {"ok": True, "lines": []}  # the host itself is not the point here
        report = check_backend(gpu, "hf-text-classification", {"model": "x" * 200000})
        assert report["ok"] is False and len(" ".join(report["lines"])) < 300
    finally:
        for b in backends.values():
            b.close()
