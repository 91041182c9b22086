"""Media transfer, measured side by side in one run (issue 22):

- a first copy of N small files to a host over the real loopback sshd (media_push: one check,
  one tar stream, each file verified there) vs ``tar c | ssh host tar x`` of the same files
                                                                       target ratio >= 0.9
  and the same pair on a connection already up (as in a run: the run's probe and code copy
  opened the backend's shared ssh connection), so that neither side pays a login
- a second run on the same host: media bytes sent                      target 0
- the agent's media download (GET /agent/v1/runs/<run>/media/<sha>, kept alive, verified)
  vs plain HTTP GETs of the same files (http.server, one kept-alive connection)
                                                                       target ratio >= 0.9

    python3 bench/media_transfer.py [--files 5000] [--min-kb 1] [--max-kb 8] [--repeat 2]
"""

import argparse
import contextlib
import hashlib
import http.client
import http.server
import io
import json
import os
import pathlib
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from potato.commands.cli import main as cli  # noqa: E402
from potato.config.settings import Backend, load  # noqa: E402
from potato.service import Service  # noqa: E402
from potato.training.backends import media_push, sshcmd  # noqa: E402
from potato.training.backends.ssh import SshBackend  # noqa: E402
from potato.training.remote import media_cache, media_fetch  # noqa: E402
from potato.training.remote.client import Client as AgentClient  # noqa: E402
from potato.training.remote.paths import write_json  # noqa: E402
from tests import sshd  # noqa: E402
from tests.helpers import KEY, Client, make_project, start_run  # noqa: E402


class Ctx:
    """What media_push needs of a run's context."""

    def __init__(self, index_path):
        self.paths = type("P", (), {"media_index": index_path})()
        self.cancel = threading.Event()
        self.lines = []
        self.steps = []

    def log(self, line):
        self.lines.append(line)

    def set_step(self, step):
        self.steps.append(step)
        if step.startswith("copying media") and not hasattr(self, "first_copy"):
            self.first_copy = time.perf_counter()


PNG = b"\x89PNG\r\n\x1a\n"


def make_files(folder, n, min_kb, max_kb):
    rng = random.Random(22)
    folder.mkdir(parents=True)
    index = {}
    for i in range(n):
        # a PNG's signature, then noise: the project takes the files as images
        data = PNG + os.urandom(rng.randint(min_kb << 10, max_kb << 10) - len(PNG))
        p = folder / ("%05d.png" % i)
        p.write_bytes(data)
        index[hashlib.sha256(data).hexdigest()] = {"path": str(p), "size": len(data),
                                                   "name": p.name}
    return index


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def bench_ssh(tmp, index, repeat, host_dir=None):
    """Each try's copies (both sides') go to fresh folders under ``host_dir`` (the temporary
    folder by default), and nothing is deleted until the end: see bench/README.md on file
    systems without a journal, where creating files just after deleting many is slow."""
    host = pathlib.Path(tempfile.mkdtemp(dir=host_dir)) if host_dir else tmp
    (tmp / "sshd").mkdir()
    sshd.start(tmp / "sshd")
    os.environ["PATH"] = str(tmp / "sshd" / "bin") + os.pathsep + os.environ["PATH"]
    src = pathlib.Path(next(iter(index.values()))["path"]).parent
    write_json(str(tmp / "media.json"), index)
    results = {"ours": [], "tar": []}
    try:
        for k in range(repeat):
            remote = host / ("host%d" % k)
            bcfg = Backend("gpu", "ssh")
            bcfg.host, bcfg.remote_dir, bcfg.python = "potato-real", str(remote), sys.executable
            backend = SshBackend(bcfg, None)
            ctx = Ctx(str(tmp / "media.json"))
            try:
                started = time.perf_counter()
                secs, _ = timed(lambda: media_push.push(backend, ctx, "bench-%d" % k))
                results["ours"].append(secs)
                results.setdefault("check", []).append(ctx.first_copy - started)
                sent = [line for line in ctx.lines if line.startswith("media: sent")]
                assert sent, ctx.lines
                ctx2 = Ctx(str(tmp / "media.json"))
                media_push.push(backend, ctx2, "bench-%d-again" % k)
                again = [line for line in ctx2.lines if "0 files sent" in line]
                assert again and not [x for x in ctx2.lines if x.startswith("media: sent")]
                results["second"] = again[0]
                results["steps"] = [s for s in ctx.steps if s.startswith("copying media")][-1]
            finally:
                backend.close()
            dest = host / ("tar%d" % k)
            dest.mkdir()
            secs, r = timed(lambda: tar_over_ssh(src, dest))
            assert r.returncode == 0, r.stderr
            results["tar"].append(secs)
            warm_pair(tmp, host, k, src, results)
    finally:
        sshd.stop(tmp / "sshd")
        if host != tmp:
            shutil.rmtree(host)
    return results


