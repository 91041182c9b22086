"""The host's side of the media stream (potato/training/remote/media_receive.py): the stream
reader's batches, counts and messages, and the host program (``main``) run in this process so
that every line is seen. Also the tests tools/mutation.py runs against the host's media modules
(docs/testing.md); the slower end-to-end cases are in test_media_stream.py."""

import io
import json
import os
import threading
import time

import pytest

from potato.training.remote import media_cache as mc
from potato.training.remote import media_receive as mr
from potato.training.remote import media_store as ms
from potato.training.remote import media_tar as mt
from tests.media_host import host, member, sha, stream_of


# -- media_receive: receive -----------------------------------------------------------------------

def _pinned(tmp_path, files, name="job"):
    cache = str(tmp_path / "media")
    mc.pin(cache, name, [(sha(d), len(d)) for d in files])
    return cache


def test_receive_counts_files_and_bytes_and_names_its_fields(tmp_path):
    files = [os.urandom(n) for n in (1, 700, 5000)]
    cache = _pinned(tmp_path, files)
    old = os.urandom(4000)
    ms.put(cache, sha(old), old)
    os.utime(mc.file_path(cache, sha(old)), (1, 1))  # least recently used, in no pin
    out = mr.receive(cache, "job", io.BytesIO(stream_of(files)), 6000)
    assert out == {"received": 3, "bytes": 5701, "bad": [], "bad_count": 0, "evicted": 1,
                   "evicted_bytes": 4000, "held_bytes": 5701}


def test_a_large_file_is_counted_and_the_files_after_it_are_read(tmp_path, monkeypatch):
    monkeypatch.setattr(mr, "SMALL_FILE", 1000)
    files = [os.urandom(3000), b"small", os.urandom(2000)]
    cache = _pinned(tmp_path, files)
    out = mr.receive(cache, "job", io.BytesIO(stream_of(files)), 1 << 30)
    assert (out["received"], out["bytes"], out["bad_count"]) == (3, 5005, 0)


def test_a_large_file_with_other_bytes_is_dropped_and_the_stream_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(mr, "SMALL_FILE", 1000)
    big, small = os.urandom(3000), b"after it"
    cache = _pinned(tmp_path, [big, small])
    data = bytearray(stream_of([big, small]))
    data[600] ^= 1  # in the large file's bytes
    out = mr.receive(cache, "job", io.BytesIO(bytes(data)), 1 << 30)
    assert (out["received"], out["bad_count"]) == (1, 1)
    assert "another sha256" in out["bad"][0] and mc.have(cache, sha(small), len(small))


def test_a_large_file_cut_short_ends_the_stream(tmp_path, monkeypatch):
    monkeypatch.setattr(mr, "SMALL_FILE", 1000)
    big = os.urandom(3000)
    cache = _pinned(tmp_path, [big])
    out = mr.receive(cache, "job", io.BytesIO(stream_of([big])[:2000]), 1 << 30)
    assert out["received"] == 0 and out["bad"] == [
        "media file %s arrived with 1488 of 3000 bytes" % sha(big)[:12]]


def test_an_old_style_regular_file_is_kept_and_a_bad_name_is_quoted(tmp_path):
    data = b"typeflag NUL"
    cache = _pinned(tmp_path, [data])
    stream = member("x" * 100, b"") + member(sha(data), data, kind=b"\0") + bytes(1024)
    out = mr.receive(cache, "job", io.BytesIO(stream), 1 << 30)
    assert out["received"] == 1
    assert out["bad"] == ["'%s' (not a file this run needs)" % ("x" * 80)]


def test_a_cut_small_file_is_named(tmp_path):
    data = os.urandom(3000)
    cache = _pinned(tmp_path, [data])
    out = mr.receive(cache, "job", io.BytesIO(stream_of([data])[:1000]), 1 << 30)
    assert out["bad"] == ["media file %s arrived with 488 of 3000 bytes (the stream ended)"
                          % sha(data)[:12]]


