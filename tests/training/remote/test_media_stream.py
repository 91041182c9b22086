"""The media stream to an ssh or SLURM host, without a host: the sender's hand-made tar headers
and the host's strict reader of them (remote/media_receive.py ``receive``), fed hostile streams:
links, devices, folders, paths, long-name headers, repeats, damaged and cut streams."""

import hashlib
import json
import io
import os
import re
import subprocess
import sys
import tarfile
import time

import pytest

from potato.training.backends.media_push import tar_header
from potato.training.remote import media_cache as mc
from potato.training.remote import media_store as ms
from potato.training.remote import media_receive as mr
from potato.training.remote import media_tar


def sha(data):
    return hashlib.sha256(data).hexdigest()


def stream_of(files):
    """What the sender writes for ``files`` (data, ...): header, bytes, padding, the end."""
    out = []
    for data in files:
        out += [tar_header(sha(data), len(data), 1700000000), data, bytes(-len(data) % 512)]
    return b"".join(out) + bytes(1024)


def cache_names(cache):
    """Every name under the cache but its pins, its lock and its size record (hidden leftovers
    included)."""
    out = set()
    for root, dirs, names in os.walk(cache):
        dirs[:] = [d for d in dirs if d != ".pins"]
        out.update(os.path.relpath(os.path.join(root, n), cache) for n in names)
    return out - {".lock", ".usage"}


FILES = [b"first file", os.urandom(5000), b"", b"x" * 512]


def test_the_senders_stream_is_a_tar_that_tar_and_tarfile_read(tmp_path):
    data = stream_of(FILES)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        got = [(m.name, m.size, m.isfile(), tar.extractfile(m).read()) for m in tar]
    assert got == [(sha(d), len(d), True, d) for d in FILES]
    (tmp_path / "out").mkdir()
    subprocess.run(["tar", "xf", "-", "-C", str(tmp_path / "out")], input=data, check=True)
    for d in FILES:
        assert (tmp_path / "out" / sha(d)).read_bytes() == d
    big = tar_header(sha(b"big"), 9 * 8 ** 11, 0)  # over tar's octal range: base-256
    assert tarfile.TarInfo.frombuf(big, "utf-8", "strict").size == 9 * 8 ** 11
    assert media_tar.tar_header(big) == (sha(b"big"), b"0", 9 * 8 ** 11)


def test_receive_keeps_every_verified_file(tmp_path):
    cache = str(tmp_path / "media")
    mc.pin(cache, "job", [(sha(d), len(d)) for d in FILES])
    out = mr.receive(cache, "job", io.BytesIO(stream_of(FILES)), 1 << 30, writers=2)
    assert (out["received"], out["bad_count"]) == (len(FILES), 0), out
    for d in FILES:
        with open(mc.file_path(cache, sha(d)), "rb") as f:
            assert f.read() == d
    assert cache_names(cache) == {os.path.join(sha(d)[:2], sha(d)) for d in FILES}


