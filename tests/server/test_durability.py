"""Acknowledged labels are never lost: 50 concurrent annotators, and kill -9 of the server."""

import os
import re
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from potato.project.store import Store
from tests.helpers import BASE, ROOT, Client

N_ITEMS = 40


@pytest.fixture
def project(write_config):
    return write_config(BASE, items=[{"id": f"i{n}", "text": f"t{n}"} for n in range(N_ITEMS)])


def test_fifty_annotators_in_parallel(project, serve):
    server, url = serve(project)
    acked = []
    errors = []
    lock = threading.Lock()
    barrier = threading.Barrier(50)

    def annotator(k):
        try:
            c = Client(url)
            c.login(f"ann{k}")
            barrier.wait(timeout=30)
            for n in range(10):
                item = f"i{(k + n) % N_ITEMS}"
                label = "positive" if (k + n) % 2 else "negative"
                status, body = c.json("POST", "/api/annotations",
                                      json_body={"item_id": item, "labels": {"sentiment": label}})
                if status == 200:
                    with lock:
                        acked.append((f"ann{k}", item, label))
                else:
                    errors.append(body)
        except Exception as e:  # reported below; a thread must not die silently
            errors.append(repr(e))

    threads = [threading.Thread(target=annotator, args=(k,)) for k in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert len(acked) == 500
    fresh = Store(server.app.store.path)  # a new connection reads what is committed
    try:
        for who, item, label in acked:
            assert fresh.labels_of(who, item) == {"sentiment": label}
        assert fresh.annotation_count() == 500
    finally:
        fresh.close()


def test_sigkill_after_acknowledged_saves_loses_nothing(project):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([os.path.join(ROOT, "bin", "potato"), "start", project, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        m = re.search(r"at (http://\S+/) ", line)
        assert m, line + proc.stderr.read()
        c = Client(m.group(1))
        c.login("kim")
        acked = {}
        for n in range(N_ITEMS):
            label = "positive" if n % 3 else "negative"
            status, _ = c.json("POST", "/api/annotations",
                               json_body={"item_id": f"i{n}", "labels": {"sentiment": label}})
            assert status == 200
            acked[f"i{n}"] = label
        proc.send_signal(signal.SIGKILL)  # right after the last acknowledgement
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    db = os.path.join(os.path.dirname(project), "annotation_output", "potato.db")
    store = Store(db)
    try:
        for item, label in acked.items():
            assert store.labels_of("kim", item) == {"sentiment": label}
    finally:
        store.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_when_cert_and_key_are_set(write_config, tmp_path):
    import http.client
    import ssl

    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", str(tmp_path / "key.pem"),
                    "-out", str(tmp_path / "cert.pem")], check=True, capture_output=True)
    cfg = write_config(BASE + "server: {tls_cert: cert.pem, tls_key: key.pem}\n")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "potato", "start", cfg, "--port", "0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env)
    try:
        line = proc.stdout.readline()
        m = re.search(r"at https://127\.0\.0\.1:(\d+)/ ", line)
        assert m, line
        ctx = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
        ctx.check_hostname = False
        conn = http.client.HTTPSConnection("127.0.0.1", int(m.group(1)), context=ctx, timeout=10)
        conn.request("POST", "/login", body="username=t",
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        resp = conn.getresponse()
        assert resp.status == 303
        assert "Secure" in resp.headers["Set-Cookie"]
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
