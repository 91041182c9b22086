"""What the tests share (one module; fixtures live in conftest.py): paths and constants, a tiny
HTTP client, projects made from the bundled example, waiting for runs, config snippets for the
fake ssh host and SLURM cluster, the headless browser's helpers, a tiny-BERT run directory."""

import html.parser
import io
import json
import os
import random
import shutil
import subprocess
import sys
import sqlite3
import time

import pytest

from potato.commands.cli import main
from potato.server.http import Handler
from potato.training.backends.base import RemoteState, RunContext
from potato.training.exchange.intake import RunEvents
from potato.training.remote import bundle as bundle_mod
from potato.training.remote.protocol import RunSettings
from potato.training.remote import bundle
from potato.training.remote import protocol as events
from potato.training.remote import trainers, worker
from potato.training.remote.client import ServerError
from potato.training.remote.run import AgentRun
from potato.training.remote.paths import RunPaths, write_json
from potato.training.remote.trainers import REGISTRY, resolve_params

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EXAMPLE = os.path.join(ROOT, "examples", "review-sentiment")

FAKES = os.path.join(ROOT, "tests", "fakes")

BASE = """\
annotation_task_name: Test
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - annotation_type: radio
    name: sentiment
    labels: [positive, negative]
"""


class Client:
    """A tiny HTTP client for tests: keeps cookies, never follows redirects."""

    def __init__(self, base_url: str):
        from urllib.parse import urlsplit

        u = urlsplit(base_url)
        self.host, self.port = u.hostname, u.port
        self.https = u.scheme == "https"
        self.cookies = {}

    def request(self, method, path, body=None, headers=None, json_body=None, form=None):
        import http.client
        import json as _json
        from urllib.parse import urlencode

        h = dict(headers or {})
        if json_body is not None:
            body = _json.dumps(json_body).encode()
            h.setdefault("Content-Type", "application/json")
        if form is not None:
            body = urlencode(form, doseq=True).encode()
            h.setdefault("Content-Type", "application/x-www-form-urlencoded")
        if self.cookies:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if self.https:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=30,
                                               context=client_tls())
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            try:
                conn.request(method, path, body=body, headers=h)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused before the body was read: read the answer, as browsers and curl do
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        for raw in resp.headers.get_all("Set-Cookie") or []:
            name, _, rest = raw.partition("=")
            value = rest.split(";", 1)[0]
            if "Max-Age=0" in raw:
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        resp.body = data
        resp.text = data.decode("utf-8", "replace")
        return resp

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def json(self, method, path, **kw):
        import json as _json

        r = self.request(method, path, **kw)
        return r.status, _json.loads(r.body or b"null")

    def login(self, name):
        r = self.post("/login", form={"username": name})
        assert r.status == 303, r.text
        return r


# -- projects and runs ----------------------------------------------------------------------------

KEY = "test-admin-key-0123456789"
PLUGINS = "tests.plugins.fake_trainers"


def make_project(tmp_path, model_training="", top="", labels=True):
    """The example's 2,000 items (and, with labels, its 600 labels) in a fresh project, split
    as the example is (split_seed 13: on that test split naive Bayes beats chance)."""
    shutil.copy(os.path.join(EXAMPLE, "data", "reviews.jsonl"), tmp_path / "reviews.jsonl")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"""\
annotation_task_name: Training test
data_files: [reviews.jsonl]
admin_api_key: {KEY}
annotation_schemes:
  - annotation_type: radio
    name: sentiment
    labels: [positive, negative]
{top}
model_training:
  grace_seconds: 2
  split_seed: 13
  writeback:
    schemas: [sentiment]
    include_unlabeled: true
{model_training}
""")
    if labels:
        assert main(["annotations", "import", str(cfg), os.path.join(EXAMPLE, "labels.jsonl"),
                     "--annotator", "gold"]) == 0
    return str(cfg)


def wait_run(client, run_id, timeout=60, until=("success", "error", "cancelled")):
    deadline = time.time() + timeout
    while True:
        status, run = client.json("GET", f"/admin/training/api/runs/{run_id}",
                                  headers={"X-API-Key": KEY})
        assert status == 200, run
        if run["status"] in until:
            return run
        assert time.time() < deadline, f"run {run_id} still {run['status']}: {run}"
        time.sleep(0.1)


def start_run(client, **body):
    status, out = client.json("POST", "/admin/training/api/runs", json_body=body,
                              headers={"X-API-Key": KEY})
    assert status == 202, out
    return out["run_id"]


