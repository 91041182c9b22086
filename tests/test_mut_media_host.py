"""The host's side of the media stream, exactly (issue 26's mutation run over issue 22's
remote/media_tar.py and remote/media_receive.py): the tar header reader's fields, the stream
reader's batches, counts and messages, and the host program (``main``) run in this process so
that every line is seen. The slower end-to-end cases are in test_media_stream.py."""

import hashlib
import io
import json
import os
import queue
import tarfile
import threading
import time

import pytest

from potato.training.backends.media_push import tar_header as header
from potato.training.remote import media_cache as mc
from potato.training.remote import media_store as ms
from potato.training.remote import media_receive as mr
from potato.training.remote import media_tar as mt


def sha(data):
    return hashlib.sha256(data).hexdigest()


def member(name, data, kind=b"0"):
    """A ustar header (named ``name``, any bytes) and its padded data."""
    block = bytearray(header(sha(b"placeholder"), len(data), 0))
    raw = name if isinstance(name, bytes) else name.encode()
    block[0:100] = raw[:100].ljust(100, b"\0")
    block[156:157] = kind
    return _checked(block) + data + bytes(-len(data) % 512)


def _checked(block):
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def stream_of(files, end=True):
    out = b"".join(member(sha(d), d) for d in files)
    return out + (bytes(1024) if end else b"")


# -- media_tar ------------------------------------------------------------------------------------

def test_a_base_256_number_reads_every_byte_after_the_flag():
    assert mt._tar_number(b"\x80" + (123456789).to_bytes(11, "big")) == 123456789
    assert mt._tar_number(b"\x81" + bytes(11)) == 1 << 88  # the flag byte's low bits count


def test_an_octal_field_ends_at_its_first_nul_and_may_be_empty():
    assert mt._tar_number(b"17\x0012\x00") == 15  # what follows the NUL is not read
    assert mt._tar_number(b"\0" * 8) == 0
    assert mt._tar_number(b" " * 8) == 0
    with pytest.raises(mt.CacheError, match="damaged"):
        mt._tar_number(b"1X\0")
    with pytest.raises(mt.CacheError, match="damaged"):
        mt._tar_number(b"18\0")


def test_a_checksum_field_of_eight_digits_without_a_terminator_is_read():
    block = bytearray(header(sha(b"x"), 1, 0))
    block[148:156] = b" " * 8
    block[148:156] = b"%08o" % sum(block)
    assert mt.tar_header(bytes(block)) == (sha(b"x"), b"0", 1)


def test_a_name_may_fill_its_whole_field():
    block = bytearray(member("n" * 100, b"")[:512])
    assert mt.tar_header(bytes(block))[0] == "n" * 100


def test_a_ustar_prefix_is_part_of_the_name():
    info = tarfile.TarInfo("p/" + "n" * 99)  # too long for the name field: "p" goes to prefix
    info.size = 0
    block = info.tobuf(format=tarfile.USTAR_FORMAT)[:512]
    assert block[345:347] == b"p\0"
    assert mt.tar_header(block)[0] == "p/" + "n" * 99
    other = bytearray(block)
    other[257:263] = b"gnutar"  # not ustar: no prefix field
    assert mt.tar_header(_checked(other))[0] == "n" * 99


def test_a_name_that_is_not_ascii_is_escaped_not_an_error():
    block = member(b"caf\xc3\xa9", b"")[:512]
    assert mt.tar_header(block)[0] == "caf\\xc3\\xa9"


def test_skip_reads_exactly_and_says_when_the_stream_ended():
    s = io.BytesIO(b"abc")
    assert mt._skip(s, 1) is True and s.read() == b"bc"
    assert mt._skip(io.BytesIO(b"ab"), 3) is False
    assert mt._skip(io.BytesIO(b""), 0) is True


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