def _member(tar, name, kind, data=b"", link=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def test_hostile_members_are_skipped_and_named(tmp_path):
    """Every member but a regular file named by a pinned hash, of its size, sent once, is
    skipped over (its bytes too), counted as bad, and writes nothing anywhere."""
    cache = str(tmp_path / "media")
    good, evil = b"good bytes", b"evil bytes"
    pinned = [sha(b"p%d" % i) for i in range(8)]
    mc.pin(cache, "job", [(sha(good), len(good))] + [(h, len(evil)) for h in pinned])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        _member(tar, pinned[0], tarfile.SYMTYPE, link="/etc/passwd")
        _member(tar, pinned[1], tarfile.LNKTYPE, link="../../outside")
        _member(tar, pinned[2], tarfile.CHRTYPE)
        _member(tar, pinned[3], tarfile.DIRTYPE)
        _member(tar, pinned[4], tarfile.FIFOTYPE)
        _member(tar, "/" + str(tmp_path / "abs"), tarfile.REGTYPE, evil)
        _member(tar, "../" + pinned[5], tarfile.REGTYPE, evil)
        _member(tar, "x" * 120 + "/" + pinned[6], tarfile.REGTYPE, evil)  # a GNU long name
        _member(tar, pinned[7], tarfile.REGTYPE, evil + b"!")  # not the pinned size
        _member(tar, sha(good), tarfile.REGTYPE, good)
        _member(tar, sha(good), tarfile.REGTYPE, good)  # the same file again
    out = mr.receive(cache, "job", io.BytesIO(buf.getvalue()), 1 << 30)
    assert out["received"] == 1 and out["bad_count"] == 11, out  # the long name: 2
    assert all("not a file this run needs" in b for b in out["bad"]), out
    assert cache_names(cache) == {os.path.join(sha(good)[:2], sha(good))}
    assert sorted(os.listdir(tmp_path)) == ["media"]
    assert not any(os.path.islink(os.path.join(r, n))
                   for r, ds, ns in os.walk(cache) for n in ds + ns)


def test_pax_headers_are_not_followed(tmp_path):
    """A pax header naming a pinned hash (its next member named otherwise) does not rename
    that member: the stream is read as plain ustar."""
    cache = str(tmp_path / "media")
    evil = b"evil bytes"
    mc.pin(cache, "job", [(sha(evil), len(evil))])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("harmless")
        info.size, info.pax_headers = len(evil), {"path": sha(evil)}
        tar.addfile(info, io.BytesIO(evil))
    out = mr.receive(cache, "job", io.BytesIO(buf.getvalue()), 1 << 30)
    assert out["received"] == 0 and out["bad_count"] == 2, out
    assert cache_names(cache) == set()


def test_wrong_bytes_are_dropped_with_a_message(tmp_path):
    cache = str(tmp_path / "media")
    real, fake = b"the real bytes", b"other bytes!!!"
    big = os.urandom(mr.SMALL_FILE + 1000)  # written as it is read, not in memory
    mc.pin(cache, "job", [(sha(real), len(real)), (sha(big), len(big)), (sha(b"ok"), 2)])
    data = stream_of([b"ok"])[:-1024]
    data += tar_header(sha(real), len(fake), 0) + fake + bytes(-len(fake) % 512)
    data += tar_header(sha(big), len(big), 0) + big[:-1] + b"?" + bytes(-len(big) % 512)
    out = mr.receive(cache, "job", io.BytesIO(data + bytes(1024)), 1 << 30)
    assert out["received"] == 1 and out["bad_count"] == 2, out
    assert all("another sha256" in b for b in out["bad"]), out
    assert cache_names(cache) == {os.path.join(sha(b"ok")[:2], sha(b"ok"))}


def test_a_cut_stream_keeps_only_whole_verified_files(tmp_path):
    cache = str(tmp_path / "media")
    files = [os.urandom(3000), os.urandom(3000)]
    mc.pin(cache, "job", [(sha(d), len(d)) for d in files])
    data = stream_of(files)
    out = mr.receive(cache, "job", io.BytesIO(data[:512 + 3072 + 512 + 1000]), 1 << 30)
    assert out["received"] == 1 and out["bad_count"] == 1, out
    assert "the stream ended" in out["bad"][0]
    assert cache_names(cache) == {os.path.join(sha(files[0])[:2], sha(files[0]))}
    out = mr.receive(cache, "job", io.BytesIO(data[:512 + 3072]), 1 << 30)  # no end marker
    assert out["bad_count"] == 1 and "before its end" in out["bad"][0], out


def test_a_damaged_header_stops_the_stream(tmp_path):
    cache = str(tmp_path / "media")
    files = [b"one", b"two"]
    mc.pin(cache, "job", [(sha(d), len(d)) for d in files])
    data = bytearray(stream_of(files))
    data[1024 + 130] ^= 1  # the second header's size field: its checksum no longer matches
    with pytest.raises(mc.CacheError, match="damaged"):
        mr.receive(cache, "job", io.BytesIO(bytes(data)), 1 << 30)
    assert cache_names(cache) == {os.path.join(sha(b"one")[:2], sha(b"one"))}


def test_sync_answers_then_reads_the_stream(tmp_path):
    """``media_receive.py sync`` as the host runs it (``python -c``, no Potato to import): the
    list in, the missing pairs out at once, then the stream of those in and what arrived out."""
    from potato.training.backends.media_push import cache_source
    cache = tmp_path / "remote" / "media"
    mc.pin(str(cache), "other", [])
    ms.put(str(cache), sha(b"here"), b"here")
    files = [b"here", b"not yet"]
    wanted = "[%s]" % ", ".join('["%s", %d]' % (sha(d), len(d)) for d in files)
    import select
    # as on a host: no Potato to import (-S, as media_push runs it: not even an installed one),
    # and stdout buffered (PYTHONUNBUFFERED is unset there)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONUNBUFFERED")}
    p = subprocess.Popen([sys.executable, "-S", "-c", cache_source(), "sync",
                          str(tmp_path / "remote"), "job", "100"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         cwd=str(tmp_path), env=env)
    p.stdin.write(wanted.encode() + b"\n")
    p.stdin.flush()
    if not select.select([p.stdout], [], [], 60)[0]:  # the answer must come before the stream
        p.kill()
        p.communicate()
        pytest.fail("sync did not answer within 60 s of the list (its answer not flushed?)")
    line = p.stdout.readline().decode()  # before any stream is sent
    assert line == mc.MARK + '{"missing": [["%s", 7]]}\n' % sha(b"not yet")
    out, _ = p.communicate(stream_of([b"not yet"]))
    assert p.returncode == 0
    assert '"received": 1' in out.decode() and '"bad_count": 0' in out.decode()
    assert mc.have(str(cache), sha(b"not yet"), 7)


# -- media_push through a local "host" (sh -c instead of ssh) --------------------------------------

class LocalHost:
    """What media_push needs of an ssh backend; its commands run here, under sh."""

    def __init__(self, remote_dir, python=sys.executable):
        self.options = type("Cfg", (), {"host": "here", "user": None, "python": python,
                                        "max_media_cache_mb": 100})()
        self.remote_dir = str(remote_dir)
        self.commands = []

    def argv(self, command):
        self.commands.append(command)
        # as on a host: the program's stdout is a pipe, block-buffered (PYTHONUNBUFFERED unset)
        return ["env", "-u", "PYTHONUNBUFFERED", "sh", "-c", command]

    def stdin(self, data=b""):
        return data


class Ctx:
    def __init__(self, index_path):
        import threading
        self.paths = type("Paths", (), {"media_index": str(index_path)})()
        self.cancel = threading.Event()
        self.lines, self.steps = [], []

    def log(self, line):
        self.lines.append(line)

    def set_step(self, step):
        self.steps.append(step)


def media_index(tmp_path, files):
    from potato.training.remote.paths import write_json
    index = {}
    for i, data in enumerate(files):
        path = tmp_path / ("%d.png" % i)
        path.write_bytes(data)
        index[sha(data)] = {"path": str(path), "size": len(data), "name": path.name}
    write_json(str(tmp_path / "media.json"), index)
    return tmp_path / "media.json"


def test_push_checks_and_sends_in_one_session(tmp_path):
    from potato.training.backends import media_push
    files = [os.urandom(n) for n in (10, 3000, 70000)] + [os.urandom(mr.SMALL_FILE + 5)]
    host = LocalHost(tmp_path / "remote")
    ctx = Ctx(media_index(tmp_path, files))
    media_push.push(host, ctx, "job-1")
    assert len(host.commands) == 1 and " sync " in host.commands[0]
    assert any(line.startswith("media: sent 4 files") for line in ctx.lines), ctx.lines
    assert ctx.steps[-1] == "copying media to here: 4 of 4 files, 4 of 4 MB", ctx.steps
    for data in files:
        assert mc.have(str(tmp_path / "remote" / "media"), sha(data), len(data))
    again = Ctx(ctx.paths.media_index)
    media_push.push(host, again, "job-2")
    assert len(host.commands) == 2
    assert again.lines == ["media: all 4 files (4 MB) already on here; 0 files sent"]


def test_push_names_a_file_that_changed_since_it_was_listed(tmp_path):
    from potato.training.backends import errors, media_push
    host = LocalHost(tmp_path / "remote")
    ctx = Ctx(media_index(tmp_path, [b"a file", b"another file"]))
    (tmp_path / "1.png").write_bytes(b"short")
    with pytest.raises(errors.TransferError, match=r"1\.png cannot be read \(it has 5 bytes, "
                                                   r"not the 12 listed"):
        media_push.push(host, ctx, "job")


def test_push_says_when_the_host_cannot_check(tmp_path):
    from potato.training.backends import errors, media_push
    host = LocalHost(tmp_path / "remote", python="/nonexistent/python3")
    ctx = Ctx(media_index(tmp_path, [b"a file"]))
    with pytest.raises(errors.TransferError, match=r"Checking the media cache on here failed "
                                                   r"\(exit 127\): .*nonexistent/python3"):
        media_push.push(host, ctx, "job")


# -- an agent's batch download -----------------------------------------------------------------------

def test_a_cut_batch_keeps_whole_files_and_fetches_the_rest(tmp_path):
    """A batch answer cut inside its second file: the first is kept (verified), the cut one
    and the rest come one by one; a batch whose bytes are wrong fails with the hash named."""
    import http.client
    import http.server

    from potato.training.remote import media_fetch
    from tests.helpers import media_server

    files = [os.urandom(3000), os.urandom(2000), os.urandom(100)]
    by_sha = {sha(d): d for d in files}
    gets = []

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            gets.append(self.path.rsplit("/", 1)[1])
            body = by_sha[gets[-1]]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            hashes = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["hashes"]
            body = b"".join(by_sha.get(h, b"?" * 100) for h in hashes)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:3000 + 500] if len(hashes) == 3 else body)
            self.close_connection = True

        def log_message(self, *a):
            pass

    client, stop = media_server(H)

    try:
        cache = str(tmp_path / "cache")
        d = media_fetch.Downloader(client, "r1", cache)
        done = []
        d.fetch_batch([(sha(x), len(x)) for x in files], done.append)
        assert done == [len(x) for x in files] and gets == [sha(x) for x in files[1:]]
        for x in files:
            assert mc.have(cache, sha(x), len(x))
        assert cache_names(cache) == {os.path.join(sha(x)[:2], sha(x)) for x in files}
        by_sha[sha(b"wrong")] = b"w" * 100  # the server's bytes are not the listed file's
        with pytest.raises(mc.CacheError, match="another sha256"):
            d.fetch_batch([(sha(b"listed"), 100), (sha(b"wrong"), 100)], done.append)
        d.close()
    finally:
        stop()