def test_at_most_twenty_problems_are_listed_and_all_are_counted(tmp_path):
    cache = _pinned(tmp_path, [b"one"])
    stream = b"".join(member("bad%d" % i, b"") for i in range(25)) + bytes(1024)
    out = mr.receive(cache, "job", io.BytesIO(stream), 1 << 30)
    assert (len(out["bad"]), out["bad_count"]) == (20, 25)


class Reading(io.BytesIO):
    """A stream that says how far it has been read."""


def puts_by_position(monkeypatch, stream):
    """Each file's write, as how far the stream had been read when it was written."""
    at, real = [], mr.put
    monkeypatch.setattr(mr, "put", lambda *a: at.append(stream.tell()) or real(*a))
    return at


@pytest.mark.parametrize("sizes, batches", [
    ([1535, 1536] * 6, [3, 3, 3, 3]),   # header and bytes: 2047 + 2048 = 4095, one short of 4096
    ([1536] * 6, [2, 2, 2]),            # 2048 + 2048: a batch of exactly BATCH goes at once
])
def test_small_files_are_written_in_batches_of_batch_bytes(tmp_path, monkeypatch, sizes,
                                                            batches):
    """The reader reads a batch (BATCH bytes with their headers), then writes its files."""
    monkeypatch.setattr(mr, "BATCH", 4096)
    files = [os.urandom(n) for n in sizes]
    cache = _pinned(tmp_path, files)
    stream = Reading(stream_of(files))
    at = puts_by_position(monkeypatch, stream)
    out = mr.receive(cache, "job", stream, 1 << 30)
    assert out["received"] == len(files)
    assert [at.count(pos) for pos in sorted(set(at))] == batches
    assert at[-1] == len(stream_of(files, end=False))  # the last batch: read, then written


def _writers_started(monkeypatch):
    """The writer threads each receive() started, a count a call (the start of a batch's
    writes in the reader's own thread starts none)."""
    started, real_start, real_receive = [], threading.Thread.start, mr.receive

    def start(self):
        real_start(self)
        started[-1] += 1

    def receive(*a, **kw):
        started.append(0)
        return real_receive(*a, **kw)
    monkeypatch.setattr(threading.Thread, "start", start)
    monkeypatch.setattr(mr, "receive", receive)
    return started


def test_quick_writes_stay_in_the_readers_thread(tmp_path, monkeypatch):
    files = [os.urandom(1000 + i) for i in range(200)]
    cache = _pinned(tmp_path, files)
    monkeypatch.setattr(mr, "BATCH", 4096)
    monkeypatch.setattr(mr, "SLOW_WRITE_S", 10.0)
    started = _writers_started(monkeypatch)
    where = []
    real = mr.put
    monkeypatch.setattr(mr, "put", lambda *a: where.append(threading.current_thread())
                        or real(*a))
    out = mr.receive(cache, "job", io.BytesIO(stream_of(files)), 1 << 30)
    assert out["received"] == 200 and started == [0]
    assert set(where) == {threading.current_thread()}


def test_slow_writes_move_to_the_writer_threads_after_slow_after_files(tmp_path, monkeypatch):
    """Writing is slow (a network file system): after SLOW_AFTER files at over SLOW_WRITE_S
    each, the rest go to ``writers`` threads; every file still arrives, each once."""
    files = [os.urandom(1000 + i) for i in range(200)]
    cache = _pinned(tmp_path, files)
    monkeypatch.setattr(mr, "BATCH", 4096)  # 3 files a batch
    monkeypatch.setattr(mr, "SLOW_AFTER", 6)
    monkeypatch.setattr(mr, "SLOW_WRITE_S", 0.002)
    where = []
    real = mr.put

    def slow(cache_, sha_, data_, whole_first=False):
        where.append((threading.current_thread() is threading.main_thread(), whole_first))
        time.sleep(0.003)
        real(cache_, sha_, data_, whole_first)
    monkeypatch.setattr(mr, "put", slow)
    started = _writers_started(monkeypatch)
    out = mr.receive(cache, "job", io.BytesIO(stream_of(files)), 1 << 30, writers=3)
    assert out["received"] == 200 and started == [3]
    # two batches here, written straight; then threads, each file whole before its name
    assert where[:6] == [(True, False)] * 6 and set(where[6:]) == {(False, True)}
    assert all(mc.have(cache, sha(d), len(d)) for d in files)
    started.clear()
    out = mr.receive(_pinned(tmp_path / "one", files), "job",
                     io.BytesIO(stream_of(files)), 1 << 30, writers=1)
    assert out["received"] == 200 and started == [0]  # one writer: the reader's own thread


