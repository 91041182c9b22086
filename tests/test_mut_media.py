"""Media paths and their checks, unit by unit (issue 26: the mutation run's tests for
potato/media.py, potato/validation_media.py and the pure parts of potato/server/media_route.py).
Fast: a stand-in config (a namespace with the fields these modules read), files in tmp_path."""

import errno
import os
import socket
import stat
from types import SimpleNamespace

import pytest

from potato import media
from tests.helpers import DIGITS, wav_bytes

PNG = open(os.path.join(DIGITS, "media", "images", "digit-0000.png"), "rb").read()


def make_cfg(tmp_path, media_directory="media", image_key="image", audio_key="audio"):
    folder = tmp_path / "media"
    folder.mkdir(exist_ok=True)
    (folder / "a.png").write_bytes(PNG)
    (folder / "t.wav").write_bytes(wav_bytes(0.01))
    return SimpleNamespace(
        media_directory=str(tmp_path / media_directory) if media_directory else None,
        task_dir=str(tmp_path / "media"),
        item_properties=SimpleNamespace(image_key=image_key, audio_key=audio_key, id_key="id"))


@pytest.fixture
def cfg(tmp_path):
    return make_cfg(tmp_path)


def image(source):
    return media.MediaRef("image", source)


# -- shown / quoted -----------------------------------------------------------------------------

def test_shown_escapes_each_width_and_caps_exactly():
    assert media.shown("\x9f") == "\\x9f"  # a C1 control: two hex digits
    assert media.shown("\u200b") == "\\u200b"  # below 0x10000: four
    assert media.shown("\U000e0001") == "\\U000e0001"  # a tag character: eight
    assert media.shown("\u0100\U00010000") == "\u0100\U00010000"  # printable: as is
    assert media.shown("abc", 3) == "abc"
    assert media.shown("abcd", 3) == "abc…"
    assert media.shown("x" * media.NAME_CAP) == "x" * media.NAME_CAP
    assert media.shown("x" * (media.NAME_CAP + 1)) == "x" * media.NAME_CAP + "…"
    assert media.shown("\x00", 3) == "\\x0…"  # the escape counts towards the cap
    assert media.quoted("abcd", 2) == "'ab…'"
    assert media.quoted("x" * 200) == "'" + "x" * 120 + "…'"


# -- item_media ---------------------------------------------------------------------------------

def test_item_media_fields_kinds_and_urls(tmp_path):
    cfg = make_cfg(tmp_path)
    both = {"image": "a.png", "audio": "t.wav"}
    assert media.item_media(cfg, both) == media.MediaRef("image", "a.png")
    assert media.item_media(cfg, both, ("audio",)) == media.MediaRef("audio", "t.wav")
    assert media.item_media(cfg, both, ("image",)) == media.MediaRef("image", "a.png")
    assert media.item_media(cfg, {"audio": "t.wav"}) == media.MediaRef("audio", "t.wav")
    assert media.item_media(cfg, {"image": None, "audio": "t.wav"}).kind == "audio"
    assert media.item_media(cfg, {"image": "", "audio": ""}) is None
    assert media.item_media(cfg, {}) is None
    assert media.item_media(cfg, both, ()) is None
    ref = media.item_media(cfg, {"image": "  HTTPS://Ex.org/A.png "})
    assert ref == media.MediaRef("image", "  HTTPS://Ex.org/A.png ", url="HTTPS://Ex.org/A.png")
    assert ref.is_url
    ref = media.item_media(cfg, {"image": "http://ex.org/a.png"})
    assert ref.url == "http://ex.org/a.png" and ref.kind == "image"
    assert not media.MediaRef("image", "a.png").is_url
    for other in (" JavaScript:x", "vbscript:x", "blob:x", "mailto+x://y"):
        with pytest.raises(media.MediaError, match="only http"):
            media.item_media(cfg, {"image": other})
    assert media.item_media(cfg, {"image": "javascript"}).source == "javascript"
    assert media.item_media(cfg, {"image": "a:b.png"}).source == "a:b.png"
    with pytest.raises(media.MediaError, match="'image' field must be a path or URL, not int"):
        media.item_media(cfg, {"image": 3})
    with pytest.raises(media.MediaError, match="'audio' field must be"):
        media.item_media(cfg, {"audio": 3})
    # a kind without a key is never looked at, even when a field has its name
    no_image = make_cfg(tmp_path, image_key=None)
    assert media.item_media(no_image, both) == media.MediaRef("audio", "t.wav")
    no_audio = make_cfg(tmp_path, audio_key="")
    assert media.item_media(no_audio, {"audio": "t.wav"}) is None
    assert media.item_media(no_audio, {"audio": 3}) is None


# -- local_path and open_media --------------------------------------------------------------------

def test_local_path_uses_the_task_dir_without_a_media_directory(tmp_path):
    cfg = make_cfg(tmp_path, media_directory=None)
    assert media.local_path(cfg, image("a.png")) == os.path.realpath(tmp_path / "media" / "a.png")


