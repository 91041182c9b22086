"""Fixtures only (what the tests share otherwise is in tests/helpers.py): the leak check every
test runs under, a project writer, a real server through the composition root, a headless
Chromium, the fake ssh host and SLURM cluster on PATH, a tiny BERT."""

import json
import os
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from potato.training.remote import bundle as bundle_mod  # noqa: E402
from tests.helpers import (  # noqa: E402
    CHROMEDRIVER, CHROMIUM, FAKES, FILLER, NEG, PLUGINS, POS, ROOT, SCHEMA, Client, active_run,
    build_tiny_token_bert, make_project, require, self_signed)


@pytest.fixture(autouse=True)
def no_leaks(request, tmp_path_factory, monkeypatch):
    """Every test proves it left no child process, thread, descriptor or temp file behind.

    Scoped to this test process's own tree (tests/leaks.py), and to a temp directory of its own
    (TMPDIR and tempfile point there), so two suites on one machine cannot confuse it."""
    import tempfile

    from tests.leaks import Snapshot, open_fds

    tmp = str(tmp_path_factory.mktemp("tmpdir"))
    monkeypatch.setattr(tempfile, "tempdir", tmp)
    monkeypatch.setenv("TMPDIR", tmp)
    before = Snapshot()
    fds_before = open_fds()
    yield
    procs, threads, fds = before.leftovers()
    left = os.listdir(tmp)
    problems = []
    if procs:
        problems.append("processes left running: %s" % procs)
    if threads:
        problems.append("threads left running: %s" % threads)
    if fds > 0:
        problems.append("%d more open descriptors: %s" % (
            fds, sorted(set(open_fds()) - set(fds_before))[:10]))
    if left:
        problems.append("temp files left in %s: %s" % (tmp, left[:10]))
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)


@pytest.fixture
def write_config(tmp_path):
    """Write a config (YAML text) into a fresh project dir with one small data file."""

    def write(text: str, name: str = "config.yaml", items=None) -> str:
        data = tmp_path / "items.jsonl"
        if not data.exists():
            rows = items or [{"id": f"i{n}", "text": f"item number {n}"} for n in range(5)]
            import json

            data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return str(path)

    return write


@pytest.fixture
def serve():
    """Start a real server for a config path on 127.0.0.1:0 through the composition root
    (``potato.service.Service``, as ``potato start`` does); returns (service, url) and closes
    it afterwards. No queue lock: a test may serve one project twice."""
    from potato.config.settings import load
    from potato.service import Service

    started = []

    def start(config_path, training=True, **overrides):
        cfg, errors, _ = load(config_path)
        assert not errors, errors
        for k, v in overrides.items():
            setattr(cfg, k, v)
        lines = []
        service = Service(cfg, "127.0.0.1", 0, access_log=lines.append, owner=None).open()
        started.append(service)
        service.start(training=training, poll_interval=0.05)
        service.access_lines = lines
        return service, service.url

    yield start
    for service in started:
        thread = service._serving
        service.close()
        assert thread is None or not thread.is_alive()


@pytest.fixture
def browser(tmp_path):
    require(CHROMIUM, "chromium")
    require(CHROMEDRIVER, "chromedriver")
    webdriver = pytest.importorskip("selenium.webdriver") if not os.environ.get("CI") else \
        __import__("selenium.webdriver", fromlist=["webdriver"])
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1280,1000",
                 f"--user-data-dir={tmp_path / 'chrome-profile'}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
    # Chromium's shared-memory files (--disable-dev-shm-usage puts them in TMPDIR, which the
    # leak check watches): one a renderer killed at quit leaves is the browser's, not the
    # product's (seen once in 3,500 tests)
    import glob
    import shutil
    for left in glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                       ".org.chromium.Chromium.*")):
        shutil.rmtree(left) if os.path.isdir(left) else os.unlink(left)


