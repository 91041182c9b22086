"""The tar header reader the host runs (potato/training/remote/media_tar.py): its fields,
numbers, names and checksums, read exactly. Also the tests tools/mutation.py runs against the
host's media modules (docs/testing.md); the slower end-to-end cases are in test_media_stream.py."""

import io
import tarfile

import pytest

from potato.training.backends.media_push import tar_header as header
from potato.training.remote import media_tar as mt
from tests.media_host import _checked, member, sha


def _size(field):
    """The size tar_header reads from a (correctly summed) header whose size field is
    ``field``, NUL-padded to its 12 bytes."""
    block = bytearray(member("n", b"")[:512])
    block[124:136] = field.ljust(12, b"\0")
    return mt.tar_header(_checked(block))[2]


def test_a_base_256_number_reads_every_byte_after_the_flag():
    assert _size(b"\x80" + (123456789).to_bytes(11, "big")) == 123456789
    assert _size(b"\x81" + bytes(11)) == 1 << 88  # the flag byte's low bits count


def test_an_octal_field_ends_at_its_first_nul_and_may_be_empty():
    assert _size(b"17\x0012\x00") == 15  # what follows the NUL is not read
    assert _size(b"\0" * 12) == 0
    assert _size(b" " * 12) == 0
    with pytest.raises(mt.CacheError, match="damaged"):
        _size(b"1X\0")
    with pytest.raises(mt.CacheError, match="damaged"):
        _size(b"18\0")


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


def test_a_checksum_with_a_leading_digit_is_read_whole():
    """Names of high bytes: the checksum passes 8**5 and its six digits fill the field."""
    info = tarfile.TarInfo("p/n")
    block = bytearray(info.tobuf(format=tarfile.USTAR_FORMAT)[:512])
    block[0:100] = b"\xff" * 100
    block[345:500] = b"\xfe" * 155
    block = _checked(block)
    assert block[148:149] != b"0"
    assert mt.tar_header(block)[0] == "\\xfe" * 155 + "/" + "\\xff" * 100


@pytest.mark.parametrize("cut", [1, 700])
def test_a_stream_that_ends_inside_a_member_it_skips_ends_there(tmp_path, cut):
    """A member the run does not need is skipped to its last byte; a stream that ends before
    that byte (one byte short, or more) ends the reading there: the member is named once and
    nothing more is read or said."""
    from potato.training.remote import media_cache as mc
    from potato.training.remote import media_receive as mr
    cache = str(tmp_path / "media")
    mc.pin(cache, "job", [(sha(b"wanted"), 6)])
    skipped = member("x" * 100, b"y" * 1000)
    out = mr.receive(cache, "job", io.BytesIO(skipped[:-cut]), 1 << 30)
    assert (out["received"], out["bad"], out["bad_count"]) == (
        0, ["'%s' (not a file this run needs)" % ("x" * 80)], 1)
    whole = mr.receive(cache, "job", io.BytesIO(skipped + member(sha(b"wanted"), b"wanted")
                                               + bytes(1024)), 1 << 30)
    assert (whole["received"], whole["bad_count"]) == (1, 1)  # skipped exactly: the next is read