@pytest.mark.parametrize("sizes, batches", [
    ([1535, 1536] * 6, [3, 3, 3, 3]),   # header and bytes: 2047 + 2048 = 4095, one short of 4096
    ([1536] * 6, [2, 2, 2]),            # 2048 + 2048: a batch of exactly BATCH goes at once
])
def test_small_files_are_written_in_batches_of_batch_bytes(tmp_path, monkeypatch, sizes,
                                                            batches):
    monkeypatch.setattr(mr, "BATCH", 4096)
    seen = []
    real = mr._Writers.write
    monkeypatch.setattr(mr._Writers, "write", lambda self, batch: seen.append(len(batch))
                        or real(self, batch))
    files = [os.urandom(n) for n in sizes]
    cache = _pinned(tmp_path, files)
    out = mr.receive(cache, "job", io.BytesIO(stream_of(files)), 1 << 30)
    assert out["received"] == len(files) and seen == batches


def _writers_started(monkeypatch):
    """The threads each receive() started, a list a call."""
    started = []
    real = mr._Writers.close
    monkeypatch.setattr(mr._Writers, "close", lambda self: started.append(
        len(self.threads)) or real(self))
    return started


def test_quick_writes_stay_in_the_readers_thread(tmp_path, monkeypatch):
    files = [os.urandom(1000 + i) for i in range(200)]
    cache = _pinned(tmp_path, files)
    monkeypatch.setattr(mr, "BATCH", 4096)
    monkeypatch.setattr(mr, "SLOW_WRITE_S", 10.0)
    started = _writers_started(monkeypatch)
    out = mr.receive(cache, "job", io.BytesIO(stream_of(files)), 1 << 30)
    assert out["received"] == 200 and started == [0]


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


def test_the_move_to_threads_needs_slow_after_files_at_over_slow_write_s(monkeypatch):
    monkeypatch.setattr(mr, "put", lambda *a: None)
    monkeypatch.setattr(mr, "SLOW_AFTER", 6)
    monkeypatch.setattr(mr, "SLOW_WRITE_S", 0.001)

    def threads(files, secs, count=4):
        w = mr._Writers("unused", count, lambda size, error=None: None)
        times = [0.0, secs]
        monkeypatch.setattr(mr.time, "monotonic", lambda: times.pop(0) if times else secs)
        w.write([("sha", b"")] * files)
        w.close()
        return len(w.threads)
    assert threads(6, 0.006) == 0  # exactly 1 ms each: not over it
    assert threads(6, 0.00601) == 4
    assert threads(5, 1.0) == 0  # fewer than SLOW_AFTER files
    assert threads(6, 1.0, count=1) == 0  # one writer: the reader's own thread
    assert threads(6, 1.0, count=2) == 2


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


def test_the_move_to_threads_weighs_every_file_so_far(monkeypatch):
    """The average is over all the files written so far, not the last batch's: a slow
    start followed by a quick batch still moves the rest to the threads."""
    monkeypatch.setattr(mr, "put", lambda *a: None)
    monkeypatch.setattr(mr, "SLOW_AFTER", 6)
    monkeypatch.setattr(mr, "SLOW_WRITE_S", 0.001)
    w = mr._Writers("unused", 2, lambda size, error=None: None)
    times = [0.0, 0.01, 0.02, 0.0201]  # 3 files in 10 ms, then 3 in 0.1 ms: 10.1 ms for 6
    monkeypatch.setattr(mr.time, "monotonic", lambda: times.pop(0) if times else 1.0)
    w.write([("sha", b"")] * 3)
    assert w.threads == []  # fewer than SLOW_AFTER yet
    w.write([("sha", b"")] * 3)
    w.close()
    assert len(w.threads) == 2


def test_a_python_without_the_fcntl_name_uses_linuxs_number(monkeypatch):
    """Python 3.8's fcntl has no F_SETPIPE_SZ: the call uses Linux's 1031."""
    import fcntl
    calls = []
    monkeypatch.delattr(fcntl, "F_SETPIPE_SZ", raising=False)
    monkeypatch.setattr(fcntl, "fcntl", lambda fd, cmd, arg: calls.append((fd, cmd, arg)))
    mr._wide_pipe(7)
    assert calls == [(7, 1031, 1 << 20)]


