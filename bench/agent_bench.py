"""The agent backend's transfers, against a real server process on loopback.

Prints:
- bundle download throughput of the agent (Range-resumable, sha256-verified) over a plain HTTP
  GET of the same bytes from the same server, saved to a file as `curl -o` would (target >= 0.9);
- the server's peak memory while 500 MB of predictions are uploaded, over its memory when idle
  (target: within 64 MB: streamed to disk, not buffered).

    python3 bench/agent_bench.py [--bundle-mb 200] [--predictions-mb 500]
"""

import argparse
import hashlib
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from potato.training.remote import run as agent_mod  # noqa: E402
from potato.training.remote.run import Client  # noqa: E402
from tests.helpers import make_project  # noqa: E402


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Body:
    """``n`` bytes of prediction lines, produced as http.client reads them."""

    def __init__(self, n):
        self.left = n
        self.line = (json.dumps({"id": "x", "split": "test", "scheme": "sentiment",
                                 "label": "positive", "confidence": 0.5}) + "\n").encode()

    def read(self, size=65536):
        if self.left <= 0:
            return b""
        size = min(size if size and size > 0 else 65536, self.left)
        data = (self.line * (size // len(self.line) + 1))[:size]
        self.left -= size
        return data


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bundle-mb", type=int, default=200)
    p.add_argument("--predictions-mb", type=int, default=500)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        import pathlib

        tmp = pathlib.Path(tmp)
        cfg = make_project(tmp, "  max_predictions_mb: %d\n  backends:\n    lab: {type: agent, "
                           "heartbeat_timeout_s: 600}\n" % (args.predictions_mb + 100))
        reg = subprocess.run([sys.executable, "-m", "potato", "training", "register", "lab",
                              cfg], capture_output=True, text=True, cwd=ROOT, check=True)
        token = re.search(r"POTATO_TRAINING_TOKEN=(\S+)", reg.stdout).group(1)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        server = subprocess.Popen([sys.executable, "-m", "potato", "start", cfg, "--port", "0"],
                                  cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        try:
            url = re.search(r"at (http://\S+/) ", server.stdout.readline()).group(1).rstrip("/")
            admin = Client("unused", server=url)
            key = {"X-API-Key": "test-admin-key-0123456789"}
            conn = http.client.HTTPConnection(url.split("//")[1])
            conn.request("POST", "/admin/training/api/runs", json.dumps(
                {"trainer": "text-naive-bayes", "schemas": ["sentiment"], "backend": "lab"}),
                dict(key, **{"Content-Type": "application/json"}))
            conn.getresponse().read()
            _, claim, _ = Client(token, server=url).request(
                "POST", "/agent/v1/backends/lab/claim", {"host": "bench"})
            run_id, run_token = claim["run_id"], claim["token"]
            del admin
            # Replace the (small) bundle with a big one of random bytes, for the throughput.
            run_dir = os.path.join(tmp, "annotation_output", "training", "runs", run_id)
            archive = os.path.join(run_dir, "bundle.tar.gz")
            with open(archive, "wb") as f:
                for _ in range(args.bundle_mb):
                    f.write(os.urandom(1 << 20))
            size = os.path.getsize(archive)
            h = hashlib.sha256()
            with open(archive, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            client = Client(run_token, server=url)
            ours, plain = [], []
            for k in range(3):
                dest = os.path.join(tmp, "dl%d" % k)
                t0 = time.perf_counter()
                agent_mod.download_bundle(client, run_id, dest, h.hexdigest(), size)
                ours.append(time.perf_counter() - t0)
                os.unlink(dest)
                t0 = time.perf_counter()
                c = http.client.HTTPConnection(url.split("//")[1])
                c.request("GET", "/agent/v1/runs/%s/bundle" % run_id,
                          headers={"Authorization": "Bearer " + run_token})
                r = c.getresponse()
                with open(dest, "wb") as out:  # what `curl -o` does
                    while True:
                        block = r.read1(1 << 20)
                        if not block:
                            break
                        out.write(block)
                c.close()
                os.unlink(dest)
                plain.append(time.perf_counter() - t0)
            a, b = statistics.median(ours), statistics.median(plain)
            mb = size / 2 ** 20
            print("bundle download %.0f MB: agent %.0f MB/s (download + sha256), plain GET %.0f "
                  "MB/s: ratio %.2f (target >= 0.9)" % (mb, mb / a, mb / b, b / a))

            idle = status_kb(server.pid, "VmRSS")
            n = args.predictions_mb << 20
            t0 = time.perf_counter()
            c = http.client.HTTPConnection(url.split("//")[1], blocksize=1 << 20)
            c.request("PUT", "/agent/v1/runs/%s/predictions" % run_id, body=Body(n),
                      headers={"Authorization": "Bearer " + run_token,
                               "Content-Length": str(n)})
            resp = c.getresponse()
            resp.read()
            took = time.perf_counter() - t0
            peak = status_kb(server.pid, "VmHWM")
            print("predictions upload %d MB in %.1f s (HTTP %d): server memory idle %.0f MB, "
                  "peak %.0f MB: +%.0f MB (target: within 64 MB)"
                  % (args.predictions_mb, took, resp.status, idle / 1024, peak / 1024,
                     (peak - idle) / 1024))
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
