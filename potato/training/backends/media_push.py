"""Media to an ssh host or a SLURM login node: only the files its cache lacks, in one stream.

One remote command pins the run's files in the host's cache (``remote_dir/media``, see
remote/media_cache.py) and answers which it lacks; those go in ONE tar stream over the shared
ssh connection, the host verifying each file's size and sha256 as it arrives. The step line
counts files and megabytes as they go.
"""

import json
import os
import shlex
import signal
import subprocess
import tarfile
import tempfile
import time
from typing import Dict, List, Tuple

from potato.training import media_bundle
from potato.training.backends import errors
from potato.training.remote import media_cache, proc

PROGRESS_S = 0.5
SEND_STALL_S = 300  # a write into the stream that takes this long fails the copy


def cache_command(python: str, remote_dir: str, action: str, pin: str, limit_mb: float) -> str:
    """``python -c <media_cache.py> need|receive DIR PIN LIMIT_MB``, every value quoted: it
    runs before (and without) Potato's copied code."""
    with open(media_cache.__file__, encoding="utf-8") as f:
        source = f.read()
    return " ".join(shlex.quote(a) for a in (python, "-c", source, action, remote_dir, pin,
                                             "%g" % limit_mb))


def parse(stdout: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith(media_cache.MARK):
            return json.loads(line[len(media_cache.MARK):])
    raise ValueError("no media line in the host's output")


def count(n: int) -> str:
    return "{:,}".format(n)


def progress_words(host: str, files: int, of_files: int, nbytes: int, of_bytes: int) -> str:
    return "copying media to %s: %s of %s files, %s of %s MB" % (
        host, count(files), count(of_files), media_bundle.mb(nbytes), media_bundle.mb(of_bytes))


def push(backend, ctx, pin: str) -> None:
    """Make the host's cache hold every media file of the run (pinned as ``pin``)."""
    index = media_bundle.load_index(ctx.paths.media_index)
    if not index:
        return
    host = backend.bcfg.host
    limit = backend.bcfg.max_media_cache_mb
    total = sum(v["size"] for v in index.values())
    ctx.set_step("checking media on %s: %s files, %s MB" % (host, count(len(index)),
                                                             media_bundle.mb(total)))
    r = backend._ssh(cache_command(backend.bcfg.python, backend.remote_dir, "need", pin, limit),
                     media_bundle.dumps_wanted(index), timeout=300)
    try:
        missing = [(sha, size) for sha, size in parse(r.stdout)["missing"] if sha in index]
    except (ValueError, KeyError, TypeError):
        raise errors.TransferError("Checking the media cache on %s failed (exit %s): %s" % (
            host, r.returncode, r.stderr_tail() or r.stdout[-300:] or "no output"))
    if not missing:
        ctx.log("media: all %s files (%s MB) already on %s; 0 files sent"
                % (count(len(index)), media_bundle.mb(total), host))
        return
    nbytes = sum(size for _, size in missing)
    ctx.log("media: %s of %s files (%s MB) are not on %s yet; sending them in one stream"
            % (count(len(missing)), count(len(index)), media_bundle.mb(nbytes), host))
    started = time.monotonic()
    summary = send(backend, ctx, pin, [(sha, index[sha]["path"], size) for sha, size in missing],
                   limit)
    secs = max(time.monotonic() - started, 1e-6)
    ctx.log("media: sent %s files (%s MB) to %s in %.1f s (%.1f MB/s); the host verified "
            "%s%s" % (count(len(missing)), media_bundle.mb(nbytes), host, secs,
                      nbytes / secs / (1 << 20), count(summary.get("received", 0)),
                      "; %s least recently used files (%s MB) left its cache (max_media_cache_mb"
                      " %g)" % (count(summary["evicted"]), media_bundle.mb(
                          summary.get("evicted_bytes", 0)), limit)
                      if summary.get("evicted") else ""))
    if summary.get("bad_count"):
        raise errors.TransferError(
            "%s media file(s) arrived on %s damaged or changed since they were listed: %s. "
            "Start the run again (a file that changes while a run starts is hashed again)."
            % (summary["bad_count"], host, "; ".join(summary.get("bad", [])[:3])))


class _Counted:
    """The ssh process's stdin, counting what goes in."""

    def __init__(self, stream):
        self.stream = stream
        self.bytes = 0

    def write(self, data):
        self.stream.write(data)
        self.bytes += len(data)
        return len(data)

    def flush(self):
        self.stream.flush()


def send(backend, ctx, pin: str, files: List[Tuple[str, str, int]], limit: float) -> Dict:
    """One ``receive`` command fed a tar stream of ``files`` (sha, path, size)."""
    host = backend.bcfg.host
    argv = backend.argv(cache_command(backend.bcfg.python, backend.remote_dir, "receive", pin,
                                      limit))
    of_bytes = sum(size for _, _, size in files)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            p = proc.spawn(argv, stdin=subprocess.PIPE, stdout=out, stderr=err)
        except proc.SpawnError as e:
            raise errors.TransferError(str(e))
        failure = None
        try:
            p.stdin.write(backend.stdin())
            sink = _Counted(p.stdin)
            last = 0.0
            with tarfile.open(fileobj=sink, mode="w|", bufsize=media_cache.BLOCK,
                              format=tarfile.GNU_FORMAT) as tar:
                for done, (sha, path, size) in enumerate(files):
                    if ctx.cancel.is_set():
                        failure = "the run was cancelled while its media were copied"
                        break
                    now = time.monotonic()
                    if now - last >= PROGRESS_S:
                        last = now
                        ctx.set_step(progress_words(host, done, len(files), sink.bytes,
                                                    of_bytes))
                    info = tarfile.TarInfo(sha)
                    info.size, info.mode, info.mtime = size, 0o600, int(time.time())
                    try:
                        with open(path, "rb") as f:
                            tar.addfile(info, f)
                    except (OSError, tarfile.TarError) as e:
                        if isinstance(e, BrokenPipeError) or p.poll() is not None:
                            raise
                        failure = "%s cannot be read (%s)" % (path, getattr(e, "strerror", e))
                        break
            ctx.set_step(progress_words(host, len(files), len(files), of_bytes, of_bytes))
            p.stdin.close()
        except (BrokenPipeError, OSError):
            failure = failure or "the stream to %s closed early" % host
        finally:
            _end(p, stop=failure is not None)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace").strip()
    if failure or p.returncode != 0:
        if p.returncode == 255:
            raise errors.ConnectError(errors.ssh_failure(host, backend.bcfg.user, 255, stderr))
        raise errors.TransferError("Copying media to %s failed: %s%s" % (
            host, failure or "exit %s" % p.returncode,
            ": " + "\n".join(stderr.splitlines()[-5:]) if stderr else ""))
    try:
        return parse(stdout)
    except ValueError:
        raise errors.TransferError("Copying media to %s failed: the host did not confirm "
                                   "what arrived: %s" % (host, stderr[-300:] or "no output"))


def _end(p: subprocess.Popen, stop: bool) -> None:
    try:
        p.stdin.close()
    except OSError:
        pass
    if stop:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except OSError:
            pass
    try:
        p.wait(timeout=5 if stop else 600)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            p.kill()
        p.wait()