def gold_labels():
    with open(os.path.join(EXAMPLE, "data", "gold.jsonl")) as f:
        return {d["id"]: d["sentiment"] for d in map(json.loads, f)}


def job_dirs(root, run_id):
    """The run's job directories under ``root/jobs`` (named <run_id>-<unique>)."""
    import glob

    return glob.glob(os.path.join(str(root), "jobs", glob.escape(run_id) + "-*"))


def wait_progress(client, run_id, timeout=60):
    """Wait until the run is running and its worker has reported progress; fail fast if not."""
    deadline = time.time() + timeout
    while True:
        run = wait_run(client, run_id, until=("running", "success", "error", "cancelled"))
        assert run["status"] == "running", run
        if (run.get("progress") or {}).get("current"):
            return run
        assert time.time() < deadline, f"run {run_id} never reported progress"
        time.sleep(0.2)


def job_mark(client, run_id, timeout=60):
    """``/jobs/<run_id>-<unique>``, a remote run's own job directory (run ids repeat across the
    tests' projects, the unique part does not): from the ssh command in the run log."""
    import re

    deadline = time.time() + timeout
    while True:
        log = client.get(f"/admin/training/api/runs/{run_id}/log",
                         headers={"X-API-Key": KEY}).text
        m = re.search(r"/tmp/potato-%s-([0-9a-f]{6})" % re.escape(run_id), log)
        if m:
            return "/jobs/%s-%s" % (run_id, m.group(1))
        assert time.time() < deadline, "no ssh session in the run log: " + log[-2000:]
        time.sleep(0.2)


def job_processes(mark, also=""):
    """Pids of live processes whose command line names a run's job directory (``mark``, from
    job_mark: the worker, its guard, the agent), and holds ``also``, anywhere on this machine:
    an agent whose ssh session ended is no longer a descendant of the test or of sshd."""
    mark, also = mark.encode(), also.encode()
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{pid}/stat") as f:
                zombie = f.read().split(")")[-1].split()[0] == "Z"
        except OSError:
            continue
        if mark in cmdline and also in cmdline and not zombie:
            pids.append(int(pid))
    return pids


def wall_limited(cfg_path, limit, grace):
    """The project at ``cfg_path`` with runs of at most ``limit`` seconds and ``grace``
    seconds between SIGTERM and SIGKILL."""
    with open(cfg_path) as f:
        text = f.read().replace("model_training:\n", "model_training:\n  max_wall_seconds: "
                                "%g\n" % limit, 1).replace("grace_seconds: 2\n",
                                                            "grace_seconds: %g\n" % grace)
    with open(cfg_path, "w") as f:
        f.write(text)
    return cfg_path


def stuck_run_frees_the_queue(c, limit, grace):
    """Issue 38.3, on any ssh host: a worker that ignores SIGTERM, run on backend gpu-server
    past ``limit``, ends with the max_wall_seconds sentence within seconds of the limit, the
    queued local run starts then, and nothing of the job runs on the host after ``grace``.
    Returns the stuck run's id."""
    stuck = start_run(c, backend="gpu-server", schemas=["sentiment"],
                      trainer="test-ignore-term", params={"seconds": 300})
    mark = job_mark(c, stuck)
    following = start_run(c, backend="local", schemas=["sentiment"], trainer="text-naive-bayes")
    deadline = time.time() + 60
    while not job_processes(mark, also="potato.training.worker"):
        assert time.time() < deadline, "the worker never started"
        time.sleep(0.2)
    run = wait_run(c, stuck, timeout=limit + 60)
    assert run["status"] == "error"
    assert run["error"].startswith("The run took longer than max_wall_seconds (%g s) and was "
                                   "stopped." % limit), run["error"]
    assert run["finished_at"] - run["started_at"] <= limit + 5, run
    after = wait_run(c, following, timeout=60)
    assert after["status"] == "success", after
    assert after["started_at"] - run["started_at"] <= limit + 5
    deadline = run["finished_at"] + grace + 5
    while job_processes(mark) and time.time() < deadline:
        time.sleep(0.2)
    assert job_processes(mark) == [], "the run's processes outlived grace_seconds on the host"
    return stuck


def register_agent(cfg_path, backend, capsys):
    """``potato training register`` for an agent backend of the config: the agent's token."""
    import re

    capsys.readouterr()
    assert main(["training", "register", backend, cfg_path]) == 0
    return re.search(r"export POTATO_TRAINING_TOKEN=(\S+)", capsys.readouterr().out).group(1)


