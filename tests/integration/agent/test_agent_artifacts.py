"""An agent run's model files come back to the server (issue 24, item 9): through the real
`potato training agent` process against a real server on loopback, resumed after a cut, refused
over max_artifact_mb; and `register`'s loopback warning and torch hint."""

import hashlib
import io
import os
import re
import socket
import subprocess
import sys
import tarfile
import threading
import time

from potato.commands.cli import main
from tests.helpers import agent_backends as backends
from tests.helpers import ROOT, Client
from tests.helpers import KEY, make_project, start_run, wait_run

H = {"X-API-Key": KEY}


def register(cfg, capsys, name="lab"):
    capsys.readouterr()
    assert main(["training", "register", name, cfg]) == 0
    return re.search(r"export POTATO_TRAINING_TOKEN=(\S+)", capsys.readouterr().out).group(1)


def run_agent(url, token, workdir, timeout=120):
    env = dict(os.environ, POTATO_TRAINING_TOKEN=token)
    p = subprocess.run([sys.executable, "-m", "potato", "training", "agent", "--server",
                        url.rstrip("/"), "--backend", "lab", "--workdir", str(workdir),
                        "--poll-interval", "0.2", "--once"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stderr


def log_of(c, run_id):
    return c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text


def test_an_agent_runs_model_files_arrive_and_download(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends())
    server, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    run_id = start_run(c, trainer="test-warns", schemas=["sentiment"], backend="lab")
    code, err = run_agent(url, token, tmp_path / "work")
    assert code == 0, err
    run = wait_run(c, run_id)
    assert run["status"] == "success", (run, err)
    artifacts = server.manager.paths(run_id).artifacts
    assert run["artifact_uri"] == artifacts  # on this server, not agent://
    with open(os.path.join(artifacts, "model", "weights.bin"), "rb") as f:
        assert f.read() == b"\x00weights" * 1000
    assert not os.path.lexists(os.path.join(artifacts, "model", "link"))  # links never sent
    assert not os.listdir(tmp_path / "work" / "jobs")  # all came back: nothing stays there
    assert "copying the model back" in log_of(c, run_id)
    r = c.get(f"/admin/training/runs/{run_id}/model.tar", headers=H)
    assert r.status == 200
    with tarfile.open(fileobj=io.BytesIO(r.body)) as tar:
        assert sorted(tar.getnames()) == [f"{run_id}-model/model/labels.json",
                                          f"{run_id}-model/model/weights.bin"]
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert f'href="/admin/training/runs/{run_id}/model.tar"' in page
    from potato.training.core.view import RunView
    from potato.training.hub import publish

    view = RunView.from_dict(c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)[1])
    assert publish.cannot_publish(server.cfg, view, artifacts) is None
    assert publish.repo_files(artifacts) == [
        ("labels.json", os.path.join(artifacts, "model", "labels.json")),
        ("weights.bin", os.path.join(artifacts, "model", "weights.bin"))]


def test_fetch_artifacts_false_keeps_them_on_the_agents_machine(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends(fetch_artifacts="false"))
    _, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    code, err = run_agent(url, token, tmp_path / "work")
    run = wait_run(c, run_id)
    assert run["status"] == "success", (run, err)
    m = re.fullmatch(r"agent://([^/]+)(/.*)/artifacts", run["artifact_uri"])
    assert m and m.group(2).startswith(str(tmp_path / "work"))
    assert os.path.isfile(os.path.join(m.group(2), "artifacts", "sentiment.naive-bayes.json"))
    assert c.get(f"/admin/training/runs/{run_id}/model.tar", headers=H).status == 404


def test_a_model_file_over_the_cap_stays_and_says_why(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends(max_artifact_mb=0.1))
    _, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    run_id = start_run(c, trainer="test-big-artifact", schemas=["sentiment"], backend="lab",
                       params={"seconds": 0.25})
    code, err = run_agent(url, token, tmp_path / "work")
    run = wait_run(c, run_id)
    assert run["status"] == "success", (run, err)
    host = socket.gethostname()
    assert run["artifact_uri"].startswith(f"agent://{host}{tmp_path / 'work'}")
    log = log_of(c, run_id)
    assert re.search(r"model\.bin \(0\.2 MB\) is over max_artifact_mb; it stays on \S+ in "
                     r".*artifacts \(raise max_artifact_mb, now 0\.1 MB, to copy it\)", log), log
    page = c.get(f"/admin/training/runs/{run_id}", headers=H).text
    assert 'id="publish-blocked"' in page and "over max_artifact_mb" in page
    r = c.get(f"/admin/training/runs/{run_id}/model.tar", headers=H)
    assert r.status == 404 and "no model files on this server" in r.text


class Proxy:
    """A loopback proxy in front of the server: each connection is ``handle``d in a thread."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.threads = [threading.Thread(target=self.accept, daemon=True)]
        self.threads[0].start()

    def close(self):
        self.stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for t in self.threads:
            t.join(10)

    def accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self.handle, args=(client,), daemon=True)
            self.threads.append(t)
            t.start()

    @staticmethod
    def answers(upstream, client):
        """Starts passing the server's answers back to the client as they come: the thread."""
        def down():
            try:
                while True:
                    data = upstream.recv(65536)
                    if not data:
                        break
                    client.sendall(data)
            except OSError:
                pass
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        reader = threading.Thread(target=down, daemon=True)
        reader.start()
        return reader

    @staticmethod
    def end(client, upstream, reader):
        for s in (client, upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        reader.join(10)
        client.close()
        upstream.close()


class UploadCutter(Proxy):
    """Forwards to the server; cuts the first PUT of a model file after ``limit`` body bytes,
    and counts the model-file body bytes that reach the server."""

    def __init__(self, target_port, limit):
        self.limit = limit
        self.cut_done = 0
        self.artifact_bytes = 0
        self.lock = threading.Lock()
        super().__init__(target_port)

    def handle(self, client):
        upstream = socket.create_connection(self.target)
        head = b""
        while b"\r\n\r\n" not in head:
            data = client.recv(65536)
            if not data:
                break
            head += data
        first = head.split(b"\r\n")[0]
        upload = first.startswith(b"PUT ") and b"/artifacts?" in first
        with self.lock:
            cut = upload and self.cut_done == 0
            if cut:
                self.cut_done += 1
        body_start = len(head.split(b"\r\n\r\n", 1)[0]) + 4
        sent = [0]

        def forward(data):
            if upload:
                with self.lock:
                    self.artifact_bytes += len(data)
            upstream.sendall(data)
            sent[0] += len(data)

        reader = self.answers(upstream, client)
        try:
            upstream.sendall(head[:body_start])
            rest = head[body_start:]
            while True:
                if cut and sent[0] + len(rest) > self.limit:
                    forward(rest[:self.limit - sent[0]])
                    time.sleep(0.5)  # the server writes what it got before the cut
                    break
                if rest:
                    forward(rest)
                data = client.recv(65536)
                if not data:
                    break
                rest = data
        except OSError:
            pass
        self.end(client, upstream, reader)


def test_an_interrupted_upload_resumes(tmp_path, serve, env, capsys):
    cfg = make_project(tmp_path, backends(keep_remote="true"))
    server, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    size = 1 << 19
    cutter = UploadCutter(server.http.server_address[1], limit=200000)
    run_id = start_run(c, trainer="test-big-artifact", schemas=["sentiment"], backend="lab",
                       params={"seconds": 0.5})
    try:
        code, err = run_agent(f"http://127.0.0.1:{cutter.port}", token, tmp_path / "work")
    finally:
        cutter.close()
    run = wait_run(c, run_id)
    assert run["status"] == "success", (run, err)
    assert cutter.cut_done == 1
    assert "the upload of model.bin was interrupted" in err and "resuming" in err
    # Resumed, not sent again: the bytes that reached the server are the file and the cut part.
    assert size <= cutter.artifact_bytes < size + 200000 * 0.5, cutter.artifact_bytes
    here = os.path.join(server.manager.paths(run_id).artifacts, "model.bin")
    kept = [os.path.join(root, "model.bin") for root, _, files in os.walk(tmp_path / "work")
            if "model.bin" in files]
    assert len(kept) == 1 and run["artifact_uri"].endswith("artifacts")
    with open(here, "rb") as a, open(kept[0], "rb") as b:
        assert hashlib.sha256(a.read()).digest() == hashlib.sha256(b.read()).digest()


def test_the_upload_protocol_resumes_verifies_and_caps(tmp_path, serve, env, capsys):
    """The endpoints alone, with a claimed run's token: where to resume, a wrong offset, a copy
    whose sha256 differs (dropped, then sent again from 0), a size over the cap (413 before any
    byte), and the agent's own send_file resuming a half-sent file."""
    from potato.training.remote.client import Client as AgentClient
    from potato.training.remote.upload import send_file

    cfg = make_project(tmp_path, backends(max_artifact_mb=0.01, heartbeat_timeout_s=60))
    server, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    status, claim = c.json("POST", "/agent/v1/backends/lab/claim", json_body={},
                           headers={"Authorization": "Bearer " + token})
    assert status == 200 and claim["run_id"] == run_id
    auth = {"Authorization": "Bearer " + claim["token"]}
    base = f"/agent/v1/runs/{run_id}/artifacts?path=m/w.bin"
    data = os.urandom(6000)
    sha = hashlib.sha256(data).hexdigest()

    def put(offset, body, size=len(data), digest=sha):
        return c.json("PUT", f"{base}&offset={offset}&size={size}&sha256={digest}", body=body,
                      headers=dict(auth, **{"Content-Type": "application/octet-stream"}))

    assert c.json("GET", base, headers=auth) == (200, {"path": "m/w.bin", "bytes": 0})
    assert put(0, data[:2500]) == (200, {"ok": True, "bytes": 2500})
    assert c.json("GET", base, headers=auth)[1]["bytes"] == 2500
    status, body = put(1000, data[1000:])
    assert status == 409 and body["error"] == "m/w.bin has 2500 bytes here, not 1000: resume " \
                                              "from 2500."
    status, body = put(2500, data[2500:], digest="0" * 64)
    assert status == 409 and "another sha256" in body["error"] and "from byte 0" in body["error"]
    assert c.json("GET", base, headers=auth)[1]["bytes"] == 0  # the copy that differed is gone
    status, body = put(0, b"x" * 10, size=20000)
    assert status == 413 and body["error"] == (
        "m/w.bin (0.0 MB) is over max_artifact_mb (0.01 MB) of backend lab: it stays on the "
        "training machine. To copy such files, raise max_artifact_mb under "
        "model_training.backends.lab.")
    for query in ("&offset=-1", "&offset=x", "&offset=9&size=3", "&sha256=XYZ"):
        status, body = c.json("PUT", base + query, body=b"", headers=auth)
        assert status == 400, (query, body)
    # The agent's own upload resumes a half-sent file (500-byte chunks: several requests).
    assert put(0, data[:3000]) == (200, {"ok": True, "bytes": 3000})
    (tmp_path / "local" / "m").mkdir(parents=True)
    (tmp_path / "local" / "m" / "w.bin").write_bytes(data)
    seen = []
    send_file(AgentClient(claim["token"], server=url), run_id, str(tmp_path / "local"), "m/w.bin",
              seen.append, chunk=500)
    # from the server's 3,000 bytes on, in 500-byte requests (a request the agent had to send
    # again, after a connection the server closed, reports its point twice)
    assert seen[0] == 3000 and seen[-1] == 6000 and seen == sorted(seen)
    assert sorted(set(seen)) == list(range(3000, 6001, 500))
    with open(os.path.join(server.manager.paths(run_id).artifacts, "m", "w.bin"), "rb") as f:
        assert f.read() == data


def _register_output(tmp_path, capsys, top):
    cfg = make_project(tmp_path, backends(), top=top, labels=False)
    capsys.readouterr()
    assert main(["training", "register", "lab", cfg]) == 0
    return cfg, capsys.readouterr()


def test_register_warns_when_the_server_listens_on_loopback_only(tmp_path, capsys):
    cfg, out = _register_output(tmp_path, capsys, "server: {host: 127.0.0.1, port: 8123}")
    url = re.search(r"--server (\S+) --backend lab", out.out).group(1)
    assert url.endswith(":8123") and "127.0.0.1" not in url  # a guess at this host's name
    assert out.err.strip() == (
        f"warning: this server listens on 127.0.0.1 only (server.host in {cfg}), so an agent "
        f"on another machine cannot reach {url}. Start the server with --host 0.0.0.0 (or set "
        f"server.host to an address the training machine can reach), or put a proxy in front "
        f"of it and set server_url to the proxy's URL; then register again.")
    # How to reuse a torch the training machine already has.
    assert "  python3 -m venv --system-site-packages ~/potato-venv\n" in out.out
    assert re.search(r"\n  ~/potato-venv/bin/pip install ", out.out)
    assert "add --python /path/to/python" in out.out


def test_register_does_not_warn_when_the_server_is_reachable(tmp_path, capsys):
    for top in ("server: {host: 0.0.0.0, port: 8123}",
                "server_url: https://annotate.example.org"):
        sub = tmp_path / str(len(top))
        sub.mkdir()
        _, out = _register_output(sub, capsys, top)
        assert "warning:" not in out.err and "listens on" not in out.out + out.err, top


class SlowLink(Proxy):
    """A proxy in front of the server whose uplink (agent to server) carries a model-file
    upload at ``rate`` bytes a second, and after ``stall_after`` bytes of one (if given)
    nothing more: a slow or stalled network, as a lab's uplink can be. Everything else
    passes at full speed."""

    def __init__(self, port, rate, stall_after=None):
        self.rate, self.stall_after = rate, stall_after
        super().__init__(port)

    def handle(self, client):
        upstream = socket.create_connection(self.target)
        client.settimeout(0.5)
        reader = self.answers(upstream, client)
        upload, sent = False, 0
        try:
            while not self.stop.is_set():
                try:
                    data = client.recv(4096)
                except socket.timeout:
                    continue
                if not data:
                    break
                if b"PUT /agent/v1/runs/" in data and b"/artifacts?" in data:
                    upload, sent = True, 0
                if upload:
                    if self.stall_after is not None and sent >= self.stall_after:
                        self.stop.wait(0.5)
                        continue  # the bytes go nowhere: the link stalled
                    time.sleep(len(data) / self.rate)
                    sent += len(data)
                upstream.sendall(data)
        except OSError:
            pass
        self.end(client, upstream, reader)


def test_a_model_copy_over_a_slow_link_arrives(tmp_path, serve, env, capsys):
    # issue 38, item 1: bytes arriving are signs of life. Before, a copy slower than the
    # heartbeat failed with "No word from the agent" and the predictions were not taken.
    cfg = make_project(tmp_path, backends(heartbeat_timeout_s=3))
    server, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    link = SlowLink(server.http.server_address[1], rate=150 << 10)  # 0.15 MB/s, 1 MB: ~7 s
    run_id = start_run(c, trainer="test-big-artifact", schemas=["sentiment"], backend="lab",
                       params={"seconds": 1.0})
    steps = []

    def watch():
        while not link.stop.is_set():
            run = c.json("GET", f"/admin/training/api/runs/{run_id}", headers=H)[1]
            steps.append(run.get("step") or "")
            if run["status"] != "running" and run["status"] != "queued":
                return
            time.sleep(0.3)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        code, err = run_agent(f"http://127.0.0.1:{link.port}", token, tmp_path / "work")
        run = wait_run(c, run_id)
    finally:
        link.close()
        watcher.join(10)
    assert run["status"] == "success", (run, err)
    here = os.path.join(server.manager.paths(run_id).artifacts, "model.bin")
    assert os.path.getsize(here) == 1 << 20
    assert run["writeback"]["written"] > 1000
    # the step said how much had come, and how fast
    shown = [s for s in steps if re.match(r"copying the model back: model\.bin, [0-9.]+ of 1\.0 "
                                          r"MB, 0\.[0-9]+ MB/s$", s)]
    assert shown, steps


def test_a_stalled_model_copy_says_so_and_keeps_the_predictions(tmp_path, serve, env, capsys,
                                                              monkeypatch):
    # the tutorial: "The copy from ... sent nothing for 180 s.", the predictions already kept
    from potato.training.web import agent_routes

    monkeypatch.setattr(agent_routes, "COPY_STALL_S", 4)  # longer than the heartbeat (2 s)
    cfg = make_project(tmp_path, backends(heartbeat_timeout_s=2))
    server, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    link = SlowLink(server.http.server_address[1], rate=1 << 20, stall_after=100 << 10)
    run_id = start_run(c, trainer="test-big-artifact", schemas=["sentiment"], backend="lab",
                       params={"seconds": 0.5})
    try:
        code, err = run_agent(f"http://127.0.0.1:{link.port}", token, tmp_path / "work",
                              timeout=300)
        run = wait_run(c, run_id, timeout=120)
    finally:
        link.close()
    assert run["status"] == "error", (run, err)
    assert run["error"].startswith("The copy from %s sent nothing for 4 s. The predictions are "
                                   "saved; only model files are missing from artifacts/"
                                   % socket.gethostname()), run["error"]
    assert run["writeback"]["written"] > 1000  # the predictions were taken


def test_a_cancelled_run_whose_agent_goes_silent_writes_nothing_back(tmp_path, serve, env,
                                                                   capsys):
    # the hostile review: predictions in, then Cancel, then silence past heartbeat_timeout_s
    # (shorter than grace_seconds): the predictions were written back and put in use
    import json as _json

    cfg = make_project(tmp_path, backends(heartbeat_timeout_s=3))
    with open(cfg) as f:
        text = f.read()
    with open(cfg, "w") as f:
        f.write(text.replace("grace_seconds: 2", "grace_seconds: 30"))
    server, url = serve(cfg)
    c = Client(url)
    token = register(cfg, capsys)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="lab")
    status, claim = c.json("POST", "/agent/v1/backends/lab/claim", json_body={"host": "h"},
                           headers={"Authorization": "Bearer " + token})
    assert status == 200 and claim["run_id"] == run_id, claim
    auth = {"Authorization": "Bearer " + claim["token"]}
    archive = c.get(f"/agent/v1/runs/{run_id}/bundle", headers=auth).body
    with tarfile.open(fileobj=io.BytesIO(archive)) as tf:
        member = [m for m in tf.getmembers() if m.name.endswith("items.jsonl")][0]
        items = [_json.loads(line) for line in tf.extractfile(member).read().splitlines()]
    preds = "".join(_json.dumps({"id": it["id"], "split": it["split"], "scheme": "sentiment",
                                 "label": "positive", "confidence": 0.99}) + "\n"
                    for it in items if it["split"] != "train")
    r = c.request("PUT", f"/agent/v1/runs/{run_id}/predictions", body=preds.encode(),
                  headers=dict(auth, **{"Content-Type": "application/x-ndjson"}))
    assert r.status == 200, r.text
    assert c.post(f"/admin/training/api/runs/{run_id}/cancel", headers=H).status == 200
    run = wait_run(c, run_id, timeout=60)
    assert run["status"] in ("cancelled", "error"), run
    assert not (run.get("writeback") or {}).get("written"), run["writeback"]
    _, item = c.json("GET", "/admin/api/items/%s" % items[-1]["id"], headers=H)
    assert not item["predictions"], item