def writes_taking(monkeypatch, secs, also=None):
    """Each file's write takes ``secs[i]`` seconds on a clock of its own (nothing else moves
    it: the stream's reads take no time); ``also()`` is called at each."""
    clock, secs = [0.0], list(secs)

    def put(cache, sha_, data, whole_first=False):
        clock[0] += secs.pop(0) if secs else 0.0
        if also:
            also()
    monkeypatch.setattr(mr, "put", put)
    monkeypatch.setattr(mr.time, "monotonic", lambda: clock[0])


def test_the_move_to_threads_needs_slow_after_files_at_over_slow_write_s(tmp_path, monkeypatch):
    monkeypatch.setattr(mr, "SLOW_AFTER", 6)
    monkeypatch.setattr(mr, "SLOW_WRITE_S", 0.125)  # a binary fraction: sums are exact
    started = _writers_started(monkeypatch)

    def threads(files, secs, count=4):
        data = [b"%d" % i for i in range(files)]  # one batch: the stream's whole
        writes_taking(monkeypatch, secs)
        out = mr.receive(_pinned(tmp_path / str(len(started)), data), "job",
                         io.BytesIO(stream_of(data)), 1 << 30, writers=count)
        assert out["received"] == files
        return started[-1]
    assert threads(6, [0.125] * 6) == 0  # exactly SLOW_WRITE_S each: not over it
    assert threads(6, [0.125] * 5 + [0.125 + 2 ** -20]) == 4
    assert threads(5, [1.0] * 5) == 0  # fewer than SLOW_AFTER files
    assert threads(6, [1.0] * 6, count=1) == 0  # one writer: the reader's own thread
    assert threads(6, [1.0] * 6, count=2) == 2
    assert threads(6, [1.0] * 6, count=0) == 0  # none asked: the reader's own thread


def test_threads_that_cannot_start_leave_the_writing_to_the_reader(tmp_path, monkeypatch):
    """A host that limits its processes refuses a thread: the ones that started write, or the
    reader goes on alone; every file arrives once."""
    files = [os.urandom(1000 + i) for i in range(60)]
    monkeypatch.setattr(mr, "BATCH", 4096)
    monkeypatch.setattr(mr, "SLOW_AFTER", 3)
    monkeypatch.setattr(mr, "SLOW_WRITE_S", 0.0)
    real_start = threading.Thread.start
    for allowed in (0, 2):
        started = []

        def start(self):
            if len(started) >= allowed:
                raise RuntimeError("can't start new thread")
            started.append(self)
            real_start(self)
        monkeypatch.setattr(threading.Thread, "start", start)
        seen = _writers_started(monkeypatch)
        cache = _pinned(tmp_path / str(allowed), files)
        out = mr.receive(cache, "job", io.BytesIO(stream_of(files)), 1 << 30, writers=4)
        assert out["received"] == 60 and seen == [allowed]
        assert all(mc.have(cache, sha(d), len(d)) for d in files)
        assert not any(t.is_alive() for t in started) and all(t.daemon for t in started)


