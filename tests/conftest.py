import os
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "review-sentiment")
sys.path.insert(0, ROOT)


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
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=h)
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


@pytest.fixture
def serve():
    """Start a real server for a config path on 127.0.0.1:0 through the composition root
    (``potato.service.Service``, as ``potato start`` does); returns (service, url) and closes
    it afterwards. No queue lock: a test may serve one project twice."""
    from potato.config import load
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