def test_local_path_refuses_urls_and_names_the_folder(cfg, tmp_path):
    root = os.path.realpath(tmp_path / "media")
    with pytest.raises(media.MediaError, match="is a URL") as e:
        media.local_path(cfg, media.MediaRef("image", "http://x/a.png", url="http://x/a.png"))
    assert type(e.value) is media.MediaError
    with pytest.raises(media.MediaRefused) as e:
        media.local_path(cfg, image("/a.png"))
    assert str(e.value) == f"'/a.png' is not a path relative to the media folder {root}"
    with pytest.raises(media.MediaRefused) as e:
        media.local_path(cfg, image("a\x00.png"))
    assert "not a path relative" in str(e.value)
    with pytest.raises(media.MediaRefused) as e:
        media.local_path(cfg, image("x/../a.png"))
    assert str(e.value) == f"'x/../a.png' leaves the media folder {root}"
    with pytest.raises(media.MediaRefused, match="leaves the media folder"):
        media.local_path(cfg, image("./"))
    (tmp_path / "media" / "up").symlink_to(tmp_path)
    (tmp_path / "s.png").write_bytes(PNG)
    with pytest.raises(media.MediaRefused) as e:
        media.local_path(cfg, image("up/s.png"))
    assert str(e.value) == f"'up/s.png' leads outside the media folder {root} (a symlink)"
    assert media.local_path(cfg, image("up/media/a.png")) == os.path.join(root, "a.png")
    with pytest.raises(media.MediaMissing) as e:
        media.local_path(cfg, image("b.png"))
    assert type(e.value) is media.MediaMissing
    assert str(e.value) == f"'b.png': no such file in the media folder {root}"
    assert media.local_path(cfg, image("a.png")) == os.path.join(root, "a.png")
    assert media.local_path(cfg, image("./a.png")) == os.path.join(root, "a.png")
    (tmp_path / "media" / "XX").mkdir()  # no name is refused for how it begins
    (tmp_path / "media" / "XX" / "XX.png").write_bytes(PNG)
    assert media.local_path(cfg, image("XX/XX.png")) == os.path.join(root, "XX", "XX.png")


def test_a_sibling_folder_with_the_same_prefix_is_outside(tmp_path):
    cfg = make_cfg(tmp_path)
    (tmp_path / "media2").mkdir()
    (tmp_path / "media2" / "a.png").write_bytes(PNG)
    (tmp_path / "media" / "s").symlink_to(tmp_path / "media2")
    with pytest.raises(media.MediaRefused):
        media.local_path(cfg, image("s/a.png"))
    assert media._inside("/a/b", "/a/b/c") and media._inside("/a/b", "/a/b")
    assert not media._inside("/a/b", "/a/bc") and not media._inside("/a/b", "b/c")


def test_what_is_not_a_file(cfg, tmp_path):
    folder = tmp_path / "media"
    (folder / "dir").mkdir()
    os.mkfifo(folder / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(folder / "sock"))
        for name, what in (("dir", "a folder"), ("fifo", "a FIFO (named pipe)"),
                           ("sock", "a socket")):
            with pytest.raises(media.MediaNotAFile) as e:
                media.local_path(cfg, image(name))
            assert e.value.what == what
            assert str(e.value) == (f"'{name}' is {what}, not a file, in the media folder "
                                    f"{os.path.realpath(folder)}")
    finally:
        sock.close()
    with pytest.raises(media.MediaNotAFile) as e:
        media._regular(image("d"), stat.S_IFCHR | 0o600, "/r")
    assert e.value.what == "a device" and str(e.value) == "'d' is a device, not a file, in the " \
                                                          "media folder /r"
    with pytest.raises(media.MediaNotAFile, match="is a device"):
        media._regular(image("d"), stat.S_IFBLK | 0o600, "/r")
    assert media._regular(image("f"), stat.S_IFREG | 0o600, "/r") is None


def test_open_media_gives_the_descriptor_path_and_type(cfg, tmp_path):
    opened = media.open_media(cfg, image("a.png"))
    try:
        assert opened.path == os.path.realpath(tmp_path / "media" / "a.png")
        assert opened.ctype == "image/png"
        assert os.pread(opened.fd, 8, 0) == PNG[:8]
        assert os.get_inheritable(opened.fd) is False
    finally:
        os.close(opened.fd)
    assert media.probe(cfg, media.MediaRef("audio", "t.wav")) == (
        os.path.realpath(tmp_path / "media" / "t.wav"), "audio/wav")


def fail_open(monkeypatch, err):
    def refuse(root, path):
        raise OSError(err, os.strerror(err))
    monkeypatch.setattr(media, "_open_inside", refuse)


@pytest.mark.parametrize("err", [errno.ELOOP, errno.ENOTDIR, errno.EXDEV])
def test_open_media_says_a_symlink_appeared(cfg, tmp_path, monkeypatch, err):
    fail_open(monkeypatch, err)
    with pytest.raises(media.MediaRefused) as e:
        media.open_media(cfg, image("a.png"))
    assert str(e.value) == (f"'a.png' leads outside the media folder "
                            f"{os.path.realpath(tmp_path / 'media')} (it changed into a symlink)")


def test_open_media_says_a_file_vanished_or_cannot_be_read(cfg, tmp_path, monkeypatch):
    root = os.path.realpath(tmp_path / "media")
    fail_open(monkeypatch, errno.ENOENT)
    with pytest.raises(media.MediaMissing) as e:
        media.open_media(cfg, image("a.png"))
    assert type(e.value) is media.MediaMissing
    assert str(e.value) == f"'a.png': no such file in the media folder {root}"
    fail_open(monkeypatch, errno.EACCES)
    with pytest.raises(media.MediaMissing) as e:
        media.open_media(cfg, image("a.png"))
    assert str(e.value) == "'a.png' cannot be read (Permission denied)"

    def no_strerror(root, path):
        raise OSError(errno.EIO, "")
    monkeypatch.setattr(media, "_open_inside", no_strerror)
    with pytest.raises(media.MediaMissing, match=r"cannot be read \(\[Errno 5\] \)"):
        media.open_media(cfg, image("a.png"))


