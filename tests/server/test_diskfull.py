"""A full disk (potato/server/diskfull.py): which errors mean one, the mount point a message
names, the log line at most once a minute with the count of refusals, the 1 MB spare an upload
must leave, and the admin banner while the disk is full and for 5 minutes after the last
refusal (docs/security.md, "A full disk"). The real 507s on a small tmpfs are in
tests/server/test_hardening.py."""

import errno
import logging
import os
import re
import sqlite3

import pytest

from potato.server import diskfull
from potato.server.diskfull import DiskWatch

MB = 1 << 20


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EDQUOT, "Disk quota exceeded"),
    IOError(errno.ENOSPC, "No space left on device"),
    sqlite3.OperationalError("database or disk is full"),
])
def test_a_full_disk_is_known_by_its_error(error):
    assert diskfull.is_full(error)


@pytest.mark.parametrize("error", [
    OSError(errno.EACCES, "Permission denied"),
    OSError(errno.EIO, "disk is full"),  # the words of an OSError are not what tells
    OSError("disk is full"),
    sqlite3.OperationalError("database is locked"),
    sqlite3.DatabaseError("database or disk is full"),  # only SQLite's OperationalError
    ValueError("disk is full"),
    RuntimeError(),
])
def test_other_errors_are_not_a_full_disk(error):
    assert not diskfull.is_full(error)


def test_the_mount_point_is_the_one_that_holds_the_path(tmp_path):
    top = diskfull.mount_point(str(tmp_path))
    assert os.path.ismount(top) and str(tmp_path.resolve()).startswith(top)
    assert os.path.realpath(str(tmp_path)) != top  # a folder inside it, not the folder
    # a folder not made yet (output_annotation_dir before the first save) is on its parent's
    assert diskfull.mount_point(str(tmp_path / "not" / "made" / "yet")) == top
    assert diskfull.mount_point("/") == "/"


@pytest.mark.skipif(not os.path.ismount("/proc"), reason="needs /proc mounted")
def test_the_mount_point_follows_a_link_to_another_file_system(tmp_path):
    (tmp_path / "link").symlink_to("/proc")
    assert diskfull.mount_point(str(tmp_path / "link")) == "/proc"
    assert diskfull.mount_point(str(tmp_path / "link" / "self" / "status")) == "/proc"
    assert diskfull.mount_point(str(tmp_path / "link" / "no-such-file")) == "/proc"


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock(0.0)  # a machine that has just started: its monotonic clock is near 0
    monkeypatch.setattr(diskfull.time, "monotonic", c)
    return c


class Disk:
    """os.statvfs of a disk with ``free`` bytes for users (None: statvfs fails)."""

    def __init__(self, free, frsize=4096):
        self.free, self.frsize, self.seen = free, frsize, []

    def __call__(self, path):
        self.seen.append(path)
        if self.free is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        return os.statvfs_result((4096, self.frsize, 10 ** 9, 10 ** 9, self.free // self.frsize,
                                  10 ** 6, 10 ** 6, 10 ** 6, 0, 255))


@pytest.fixture
def disk(monkeypatch):
    d = Disk(10 ** 9)
    monkeypatch.setattr(diskfull.os, "statvfs", d)
    return d


def _lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "potato.server"]


def _count(line):
    """How many refused requests a log line says it stands for."""
    return int(re.search(r"(-?\d+) request", line).group(1))


def test_refusals_are_logged_at_most_once_a_minute_with_their_count(tmp_path, clock, caplog):
    caplog.set_level(logging.WARNING, logger="potato.server")
    watch = DiskWatch(str(tmp_path))
    said = watch.full("/a", OSError(errno.ENOSPC, "No space left on device"))
    assert said == watch.message()
    assert "disk is full" in said and diskfull.mount_point(str(tmp_path)) in said
    first = _lines(caplog)
    assert len(first) == 1 and first[0].startswith(watch.message())
    assert "No space left on device" in first[0] and _count(first[0]) == 1
    assert first[0].endswith("/a)")
    for t, where in ((10.0, "/b"), (59.9, "/c")):
        clock.now = t
        assert watch.full(where, OSError(errno.ENOSPC, "full")) == watch.message()
    assert len(_lines(caplog)) == 1  # no line within the minute
    clock.now = 60.0
    watch.full("/d", OSError(errno.EDQUOT, "Disk quota exceeded"))
    lines = _lines(caplog)
    assert len(lines) == 2 and _count(lines[1]) == 3  # /b, /c and /d
    assert "Disk quota exceeded" in lines[1] and lines[1].endswith("/d)")
    clock.now = 119.9
    watch.full("/e", OSError(errno.ENOSPC, "full"))
    clock.now = 120.0
    watch.full("/f", OSError(errno.ENOSPC, "full"))
    lines = _lines(caplog)
    assert len(lines) == 3 and _count(lines[2]) == 2 and lines[2].endswith("/f)")


def test_the_first_refusal_is_logged_whenever_it_comes(tmp_path, clock, caplog):
    caplog.set_level(logging.WARNING, logger="potato.server")
    clock.now = 12345.0
    DiskWatch(str(tmp_path)).full("/a", OSError(errno.ENOSPC, "full"))
    assert len(_lines(caplog)) == 1


def test_free_bytes_are_those_a_user_may_write(tmp_path, disk):
    disk.free, disk.frsize = 7 * 4096, 4096
    watch = DiskWatch(str(tmp_path / "out"))
    assert watch.free_bytes() == 7 * 4096
    assert disk.seen == [str(tmp_path / "out")]
    disk.free, disk.frsize = 3 * 512, 512
    assert watch.free_bytes() == 3 * 512
    disk.free = None
    assert watch.free_bytes() is None


def test_an_upload_must_leave_a_megabyte_free(tmp_path, disk):
    watch = DiskWatch(str(tmp_path))
    disk.free = 5 * MB
    assert watch.has_room(4 * MB) and watch.has_room(0)
    assert not watch.has_room(4 * MB + 4096)
    disk.free = MB
    assert watch.has_room(0) and not watch.has_room(1)
    disk.free = MB - 4096
    assert not watch.has_room(0)  # the spare itself is short: nothing more is written
    disk.free = None  # a disk that cannot be asked does not refuse what may fit
    assert watch.has_room(10 ** 15)


def test_the_banner_shows_while_full_and_five_minutes_after_the_last_refusal(tmp_path, clock,
                                                                               disk):
    watch = DiskWatch(str(tmp_path))
    clock.now = 50.0
    assert watch.banner() is None  # never refused, room to spare
    watch.full("/a", OSError(errno.ENOSPC, "full"))
    banner = watch.banner()
    assert banner and "disk is full" in banner
    assert diskfull.mount_point(str(tmp_path)) in banner
    clock.now = 50.0 + 299.9
    assert watch.banner() == banner
    clock.now = 50.0 + 300.0
    assert watch.banner() is None
    disk.free = MB - 4096  # no refusal yet, but less than the spare: full already
    assert watch.banner() == banner
    disk.free = MB
    assert watch.banner() is None
    disk.free = None  # a disk that cannot be asked shows no banner by itself
    assert watch.banner() is None
    clock.now = 1000.0
    watch.full("/b", OSError(errno.ENOSPC, "full"))
    assert watch.banner() == banner
