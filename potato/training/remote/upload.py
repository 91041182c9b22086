"""Model files back to the server (standard library, Python 3.8; shipped to hosts).

Each file goes up in chunks (``PUT .../artifacts?path=P&offset=N&size=S&sha256=H``). Before a
file (and after any break: a dropped connection, a server restart, a 409) the agent asks the
server how many bytes of it it already has (``GET .../artifacts?path=P``) and goes on from
there, so an interrupted upload resumes instead of starting over. The chunk that completes a
file carries its sha256; the server checks the whole file against it and drops a copy that
differs, which the next try sends again from byte 0. docs/agent-protocol.md documents it.
"""

import http.client
import os
import time
from urllib.parse import quote

from potato.training.remote.bundle import file_sha256
from potato.training.remote.client import CHUNK, ServerError, Slice, log, patiently

UPLOAD_TRIES = 6  # per file: the first try and five resumes


class UploadError(Exception):
    """A model file that could not be copied to the server (the message says which and why)."""


def over_cap(artifacts, limit_bytes):
    """(files to send, files over the per-file cap) of ``artifacts`` ([{path, bytes}])."""
    wanted = [a for a in artifacts if a["bytes"] <= limit_bytes]
    return wanted, [a for a in artifacts if a["bytes"] > limit_bytes]


def server_has(client, run_id, rel):
    """How many bytes of ``rel`` the server holds (0 for none)."""
    _, reply, _ = patiently(client, "ask the server how much of %s it has" % rel, lambda: (
        client.request("GET", "/agent/v1/runs/%s/artifacts?path=%s" % (run_id, quote(rel)))))
    have = (reply or {}).get("bytes")
    return have if isinstance(have, int) and have >= 0 else 0


def send_file(client, run_id, root, rel, on_offset, chunk=CHUNK, tries=UPLOAD_TRIES):
    """Copy ``root/rel`` to the server, resuming where it stopped; ``on_offset(n)`` as the
    server confirms bytes. Raises UploadError after ``tries`` breaks, ServerError when the
    server refuses the file (413 over the cap, 400 a path it does not take)."""
    path = os.path.join(root, rel)
    size = os.path.getsize(path)
    sha = file_sha256(path)
    base = "/agent/v1/runs/%s/artifacts?path=%s" % (run_id, quote(rel))
    last = None
    with open(path, "rb") as f:
        for attempt in range(tries):
            if attempt:
                log("the upload of %s was interrupted (%s); resuming" % (rel, last))
                time.sleep(min(2 ** attempt * 0.2, 5))
            try:
                offset = server_has(client, run_id, rel)
                if offset > size:
                    raise UploadError("the server holds %d bytes of %s, more than its %d"
                                      % (offset, rel, size))
                on_offset(offset)
                while True:
                    n = min(chunk, size - offset)
                    f.seek(offset)
                    _, reply, _ = client.request(
                        "PUT", base + "&offset=%d&size=%d&sha256=%s" % (offset, size, sha),
                        body=Slice(f, n), headers={"Content-Length": str(n),
                                                    "Content-Type": "application/octet-stream"})
                    offset = offset + n if not isinstance((reply or {}).get("bytes"), int) \
                        else reply["bytes"]
                    on_offset(offset)
                    if offset >= size:
                        return
            except ServerError as e:
                if e.status not in (409, 503):  # 409: another offset, or a copy that differed
                    raise
                last = e
            except (OSError, http.client.HTTPException) as e:
                last = e
    raise UploadError("%s could not be copied to the server after %d tries (%s)"
                      % (rel, tries, last))


def upload_all(client, run_id, root, artifacts, limit_bytes, status, warn, host):
    """Send every file of ``artifacts`` within ``limit_bytes``, marking each ``fetched``; the
    others stay here, each named by ``warn(sentence)``. ``status(sentence)`` tells the run's
    step how much has arrived ("copying the model back: X/Y MB")."""
    wanted, over = over_cap(artifacts, limit_bytes)
    for a in over:
        warn("%s (%.1f MB) is over max_artifact_mb; it stays on %s in %s (raise "
             "max_artifact_mb, now %g MB, to copy it)" % (
                 a["path"], a["bytes"] / 1048576.0, host, root, limit_bytes / 1048576.0))
    total = sum(a["bytes"] for a in wanted)
    done = {}
    shown = [-1]

    def progress(rel=None, offset=0):
        if rel is not None:
            done[rel] = offset
        mb = sum(done.values()) >> 20
        if mb != shown[0]:
            shown[0] = mb
            status("copying the model back: %d/%d MB" % (mb, max(total >> 20, 1) if total
                                                            else 0))

    progress()
    for a in wanted:
        send_file(client, run_id, root, a["path"], lambda n, rel=a["path"]: progress(rel, n))
        a["fetched"] = True
