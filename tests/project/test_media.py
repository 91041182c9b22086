"""Media items without a server: resolving a path inside the media folder (every way out
refused), reading a file's type from its bytes, byte ranges and ETags, items with an image and
no text, upstream's image and audio display fields, and `potato validate`'s media messages."""

import os

import pytest

from potato.project import media
from potato.config.settings import load
from potato.project.data import DataError, load_items
from potato.server import media_route
from potato.project.validation import check
from potato.config.settings import ItemProperties
from tests.helpers import DIGITS, MEDIA_CONFIG, media_project, wav_bytes

PNG = open(os.path.join(DIGITS, "media", "images", "digit-0000.png"), "rb").read()


@pytest.fixture
def cfg(tmp_path):
    c, errors, _ = load(media_project(tmp_path))
    assert not errors, errors
    (tmp_path / "media" / "sub").mkdir()
    (tmp_path / "media" / "sub" / "a b.png").write_bytes(PNG)
    (tmp_path / "secret.png").write_bytes(PNG)
    (tmp_path / "media" / "out.png").symlink_to(tmp_path / "secret.png")
    (tmp_path / "media" / "outdir").symlink_to(tmp_path)
    (tmp_path / "media" / "in.png").symlink_to(tmp_path / "media" / "digit-0.png")
    return c


def image(source):
    return media.MediaRef("image", source)


@pytest.mark.parametrize("source", ["digit-0.png", "./digit-0.png", "sub/a b.png",
                                    "sub\\a b.png", "sub//a b.png", "in.png",
                                    "/media/digit-0.png", "/media/sub/a b.png"])
def test_paths_inside_the_folder_resolve(cfg, tmp_path, source):
    path = media.local_path(cfg, image(source))
    assert path.startswith(os.path.realpath(tmp_path / "media") + os.sep)
    assert os.path.isfile(path)


@pytest.mark.parametrize("source", [
    "../secret.png", "sub/../../secret.png", "..\\secret.png", "sub\\..\\..\\secret.png",
    "/etc/passwd", "\\etc\\passwd", "out.png", "outdir/secret.png", "digit-0.png\x00.txt",
    "..", "", ".", "sub/..", "/media/../secret.png", "/media//etc/passwd", "/media/out.png",
    "/media/", "/mediax/digit-0.png"])
def test_every_way_out_of_the_folder_is_refused(cfg, source):
    with pytest.raises(media.MediaRefused):
        media.local_path(cfg, image(source))


def test_a_missing_file_is_missing_not_refused(cfg):
    with pytest.raises(media.MediaMissing, match="no such file"):
        media.local_path(cfg, image("nope.png"))
    with pytest.raises(media.MediaMissing):
        media.local_path(cfg, image("sub"))  # a folder is no file


def test_item_media_reads_the_configured_fields(cfg):
    assert media.item_media(cfg, {"image": "a.png"}) == media.MediaRef("image", "a.png")
    ref = media.item_media(cfg, {"audio": " https://ex.org/a.wav"})
    assert ref.is_url and ref.url == "https://ex.org/a.wav" and ref.kind == "audio"
    assert media.item_media(cfg, {"image": "", "text": "x"}) is None
    assert media.item_media(cfg, {"image": "a.png", "audio": "b.wav"}, ("audio",)).kind == "audio"
    with pytest.raises(media.MediaError, match="must be a path or URL"):
        media.item_media(cfg, {"image": ["a.png"]})
    for other in ("javascript:alert(1)", "data:image/png;base64,AAAA", "file:///etc/passwd",
                  "FTP://x/y.png", "s3://bucket/a.png"):
        with pytest.raises(media.MediaError, match="only http"):
            media.item_media(cfg, {"image": other})
    assert media.item_media(cfg, {"image": "c:/a.png"}).source == "c:/a.png"  # a name


MP4_AUDIO = b"\0\0\0\x20ftypM4A \0\0\0\0M4A mp42isom\0\0\0\0"


@pytest.mark.parametrize("head,found", [
    (PNG, ("image", "image/png")), (b"\xff\xd8\xff\xe0\0\x10JFIF", ("image", "image/jpeg")),
    (b"GIF89a\x01\0", ("image", "image/gif")), (b"RIFF\x10\0\0\0WEBPVP8 ", ("image", "image/webp")),
    (b"BM" + b"\x36\x0c\0\0" + b"\0\0\0\0" + b"\x36\0\0\0" + b"\x28" + b"\0" * 15,
     ("image", "image/bmp")),
    (b"\0\0\0\x1cftypavif\0\0\0\0", ("image", "image/avif")),
    (wav_bytes(0.01), ("audio", "audio/wav")), (b"ID3\x04\0\0\0\0\0\0", ("audio", "audio/mpeg")),
    (b"\xff\xfb\x90\x64\0\0", ("audio", "audio/mpeg")), (b"\xff\xf1\x50\x80", ("audio", "audio/aac")),
    (b"OggS\0\x02", ("audio", "audio/ogg")), (b"fLaC\0\0\0\x22", ("audio", "audio/flac")),
    (MP4_AUDIO, ("audio", "audio/mp4")), (b"\x1a\x45\xdf\xa3\x9f", ("audio", "audio/webm")),
    (b"<svg xmlns='http://www.w3.org/2000/svg'>", None), (b"<?xml version='1.0'?><svg>", None),
    (b"<html><script>alert(1)</script>", None), (b"\0\0\0\x18ftypheic", None),
    (b"BMnot a bitmap at all", None), (b"", None), (b"plain text", None),
    (b"%PDF-1.7", None), (b"PK\x03\x04", None)])
def test_the_type_comes_from_the_bytes(head, found):
    assert media.sniff(head[:media.SNIFF_BYTES]) == found


def test_probe_refuses_svg_wrong_kind_and_unknown_bytes(cfg, tmp_path):
    folder = tmp_path / "media"
    (folder / "evil.png").write_bytes(b"<svg onload='alert(1)'></svg>")
    (folder / "text.png").write_bytes(b"hello")
    (folder / "real.jpg").write_bytes(PNG)  # the name says JPEG, the bytes PNG
    with pytest.raises(media.MediaUnsupported, match="SVG"):
        media.probe(cfg, image("evil.png"))
    with pytest.raises(media.MediaUnsupported, match="not an image, audio or video format"):
        media.probe(cfg, image("text.png"))
    with pytest.raises(media.MediaUnsupported, match="is image .* as its audio"):
        media.probe(cfg, media.MediaRef("audio", "digit-0.png"))
    assert media.probe(cfg, image("real.jpg"))[1] == "image/png"
    assert media.probe(cfg, media.MediaRef("audio", "sounds/tone-0.wav"))[1] == "audio/wav"


@pytest.mark.parametrize("url,origin", [
    ("https://ex.org/a.png", "https://ex.org"), ("http://ex.org:8080/x?y=1", "http://ex.org:8080"),
    ("https://10.0.0.1/a", "https://10.0.0.1"), ("javascript:alert(1)", None),
    ("https://user:pw@ex.org/a", None), ("https://ex.org/a\"onerror=x", None),
    ("https://ex.org;script-src *", None), ("https://[::1]/a", None), ("https:///a", None),
    ("https://ex.org:99999/a", None), ("https://ex.org/a b", None), ("data:image/png,x", None)])
def test_url_origins_for_the_page_policy(url, origin):
    assert media.url_origin(url) == origin


@pytest.mark.parametrize("header,size,want", [
    ("bytes=0-99", 1000, (0, 99)), ("bytes=100-", 1000, (100, 999)), ("bytes=-10", 1000, (990, 999)),
    ("bytes=-5000", 1000, (0, 999)), ("bytes=990-5000", 1000, (990, 999)), (" bytes = 5 - 6 ", 10, (5, 6)),
    (None, 10, None), ("", 10, None), ("bytes=5-1", 10, None), ("bytes=0-1,3-4", 10, None),
    ("items=0-1", 10, None), ("bytes=-", 10, None), ("bytes=a-b", 10, None),
    ("bytes=" + "9" * 40 + "-", 10, None)])
