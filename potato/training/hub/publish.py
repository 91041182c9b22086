"""Publishing a successful run's model to the Hugging Face Hub (run page, API, CLI).

What is published: the run's model files on this server, exactly as saved (the files of its
``model/`` folder at the repo's root, so ``from_pretrained(repo id)`` loads them; other files
at their paths), and a generated model card as README.md (``model_card.py``). A run whose files
stayed on its GPU host or agent machine cannot be published from here, and the page says where
they are.

One publish at a time, in a background thread whose every request to the Hub has a timeout;
whatever happens there ends as a state in the run's ``publish.json`` (never the token), with
one sentence when it failed, and never touches the run's record or the queue. The request's
fields are checked here, once, before anything starts.
"""

import logging
import os
import re
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from potato import __version__
from potato.training.hub import client as hub, model_card
from potato.training.hub import model_files
from potato.training.core.view import RunView
from potato.training.lifecycle import retention
from potato.training.core import runlog
from potato.training.remote.paths import RunPaths, read_json, write_json

log = logging.getLogger("potato.training")

STATE_FILE = "publish.json"
HISTORY_MAX = 50
MESSAGE_MAX = 200
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
REPO_ID = re.compile(r"^(?:%s/)?%s$" % (_PART, _PART))
FIELDS = ("repo_id", "private", "commit_message")
INTERRUPTED = "The publish was interrupted: the server stopped while it ran. Publish again."