def media_cached(cache):
    """{sha256: inode} of the files in a host's content-addressed media cache."""
    return {p.name: p.stat().st_ino for p in cache.glob("??/*")}


def real_ssh_backends(remote):
    """A ``backends:`` block with one ssh backend, gpu-server, on the real loopback sshd
    (host potato-real), its remote_dir ``remote`` and this checkout on its PYTHONPATH."""
    import json

    keys = {"type": "ssh", "host": "potato-real", "remote_dir": str(remote),
            "python": sys.executable, "heartbeat_timeout_s": 60, "env": {"PYTHONPATH": ROOT}}
    return "  backends:\n    gpu-server:\n" + "".join(
        "      %s: %s\n" % (k, json.dumps(v)) for k, v in keys.items())


def media_server(handler, timeout=5):
    """``handler`` served on loopback by a threading HTTP server, and a stand-in for the agent's
    client that media_fetch.Downloader talks through: (client, stop)."""
    import http.client
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    class Client:
        token = "t"

        def _conn(self):
            return http.client.HTTPConnection("127.0.0.1", server.server_address[1],
                                              timeout=timeout), ""

    def stop():
        server.shutdown()
        server.server_close()
        thread.join(5)

    return Client(), stop


def agent_once(url, backend, token, workdir, timeout=400):
    """``potato training agent --once`` against the server at ``url``, as a lab machine would
    run it, until it has run one job; returns its stderr. Fails the test on a non-zero exit."""
    import subprocess

    p = subprocess.Popen([sys.executable, "-m", "potato", "training", "agent", "--server",
                          url.rstrip("/"), "--backend", backend, "--workdir", str(workdir),
                          "--poll-interval", "0.2", "--once"],
                         cwd=ROOT, env=dict(os.environ, POTATO_TRAINING_TOKEN=token,
                                            PYTHONPATH=ROOT),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise
    assert p.returncode == 0, err[-3000:]
    return err


def fake_ssh_for_agent_session(monkeypatch, **env):
    """Let the probe and code copy run normally, then give the agent's ssh session the fake
    ssh settings ``env`` (e.g. FAKE_SSH_MODE="drop"): the session misbehaves, not the set-up."""
    from potato.training.backends import ssh as ssh_mod

    real = ssh_mod.SshBackend._run_agent

    def run_agent(self, ctx, python, *args):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        return real(self, ctx, python, *args)

    monkeypatch.setattr(ssh_mod.SshBackend, "_run_agent", run_agent)


# -- config snippets for the fake ssh host and SLURM cluster -------------------------------------

REMOTE_DIR = "~/pt dir/it's; $(touch HACKED)"


def ssh_backend(**extra):
    keys = {"type": "ssh", "host": "gpu.example.org", "remote_dir": REMOTE_DIR,
            "heartbeat_timeout_s": 20}
    keys.update(extra)
    lines = ["    gpu-server:"] + [f"      {k}: {json.dumps(v)}" for k, v in keys.items()]
    return "  backends:\n" + "\n".join(lines) + "\n"


def slurm_backend(**extra):
    keys = {"type": "slurm", "host": "login.cluster.example.org", "remote_dir": "~/potato jobs",
            "partition": "gpu", "gres": "gpu:1", "time": "00:10:00", "poll_interval_s": 0.3,
            "job_python": "python3", "prelude": ["export FROM_PRELUDE=yes"],
            "heartbeat_timeout_s": 30}
    keys.update(extra)
    return "  backends:\n    cluster:\n" + "".join(
        f"      {k}: {json.dumps(v)}\n" for k, v in keys.items())


# -- the headless browser ------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SHOTS = os.path.join(ROOT, "test-output")


def require(path, what):
    if not os.path.exists(path):
        if os.environ.get("CI"):
            pytest.fail(f"{what} is missing at {path}: .ci/run installs it")
        pytest.skip(f"{what} not installed (apt-get install chromium chromium-driver)")


def wait_for(driver, cond, timeout=60, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = cond(driver)
            if last:
                return last
        except Exception as e:  # the DOM is being swapped: try again
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def browser_login(d, url, name="dana"):
    """Log ``name`` in through the login form in the browser ``d``; returns at /annotate."""
    d.get(url + "login")
    d.find_element("id", "username").send_keys(name)
    d.find_element("css selector", "form button[type=submit]").click()
    wait_for(d, lambda d: d.current_url.endswith("/annotate"), what="the annotate page")


def select(driver, element_id, value):
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", element_id)).select_by_value(value)


def text_of(driver, css):
    return driver.find_element("css selector", css).text


def admin_login(d, url, then):
    d.get(url + then.lstrip("/"))
    d.find_element("id", "key").send_keys(KEY)
    d.find_element("css selector", "form.card button[type=submit]").click()
    # The login form is served at ``then`` itself: wait for the page after it, not the URL.
    wait_for(d, lambda d: d.current_url.endswith(then) and not d.find_elements(
        "css selector", 'form[action="/admin/login"]'), what="the admin login")


class Elements(html.parser.HTMLParser):
    """Every start tag of a page, with its attributes."""

    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def injected(page: str):
    """Elements a hostile value could have made: any meta refresh, img, iframe, object, or a
    script that is not one of Potato's own (src under /static/, or a JSON data block)."""
    p = Elements()
    p.feed(page)
    bad = []
    for tag, attrs in p.tags:
        if tag in ("meta", "img", "iframe", "object", "embed") and tag != "meta" or (
                tag == "meta" and "http-equiv" in attrs):
            bad.append((tag, attrs))
        if tag == "script" and not (attrs.get("src", "").startswith("/static/")
                                    or attrs.get("type") == "application/json"):
            bad.append((tag, attrs))
        if any(k.startswith("on") for k in attrs):
            bad.append((tag, attrs))
    return bad


# -- a tiny BERT and its run directory -----------------------------------------------------------

POS = ["good", "great", "fine", "lovely", "superb"]
NEG = ["bad", "awful", "poor", "dull", "terrible"]
FILLER = ["the", "film", "was", "a", "story", "plot", "and", "very", "quite", "really"]


def sentence(rng, words):
    return " ".join(rng.sample(FILLER, 3) + [rng.choice(words)] + rng.sample(FILLER, 2))


def hf_run_dir(tmp_path, model_dir, **params):
    rng = random.Random(1)
    items, labels = [], {}
    for n in range(240):
        positive = n % 2 == 0
        item_id = "i%d" % n
        items.append((item_id, sentence(rng, POS if positive else NEG)))
        if n < 200:
            labels[item_id] = {"sentiment": ["positive" if positive else "negative"]}
    paths = RunPaths(tmp_path / "run").create()
    schemas = {"sentiment": {"type": "radio", "labels": ["positive", "negative"]}}
    bundle.build(paths.bundle, items, labels, schemas, include_unlabeled=True)
    full = resolve_params(REGISTRY["hf-text-classification"], dict(model=model_dir, **params))
    write_json(paths.spec, {"run_id": "t", "trainer": "hf-text-classification",
                            "schemas": schemas, "params": full, "device": "cuda:1"})
    return paths, items


def hf_train(paths):
    out = io.StringIO()
    code = worker.run(paths.spec, events.Emitter(out))
    evs = [json.loads(line) for line in out.getvalue().splitlines()]
    return code, evs


def old_runs_table(path):
    """A store's runs table as it was before placement and warnings (an open connection)."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE runs (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT UNIQUE "
               "NOT NULL, trainer TEXT NOT NULL, schemas TEXT NOT NULL, backend TEXT NOT NULL, "
               "params TEXT NOT NULL, status TEXT NOT NULL, step TEXT NOT NULL DEFAULT '', "
               "error TEXT, metrics TEXT, holdout TEXT, writeback TEXT, progress TEXT, "
               "history TEXT NOT NULL DEFAULT '[]', ran_on TEXT, artifact_uri TEXT, auto INTEGER "
               "NOT NULL DEFAULT 0, cancel_requested INTEGER NOT NULL DEFAULT 0, created_at REAL "
               "NOT NULL, started_at REAL, finished_at REAL, heartbeat_at REAL)")
    return db


def use_endpoint(monkeypatch, url):
    """Point the huggingface_hub client at ``url`` as a process started with HF_ENDPOINT=url
    would be: the library reads the variable once, when it is first imported (by transformers
    too), so a test that comes after such an import sets the library's constant as well."""
    monkeypatch.setenv("HF_ENDPOINT", url)
    try:
        from huggingface_hub import constants
    except ImportError:
        return
    monkeypatch.setattr(constants, "ENDPOINT", url.rstrip("/"))


# -- a run made active by hand, and the agent endpoints' raw side ---------------------------------

TOKEN = "h" * 40
SCHEMA = {"sentiment": {"type": "radio", "labels": ["positive", "negative"]}}


def active_run(server, trainer="text-naive-bayes"):
    """A run made active by hand, as a remote backend makes one, with the real event door."""
    manager = server.manager
    run = manager.runs.create(trainer, ["sentiment"], "gpu", {})
    run_id = run.run_id
    assert manager.runs.transition(run_id, "queued", "running")
    paths = manager.paths(run_id).create()
    items = [("a%d" % i, "text %d" % i) for i in range(40)]
    labels = {"a%d" % i: {"sentiment": ["positive" if i % 2 else "negative"]} for i in range(30)}
    bundle_mod.build(paths.bundle, items, labels, SCHEMA, include_unlabeled=True)
    write_json(paths.spec, {"run_id": run_id})

    def set_step(text):
        manager.runs.update(run_id, step=text)

    log = lambda m: manager._log(run_id, m)  # noqa: E731
    ctx = RunContext(run, paths, manager.cfg,
                     RunEvents(manager.runs, log, run_id, paths, set_step,
                               manager.backends["gpu"].ran_on), set_step, log)
    ctx.bundle_sha256 = bundle_mod.pack(paths.bundle, paths.bundle_archive)
    ctx.remote = RemoteState(TOKEN, RunSettings(host="gpu.example.org"))
    manager._active[run_id] = ctx
    return run_id, ctx


# -- raw sockets against a live server (issue 25) --------------------------------------------

def client_tls():
    """A client TLS context that takes the tests' self-signed certificate."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA store to load: it trusts nothing
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


def raw(port, data: bytes, source="127.0.0.1", timeout=10.0, tls=False):
    """A socket from ``source`` (over TLS with ``tls``) that has sent ``data``."""
    import socket

    s = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                 source_address=(source, 0))
    if tls:
        s = client_tls().wrap_socket(s, server_hostname="localhost")
    if data:
        s.sendall(data)
    return s


def login_head(length: int) -> bytes:
    return (b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
            b"application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % length)


def agent_head(run_id: str, length: int) -> bytes:
    return (b"PUT /agent/v1/runs/%s/predictions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
            b"Bearer wrong-token\r\nContent-Length: %d\r\n\r\n" % (run_id.encode(), length))


class Tricklers:
    """``n`` sockets from ``source`` that send their request headers, then one byte of body
    every ``every`` seconds; any the server closes is opened again, so the pressure stays."""

    def __init__(self, port, heads, n=150, source="127.0.0.2", every=2.0, tls=False):
        import threading

        self.port, self.heads, self.n, self.source, self.every = port, heads, n, source, every
        self.tls = tls
        self.socks = []
        self.opened = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tricklers")

    def _open(self):
        try:
            s = raw(self.port, self.heads[self.opened % len(self.heads)], self.source, 5,
                    self.tls)
        except OSError:
            return
        s.setblocking(False)
        self.opened += 1
        self.socks.append(s)

    def _run(self):
        import select

        while not self.stop.is_set():
            while len(self.socks) < self.n and not self.stop.is_set():
                self._open()
            readable, _, _ = select.select(self.socks, [], [], 0)
            for s in readable:  # an answer or a close: the server let go of it
                self.socks.remove(s)
                s.close()
            for s in list(self.socks):
                try:
                    s.send(b"x")
                except OSError:
                    self.socks.remove(s)
                    s.close()
            self.stop.wait(self.every)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)
        for s in self.socks:
            s.close()


def busy_sockets(port, n, source, tls=False):
    """``n`` sockets from ``source`` with a request under way; (sockets, how many the server
    did not hold: answered 503, reset or closed)."""
    import ssl

    socks, refused = [], 0
    for _ in range(n):
        try:
            s = raw(port, login_head(1000), source, 5, tls)
        except (OSError, ssl.SSLError):  # over TLS a 503 may come before the handshake ends
            refused += 1
            continue
        s.setblocking(False)
        socks.append(s)
    # The server answers refusals at once, but a loaded machine may take seconds: read until
    # nothing new has come for 3 s (at most 20 s), so no late 503 is missed.
    answered, quiet_since, end = set(), time.time(), time.time() + 20
    while time.time() < end and time.time() - quiet_since < 3:
        time.sleep(0.1)
        for s in socks:
            if id(s) in answered:
                continue
            try:
                data = s.recv(1000)
            except (BlockingIOError, ssl.SSLWantReadError):
                continue
            except ConnectionResetError:  # refused and closed before its 503 could be read
                answered.add(id(s))
                quiet_since = time.time()
                refused += 1
                continue
            answered.add(id(s))
            quiet_since = time.time()
            # a 503, or closed unanswered (a connection still in its headers may be closed to
            # make room for a newer one of the same address): either way not held
            refused += not data or (data.startswith(b"HTTP/1.1 503")
                                    and b"connections open" in data)
    return socks, refused


def read_all(sock):
    """Everything the server sends on ``sock`` until it closes; then close it."""
    data = b""
    while True:
        block = sock.recv(65536)
        if not block:
            break
        data += block
    sock.close()
    return data


def post_events(c, run_id, events):
    return c.json("POST", f"/agent/v1/runs/{run_id}/events", json_body={"events": events},
                  headers={"Authorization": "Bearer " + TOKEN})


# -- an agent's run against the protocol answered from memory -----------------------------------

class FakeResponse:
    def __init__(self, data):
        self.buf = io.BytesIO(data)

    def read1(self, n):
        return self.buf.read(n)

    def close(self):  # as http.client.HTTPResponse's: the agent closes each body it read
        self.buf.close()


class FakeConn:
    def close(self):
        pass


class FakeClient:
    """Answers the agent protocol from memory and records what the agent sent."""

    def __init__(self, archive, settings, cancel_after=None):
        with open(archive, "rb") as f:
            self.archive = f.read()
        self.sha = bundle_mod.file_sha256(archive)
        self.settings = settings
        self.cancel_after = cancel_after
        self.events, self.uploads, self.results, self.calls = [], {}, [], []

    def request(self, method, path, body=None, headers=None, stream_to=None):
        self.calls.append((method, path.split("?")[0]))
        if method == "GET" and path.endswith("/bundle"):
            return 200, FakeResponse(self.archive), FakeConn()
        if method == "GET":
            params = trainers.resolve_params(trainers.get("text-naive-bayes"), {})
            spec = {"run_id": "r1", "trainer": "text-naive-bayes", "schemas": SCHEMA,
                    "params": params, "device": "auto", "num_threads": None, "extra": {}}
            return 200, {"run_id": "r1", "spec": spec, "grace_seconds": 2,
                         "bundle": {"sha256": self.sha, "bytes": len(self.archive)},
                         "backend": self.settings}, None
        if path.endswith("/events"):
            self.events.extend(body["events"])
            cancel = self.cancel_after is not None and len(self.events) >= self.cancel_after
            return 200, {"ok": True, "cancel": cancel}, None
        if method == "PUT":
            data = body.read() if hasattr(body, "read") else body
            self.uploads[path] = self.uploads.get(path, b"") + data
            return 200, {"ok": True}, None
        if path.endswith("/result"):
            self.results.append(body)
            return 200, {"ok": True}, None
        raise ServerError(404, "no route %s %s" % (method, path))


def make_run(tmp_path, archive, cancel_after=None, **settings):
    base = {"gpus": "none", "host": "fake-host"}
    base.update(settings)
    client = FakeClient(archive, base, cancel_after)
    return AgentRun(client, "r1", str(tmp_path / "job"), sys.executable), client


# -- span data for hf-token-classification ------------------------------------------------------

PEOPLE = ["alice", "bob", "carol", "dave", "erin"]
PLACES = ["paris", "rome", "oslo", "lima", "york"]
SPAN_FILLER = ["the", "met", "in", "went", "to", "and", "saw", "we", "then", "home", "new"]
SPAN_VOCAB = PEOPLE + PLACES + SPAN_FILLER


def span_item(rng, words=None):
    """(text, spans): filler words with one to three people and places among them ("new york" is
    one two-word place), spans as the span scheme stores them."""
    parts = []
    for _ in range(words or rng.randint(5, 9)):
        parts.append((rng.choice(SPAN_FILLER), None))
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["person", "place"])
        word = rng.choice(PEOPLE if kind == "person" else PLACES)
        entity = "new york" if word == "york" else word
        parts.insert(rng.randint(0, len(parts)), (entity, kind))
    text, spans = "", []
    for word, kind in parts:
        if text:
            text += " "
        if kind:
            spans.append({"start": len(text), "end": len(text) + len(word), "label": kind,
                          "text": word})
        text += word
    return text, spans


def build_tiny_token_bert(d):
    """A BERT with random weights, a fast tokenizer over SPAN_VOCAB, saved in ``d``."""
    import inspect

    import torch
    import transformers

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + SPAN_VOCAB
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    if "vocab" in inspect.signature(transformers.BertTokenizer.__init__).parameters:  # v5
        tok = transformers.BertTokenizer(vocab={w: i for i, w in enumerate(vocab)})
    else:  # transformers 4.x: the fast class from the vocab file
        tok = transformers.BertTokenizerFast(vocab_file=os.path.join(d, "vocab.txt"))
    assert tok.is_fast and tok("alice")["input_ids"][1] == vocab.index("alice")
    tok.save_pretrained(d)
    cfg = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=64,
                                  max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.BertModel(cfg).save_pretrained(d)
    return d


def make_span_project(tmp_path, model_training="", n=260, labelled=200, seed=3):
    """A project of ``n`` span_item texts with a span scheme ``who`` (person, place), the first
    ``labelled`` marked by annotator ``gold`` (imported as a lab would)."""
    rng = random.Random(seed)
    rows, labels = [], []
    for k in range(n):
        text, spans = span_item(rng, 25 if k % 10 == 0 else None)  # some longer than a window
        rows.append({"id": "s%03d" % k, "text": text})
        if k < labelled:
            labels.append({"id": "s%03d" % k, "who": spans})
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"""\
annotation_task_name: Span test
data_files: [items.jsonl]
admin_api_key: {KEY}
annotation_schemes:
  - annotation_type: span
    name: who
    labels: [person, place]
model_training:
  grace_seconds: 2
  writeback:
    schemas: [who]
    include_unlabeled: true
{model_training}
""")
    assert main(["annotations", "import", str(cfg), str(tmp_path / "labels.jsonl"),
                 "--annotator", "gold"]) == 0
    return str(cfg), rows


def agent_backends(**lab):
    """Two agent backends, lab (with ``lab``'s keys) and lab2, as model_training lines."""
    keys = {"type": "agent", "heartbeat_timeout_s": 5}
    keys.update(lab)
    inner = ", ".join(f"{k}: {v}" for k, v in keys.items())
    return f"  backends:\n    lab: {{{inner}}}\n    lab2: {{type: agent}}\n"


# -- media items ----------------------------------------------------------------------------------

DIGITS = os.path.join(ROOT, "examples", "digits")


def wav_bytes(seconds=0.5, rate=8000, freq=440.0) -> bytes:
    """A short mono 16-bit WAV tone, made with the standard library (no downloads)."""
    import math
    import struct
    import wave

    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(12000 * math.sin(2 * math.pi * freq * n
                                                                         / rate)))
                               for n in range(int(seconds * rate))))
    return buf.getvalue()


