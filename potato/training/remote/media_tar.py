"""The strict reader of a media tar stream's headers (standard library, Python 3.8; shipped).

Part of the host's media cache (remote/media_cache.py): media_push runs this file, that one and
remote/media_receive.py together as one ``python -c`` program, so it imports nothing of Potato.
"""

BLOCK = 1 << 20


class CacheError(Exception):
    """A cache operation that cannot be done; the message says why."""


TAR_BLOCK = 512
TAR_END = bytes(TAR_BLOCK)


def _tar_number(field):
    """A tar header's number field: octal, or GNU base-256 (first byte 0x80) for large ones."""
    if field[0] & 0x80:
        return int.from_bytes(bytes([field[0] & 0x7f]) + field[1:], "big")
    digits = field.split(b"\0", 1)[0].strip()
    if not digits:
        return 0
    if digits.translate(None, b"01234567"):  # int() would take "+7", "0o7", "1_0"
        raise CacheError("the tar stream is damaged (a header field reads %s)"
                         % ascii(digits.decode("latin-1")))
    return int(digits, 8)


def tar_header(block):
    """(name, type, size) of a tar header block; CacheError when its checksum is wrong (a
    damaged or hostile stream: the rest cannot be trusted to line up). ``name`` is text
    (undecodable bytes escaped): only a name equal to a wanted hash is ever used."""
    if _tar_number(block[148:156]) != sum(block[:148]) + 256 + sum(block[156:]):
        raise CacheError("the tar stream is damaged (a header's checksum does not match)")
    name = block[:100].split(b"\0", 1)[0]
    if block[257:262] == b"ustar" and block[345] != 0:
        name = block[345:500].split(b"\0", 1)[0] + b"/" + name
    return name.decode("ascii", "backslashreplace"), block[156:157], _tar_number(block[124:136])


def _skip(stream, n):
    while n > 0:
        got = len(stream.read(min(n, BLOCK)))
        if not got:
            return False
        n -= got
    return True


def _padding(size):
    return -size % TAR_BLOCK