def test_open_media_closes_what_it_opened_on_every_failure(cfg, tmp_path, monkeypatch):
    (tmp_path / "media" / "t.png").write_bytes(b"text")
    closed = []
    real_close = os.close
    monkeypatch.setattr(media.os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    with pytest.raises(media.MediaUnsupported):
        media.open_media(cfg, image("t.png"))
    assert len(closed) == 1

    def bad_pread(fd, n, at):
        raise OSError(errno.EIO, "I/O error")
    monkeypatch.setattr(media.os, "pread", bad_pread)
    with pytest.raises(media.MediaMissing) as e:
        media.open_media(cfg, image("a.png"))
    assert str(e.value) == "'a.png' cannot be read (I/O error)" and len(closed) == 2

    def bad_pread_bare(fd, n, at):
        raise OSError()
    monkeypatch.setattr(media.os, "pread", bad_pread_bare)
    with pytest.raises(media.MediaMissing, match=r"^'a.png' cannot be read \(\)$"):
        media.open_media(cfg, image("a.png"))
    assert len(closed) == 3


def test_pread_reads_the_first_sniff_bytes(cfg, tmp_path, monkeypatch):
    asked = []
    real = os.pread
    monkeypatch.setattr(media.os, "pread", lambda fd, n, at: (asked.append((n, at)),
                                                             real(fd, n, at))[1])
    os.close(media.open_media(cfg, image("a.png")).fd)
    assert asked == [(media.SNIFF_BYTES, 0)] and media.SNIFF_BYTES == 32


def test_open_inside_without_proc_walks_the_folders(cfg, tmp_path, monkeypatch):
    root = os.path.realpath(tmp_path / "media")
    (tmp_path / "media" / "x" / "y").mkdir(parents=True)
    (tmp_path / "media" / "x" / "y" / "b.png").write_bytes(PNG)
    monkeypatch.setattr(media, "PROC_FD", str(tmp_path / "no-proc"))
    fd = media._open_inside(root, os.path.join(root, "x", "y", "b.png"))
    try:
        assert os.pread(fd, 8, 0) == PNG[:8]
    finally:
        os.close(fd)
    fd = media._open_inside(root, os.path.join(root, "a.png"))
    os.close(fd)
    (tmp_path / "media" / "l").symlink_to(tmp_path / "media" / "x")
    with pytest.raises(OSError) as e:
        media._open_inside(root, os.path.join(root, "l", "y", "b.png"))
    assert e.value.errno in (errno.ELOOP, errno.ENOTDIR)
    (tmp_path / "media" / "x" / "y" / "c.png").symlink_to(tmp_path / "media" / "a.png")
    with pytest.raises(OSError) as e:
        media._open_inside(root, os.path.join(root, "x", "y", "c.png"))
    assert e.value.errno == errno.ELOOP


def test_open_inside_falls_back_to_the_walk_when_proc_cannot_say(cfg, tmp_path, monkeypatch):
    root = os.path.realpath(tmp_path / "media")
    walked = []
    real_walk = media._walk_open
    monkeypatch.setattr(media, "_walk_open", lambda r, p: (walked.append(p), real_walk(r, p))[1])
    real_readlink = os.readlink

    def no_readlink(path):
        raise OSError(errno.EACCES, "no")
    monkeypatch.setattr(media.os, "readlink", no_readlink)
    fd = media._open_inside(root, os.path.join(root, "a.png"))
    os.close(fd)
    assert walked == [os.path.join(root, "a.png")]
    monkeypatch.setattr(media.os, "readlink", lambda p: "/elsewhere/a.png")
    with pytest.raises(OSError) as e:
        media._open_inside(root, os.path.join(root, "a.png"))
    assert e.value.errno == errno.EXDEV
    monkeypatch.setattr(media.os, "readlink", real_readlink)
    fd = media._open_inside(root, os.path.join(root, "a.png"))
    os.close(fd)
    assert len(walked) == 1


def test_open_flags_never_follow_block_or_leak():
    assert media.OPEN_FLAGS & os.O_NOFOLLOW and media.OPEN_FLAGS & os.O_NONBLOCK
    assert media.OPEN_FLAGS & os.O_CLOEXEC
    assert media.OPEN_FLAGS & (os.O_WRONLY | os.O_RDWR) == 0
    assert media._DIR_FLAGS & os.O_DIRECTORY and media._DIR_FLAGS & os.O_CLOEXEC
    assert media._NOFOLLOW == os.O_NOFOLLOW and media._CLOEXEC == os.O_CLOEXEC
    assert media.PROC_FD == "/proc/self/fd"


# -- sniff, is_svg, content_type ------------------------------------------------------------------

BMP = b"BM" + b"\x36\x0c\0\0" + b"\0\0\0\0" + b"\x36\0\0\0" + b"\x28" + b"\0" * 15


@pytest.mark.parametrize("head,found", [
    (b"\x89PNG\r\n\x1a\n", ("image", "image/png")), (b"\x89PNG\r\n\x1a", None),
    (b"\xff\xd8\xff", ("image", "image/jpeg")), (b"GIF87a", ("image", "image/gif")),
    (b"GIF89a", ("image", "image/gif")), (b"GIF88a", None),
    (b"RIFF\0\0\0\0WEBP", ("image", "image/webp")), (b"RIFX\0\0\0\0WEBP", None),
    (b"RIFF\0\0\0\0WAVE", ("audio", "audio/wav")), (b"RIFX\0\0\0\0WAVE", None),
    (b"RIFF\0\0\0\0AVI ", None),
    (BMP, ("image", "image/bmp")), (BMP[:26], ("image", "image/bmp")), (BMP[:25], None),
    (BMP[:6] + b"\0\0\0\1" + BMP[10:], None), (b"BX" + BMP[2:], None),
    (b"\0\0\0\x1cftypavis", ("image", "image/avif")), (b"\0\0\0\x1cftypheix", None),
    (b"\0\0\0\x1cftyphevc", None), (b"\0\0\0\x1cftypmif1", None),
    (b"\0\0\0\x1cftypisom", ("audio", "audio/mp4")), (b"\0\0\0\x1cftyp", ("audio", "audio/mp4")),
    (b"\0\0\0\x1cftxpavif", None),
    (b"OggS", ("audio", "audio/ogg")), (b"fLaC", ("audio", "audio/flac")),
    (b"\x1a\x45\xdf\xa3", ("audio", "audio/webm")), (b"ID3", ("audio", "audio/mpeg")),
    (b"ID", None), (b"Ogg", None),
    (b"\xff\xe2", ("audio", "audio/mpeg")), (b"\xff\xfb", ("audio", "audio/mpeg")),
    (b"\xff\xe3", ("audio", "audio/mpeg")), (b"\xff\xe0", None), (b"\xff\xe4", None),
    (b"\xff\xf0", ("audio", "audio/aac")), (b"\xff\xf9", ("audio", "audio/aac")),
    (b"\xff\xf2", ("audio", "audio/mpeg")), (b"\xff\xf4", None), (b"\xff\xe8", None),
    (b"\xff\x00", None), (b"\xfe\xf0", None), (b"\xff", None), (b"", None)])
def test_sniff_edges(head, found):
    assert media.sniff(head) == found


@pytest.mark.parametrize("head,svg", [
    (b"<svg>", True), (b"<?xml ?>", True), (b"<!DOCTYPE SVG x>", True), (b"<SVG>", True),
    (b"\xef\xbb\xbf \t\r\n<svg>", True), (b" <svg", True), (b"\n<?xml", True),
    (b"\t<svg", True), (b"\r<svg", True), (b"\xef\xbb\xbf<svg", True),
    (b"<html>", False), (b"x<svg>", False), (b"", False), (b"<!doctype html>", False)])
def test_is_svg(head, svg):
    assert media.is_svg(head) is svg


def test_content_type_messages():
    with pytest.raises(media.MediaUnsupported) as e:
        media.content_type(image("a.svg"), b"<svg/>")
    assert str(e.value) == ("'a.svg' is an SVG (not served: it can carry scripts; convert it to "
                            "PNG)")
    with pytest.raises(media.MediaUnsupported) as e:
        media.content_type(image("a.txt"), b"hello")
    assert str(e.value) == "'a.txt' is not an image or audio format a browser shows"
    with pytest.raises(media.MediaUnsupported) as e:
        media.content_type(image("t.wav"), b"RIFF\0\0\0\0WAVE")
    assert str(e.value) == "'t.wav' is audio (audio/wav), and the item names it as its image"
    assert media.content_type(media.MediaRef("audio", "x"), b"OggS") == "audio/ogg"
    assert media.content_type(image("x"), PNG) == "image/png"


# -- url_origin ---------------------------------------------------------------------------------

@pytest.mark.parametrize("url,origin", [
    ("https://ex.org", "https://ex.org"), ("http://a-b.c0.org/x", "http://a-b.c0.org"),
    ("https://ex.org:443/", "https://ex.org:443"), ("https://ex.org:0/", "https://ex.org:0"),
    ("https://A.B/", "https://a.b"), ("https://a/", "https://a"),
    ("https://ex.org/a!b", "https://ex.org"), ("https://ex.org/\x21", "https://ex.org"),
    ("https://ex.org/\x20", None), ("https://ex.org/\x7e", "https://ex.org"),
    ("https://ex.org/\x7f", None),  # DEL, a control character, as C1 and bidi controls
    ("https://ex.org/\\", None), ("https://ex.org/'", None), ("https://ex.org/<", None),
    ("https://ex.org/>", None), ('https://ex.org/"', None), ("ftp://ex.org/", None),
    ("https://@ex.org/", None), ("https://-a.org/", None), ("https://a-.org/", None),
    ("https://a..b/", None), ("https://a_b.org/", None), ("https://ex.org:x/", None),
    ("https://ex.org./", None), ("HTTPS://ex.org/", "https://ex.org"),
    ("https://ex.org/X", "https://ex.org")])
def test_url_origin_edges(url, origin):
    assert media.url_origin(url) == origin


# -- potato validate's media rules (validation_media) ------------------------------------------------

from potato.config import load  # noqa: E402
from potato import validation_media as vm  # noqa: E402
from tests.helpers import MEDIA_CONFIG, media_project  # noqa: E402


def rules(path):
    """media_rules over the config at ``path``: (cfg, errors, warnings, notes), each finding as
    (key, message)."""
    cfg, errors, _ = load(path)
    assert not errors, errors
    found = {"err": [], "warn": []}
    report = SimpleNamespace(notes=[])
    vm.media_rules(cfg, report,
                   lambda key, msg: found["err"].append((key, msg)),
                   lambda key, msg: found["warn"].append((key, msg)))
    return cfg, found["err"], found["warn"], report.notes


IMAGE_KEY = ("item_properties", "image_key")
AUDIO_KEY = ("item_properties", "audio_key")


def test_few_names_the_first_five():
    assert vm.FEW == 5
    assert vm.few(["a", "b", "c", "d", "e"]) == "a, b, c, d, e"
    assert vm.few(["a", "b", "c", "d", "e", "f"]) == "a, b, c, d, e, …"
    assert vm.few(["a", "b"], "; ") == "a; b"
    assert vm.few(list("abcdefg"), "; ") == "a; b; c; d; e; …"
    assert vm.few(["abcdef", "\x00"], cap=3) == "abc…, \\x0…"
    assert vm.few(["x" * 130]) == "x" * 120 + "…"
    assert vm.LONG == 360 and vm.few(["x" * 400], cap=vm.LONG) == "x" * 360 + "…"


def test_nothing_to_check_without_media_keys(tmp_path):
    config = MEDIA_CONFIG.replace("item_properties: {image_key: image, audio_key: audio}", "")
    rows = [{"id": "a", "image": "../x.png", "text": "t"}]
    _, errors, warnings, notes = rules(media_project(tmp_path, items=rows, config=config))
    assert (errors, warnings, notes) == ([], [], [])


def test_the_media_folder_must_be_a_folder(tmp_path):
    path = media_project(tmp_path, config=MEDIA_CONFIG.replace("media_directory: media",
                                                               "media_directory: pics"))
    cfg, errors, warnings, _ = rules(path)
    assert errors == [(("media_directory",), f"media_directory is {tmp_path / 'pics'}, which is "
                       f"not a folder. Give the folder the items' image and audio paths are "
                       f"relative to (relative to task_dir, {cfg.task_dir}).")]
    assert warnings == []


def test_without_a_media_directory_paths_are_relative_to_the_task_dir(tmp_path):
    rows = [{"id": "a", "image": "media/digit-0.png"}, {"id": "b", "image": "lost.png"}]
    path = media_project(tmp_path, items=rows,
                         config=MEDIA_CONFIG.replace("media_directory: media\n", ""))
    _, errors, warnings, _ = rules(path)
    root = os.path.realpath(tmp_path)
    assert errors == []
    assert warnings == [(IMAGE_KEY, f"1 of 2 items name an image that is not in {root}: "
                                    f"lost.png; fix the paths or media_directory.")]


def test_missing_or_broken_data_files_are_left_to_their_rules(tmp_path):
    path = media_project(tmp_path, items=[{"id": "a", "image": "lost.png"}])
    (tmp_path / "items.jsonl").unlink()
    assert rules(path)[1:] == ([], [], [])
    (tmp_path / "items.jsonl").write_text("{not json\n")
    _, errors, warnings, _ = rules(path)
    assert [k for k, _ in errors] == [("data_files",)] and warnings == []
    assert "items.jsonl" in errors[0][1]


def test_no_data_files_at_all(tmp_path):
    path = media_project(tmp_path, config=MEDIA_CONFIG.replace("data_files: [items.jsonl]",
                                                               "data_files: []"))
    cfg, errors, _ = load(path)
    got = []
    vm.media_rules(cfg, SimpleNamespace(notes=[]), lambda *a: got.append(a),
                   lambda *a: got.append(a))
    assert got == []


def test_each_finding_of_one_kind(tmp_path):
    rows = [{"id": "t1", "text": "only text"},
            {"id": "r1", "image": "../x.png"}, {"id": "r2", "image": 7, "text": "t"},
            {"id": "m1", "image": "lost.png"}, {"id": "s1", "image": "sounds/tone-0.wav"},
            {"id": "d1", "image": "sounds"}, {"id": "u1", "image": "https://b.org/1.png"},
            {"id": "u2", "image": "https://a.org/2.png"}, {"id": "u3", "image": "https://b.org/3"},
            {"id": "b1", "image": "https://x:y@c.org/"}, {"id": "ok", "image": "digit-0.png"}]
    cfg, errors, warnings, notes = rules(media_project(tmp_path, items=rows))
    root = os.path.realpath(tmp_path / "media")
    assert errors == [(IMAGE_KEY, f"2 of 11 items name an image outside the media folder {root} "
                                  f"(an absolute path, '..', a symlink out, or not a path), which "
                                  f"is never served: ../x.png, r2 (the item's 'image' field must "
                                  f"be a path or URL, not int). Give paths relative to "
                                  f"media_directory.")]
    assert warnings == [
        (IMAGE_KEY, f"1 of 11 items name an image that is not in {root}: lost.png; fix the paths "
                    f"or media_directory."),
        (IMAGE_KEY, "1 of 11 items' image files cannot be shown by a browser: 'sounds/tone-0.wav' "
                    "is audio (audio/wav), and the item names it as its image. Convert them to "
                    "PNG, JPEG, GIF or WebP."),
        (IMAGE_KEY, "1 of 11 items name an image that is not a file: 'sounds' (a folder); name "
                    "the image file itself."),
        (IMAGE_KEY, "1 of 11 items name an image address the annotate page will not load and "
                    "no run fetches (only plain http:// and https:// addresses, without spaces, "
                    "tabs or user info): item b1 ('https://x:y@c.org/'). Those items are left "
                    "out of runs whose model reads the images.")]
    [note] = notes
    assert note.message == ("the image of 3 item(s) are web addresses, not checked here "
                            "(validate fetches nothing): the annotators' browsers load them "
                            "from https://a.org, https://b.org.")
    assert (note.key, note.line, note.file) == ("item_properties.image_key", 5, cfg.path)


def test_audio_findings_and_the_error_when_every_file_is_missing(tmp_path):
    rows = [{"id": "a", "audio": "lost.wav", "text": "t"},
            {"id": "b", "audio": "lost2.wav", "text": "t"},
            {"id": "u", "audio": "https://a.org/x.wav", "text": "t"},
            {"id": "c", "image": "digit-0.png"}]
    _, errors, warnings, notes = rules(media_project(tmp_path, items=rows))
    root = os.path.realpath(tmp_path / "media")
    assert errors == [(AUDIO_KEY, f"none of the 2 audio files the items name is in {root}: "
                                  f"lost.wav, lost2.wav; fix media_directory (relative to "
                                  f"task_dir) or the paths.")]
    assert warnings == []
    assert [n.message for n in notes] == [
        "the audio of 1 item(s) are web addresses, not checked here (validate fetches nothing): "
        "the annotators' browsers load them from https://a.org."]
    assert notes[0].key == "item_properties.audio_key"


def test_unsupported_audio_and_counts_with_thousands(tmp_path):
    rows = [{"id": f"i{n}", "audio": "digit-0.png", "text": "t"} for n in range(1001)]
    _, errors, warnings, _ = rules(media_project(tmp_path, items=rows))
    assert errors == []
    assert warnings == [(AUDIO_KEY, "1,001 of 1,001 items' audio files cannot be shown by a "
                                    "browser: 'digit-0.png' is image (image/png), and the item "
                                    "names it as its audio; 'digit-0.png' is image (image/png), "
                                    "and the item names it as its audio; 'digit-0.png' is image "
                                    "(image/png), and the item names it as its audio; "
                                    "'digit-0.png' is image (image/png), and the item names it "
                                    "as its audio; 'digit-0.png' is image (image/png), and the "
                                    "item names it as its audio; …. Convert them to WAV, MP3, "
                                    "OGG, FLAC or M4A.")]


def test_a_symlink_out_is_refused_and_names_are_escaped(tmp_path):
    rows = [{"id": "a\x1b", "image": "out.png"}, {"id": "ok", "image": "digit-0.png"}]
    path = media_project(tmp_path, items=rows)
    (tmp_path / "secret.png").write_bytes(PNG)
    (tmp_path / "media" / "out.png").symlink_to(tmp_path / "secret.png")
    _, errors, warnings, _ = rules(path)
    assert [m for _, m in errors] == [
        f"1 of 2 items name an image outside the media folder "
        f"{os.path.realpath(tmp_path / 'media')} (an absolute path, '..', a symlink out, or not "
        f"a path), which is never served: out.png. Give paths relative to media_directory."]
    assert warnings == []


# -- the media route without a server (potato/server/media_route.py): ranges, ETags, the page's
# policy, who may see an item's media, and what is sent, through a stand-in handler and app --------

import io  # noqa: E402
import json  # noqa: E402

from potato.server import media_route as mr  # noqa: E402
from potato.server.errors import HTTPError  # noqa: E402


# -- parse_range ---------------------------------------------------------------------------------

@pytest.mark.parametrize("header,size,want", [
    ("bytes=0-0", 10, (0, 0)), ("bytes=9-9", 10, (9, 9)), ("bytes=9-", 10, (9, 9)),
    ("bytes=0-", 10, (0, 9)), ("bytes=-1", 10, (9, 9)), ("bytes=-10", 10, (0, 9)),
    ("bytes=-9", 10, (1, 9)), ("bytes=-11", 10, (0, 9)), ("bytes=3-3", 10, (3, 3)),
    ("bytes=2-1", 10, None), ("bytes=0-10", 10, (0, 9)), ("bytes=0-9", 10, (0, 9)),
    ("bytes=0-", 1, (0, 0)),
    ("bytes=1-", 2, (1, 1)), ("BYTES=0-1", 10, None), ("bytes=0-1 ", 10, (0, 1)),
    ("bytes=01-02", 10, (1, 2)), ("x bytes=0-1", 10, None), ("bytes=0-1x", 10, None),
    ("bytes=" + "1" * 19 + "-", 10 ** 20, (int("1" * 19), 10 ** 20 - 1)),
    ("bytes=" + "1" * 20 + "-", 10 ** 21, None), ("bytes=-" + "1" * 19, 10, (0, 9)),
    ("bytes=-" + "1" * 20, 10, None), ("bytes=0-" + "1" * 19, 10, (0, 9)),
    ("bytes=0-" + "1" * 20, 10, None)])
def test_parse_range_edges(header, size, want):
    assert mr.parse_range(header, size) == want


@pytest.mark.parametrize("header,size", [("bytes=10-", 10), ("bytes=10-10", 10),
                                         ("bytes=-0", 10), ("bytes=-1", 0), ("bytes=0-0", 0),
                                         ("bytes=-00", 5)])
def test_parse_range_not_satisfiable(header, size):
    with pytest.raises(mr.RangeNotSatisfiable):
        mr.parse_range(header, size)


# -- ETags -------------------------------------------------------------------------------------

def test_etag_of_names_inode_times_and_size():
    st = SimpleNamespace(st_ino=0x1a, st_mtime_ns=0x2b, st_ctime_ns=0x3c, st_size=0x4d)
    assert mr.etag_of(st) == '"1a-2b-3c-4d"'


@pytest.mark.parametrize("header,match", [
    ('"a"', True), ('W/"a"', True), (' "b" , "a" ', True), ('"b",W/"a"', True), ("*", True),
    ('"b", *', True), ("", False), (None, False), ('"b"', False), ('w/"a"', False),
    ('W/"b"', False), ('"a"x', False), ("a", False), ('X/"a"', False)])
def test_etag_matches(header, match):
    assert mr.etag_matches(header, '"a"') is match


# -- page_headers --------------------------------------------------------------------------------

def test_page_headers_allow_each_media_origin_for_its_kind_alone(tmp_path):
    cfg = make_cfg(tmp_path)
    assert mr.page_headers(cfg, {"image": "a.png", "audio": "t.wav"}) == {}
    assert mr.page_headers(cfg, {}) == {}
    assert mr.page_headers(cfg, {"image": "https://u:p@x.org/a"}) == {}
    assert mr.page_headers(cfg, {"image": 7, "audio": "javascript:x"}) == {}
    csp = mr.page_headers(cfg, {"image": "https://i.org/a.png"})["Content-Security-Policy"]
    assert csp == ("default-src 'self'; img-src 'self' data: https://i.org; style-src 'self'; "
                   "script-src 'self'; object-src 'none'; base-uri 'none'; "
                   "frame-ancestors 'none'; media-src 'self'")
    csp = mr.page_headers(cfg, {"audio": "http://a.org:81/x.wav"})["Content-Security-Policy"]
    assert csp == ("default-src 'self'; img-src 'self' data:; style-src 'self'; "
                   "script-src 'self'; object-src 'none'; base-uri 'none'; "
                   "frame-ancestors 'none'; media-src 'self' http://a.org:81")
    both = mr.page_headers(cfg, {"image": "https://i.org/a.png", "audio": "https://a.org/x"})
    assert both == {"Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data: https://i.org; style-src 'self'; "
        "script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
        "media-src 'self' https://a.org")}
    # an image that is no URL next to an audio URL: only the audio's origin
    assert mr.page_headers(cfg, {"image": 7, "audio": "https://a.org/x"})[
        "Content-Security-Policy"].endswith("media-src 'self' https://a.org")
    assert mr.SECURITY_HEADERS["Content-Security-Policy"].count("https://") == 0