def warm_pair(tmp, host, k, src, results):
    """The same pair on a connection that is already up, as in a run (its probe and code copy
    opened the backend's shared connection before the media step): media_push, then
    ``tar c | ssh tar x`` through that same connection. Neither pays an ssh login."""
    remote, dest = host / ("warm%d" % k), host / ("warmtar%d" % k)
    bcfg = Backend("gpu", "ssh")
    bcfg.host, bcfg.remote_dir, bcfg.python = "potato-real", str(remote), sys.executable
    backend = SshBackend(bcfg, None)
    try:
        assert subprocess.run(backend.argv("true"), input=backend.stdin()).returncode == 0
        ctx = Ctx(str(tmp / "media.json"))
        secs, _ = timed(lambda: media_push.push(backend, ctx, "warm-%d" % k))
        results.setdefault("warm", []).append(secs)
        dest.mkdir()
        argv = sshcmd.ssh_argv(bcfg, "tar xf - -C " + shlex.quote(str(dest)),
                               backend.control_dir)
        secs, r = timed(lambda: tar_over_ssh(src, dest, argv))
        assert r.returncode == 0, r.stderr
        results.setdefault("warm_tar", []).append(secs)
    finally:
        backend.close()


def tar_over_ssh(src, dest, argv=None):
    """``tar cf - -C SRC . | ssh potato-real tar xf - -C DEST``: the baseline."""
    tar = subprocess.Popen(["tar", "cf", "-", "-C", str(src), "."], stdout=subprocess.PIPE)
    r = subprocess.run(argv or ["ssh", "potato-real", "tar xf - -C " + shlex.quote(str(dest))],
                       stdin=tar.stdout, capture_output=True)
    tar.stdout.close()
    tar.wait()
    return r


class Quiet(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive, as the agent's connection is
    disable_nagle_algorithm = True  # headers and body without a delayed-ACK stall

    def log_message(self, *a):
        pass


def plain_gets(port, names, dest):
    """GET each file on one kept-alive connection and save it (as curl -O would)."""
    os.makedirs(dest)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    n = 0
    for name in names:
        conn.request("GET", "/" + name)
        data = conn.getresponse().read()
        with open(os.path.join(dest, name), "wb") as f:
            f.write(data)
        n += len(data)
    conn.close()
    return n


def bench_agent(tmp, index, repeat):
    """A real server with an agent backend and a claimed run; this process is its agent."""
    proj = tmp / "project"
    proj.mkdir()
    cfg_path = make_project(proj, "  backends:\n    lab: {type: agent, heartbeat_timeout_s: 3600}\n",
                            top="item_properties:\n  image_key: image\n")
    src = pathlib.Path(next(iter(index.values()))["path"]).parent
    shutil.copytree(src, proj / "img")
    lines = (proj / "reviews.jsonl").read_text().splitlines()
    names = sorted(os.listdir(src))
    out = []
    for n, line in enumerate(lines):
        d = json.loads(line)
        if n < len(names):
            d["image"] = "img/" + names[n]
        out.append(json.dumps(d))
    extra = len(names) - len(lines)
    for i in range(max(0, extra)):
        out.append(json.dumps({"id": "media-%d" % i, "text": "x",
                               "image": "img/" + names[len(lines) + i]}))
    (proj / "reviews.jsonl").write_text("\n".join(out) + "\n")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        cli(["training", "register", "lab", cfg_path])
    token = re.search(r"export POTATO_TRAINING_TOKEN=(\S+)", buf.getvalue()).group(1)
    cfg, _, _ = load(cfg_path)
    service = Service(cfg, "127.0.0.1", 0, access_log=lambda line: None,
                      owner="bench").open().start()
    plain = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: Quiet(*a, directory=str(proj / "img")))
    t = threading.Thread(target=plain.serve_forever, daemon=True)
    t.start()
    results = {"ours": [], "plain": []}
    try:
        c = Client(service.url)
        run_id = start_run(c, backend="lab", schemas=["sentiment"], trainer="text-naive-bayes")
        _, claim, _ = AgentClient(token, server=service.url).request(
            "POST", "/agent/v1/backends/lab/claim", {"host": "bench"})
        agent = AgentClient(claim["token"], server=service.url)
        deadline = time.time() + 60
        while True:
            try:
                agent.request("GET", "/agent/v1/runs/%s" % run_id)
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        shas = sorted(index)
        for k in range(repeat):
            cache = str(tmp / ("agent-cache%d" % k))
            try:
                secs, _ = timed(lambda: media_fetch.download(
                    agent, run_id, cache, [(sha, index[sha]["size"]) for sha in shas],
                    lambda n, b: None))
            except Exception:
                print(c.get("/admin/training/api/runs/%s/log" % run_id,
                            headers={"X-API-Key": KEY}).text[-3000:])
                raise
            assert len(media_cache.entries(cache)) == len(shas)
            results["ours"].append(secs)
            dest = str(tmp / ("plain%d" % k))
            secs, n = timed(lambda: plain_gets(plain.server_port, names, dest))
            assert n == sum(v["size"] for v in index.values())
            results["plain"].append(secs)
            shutil.rmtree(cache)
            shutil.rmtree(dest)
        agent.request("POST", "/agent/v1/runs/%s/result" % run_id,
                      {"status": "error", "error": "benchmark over", "exit_code": None})
    finally:
        plain.shutdown()
        plain.server_close()
        service.close()
    return results


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=5000)
    p.add_argument("--min-kb", type=int, default=1)
    p.add_argument("--max-kb", type=int, default=8)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--only", choices=("ssh", "agent"), help="measure only this side")
    p.add_argument("--host-dir", help="where the ssh host's copies go, both sides' (default: "
                   "the temporary folder); e.g. a journaled file system's mount")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        index = make_files(tmp / "src" / "img", args.files, args.min_kb, args.max_kb)
        mb = sum(v["size"] for v in index.values()) / (1 << 20)
        print("%d files, %.1f MB (%d-%d KB each), best of %d" % (
            len(index), mb, args.min_kb, args.max_kb, args.repeat))
        if args.only != "agent":
            report_ssh(bench_ssh(tmp, index, args.repeat, args.host_dir), mb)
        if args.only != "ssh":
            report_agent(bench_agent(tmp, index, args.repeat), mb)


