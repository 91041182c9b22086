"""Shared by the tests of the host's media code (test_media_tar, test_media_receive,
test_media_store, test_media_cache): tar members, a stream of them, the host program run in this
process, a clock, pins."""

import hashlib
import json
import os
import time

import pytest

from potato.training.backends.media_push import tar_header as header
from potato.training.remote import media_cache as mc
from potato.training.remote import media_receive as mr


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


def _pins(cache, names_ages, now):
    for name, age in names_ages:
        mc.pin(cache, name, [(sha(name.encode()), 1)])
        os.utime(mc.pin_path(cache, name), (now - age, now - age))


class _Clock:
    """A stand-in for media_cache's ``time`` module: time() is ``now``."""

    def __init__(self, now):
        self.now = now

    def time(self):
        return self.now

    def monotonic(self):
        return time.monotonic()