# -- the route, through a stand-in handler --------------------------------------------------------

class Handler:
    def __init__(self, headers=None, command="GET", admin=False, user="ann"):
        self.headers = headers or {}
        self.command = command
        self.admin, self.user = admin, user
        self.wfile = io.BytesIO()
        self.close_connection = False
        self.started = None

    def is_admin(self):
        return self.admin

    def annotator(self):
        return self.user

    def start_response(self, status, ctype, length, headers):
        assert self.started is None
        self.started = (status, ctype, length, dict(headers))


class Store:
    def __init__(self, items):
        self.items = items

    def item(self, item_id):
        return self.items.get(item_id)


class App:
    def __init__(self, cfg, items, mine=("i1",)):
        self.config = cfg
        self.store = Store(items)
        self.assignment = SimpleNamespace(
            may_label=lambda user, item_id: user == "ann" and item_id in mine)
        self.routes = []

    def route(self, method, pattern):
        def register(func):
            self.routes.append((method, pattern, func))
            return func
        return register


def item(data, active=True):
    return {"data": json.dumps(data) if not isinstance(data, str) else data, "active": active}


@pytest.fixture
def app(tmp_path):
    cfg = make_cfg(tmp_path)
    (tmp_path / "media" / "big.png").write_bytes(PNG + bytes(range(256)) * 600)
    (tmp_path / "media" / "d").mkdir()
    (tmp_path / "media" / "x.png").write_bytes(b"text")
    (tmp_path / "s.png").write_bytes(PNG)
    (tmp_path / "media" / "out.png").symlink_to(tmp_path / "s.png")
    items = {"i1": item({"image": "a.png", "audio": "t.wav"}), "big": item({"image": "big.png"}),
             "off": item({"image": "a.png"}, active=False), "none": item({"text": "t"}),
             "url": item({"image": "https://ex.org/a\x1b.png"}), "bad": item({"image": 7}),
             "badjson": item("{x"), "empty": item(""), "list": item([1]),
             "out": item({"image": "out.png"}), "dir": item({"image": "d"}),
             "lost": item({"image": "lost.png"}), "txt": item({"image": "x.png"}),
             "a/b": item({"image": "a.png"})}
    a = App(cfg, items, mine=("i1", "off"))
    mr.add_media_routes(a)
    return a