def test_the_move_to_threads_weighs_every_file_so_far(tmp_path, monkeypatch):
    """The average is over all the files written so far, not the last batch's: a slow
    start followed by a quick batch still moves the rest to the threads."""
    monkeypatch.setattr(mr, "SLOW_AFTER", 6)
    monkeypatch.setattr(mr, "SLOW_WRITE_S", 2 ** -10)
    monkeypatch.setattr(mr, "BATCH", 3 * 1024)  # 3 files a batch (512 header + 512 bytes)
    started = _writers_started(monkeypatch)
    files = [os.urandom(512) for _ in range(9)]
    slow, quick = 2 ** -7, 2 ** -14  # 3 files in 24 ms, then 3 in 0.2 ms: 24.2 ms for 6
    stream = Reading(stream_of(files))
    where = []
    writes_taking(monkeypatch, [slow] * 3 + [quick] * 3, lambda: where.append(
        threading.current_thread() is threading.main_thread()))
    out = mr.receive(_pinned(tmp_path, files), "job", stream, 1 << 30, writers=2)
    assert out["received"] == 9 and started == [2]
    assert where == [True] * 6 + [False] * 3  # the third batch: on the threads


def test_a_python_without_the_fcntl_name_uses_linuxs_number(monkeypatch):
    """Python 3.8's fcntl has no F_SETPIPE_SZ: the call uses Linux's 1031."""
    import fcntl
    calls = []
    monkeypatch.delattr(fcntl, "F_SETPIPE_SZ", raising=False)
    monkeypatch.setattr(fcntl, "fcntl", lambda fd, cmd, arg: calls.append((fd, cmd, arg)))
    mr.wide_pipe(7)
    assert calls == [(7, 1031, 1 << 20)]


def test_the_reader_runs_at_most_write_ahead_bytes_ahead_of_the_writers(tmp_path, monkeypatch):
    """Writers that are stuck (a hung network disk) hold the reader back: it reads on while
    whole batches (each at most BATCH plus one small file) fit in WRITE_AHEAD, then waits;
    every file still arrives once they go on."""
    monkeypatch.setattr(mr, "SMALL_FILE", 1024)
    monkeypatch.setattr(mr, "BATCH", 3072)  # 2 files a batch (512 header + 1024 bytes each)
    monkeypatch.setattr(mr, "WRITE_AHEAD", 3 * (3072 + 1024) + 4095)  # 3 batches
    monkeypatch.setattr(mr, "SLOW_AFTER", 1)
    monkeypatch.setattr(mr, "SLOW_WRITE_S", -1.0)  # threads after the first batch
    files = [os.urandom(1024) for _ in range(40)]
    cache = _pinned(tmp_path, files)
    stream = Reading(stream_of(files))
    gate, holding, real = threading.Event(), threading.Semaphore(0), mr.put
    reader = []

    def put(*a):
        if threading.current_thread() not in reader:  # a writer thread: stuck until the gate
            holding.release()
            assert gate.wait(20)
        real(*a)
    monkeypatch.setattr(mr, "put", put)
    done = []

    def run():
        reader.append(threading.current_thread())
        done.append(mr.receive(cache, "job", stream, 1 << 30, writers=2))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        assert holding.acquire(timeout=20) and holding.acquire(timeout=20)  # both writers
        # read: the first batch (written by the reader), one each for the writers, three
        # queued and the one waiting to be queued: 7 batches, 14 files
        ahead = 14 * 1536
        deadline = time.monotonic() + 20
        while stream.tell() < ahead and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        assert stream.tell() == ahead
    finally:
        gate.set()
        t.join(20)
    assert not t.is_alive() and done[0]["received"] == 40
    assert all(mc.have(cache, sha(d), len(d)) for d in files)


def test_the_writers_numbers_are_the_documented_ones():
    """docs/backends/ssh.md: threads once writing takes over 0.3 ms a file (of 64), four."""
    assert (mr.SLOW_WRITE_S, mr.SLOW_AFTER, mr.WRITERS) == (0.0003, 64, 4)
    assert mr.SMALL_FILE == 4 << 20 and mr.BATCH == 256 << 10 and mr.WRITE_AHEAD == 64 << 20


