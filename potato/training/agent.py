"""``python -m potato.training.agent``: runs one training run where it executes, for the server.

Standard library only (Python 3.8+): it runs on GPU servers and SLURM login nodes from a copy of
Potato's source. It reads its run token from the first line of standard input (never argv or
the environment), then talks HTTP to the server — here over the unix socket that ``ssh -R``
forwards to the server — to fetch the run and its bundle, runs the same worker as the local
backend, relays the worker's events every ``REPORT_S`` seconds (which is also its heartbeat),
uploads ``predictions.jsonl`` and reports the result. A cancel arrives in the reply to a report.

Standard input stays open for the length of the run: when it closes (the ssh session dropped),
the agent stops the worker, so no process of the run survives on the host.
"""

import argparse
import hashlib
import http.client
import json
import os
import platform
import shutil
import socket
import sys
import threading
import time

from urllib.parse import quote

from potato.training import bundle as bundle_mod
from potato.training import gpus as gpus_mod
from potato.training import slurm
from potato.training import supervise
from potato.training.paths import RunPaths, write_json

PROTOCOL = "v1"
REPORT_S = 2.0
DOWNLOAD_TRIES = 6  # the first try and five resumes
EXIT_OK, EXIT_USAGE, EXIT_REJECTED, EXIT_LOST = 0, 2, 3, 4
LOST_CONTACT_S = 300  # a run whose server cannot be reached this long is cancelled here


_log_file = []  # where log lines go once stderr is gone (the job directory's agent.log)


def log(message):
    """One line to stderr; never raises. When the ssh session is gone, stderr is a closed pipe:
    the line goes to agent.log in the job directory instead, so the cancel path keeps going."""
    line = "[agent %s] %s\n" % (time.strftime("%H:%M:%S"), message)
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
        return
    except (OSError, ValueError):
        pass
    for path in _log_file:
        try:
            with open(path, "a") as f:
                f.write(line)
        except OSError:
            pass


def on_hangup(watch):
    """SIGHUP and SIGTERM mean the session that started us is gone (or we are told to stop):
    treat them like a closed stdin, so the worker (or the SLURM job) is cancelled, not left."""
    import signal

    def handler(signum, frame):
        watch.closed.set()

    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed pipe is an error, not our death


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        http.client.HTTPConnection.__init__(self, "localhost", timeout=timeout,
                                            blocksize=1 << 20)
        self.socket_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.socket_path)
        self.sock = s


class ServerError(Exception):
    def __init__(self, status, message):
        Exception.__init__(self, message)
        self.status = status


class Client:
    """The agent protocol over a unix socket (``socket``) or a URL (``server``)."""

    def __init__(self, token, socket_path=None, server=None, timeout=60):
        self.token = token
        self.socket_path = socket_path
        self.server = server
        self.timeout = timeout

    def _conn(self):
        if self.socket_path:
            return UnixHTTPConnection(self.socket_path, self.timeout), ""
        from urllib.parse import urlsplit

        u = urlsplit(self.server)
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        return cls(u.hostname, u.port, timeout=self.timeout, blocksize=1 << 20), \
            u.path.rstrip("/")

    def request(self, method, path, body=None, headers=None, stream_to=None):
        conn, prefix = self._conn()
        h = {"Authorization": "Bearer " + self.token, "X-Potato-Agent": PROTOCOL}
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode("utf-8")
            h["Content-Type"] = "application/json"
        try:
            conn.request(method, prefix + path, body=body, headers=h)
            resp = conn.getresponse()
            if stream_to is not None and resp.status in (200, 206):
                return resp.status, resp, conn  # the caller reads and closes
            data = resp.read()
        except Exception:
            conn.close()
            raise
        conn.close()
        try:
            payload = json.loads(data.decode("utf-8")) if data else None
        except ValueError:
            payload = {"error": data[:200].decode("utf-8", "replace")}
        if resp.status >= 400:
            raise ServerError(resp.status, (payload or {}).get("error") or "HTTP %d" % resp.status)
        return resp.status, payload, None


class _Hasher:
    """sha256 on a second thread, so hashing overlaps the download (hashlib frees the GIL)."""

    def __init__(self):
        import queue

        self.q = queue.Queue(maxsize=16)
        self.sha = hashlib.sha256()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            if item is _RESTART:
                self.sha = hashlib.sha256()
            else:
                self.sha.update(item)

    def update(self, block):
        self.q.put(block)

    def restart(self):
        self.q.put(_RESTART)

    def hexdigest(self):
        self.q.put(None)
        self.t.join()
        return self.sha.hexdigest()