def test_the_write_ahead_is_bounded_in_bytes():
    """The queue holds whole batches; a batch is at most BATCH plus one small file."""
    w = mr._Writers("unused", 4, None)
    assert w.batches.maxsize == mr.WRITE_AHEAD // (mr.BATCH + mr.SMALL_FILE) == 15
    assert w.batches.maxsize * (mr.BATCH + mr.SMALL_FILE) <= mr.WRITE_AHEAD


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

@pytest.fixture
def host(tmp_path, monkeypatch, capsys):
    """main(argv) with ``stdin`` bytes: (exit message or None, the MARK lines as JSON)."""
    mask = os.umask(0o022)
    os.umask(mask)

    def run(argv, stdin=b""):
        path = tmp_path / "stdin"
        path.write_bytes(stdin)
        with open(path, "rb") as f:
            monkeypatch.setattr(mr.sys, "stdin", f)
            try:
                mr.main(argv)
                code = None
            except SystemExit as e:
                code = e.code
            finally:
                os.umask(mask)
        lines = [json.loads(line[len(mr.MARK):]) for line in capsys.readouterr().out.splitlines()
                 if line.startswith(mr.MARK)]
        return code, lines
    return run


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


# -- media_cache ----------------------------------------------------------------------------------

def test_dot_names_are_not_pins():
    assert not mc.valid_pin(".") and not mc.valid_pin("..") and mc.valid_pin("job-1.a_b")


def test_a_bad_hash_or_pin_name_is_quoted_in_its_error(tmp_path):
    with pytest.raises(mc.CacheError) as e:
        mc.file_path(str(tmp_path), "x" * 100)
    assert str(e.value) == "'%s' is not a sha256 in hex" % ("x" * 80)
    with pytest.raises(mc.CacheError, match=r"^5 is not a sha256 in hex$"):
        mc.file_path(str(tmp_path), 5)
    for call in (lambda n: mc.pin(str(tmp_path), n, []), lambda n: mc.pin_path(str(tmp_path), n)):
        with pytest.raises(mc.CacheError) as e:
            call("/" * 100)
        assert str(e.value) == "'%s' is not a pin name" % ("/" * 80)


def test_pins_and_stored_files_are_written_beside_their_place(tmp_path, monkeypatch):
    """Not in the system's temporary folder (another file system: the rename would fail)."""
    monkeypatch.setattr(mc.tempfile, "tempdir", str(tmp_path / "no such folder"))
    cache = str(tmp_path / "media")
    mc.pin(cache, "job", [(sha(b"x"), 1)])
    ms.store(cache, sha(b"x"), 1, io.BytesIO(b"x").read)
    assert mc.have(cache, sha(b"x"), 1) and mc.read_pin(cache, "job") == {sha(b"x"): 1}


def test_a_pin_file_keeps_only_hash_size_lines(tmp_path):
    cache = str(tmp_path / "media")
    mc.pin(cache, "job", [])
    good = sha(b"good")
    with open(mc.pin_path(cache, "job"), "w") as f:
        f.write("nothex 5\n%s x\n%s 7 extra\n%s 7\n" % (good, good, good))
    assert mc.read_pin(cache, "job") == {good: 7}


def _pins(cache, names_ages, now):
    for name, age in names_ages:
        mc.pin(cache, name, [(sha(name.encode()), 1)])
        os.utime(mc.pin_path(cache, name), (now - age, now - age))


def test_pinned_reads_the_clock_itself_and_drops_stale_pins(tmp_path):
    cache = str(tmp_path / "media")
    _pins(cache, [("fresh", 10), ("stale", mc.PIN_STALE_S + 100)], time.time())
    assert mc.pinned(cache) == {sha(b"fresh")}
    assert not os.path.exists(mc.pin_path(cache, "stale"))


def test_a_pin_is_stale_only_past_pin_stale_s(tmp_path):
    cache = str(tmp_path / "media")
    _pins(cache, [("edge", mc.PIN_STALE_S), ("just-over", mc.PIN_STALE_S + 0.5)], 10000.0)
    assert mc.pinned(cache, now=10000.0) == {sha(b"edge")}