def test_a_disk_error_stops_the_reader_early(tmp_path, monkeypatch):
    import errno
    files = [os.urandom(3000 + i) for i in range(60)]
    cache = _pinned(tmp_path, files)
    data = stream_of(files)
    stream = io.BytesIO(data)

    def full(cache_, sha_, data_, *whole_first):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mr, "put", full)
    monkeypatch.setattr(mr, "BATCH", 4096)
    monkeypatch.setattr(mr, "WRITE_AHEAD", 4096)  # one batch waits for the writer at most
    with pytest.raises(OSError, match="No space left"):
        mr.receive(cache, "job", stream, 1 << 30, writers=1)
    assert stream.tell() < len(data) // 2


def test_the_pin_is_touched_only_every_pin_touch_s(tmp_path, monkeypatch):
    files = [os.urandom(2000) for _ in range(10)]
    cache = _pinned(tmp_path, files)
    calls = []
    real = mr.keep_pin
    monkeypatch.setattr(mr, "keep_pin", lambda *a: calls.append(a) or real(*a))
    mr.receive(cache, "job", io.BytesIO(stream_of(files)), 1 << 30)
    assert len(calls) == 1  # at the end only: PIN_TOUCH_S (60 s) did not pass


def test_a_pin_removed_while_the_stream_arrives_is_written_again(tmp_path, monkeypatch):
    files = [os.urandom(2000) for _ in range(3)]
    cache = _pinned(tmp_path, files)
    mc.unpin(cache, "job")
    monkeypatch.setattr(mr, "read_pin", lambda c, n: {sha(d): len(d) for d in files})
    monkeypatch.setattr(mr, "PIN_TOUCH_S", 0)
    out = mr.receive(cache, "job", io.BytesIO(stream_of(files)), 1 << 30)
    assert out["received"] == 3
    assert mc.read_pin(cache, "job") == {sha(d): len(d) for d in files}


def test_a_pin_removed_while_the_stream_arrives_is_written_again_at_the_end(tmp_path, monkeypatch):
    files = [os.urandom(2000) for _ in range(3)]
    cache = _pinned(tmp_path, files)
    data = stream_of(files)

    class Unpinning(io.BytesIO):
        def read(self, n=-1):
            if self.tell() > len(data) // 2:
                mc.unpin(cache, "job")  # another process's cleanup, say
            return super().read(n)

    monkeypatch.setattr(mr, "PIN_TOUCH_S", 3600)
    assert mr.receive(cache, "job", Unpinning(data), 1 << 30)["received"] == 3
    assert mc.read_pin(cache, "job") == {sha(d): len(d) for d in files}


# -- media_receive: the host program --------------------------------------------------------------

def test_need_prints_the_missing_pairs(tmp_path, host):
    here, there = b"here", b"not here"
    ms.put(str(tmp_path / "r" / "media"), sha(here), here)
    wanted = [[sha(here), 4], [sha(there), 8]]
    code, lines = host(["need", str(tmp_path / "r"), "job", "100"], json.dumps(wanted).encode())
    assert code is None and lines == [{"missing": [[sha(there), 8]]}]
    assert mc.read_pin(str(tmp_path / "r" / "media"), "job") == {sha(here): 4, sha(there): 8}


def test_sync_answers_then_receives(tmp_path, host):
    files = [b"one", b"two"]
    wanted = json.dumps([[sha(d), len(d)] for d in files]).encode() + b"\n"
    code, lines = host(["sync", str(tmp_path / "r"), "job", "100"], wanted + stream_of(files))
    assert code is None and lines[0] == {"missing": [[sha(d), len(d)] for d in files]}
    assert (lines[1]["received"], lines[1]["bytes"]) == (2, 6)
    assert oct(os.stat(tmp_path / "r" / "media").st_mode & 0o777) == "0o700"
    assert oct(os.stat(tmp_path / "r").st_mode & 0o777) == "0o700"  # made under umask 077