def report_ssh(ssh, mb):
    print("  each try (media_push, tar): %s" % ", ".join(
        "%.2f/%.2f" % pair for pair in zip(ssh["ours"], ssh["tar"])))
    ours, tar = min(ssh["ours"]), min(ssh["tar"])
    print("ssh first copy: media_push %.2f s (%.1f MB/s), tar c | ssh tar x %.2f s "
          "(%.1f MB/s): ratio %.2f (target >= 0.9)" % (ours, mb / ours, tar, mb / tar,
                                                       tar / ours))
    print("  median of the tries' ratios (tar's time over ours, each pair side by side): %.2f"
          % statistics.median(t / o for o, t in zip(ssh["ours"], ssh["tar"])))
    print("  of which the check of what the host lacks (one ssh command): %.2f s"
          % min(ssh["check"]))
    warm, warm_tar = min(ssh["warm"]), min(ssh["warm_tar"])
    print("  each try on a connection already up (media_push, tar): %s" % ", ".join(
        "%.2f/%.2f" % pair for pair in zip(ssh["warm"], ssh["warm_tar"])))
    print("ssh first copy, connection already up (as in a run): media_push %.2f s, tar c | ssh "
          "tar x %.2f s: ratio %.2f (median of the tries' ratios %.2f)" % (
              warm, warm_tar, warm_tar / warm,
              statistics.median(t / o for o, t in zip(ssh["warm"], ssh["warm_tar"]))))
    print("  last step line: %s" % ssh["steps"])
    print("ssh second run: %s (target: 0 bytes)" % ssh["second"])


def report_agent(agent, mb):
    print("  each try (download, plain GETs): %s" % ", ".join(
        "%.2f/%.2f" % pair for pair in zip(agent["ours"], agent["plain"])))
    ours, plain = min(agent["ours"]), min(agent["plain"])
    print("agent download: %.2f s (%.1f MB/s), plain HTTP GETs %.2f s (%.1f MB/s): "
          "ratio %.2f (target >= 0.9)" % (ours, mb / ours, plain, mb / plain, plain / ours))
    print("  median of the tries' ratios: %.2f" % statistics.median(
        p / o for o, p in zip(agent["ours"], agent["plain"])))


if __name__ == "__main__":
    main()
