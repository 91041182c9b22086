"""The agent protocol, server side: ``/agent/v1/runs/<run_id>/...`` (see docs/agent-protocol.md).

A remote backend gives each run a fresh token (only its sha256 is kept, in memory, while the run
is active) and hands it to the agent on standard input. The token authorizes only the agent
endpoints of that one run.
"""

import hashlib
import hmac
import json
import logging
import os
import re
import socket
import threading
from urllib.parse import unquote

from potato.server import diskfull
from potato.server.errors import HTTPError
from potato.training.exchange import boundary, media_bundle, wheel
from potato.training.web import agent_limits
from potato.training.remote import media_cache
from potato.training.remote.paths import read_json, write_json
from potato.training.backends.base import token_hash
from potato.training.backends.errors import copy_stalled

PREFIX = r"/agent/v1/runs/(?P<run_id>[A-Za-z0-9_-]+)"
COPY_STALL_S = 180  # a model-file upload that sends nothing this long fails
CLAIM_MAX_BYTES = 64 << 10  # request size caps, per endpoint
EVENTS_MAX_BYTES = 8 << 20
RESULT_MAX_BYTES = 1 << 20
EVENTS_PER_REPORT = 10000
MEDIA_BATCH_FILES = 2000  # media files one request may ask for
MEDIA_BATCH_MAX_BYTES = 256 << 10
MEDIA_SEND_CHUNK = 256 << 10  # a media batch goes out in writes of about this size
_RESULT_LOCK = threading.Lock()
log = logging.getLogger("potato.training")


ARTIFACTS_TOTAL_FILES_FACTOR = 4  # a run's model files together: 4 x max_artifact_mb


def _artifact_path(root: str, rel: str) -> str:
    """A model file's place under artifacts/, or a 400: relative, no .., no NUL, no control or
    format characters (bidi overrides, zero widths), parts of at most 200 characters, at most
    MAX_ARTIFACT_DEPTH levels."""
    parts = [p for p in rel.replace("\\", "/").split("/") if p not in ("", ".")]
    bad = (not parts or ".." in parts or rel.startswith("/")
           or len(parts) > agent_limits.MAX_ARTIFACT_DEPTH
           or any(len(p.encode("utf-8", "replace")) > 200 for p in parts)
           or boundary.has_hidden(rel))
    if bad:
        raise HTTPError(400, "path %s is not a relative path inside artifacts/ (at most %d "
                             "levels, parts of at most 200 characters, no control or format "
                             "characters or blanks that print nothing)."
                        % (ascii(rel[:200]), agent_limits.MAX_ARTIFACT_DEPTH))
    return os.path.join(root, *parts)


def _upload_query(h):
    """(offset, size or None, sha256 or "") of a model-file upload's query, or a 400."""
    q = {k: (h.query.get(k) or [""])[0] for k in ("offset", "size", "sha256")}
    try:
        offset = int(q["offset"] or "0")
        size = int(q["size"]) if q["size"] else None
    except ValueError:
        raise HTTPError(400, "offset and size must be whole numbers of bytes.")
    if offset < 0 or (size is not None and not 0 <= offset <= size):
        raise HTTPError(400, "offset %d does not fit a file of %s bytes." % (offset, size))
    if q["sha256"] and not re.fullmatch(r"[0-9a-f]{64}", q["sha256"]):
        raise HTTPError(400, "sha256 must be 64 lower-case hex digits.")
    return offset, size, q["sha256"]


def _refuse_over_cap(h, rel, size, offset, per_file, left, backend, mb):
    """A 413 before any byte is read, naming the limit and how to raise it."""
    if size > per_file:
        why = "over max_artifact_mb (%g MB)" % mb
    elif size - offset > left:
        why = ("more than a run's model files may take together (%d times max_artifact_mb, "
               "%g MB)" % (ARTIFACTS_TOTAL_FILES_FACTOR, mb * ARTIFACTS_TOTAL_FILES_FACTOR))
    else:
        return
    h.close_connection = True
    raise HTTPError(413, "%s (%.1f MB) is %s of backend %s: it stays on the training machine. "
                         "To copy such files, raise max_artifact_mb under "
                         "model_training.backends.%s." % (rel, size / 1048576.0, why, backend,
                                                         backend))