def get(app, item_id, kind="image", **kw):
    [(method, pattern, func)] = app.routes
    h = Handler(**kw)
    func(h, kind, item_id)
    return h


def refused(app, item_id, kind="image", **kw):
    with pytest.raises(HTTPError) as e:
        get(app, item_id, kind, **kw)
    return e.value.status, e.value.message


def test_the_route_pattern(app):
    import re
    [(method, pattern, _)] = app.routes
    assert method == "GET"
    m = re.fullmatch(pattern, "/media/audio/i%2F1")
    assert m.group("kind") == "audio" and m.group("item_id") == "i%2F1"
    assert re.fullmatch(pattern, "/media/video/i1") is None
    assert re.fullmatch(pattern, "/media/image/a/b") is None


def test_an_annotator_gets_the_file_of_an_item_given_to_them(app, tmp_path):
    os.utime(tmp_path / "media" / "a.png", (10 ** 9, 10 ** 9))
    h = get(app, "i1")
    st = os.stat(tmp_path / "media" / "a.png")
    status, ctype, length, headers = h.started
    assert (status, ctype, length) == (200, "image/png", len(PNG))
    assert headers == {"Cache-Control": "private, no-cache", "Content-Security-Policy":
                       mr.MEDIA_CSP, "ETag": mr.etag_of(st), "Accept-Ranges": "bytes",
                       "Last-Modified": headers["Last-Modified"]}
    assert headers["Last-Modified"] == "Sun, 09 Sep 2001 01:46:40 GMT"
    assert h.wfile.getvalue() == PNG and not h.close_connection
    assert get(app, "i1", "audio").started[1] == "audio/wav"


