"""Media to an ssh host or a SLURM login node: only the files its cache lacks, in one stream.

ONE remote command (``media_receive.py sync``, over the shared ssh connection) pins the run's
files in the host's cache (``remote_dir/media``, see remote/media_cache.py), answers at once
which it lacks, and then reads those in one tar stream, verifying each file's size and sha256
as it arrives. The stream is written here (a 512-byte header a file, no ``tarfile``: its
per-file cost was most of the sender's time) in writes of about WRITE_CHUNK bytes. The step
line counts files and megabytes as they go.
"""

import json
import os
import select
import shlex
import signal
import subprocess
import tempfile
import time
from typing import Dict, List, Tuple

from potato.training.exchange import media_bundle
from potato.training.backends import errors
from potato.training.remote import media_cache, media_receive, media_store, media_tar, proc

PROGRESS_S = 0.5
CHECK_S = 300  # the host answers which files it lacks within this, or the copy fails
FINISH_S = 600  # after the stream: the host's last word (verified, trimmed) within this
WRITE_STALL_S = 120  # the host takes none of the stream for this long: the copy fails
WAIT_S = 0.5  # a write waits this long at a time (then the run's cancel is looked at)
WRITE_CHUNK = 256 << 10  # small files' headers and bytes go to ssh in writes this large
ONE_READ = 4 << 20  # a larger file is sent in blocks of this size
BLOCK = 512


def cache_command(python: str, remote_dir: str, action: str, pin: str, limit_mb: float) -> str:
    """``python -S -c <media_tar.py + media_cache.py + media_store.py + media_receive.py>
    need|receive|sync DIR PIN LIMIT_MB``, every value quoted: it runs before (and without) Potato's copied code, and
    needs only the standard library, so ``-S`` skips the site packages' start-up (a tenth of a
    second where many are installed)."""
    return " ".join(shlex.quote(a) for a in (python, "-S", "-c", cache_source(), action,
                                             remote_dir, pin, "%g" % limit_mb))


def cache_source() -> str:
    """The host's program: media_tar.py, media_cache.py, media_store.py, then media_receive.py
    (each imports the ones before it only when it is imported apart from them)."""
    source = ""
    for module in (media_tar, media_cache, media_store, media_receive):
        with open(module.__file__, encoding="utf-8") as f:
            source += f.read() + "\n\n"
    return source


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
    host = backend.options.host
    limit = backend.options.max_media_cache_mb
    total = sum(v["size"] for v in index.values())
    ctx.set_step("checking media on %s: %s files, %s MB" % (host, count(len(index)),
                                                             media_bundle.mb(total)))
    session = Session(backend, pin, limit, ctx.cancel)
    try:
        missing = [(sha, size) for sha, size in session.missing(media_bundle.dumps_wanted(index))
                   if sha in index]
        if not missing:
            session.finish()
            ctx.log("media: all %s files (%s MB) already on %s; 0 files sent"
                    % (count(len(index)), media_bundle.mb(total), host))
            return
        nbytes = sum(size for _, size in missing)
        ctx.log("media: %s of %s files (%s MB) are not on %s yet; sending them in one stream"
                % (count(len(missing)), count(len(index)), media_bundle.mb(nbytes), host))
        started = time.monotonic()
        summary = session.send(ctx, [(sha, index[sha]["path"], size) for sha, size in missing])
    finally:
        session.close()
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
    if summary.get("received", 0) < len(missing):
        raise errors.TransferError(
            "%s media files were sent to %s but it kept %s of them (its media_receive.py "
            "answered %s). Start the run again; if it happens again, check the disk under "
            "%s/media there." % (count(len(missing)), host, count(summary.get("received", 0)),
                                 json.dumps(summary)[:300], backend.remote_dir))


_TAIL = b"0" + bytes(100) + b"ustar\x0000" + bytes(64) + b"0000000\0" * 2 + bytes(167)
_MODES = b"0000600\0" + b"0000000\0" * 2  # 0600, uid and gid 0
_SUMS = sum(_MODES) + sum(_TAIL) + 8 * 32  # the checksum field counts as spaces


def tar_header(name: str, size: int, mtime: int) -> bytes:
    """A ustar header for a regular file ``name`` (ASCII, under 100 characters; here a
    sha256) of ``size`` bytes: what ``tarfile`` writes, without its per-file cost."""
    raw = name.encode("ascii")
    if len(raw) >= 100:
        raise ValueError("tar member name %r is too long" % name)
    sized = b"%011o\0" % size if size < 8 ** 11 else b"\x80" + size.to_bytes(11, "big")
    stamp = b"%011o\0" % mtime
    return (raw.ljust(100, b"\0") + _MODES + sized + stamp
            + b"%06o\0 " % (sum(raw) + sum(sized) + sum(stamp) + _SUMS) + _TAIL)