def _verify(dest, rel, size, sha) -> None:
    """A completed model file, checked against the sha256 the agent sent; a copy that differs
    is dropped (409), and the agent sends it again from byte 0."""
    digest = hashlib.sha256()
    with open(dest, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if os.path.getsize(dest) != size or not hmac.compare_digest(digest.hexdigest(), sha):
        os.unlink(dest)
        raise HTTPError(409, "%s arrived with another sha256 or size than the agent sent; the "
                             "server dropped its copy: send it again from byte 0." % rel)


def _keep_result(ctx, body) -> None:
    """The agent's result, saved (atomically) in the run directory: a server restarted before
    the run ends finds it there and ingests the predictions (AgentBackend.reattach). If it
    cannot be saved, the run still ends from memory; only a restart before then would lose it."""
    try:
        write_json(ctx.paths.result, body)
    except OSError as e:
        log.error("run %s: could not save the agent's result in %s (%s); it is kept in memory "
                  "only, so a restart before the run ends loses it", ctx.run_id,
                  ctx.paths.result, e)


def _range_start(h, size: int, what: str) -> int:
    """Where a download resumes: the request's ``Range: bytes=N-`` (416 when it cannot)."""
    rng = h.headers.get("Range")
    if not rng:
        return 0
    m = re.fullmatch(r"bytes=(\d{1,18})-", rng.strip())
    if not m or int(m.group(1)) >= size:
        raise HTTPError(416, "Range %s cannot be served (the %s has %d bytes)."
                        % (rng, what, size), {"Content-Range": "bytes */%d" % size})
    return int(m.group(1))


def _media_file(ctx, sha: str):
    """(path, size) of a media file the run's bundle lists, or the HTTP error: only the
    hashes in the run's media.json are served, never another file of the server."""
    if not media_cache.valid_hash(sha):
        raise HTTPError(400, "%s is not a sha256 in hex (64 characters 0-9a-f)." % ascii(sha[:80]))
    if ctx.media_index is None:
        ctx.media_index = media_bundle.load_index(ctx.paths.media_index)
    entry = ctx.media_index.get(sha)
    if entry is None:
        raise HTTPError(404, "Run %s lists no media file %s: an agent downloads only the files "
                             "its run's bundle names." % (ctx.run_id, sha))
    try:
        size = os.path.getsize(entry["path"])
    except OSError:
        raise HTTPError(404, "Media file %s (%s) of run %s is gone from the server; start the "
                             "run again." % (sha[:12], entry.get("name"), ctx.run_id))
    if size != entry["size"]:
        raise HTTPError(409, "Media file %s (%s) changed on the server after run %s started; "
                             "start the run again." % (sha[:12], entry.get("name"), ctx.run_id))
    return entry["path"], size


def add_routes(app, manager) -> None:
    slots = agent_limits.RunSlots()
    authorize = _authorizer(manager, slots)
    _claim_routes(app, manager, slots)
    _run_routes(app, manager, authorize)
    _media_routes(app, authorize)
    _upload_routes(app, manager, authorize)
    _artifact_routes(app, manager, authorize)
    _result_routes(app, manager, authorize)


def _authorizer(manager, slots):
    """``authorize(h, run_id, upload=False)``: (context, RemoteState) for the run token of the
    request. The request takes one of the run's few slots (agent_limits.RunSlots) until it is
    answered, and is cut off (409) once the run is no longer active, an ``upload`` once the run
    is cancelled too (connections.connection_watch)."""

    def authorize(h, run_id, upload=False):
        header = h.headers.get("Authorization") or ""
        if not header.startswith("Bearer "):
            raise HTTPError(401, "The agent must send its run token (Authorization: Bearer ...).")
        given = token_hash(header[len("Bearer "):].strip())
        if manager.stopping:  # not 410: a run that survives the restart must not be given up
            raise HTTPError(503, "The server is stopping or restarting; report again shortly.",
                            {"Retry-After": "5"})
        ctx = manager.active_context(run_id)
        remote = getattr(ctx, "remote", None) if ctx is not None else None
        if remote is None:  # one answer whether or not the run exists: a token learns nothing
            raise HTTPError(410, "Run %s is not active on a remote backend: no agent may report "
                                 "for it now." % run_id)
        if not hmac.compare_digest(given, remote.token_hash):  # the same answer as inactive:
            raise HTTPError(410, "Run %s is not active on a remote backend: no agent may "  # no
                                 "report for it now." % run_id)  # oracle for other tokens
        slots.take(run_id)  # else a 503: the body is not read
        h.when_done(lambda: slots.give(run_id))
        h.watch(lambda: _ended(manager, run_id, ctx, upload))
        h.authenticated = True  # from here on, the body may be read
        return ctx, remote

    return authorize


def _ended(manager, run_id, ctx, upload) -> str:
    """Why a request of run ``run_id`` is cut off now ("" while it may go on)."""
    if manager.active_context(run_id) is not ctx:
        return "Run %s has ended: the server takes nothing more from its agent." % run_id
    if upload and ctx.cancel.is_set():
        return "Run %s was cancelled: the server takes no more of its files." % run_id
    return ""


def _claim_routes(app, manager, slots) -> None:

    @app.route("POST", r"/agent/v1/backends/(?P<name>[^/]+)/claim")
    def claim(h, name):
        name = unquote(name)
        backend = manager.backends.get(name)
        if backend is None or not backend.polled_by_agents:
            raise HTTPError(404, "No agent backend %s on this server." % name)
        header = h.headers.get("Authorization") or ""
        token = header[len("Bearer "):].strip() if header.startswith("Bearer ") else ""
        if not token or not manager.tokens.verify(name, token):
            raise HTTPError(401, "The server does not accept this token for backend %s: it was "
                                 "never issued, or registering again replaced it. Run potato "
                                 "training register %s CONFIG on the server and use the new "
                                 "token." % (name, name))
        slots.take("", backend=name)  # a backend token holds few slots (else 503, body unread)
        h.when_done(lambda: slots.give("", backend=name))
        h.authenticated = True
        body = h.json_object(limit=CLAIM_MAX_BYTES)
        try:
            agent = {k: boundary.plain(boundary.text(body.get(k), k, 200))
                     for k in ("host", "version", "python") if body.get(k) is not None}
            interval = boundary.number(body.get("poll_interval_s"), "poll_interval_s", 0, 86400)
        except boundary.Invalid as e:
            raise HTTPError(400, "The claim does not fit the protocol: %s." % e)
        manager.tokens.seen(name, agent.get("host"), agent.get("version"), interval)
        got = manager.claim(name, agent)
        if got is None:
            h.send_json({"run_id": None})
        else:
            h.send_json({"run_id": got[0], "token": got[1]})

    @app.route("GET", re.escape(wheel.URL_PATH))
    def wheel_file(h):
        """The server's own wheel (public: it is Potato's source, no secret)."""
        try:
            path = wheel.wheel_path(manager.cfg.output_dir, wait=False)  # never waits on a build
        except wheel.WheelError as e:
            raise HTTPError(503, "%s %s" % (e, wheel.checkout_hint(for_admin=False)))
        h.send_file(path, 0, os.path.getsize(path), "application/octet-stream")


def _run_routes(app, manager, authorize) -> None:

    @app.route("GET", PREFIX)
    def run_info(h, run_id):
        ctx, remote = authorize(h, run_id)
        remote.seen()
        spec = read_json(ctx.paths.spec)
        size = os.path.getsize(ctx.paths.bundle_archive)
        h.send_json({"run_id": run_id, "protocol": "v1", "spec": spec,
                     "bundle": {"sha256": ctx.bundle_sha256, "bytes": size},
                     "grace_seconds": ctx.grace_seconds,
                     "max_predictions_mb": manager.cfg.model_training.max_predictions_mb,
                     "backend": remote.settings.to_dict()})

    @app.route("GET", PREFIX + r"/bundle")
    def bundle(h, run_id):
        ctx, remote = authorize(h, run_id)
        remote.seen()
        path = ctx.paths.bundle_archive
        size = os.path.getsize(path)
        h.send_file(path, _range_start(h, size, "bundle"), size, "application/gzip",
                    on_progress=remote.seen)

    @app.route("POST", PREFIX + r"/events")
    def events(h, run_id):
        ctx, remote = authorize(h, run_id)
        body = h.json_object(limit=EVENTS_MAX_BYTES)
        batch = body.get("events") or []
        if not isinstance(batch, list) or len(batch) > EVENTS_PER_REPORT:
            raise HTTPError(400, "events must be a list of at most %d events."
                            % EVENTS_PER_REPORT)
        remote.seen()
        # A batch holds up to a report interval of progress: only its newest one matters, and
        # passing the older ones first would make the run show stale progress.
        newest = max((i for i, e in enumerate(batch)
                      if isinstance(e, dict) and e.get("type") == "progress"), default=-1)
        batch = [e for i, e in enumerate(batch)
                 if not (isinstance(e, dict) and e.get("type") == "progress" and i != newest)]
        many = getattr(ctx.on_event, "many", None)
        if many is not None:
            many(batch)  # checked there (boundary.event), as for every backend, in one go
        else:
            for event in batch:
                ctx.on_event(event)
        h.send_json({"cancel": ctx.cancel.is_set(), "grace_seconds": ctx.grace_seconds})


def _media_routes(app, authorize) -> None:
    """A run's media files, by sha256: only those its bundle lists (remote/media_fetch.py)."""

    @app.route("GET", PREFIX + r"/media/(?P<sha>[^/]+)")
    def media_file(h, run_id, sha):
        """One media file of the run's bundle, by sha256 (only those: media.json lists them)."""
        ctx, remote = authorize(h, run_id)
        remote.seen()
        path, size = _media_file(ctx, unquote(sha))
        h.send_file(path, _range_start(h, size, "media file"), size,
                    "application/octet-stream", on_progress=remote.seen)

    @app.route("POST", PREFIX + r"/media")
    def media_batch(h, run_id):
        """Many small media files in one response, their bytes one after another in the order
        asked (the agent knows each size from the bundle): 5,000 files, a few round trips."""
        ctx, remote = authorize(h, run_id)
        body = h.json_object(limit=MEDIA_BATCH_MAX_BYTES)
        hashes = body.get("hashes")
        if not isinstance(hashes, list) or not 0 < len(hashes) <= MEDIA_BATCH_FILES:
            raise HTTPError(400, "hashes must be a list of 1 to %d sha256 values."
                            % MEDIA_BATCH_FILES)
        files = [_media_file(ctx, sha if isinstance(sha, str) else "") for sha in hashes]
        remote.seen()

        def write(out):
            chunks, buffered = [], 0  # small files go out together: one send, not one each
            for path, size in files:
                with open(path, "rb") as f:
                    left = size
                    while left > 0:
                        block = f.read(min(left, 1 << 20))
                        if not block:  # it shrank since it was listed: the client sees a
                            raise OSError("%s shrank" % path)  # short response
                        chunks.append(block)
                        buffered += len(block)
                        left -= len(block)
                        if buffered >= MEDIA_SEND_CHUNK:
                            out.write(b"".join(chunks))
                            chunks, buffered = [], 0
                            remote.seen()
            out.write(b"".join(chunks))
            remote.seen()

        h.send_stream("application/octet-stream", "media", write, sum(s for _, s in files))


def _upload_routes(app, manager, authorize) -> None:

    @app.route("PUT", PREFIX + r"/predictions")
    def predictions(h, run_id):
        ctx, remote = authorize(h, run_id, upload=True)
        mb = manager.cfg.model_training.max_predictions_mb  # as Reload config left it
        limit = int(mb * 1024 * 1024)
        remote.seen()
        written = h.stream_body_to(ctx.paths.predictions, limit,
                                   "max_predictions_mb (%g MB)" % mb,
                                   on_progress=remote.seen)  # a long upload is a sign of life
        remote.predictions_in = True  # kept, whatever happens to the model files after
        h.send_json({"ok": True, "bytes": written})


def _artifact_routes(app, manager, authorize) -> None:
    """Model files, resumable: how much the server has, and the next bytes (verified at the
    end against the agent's sha256)."""

    @app.route("GET", PREFIX + r"/artifacts")
    def artifact_size(h, run_id):
        """How many bytes of a model file the server has: where the agent resumes."""
        ctx, remote = authorize(h, run_id)
        rel = (h.query.get("path") or [""])[0]
        dest = _artifact_path(ctx.paths.artifacts, rel)
        remote.seen()
        h.send_json({"path": rel, "bytes": os.path.getsize(dest) if os.path.isfile(dest) else 0})

    @app.route("PUT", PREFIX + r"/artifacts")
    def artifact(h, run_id):
        ctx, remote = authorize(h, run_id, upload=True)
        rel = (h.query.get("path") or [""])[0]
        offset, size, sha = _upload_query(h)
        dest = _artifact_path(ctx.paths.artifacts, rel)
        mb = manager.cfg.model_training.backends[ctx.run.backend].options.max_artifact_mb
        per_file = int(mb * 1024 * 1024)
        total = per_file * ARTIFACTS_TOTAL_FILES_FACTOR
        book = agent_limits.ledger(remote, ctx.paths.artifacts)
        if size is not None:  # refused before any byte is read (the ledger reserves after)
            _refuse_over_cap(h, rel, size, offset, per_file, total - book.size - book.reserved,
                             ctx.run.backend, mb)
        limit, reserved, have = book.begin(dest, rel, offset, h.content_length(), per_file,
                                           total)
        h.when_done(lambda: book.end(dest, reserved, have))
        remote.seen()
        h.allow_stall(COPY_STALL_S)
        remote.upload_started()  # the heartbeat waits: bytes arriving are signs of life
        h.when_done(remote.upload_ended)
        try:
            os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
            n = h.append_body_to(dest, limit,
                                 "max_artifact_mb (each file; a run's files together: %d times "
                                 "that)" % ARTIFACTS_TOTAL_FILES_FACTOR,
                                 on_progress=agent_limits.copy_progress(ctx, remote, rel, offset,
                                                                      size))
        except socket.timeout as e:
            remote.copy_error, remote.copy_error_path = copy_stalled(remote.host,
                                                                     COPY_STALL_S), rel
            ctx.log("%s (%s: %s)" % (remote.copy_error, rel, e))
            h.close_connection = True
            return
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            raise HTTPError(409, "%s clashes with another model file (a file where a folder "
                                 "is, or the other way round)." % rel)
        except OSError as e:  # a full disk, a name the file system refuses
            if diskfull.is_full(e):
                raise  # the handler's one answer for a full disk
            raise HTTPError(507, "The server could not store %s: %s." % (rel, e.strerror or e))
        remote.seen()
        if size is not None and sha and offset + n >= size:
            _verify(dest, rel, size, sha)
        if remote.copy_error_path == rel and size is not None and offset + n >= size:
            ctx.log("the copy of %s resumed and completed" % rel)  # the stall is behind us
            remote.copy_error = remote.copy_error_path = None
        h.send_json({"ok": True, "bytes": offset + n})


def _result_routes(app, manager, authorize) -> None:
    @app.route("POST", PREFIX + r"/result")
    def result(h, run_id):
        ctx, remote = authorize(h, run_id)
        try:
            body = boundary.result(h.json_object(limit=RESULT_MAX_BYTES))
        except boundary.Invalid as e:
            raise HTTPError(400, "The result does not fit the protocol: %s." % e)
        remote.seen()
        with _RESULT_LOCK:  # the first result counts; a second is refused, not dropped unseen
            first = remote.result
            if first is None:
                remote.result = body
                _keep_result(ctx, body)  # on disk before the 200: a restart cannot lose it
        if first is not None:
            raise HTTPError(409, "Run %s already has its result (%s); a second one is refused."
                            % (run_id, first.get("status")))
        remote.result_ready.set()
        try:
            ctx.log("agent result: %s" % json.dumps({k: body.get(k) for k in (
                "status", "error", "exit_code", "host", "python", "workdir")}))
            if body.get("status") == "error" and body.get("stderr_tail"):  # as a local run's
                ctx.log("worker stderr (last lines, on %s):\n%s" % (
                    body.get("host") or "the host", body["stderr_tail"]))
        except OSError as e:  # the result is taken: only its line in run.log is lost
            if not diskfull.is_full(e):
                raise
            h.app.disk.full(h.path_only, e)
        h.send_json({"ok": True})