def test_one_byte_range_or_the_whole_file(header, size, want):
    assert media_route.parse_range(header, size) == want


@pytest.mark.parametrize("header,size", [("bytes=1000-", 1000), ("bytes=1000-2000", 1000),
                                         ("bytes=-0", 1000), ("bytes=0-", 0), ("bytes=-1", 0)])
def test_ranges_past_the_end_are_not_satisfiable(header, size):
    with pytest.raises(media_route.RangeNotSatisfiable):
        media_route.parse_range(header, size)


def test_etags_compare_weakly_and_star():
    assert media_route.etag_matches('"a-1", W/"b-2"', '"b-2"')
    assert media_route.etag_matches("*", '"x"')
    assert not media_route.etag_matches('"a-1"', '"a-2"')
    assert not media_route.etag_matches(None, '"a-1"')


# -- items and configs ------------------------------------------------------------------------

def test_image_items_need_no_text_and_text_items_still_do(tmp_path):
    c, _, _ = load(media_project(tmp_path))
    items = {i: t for i, t, _ in load_items(c)}
    assert items == {"img0": "", "img1": "", "tone0": "Which sound?", "gone": ""}
    media_project(tmp_path, items=[{"id": "x", "other": 1}])
    with pytest.raises(DataError, match=r"item 'x' has no 'text' text \(item_properties.text_key\) "
                                        r"and no image, audio or video\."):
        load_items(c)
    media_project(tmp_path, items=[{"id": "x", "image": {"path": "a"}}])
    with pytest.raises(DataError, match="item 'x': the item's 'image' field must be a path"):
        load_items(c)
    text_only, _, _ = load(media_project(tmp_path, items=[{"id": "x", "image": "digit-0.png"}],
                                         config=MEDIA_CONFIG.replace(
                                             "item_properties: {image_key: image, audio_key: "
                                             "audio}", "")))
    with pytest.raises(DataError, match=r"has no 'text' text \(item_properties.text_key\)\.$"):
        load_items(text_only)


def test_csv_items_with_images_need_no_text_column(tmp_path):
    media_project(tmp_path, items=[])
    (tmp_path / "items.csv").write_text("id,image\na,digit-0.png\n")
    path = tmp_path / "config.yaml"
    path.write_text(MEDIA_CONFIG.replace("items.jsonl", "items.csv"))
    c, _, _ = load(str(path))
    assert [(i, t) for i, t, _ in load_items(c)] == [("a", "")]


UPSTREAM_DISPLAY = """\
annotation_task_name: up
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
media_directory: media
instance_display:
  fields:
    - {key: picture, type: image, label: The picture}
    - {key: clip, type: audio}
annotation_schemes:
  - {annotation_type: radio, name: kind, labels: [a, b]}
"""


def test_upstream_image_and_audio_fields_imply_the_media_keys(tmp_path):
    c, errors, _ = load(media_project(tmp_path, config=UPSTREAM_DISPLAY))
    assert errors == []
    assert (c.item_properties.image_key, c.item_properties.audio_key) == ("picture", "clip")
    assert [f.type for f in c.upstream.display] == ["image", "audio"]
    clash = UPSTREAM_DISPLAY + "item_properties: {image_key: image}\n"
    _, errors, _ = load(media_project(tmp_path, config=clash))
    [e] = errors
    assert "shows the image field 'picture', and item_properties.image_key is 'image'" in e.message
    video = UPSTREAM_DISPLAY.replace("type: audio", "type: video")
    c, errors, _ = load(media_project(tmp_path, config=video))
    assert errors == []
    assert (c.item_properties.audio_key, c.item_properties.video_key) == (None, "clip")
    pdf = UPSTREAM_DISPLAY.replace("type: audio", "type: pdf")
    _, errors, _ = load(media_project(tmp_path, config=pdf))
    assert ["only image, audio and video media are shown here" in e.message
            for e in errors] == [True]


# -- potato validate --------------------------------------------------------------------------

def test_validate_counts_missing_files_and_names_the_first_few(tmp_path):
    rows = [{"id": f"m{n}", "image": f"lost-{n}.png"} for n in range(7)] + [
        {"id": "ok", "image": "digit-0.png"}]
    _, report = check(media_project(tmp_path, items=rows))
    assert report.errors == []
    [w] = report.warnings
    root = os.path.realpath(tmp_path / "media")
    assert w.message == (f"7 of 8 items name an image that is not in {root}: lost-0.png, "
                         f"lost-1.png, lost-2.png, lost-3.png, lost-4.png, …; fix the paths or "
                         f"media_directory.")
    assert w.key == "item_properties.image_key" and w.line == 5


def test_validate_says_when_no_file_is_there(tmp_path):
    rows = [{"id": f"m{n}", "image": f"images/d-{n}.png"} for n in range(1797)]
    _, report = check(media_project(tmp_path, items=rows))
    [e] = report.errors
    assert e.message.startswith("none of the 1,797 image files the items name is in ")
    assert "fix media_directory (relative to task_dir) or the paths." in e.message


def test_validate_refuses_escapes_and_flags_unshowable_files(tmp_path):
    rows = [{"id": "a", "image": "../config.yaml"}, {"id": "b", "image": "/etc/hostname"},
            {"id": "c", "image": "page.png"}, {"id": "d", "audio": "digit-0.png", "text": "t"},
            {"id": "e", "image": "https://img.example.org/e.png"},
            {"id": "f", "image": "ftp://x/y.png", "text": "t"}, {"id": "g", "image": "digit-1.png"},
            {"id": "h", "image": "https://u:pw@ex.org/h.png", "text": "t"}]
    path = media_project(tmp_path, items=rows)
    (tmp_path / "media" / "page.png").write_bytes(b"<?xml version='1.0'?><svg/>")
    _, report = check(path)
    [e] = report.errors
    assert e.message.startswith("3 of 8 items name an image outside the media folder ")
    assert ("../config.yaml, /etc/hostname, f (the item's 'image' field is 'ftp://x/y.png': "
            "only http(s) addresses and paths in the media folder are shown). Give paths "
            "relative to media_directory.") in e.message
    msgs = [w.message for w in report.warnings]
    assert ("1 of 8 items' image files cannot be shown by a browser: 'page.png' is an SVG (not "
            "served: it can carry scripts; convert it to PNG). Convert them to PNG, JPEG, GIF "
            "or WebP.") in msgs
    assert ("1 of 8 items' audio files cannot be shown by a browser: 'digit-0.png' is image "
            "(image/png), and the item names it as its audio. Convert them to WAV, MP3, OGG, "
            "FLAC or M4A.") in msgs
    assert ("1 of 8 items name an image address the annotate page will not load and no run "
            "fetches (only plain http:// and https:// addresses, without spaces, tabs or user "
            "info): item h ('https://u:pw@ex.org/h.png'). Those items are left out of runs "
            "whose model reads the images.") in msgs
    assert any("web addresses, not checked here (validate fetches nothing): the annotators' "
               "browsers load them from https://img.example.org." in n.message
               for n in report.notes)


def test_validate_media_directory_and_the_digits_example(tmp_path, capsys):
    _, report = check(media_project(tmp_path, config=MEDIA_CONFIG.replace(
        "media_directory: media", "media_directory: pictures")))
    assert [e.key for e in report.errors] == ["media_directory"]
    assert "media_directory is " in report.errors[0].message and "not a folder" in \
        report.errors[0].message
    _, report = check(os.path.join(DIGITS, "config.yaml"))
    assert (report.errors, report.warnings) == ([], [])
    assert len(os.listdir(os.path.join(DIGITS, "media", "images"))) == 200


