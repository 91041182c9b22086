"""How the host's media cache writes a file (potato/training/remote/media_store.py): a hidden
name beside its place, whole before it is named, 0600, never through a link, and what a failed
or short put leaves. Also the tests tools/mutation.py runs against the host's media modules
(docs/testing.md)."""

import io
import os

import pytest

from potato.training.remote import media_cache as mc
from potato.training.remote import media_store as ms
from tests.media_host import sha


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


def hidden_opens(monkeypatch, before=None):
    """The hidden names put() opens (``.SHA.UNIQUE`` beside the file); ``before(path)`` runs
    just before each is opened: another writer, there first."""
    names, real_open = [], os.open

    def opening(path, *a, **kw):
        if os.path.basename(path).startswith("."):
            names.append(path)
            if before:
                before(path)
        return real_open(path, *a, **kw)
    monkeypatch.setattr(ms.os, "open", opening)
    return names


def test_hidden_names_carry_the_pid_random_and_a_count(tmp_path, monkeypatch):
    """Writers on one network file system may share a pid: each process's names carry its
    pid, its own random part and a count; a forked child makes its own."""
    cache = str(tmp_path / "media")
    names = hidden_opens(monkeypatch)
    for d in (b"one", b"two"):
        ms.put(cache, sha(d), d, whole_first=True)
    a, b = dict.fromkeys(os.path.basename(n) for n in names)  # (a first file: opened again
    # once its folder is made)
    _, sha_a, pid, rand, count = a.split(".")
    assert sha_a == sha(b"one") and pid == str(os.getpid())
    assert len(rand) == 12 and int(rand, 16) >= 0
    assert b == ".%s.%s.%s.%d" % (sha(b"two"), pid, rand, int(count) + 1)
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's)
        try:
            ms.put(cache, sha(b"three"), b"three", whole_first=True)
            os.write(w, os.path.basename(names[-1]).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read().decode()
    os.waitpid(child, 0)
    _, _, child_pid, child_rand, _ = said.split(".")
    assert child_pid == str(child) and child_rand != rand and len(child_rand) == 12


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
    hidden_opens(monkeypatch, lambda hidden: os.symlink(str(victim), hidden))
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


def test_a_hidden_name_that_exists_is_never_written_through(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    data = b"collides"
    path = _short(cache, data, b"coll")  # short: replaced through a hidden name
    def taken(hidden):
        with open(hidden, "wb") as f:
            f.write(b"another writer's")
    names = hidden_opens(monkeypatch, taken)
    with pytest.raises(FileExistsError):
        ms.put(cache, sha(data), data)
    hidden = names[-1]
    assert open(hidden, "rb").read() == b"another writer's"
    assert open(path, "rb").read() == b"coll"