MEDIA_CONFIG = """\
annotation_task_name: Media
data_files: [items.jsonl]
media_directory: media
admin_api_key: test-admin-key-0123456789
item_properties: {image_key: image, audio_key: audio}
annotation_schemes:
  - annotation_type: radio
    name: kind
    labels: [digit, tone, other]
model_training:
  writeback: {schemas: [kind]}
"""


def media_project(tmp_path, items=None, config=MEDIA_CONFIG):
    """A project whose media folder holds two digit images and two WAV tones; items: by
    default img0, img1 (images, no text), tone0 (audio) and gone (an image not there)."""
    folder = tmp_path / "media"
    (folder / "sounds").mkdir(parents=True, exist_ok=True)
    for n in range(2):
        shutil.copy(os.path.join(DIGITS, "media", "images", f"digit-000{n}.png"),
                    folder / f"digit-{n}.png")
        (folder / "sounds" / f"tone-{n}.wav").write_bytes(wav_bytes(freq=440.0 * (n + 1)))
    rows = items if items is not None else [
        {"id": "img0", "image": "digit-0.png"}, {"id": "img1", "image": "digit-1.png"},
        {"id": "tone0", "audio": "sounds/tone-0.wav", "text": "Which sound?"},
        {"id": "gone", "image": "not-here.png"}]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "config.yaml"
    path.write_text(config)
    return str(path)