# -- opened once: the file read is the file checked ---------------------------------------------

def swap_after_check(monkeypatch, tmp_path, source="sub/a b.png"):
    """After local_path has checked ``source``, its folder becomes a symlink to a folder
    outside the media folder holding a file of the same name (what race.py did by chance)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a b.png").write_bytes(PNG + b"TOP-SECRET")
    check = media.local_path
    swapped = []

    def then_swap(cfg, ref):
        path = check(cfg, ref)
        if ref.source == source and not swapped:
            os.rename(tmp_path / "media" / "sub", tmp_path / "media" / "sub-real")
            (tmp_path / "media" / "sub").symlink_to(outside)
            swapped.append(path)
        return path

    monkeypatch.setattr(media, "local_path", then_swap)
    return swapped


@pytest.mark.parametrize("proc", [True, False])
def test_a_folder_swapped_for_a_symlink_after_the_check_is_refused(cfg, tmp_path, monkeypatch,
                                                                   proc):
    if not proc:  # no /proc: each folder is opened from the media folder down, no symlinks
        monkeypatch.setattr(media, "PROC_FD", str(tmp_path / "no-proc"), raising=False)
    swapped = swap_after_check(monkeypatch, tmp_path)
    with pytest.raises(media.MediaRefused, match="outside the media folder"):
        media.probe(cfg, image("sub/a b.png"))
    assert swapped


def test_the_file_swapped_for_a_symlink_after_the_check_is_refused(cfg, tmp_path, monkeypatch):
    check = media.local_path

    def then_swap(cfg, ref):
        path = check(cfg, ref)
        os.remove(path)
        os.symlink(tmp_path / "secret.png", path)
        return path

    monkeypatch.setattr(media, "local_path", then_swap)
    with pytest.raises(media.MediaRefused):
        media.probe(cfg, image("digit-1.png"))


def unblock(fifo):
    """Opens the FIFO's writing end once, so a reader stuck in open() gets EOF (only a test
    that fails leaves one)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # no reader waiting: nothing blocked


def in_thread(fn, *args):
    """fn(*args) in a thread, given 20 s (it should take milliseconds): (result, error)."""
    import threading
    out = {}

    def run():
        try:
            out["result"] = fn(*args)
        except Exception as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    return t, out


def test_a_fifo_or_folder_is_not_a_file_and_never_blocks(cfg, tmp_path):
    fifo = tmp_path / "media" / "pipe.png"
    os.mkfifo(fifo)
    try:
        t, out = in_thread(media.probe, cfg, image("pipe.png"))
        assert not t.is_alive(), "probe blocked on a FIFO"
    finally:
        unblock(fifo)
        t.join(5)
    assert isinstance(out.get("error"), media.MediaNotAFile), out
    assert "'pipe.png' is a FIFO (named pipe), not a file" in str(out["error"])
    with pytest.raises(media.MediaNotAFile, match="'sub' is a folder, not a file"):
        media.probe(cfg, image("sub"))


def test_a_file_of_the_wrong_type_never_reaches_a_bundle(cfg, tmp_path):
    from potato.training.lifecycle.prepare import bundle_media
    (tmp_path / "media" / "page.png").write_bytes(b"<html><script>alert(1)</script>")
    assert bundle_media(cfg, '{"image": "page.png"}') is None
    assert bundle_media(cfg, '{"image": "sub"}') is None
    assert bundle_media(cfg, '{"image": "digit-0.png"}') == {
        "kind": "image", "path": os.path.realpath(tmp_path / "media" / "digit-0.png")}


def test_a_replacement_of_the_same_size_and_time_changes_the_etag(tmp_path):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    a.write_bytes(PNG)
    b.write_bytes(PNG[:-1] + b"\0")
    os.utime(a, ns=(10 ** 18, 10 ** 18))
    os.utime(b, ns=(10 ** 18, 10 ** 18))
    before = media_route.etag_of(os.stat(a))
    os.replace(b, a)
    st = os.stat(a)
    assert (st.st_size, st.st_mtime_ns) == (len(PNG), 10 ** 18)
    assert media_route.etag_of(st) != before


def test_names_are_shown_escaped_and_short():
    assert media.shown("a\x1b[31mb\x00c\n\u202ed.png") == "a\\x1b[31mb\\x00c\\x0a\\u202ed.png"
    assert media.shown("x" * 500) == "x" * 120 + "…"
    assert media.shown("\x00" * 500) == "\\x00" * 30 + "…"
    assert media.shown("ok name ü.png") == "ok name ü.png"
    assert media.quoted("it's.png") == "'it's.png'"


def test_validate_escapes_and_shortens_names_and_never_blocks(tmp_path):
    long = "d" * 300 + ".png"
    rows = [{"id": "a", "image": "\x1b]0;pwned\x07\x1b[2J.png"}, {"id": "b", "image": long},
            {"id": "c", "image": "pipe.png"}, {"id": "d", "image": "sounds"},
            {"id": "e", "image": "../\x1b[31m.png"}, {"id": "ok", "image": "digit-0.png"}]
    path = media_project(tmp_path, items=rows)
    fifo = tmp_path / "media" / "pipe.png"
    os.mkfifo(fifo)
    try:
        t, out = in_thread(check, path)
        assert not t.is_alive(), "validate blocked on a FIFO"
    finally:
        unblock(fifo)
        t.join(5)
    _, report = out["result"]
    text = "\n".join(p.message for p in report.errors + report.warnings)
    assert not any(ord(c) < 0x20 and c != "\n" for c in text), repr(text)
    assert "\\x1b]0;pwned\\x07\\x1b[2J.png, " + "d" * 120 + "…;" in text
    assert "d" * 121 not in text
    assert ("2 of 6 items name an image that is not a file: 'pipe.png' (a FIFO (named pipe)), "
            "'sounds' (a folder); name the image file itself.") in text
    assert "which is never served: ../\\x1b[31m.png." in text


def test_a_file_swapped_for_a_fifo_after_the_check_never_blocks(cfg, tmp_path, monkeypatch):
    check, fifo = media.local_path, tmp_path / "media" / "digit-1.png"

    def then_swap(cfg, ref):  # what race2.py did by chance
        path = check(cfg, ref)
        os.remove(path)
        os.mkfifo(path)
        return path

    monkeypatch.setattr(media, "local_path", then_swap)
    try:
        t, out = in_thread(media.probe, cfg, image("digit-1.png"))
        assert not t.is_alive(), "probe blocked on a FIFO"
    finally:
        unblock(fifo)
        t.join(5)
    assert isinstance(out.get("error"), media.MediaNotAFile), out


def test_validate_names_the_item_whose_media_address_has_a_tab(tmp_path):
    # issue 34, item 3: which item, and why (the tab shown, not a blank)
    _, report = check(media_project(tmp_path, items=[
        {"id": "ok", "image": "https://img.example.org/a.png", "text": "t"},
        {"id": "tabbed", "image": "https://img.example.org/a\tb.png", "text": "t"}]))
    [w] = [w.message for w in report.warnings if "address" in w.message]
    assert "item tabbed ('https://img.example.org/a\\tb.png')" in w, w
    assert w.startswith("1 of 2 items name an image address the annotate page will not load "
                        "and no run fetches")