def test_a_long_stream_keeps_its_pin_and_its_files(tmp_path, monkeypatch):
    """A stream that takes longer than PIN_STALE_S (its pin aged half way here): the pin is
    touched while the stream is read, and the final eviction never takes the run's own files;
    before, the pin went stale and the run's files left the cache as they arrived."""
    cache = str(tmp_path / "media")
    files = [os.urandom(100000) for _ in range(10)]
    wanted = [(sha(d), len(d)) for d in files]
    mc.need(cache, "job-long", wanted)
    data = stream_of(files)
    fresh = []

    class Slow(io.BytesIO):
        def read(self, n=-1):
            pin = mc.pin_path(cache, "job-long")
            if self.tell() > len(data) // 2 and not fresh:  # half way: 1000 s went by
                old = time.time() - 1000
                os.utime(pin, (old, old))
                fresh.append(False)
            elif self.tell() > 3 * len(data) // 4 and len(fresh) == 1:
                fresh.append(time.time() - os.stat(pin).st_mtime < mc.PIN_STALE_S)
            return super().read(n)

    monkeypatch.setattr(mr, "PIN_TOUCH_S", 0)
    out = mr.receive(cache, "job-long", Slow(data), limit_bytes=500000)
    assert (out["received"], out["bad_count"], out["evicted"]) == (10, 0, 0), out
    assert fresh == [False, True]
    assert all(mc.have(cache, s, n) for s, n in wanted)
    assert mc.need(cache, "job-long", wanted) == []
    monkeypatch.setattr(mr, "PIN_TOUCH_S", 3600)
    old = time.time() - 1000
    os.utime(mc.pin_path(cache, "job-long"), (old, old))
    out = mr.receive(cache, "job-long", io.BytesIO(bytes(1024)), limit_bytes=500000)
    assert out["evicted"] == 0 and os.path.exists(mc.pin_path(cache, "job-long"))


def test_eviction_waits_for_no_run_that_was_told_a_file_is_there(tmp_path, monkeypatch):
    """Another run's need() while evict() works from its listing: it waits for the eviction
    (the cache's lock), so a file it is told is there stays there; before, the eviction
    removed it from its old listing and the run found it gone."""
    import threading
    cache = str(tmp_path / "media")
    old = b"a file run A needs, cached by an earlier run"
    ms.put(cache, sha(old), old)
    t = time.time() - 3600
    os.utime(mc.file_path(cache, sha(old)), (t, t))
    ms.put(cache, sha(b"new" * 400), b"new" * 400)
    told = []
    real_pinned = mc.pinned

    def pinned_while_a_runs(cache_, now=None):
        keep = real_pinned(cache_, now)
        a = threading.Thread(target=lambda: told.append(mc.need(cache, "run-A",
                                                                 [(sha(old), len(old))])))
        a.start()
        a.join(0.5)  # blocked by the eviction's lock (before: done at once)
        threads.append(a)
        return keep

    threads = []
    monkeypatch.setattr(mc, "pinned", pinned_while_a_runs)
    mc.evict(cache, limit_bytes=1200)
    threads[0].join(10)
    assert told == [[(sha(old), len(old))]]  # told it is missing (it was evicted): sent again
    monkeypatch.setattr(mc, "pinned", real_pinned)
    assert mc.evict(cache, limit_bytes=1200)[0] == 0


def _stuck_host(tmp_path):
    """A host whose side answers which files it lacks, then reads no more."""
    fake = tmp_path / "stuck-python"
    fake.write_text("#!%s\nimport json, sys, time\nw = json.loads(sys.stdin.readline())\n"
                    "print('POTATO-MEDIA ' + json.dumps({'missing': w}), flush=True)\n"
                    "time.sleep(600)\n" % sys.executable)
    fake.chmod(0o755)
    return LocalHost(tmp_path / "remote", python=str(fake))


def test_a_host_that_stops_reading_fails_the_copy(tmp_path, monkeypatch):
    """Before, the blocking write to ssh waited for ever (cancel unseen)."""
    from potato.training.backends import errors, media_push
    monkeypatch.setattr(media_push, "WRITE_STALL_S", 1)
    ctx = Ctx(media_index(tmp_path, [os.urandom(1 << 20) for _ in range(4)]))
    with pytest.raises(errors.TransferError, match=r"the host accepted no data for 1 s \(.* MB "
                                                   r"sent\)\. Its side stopped reading: check "
                                                   r"the disk under .*/remote/media on here"):
        media_push.push(_stuck_host(tmp_path), ctx, "job")


def _push_cancelled_after(host, ctx, seconds=1):
    """media_push.push with the run cancelled ``seconds`` in: it must end as a cancel, in
    seconds (not after CHECK_S, WRITE_STALL_S or FINISH_S); the time it took."""
    import threading
    from potato.training.backends import errors, media_push
    timer = threading.Timer(seconds, ctx.cancel.set)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(errors.TransferError, match="cancelled while its media were checked "
                                                       "or copied on here"):
            media_push.push(host, ctx, "job")
    finally:
        timer.cancel()
        timer.join()
    return time.monotonic() - started