_RESTART = object()


def download_bundle(client, run_id, dest, expected_sha, expected_bytes):
    """Fetch the bundle archive, resuming an interrupted download with Range requests, and
    hashing as the bytes arrive (no second pass over the file)."""
    last_error = None
    hasher = _Hasher()
    if os.path.exists(dest):
        os.unlink(dest)
    for attempt in range(DOWNLOAD_TRIES):
        have = os.path.getsize(dest) if os.path.exists(dest) else 0
        if have >= expected_bytes:
            break
        if attempt:
            log("bundle download interrupted at %d of %d bytes (%s); resuming"
                % (have, expected_bytes, last_error or "the connection closed"))
            time.sleep(min(2 ** attempt * 0.2, 5))
        headers = {"Range": "bytes=%d-" % have} if have else {}
        last_error = None
        try:
            status, resp, conn = client.request("GET", "/agent/v1/runs/%s/bundle" % run_id,
                                                headers=headers, stream_to=True)
            if status != 206:
                hasher.restart()  # the whole file comes again
            try:
                with open(dest, "ab" if status == 206 else "wb") as f:
                    while True:
                        block = resp.read1(1 << 20)
                        if not block:
                            break
                        f.write(block)
                        hasher.update(block)
            finally:
                conn.close()
        except (OSError, http.client.HTTPException) as e:
            last_error = e
    size = os.path.getsize(dest) if os.path.exists(dest) else 0
    if size < expected_bytes:
        raise RuntimeError("the bundle download stopped at %d of %d bytes after %d tries (%s)"
                           % (size, expected_bytes, DOWNLOAD_TRIES,
                              last_error or "the connection closed early"))
    if size != expected_bytes or hasher.hexdigest() != expected_sha:
        raise RuntimeError("the downloaded bundle does not match its checksum")


class StdinWatch:
    """Notices when standard input closes: the ssh session that started us is gone."""

    def __init__(self, stream):
        self.closed = threading.Event()
        t = threading.Thread(target=self._watch, args=(stream,), daemon=True)
        t.start()

    def _watch(self, stream):
        try:
            while stream.readline():
                pass
        except (OSError, ValueError):
            pass
        self.closed.set()