def test_validate_warns_of_an_image_too_big_for_a_browser(tmp_path):
    # issue 34, item 12: a 900-megapixel PNG (a header saying so is enough) was served silently
    import struct
    import zlib

    def png_header(w, h):
        ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr +
                struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)))

    path = media_project(tmp_path, items=[{"id": "big", "image": "big.png"},
                                          {"id": "ok", "image": "digit-0.png"},
                                          {"id": "edge", "image": "edge.png"}])
    (tmp_path / "media" / "big.png").write_bytes(png_header(30000, 30000))
    (tmp_path / "media" / "edge.png").write_bytes(png_header(10000, 10000))  # exactly 100 MP
    _, report = check(path)
    [w] = [w.message for w in report.warnings if "megapixels" in w.message]
    assert w == ("1 of 3 items' images are over 100 megapixels: 'big.png' (30,000×30,000). A "
                 "browser needs 4 bytes a pixel to show one (400 MB at 100 megapixels), so the "
                 "annotate page may freeze or fail on a laptop: scale them down.")
    assert media.MAX_PIXELS == 100_000_000
    (tmp_path / "media" / "edge.png").write_bytes(png_header(17, 5_882_353))  # 100,000,001
    _, report = check(path)
    [w] = [w.message for w in report.warnings if "megapixels" in w.message]
    assert w == ("2 of 3 items' images are over 100 megapixels: 'big.png' (30,000×30,000); "
                 "'edge.png' (17×5,882,353). A "
                 "browser needs 4 bytes a pixel to show one (400 MB at 100 megapixels), so the "
                 "annotate page may freeze or fail on a laptop: scale them down.")


@pytest.mark.parametrize("fmt,extra", [("PNG", {}), ("JPEG", {}), ("JPEG", {"progressive": True}),
                                       ("GIF", {}), ("BMP", {}), ("WEBP", {}),
                                       ("WEBP", {"lossless": True})])
def test_image_size_reads_each_format_a_browser_shows(tmp_path, fmt, extra):
    from PIL import Image

    from potato.project import media
    path = tmp_path / ("x." + fmt.lower())
    Image.new("RGB", (321, 47)).save(path, fmt, **extra)
    assert media.image_size(str(path)) == (321, 47)
    path.write_bytes(b"\xff\xd8\xff\xe0\x00\x00")  # a JPEG cut in its first segment
    assert media.image_size(str(path)) is None


def test_addresses_with_hidden_characters_or_absurd_length_are_no_origin():
    # a bidi override makes an address read as another; 70,000 characters is no address
    from potato.project import media
    assert media.url_origin("https://img.example.org/a.png") == "https://img.example.org"
    assert media.url_origin("https://img.example.org/\u202egnp.exe") is None
    assert media.url_origin("https://img.example.org/a\u200bb.png") is None
    assert media.url_origin("https://img.example.org/" + "a" * 2000) is None
    assert media.url_origin("https://img.example.org/사진.png") == "https://img.example.org"


# -- media.py unit by unit (from the mutation run's tests, issue 26): a stand-in config (a
# namespace with the fields media.py reads), files in tmp_path --------------------------------

import errno  # noqa: E402
import socket  # noqa: E402
import stat  # noqa: E402
from types import SimpleNamespace  # noqa: E402


def make_cfg(tmp_path, media_directory="media", image_key="image", audio_key="audio",
             video_key="video"):
    folder = tmp_path / "media"
    folder.mkdir(exist_ok=True)
    (folder / "a.png").write_bytes(PNG)
    (folder / "t.wav").write_bytes(wav_bytes(0.01))
    return SimpleNamespace(
        media_directory=str(tmp_path / media_directory) if media_directory else None,
        task_dir=str(tmp_path / "media"),
        item_properties=ItemProperties(image_key=image_key, audio_key=audio_key,
                                       video_key=video_key))


@pytest.fixture
def ns_cfg(tmp_path):
    return make_cfg(tmp_path)


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
    ns_cfg = make_cfg(tmp_path)
    both = {"image": "a.png", "audio": "t.wav"}
    assert media.item_media(ns_cfg, both) == media.MediaRef("image", "a.png")
    assert media.item_media(ns_cfg, both, ("audio",)) == media.MediaRef("audio", "t.wav")
    assert media.item_media(ns_cfg, both, ("image",)) == media.MediaRef("image", "a.png")
    assert media.item_media(ns_cfg, {"audio": "t.wav"}) == media.MediaRef("audio", "t.wav")
    assert media.item_media(ns_cfg, {"image": None, "audio": "t.wav"}).kind == "audio"
    assert media.item_media(ns_cfg, {"image": "", "audio": ""}) is None
    assert media.item_media(ns_cfg, {}) is None
    assert media.item_media(ns_cfg, both, ()) is None
    ref = media.item_media(ns_cfg, {"image": "  HTTPS://Ex.org/A.png "})
    assert ref == media.MediaRef("image", "  HTTPS://Ex.org/A.png ", url="HTTPS://Ex.org/A.png")
    assert ref.is_url
    ref = media.item_media(ns_cfg, {"image": "http://ex.org/a.png"})
    assert ref.url == "http://ex.org/a.png" and ref.kind == "image"
    assert not media.MediaRef("image", "a.png").is_url
    for other in (" JavaScript:x", "vbscript:x", "blob:x", "mailto+x://y"):
        with pytest.raises(media.MediaError, match="only http"):
            media.item_media(ns_cfg, {"image": other})
    assert media.item_media(ns_cfg, {"image": "javascript"}).source == "javascript"
    assert media.item_media(ns_cfg, {"image": "a:b.png"}).source == "a:b.png"
    with pytest.raises(media.MediaError, match="'image' field must be a path or URL, not int"):
        media.item_media(ns_cfg, {"image": 3})
    with pytest.raises(media.MediaError, match="'audio' field must be"):
        media.item_media(ns_cfg, {"audio": 3})
    # a kind without a key is never looked at, even when a field has its name
    no_image = make_cfg(tmp_path, image_key=None)
    assert media.item_media(no_image, both) == media.MediaRef("audio", "t.wav")
    no_audio = make_cfg(tmp_path, audio_key="")
    assert media.item_media(no_audio, {"audio": "t.wav"}) is None
    assert media.item_media(no_audio, {"audio": 3}) is None


# -- local_path and open_media --------------------------------------------------------------------

def test_local_path_uses_the_task_dir_without_a_media_directory(tmp_path):
    ns_cfg = make_cfg(tmp_path, media_directory=None)
    assert media.local_path(ns_cfg, image("a.png")) == os.path.realpath(tmp_path / "media" / "a.png")


def test_local_path_refuses_urls_and_names_the_folder(ns_cfg, tmp_path):
    root = os.path.realpath(tmp_path / "media")
    with pytest.raises(media.MediaError, match="is a URL") as e:
        media.local_path(ns_cfg, media.MediaRef("image", "http://x/a.png", url="http://x/a.png"))
    assert type(e.value) is media.MediaError
    with pytest.raises(media.MediaRefused) as e:
        media.local_path(ns_cfg, image("/a.png"))
    assert str(e.value) == f"'/a.png' is not a path relative to the media folder {root}"
    with pytest.raises(media.MediaRefused) as e:
        media.local_path(ns_cfg, image("a\x00.png"))
    assert "not a path relative" in str(e.value)
    with pytest.raises(media.MediaRefused) as e:
        media.local_path(ns_cfg, image("x/../a.png"))
    assert str(e.value) == f"'x/../a.png' leaves the media folder {root}"
    with pytest.raises(media.MediaRefused, match="leaves the media folder"):
        media.local_path(ns_cfg, image("./"))
    (tmp_path / "media" / "up").symlink_to(tmp_path)
    (tmp_path / "s.png").write_bytes(PNG)
    with pytest.raises(media.MediaRefused) as e:
        media.local_path(ns_cfg, image("up/s.png"))
    assert str(e.value) == f"'up/s.png' leads outside the media folder {root} (a symlink)"
    assert media.local_path(ns_cfg, image("up/media/a.png")) == os.path.join(root, "a.png")
    with pytest.raises(media.MediaMissing) as e:
        media.local_path(ns_cfg, image("b.png"))
    assert type(e.value) is media.MediaMissing
    assert str(e.value) == f"'b.png': no such file in the media folder {root}"
    assert media.local_path(ns_cfg, image("a.png")) == os.path.join(root, "a.png")
    assert media.local_path(ns_cfg, image("./a.png")) == os.path.join(root, "a.png")
    (tmp_path / "media" / "XX").mkdir()  # no name is refused for how it begins
    (tmp_path / "media" / "XX" / "XX.png").write_bytes(PNG)
    assert media.local_path(ns_cfg, image("XX/XX.png")) == os.path.join(root, "XX", "XX.png")