# -- the request handler in-process (no socket, no thread) --------------------------------------

class MemorySocket:
    """What the request handler needs of a socket: ``raw`` to read (every request the client
    sent, pipelined), and what the server wrote (``sent``)."""

    def __init__(self, raw: bytes):
        self.rfile = io.BytesIO(raw)
        self.sent = bytearray()

    def makefile(self, mode, *args, **kwargs):
        return self.rfile

    def sendall(self, data):
        self.sent += data

    def settimeout(self, timeout):
        pass

    def setsockopt(self, *args):
        pass

    def shutdown(self, how):
        pass

    def recv(self, n):
        return self.rfile.read(n)


def handle_in_memory(app, raw: bytes):
    """Every response the real handler gives to ``raw`` (its requests, pipelined), in order:
    [(status, {lower-case header: value}, body)]; a ``100 Continue`` is one too. The
    connection's fate: the last response's ``connection`` header, and how many were answered."""
    class Server:
        pass

    server = Server()
    server.app = app
    conn = MemorySocket(raw)
    Handler(conn, ("127.0.0.1", 40000), server)
    out, data = [], bytes(conn.sent)
    while data:
        head, _, data = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", 0))
        out.append((int(lines[0].split()[1]), headers, data[:n]))
        data = data[n:]
    return out


