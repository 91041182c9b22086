"""A small fake of the Hugging Face Hub's HTTP API on loopback: only what the real
``huggingface_hub`` client calls to check a token, create a repo and commit files to it
(read from huggingface_hub 2.x: ``HfApi.whoami``, ``create_repo``, ``repo_info``,
``create_commit`` with its ``validate-yaml``, ``preupload`` and NDJSON ``commit`` calls).

Every file is answered as a "regular" (inline base64) upload, as the Hub does for small files,
so no LFS or Xet storage is involved. Behaviour switches: ``hang`` (paths that never answer until
the fake closes), ``fail`` ({path prefix: HTTP status}), ``echo`` (every error message quotes the
request's token, as a careless Hub or proxy might: at its start, and again from character
``ECHO_AT`` on, across the point where a client that keeps only the first 200 characters cuts).
``oid`` (the commit id the commit call answers, instead of the real one), ``whoami`` (the token
check's answer, instead of the account's). ``requests`` records
what was asked.
"""

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

import yaml

REPO = r"(?P<repo>[^/]+/[^/]+)"
ECHO_AT = 190


def git_hash(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    def __init__(self, tokens: Optional[Dict[str, tuple]] = None):
        # token -> (account, role)
        self.tokens = tokens or {"hf_write_alice": ("alice", "write"),
                                 "hf_read_alice": ("alice", "read"),
                                 "hf_write_bob": ("bob", "write")}
        self.repos: Dict[str, Dict[str, Any]] = {}
        self.requests: List[Dict[str, Any]] = []
        self.hang: set = set()
        self.fail: Dict[str, int] = {}
        self.echo = False
        self.oid: Optional[str] = None
        self.whoami: Any = None
        self.release = threading.Event()
        self.pause: set = set()  # paths that wait for ``resume``, then answer as usual
        self.resume = threading.Event()
        self.lock = threading.Lock()
        hub = self

        class Handler(_Handler):
            fake = hub

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = False  # server_close() joins every handler thread
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, name="fake-hub")
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.resume.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def add_repo(self, repo_id: str, owner: str, private: bool = False) -> None:
        self.repos[repo_id] = {"owner": owner, "private": private, "files": {}, "commits": []}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub

    def log_message(self, *args):  # quiet
        pass

    # -- plumbing ------------------------------------------------------------------------------
    def _send(self, status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, code: str = "") -> None:
        if self.fake.echo:
            token = self._token()
            message = ("token %s: %s " % (token, message)).ljust(ECHO_AT, ".") + token
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, {"error": message}, headers)

    def _token(self) -> str:
        auth = self.headers.get("Authorization") or ""
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else ""

    def _user(self):
        return self.fake.tokens.get(self._token())

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _route(self, method: str) -> None:
        path = self.path.split("?")[0]
        body = self._body() if method == "POST" else b""
        with self.fake.lock:
            self.fake.requests.append({"method": method, "path": path,
                                       "auth": self.headers.get("Authorization"),
                                       "agent": self.headers.get("User-Agent"),
                                       "body": body})
        if any(path.startswith(p) for p in self.fake.hang):
            self.fake.release.wait(30)
            return
        if any(path.startswith(p) for p in self.fake.pause):
            self.fake.resume.wait(30)
        for prefix, status in self.fake.fail.items():
            if path.startswith(prefix):
                return self._error(status, "the fake Hub fails here <b>on purpose</b>")
        for pattern, name in ROUTES.get(method, ()):
            m = re.fullmatch(pattern, path)
            if m:
                with self.fake.lock:
                    return getattr(self, name)(body, **m.groupdict())
        self._error(404, "the fake Hub has no %s %s" % (method, path))

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    # -- endpoints -----------------------------------------------------------------------------
    def whoami(self, body):
        user = self._user()
        if user is None:
            return self._error(401, "Invalid credentials in Authorization header")
        if self.fake.whoami is not None:
            return self._send(200, self.fake.whoami)
        self._send(200, {"type": "user", "name": user[0], "orgs": [],
                         "auth": {"type": "access_token",
                                  "accessToken": {"displayName": "t", "role": user[1]}}})

    def create(self, body):
        user = self._user()
        if user is None:
            return self._error(401, "Invalid credentials in Authorization header")
        req = json.loads(body)
        owner = req.get("organization") or user[0]
        repo_id = "%s/%s" % (owner, req["name"])
        if owner != user[0] or user[1] != "write":
            return self._error(403, "You don't have the rights to create a model under the "
                                    "namespace \"%s\"" % owner)
        if repo_id in self.fake.repos:  # the Hub names the repo's URL here too
            message = "You already created this model repo"
            return self._send(409, {"error": message, "url": "%s/%s" % (self.fake.url, repo_id)},
                              {"X-Error-Message": message})
        self.fake.add_repo(repo_id, owner, req.get("visibility") == "private"
                           or bool(req.get("private")))
        self._send(200, {"url": "%s/%s" % (self.fake.url, repo_id), "name": repo_id})

    def info(self, body, repo):
        r = self.fake.repos.get(repo)
        user = self._user()
        if r is None or r["private"] and (user is None or user[0] != r["owner"]):
            return self._error(404, "Repository not found", "RepoNotFound")
        head = r["commits"][-1]["oid"] if r["commits"] else "0" * 40
        self._send(200, {"id": repo, "modelId": repo, "sha": head, "private": r["private"],
                         "siblings": [{"rfilename": p} for p in sorted(r["files"])]})

    def validate_yaml(self, body):
        content = json.loads(body)["content"]
        m = re.match(r"^---\n(.*?)\n---\n", content, re.S)
        errors = []
        try:
            meta = yaml.safe_load(m.group(1)) if m else None
            if not isinstance(meta, dict):
                errors.append({"message": "metadata must be a mapping"})
        except yaml.YAMLError as e:
            errors.append({"message": str(e)})
        self._send(400 if errors else 200, {"errors": errors, "warnings": []})

    def _writable(self, repo):
        r = self.fake.repos.get(repo)
        user = self._user()
        if r is None:
            self._error(404, "Repository not found", "RepoNotFound")
            return None
        if user is None or user[0] != r["owner"] or user[1] != "write":
            self._error(403, "You don't have write access to %s" % repo)
            return None
        return r

    def preupload(self, body, repo, rev):
        r = self._writable(repo)
        if r is None:
            return
        files = json.loads(body)["files"]
        self._send(200, {"files": [{
            "path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
            "oid": git_hash(r["files"][f["path"]]) if f["path"] in r["files"] else None}
            for f in files]})

    def commit(self, body, repo, rev):
        r = self._writable(repo)
        if r is None:
            return
        lines = [json.loads(x) for x in body.decode().splitlines() if x.strip()]
        header = lines[0]["value"]
        changed = []
        for line in lines[1:]:
            if line["key"] != "file":
                return self._error(400, "the fake Hub takes only regular files, not %s"
                                   % line["key"])
            r["files"][line["value"]["path"]] = base64.b64decode(line["value"]["content"])
            changed.append(line["value"]["path"])
        parent = r["commits"][-1]["oid"] if r["commits"] else ""
        oid = hashlib.sha1(("%s\0%s\0%s" % (parent, header["summary"], changed)).encode()
                           + b"".join(r["files"][p] for p in changed)).hexdigest()
        r["commits"].append({"oid": oid, "summary": header["summary"],
                             "description": header.get("description"), "files": changed})
        oid = oid if self.fake.oid is None else self.fake.oid
        self._send(200, {"success": True, "commitOid": oid,
                         "commitUrl": "%s/%s/commit/%s" % (self.fake.url, repo, oid)})


ROUTES = {
    "GET": [(r"/api/whoami-v2", "whoami"),
            (r"/api/models/" + REPO + r"(?:/revision/[^/]+)?", "info")],
    "POST": [(r"/api/repos/create", "create"), (r"/api/validate-yaml", "validate_yaml"),
             (r"/api/models/" + REPO + r"/preupload/(?P<rev>[^/]+)", "preupload"),
             (r"/api/models/" + REPO + r"/commit/(?P<rev>[^/]+)", "commit")],
}
