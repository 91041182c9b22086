"""The agent's side of the HTTP protocol (standard library, Python 3.8; shipped to hosts).

``Client`` talks to the server over the unix socket that ``ssh -R`` forwards (ssh and slurm
backends) or over the network (agent backends); ``download_bundle`` resumes and verifies the
bundle; ``log`` writes the agent's lines and never raises (a dropped ssh session leaves stderr a
closed pipe, and the cancel path must go on). docs/agent-protocol.md documents the protocol.
"""

import hashlib
import http.client
import json
import os
import queue
import signal
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

PROTOCOL = "v1"
DOWNLOAD_TRIES = 6  # the first try and five resumes


_log_file = []  # where log lines go once stderr is gone (the job directory's agent.log)


def set_log_file(path):
    """Where log lines go once stderr is gone: the job directory's agent.log."""
    _log_file[:] = [path]


def log(message):
    """One line to stderr; never raises. When the ssh session is gone, stderr is a closed pipe:
    the line goes to agent.log in the job directory instead, so the cancel path keeps going."""
    line = "[agent %s] %s\n" % (time.strftime("%H:%M:%S"), message)
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
        return
    except Exception:  # a closed pipe, a closed or missing stderr: the line goes to the file
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
        try:
            s.settimeout(self.timeout)
            s.connect(self.socket_path)
        except BaseException:  # no server there: the socket must not outlive the attempt
            s.close()
            raise
        self.sock = s


class ServerError(Exception):
    def __init__(self, status, message):
        Exception.__init__(self, message)
        self.status = status


class Client:
    """The agent protocol over a unix socket (``socket``) or a URL (``server``).

    ``patience``: how long the predictions and the result are tried again while the server
    cannot be reached or answers 503 (it is restarting). An agent that polls the server waits
    out a restart (protocol.LOST_CONTACT_S); over an ssh socket the session is the lifeline,
    and a short wait is enough."""

    def __init__(self, token, socket_path=None, server=None, timeout=60, patience=15):
        self.token = token
        self.socket_path = socket_path
        self.server = server
        self.timeout = timeout
        self.patience = patience

    def _conn(self):
        if self.socket_path:
            return UnixHTTPConnection(self.socket_path, self.timeout), ""
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
    try:
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
                status, resp, conn = patiently(client, "download the bundle", lambda: (
                    client.request("GET", "/agent/v1/runs/%s/bundle" % run_id, headers=headers,
                                   stream_to=True)))  # each try waits out a restarting server
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
                    resp.close()  # an empty body leaves it open: read1(0) never closes it
                    conn.close()
            except (OSError, http.client.HTTPException) as e:
                last_error = e
    finally:
        digest = hasher.hexdigest()  # stops the hashing thread, however the loop ended
    size = os.path.getsize(dest) if os.path.exists(dest) else 0
    if size < expected_bytes:
        raise RuntimeError("the bundle download stopped at %d of %d bytes after %d tries (%s)"
                           % (size, expected_bytes, DOWNLOAD_TRIES,
                              last_error or "the connection closed early"))
    if size != expected_bytes or digest != expected_sha:
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


CHUNK = 64 << 20  # per request: large enough that a request's set-up cost is noise


class Slice:
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


def patiently(client, what, call):
    """``call()``, tried again while the server cannot be reached or answers 503 (restarting),
    for up to ``client.patience`` seconds; the last failure is raised."""
    deadline = time.monotonic() + getattr(client, "patience", 15)
    attempt = 0
    while True:
        try:
            return call()
        except (OSError, http.client.HTTPException, ServerError) as e:
            if isinstance(e, ServerError) and e.status != 503:
                raise
            if time.monotonic() >= deadline:
                raise
            attempt += 1
            if attempt == 1 or attempt % 10 == 0:
                log("cannot %s (%s); trying again" % (what, e))
            time.sleep(min(attempt, 10))


def send_result(client, run_id, body):
    tries = []

    def post():
        tries.append(1)
        return client.request("POST", "/agent/v1/runs/%s/result" % run_id, body)

    try:
        patiently(client, "report the result", post)
    except ServerError as e:
        if e.status == 409 and len(tries) > 1:  # an earlier try arrived; its answer did not
            log("the server already has the result")
            return
        log("the server refused the result: %s" % e)
    except (OSError, http.client.HTTPException) as e:
        log("could not report the result: %s" % e)