def test_cancel_stops_a_copy_the_host_does_not_read(tmp_path):
    ctx = Ctx(media_index(tmp_path, [os.urandom(1 << 20) for _ in range(4)]))
    _push_cancelled_after(_stuck_host(tmp_path), ctx)


def _host_script(tmp_path, body):
    fake = tmp_path / "host-python"
    fake.write_text("#!%s\nimport json, sys, time\nw = json.loads(sys.stdin.readline())\n"
                    "print('POTATO-MEDIA ' + json.dumps({'missing': w}), flush=True)\n"
                    "while sys.stdin.buffer.read(1 << 20):\n    pass\n%s\n"
                    % (sys.executable, body))
    fake.chmod(0o755)
    return LocalHost(tmp_path / "remote", python=str(fake))


def test_a_host_that_keeps_fewer_files_than_sent_fails_the_copy(tmp_path):
    from potato.training.backends import errors, media_push
    host = _host_script(tmp_path, "print('POTATO-MEDIA ' + json.dumps({'received': 1}))")
    ctx = Ctx(media_index(tmp_path, [b"one file", b"two files"]))
    with pytest.raises(errors.TransferError, match=r"2 media files were sent to here but it "
                                                   r"kept 1 of them"):
        media_push.push(host, ctx, "job")


def test_a_host_that_never_ends_names_the_wait(tmp_path, monkeypatch):
    from potato.training.backends import errors, media_push
    monkeypatch.setattr(media_push, "FINISH_S", 1)
    host = _host_script(tmp_path, "time.sleep(600)")
    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    with pytest.raises(errors.ConnectError, match=r"ssh to here did not answer within 1 s"):
        media_push.push(host, ctx, "job")


def test_a_tar_number_is_octal_digits_only(tmp_path):
    block = bytearray(tar_header(sha(b"x"), 1, 0))
    block[124:136] = b"+0000000001\0"  # int(, 8) reads 1
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    with pytest.raises(mc.CacheError, match=r"damaged \(a header field reads '\+0000000001'\)"):
        media_tar.tar_header(bytes(block))


def test_a_host_write_never_takes_another_writers_name(tmp_path, monkeypatch):
    """Two hosts on one network file system may give the same pid: a file on its way in there
    is never truncated by put() (before, its name was the hash and the pid)."""
    cache = str(tmp_path / "media")
    data = b"arriving here"
    folder = os.path.dirname(mc.file_path(cache, sha(data)))
    os.makedirs(folder)
    other = os.path.join(folder, ".%s.%d" % (sha(data), os.getpid()))
    with open(other, "wb") as f:
        f.write(b"another host's half")
    ms.put(cache, sha(data), data)
    with open(other, "rb") as f:
        assert f.read() == b"another host's half"
    with open(mc.file_path(cache, sha(data)), "rb") as f:
        assert f.read() == data


def test_a_disk_error_in_a_writer_ends_the_stream_with_it(tmp_path, monkeypatch):
    """A writer thread's OSError (a full disk) stops the reader and is raised by receive, with
    no thread left behind; the files written before it stay, verified."""
    import errno
    cache = str(tmp_path / "media")
    files = [os.urandom(3000 + i) for i in range(40)]
    mc.pin(cache, "job", [(sha(d), len(d)) for d in files])
    real_put, calls = mr.put, []

    def full_after_five(cache_, sha_, data, *whole_first):
        calls.append(sha_)
        if len(calls) > 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_put(cache_, sha_, data)

    monkeypatch.setattr(mr, "put", full_after_five)
    monkeypatch.setattr(mr, "BATCH", 4096)  # a batch a file: the reader sees the failure early
    with pytest.raises(OSError, match="No space left"):
        mr.receive(cache, "job", io.BytesIO(stream_of(files)), 1 << 30, writers=1)
    assert len(calls) == 6  # nothing written after the error
    kept = {n.split(os.sep)[1] for n in cache_names(cache)}
    assert kept == set(calls[:5]) and all(mc.have(cache, s, len(d)) for d in files
                                          for s in [sha(d)] if s in kept)