class _Failed(Exception):
    """The stream stopped here; the message says why."""


class Session:
    """One ``media_receive.py sync`` on the host: the list goes in, the missing pairs come back,
    then the tar stream of those goes in and what arrived comes back."""

    def __init__(self, backend, pin: str, limit: float, cancel=None):
        self.backend, self.host, self.limit = backend, backend.options.host, limit
        self.err = tempfile.TemporaryFile()
        self.sent = self.total = 0
        self.out = b""
        self.cancel = cancel  # the run's: looked at in every wait on the host
        try:
            self.p = proc.spawn(backend.argv(cache_command(
                backend.options.python, backend.remote_dir, "sync", pin, limit)),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err)
        except proc.SpawnError as e:
            self.err.close()
            raise errors.TransferError(str(e))
        os.set_blocking(self.p.stdin.fileno(), False)  # see _write_one
        media_receive.wide_pipe(self.p.stdin.fileno())  # ssh reads on while we read files

    def _read(self, within: float, enough) -> bool:
        """Read the host's stdout into ``self.out`` until ``enough()``, its end (False) or
        ``within`` seconds (a ConnectError); a TransferError as soon as the run is cancelled."""
        fd = self.p.stdout.fileno()
        until = time.monotonic() + within
        while not enough():
            if self.cancel is not None and self.cancel.is_set():
                _end(self.p, stop=True)
                raise errors.TransferError("the run was cancelled while its media were checked "
                                           "or copied on %s" % self.host)
            left = until - time.monotonic()
            if left <= 0:
                _end(self.p, stop=True)
                raise errors.ConnectError("ssh to %s did not answer within %d s. Check the host "
                                          "and the network." % (self.host, within))
            if _ready(fd, select.POLLIN, min(left, 1.0)):
                data = os.read(fd, 1 << 20)
                if not data:
                    return False
                self.out += data
        return True

    def _stderr(self) -> str:
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace").strip()

    def _failure(self, what: str) -> Exception:
        """The error for a session that went wrong: the run's cancel, ssh's own (exit 255) or
        ``what``. A cancel comes first: ssh killed by it exits 255 too."""
        _end(self.p, stop=True)
        if self.cancel is not None and self.cancel.is_set():
            return errors.TransferError("the run was cancelled while its media were checked or "
                                        "copied on %s" % self.host)
        stderr = self._stderr()
        if self.p.returncode == 255:
            return errors.ConnectError(errors.ssh_failure(self.host, self.backend.options.user,
                                                          255, stderr))
        return errors.TransferError("%s%s" % (what, ": " + "\n".join(stderr.splitlines()[-5:])
                                              if stderr else ""))

    def missing(self, wanted: bytes) -> List[Tuple[str, int]]:
        """Send the run's list ([[sha, size], ...], one line); the pairs the host lacks."""
        try:
            self._write_one(self.backend.stdin(wanted + b"\n"))
        except (OSError, _Failed):
            pass  # the host's answer (or its absence) says why
        mark = media_cache.MARK.encode()
        got = self._read(CHECK_S, lambda: (mark in self.out and b"\n" in
                                                             self.out[self.out.index(mark):]))
        try:
            if not got:
                raise ValueError("no answer")
            return [(sha, size) for sha, size in _parse(self.out)["missing"]]
        except (ValueError, KeyError, TypeError):
            if not got:  # its end: its exit status tells ssh's failures (255) from others
                try:
                    self.p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            raise self._failure("Checking the media cache on %s failed (exit %s)" % (
                self.host, self.p.poll()))

    def send(self, ctx, files: List[Tuple[str, str, int]]) -> Dict:
        """The tar stream of ``files`` (sha, path, size); what the host says arrived."""
        self.out = self.out[self.out.index(media_cache.MARK.encode()):]
        self.out = self.out[self.out.index(b"\n") + 1:]
        try:
            failure = self._stream(ctx, files)
        except _Failed as e:
            failure = str(e)
        except OSError:
            failure = "the stream to %s closed early" % self.host
        if failure:
            raise self._failure("Copying media to %s failed: %s" % (self.host, failure))
        return self.finish()

    def finish(self) -> Dict:
        """Close the stream; the host's last word (what arrived)."""
        try:
            self.p.stdin.close()
        except OSError:
            pass
        self._read(FINISH_S, lambda: False)
        _end(self.p, stop=False)
        if self.p.returncode != 0:
            raise self._failure("Copying media to %s failed: exit %s" % (self.host,
                                                                        self.p.returncode))
        try:
            return _parse(self.out)
        except ValueError:
            return {}

    def _stream(self, ctx, files) -> str:
        """Write the stream; "" when all of it went, else why it stopped."""
        of_bytes = sum(size for _, _, size in files)
        self.sent, self.total = 0, of_bytes + BLOCK * (len(files) + 2)
        chunks, buffered, last, mtime = [], 0, 0.0, int(time.time())
        for done, (sha, path, size) in enumerate(files):
            if ctx.cancel.is_set():
                return "the run was cancelled while its media were copied"
            now = time.monotonic()
            if now - last >= PROGRESS_S:
                last = now
                ctx.set_step(progress_words(self.host, done, len(files), self.sent, of_bytes))
            try:
                if size > ONE_READ:
                    with open(path, "rb") as f:
                        self._write(chunks + [tar_header(sha, size, mtime)])
                        chunks, buffered = [], 0
                        _copy(f, size, self._write_one)
                else:
                    data = _small(path, size)
                    chunks += (tar_header(sha, size, mtime), data)
            except OSError as e:
                if isinstance(e, BrokenPipeError) or self.p.poll() is not None:
                    raise  # the host's side ended, not the file
                return "%s cannot be read (%s)" % (path, e.strerror or e)
            chunks.append(bytes(-size % BLOCK))
            buffered += size + BLOCK
            if buffered >= WRITE_CHUNK:
                self._write(chunks)
                chunks, buffered = [], 0
        self._write(chunks + [bytes(2 * BLOCK)])
        ctx.set_step(progress_words(self.host, len(files), len(files), of_bytes, of_bytes))
        return ""

    def _write(self, chunks) -> None:
        self._write_one(b"".join(chunks))

    def _write_one(self, data: bytes) -> None:
        """Write ``data`` to the host without blocking: in waits of WAIT_S, each looking at the
        run's cancel; _Failed when the host took nothing for WRITE_STALL_S."""
        fd = self.p.stdin.fileno()
        view = memoryview(data)
        moved = time.monotonic()
        while view:
            if self.cancel is not None and self.cancel.is_set():
                raise _Failed("the run was cancelled while its media were copied")
            try:
                n = os.write(fd, view) if _ready(fd, select.POLLOUT, WAIT_S) else 0
            except BlockingIOError:
                n = 0
            if n:
                view, moved = view[n:], time.monotonic()
                self.sent += n
            elif time.monotonic() - moved > WRITE_STALL_S:
                raise _Failed(
                    "the host accepted no data for %d s (%s of %s MB sent). Its side stopped "
                    "reading: check the disk under %s/media on %s (full, or a hung network "
                    "file system) and that nothing stopped the media_receive.py process there, "
                    "then start the run again" % (WRITE_STALL_S, media_bundle.mb(self.sent),
                                                  media_bundle.mb(self.total),
                                                  self.backend.remote_dir, self.host))

    def close(self) -> None:
        """Whatever happened: the session ends (killed if still running), its files closed."""
        if self.p.poll() is None:
            _end(self.p, stop=True)
        for f in (self.p.stdin, self.p.stdout, self.err):
            try:
                f.close()
            except OSError:
                pass


def _ready(fd: int, event: int, timeout: float) -> bool:
    """Whether ``fd`` is readable (POLLIN) or writable (POLLOUT) within ``timeout`` s, or has
    ended (poll, not select: a server that runs for weeks may hold descriptors above 1023)."""
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(timeout * 1000))


def _small(path: str, size: int) -> bytes:
    """A small file's bytes, read whole (no file object: most of a small file's cost)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, size)
        while len(data) < size:
            more = os.read(fd, size - len(data))
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    if len(data) != size:
        raise OSError("it has %d bytes, not the %d listed: it changed since the run started"
                      % (len(data), size))
    return data


def _copy(f, size: int, write) -> None:
    """A large file's ``size`` bytes, in blocks; a file that came short names its own sizes
    (not the block's)."""
    left = size
    while left > 0:
        want = min(left, ONE_READ)
        data = f.read(want)
        if len(data) != want:
            raise OSError("it has %d bytes, not the %d listed: it changed since the run started"
                          % (size - left + len(data), size))
        write(data)
        left -= want


def _parse(out: bytes) -> dict:
    return parse(out.decode("utf-8", "replace"))


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