def http_request(method, path, body=b"", headers=None, length=True):
    """One HTTP/1.1 request's bytes; ``headers`` may be a list of pairs (a header twice)."""
    pairs = [("Host", "127.0.0.1")]
    if length:
        pairs.append(("Content-Length", str(len(body))))
    pairs += list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    head = "%s %s HTTP/1.1\r\n%s\r\n\r\n" % (method, path, "\r\n".join(
        "%s: %s" % kv for kv in pairs))
    return head.encode() + body


# -- tiny models for the image, audio and LLM trainers (random weights, no download) -----------

def build_tiny_image_model(d, family):
    """A model for 32x32 images with random weights and its image processor, saved in ``d``:
    a ResNet (it learns the digits in seconds) or a ViT (attention layers for LoRA)."""
    import torch
    import transformers

    torch.manual_seed(0)
    if family == "resnet":
        transformers.ResNetModel(transformers.ResNetConfig(
            num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
            layer_type="basic", downsample_in_first_stage=False)).save_pretrained(d)
    else:
        transformers.ViTModel(transformers.ViTConfig(
            image_size=32, patch_size=8, num_channels=3, hidden_size=48, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=96)).save_pretrained(d)
    transformers.ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.5] * 3,
                                   image_std=[0.5] * 3).save_pretrained(d)
    return d