def test_who_may_see_an_items_media(app):
    assert refused(app, "i1", admin=False, user=None) == (
        401, "Log in to see an item's media (/login).")
    assert refused(app, "nope") == (404, "No item 'nope' in this project.")
    assert refused(app, "off", admin=False)[0] == 404  # no longer in the data files
    assert get(app, "off", admin=True).started[0] == 200
    assert refused(app, "big") == (403, "Item 'big' is not one of yours: its media are shown "
                                         "to the annotators it is given to.")
    assert get(app, "big", admin=True, user=None).started[0] == 200
    assert refused(app, "i1", user="bob")[0] == 403  # given to ann, not to bob
    assert get(app, "a%2Fb", admin=True).started[0] == 200  # the id is unquoted


def test_what_an_item_without_a_servable_file_gets(app):
    admin = {"admin": True}
    assert refused(app, "none", **admin) == (404, "Item 'none' has no image.")
    status, msg = refused(app, "url", **admin)
    assert status == 404 and msg == ("Item 'url''s image is the address "
                                     "https://ex.org/a\\x1b.png: the browser loads it from "
                                     "there, this server does not.")
    status, msg = refused(app, "bad", **admin)
    assert status == 404 and msg.startswith("Item 'bad' names no usable image (the item's")
    status, msg = refused(app, "badjson", **admin)
    assert status == 404 and msg.startswith("Item 'badjson' names no usable image (")
    assert refused(app, "empty", **admin) == (404, "Item 'empty' has no image.")
    assert refused(app, "list", **admin) == (404, "Item 'list' has no image.")
    status, msg = refused(app, "out", **admin)
    assert status == 403 and msg.startswith("Item 'out''s image 'out.png' is not inside")
    status, msg = refused(app, "dir", **admin)
    assert status == 404 and msg.startswith("Item 'dir''s image 'd' is a folder, not a file.")
    status, msg = refused(app, "lost", **admin)
    assert status == 404 and msg.startswith("Item 'lost''s image 'lost.png' is not in the media")
    status, msg = refused(app, "txt", **admin)
    assert status == 415 and msg.startswith("Item 'txt''s image cannot be shown: 'x.png' is not")