def test_a_syncs_trim_trusts_the_record_its_reservation_updated(tmp_path, host, monkeypatch):
    """The sync reserves the missing files' bytes before the stream: its trim then trusts the
    cache's record (within the limit, counted before the reservation) and lists nothing."""
    files = [b"one", b"two"]
    wanted = json.dumps([[sha(d), len(d)] for d in files]).encode() + b"\n"
    mc.open_cache(str(tmp_path / "r" / "media"))  # a record: 0 bytes
    monkeypatch.setattr(mc, "entries", lambda c: pytest.fail("listed the cache"))
    code, lines = host(["sync", str(tmp_path / "r"), "job", "100"], wanted + stream_of(files))
    assert code is None and lines[1]["held_bytes"] == 6 and lines[1]["received"] == 2


def test_sync_with_nothing_missing_reads_no_stream(tmp_path, host):
    cache = str(tmp_path / "r" / "media")
    ms.put(cache, sha(b"one"), b"one")
    wanted = json.dumps([[sha(b"one"), 3]]).encode() + b"\n"
    assert host(["sync", str(tmp_path / "r"), "job", "100"], wanted) == (
        None, [{"missing": []}, {}])


@pytest.mark.parametrize("command", ["receive", "sync"])
@pytest.mark.parametrize("each_kb, evicted", [(300, 0), (700, 1)])
def test_the_limit_is_in_megabytes(tmp_path, host, command, each_kb, evicted):
    """1 MB: an old file and the run's own of 300 KB each stay; of 700 KB each the old goes."""
    cache = str(tmp_path / "r" / "media")
    old, new = os.urandom(each_kb << 10), os.urandom(each_kb << 10)
    ms.put(cache, sha(old), old)
    os.utime(mc.file_path(cache, sha(old)), (1, 1))
    wanted = json.dumps([[sha(new), len(new)]]).encode() + b"\n"
    if command == "receive":
        mc.pin(cache, "job", [(sha(new), len(new))])
        wanted = b""
    code, lines = host([command, str(tmp_path / "r"), "job", "1"], wanted + stream_of([new]))
    assert code is None and lines[-1]["evicted"] == evicted and lines[-1]["received"] == 1


@pytest.mark.parametrize("argv", [[], ["need", "d", "p"], ["need", "d", "p", "1", "x"],
                                  ["push", "d", "p", "1"]])
def test_a_wrong_command_line_says_how_to_call_it(host, argv):
    assert host(argv) == ("usage: need|receive|sync DIR PIN LIMIT_MB", [])


@pytest.mark.parametrize("listing", [
    b"{}", b"[[1, 2]]", b'[["%s"]]' % sha(b"x").encode(), b'[["%s", 1, 2]]' % sha(b"x").encode(),
    b'[["%s", -1]]' % sha(b"x").encode(), b'[["%s", "1"]]' % sha(b"x").encode(),
    b'[["nothex", 1]]', b'[[]]'])
def test_a_listing_that_is_not_hash_size_pairs_is_refused(tmp_path, host, listing):
    code, lines = host(["need", str(tmp_path / "r"), "job", "1"], listing)
    assert code == "media cache %s: the list of media files is not [[sha256, size], ...]" % (
        tmp_path / "r" / "media") and lines == []


def test_an_empty_file_may_be_listed(tmp_path, host):
    code, lines = host(["need", str(tmp_path / "r"), "job", "1"],
                       json.dumps([[sha(b""), 0]]).encode())
    assert (code, lines) == (None, [{"missing": [[sha(b""), 0]]}])