def test_a_sibling_folder_with_the_same_prefix_is_outside(tmp_path):
    ns_cfg = make_cfg(tmp_path)
    (tmp_path / "media2").mkdir()
    (tmp_path / "media2" / "a.png").write_bytes(PNG)
    (tmp_path / "media" / "s").symlink_to(tmp_path / "media2")
    with pytest.raises(media.MediaRefused):
        media.local_path(ns_cfg, image("s/a.png"))


def test_the_media_folder_itself_is_inside_it_but_not_a_file(ns_cfg, tmp_path):
    (tmp_path / "media" / "self").symlink_to(tmp_path / "media")
    root = os.path.realpath(tmp_path / "media")
    with pytest.raises(media.MediaNotAFile) as e:  # not MediaRefused: the folder is inside
        media.local_path(ns_cfg, image("self"))
    assert e.value.what == "a folder" and str(e.value) == (
        f"'self' is a folder, not a file, in the media folder {root}")
    assert media.local_path(ns_cfg, image("self/a.png")) == os.path.join(root, "a.png")


@pytest.mark.parametrize("err, said", [(OSError(errno.EINVAL, "Invalid argument"),
                                         "Invalid argument"),
                                        (ValueError("embedded null"), "embedded null"),
                                        (OSError(), "")])
def test_a_link_swapped_while_the_path_is_resolved_is_changed(ns_cfg, tmp_path, monkeypatch,
                                                              err, said):
    """realpath reads each link it meets: one swapped meanwhile fails it (EINVAL)."""
    root = os.path.realpath(tmp_path / "media")
    real = os.path.realpath

    def racing(path, *a, **kw):
        if str(path).endswith("a.png"):
            raise err
        return real(path, *a, **kw)
    monkeypatch.setattr(media.os.path, "realpath", racing)
    with pytest.raises(media.MediaChanged) as e:
        media.local_path(ns_cfg, image("a.png"))
    assert isinstance(e.value, media.MediaMissing)
    assert str(e.value) == (f"'a.png' changed while it was looked up in the media folder {root} "
                            f"({said or err})")


def test_what_is_not_a_file(ns_cfg, tmp_path):
    folder = tmp_path / "media"
    (folder / "dir").mkdir()
    os.mkfifo(folder / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(folder / "sock"))
        for name, what in (("dir", "a folder"), ("fifo", "a FIFO (named pipe)"),
                           ("sock", "a socket")):
            with pytest.raises(media.MediaNotAFile) as e:
                media.local_path(ns_cfg, image(name))
            assert e.value.what == what
            assert str(e.value) == (f"'{name}' is {what}, not a file, in the media folder "
                                    f"{os.path.realpath(folder)}")
    finally:
        sock.close()
    assert media.local_path(ns_cfg, image("a.png")) == os.path.realpath(folder / "a.png")


def test_a_device_is_not_a_file(tmp_path, monkeypatch):
    dev = make_cfg(tmp_path, media_directory=None)
    dev.media_directory = "/dev"  # a character device every POSIX system has
    for reader in (media.local_path, media.open_media):
        with pytest.raises(media.MediaNotAFile) as e:
            reader(dev, image("null"))
        assert e.value.what == "a device" and str(e.value) == (
            f"'null' is a device, not a file, in the media folder {os.path.realpath('/dev')}")
    real_fstat = os.fstat  # a block device: only root can make one, so the file says it is one

    def block(fd):
        st = real_fstat(fd)
        return os.stat_result((stat.S_IFBLK | 0o600,) + tuple(st)[1:])
    monkeypatch.setattr(media.os, "fstat", block)
    with pytest.raises(media.MediaNotAFile, match="^'a.png' is a device, not a file"):
        media.open_media(make_cfg(tmp_path), image("a.png"))


def test_open_media_gives_the_descriptor_path_and_type(ns_cfg, tmp_path):
    opened = media.open_media(ns_cfg, image("a.png"))
    try:
        assert opened.path == os.path.realpath(tmp_path / "media" / "a.png")
        assert opened.ctype == "image/png"
        assert os.pread(opened.fd, 8, 0) == PNG[:8]
        assert os.get_inheritable(opened.fd) is False
    finally:
        os.close(opened.fd)
    assert media.probe(ns_cfg, media.MediaRef("audio", "t.wav")) == (
        os.path.realpath(tmp_path / "media" / "t.wav"), "audio/wav")


def fail_open(monkeypatch, err, strerror=None):
    """The open of a media file (and only that) fails with ``err``."""
    real_open = os.open

    def refuse(path, flags, *args, **kwargs):
        if str(path).endswith(".png"):
            raise OSError(err, os.strerror(err) if strerror is None else strerror)
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(media.os, "open", refuse)


@pytest.mark.parametrize("err", [errno.ELOOP, errno.ENOTDIR, errno.EXDEV])
def test_open_media_says_a_symlink_appeared(ns_cfg, tmp_path, monkeypatch, err):
    fail_open(monkeypatch, err)
    with pytest.raises(media.MediaRefused) as e:
        media.open_media(ns_cfg, image("a.png"))
    assert str(e.value) == (f"'a.png' leads outside the media folder "
                            f"{os.path.realpath(tmp_path / 'media')} (it changed into a symlink)")


def test_open_media_says_a_file_vanished_or_cannot_be_read(ns_cfg, tmp_path, monkeypatch):
    root = os.path.realpath(tmp_path / "media")
    fail_open(monkeypatch, errno.ENOENT)
    with pytest.raises(media.MediaMissing) as e:
        media.open_media(ns_cfg, image("a.png"))
    assert type(e.value) is media.MediaMissing
    assert str(e.value) == f"'a.png': no such file in the media folder {root}"
    fail_open(monkeypatch, errno.EACCES)
    with pytest.raises(media.MediaMissing) as e:
        media.open_media(ns_cfg, image("a.png"))
    assert str(e.value) == "'a.png' cannot be read (Permission denied)"
    fail_open(monkeypatch, errno.EIO, "")
    with pytest.raises(media.MediaMissing, match=r"cannot be read \(\[Errno 5\] \)"):
        media.open_media(ns_cfg, image("a.png"))