def test_a_range_a_304_and_head(app, tmp_path):
    size = os.path.getsize(tmp_path / "media" / "big.png")
    data = (tmp_path / "media" / "big.png").read_bytes()
    etag = mr.etag_of(os.stat(tmp_path / "media" / "big.png"))
    h = get(app, "big", admin=True, headers={"Range": "bytes=10-19"})
    assert h.started[0] == 206 and h.started[2] == 10
    assert h.started[3]["Content-Range"] == f"bytes 10-19/{size}"
    assert h.wfile.getvalue() == data[10:20]
    h = get(app, "big", admin=True, headers={"Range": "bytes=5-5"})
    assert h.started[2] == 1 and h.wfile.getvalue() == data[5:6]
    h = get(app, "big", admin=True, headers={"Range": "bytes=-70000"})
    assert h.started[2] == 70000 and h.wfile.getvalue() == data[-70000:]
    h = get(app, "big", admin=True, headers={"If-None-Match": etag})
    assert h.started[:3] == (304, "image/png", size) and h.wfile.getvalue() == b""
    h = get(app, "big", admin=True, headers={"If-None-Match": '"other"'})
    assert h.started[0] == 200 and h.wfile.getvalue() == data
    h = get(app, "big", admin=True, command="HEAD")
    assert h.started[:3] == (200, "image/png", size) and h.wfile.getvalue() == b""
    h = get(app, "big", admin=True, command="HEAD", headers={"Range": "bytes=0-0"})
    assert h.started[:3] == (206, "image/png", 1) and h.wfile.getvalue() == b""
    # If-Range: the range only while the file is the one the client has
    h = get(app, "big", admin=True, headers={"Range": "bytes=0-1", "If-Range": etag})
    assert h.started[0] == 206 and h.wfile.getvalue() == data[:2]
    h = get(app, "big", admin=True, headers={"Range": "bytes=0-1", "If-Range": " %s " % etag})
    assert h.started[0] == 206
    h = get(app, "big", admin=True, headers={"Range": "bytes=0-1", "If-Range": '"old"'})
    assert h.started[0] == 200 and "Content-Range" not in h.started[3]
    assert h.wfile.getvalue() == data
    h = get(app, "big", admin=True, headers={"Range": "bytes=0-1", "If-Range": ""})
    assert h.started[0] == 206
    h = get(app, "big", admin=True, headers={"Range": "bytes=1-0"})
    assert h.started[0] == 200 and "Content-Range" not in h.started[3]


