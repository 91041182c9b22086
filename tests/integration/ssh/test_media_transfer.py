"""Media travel to where runs execute, once per host: through the real loopback sshd, the fake
ssh host and SLURM cluster, and a real polling agent. The test trainer (tests/plugins/
media_trainer.py) opens every item's media file through path_for and checks its bytes."""

import contextlib
import hashlib
import http.client
import io
import json
import os
import random
import re
import stat
import subprocess
import sys
import time

import pytest

from potato.training.remote import media as media_remote, media_cache, media_store
from tests import sshd as sshd_mod
from tests.helpers import KEY, PLUGINS, ROOT, Client, make_project, start_run, wait_run
from tests.helpers import slurm_backend, ssh_backend

H = {"X-API-Key": KEY}
MEDIA_PLUGINS = PLUGINS + ",tests.plugins.media_trainer"
N_FILES = 24
N_ITEMS = 300  # items with an image (some share one): the others are text only
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def media_project(tmp_path, backends):
    """The example project, its first N_ITEMS items naming one of N_FILES images."""
    cfg = make_project(tmp_path, backends, top="item_properties:\n  image_key: image\n")
    rng = random.Random(7)
    folder = tmp_path / "img"
    folder.mkdir()
    for i in range(N_FILES):
        # a PNG's signature, then noise: the server serves and bundles only files whose
        # bytes say they are an image (potato/project/media.py probe)
        (folder / ("%02d.png" % i)).write_bytes(PNG + bytes(rng.randrange(256) for _ in range(
            500 + 97 * i - len(PNG))))
    path = tmp_path / "reviews.jsonl"
    lines = path.read_text().splitlines()
    out = []
    for n, line in enumerate(lines):
        d = json.loads(line)
        if n < N_ITEMS:
            d["image"] = "img/%02d.png" % (n % N_FILES)
        out.append(json.dumps(d))
    path.write_text("\n".join(out) + "\n")
    return cfg


def total_bytes():
    return sum(500 + 97 * i for i in range(N_FILES))


def run_media(c, backend):
    return wait_run(c, start_run(c, backend=backend, schemas=["sentiment"], trainer="test-media",
                                 params={"seconds": 0}), timeout=180)


def log_of(c, run):
    return c.get(f"/admin/training/api/runs/{run['run_id']}/log", headers=H).text


def cache_files(cache):
    """{sha: (inode, size)} of the files in a host's media cache."""
    out = {}
    for p in cache.glob("??/*"):
        st = p.stat()
        assert stat.S_IMODE(st.st_mode) == 0o600, p
        assert stat.S_IMODE(p.parent.stat().st_mode) == 0o700, p.parent
        out[p.name] = (st.st_ino, st.st_size)
    return out


def assert_trained_on_media(run):
    assert run["status"] == "success", run
    m = run["metrics"]
    assert (m["media_files"], m["media_missing"]) == (N_ITEMS, 0), m


# -- the real sshd -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    d = sshd_mod.for_tests(tmp_path_factory)
    yield d
    sshd_mod.stop(d)