def test_open_media_closes_what_it_opened_on_every_failure(ns_cfg, tmp_path, monkeypatch):
    (tmp_path / "media" / "t.png").write_bytes(b"text")
    closed = []
    real_close = os.close
    monkeypatch.setattr(media.os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    with pytest.raises(media.MediaUnsupported):
        media.open_media(ns_cfg, image("t.png"))
    assert len(closed) == 1

    def bad_pread(fd, n, at):
        raise OSError(errno.EIO, "I/O error")
    monkeypatch.setattr(media.os, "pread", bad_pread)
    with pytest.raises(media.MediaMissing) as e:
        media.open_media(ns_cfg, image("a.png"))
    assert str(e.value) == "'a.png' cannot be read (I/O error)" and len(closed) == 2

    def bad_pread_bare(fd, n, at):
        raise OSError()
    monkeypatch.setattr(media.os, "pread", bad_pread_bare)
    with pytest.raises(media.MediaMissing, match=r"^'a.png' cannot be read \(\)$"):
        media.open_media(ns_cfg, image("a.png"))
    assert len(closed) == 3


def test_pread_reads_the_first_sniff_bytes(ns_cfg, tmp_path, monkeypatch):
    asked = []
    real = os.pread
    monkeypatch.setattr(media.os, "pread", lambda fd, n, at: (asked.append((n, at)),
                                                             real(fd, n, at))[1])
    os.close(media.open_media(ns_cfg, image("a.png")).fd)
    assert asked == [(media.SNIFF_BYTES, 0)] and media.SNIFF_BYTES == 32


def swap_after_lookup(monkeypatch, target, swap):
    """``swap()`` runs once ``local_path`` has checked ``target`` (its last look, a stat),
    before ``open_media`` opens it: a rename racing the server."""
    real_stat = os.stat

    def racing(path, *args, **kwargs):
        st = real_stat(path, *args, **kwargs)
        if path == target:
            swap()
        return st
    monkeypatch.setattr(media.os, "stat", racing)


def folder_to_symlink(media_dir, name):
    """``name`` moved aside and put back as a symlink to where it went (still inside)."""
    os.rename(media_dir / name, media_dir / (name + "-moved"))
    (media_dir / name).symlink_to(media_dir / (name + "-moved"))


def opens(monkeypatch):
    """Each ``os.open`` of ``media`` as (path, flags, dir_fd given)."""
    seen, real_open = [], os.open

    def recording(path, flags, *args, **kwargs):
        seen.append((path, flags, kwargs.get("dir_fd") is not None))
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(media.os, "open", recording)
    return seen


@pytest.mark.parametrize("proc", [True, False])
def test_open_media_reads_a_nested_file_with_or_without_proc(ns_cfg, tmp_path, monkeypatch, proc):
    (tmp_path / "media" / "x" / "y").mkdir(parents=True)
    (tmp_path / "media" / "x" / "y" / "b.png").write_bytes(PNG)
    if not proc:
        monkeypatch.setattr(media, "PROC_FD", str(tmp_path / "no-proc"))
    for name in ("x/y/b.png", "a.png"):
        opened = media.open_media(ns_cfg, image(name))
        try:
            assert os.pread(opened.fd, 8, 0) == PNG[:8] and opened.ctype == "image/png"
            assert os.get_inheritable(opened.fd) is False
        finally:
            os.close(opened.fd)


def test_without_proc_the_walk_opens_each_folder_without_following_or_leaking(
        ns_cfg, tmp_path, monkeypatch):
    root = os.path.realpath(tmp_path / "media")
    (tmp_path / "media" / "x" / "y").mkdir(parents=True)
    (tmp_path / "media" / "x" / "y" / "b.png").write_bytes(PNG)
    monkeypatch.setattr(media, "PROC_FD", str(tmp_path / "no-proc"))
    seen = opens(monkeypatch)
    os.close(media.open_media(ns_cfg, image("x/y/b.png")).fd)
    assert [(p, d) for p, _, d in seen] == [(root, False), ("x", True), ("y", True),
                                            ("b.png", True)]
    for path, flags, _ in seen[:-1]:  # the folders: never a symlink, never left to a child
        assert flags & os.O_DIRECTORY and flags & os.O_CLOEXEC and not flags & os.O_WRONLY
        assert (flags & os.O_NOFOLLOW) == (0 if path == root else os.O_NOFOLLOW)
    assert seen[-1][1] == media.OPEN_FLAGS


@pytest.mark.parametrize("proc", [True, False])
def test_a_folder_swapped_for_a_symlink_before_the_open_is_refused(ns_cfg, tmp_path,
                                                                   monkeypatch, proc):
    folder = tmp_path / "media"
    root = os.path.realpath(folder)
    (folder / "x" / "y").mkdir(parents=True)
    (folder / "x" / "y" / "b.png").write_bytes(PNG)
    (tmp_path / "elsewhere" / "y").mkdir(parents=True)
    (tmp_path / "elsewhere" / "y" / "b.png").write_bytes(PNG)
    if not proc:
        monkeypatch.setattr(media, "PROC_FD", str(tmp_path / "no-proc"))

    def out():  # x now leads outside the folder
        os.rename(folder / "x", folder / "x-moved")
        (folder / "x").symlink_to(tmp_path / "elsewhere")
    swap_after_lookup(monkeypatch, os.path.join(root, "x", "y", "b.png"), out)
    with pytest.raises(media.MediaRefused) as e:
        media.open_media(ns_cfg, image("x/y/b.png"))
    assert str(e.value) == f"'x/y/b.png' leads outside the media folder {root} " \
                           f"(it changed into a symlink)"


def test_without_proc_a_symlink_anywhere_on_the_way_is_refused(ns_cfg, tmp_path, monkeypatch):
    """The walk cannot tell where a symlink leads, so it refuses any, even one inside."""
    folder = tmp_path / "media"
    root = os.path.realpath(folder)
    (folder / "x" / "y").mkdir(parents=True)
    (folder / "x" / "y" / "b.png").write_bytes(PNG)
    monkeypatch.setattr(media, "PROC_FD", str(tmp_path / "no-proc"))
    target = os.path.join(root, "x", "y", "b.png")
    swap_after_lookup(monkeypatch, target, lambda: folder_to_symlink(folder, "x"))
    with pytest.raises(media.MediaRefused, match="it changed into a symlink"):
        media.open_media(ns_cfg, image("x/y/b.png"))
    os.unlink(folder / "x")
    os.rename(folder / "x-moved", folder / "x")

    def last_part():  # the file itself becomes a symlink to another file inside
        os.unlink(target)
        os.symlink(os.path.join(root, "a.png"), target)
    swap_after_lookup(monkeypatch, target, last_part)
    with pytest.raises(media.MediaRefused, match="it changed into a symlink"):
        media.open_media(ns_cfg, image("x/y/b.png"))


def test_when_proc_cannot_say_the_walk_still_refuses_a_swapped_folder(ns_cfg, tmp_path,
                                                                      monkeypatch):
    folder = tmp_path / "media"
    root = os.path.realpath(folder)
    (folder / "x").mkdir()
    (folder / "x" / "b.png").write_bytes(PNG)
    real_readlink = os.readlink

    def no_readlink(path):
        raise OSError(errno.EACCES, "no")
    monkeypatch.setattr(media.os, "readlink", no_readlink)
    seen = opens(monkeypatch)
    os.close(media.open_media(ns_cfg, image("a.png")).fd)  # opened, then again by the walk
    assert [(p, d) for p, _, d in seen] == [(os.path.join(root, "a.png"), False),
                                            (root, False), ("a.png", True)]
    swap_after_lookup(monkeypatch, os.path.join(root, "x", "b.png"),
                      lambda: folder_to_symlink(folder, "x"))
    with pytest.raises(media.MediaRefused, match="it changed into a symlink"):
        media.open_media(ns_cfg, image("x/b.png"))
    monkeypatch.setattr(media.os, "readlink", real_readlink)
    del seen[:]
    os.close(media.open_media(ns_cfg, image("a.png")).fd)
    assert seen == [(os.path.join(root, "a.png"), media.OPEN_FLAGS, False)]  # no walk


@pytest.mark.parametrize("said", ["/elsewhere/a.png", "media/a.png", "pipe:[42]"])
def test_a_file_proc_places_outside_the_folder_is_refused(ns_cfg, tmp_path, monkeypatch, said):
    closed, real_close = [], os.close
    monkeypatch.setattr(media.os, "readlink", lambda p: said)
    monkeypatch.setattr(media.os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    with pytest.raises(media.MediaRefused) as e:
        media.open_media(ns_cfg, image("a.png"))
    assert str(e.value) == (f"'a.png' leads outside the media folder "
                            f"{os.path.realpath(tmp_path / 'media')} (it changed into a symlink)")
    assert len(closed) == 1  # the descriptor it opened


def test_open_flags_never_follow_block_or_leak():
    assert media.OPEN_FLAGS & os.O_NOFOLLOW and media.OPEN_FLAGS & os.O_NONBLOCK
    assert media.OPEN_FLAGS & os.O_CLOEXEC
    assert media.OPEN_FLAGS & (os.O_WRONLY | os.O_RDWR) == 0
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
    assert str(e.value) == "'a.txt' is not an image, audio or video format a browser shows"
    with pytest.raises(media.MediaUnsupported) as e:
        media.content_type(image("t.wav"), b"RIFF\0\0\0\0WAVE")
    assert str(e.value) == "'t.wav' is audio (audio/wav), and the item names it as its image"
    assert media.content_type(media.MediaRef("audio", "x"), b"OggS") == "audio/ogg"
    assert media.content_type(image("x"), PNG) == "image/png"


@pytest.mark.parametrize("head,ctype", [
    (MP4_AUDIO, "video/mp4"), (b"\0\0\0\x18ftypisom\0\0\x02\0", "video/mp4"),
    (b"\x1a\x45\xdf\xa3\x9f", "video/webm"), (b"OggS\0\x02", "video/ogg")])
def test_a_container_the_item_names_as_its_video_is_video(head, ctype):
    assert media.content_type(media.MediaRef("video", "clip"), head) == ctype
    assert media.content_type(media.MediaRef("audio", "clip"), head) == "audio/" + ctype[6:]


@pytest.mark.parametrize("head,says", [
    (PNG, "'clip' is image (image/png), and the item names it as its video"),
    (b"RIFF\0\0\0\0WAVE", "'clip' is audio (audio/wav), and the item names it as its video"),
    (b"ID3\x04\0", "'clip' is audio (audio/mpeg), and the item names it as its video"),
    (b"<svg>", "'clip' is an SVG (not served: it can carry scripts; convert it to PNG)"),
    (b"%PDF-1.7", "'clip' is not an image, audio or video format a browser shows")])
def test_what_is_no_video_says_what_it_is(head, says):
    with pytest.raises(media.MediaUnsupported) as e:
        media.content_type(media.MediaRef("video", "clip"), head)
    assert str(e.value) == says


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
    ("https://ex.org/X", "https://ex.org"),
    ("https://ex.org/a\x85", None), ("https://ex.org/a\u2028", None),  # C1 NEL, lines and
    ("https://ex.org/a\u2029", None), ("https://ex.org/a\u00a0", None),  # paragraphs, spaces
    ("https://ex.org/a\u3000", None), ("https://ex.org/\u00e9\u4e2d", "https://ex.org"),
    ("https://ex.org/" + "a" * 1985, "https://ex.org"),  # 2,000 characters: an address
    ("https://ex.org/" + "a" * 1986, None)])  # 2,001: none