def test_a_range_past_the_end_is_416(app, tmp_path):
    size = os.path.getsize(tmp_path / "media" / "big.png")
    with pytest.raises(HTTPError) as e:
        get(app, "big", admin=True, headers={"Range": "bytes=%d-" % size})
    assert e.value.status == 416 and e.value.headers == {"Content-Range": f"bytes */{size}"}
    assert e.value.message == (f"The range 'bytes={size}-' lies past the end of the file "
                               f"({size} bytes).")


class Shrinking(io.BytesIO):
    """A file that ends before its stat said."""

    def __init__(self, data, real):
        super().__init__(data)
        self.real = real

    def fileno(self):
        return self.real.fileno()


def test_send_streams_in_chunks_and_stops_when_the_file_shrank(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * (mr.CHUNK * 2 + 5))
    reads = []
    with open(path, "rb") as f:
        read = f.read
        f.read = lambda n: (reads.append(n), read(n))[1]
        h = Handler()
        mr._send(h, f, "image/png")
    assert reads == [mr.CHUNK, mr.CHUNK, 5] and not h.close_connection
    assert h.wfile.getvalue() == b"x" * (mr.CHUNK * 2 + 5)
    reads.clear()
    with open(path, "rb") as real:
        f = Shrinking(b"y" * (mr.CHUNK + 3), real)
        read = f.read
        f.read = lambda n: (reads.append(n), read(n))[1]
        h = Handler()
        mr._send(h, f, "image/png")
    assert h.started[2] == mr.CHUNK * 2 + 5
    assert reads == [mr.CHUNK, mr.CHUNK, mr.CHUNK]
    assert h.wfile.getvalue() == b"y" * (mr.CHUNK + 3) and h.close_connection is True
    assert mr.CHUNK == 65536


def test_send_reads_from_the_start_of_the_range(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(bytes(range(100)))
    with open(path, "rb") as f:
        f.read(50)
        h = Handler(headers={"Range": "bytes=-3"})
        mr._send(h, f, "image/png")
    assert h.wfile.getvalue() == bytes([97, 98, 99]) and not h.close_connection
    with open(path, "rb") as f:
        f.read(50)
        h = Handler()
        mr._send(h, f, "image/png")
    assert h.wfile.getvalue() == bytes(range(100))


def test_an_empty_file_is_sent_as_nothing(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"")
    with open(path, "rb") as f:
        h = Handler()
        mr._send(h, f, "audio/wav")
    assert h.started[:3] == (200, "audio/wav", 0) and h.wfile.getvalue() == b""
    assert not h.close_connection


def test_the_media_policy_runs_nothing():
    assert mr.MEDIA_CSP.startswith("default-src 'none';") and "sandbox" in mr.MEDIA_CSP
    assert mr.CACHE_CONTROL == "private, no-cache"


def test_a_file_swapped_for_a_fifo_after_the_check_is_no_file(cfg, tmp_path, monkeypatch):
    check = media.local_path

    def then_swap(cfg, ref):
        path = check(cfg, ref)
        os.remove(path)
        os.mkfifo(path)
        return path

    monkeypatch.setattr(media, "local_path", then_swap)
    with pytest.raises(media.MediaNotAFile) as e:
        media.probe(cfg, image("a.png"))
    assert str(e.value) == ("'a.png' is a FIFO (named pipe), not a file, in the media folder "
                            f"{os.path.realpath(tmp_path / 'media')}")


def test_validate_names_long_entries_up_to_their_own_cap(tmp_path):
    long_id, long_png, long_dir = "i" * 100, "p" * 100 + ".png", "d" * 118
    rows = [{"id": long_id, "image": 7, "text": "t"}, {"id": "b", "image": long_png},
            {"id": "c", "image": long_dir}, {"id": "ok", "image": "digit-0.png"}]
    path = media_project(tmp_path, items=rows)
    (tmp_path / "media" / long_png).write_bytes(wav_bytes(0.01))
    (tmp_path / "media" / long_dir).mkdir()
    _, errors, warnings, _ = rules(path)
    refused = f"{long_id} (the item's 'image' field must be a path or URL, not int)"
    assert errors[0][1].split("never served: ")[1] == refused + ". Give paths relative to " \
                                                               "media_directory."
    assert (f"cannot be shown by a browser: '{long_png}' is audio (audio/wav), and the item "
            f"names it as its image. Convert") in warnings[0][1]
    assert f"that is not a file: '{long_dir}' (a folder); name" in warnings[1][1]