def run(client, run_id, workdir, python, watch=None, code_dir=None, overrides=None,
        keep_bundle=True):
    """Run one run to its end; returns the agent's exit code."""
    _, info, _ = client.request("GET", "/agent/v1/runs/%s" % run_id)
    if overrides:
        info["backend"] = dict(info.get("backend") or {}, **overrides)
    paths = RunPaths(workdir).create()
    _log_file[:] = [os.path.join(paths.root, "agent.log")]
    log("run %s: job directory %s" % (run_id, paths.root))
    archive = paths.bundle_archive
    download_bundle(client, run_id, archive, info["bundle"]["sha256"], info["bundle"]["bytes"])
    bundle_mod.safe_extract(archive, paths.bundle)
    spec = dict(info["spec"])
    spec.update(bundle="bundle", artifacts="artifacts", predictions="predictions.jsonl")
    write_json(paths.spec, spec)

    env = dict(os.environ)
    settings = info.get("backend") or {}
    for k, v in (settings.get("env") or {}).items():
        env[k] = v
    if settings.get("num_threads"):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(settings["num_threads"])
    code_dir = code_dir or os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env["PYTHONPATH"] = code_dir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                    else "")
    env["PYTHONUNBUFFERED"] = "1"

    pending = []
    lock = threading.Lock()
    state = {"cancel": False, "last_report": 0.0, "failing_since": None, "lost": False}
    grace = float(info.get("grace_seconds", 20))

    def on_event(event):
        with lock:
            pending.append(event)
            state["events"] = state.get("events", 0) + 1

    def report(force=False):
        now = time.monotonic()
        if not force and now - state["last_report"] < REPORT_S:
            return
        with lock:
            batch = list(pending)
            del pending[:]
        try:
            _, reply, _ = client.request("POST", "/agent/v1/runs/%s/events" % run_id,
                                         {"events": batch})
            state["failing_since"] = None
            if reply and reply.get("cancel") and not state["cancel"]:
                log("the server cancelled the run; stopping the worker")
                state["cancel"] = True
        except ServerError as e:
            if e.status in (401, 403, 404, 410):
                log("the server no longer accepts reports for this run (%s); stopping" % e)
                state["cancel"] = True
            with lock:
                pending[:0] = batch
        except (OSError, http.client.HTTPException) as e:
            with lock:
                pending[:0] = batch
            if state["failing_since"] is None:
                state["failing_since"] = now
                log("cannot reach the server (%s); will retry" % e)
            elif now - state["failing_since"] > LOST_CONTACT_S and not state["cancel"]:
                log("the server has been unreachable for %d s: cancelling the run here"
                    % LOST_CONTACT_S)
                state["cancel"] = True
        state["last_report"] = now

    def should_cancel():
        if watch is not None and watch.closed.is_set() and not state["lost"]:
            state["lost"] = True
            log("standard input closed (the ssh session is gone): stopping the worker")
        return state["cancel"] or state["lost"]

    gpu_lock = None
    if settings.get("gpus", "none") != "none":
        try:
            gpu_lock, chosen, message = gpus_mod.take(settings, python, os.path.dirname(
                os.path.dirname(paths.root)), env)
        except gpus_mod.GpuError as e:
            _send_result(client, run_id, {"status": "error", "error": str(e), "exit_code": None})
            return EXIT_OK
        on_event({"type": "log", "level": "info", "message": message, "t": time.time()})
        if chosen is not None:
            env["CUDA_VISIBLE_DEVICES"] = chosen
    argv = [python, "-m", "potato.training.worker", "--spec", paths.spec]
    on_event({"type": "log", "level": "info", "t": time.time(),
              "message": "agent on %s: Python %s (%s)" % (platform.node(),
                                                           platform.python_version(), python)})
    worker_started = time.monotonic()
    before = state.get("events", 0)

    def tick():
        # Hold the GPU lock until the worker speaks (it has started), at most two minutes.
        if gpu_lock is not None and gpu_lock.fd is not None and (
                state.get("events", 0) > before or time.monotonic() - worker_started > 120):
            gpu_lock.release()
        report()

    try:
        if settings.get("scheduler") == "slurm":
            result = slurm.run_job(settings, paths.root, code_dir, run_id, env, on_event, log,
                                   should_cancel, grace_seconds=grace, on_tick=tick)
        else:
            result = supervise.run_worker(argv, env, paths.stderr, on_event,
                                          should_cancel=should_cancel, grace_seconds=grace,
                                          on_tick=tick, cwd=paths.root)
    except slurm.SlurmError as e:
        report(force=True)
        _send_result(client, run_id, {"status": "error", "error": str(e), "exit_code": None,
                                      "workdir": paths.root})
        return EXIT_OK
    finally:
        if gpu_lock is not None:
            gpu_lock.release()
    report(force=True)
    if state["lost"]:
        return EXIT_LOST
    if not keep_bundle:
        shutil.rmtree(paths.bundle, ignore_errors=True)
        if os.path.exists(paths.bundle_archive):
            os.unlink(paths.bundle_archive)
    status, error = supervise.explain(result)
    if getattr(result, "reason_message", None) and result.stopped != "cancelled":
        status, error = "error", result.reason_message  # the scheduler ended the job
    artifacts = []
    for root, _, files in os.walk(paths.artifacts):
        for name in files:
            p = os.path.join(root, name)
            artifacts.append({"path": os.path.relpath(p, paths.artifacts),
                              "bytes": os.path.getsize(p)})
    if status == "success":
        try:
            with open(paths.predictions, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                client.request("PUT", "/agent/v1/runs/%s/predictions" % run_id, body=f,
                               headers={"Content-Length": str(size),
                                        "Content-Type": "application/x-ndjson"})
        except ServerError as e:
            status, error = "error", "the server refused the predictions: %s" % e
        except OSError as e:
            status, error = "error", "the predictions could not be uploaded: %s" % e
    if status == "success" and settings.get("fetch_artifacts", True):
        try:
            _upload_artifacts(client, run_id, paths, artifacts, settings, on_event, report)
        except (ServerError, OSError, http.client.HTTPException) as e:
            log("copying the model files back failed (%s); they stay in %s" % (e,
                                                                            paths.artifacts))
    fetched_all = all(a.get("fetched") for a in artifacts)
    if status == "success" and fetched_all and settings.get("fetch_artifacts", True) and \
            not settings.get("keep_remote") and settings.get("cleanup", True):
        shutil.rmtree(paths.root, ignore_errors=True)
        log("removed the job directory %s" % paths.root)
    _send_result(client, run_id, {
        "status": status, "error": error, "exit_code": result.returncode,
        "stderr_tail": result.stderr_tail[-4000:], "artifacts": artifacts,
        "workdir": paths.root, "host": platform.node(), "python": platform.python_version()})
    return EXIT_OK


CHUNK = 64 << 20  # per request: large enough that a request's set-up cost is noise


class _Slice:
    """Up to ``n`` bytes of an open file, read as http.client sends a body (no copy in memory)."""

    def __init__(self, f, n):
        self.f = f
        self.left = n

    def read(self, size=-1):
        if self.left <= 0:
            return b""
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.f.read(size)
        self.left -= len(data)
        return data


def _upload_artifacts(client, run_id, paths, artifacts, settings, on_event, report):
    """Send the model files to the server in chunks, reporting 'copying the model back'."""
    limit = float(settings.get("max_artifact_mb", 2048)) * (1 << 20)
    wanted = []
    for a in artifacts:
        if a["bytes"] > limit:
            on_event({"type": "log", "level": "warning", "t": time.time(),
                      "message": "%s (%d MB) is over max_artifact_mb; it stays on %s in %s"
                      % (a["path"], a["bytes"] >> 20, platform.node(), paths.artifacts)})
        else:
            wanted.append(a)
    total = sum(a["bytes"] for a in wanted)
    done = 0

    def progress():
        on_event({"type": "status", "t": time.time(), "message":
                  "copying the model back: %d/%d MB" % (done >> 20, max(total >> 20, 1) if total
                                                       else 0)})
        report(force=True)

    progress()
    for a in wanted:
        offset = 0
        with open(os.path.join(paths.artifacts, a["path"]), "rb") as f:
            while True:
                n = min(CHUNK, a["bytes"] - offset)
                client.request("PUT", "/agent/v1/runs/%s/artifacts?path=%s&offset=%d" % (
                    run_id, quote(a["path"]), offset), body=_Slice(f, n),
                    headers={"Content-Length": str(n),
                             "Content-Type": "application/octet-stream"})
                offset += n
                done += n
                progress()
                if offset >= a["bytes"]:
                    break
        a["fetched"] = True


def _send_result(client, run_id, body):
    for attempt in range(5):
        try:
            client.request("POST", "/agent/v1/runs/%s/result" % run_id, body)
            return
        except (OSError, http.client.HTTPException) as e:
            log("cannot report the result (%s); retrying" % e)
            time.sleep(1 + attempt)
        except ServerError as e:
            log("the server refused the result: %s" % e)
            return


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m potato.training.agent",
                                description="Run one Potato training run for the server. The "
                                            "run token is read from the first line of stdin.")
    p.add_argument("--socket", help="unix socket that reaches the server (ssh -R)")
    p.add_argument("--server", help="the server's URL, when there is no socket")
    p.add_argument("--run", required=True, help="the run id")
    p.add_argument("--workdir", required=True, help="the job directory for this run")
    p.add_argument("--python", default=sys.executable, help="interpreter for the worker")
    args = p.parse_args(argv)
    if not (args.socket or args.server):
        p.error("give --socket or --server")
    token = sys.stdin.readline().strip()
    if not token:
        log("no run token on standard input")
        return EXIT_USAGE
    watch = StdinWatch(sys.stdin)
    on_hangup(watch)
    client = Client(token, socket_path=args.socket, server=args.server)
    try:
        return run(client, args.run, os.path.expanduser(args.workdir), args.python, watch)
    except ServerError as e:
        log("the server refused the agent: %s" % e)
        return EXIT_REJECTED
    except Exception as e:  # report what we can, then exit non-zero
        log("the agent failed: %s: %s" % (type(e).__name__, e))
        try:
            _send_result(client, args.run, {"status": "error", "exit_code": None,
                                            "error": "the agent failed: %s" % e})
        except ServerError as e2:
            log("could not report the failure either: %s" % e2)
        return 1
    finally:
        if args.socket:  # the forwarded socket is ours: leave nothing behind in /tmp
            try:
                os.unlink(args.socket)
            except OSError as e:
                log("could not remove %s: %s" % (args.socket, e))


if __name__ == "__main__":
    sys.exit(main())