def test_the_push_waits_on_descriptors_above_1023(tmp_path):
    """A server that runs for weeks may hold over a thousand descriptors: the push's waits on
    ssh's pipes use poll (select raises ValueError above 1023)."""
    import resource
    import select
    from potato.training.backends import media_push
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("the hard limit on descriptors is %d here" % hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        held.append(null)
        while held[-1] < 1100:  # every lower descriptor taken: ssh's pipes come above
            held.append(os.dup(null))
        with pytest.raises(ValueError):
            select.select([held[-1]], [], [], 0)  # what the push used before
        files = [b"one file", os.urandom(70000)]
        ctx = Ctx(media_index(tmp_path, files))
        media_push.push(LocalHost(tmp_path / "remote"), ctx, "job")
        assert any(line.startswith("media: sent 2 files") for line in ctx.lines), ctx.lines
        for data in files:
            assert mc.have(str(tmp_path / "remote" / "media"), sha(data), len(data))
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("where", ["check", "finish"])
def test_cancel_is_seen_while_the_host_checks_or_finishes(tmp_path, where):
    """Before, a cancel was looked at only while the stream was written: a host slow to answer
    which files it lacks (CHECK_S, 300 s) or to say what arrived (FINISH_S, 600 s) held a
    cancelled run that long."""
    if where == "check":
        fake = tmp_path / "slow-python"
        fake.write_text("#!%s\nimport time\ntime.sleep(600)\n" % sys.executable)
        fake.chmod(0o755)
        host = LocalHost(tmp_path / "remote", python=str(fake))
    else:
        host = _host_script(tmp_path, "time.sleep(600)")
    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    assert _push_cancelled_after(host, ctx) < 60  # not CHECK_S or FINISH_S


def test_a_cancel_is_a_cancel_when_ssh_exits_255_on_its_signal(tmp_path):
    """Real ssh killed by SIGTERM exits 255, as for a failed connection: before, a run
    cancelled while its media streamed was reported as "ssh to HOST failed (exit 255)"."""
    stuck = _stuck_host(tmp_path)

    class Ssh255(LocalHost):
        def argv(self, command):  # like ssh: exit 255 on SIGTERM, with its message
            self.commands.append(command)
            return ["sh", "-c", "trap 'echo Killed by signal 15. >&2; exit 255' TERM; "
                                "%s; exit $?" % command]
    host = Ssh255(stuck.remote_dir, python=stuck.options.python)
    ctx = Ctx(media_index(tmp_path, [os.urandom(1 << 20) for _ in range(4)]))
    _push_cancelled_after(host, ctx)


def test_a_small_file_read_in_pieces_is_read_whole(tmp_path, monkeypatch):
    """The sender reads a small file with os.read (no file object); a read may return less.
    It sends the bytes listed: a file grown since goes as it was listed, one shrunk is named."""
    from potato.training.backends import errors, media_push
    real = os.read
    monkeypatch.setattr(media_push.os, "read", lambda fd, n: real(fd, min(n, 3) if n < 100
                                                                  else n))
    files = [b"0123456789", b"0123"]
    ctx = Ctx(media_index(tmp_path, files))
    with open(tmp_path / "1.png", "ab") as f:
        f.write(b"456789")  # grown since it was listed
    media_push.push(LocalHost(tmp_path / "remote"), ctx, "job")
    for data in files:
        assert mc.have(str(tmp_path / "remote" / "media"), sha(data), len(data))
    (tmp_path / "shrunk").mkdir()
    ctx = Ctx(media_index(tmp_path / "shrunk", [b"0123456789a"]))
    (tmp_path / "shrunk" / "0.png").write_bytes(b"0123456789")
    with pytest.raises(errors.TransferError, match=r"0\.png cannot be read \(it has 10 bytes, "
                                                   r"not the 11 listed"):
        media_push.push(LocalHost(tmp_path / "remote"), ctx, "job2")


def test_the_senders_pipe_to_ssh_is_widened(tmp_path):
    """ssh reads on from a 1 MB pipe while this side reads the next files."""
    import fcntl
    from potato.training.backends import media_push
    session = media_push.Session(LocalHost(tmp_path / "remote"), "job", 100)
    try:
        assert fcntl.fcntl(session.p.stdin.fileno(), getattr(fcntl, "F_GETPIPE_SZ", 1032)) \
            >= 1 << 20
    finally:
        session.close()


# -- what the sender says: its steps, its log line, the host's summary -------------------------------

MB = 1 << 20


class Clock:
    """media_push's clock: real time plus ``extra`` seconds (a slow copy without waiting)."""

    def __init__(self):
        self.extra = 0.0

    def monotonic(self):
        return time.monotonic() + self.extra

    def time(self):
        return time.time()


def _summary_host(tmp_path, summary):
    """A host that takes the whole stream, then answers ``summary`` (a dict) as what arrived."""
    return _host_script(tmp_path, "print('POTATO-MEDIA ' + json.dumps(%r))" % (summary,))


def test_push_says_what_it_checks_what_it_sent_how_fast_and_what_left_the_cache(tmp_path,
                                                                                 monkeypatch):
    from potato.training.backends import media_push
    clock = Clock()
    monkeypatch.setattr(media_push, "time", clock)
    files = [os.urandom(MB), os.urandom(MB // 2), os.urandom(MB // 2)]
    host = _summary_host(tmp_path, {"received": 3, "bad_count": 0, "evicted": 2,
                                    "evicted_bytes": 3 * MB})

    class SlowCtx(Ctx):
        def set_step(self, step):
            super().set_step(step)
            if step.startswith("copying media to here: 3 of 3 files"):
                clock.extra += 4.0  # the copy took four seconds

    ctx = SlowCtx(media_index(tmp_path, files))
    media_push.push(host, ctx, "job")
    assert ctx.steps[0] == "checking media on here: 3 files, 2 MB"
    assert ctx.lines[0] == "media: 3 of 3 files (2 MB) are not on here yet; sending them in " \
                           "one stream"
    m = re.fullmatch(r"media: sent 3 files \(2 MB\) to here in ([\d.]+) s \(([\d.]+) MB/s\); "
                     r"the host verified 3; 2 least recently used files \(3 MB\) left its "
                     r"cache \(max_media_cache_mb 100\)", ctx.lines[1])
    assert m, ctx.lines
    secs, rate = float(m.group(1)), float(m.group(2))
    assert 4.0 <= secs < 30 and rate == round(2 / secs, 1)


@pytest.mark.parametrize("summary, said", [
    ({"received": 2}, "the host verified 2"),  # no eviction: no clause for it
    ({"received": 2, "evicted": 0, "evicted_bytes": 5}, "the host verified 2"),
    ({"received": 2, "evicted": 1}, "the host verified 2; 1 least recently used files (0 MB) "
                                    "left its cache (max_media_cache_mb 100)"),
])
def test_the_log_line_says_an_eviction_only_when_there_was_one(tmp_path, summary, said):
    from potato.training.backends import media_push
    ctx = Ctx(media_index(tmp_path, [b"one file", b"two files"]))
    media_push.push(_summary_host(tmp_path, summary), ctx, "job")
    assert ctx.lines[1].endswith(said), ctx.lines


def test_files_the_host_found_damaged_fail_the_copy_naming_three(tmp_path):
    from potato.training.backends import errors, media_push
    bad = ["%s: 3 bytes, not 8" % c for c in "abcd"]
    host = _summary_host(tmp_path, {"received": 2, "bad_count": 4, "bad": bad})
    ctx = Ctx(media_index(tmp_path, [b"one file", b"two files"]))
    with pytest.raises(errors.TransferError) as e:
        media_push.push(host, ctx, "job")
    assert str(e.value).startswith("4 media file(s) arrived on here damaged or changed since "
                                   "they were listed: %s. " % "; ".join(bad[:3]))
    no_list = _summary_host(tmp_path, {"received": 2, "bad_count": 1})
    with pytest.raises(errors.TransferError, match=r"^1 media file\(s\) arrived on here damaged "
                                                   r"or changed since they were listed: \. "):
        media_push.push(no_list, Ctx(ctx.paths.media_index), "job")


@pytest.mark.parametrize("summary", [{}, {"received": 1, "note": "n" * 400}])
def test_a_host_that_kept_fewer_files_quotes_its_answer_cut(tmp_path, summary):
    from potato.training.backends import errors, media_push
    ctx = Ctx(media_index(tmp_path, [b"one file", b"two files"]))
    with pytest.raises(errors.TransferError) as e:
        media_push.push(_summary_host(tmp_path, summary), ctx, "job")
    said = str(e.value)
    kept = summary.get("received", 0)
    assert said.startswith("2 media files were sent to here but it kept %d of them (its "
                           "media_receive.py answered %s)" % (kept, json.dumps(summary)[:300]))
    assert len(json.dumps(summary)) < 300 or json.dumps(summary)[:301] not in said
    assert "%s/media there" % (tmp_path / "remote") in said


def test_a_host_that_says_nothing_at_the_end_kept_nothing(tmp_path):
    from potato.training.backends import errors, media_push
    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    with pytest.raises(errors.TransferError, match=r"^1 media files were sent to here but it "
                                                   r"kept 0 of them \(its media_receive\.py "
                                                   r"answered \{\}\)"):
        media_push.push(_host_script(tmp_path, "print('no summary')"), ctx, "job")
    assert ctx.lines[-1].endswith("the host verified 0")  # the log says so before the error


def test_a_host_that_fails_at_the_end_is_said_with_its_exit_and_words(tmp_path):
    from potato.training.backends import errors, media_push
    host = _host_script(tmp_path, "sys.stderr.write('disk on fire\\n'); sys.exit(3)")
    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    with pytest.raises(errors.TransferError, match=r"^Copying media to here failed: exit 3: "
                                                   r"disk on fire$"):
        media_push.push(host, ctx, "job")


def test_an_empty_index_sends_nothing(tmp_path):
    from potato.training.backends import media_push
    host = LocalHost(tmp_path / "remote")
    for index in (None, {}):
        if index is not None:
            (tmp_path / "media.json").write_text(json.dumps(index))
        ctx = Ctx(tmp_path / "media.json")
        media_push.push(host, ctx, "job")
        assert host.commands == [] and ctx.lines == [] and ctx.steps == []


def test_the_host_program_runs_with_every_value_quoted(tmp_path):
    from potato.training.backends import media_push
    command = media_push.cache_command("/opt/py 3/python", "/w/it's here", "sync", "job;1", 2.5)
    import shlex
    argv = shlex.split(command)
    assert argv[:3] == ["/opt/py 3/python", "-S", "-c"]
    assert argv[3] == media_push.cache_source()
    assert argv[4:] == ["sync", "/w/it's here", "job;1", "2.5"]
    assert shlex.split(media_push.cache_command("p", "d", "need", "j", 100.0))[-1] == "100"


def test_the_host_program_holds_its_four_modules_in_order():
    from potato.training.backends import media_push
    source = media_push.cache_source()
    starts = []
    for module in (media_tar, mc, ms, mr):
        with open(module.__file__, encoding="utf-8") as f:
            text = f.read()
        starts.append(source.index(text))
    assert starts == sorted(starts) and starts[0] == 0
    compile(source, "<host>", "exec")  # one program


def test_the_hosts_answer_is_found_among_other_lines():
    from potato.training.backends import media_push
    out = "a warning\n%s{\"missing\": []}\n%s{\"received\": 9}\n" % (mc.MARK, mc.MARK)
    assert media_push.parse(out) == {"missing": []}  # the first such line
    for bad in ("", "no answer\n", " %s{}\n" % mc.MARK):
        with pytest.raises(ValueError, match="no media line"):
            media_push.parse(bad)


def test_progress_counts_files_and_megabytes():
    from potato.training.backends import media_push
    assert media_push.progress_words("gpu", 1234, 5678, MB // 2, 1500 * MB) == (
        "copying media to gpu: 1,234 of 5,678 files, 0.5 of 1,500 MB")


@pytest.mark.parametrize("size", [0, 1, 8 ** 11 - 1, 8 ** 11, 2 ** 88 - 1])
def test_a_header_holds_every_size_tar_reads_back(size):
    name = sha(b"%d" % size)
    block = tar_header(name, size, 1700000000)
    assert len(block) == 512
    info = tarfile.TarInfo.frombuf(block, "utf-8", "strict")
    assert (info.name, info.size, info.mtime, info.mode, info.isfile()) == (
        name, size, 1700000000, 0o600, True)
    assert media_tar.tar_header(block) == (name, b"0", size)


@pytest.mark.parametrize("size", [0, 88, 1000, 8 ** 11 - 1])
def test_a_size_in_tars_octal_range_is_written_as_tarfile_writes_it(size):
    """Octal digits, as every tar reads (base-256 only where octal cannot hold the size)."""
    info = tarfile.TarInfo("a" * 64)
    info.size, info.mtime, info.mode = size, 1700000000, 0o600
    ours = tar_header("a" * 64, size, 1700000000)
    theirs = info.tobuf(format=tarfile.USTAR_FORMAT)
    assert ours[:148] == theirs[:148]  # name, mode, ids, size and time: the same bytes


def test_a_header_name_must_fit_its_field():
    assert tarfile.TarInfo.frombuf(tar_header("n" * 99, 1, 0), "utf-8", "strict").name == \
        "n" * 99
    for name in ("n" * 100, "n" * 300):
        with pytest.raises(ValueError, match="tar member name 'n+' is too long"):
            tar_header(name, 1, 0)


def test_a_host_command_that_cannot_start_is_said(tmp_path):
    from potato.training.backends import errors, media_push

    class NoSsh(LocalHost):
        def argv(self, command):
            return [str(tmp_path / "no-such-ssh"), command]

    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    with pytest.raises(errors.TransferError, match=r"^cannot start .*no-such-ssh"):
        media_push.push(NoSsh(tmp_path / "remote"), ctx, "job")


@pytest.mark.parametrize("when", ["check", "stream", "finish"])
def test_ssh_failing_on_its_own_is_a_connection_failure_with_its_words(tmp_path, when):
    """ssh's own failure (exit 255) while the host checks, takes the stream or ends: ssh's
    sentence (user@host named), not "the copy failed"."""
    from potato.training.backends import errors, media_push
    fail = ("echo 'Permission denied (publickey).' >&2; exec 1>&-; sleep 0.2; exit 255")
    answer = "head -n 1 >/dev/null; echo 'POTATO-MEDIA {\"missing\": %s}'; "
    files = [os.urandom(1 << 20) for _ in range(3)]
    missing = json.dumps([[sha(d), len(d)] for d in files])
    script = {"check": "head -n 1 >/dev/null; " + fail,
              "stream": answer % missing + "head -c 100 >/dev/null; " + fail,
              "finish": answer % missing + "cat >/dev/null; " + fail}[when]

    class Ssh(LocalHost):
        def argv(self, command):
            self.commands.append(command)
            return ["sh", "-c", script]

    host = Ssh(tmp_path / "remote")
    host.options.user = "ann"
    ctx = Ctx(media_index(tmp_path, files))
    with pytest.raises(errors.ConnectError) as e:
        media_push.push(host, ctx, "job")
    assert str(e.value) == errors.ssh_failure("here", "ann", 255, "Permission denied")
    assert "ann@here" in str(e.value)


@pytest.mark.parametrize("when", ["check", "stream"])
def test_a_host_that_fails_otherwise_is_said_with_its_last_five_lines(tmp_path, when):
    from potato.training.backends import errors, media_push
    words = "; ".join("echo line%d >&2" % i for i in range(8))
    files = [os.urandom(1 << 20) for _ in range(3)]
    missing = json.dumps([[sha(d), len(d)] for d in files])
    script = {"check": "head -n 1 >/dev/null; %s; exit 4" % words,
              "stream": "head -n 1 >/dev/null; echo 'POTATO-MEDIA {\"missing\": %s}'; "
                        "head -c 100 >/dev/null; %s; exit 4" % (missing, words)}[when]

    class Host(LocalHost):
        def argv(self, command):
            return ["sh", "-c", script]

    ctx = Ctx(media_index(tmp_path, files))
    with pytest.raises(errors.TransferError) as e:
        media_push.push(Host(tmp_path / "remote"), ctx, "job")
    said = str(e.value)
    assert said.endswith(": line3\nline4\nline5\nline6\nline7") and "line2" not in said, said
    assert said.startswith({"check": "Checking the media cache on here failed (exit 4)",
                            "stream": "Copying media to here failed: the stream to here closed "
                                      "early"}[when]), said


def test_a_host_that_never_answers_the_list_names_the_wait(tmp_path, monkeypatch):
    from potato.training.backends import errors, media_push
    monkeypatch.setattr(media_push, "CHECK_S", 1)
    fake = tmp_path / "slow-python"
    fake.write_text("#!%s\nimport time\ntime.sleep(600)\n" % sys.executable)
    fake.chmod(0o755)
    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    started = time.monotonic()
    with pytest.raises(errors.ConnectError, match=r"^ssh to here did not answer within 1 s\. "
                                                   r"Check the host and the network\.$"):
        media_push.push(LocalHost(tmp_path / "remote", python=str(fake)), ctx, "job")
    assert time.monotonic() - started < 30


def test_a_host_that_fails_without_a_word_is_said_with_its_exit(tmp_path):
    from potato.training.backends import errors, media_push

    class Host(LocalHost):
        def argv(self, command):
            return ["sh", "-c", "head -n 1 >/dev/null; exit 4"]

    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    with pytest.raises(errors.TransferError) as e:
        media_push.push(Host(tmp_path / "remote"), ctx, "job")
    assert str(e.value) == "Checking the media cache on here failed (exit 4)"


class FrozenClock(Clock):
    def monotonic(self):
        return 1000.0  # a copy that takes no time: only the first and last steps are said


def test_the_copy_says_its_progress_at_the_start_and_the_end(tmp_path, monkeypatch):
    from potato.training.backends import media_push
    monkeypatch.setattr(media_push, "time", FrozenClock())
    files = [os.urandom(1000 + i) for i in range(50)]
    ctx = Ctx(media_index(tmp_path, files))
    media_push.push(LocalHost(tmp_path / "remote"), ctx, "job")
    assert ctx.steps == ["checking media on here: 50 files, 0.0 MB",
                         "copying media to here: 0 of 50 files, 0 of 0.0 MB",
                         "copying media to here: 50 of 50 files, 0.0 of 0.0 MB"], ctx.steps
    assert " in 0.0 s (" in ctx.lines[-1], ctx.lines  # no time passed: no division by zero


def test_a_large_file_goes_in_blocks_and_arrives_whole(tmp_path):
    from potato.training.backends import media_push
    files = [os.urandom(9 * MB + 7), b"small", os.urandom(5 * MB)]
    ctx = Ctx(media_index(tmp_path, files))
    media_push.push(LocalHost(tmp_path / "remote"), ctx, "job")
    for data in files:
        assert mc.have(str(tmp_path / "remote" / "media"), sha(data), len(data))
    assert "the host verified 3" in ctx.lines[-1]


def test_a_large_file_that_shrank_since_it_was_listed_is_named(tmp_path):
    from potato.training.backends import errors, media_push
    ctx = Ctx(media_index(tmp_path, [os.urandom(6 * MB)]))
    with open(tmp_path / "0.png", "r+b") as f:
        f.truncate(5 * MB)
    with pytest.raises(errors.TransferError) as e:
        media_push.push(LocalHost(tmp_path / "remote"), ctx, "job")
    # the whole file's sizes, not those of the block that came short
    assert "0.png cannot be read (it has %d bytes, not the %d listed" % (5 * MB, 6 * MB) in \
        str(e.value), str(e.value)


class FixedClock(Clock):
    def time(self):
        return 1700000000.0  # the files' time in the stream's headers


def test_the_stream_is_exactly_a_tar_of_the_missing_files(tmp_path, monkeypatch):
    """Each file: its header, its bytes, zeros to a 512-byte boundary; then two zero blocks
    (what a tar reader takes as the end)."""
    from potato.training.backends import media_push
    monkeypatch.setattr(media_push, "time", FixedClock())
    saved = tmp_path / "stream.tar"
    host = _host_script(tmp_path, "")
    host.options.python = str(tmp_path / "saving-python")
    (tmp_path / "saving-python").write_text(
        "#!%s\nimport json, sys\nw = json.loads(sys.stdin.readline())\n"
        "print('POTATO-MEDIA ' + json.dumps({'missing': w}), flush=True)\n"
        "data = sys.stdin.buffer.read()\nopen(%r, 'wb').write(data)\n"
        "print('POTATO-MEDIA ' + json.dumps({'received': len(w)}))\n"
        % (sys.executable, str(saved)))
    (tmp_path / "saving-python").chmod(0o755)
    files = [b"", b"x" * 511, b"y" * 512, b"z" * 513, os.urandom(4 * MB + 1)]  # a block + 1
    ctx = Ctx(media_index(tmp_path, files))
    media_push.push(host, ctx, "job")
    by_sha = sorted(files, key=sha)  # the host asked for them in the list's order
    assert saved.read_bytes() == stream_of(by_sha)


def test_an_answer_that_comes_in_pieces_is_read_whole(tmp_path):
    from potato.training.backends import media_push
    fake = tmp_path / "slow-link-python"
    fake.write_text(
        "#!%s\nimport json, sys, time\nw = json.loads(sys.stdin.readline())\n"
        "line = 'POTATO-MEDIA ' + json.dumps({'missing': w})\n"
        "for part in (line[:5], line[5:20], line[20:] + '\\n'):\n"
        "    sys.stdout.write(part)\n    sys.stdout.flush()\n    time.sleep(0.2)\n"
        "while sys.stdin.buffer.read(1 << 20):\n    pass\n"
        "end = 'POTATO-MEDIA ' + json.dumps({'received': len(w)}) + '\\n'\n"
        "sys.stdout.write(end[:7])\nsys.stdout.flush()\ntime.sleep(0.2)\nprint(end[7:])\n"
        % sys.executable)
    fake.chmod(0o755)
    ctx = Ctx(media_index(tmp_path, [b"one file", b"two files"]))
    media_push.push(LocalHost(tmp_path / "remote", python=str(fake)), ctx, "job")
    assert ctx.lines[-1].endswith("the host verified 2"), ctx.lines


def test_a_host_whose_words_are_not_utf8_is_still_said(tmp_path):
    from potato.training.backends import errors, media_push

    class Host(LocalHost):
        def argv(self, command):
            return ["sh", "-c", "head -n 1 >/dev/null; printf 'bad \\377\\376 bytes\\n' >&2; "
                                "exit 4"]

    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    with pytest.raises(errors.TransferError) as e:
        media_push.push(Host(tmp_path / "remote"), ctx, "job")
    assert str(e.value).endswith(": bad \ufffd\ufffd bytes")


def test_ssh_failing_for_another_reason_says_its_exit_and_words(tmp_path):
    from potato.training.backends import errors, media_push

    class Ssh(LocalHost):
        def argv(self, command):
            return ["sh", "-c", "head -n 1 >/dev/null; echo 'kex_exchange_identification: read: "
                                "Connection reset by peer' >&2; exit 255"]

    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    with pytest.raises(errors.ConnectError) as e:
        media_push.push(Ssh(tmp_path / "remote"), ctx, "job")
    assert str(e.value) == ("ssh to here failed (exit 255): kex_exchange_identification: read: "
                            "Connection reset by peer")


def test_a_host_that_stops_taking_the_stream_is_not_a_file_that_cannot_be_read(tmp_path):
    """The host closes its side while still running: the large file's write breaks the pipe,
    which is the stream closing early, not the file failing to read."""
    from potato.training.backends import errors, media_push
    files = [os.urandom(5 * MB)]
    missing = json.dumps([[sha(d), len(d)] for d in files])

    class Host(LocalHost):
        def argv(self, command):
            return ["sh", "-c", "head -n 1 >/dev/null; echo 'POTATO-MEDIA {\"missing\": %s}'; "
                                "exec 0<&-; sleep 1; exit 4" % missing]

    ctx = Ctx(media_index(tmp_path, files))
    with pytest.raises(errors.TransferError) as e:
        media_push.push(Host(tmp_path / "remote"), ctx, "job")
    assert str(e.value) == "Copying media to here failed: the stream to here closed early"


def test_a_stalled_copy_counts_the_streams_headers_in_its_total(tmp_path, monkeypatch):
    """The stall's sentence says how much of the whole stream went: the files, a 512-byte
    header each and the end (here 2.5 MB less 1,000 bytes of files, so 3 MB with them)."""
    from potato.training.backends import errors, media_push
    monkeypatch.setattr(media_push, "WRITE_STALL_S", 1)
    first = 600_000  # written alone; then the rest, of which the 1 MB pipe takes a part
    ctx = Ctx(media_index(tmp_path, [os.urandom(first),
                                     os.urandom(5 * MB // 2 - 1000 - first - 512)]))
    with pytest.raises(errors.TransferError) as e:
        media_push.push(_stuck_host(tmp_path), ctx, "job")
    assert "(1 of 3 MB sent)" in str(e.value), str(e.value)  # all the pipe took, of the whole


def test_a_push_that_fails_on_this_side_ends_the_host_command(tmp_path):
    """A failure here mid-stream (the run's step cannot be written): the host's command does
    not outlive the push."""
    from potato.training.backends import media_push
    host = _stuck_host(tmp_path)
    pid_file = tmp_path / "pid"
    text = (tmp_path / "stuck-python").read_text().replace(
        "import json, sys, time\n", "import json, os, sys, time\nopen(%r, 'w').write(str("
        "os.getpid()))\n" % str(pid_file))
    (tmp_path / "stuck-python").write_text(text)

    class Failing(Ctx):
        def set_step(self, step):
            if step.startswith("copying"):
                raise RuntimeError("the run's state cannot be written")
            super().set_step(step)

    ctx = Failing(media_index(tmp_path, [b"one file"]))
    with pytest.raises(RuntimeError):
        media_push.push(host, ctx, "job")
    pid = int(pid_file.read_text())
    deadline = time.time() + 10
    while _running(pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _running(pid), "the host's command outlived the push"


def _running(pid):
    """Whether ``pid`` still runs: a zombie has ended (in a container whose first process
    reaps no orphans, the killed command stays one)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_line_from_the_host_that_is_not_utf8_does_not_hide_its_answer(tmp_path):
    from potato.training.backends import media_push
    fake = tmp_path / "banner-python"
    fake.write_text("#!%s\nimport json, sys\nw = json.loads(sys.stdin.readline())\n"
                    "sys.stdout.buffer.write(b'welcome \\xff\\xfe\\n')\n"
                    "print('POTATO-MEDIA ' + json.dumps({'missing': w}), flush=True)\n"
                    "while sys.stdin.buffer.read(1 << 20):\n    pass\n"
                    "sys.stdout.buffer.write(b'bye \\xff\\n')\n"
                    "print('POTATO-MEDIA ' + json.dumps({'received': len(w)}))\n"
                    % sys.executable)
    fake.chmod(0o755)
    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    media_push.push(LocalHost(tmp_path / "remote", python=str(fake)), ctx, "job")
    assert ctx.lines[-1].endswith("the host verified 1"), ctx.lines


def test_a_host_command_that_ignores_sigterm_is_killed(tmp_path, monkeypatch):
    """The host's side does not answer and ignores SIGTERM: after a few seconds it is killed,
    and the push ends with the wait named."""
    from potato.training.backends import errors, media_push
    monkeypatch.setattr(media_push, "CHECK_S", 1)

    class Deaf(LocalHost):
        def argv(self, command):
            return ["sh", "-c", "trap '' TERM; echo $$ > %s; sleep 600" % (tmp_path / "pid")]

    ctx = Ctx(media_index(tmp_path, [b"one file"]))
    started = time.monotonic()
    with pytest.raises(errors.ConnectError, match="did not answer within 1 s"):
        media_push.push(Deaf(tmp_path / "remote"), ctx, "job")
    assert time.monotonic() - started < 60
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "pid").read_text()), 0)