def test_the_cache_is_under_the_remote_dir_with_home_expanded(tmp_path, host, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    code, _ = host(["need", "~/jobs", "job", "1"], b"[]")
    assert code is None and (tmp_path / "home" / "jobs" / "media" / ".pins" / "job").exists()


def _python38():
    """A Python 3.8 on this machine (on PATH, or one that pyenv installed), or None."""
    import glob
    import shutil
    import subprocess
    for path in [shutil.which("python3.8")] + sorted(glob.glob(os.path.expanduser(
            "~/.pyenv/versions/3.8*/bin/python3.8"))):
        if path and subprocess.run([path, "-c", "import sys; assert sys.version_info[:2] == "
                                    "(3, 8)"], capture_output=True).returncode == 0:
            return path
    return None


def base256_sized(size):
    """A member's header whose size field is GNU base-256 (first byte 0x80)."""
    block = bytearray(member(sha(b"x"), b"")[:512])
    block[124:136] = b"\x80" + size.to_bytes(11, "big")
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def test_the_host_program_runs_on_python_3_8(tmp_path):
    """What travels to hosts must run on Python 3.8 (int.from_bytes needs its byte order
    there, for one): the host program, as media_push sends it, on a real 3.8 when this
    machine has one."""
    import subprocess
    from potato.training.backends.media_push import cache_source
    big = base256_sized(5)
    assert mt.tar_header(big)[2] == 5  # here, too
    py38 = _python38()
    if py38 is None:
        pytest.skip("no Python 3.8 on this machine")
    files = [b"one", os.urandom(3000)]
    wanted = json.dumps([[sha(d), len(d)] for d in files]).encode() + b"\n"
    r = subprocess.run([py38, "-S", "-c", cache_source(), "sync", str(tmp_path / "r"), "job", "1"],
                       input=wanted + stream_of(files), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.decode().splitlines()[-1][len(mr.MARK):])["received"] == 2
    r = subprocess.run([py38, "-S", "-c", open(mt.__file__).read() +
                        "\nprint(tar_header(%r)[2])" % big], capture_output=True, timeout=120)
    assert r.stdout.strip() == b"5", r.stderr


def test_a_listing_with_a_boolean_size_or_nested_too_deep_is_refused(tmp_path, host):
    code, _ = host(["need", str(tmp_path / "r"), "job", "1"],
                   b'[["%s", true]]' % sha(b"x").encode())
    assert code.endswith("the list of media files is not [[sha256, size], ...]")
    code, _ = host(["need", str(tmp_path / "r"), "job", "1"], b"[" * 100000 + b"]" * 100000)
    assert code.startswith("media cache %s: " % (tmp_path / "r" / "media"))


def test_the_streams_pipe_is_widened_where_the_system_allows(tmp_path, monkeypatch):
    """F_SETPIPE_SZ on a pipe (the stream goes on arriving while the reader writes files);
    a file that is not a pipe, or a system without fcntl, is left as it is."""
    import fcntl
    r, w = os.pipe()
    try:
        mr.wide_pipe(r)
        assert fcntl.fcntl(r, getattr(fcntl, "F_GETPIPE_SZ", 1032)) >= mr.PIPE_BYTES == 1 << 20
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "f", "wb") as f:
        mr.wide_pipe(f.fileno())  # not a pipe: EBADF/EINVAL, ignored
    monkeypatch.setitem(__import__("sys").modules, "fcntl", None)  # no fcntl here
    r, w = os.pipe()
    try:
        mr.wide_pipe(r)
    finally:
        os.close(r)
        os.close(w)


def test_the_host_program_widens_its_stdin(tmp_path, host, monkeypatch):
    seen = []
    monkeypatch.setattr(mr, "wide_pipe", lambda fd: seen.append(os.fstat(fd).st_ino))
    host(["sync", str(tmp_path / "r"), "job", "1"], b"[]\n")
    host(["receive", str(tmp_path / "r"), "job", "1"], bytes(1024))
    stdin = os.stat(tmp_path / "stdin").st_ino
    host(["need", str(tmp_path / "r"), "job", "1"], b"[]")  # no stream: the default pipe
    assert seen == [stdin, stdin]