def build_tiny_audio_model(d):
    """A Wav2Vec2 classifier small enough to train in seconds, random weights, and its feature
    extractor at 16 kHz, saved in ``d``."""
    import torch
    import transformers

    torch.manual_seed(0)
    transformers.Wav2Vec2Model(transformers.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16, 16), conv_stride=(5, 4, 4), conv_kernel=(10, 8, 8),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, classifier_proj_size=16,
        feat_extract_norm="layer", do_stable_layer_norm=True,
        mask_time_prob=0.0)).save_pretrained(d)
    transformers.Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
        return_attention_mask=True).save_pretrained(d)
    return d


def word_tokenizer(texts):
    """A word-level fast tokenizer over ``texts``, with BOS and EOS but no pad token (like
    most causal LMs)."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tk = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.train_from_iterator(texts, trainers.WordLevelTrainer(
        vocab_size=3000, special_tokens=["<unk>", "<s>", "</s>"]))
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[
        ("<s>", tk.token_to_id("<s>"))])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>",
                                                bos_token="<s>", eos_token="</s>")


def build_tiny_llama(d, tokenizer):
    """A two-layer Llama with random weights over ``tokenizer``, saved with it in ``d``."""
    import torch
    import transformers

    cfg = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
        initializer_range=0.3,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(str(d))
    tokenizer.save_pretrained(str(d))
    return str(d)


# What the held-out report says of a model that beats its baseline (report.py's
# versus_baseline, docs/training.md "Which run is in use"): only such a run is put in use
# automatically. For tests of what the write-back policy decides once a run has earned that.
BEATS = {"figure": "macro-F1", "higher_is_better": True, "model": 0.9, "baseline": 0.3,
         "baseline_is": "always answering pos", "n": 100, "shuffles": 1000, "chance": 0.5,
         "chance_bound": 0.6, "beats": True}


def beats_baseline(holdout=None):
    """``holdout`` (a run's held-out report) with the verdict that its model beat the baseline,
    for every scheme it reports on."""
    h = dict(holdout or {})
    if isinstance(h.get("per_scheme"), dict):
        h["per_scheme"] = {k: dict(v, versus_baseline=BEATS) if isinstance(v, dict) else v
                           for k, v in h["per_scheme"].items()}
    else:
        h["versus_baseline"] = BEATS
    return h


def self_signed(directory) -> tuple:
    """(certificate, key) paths of a fresh self-signed certificate for localhost, made with
    openssl in ``directory``; the calling test is skipped where openssl cannot make one."""
    import pytest

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: the TLS tests need it to make a certificate")
    cert, key = os.path.join(str(directory), "cert.pem"), os.path.join(str(directory), "key.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=localhost"], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        pytest.skip("openssl req -x509 failed: %s" % r.stderr.strip()[-200:])
    return cert, key