def test_url_origin_edges(url, origin):
    assert media.url_origin(url) == origin


def test_a_file_swapped_for_a_fifo_after_the_check_is_no_file(ns_cfg, tmp_path, monkeypatch):
    check = media.local_path

    def then_swap(ns_cfg, ref):
        path = check(ns_cfg, ref)
        os.remove(path)
        os.mkfifo(path)
        return path

    monkeypatch.setattr(media, "local_path", then_swap)
    with pytest.raises(media.MediaNotAFile) as e:
        media.probe(ns_cfg, image("a.png"))
    assert str(e.value) == ("'a.png' is a FIFO (named pipe), not a file, in the media folder "
                            f"{os.path.realpath(tmp_path / 'media')}")


# -- image_size from hand-built headers: each format it reads, every segment a JPEG may put
# before its frame header, truncated and hostile headers (12-07: the mutation run's survivors) --

import threading  # noqa: E402


def sized(tmp_path, data: bytes, name="x.img"):
    """image_size of a file holding ``data``."""
    path = tmp_path / name
    path.write_bytes(data)
    return media.image_size(str(path))


def segment(marker: int, payload: bytes = b"") -> bytes:
    """A JPEG segment: FF, its marker, a length that counts itself and the payload."""
    return bytes([0xFF, marker]) + (len(payload) + 2).to_bytes(2, "big") + payload


def frame(width: int, height: int, marker: int = 0xC0) -> bytes:
    """A JPEG frame header (SOFn): precision, height, width, one component."""
    return segment(marker, b"\x08" + height.to_bytes(2, "big") + width.to_bytes(2, "big") +
                   b"\x01\x01\x11\x00")


SOI = b"\xff\xd8"
EVERYTHING_BEFORE_THE_FRAME = (
    segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00") +  # APP0
    segment(0xE1, b"Exif\x00\x00" + bytes(range(256)) * 2) +  # APP1 of 520 bytes (> 255)
    segment(0xFE) +  # an empty comment: length 2, nothing after it
    segment(0xDB, bytes(65)) +  # DQT
    segment(0xC4, b"\x00" + bytes(16)) +  # DHT, DAC and JPG sit among the SOF markers
    segment(0xCC, b"\x00\x10") + segment(0xC8, b"\x01\x02\x03") +
    b"\xff\x01" + b"\xff\xd0" + b"\xff\xd7" + b"\xff\xd8" +  # TEM, RST0, RST7, SOI: no length
    b"\xff\xff\xff")  # fill bytes before the next marker


@pytest.mark.parametrize("sof", [0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB,
                                 0xCD, 0xCE, 0xCF])
def test_a_jpeg_frame_header_of_each_kind_after_every_other_segment(tmp_path, sof):
    # baseline, progressive, lossless, arithmetic ... all say the size the same way
    data = SOI + EVERYTHING_BEFORE_THE_FRAME + frame(0x1234, 0x0567, sof) + segment(0xDA, b"x")
    assert sized(tmp_path, data) == (0x1234, 0x0567)


def test_a_jpeg_whose_frame_header_lies_past_the_first_bytes_read(tmp_path):
    # ICC profiles split over APP2 segments: 320 KB before the frame header, found by seeking
    assert media.SIZE_BYTES == 256 << 10
    icc = segment(0xE2, b"ICC_PROFILE\x00" + bytes(65_000)) * 5
    assert len(icc) > media.SIZE_BYTES
    assert sized(tmp_path, SOI + icc + frame(640, 480)) == (640, 480)


def test_a_jpeg_frame_header_is_looked_for_over_its_first_thousand_segments(tmp_path):
    # each fill byte is a step: the 1000th step's frame header is read, the 1001st's is not
    assert media.JPEG_SEGMENTS == 1000
    assert sized(tmp_path, SOI + b"\xff" * 999 + frame(7, 9)) == (7, 9)
    assert sized(tmp_path, SOI + b"\xff" * 1000 + frame(7, 9)) is None
    rst = b"\xff\xd0" * 999  # standalone markers count as steps too
    assert sized(tmp_path, SOI + rst + frame(7, 9)) == (7, 9)
    assert sized(tmp_path, SOI + rst + b"\xff\xd0" + frame(7, 9)) is None


@pytest.mark.parametrize("data", [
    SOI, SOI + b"\xff", SOI + b"\xff\xe0\x00",  # cut before a marker's length
    SOI + b"\xff\xe0\xff\xff" + bytes(10) + frame(7, 9),  # a length running past the end
    SOI + b"\xff\xe0\x00\x00" + frame(7, 9),  # a length shorter than itself
    SOI + b"\xff\xe0\x00\x01" + frame(7, 9),
    SOI + frame(7, 9)[:8],  # a frame header cut short
    SOI + b"\x00\xc0\x00\x11\x08\x00\x09\x00\x07\x01",  # no FF where a marker should be
    SOI + b"\xff\xe0\x00\x04\x00\x00" + b"\x00" + frame(7, 9),  # a stray byte after a segment
])
def test_a_damaged_or_hostile_jpeg_header_has_no_size(tmp_path, data):
    assert sized(tmp_path, data) is None


def test_a_jpeg_says_the_size_its_frame_header_says(tmp_path):
    assert sized(tmp_path, SOI + frame(0xFFFF, 0)) == (0xFFFF, 0)  # 0: the DNL marker says
    assert sized(tmp_path, SOI + frame(0, 0)) == (0, 0)
    assert sized(tmp_path, SOI + frame(1, 0x0102)) == (1, 0x0102)