def test_pinned_goes_on_past_stale_gone_and_foreign_files(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    _pins(cache, [("b-stale", mc.PIN_STALE_S + 100), ("c-fresh", 1)], 10000.0)
    with open(os.path.join(cache, ".pins", "bad name"), "w") as f:
        f.write("%s 1\n" % sha(b"foreign"))
    real = os.listdir
    monkeypatch.setattr(mc.os, "listdir", lambda d: (
        ["a-gone"] + sorted(real(d)) if d.endswith(".pins") else real(d)))
    assert mc.pinned(cache, now=10000.0) == {sha(b"c-fresh")}


def test_need_holds_the_lock_shared(tmp_path):
    """Two runs check at once; only an eviction holds the lock alone."""
    import fcntl
    import threading
    cache = str(tmp_path / "media")
    os.makedirs(cache)
    fd = os.open(os.path.join(cache, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    done = []
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # another run's need() in progress
        t = threading.Thread(target=lambda: done.append(mc.need(cache, "job", [(sha(b"x"), 1)])))
        t.start()
        t.join(10)
        assert done == [[(sha(b"x"), 1)]]
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        t.join()


def test_entries_of_a_cache_that_is_not_there_is_empty(tmp_path):
    assert mc.entries(str(tmp_path / "nothing")) == []


def test_entries_count_only_hashes_in_their_own_folder(tmp_path):
    cache = str(tmp_path / "media")
    ms.put(cache, sha(b"kept"), b"kept")
    os.makedirs(os.path.join(cache, "00"))
    other = sha(b"elsewhere")
    with open(os.path.join(cache, "00", other if other[:2] != "00" else sha(b"e2")), "wb") as f:
        f.write(b"misplaced")
    folder = os.path.join(cache, sha(b"kept")[:2])
    with open(os.path.join(folder, sha(b"kept")[:2] + "cdef"), "wb") as f:
        f.write(b"not a hash")
    with open(os.path.join(cache, "ab"), "wb") as f:  # a file, not a folder
        f.write(b"x")
    os.makedirs(os.path.join(cache, "abc"))
    with open(os.path.join(cache, "abc", sha(b"y")), "wb") as f:
        f.write(b"y")
    assert [(size, h) for _, size, h in mc.entries(cache)] == [(4, sha(b"kept"))]


class _Clock:
    """A stand-in for media_cache's ``time`` module: time() is ``now``."""

    def __init__(self, now):
        self.now = now

    def time(self):
        return self.now

    def monotonic(self):
        return time.monotonic()


def test_a_partial_file_is_stale_only_past_incoming_stale_s(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    incoming = ms.incoming_dir(cache)
    for name, age in (("edge.part", mc.INCOMING_STALE_S), ("old.part", mc.INCOMING_STALE_S + 0.5)):
        with open(os.path.join(incoming, name), "wb") as f:
            f.write(b"part")
        os.utime(os.path.join(incoming, name), (10000 - age, 10000 - age))
    monkeypatch.setattr(mc, "time", _Clock(10000.0))
    assert mc.evict(cache, 1 << 30, now=10000.0) == (0, 0, 0)
    assert sorted(os.listdir(incoming)) == ["edge.part"]


def test_evict_reads_the_clock_itself(tmp_path):
    cache = str(tmp_path / "media")
    for data in (b"pinned", b"free"):
        ms.put(cache, sha(data), data)
    mc.pin(cache, "job", [(sha(b"pinned"), 6)])
    assert mc.evict(cache, 0)[:2] == (1, 4)
    assert mc.have(cache, sha(b"pinned"), 6) and not mc.have(cache, sha(b"free"), 4)


def test_evict_stops_at_the_limit_and_counts_exactly(tmp_path):
    cache = str(tmp_path / "media")
    for i, data in enumerate((b"a" * 10, b"b" * 20, b"c" * 30)):
        ms.put(cache, sha(data), data)
        os.utime(mc.file_path(cache, sha(data)), (1000 + i, 1000 + i))
    assert mc.evict(cache, 60) == (0, 0, 60)  # exactly at the limit: nothing goes
    assert mc.evict(cache, 50) == (1, 10, 50)


def test_evict_keeps_what_it_is_asked_to_and_what_fresh_pins_hold(tmp_path):
    cache = str(tmp_path / "media")
    for data in (b"kept", b"pinned", b"free"):
        ms.put(cache, sha(data), data)
    mc.pin(cache, "job", [(sha(b"pinned"), 6)])
    assert mc.evict(cache, 0, now=time.time(), keep={sha(b"kept")})[:2] == (1, 4)
    assert mc.have(cache, sha(b"pinned"), 6) and mc.have(cache, sha(b"kept"), 4)
    assert mc.evict(cache, 0, now=time.time() + 10 * mc.PIN_STALE_S)[:2] == (2, 10)


def test_store_names_what_went_wrong(tmp_path):
    cache = str(tmp_path / "media")
    data = b"twelve bytes"
    with pytest.raises(mc.CacheError) as e:
        ms.store(cache, sha(data), 12, io.BytesIO(b"short").read)
    assert str(e.value) == "media file %s arrived with 5 of 12 bytes" % sha(data)[:12]
    with pytest.raises(mc.CacheError) as e:
        ms.store(cache, sha(data), 12, io.BytesIO(b"other bytes!").read)
    assert str(e.value) == ("media file %s arrived with 12 of 12 bytes and another sha256"
                            % sha(data)[:12])
    with pytest.raises(mc.CacheError) as e:
        ms.put(cache, sha(data), b"other bytes!")
    assert str(e.value) == ("media file %s arrived with 12 of 12 bytes and another sha256"
                            % sha(data)[:12])
    assert [n for _, _, n in os.walk(cache)] in ([[], []], [[]])  # nothing left behind


def _short(cache, data, part):
    """A short copy (``part``) of ``data`` under its name, as a killed writer leaves it."""
    path = mc.file_path(cache, sha(data))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(part)
    return path


def test_a_file_on_its_way_in_has_a_hidden_name_beside_its_place(tmp_path, monkeypatch):
    """entries() sweeps stale hidden names (a killed transfer); others would stay for good.
    store() streams through one; put() replaces a file of the wrong size through one."""
    cache = str(tmp_path / "media")
    data = b"on its way"
    folder = os.path.dirname(mc.file_path(cache, sha(data)))
    seen = []

    def read(n):
        seen.extend(os.listdir(folder))
        return data if not seen[1:] else b""
    ms.store(cache, sha(data), len(data), read)
    assert len(seen) == 1 and seen[0].startswith("." + sha(data)[:16])
    short = mc.file_path(cache, sha(b"put"))
    os.makedirs(os.path.dirname(short), exist_ok=True)
    with open(short, "wb") as f:
        f.write(b"pu")  # a writer killed half-way
    names = []
    real = os.replace
    monkeypatch.setattr(mc.os, "replace", lambda a, b: names.append(os.path.basename(a))
                        or real(a, b))
    ms.put(cache, sha(b"put"), b"put")
    assert len(names) == 1 and names[0].startswith("." + sha(b"put") + ".")
    assert open(short, "rb").read() == b"put"


def test_put_writes_a_new_file_under_its_name_and_leaves_a_whole_one_alone(
        tmp_path, monkeypatch):
    """A new file: created under its own name (O_EXCL), no rename. A file already there
    with its size: left as it is (another writer's, verified), nothing written."""
    cache = str(tmp_path / "media")
    renamed = []
    real = os.replace
    monkeypatch.setattr(mc.os, "replace", lambda a, b: renamed.append(a) or real(a, b))
    ms.put(cache, sha(b"new"), b"new")
    path = mc.file_path(cache, sha(b"new"))
    assert open(path, "rb").read() == b"new" and renamed == []
    before = os.stat(path)
    os.utime(path, (1000, 1000))
    monkeypatch.setattr(mc.os, "write", lambda *a: pytest.fail("written again"))
    ms.put(cache, sha(b"new"), b"new")
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime) == (before.st_ino, 1000) and renamed == []
    assert os.listdir(os.path.dirname(path)) == [sha(b"new")]


def test_a_put_cut_short_leaves_a_short_file_that_counts_as_missing(tmp_path, monkeypatch):
    """A full disk in the middle of the write: the part-file stays (removing it could remove
    another writer's whole copy that replaced it meanwhile); its size says it is not whole,
    so need() lists it as missing and the next put replaces it whole."""
    cache = str(tmp_path / "media")
    data = b"x" * 5000
    path = mc.file_path(cache, sha(data))
    real_write = os.write

    def full(fd, view):
        real_write(fd, view[:100])
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(mc.os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        ms.put(cache, sha(data), data)
    assert os.path.getsize(path) == 100 and not mc.have(cache, sha(data), len(data))
    monkeypatch.setattr(mc.os, "write", real_write)
    assert mc.need(cache, "job", [(sha(data), len(data))]) == [(sha(data), len(data))]
    ms.put(cache, sha(data), data)
    assert open(path, "rb").read() == data and os.listdir(os.path.dirname(path)) == [sha(data)]


def test_the_slow_path_writes_each_file_whole_before_its_name(tmp_path, monkeypatch):
    """whole_first: a hidden name, then a link into place: never over a whole file already
    there, over a short one; no hidden file is left; where links cannot be made, a rename."""
    cache = str(tmp_path / "media")
    data = b"slow path" * 100
    path = mc.file_path(cache, sha(data))
    linked = []
    real_link = os.link
    monkeypatch.setattr(mc.os, "link", lambda a, b: linked.append((a, b)) or real_link(a, b))
    ms.put(cache, sha(data), data, whole_first=True)
    assert open(path, "rb").read() == data and os.listdir(os.path.dirname(path)) == [sha(data)]
    assert os.path.basename(linked[0][0]).startswith("." + sha(data) + ".")
    inode = os.stat(path).st_ino
    ms.put(cache, sha(data), data, whole_first=True)  # a whole one there: left as it is
    assert os.stat(path).st_ino == inode and os.listdir(os.path.dirname(path)) == [sha(data)]
    os.unlink(path)
    with open(path, "wb") as f:
        f.write(b"short")
    ms.put(cache, sha(data), data, whole_first=True)  # a short one: replaced
    assert open(path, "rb").read() == data and os.listdir(os.path.dirname(path)) == [sha(data)]
    other = b"no links here" * 10

    def no_links(a, b):
        raise OSError(1, "Operation not permitted")
    monkeypatch.setattr(mc.os, "link", no_links)
    ms.put(cache, sha(other), other, whole_first=True)
    assert mc.have(cache, sha(other), len(other))
    folder = os.path.dirname(mc.file_path(cache, sha(other)))
    assert [n for n in os.listdir(folder) if n.startswith(".")] == []


def test_a_link_or_a_folder_of_the_listed_size_is_not_a_cached_file(tmp_path):
    cache = str(tmp_path / "media")
    data = b"z" * 7
    path = mc.file_path(cache, sha(data))
    os.makedirs(os.path.dirname(path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"7 bytes")
    os.symlink(str(elsewhere), path)
    assert not mc.have(cache, sha(data), 7)
    assert mc.need(cache, "job", [(sha(data), 7)]) == [(sha(data), 7)]
    os.unlink(path)
    os.mkdir(path)
    assert not mc.have(cache, sha(data), os.path.getsize(path))


def test_unique_names_carry_the_pid_random_and_a_count(monkeypatch):
    monkeypatch.setattr(mc, "_TOKEN", [None, ""])  # as in a new process: the token is made here
    a, b = mc._unique(), mc._unique()
    pid, rand, count = a.split(".")
    assert pid == str(os.getpid()) and len(rand) == 12 and int(rand, 16) >= 0
    assert b == "%s.%s.%d" % (pid, rand, int(count) + 1)


def test_cached_files_are_0600_in_new_and_existing_folders(tmp_path):
    cache = str(tmp_path / "media")
    mask = os.umask(0o022)
    try:
        first = b"first of its folder"
        second = [d for d in (b"%d" % i for i in range(1000))
                  if sha(d)[:2] == sha(first)[:2]][0]
        ms.put(cache, sha(first), first)
        ms.put(cache, sha(second), second)
    finally:
        os.umask(mask)
    for d in (first, second):
        assert oct(os.stat(mc.file_path(cache, sha(d))).st_mode & 0o777) == "0o600"


def test_a_link_at_the_hidden_name_is_not_followed(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    data = b"linked"
    path = _short(cache, data, b"li")  # short: put replaces it through a hidden name
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    monkeypatch.setattr(ms, "_unique", lambda: "fixed")
    os.symlink(str(victim), os.path.join(os.path.dirname(path), ".%s.fixed" % sha(data)))
    with pytest.raises(OSError):
        ms.put(cache, sha(data), data)
    assert victim.read_bytes() == b"untouched" and open(path, "rb").read() == b"li"


def test_a_link_at_the_files_name_is_replaced_not_written_through(tmp_path):
    cache = str(tmp_path / "media")
    data = b"linked"
    path = mc.file_path(cache, sha(data))
    os.makedirs(os.path.dirname(path))
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    os.symlink(str(victim), path)
    ms.put(cache, sha(data), data)
    assert victim.read_bytes() == b"untouched"
    assert not os.path.islink(path) and open(path, "rb").read() == data


def test_a_checksum_with_a_leading_digit_is_read_whole():
    """Names of high bytes: the checksum passes 8**5 and its six digits fill the field."""
    info = tarfile.TarInfo("p/n")
    block = bytearray(info.tobuf(format=tarfile.USTAR_FORMAT)[:512])
    block[0:100] = b"\xff" * 100
    block[345:500] = b"\xfe" * 155
    block = _checked(block)
    assert block[148:149] != b"0"
    assert mt.tar_header(block)[0] == "\\xfe" * 155 + "/" + "\\xff" * 100


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


def test_the_host_program_runs_on_python_3_8(tmp_path):
    """What travels to hosts must run on Python 3.8 (int.from_bytes needs its byte order
    there, for one): the host program, as media_push sends it, on a real 3.8 when this
    machine has one."""
    import subprocess
    from potato.training.backends.media_push import cache_source
    assert mt._tar_number(b"\x80" + (5).to_bytes(11, "big")) == 5  # here, too
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
                        "\nprint(_tar_number(b'\\x80' + (5).to_bytes(11, 'big')))"],
                       capture_output=True, timeout=120)
    assert r.stdout.strip() == b"5", r.stderr


def test_the_times_are_the_documented_ones():
    """docs/backends/ssh.md: a pin nobody touched for 15 minutes no longer counts;
    docs/backends/agent.md: a killed download's partial file goes once it is an hour old."""
    assert mc.PIN_STALE_S == 15 * 60 and mc.INCOMING_STALE_S == 60 * 60
    assert mc.USAGE_STALE_S == 60 * 60  # ssh.md: a record over an hour old is counted again


def test_evicting_a_cache_that_is_not_there_is_nothing(tmp_path):
    assert mc.evict(str(tmp_path / "nothing"), 0) == (0, 0, 0)


def test_entries_and_evict_go_on_past_a_file_that_went_or_stays(tmp_path, monkeypatch):
    """A file removed between the listing and its stat, and one that cannot be removed: the
    others are still counted and evicted."""
    cache = str(tmp_path / "media")
    files = [b"a" * 10, b"b" * 20, b"c" * 30]
    for i, data in enumerate(files):
        ms.put(cache, sha(data), data)
        os.utime(mc.file_path(cache, sha(data)), (1000 + i, 1000 + i))
    sub = sha(files[1])[:2]
    gone = sub + "f" * 62  # listed first in that folder, then gone before its stat
    real_listdir, real_unlink = os.listdir, os.unlink
    monkeypatch.setattr(mc.os, "listdir", lambda d: (
        [gone] + real_listdir(d) if d == os.path.join(cache, sub) else real_listdir(d)))
    assert sorted(size for _, size, _ in mc.entries(cache)) == [10, 20, 30]

    def unlink(path):
        if path.endswith(sha(files[0])):
            raise PermissionError(13, "Permission denied", path)
        real_unlink(path)
    monkeypatch.setattr(mc.os, "unlink", unlink)
    assert mc.evict(cache, 30) == (2, 50, 10)  # the oldest stays; the next two go


def test_a_failed_put_removes_its_hidden_file_and_says_why(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    path = _short(cache, b"first", b"fir")  # short: replaced through a hidden name

    def refuse(a, b):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(mc.os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        ms.put(cache, sha(b"first"), b"first")
    assert os.listdir(os.path.dirname(path)) == [sha(b"first")]
    assert open(path, "rb").read() == b"fir"


def test_a_pin_that_cannot_be_written_leaves_nothing_and_hidden_pins_hold_nothing(
        tmp_path, monkeypatch):
    """A full disk while a pin is written: its temporary file goes. A leftover of one (a
    killed host) holds no file, and goes once stale like a pin."""
    cache = str(tmp_path / "media")
    mc.pin(cache, "job", [(sha(b"x"), 1)])
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fd, mode):
            self.f = real_fdopen(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(mc.os, "fdopen", Full)
    with pytest.raises(OSError, match="No space left"):
        mc.pin(cache, "other", [(sha(b"y"), 1)])
    monkeypatch.undo()
    assert sorted(os.listdir(os.path.join(cache, ".pins"))) == ["job"]
    leftover = os.path.join(cache, ".pins", ".tmp-leftover")
    with open(leftover, "w") as f:
        f.write("%s 1\n" % sha(b"z"))
    assert mc.pinned(cache) == {sha(b"x")}
    assert mc.pinned(cache, now=time.time() + 2 * mc.PIN_STALE_S) == set()
    assert not os.path.exists(leftover)


def test_a_listing_with_a_boolean_size_or_nested_too_deep_is_refused(tmp_path, host):
    code, _ = host(["need", str(tmp_path / "r"), "job", "1"],
                   b'[["%s", true]]' % sha(b"x").encode())
    assert code.endswith("the list of media files is not [[sha256, size], ...]")
    code, _ = host(["need", str(tmp_path / "r"), "job", "1"], b"[" * 100000 + b"]" * 100000)
    assert code.startswith("media cache %s: " % (tmp_path / "r" / "media"))


def test_a_hidden_name_that_exists_is_never_written_through(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    data = b"collides"
    path = _short(cache, data, b"coll")  # short: replaced through a hidden name
    monkeypatch.setattr(ms, "_unique", lambda: "fixed")
    taken = os.path.join(os.path.dirname(path), ".%s.fixed" % sha(data))
    with open(taken, "wb") as f:
        f.write(b"another writer's")
    with pytest.raises(FileExistsError):
        ms.put(cache, sha(data), data)
    assert open(taken, "rb").read() == b"another writer's"
    assert open(path, "rb").read() == b"coll"


def test_the_streams_pipe_is_widened_where_the_system_allows(tmp_path, monkeypatch):
    """F_SETPIPE_SZ on a pipe (the stream goes on arriving while the reader writes files);
    a file that is not a pipe, or a system without fcntl, is left as it is."""
    import fcntl
    r, w = os.pipe()
    try:
        mr._wide_pipe(r)
        assert fcntl.fcntl(r, getattr(fcntl, "F_GETPIPE_SZ", 1032)) >= mr.PIPE_BYTES == 1 << 20
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "f", "wb") as f:
        mr._wide_pipe(f.fileno())  # not a pipe: EBADF/EINVAL, ignored
    monkeypatch.setitem(__import__("sys").modules, "fcntl", None)  # no fcntl here
    r, w = os.pipe()
    try:
        mr._wide_pipe(r)
    finally:
        os.close(r)
        os.close(w)


def test_the_host_program_widens_its_stdin(tmp_path, host, monkeypatch):
    seen = []
    monkeypatch.setattr(mr, "_wide_pipe", lambda fd: seen.append(os.fstat(fd).st_ino))
    host(["sync", str(tmp_path / "r"), "job", "1"], b"[]\n")
    host(["receive", str(tmp_path / "r"), "job", "1"], bytes(1024))
    stdin = os.stat(tmp_path / "stdin").st_ino
    host(["need", str(tmp_path / "r"), "job", "1"], b"[]")  # no stream: the default pipe
    assert seen == [stdin, stdin]