@pytest.mark.integration
def test_media_cross_real_ssh_once(tmp_path, serve, sshd, monkeypatch):
    monkeypatch.setenv("PATH", str(sshd / "bin") + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", MEDIA_PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    remote = tmp_path / "remote dir 'x'"
    _, url = serve(media_project(tmp_path, ssh_backend(
        host="potato-real", remote_dir=str(remote), heartbeat_timeout_s=30,
        env={"POTATO_TRAINER_PLUGINS": MEDIA_PLUGINS, "PYTHONPATH": ROOT})))
    c = Client(url)
    first = run_media(c, "gpu-server")
    assert_trained_on_media(first)
    log = log_of(c, first)
    assert "media: %d of %d files" % (N_FILES, N_FILES) in log, log
    assert re.search(r"media: sent %d files \(.* MB\) to potato-real in .*; the host verified "
                     r"%d" % (N_FILES, N_FILES), log), log
    assert "copying media to potato-real: %d of %d files" % (N_FILES, N_FILES) in log
    cache = remote / "media"
    files = cache_files(cache)
    assert len(files) == N_FILES and sum(s for _, s in files.values()) == total_bytes()
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert os.listdir(cache / ".pins") == []  # the run's pin went with it
    second = run_media(c, "gpu-server")
    assert_trained_on_media(second)
    log2 = log_of(c, second)
    assert "media: all %d files" % N_FILES in log2 and "0 files sent" in log2, log2
    assert "sent %d files" % N_FILES not in log2
    assert cache_files(cache) == files  # the same files: none was sent again (same inodes)


# -- the fake ssh host and SLURM cluster -----------------------------------------------------------

def test_media_on_fake_ssh_and_a_small_cache(tmp_path, serve, fake_host, monkeypatch):
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", MEDIA_PLUGINS)
    limit_mb = 0.01  # about 10 KB: less than the run's files (its pin keeps them while it runs)
    _, url = serve(media_project(tmp_path, ssh_backend(max_media_cache_mb=limit_mb)))
    c = Client(url)
    run = run_media(c, "gpu-server")
    assert_trained_on_media(run)
    cache = fake_host / "pt dir" / "it's; $(touch HACKED)" / "media"
    log = log_of(c, run)
    assert "left its cache (max_media_cache_mb 0.01)" not in log  # all pinned while sent
    assert len(cache_files(cache)) == N_FILES
    # The next run pins the same files; once it ended, its pin is gone and an older foreign
    # file goes first when the cache is trimmed.
    foreign = os.urandom(20000)
    media_store.store(str(cache), hashlib.sha256(foreign).hexdigest(),
                      len(foreign), io.BytesIO(foreign).read)
    old = time.time() - 3600
    for p in cache.glob("??/*"):
        if p.stat().st_size == 20000:
            os.utime(p, (old, old))
    second = run_media(c, "gpu-server")
    assert_trained_on_media(second)
    assert "0 files sent" in log_of(c, second)
    assert media_cache.evict(str(cache), limit_mb * (1 << 20))[0] > 0
    assert not [p for p in cache.glob("??/*") if p.stat().st_size == 20000]
    assert not list(fake_host.rglob("HACKED")) and not (tmp_path / "HACKED").exists()


def test_media_reach_a_slurm_job(tmp_path, serve, cluster, monkeypatch):
    home, _ = cluster
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", MEDIA_PLUGINS)
    _, url = serve(media_project(tmp_path, slurm_backend()))
    c = Client(url)
    run = run_media(c, "cluster")
    assert_trained_on_media(run)
    assert len(cache_files(home / "potato jobs" / "media")) == N_FILES
    second = run_media(c, "cluster")
    assert_trained_on_media(second)
    assert "0 files sent" in log_of(c, second)


def test_max_media_cache_mb_is_checked(tmp_path, write_config):
    from potato.config import settings as config

    path = write_config("annotation_task_name: T\ndata_files: [items.jsonl]\n"
                        "annotation_schemes:\n  - annotation_type: radio\n    name: s\n"
                        "    labels: [a, b]\nmodel_training:\n" + ssh_backend(
                            max_media_cache_mb=-1), items=[{"id": "1", "text": "x"}])
    _, errors, _ = config.load(path)
    assert any("max_media_cache_mb" in str(e) for e in errors), errors


# -- a polling agent -----------------------------------------------------------------------------------

def _agent(url, token, workdir, *extra):
    env = dict(os.environ, POTATO_TRAINING_TOKEN=token)
    return subprocess.Popen([sys.executable, "-m", "potato", "training", "agent", "--server",
                             url.rstrip("/"), "--backend", "lab", "--workdir", str(workdir),
                             "--poll-interval", "0.2", "--once", *extra],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def test_agent_downloads_only_missing_media(tmp_path, serve, capsys, monkeypatch):
    from potato.commands.cli import main
    from tests.helpers import agent_backends

    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", MEDIA_PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    cfg = media_project(tmp_path, agent_backends())
    _, url = serve(cfg)
    c = Client(url)
    capsys.readouterr()
    assert main(["training", "register", "lab", cfg]) == 0
    token = re.search(r"export POTATO_TRAINING_TOKEN=(\S+)", capsys.readouterr().out).group(1)
    work = tmp_path / "agent work"
    cache = work / "media"
    # Half the files are on the machine already (from an earlier run of another project).
    pre = sorted((tmp_path / "img").iterdir())[:N_FILES // 2]
    for p in pre:
        data = p.read_bytes()
        media_store.store(str(cache), hashlib.sha256(data).hexdigest(), len(data),
                          io.BytesIO(data).read)
    before = cache_files(cache)
    run_id = start_run(c, backend="lab", schemas=["sentiment"], trainer="test-media",
                       params={"seconds": 0})
    p = _agent(url, token, work, "--max-media-cache-mb", "100")
    out, err = p.communicate(timeout=180)
    run = wait_run(c, run_id, timeout=60)
    assert_trained_on_media(run)
    assert "media: %d of %d files" % (N_FILES - len(pre), N_FILES) in err, err
    after = cache_files(cache)
    assert len(after) == N_FILES
    assert all(after[h] == before[h] for h in before)  # those already there were not fetched
    assert "copying media to" in log_of(c, run)
    assert os.listdir(cache / ".pins") == []


def test_media_endpoint_serves_only_the_runs_files(tmp_path, serve, monkeypatch):
    """The agent endpoint: token-checked, only hashes of the run's bundle, resumable."""
    from potato.commands.cli import main
    from potato.training.remote.client import Client as AgentClient, ServerError
    from tests.helpers import agent_backends

    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", MEDIA_PLUGINS)
    cfg = media_project(tmp_path, agent_backends())
    _, url = serve(cfg)
    c = Client(url)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["training", "register", "lab", cfg]) == 0
    token = re.search(r"export POTATO_TRAINING_TOKEN=(\S+)", buf.getvalue()).group(1)
    run_id = start_run(c, backend="lab", schemas=["sentiment"], trainer="test-media",
                       params={"seconds": 0})
    # This test is the agent: it claims the run and holds it while it asks for files.
    _, claim, _ = AgentClient(token, server=url).request("POST", "/agent/v1/backends/lab/claim",
                                                         {"host": "t"})
    assert claim["run_id"] == run_id
    agent = AgentClient(claim["token"], server=url)
    deadline = time.time() + 30
    while True:
        try:
            _, info, _ = agent.request("GET", "/agent/v1/runs/%s" % run_id)
            break
        except Exception:
            assert time.time() < deadline
            time.sleep(0.2)
    data = (tmp_path / "img" / "03.png").read_bytes()
    sha = hashlib.sha256(data).hexdigest()

    def get(path, token=claim["token"], headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1].strip("/")),
                                          timeout=30)
        conn.request("GET", path, headers=dict({"Authorization": "Bearer " + token},
                                               **(headers or {})))
        r = conn.getresponse()
        body = r.read()
        conn.close()
        return r.status, body

    base = "/agent/v1/runs/%s/media/" % run_id
    assert get(base + sha) == (200, data)
    assert get(base + sha, headers={"Range": "bytes=100-"}) == (206, data[100:])
    assert get(base + sha, token="wrong-token")[0] == 410
    other = hashlib.sha256(b"not in this run").hexdigest()
    status, body = get(base + other)
    assert status == 404 and b"downloads only the files" in body
    for bad in ("..%2F..%2Fconfig.yaml", "%2E%2E", "0" * 63 + "g", "A" * 64):
        status, _ = get(base + bad)
        assert status in (400, 404), (bad, status)
    # Many small files in one response, in the order asked; any hash not in the run: nothing
    data2 = (tmp_path / "img" / "05.png").read_bytes()
    sha2 = hashlib.sha256(data2).hexdigest()
    _, resp, conn = agent.request("POST", base.rstrip("/"), {"hashes": [sha2, sha]},
                                  stream_to=True)
    try:
        assert resp.read() == data2 + data
    finally:
        conn.close()
    for hashes in ([sha, other], [sha, "../" + sha[3:]], [], "x" * 64, [1]):
        try:
            agent.request("POST", base.rstrip("/"), {"hashes": hashes})
            raise AssertionError("served %r" % (hashes,))
        except ServerError as e:
            assert e.status in (400, 404), (hashes, e)
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    agent.request("POST", "/agent/v1/runs/%s/result" % run_id,
                  {"status": "cancelled", "exit_code": None})
    wait_run(c, run_id, timeout=60)


