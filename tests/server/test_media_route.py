"""The media route without a server (potato/server/media_route.py): ranges, ETags, the page's
media policy, and the route through a stand-in handler. Also the tests tools/mutation.py runs
against the module (docs/testing.md)."""

import io
import json
import os
from types import SimpleNamespace

import pytest

from potato.server import media_route as mr
from potato.server.errors import HTTPError
from potato.config.settings import ItemProperties
from tests.helpers import DIGITS, wav_bytes

PNG = open(os.path.join(DIGITS, "media", "images", "digit-0000.png"), "rb").read()


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
    # a video plays from its origin as audio does; an origin both use is named once
    csp = mr.page_headers(cfg, {"video": "https://v.org/c.mp4", "audio": "https://v.org/x",
                                "image": "https://v.org/a"})["Content-Security-Policy"]
    assert csp.endswith("frame-ancestors 'none'; media-src 'self' https://v.org")
    assert "img-src 'self' data: https://v.org;" in csp
    assert mr.page_headers(cfg, {"video": "data:video/mp4;base64,AAAA"}) == {}


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
    assert re.fullmatch(pattern, "/media/video/i1").group("kind") == "video"
    assert re.fullmatch(pattern, "/media/pdf/i1") is None
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


WEBM = b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01" + bytes(300)


def test_a_video_is_sent_as_video_and_seeks(app, tmp_path):
    (tmp_path / "media" / "c.webm").write_bytes(WEBM)
    app.store.items["v"] = item({"video": "c.webm", "audio": "c.webm", "image": "c.webm"})
    h = get(app, "v", "video", admin=True)
    assert h.started[:3] == (200, "video/webm", len(WEBM)) and h.wfile.getvalue() == WEBM
    assert get(app, "v", "audio", admin=True).started[1] == "audio/webm"  # the same container
    h = get(app, "v", "video", admin=True, headers={"Range": "bytes=100-"})
    assert h.started[0] == 206 and h.wfile.getvalue() == WEBM[100:]
    assert refused(app, "v", "image", admin=True) == (
        415, "Item 'v''s image cannot be shown: 'c.webm' is audio (audio/webm), and the item "
             "names it as its image. Convert it to a format browsers show (PNG, JPEG, WebP; "
             "WAV, MP3, OGG; MP4, WebM).")
    assert refused(app, "i1", "video", admin=True) == (404, "Item 'i1' has no video.")


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


def opened_file(monkeypatch, then=None):
    """The reads of the file the route opens (from the descriptor open_media gave);
    ``then(f)`` runs on the file as the route gets it, ``first_read()`` at its first read."""
    reads, real_fdopen = [], os.fdopen

    def fdopen(fd, mode="r", *a, **kw):
        f = real_fdopen(fd, mode, *a, **kw)
        read = f.read
        f.read = lambda n=-1: (reads.append(n), then and not reads[1:] and then(), read(n))[2]
        return f
    monkeypatch.setattr(mr.os, "fdopen", fdopen)
    return reads


def test_a_file_is_sent_in_chunks(app, tmp_path, monkeypatch):
    data = (tmp_path / "media" / "big.png").read_bytes()
    assert 2 * mr.CHUNK < len(data) < 3 * mr.CHUNK
    reads = opened_file(monkeypatch)
    h = get(app, "big", admin=True)
    assert reads == [mr.CHUNK, mr.CHUNK, len(data) - 2 * mr.CHUNK] and not h.close_connection
    assert h.wfile.getvalue() == data
    assert mr.CHUNK == 65536


def test_a_file_that_shrank_while_it_was_sent_ends_the_connection(app, tmp_path, monkeypatch):
    """The length was promised in the headers: a shorter body cannot be followed by another
    response on the same connection."""
    path = tmp_path / "media" / "big.png"
    data = path.read_bytes()
    reads = opened_file(monkeypatch, lambda: os.truncate(path, mr.CHUNK + 3))
    h = get(app, "big", admin=True)
    assert h.started[:3] == (200, "image/png", len(data))
    assert reads == [mr.CHUNK, mr.CHUNK, mr.CHUNK]
    assert h.wfile.getvalue() == data[:mr.CHUNK + 3] and h.close_connection is True


def test_a_file_emptied_after_it_was_checked_is_sent_as_nothing(app, tmp_path, monkeypatch):
    real_fdopen = os.fdopen

    def emptied(fd, *a, **kw):  # between open_media's look at its bytes and the send
        os.truncate(tmp_path / "media" / "t.wav", 0)
        return real_fdopen(fd, *a, **kw)
    monkeypatch.setattr(mr.os, "fdopen", emptied)
    h = get(app, "i1", "audio")
    assert h.started[:3] == (200, "audio/wav", 0) and h.wfile.getvalue() == b""
    assert not h.close_connection


def test_the_body_is_read_from_the_start_of_the_range(app, tmp_path, monkeypatch):
    """Wherever the file's position was, each response reads from its range's first byte."""
    data = (tmp_path / "media" / "big.png").read_bytes()
    real_fdopen = os.fdopen

    def moved(fd, *a, **kw):
        f = real_fdopen(fd, *a, **kw)
        f.read(50)
        return f
    monkeypatch.setattr(mr.os, "fdopen", moved)
    h = get(app, "big", admin=True, headers={"Range": "bytes=-3"})
    assert h.wfile.getvalue() == data[-3:] and not h.close_connection
    assert get(app, "big", admin=True).wfile.getvalue() == data


def test_the_media_policy_runs_nothing():
    assert mr.MEDIA_CSP.startswith("default-src 'none';") and "sandbox" in mr.MEDIA_CSP
    assert mr.CACHE_CONTROL == "private, no-cache"