class Refused(Exception):
    """A publish that cannot start; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def check_repo_id(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Refused(400, "Name the Hugging Face repo to publish to (repo_id), such as "
                           "your-name/review-sentiment.")
    v = value.strip()
    if len(v) > 200 or not REPO_ID.match(v) or "--" in v or ".." in v or v.endswith(".git"):
        raise Refused(400, "%r is not a Hugging Face repo id. Use NAME or OWNER/NAME: letters, "
                           "digits, -, _ and . (not -- or .., not at either end, at most 96 "
                           "each, not ending in .git), such as your-name/review-sentiment."
                      % v[:100])
    return v


def check_private(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise Refused(400, "private must be true or false.")
    return value


def check_message(value: Any, run_id: str) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        return "Publish Potato run %s" % run_id
    if not isinstance(value, str):
        raise Refused(400, "commit_message must be a string.")
    text = " ".join(value.split())
    if len(text) > MESSAGE_MAX:
        raise Refused(400, "The commit message has %d characters; keep it to %d (one line)."
                      % (len(text), MESSAGE_MAX))
    return text


def cannot_publish(cfg, view: RunView, artifacts: str) -> Optional[str]:
    """Why this run's model cannot be published from this server (and where its files are),
    or None."""
    if view.status != "success":
        return ("Only a successful run's model can be published; run %s is %s."
                % (view.run_id, view.status))
    uri = view.artifact_uri or ""
    if view.pruned_at:  # retention deleted them: the run had files, they are gone
        why = (view.pruned_reason or "model_training.retain_runs keeps only the "
               "newest runs' model files.").strip()
        return ("Run %s's model files were deleted on %s, so there is nothing left to publish: "
                "%s Run it again for a model to publish." % (
                    view.run_id, time.strftime("%Y-%m-%d %H:%M", time.localtime(
                        view.pruned_at)), why))
    if "://" in uri:
        bcfg = cfg.model_training.backends.get(view.backend)
        backend = bcfg.options if bcfg is not None else None  # a remote kind's keys
        machine = "agent's machine" if uri.startswith("agent://") else "GPU host"
        if backend is not None and not getattr(backend, "fetch_artifacts", True):
            why = "fetch_artifacts: false kept the model files on the %s" % machine
        elif uri.startswith("agent://") and not model_files.files(artifacts):
            why = ("the model files stayed on the agent's machine (over max_artifact_mb, a copy "
                   "that failed, or a run from before agent runs copied them back; the run log "
                   "says which)")
        else:
            why = ("some model files were larger than max_artifact_mb (%g MB), so they stayed on "
                   "the %s (the run log names them)" % (
                       getattr(backend, "max_artifact_mb", 2048), machine))
        return ("This model cannot be published from the run page: %s, at %s, and publishing "
                "needs the files on this server. Upload them from there (huggingface_hub's "
                "hf upload), or train again with the files fetched." % (why, uri))
    if not model_files.files(artifacts):
        return ("Run %s left no model files on this server, so there is nothing to publish."
                % view.run_id)
    return None


def repo_files(artifacts: str) -> List[Tuple[str, str]]:
    """(path in the repo, local path) of each model file: the model/ folder's files at the
    root unless a name would clash; a README.md at the root gives way to the model card."""
    rels = model_files.files(artifacts)
    for rel in rels:
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused(409, "The model file %s has a name that is not UTF-8, which the Hub "
                               "cannot store; rename it in %s and publish again."
                          % (model_files.shown(rel), artifacts))
    inner = {r[len("model/"):] for r in rels if r.startswith("model/")}
    flat = not inner & {r for r in rels if not r.startswith("model/")}
    out = []
    for rel in rels:
        path = rel[len("model/"):] if flat and rel.startswith("model/") else rel
        if path != "README.md":
            out.append((path, os.path.join(artifacts, rel)))
    return out


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class Publisher:
    """Starts publishes (one at a time) and reports their state from each run's publish.json."""

    @property
    def cfg(self):
        return self._cfg() if callable(self._cfg) else self._cfg

    def __init__(self, cfg, paths_of: Callable[[str], RunPaths], environ=None,
                 whose: str = "the server's environment",
                 then: str = "restart the server, and publish again", holds=None):
        """``cfg``: the config, or a function that gives the one in force now (a running
        server's, which Reload config replaces)."""
        self._cfg = cfg
        self.holds = holds or retention.Holds()  # retention leaves a run being published
        self.whose, self.then = whose, then  # where the token comes from, in words
        self.paths_of = paths_of
        self.environ = os.environ if environ is None else environ
        self._lock = threading.RLock()  # the state file and _active change together
        self._thread: Optional[threading.Thread] = None
        self._active: Optional[str] = None

    # -- state ---------------------------------------------------------------------------------
    def _file(self, run_id: str) -> str:
        return os.path.join(self.paths_of(run_id).root, STATE_FILE)

    def state(self, run_id: str) -> Dict[str, Any]:
        """The run's publish state: {} when never published, else state (publishing,
        published, failed), step, repo_id, error, url, commit, commit_url and history."""
        with self._lock:
            active = self._active == run_id
            try:
                s = read_json(self._file(run_id))
            except (OSError, ValueError):
                return {}
        if not isinstance(s, dict):
            return {}
        s.setdefault("history", [])
        if s.get("state") == "publishing" and not active and not _alive(s.get("pid")):
            s.update(state="failed", step="interrupted", error=INTERRUPTED)
        s.pop("pid", None)
        return s

    def _write(self, run_id: str, state: Dict[str, Any]) -> None:
        if os.path.isdir(self.paths_of(run_id).root):  # not a run removed meanwhile
            write_json(self._file(run_id), state)

    @staticmethod
    def _log(paths: RunPaths, line: str) -> None:
        """A line in the run's log, unless the run was removed meanwhile (the log would make
        its folder again)."""
        if os.path.isdir(paths.root):
            runlog.append(paths.log, line)

    def readiness(self) -> str:
        """Why no publish can start on this server now (no library, no token), else ""."""
        if not hub.available():
            return hub.NO_LIBRARY
        env = self.cfg.model_training.publish.token_env
        if not (self.environ.get(env) or "").strip():
            return ("No Hugging Face token: %s has no %s. Create a token with write access on "
                    "the Hub (Settings, Access Tokens), set %s in %s, %s."
                    % (self.whose, env, env, self.whose, self.then))
        return ""

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the publish in progress; True when none is left running."""
        t = self._thread
        if t is not None:
            t.join(timeout)
        return not self.busy()

    # -- starting ------------------------------------------------------------------------------
    def start(self, view: RunView, body: Dict[str, Any]) -> Dict[str, Any]:
        """Check a request ({repo_id, private, commit_message}) and start publishing the run
        ``view`` shows; returns the new state. Raises Refused."""
        unknown = sorted(set(body) - set(FIELDS))
        if unknown:
            raise Refused(400, "Unknown field(s) %s; a publish request has %s."
                          % (", ".join(map(str, unknown))[:200], ", ".join(FIELDS)))
        run_id = view.run_id
        req = {"repo_id": check_repo_id(body.get("repo_id")),
               "private": check_private(body.get("private")),
               "message": check_message(body.get("commit_message"), run_id)}
        self.holds.acquire(run_id)  # before the files are looked at; released by _work
        started: List[bool] = []
        try:
            return self._start(view, req, started)
        except BaseException:
            if not started:
                self.holds.release(run_id)
            raise

    def _start(self, view: RunView, req: Dict[str, Any], started: List[bool]):
        run_id = view.run_id
        paths = self.paths_of(run_id)
        why = cannot_publish(self.cfg, view, paths.artifacts) or self.readiness()
        if why:
            raise Refused(409, why)
        try:
            endpoint = hub.endpoint_of(self.environ)
        except hub.HubFailure as e:
            raise Refused(409, str(e))
        token = self.environ[self.cfg.model_training.publish.token_env].strip()
        files = repo_files(paths.artifacts)
        with self._lock:
            if self.busy():
                raise Refused(409, "Run %s is being published now; one publish runs at a time. "
                                   "Wait for it to finish, then publish again." % self._active)
            state = {"state": "publishing", "step": "starting", "repo_id": req["repo_id"],
                     "private": req["private"], "message": req["message"], "error": None,
                     "started_at": time.time(), "pid": os.getpid(),
                     "history": self.state(run_id).get("history", [])}
            self._write(run_id, state)
            self._active = run_id
            self._thread = threading.Thread(
                target=self._work, args=(view, paths, req, files, token, endpoint, state),
                daemon=True, name="potato-publish")
            self._thread.start()
            started.append(True)
        runlog.append(paths.log, "publishing to the Hugging Face Hub: %s (%s)" % (
            req["repo_id"], "private" if req["private"] else "public"))
        return self.state(run_id)

    # -- the background part -------------------------------------------------------------------
    def _work(self, view: RunView, paths: RunPaths, req, files, token: str, endpoint: str,
              state: Dict[str, Any]) -> None:
        run_id = view.run_id

        def step(text: str) -> None:
            state["step"] = text
            self._write(run_id, state)

        pub = self.cfg.model_training.publish
        try:
            commit = hub.Commit(
                repo_id=req["repo_id"], private=req["private"], message=req["message"],
                description="Run %s (trainer %s), published by Potato %s." % (
                    run_id, view.trainer, __version__), files=files)
            result = hub.publish(
                endpoint, token, pub.timeout_s, pub.token_env, commit,
                lambda repo_id: self.card(view, paths, repo_id, files,
                                          len(state["history"]) + 1).encode("utf-8"), step)
        except hub.HubFailure as e:
            state.update(state="failed", step="failed", error=str(e), finished_at=time.time())
            self._log(paths, "publishing to %s failed: %s" % (req["repo_id"], e))
        except Exception as e:  # a bug here must not reach the server; the sentence says so
            log.exception("publishing run %s failed", run_id)
            state.update(state="failed", step="failed", finished_at=time.time(),
                         error="Publishing failed inside Potato (%s); the server log has the "
                               "details." % type(e).__name__)
        else:
            state.update(result, state="published", step="published", finished_at=time.time())
            state["history"] = (state["history"] + [{
                k: state[k] for k in ("repo_id", "private", "commit", "url", "commit_url",
                                      "finished_at")}])[-HISTORY_MAX:]
            self._log(paths, "published to %s, commit %s" % (result["url"], result["commit"]))
        finally:
            with self._lock:
                try:
                    self._write(run_id, state)
                except OSError as e:  # the outcome is in the run log; the server goes on
                    log.error("run %s: the publish state cannot be written: %s", run_id, e)
                self._active = None
            self.holds.release(run_id)

    def card(self, view: RunView, paths: RunPaths, repo_id: str, files, number: int = 1) -> str:
        manifest: Dict[str, Any] = {}
        try:
            manifest = read_json(os.path.join(paths.bundle, "manifest.json"))
        except (OSError, ValueError):
            pass
        schemes = manifest.get("schemas") if isinstance(manifest.get("schemas"), dict) else {
            s.name: {"type": s.annotation_type, "labels": list(s.labels or [])}
            for s in self.cfg.schemes}
        counts = manifest.get("counts") if isinstance(manifest.get("counts"), dict) else None
        release = model_card.Release(repo_id, [p for p, _ in files] + ["README.md"],
                                     self.cfg.model_training.publish.license, number)
        return model_card.card(view, release, schemes, counts, view.params_changed or {})