def png(width: int, height: int, chunk: bytes = b"IHDR") -> bytes:
    import zlib
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    return (b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + chunk + ihdr +
            zlib.crc32(chunk + ihdr).to_bytes(4, "big"))


def test_png_sizes_from_the_ihdr_chunk(tmp_path):
    assert sized(tmp_path, png(0x12345678, 0x0ABCDEF0)) == (0x12345678, 0x0ABCDEF0)
    assert sized(tmp_path, png(0, 0)) == (0, 0)
    assert sized(tmp_path, png(321, 47)[:24]) == (321, 47)  # the size is in the first 24 bytes
    assert sized(tmp_path, png(321, 47)[:23]) is None
    assert sized(tmp_path, png(321, 47, b"iCCP")) is None  # IHDR must come first
    assert sized(tmp_path, b"\x89PNG\r\n\x1a\x00" + png(321, 47)[8:]) is None  # a bad signature


def gif(version: bytes, width: int, height: int) -> bytes:
    return (b"GIF" + version + width.to_bytes(2, "little") + height.to_bytes(2, "little") +
            b"\xf7\x00\x00" + bytes(30))


def test_gif_sizes_of_both_versions(tmp_path):
    assert sized(tmp_path, gif(b"87a", 321, 47)) == (321, 47)
    assert sized(tmp_path, gif(b"89a", 0x1234, 0xFEDC)) == (0x1234, 0xFEDC)
    assert sized(tmp_path, gif(b"89a", 321, 47)[:10]) == (321, 47)
    assert sized(tmp_path, gif(b"89a", 321, 47)[:9]) is None
    assert sized(tmp_path, gif(b"88a", 321, 47)) is None


def bmp(width: int, height: int, header: int = 40) -> bytes:
    """A BMP's file header and the start of its info header (40 bytes: Windows, 32-bit signed
    sizes; 12: OS/2 1.x, 16-bit sizes)."""
    if header == 12:
        sizes = width.to_bytes(2, "little") + height.to_bytes(2, "little")
    else:
        sizes = width.to_bytes(4, "little", signed=True) + height.to_bytes(4, "little", signed=True)
    start = (14 + header).to_bytes(4, "little")
    return (b"BM" + start + bytes(4) + start + header.to_bytes(4, "little") + sizes +
            b"\x01\x00\x18\x00" + bytes(header - 8 - len(sizes)))


def test_bmp_sizes_bottom_up_top_down_and_os2(tmp_path):
    assert sized(tmp_path, bmp(321, 47)) == (321, 47)
    assert sized(tmp_path, bmp(321, -47)) == (321, 47)  # a top-down bitmap: negative height
    assert sized(tmp_path, bmp(-0x123456, 0x0ABCDE)) == (0x123456, 0x0ABCDE)
    assert sized(tmp_path, bmp(321, -47)[:26]) == (321, 47)
    assert sized(tmp_path, bmp(321, -47)[:25]) is None
    # an OS/2 1.x bitmap says its size in 16 bits each (it read as 47 * 65536 + 321 wide)
    assert sized(tmp_path, bmp(321, 47, header=12)) == (321, 47)
    assert sized(tmp_path, bmp(0xFEDC, 0x1234, header=12)) == (0xFEDC, 0x1234)


def test_an_os2_bitmap_is_not_read_as_a_huge_one(tmp_path):
    from PIL import Image
    path = tmp_path / "os2.bmp"
    path.write_bytes(bmp(321, 47, header=12) + bytes(3 * 324 * 47))  # rows padded to 4 bytes
    with Image.open(path) as im:
        assert im.size == (321, 47)
    assert media.image_size(str(path)) == (321, 47)


def riff(fourcc: bytes, chunk: bytes, payload: bytes) -> bytes:
    return b"RIFF" + (4 + 8 + len(payload)).to_bytes(4, "little") + fourcc + chunk + \
        len(payload).to_bytes(4, "little") + payload


def vp8x(width: int, height: int) -> bytes:  # the extended format: 24-bit sizes less one
    return riff(b"WEBP", b"VP8X", b"\x10" + bytes(3) + (width - 1).to_bytes(3, "little") +
                (height - 1).to_bytes(3, "little")) + b"ALPH" + (8).to_bytes(4, "little") + \
        b"\xa5" * 8


def vp8(width: int, height: int, scale: int = 0) -> bytes:  # lossy: 14 bits and 2 of scale
    return riff(b"WEBP", b"VP8 ", b"\x30\x01\x00\x9d\x01\x2a" +
                (width | scale << 14).to_bytes(2, "little") +
                (height | scale << 14).to_bytes(2, "little") + b"\xa5" * 10)


def vp8l(width: int, height: int, alpha: int = 1) -> bytes:  # lossless: 14 bits each less one
    bits = (width - 1) | (height - 1) << 14 | alpha << 28
    return riff(b"WEBP", b"VP8L", b"\x2f" + bits.to_bytes(4, "little") + b"\xa5" * 10)


def test_webp_sizes_of_each_chunk_kind(tmp_path):
    assert sized(tmp_path, vp8x(0x123457, 0x0ABCDF)) == (0x123457, 0x0ABCDF)
    assert sized(tmp_path, vp8x(1, 1)) == (1, 1)
    assert sized(tmp_path, vp8x(0x123457, 0x0ABCDF)[:30]) == (0x123457, 0x0ABCDF)
    assert sized(tmp_path, vp8x(0x123457, 0x0ABCDF)[:29]) is None
    assert sized(tmp_path, vp8(0x1234, 0x2345)) == (0x1234, 0x2345)
    assert sized(tmp_path, vp8(0x3FFF, 0x0123, scale=3)) == (0x3FFF, 0x0123)  # scale bits off
    assert sized(tmp_path, vp8l(0x1234, 0x2345)) == (0x1234, 0x2345)
    assert sized(tmp_path, vp8l(0x2345, 0x1235, alpha=0)) == (0x2345, 0x1235)
    assert sized(tmp_path, vp8l(0x4000, 0x4000)) == (0x4000, 0x4000)


def test_what_is_no_webp_has_no_size(tmp_path):
    good = vp8x(640, 480)
    assert sized(tmp_path, b"RIFX" + good[4:]) is None  # a big-endian RIFF is no WebP
    assert sized(tmp_path, good[:8] + b"WAVE" + good[12:]) is None  # a RIFF that is no WebP
    assert sized(tmp_path, good[:12] + b"ALPH" + good[16:]) is None  # no image chunk first
    assert sized(tmp_path, good[:12] + b"vp8x" + good[16:]) is None


def test_image_size_of_what_is_no_image_file(tmp_path):
    assert media.image_size(str(tmp_path / "none.png")) is None
    assert media.image_size(str(tmp_path)) is None  # a folder
    assert sized(tmp_path, b"") is None
    assert sized(tmp_path, b"not an image at all, just some words in a file") is None


def test_image_size_reads_no_more_than_its_first_256_kb(tmp_path):
    # a stream that goes on (a FIFO whose writer waits) is answered from its first 256 KB
    assert media.SIZE_BYTES == 256 << 10
    fifo = tmp_path / "stream.png"
    os.mkfifo(fifo)
    done = threading.Event()

    def feed():
        with open(fifo, "wb") as w:
            w.write(png(321, 47).ljust(256 << 10, b"\0"))
            w.flush()
            done.wait(10)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    got = []
    reader = threading.Thread(target=lambda: got.append(media.image_size(str(fifo))), daemon=True)
    reader.start()
    reader.join(5)
    answered = list(got)  # before the writer closes
    done.set()  # the writer closes: a reader that waited for more gets the end now
    reader.join(5)
    writer.join(5)
    assert answered == [(321, 47)]