# -- URL media: one bad address fails its item, never the run (issue 34, items 3 and 4) ----------

def url_project(tmp_path, port):
    """The example project, its first 40 items naming an image by URL on a loopback server,
    one of them an address with a tab in it (which urllib refuses as an InvalidURL)."""
    cfg = make_project(tmp_path, top="item_properties:\n  image_key: image\n")
    path = tmp_path / "reviews.jsonl"
    out = []
    for n, line in enumerate(path.read_text().splitlines()):
        d = json.loads(line)
        if n < 40:
            d["image"] = "http://127.0.0.1:%d/%d.png" % (port, n)
        if n == 3:
            d["image"] = "http://127.0.0.1:%d/a\tb.png" % port
            bad_id = d["id"]
        out.append(json.dumps(d))
    path.write_text("\n".join(out) + "\n")
    return cfg, bad_id


@pytest.fixture
def png_server():
    import http.server
    import threading

    asked = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(PNG)))
            self.end_headers()
            self.wfile.write(PNG)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], asked
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.mark.integration
def test_a_bad_media_url_leaves_out_its_item_and_a_text_run_fetches_nothing(
        tmp_path, serve, monkeypatch, png_server):
    port, asked = png_server
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", MEDIA_PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    cfg, bad_id = url_project(tmp_path, port)
    _, url = serve(cfg)
    c = Client(url)
    # a text model reads no image: nothing is fetched, and the run does not trip on the tab
    run = wait_run(c, start_run(c, schemas=["sentiment"], trainer="text-naive-bayes"),
                   timeout=180)
    assert run["status"] == "success", run
    assert asked == []
    # a model that reads images: the bad address fails its item alone, named in the log
    run = run_media(c, "local")
    assert run["status"] == "success", (run, log_of(c, run))
    m = run["metrics"]
    assert (m["media_files"], m["media_missing"], m["media_left_out"]) == (39, 0, 1), m
    assert len(asked) == 39 and not any("\t" in a or "%09" in a for a in asked)
    log = log_of(c, run)
    assert "item %s left out of this run: 'http://127.0.0.1:%d/a\\tb.png' is not a plain " \
           "http:// or https:// address (potato validate lists it)" % (bad_id, port) in log, log