@pytest.fixture
def fake_host(tmp_path, monkeypatch):
    home = tmp_path / "remote-home"
    home.mkdir()
    monkeypatch.setenv("PATH", FAKES + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("FAKE_SSH_HOME", str(home))
    monkeypatch.setenv("FAKE_SSH_LOG", str(tmp_path / "ssh-calls.jsonl"))
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)  # the plugin trainers, for the remote worker too
    return home


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    home = tmp_path / "login-home"
    home.mkdir()
    state = tmp_path / "slurm-state"
    path = [os.path.join(FAKES, "slurm"), os.path.join(FAKES, "scontrol"), FAKES]
    monkeypatch.setenv("PATH", os.pathsep.join(path + [os.environ["PATH"]]))
    monkeypatch.setenv("FAKE_SSH_HOME", str(home))
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    return home, state


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A BERT with random weights and a vocabulary of the test sentences' words (no download)."""
    if os.environ.get("CI"):  # CI installs the train-text extra: a missing package is a failure
        import torch
        import transformers
    else:
        torch = pytest.importorskip("torch", reason="needs the train-text extra (torch)")
        transformers = pytest.importorskip("transformers")
    d = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + POS + NEG + FILLER
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n")
    import inspect

    if "vocab" in inspect.signature(transformers.BertTokenizer.__init__).parameters:  # v5
        tok = transformers.BertTokenizer(vocab={w: i for i, w in enumerate(vocab)})
    else:  # transformers 4.x
        tok = transformers.BertTokenizerFast(vocab_file=str(d / "vocab.txt"))
    assert tok("good film")["input_ids"][1:-1] == [vocab.index("good"), vocab.index("film")]
    tok.save_pretrained(str(d))
    cfg = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=64,
                                  max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.BertModel(cfg).save_pretrained(str(d))
    return str(d)


@pytest.fixture(scope="session")
def tiny_token_bert(tmp_path_factory):
    """tiny_bert's like for spans: random weights, a fast tokenizer (BertTokenizerFast) over the
    span test words (helpers.SPAN_VOCAB), no download."""
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="needs the train-text extra (torch)")
        pytest.importorskip("transformers")
    return build_tiny_token_bert(str(tmp_path_factory.mktemp("tiny-token-bert")))


@pytest.fixture
def tls_cert(tmp_path):
    """A fresh self-signed certificate (made with openssl): the keys of the config's
    ``server`` mapping that serve TLS with it."""
    d = tmp_path / "tls"
    d.mkdir()
    cert, key = self_signed(d)
    return "tls_cert: %s, tls_key: %s" % (cert, key)


@pytest.fixture
def hostile(tmp_path, serve):
    yield from _hostile(tmp_path, serve, "")


@pytest.fixture
def hostile_tls(tmp_path, serve, tls_cert):
    """``hostile``, served over TLS."""
    yield from _hostile(tmp_path, serve, "server: {%s}" % tls_cert)


def _hostile(tmp_path, serve, top):
    server, url = serve(make_project(tmp_path, "  backends:\n    gpu: {type: ssh, host: "
                                                "gpu.example.org}\n", top=top), training=False)
    run_id, ctx = active_run(server)
    yield server, Client(url), run_id, ctx
    server.manager._active.clear()


@pytest.fixture
def archive(tmp_path):
    with open(os.path.join(ROOT, "examples", "review-sentiment", "data", "reviews.jsonl")) as f:
        rows = [json.loads(line) for line in f][:300]
    items = [(r["id"], r["text"]) for r in rows]
    labels = {r["id"]: {"sentiment": ["positive" if i % 2 else "negative"]}
              for i, r in enumerate(rows[:200])}
    bundle_mod.build(str(tmp_path / "b"), items, labels, SCHEMA)
    path = str(tmp_path / "bundle.tar.gz")
    bundle_mod.pack(str(tmp_path / "b"), path)
    return path


@pytest.fixture
def env(monkeypatch):
    """The test trainers (tests/plugins) for the server and for its workers."""
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