def test_fetch_url_answers_a_sentence_for_an_address_urllib_refuses(tmp_path):
    # http.client's InvalidURL is no URLError nor OSError: it used to end the worker (a tab
    # or a space is now sent percent-encoded; an address is named escaped when it has one)
    for bad in ("http://127.0.0.1:1/a\tb.png", "http://127.0.0.1:1/a b.png",
                "http://127.0.0.1:99999/x.png", "http://[::1/x.png", "http://127.0.0.1:x/"):
        error = media_remote.fetch_url(bad, str(tmp_path / "x"), timeout=5)
        assert error.startswith("%s could not be fetched: " % media_remote.shown_url(bad)), error
        assert not os.path.exists(str(tmp_path / "x.part"))


def test_a_media_address_in_korean_is_fetched_and_a_long_one_is_named_short(tmp_path,
                                                                           png_server):
    # the hostile review: urllib cannot send a non-ASCII path ("ordinal not in range(128)"),
    # so every such item failed; and a 70,000-character address went whole into the error
    port, asked = png_server
    dest = str(tmp_path / "a")
    assert media_remote.fetch_url("http://127.0.0.1:%d/사진 1.png" % port, dest) is None
    assert open(dest, "rb").read() == PNG
    assert asked == ["/%EC%82%AC%EC%A7%84%201.png"]
    long_url = "http://127.0.0.1:1/" + "a" * 70000
    error = media_remote.fetch_url(long_url, str(tmp_path / "b"), timeout=5)
    assert len(error) < 400 and "could not be fetched" in error, error[:500]
    bidi = "http://127.0.0.1:1/\u202egnp.exe"
    error = media_remote.fetch_url(bidi, str(tmp_path / "c"), timeout=5)
    assert "\u202e" not in error and "\\u202e" in error
